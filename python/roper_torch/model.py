"""roper's transformer in PyTorch: RotaryAttention and RoperTransformer, whose state_dict keys are
roper's parameter names (core/model/model.h, the table in docs/interop.md), so that a safetensors
file written by roper's m:save_safetensors loads with load_state_dict(strict=True) and gives
roper's logits, and a module trained here goes back to roper with save_roper.

The config is rp.model's (config.py: the keys of roper's schema, their defaults in DEFAULTS, checked
as rp.model checks them); what each positional mode does is its row in MODES (core/nn/pe.c's mode
table):

  embedding (+ the sinusoidal or learned table of the absolute modes)
  -> layers x [pre-norm:  x += attn(LN1(x)); x += ff(LN2(x))
               post-norm: x = LN1(x + attn(x)); x = LN2(x + ff(x))]   (dropout on both branches)
  -> LN_f (pre-norm only) -> head (Linear to vocab; with tie_embeddings its weight is
     embed.weight, and the module holds only head.bias).

  attn (softmax): one Linear(C, 3C) with rows [q; k; v], head h on features h*D .. h*D+D-1;
      rotary modes rotate the placements of `rotate` (the mode's own when unset: rope "qk", roper
      and roper_legacy "qkvo"), each on its first d_rot = floor(fraction * D) features:
          q_n' = R(+n theta) q_n,  k_i' = R(+i theta) k_i,  v_i' = R(+c i theta) v_i
          (c = 2 for roper_legacy, else 1),  o_n' = R(-n theta) sum_i a_ni v_i'
      (with xPos the query side q, o and the key side k, v take their magnitudes), scores
      <q_n', k_i'> / sqrt(D) (times YaRN's temperature), causal softmax, Linear(C, C);
      the relative modes add their terms (shaw, xl, t5, deberta, alibi: core/nn/attention.h).
      The modes without such a term call torch's fused scaled_dot_product_attention where
      torch has it (`sdpa` below); the others, and every mode on torch 1.13, write it out.
  positions: token t of every sequence at row t of the caller's positions (scalar, or vector
      positions of 1 to 3 axes mapped to the pairs by axes "axial", "sections" or "mixed":
      rotary.py), every rotated placement by its row, o turned back by the query's own row.
  learn_freq: the rotary frequencies theta_i are the parameter rope.freq (row 0; with axes
      "mixed" rows 0 .. A-1 are the matrix W), shared by every layer and trained with the rest
      (core/model/model_freq.c).
  attn (linear): Katharopoulos et al.'s causal linear attention, phi = elu + 1, with RoPE after
      phi (numerator only, RoFormer eq. 19) or before it (core/nn/linear_attention.h).
"""

import math
import struct

import torch
import torch.nn.functional as F
from torch import nn

from . import core, rotary
from .config import (DEFAULTS, KEY, MODES, PE, SCHEMA, Config,  # noqa: F401
                     _unused, config, freq_of, widths)
from .safetensors import DTYPES, NAMES, _quoted, read_safetensors, write_safetensors
from .stored import from_json, to_json

LN_EPS = 1e-5
LINATTN_EPS = 1e-6  # RP_LINATTN_EPS


_MAX_SAMPLES = 1 << 24  # the most calls of a function of angles (rp.model's reader's bound)


def _number(what, v):
    """v as a float when it is a finite number (not a bool), else ValueError naming `what`."""
    try:  # Python's and NumPy's numbers, 0-d tensors: what float() takes, but not text
        x = float(v) if hasattr(v, "__float__") and not isinstance(v, bool) else None
    except (OverflowError, TypeError, ValueError):
        x = None
    if x is None or not math.isfinite(x):
        raise ValueError("%s must be a finite number, got %s" % (what, rotary._describe(v)))
    return x


def _table(key, v, dims):
    """The option `key` (a tensor, or a list of numbers; of lists of one length when dims is 2)
    as floats: a list, or a list of rows. A type, a ragged or empty table is refused here;
    its values and sizes are core's to check (core.check_tables). A tensor's values are taken as
    they are."""
    if hasattr(v, "tolist") and not isinstance(v, torch.Tensor):  # a NumPy array: its lists
        v = v.tolist()
    if isinstance(v, torch.Tensor):
        if v.dim() != dims or v.numel() == 0:
            raise ValueError("option '%s' must be a non-empty %d-D tensor, got %s"
                             % (key, dims, _shape_str(v)))
        return v.detach().double().tolist()
    if not isinstance(v, (list, tuple)) or not v:
        raise ValueError("option '%s' must be a non-empty list%s or a tensor, got %s"
                         % (key, " of lists" if dims == 2 else "", rotary._describe(v)))
    if dims == 1:
        return [_number("option '%s'[%d]" % (key, i), x) for i, x in enumerate(v, 1)]
    out = []
    for a, row in enumerate(v, 1):
        if not isinstance(row, (list, tuple)) or not row or (out and len(row) != len(out[0])):
            raise ValueError("option '%s'[%d] must be a non-empty list of numbers as long as "
                             "option '%s'[1], got %s" % (key, a, key, rotary._describe(row)))
        out.append([_number("option '%s'[%d][%d]" % (key, a, i), x) for i, x in enumerate(row, 1)])
    return out


def _own_tables(cfg, freq, angles):
    """(theta, angles): the model's own frequencies or angles as lists of floats (None when not
    given), their types read. angles may be a function(p, i), sampled at p = 0 .. seq_len-1 and
    i = 0 .. d_rot/2 - 1 of the widest rotated placement."""
    if freq is not None and angles is not None:
        raise ValueError("give option 'freq' or 'angles', not both")
    half = max(widths(cfg).values(), default=0) // 2
    if freq is not None:
        freq = _table("freq", freq, 1)
    elif callable(angles):
        rows = cfg["seq_len"]
        if half < 1:
            raise ValueError("option 'angles': nothing is rotated here (a rotary pe is needed)")
        if rows < 1 or rows > _MAX_SAMPLES // half:
            raise ValueError("option 'angles': a function is sampled for %d positions x %d "
                             "pairs, more than 2^24 calls" % (rows, half))
        fn = angles
        angles = [[_number("option 'angles': the function's value at p = %d, i = %d" % (p, i),
                           fn(p, i)) for i in range(half)] for p in range(rows)]
    elif angles is not None:
        angles = _table("angles", angles, 2)
    return freq, angles


def positions_of(cfg, positions, axes=None, sections=None, mix=None, theta=None, angles=None):
    """The model's positions and scheme: (rows, A, freq), rows the positions as tuples
    (token t at row t), A their axes (0: scalar positions), freq the model's rotary.Freq (freq_of)
    with the map of the axes. positions: None (token t at t), a list of ints or of lists of A = 1 to
    3 ints (or a tensor [n] or [n x A]), rows for t = 0 .. seq_len-1 at least; axes "axial" (the
    default), "sections" with sections (pairs per axis, adding up to d_rot/2 of every rotated
    placement) or "mixed" with mix (W [A x d_rot/2], d_rot of the widest placement). theta /
    angles: the own frequencies or angles (_own_tables). Python reads the types; with roper's
    library core checks the rest as rp.model does (core.check_tables: its messages), without it
    the values are trusted."""
    theta, angles = _own_tables(cfg, theta, angles)
    try:
        return _positions_of(cfg, positions, axes, sections, mix, theta, angles)
    except ValueError:
        if core.LIB and (theta is not None or angles is not None):
            # rp.model's order: the scheme with its own tables before the positions' types
            t, _keep = core.tables(theta, angles)
            t.scheme_only = 1
            core.check_tables(to_json(cfg), core.STORED, t)
        raise


def _positions_of(cfg, positions, axes, sections, mix, theta, angles):
    """positions_of once the own tables are read."""
    if axes is not None and (not isinstance(axes, str) or axes not in rotary.AXES):
        raise ValueError("option 'axes' must be one of %s, got %s"
                         % (", ".join('"%s"' % a for a in rotary.AXES), rotary._describe(axes)))
    if sections is not None:
        if not isinstance(sections, (list, tuple)) or not 1 <= len(sections) <= rotary.MAX_AXES:
            raise ValueError("option 'sections' must be a list of 1 to %d pair counts, got %s"
                             % (rotary.MAX_AXES, rotary._describe(sections)))
        for a, n in enumerate(sections, 1):
            if rotary._integer(n) is None or n < 0:
                raise ValueError("option 'sections'[%d] must be an integer >= 0, got %s"
                                 % (a, rotary._describe(n)))
        sections = [int(n) for n in sections]
    rows, A = (None, 0) if positions is None else \
        rotary.read_positions(positions, "option 'positions'")
    half = max(widths(cfg).values(), default=0) // 2
    map_ = -1 if axes is None else rotary.AXES.index(axes)
    if mix is not None:
        try:
            mix = _table("mix", mix, 2)
        except ValueError:
            if core.LIB:  # rp.model's order: the rules of the positions and their map first
                t, _keep = core.tables(theta, angles, rows, A, map_, sections)
                t.mix_rows = -1  # given, not read
                core.check_tables(to_json(cfg), core.STORED, t)
            raise
    if core.LIB:
        t, _keep = core.tables(theta, angles, rows, A, map_, sections, mix)
        shape = core.check_tables(to_json(cfg), core.STORED, t)
    else:
        shape = mix is not None and (len(mix) != A or len(mix[0]) != half) and "shape"
    if shape:
        raise ValueError("option 'mix' is [%d x %d]; [%d x %d] expected (the positions' axes x "
                         "d_rot/2)" % (len(mix), len(mix[0]), A, half))
    f = freq_of(cfg, theta, angles, axes or "axial", sections, mix)
    return rows, A, f


# ---- the relative kinds (core/nn/attention.h "relative-position terms"; query n, key i) ----------

def t5_bucket(rel, num_buckets, max_distance):
    """T5's causal bucket of rel = i - n (HF's _relative_position_bucket, bidirectional=False; the
    log in float32 as torch computes it, truncated)."""
    n = (-rel).clamp(min=0)
    max_exact = num_buckets // 2
    large = max_exact + (torch.log(n.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = large.clamp(max=num_buckets - 1)
    return torch.where(n < max_exact, n, large)


def alibi_slopes(H):
    """Press et al.'s slopes m_h (their get_slopes, for any head count)."""
    p = 1
    while p * 2 <= H:
        p *= 2
    return [2.0 ** (-8.0 * (h + 1) / p) if h < p else 2.0 ** (-4.0 * (2 * (h - p) + 1) / p)
            for h in range(H)]


def xl_sinusoid(T, C, dtype=torch.float32):
    """(numerics) Transformer-XL's R [T, C]: row d = [sin(d f_j) | cos(d f_j)], f_j = 10000^(-2j/C),
    in float64 rounded to dtype (core/model/model_rel.c)."""
    f = [math.pow(10000.0, -2.0 * j / C) for j in range(C // 2)]
    return rotary.sincos_table(T, f + f, "s" * (C // 2) + "c" * (C // 2), dtype)


# The relative kinds whose terms RotaryAttention._softmax adds ("": none). A kind of schema.json's
# modes without its terms here is refused when the module loads (a model of it would silently
# lack them).
_REL_TERMS = ("", "shaw", "xl", "t5", "deberta", "alibi")
for _m in MODES.values():
    if _m.rel not in _REL_TERMS:
        raise ImportError("roper_torch: the relative kind %r of schema.json has no terms here "
                          "(python/roper_torch/model.py)" % _m.rel)


def _fused():
    """torch.nn.functional.scaled_dot_product_attention when the installed torch has it with its
    `scale` argument (2.1 and later: tried once on a 1-token tensor, so that a build named
    2.1.0a0 counts too), else None."""
    f = getattr(F, "scaled_dot_product_attention", None)
    if f is None:
        return None
    try:
        x = torch.zeros(1, 1, 1, 2)
        f(x, x, x, attn_mask=None, dropout_p=0.0, is_causal=True, scale=1.0)
    except TypeError:  # 2.0: no scale
        return None
    return f


# The fused attention RotaryAttention calls for the modes whose scores have no additive term
# (the mode's rel is "": none, sinusoidal, learned, rope, roper, roper_legacy; softmax attention),
# as f(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=True, scale=1.0) on [B, H, T,
# D] tensors, the queries rotated and scaled first as roper scales them (so scale 1): torch's
# scaled_dot_product_attention where it has one (_fused), None elsewhere (torch 1.13, 2.0). Set
# roper_torch.model.sdpa = None for the explicit path (the scores, the causal mask and the
# softmax written out, which the relative modes and ALiBi always take), or to another function
# of that signature.
sdpa = _fused()


def _rounded(x, dtype):
    """The Python float x rounded to dtype (float32 by struct, as a C float cast rounds it, so
    that a compiled forward needs no tensor for it)."""
    if dtype == torch.float64:
        return x
    if dtype == torch.float32:
        return struct.unpack("f", struct.pack("f", x))[0]
    return float(torch.tensor(x, dtype=dtype))


class RotaryAttention(nn.Module):
    """One attention layer of roper (parameters `qkv`, `out` and the relative kind's tables, named
    as roper names them after "layers.<l>.attn."). cfg: rp.model's keys (config(); vocab may be
    left out: a layer has none, and its config holds None); freq: the
    rotary.Freq (default: the config's); positions: rows of the model's positions (tuples, as
    positions_of gives them; None: row t is position t), at least offset + T of them.
    forward(x [B, T, C], offset=0, shared=None, learned=None) -> [B, T, C], the rows offset ..
    offset + T - 1; shared: deberta's P (the model's rel.weight); learned: learn_freq's
    frequencies (the model's rope.freq row 0, or rows 0 .. A-1 with axes mixed), which replace
    the scheme's."""

    def __init__(self, cfg=None, freq=None, positions=None, **kw):
        super().__init__()
        given = cfg if isinstance(cfg, Config) and not kw else dict(cfg or {}, **kw)
        if not isinstance(given, Config) and given.get("vocab") is None:
            # a layer has no vocabulary: its config is checked with one (vocab bounds nothing
            # else) and keeps None
            given = config(dict(given, vocab=1))
            given["vocab"] = None
        self.cfg = cfg = config(given)
        C, H = cfg["d_model"], cfg["heads"]
        self.H, self.D = H, C // H
        self.mode = MODES[cfg["pe"]]
        self.w = widths(cfg)
        self.freq = freq if freq is not None else freq_of(cfg)
        self.positions = positions
        self.linear = cfg["attention"] == "linear"
        self.qkv = nn.Linear(C, 3 * C)
        self.out = nn.Linear(C, C)
        for q in self.mode.rel_params:  # the relative terms' parameters (schema.json)
            if q["use"] != "shared":  # the model's one
                _rel_param(self, q["name"][len("attn."):], q, cfg)
        self._tables = {}
        # the scale as roper's kernels apply it: float32(1 / sqrt(terms d_k) x temperature) on q,
        # by the dtype of q (a plain float, so that a compiled forward reads a constant)
        s = 1.0 / math.sqrt(self.mode.scale_terms * self.D) * rotary.score_scale(
            None if self.freq.is_plain() else self.freq)
        self._scale = {torch.float64: s, torch.float32: _rounded(s, torch.float32)}

    def tables(self, offset, T, dtype=torch.float32, learned=None, device=None):
        """The cos/sin tables of each rotated placement for the rows offset .. offset + T - 1,
        rounded to dtype (float32: roper's tables; float64: the exact ones), on device (default
        the CPU; learned's with learned), cached: {p: (cos, sin, sign)}; placements that turn
        alike (the same width and angle factor, and xPos's side when it has one) share theirs.
        Learned frequencies change with every step: their tables are kept for the tensor
        `learned` itself only (the one the model passes to all its layers in one forward pass,
        so they are computed once per pass and autograd sees one graph)."""
        dev = learned.device if learned is not None else torch.device(device or "cpu")
        key = (offset, T, dtype, dev)
        if self.positions is not None and not 0 <= offset <= len(self.positions) - T:
            raise ValueError("positions hold %d rows; rows %d..%d are asked"
                             % (len(self.positions), offset, offset + T - 1))
        last = self._tables.get("learned")
        if learned is not None and last is not None and last[0] is learned and last[1] == key:
            return last[2]
        if learned is not None or key not in self._tables:
            if self.positions is None:
                pos = range(offset, offset + T)
            else:  # the rows as a tensor [rows x A] (made once: positions_of checked them)
                if self._tables.get("rows") is None:
                    self._tables["rows"] = torch.tensor(self.positions, dtype=torch.int64)
                pos = self._tables["rows"][offset:offset + T]
            f = None if self.freq.is_plain() else self.freq
            base = float(self.cfg["base"])
            use = rotary.PLACEMENTS  # xPos side, sign; v turns by c = the mode's v_angle
            xpos = f is not None and f.xpos > 0.0
            made, tabs = {}, {}
            for p, d in self.w.items():
                c = self.mode.v_angle if p == "v" else 1.0
                alike = (d, c, use[p][0] if xpos else 0)
                if alike not in made:
                    made[alike] = rotary.tables(d, base, pos, f, c=c, side=use[p][0],
                                                dtype=dtype, learned=learned, device=dev)
                tabs[p] = made[alike] + (use[p][1],)
            if learned is not None:
                self._tables["learned"] = (learned, key, tabs)
                return tabs
            self._tables[key] = tabs
        return self._tables[key]

    def _rot(self, x, p, tabs):
        if p not in tabs:
            return x
        cos, sin, sign = tabs[p]
        return rotary.rotate(x, cos.to(x.device), sin.to(x.device), self.w[p],
                             self.cfg["pairing"], sign)

    def forward(self, x, offset=0, shared=None, learned=None):
        B, T, C = x.shape
        H, D = self.H, self.D
        q, k, v = self.qkv(x).reshape(B, T, 3, H, D).unbind(2)   # [B, T, H, D] each
        tabs = self.tables(offset, T, x.dtype, learned, x.device)
        if self.linear:
            o = self._linear(q, k, v, tabs)
        else:
            o = self._softmax(q, k, v, tabs, shared)
        return self.out(o.reshape(B, T, C))

    def _softmax(self, q, k, v, tabs, shared):
        T, H, D = q.shape[1], self.H, self.D
        rel = self.mode.rel
        s = self._scale.get(q.dtype)
        if s is None:
            s = _rounded(self._scale[torch.float64], q.dtype)
        q = self._rot(q, "q", tabs)
        k = self._rot(k, "k", tabs)
        fused = sdpa  # the module's setting at this call
        if rel == "" and fused is not None:  # no additive term: the fused function's scores
            o = fused((q * s).transpose(1, 2), k.transpose(1, 2),
                      self._rot(v, "v", tabs).transpose(1, 2), attn_mask=None, dropout_p=0.0,
                      is_causal=True, scale=1.0)
            return self._rot(o.transpose(1, 2), "o", tabs)
        n = torch.arange(T, device=q.device)[:, None]
        i = torch.arange(T, device=q.device)[None, :]
        av = None
        if rel == "xl":
            R = xl_sinusoid(T, H * D, q.dtype).to(q.device)
            Ek = F.linear(R, self.rel_proj.weight).reshape(T, H, D)   # row d = W_kR R_d
            Eg = Ek[(n - i).clamp(min=0)]                              # [T, T, H, D]; n < i masked
            scores = torch.einsum("bnhd,bihd->bhni", (q + self.rel_u) * s, k) + \
                torch.einsum("bnhd,nihd->bhni", (q + self.rel_w) * s, Eg)
        else:
            qs = q * s
            scores = torch.einsum("bnhd,bihd->bhni", qs, k)
            if rel == "shaw":
                K = self.cfg["rel_clip"]
                r = (i - n).clamp(-K, K) + K
                scores = scores + torch.einsum("bnhd,nid->bhni", qs, self.rel_k[r])
                av = self.rel_v[r]
            elif rel == "t5":
                b = t5_bucket(i - n, self.cfg["rel_buckets"], self.cfg["rel_max_distance"])
                scores = scores + self.rel_bias[:, b][None]
            elif rel == "deberta":
                K = self.cfg["rel_clip"]
                Kr = F.linear(shared, self.rel_k_proj.weight).reshape(2 * K, H, D)
                Qr = F.linear(shared, self.rel_q_proj.weight).reshape(2 * K, H, D)
                scores = scores + torch.einsum("bnhd,nihd->bhni", qs,
                                               Kr[(n - i + K).clamp(0, 2 * K - 1)])
                scores = scores + s * torch.einsum("bihd,nihd->bhni", k,
                                                   Qr[(i - n + K).clamp(0, 2 * K - 1)])
            elif rel == "alibi":
                m = torch.tensor(alibi_slopes(H), dtype=torch.float64)
                bias = (-m[:, None, None] * (n - i).abs().cpu().double()[None]).to(q.dtype)
                scores = scores + bias.to(q.device)[None]
        scores = scores.masked_fill(i > n, float("-inf"))
        a = torch.softmax(scores, dim=-1)
        o = torch.einsum("bhni,bihd->bnhd", a, self._rot(v, "v", tabs))
        if av is not None:
            o = o + torch.einsum("bhni,nid->bnhd", a, av)
        return self._rot(o, "o", tabs)

    def _linear(self, q, k, v, tabs):
        phi = lambda x: F.elu(x) + 1.0  # noqa: E731
        if self.cfg["linear_rope"] == "after":
            qn, kn = self._rot(phi(q), "q", tabs), self._rot(phi(k), "k", tabs)
            qd, kd = phi(q), phi(k)
        else:
            qn, kn = phi(self._rot(q, "q", tabs)), phi(self._rot(k, "k", tabs))
            qd, kd = qn, kn
        T = q.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
        w = torch.einsum("bnhd,bmhd->bhnm", qn, kn).masked_fill(~causal, 0.0)
        den = torch.einsum("bnhd,bmhd->bhnm", qd.double(), kd.double()).masked_fill(~causal, 0.0)
        den = den.sum(-1) + LINATTN_EPS                                # [B, H, T], float64
        u = torch.einsum("bhnm,bmhd->bnhd", w, self._rot(v, "v", tabs))
        o = u * (1.0 / den).to(u.dtype).permute(0, 2, 1)[..., None]
        return self._rot(o, "o", tabs)


class _Sub(nn.Module):
    """A named group of submodules (the parameter names' middle parts)."""

    def __init__(self, **mods):
        super().__init__()
        for k, m in mods.items():
            setattr(self, k, m)


class RoperTransformer(nn.Module):
    """roper's transformer (rp.model) with roper's parameter names. cfg: rp.model's keys (a dict
    and/or keywords; defaults as rp.model's); freq / angles: the model's own frequencies (a list,
    pair i turns by p freq[i]) or angles ([position][pair], or a function(p, i)), lists or
    tensors, read and refused as rp.model's freq / angles (_own_tables);
    positions, axes, sections, mix: the positions of the tokens (token t of every sequence at row
    t; scalar, or vector positions of 1 to 3 axes with their map), as rp.model's (positions_of;
    safetensors files hold them: load_roper, save_roper). With learn_freq the
    frequencies are the parameter rope.freq [3, d_rot/2] (d_rot the widest rotated placement's),
    shared by every layer: row 0 theta_i (starting from freq or the standard ones of that width,
    axial's per block, rounded to float32), or with axes "mixed" rows 0 .. A-1 the matrix W
    (starting from mix, rounded to float32); the other rows zero and unused.
    forward(tokens [B, T] or [T] of ids) -> logits [B, T, vocab]; loss(tokens, targets[, mask]) ->
    roper's mean cross-entropy over the scored positions (target >= 0 and mask != 0)."""

    def __init__(self, cfg=None, freq=None, angles=None, positions=None, axes=None,
                 sections=None, mix=None, **kw):
        super().__init__()
        given = dict(cfg or {}, **kw)
        self.cfg = c = config(cfg, **kw)
        # rp.model's own options may come in the config too, as in rp.model's table
        own = dict(freq=freq, angles=angles, positions=positions, axes=axes, sections=sections,
                   mix=mix)
        for k in own:
            if k in given:
                if own[k] is not None:
                    raise ValueError("option '%s' is given twice (in the config and as an "
                                     "argument)" % k)
                own[k] = given[k]
        self.positions, self.n_axes, self.freq = positions_of(
            c, own["positions"], own["axes"], own["sections"], own["mix"], own["freq"],
            own["angles"])
        C, V = c["d_model"], c["vocab"]
        mode = MODES[c["pe"]]
        self.embed = nn.Embedding(V, C)
        if mode.absolute == "learned":
            self.pos = nn.Embedding(c["seq_len"], C)
        for q in mode.rel_params:
            if q["use"] == "shared":  # the model's one for all layers (deberta's P)
                _rel_param(self, q["name"], q, c)
        self.layers = nn.ModuleList(
            _Sub(norm1=nn.LayerNorm(C, eps=LN_EPS), attn=RotaryAttention(c, self.freq,
                                                                        self.positions),
                 norm2=nn.LayerNorm(C, eps=LN_EPS),
                 ff=_Sub(w1=nn.Linear(C, c["d_ff"]), w2=nn.Linear(c["d_ff"], C)))
            for _ in range(c["layers"]))
        if c["norm"] == "pre":
            self.norm_f = nn.LayerNorm(C, eps=LN_EPS)
        if c["tie_embeddings"]:  # the output layer reads embed.weight: only its bias is its own
            self.head = _Sub(bias=nn.Parameter(torch.empty(V).uniform_(-C ** -0.5, C ** -0.5)))
            nn.init.uniform_(self.embed.weight, -C ** -0.5, C ** -0.5)  # roper's layout's init
        else:
            self.head = nn.Linear(C, V)
        self._sin = rotary.sinusoidal(c["seq_len"], C, dtype=torch.float64) \
            if mode.absolute == "sinusoidal" else None
        tables = {}  # the layers' cos/sin tables are the same: computed once
        for layer in self.layers:
            layer.attn._tables = tables
        if c["learn_freq"]:  # last, as in roper's layout (model_freq.c)
            half = max(widths(c).values()) // 2
            start = torch.zeros(3, half)
            if self.freq.mix is not None:
                start[:self.n_axes] = torch.tensor(self.freq.mix, dtype=torch.float64).float()
            else:
                start[0] = torch.tensor(rotary.theta(2 * half, float(c["base"]), self.freq,
                                                     n_axes=self.n_axes),
                                        dtype=torch.float64).float()
            self.rope = _Sub(freq=nn.Parameter(start))

    def forward(self, tokens):
        c = self.cfg
        if tokens.dim() == 1:
            tokens = tokens[None]
        T = tokens.shape[1]
        if T > c["seq_len"]:
            raise ValueError("forward: %d tokens per row, more than seq_len %d" % (T, c["seq_len"]))
        x = self.embed(tokens)
        if MODES[c["pe"]].absolute == "learned":
            x = x + self.pos.weight[:T]
        elif self._sin is not None:
            x = x + self._sin[:T].to(x.dtype).to(x.device)  # rounded once, as roper's table
        shared = next((self.get_parameter(q["name"]) for q in MODES[c["pe"]].rel_params
                       if q["use"] == "shared"), None)  # deberta's P
        learned = None if not c["learn_freq"] else self.rope.freq[:self.n_axes] \
            if self.freq.mix is not None else self.rope.freq[0]
        p = c["dropout"] if self.training else 0.0
        for layer in self.layers:
            attn = lambda h: layer.attn(h, shared=shared, learned=learned)  # noqa: E731
            ff = lambda h: layer.ff.w2(  # noqa: E731
                F.gelu(layer.ff.w1(h)) if c["activation"] == "gelu" else F.relu(layer.ff.w1(h)))
            if c["norm"] == "pre":
                x = x + F.dropout(attn(layer.norm1(x)), p, self.training)
                x = x + F.dropout(ff(layer.norm2(x)), p, self.training)
            else:
                x = layer.norm1(x + F.dropout(attn(x), p, self.training))
                x = layer.norm2(x + F.dropout(ff(x), p, self.training))
        if c["norm"] == "pre":
            x = self.norm_f(x)
        if c["tie_embeddings"]:
            return F.linear(x, self.embed.weight, self.head.bias)
        return self.head(x)

    def loss(self, tokens, targets, mask=None):
        logits = self(tokens)
        targets = targets.reshape(logits.shape[:-1])
        scored = targets >= 0
        if mask is not None:
            scored = scored & (mask.reshape(scored.shape) != 0)
        return F.cross_entropy(logits[scored], targets[scored])


def _dim(d, cfg):
    """The size a dims row of schema.json (layout.dims, a mode's rel_dims) stands for: times x the
    size it names (a config key, d_k = d_model / heads, d_rot/2 of the widest rotated placement,
    or none: 0) + plus."""
    of = d.get("of")
    n = 0 if of is None else cfg["d_model"] // cfg["heads"] if of == "d_k" else \
        max(widths(cfg).values(), default=0) // 2 if of == "d_rot/2" else cfg[of]
    return d["times"] * n + d["plus"]


def _rel_dim(dim, cfg):
    """The size a dim of schema.json's rel_params stands for (its mode's rel_dims row)."""
    return _dim(PE[cfg["pe"]]["rel_dims"][dim], cfg)


def _rel_param(owner, name, q, cfg):
    """The parameter row q of schema.json's rel_params as owner's attribute: "x.weight" a
    module's weight (Embedding for the shared one, else a Linear without bias), "x" a
    Parameter initialised as the row says (uniform in +-1/sqrt(cols), zeros or normal)."""
    rows, cols = _rel_dim(q["rows"], cfg), _rel_dim(q["cols"], cfg)
    if name.endswith(".weight"):
        setattr(owner, name[:-len(".weight")], nn.Embedding(rows, cols) if q["use"] == "shared"
                else nn.Linear(cols, rows, bias=False))
        return
    t = torch.empty(rows, cols)
    init = {"uniform": lambda: t.uniform_(-cols ** -0.5, cols ** -0.5), "zeros": t.zero_,
            "normal": t.normal_}[q["init"]]
    init()
    setattr(owner, name, nn.Parameter(t))


LAYOUT = SCHEMA["layout"]  # rp.model_layout(): the parameter layout's rows and dims


def _holds(row, cfg):
    """Whether a model of cfg has the entries of schema.json's layout row: when the row has no
    `when`, when the mode's absolute table is `absolute`, or when `key` does something for cfg
    (its needs) and holds `value`."""
    w = row.get("when")
    if w is None:
        return True
    if "absolute" in w:
        return MODES[cfg["pe"]].absolute == w["absolute"]
    return cfg[w["key"]] == w["value"] and _unused(cfg, KEY[w["key"]]) is None


def _entries(cfg, scope, prefix=""):
    """[(name, shape)] of the rows of one scope of schema.json's layout ("model", "layer",
    "after") for the checked config cfg, in roper's order, each name after prefix; a row "rel"
    gives the relative kind's parameters of the scope (the shared one is the model's)."""
    out = []
    for r in (r for r in LAYOUT["params"] if r["scope"] == scope):
        if r.get("rel"):
            out += [(prefix + q["name"], (_rel_dim(q["rows"], cfg), _rel_dim(q["cols"], cfg)))
                    for q in MODES[cfg["pe"]].rel_params if (q["use"] == "shared") ==
                    (scope == "model")]
        elif _holds(r, cfg):
            out.append((prefix + r["name"], tuple(_dim(LAYOUT["dims"][d], cfg)
                                                  for d in r["dims"])))
    return out


def layout(cfg):
    """[(name, shape)] of the parameters of a RoperTransformer of the checked config cfg, in
    roper's layout order (schema.json's layout: rp.model_layout())."""
    return _entries(cfg, "model") + [e for i in range(cfg["layers"]) for e in
                                     _entries(cfg, "layer", "layers.%d." % i)] + \
        _entries(cfg, "after")


def param_count(cfg):
    """(interprets) The floats of the parameters of a RoperTransformer of the checked config cfg
    (roper's layout, core/model/model_layout.c's rpm_build_layout, from schema.json's rows: a
    layer's entries counted once), computed without building it: load_roper refuses a file
    that holds fewer before it allocates a model (as rp.load does)."""
    return sum(math.prod(s) * (cfg["layers"] if scope == "layer" else 1)
               for scope in ("model", "layer", "after") for _, s in _entries(cfg, scope))


# What a model holds beside its parameters in a safetensors file (schema.json's extras:
# rp.safetensors_extras()): rp.model's option -> the metadata key (also the tensor's name as roper
# writes it; the metadata's value is the tensor's name), its dtype. AXES_KEY gives the map of
# vector positions; VERSION the roper.version roper writes.
EXTRAS = {x["option"]: (x["key"], DTYPES[x["dtype"]]) for x in SCHEMA["extras"]["tensors"]}
AXES_KEY, VERSION = SCHEMA["extras"]["axes_key"], SCHEMA["extras"]["version"]


def _shape_str(t):
    return "[%s]" % " x ".join(str(n) for n in t.shape)


def _extras_of(path, tensors, meta):
    """(options, names): the model's own tables and positions that the file's metadata names, as
    RoperTransformer's arguments (tensors; sections a list), and the names of their tensors.
    Checked by core before (core.check_file) when the library is found; without it the file is
    trusted, and only a tensor that is not there or not of its dtype is refused."""
    got, names = {}, set()
    for opt, (key, dtype) in EXTRAS.items():
        if key not in meta:
            continue
        t = tensors.get(meta[key])
        if t is None or t.dtype != dtype:
            raise ValueError("%s: the metadata's %s names no %s tensor %s"
                             % (path, key, str(dtype).replace("torch.", ""), _quoted(meta[key])))
        got[opt] = t
        names.add(meta[key])
    p = got.get("positions")
    if p is not None and p.dim() == 2:
        got["axes"] = meta.get(AXES_KEY, "axial")
    if "sections" in got:
        got["sections"] = got["sections"].tolist()
    return got, names


def load_roper(path, freq=None, angles=None, positions=None, axes=None, sections=None,
               mix=None):
    """A RoperTransformer from a safetensors file roper wrote (m:save_safetensors): the config
    from its roper.config metadata, the model's own frequencies or angles and its positions (with
    their map) from the tensors the metadata names (EXTRAS), the weights loaded with
    load_state_dict(strict=True) (F64 files rounded to float32, as roper reads them; a finite
    value past float32's range refused with rp.load's message, a parameter of another dtype too).
    freq / angles / positions, axes, sections, mix: RoperTransformer's arguments, for a file
    that holds none of these (one of an earlier roper, or a plain state dict's weights with
    another model's positions). Raises ValueError "path: ..." for a file without roper.config;
    with roper's library, with rp.load's message for what rp.load refuses in the metadata, the
    config and the tensors it names (core.check_file); without it the file is trusted."""
    tensors, meta = read_safetensors(path)
    if "roper.config" not in meta:
        raise ValueError("%s: no roper.config in the metadata (not written by roper: build "
                         "RoperTransformer(cfg), then load_state_dict)" % path)
    if core.LIB:
        core.check_file(path)
    try:
        cfg = from_json(meta["roper.config"])
    except ValueError as e:
        raise ValueError("%s: %s" % (path, e)) from None
    held, names = _extras_of(path, tensors, meta)
    params = {k: v for k, v in tensors.items() if k not in names}
    own = dict(freq=freq, angles=angles, positions=positions, axes=axes, sections=sections,
               mix=mix)
    given = [k for k, v in own.items() if v is not None]
    if held and given:
        raise ValueError("%s: the file holds the model's %s; option '%s' is not taken beside them"
                         % (path, ", ".join(EXTRAS[k][0] for k in EXTRAS if k in held),
                            given[0]))
    own.update(held)
    try:
        model = RoperTransformer(cfg, **own)
    except ValueError as e:
        if not held:
            raise
        raise ValueError("%s: bad positions: %s" % (path, e)) from None
    state = model.state_dict()
    for name in sorted(names & set(state)):
        raise ValueError("%s: tensor %s holds the model's own table or positions and is also "
                         "the name of a parameter" % (path, _quoted(name)))
    for name, t in params.items():  # as rp.load: F64 is rounded to float32, the rest refused
        if t.dtype not in (torch.float32, torch.float64):
            raise ValueError("%s: tensor %s has dtype %s; roper reads F32 and F64 (convert with "
                             ".float())" % (path, _quoted(name), NAMES[t.dtype]))
    for name in state:  # rp.load's order: a finite F64 value past float32's range refused
        t = params.get(name)
        if t is not None and t.dtype == torch.float64:
            bad = (torch.isfinite(t) & ~torch.isfinite(t.float())).nonzero()
            if len(bad):
                at = bad[0].tolist()
                raise ValueError("%s: tensor %s element %s is %.9g, beyond float32's range"
                                 % (path, _quoted(name), "".join("[%d]" % (i + 1) for i in at),
                                    t[tuple(at)].item()))
    model.load_state_dict({k: v.float() for k, v in params.items()}, strict=True)
    return model


def save_roper(model, path):
    """Writes a RoperTransformer's weights (float32) with roper's metadata (format pt,
    roper.version 1, roper.config) and its own frequencies or angles and its positions (EXTRAS:
    F64 and I64 tensors the metadata names, roper.axes their map), atomically: rp.load(path) in
    roper gives the same model."""
    f, tensors, meta = model.freq, {k: v.float() for k, v in model.state_dict().items()}, {}

    def put(opt, t):
        name = EXTRAS[opt][0]
        tensors[name], meta[name] = t, name

    if f.theta is not None:
        put("freq", torch.tensor(f.theta, dtype=torch.float64))
    if f.angles is not None:
        put("angles", torch.tensor(f.angles, dtype=torch.float64))
    if model.positions is not None:
        rows = torch.tensor(model.positions, dtype=torch.int64)
        put("positions", rows if model.n_axes else rows[:, 0])
        if model.n_axes:
            meta[AXES_KEY] = f.axes
        if f.axes == "sections":
            put("sections", torch.tensor(f.sections, dtype=torch.int64))
        if f.axes == "mixed":
            put("mix", torch.tensor(f.mix, dtype=torch.float64))
    meta.update({"format": "pt", "roper.version": VERSION, "roper.config": to_json(model.cfg)})
    write_safetensors(path, tensors, meta)

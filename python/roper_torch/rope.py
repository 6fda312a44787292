"""RoPE and RoPER for your own attention, in the manner of rotary-embedding-torch's
RotaryEmbedding: modules without parameters that rotate the tensors an attention layer already
has, with roper's numerics (its cos/sin tables bit for bit, rotary.py) and its defaults (half
pairing, base 10000, the whole head rotated).

    rope = RoPER(dim=32)                        # or RoPE(dim=32): queries and keys only
    q, k = rope.rotate_queries_and_keys(q, k)   # q, k, v: [batch, heads, seq, head_dim]
    v = rope.rotate_values(v)
    out = softmax(q k^T / sqrt(head_dim) + causal mask) v   # your attention, as it is
    out = rope.rotate_output(out)               # RoPER's output turned back by -n theta

That is rp.attention's pe "roper": o_n = R(-n theta) sum_i a_ni R(i theta) v_i, a function of
the offsets i - n only (docs/positional.md). Positions run along seq_dim (-2 by default, the
layout above; 1 for [batch, seq, heads, head_dim]); head_dim is the last dim. offset= places
the tensor's first row at that position (cached decoding: the new token's q, k, v and output
at offset = the tokens cached). rotate_queries_and_keys puts the queries at the keys' last
positions (queries fewer than keys: the cached keys' case).

The options are roper's own (the names of rp.attention's and rp.model's keys, read and checked
by config.config from schema.json, with roper's messages): base, pairing ("half" or
"interleaved"), the scalings (scaling "pi", "ntk", "yarn", "dynamic", "llama3" with
scaling_factor, orig_len, yarn_alpha, yarn_beta, yarn_ramp, low_freq_factor, high_freq_factor,
attention_factor), xPos (xpos, xpos_scale_base), Hugging Face's rope_theta and rope_scaling;
dim (and RoPER's dim_v, for v and the output) rotates the first dim features of the head only.
A scaling's score factor (YaRN's temperature, attention_factor^2) comes out folded into the
queries, so the scores carry it as roper's do: score_scale says what it is.
"""

from dataclasses import replace

import torch
from torch import nn

from . import rotary
from .config import KEYS, MODES, config, freq_of

# The options: roper's keys of the rotary numerics (base, pairing, the scalings and xPos:
# schema.json's rows for them; not rotate, which is the class, nor learn_freq: these modules
# hold no parameter) and Hugging Face's names of them.
OPTIONS = tuple(k["name"] for k in KEYS
                if (k["use"] == "rotary" and k["name"] != "rotate") or
                (k["use"] in ("freq", "scaled", "scalings", "xpos") and k["name"] != "learn_freq")
                ) + ("rope_theta", "rope_scaling")
MAX_POS = rotary.MAX_POS


def _width(cls, what, v):
    """None, or an even int >= 2 (bool refused)."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 2 or v % 2:
        raise ValueError("%s: %s must be an even integer >= 2 (the rotated features; None: the "
                         "whole head), got %s" % (cls, what, rotary._describe(v)))
    return v


class RoPE(nn.Module):
    """Rotary position embeddings (RoFormer) of queries and keys: rp.attention's pe "rope".

    RoPE(dim=None, *, seq_dim=-2, base=10000, pairing="half", scaling="none", ..., xpos=0, ...)
    dim: the features rotated, the first dim of the head (None: all of them). The other
    keywords: OPTIONS (the module docstring). Methods: rotate_queries_and_keys(q, k, offset=0),
    rotate_queries(q, offset=0), rotate_keys(k, offset=0), rotate_queries_or_keys(t, offset=0)
    (when queries and keys turn alike: no xPos, no score factor). Tensors of any float dtype and
    device; the tables are computed in float64 and rounded to it (roper's, bit for bit, in
    float32)."""

    MODE = "rope"
    ARGS = ("dim", "seq_dim")  # the arguments besides OPTIONS

    def __init__(self, dim=None, *, seq_dim=-2, **opts):
        super().__init__()
        name = type(self).__name__
        self.dim = _width(name, "dim", dim)
        if isinstance(seq_dim, bool) or not isinstance(seq_dim, int) or seq_dim == -1:
            raise ValueError("%s: seq_dim must be an integer, the dim of the positions (not -1, "
                             "the head's features), got %s" % (name, rotary._describe(seq_dim)))
        self.seq_dim = seq_dim
        for k in opts:
            if k not in OPTIONS:
                raise TypeError("%s: unknown option '%s' (known: %s)"
                                % (name, k, ", ".join(self.ARGS + OPTIONS)))
        # rp.model's checks and messages on a one-head layer of that width (vocab and d_model
        # only make it a config; a key that does nothing is refused as rp.model refuses it)
        try:
            c = config(dict(opts, vocab=1, heads=1, d_model=2, pe=self.MODE))
            f = replace(freq_of(c), orig_len=float(c["orig_len"]))  # no seq_len to fall back on
            rotary.check(f, 0, 2, 0)  # the scheme's scalars (core's rp.rope.angles checks)
        except ValueError as e:
            raise ValueError("%s: %s" % (name, e)) from None
        self.freq = None if f.is_plain() else f
        self.base = float(c["base"])
        self.pairing = c["pairing"]
        self.score_scale = rotary.score_scale(self.freq)  # the scores' factor, folded into q
        self._cache = {}

    def extra_repr(self):
        return "dim=%s, seq_dim=%d, mode=%s" % (self.dim, self.seq_dim, self.MODE)

    # ---- tables -------------------------------------------------------------------------------

    def _table(self, p, d, offset, n, device, dtype):
        """cos, sin [n, d/2] of placement p (rotary.PLACEMENTS) at the positions offset ..
        offset + n - 1, in dtype on device: slices of float64 tables from position 0, grown as
        positions past their end are asked (every position's row is its own: dynamic's
        factor and xPos's magnitude depend on that position only). Placements that turn alike
        (the width, the angle factor, and xPos's side when it has one) share them. The float64
        tables round to roper's float32 ones bit for bit (rotary.tables)."""
        side = rotary.PLACEMENTS[p][0]
        c = MODES[self.MODE].v_angle if p == "v" else 1.0
        key = (d, c, side if self.freq is not None and self.freq.xpos > 0.0 else 0)
        have = self._cache.get(key)
        end = offset + n
        if have is None or have["cos"].shape[0] < end:
            lo = 0 if have is None else have["cos"].shape[0]
            hi = max(end, 2 * lo)
            cos, sin = rotary.tables(d, self.base, range(lo, hi), self.freq, c=c, side=side,
                                     dtype=torch.float64)
            if have is not None:
                cos, sin = torch.cat([have["cos"], cos]), torch.cat([have["sin"], sin])
            have = self._cache[key] = {"cos": cos, "sin": sin}
        cast = (device, dtype)
        if cast not in have:
            have[cast] = (have["cos"].to(dtype).to(device), have["sin"].to(dtype).to(device))
        cos, sin = have[cast]
        return cos[offset:end], sin[offset:end]

    def _rotate(self, what, x, p, offset, d):
        """x rotated as placement p (width d; None: the head) at positions offset ..: the
        rows along seq_dim, through rotary.rotate (positions on dim -3 there)."""
        name = "%s.%s" % (type(self).__name__, what)
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            raise ValueError("%s: expected a floating-point tensor, got %s"
                             % (name, x.dtype if isinstance(x, torch.Tensor)
                                else type(x).__name__))
        nd = x.dim()
        if not -nd <= self.seq_dim < nd or self.seq_dim % max(nd, 1) == nd - 1:
            raise ValueError("%s: seq_dim %d is not a dim of a [%s] tensor before its last (the "
                             "head's features)" % (name, self.seq_dim,
                                                   " x ".join("%d" % s for s in x.shape)))
        s = self.seq_dim % nd
        D = x.shape[-1]
        d = D if d is None else d
        if d > D:
            raise ValueError("%s: %d features rotated, but the head has %d (%s [%s])"
                             % (name, d, D, "the last dim of",
                                " x ".join("%d" % n for n in x.shape)))
        if d < 2 or d % 2:
            raise ValueError("%s: the head's %d features are rotated as pairs: give an even dim"
                             % (name, D))
        if isinstance(offset, bool) or not isinstance(offset, int) or \
                not 0 <= offset <= MAX_POS - x.shape[s]:
            raise ValueError("%s: offset (the position of the first row) must be an integer "
                             ">= 0 that keeps the %d rows within 2^53, got %s"
                             % (name, x.shape[s], rotary._describe(offset)))
        cos, sin = self._table(p, d, offset, x.shape[s], x.device, x.dtype)
        y = rotary.rotate(x.movedim(s, -2).unsqueeze(-2), cos, sin, d, self.pairing,
                          rotary.PLACEMENTS[p][1])
        return y.squeeze(-2).movedim(-2, s)

    # ---- queries and keys ---------------------------------------------------------------------

    def rotate_queries(self, q, offset=0):
        """q_n' = R(+n theta) q_n (xPos: times zeta^(+n / scale_base)), n = offset + t, times
        score_scale (1 but for a scaling's score factor)."""
        q = self._rotate("rotate_queries", q, "q", offset, self.dim)
        return q * self.score_scale if self.score_scale != 1.0 else q

    def rotate_keys(self, k, offset=0):
        """k_i' = R(+i theta) k_i (xPos: times zeta^(-i / scale_base)), i = offset + t."""
        return self._rotate("rotate_keys", k, "k", offset, self.dim)

    def rotate_queries_and_keys(self, q, k, offset=0):
        """(q', k'): the keys at positions offset .. offset + S - 1, the queries at the last
        T of them (T <= S: with cached keys, the new queries are the last positions)."""
        s = self.seq_dim
        for what, x in (("q", q), ("k", k)):
            if not isinstance(x, torch.Tensor) or not -x.dim() <= s < x.dim():
                raise ValueError("%s.rotate_queries_and_keys: %s must be a tensor with the dim "
                                 "seq_dim %d" % (type(self).__name__, what, s))
        T, S = q.shape[s], k.shape[s]
        if T > S:
            raise ValueError("%s.rotate_queries_and_keys: %d queries, %d keys: the queries are "
                             "the keys' last positions (rotate_queries(q, offset) places them "
                             "yourself)" % (type(self).__name__, T, S))
        return self.rotate_queries(q, offset + S - T), self.rotate_keys(k, offset)

    def rotate_queries_or_keys(self, t, offset=0):
        """rotary-embedding-torch's name: t rotated by +p theta, p = offset + row; for a scheme
        that treats queries and keys alike (not with xPos or a score factor)."""
        if self.freq is not None and (self.freq.xpos > 0.0 or self.score_scale != 1.0):
            raise ValueError("%s.rotate_queries_or_keys: %s treats queries and keys apart: use "
                             "rotate_queries_and_keys (or rotate_queries, rotate_keys)"
                             % (type(self).__name__, "xpos" if self.freq.xpos > 0.0
                                else "a score factor of %s" % rotary._g(self.score_scale)))
        return self._rotate("rotate_queries_or_keys", t, "k", offset, self.dim)


class RoPER(RoPE):
    """RoPER: RoPE on queries and keys, the values rotated by their positions too and the
    output turned back by the query's: o_n = R(-n theta) sum_i a_ni R(i theta) v_i (rp.attention's
    pe "roper"). RoPER(dim=None, *, dim_v=None, seq_dim=-2, **RoPE's options); dim_v: the
    features of v and the output rotated (None: as dim). rotate_values(v, offset=0),
    rotate_output(out, offset=0), besides RoPE's methods."""

    MODE = "roper"
    ARGS = ("dim", "dim_v", "seq_dim")

    def __init__(self, dim=None, *, dim_v=None, seq_dim=-2, **opts):
        super().__init__(dim, seq_dim=seq_dim, **opts)
        self.dim_v = _width(type(self).__name__, "dim_v", dim_v)
        if self.dim_v is None:
            self.dim_v = self.dim

    def extra_repr(self):
        return super().extra_repr() + ", dim_v=%s" % self.dim_v

    def rotate_values(self, v, offset=0):
        """v_i' = R(+i theta) v_i (xPos: times zeta^(-i / scale_base)), i = offset + t."""
        return self._rotate("rotate_values", v, "v", offset, self.dim_v)

    def rotate_output(self, out, offset=0):
        """o_n' = R(-n theta) o_n (xPos: times zeta^(+n / scale_base)), n = offset + t: the
        attention's output rows at the queries' positions."""
        return self._rotate("rotate_output", out, "o", offset, self.dim_v)

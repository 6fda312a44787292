#!/usr/bin/python3
"""Golden fixtures for tests/c/test_fixtures.c: a tiny roper transformer in plain PyTorch.

Regenerate (from the repo root; needs Debian's python3-torch, so call /usr/bin/python3):

    /usr/bin/python3 tests/reference/make_fixtures.py            # writes tests/fixtures/*.rpfx
    /usr/bin/python3 tests/reference/make_fixtures.py --out DIR  # somewhere else
    /usr/bin/python3 tests/reference/make_fixtures.py --check    # placement identities, no files

Only regeneration needs torch; the C test reads the files. The format is in tests/fixtures/README.md.

The model follows the contract of core/model/model.h and the math of core/nn/attention.h, core/nn/rope.h and
core/nn/layers.h, written independently of the C code in the style of labml's modules
(labml_nn/transformers/mha.py, models.py and rope/ in labml's repository,
github.com/labmlai/annotated_deep_learning_paper_implementations):

  embedding (no scaling; + a learned (seq_len, C) table for pe = learned)
  -> layers x [pre-norm:  x += attn(LN1(x)); x += ff(LN2(x))
               post-norm: x = LN1(x + attn(x)); x = LN2(x + ff(x))]
  -> LN_f (pre-norm only) -> head (Linear to vocab, untied).
  attn: one fused Linear(C, 3C) with rows [q; k; v]; head h uses features h*D .. h*D+D-1 of each;
        scores = <q_n', k_i'> / sqrt(D), causal, softmax over keys; out = Linear(C, C).
  rotary modes rotate the placements of `rotate` (a subset of "qkvo"; "" = the mode's own: rope
        "qk", roper and roper_legacy "qkvo"; core/nn/pe.h), each on its own first d_rot features:
          q_n' = R(+n theta) q_n     d_rot_q = floor(fraction_q * D)  (fraction_qk when 0)
          k_i' = R(+i theta) k_i     d_rot_k = floor(fraction_k * D)  (fraction_qk when 0)
          v_i' = R(+c i theta) v_i   d_rot_v = floor(fraction_v * D)  (c: 2 for roper_legacy, else 1)
          o_n' = R(-n theta) o_n     d_rot_o = floor(fraction_o * D)  (fraction_v when 0)
        with o_n = sum_i a_{n,i} v_i' the weighted sum before the output Linear, and
        theta_j = base^(-2j/d_rot) for each placement's own d_rot; half pairing = feature j with
        j + d_rot/2 (interleaved = 2j with 2j+1). So rope: q, k; roper:
        o_n = R(-n theta) sum_i a_{n,i} R(+i theta) v_i; roper_legacy (labml code of
        2022-05-31..2024-06-20): o_n = R(-n theta) sum_i a_{n,i} R(+2i theta) v_i.
  relative modes (core/nn/attention.h "relative-position terms"; s = 1/sqrt(D), distances n - i):
        shaw     s (q_n.k_i + q_n.rel_k[r]), out_n = sum_i a_{n,i} (v_i + rel_v[r]),
                 r = clip(i - n, -k, k) + k, rel_k and rel_v [2k+1, D] shared by the heads
        xl       s ((q_n + u_h).k_i + (q_n + w_h).Ek_h[n - i]), Ek = R W_kR^T, R_d = [sin(d f_j) |
                 cos(d f_j)], f_j = 10000^(-2j/C)
        t5       s q_n.k_i + rel_bias[h, bucket(i - n)] (HF's _relative_position_bucket, causal)
        deberta  s' (q_n.k_i + q_n.K^r_h[delta(n, i)] + k_i.Q^r_h[delta(i, n)]), s' = 1/sqrt(3D),
                 K^r = P W_kr^T, Q^r = P W_qr^T, delta(a, b) = clamp(a - b + k, 0, 2k - 1)
        alibi    s q_n.k_i - m_h (n - i), m_h from Press et al.'s get_slopes
  ff: Linear(C, d_ff) -> ReLU (or exact-erf GELU) -> Linear(d_ff, C).
  LayerNorm eps 1e-5, biased variance. Loss: mean cross-entropy over scored positions (target >= 0
  and mask != 0).

Weights are NOT torch's random init: every parameter is drawn from a splitmix64 stream (pure Python,
so the numbers do not depend on the torch version), stored in the fixture, and loaded into the C
model by the test through rp_model_param_view. Linear weights/biases ~ U(-1/sqrt(fan_in),
1/sqrt(fan_in)) (as PyTorch), embeddings ~ U(-1, 1), LayerNorm weights ~ U(0.5, 1.5) and biases
~ U(-0.2, 0.2) (not 1/0, so that a swapped or ignored LayerNorm parameter shows). The relative
tables: rel_k, rel_v and the projections as linear weights (fan_in D for rel_k and rel_v), deberta's
P = rel.weight as an embedding, rel_u, rel_w and rel_bias ~ U(-0.5, 0.5) (the C model starts them at
zero; here no table is zero).

Everything is computed twice: in float64 (what the fixture stores, rounded to float32) and in
float32 from the same float32 weights (only its max abs deviation from float64 is stored, per
tensor, as a measure of the float32 rounding noise the C side should be compared against).
"""

import argparse
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

FORMAT_VERSION = 1

# Enum values of core/model/model.h and core/nn/attention.h / core/nn/rope.h.
PE = {"none": 0, "sinusoidal": 1, "learned": 2, "rope": 3, "roper": 4, "roper_legacy": 5,
      "shaw": 6, "xl": 7, "t5": 8, "deberta": 9, "alibi": 10}
REL_PE = ("shaw", "xl", "t5", "deberta", "alibi")                   # the relative modes
NORM = {"pre": 0, "post": 1}
ACT = {"relu": 0, "gelu": 1}
PAIRING = {"half": 0, "interleaved": 1}
ROT_BITS = {"q": 1, "k": 2, "v": 4, "o": 8}                      # RP_ROT_* of core/nn/pe.h
MODE_ROTATE = {"rope": "qk", "roper": "qkvo", "roper_legacy": "qkvo"}  # the modes' own placements

BASE_CFG = dict(vocab=11, d_model=16, heads=2, layers=2, d_ff=24, seq_len=8, batch=2, T=8,
                norm="pre", act="relu", pe="rope", fraction_qk=1.0, fraction_v=1.0,
                rope_base=10000.0, pairing="half", dropout=0.0,
                rotate="", fraction_q=0.0, fraction_k=0.0, fraction_o=0.0,
                rel_clip=16, rel_buckets=32, rel_max_distance=128)   # rel_*: core/model/model.h defaults

# name -> overrides of BASE_CFG; seed drives the weights and the batch.
CASES = [
    ("rope", dict(pe="rope"), 101),
    ("roper", dict(pe="roper"), 102),
    ("roper_legacy", dict(pe="roper_legacy"), 103),
    ("none", dict(pe="none"), 104),
    ("roper_partial", dict(pe="roper", fraction_qk=0.5, fraction_v=0.5), 105),
    ("roper_interleaved", dict(pe="roper", pairing="interleaved", rope_base=100.0), 106),
    ("roper_post_gelu", dict(pe="roper", norm="post", act="gelu"), 107),
    ("learned", dict(pe="learned"), 108),
    # The placement ablation (rotate and the per-placement fractions; d_k 8).
    ("rope_vo", dict(pe="rope", rotate="vo"), 109),
    ("rope_qkv_widths", dict(pe="rope", rotate="qkv", fraction_q=0.5, fraction_k=0.75,
                             fraction_v=0.75), 110),
    ("roper_legacy_ko", dict(pe="roper_legacy", rotate="ko", fraction_o=0.5), 111),
    ("rope_q_only", dict(pe="rope", rotate="q"), 112),
    ("roper_legacy_qvo_interleaved", dict(pe="roper_legacy", rotate="qvo", pairing="interleaved",
                                          rope_base=100.0, fraction_q=0.75, fraction_v=0.5,
                                          fraction_o=1.0), 113),
    # The relative modes (T = 8, so the clip, the log buckets and their last bucket all happen:
    # shaw's distances 3..7 share row 0; t5 gives the distances 0..7 the buckets 0 1 2 2 3 3 3 3;
    # deberta's c2p/p2c rows saturate from distance 2). alibi: 3 heads, the slopes of the rule for
    # a head count that is not a power of two.
    ("shaw", dict(pe="shaw", rel_clip=3), 114),
    ("xl", dict(pe="xl"), 115),
    ("t5", dict(pe="t5", rel_buckets=4, rel_max_distance=6), 116),
    ("deberta", dict(pe="deberta", rel_clip=2), 117),
    ("alibi", dict(pe="alibi", d_model=24, heads=3), 118),
    ("deberta_post_gelu", dict(pe="deberta", rel_clip=3, norm="post", act="gelu"), 119),
]


# ---- deterministic numbers (splitmix64, the generator of tests/c/check.h) -----------------------

class SplitMix64:
    M = (1 << 64) - 1

    def __init__(self, seed):
        self.state = seed & self.M

    def u64(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & self.M
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & self.M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & self.M
        return z ^ (z >> 31)

    def uniform(self, lo, hi):
        return lo + (hi - lo) * ((self.u64() >> 11) * 2.0 ** -53)

    def int(self, lo, hi):  # inclusive; the tiny modulo bias does not matter here
        return lo + self.u64() % (hi - lo + 1)


# ---- parameters: names, shapes and order of core/model/model.h ----------------------------------------

def param_layout(cfg):
    """[(name, shape, kind, fan_in)] in the order of the C parameter buffer."""
    V, C, F_, L = cfg["vocab"], cfg["d_model"], cfg["d_ff"], cfg["layers"]
    pe, H = cfg["pe"], cfg["heads"]
    D = C // H
    out = [("embed.weight", (V, C), "embed", 0)]
    if pe == "learned":
        out.append(("pos.weight", (cfg["seq_len"], C), "embed", 0))
    if pe == "deberta":  # DeBERTa's relative embeddings P [2k, C], shared by the layers
        out.append(("rel.weight", (2 * cfg["rel_clip"], C), "embed", 0))
    for l in range(L):
        p = "layers.%d." % l
        out += [
            (p + "norm1.weight", (C,), "ln_w", 0),
            (p + "norm1.bias", (C,), "ln_b", 0),
            (p + "attn.qkv.weight", (3 * C, C), "linear", C),
            (p + "attn.qkv.bias", (3 * C,), "linear", C),
            (p + "attn.out.weight", (C, C), "linear", C),
            (p + "attn.out.bias", (C,), "linear", C),
        ]
        # the relative modes' per-layer tables ("table": U(-0.5, 0.5), never zero)
        K = cfg.get("rel_clip")
        if pe == "shaw":
            out += [(p + "attn.rel_k", (2 * K + 1, D), "linear", D),
                    (p + "attn.rel_v", (2 * K + 1, D), "linear", D)]
        elif pe == "xl":
            out += [(p + "attn.rel_proj.weight", (C, C), "linear", C),
                    (p + "attn.rel_u", (H, D), "table", 0),
                    (p + "attn.rel_w", (H, D), "table", 0)]
        elif pe == "t5":
            out += [(p + "attn.rel_bias", (H, cfg["rel_buckets"]), "table", 0)]
        elif pe == "deberta":
            out += [(p + "attn.rel_q_proj.weight", (C, C), "linear", C),
                    (p + "attn.rel_k_proj.weight", (C, C), "linear", C)]
        out += [
            (p + "norm2.weight", (C,), "ln_w", 0),
            (p + "norm2.bias", (C,), "ln_b", 0),
            (p + "ff.w1.weight", (F_, C), "linear", C),
            (p + "ff.w1.bias", (F_,), "linear", C),
            (p + "ff.w2.weight", (C, F_), "linear", F_),
            (p + "ff.w2.bias", (C,), "linear", F_),
        ]
    if cfg["norm"] == "pre":
        out += [("norm_f.weight", (C,), "ln_w", 0), ("norm_f.bias", (C,), "ln_b", 0)]
    out += [("head.weight", (V, C), "linear", C), ("head.bias", (V,), "linear", C)]
    return out


def make_params(cfg, rng):
    params = {}
    for name, shape, kind, fan_in in param_layout(cfg):
        n = math.prod(shape)
        if kind == "embed":
            lo, hi = -1.0, 1.0
        elif kind == "ln_w":
            lo, hi = 0.5, 1.5
        elif kind == "ln_b":
            lo, hi = -0.2, 0.2
        elif kind == "table":
            lo, hi = -0.5, 0.5
        else:
            bound = 1.0 / math.sqrt(fan_in)
            lo, hi = -bound, bound
        vals = [rng.uniform(lo, hi) for _ in range(n)]
        # Rounded to float32 once: both precisions and the C model start from these exact numbers.
        params[name] = torch.tensor(vals, dtype=torch.float32).reshape(shape)
    return params


def make_batch(cfg, rng):
    B, T, V = cfg["batch"], cfg["T"], cfg["vocab"]
    tokens = torch.tensor([[rng.int(0, V - 1) for _ in range(T)] for _ in range(B)], dtype=torch.int64)
    targets = torch.tensor([[rng.int(0, V - 1) for _ in range(T)] for _ in range(B)], dtype=torch.int64)
    mask = torch.ones(B, T, dtype=torch.int64)
    mask[0, 0] = 0          # a masked position at the start of sequence 0
    mask[1, 0:3] = 0        # a masked prefix of sequence 1 (as in the copy tasks)
    targets[0, 5] = -1      # one target -1 (not scored) on an unmasked position
    targets[1, 1] = -1      # and one where the mask is 0 as well
    return tokens, targets, mask


# ---- the model ------------------------------------------------------------------------------------

def d_rot(fraction, d_k):
    return int(math.floor(fraction * d_k))


def placements(cfg, D):
    """{placement: d_rot} for the placements the config rotates ({} for the other modes). The
    placement keys may be missing (make_interop.py passes roper.config, which has them only when
    set): rotate "" and fractions 0, as in BASE_CFG."""
    rotate = cfg.get("rotate", "")
    rot = rotate or MODE_ROTATE.get(cfg["pe"], "")
    assert not rotate or cfg["pe"] in MODE_ROTATE, "rotate needs a rotary pe"
    own = {"q": cfg.get("fraction_q", 0.0) or cfg["fraction_qk"],
           "k": cfg.get("fraction_k", 0.0) or cfg["fraction_qk"],
           "v": cfg["fraction_v"],
           "o": cfg.get("fraction_o", 0.0) or cfg["fraction_v"]}
    widths = {p: d_rot(own[p], D) for p in "qkvo" if p in rot}
    for p, w in widths.items():
        assert 2 <= w <= D and w % 2 == 0, "d_rot_%s %d for d_k %d" % (p, w, D)
    return widths


def rotate_mask(name):
    return sum(ROT_BITS[p] for p in name)


def rotate(x, pos, d, base, pairing, sign):
    """Rotates the first d features of x (B, T, H, D) by sign * pos[t] * theta_j, theta_j =
    base^(-2j/d). Angles are computed in float64 (as rp_rope_angles) and cast to x's dtype."""
    h = d // 2
    theta = base ** (-2.0 * torch.arange(h, dtype=torch.float64) / d)
    ang = pos.to(torch.float64)[:, None] * theta[None, :]            # (T, h)
    cos = ang.cos().to(x.dtype)[None, :, None, :]                     # (1, T, 1, h)
    sin = (sign * ang.sin()).to(x.dtype)[None, :, None, :]
    x_rot, x_pass = x[..., :d], x[..., d:]
    if pairing == "half":
        x1, x2 = x_rot[..., :h], x_rot[..., h:]
        y = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
    else:
        x1, x2 = x_rot[..., 0::2], x_rot[..., 1::2]
        y = torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).flatten(-2)
    return torch.cat([y, x_pass], dim=-1)


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)


# ---- the relative modes (core/nn/attention.h "relative-position terms"; query n, key i) -------------

def t5_bucket(relative_position, num_buckets, max_distance):
    """HF transformers' T5Attention._relative_position_bucket with bidirectional=False (the causal
    model), relative_position = i - n (memory minus context position), transcribed as it is: the
    log in float32, truncated by .to(torch.long)."""
    relative_buckets = 0
    relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1))
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


def alibi_slopes(n):
    """get_slopes of Press et al. (ofirpress/attention_with_linear_biases), as published."""
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]
    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return (get_slopes_power_of_2(closest_power_of_2)
            + alibi_slopes(2 * closest_power_of_2)[0::2][:n - closest_power_of_2])


def xl_sinusoid(T, C, dtype):
    """Transformer-XL's R [T, C]: row d = [sin(d f_j) | cos(d f_j)], f_j = 10000^(-2j/C), in
    float64 and cast to dtype (a constant, like the C model's table)."""
    f = 10000.0 ** (-2.0 * torch.arange(C // 2, dtype=torch.float64) / C)
    a = torch.arange(T, dtype=torch.float64)[:, None] * f[None, :]
    return torch.cat([a.sin(), a.cos()], dim=-1).to(dtype)


def rel_scores(q, k, P, p, cfg):
    """The scores (B, H, T, T) of a relative mode before the causal mask, and shaw's value table
    gathered per (n, i) (None for the others)."""
    B, T, H, D = q.shape
    pe = cfg["pe"]
    n = torch.arange(T)[:, None]
    i = torch.arange(T)[None, :]
    s = 1.0 / math.sqrt(3 * D if pe == "deberta" else D)
    qk = torch.einsum("bnhd,bihd->bhni", q, k)
    if pe == "shaw":
        # Shaw et al. 2018: e_ni = q_n.(k_i + a^K_r) / sqrt(d), out_n = sum_i a_ni (v_i + a^V_r),
        # r = clip(i - n, -k, k) + k, one table for all heads
        K = cfg["rel_clip"]
        r = (i - n).clamp(-K, K) + K                                  # (T, T)
        ak = P[p + "attn.rel_k"][r]                                   # (T, T, D)
        av = P[p + "attn.rel_v"][r]
        return s * (qk + torch.einsum("bnhd,nid->bhni", q, ak)), av
    if pe == "xl":
        # Dai et al. 2019 eq. (a)+(b)+(c)+(d): (q_n + u).k_i + (q_n + v).W_kR R_{n-i}
        C = H * D
        R = xl_sinusoid(T, C, q.dtype)
        Ek = F.linear(R, P[p + "attn.rel_proj.weight"]).reshape(T, H, D)  # row d = W_kR R_d
        Eg = Ek[(n - i).clamp(min=0)]                                 # (T, T, H, D); n < i masked
        u, w = P[p + "attn.rel_u"], P[p + "attn.rel_w"]               # (H, D)
        ac = torch.einsum("bnhd,bihd->bhni", q + u, k)
        bd = torch.einsum("bnhd,nihd->bhni", q + w, Eg)
        return s * (ac + bd), None
    if pe == "t5":
        # Raffel et al. 2020: a learned scalar per head and bucket of i - n, added unscaled
        bucket = t5_bucket(i - n, cfg["rel_buckets"], cfg["rel_max_distance"])  # (T, T)
        bias = P[p + "attn.rel_bias"][:, bucket]                      # (H, T, T)
        return s * qk + bias[None], None
    if pe == "deberta":
        # He et al. 2020 eq. (4)-(6): c2p q_n.K^r[delta(n, i)] + p2c k_i.Q^r[delta(i, n)],
        # delta(a, b) = clamp(a - b + k, 0, 2k - 1), K^r = P W_kr^T, Q^r = P W_qr^T, / sqrt(3d)
        K = cfg["rel_clip"]
        Pr = P["rel.weight"]
        Kr = F.linear(Pr, P[p + "attn.rel_k_proj.weight"]).reshape(2 * K, H, D)
        Qr = F.linear(Pr, P[p + "attn.rel_q_proj.weight"]).reshape(2 * K, H, D)
        c2p = torch.einsum("bnhd,nihd->bhni", q, Kr[(n - i + K).clamp(0, 2 * K - 1)])
        p2c = torch.einsum("bihd,nihd->bhni", k, Qr[(i - n + K).clamp(0, 2 * K - 1)])
        return s * (qk + c2p + p2c), None
    assert pe == "alibi"
    # Press et al. 2022: -m_h (n - i), added unscaled
    m = torch.tensor(alibi_slopes(H), dtype=q.dtype)
    return s * qk - m[:, None, None] * (n - i).to(q.dtype)[None], None


def attention(x, P, p, cfg):
    B, T, C = x.shape
    H = cfg["heads"]
    D = C // H
    qkv = F.linear(x, P[p + "attn.qkv.weight"], P[p + "attn.qkv.bias"])
    q = qkv[..., 0:C].reshape(B, T, H, D)
    k = qkv[..., C:2 * C].reshape(B, T, H, D)
    v = qkv[..., 2 * C:3 * C].reshape(B, T, H, D)
    base, pairing = cfg["rope_base"], cfg["pairing"]
    w = placements(cfg, D)
    pos = torch.arange(T) + cfg.get("pos_offset", 0)  # pos_offset: only for self_check's shift test
    if "q" in w:
        q = rotate(q, pos, w["q"], base, pairing, +1.0)
    if "k" in w:
        k = rotate(k, pos, w["k"], base, pairing, +1.0)
    av = None
    if cfg["pe"] in REL_PE:
        scores, av = rel_scores(q, k, P, p, cfg)
    else:
        scores = torch.einsum("bnhd,bihd->bhni", q, k) / math.sqrt(D)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    scores = scores.masked_fill(~causal, float("-inf"))
    a = torch.softmax(scores, dim=-1)
    if "v" in w:
        v = rotate(v, pos * (2 if cfg["pe"] == "roper_legacy" else 1), w["v"], base, pairing, +1.0)
    o = torch.einsum("bhni,bihd->bnhd", a, v)
    if av is not None:                                                # shaw's a^V
        o = o + torch.einsum("bhni,nid->bnhd", a, av)
    if "o" in w:
        o = rotate(o, pos, w["o"], base, pairing, -1.0)
    return F.linear(o.reshape(B, T, C), P[p + "attn.out.weight"], P[p + "attn.out.bias"])


def feed_forward(x, P, p, cfg):
    h = F.linear(x, P[p + "ff.w1.weight"], P[p + "ff.w1.bias"])
    h = F.relu(h) if cfg["act"] == "relu" else F.gelu(h)
    return F.linear(h, P[p + "ff.w2.weight"], P[p + "ff.w2.bias"])


def forward(P, tokens, cfg):
    x = P["embed.weight"][tokens]                                     # (B, T, C)
    if cfg["pe"] == "learned":
        x = x + P["pos.weight"][: tokens.shape[1]][None]
    for l in range(cfg["layers"]):
        p = "layers.%d." % l
        if cfg["norm"] == "pre":
            x = x + attention(layer_norm(x, P[p + "norm1.weight"], P[p + "norm1.bias"]), P, p, cfg)
            x = x + feed_forward(layer_norm(x, P[p + "norm2.weight"], P[p + "norm2.bias"]), P, p, cfg)
        else:
            x = layer_norm(x + attention(x, P, p, cfg), P[p + "norm1.weight"], P[p + "norm1.bias"])
            x = layer_norm(x + feed_forward(x, P, p, cfg), P[p + "norm2.weight"], P[p + "norm2.bias"])
    if cfg["norm"] == "pre":
        x = layer_norm(x, P["norm_f.weight"], P["norm_f.bias"])
    return F.linear(x, P["head.weight"], P["head.bias"])              # (B, T, V)


def loss_fn(logits, targets, mask):
    scored = (targets >= 0) & (mask != 0)
    return F.cross_entropy(logits[scored], targets[scored], reduction="mean")


def run(params, tokens, targets, mask, cfg, dtype):
    P = {k: v.to(dtype).clone().requires_grad_(True) for k, v in params.items()}
    logits = forward(P, tokens, cfg)
    loss = loss_fn(logits, targets, mask)
    loss.backward()
    grads = {k: v.grad.detach() for k, v in P.items()}
    return logits.detach(), loss.detach(), grads


# ---- the file ---------------------------------------------------------------------------------------

def pack_name(name):
    b = name.encode("ascii")
    return struct.pack("<I", len(b)) + b


def write_fixture(path, ints, doubles, arrays):
    out = bytearray(b"RPFX")
    out += struct.pack("<I", FORMAT_VERSION)
    out += struct.pack("<I", len(ints))
    for k, v in ints:
        out += pack_name(k) + struct.pack("<q", v)
    out += struct.pack("<I", len(doubles))
    for k, v in doubles:
        out += pack_name(k) + struct.pack("<d", v)
    out += struct.pack("<I", len(arrays))
    for k, t in arrays:
        t = t.detach().to(torch.float32).contiguous()
        out += pack_name(k) + struct.pack("<I", t.dim())
        out += struct.pack("<%dq" % t.dim(), *t.shape)
        out += struct.pack("<%df" % t.numel(), *t.flatten().tolist())
    with open(path, "wb") as f:
        f.write(out)
    return len(out)


def make_case(name, overrides, seed, outdir):
    cfg = dict(BASE_CFG)
    cfg.update(overrides)
    rng = SplitMix64(seed)
    params = make_params(cfg, rng)
    tokens, targets, mask = make_batch(cfg, rng)

    logits64, loss64, grads64 = run(params, tokens, targets, mask, cfg, torch.float64)
    logits32, loss32, grads32 = run(params, tokens, targets, mask, cfg, torch.float32)

    ints = [("vocab", cfg["vocab"]), ("d_model", cfg["d_model"]), ("heads", cfg["heads"]),
            ("layers", cfg["layers"]), ("d_ff", cfg["d_ff"]), ("seq_len", cfg["seq_len"]),
            ("batch", cfg["batch"]), ("T", cfg["T"]), ("norm", NORM[cfg["norm"]]),
            ("act", ACT[cfg["act"]]), ("pe", PE[cfg["pe"]]), ("pairing", PAIRING[cfg["pairing"]]),
            ("seed", seed)]
    doubles = [("fraction_qk", cfg["fraction_qk"]), ("fraction_v", cfg["fraction_v"]),
               ("rope_base", cfg["rope_base"]), ("dropout", cfg["dropout"]),
               ("loss_f64", loss64.item())]
    if cfg["pe"] in REL_PE:
        # The relative modes' keys, only in their files (the C test reads a missing one as the
        # model's default: 16, 32, 128).
        ints += [("rel_clip", cfg["rel_clip"]), ("rel_buckets", cfg["rel_buckets"]),
                 ("rel_max_distance", cfg["rel_max_distance"])]
    if cfg["rotate"]:
        # The placement keys, only in the files of the placement cases (so the earlier files stay
        # as they were); the C test reads a missing key as 0: the mode's own rotate, inherited
        # widths.
        ints.append(("rotate", rotate_mask(cfg["rotate"])))
        doubles[4:4] = [("fraction_q", cfg["fraction_q"]), ("fraction_k", cfg["fraction_k"]),
                        ("fraction_o", cfg["fraction_o"])]

    # torch float32 vs float64, per compared tensor: the scale of float32 rounding noise.
    noise = [("logits", logits32, logits64), ("loss", loss32, loss64)]
    noise += [("grad." + k, grads32[k], grads64[k]) for k in params]
    report = []
    for k, a32, a64 in noise:
        err = (a32.to(torch.float64) - a64).abs().max().item()
        mag = a64.abs().max().item()
        doubles.append(("torch_f32_maxabs." + k, err))
        report.append((k, err, mag))

    arrays = [(k, v) for k, v in params.items()]
    arrays += [("tokens", tokens), ("targets", targets), ("mask", mask)]
    arrays += [("logits", logits64), ("loss", loss64.reshape(1))]
    arrays += [("grad." + k, grads64[k]) for k in params]

    path = os.path.join(outdir, name + ".rpfx")
    size = write_fixture(path, ints, doubles, arrays)
    worst = max(err / mag if mag > 0 else 0.0 for _, err, mag in report)
    print("%-20s %6d bytes  loss %.9f  scored %d  torch f32-vs-f64 worst max|err|/max|ref| %.2e"
          % (path, size, loss64.item(), int(((targets >= 0) & (mask != 0)).sum()), worst))
    return report


def self_check():
    """Identities of the placement ablation, in float64 on the whole model (logits and every
    gradient): rotate "qkvo" on rope is roper, "qk" on roper is rope, and an explicit rotate equal
    to a mode's own changes nothing; and the shift test below. Returns the worst max abs
    difference (1 when the shift test fails)."""
    pairs = [(dict(pe="rope", rotate="qkvo"), dict(pe="roper")),
             (dict(pe="roper", rotate="qk"), dict(pe="rope")),
             (dict(pe="roper_legacy", rotate="qkvo"), dict(pe="roper_legacy")),
             (dict(pe="rope", rotate="qkvo", pairing="interleaved", fraction_qk=0.5,
                   fraction_v=0.75),
              dict(pe="roper", pairing="interleaved", fraction_qk=0.5, fraction_v=0.75)),
             (dict(pe="roper", rotate="qkvo", fraction_q=0.5, fraction_k=0.5, fraction_o=0.75,
                   fraction_v=0.75), dict(pe="roper", fraction_qk=0.5, fraction_v=0.75))]
    worst = 0.0
    # The shift test: every position moved by 5 leaves the model unchanged exactly when the
    # rotation is relative (qk, vo, qkvo with c = 1: pe.h), up to float64 rounding; the others
    # must change (else the test could not see a wrong sign).
    for rot in ("qk", "vo", "qkvo", "q", "k", "v", "o", "ko", "qkv"):
        outs = []
        for off in (0, 5):
            cfg = dict(BASE_CFG, pe="rope", rotate=rot, pos_offset=off, fraction_v=0.75)
            rng = SplitMix64(202)
            params = make_params(cfg, rng)
            tokens, targets, mask = make_batch(cfg, rng)
            outs.append(run(params, tokens, targets, mask, cfg, torch.float64)[0])
        diff = (outs[0] - outs[1]).abs().max().item()
        relative = rot in ("qk", "vo", "qkvo")
        bad = diff > 1e-12 if relative else diff < 1e-3
        worst = max(worst, 1.0 if bad else 0.0)
        print("shift rotate %-5s logits max|diff| %.1e  (%s)%s"
              % (rot, diff, "relative" if relative else "absolute", "  <-- WRONG" if bad else ""))
    for a, b in pairs:
        outs = []
        for over in (a, b):
            cfg = dict(BASE_CFG)
            cfg.update(over)
            rng = SplitMix64(201)
            params = make_params(cfg, rng)
            tokens, targets, mask = make_batch(cfg, rng)
            outs.append(run(params, tokens, targets, mask, cfg, torch.float64))
        (la, sa, ga), (lb, sb, gb) = outs
        diff = max([(la - lb).abs().max().item(), (sa - sb).abs().item()] +
                   [(ga[k] - gb[k]).abs().max().item() for k in ga])
        worst = max(worst, diff)
        print("check %-60s == %-50s max|diff| %.1e" % (a, b, diff))
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "fixtures"))
    ap.add_argument("--verbose", action="store_true", help="per-tensor torch f32 noise")
    ap.add_argument("--check", action="store_true",
                    help="only check the placement identities in float64 (writes nothing)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.check:
        worst = self_check()
        print("worst max|diff| %.1e" % worst)
        sys.exit(0 if worst <= 1e-15 else 1)
    os.makedirs(args.out, exist_ok=True)
    print("torch %s, python %s" % (torch.__version__, sys.version.split()[0]))
    for name, overrides, seed in CASES:
        report = make_case(name, overrides, seed, os.path.relpath(args.out))
        if args.verbose:
            for k, err, mag in report:
                print("    %-32s max|ref| %.3e  f32 max|err| %.2e  (%.1e)"
                      % (k, mag, err, err / mag if mag else 0.0))


if __name__ == "__main__":
    main()

"""The rotary math of roper (core/nn/rope_freq.c, core/nn/rope.c): the frequencies, the cos/sin
tables and the rotation, numerically as roper computes them.

Frequencies and angles are computed in float64 with Python's math module (the C library's pow,
cos, sin, the functions roper calls) and only the tables are rounded to float32, so the tables
equal roper's bit for bit. theta_i = base^(-2i/d_rot), i = 0 .. d_rot/2 - 1 (RoFormer), or the
user's own frequencies; on top of them a scaling (SCALINGS, keyed by its name) and xPos:

    none   theta_i
    pi     position interpolation (Chen et al. 2023): theta_i / s
    ntk    NTK-aware scaling (bloc97 2023): theta_i s^(-2i/(d_rot-2)) (d_rot = 2: theta_0)
    yarn   YaRN (Peng et al. 2023, eqs. 17-20): r = L |theta_i| / (2 pi), gamma(r) = 0 below
           alpha, 1 above beta, linear between; (1 - gamma) theta_i / s + gamma theta_i; the
           scores times (0.1 ln s + 1)^2 when s > 1 (score_scale). yarn_ramp "dims" /
           "dims_exact": the ramp linear in the pair index between i(beta) (rounded down) and
           i(alpha) (rounded up; dims_exact: not rounded), i(r) = d_rot ln(L / (2 pi r)) /
           (2 ln base), clamped to [0, d_rot - 1] (Hugging Face's rope_type "yarn")
    dynamic  dynamic NTK, position by position: position p takes NTK with
           s_p = max(1, s (p + 1) / L - (s - 1)) (so a cache stays exact)
    llama3 Llama 3.1's bands: the yarn ramp in r between low_freq_factor and high_freq_factor,
           no temperature
    attention_factor m > 0 (any scaling): the scores times m^2 instead of the scaling's own
    xPos   (Sun et al. 2022): pair i at position p times zeta_i^(side p / scale_base),
           zeta_i = (2i/d_rot + gamma) / (1 + gamma), side +1 for the query side (q and RoPER's
           output o), -1 for the key side (k and the values v); folded into the tables.

docs/positional.md has the derivations. A new scheme is one entry of SCALINGS (its theta and its
score factor) plus its fields in Freq.
"""

import math
from dataclasses import dataclass
from typing import Callable, List, Optional

import torch

TWO_PI = 6.283185307179586476925286766559


@dataclass
class Freq:
    """A frequency scheme (rp_rope_freq of core/nn/rope_freq.h, the config keys' names)."""
    scaling: str = "none"
    factor: float = 1.0                  # scaling_factor s
    orig_len: float = 0.0                # yarn: L (the model: orig_len, or seq_len when 0)
    yarn_alpha: float = 1.0
    yarn_beta: float = 32.0
    yarn_ramp: str = "rotations"         # or "dims", "dims_exact" (Hugging Face's)
    low_freq_factor: float = 1.0         # llama3
    high_freq_factor: float = 4.0
    attention_factor: float = 0.0        # 0: the scaling's own score factor
    xpos: float = 0.0                    # xPos gamma, 0 = off
    xpos_scale_base: float = 512.0
    theta: Optional[List[float]] = None  # own frequencies: pair i turns by p theta[i]
    angles: Optional[List[List[float]]] = None  # own angles [position][pair]; no scaling

    def is_plain(self):
        return (self.scaling == "none" and self.xpos == 0.0 and self.theta is None
                and self.angles is None)


@dataclass(frozen=True)
class Scaling:
    """One frequency scheme: theta(t, i, d_rot, base, f, p) -> theta'_i of position p from the
    unscaled t = theta_i, and score(f) -> the factor of the attention scores. per_position: theta
    depends on p (else it is computed once for every position)."""
    theta: Callable[[float, int, int, float, Freq, int], float]
    score: Callable[[Freq], float] = lambda f: 1.0
    per_position: bool = False


def _ramp(r, lo, hi):
    return 0.0 if r < lo else 1.0 if r > hi else (r - lo) / (hi - lo)


def _ntk(t, s, i, d_rot):
    return t * math.pow(s, -2.0 * i / (d_rot - 2)) if d_rot > 2 and s != 1.0 else t


def _dims_gamma(i, d_rot, base, f):
    def index(r):
        return d_rot * math.log(f.orig_len / (TWO_PI * r)) / (2.0 * math.log(base))
    lo, hi = index(f.yarn_beta), index(f.yarn_alpha)
    if f.yarn_ramp == "dims":
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0.0), min(hi, float(d_rot - 1))
    if lo == hi:
        hi += 0.001
    return 1.0 - min(max((i - lo) / (hi - lo), 0.0), 1.0)


def _yarn_theta(t, i, d_rot, base, f, p):
    g = _ramp(f.orig_len * abs(t) / TWO_PI, f.yarn_alpha, f.yarn_beta) \
        if f.yarn_ramp == "rotations" else _dims_gamma(i, d_rot, base, f)  # r = L / lambda
    return (1.0 - g) * t / f.factor + g * t


def _llama3_theta(t, i, d_rot, base, f, p):
    g = _ramp(f.orig_len * abs(t) / TWO_PI, f.low_freq_factor, f.high_freq_factor)
    return (1.0 - g) * t / f.factor + g * t


def _dynamic_theta(t, i, d_rot, base, f, p):
    return _ntk(t, max(1.0, f.factor * (p + 1.0) / f.orig_len - (f.factor - 1.0)), i, d_rot)


def _yarn_score(f):
    if f.attention_factor > 0.0:
        return f.attention_factor * f.attention_factor
    if not f.factor > 1.0:
        return 1.0
    m = 0.1 * math.log(f.factor) + 1.0
    return m * m


def _factor_score(f):
    return f.attention_factor * f.attention_factor if f.attention_factor > 0.0 else 1.0


# The schemes, by the config's name (core/nn/rope_freq.c's theta_of and rp_rope_freq_score_scale).
# A new one is an entry here (its parameters: fields of Freq, filled by model.freq_of from the
# config keys of model.DEFAULTS).
SCALINGS = {
    "none": Scaling(lambda t, i, d, b, f, p: t),
    "pi": Scaling(lambda t, i, d, b, f, p: t / f.factor, _factor_score),
    "ntk": Scaling(lambda t, i, d, b, f, p: _ntk(t, f.factor, i, d), _factor_score),
    "yarn": Scaling(_yarn_theta, _yarn_score),
    "dynamic": Scaling(_dynamic_theta, _factor_score, per_position=True),
    "llama3": Scaling(_llama3_theta, _factor_score),
}


def scaling(f):
    if f is None:
        return SCALINGS["none"]
    if f.scaling not in SCALINGS:
        raise ValueError("scaling must be one of %s, got %r" % (", ".join(SCALINGS), f.scaling))
    return SCALINGS[f.scaling]


def theta(d_rot, base, f=None, p=0):
    """theta'_i for i = 0 .. d_rot/2 - 1 (floats) of position p: the standard or own
    frequencies, scaled."""
    s = scaling(f)
    out = []
    for i in range(d_rot // 2):
        t = f.theta[i] if f is not None and f.theta is not None else \
            math.pow(base, -2.0 * i / d_rot)
        out.append(s.theta(t, i, d_rot, base, f, p) if f is not None else t)
    return out


def score_scale(f):
    """The factor the attention scores take (YaRN's temperature; 1 for the others)."""
    return 1.0 if f is None else scaling(f).score(f)


def _magnitude(i, d_rot, p, side, xg, sb):
    """xPos's zeta_i^(side p / scale_base) (1 without xPos: xg = 0)."""
    return math.pow((2.0 * i / d_rot + xg) / (1.0 + xg), float(side) * float(p) / sb) \
        if xg > 0.0 else 1.0


def tables(d_rot, base, positions, f=None, c=1.0, side=1, dtype=torch.float32, learned=None):
    """cos, sin [n, d_rot/2] for the positions (an iterable of ints): m cos(c p theta'_i) and
    m sin(...), m the xPos magnitude zeta_i^(side p / scale_base) (1 without xPos); with own
    angles, the angle of position p on pair i is c angles[p][i]. Computed in float64, rounded to
    dtype (rp_rope_freq_tables).

    learned: learned frequencies (a tensor of at least d_rot/2: learn_freq's rope.freq row 0,
    replacing the scheme's; f then has no scaling and no angles): the angles (c p) theta_i by
    torch's float64 ops, differentiable in them. torch's cos and sin may differ from the C
    library's in the last bit of a float64, so these tables are roper's within a float32 ulp
    rather than bit for bit."""
    half = d_rot // 2
    positions = list(positions)
    xg = f.xpos if f is not None else 0.0
    sb = f.xpos_scale_base if f is not None else 1.0
    if learned is not None:
        th = learned[:half].to(torch.float64)
        cp = torch.tensor([c * float(p) for p in positions], dtype=torch.float64,
                          device=th.device)
        a = cp[:, None] * th[None, :]
        m = torch.tensor([[_magnitude(i, d_rot, p, side, xg, sb) for i in range(half)]
                          for p in positions], dtype=torch.float64, device=th.device)
        m = m.reshape(len(positions), half)
        return (m * torch.cos(a)).to(dtype), (m * torch.sin(a)).to(dtype)
    ang = f.angles if f is not None else None
    per_pos = ang is None and f is not None and scaling(f).per_position
    th = None if ang is not None else theta(d_rot, base, f)
    cos, sin = [], []
    for p in positions:
        if per_pos:
            th = theta(d_rot, base, f, p)
        rc, rs = [], []
        for i in range(half):
            a = c * ang[p][i] if ang is not None else c * float(p) * th[i]
            m = _magnitude(i, d_rot, p, side, xg, sb)
            rc.append(m * math.cos(a))
            rs.append(m * math.sin(a))
        cos.append(rc)
        sin.append(rs)
    shape = (len(cos), half)
    return (torch.tensor(cos, dtype=torch.float64).reshape(shape).to(dtype),
            torch.tensor(sin, dtype=torch.float64).reshape(shape).to(dtype))


def rotate(x, cos, sin, d_rot, pairing="half", sign=1):
    """Rotates the first d_rot features of x [..., T, H, D] (positions on dim -3) by the table rows
    cos, sin [T, d_rot/2]: y_a = x_a c - x_b s, y_b = x_b c + x_a s for each pair (a, b) with
    s = sign sin (rp_rope_forward); pairing "half" pairs feature i with i + d_rot/2, "interleaved"
    2i with 2i + 1. The other features pass through. Differentiable in x."""
    if d_rot == 0:
        return x
    h = d_rot // 2
    c = cos.to(x.dtype)[:, None, :]
    s = (sin if sign > 0 else -sin).to(x.dtype)[:, None, :]
    xr, rest = x[..., :d_rot], x[..., d_rot:]
    if pairing == "half":
        x1, x2 = xr[..., :h], xr[..., h:]
        y = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)
    elif pairing == "interleaved":
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        y = torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).flatten(-2)
    else:
        raise ValueError('pairing must be "half" or "interleaved", got %r' % (pairing,))
    return torch.cat([y, rest], dim=-1)


def sinusoidal(T, d, base=10000.0, dtype=torch.float32):
    """Vaswani et al.'s table [T, d]: [t][2i] = sin(t / base^(2i/d)), [t][2i+1] = cos(...)
    (rp_sinusoidal_forward: float64, rounded to dtype)."""
    rows = []
    for t in range(T):
        row = []
        for j in range(d):
            w = math.pow(base, -(j - j % 2) / d)
            row.append(math.sin(t * w) if j % 2 == 0 else math.cos(t * w))
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64).reshape(T, d).to(dtype)

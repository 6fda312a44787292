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

Vector positions P = (p_1, .., p_A), A = 1 to 3 axes (a grid cell (row, column)), map the
d_rot/2 pairs to the axes by Freq.axes (core/nn/rope_freq.c's site_of; site() here):

    axial     A contiguous blocks of pairs, axis a taking floor(half / A) pairs plus one when
              a < half mod A; pair j of a block of n_a pairs turns by p_a theta_j, theta_j the
              1-D RoPE's of the block's width 2 n_a (Su's 2-D RoPE, EVA-02)
    sections  Freq.sections = the pairs of each axis (adding up to half): the 1-D theta_i, pair i
              turning by p_a for the axis a whose section holds it (Qwen2-VL's M-RoPE)
    mixed     Freq.mix = W [A][half]: pair i turns by sum_a p_a W[a][i] (RoPE-Mixed, Heo et al.
              2024); no scaling, no own frequencies

The scalings apply to axial's blocks as to a 1-D RoPE of their width, and to the 1-D frequencies
of sections; dynamic, xPos and own angles need scalar positions (check() refuses them with A > 1).

docs/positional.md has the derivations. SCALINGS comes from roper's scaling table (schema.json's
"scalings"); a new scheme is its formula in _THETA (and _OWN_SCORE) plus its fields in Freq.
"""

import json
import math
import os
import re
from dataclasses import dataclass
from typing import Callable, List, Optional

import torch

from . import core

TWO_PI = 6.283185307179586476925286766559


# roper's schema (python/gen_schema.lua writes it from roper's own tables); its "scalings" are
# core/nn/rope_freq.c's scaling table: each scaling's name, Hugging Face rope_type, the config
# keys it reads, per_position and own_score.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "schema.json")) as _f:
    SCHEMA = json.load(_f)

# the option readers' messages of Hugging Face's rope_scaling (rp.option_messages(): bindings/
# args.c's lrp_msgs, templates with marks {key}, {got}, ...: config.py's reader of rope_scaling)
OPTIONS = SCHEMA["options"]


def fill(template, **values):
    """(interprets) A message template of schema.json filled in as core's rp_fill_marks fills it:
    each mark {x} given a value replaced by it (str), any other brace left as it is, a value's own
    braces not read again. The companion's one filler."""
    return re.sub(r"\{(\w+)\}", lambda g: str(values[g.group(1)]) if g.group(1) in values
                  else g.group(0), template)


def _say(name, **values):
    """The option readers' message `name` (options.messages) filled in by fill."""
    return fill(OPTIONS["messages"][name], **values)


# the bounds of the option readers (rp.option_messages().bounds): the most axes of a position,
# positions within +-2^53
MAX_AXES = SCHEMA["options"]["bounds"]["max_axes"]  # RP_MAX_AXES
MAX_POS = SCHEMA["options"]["bounds"]["max_pos"]    # LRP_MAX_POS


# the config keys of the frequency scheme by their field of rp_rope_freq (the schema's freq
# column): their rows, whose defaults are Freq's
FREQ_KEYS = {k["freq"]: k for k in SCHEMA["keys"] if "freq" in k}


def _default(field):
    d = FREQ_KEYS[field]["default"]
    return float(d) if FREQ_KEYS[field]["type"] in ("int", "number") else d


@dataclass
class Freq:
    """A frequency scheme (rp_rope_freq of core/nn/rope_freq.h): its fields are those of the
    schema's freq column (config.freq_of fills them from a config), with their defaults."""
    scaling: str = _default("scaling")
    factor: float = _default("factor")  # scaling_factor s
    orig_len: float = _default("orig_len")  # yarn: L (the model: orig_len, or seq_len when 0)
    yarn_alpha: float = _default("yarn_alpha")
    yarn_beta: float = _default("yarn_beta")
    yarn_ramp: str = _default("yarn_ramp")  # "rotations", "dims", "dims_exact" (Hugging Face's)
    low_freq_factor: float = _default("low_freq_factor")  # llama3
    high_freq_factor: float = _default("high_freq_factor")
    attention_factor: float = _default("attention_factor")  # 0: the scaling's own score factor
    xpos: float = _default("xpos")  # xPos gamma, 0 = off
    xpos_scale_base: float = _default("xpos_scale_base")
    theta: Optional[List[float]] = None  # own frequencies: pair i turns by p theta[i]
    angles: Optional[List[List[float]]] = None  # own angles [position][pair]; no scaling
    axes: str = "axial"                  # vector positions: the map of the pairs (AXES)
    sections: Optional[List[int]] = None  # axes "sections": the pairs of each axis
    mix: Optional[List[List[float]]] = None  # axes "mixed": W [axis][pair]

    def is_plain(self):
        """No scaling, xPos, own frequencies or angles, and the axial map (which is 1-D RoPE on
        one axis): the tables of None, for positions of any axes."""
        return (self.scaling == "none" and self.xpos == 0.0 and self.theta is None
                and self.angles is None and self.axes == "axial")


AXES = tuple(m["name"] for m in SCHEMA["axes"]["maps"])  # rp_axes_names
AXIAL, SECTIONS, MIXED = AXES
# How each placement is rotated (core/nn/attention.c: xPos's query side q, o and key side k, v):
# (xPos side, sign). q_n by
# +n theta on the query side, k_i and v_i by +i theta on the key side (v by +c i theta, c the
# mode's v_angle), RoPER's output o_n turned back by -n theta with the query side's magnitude.
PLACEMENTS = {"q": (1, 1), "k": (-1, 1), "v": (-1, 1), "o": (1, -1)}


@dataclass(frozen=True)
class Scaling:
    """One frequency scheme: theta(t, i, d_rot, base, f, p) -> theta'_i of position p from the
    unscaled t = theta_i, and score(f) -> the factor of the attention scores. per_position: theta
    depends on p (else it is computed once for every position), and takes p as a float or as a
    float64 tensor of positions (tables() computes a column of them at once)."""
    theta: Callable[[float, int, int, float, Freq, int], float]
    score: Callable[[Freq], float] = lambda f: 1.0
    per_position: bool = False


def _ramp(r, lo, hi):
    return 0.0 if r < lo else 1.0 if r > hi else (r - lo) / (hi - lo)


def _ntk(t, s, i, d_rot):
    """NTK's theta of pair i (t unscaled) for the factor s: a float, or a float64 tensor of
    factors (a column of positions' own: dynamic's), computed elementwise alike."""
    if d_rot <= 2:
        return t
    if isinstance(s, torch.Tensor):
        return torch.where(s != 1.0, t * torch.pow(s, -2.0 * i / (d_rot - 2)),
                           torch.full_like(s, t))
    return t * math.pow(s, -2.0 * i / (d_rot - 2)) if s != 1.0 else t


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
    s = f.factor * (p + 1.0) / f.orig_len - (f.factor - 1.0)
    return _ntk(t, s.clamp(min=1.0) if isinstance(p, torch.Tensor) else max(1.0, s), i, d_rot)


def _yarn_score(f):
    if f.attention_factor > 0.0:
        return f.attention_factor * f.attention_factor
    if not f.factor > 1.0:
        return 1.0
    m = 0.1 * math.log(f.factor) + 1.0
    return m * m


def _factor_score(f):
    return f.attention_factor * f.attention_factor if f.attention_factor > 0.0 else 1.0


# The formulas, by name (core/nn/rope_freq.c's theta functions; a scaling with own_score has its
# score function here, the others multiply the scores by attention_factor^2 when it is set).
_THETA = {
    "none": lambda t, i, d, b, f, p: t,
    "pi": lambda t, i, d, b, f, p: t / f.factor,
    "ntk": lambda t, i, d, b, f, p: _ntk(t, f.factor, i, d),
    "yarn": _yarn_theta,
    "dynamic": _dynamic_theta,
    "llama3": _llama3_theta,
}
_OWN_SCORE = {"yarn": _yarn_score}


def _scaling_of(row):
    name = row["name"]
    if name not in _THETA or row["own_score"] != (name in _OWN_SCORE):
        raise ImportError("roper_torch: scaling %r of schema.json has no formula here "
                          "(python/roper_torch/rotary.py)" % name)
    score = _OWN_SCORE.get(name, _factor_score if row["keys"] else (lambda f: 1.0))
    return Scaling(_THETA[name], score, per_position=row["per_position"])


# The schemes, by the config's name, in roper's order (rp.scalings()). A new one is a row of
# roper's table and its formula here (its parameters: fields of Freq, filled by config.freq_of
# from the config keys of model.DEFAULTS).
SCALING_ROWS = {row["name"]: row for row in SCHEMA["scalings"]}
SCALINGS = {name: _scaling_of(row) for name, row in SCALING_ROWS.items()}


def scaling(f):
    if f is None:
        return SCALINGS["none"]
    if f.scaling not in SCALINGS:
        raise ValueError("scaling must be one of %s, got %r" % (", ".join(SCALINGS), f.scaling))
    return SCALINGS[f.scaling]


def site(f, n_axes, i, d_rot):
    """(numerics) Where pair i of a placement d_rot wide sits for positions of n_axes axes (0:
    scalar) under f's map (None: axial): (axis, j, width), axis -1 for axes mixed (every axis), j
    the pair's index in the 1-D RoPE of that width it belongs to (axial: its block's, 2 n_a wide;
    otherwise i and d_rot). core/nn/rope_freq.c's site_of."""
    m = f.axes if f is not None else "axial"
    if n_axes < 1 or (m == "axial" and n_axes == 1):
        return 0, i, d_rot
    if m == "mixed":
        return -1, i, d_rot
    half, start = d_rot // 2, 0
    for a in range(n_axes):
        w = f.sections[a] if m == "sections" else half // n_axes + (1 if a < half % n_axes else 0)
        if i < start + w or a == n_axes - 1:
            return (a, i - start, 2 * w) if m == "axial" else (a, i, d_rot)
        start += w
    raise AssertionError("unreachable")


def _unscaled(f, i, at, base):
    """theta_i of pair i sitting at `at` (site()) before the scaling: the own theta[i], else the
    standard one of pair j of a RoPE `width` wide."""
    _, j, width = at
    return f.theta[i] if f is not None and f.theta is not None else \
        math.pow(base, -2.0 * j / width)


def _theta_of(f, i, at, base, p):
    """theta'_i of pair i sitting at `at` (site()) at position p (a float64 tensor of them for a
    per-position scaling): _unscaled, scaled as for that RoPE (theta_of)."""
    t = _unscaled(f, i, at, base)
    return scaling(f).theta(t, at[1], at[2], base, f, p) if f is not None else t


def theta(d_rot, base, f=None, p=0, n_axes=0):
    """(numerics) theta'_i for i = 0 .. d_rot/2 - 1 (floats) of position p: the standard or own
    frequencies, scaled; for positions of n_axes axes under f's map (axial: each block's own,
    rp_rope_freq_theta). Not for axes mixed, whose frequencies are f.mix."""
    return [_theta_of(f, i, site(f, n_axes, i, d_rot), base, p) for i in range(d_rot // 2)]


def score_scale(f):
    """The factor the attention scores take (YaRN's temperature; 1 for the others)."""
    return 1.0 if f is None else scaling(f).score(f)


def _magnitude(i, d_rot, p, side, xg, sb):
    """xPos's zeta_i^(side p / scale_base) (1 without xPos: xg = 0); past the largest float64,
    infinity (C's pow)."""
    if not xg > 0.0:
        return 1.0
    try:
        return math.pow((2.0 * i / d_rot + xg) / (1.0 + xg), float(side) * float(p) / sb)
    except OverflowError:
        return math.inf


def _describe(v):
    """(restated) A value as roper's messages name it (lrp_describe)."""
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "%d" % v
    if isinstance(v, float):  # Lua's tostring: %.14g, and ".0" when that looks like an integer
        s = _g(v, "%.14g")
        return s + ".0" if s.lstrip("-").isdigit() else s
    if isinstance(v, str):
        return 'string "%s"' % v if len(v) <= 40 else "string"
    return "table" if isinstance(v, (list, tuple, dict)) else "nil" if v is None else \
        type(v).__name__


def _g(v, fmt="%g"):
    """(restated) C's printf of the double v in fmt, as roper's messages write it: as Python's, a
    NaN "nan" whatever its sign (core's rp_error and lrp_describe drop the sign printf gives a
    NaN)."""
    if math.isnan(v):
        return "nan"
    return fmt % v


def _integer(v):
    """v as an int when it is an integer within 2^53 (2 or 2.0, not 2.5 nor True), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float) and not (math.isfinite(v) and v == math.floor(v)):
        return None
    return int(v) if -MAX_POS <= v <= MAX_POS else None


def read_positions(positions, what="positions"):
    """(rows, A): positions as a list of tuples of A ints, A = 0 for scalar positions (a list of
    ints: 1-tuples) and 1 to 3 for vector positions (a list of lists of A ints, or anything with
    tolist(): a tensor or array [n] or [n x A]). Raises ValueError naming `what` for another
    type, a ragged list or a value that is not an integer within 2^53."""
    if hasattr(positions, "tolist"):
        positions = positions.tolist()
    if not isinstance(positions, (list, tuple, range)):
        raise ValueError("%s must be a list of integers (or of lists of integers) or a tensor [n] "
                         "or [n x axes], got %s" % (what, _describe(positions)))
    positions = list(positions)
    A = 0
    if positions and isinstance(positions[0], (list, tuple)):
        A = len(positions[0])
        if not 1 <= A <= MAX_AXES:
            raise ValueError("%s[1] holds %d integers: 1 to %d axes expected" % (what, A, MAX_AXES))
    rows = []
    for r, row in enumerate(positions, 1):
        if A and (not isinstance(row, (list, tuple)) or len(row) != A):
            raise ValueError("%s[%d] must be a list of %d integers, got %s"
                             % (what, r, A, _describe(row)))
        vals = []
        for a, v in enumerate(row if A else [row], 1):
            p = _integer(v)
            if p is None:
                raise ValueError("%s%s must be an integer within 2^53, got %s"
                                 % (what, "[%d][%d]" % (r, a) if A else "[%d]" % r,
                                    _describe(v)))
            vals.append(p)
        rows.append(tuple(vals))
    return rows, A


def _mix_rows(f, n_axes):
    """(restated) The companion's own rule beside rp_rope_freq_check's mix: f.mix (lists) holds one
    row per axis, all of one length (roper's matrix is [axes x n_mix] by its layout, so this
    message has no template in core)."""
    if len(f.mix) != n_axes or any(len(r) != len(f.mix[0]) for r in f.mix):
        raise ValueError("mix holds %d rows of %s pairs; the positions have %d axes (one row each)"
                         % (len(f.mix), "/".join(sorted({"%d" % len(r) for r in f.mix})), n_axes))


def scheme_json(f):
    """f's scalars as JSON of the config's frequency keys (schema.json's freq column), as
    core.check_scheme takes them."""
    out = {}
    for field, k in FREQ_KEYS.items():
        v = getattr(f, field)
        out[k["name"]] = int(v) if k["type"] == "int" and float(v).is_integer() else v
    return json.dumps(out)


def check(f, n_axes, d_rot, last, what="d_rot"):
    """Refuses what f cannot do on a placement d_rot wide for positions of n_axes axes up to
    `last`: with roper's library, what rp.rope.angles refuses, in core's words
    (core.check_scheme, naming the width `what`);
    without it, only a map that is not one of AXES and a mix that is not one row per axis
    (_mix_rows): the rest is trusted."""
    if f is None:
        return
    if f.axes not in AXES:
        raise ValueError("axes must be one of %s, got %s" % (", ".join(AXES), _describe(f.axes)))
    if f.mix is not None and n_axes >= 1:
        _mix_rows(f, n_axes)
    if not core.LIB:
        return
    t, _keep = core.tables(f.theta, f.angles, None, n_axes, AXES.index(f.axes), f.sections,
                           f.mix)
    core.check_scheme(scheme_json(f), t, d_rot, last, what)


def _angle(cp, at, th, W, i):
    """(numerics) The angle of pair i sitting at `at` (site()): cp[a] = c p_a, the position on axis
    a times c, times theta'_i (th[i]), or with a mix matrix sum_a (c p_a) W[a][i] in the order of
    the axes (rp_rope_freq_tables: W[0]'s term alone for one axis). Floats, or tensors (the columns
    of cp, the entries or rows of th and W) for the differentiable tables."""
    if W is None:
        return cp[at[0]] * th[i]
    a = cp[0] * W[0][i]
    for b in range(1, len(cp)):
        a = a + cp[b] * W[b][i]
    return a


# ---- the tables, vectorised: torch's float64 cos, sin and pow, then the C library's where the
# rounding could differ ---------------------------------------------------------------------------
#
# roper rounds m cos(a) and m sin(a), computed in float64 by the C library, to float32. torch's
# float64 cos, sin and pow (SLEEF's vector code on a CPU, CUDA's on a GPU) are each within 1 to 2
# ulp of the true value, as the C library's are, so the two differ by a few ulp of float64: the
# float32 roundings differ only where a float32 rounding boundary lies between them (about one
# entry in 2^28). _exact_round finds every entry whose float64 value lies within LIBM_REL of a
# boundary (256 times that difference: one entry in about 2^19) and recomputes just those with
# Python's math module (the C library's functions, as the C code calls them), so the float32
# tables are roper's bit for bit while the rest is vectorised.
LIBM_REL = 2.0 ** -44   # |torch's - the C library's| <= LIBM_REL |value|: cos, sin, pow, m cos(a)
ANGLE_REL = 2.0 ** -48  # an angle from torch's pow (dynamic's theta): within ANGLE_REL |a| of C's
FAR = 2.0 ** 40         # angles beyond (range reduction of libraries that bound it): math's
_BLOCK = 1 << 16        # the entries of a block of rows that tables() computes at once (a GPU:
                        # 64 times more, fewer launches)


def _exact_round(vals, bounds, redo, dtypes):
    """(numerics) vals, a list of float64 tensors of one shape (torch's values of the C library's
    functions, each within its entry of bounds of the C library's value: a tensor of absolute
    bounds, or a float r for r |value|), with every entry whose
    rounding to one of dtypes could differ from the C library's value's replaced, in place, in
    all of them by redo's values: redo(index) takes the list of those entries' indices (lists)
    and gives a tuple of the C library's values (by Python's math) for each. The rounding of an
    entry is certain when y - bound and y + bound round alike (rounding is monotonic); NaNs and
    infinite bounds are always redone. Returns (vals, the number of entries redone)."""
    flag = None
    for y, bound in zip(vals, bounds):
        if isinstance(bound, float):  # y (1 -+ r): two passes (its own rounding is far less)
            lo, hi = y * (1.0 - bound), y * (1.0 + bound)
        else:
            lo, hi = y - bound, y + bound
        for dt in dtypes:
            f = lo.to(dt) != hi.to(dt)
            flag = f if flag is None else flag.logical_or_(f)
    where = flag.nonzero(as_tuple=False)
    if not len(where):
        return vals, 0
    got = torch.tensor(redo(where.tolist()), dtype=torch.float64).to(vals[0].device)
    at = tuple(where.t())
    for k, y in enumerate(vals):
        y[at] = got[:, k]
    return vals, len(where)


def _rounded_to(dtype):
    """The dtypes whose roundings _exact_round makes the C library's: float32 (roper's tables;
    a float64 table rounds to roper's float32 one) and dtype when it is narrower."""
    return (torch.float32,) if dtype in (torch.float32, torch.float64) else (torch.float32, dtype)


def _position_tensor(positions):
    """(checks) (P, A): the positions (as read_positions takes them) as an int64 tensor [n,
    max(A, 1)] and their axes A; a range or an integer tensor without reading entry by entry
    (the same verdicts: within +-2^53), anything else through read_positions (its messages)."""
    if isinstance(positions, range):
        if len(positions) and not (-MAX_POS <= min(positions[0], positions[-1]) and
                                   max(positions[0], positions[-1]) <= MAX_POS):
            return _position_tensor(list(positions))
        return torch.arange(positions.start, positions.stop, positions.step,
                            dtype=torch.int64).reshape(-1, 1), 0
    if isinstance(positions, torch.Tensor) and not positions.is_floating_point() and \
            positions.dtype != torch.bool and not positions.is_complex() and \
            (positions.dim() == 1 or (positions.dim() == 2 and
                                      1 <= positions.shape[1] <= MAX_AXES)) and \
            (positions.numel() == 0 or positions.abs().max().item() <= MAX_POS):
        P = positions.detach().to("cpu", torch.int64)
        return P.reshape(-1, 1) if P.dim() == 1 else P, 0 if P.dim() == 1 else P.shape[1]
    rows, A = read_positions(positions)
    return torch.tensor(rows, dtype=torch.int64).reshape(len(rows), max(A, 1)), A


def tables(d_rot, base, positions, f=None, c=1.0, side=1, dtype=torch.float32, learned=None,
           device=None):
    """(numerics) cos, sin [n, d_rot/2] for the positions (an iterable of ints, or of n lists of A =
    1 to 3 ints: vector positions, mapped to the pairs by f.axes; or a tensor [n] or [n x A] of
    ints): m cos(a) and m sin(a), a the angle of pair i, c p theta'_i (p the position on the
    pair's axis) or c sum_a p_a W[a][i] with axes mixed, m the xPos magnitude zeta_i^(side p /
    scale_base) (1 without xPos); with own angles, the angle of position p on pair i is c
    angles[p][i]. Computed in float64 by torch's vector functions on device (default the CPU),
    block by block of rows, rounded to dtype: in float32 (and a float64 table rounded to
    float32) roper's tables (rp_rope_freq_tables) bit for bit, the entries whose rounding torch's
    functions could change recomputed with the C library's (_exact_round); the float64 values are
    within LIBM_REL of the C library's.

    learned: learned frequencies (learn_freq's rope.freq, replacing the scheme's; f then has no
    scaling and no angles): row 0, a tensor of at least d_rot/2 theta_i, or with axes mixed rows
    0 .. A-1, W [A, >= d_rot/2]: the angles by torch's float64 ops in the same order,
    differentiable in them, on learned's device. torch's cos and sin may differ from the C
    library's in the last bit of a float64, so these tables are roper's within a float32 ulp
    rather than bit for bit."""
    half = d_rot // 2
    P, A = _position_tensor(positions)
    n = P.shape[0]
    check(f, A, d_rot, P.max().item() if n else 0)
    at = [site(f, A, i, d_rot) for i in range(half)]
    xg = f.xpos if f is not None else 0.0
    sb = f.xpos_scale_base if f is not None else 1.0
    mixed = f is not None and f.axes == "mixed"
    dev = learned.device if learned is not None else torch.device(device or "cpu")
    axis = [max(s[0], 0) for s in at]
    one_axis = all(x == axis[0] for x in axis)
    zeta = torch.tensor([(2.0 * i / d_rot + xg) / (1.0 + xg) for i in range(half)],
                        dtype=torch.float64, device=dev)

    def cols(cp, th):  # c p (the pair's axis) theta: th [half] or [rows, half]
        return (cp[:, axis[0]:axis[0] + 1] if one_axis else cp[:, axis]) * th

    def mixed_angles(cp, W):  # sum_a (c p_a) W[a][i], in the order of the axes
        a = cp[:, 0:1] * W[0]
        for b in range(1, cp.shape[1]):
            a = a + cp[:, b:b + 1] * W[b]
        return a

    def magnitudes(Pd):  # xPos's, along a scalar position (no xPos with A > 1); None without
        return torch.pow(zeta[None, :], ((float(side) * Pd[:, 0]) / sb)[:, None]) \
            if xg > 0.0 else None

    if learned is not None:
        Pd = P.to(dev).to(torch.float64)  # exact: |p| <= 2^53
        cp, m = c * Pd, magnitudes(Pd)    # c p_a, as roper's (c * (double)p)
        a = mixed_angles(cp, learned[:, :half].to(torch.float64)) if mixed else \
            cols(cp, learned[:half].to(torch.float64))
        if m is None:
            return torch.cos(a).to(dtype), torch.sin(a).to(dtype)
        return (m * torch.cos(a)).to(dtype), (m * torch.sin(a)).to(dtype)
    ang = f.angles if f is not None else None
    if ang is not None and n and P[:, 0].min().item() < 0:
        p = P[(P[:, 0] < 0).nonzero()[0, 0], 0].item()  # the first (Python would index from the
        raise ValueError("position %d is below 0, where the angle table starts" % p)
    per_pos = ang is None and not mixed and f is not None and scaling(f).per_position
    th = None if ang is not None or mixed or per_pos else \
        [_theta_of(f, i, at[i], base, 0) for i in range(half)]
    W = f.mix if mixed else None
    own = torch.tensor([row[:half] for row in (ang if ang is not None else W)],
                       dtype=torch.float64, device=dev) if ang is not None or mixed else None
    t = torch.tensor(th if th is not None else [_unscaled(f, i, at[i], base)
                                                for i in range(half)],
                     dtype=torch.float64, device=dev)
    rounded = _rounded_to(dtype)
    out_cos = torch.empty(n, half, dtype=dtype, device=dev)
    out_sin = torch.empty(n, half, dtype=dtype, device=dev)
    step = max(1, (_BLOCK if dev.type == "cpu" else 64 * _BLOCK) // max(half, 1))
    for lo in range(0, n if half else 0, step):  # blocks of rows: small temporaries
        Pb = P[lo:lo + step]
        Pd = Pb.to(dev).to(torch.float64)  # exact: |p| <= 2^53
        cp = c * Pd                        # c p_a, as roper's (c * (double)p)
        m = magnitudes(Pd)
        thb = None
        if ang is not None:
            a = c * own[Pb[:, 0].to(dev)]
        elif mixed:
            a = mixed_angles(cp, own)
        elif per_pos:  # each position its own theta'_i (the scaling's formula on a column)
            thb = torch.stack([torch.as_tensor(_theta_of(f, i, at[i], base, Pd[:, 0]),
                                               dtype=torch.float64, device=dev)
                               .expand(Pb.shape[0]) for i in range(half)],
                              dim=1).reshape(Pb.shape[0], half)
            a = cols(cp, thb)
        else:
            a = cols(cp, t)
        cos, sin = torch.cos(a), torch.sin(a)
        if m is not None:
            cos, sin = cos.mul_(m), sin.mul_(m)
        # each value within LIBM_REL of itself (ulps of the result: both libraries bound their
        # errors so); a per-position theta'_i from torch's pow (where it is not theta_i
        # itself, which takes no pow: dynamic below its length) puts the angle within
        # ANGLE_REL |a| of roper's, which moves the value by up to m ANGLE_REL |a| more; far
        # angles are always redone
        far = None
        if thb is not None:
            far = (a.abs() * ANGLE_REL).masked_fill_(thb == t, 0.0)
            if m is not None:
                far.mul_(m)
        huge = a.numel() and max(-a.min().item(), a.max().item()) > FAR
        bounds = [LIBM_REL, LIBM_REL]
        if far is not None or huge:
            bounds = []
            for y in (cos, sin):
                bd = y.abs().mul_(LIBM_REL)
                if far is not None:
                    bd.add_(far)
                bounds.append(bd.masked_fill_(a.abs() > FAR, math.inf) if huge else bd)

        def redo(index, lo=lo):  # roper's entries, by the C library's functions (scalar code)
            rows = P[[lo + r for r, _ in index]].tolist()
            out = []
            for row, (_, i) in zip(rows, index):
                if ang is not None:
                    x = c * ang[row[0]][i]
                else:
                    tt = th if not per_pos else {i: _theta_of(f, i, at[i], base, row[0])}
                    x = _angle([c * float(p) for p in row], at[i], tt, W, i)
                mag = _magnitude(i, d_rot, row[0], side, xg, sb)
                out.append((mag * math.cos(x), mag * math.sin(x)))
            return out

        (cos, sin), _ = _exact_round([cos, sin], bounds, redo, rounded)
        out_cos[lo:lo + step] = cos
        out_sin[lo:lo + step] = sin
    return out_cos, out_sin


def rotate(x, cos, sin, d_rot, pairing="half", sign=1):
    """(numerics) Rotates the first d_rot features of x [..., T, H, D] (positions on dim -3) by the
    table rows cos, sin [T, d_rot/2]: y_a = x_a c - x_b s, y_b = x_b c + x_a s for each pair (a, b)
    with s = sign sin (rp_rope_forward); pairing "half" pairs feature i with i + d_rot/2,
    "interleaved" 2i with 2i + 1. The other features pass through. Differentiable in x."""
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


def sincos_table(T, freqs, layout, dtype=torch.float32):
    """(numerics) A table [T, len(layout)] of sines and cosines of t freqs[j] at t = 0 .. T-1:
    column k is sin (layout[k] == "s") or cos ("c") of t freqs[j[k]] (j[k] = the column's
    frequency, layout a string of "s"/"c" with freqs per column), computed as roper computes its
    sinusoidal tables (float64 with the C library's sin and cos, rounded to dtype: bit for bit
    in float32 by _exact_round)."""
    w = torch.tensor(freqs, dtype=torch.float64)
    a = torch.arange(T, dtype=torch.float64)[:, None] * w[None, :]
    is_sin = torch.tensor([ch == "s" for ch in layout], dtype=torch.bool)
    y = torch.where(is_sin, torch.sin(a), torch.cos(a)).reshape(T, len(layout))

    def redo(index):
        return [((math.sin if layout[k] == "s" else math.cos)(float(t) * freqs[k]),)
                for t, k in index]

    bound = (y.abs() * LIBM_REL).masked_fill(a.abs() > FAR, math.inf) \
        if a.numel() and a.abs().max().item() > FAR else LIBM_REL
    (y,), _ = _exact_round([y], [bound], redo, _rounded_to(dtype))
    return y.to(dtype)


def sinusoidal(T, d, base=10000.0, dtype=torch.float32):
    """(numerics) Vaswani et al.'s table [T, d]: [t][2i] = sin(t / base^(2i/d)), [t][2i+1] =
    cos(...) (rp_sinusoidal_forward: float64, rounded to dtype; sincos_table)."""
    return sincos_table(T, [math.pow(base, -(j - j % 2) / d) for j in range(d)],
                        "sc" * (d // 2) + "s" * (d % 2), dtype)

"""rp.model's config for the companion: the keys, their types and defaults and when each does
something come from roper's schema (schema.json, written from roper's own rows by
python/gen_schema.lua: rp.model_keys() and rp.pe_modes()). MODES holds what the modules need of
each positional mode (core/nn/pe.c's mode table, from schema.json).

config(cfg) gives the full config. Its rules have one home, roper's core: when the companion finds
roper's C library (core.py), config() hands the config to core's rp_config_check_json and a
refusal is ValueError with core's message, word for word. Without the library it checks only
Python's types (each key's type, an enum's names, rotate's letters) and trusts the rest: a config
that roper would refuse may then build a model that is not roper's (docs/interop.md)."""

import json
import math
from dataclasses import dataclass

from . import core, rotary
from .rotary import _say


@dataclass(frozen=True)
class Mode:
    """A row of core/nn/pe.c's mode table as schema.json holds it (rp.pe_modes())."""
    absolute: str       # "none", "sinusoidal", "learned": added to the embeddings
    rotate: str         # the placements rotated by default
    rotary: bool        # takes any `rotate` subset
    v_angle: float      # c: v_i is rotated by +c i theta
    rel: str            # the relative kind ("" for none)
    linear: bool        # linear attention supports it
    scale_terms: int    # the scores are scaled by 1/sqrt(scale_terms d_k)
    rel_params: tuple   # the relative terms' parameters: {name, use, rows, cols, init}


SCHEMA = rotary.SCHEMA  # roper's schema.json
KEYS = SCHEMA["keys"]  # rp.model_keys(): one row per config key, in roper's order
KEY = {k["name"]: k for k in KEYS}
PE = {m["name"]: m for m in SCHEMA["modes"]}  # rp.pe_modes()
MODES = {n: Mode(m["absolute"], m["rotate"], m["rotary"], float(m["v_angle"]), m["rel"],
                 m["linear"], m["scale_terms"], tuple(m["rel_params"])) for n, m in PE.items()}

# rp.model's keys and defaults (vocab has none: it is required)
DEFAULTS = {k["name"]: None if k["required"] else k["default"] for k in KEYS}
# rp.model's options besides the schema's keys: the own tables and positions (RoperTransformer's
# arguments, or keys of its config) and Hugging Face's rope_scaling and rope_theta (config() maps
# them onto the schema's keys)
OWN = ("freq", "angles", "positions", "axes", "sections", "mix", "rope_scaling", "rope_theta")
class Config(dict):
    """A config config() checked and completed: config() gives it back as it is."""


class StoredConfig(dict):
    """A config as a file holds it (roper.config, read by stored.from_json): checked as roper's
    readers check one (rp_model_cfg_check on the values as stored: a fraction_q of 0 means "not
    set"), then a value that does nothing for the mode is dropped (its default), as roper's
    model ignores it."""


def _join(names):
    """(restated) rp_join_names: "a", "a or b", "a, b or c"."""
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _lua_integer(v):
    """v as an int when roper reads it as an integer (an integer-valued number within 64 bits, 2
    or 2.0, not 2.5, nan nor True), else None."""
    if isinstance(v, bool) or not hasattr(v, "__float__"):
        return None
    try:
        x = float(v)
        i = int(v) if isinstance(v, int) else int(x) if math.isfinite(x) and x == int(x) else None
    except (OverflowError, TypeError, ValueError):
        return None
    return i if i is not None and -2 ** 63 <= i < 2 ** 63 else None


def _rotate_mask(s):
    """The placements of a non-empty string of distinct letters of "qkvo" as their letters in q,
    k, v, o order, or None."""
    if not isinstance(s, str) or not s or any(c not in "qkvo" for c in s) or \
            len(set(s)) != len(s):
        return None
    return "".join(c for c in "qkvo" if c in s)


def _float(v):
    """A Python number as a float, an int past float's range as an infinity of its sign (Lua
    reads such a literal so)."""
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def _typed(k, v):
    """The value v of row k as Python's type of the row (float, int, a name, rotate's letters,
    bool), or ValueError: the companion's own check of types, when roper's core is not there."""
    name, t = k["name"], k["type"]
    want = {"number": "a number", "int": "an integer", "seed": "an integer",
            "bool": "true or false", "rotate": "a string of distinct letters of qkvo"}
    if t == "number" and not isinstance(v, (bool, str)) and hasattr(v, "__float__"):
        return _float(v)
    if t in ("int", "seed") and _lua_integer(v) is not None:
        return _lua_integer(v)
    if t == "enum" and isinstance(v, str) and v in k["names"]:
        return v
    if t == "rotate" and _rotate_mask(v) is not None:
        return _rotate_mask(v)
    if t == "bool" and isinstance(v, bool):
        return v
    raise ValueError("'%s' must be %s, got %r" % (
        name, want.get(t, "one of " + ", ".join(k.get("names", []))), v))


def _json_value(k, v):
    """The value v of row k as core reads it from JSON: a number of an integer row that is an
    integer as an int (rp.model takes 2.0 for 2); a number JSON cannot hold (nan, inf) refused."""
    if isinstance(v, bool) or isinstance(v, str):
        return v
    if k["type"] in ("int", "seed") and _lua_integer(v) is not None:
        return _lua_integer(v)
    if hasattr(v, "__float__") and not isinstance(v, (list, tuple, dict)):
        try:
            x = _float(v)
        except (TypeError, ValueError):
            return v
        if not math.isfinite(x):
            raise ValueError("'%s' must be a finite number, got %s" % (k["name"], rotary._g(x)))
        return int(v) if isinstance(v, int) else x
    return v


def _value_str(k, x):
    """x as roper.config writes it: a seed as C's unsigned, a number as %g, a bool by its names
    (schema.json's), the rest as written."""
    if k["type"] == "seed":
        return "%d" % (x % 2 ** 64)
    if k["type"] == "number":
        return rotary._g(x)
    if k["type"] == "bool":
        return k["names"][int(bool(x))]
    return "%s" % x


def _is_default(k, x):
    if k["type"] == "seed":
        return x % 2 ** 64 == k["default"] % 2 ** 64
    if k["type"] == "rotate":
        return x == ""
    return x == k["default"]


def _facts(c):
    """The facts of the config c that the schema's needs test (pe, attention, scaling; the
    placements rotated: rotate, else and with linear attention the mode's own; xPos on or
    off)."""
    rot = c["rotate"] if c["rotate"] and c["attention"] != "linear" else PE[c["pe"]]["rotate"]
    return {"pe": c["pe"], "attention": c["attention"], "rotate": rot, "scaling": c["scaling"],
            "xpos": "on" if c["xpos"] > 0.0 else "off"}


def _unused(c, k):
    """None when row k's key does something for the config c, else the first of the row's needs
    (schema.json) whose fact c holds at a value the need does not hold for."""
    fact = _facts(c)
    for need in k["needs"]:
        if fact[need["fact"]] not in need["holds"]:
            return need
    return None


def widths(cfg):
    """{placement: d_rot} of the rotated placements (with linear attention the mode's own): each
    floor(f d_k) of the fraction f of the schema's row that roper picks (of the placement rows that
    name it, the one with an unset_as when set, else the other). Not checked here (core checks
    that a width is even and >= 2)."""
    D = cfg["d_model"] // cfg["heads"]
    rot = cfg.get("rotate") or MODES[cfg["pe"]].rotate
    out = {}
    for p in (p for p in "qkvo" if p in rot):
        rows = [k for k in KEYS if k["use"] == "placement" and p in k["placements"]]
        own = [k for k in rows if "unset_as" in k and (cfg.get(k["name"]) or 0.0) > 0.0]
        k = own[0] if own else next(k for k in rows if "unset_as" not in k)
        out[p] = int(math.floor(cfg[k["name"]] * D))
    return out


def freq_of(cfg, theta=None, angles=None, axes="axial", sections=None, mix=None):
    """The model's frequency scheme: the keys of the schema's freq column in their fields
    (orig_len seq_len when 0), the own frequencies or angles and the map of vector positions
    (which safetensors files do not hold)."""
    f = {field: float(cfg[k["name"]]) if k["type"] in ("int", "number") else cfg[k["name"]]
         for field, k in rotary.FREQ_KEYS.items()}
    f["orig_len"] = f["orig_len"] or float(cfg["seq_len"])
    return rotary.Freq(**f, theta=None if theta is None else [float(t) for t in theta],
                       angles=None if angles is None else [[float(a) for a in r] for r in angles],
                       axes=axes, sections=None if sections is None else list(sections),
                       mix=None if mix is None else [[float(w) for w in r] for r in mix])


def _normalise(c):
    """(restated) The one stored form (core's rp_model_cfg_normalise): the mode's own rotate, and a key equal
    to the key its 0 stands for (the schema's unset_as: fraction_q and fraction_qk), are "not
    set" ("" and 0), so that equal models have equal configs."""
    if c["rotate"] == MODES[c["pe"]].rotate:
        c["rotate"] = ""
    for k in KEYS:
        if "unset_as" in k and c[k["name"]] == c[k["unset_as"]]:
            c[k["name"]] = 0.0


# ---- Hugging Face's names (bindings/freq.c's table, from schema.json) ----

# rope_type: roper's scaling row (rp.scalings(): its hf_fields and hf_needs)
_HF_TYPES = {sc["hf"]: sc for sc in SCHEMA["scalings"] if "hf" in sc}
# the rope_scaling fields roper reads, in its order: {name, key, max, on, off}
# (rp.scalings().hf_map)
_HF_MAP = SCHEMA["hf_map"]


def _rope_theta(c):
    """(checks) rope_theta, Hugging Face's name of base, read as lrp_optbase reads it: a finite
    number > 0, else ValueError with its message."""
    if c.get("base") is not None:
        raise ValueError(_say("base_exclude"))
    v = c["rope_theta"]
    if isinstance(v, (bool, str)) or not hasattr(v, "__float__"):
        raise ValueError(_say("number", key="rope_theta", got=rotary._describe(v)))
    v = _float(v)
    if not math.isfinite(v):
        raise ValueError(_say("finite", key="rope_theta", got=rotary._describe(v)))
    if not v > 0:
        raise ValueError(_say("positive", key="rope_theta", got=rotary._describe(v)))
    return v


def _hf_value(f, v):
    """(checks) The value v of rope_scaling field f (a row of _HF_MAP) read by its row (hf_read
    of bindings/freq.c), else ValueError."""
    if "on" in f:
        if not isinstance(v, bool):
            raise ValueError(_say("hf_boolean", field=f["name"], got=rotary._describe(v)))
        return f["on"] if v else f["off"]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(_float(v)):
        got = _float(v) if isinstance(v, int) and not isinstance(v, bool) else v
        raise ValueError(_say("hf_number", field=f["name"], got=rotary._describe(got)))
    v = float(v)
    if "key" in f and KEY[f["key"]]["type"] == "int":
        if v != math.floor(v) or not 1.0 <= v <= f["max"]:
            raise ValueError(_say("hf_integer", field=f["name"], max=f["max"],
                                  got=rotary._describe(v)))
        return int(v)
    return v


def _rope_scaling(c, full):
    """(checks) A rope_scaling table as a model's config.json writes it, mapped onto roper's keys
    in full (lrp_opt_rope_scaling: the rope_type, the fields each reads and needs, and the key each
    sets from schema.json), or ValueError with rp.model's message. Returns the names the keys it
    sets go by in messages (core.check_shown: {"yarn_alpha": "'beta_slow'", ...})."""
    t = c["rope_scaling"]
    if not isinstance(t, (dict, list, tuple)):
        raise ValueError(_say("hf_table", got=rotary._describe(t)))
    t = t if isinstance(t, dict) else {}  # a list holds no rope_type (Lua: its fields 1, 2, ..)
    for k in KEYS:
        if (k["use"] in ("scaled", "scalings") or k["name"] == "scaling") and \
                c.get(k["name"]) is not None:
            raise ValueError(_say("hf_exclude", key=k["name"]))
    rt, ty = t.get("rope_type"), t.get("type")
    if rt is not None and ty is not None and rt != ty:
        raise ValueError(_say("hf_differ"))
    name = rt if rt is not None else ty
    if not isinstance(name, str):
        raise ValueError(_say("hf_type_string", got=rotary._describe(name)))
    if name in rotary.OPTIONS["hf_unsupported"]:
        raise ValueError(_say("hf_unsupported", type=name))
    if name not in _HF_TYPES:
        raise ValueError(_say("hf_type", type=name, names=_join(_HF_TYPES)))
    row = _HF_TYPES[name]
    for key in t:
        if key in ("rope_type", "type"):
            continue
        if key not in (f["name"] for f in _HF_MAP):
            raise ValueError(_say("hf_unknown", field="'%s'" % key if isinstance(key, str) else
                                  rotary._describe(key),
                                  names=", ".join(f["name"] for f in _HF_MAP)))
        if key not in row["hf_fields"]:
            raise ValueError(_say("hf_nothing", field=key, type=name))
    v = {f["name"]: _hf_value(f, True if t.get(f["name"]) is None else t[f["name"]])
         for f in _HF_MAP if f["name"] in row["hf_fields"] and
         (t.get(f["name"]) is not None or "on" in f)}  # a boolean absent: true
    for fields in row["hf_needs"]:
        if not all(t.get(f) is not None for f in fields):
            raise ValueError(_say("hf_needs", type=name, names=" and ".join(fields)))
    if v.get("attention_factor") == 0:  # roper's 0 is the scaling's own (lrp_opt_rope_scaling)
        raise ValueError(_say("hf_zero"))
    full["scaling"] = row["name"]
    shown = {f["key"]: "'%s'" % f["name"] for f in _HF_MAP
             if "key" in f and f["name"] in row["hf_fields"]}
    for f in _HF_MAP:
        if "key" in f and f["name"] in v:
            full[f["key"]] = v[f["name"]]
    # Hugging Face: attention_factor, else get_mscale(s, mscale) / get_mscale(s, mscale_all_dim)
    # when both are given (and not 0), else 0.1 ln s + 1 (roper's own: 0)
    if "attention_factor" not in v and v.get("mscale") and v.get("mscale_all_dim"):
        def mscale(x, m):
            return 1.0 if x <= 1.0 else 0.1 * m * math.log(x) + 1.0
        num = mscale(v.get("factor", 1.0), v["mscale"])
        den = mscale(v.get("factor", 1.0), v["mscale_all_dim"])
        # (C's division: by 0, an infinity of the numerator's sign, or NaN for 0 / 0)
        af = num / den if den != 0 else math.copysign(math.inf, num) if num != 0 else math.nan
        if not (math.isfinite(af) and af > 0):  # (0 would read as the scaling's own)
            raise ValueError(_say("hf_mscale", got=rotary._describe(af)))
        full["attention_factor"] = af
    return shown


def config(cfg=None, **kw):
    """rp.model's config with its defaults filled in: a Config, a dict of every key of DEFAULTS,
    the mode's own rotate and the shared fractions "not set" ("" and 0) as roper stores them
    (a Config given alone comes back as it is: the modules pass theirs on); rope_theta and
    rope_scaling, Hugging Face's names, mapped onto roper's keys. With roper's core (core.LIB) the
    config is checked by core as rp.model checks it and a refusal raises ValueError with core's
    message; without it only the keys' names and Python types are checked. A StoredConfig
    (stored.from_json's, checked by core as a file's reader checks it) is completed without a
    check, a value that does nothing for its mode set to its default. The other keys of OWN are
    left to the caller (RoperTransformer's arguments)."""
    if isinstance(cfg, Config) and not kw:
        return cfg
    stored = isinstance(cfg, StoredConfig) and not kw
    c = dict(cfg or {}, **kw)
    for name in c:
        if not isinstance(name, str):
            raise ValueError("config keys must be strings, got %r" % (name,))
        if name not in KEY and name not in OWN and not core.LIB:
            raise ValueError("unknown config key '%s' (the keys: %s)"
                             % (name, ", ".join(list(KEY) + list(OWN))))
    given = {name: v for name, v in c.items() if name not in OWN and v is not None}
    if c.get("rope_theta") is not None:
        given["base"] = _rope_theta(c)
    shown = _rope_scaling(c, given) if c.get("rope_scaling") is not None else None
    if core.LIB and not stored:  # core's checks: rp.model's
        text = {}
        for k in KEYS:  # the keys a file must hold: those left out at rp.model's defaults
            if k["json"] == "required" and not k["required"] and k["name"] not in given:
                text[k["name"]] = DEFAULTS[k["name"]]
        for name, v in given.items():
            text[name] = _json_value(KEY[name], v) if name in KEY else v
        text = json.dumps(text, allow_nan=False)
        if shown:  # the rope_scaling fields' values in their names (lrp_opt_rope_scaling)
            try:
                core.check_shown(text, shown)
            except ValueError as e:
                raise ValueError(_say("hf_range", what=str(e))) from None
        core.check(text, core.WRITTEN)
    full = {}
    for k in KEYS:
        name = k["name"]
        if name not in given:
            if k["required"]:
                raise ValueError("'%s' is required (%s)" % (name, k["help"]))
            full[name] = DEFAULTS[name]
        else:
            full[name] = _typed(k, given[name])
    _normalise(full)
    if stored:  # a value that does nothing for the mode (a file of an older roper may hold one)
        # is its default: roper's model does not use it, and m:config() leaves it out
        for k in [k for k in KEYS if not _is_default(k, full[k["name"]]) and _unused(full, k)]:
            full[k["name"]] = DEFAULTS[k["name"]]
    return Config(full)

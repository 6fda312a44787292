"""A config as a safetensors file's roper.config holds it: the JSON object roper writes
(core/io/safetensors_config.c's rp_model_cfg_to_json) and reads (rp_model_cfg_from_json, then
rp_model_cfg_check), so that a file either side writes is the file the other writes.

to_json(cfg) -> str: the object roper writes for the checked config cfg (config.config()): the
keys of the schema's json column (rp.model_keys()'s `json`: "required" and "always" every time,
"applies" when the key does something for the config, "set" when it differs from its default),
in the schema's order, numbers in the shortest "%.15g" to "%.17g" form that reads back exactly.

from_json(text) -> Config. With roper's core (core.LIB) the text is checked by core as roper's
file reader checks it (rp_config_check_json, STORED): a refusal is ValueError with core's
message, "bad roper.config (...)" or "bad model config: ...". Without it the text is read by
Python's json and only its keys' names and types are checked: the companion trusts a file roper
wrote (docs/interop.md)."""

import json

from . import config as _cfg
from . import core


def _num_str(x):
    """The shortest of "%.15g", "%.16g", "%.17g" of x that reads back as x (num_str)."""
    for prec in (15, 16, 17):
        s = "%.*g" % (prec, x)
        if float(s) == x:
            break
    return s


def _written(c, k):
    """1 when roper.config holds row k of the config c (written())."""
    j = k["json"]
    if j in ("required", "always"):
        return True
    if j == "applies":
        return _cfg._unused(c, k) is None
    return not _cfg._is_default(k, c[k["name"]])


def to_json(c):
    """roper.config for the config c (a Config: config.config's), as roper writes it."""
    out = []
    for k in _cfg.KEYS:
        if not _written(c, k):
            continue
        t, v = k["type"], c[k["name"]]
        if t == "number":
            val = _num_str(float(v))
        else:  # a name (enum, rotate) quoted
            val = _cfg._value_str(k, v)
            val = '"%s"' % val if t in ("enum", "rotate") else val
        out.append('"%s":%s' % (k["name"], val))
    return "{" + ",".join(out) + "}"


def from_json(text):
    """The config roper.config's text holds (a Config), checked by roper's core when there is
    one, or ValueError (core's message; without core, the companion's for a text that is not an
    object of known keys of the right types)."""
    if core.LIB:
        core.check(text, core.STORED)
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise ValueError("bad roper.config (%s)" % e) from None
    if not isinstance(doc, dict):
        raise ValueError("bad roper.config (not a JSON object)")
    c = {}
    for key, v in doc.items():
        k = _cfg.KEY.get(key)
        if k is None:
            raise ValueError("bad roper.config (unknown key '%s')" % key)
        if k["type"] == "seed" and isinstance(v, int) and not isinstance(v, bool):
            v %= 2 ** 64  # any integer: a negative one as its two's complement, kept as int64
            v = v - 2 ** 64 if v >= 2 ** 63 else v
        c[key] = _cfg._typed(k, v)
    for k in _cfg.KEYS:
        if k["json"] == "required" and k["name"] not in c:
            raise ValueError("bad roper.config (no key '%s')" % k["name"])
    return _cfg.config(_cfg.StoredConfig(c))

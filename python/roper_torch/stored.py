"""A config as a safetensors file's roper.config holds it: the JSON object roper writes
(core/io/safetensors_config.c's rp_model_cfg_to_json) and reads (rp_model_cfg_from_json, then
rp_model_cfg_check), with roper's rules and messages, so that a file either side writes is the
file the other writes, and a damaged one is refused by both with the same words.

to_json(cfg) -> str: the object roper writes for the checked config cfg (config.config()): the
keys of the schema's json column (rp.model_keys()'s `json`: "required" and "always" every time,
"applies" when the key does something for the config, "set" when it differs from its default),
in the schema's order, numbers in the shortest "%.15g" to "%.17g" form that reads back exactly.

from_json(text) -> Config, or ValueError "bad roper.config (...)" for what roper's reader refuses
(not a JSON object, an unknown key, a value of the wrong type or literal, a key a file must hold
left out) and "bad model config: ..." for what rp_model_cfg_check refuses. The reader's own
messages are roper's word for word: core's templates and limits from schema.json
(rp.safetensors_extras()'s config and json, rp.model_keys()'s stored), filled here; a text that
is not JSON at all is refused as roper refuses it (Python's json parses it, each number kept as
its literal, which roper's reader converts), with Python's description of the fault in place of
roper's parser's."""

import json
import math

from . import config as _cfg
from .rotary import fill as _fill

# core's words and limits, from schema.json (rp.safetensors_extras()): those of its JSON reader
# (json: the types' names, the number conversions' messages, a string as a message shows it, the
# literal lengths and rp_json_printable's limits), of the roper.config reader (config.messages)
_JSON = _cfg.SCHEMA["extras"]["json"]
_READER = _cfg.SCHEMA["extras"]["config"]["messages"]
_LIMIT = _JSON["limits"]


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
        else:  # rp_model_cfg_value_str's; a name (enum, rotate) quoted
            val = _cfg._value_str(k, v)
            val = '"%s"' % val if t in ("enum", "rotate") else val
        out.append('"%s":%s' % (k["name"], val))
    return "{" + ",".join(out) + "}"


class _Lit:
    """A JSON number as its literal text: roper reads an integer from the literal."""
    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text


class _Obj(list):
    """A JSON object as its (key, value) pairs, in the text's order."""


class _Syntax(Exception):
    pass


def _printable(s, n):
    """(checks) rp_json_printable into a buffer of n bytes: the first shown bytes of s (UTF-8),
    printable ASCII as it is and any other byte as \\xNN, "..." after them (shown: schema.json)."""
    out, o = [], 0
    for i, c in enumerate(s.encode("utf-8", "surrogatepass")):
        if i == _LIMIT["shown"]:
            if o + 4 <= n:
                out.append("...")
            break
        if 0x20 <= c < 0x7F:
            if o + 2 > n:
                break
            out.append(chr(c))
            o += 1
        else:
            if o + 5 > n:
                break
            out.append("\\x%02x" % c)
            o += 4
    return "".join(out)


def _quoted(s, room=_LIMIT["name_text"]):
    """(interprets) A string as core's messages show it (rp_json_quoted): _printable in room
    bytes, filled into schema.json's string template."""
    return _fill(_JSON["messages"]["string"], text=_printable(s, min(room, _LIMIT["name_text"])))


def _type_name(v):
    """(checks) rp_json_type_name of the parsed value v (schema.json's names)."""
    t = "null" if v is None else ("true" if v else "false") if v is True or v is False else \
        "number" if isinstance(v, _Lit) else "string" if isinstance(v, str) else \
        "object" if isinstance(v, _Obj) else "array"
    return _JSON["types"][t]


def _pairs(pairs):
    seen = set()
    for key, _ in pairs:
        if key in seen:
            raise _Syntax("duplicate key %s" % _quoted(key))
        seen.add(key)
    return _Obj(pairs)


def _constant(name):
    raise _Syntax("expected a value, got '%s'" % name[0])


def _parse(text):
    """The JSON text as _Obj, list, str, _Lit, bool and None, or ValueError: "at byte N: ..." (the
    byte of the fault, as roper's parser counts) where Python's parser says where."""
    try:
        return json.loads(text, parse_int=_Lit, parse_float=_Lit, parse_constant=_constant,
                          object_pairs_hook=_pairs)
    except json.JSONDecodeError as e:
        at = len(text[:e.pos].encode("utf-8", "surrogatepass"))
        raise ValueError("at byte %d: %s" % (at, e.msg)) from None
    except _Syntax as e:  # roper says at which byte too
        raise ValueError(str(e)) from None
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _literal_error(msg, lit):
    return ValueError(_fill(_JSON["messages"][msg], literal=lit))


def _integer(lit, signed):
    """(checks) rp_json_i64 (signed) or rp_json_u64 of the literal lit, or ValueError with its
    message (schema.json's)."""
    if len(lit) >= _LIMIT["int_literal"]:
        raise _literal_error("long", lit[:_LIMIT["literal_shown"]])
    neg = signed and lit.startswith("-")
    digits = lit[1:] if neg else lit
    if not digits or not digits.isdigit() or not digits.isascii():
        raise _literal_error("integer" if signed else "natural", lit)
    x = int(digits)
    if x > (2 ** 63 if neg else 2 ** 63 - 1 if signed else 2 ** 64 - 1):
        raise _literal_error("range", lit)
    return -x if neg else x


def _number(lit):
    """(checks) rp_json_double of the literal lit, or ValueError with its message (schema.json's
    templates)."""
    if len(lit) >= _LIMIT["num_literal"]:
        raise _literal_error("long", lit[:_LIMIT["literal_shown"]])
    x = float(lit)
    if math.isinf(x):
        raise _literal_error("range", lit)
    return x


def _read_key(k, v):
    """(checks) safetensors_config.c's read_key: the value v of row k as config.config reads a
    stored value, or ValueError with the row's stored message (schema.json's)."""
    name, t = k["name"], k["type"]
    if t == "rotate":
        ok = isinstance(v, str) and "\0" not in v and _cfg._rotate_mask(v)
    elif t == "bool":
        ok = v is True or v is False
    elif t == "enum":
        ok = isinstance(v, str) and v in k["names"]
    else:
        ok = isinstance(v, _Lit)
    if not ok:
        got = _quoted(v, _LIMIT["value_text"]) if isinstance(v, str) and t in ("rotate", "enum") \
            else _type_name(v)
        raise ValueError(_fill(k["stored"], got=got))
    try:
        if t == "rotate":
            return _cfg._rotate_mask(v)
        if t in ("bool", "enum"):
            return v
        if t == "number":
            return _number(v.text)
        if t == "seed":  # any integer: a negative one as its two's complement
            try:
                u = _integer(v.text, False)
            except ValueError:
                u = _integer(v.text, True) % 2 ** 64
            return u - 2 ** 64 if u >= 2 ** 63 else u  # int64, as roper keeps it
        return _integer(v.text, True)
    except ValueError as e:
        raise ValueError(_fill(_READER["literal"], key=name, why=e)) from None


def _read(text):
    """(checks) rp_model_cfg_from_json: the keys of the object text, in its order, each read by
    its row; the keys a file must hold; or ValueError with the reader's message (schema.json's)."""
    doc = _parse(text)
    if not isinstance(doc, _Obj):
        raise ValueError(_fill(_READER["not_object"], type=_type_name(doc)))
    c = {}
    for key, v in doc:
        k = _cfg.KEY.get(key) if "\0" not in key else None
        if k is None:
            raise ValueError(_fill(_READER["unknown"], key=_printable(key, _LIMIT["name_text"])))
        c[key] = _read_key(k, v)
    for k in _cfg.KEYS:
        if k["json"] == "required" and k["name"] not in c:
            raise ValueError(_fill(_READER["missing"], key=k["name"]))
    return c


def from_json(text):
    """(checks) The config roper.config's text holds, checked as roper's readers check it (a
    Config), or ValueError "bad roper.config (<the reader's message>)" / "bad model config:
    <rp_model_cfg_check's message>" (schema.json's templates, rp_model_cfg_from_json's)."""
    try:
        c = _read(text)
    except ValueError as e:
        raise ValueError(_fill(_READER["bad_file"], why=e)) from None
    try:
        return _cfg.config(_cfg.StoredConfig(c))
    except ValueError as e:
        raise ValueError(_fill(_READER["bad_model"], why=e)) from None

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
messages are roper's word for word; a text that is not JSON at all is refused as roper refuses it,
with Python's description of the fault in place of roper's parser's."""

import json
import math

from . import config as _cfg

_INT_LIT = 64     # a longer integer literal is out of range (core/io/json.c's literal buffer)
_NUM_LIT = 512    # the same for a number
_KEY_TEXT = 256   # rp_json_printable's buffers: an unknown key's, a value's in a message
_VALUE_TEXT = 80


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
    """(restated) rp_json_printable into a buffer of n bytes: the first 60 bytes of s (UTF-8),
    printable ASCII as it is and any other byte as \\xNN, "..." after 60."""
    out, o = [], 0
    for i, c in enumerate(s.encode("utf-8", "surrogatepass")):
        if i == 60:
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


def _type_name(v):
    """(restated) rp_json_type_name."""
    if v is None:
        return "null"
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, _Lit):
        return "a number"
    if isinstance(v, str):
        return "a string"
    return "an object" if isinstance(v, _Obj) else "an array"


def _pairs(pairs):
    seen = set()
    for key, _ in pairs:
        if key in seen:
            raise _Syntax('duplicate key "%s"' % _printable(key, _KEY_TEXT))
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


def _integer(lit, signed):
    """(restated) rp_json_i64 (signed) or rp_json_u64 of the literal lit, or ValueError with its
    message."""
    if len(lit) >= _INT_LIT:
        raise ValueError("number %s... is out of range" % lit[:40])
    neg = signed and lit.startswith("-")
    digits = lit[1:] if neg else lit
    if not digits or not digits.isdigit() or not digits.isascii():
        raise ValueError("%s is not an integer%s" % (lit, "" if signed else " >= 0"))
    x = int(digits)
    if x > (2 ** 63 if neg else 2 ** 63 - 1 if signed else 2 ** 64 - 1):
        raise ValueError("%s is out of range" % lit)
    return -x if neg else x


def _number(lit):
    """(restated) rp_json_double of the literal lit, or ValueError with its message."""
    if len(lit) >= _NUM_LIT:
        raise ValueError("number %s... is out of range" % lit[:40])
    x = float(lit)
    if math.isinf(x):
        raise ValueError("%s is out of range" % lit)
    return x


def _read_key(k, v):
    """read_key: the value v of row k as config.config reads a stored value, or ValueError."""
    name, t = k["name"], k["type"]
    if t == "rotate":
        letters = _cfg._rotate_mask(v) if isinstance(v, str) and "\0" not in v else None
        if letters:
            return letters
        raise ValueError("'%s' must be a string of distinct letters of qkvo, got %s"
                         % (name, '"%s"' % _printable(v, _VALUE_TEXT) if isinstance(v, str)
                            else _type_name(v)))
    if t == "bool":
        if v is not True and v is not False:
            raise ValueError("'%s' must be true or false, got %s" % (name, _type_name(v)))
        return v
    if t == "enum":
        if isinstance(v, str) and v in k["names"]:
            return v
        raise ValueError("'%s' must be one of %s; got %s"
                         % (name, ", ".join(k["names"]), '"%s"' % _printable(v, _VALUE_TEXT)
                            if isinstance(v, str) else _type_name(v)))
    if not isinstance(v, _Lit):
        raise ValueError("'%s' must be %s, got %s" % (name, "a number" if t == "number" else
                                                      "an integer", _type_name(v)))
    try:
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
        raise ValueError("'%s': %s" % (name, e)) from None


def _read(text):
    """(restated) rp_model_cfg_from_json: the keys of the object text, in its order, each read by
    its row; the keys a file must hold; or ValueError with the reader's message."""
    doc = _parse(text)
    if not isinstance(doc, _Obj):
        raise ValueError("not a JSON object (%s)" % _type_name(doc))
    c = {}
    for key, v in doc:
        k = _cfg.KEY.get(key) if "\0" not in key else None
        if k is None:
            raise ValueError("unknown key '%s'" % _printable(key, _KEY_TEXT))
        c[key] = _read_key(k, v)
    for k in _cfg.KEYS:
        if k["json"] == "required" and k["name"] not in c:
            raise ValueError("no key '%s'" % k["name"])
    return c


def from_json(text):
    """(restated) The config roper.config's text holds, checked as roper's readers check it (a
    Config), or ValueError "bad roper.config (<the reader's message>)" / "bad model config:
    <rp_model_cfg_check's message>"."""
    try:
        c = _read(text)
    except ValueError as e:
        raise ValueError("bad roper.config (%s)" % e) from None
    try:
        return _cfg.config(_cfg.StoredConfig(c))
    except ValueError as e:
        raise ValueError("bad model config: %s" % e) from None

"""roper's core, when the companion finds it: the one home of the rules of a config.

The companion checks a config by calling core's entry points (core/io/config_check.h) in roper's
C library, libroper.so, through ctypes: rp_config_check_json (the config as JSON, checked as
rp.model (WRITTEN) or a file's reader (STORED) does), rp_config_check_shown (the values a
rope_scaling table set, checked in its fields' names), rp_config_check_tables (a model's config
with its own tables, positions and their axes, as rp.model checks them), rp_config_check_scheme
(a frequency scheme for one width, as rp.rope.angles checks it) and rp_config_check_file (a
safetensors file, as rp.load checks it); each gives back core's verdict and message, so a
refusal is core's, word for word. The library is looked for, in order:

  1. ROPER_LIB, when set: the path of libroper.so (set and empty: no library; a path that does
     not load raises ImportError);
  2. where `make install` put it: the path in library.txt beside this file (make install writes
     it; a checkout has none);
  3. in a checkout, the build folder's libroper.so.* (python/../build, what `make` builds).

Without it (LIB is None) the companion checks only Python's types and trusts files roper wrote:
docs/interop.md says what that leaves unchecked."""

import ctypes
import glob
import json
import os

WRITTEN, STORED = 0, 1  # rp_config_how
_MSG_BYTES = 4096
_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("ROPER_LIB")
    if env is not None:
        return [env] if env else [], env != ""
    out = []
    try:
        with open(os.path.join(_HERE, "library.txt"), encoding="utf-8") as f:
            out.append(f.read().strip())
    except OSError:
        pass
    out += sorted(glob.glob(os.path.join(_HERE, "..", "..", "build", "libroper.so.*.*.*")))
    return out, False


class Tables(ctypes.Structure):
    """The own tables, positions and axes as core/io/config_check.h's entry points take them."""
    _fields_ = [("theta", ctypes.POINTER(ctypes.c_double)), ("n_theta", ctypes.c_int64),
                ("angles", ctypes.POINTER(ctypes.c_double)), ("rows", ctypes.c_int64),
                ("n_angles", ctypes.c_int64),
                ("pos", ctypes.POINTER(ctypes.c_int64)), ("pos_rows", ctypes.c_int64),
                ("axes", ctypes.c_int), ("map", ctypes.c_int), ("n_sections", ctypes.c_int),
                ("sections", ctypes.c_int64 * 3),  # RP_MAX_AXES (the size check in _load)
                ("mix", ctypes.POINTER(ctypes.c_double)), ("mix_rows", ctypes.c_int64),
                ("n_mix", ctypes.c_int64), ("scheme_only", ctypes.c_int)]


_SHAPE = 1  # RP_ERR_SHAPE: rp_config_check_tables' mix that is not [axes x d_rot/2]


def _load():
    paths, must = _candidates()
    for p in paths:
        try:
            lib = ctypes.CDLL(p)
            fns = (lib.rp_config_check_json, lib.rp_config_check_tables,
                   lib.rp_config_check_scheme, lib.rp_config_check_file,
                   lib.rp_config_check_shown)
            size = lib.rp_config_tables_size
        except (OSError, AttributeError) as e:
            if must:
                raise ImportError("roper_torch: ROPER_LIB=%s does not load (%s)" % (p, e)) from None
            continue
        size.restype, size.argtypes = ctypes.c_size_t, []
        if size() != ctypes.sizeof(Tables):  # another roper's struct: never passed a pointer
            if must:
                raise ImportError("roper_torch: ROPER_LIB=%s lays out rp_config_tables in %d "
                                  "bytes, this companion in %d: a library of another roper "
                                  "version" % (p, size(), ctypes.sizeof(Tables)))
            continue
        c, i64, sz, msg = ctypes.c_char_p, ctypes.c_int64, ctypes.c_size_t, ctypes.c_char_p
        tab = ctypes.POINTER(Tables)
        for fn, args in zip(fns, ([c, sz, ctypes.c_int, msg, sz], [c, sz, ctypes.c_int, tab, msg, sz],
                                  [c, sz, tab, i64, i64, c, msg, sz], [c, msg, sz],
                                  [c, sz, c, sz, msg, sz])):
            fn.restype, fn.argtypes = ctypes.c_int, args
        return fns, p
    return None, None


_FNS, PATH = _load()
LIB = _FNS is not None  # whether core checks the configs, tables and files


def _answer(call):
    msg = ctypes.create_string_buffer(_MSG_BYTES)
    st = call(msg)
    if st != 0:
        raise ValueError(msg.value.decode("utf-8", "replace"))


def check(text, how):
    """None when core accepts the config in text (JSON, read as `how` says),
    else ValueError with core's message. Only when LIB."""
    raw = text.encode("utf-8", "surrogatepass")
    _answer(lambda msg: _FNS[0](raw, len(raw), how, msg, _MSG_BYTES))


def check_shown(text, shown):
    """None when core accepts the values of the config in text (JSON) that shown (a dict: config
    key -> the name the user gave it, a rope_scaling field's) names, else ValueError with core's
    message in those names. Only when LIB."""
    raw = text.encode("utf-8", "surrogatepass")
    names = json.dumps(shown).encode("utf-8")
    _answer(lambda msg: _FNS[4](raw, len(raw), names, len(names), msg, _MSG_BYTES))


def tables(theta=None, angles=None, pos=None, axes=0, map_=-1, sections=None, mix=None):
    """The Tables (config_check.h's struct) of the values the companion read (lists; pos a list
    of tuples), and the arrays it borrows (keep them while it is used)."""
    t, keep = Tables(), []

    def arr(ctype, flat):
        a = (ctype * max(len(flat), 1))(*flat)
        keep.append(a)
        return ctypes.cast(a, ctypes.POINTER(ctype))

    if theta is not None:
        t.theta, t.n_theta = arr(ctypes.c_double, theta), len(theta)
    if angles is not None:
        t.angles, t.rows = arr(ctypes.c_double, [x for r in angles for x in r]), len(angles)
        t.n_angles = len(angles[0]) if angles else 0
    if pos is not None:
        t.pos, t.pos_rows = arr(ctypes.c_int64, [x for r in pos for x in r]), len(pos)
    t.axes, t.map = axes, map_
    t.n_sections = -1 if sections is None else len(sections)
    for a, n in enumerate((sections or [])[:3]):
        t.sections[a] = n
    if mix is not None:
        t.mix, t.mix_rows = arr(ctypes.c_double, [x for r in mix for x in r]), len(mix)
        t.n_mix = len(mix[0]) if mix else 0
    return t, keep


def check_tables(text, how, t):
    """None when core accepts the config in text with the own tables and positions t (tables()),
    as rp.model does; "shape" when the rules before it pass and mix is not [axes x d_rot/2];
    else ValueError with core's message. Only when LIB."""
    raw = text.encode("utf-8", "surrogatepass")
    msg = ctypes.create_string_buffer(_MSG_BYTES)
    st = _FNS[1](raw, len(raw), how, ctypes.byref(t), msg, _MSG_BYTES)
    if st == _SHAPE:
        return "shape"
    if st != 0:
        raise ValueError(msg.value.decode("utf-8", "replace"))
    return None


def check_scheme(text, t, d_rot, last, what):
    """None when core accepts the frequency scheme (text: JSON of its config keys; t: tables())
    for a placement d_rot wide over positions up to last, as rp.rope.angles does, else ValueError
    with core's message. Only when LIB."""
    raw = text.encode("utf-8", "surrogatepass")
    _answer(lambda msg: _FNS[2](raw, len(raw), ctypes.byref(t), d_rot, last,
                                what.encode("utf-8"), msg, _MSG_BYTES))


def check_file(path):
    """None when core accepts the safetensors file at path as rp.load reads it (without building
    the model), else ValueError with core's message ("path: ..."). Only when LIB."""
    raw = os.fsencode(path)
    _answer(lambda msg: _FNS[3](raw, msg, _MSG_BYTES))

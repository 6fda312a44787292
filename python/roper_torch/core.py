"""roper's core, when the companion finds it: the one home of the rules of a config.

The companion checks a config by calling core's rp_config_check_json (core/io/config_check.h) in
roper's C library, libroper.so, through ctypes: core reads the config as JSON, checks it as
rp.model (WRITTEN) or a file's reader (STORED) does and gives back its verdict and its message,
so a refusal is core's, word for word. The library is looked for, in order:

  1. ROPER_LIB, when set: the path of libroper.so (set and empty: no library; a path that does
     not load raises ImportError);
  2. where `make install` put it: the path in library.txt beside this file (make install writes
     it; a checkout has none);
  3. in a checkout, the build folder's libroper.so.* (python/../build, what `make` builds).

Without it (LIB is None) the companion checks only Python's types and trusts files roper wrote:
docs/interop.md says what that leaves unchecked."""

import ctypes
import glob
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


def _load():
    paths, must = _candidates()
    for p in paths:
        try:
            lib = ctypes.CDLL(p)
            fn = lib.rp_config_check_json
        except (OSError, AttributeError) as e:
            if must:
                raise ImportError("roper_torch: ROPER_LIB=%s does not load (%s)" % (p, e)) from None
            continue
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_char_p,
                       ctypes.c_size_t]
        return fn, p
    return None, None


_CHECK, PATH = _load()
LIB = _CHECK is not None  # whether core checks the configs


def check(text, how):
    """None when core accepts the config in text (JSON, read as `how` says),
    else ValueError with core's message. Only when LIB."""
    raw = text.encode("utf-8", "surrogatepass")
    msg = ctypes.create_string_buffer(_MSG_BYTES)
    if _CHECK(raw, len(raw), how, msg, _MSG_BYTES) != 0:
        raise ValueError(msg.value.decode("utf-8", "replace"))

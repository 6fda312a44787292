"""The safetensors format in the standard library and torch (no `safetensors` package: Debian has
none).

A file is 8 bytes holding N (u64, little-endian), N bytes of JSON, then the raw little-endian data.
The JSON is one object: `"__metadata__"` (optional, an object of strings) and one entry per tensor,
`{"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}`, the offsets counted from the
first byte after the header (the format: github.com/huggingface/safetensors, its README).

    tensors, metadata = read_safetensors("w.safetensors")     # {name: tensor}, {str: str}
    write_safetensors("w.safetensors", model.state_dict(), {"format": "pt"})

The reader checks what roper's reader checks (core/io/safetensors.c, docs/interop.md), in its
order and words: the header inside the file and within the limit, starting with '{', nested at
most 16 deep, JSON without duplicate keys, every entry with exactly its three keys, a known
dtype, sizes that are integers >= 0 (not -0), at most 8 dims and 2^40 elements, the bytes of its
shape, and the tensors tiling the data without gap, overlap or trailing byte. The writer orders
the tensors as the reference writer does (by dtype alignment, largest first, then by name), pads the header with
spaces to a multiple of 8 bytes, and writes to a temporary file in the same folder that it renames
over the target (an interrupted write leaves the old file or none).
"""

import ctypes
import json
import os
import re
import stat
import struct
import sys
import tempfile

import torch

# safetensors dtype name <-> torch dtype (the ones torch 1.13 has).
DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
}
NAMES = {v: k for k, v in DTYPES.items()}

# The reference reader's limit on the header (roper's too).
MAX_HEADER = 100_000_000


class SafetensorsError(ValueError):
    """A file that is not a valid safetensors file; the message starts with the path."""


def _swap(raw, itemsize):
    """Little-endian bytes -> the host's order (a no-op on little-endian hosts)."""
    if sys.byteorder == "little" or itemsize == 1:
        return raw
    b = torch.frombuffer(raw, dtype=torch.uint8).reshape(-1, itemsize).flip(-1)
    return bytearray(_bytes(b.contiguous()))


def _bytes(t):
    """The bytes of a contiguous CPU tensor (no numpy needed)."""
    return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()) if t.numel() else b""


def _kind(mode):
    """A kind of file in the words of roper's messages ("a FIFO")."""
    for test, word in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return "an unknown kind of file"


class _Num(str):
    """A JSON number of a header, kept as its literal (roper's messages quote the literal)."""


# roper's limits on a tensor (core/tensor/tensor.h) and on a header's nesting (core/io/json.h)
MAX_DIMS, MAX_NUMEL, MAX_DEPTH = 8, 1 << 40, 16
_TYPE = ((type(None), "null"), (_Num, "a number"), (str, "a string"), (list, "an array"),
         (dict, "an object"))


def _type(v):
    """(restated) rp_json_type_name of a parsed value ("an array", "null")."""
    if v is True or v is False:
        return "true" if v else "false"
    return next(name for t, name in _TYPE if isinstance(v, t))


def _quoted(name):
    """(restated) rp_json_quoted: a name as roper's messages show it, in double quotes, printable
    ASCII as it is, every other byte of its UTF-8 as \\xNN, cut after 60 bytes with "..."."""
    b = name.encode("utf-8", "surrogatepass")
    shown = "".join(chr(c) if 0x20 <= c < 0x7f else "\\x%02x" % c for c in b[:60])
    return '"%s%s"' % (shown, "..." if len(b) > 60 else "")


def _u64(n):
    """(restated) rp_json_u64: (the value, None) of a JSON number that is an integer >= 0 below
    2^64, else (None, roper's reason)."""
    if len(n) >= 64:
        return None, "number %s... is out of range" % n[:40]
    if not n.isdigit() or not n.isascii():
        return None, "%s is not an integer >= 0" % n
    if int(n) >= 1 << 64:
        return None, "%s is out of range" % n
    return int(n), None


def _too_deep(text):
    """(restated) The byte at which text (JSON) opens its 17th nested array or object, as roper's
    parser (rp_json_parse) counts it, or None."""
    depth, in_str, esc = 0, False, False
    for i, c in enumerate(text):
        if in_str:
            esc, in_str = (False, True) if esc else (c == 0x5C, c != 0x22)
        elif c == 0x22:
            in_str = True
        elif c in b"[{":
            if depth == MAX_DEPTH:
                return i
            depth += 1
        elif c in b"]}":
            depth -= 1
    return None


_ESCAPE = re.compile(rb"\\u([0-9a-fA-F]{4})")


def _lone_surrogate(text):
    """(restated) The byte at which text (JSON) has a \\u escape of a surrogate without its pair
    (a low one, or a high one not followed by a low one's escape), as roper's parser
    (rp_json_parse) refuses it, or None: Python's json reads such a string."""
    in_str, i = False, 0
    while i < len(text):
        c = text[i]
        if not in_str:
            in_str = c == 0x22
        elif c == 0x22:
            in_str = False
        elif c == 0x5C:
            m = _ESCAPE.match(text, i)
            if m:
                cp = int(m.group(1), 16)
                if 0xDC00 <= cp <= 0xDFFF:
                    return i
                if 0xD800 <= cp <= 0xDBFF:
                    lo = _ESCAPE.match(text, i + 6)
                    if not lo or not 0xDC00 <= int(lo.group(1), 16) <= 0xDFFF:
                        return i
                    i += 6
                i += 6
                continue
            i += 1  # the escaped byte
        i += 1
    return None


def _entry(name, e, data_size):
    """(restated) read_entry of core/io/safetensors.c: one tensor's entry checked in roper's order
    and words; -> (dtype, shape, [begin, end]) or raises ValueError(message without the path)."""
    q = _quoted(name)
    if not isinstance(e, dict):
        raise ValueError("bad header (tensor %s is %s, not an object)" % (q, _type(e)))
    keys = ("dtype", "shape", "data_offsets")
    for k in e:
        if k not in keys:
            raise ValueError("bad header (tensor %s: unknown key %s)" % (q, _quoted(k)))
    for k in keys:
        if k not in e:
            raise ValueError('bad header (tensor %s: no "%s")' % (q, k))
    dt, shape, offs = e["dtype"], e["shape"], e["data_offsets"]
    if not isinstance(dt, str) or isinstance(dt, _Num):
        raise ValueError("bad header (tensor %s: dtype must be a string, got %s)" % (q, _type(dt)))
    if dt not in DTYPES:
        raise ValueError("bad header (tensor %s: unknown dtype %s)" % (q, _quoted(dt)))
    if not isinstance(shape, list) or not all(isinstance(s, _Num) for s in shape):
        raise ValueError("bad header (tensor %s: shape must be an array of integers >= 0)" % q)
    sizes = []
    for s in shape:
        v, why = _u64(s)
        if why or v >= 1 << 63:
            raise ValueError("bad header (tensor %s: shape: %s)"
                             % (q, why or "%d is out of range" % v))
        sizes.append(v)
    if not isinstance(offs, list) or len(offs) != 2 or not all(isinstance(o, _Num) for o in offs):
        raise ValueError("bad header (tensor %s: data_offsets must be [begin, end])" % q)
    (begin, why), (end, why2) = _u64(offs[0]), _u64(offs[1])
    if why or why2:
        raise ValueError("bad header (tensor %s: data_offsets: %s)" % (q, why or why2))
    if end < begin:
        raise ValueError("bad header (tensor %s: data_offsets [%d, %d] end before they begin)"
                         % (q, begin, end))
    if len(sizes) > MAX_DIMS:
        raise ValueError("tensor %s has %d dims, more than the %d a tensor holds"
                         % (q, len(sizes), MAX_DIMS))
    shp = "[%s]" % " x ".join(str(v) for v in sizes)
    count, span = 1, 1  # the rule of rp_shape_span: the sizes other than 0 within 2^40
    for v in sizes:
        count, span = count * v, span * (v or 1)
    if span > MAX_NUMEL:
        raise ValueError("tensor %s of shape %s %s" % (q, shp, "is too large (its sizes other than "
                         "0 multiply to more than 2^40)" if 0 in sizes else
                         "has more than 2^40 elements"))
    need = count * torch.empty((), dtype=DTYPES[dt]).element_size()
    if end - begin != need:
        raise ValueError("tensor %s: data_offsets [%d, %d] hold %d bytes, its shape %s of %s "
                         "needs %d" % (q, begin, end, end - begin, shp, dt, need))
    if end > data_size:
        raise ValueError("truncated (tensor %s ends at byte %d of the data, the file has %d data "
                         "bytes)" % (q, end, data_size))
    return DTYPES[dt], sizes, (begin, end)


def read_safetensors(path):
    """(restated) -> (tensors, metadata): {name: torch tensor} in the file's dtypes and shapes
    (each tensor owns its memory), and the `__metadata__` strings ({} when absent). Raises
    SafetensorsError ("path: reason") for a file that breaks the format, OSError when it cannot
    be read. The checks, their order and their words are roper's (st_open in
    core/io/safetensors.c), but for JSON's syntax (Python's json words its errors) and the dtypes
    torch 1.13 has not (F8_E5M2, F8_E4M3, U16, U32, U64: "unknown dtype" here)."""
    def bad(msg):
        return SafetensorsError("%s: %s" % (path, msg))

    # anything but a regular file is refused after a stat, before any open, as roper's reader
    # does (a FIFO would wait for a writer, /dev/zero would be read until memory runs out)
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise bad("not a regular file (%s)" % _kind(mode))
    with open(path, "rb") as f:
        raw = f.read()

    if not raw:
        raise bad("empty file (not a safetensors file)")
    if len(raw) < 8:
        raise bad("truncated (%d bytes, shorter than the 8-byte header length)" % len(raw))
    # (restated) roper's other files, named: their first bytes would read as a header length
    if raw[:4] == b"RPCK" or raw[:6] == b"\x93NUMPY":
        raise bad("not a safetensors file (a %s; rp.load reads it)"
                  % ("roper checkpoint" if raw[:4] == b"RPCK" else ".npy file"))
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        raise bad("truncated (the header length says %d bytes, %d follow it)" % (n, len(raw) - 8))
    if n > MAX_HEADER:
        raise bad("header length %d is more than the %d bytes safetensors allows" % (n, MAX_HEADER))
    text = raw[8:8 + n]
    if text[:1] != b"{":
        raise bad("bad header (it must start with '{')")
    def unique(pairs):  # roper refuses duplicate keys; json.loads would keep the last one
        seen = set()  # (linear: a forged header of millions of keys is read in seconds)
        for k, _ in pairs:
            if k in seen:
                raise ValueError('duplicate key "%s"' % k)
            seen.add(k)
        return dict(pairs)

    def constant(c):  # NaN and Infinity are Python's, not JSON
        raise ValueError("%s is not JSON" % c)

    # what roper's parser refuses and Python's json does not, by byte: the first of these and a
    # syntax error is the one roper names
    deep = _too_deep(text)
    lone = _lone_surrogate(text) if b"\\u" in text else None
    first = min((at for at in (deep, lone) if at is not None), default=None)
    try:
        header = json.loads(text.decode("utf-8"), object_pairs_hook=unique, parse_int=_Num,
                            parse_float=_Num, parse_constant=constant)
    except json.JSONDecodeError as e:  # (e.pos counts characters; roper counts bytes)
        if first is None or len(e.doc[:e.pos].encode("utf-8", "surrogatepass")) < first:
            raise bad("bad header (%s)" % e) from None
        header = None
    except (UnicodeDecodeError, ValueError) as e:
        raise bad("bad header (%s)" % e) from None
    except RecursionError:
        header = None
    if first is not None and first == deep:
        raise bad("bad header (at byte %d: nested deeper than %d levels)" % (deep, MAX_DEPTH))
    if first is not None:
        raise bad("bad header (at byte %d: unpaired surrogate in a \\u escape)" % lone)
    data = memoryview(raw)[8 + n:]
    spans, out, meta = [], {}, {}
    for name, e in header.items():
        if name == "__metadata__":
            if not isinstance(e, dict):
                raise bad("bad header (__metadata__ is %s, not an object)" % _type(e))
            for k, v in e.items():
                if not isinstance(v, str) or isinstance(v, _Num):
                    raise bad("bad header (__metadata__ %s is %s, not a string)"
                              % (_quoted(k), _type(v)))
            meta = e
            continue
        try:
            dt, shape, offs = _entry(name, e, len(data))
        except ValueError as why:
            raise bad(str(why)) from None
        spans.append((offs[0], offs[1], len(spans), name))
        out[name] = (dt, shape, offs)
    at, last = 0, None
    for begin, end, _, name in sorted(spans):
        if begin < at:
            raise bad("tensors %s (bytes %d..%d) and %s (bytes %d..%d) overlap"
                      % (_quoted(last[3]), last[0], last[1], _quoted(name), begin, end))
        if begin > at:
            raise bad("bytes %d..%d of the data belong to no tensor" % (at, begin))
        at, last = end, (begin, end, None, name)
    if at < len(data):
        raise bad("%d bytes after the last tensor (trailing data)" % (len(data) - at))
    tensors = {}
    for name, (dt, shape, (begin, end)) in out.items():
        if end > begin:
            size = torch.empty((), dtype=dt).element_size()
            buf = _swap(bytearray(data[begin:end]), size)
            tensors[name] = torch.frombuffer(buf, dtype=dt).reshape(shape)
        else:
            tensors[name] = torch.zeros(shape, dtype=dt)
    return tensors, dict(meta)


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: tensor} (any dtype of DTYPES, any device, any layout: written as its logical
    contents, row-major, little-endian) and the metadata (a dict of strings, or None) to path,
    atomically. Raises TypeError for a non-string metadata value or an unsupported dtype."""
    meta = dict(metadata or {})
    for k, v in meta.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError("write_safetensors: metadata %r: %r must be a string" % (k, v))
    items = {}
    for name, t in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise TypeError("write_safetensors: bad tensor name %r" % (name,))
        if not torch.is_tensor(t) or t.dtype not in NAMES:
            raise TypeError("write_safetensors: %s: unsupported %s (the dtypes: %s)"
                            % (name, getattr(t, "dtype", type(t).__name__), ", ".join(DTYPES)))
        items[name] = t.detach().to("cpu").contiguous()
    order = sorted(items, key=lambda k: (-items[k].element_size(), k))
    header, off = {}, 0
    if metadata is not None:
        header["__metadata__"] = meta
    for name in order:
        t = items[name]
        nbytes = t.numel() * t.element_size()
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + nbytes]}
        off += nbytes
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    folder = os.path.dirname(os.path.abspath(path))
    # the temporary name is "." + the name + "." + 8 random characters: the name cut to 200
    # bytes, so that it fits in NAME_MAX (255 bytes) whenever the name does
    stem = os.fsdecode(os.fsencode(os.path.basename(path))[:200])
    fd, tmp = tempfile.mkstemp(prefix="." + stem + ".", dir=folder)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # as open() would make it, not mkstemp's 0600
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(h)))
            f.write(h)
            for name in order:
                t = items[name]
                f.write(_swap(bytearray(_bytes(t)), t.element_size()))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise

"""The safetensors format in the standard library and torch (no `safetensors` package: Debian has
none).

A file is 8 bytes holding N (u64, little-endian), N bytes of JSON, then the raw little-endian data.
The JSON is one object: `"__metadata__"` (optional, an object of strings) and one entry per tensor,
`{"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}`, the offsets counted from the
first byte after the header (the format: github.com/huggingface/safetensors, its README).

    tensors, metadata = read_safetensors("w.safetensors")     # {name: tensor}, {str: str}
    write_safetensors("w.safetensors", model.state_dict(), {"format": "pt"})

The reader checks what roper's reader checks (core/io/safetensors.c, docs/interop.md): the header
inside the file, JSON without duplicate keys, every entry with exactly its three keys, a known
dtype, the bytes of its shape, and the tensors tiling the data without gap, overlap or trailing
byte. The writer orders the tensors as
the reference writer does (by dtype alignment, largest first, then by name), pads the header with
spaces to a multiple of 8 bytes, and writes to a temporary file in the same folder that it renames
over the target (an interrupted write leaves the old file or none).
"""

import ctypes
import json
import os
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


def read_safetensors(path):
    """-> (tensors, metadata): {name: torch tensor} in the file's dtypes and shapes (each tensor
    owns its memory), and the `__metadata__` strings ({} when absent). Raises SafetensorsError
    ("path: reason") for a file that breaks the format, OSError when it cannot be read."""
    def bad(msg):
        return SafetensorsError("%s: %s" % (path, msg))

    # anything but a regular file is refused after a stat, before any open, as roper's reader
    # does (a FIFO would wait for a writer, /dev/zero would be read until memory runs out)
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise bad("not a regular file (%s)" % _kind(mode))
    with open(path, "rb") as f:
        raw = f.read()

    if len(raw) < 8:
        raise bad("truncated (%d bytes, shorter than the 8-byte header length)" % len(raw))
    (n,) = struct.unpack("<Q", raw[:8])
    if n > MAX_HEADER:
        raise bad("header length %d is more than the %d bytes safetensors allows" % (n, MAX_HEADER))
    if n > len(raw) - 8:
        raise bad("truncated (the header length says %d bytes, %d follow it)" % (n, len(raw) - 8))
    def unique(pairs):  # roper refuses duplicate keys; json.loads would keep the last one
        seen = set()  # (linear: a forged header of millions of keys is read in seconds)
        for k, _ in pairs:
            if k in seen:
                raise ValueError('duplicate key "%s"' % k)
            seen.add(k)
        return dict(pairs)

    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"), object_pairs_hook=unique)
    except (UnicodeDecodeError, ValueError) as e:
        raise bad("bad header (%s)" % e) from None
    if not isinstance(header, dict):
        raise bad("bad header (it must be a JSON object)")
    meta = header.pop("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise bad("bad header (__metadata__ must be an object of strings)")
    data = memoryview(raw)[8 + n:]
    spans, out = [], {}
    for name, e in header.items():
        if not isinstance(e, dict) or set(e) != {"dtype", "shape", "data_offsets"}:
            raise bad('bad header (tensor "%s": the keys must be dtype, shape, data_offsets)'
                      % name)
        if e["dtype"] not in DTYPES:
            raise bad('bad header (tensor "%s": unknown dtype "%s")' % (name, e["dtype"]))
        shape, offs = e["shape"], e["data_offsets"]
        if (not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape)
                or not isinstance(offs, list) or len(offs) != 2
                or not all(type(o) is int and o >= 0 for o in offs) or offs[1] < offs[0]):
            raise bad('bad header (tensor "%s": bad shape %r or data_offsets %r)'
                      % (name, shape, offs))
        dt = DTYPES[e["dtype"]]
        size = torch.empty((), dtype=dt).element_size()
        count = 1
        for s in shape:
            count *= s
        if offs[1] - offs[0] != count * size:
            raise bad('tensor "%s": data_offsets [%d, %d] hold %d bytes, its shape %s of %s '
                      'needs %d' % (name, offs[0], offs[1], offs[1] - offs[0], shape,
                                    e["dtype"], count * size))
        spans.append((offs[0], offs[1], name))
        out[name] = (dt, shape, offs, size)
    at = 0
    for begin, end, name in sorted(spans):
        if begin != at:
            raise bad('tensor "%s" begins at byte %d of the data, expected %d (a gap or an overlap)'
                      % (name, begin, at))
        at = end
    if at != len(data):
        raise bad("the tensors end at byte %d of the data, the file has %d data bytes"
                  % (at, len(data)))
    tensors = {}
    for name, (dt, shape, (begin, end), size) in out.items():
        if end > begin:
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

#!/usr/bin/python3
"""Interop with NumPy and PyTorch: the committed fixtures and the live round trips.

Run with Debian's /usr/bin/python3 (python3-numpy; python3-torch for the safetensors parts) from
the repo root. The formats are in docs/interop.md; roper's side is core/io/npy.c and
core/io/safetensors.c.

    make_interop.py fixtures [--out DIR]
        Writes tests/fixtures/interop/ (README there): .npy files made by NumPy (float32,
        float64 and integers in both byte orders, several shapes, header versions 1.0/2.0/3.0,
        and the kinds roper refuses) and
        safetensors files of PyTorch state dicts (F32 and F64, with and without roper's
        metadata) with the tokens and the float64 reference logits of tests/reference's model.

    make_interop.py npy ROPER.npy OUT32.npy OUT64.npy
        The live .npy round trip: np.load a file roper wrote (checks dtype '<f4', C order), print
        its shape and a checksum, write it back with np.save as float32 and as float64.

    make_interop.py headers FILE.npy...
        np.load each file and print "<name>\tok\t<shape>" or "<name>\trefused\t<exception>",
        one line a file: NumPy's verdict on the .npy headers of interop_spec's grammar test.

    make_interop.py model ROPER.safetensors TOKENS.npy ROPER_LOGITS.npy OUT.safetensors OUT_LOGITS.npy
        The live model round trip: read roper's safetensors file with the companion's reader
        (python/roper_torch: json + struct + torch.frombuffer), load the state dict into its
        RoperTransformer (a torch module whose parameter names are roper's) with
        load_state_dict(strict=True), run it on the tokens in float32, print the largest
        difference from roper's logits, write its logits and the state dict back as safetensors
        (tensors in the reference writer's order, roper's metadata kept).

Neither mode needs the `safetensors` package (Debian has none): the format is 8 bytes of header
length, a JSON header and the raw data. The fixtures' logits come from the independent reference
model of tests/reference/make_fixtures.py in float64, not from the companion.
"""

import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))  # roper_torch, imported with torch


# ---- the values of the .npy fixtures (tests/c/test_npy.c computes the same numbers) -------------

SPECIALS = [-0.0, math.inf, -math.inf, math.nan, 1e-40, 3.4028236e38, 1e-46, 1.5 * 2.0 ** -149,
            1 + 2.0 ** -24, 1 + 3 * 2.0 ** -24, -(1 + 2.0 ** -24), 2.0 ** -126 * (1 - 2.0 ** -24)]


def values(n, specials=True):
    """n float64 values: ((k * 7919) % 1009 - 504) / 7.0 + k * 1e-3, the first ones replaced by
    SPECIALS (signed zero, infinities, NaN, float32 subnormals, overflow and underflow in the
    conversion to float32, ties to even)."""
    v = [((k * 7919) % 1009 - 504) / 7.0 + k * 1e-3 for k in range(n)]
    if specials:
        for i, s in enumerate(SPECIALS[:n]):
            v[i] = s
    return np.array(v, dtype=np.float64)


# Token ids for the integer .npy fixtures (tests/c/test_npy.c has the same list): the edges of
# each integer type and of float32's exact integers (+-2^24), -1 (a target not scored).
IDS = [0, 1, 2, -1, 127, -128, 255, 32767, -32768, 65535, 2 ** 24, -2 ** 24]


def ids(dtype):
    """IDS as a 3 x 4 array of dtype ('<i8', '>i4', ...), the values the type cannot hold left
    out (a 1-D array then)."""
    info = np.iinfo(np.dtype(dtype))
    v = [x for x in IDS if info.min <= x <= info.max]
    return np.array(v, dtype=dtype).reshape((3, 4) if len(v) == 12 else (len(v),))


def f32(a):
    with np.errstate(over="ignore", under="ignore"):
        return a.astype(np.float32)


# ---- safetensors and the module with roper's names: the companion (python/roper_torch) ---------

def write_safetensors(path, arrays, metadata=None):
    """arrays: name -> numpy array, written by the companion's writer (the reference writer's
    order: by dtype alignment, largest first, then by name; the header padded to 8 bytes)."""
    import torch
    import roper_torch
    roper_torch.write_safetensors(path, {k: torch.from_numpy(np.ascontiguousarray(v))
                                         for k, v in arrays.items()}, metadata)


def torch_logits(state, cfg, tokens, dtype):
    """The logits of RoperTransformer(cfg) (the companion's module, whose state_dict keys are
    roper's parameter names) with the state dict loaded by load_state_dict(strict=True), in
    dtype (float64: the exact cos/sin tables)."""
    import torch
    from roper_torch import RoperTransformer
    mod = RoperTransformer(cfg)
    mod.load_state_dict(state, strict=True)
    mod = mod.to(dtype).eval()
    with torch.no_grad():
        return mod(torch.as_tensor(tokens, dtype=torch.int64))


# ---- fixtures ---------------------------------------------------------------------------------------

MODEL_CASES = [
    # name, config (rp.model's keys), splitmix64 seed of the weights and the batch
    ("torch_roper", dict(vocab=11, d_model=16, heads=2, layers=2, d_ff=24, seq_len=8, max_batch=2,
                         norm="pre", activation="relu", dropout=0.0, pe="roper", fraction_qk=1.0,
                         fraction_v=1.0, base=10000.0, pairing="half", seed=0,
                         attention="softmax", linear_rope="after"), 201),
    ("torch_learned_post", dict(vocab=13, d_model=12, heads=3, layers=1, d_ff=20, seq_len=8,
                                max_batch=2, norm="post", activation="gelu", dropout=0.0,
                                pe="learned", fraction_qk=0.5, fraction_v=0.5, base=100.0,
                                pairing="interleaved", seed=7, attention="softmax",
                                linear_rope="after"), 202),
]


def make_fixtures(out):
    import torch
    from roper_torch import RoperTransformer
    sys.path.insert(0, HERE)
    import make_fixtures as ref
    os.makedirs(out, exist_ok=True)
    p = lambda name: os.path.join(out, name)
    written = []

    def save(name, arr, **kw):
        np.save(p(name), arr, **kw)
        written.append(name)

    # accepted
    save("np_f32_3x4.npy", f32(values(12)).reshape(3, 4))
    save("np_f32_7.npy", f32(values(7, specials=False)))
    save("np_f32_scalar.npy", f32(values(13, specials=False))[12].reshape(()))
    save("np_f32_empty.npy", np.zeros((0, 3), dtype=np.float32))
    save("np_f32_8d.npy", f32(values(24, specials=False)).reshape(1, 2, 1, 3, 1, 2, 1, 2))
    save("np_f64_4x5.npy", values(20).reshape(4, 5))
    for name, arr, ver in [("np_f32_v2.npy", f32(values(6, specials=False)).reshape(2, 3), (2, 0)),
                           ("np_f64_v3.npy", values(3, specials=False), (3, 0))]:
        with open(p(name), "wb") as f:
            np.lib.format.write_array(f, arr, version=ver)
        written.append(name)
    # refused
    save("np_f32_fortran.npy", np.asfortranarray(f32(values(12, specials=False)).reshape(3, 4)))
    save("np_f32_big.npy", f32(values(4, specials=False)).astype(">f4"))
    save("np_f64_big.npy", values(4, specials=False).astype(">f8"))
    # integers (token ids): both byte orders, every size; 2^24 + 1 float32 cannot hold
    for name, dtype in [("np_i64", "<i8"), ("np_i64_be", ">i8"), ("np_i32", "<i4"),
                        ("np_i32_be", ">i4"), ("np_i16", "<i2"), ("np_i8", "|i1"),
                        ("np_u64", "<u8"), ("np_u32", "<u4"), ("np_u16", "<u2"), ("np_u8", "|u1")]:
        save(name + ".npy", ids(dtype))
    save("np_i64_2p24p1.npy", np.array([[5, 0, 2], [1, 16777217, 3]], dtype="<i8"))
    save("np_f16.npy", np.arange(4, dtype="<f2"))
    save("np_bool.npy", np.array([True, False]))
    save("np_object.npy", np.array([1, "a"], dtype=object), allow_pickle=True)
    save("np_structured.npy", np.zeros(2, dtype=[("a", "<f4"), ("b", "<f4")]))

    # PyTorch state dicts as safetensors, with the reference logits
    for name, cfg, seed in MODEL_CASES:
        rc = dict(cfg, act=cfg["activation"], rope_base=cfg["base"])  # make_fixtures' names
        rng = ref.SplitMix64(seed)
        params = ref.make_params(rc, rng)
        mod = RoperTransformer(cfg)
        mod.load_state_dict(params, strict=True)  # the names are roper's: nothing renamed
        state = {k: v.detach().numpy() for k, v in mod.state_dict().items()}
        tokens, _, _ = ref.make_batch(dict(rc, batch=2, T=8), rng)
        with torch.no_grad():
            logits = ref.forward({k: v.double() for k, v in params.items()}, tokens, rc)
        meta = {"format": "pt", "roper.version": "1",
                "roper.config": json.dumps(cfg, separators=(",", ":"))}
        write_safetensors(p(name + ".safetensors"), state, meta)
        written.append(name + ".safetensors")
        if name == "torch_roper":
            write_safetensors(p(name + "_plain.safetensors"), state, {"format": "pt"})
            write_safetensors(p(name + "_f64.safetensors"),
                              {k: v.astype(np.float64) for k, v in state.items()}, meta)
            written += [name + "_plain.safetensors", name + "_f64.safetensors"]
        save(name + "_tokens.npy", tokens.numpy().astype(np.float32))
        if name == "torch_roper":  # the ids as PyTorch and NumPy hold them
            save(name + "_tokens_i64.npy", tokens.numpy().astype("<i8"))
        save(name + "_logits.npy", logits.numpy())
    for name in written:
        print("%-40s %6d bytes" % (os.path.relpath(p(name)), os.path.getsize(p(name))))
    print("numpy %s, torch %s, python %s" % (np.__version__, torch.__version__,
                                             sys.version.split()[0]))


# ---- live round trips -------------------------------------------------------------------------------

def live_npy(src, out32, out64):
    with open(src, "rb") as f:
        version = np.lib.format.read_magic(f)
        shape, fortran, dtype = np.lib.format._read_array_header(f, version)
    a = np.load(src)
    assert dtype == np.dtype("<f4") and not fortran and a.dtype == np.float32, (dtype, fortran)
    np.save(out32, a)
    np.save(out64, a.astype(np.float64))
    finite = np.isfinite(a)
    print("numpy %s read %s: version %d.%d, dtype %s, shape %s, sum of finite values %.9g"
          % (np.__version__, os.path.basename(src), version[0], version[1], dtype.str,
             tuple(a.shape), float(a[finite].astype(np.float64).sum())))


def headers(paths):
    import warnings
    for path in paths:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the Python 2 header filter warns
                a = np.load(path)
            print("%s\tok\t%s" % (os.path.basename(path), tuple(a.shape)))
        except Exception as e:  # noqa: BLE001 -- any refusal is the verdict
            print("%s\trefused\t%s" % (os.path.basename(path), type(e).__name__))


def live_model(src, tokens_path, roper_logits_path, out, out_logits):
    import torch
    from roper_torch import read_safetensors
    state, meta = read_safetensors(src)
    cfg = json.loads(meta["roper.config"])
    tokens = np.load(tokens_path).astype(np.int64)
    logits32 = torch_logits(state, cfg, tokens, torch.float32).numpy()
    logits64 = torch_logits(state, cfg, tokens, torch.float64).numpy()
    roper = np.load(roper_logits_path)
    d32 = float(np.abs(logits32.astype(np.float64) - roper).max())
    d64 = float(np.abs(logits64 - roper).max())
    np.save(out_logits, logits32)
    write_safetensors(out, {k: v.numpy() for k, v in state.items()}, meta)
    print("torch %s loaded %d tensors (%d floats) with load_state_dict(strict=True); logits %s: "
          "max |roper - torch f32| %.3g, max |roper - torch f64| %.3g"
          % (torch.__version__, len(state), sum(v.numel() for v in state.values()),
             tuple(logits32.shape), d32, d64))


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "fixtures":
        out = os.path.join(HERE, "..", "fixtures", "interop")
        if len(sys.argv) == 4 and sys.argv[2] == "--out":
            out = sys.argv[3]
        make_fixtures(out)
    elif len(sys.argv) == 5 and sys.argv[1] == "npy":
        live_npy(*sys.argv[2:])
    elif len(sys.argv) >= 3 and sys.argv[1] == "headers":
        headers(sys.argv[2:])
    elif len(sys.argv) == 7 and sys.argv[1] == "model":
        live_model(*sys.argv[2:])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()

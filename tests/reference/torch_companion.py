#!/usr/bin/python3
"""The PyTorch companion (python/roper_torch) against roper, live:
tests/lua/torch_companion_spec.lua runs these with Debian's /usr/bin/python3 (python3-torch,
python3-numpy) from the repo root.

    torch_companion.py logits MANIFEST.json
        MANIFEST: a JSON list of {"name", "model", "tokens", "out"} and any of OWN ("freq",
        "angles", "positions", "axes", "sections", "mix": for a file that does not hold them):
        each safetensors file of roper's m:save_safetensors loaded with load_roper (with those
        keys), run in float32 on the tokens (.npy of ids), the logits written to "out" (.npy,
        float32). One line per entry: "<name> <parameters> <scheme>"; exits 1 when param_count
        or layout (schema.json's rows) differs from the model's own parameters (names, shapes).

    torch_companion.py tables MANIFEST.json
        MANIFEST: a JSON list of {"positions", "d_rot", "opts", "cos", "sin"}, opts holding
        rp.rope.angles's options (base, scale, xpos_side, the frequency options and those of
        vector positions: axes, sections, mix): the companion's cos/sin tables
        (roper_torch.rotary.tables), written to "cos" and "sin" (.npy, float32).

        An entry may hold "dtype": "float64" (the tables computed in float64, as RoPE and RoPER
        cache them, then rounded to float32 for the file) and "perturb": {"rel", "bound"}:
        torch's float64 cos, sin and pow made to err by rel (each value times 1 + rel or 1 - rel,
        by the last bit of its float64) while rotary's LIBM_REL and ANGLE_REL are bound (the
        case of a torch whose functions differ from the C library's by up to rel). One line
        each: "<index> redone <entries recomputed with the C library's functions>".

    torch_companion.py checks MANIFEST.json
        MANIFEST: a JSON list of {"positions", "d_rot", "opts"} as for tables: rotary.tables of
        each; one line each, "ok" or the ValueError's message (rotary.check's refusals).

    torch_companion.py f64 MODEL TOKENS LOGITS64 [...]
        For each triple: load_roper, then .double(): the float64 logits against LOGITS64 (.npy,
        float64: the reference model of tests/reference/make_fixtures.py); prints
        "max |companion f64 - reference f64| <d>".

    torch_companion.py grads MODEL TOKENS TARGETS OUT OWN [...]
        For each group: load_roper (OWN: a JSON object of the keys of OWN), roper's loss (mean
        cross-entropy over targets >= 0), loss.backward(); writes the gradients under the parameters' names to OUT with the
        companion's safetensors writer (no roper.config: a plain state dict); prints
        "loss <loss>, ..."; exit 1 when a gradient is not finite.

    torch_companion.py roundtrip MODEL OUT [...]
        For each pair: load_roper, then save_roper to OUT (rp.load reads it back).

    torch_companion.py read FILE...
        read_safetensors each file; one line each: "<name>\tok\t<tensors>\t<dtypes>" or
        "<name>\trefused\t<message without the path>".

    torch_companion.py refusals CONFIGS.json
        CONFIGS: a JSON list of rp.model configs (the keys of OWN: RoperTransformer's
        arguments; {"tensor": values} for a tensor): each built as a RoperTransformer; one line
        each, the ValueError's message, or "ok" followed by the starting learned frequencies
        (rope.freq, every row, %.9g) when the model has them.

    torch_companion.py configs CONFIGS.json
        config() of each config (as for refusals, without the keys of OWN); one line each, "ok"
        or the ValueError's message.

    torch_companion.py hf_configs CONFIGS.json
        As configs, with rope_theta and rope_scaling: "ok" followed by key=value of the keys they
        set (HF_KEYS, floats as %.17g), or the ValueError's message.

    torch_companion.py saves CONFIGS.json OUT [...]
        For each pair: each config (as for refusals) built and written with save_roper to OUT;
        one line each, "saved" or the ValueError's message without the path.

    torch_companion.py to_json CONFIGS.json
        roper.config as save_roper writes it (stored.to_json) for each config (as for configs);
        one line each.

    torch_companion.py stored FILE...
        load_roper of each safetensors file; one line each: "ok", the message (without the path)
        of a roper.config it refuses (stored.from_json) or of too few parameters (param_count),
        "weights" when load_state_dict refuses the tensors, or "error: ..." for anything else.

    torch_companion.py loads FILE...
        load_roper of each safetensors file; one line each: "ok", or the ValueError's message
        without the path ("error: ..." when it does not start with the path).

    torch_companion.py edges
        The refusals of standalone use: rotary.tables with own angles at a position below 0 and
        past the table, RotaryAttention with positions fewer than offset + T; rotary.tables
        with 15 Freq that roper refuses; then angles given as a function: "function: <rows> x
        <pairs>, the list's" (or "differs"), own frequencies from NumPy ("numpy: <theta>,
        <theta>") and three refusals; one line each.

    torch_companion.py rope MANIFEST.json
        MANIFEST: a JSON list of {"name", "cls" ("RoPE" or "RoPER"), "opts" (the module's
        keywords), "q", "k", "v" (.npy, roper's layout [B, T, H, D]), "offset", "step", "out"}:
        causal attention written around the module (RoPER(**opts): rotate_queries_and_keys,
        rotate_values, softmax(q k^T / sqrt(D)), rotate_output), positions from offset, in the
        layout of opts' seq_dim (default -2: [B, H, T, D]); step: token by token with a cache of
        the rotated keys and values (q, k, v of one length), each at its own offset. The output
        in roper's layout to "out" (.npy, float32); one line each: "<name> <T> <S>".

    torch_companion.py rope_edges
        What RoPE, RoPER and RotaryAttention refuse or take on their own (bad options, widths,
        layouts, offsets; a layer without vocab): one line each, "<case>: <message>" or
        "<case>: ok ...".

    torch_companion.py rope_grad
        torch.autograd.gradcheck of RoPER attention (float64; partial, interleaved, YaRN, xPos,
        an offset) against finite differences: prints "gradcheck ok" or fails.

    torch_companion.py fused CASES.json
        CASES: a JSON list of {"name", "cfg"} (rp.model configs): each model run forward and
        backward (the loss of the copy task on fixed tokens) with roper_torch.model.sdpa set to
        None (the explicit softmax) and to reference_sdpa (PyTorch's documented reference of
        scaled_dot_product_attention, pure torch), in float32 and in float64; one line each,
        "<name> calls <fused calls> f32 <max |logits diff|> <max |grad diff|> f64 <...> <...>".
        Then "torch sdpa: none" or "torch sdpa: max |torch's - reference| <d>" (torch's own
        function, when it has one, against the reference on causal and masked cases).

    torch_companion.py readme_ids MODEL TOKENS LOGITS [...]
        The README's use of token ids saved by roper (t:save: a float32 .npy): load_roper, then
        x = torch.from_numpy(np.load(TOKENS)); prints "ids <dtype>", "as they are: <what the
        model raises>" (float32 ids are no indices), and "after .long(): max |companion -
        roper| <d>, largest |logit| <m>" against LOGITS (roper's, .npy).

    torch_companion.py train OUT LOGITS TOKENS
        A RoperTransformer with pe roper built in PyTorch, trained with Adam on a copy task
        (predict the token 3 places back); prints the loss of each of the first and last steps,
        exit 1 unless the last loss is below half the first; writes the model with save_roper to
        OUT and its logits on TOKENS (written here, .npy) to LOGITS.
"""

import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

from roper_torch import (Freq, RoPE, RoPER, RotaryAttention, RoperTransformer,  # noqa: E402
                         SafetensorsError, config, load_roper, read_safetensors, save_roper,
                         tables, write_safetensors)
from roper_torch import model as model_mod, rotary  # noqa: E402
from roper_torch.model import layout, param_count  # noqa: E402
from roper_torch.stored import to_json  # noqa: E402


OWN = ("freq", "angles", "positions", "axes", "sections", "mix")


def ids(path):
    return torch.from_numpy(np.load(path).astype(np.int64))


def own(e):
    """The keys of OWN in e (popped): RoperTransformer's and load_roper's arguments; a value
    {"tensor": values} becomes a float32 tensor of them (roper's tensors)."""
    def value(v):
        return torch.tensor(v["tensor"], dtype=torch.float32) if isinstance(v, dict) else v
    return {k: value(e.pop(k)) for k in OWN if k in e}


def logits(manifest):
    with open(manifest) as f:
        entries = json.load(f)
    for e in entries:
        m = load_roper(e["model"], **own(e))
        m.eval()
        with torch.no_grad():
            out = m(ids(e["tokens"]))
        np.save(e["out"], out.numpy().astype(np.float32))
        c = m.cfg
        if param_count(c) != sum(p.numel() for p in m.parameters()):
            sys.stderr.write("%s: param_count %d, the model has %d\n" % (
                e["name"], param_count(c), sum(p.numel() for p in m.parameters())))
            sys.exit(1)
        shapes = {k: tuple(v.shape) for k, v in m.state_dict().items()}
        if dict(layout(c)) != shapes or len(layout(c)) != len(shapes):
            sys.stderr.write("%s: layout %s, the model has %s\n" % (e["name"], layout(c), shapes))
            sys.exit(1)
        print("%s %d %s %s rotate %s %s" % (e["name"], sum(p.numel() for p in m.parameters()),
                                            c["pe"], c["attention"], c["rotate"] or "-",
                                            c["scaling"]))


def freq_of_opts(o):
    """The Freq of rp.rope.angles's options o (the frequency options and those of vector
    positions)."""
    return Freq(scaling=o.get("scaling", "none"), factor=o.get("scaling_factor", 1.0),
                orig_len=o.get("orig_len", 0.0), yarn_alpha=o.get("yarn_alpha", 1.0),
                yarn_beta=o.get("yarn_beta", 32.0), yarn_ramp=o.get("yarn_ramp", "rotations"),
                low_freq_factor=o.get("low_freq_factor", 1.0),
                high_freq_factor=o.get("high_freq_factor", 4.0),
                attention_factor=o.get("attention_factor", 0.0), xpos=o.get("xpos", 0.0),
                xpos_scale_base=o.get("xpos_scale_base", 512.0), theta=o.get("freq"),
                angles=o.get("angles"), axes=o.get("axes", "axial"), sections=o.get("sections"),
                mix=o.get("mix"))


def tables_with(e, dtype=torch.float32):
    o = e["opts"]
    return tables(e["d_rot"], o.get("base", 10000.0), e["positions"], freq_of_opts(o),
                  c=o.get("scale", 1.0), side=o.get("xpos_side", 1), dtype=dtype)


class Perturbed:
    """torch's float64 cos, sin and pow erring by rel (each value times 1 + rel or 1 - rel, by the
    last bit of its float64), rotary's bounds LIBM_REL and ANGLE_REL set to bound, while in the
    with block."""

    def __init__(self, rel, bound):
        self.rel, self.bound = rel, bound

    def __enter__(self):
        self.saved = (torch.cos, torch.sin, torch.pow, rotary.LIBM_REL, rotary.ANGLE_REL)
        rel = self.rel

        def err(fn):
            def f(*args, **kw):
                y = fn(*args, **kw)
                if not isinstance(y, torch.Tensor) or y.dtype != torch.float64:
                    return y
                sign = (y.view(torch.int64) & 1).to(torch.float64) * 2.0 - 1.0
                return y + y * (rel * sign)
            return f
        torch.cos, torch.sin, torch.pow = (err(g) for g in self.saved[:3])
        rotary.LIBM_REL = rotary.ANGLE_REL = self.bound
        return self

    def __exit__(self, *exc):
        torch.cos, torch.sin, torch.pow, rotary.LIBM_REL, rotary.ANGLE_REL = self.saved


def tables_of(manifest):
    with open(manifest) as f:
        entries = json.load(f)
    redone = []
    exact_round = rotary._exact_round

    def counted(*args):
        vals, n = exact_round(*args)
        redone[-1] += n
        return vals, n
    rotary._exact_round = counted
    for k, e in enumerate(entries, 1):
        redone.append(0)
        dtype = torch.float64 if e.get("dtype") == "float64" else torch.float32
        p = e.get("perturb")
        if p:
            with Perturbed(p["rel"], p["bound"]):
                cos, sin = tables_with(e, dtype)
        else:
            cos, sin = tables_with(e, dtype)
        np.save(e["cos"], cos.float().numpy())
        np.save(e["sin"], sin.float().numpy())
        print("%d redone %d" % (k, redone[-1]))
    rotary._exact_round = exact_round


def checks(manifest):
    with open(manifest) as f:
        entries = json.load(f)
    for e in entries:
        try:
            tables_with(e)
            print("ok")
        except ValueError as err:
            print(str(err))


def f64(model, tokens, ref):
    m = load_roper(model).double().eval()
    with torch.no_grad():
        out = m(ids(tokens)).numpy()
    print("max |companion f64 - reference f64| %.3g" % float(np.abs(out - np.load(ref)).max()))


def grads(model, tokens, targets, out, kw):
    m = load_roper(model, **json.loads(kw))
    loss = m.loss(ids(tokens), ids(targets))
    loss.backward()
    g = {k: p.grad for k, p in m.named_parameters()}
    bad = [k for k, v in g.items() if v is None or not torch.isfinite(v).all()]
    write_safetensors(out, {k: v for k, v in g.items() if v is not None}, {"format": "pt"})
    print("loss %.9g, %d gradients, largest |g| %.3g%s"
          % (loss.item(), len(g), max(v.abs().max().item() for v in g.values() if v is not None),
             ", not finite: " + " ".join(bad) if bad else ""))
    return 1 if bad else 0


def roundtrip(model, out):
    save_roper(load_roper(model), out)


def read(path):
    name = os.path.basename(path)
    try:
        t, _ = read_safetensors(path)
        print("%s\tok\t%d\t%s" % (name, len(t), ",".join(sorted({str(v.dtype) for v in
                                                                  t.values()}))))
    except SafetensorsError as e:
        print("%s\trefused\t%s" % (name, str(e)[len(path) + 2:]))


def refusals(path):
    with open(path) as f:
        cfgs = json.load(f)
    for c in cfgs:
        try:
            m = RoperTransformer(c, **own(c))
        except ValueError as e:
            print(str(e))
            continue
        w = m.state_dict().get("rope.freq")
        print(" ".join(["ok"] + ([] if w is None else ["%.9g" % v for v in w.flatten().tolist()])))


def configs(path):
    with open(path) as f:
        cfgs = json.load(f)
    for c in cfgs:
        try:
            config(c)
            print("ok")
        except ValueError as e:
            print(str(e))


# the keys rope_theta and rope_scaling set
HF_KEYS = ("base", "scaling", "scaling_factor", "orig_len", "yarn_alpha", "yarn_beta",
           "yarn_ramp", "low_freq_factor", "high_freq_factor", "attention_factor")


def hf_configs(path):
    with open(path) as f:
        cfgs = json.load(f)
    for c in cfgs:
        try:
            full = config(c)
        except ValueError as e:
            print(str(e))
            continue
        print("ok " + " ".join("%s=%s" % (k, "%.17g" % v if isinstance(v, float) else v)
                               for k, v in ((k, full[k]) for k in HF_KEYS)))


def saves(path, out):
    with open(path) as f:
        cfgs = json.load(f)
    for c in cfgs:
        try:
            save_roper(RoperTransformer(c, **own(c)), out)
            print("saved")
        except ValueError as e:
            msg = str(e)
            print(msg[len(out) + 2:] if msg.startswith(out + ": ") else msg)


def to_json_lines(path):
    with open(path) as f:
        cfgs = json.load(f)
    for c in cfgs:
        print(to_json(config(c)))


def stored(path):
    try:
        load_roper(path)
        print("ok")
    except ValueError as e:
        msg = str(e)[len(path) + 2:]
        print(msg if msg.startswith(("bad ", "the config needs")) else "error: %s" % e)
    except RuntimeError as e:
        print("weights" if "state_dict" in str(e) else "error: %s" % e)


def loads(path):
    try:
        load_roper(path)
        print("ok")
    except ValueError as e:
        print(str(e)[len(path) + 2:] if str(e).startswith(path + ": ") else "error: %s" % e)


def edges():
    ang = Freq(angles=[[0.1, 0.2], [0.3, 0.4]])
    attn = RotaryAttention(vocab=5, d_model=8, heads=2, pe="rope", seq_len=4,
                           positions=[(0,), (1,), (2,)])
    for fn in (lambda: tables(4, 10000.0, [1, -1], ang), lambda: tables(4, 10000.0, [2], ang),
               lambda: attn(torch.zeros(1, 3, 8), offset=1), lambda: attn(torch.zeros(1, 4, 8)),
               lambda: attn(torch.zeros(1, 3, 8))):
        try:
            fn()
            print("ok")
        except ValueError as e:
            print(str(e))
    # rotary.tables with a Freq that roper refuses (as rp.rope.angles refuses its options), then
    # with what only a Freq built by hand can hold
    p2 = [[0, 0], [0, 1], [1, 0], [1, 1]]
    for pos, f in (([0, 1, 2, 3], Freq(theta=[1.0, 2.0])), (4, Freq(angles=[[1.0, 2.0]] * 2)),
                   (2, Freq(scaling="pi", factor=2.0, angles=[[1.0, 2.0, 3.0, 4.0]] * 2)),
                   (p2, Freq(axes="sections", sections=[2, 1])),
                   (4, Freq(angles=[[1.0, 2.0, 3.0, 4.0]] * 2)),
                   (p2, Freq(axes="mixed", mix=[[1.0] * 4])),
                   (p2, Freq(axes="mixed", mix=[[1.0] * 2] * 2)),
                   (p2, Freq(axes="mixed")), ([0, 1], Freq(axes="mixed", mix=[[1.0] * 4])),
                   (p2, Freq(mix=[[1.0] * 4] * 2)), (p2, Freq(axes="sections", sections=[4, 0, 1])),
                   (p2, Freq(theta=[1.0, 2.0, math.nan, 4.0])),
                   (4, Freq(scaling="yarn", factor=2.0, orig_len=8.0, yarn_alpha=40.0)),
                   (4, Freq(scaling="llama3", factor=2.0, orig_len=8.0, low_freq_factor=5.0)),
                   (4, Freq(scaling="yarn", factor=2.0))):
        try:
            tables(8, 10000.0, range(pos) if isinstance(pos, int) else pos, f)
            print("ok")
        except ValueError as e:
            print(str(e))
    # angles as a function(p, i): the table of its values, or roper's refusals of them
    base = dict(vocab=11, d_model=16, heads=2, layers=2, d_ff=24, seq_len=8)
    fn = lambda p, i: 0.3 * p * (i + 1) - 0.01 * p * p  # noqa: E731
    a = RoperTransformer(base, angles=fn).freq.angles
    b = RoperTransformer(base, angles=[[fn(p, i) for i in range(4)] for p in range(8)]).freq.angles
    print("function: %d x %d, %s" % (len(a), len(a[0]), "the list's" if a == b else "differs"))
    # NumPy arrays and numbers, 0-d tensors: read as the list of their values
    f = RoperTransformer(base, freq=np.array([1.0, 0.5, 0.25, 0.125])).freq.theta
    g = RoperTransformer(base, freq=[np.float32(1.0), np.int64(2), torch.tensor(0.5), 3]).freq.theta
    print("numpy: %s, %s" % (f, g))
    for pe, fn in (("rope", lambda p, i: "x"),
                   ("roper", lambda p, i: math.inf if (p, i) == (2, 1) else 0.0),
                   ("none", lambda p, i: 0.0)):
        try:
            RoperTransformer(base, pe=pe, angles=fn)
            print("ok")
        except ValueError as e:
            print(str(e))


def rope_attention(rope, q, k, v, offset):
    """Causal attention around the module rope (RoPE or RoPER) on q, k, v in its layout
    (positions on rope.seq_dim, the head's features last): queries at the keys' last positions."""
    s = rope.seq_dim % q.dim()
    T, S = q.shape[s], k.shape[s]
    q, k = rope.rotate_queries_and_keys(q, k, offset)
    if isinstance(rope, RoPER):
        v = rope.rotate_values(v, offset)
    q, k, v = (x.movedim(s, -2) for x in (q, k, v))              # [..., T, D]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    causal = torch.ones(T, S, dtype=torch.bool).tril(S - T)
    out = (scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v).movedim(-2, s)
    return rope.rotate_output(out, offset + S - T) if isinstance(rope, RoPER) else out


def rope_cases(manifest):
    with open(manifest) as f:
        entries = json.load(f)
    for e in entries:
        cls = {"RoPE": RoPE, "RoPER": RoPER}[e["cls"]]
        rope = cls(**e["opts"])
        # roper's [B, T, H, D] in the module's layout: seq_dim 1 is roper's own
        q, k, v = (torch.from_numpy(np.load(e[n])) for n in ("q", "k", "v"))
        if rope.seq_dim % 4 != 1:
            q, k, v = (x.transpose(1, 2) for x in (q, k, v))
        s = rope.seq_dim % 4
        if e.get("step"):
            rows, ks, vs = [], [], []
            for t in range(q.shape[s]):
                qt, kt, vt = (x.narrow(s, t, 1) for x in (q, k, v))
                off = e["offset"] + t
                qt, kt = rope.rotate_queries_and_keys(qt, kt, off)
                ks.append(kt)
                vs.append(rope.rotate_values(vt, off) if isinstance(rope, RoPER) else vt)
                K, V = (torch.cat(c, s).movedim(s, -2) for c in (ks, vs))
                a = (qt.movedim(s, -2) @ K.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1)
                o = (a @ V).movedim(-2, s)
                rows.append(rope.rotate_output(o, off) if isinstance(rope, RoPER) else o)
            out = torch.cat(rows, s)
        else:
            out = rope_attention(rope, q, k, v, e["offset"])
        if s != 1:
            out = out.transpose(1, 2)
        np.save(e["out"], out.contiguous().numpy().astype(np.float32))
        print("%s %d %d" % (e["name"], q.shape[s], k.shape[s]))


def rope_edges():
    x = torch.zeros(1, 2, 3, 8)
    cases = [
        ("dim 3", lambda: RoPER(dim=3)),
        ("dim_v 0", lambda: RoPER(dim_v=0)),
        ("seq_dim -1", lambda: RoPE(seq_dim=-1)),
        ("unknown", lambda: RoPE(dim_v=4)),
        ("pairing", lambda: RoPE(pairing="pairs")),
        ("base", lambda: RoPER(base=0)),
        ("factor alone", lambda: RoPER(scaling_factor=2)),
        ("yarn without orig_len", lambda: RoPER(scaling="yarn", scaling_factor=4)),
        ("xpos_scale_base alone", lambda: RoPE(xpos_scale_base=64)),
        ("rope_scaling and scaling", lambda: RoPE(scaling="pi", scaling_factor=2,
                                                  rope_scaling={"rope_type": "linear",
                                                                "factor": 2})),
        ("rope_theta 0", lambda: RoPE(rope_theta=0)),
        ("rope_theta past float", lambda: RoPE(rope_theta=10 ** 400)),
        ("beta_slow above beta_fast", lambda: RoPER(rope_scaling={
            "rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 4,
            "beta_slow": 40})),
        ("attention_factor 0", lambda: RoPE(rope_scaling={
            "rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 4,
            "attention_factor": 0})),
        ("mscale ratio 0", lambda: RoPE(rope_scaling={
            "rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 4,
            "mscale": -7.213475204444817, "mscale_all_dim": 1})),
        ("mscale ratio by 0", lambda: RoPE(rope_scaling={
            "rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 4,
            "mscale": 1, "mscale_all_dim": -7.213475204444817})),
        ("factor past float", lambda: RoPE(rope_scaling={"rope_type": "linear",
                                                         "factor": -10 ** 400})),
        ("scaling_factor past float", lambda: RoPE(scaling="pi", scaling_factor=10 ** 400)),
        ("wider than the head", lambda: RoPER(dim=16).rotate_keys(x)),
        ("odd head", lambda: RoPE().rotate_keys(torch.zeros(1, 2, 3, 7))),
        ("not a tensor", lambda: RoPE().rotate_keys([1.0, 2.0])),
        ("integer tensor", lambda: RoPE().rotate_keys(torch.zeros(2, 4, dtype=torch.long))),
        ("seq_dim out of range", lambda: RoPE(seq_dim=-5).rotate_keys(x)),
        ("negative offset", lambda: RoPE().rotate_keys(x, -1)),
        ("offset past 2^53", lambda: RoPE().rotate_keys(x, 2 ** 53 - 2)),
        ("more queries than keys", lambda: RoPE().rotate_queries_and_keys(x, x[:, :, :2])),
        ("queries or keys with xpos", lambda: RoPE(xpos=0.4).rotate_queries_or_keys(x)),
        ("a layer without vocab", lambda: "ok: vocab %s, out %s" % (
            RotaryAttention(d_model=64, heads=4, pe="roper").cfg["vocab"],
            list(RotaryAttention(d_model=64, heads=4, pe="roper")(torch.zeros(2, 5, 64)).shape))),
        ("a layer with vocab 0", lambda: RotaryAttention(vocab=0, d_model=64, heads=4)),
        ("a layer with a bad key", lambda: RotaryAttention(d_model=64, heads=3)),
    ]
    for name, fn in cases:
        try:
            r = fn()
            print("%s: %s" % (name, r if isinstance(r, str) else "ok"))
        except (ValueError, TypeError) as e:
            print("%s: %s" % (name, e))


def rope_grad():
    torch.manual_seed(3)
    rope = RoPER(dim=6, dim_v=4, pairing="interleaved", scaling="yarn", scaling_factor=4,
                 orig_len=4, xpos=0.4, xpos_scale_base=8)
    q, k, v = (torch.randn(1, 2, 5, 8, dtype=torch.float64, requires_grad=True)
               for _ in range(3))
    torch.autograd.gradcheck(lambda q, k, v: rope_attention(rope, q, k, v, 3), (q, k, v))
    print("gradcheck ok")


def train(out, logits_out, tokens_out):
    torch.manual_seed(3)
    V, T, B, lag = 8, 12, 16, 3
    m = RoperTransformer(vocab=V, d_model=32, heads=4, layers=2, d_ff=64, seq_len=T, pe="roper",
                         seed=3)
    opt = torch.optim.Adam(m.parameters(), lr=3e-3)
    losses = []
    for step in range(150):
        x = torch.randint(0, V, (B, T))
        y = torch.full((B, T), -1, dtype=torch.long)
        y[:, lag:] = x[:, :-lag]
        loss = m.loss(x, y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    print("train: mean loss of the first 5 steps %.4f, of the last 5 %.4f (ln %d = %.4f)"
          % (first, last, V, math.log(V)))
    save_roper(m, out)
    x = torch.randint(0, V, (2, T))
    m.eval()
    with torch.no_grad():
        np.save(logits_out, m(x).numpy())
    np.save(tokens_out, x.numpy().astype(np.float32))
    return 0 if last < 0.5 * first else 1


def readme_ids(model, tokens, ref):
    m = load_roper(model).eval()
    x = torch.from_numpy(np.load(tokens))
    print("ids %s" % str(x.dtype).replace("torch.", ""))
    try:
        with torch.no_grad():
            m(x)
        print("as they are: taken")
    except (RuntimeError, TypeError, IndexError) as e:
        print("as they are: %s" % type(e).__name__)
    with torch.no_grad():
        out = m(x.long()).numpy()
    want = np.load(ref)
    print("after .long(): max |companion - roper| %.3g, largest |logit| %.3g"
          % (float(np.abs(out - want).max()), float(np.abs(want).max())))


def reference_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                   scale=None):
    """torch.nn.functional.scaled_dot_product_attention as PyTorch's documentation writes it
    out (its signature and semantics, pure torch): softmax(q k^T scale + mask) v, scale 1 /
    sqrt(E) when None, is_causal the lower triangle (row n sees keys 0 .. n), attn_mask a
    boolean mask (True: kept) or an additive one, dropout_p on the weights."""
    L, S = query.size(-2), key.size(-2)
    s = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)
    if is_causal:
        keep = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        bias = bias.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        bias = bias.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
            else bias + attn_mask
    w = torch.softmax(query @ key.transpose(-2, -1) * s + bias, dim=-1)
    if dropout_p > 0.0:
        w = torch.dropout(w, dropout_p, train=True)
    return w @ value


def fused(path):
    with open(path) as f:
        cases = json.load(f)
    calls = []

    def counted(*args, **kw):
        calls.append(1)
        return reference_sdpa(*args, **kw)
    saved = model_mod.sdpa
    for e in cases:
        torch.manual_seed(3)
        m = RoperTransformer(e["cfg"])
        T, V = m.cfg["seq_len"], m.cfg["vocab"]
        tok = torch.randint(0, V, (2, T))
        tgt = torch.roll(tok, 3, dims=1)  # the copy task: the token 3 places back
        diffs = []
        calls.clear()
        for dtype in (torch.float32, torch.float64):
            m.to(dtype)
            got = []
            for fn in (None, counted):
                model_mod.sdpa = fn
                m.zero_grad()
                logits = m(tok)
                F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1)).backward()
                got.append((logits.detach(), [p.grad.clone() for p in m.parameters()]))
            (l0, g0), (l1, g1) = got
            diffs.append((l0 - l1).abs().max().item())
            diffs.append(max((a - b).abs().max().item() for a, b in zip(g0, g1)))
        model_mod.sdpa = saved
        print("%s calls %d f32 %.3g %.3g f64 %.3g %.3g" % ((e["name"], len(calls)) + tuple(diffs)))
    # the control: a fused function that drops the causal mask gives other logits (the
    # comparison above sees a wrong fused path)
    m = RoperTransformer(cases[0]["cfg"])
    tok = torch.randint(0, m.cfg["vocab"], (2, m.cfg["seq_len"]))
    with torch.no_grad():
        model_mod.sdpa = None
        want = m(tok)
        model_mod.sdpa = lambda *args, **kw: reference_sdpa(*args, **dict(kw, is_causal=False))
        got = m(tok)
    model_mod.sdpa = saved
    print("control %s without the causal mask: f32 %.3g" % (cases[0]["name"],
                                                              (want - got).abs().max().item()))
    real = getattr(F, "scaled_dot_product_attention", None)
    if real is None or model_mod._fused() is None:
        print("torch sdpa: none")
        return 0
    torch.manual_seed(4)
    worst = 0.0
    for L, S in ((7, 7), (1, 5), (5, 5)):
        q, k, v = (torch.randn(2, 3, n, 8, dtype=torch.float64) for n in (L, S, S))
        mask = torch.rand(L, S) > 0.3
        mask[:, 0] = True
        for kw in ({"is_causal": L == S}, {"attn_mask": mask}, {"scale": 0.3},
                   {"attn_mask": torch.randn(L, S, dtype=torch.float64)}):
            worst = max(worst, (real(q, k, v, **kw) - reference_sdpa(q, k, v, **kw)).abs()
                        .max().item())
    print("torch sdpa: max |torch's - reference| %.3g" % worst)
    return 0


def main():
    torch.set_num_threads(1)
    a = sys.argv[1:]
    # command: (function, arguments per call, repeated over groups of them)
    cmds = {"logits": (logits, 1, False), "tables": (tables_of, 1, False), "f64": (f64, 3, True),
            "checks": (checks, 1, False),
            "grads": (grads, 5, True), "roundtrip": (roundtrip, 2, True), "read": (read, 1, True),
            "refusals": (refusals, 1, False), "configs": (configs, 1, False),
            "hf_configs": (hf_configs, 1, False),
            "saves": (saves, 2, True), "to_json": (to_json_lines, 1, False),
            "stored": (stored, 1, True), "loads": (loads, 1, True),
            "edges": (edges, 0, False), "train": (train, 3, False),
            "rope": (rope_cases, 1, False), "rope_grad": (rope_grad, 0, False),
            "rope_edges": (rope_edges, 0, False), "fused": (fused, 1, False),
            "readme_ids": (readme_ids, 3, True)}
    if not a or a[0] not in cmds:
        sys.stderr.write(__doc__)
        sys.exit(2)
    fn, n, repeat = cmds[a[0]]
    args = a[1:]
    if n == 0:
        sys.exit(fn() or 0 if not args else 2)
    if not args or len(args) % n or (not repeat and len(args) != n):
        sys.stderr.write(__doc__)
        sys.exit(2)
    sys.exit(max(fn(*args[i:i + n]) or 0 for i in range(0, len(args), n)))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""GPU check of roper's PyTorch companion (python/roper_torch), issue 61 item 9.

Run from the root of a roper checkout (or give its path): python3 tests/reference/torch_gpu_check.py [ROOT]
A manual check for a machine with a GPU and a current PyTorch: make test and CI never run it.
Needs torch (2.x with CUDA for the full check) and numpy; no network. Prints plain lines;
exits 0 when every comparison is within its bound, 1 otherwise. Runs in about a minute (the
torch.compile part is the longest; it is skipped after 100 s).

  1. tables: rotary.tables at 131,072 positions x 128 features, float32, on CUDA and on the CPU
     (roper, llama3, dynamic, xpos): the two bit for bit, and the time of each; RotaryAttention's
     first tables() call (4 placements) timed on both.
  2. fused vs explicit: RoperTransformer forward + backward on CUDA with roper_torch.model.sdpa =
     torch's scaled_dot_product_attention (fused) and = None (explicit softmax), several modes:
     max |logits diff| and max |grad diff|, float32 and float64; the fused function's calls.
  3. torch.compile of the model (fused path): logits and grads against eager.
  4. timing: one training step (forward, loss, backward, Adam) of bench_torch's S model
     (d_model 128, 4 heads, 3 layers, d_ff 512, T 512, batch 16), fused / explicit, eager /
     compiled, on CUDA, and fused / explicit on the CPU.
"""
import math
import os
import sys
import time

T0 = time.perf_counter()
ROOT = sys.argv[1] if len(sys.argv) > 1 else os.getcwd()
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import roper_torch  # noqa: E402
from roper_torch import RotaryAttention, RoperTransformer, rotary  # noqa: E402
from roper_torch import model as rmodel  # noqa: E402

FAILED = []


def say(*a):
    print(*a, flush=True)


def check(name, ok, detail):
    say("%-58s %s  %s" % (name, "ok  " if ok else "FAIL", detail))
    if not ok:
        FAILED.append(name)


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def timed(fn, dev, reps=1):
    best = math.inf
    out = None
    for _ in range(reps):
        sync(dev)
        t = time.perf_counter()
        out = fn()
        sync(dev)
        best = min(best, time.perf_counter() - t)
    return best, out


CUDA = torch.cuda.is_available()
DEV = torch.device("cuda" if CUDA else "cpu")
SDPA = getattr(F, "scaled_dot_product_attention", None)
say("torch %s, python %s, cpu threads %d" % (torch.__version__, sys.version.split()[0],
                                            torch.get_num_threads()))
say("device: %s" % (torch.cuda.get_device_name(0) if CUDA else "no CUDA: the CPU stands in"))
say("roper_torch from %s" % os.path.dirname(roper_torch.__file__))
say("roper_torch.model.sdpa (the fused path): %s" % (
    "torch's scaled_dot_product_attention" if rmodel.sdpa is not None else
    "None (this torch has no scaled_dot_product_attention with scale)"))

# ---- 1. tables -----------------------------------------------------------------------------------
N, D = 131072, 128
SCHEMES = {
    "roper": {},
    "llama3": {"scaling": "llama3", "scaling_factor": 8, "orig_len": 8192, "low_freq_factor": 1,
               "high_freq_factor": 4, "base": 500000},
    "dynamic": {"scaling": "dynamic", "scaling_factor": 4, "orig_len": 8192},
    "xpos": {"xpos": 0.4, "xpos_scale_base": 512},
}
say("")
say("1. tables, %d positions x %d features, float32" % (N, D))
for name, kw in SCHEMES.items():
    a_cpu = RotaryAttention(pe="roper", d_model=D, heads=1, seq_len=N, **kw)
    t_cpu, tab_cpu = timed(lambda: a_cpu.tables(0, N), torch.device("cpu"))
    a_dev = RotaryAttention(pe="roper", d_model=D, heads=1, seq_len=N, **kw)
    t_dev, tab_dev = timed(lambda: a_dev.tables(0, N, device=DEV), DEV)
    same = all(torch.equal(tab_cpu[p][0], tab_dev[p][0].cpu()) and
               torch.equal(tab_cpu[p][1], tab_dev[p][1].cpu()) for p in tab_cpu)
    check("tables %-8s %s == cpu (4 placements)" % (name, DEV.type), same,
          "first call: cpu %.3f s, %s %.3f s" % (t_cpu, DEV.type, t_dev))
# one placement alone, as rotary.tables computes it (no sharing between placements)
f = rotary.Freq(scaling="llama3", factor=8.0, orig_len=8192.0)
t1, _ = timed(lambda: rotary.tables(D, 500000.0, range(N), f), torch.device("cpu"))
t2, _ = timed(lambda: rotary.tables(D, 500000.0, range(N), f, device=DEV), DEV)
say("rotary.tables llama3, one placement: cpu %.3f s, %s %.3f s" % (t1, DEV.type, t2))


# ---- 2. fused vs explicit ------------------------------------------------------------------------
def run(m, tok, tgt, fn):
    rmodel.sdpa = fn
    m.zero_grad()
    logits = m(tok)
    F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1)).backward()
    return logits.detach(), [p.grad.detach().clone() for p in m.parameters()]


def diff(a, b):
    (la, ga), (lb, gb) = a, b
    return ((la - lb).abs().max().item(),
            max((x - y).abs().max().item() for x, y in zip(ga, gb)))


FUSED = rmodel.sdpa
calls = []


def counted(*a, **kw):
    calls.append(1)
    return FUSED(*a, **kw)


say("")
say("2. fused vs explicit attention on %s (forward + backward)" % DEV.type)
MODES = [("roper", {}), ("rope", {}), ("roper_legacy", {"xpos": 0.4, "xpos_scale_base": 64}),
         ("rope", {"scaling": "yarn", "scaling_factor": 4}), ("none", {}), ("learned", {}),
         ("alibi", {})]
if FUSED is None:
    say("skipped: this torch has no scaled_dot_product_attention with scale (2.1 and later)")
else:
    for pe, kw in MODES:
        torch.manual_seed(0)
        m = RoperTransformer(vocab=64, d_model=128, heads=4, layers=2, d_ff=256, seq_len=256,
                             pe=pe, **kw).to(DEV)
        tok = torch.randint(0, 64, (4, 256), device=DEV)
        tgt = torch.roll(tok, 3, dims=1)
        for dtype, bound in ((torch.float32, 2e-4), (torch.float64, 1e-10)):
            m.to(dtype)
            calls.clear()
            dl, dg = diff(run(m, tok, tgt, None), run(m, tok, tgt, counted))
            want = 0 if pe == "alibi" else 2
            check("fused == explicit %-12s %s %s" % (pe, str(dtype)[6:], "+" + ",".join(kw)
                                                    if kw else ""),
                  dl <= bound and dg <= bound and len(calls) == want,
                  "logits %.2e grads %.2e (fused calls %d)" % (dl, dg, len(calls)))
    rmodel.sdpa = FUSED

# ---- 3. torch.compile ----------------------------------------------------------------------------
say("")
say("3. torch.compile (fused path) against eager on %s" % DEV.type)
S = dict(vocab=32, d_model=128, heads=4, layers=3, d_ff=512, seq_len=512)
compiled = None
if not hasattr(torch, "compile"):
    say("skipped: this torch has no torch.compile")
else:
    try:
        torch.manual_seed(1)
        m = RoperTransformer(pe="roper", **S).to(DEV)
        tok = torch.randint(0, 32, (16, 512), device=DEV)
        tgt = torch.randint(0, 32, (16, 512), device=DEV)
        eager = run(m, tok, tgt, FUSED)
        compiled = torch.compile(m)
        t, got = timed(lambda: run(compiled, tok, tgt, FUSED), DEV)
        dl, dg = diff(eager, got)
        check("compiled == eager (roper, S, float32)", dl <= 2e-4 and dg <= 2e-4,
              "logits %.2e grads %.2e (first call, compiling: %.1f s)" % (dl, dg, t))
    except Exception as e:  # noqa: BLE001 (report and go on)
        compiled = None
        check("torch.compile", False, "%s: %s" % (type(e).__name__, str(e).splitlines()[0]
                                                  if str(e) else ""))

# ---- 4. timing -----------------------------------------------------------------------------------
say("")
say("4. one training step of S (d_model 128, 4 heads, 3 layers, d_ff 512, T 512, batch 16)")


def step_time(m, dev, fn, reps=5):
    opt = torch.optim.Adam(m.parameters(), lr=2.5e-4)
    tok = torch.randint(0, 32, (16, 512), device=dev)
    tgt = torch.randint(0, 32, (16, 512), device=dev)

    def step():
        rmodel.sdpa = fn
        loss = F.cross_entropy(m(tok).reshape(-1, 32), tgt.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
    timed(step, dev)  # warm-up
    return timed(step, dev, reps)[0]


for dev in ([DEV, torch.device("cpu")] if CUDA else [DEV]):
    for pe in ("rope", "roper"):
        torch.manual_seed(1)
        m = RoperTransformer(pe=pe, **S).to(dev)
        m.layers[0].attn.tables(0, 512, device=dev)
        te = step_time(m, dev, None, 5 if dev.type == "cuda" else 3)
        tf = step_time(m, dev, FUSED, 5 if dev.type == "cuda" else 3) if FUSED else math.nan
        say("%-5s %-6s explicit %8.1f ms  fused %8.1f ms  explicit / fused %.2f"
            % (dev.type, pe, te * 1e3, tf * 1e3, te / tf))
if compiled is not None and time.perf_counter() - T0 < 100:
    try:
        tc = step_time(compiled, DEV, FUSED)
        say("%-5s roper  compiled (fused) %8.1f ms" % (DEV.type, tc * 1e3))
    except Exception as e:  # noqa: BLE001
        say("compiled step: %s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
rmodel.sdpa = FUSED

say("")
say("total %.1f s; %s" % (time.perf_counter() - T0,
                         "all checks ok" if not FAILED else "FAILED: " + ", ".join(FAILED)))
sys.exit(1 if FAILED else 0)

#!/usr/bin/python3
"""Times the same training step as build/bench_train in PyTorch (Debian's python3-torch), so that
roper's figures can be compared with PyTorch on the same machine.

    OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 /usr/bin/python3 tests/reference/bench_torch.py [S|M|P ...]

`make bench-torch` runs it beside build/bench_train on S (installing python3-torch when missing)
and prints the ratio. Threads: OMP_NUM_THREADS when set, else one per core, as roper counts them.

The model is the PyTorch companion's RoperTransformer (python/roper_torch: roper's model in plain
PyTorch, labml's layout: pre-LayerNorm, biases everywhere, ReLU feed-forward, untied head, RoPE on
q and k with rotate-half pairing, RoPER rotating v and the output back) with bench_train's sizes;
one step = forward + mean cross-entropy + backward + Adam, batch of random tokens (vocab 32).
Reported: the best of the timed steps after one warm-up (P: one step), like bench_train. Not run
by the tests (they check the companion's numbers against roper: torch_companion_spec.lua).

First it times the companion's cos/sin tables as a long context's first forward pass builds them
(RotaryAttention.tables, pe roper: the four placements q, k, v, o of one 128-feature head at
131,072 positions, float32, on the CPU), for plain RoPER, Llama 3.1's scaling, dynamic NTK and
xPos: one line each, "tables <scheme> <positions> x <features> x 4: <s> s". On torch 2.1 and
later the model's attention is torch's fused scaled_dot_product_attention (roper_torch.model.sdpa:
the modes without additive scores); on 1.13 its explicit softmax: the line "attention" says which.
"""
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from roper_torch import RotaryAttention, RoperTransformer  # noqa: E402
import roper_torch.model  # noqa: E402

TABLE_POSITIONS, TABLE_FEATURES = 131072, 128
TABLE_SCHEMES = {  # name: the config's scaling keys (Llama 3.1's own values; dynamic past 8k)
    "roper": {},
    "llama3": {"scaling": "llama3", "scaling_factor": 8, "orig_len": 8192, "low_freq_factor": 1,
               "high_freq_factor": 4, "base": 500000},
    "dynamic": {"scaling": "dynamic", "scaling_factor": 4, "orig_len": 8192},
    "xpos": {"xpos": 0.4, "xpos_scale_base": 512},
}


def time_tables(name, n=TABLE_POSITIONS, d=TABLE_FEATURES):
    """The first call of a layer's tables at n positions (a fresh layer: nothing cached)."""
    a = RotaryAttention(pe="roper", d_model=d, heads=1, seq_len=n, **TABLE_SCHEMES[name])
    t0 = time.perf_counter()
    tabs = a.tables(0, n)
    dt = time.perf_counter() - t0
    assert sorted(tabs) == ["k", "o", "q", "v"] and tabs["q"][0].shape == (n, d // 2)
    print(f"  tables {name:<8} {n} x {d} x 4: {dt:7.3f} s", flush=True)

CONFIGS = {  # name: d_model, heads, layers, d_ff, seq, batch, timed steps
    "S": (128, 4, 3, 512, 512, 16, 3),
    "M": (128, 4, 6, 512, 512, 16, 3),
    "P": (512, 8, 6, 2048, 640, 32, 1),
}


def run(name, pe):
    C, H, L, F_, T, B, steps = CONFIGS[name]
    V = 32
    torch.manual_seed(1)
    m = RoperTransformer(vocab=V, d_model=C, heads=H, layers=L, d_ff=F_, seq_len=T, max_batch=B,
                         pe=pe)
    m.layers[0].attn.tables(0, T)  # the cos/sin tables before the timed steps, as roper's model
    opt = torch.optim.Adam(m.parameters(), lr=2.5e-4)
    tok = torch.randint(0, V, (B, T))
    tgt = torch.randint(0, V, (B, T))
    best = math.inf
    for s in range(-1 if steps > 1 else 0, steps):
        t0 = time.perf_counter()
        loss = F.cross_entropy(m(tok).view(-1, V), tgt.view(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        dt = time.perf_counter() - t0
        if s >= 0:
            best = min(best, dt)
    n = sum(p.numel() for p in m.parameters())
    print(f"  {name} {pe:<6} {n / 1e6:6.2f}M params {best * 1e3:9.1f} ms/step "
          f"{B * T / best:9.0f} tokens/s", flush=True)


def main():
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1))
    names = sys.argv[1:] or list(CONFIGS)
    print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads")
    for scheme in TABLE_SCHEMES:
        time_tables(scheme)
    print("  attention: " + ("fused (torch's scaled_dot_product_attention)"
                             if roper_torch.model.sdpa is not None else
                             "explicit softmax (this torch has no fused attention with scale)"))
    for name in names:
        for pe in ("rope", "roper"):
            run(name, pe)


if __name__ == "__main__":
    main()

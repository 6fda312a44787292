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
"""
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from roper_torch import RoperTransformer  # noqa: E402

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
    for name in names:
        for pe in ("rope", "roper"):
            run(name, pe)


if __name__ == "__main__":
    main()

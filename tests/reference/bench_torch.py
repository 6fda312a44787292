#!/usr/bin/python3
"""Times the same training step as build/bench_train in PyTorch (Debian's python3-torch), so that
roper's figures can be compared with PyTorch on the same machine.

    OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 /usr/bin/python3 tests/reference/bench_torch.py [S|M|P ...]

`make bench-torch` runs it beside build/bench_train on S (installing python3-torch when missing)
and prints the ratio. Threads: OMP_NUM_THREADS when set, else one per core, as roper counts them.

The model is labml's (pre-LayerNorm, biases everywhere, ReLU feed-forward, untied head, RoPE on q
and k with rotate-half pairing, RoPER rotating v and the output back), written in plain PyTorch;
one step = forward + mean cross-entropy + backward + Adam, batch of random tokens (vocab 32).
Reported: the best of the timed steps after one warm-up (P: one step), like bench_train. Not run
by the tests (torch is not a dependency of the project).
"""
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {  # name: d_model, heads, layers, d_ff, seq, batch, timed steps
    "S": (128, 4, 3, 512, 512, 16, 3),
    "M": (128, 4, 6, 512, 512, 16, 3),
    "P": (512, 8, 6, 2048, 640, 32, 1),
}


def rope_tables(T, d, base=10000.0):
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * theta[None, :]
    ang = torch.cat([ang, ang], dim=1)
    return ang.cos().float(), ang.sin().float()


def rotate(x, cos, sin, sign=1.0):
    """x [B, T, H, d]; rotate-half pairing; sign -1 rotates backwards."""
    h = x.shape[-1] // 2
    neg_half = torch.cat([-x[..., h:], x[..., :h]], dim=-1)
    return x * cos[None, :, None, :] + sign * neg_half * sin[None, :, None, :]


class Layer(nn.Module):
    def __init__(self, C, H, F_, pe):
        super().__init__()
        self.H, self.pe = H, pe
        self.n1, self.n2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.out = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.w1, self.w2 = nn.Linear(C, F_), nn.Linear(F_, C)

    def forward(self, x, cos, sin, mask):
        B, T, C = x.shape
        H, D = self.H, C // self.H
        q, k, v = self.qkv(self.n1(x)).view(B, T, 3, H, D).unbind(2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if self.pe == "roper":
            v = rotate(v, cos, sin)
        s = torch.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(D)
        a = s.masked_fill(mask, float("-inf")).softmax(-1)
        o = torch.einsum("bhij,bjhd->bihd", a, v)
        if self.pe == "roper":
            o = rotate(o, cos, sin, -1.0)
        x = x + self.out(o.reshape(B, T, C))
        return x + self.w2(F.relu(self.w1(self.n2(x))))


class Model(nn.Module):
    def __init__(self, V, C, H, L, F_, pe):
        super().__init__()
        self.embed = nn.Embedding(V, C)
        self.layers = nn.ModuleList(Layer(C, H, F_, pe) for _ in range(L))
        self.norm, self.head = nn.LayerNorm(C), nn.Linear(C, V)
        self.H = H

    def forward(self, tok):
        T = tok.shape[1]
        cos, sin = rope_tables(T, self.embed.embedding_dim // self.H)
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        x = self.embed(tok)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.head(self.norm(x))


def run(name, pe):
    C, H, L, F_, T, B, steps = CONFIGS[name]
    V = 32
    torch.manual_seed(1)
    m = Model(V, C, H, L, F_, pe)
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

"""roper_torch: roper's numerics in PyTorch (plain torch and the standard library).

    rope = roper_torch.RoPER(dim=32)            # RoPER in your own attention
    q, k = rope.rotate_queries_and_keys(q, k)   # [batch, heads, seq, head_dim]
    v = rope.rotate_values(v)
    out = rope.rotate_output(out)               # after attention: turned back

    from roper_torch import load_roper, save_roper, RoperTransformer, RotaryAttention
    model = load_roper("w.safetensors")          # a file of roper's m:save_safetensors
    logits = model(torch.tensor([[1, 2, 3]]))    # roper's logits
    save_roper(model, "back.safetensors")        # rp.load("back.safetensors") in roper

Modules: rope (RoPE and RoPER, for your own attention), safetensors (read_safetensors,
write_safetensors), rotary (the frequency schemes by name in SCALINGS, the cos/sin tables and the
rotation), config (the modes, rp.model's config and its checks, from roper's schema in
schema.json), model (the modules). docs/interop.md of roper describes them.
"""

from .model import (DEFAULTS, MODES, RoperTransformer, RotaryAttention, config, load_roper,
                    save_roper)
from .rope import RoPE, RoPER
from .rotary import SCALINGS, Freq, rotate, score_scale, tables, theta
from .safetensors import SafetensorsError, read_safetensors, write_safetensors

__all__ = ["RoPE", "RoPER", "DEFAULTS", "MODES", "RoperTransformer", "RotaryAttention", "config",
           "load_roper", "save_roper", "SCALINGS", "Freq", "rotate", "score_scale", "tables",
           "theta", "SafetensorsError", "read_safetensors", "write_safetensors"]

-- The fingerprint of the transformer block on every path that runs it: for each of a list of
-- configs (pre- and post-norm, relu and gelu, dropout, the absolute tables, the rotary modes, the
-- relative modes, linear attention), a 64-bit hash (FNV-1a) of the bits of the logits of
-- m:forward and of the residual stream after every layer (m:activations), five training steps
-- (every loss and gradient norm in hexadecimal, the hash of the gradients of the first and of the
-- weights after the last), and the tokens of greedy and of sampled decoding through m:generate,
-- with m:generate_batch checked to give the same. The numbers depend on the CPU, the build and
-- OpenBLAS's kernels; the portable build (make PORTABLE=1) prints the same text on every x86-64-v3
-- machine (with the same OpenBLAS and C library), and portable_spec compares it with
-- tests/fixtures/portable/block.txt, made before the training forward and decoding came to
-- share one block, on an Intel Xeon with AVX-512 (Emerald Rapids). To make that file again (only
-- when a change of the code changes the numbers on purpose: say so in the commit):
--   build-portable/roper tests/portable/block.lua > tests/fixtures/portable/block.txt
rp.set_num_threads(1)

-- FNV-1a over the float32 bits of a list of tensors (fnv.lua)
local hash = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "fnv.lua")

local function tensors_of(list)
  local out = {}
  for _, p in ipairs(list) do out[#out + 1] = p.tensor end
  return out
end

-- the configs: the base model below with these keys changed
local BASE = { vocab = 23, d_model = 32, heads = 4, layers = 2, d_ff = 48, seq_len = 12,
  max_batch = 3 }
-- the relative modes' keys, given only to the modes whose terms read them (rp.pe_modes()'s
-- rel_keys: rp.model refuses the others)
local REL = { rel_clip = 3, rel_buckets = 6, rel_max_distance = 8 }
local MODES = rp.pe_modes()
local CONFIGS = {
  { pe = "rope" },
  { pe = "rope", norm = "post" },
  { pe = "rope", activation = "gelu", dropout = 0.1 },
  { pe = "rope", norm = "post", activation = "gelu", dropout = 0.2 },
  { pe = "roper", fraction_qk = 0.5, pairing = "interleaved" },
  { pe = "roper_legacy", norm = "post" },
  { pe = "none" },
  { pe = "learned", dropout = 0.1 },
  { pe = "sinusoidal", norm = "post" },
  { pe = "shaw" },
  { pe = "xl", norm = "post", dropout = 0.1 },
  { pe = "t5", activation = "gelu" },
  { pe = "deberta" },
  { pe = "alibi", norm = "post" },
  { pe = "rope", scaling = "yarn", scaling_factor = 2, xpos = 0.4 },
  { pe = "rope", attention = "linear" },
  { pe = "roper", attention = "linear", linear_rope = "before", norm = "post" },
  { pe = "learned", attention = "linear", dropout = 0.1 },
}

local function label(over)
  local keys = {}
  for k in pairs(over) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. tostring(over[k]) end
  return table.concat(parts, ",")
end

-- deterministic token grids from a generator of their own
local function grid(g, B, T)
  local x, y = {}, {}
  for b = 1, B do
    x[b], y[b] = {}, {}
    for t = 1, T do
      x[b][t] = g:int(0, BASE.vocab - 1)
      y[b][t] = g:int(0, BASE.vocab - 1)
    end
  end
  return x, y
end

local info = rp.build_info()
print(("# build %s (-march=%s), OpenBLAS %s kernels; the lines below must not change"):format(
  info.build, info.target, (rp.blas.core())))
for i, over in ipairs(CONFIGS) do
  local cfg = { seed = i }
  for k, v in pairs(BASE) do cfg[k] = v end
  for k, v in pairs(over) do cfg[k] = v end
  for _, k in ipairs(MODES[over.pe].rel_keys) do cfg[k] = REL[k] end
  local name = label(over)
  local m = rp.model(cfg)
  local g = rp.rng(100 + i)
  local x, y = grid(g, 3, 11)

  print(("%s forward %s"):format(name, hash { m:forward(x) }))
  local acts = m:activations(x)
  local list = {}
  for l = 0, #acts do list[#list + 1] = acts[l] end
  print(("%s residual %s"):format(name, hash(list)))

  -- the constant schedule, rp.optim's default when the fingerprints were taken
  local opt = rp.optim.adam(m, { lr = 1e-2, clip = 0, schedule = "constant" })
  for step = 1, 5 do
    local xs, ys = grid(g, 3, step % 2 == 0 and 12 or 9)
    local loss, norm = m:train_step(xs, ys, nil, opt)
    print(("%s step %d loss %a grad_norm %a"):format(name, step, loss, norm))
    if step == 1 then print(("%s grads %s"):format(name, hash(tensors_of(m:grads())))) end
  end
  print(("%s weights %s"):format(name, hash(tensors_of(m:params()))))

  -- prompts of 1 .. 20 tokens: windows cut and re-encoded past seq_len 12
  local prompts = {}
  for p = 1, 5 do
    prompts[p] = {}
    for t = 1, ({ 1, 4, 9, 14, 20 })[p] do prompts[p][t] = g:int(0, BASE.vocab - 1) end
  end
  for _, opts in ipairs { {}, { temperature = 0.9, top_k = 7 } } do
    local kind = opts.temperature and "sampled" or "greedy"
    local outs = {}
    for p = 1, #prompts do
      local o = {}
      for k, v in pairs(opts) do o[k] = v end
      o.rng = rp.rng(7):jump(p - 1)
      outs[p] = table.concat(m:generate(prompts[p], 16, o), " ")
    end
    local o = { lanes = 3, seed = 7 }
    for k, v in pairs(opts) do o[k] = v end
    local batch = m:generate_batch(prompts, 16, o)
    for p = 1, #prompts do
      local b = table.concat(batch[p], " ")
      print(("%s %s %d: %s%s"):format(name, kind, p, outs[p],
        b == outs[p] and "" or (" (generate_batch: " .. b .. ")")))
    end
  end
end

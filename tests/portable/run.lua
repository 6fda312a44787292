-- The fingerprint of two short training runs (rope and roper, substring by index, 60 steps of a
-- 2-layer model, then the evaluation): every step's loss, the evaluation's answers and loss, and a
-- 64-bit hash (FNV-1a) of the final weights' bits. The portable build (make PORTABLE=1) prints the
-- same text on every x86-64-v3 machine; portable_spec compares it with
-- tests/fixtures/portable/run.txt. To make that file again (only when a change of the code changes
-- the numbers on purpose: say so in the commit):
--   build-portable/roper tests/portable/run.lua > tests/fixtures/portable/run.txt
-- Arguments: [threads] (default 1).
local threads = math.tointeger(tonumber(arg[1] or "1"))

-- FNV-1a over the float32 bits of every parameter, in layout order (fnv.lua)
local fnv = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "fnv.lua")
local function weights_hash(m)
  local list = {}
  for _, p in ipairs(m:params()) do list[#list + 1] = p.tensor end
  return fnv(list)
end

local info = rp.build_info()
print(("# build %s (-march=%s), OpenBLAS %s kernels; the lines below must not change"):format(
  info.build, info.target, (rp.blas.core())))
for _, pe in ipairs { "rope", "roper" } do
  local res, m = rp.experiment.run({ task = "substring_index", pe = pe, d_model = 32, heads = 4,
    layers = 2, seq_len = 64, batch = 8, steps = 60, log_every = 1, problems = 16,
    valid_batches = 2, seed = 1, threads = threads }, nil, { keep_model = true })
  for _, c in ipairs(res.curve) do print(("%s step %d loss %a"):format(pe, c.step, c.loss)) end
  print(("%s correct %d eval_loss %a"):format(pe, res.correct, res.eval_loss))
  print(("%s weights %s"):format(pe, weights_hash(m)))
end

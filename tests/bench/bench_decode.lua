-- make bench, decoding part: the S-size model of bench_train.c (d_model 128, 4 heads, 3 layers,
-- d_ff 512, seq_len 512, pe rope, seed 1, untrained) on this process's threads:
--   rp.eval.accuracy on rp.tasks.substring_index (str_len 13: prompts of 27-28 tokens, max_new
--     24; the untrained model never emits the terminator, so every problem decodes 24 tokens):
--     problems/s at batch 1, at the default batch (m:lanes(), shown), and along the lanes 2, 4,
--     .. 64;
--   m:generate: tokens/s of one such prompt with 250 new tokens;
--   m:generate_batch: tokens/s of 64 such prompts with 250 new tokens each, at 8 lanes and at the
--     default lanes (m:lanes(64), shown).
-- Figures are the best of BENCH_REPS (default 3) timed runs, after one warm-up; never asserted. On
-- one thread the time is the process's CPU time (os.clock: the other processes of a shared
-- machine do not count), on more the wall-clock time.
-- Usage: roper tests/bench/bench_decode.lua
local rp = require "roper"
local system = require "system"

local reps = tonumber(os.getenv("BENCH_REPS") or "") or 3
if reps < 1 then reps = 1 end

local task = rp.tasks.substring_index {}
local m = rp.model { vocab = task:vocab_size(), d_model = 128, heads = 4, layers = 3, d_ff = 512,
  seq_len = 512, max_batch = 1, pe = "rope", seed = 1 }

local threads = rp.blas.threads()
local clock = threads == 1 and os.clock or system.gettime

-- The best time of reps runs of f (after one warm-up).
local function best_of(f)
  f()
  local best = math.huge
  for _ = 1, reps do
    local t0 = clock()
    f()
    best = math.min(best, clock() - t0)
  end
  return best
end

print(("decoding, S model (d_model 128, 4 heads, 3 layers, d_ff 512, seq_len 512, rope, untrained), "
  .. "%d thread%s, best of %d (%s)"):format(threads, threads == 1 and "" or "s", reps,
  threads == 1 and "CPU time" or "wall-clock"))

local problems = 256
local lo, hi, pg = math.huge, 0, rp.rng(0) -- the problems rp.eval.accuracy decodes (seed 0)
for _ = 1, problems do
  local n = #task:encode((task:problem(pg)))
  lo, hi = math.min(lo, n), math.max(hi, n)
end
local function accuracy_rate(batch)
  local t = best_of(function()
    rp.eval.accuracy(m, task, { problems = problems, batch = batch })
  end)
  return problems / t
end
print(("  rp.eval.accuracy, substring_index (prompts %d-%d tokens, answers 24), %d problems:")
  :format(lo, hi, problems))
print(("    %-26s %9.0f problems/s"):format("batch 1", accuracy_rate(1)))
print(("    %-26s %9.0f problems/s"):format(("batch default (%d)"):format(m:lanes()),
  accuracy_rate(nil)))
local curve = {}
for _, b in ipairs { 2, 4, 8, 16, 32, 64 } do
  curve[#curve + 1] = ("%d: %.0f"):format(b, accuracy_rate(b))
end
print("    by batch (problems/s)     " .. table.concat(curve, ", "))

local prompt = task:encode((task:problem(rp.rng(3))))
local n_new = 250
local t = best_of(function() m:generate(prompt, n_new) end)
print(("  m:generate, prompt %d tokens, %d new:        %9.0f tokens/s"):format(#prompt, n_new,
  n_new / t))
local prompts, g = {}, rp.rng(4)
for i = 1, 64 do prompts[i] = task:encode((task:problem(g))) end
for _, lanes in ipairs { 8, false } do
  local opts = lanes and { lanes = lanes } or nil
  t = best_of(function() m:generate_batch(prompts, n_new, opts) end)
  print(("  m:generate_batch, 64 prompts, %d new, %-10s %7.0f tokens/s"):format(n_new,
    lanes and ("lanes " .. lanes) or ("default " .. m:lanes(64)), 64 * n_new / t))
end

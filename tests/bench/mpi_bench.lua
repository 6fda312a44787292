-- make bench, data-parallel part: one line of training-step figures for the S or P model of
-- bench_train.c (pe rope, vocab 32, random tokens), on this process's threads or, under mpirun,
-- over the ranks (m:train_step with comm: each rank its rows of the same global batch, the
-- gradients summed with MPI_Allreduce). Rank 0 prints:
--   <label>  <ms/step>  <tokens/s>  <ms/step in MPI_Allreduce>  <peak RSS of a rank, MiB>
-- Usage: roper tests/bench/mpi_bench.lua S|P <label>   (tests/bench/mpi_bench runs both ways)
local rp = require "roper"

local CONFIGS = {
  S = { d_model = 128, heads = 4, layers = 3, d_ff = 512, seq_len = 512, batch = 16, steps = 3 },
  P = { d_model = 512, heads = 8, layers = 6, d_ff = 2048, seq_len = 640, batch = 32, steps = 1 },
}
local name, label = arg[1], arg[2] or ""
local c = CONFIGS[name]
if not c then
  io.stderr:write("mpi_bench.lua: S or P expected, got ", tostring(name), "\n")
  os.exit(2)
end
local system = require "system"
local comm = rp.mpi.init()
local ranks = comm:size()
local m = rp.model { vocab = 32, d_model = c.d_model, heads = c.heads, layers = c.layers,
  d_ff = c.d_ff, seq_len = c.seq_len, max_batch = (c.batch + ranks - 1) // ranks, pe = "rope",
  seed = 1 }
local opt = rp.optim.adam(m, { lr = 1e-4 })
local g = rp.rng(2)
local x = rp.randint(0, 31, { c.batch, c.seq_len }, g)
local y = rp.randint(0, 31, { c.batch, c.seq_len }, g)
local so = ranks > 1 and { comm = comm } or nil
m:train_step(x, y, nil, opt, so) -- warm-up
local best, comm_best = math.huge, 0
for _ = 1, c.steps do
  local s0 = comm:stats().seconds
  local t0 = system.gettime()
  m:train_step(x, y, nil, opt, so)
  local t = system.gettime() - t0
  if t < best then best, comm_best = t, comm:stats().seconds - s0 end
end
-- every rank's peak resident memory; the largest is reported
local rss = 0
for l in io.lines("/proc/self/status") do
  local kb = l:match("^VmHWM:%s*(%d+)")
  if kb then rss = tonumber(kb) / 1024 end
end
local worst = rss
if ranks > 1 then
  local t = rp.zeros(ranks)
  t[comm:rank() + 1] = rss
  comm:allreduce(t)
  worst = t:max()
end
if comm:rank() == 0 then
  print(("  %-24s %9.1f ms/step %9.0f tokens/s   allreduce %6.1f ms/step   peak RSS %5.0f MiB/rank")
    :format(label, best * 1e3, c.batch * c.seq_len / best, comm_best * 1e3, worst))
end

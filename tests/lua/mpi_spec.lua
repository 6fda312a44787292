-- Data-parallel training with Open MPI (issue 15): rp.mpi without mpirun (one rank, nothing of MPI
-- loaded, m:train_step{comm} bit for bit the plain step), and under `mpirun --oversubscribe -np 2`
-- (as root through OMPI_ALLOW_RUN_AS_ROOT*): collectives against their definition, 20 training
-- steps on 2 ranks against 20 steps in one process on the same global batches (loss curve and
-- weights to float-summation tolerance), resume of a run saved under 2 ranks under 1 and 2, and
-- the failures that must end the job with a message and never hang: more ranks than rows, ranks
-- given different configs, a rank that dies mid-step, a rank that raises.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"
local rp = require "roper"

local BIN = h.BIN
local TRAIN = "scripts/train.lua"
-- every mpirun is bounded: a hang fails the test instead of stopping the suite
local LIMIT = 120
local MPIRUN = table.concat({
  "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1",
  "OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none",
  -- Open MPI's own allocations are not roper's: no leak report from a sanitized build
  "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 OMP_NUM_THREADS=1",
  "timeout -k 5 " .. LIMIT .. " mpirun",
}, " ")

local function mpirun(np, args)
  local t0 = os.time()
  local out, err, code = h.run(("%s -np %d %s %s"):format(MPIRUN, np, h.sh_quote(BIN), args))
  return out, err, code, os.time() - t0
end

local function csv_rows(path)
  local rows = {}
  for line in assert(h.read(path), "missing " .. path):gmatch("[^\n]+") do
    local s, t, l, lr = line:match("^(%d+),(%d+),([^,]+),([^,]+)$")
    if s then rows[#rows + 1] = { step = tonumber(s), tokens = tonumber(t), loss = tonumber(l),
      lr = tonumber(lr) } end
  end
  return rows
end

-- max |w1 - w2| over every parameter of two checkpoints
local function weight_diff(a, b)
  local ma = assert(rp.load(a))
  local mb = assert(rp.load(b))
  local pb, worst = mb:params(), 0
  for _, p in ipairs(ma:params()) do worst = math.max(worst, rp.maxdiff(p.tensor, pb[p.name])) end
  return worst
end

local function curve_diff(a, b)
  assert.are.equal(#a, #b)
  local worst = 0
  for i = 1, #a do
    assert.are.equal(a[i].step, b[i].step)
    assert.are.equal(a[i].tokens, b[i].tokens)
    assert.are.equal(a[i].lr, b[i].lr)
    worst = math.max(worst, math.abs(a[i].loss - b[i].loss))
  end
  return worst
end

describe("rp.mpi without mpirun", function()
  it("is one rank of one and loads nothing", function()
    assert.is_false(rp.mpi.launched())
    local comm = rp.mpi.init()
    assert.are.equal(comm, rp.mpi.init())
    assert.are.equal(comm, rp.mpi.world())
    assert.are.equal("roper.Comm: 1 process (no MPI)", tostring(comm))
    assert.are.equal(0, comm:rank())
    assert.are.equal(1, comm:size())
    assert.are.equal(1, comm:local_size())
    assert.is_false(comm:mpi())
    local t = rp.tensor { 1.5, -2, 3 }
    assert.are.equal(t, comm:allreduce(t))
    assert.are.same({ 1.5, -2, 3 }, t:totable())
    assert.are.equal(2.5, comm:allreduce(2.5))
    assert.is_true(comm:agree("anything"))
    assert.is_true(comm:agree(t))
    assert.are.equal(t, comm:bcast(t))
    comm:barrier()
    assert.are.same({ seconds = 0, calls = 0 }, comm:stats())
    -- the plugin is found beside the module, though not loaded
    local path = assert(rp.mpi.plugin())
    assert.truthy(path:find("/roper_mpi%.so$"), path)
  end)

  it("leaves m:train_step bit for bit as it is with {comm = c}", function()
    local comm = rp.mpi.init()
    local function train(with)
      local m = rp.model { vocab = 7, d_model = 16, heads = 2, layers = 1, seq_len = 8,
        max_batch = 4, dropout = 0.1, seed = 5 }
      local opt = rp.optim.adam(m, { lr = 1e-2 })
      local g = rp.rng(3)
      local losses = {}
      for i = 1, 5 do
        local x = rp.randint(0, 6, { 4, 8 }, g)
        local y = rp.randint(0, 6, { 4, 8 }, g)
        losses[i] = m:train_step(x, y, nil, opt, with and { comm = comm } or nil)
      end
      return losses, m:params()[1].tensor:clone()
    end
    local a, wa = train(false)
    local b, wb = train(true)
    assert.are.same(a, b)
    assert.are.equal(0, rp.maxdiff(wa, wb))
  end)

  it("checks every argument", function()
    local comm = rp.mpi.init()
    local m = rp.model { vocab = 7, d_model = 16, heads = 2, layers = 1, seq_len = 8,
      max_batch = 2 }
    local opt = rp.optim.adam(m)
    local x = rp.randint(0, 6, { 2, 8 }, rp.rng(1))
    local cases = {
      { function() comm:allreduce("x") end,
        "bad argument #1 to 'allreduce' (roper.Tensor or number expected, got string \"x\")" },
      { function() comm:allreduce(rp.zeros(3, 4):t()) end,
        "bad argument #1 to 'allreduce' (the tensor must be contiguous (use t:contiguous()))" },
      { function() comm:bcast(rp.zeros(3), 1) end,
        "bad argument #2 to 'bcast' (root 1 out of range (1 rank))" },
      { function() comm:bcast(rp.zeros(3), 0.5) end,
        "bad argument #2 to 'bcast' (root must be an integer, got 0.5)" },
      { function() comm:agree(5) end,
        "bad argument #1 to 'agree' (string or roper.Tensor expected, got 5)" },
      { function() comm:abort(300) end,
        "bad argument #1 to 'abort' (code must be in 0..255, got 300)" },
      { function() rp.Comm.rank(5) end,
        "bad argument #1 to 'rank' (roper.Comm expected, got number; call methods with ':', as in "
          .. "x:rank())" },
      { function() m:train_step(x, x, nil, opt, { comm = 5 }) end,
        "bad argument #5 to 'train_step' (option 'comm' must be a roper.Comm (rp.mpi.init()), "
          .. "got number)" },
      { function() rp.load("x.ckpt", { max_batch = 0 }) end,
        "bad argument #2 to 'load' (option 'max_batch' must be in 1..2147483647, got 0)" },
    }
    for _, c in ipairs(cases) do
      local ok, msg = pcall(c[1])
      assert.is_false(ok)
      assert.are.equal(c[2], (tostring(msg):gsub("^[^ ]-:%d+: ", "", 1)))
    end
  end)

  it("refuses max_batch for a file that is no checkpoint, and loads a checkpoint for it", function()
    local tmp = h.tmpdir()
    local m = rp.model { vocab = 7, d_model = 16, heads = 2, layers = 1, seq_len = 8,
      max_batch = 2, seed = 4 }
    local opt = rp.optim.adam(m)
    assert(m:save(tmp .. "/m.ckpt", opt))
    assert(rp.zeros(2):save(tmp .. "/t.npy"))
    local ok, msg = pcall(rp.load, tmp .. "/t.npy", { max_batch = 3 })
    assert.is_false(ok)
    assert.truthy(msg:find("option 'max_batch' applies to roper checkpoints; " .. tmp
      .. "/t.npy is a .npy file", 1, true), msg)
    local m2, opt2 = rp.load(tmp .. "/m.ckpt", { max_batch = 6 })
    assert.are.equal(6, m2:config().max_batch)
    assert.truthy(opt2)
    assert.are.equal(0, rp.maxdiff(m:params()[1].tensor, m2:params()[1].tensor))
    h.remove_tree(tmp)
  end)

  it("ends MPI for good with finalize (in a process of its own)", function()
    local out, err, code = h.run(h.sh_quote(BIN) .. [[ -e '
      local rp = require "roper"
      local c = rp.mpi.init()
      c:finalize(); c:finalize()
      print(rp.mpi.world(), tostring(c))
      print(pcall(c.rank, c))
      print(pcall(rp.mpi.init))']])
    assert.are.equal(0, code, err)
    assert.are.equal("nil\troper.Comm (finalised)\n"
      .. "false\tcomm:rank: MPI was finalised in this process (comm:finalize)\n"
      .. "false\trp.mpi.init: MPI was finalised in this process\n", out)
  end)
end)

describe("under mpirun -np 2", function()
  local tmp
  setup(function() tmp = h.tmpdir() end)
  teardown(function() h.remove_tree(tmp) end)

  it("sums, broadcasts and compares over the ranks", function()
    h.write(tmp .. "/coll.lua", [[
local rp = require "roper"
local c = rp.mpi.init()
local r = c:rank()
local t = rp.tensor { r + 1, 10 * (r + 1), 0.25 }
c:allreduce(t)
local big = rp.full({ 5000000 }, r + 0.5) -- more than one 4M piece
c:allreduce(big)
local b = rp.full({ 2 }, r + 7)
c:bcast(b, 1)
print(("%d %d %d %s %s %g %g %g %s %s %s %s"):format(r, c:size(), c:local_size(),
  table.concat(t:totable(), ","), table.concat(b:totable(), ","), big:min(), big:max(),
  c:allreduce(r + 0.5), tostring(c:agree("same")), tostring(c:agree("rank " .. r)),
  tostring(c:agree(rp.full({ 2 }, r))), tostring(c:mpi())))
c:finalize()
]])
    local out, err, code = mpirun(2, h.sh_quote(tmp .. "/coll.lua"))
    assert.are.equal(0, code, err)
    local lines = {}
    for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
    table.sort(lines)
    assert.are.same({
      "0 2 2 3.0,30.0,0.5 8.0,8.0 2 2 2 true false false true",
      "1 2 2 3.0,30.0,0.5 8.0,8.0 2 2 2 true false false true",
    }, lines)
  end)

  local A = "--task substring_prefix --seq-len 32 --d-model 32 --heads 2 --layers 2 --batch 8 "
    .. "--steps 20 --log-every 1 --valid-batches 2 --lr 1e-3 --quiet"

  it("trains 20 steps on 2 ranks as 1 process does on the same batches", function()
    local one = tmp .. "/one"
    local two = tmp .. "/two"
    local _, e1, c1 = h.run(("OMP_NUM_THREADS=1 %s %s %s --save %s.ckpt --out %s.json"):format(
      h.sh_quote(BIN), TRAIN, A, one, one))
    assert.are.equal(0, c1, e1)
    local out, err, code = mpirun(2, ("%s %s --save %s.ckpt --out %s.json"):format(TRAIN, A, two,
      two))
    assert.are.equal(0, code, err)
    -- rank 0 alone reports
    assert.truthy(out:find("2 ranks (MPI), 1 thread each", 1, true), out)
    local _, n = out:gsub("eval loss", "")
    assert.are.equal(1, n, out)
    local r1, r2 = h.read_json(one .. ".json"), h.read_json(two .. ".json")
    assert.are.equal(2, r2.ranks)
    assert.is_nil(r1.ranks)
    assert.is_number(r2.comm_seconds)
    local cd = curve_diff(csv_rows(one .. ".csv"), csv_rows(two .. ".csv"))
    local wd = weight_diff(one .. ".ckpt", two .. ".ckpt")
    -- float32 sums in another order: measured 1.2e-7 (curve) and 8.6e-7 (weights, lr 1e-3)
    assert.is_true(cd < 1e-5, "curve differs by " .. cd)
    assert.is_true(wd < 1e-5, "weights differ by " .. wd)
    assert.is_true(math.abs(r1.eval_loss - r2.eval_loss) < 1e-4)
    -- the test can fail: another data stream or a rank's rows counted twice moves it far
    assert.is_true(r1.curve[20].loss < r1.curve[1].loss - 0.05)
    io.stderr:write(("\n  mpi: 20 steps, 2 ranks vs 1 process: curve max diff %.3g, weights "
      .. "max diff %.3g\n"):format(cd, wd))
  end)

  it("resumes a run saved under 2 ranks: under 2 ranks as the uninterrupted 2-rank run to the "
    .. "last digit, in 1 process within the summation drift", function()
    -- the first run is ended (the whole job, MPI_Abort) by its progress callback at step 12,
    -- after the checkpoint of step 10
    h.write(tmp .. "/stop.lua", [[
local rp = require "roper"
local comm = rp.mpi.init()
local cfg = { task = "substring_prefix", seq_len = 32, d_model = 32, heads = 2, layers = 2,
  batch = 8, steps = 20, log_every = 3, valid_batches = 2, lr = 1e-3 }
rp.experiment.run(cfg, function(step) if step == 12 then comm:abort(3) end end,
  { save = arg[1], save_every = 10, comm = comm })
]])
    local B = "--task substring_prefix --seq-len 32 --d-model 32 --heads 2 --layers 2 --batch 8 "
      .. "--steps 20 --log-every 3 --valid-batches 2 --lr 1e-3 --quiet"
    local ck = tmp .. "/r.ckpt"
    local _, err, code = mpirun(2, h.sh_quote(tmp .. "/stop.lua") .. " " .. h.sh_quote(ck))
    assert.are.equal(3, code, err)
    assert.truthy(h.read(ck .. ".state"):find("^roper%-run%-state 3\n10 2560 "))
    os.execute(("cp %s %s.b && cp %s.state %s.b.state"):format(ck, ck, ck, ck))
    local straight = tmp .. "/straight"
    local _, e0, c0 = h.run(("OMP_NUM_THREADS=1 %s %s %s --out %s.json"):format(h.sh_quote(BIN),
      TRAIN, B, straight))
    assert.are.equal(0, c0, e0)
    local _, e1, c1 = h.run(("OMP_NUM_THREADS=1 %s %s %s --save %s --resume --out %s.json"):format(
      h.sh_quote(BIN), TRAIN, B, ck, tmp .. "/one"))
    assert.are.equal(0, c1, e1)
    local _, e2, c2 = mpirun(2, ("%s %s --save %s.b --resume --out %s.json"):format(TRAIN, B, ck,
      tmp .. "/two"))
    assert.are.equal(0, c2, e2)
    -- the same run uninterrupted on 2 ranks: what the 2-rank resume must give exactly
    local straight2 = tmp .. "/straight2"
    local _, e3, c3 = mpirun(2, ("%s %s --out %s.json"):format(TRAIN, B, straight2))
    assert.are.equal(0, c3, e3)
    local s1, s2 = csv_rows(straight .. ".csv"), csv_rows(straight2 .. ".csv")
    local r1, r2 = h.read_json(straight .. ".json"), h.read_json(straight2 .. ".json")
    for _, name in ipairs { "one", "two" } do
      local r = h.read_json(tmp .. "/" .. name .. ".json")
      assert.are.equal(10, r.resumed_at)
      assert.are.equal(20, r.curve[#r.curve].step)
      local rows = csv_rows(tmp .. "/" .. name .. ".csv")
      if name == "two" then
        -- 2 ranks to 2 ranks: the same sums in the same order, so every figure to its last digit
        assert.are.same(s2, rows)
        assert.are.equal(r2.eval_loss, r.eval_loss)
      else
        -- 2 ranks to 1 process: from step 10 on, the gradient is summed in another order, so
        -- the run drifts from both uninterrupted runs by float32 rounding (docs/cluster.md)
        for _, ref in ipairs { s1, s2 } do
          local d = curve_diff(ref, rows)
          assert.is_true(d < 1e-5, name .. ": curve differs by " .. d)
        end
        assert.is_true(math.abs(r.eval_loss - r2.eval_loss) < 1e-4)
        assert.is_true(math.abs(r.eval_loss - r1.eval_loss) < 1e-4)
      end
    end
    -- a finished run leaves no state
    assert.is_nil(h.read(ck .. ".state"))
  end)

  it("refuses more ranks than the batch has rows, before training", function()
    local _, err, code, secs = mpirun(3, TRAIN .. " --steps 5 --batch 2 --quiet")
    assert.are_not.equal(0, code)
    assert.truthy(err:find("3 ranks share a batch of 2 sequences (each rank needs at least one: "
      .. "use at most 2 ranks or a larger batch)", 1, true), err)
    assert.is_true(secs < LIMIT)
  end)

  it("refuses ranks that were given different configs", function()
    h.write(tmp .. "/differ.lua", [[
local rp = require "roper"
local comm = rp.mpi.init()
local ok, err = pcall(rp.experiment.run, { task = "substring_prefix", seq_len = 32, steps = 2,
  batch = 4, seed = comm:rank() }, nil, { comm = comm })
print(comm:rank(), err)
comm:finalize()
]])
    local out, err, code = mpirun(2, h.sh_quote(tmp .. "/differ.lua"))
    assert.are.equal(0, code, err)
    local _, n = out:gsub("the 2 ranks were given different configs %(every rank must run the "
      .. "same command%)", "")
    assert.are.equal(2, n, out)
  end)

  it("ends the job when a rank dies mid-step, and leaves no half-written file", function()
    local out = tmp .. "/dies"
    local cmd = ("%s -np 2 %s %s --task substring_prefix --seq-len 64 --d-model 32 --batch 8 "
      .. "--steps 100000 --save %s.ckpt --save-every 5 --out %s.json --progress %s.progress "
      .. "> /dev/null 2> %s.err & echo $!"):format(MPIRUN, h.sh_quote(BIN), TRAIN, out, out, out,
      out)
    local p = assert(io.popen(cmd))
    local pid = tonumber(p:read("l"))
    p:close()
    -- past a save, then one rank (not the launcher) is killed
    assert.is_true(h.wait_for(function()
      local s = h.read(out .. ".progress")
      return s and (tonumber(s:match("^(%d+)")) or 0) >= 12
    end, 60), "training did not start")
    -- the rank processes: roper binaries whose command line names this run's progress file
    local victim
    for name in require("lfs").dir("/proc") do
      local r = tonumber(name)
      local cmdline = r and h.read("/proc/" .. name .. "/cmdline") or ""
      local comm = r and h.read("/proc/" .. name .. "/comm") or ""
      if r ~= pid and comm:find("roper") and cmdline:find(out .. ".progress", 1, true) then
        victim = r
      end
    end
    assert.truthy(victim, "no rank process found")
    os.execute("kill -9 " .. victim)
    -- the launcher ends (not by its timeout) and says why
    assert.is_true(h.wait_for(function() return not h.read("/proc/" .. pid .. "/stat")
      or h.read("/proc/" .. pid .. "/stat"):match("^%d+ %b() Z") end, 60), "mpirun still runs")
    os.execute("wait " .. pid .. " 2>/dev/null")
    local err = h.read(out .. ".err")
    assert.truthy(err:find("signal 9") or err:find("Killed"), err)
    assert.is_nil(h.read(out .. ".json"))
    -- the checkpoint is the whole one of a multiple of 5
    local m, opt = rp.load(out .. ".ckpt")
    assert.truthy(m, opt)
    assert.are.equal(0, opt:steps() % 5)
  end)

  it("ends the job when one rank raises, with its message", function()
    h.write(tmp .. "/raise.lua", [[
package.path = "scripts/?.lua;" .. package.path
local cli = require "lib.cli"
local rp = require "roper"
cli.main("raise.lua", function()
  local comm = rp.mpi.init()
  if comm:rank() == 1 then error("rank one gives up", 0) end
  comm:barrier() -- rank 0 waits here for a rank that never comes
end)
]])
    local _, err, code, secs = mpirun(2, h.sh_quote(tmp .. "/raise.lua"))
    assert.are.equal(1, code, err)
    assert.truthy(err:find("raise.lua: rank 1 of 2: rank one gives up", 1, true), err)
    assert.is_true(secs < LIMIT)
  end)
end)

-- Runs you can keep and open, and their provenance (issue 12, parts 3 and 4): rp.build_info,
-- rp.experiment.run's keep_model / save / save_every, train.lua --save / --save-every (a killed
-- run leaves a whole checkpoint), compare.lua and sweep.lua --keep-models (a resume keeps the
-- models consistent with the results), scripts/sample.lua and scripts/attention_map.lua on a tiny
-- saved model, and the provenance block of every run's JSON and of the summaries (old result
-- files without it still read). The scripts run through the REPL binary (ROPER_BIN, default
-- build/roper) from the repository root; every model is a few steps of a 16-wide one.

local rp = require "roper"
local cjson = require "cjson"
local lfs = require "lfs"

local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;scripts/?.lua;" .. package.path
local h = require "helpers"
local BIN = h.BIN
local sh_quote, read, write, run, tmpdir = h.sh_quote, h.read, h.write, h.run, h.tmpdir
local provenance = require "lib.provenance"

local read_json, ls, wait_for = h.read_json, h.ls, h.wait_for

local function exists(path) return lfs.attributes(path) ~= nil end

local function lines(s)
  local t = {}
  for l in s:gmatch("[^\n]+") do t[#t + 1] = l end
  return t
end

local TINY = { steps = 5, d_model = 16, heads = 2, layers = 2, seq_len = 32, batch = 4,
  problems = 2, valid_batches = 1, log_every = 1 }
local function tiny(extra)
  local o = {}
  for k, v in pairs(TINY) do o[k] = v end
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end
local TINY_ARGS = "--d-model 16 --heads 2 --layers 2 --seq-len 32 --batch 4 --problems 2 "
  .. "--valid-batches 1"

-- The evaluation loss of a model as rp.experiment.run computes it for cfg.
local function eval_loss(m, cfg)
  local task <close> = assert(rp.experiment.task(cfg))
  return rp.eval.loss(m, task, { batches = cfg.valid_batches, batch_size = math.min(cfg.batch, 16),
    seed = cfg.eval_seed })
end

---------------------------------------------------------------------------------------------------
describe("rp.build_info", function()
  it("gives the version and the source commit of the build", function()
    local b = rp.build_info()
    assert.are.equal(rp._VERSION, b.version)
    assert.is_string(b.commit)
    assert.truthy(b.commit == "unknown" or b.commit:match("^[%w%._/+-]+$"), b.commit)
    b.commit = "changed"
    assert.are_not.equal("changed", rp.build_info().commit) -- a fresh table
    -- in a git checkout: git describe of the build (the -dirty mark is left out of the
    -- comparison: a file edited since the build adds it to one side only)
    local out, _, code = run("git describe --always --dirty 2>/dev/null")
    if code == 0 and out ~= "" then
      local function base(s) return (s:gsub("\n$", ""):gsub("%-dirty$", "")) end
      assert.are.equal(base(out), base(rp.build_info().commit))
    end
  end)
end)

---------------------------------------------------------------------------------------------------
describe("rp.experiment.run with opts", function()
  local dir
  setup(function() dir = tmpdir() end)
  teardown(function() h.remove_tree(dir) end)

  it("returns the trained model, its task and optimiser with keep_model", function()
    local cfg = tiny { steps = 4 }
    local r, m, task, opt = rp.experiment.run(cfg, nil, { keep_model = true })
    assert.truthy(tostring(m):match("^roper%.Model: "), tostring(m))
    assert.truthy(tostring(task):match("^roper%.Task: substring_index"), tostring(task))
    assert.are.equal(4, opt:steps())
    assert.are.equal(task:vocab_size(), m:config().vocab)
    assert.are.equal(r.config.d_model, m:config().d_model)
    assert.is_nil(r.checkpoint)
    -- the model that was evaluated, and the same run as without keep_model
    assert.are.equal(r.eval_loss, eval_loss(m, r.config))
    local r2 = rp.experiment.run(cfg)
    assert.are.equal(r.eval_loss, r2.eval_loss)
    assert.are.same(r.curve, r2.curve)
    -- training goes on with the optimiser
    local x, y = task:batch(4, rp.rng(3))
    assert.is_true(m:train_step(x, y, nil, opt) > 0)
    assert.are.equal(5, opt:steps())
  end)

  it("saves the model with its optimiser at the end and every save_every steps", function()
    local path = dir .. "/m.ckpt"
    local held = {}
    local r, m = rp.experiment.run(tiny { steps = 7 }, function(step)
      -- before the save of this step: the file holds the last multiple of 3 below step
      local saved_m, saved_opt = rp.load(path)
      held[step] = saved_m and saved_opt:steps() or false
    end, { keep_model = true, save = path, save_every = 3 })
    assert.are.same({ false, false, false, 3, 3, 3, 6 }, held)
    assert.are.equal(path, r.checkpoint)
    local m2, opt2 = rp.load(path)
    assert.are.equal(7, opt2:steps())
    local x, y = rp.experiment.task(r.config):batch(4, rp.rng(9))
    assert.are.equal(m:loss(x, y), m2:loss(x, y))
    assert.are.equal(r.eval_loss, eval_loss(m2, r.config))
    assert.are.same({ "m.ckpt" }, ls(dir))
  end)

  it("an interrupted run leaves the model of its last multiple of save_every", function()
    local path = dir .. "/cut.ckpt"
    local ok, err = pcall(rp.experiment.run, tiny { steps = 9 }, function(step)
      if step == 5 then error("stopped at step 5") end
    end, { save = path, save_every = 2 })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("stopped at step 5", 1, true), err)
    local _, opt = assert(rp.load(path))
    assert.are.equal(4, opt:steps())
    for _, n in ipairs(ls(dir)) do assert.is_nil(n:find("%.tmp%.") or n:find("%.probe$"), n) end
  end)

  it("resume goes on from an interrupted run and ends as the uninterrupted run, bit for bit",
    function()
      local cfg = tiny { steps = 9, log_every = 2, dropout = 0.1 }
      local straight = rp.experiment.run(cfg)
      local path = dir .. "/resume.ckpt"
      local ok = pcall(rp.experiment.run, cfg, function(step)
        if step == 7 then error("stopped at step 7") end
      end, { save = path, save_every = 3 })
      assert.is_false(ok)
      -- the checkpoint of step 6 and its training state (the curve, the open log window)
      local state = assert(io.open(path .. ".state")):read("a")
      assert.truthy(state:find("^roper%-run%-state 3\n6 "), state)
      -- the CPU seconds of the training so far: the last field of its second line
      local state_cpu = tonumber(state:match("^[^\n]*\n6 %d+ %S+ %S+ %d+ (%S+)\n"))
      assert.is_true(state_cpu ~= nil and state_cpu > 0, state)
      -- with the run's config: every key that counts, one per line
      assert.truthy(state:find("\nseed " .. straight.config.seed .. "\n", 1, true), state)
      assert.truthy(state:find("\nlr 0.001\n", 1, true), state)
      assert.is_nil(state:find("\nthreads ", 1, true), state)
      -- a checkpoint of another run of the same model is refused too, naming the key: another
      -- seed, or another evaluation (the model and optimiser are the same, only the state tells
      -- them apart)
      local seed = straight.config.seed
      for _, c in ipairs { { seed = seed + 1, key = "seed", there = seed,
        here = seed + 1 }, { eval_seed = 7, key = "eval_seed", there = 12345, here = 7 } } do
        local other = tiny { steps = 9, log_every = 2, dropout = 0.1, seed = c.seed,
          eval_seed = c.eval_seed }
        local o_ok, o_err = pcall(rp.experiment.run, other, nil, { save = path, resume = true })
        assert.is_false(o_ok)
        assert.truthy(tostring(o_err):find(("option 'resume': %s was trained with %s = %s, the "
          .. "config asks for %s"):format(path, c.key, c.there, c.here), 1, true), o_err)
      end
      -- a checkpoint of another model is refused, naming the key
      local bad_ok, bad_err = pcall(rp.experiment.run, tiny { steps = 9, log_every = 2,
        dropout = 0.1, d_model = 32 }, nil, { save = path, resume = true })
      assert.is_false(bad_ok)
      assert.truthy(tostring(bad_err):find("option 'resume': " .. path .. " was trained with "
        .. "d_model = 16, the config asks for 32", 1, true), bad_err)
      bad_ok, bad_err = pcall(rp.experiment.run, tiny { steps = 9, log_every = 2,
        dropout = 0.1, lr = 2e-3 }, nil, { save = path, resume = true })
      assert.is_false(bad_ok)
      assert.truthy(tostring(bad_err):find("was trained with lr = 0.001, the config asks for "
        .. "0.002", 1, true), bad_err)
      -- resumed from it (a copy): the CPU seconds go on from the state's
      local copy = dir .. "/resume-copy.ckpt"
      write(copy, assert(read(path)))
      write(copy .. ".state", state)
      local went_on = rp.experiment.run(cfg, nil, { save = copy, resume = true })
      assert.are.equal(6, went_on.resumed_at)
      assert.is_true(went_on.cpu_seconds_train > state_cpu, went_on.cpu_seconds_train)
      assert.is_true(went_on.cpu_seconds > went_on.cpu_seconds_train, went_on.cpu_seconds)
      os.remove(copy)
      -- a state written before the config was kept (version 1) is still read
      local lines = {}
      for l in state:gmatch("[^\n]+") do lines[#lines + 1] = l end
      local nkeys = math.tointeger(tonumber(lines[3]:match("^config (%d+)$")))
      local v1 = { "roper-run-state 1", (lines[2]:gsub(" %S+$", "")) }
      for i = 4 + nkeys, #lines do v1[#v1 + 1] = lines[i] end
      assert.is_true(#v1 > 2) -- the curve so far
      local f = assert(io.open(path .. ".state", "wb"))
      f:write(table.concat(v1, "\n"), "\n")
      f:close()
      local resumed = rp.experiment.run(cfg, nil, { save = path, resume = true })
      assert.are.equal(6, resumed.resumed_at)
      assert.are.same(straight.curve, resumed.curve)
      -- that state holds no CPU seconds: the result has none (its clock seconds it has)
      assert.is_nil(resumed.cpu_seconds_train)
      assert.is_nil(resumed.cpu_seconds)
      assert.is_true(resumed.seconds_train > 0)
      assert.are.equal(straight.eval_loss, resumed.eval_loss)
      assert.are.equal(straight.final_train_loss, resumed.final_train_loss)
      -- the state serves an unfinished run only
      assert.is_nil(io.open(path .. ".state"))
      -- without the checkpoint, resume starts afresh
      os.remove(path)
      local fresh = rp.experiment.run(cfg, nil, { save = path, resume = true })
      assert.are.equal(0, fresh.resumed_at)
      assert.are.same(straight.curve, fresh.curve)
      os.remove(path)
    end)

  it("a run killed between saving its model and its state goes on from the state it wrote",
    function()
      -- the state is written whole to <state>.tmp before the model is saved and renamed after
      -- it: killed in between, the model's step is in <state>.tmp (here the first save, so
      -- there is no <state> at all; then an older <state> beside it)
      local cfg = tiny { steps = 9, log_every = 2 }
      local straight = rp.experiment.run(cfg)
      local resume = require "lib.resume"
      for _, older in ipairs { false, true } do
        local path = dir .. "/half.ckpt"
        local ok = pcall(rp.experiment.run, cfg, function(step)
          if step == (older and 7 or 4) then error("stopped") end
        end, { save = path, save_every = 3 })
        assert.is_false(ok)
        local state = read(path .. ".state")
        os.rename(path .. ".state", path .. ".state.tmp")
        if older then
          -- a state of step 3 beside it, standing for the one the save before left
          local step3, n = state:gsub("^(roper%-run%-state 3\n)6 ", "%13 ")
          assert.are.equal(1, n, state)
          write(path .. ".state", step3)
        end
        write(path .. ".run.json", cjson.encode(straight.config))
        assert.are.equal("resume", (resume.check(rp, path, straight.config)))
        local resumed = rp.experiment.run(cfg, nil, { save = path, resume = true })
        assert.are.equal(older and 6 or 3, resumed.resumed_at)
        assert.are.same(straight.curve, resumed.curve)
        assert.are.equal(straight.final_train_loss, resumed.final_train_loss)
        assert.is_false(exists(path .. ".state"))
        assert.is_false(exists(path .. ".state.tmp"))
        resume.discard(path)
      end
      -- a folder where the state would be is read as no state, and the save that would replace
      -- it raises naming the problem
      local path = dir .. "/folder.ckpt"
      assert.is_false(pcall(rp.experiment.run, cfg, function(step)
        if step == 4 then error("stopped") end
      end, { save = path, save_every = 3 }))
      os.remove(path .. ".state")
      assert.is_true(lfs.mkdir(path .. ".state"))
      local fok, ferr = pcall(rp.experiment.run, cfg, nil, { save = path, resume = true })
      assert.is_false(fok)
      assert.truthy(tostring(ferr):find("rp.experiment.run: cannot save the model: ", 1, true), ferr)
      assert.truthy(tostring(ferr):find("Is a directory", 1, true), ferr)
      lfs.rmdir(path .. ".state")
      os.remove(path)
      -- a FIFO where the state is written first is refused, not opened (that would wait for a
      -- reader); a file where the probe of the save's folder goes is left as it is
      assert.is_true(os.execute("mkfifo " .. sh_quote(path .. ".state.tmp")))
      write(path .. ".probe", "mine")
      fok, ferr = pcall(rp.experiment.run, cfg, nil, { save = path, save_every = 3 })
      assert.is_false(fok)
      assert.truthy(tostring(ferr):find(("rp.experiment.run: cannot save the model: "
        .. "%s.state.tmp: not a regular file (a FIFO)"):format(path), 1, true), ferr)
      assert.are.equal("mine", read(path .. ".probe"))
      for _, f in ipairs { ".state.tmp", ".probe", "" } do os.remove(path .. f) end
    end)

  it("rp.experiment.resumable tells the step a resumed run goes on from, or why it would not",
    function()
      local cfg = tiny { steps = 9, log_every = 2 }
      local path = dir .. "/able.ckpt"
      -- nothing there: the run starts afresh
      assert.are.equal(0, rp.experiment.resumable(cfg, path))
      assert.is_false(pcall(rp.experiment.run, cfg, function(step)
        if step == 7 then error("stopped") end
      end, { save = path, save_every = 3 }))
      local saved = { read(path), read(path .. ".state") }
      assert.are.equal(6, rp.experiment.resumable(cfg, path))
      -- it reads only
      assert.are.same(saved, { read(path), read(path .. ".state") })
      assert.is_false(exists(path .. ".state.tmp"))
      -- what run refuses, with run's reason: another seed (the state's config), another model,
      -- another optimiser setting, fewer steps than the checkpoint's
      for _, c in ipairs {
        { tiny { steps = 9, log_every = 2, seed = 2 }, "was trained with seed = 1, the config asks "
          .. "for 2" },
        -- (the key given, not d_ff = 4 d_model that follows it)
        { tiny { steps = 9, log_every = 2, d_model = 32 }, "was trained with d_model = 16, the "
          .. "config asks for 32" },
        { tiny { steps = 9, log_every = 2, lr = 2e-3 }, "was trained with lr = 0.001, the config "
          .. "asks for 0.002" },
        -- (the optimiser's total_steps named as the config's steps)
        { tiny { steps = 5, log_every = 2 }, "was trained with steps = 9, the config asks for 5" },
      } do
        local why = path .. " " .. c[2]
        assert.are.same({ nil, why }, { rp.experiment.resumable(c[1], path) })
        local ok, err = pcall(rp.experiment.run, c[1], nil, { save = path, resume = true })
        assert.is_false(ok)
        assert.truthy(tostring(err):find("option 'resume': " .. why, 1, true), err)
      end
      -- a checkpoint beyond the config's steps (a schedule that does not know the steps)
      local const = dir .. "/const.ckpt"
      assert.is_false(pcall(rp.experiment.run, tiny { steps = 9, schedule = "constant" },
        function(step) if step == 7 then error("stopped") end end, { save = const, save_every = 3 }))
      assert.are.same({ nil, const .. " was trained with steps = 9, the config asks for 6" },
        { rp.experiment.resumable(tiny { steps = 6, schedule = "constant" }, const) })
      assert.are.same({ nil, const .. " is at step 6, beyond the config's steps = 5" },
        { rp.experiment.resumable(tiny { steps = 5, schedule = "constant" }, const) })
      os.remove(const)
      os.remove(const .. ".state")
      -- threads does not count
      assert.are.equal(6, rp.experiment.resumable(tiny { steps = 9, log_every = 2, threads = 1 },
        path))
      -- the state of the step in <state>.tmp (a run killed between its saves) is found there;
      -- without a state of its step the curve so far is lost, so it is not resumable
      os.rename(path .. ".state", path .. ".state.tmp")
      assert.are.equal(6, rp.experiment.resumable(cfg, path))
      local no_state = ("%s is at step 6 and has no training state of that step beside it "
        .. "(%s.state)"):format(path, path)
      os.remove(path .. ".state.tmp")
      assert.are.same({ nil, no_state, "no state" }, { rp.experiment.resumable(cfg, path) })
      write(path .. ".state", (saved[2]:gsub("^(roper%-run%-state 3\n)6 ", "%13 ")))
      assert.are.same({ nil, no_state, "no state" }, { rp.experiment.resumable(cfg, path) })
      -- a version 1 state (no config kept) is taken, as run takes it
      local lines = {}
      for l in saved[2]:gmatch("[^\n]+") do lines[#lines + 1] = l end
      local nkeys = math.tointeger(tonumber(lines[3]:match("^config (%d+)$")))
      local v1 = { "roper-run-state 1", (lines[2]:gsub(" %S+$", "")) }
      for i = 4 + nkeys, #lines do v1[#v1 + 1] = lines[i] end
      write(path .. ".state", table.concat(v1, "\n") .. "\n")
      assert.are.equal(6, rp.experiment.resumable(cfg, path))
      -- a model without its optimiser, a file that is no checkpoint, a folder, a path under a file
      local m <close> = assert(rp.load(path))
      assert(m:save(path))
      assert.are.same({ nil, path .. " holds no optimiser (it was not saved by a run)" },
        { rp.experiment.resumable(cfg, path) })
      write(path, "not a checkpoint")
      assert.are.same({ nil, select(2, rp.load(path)) }, { rp.experiment.resumable(cfg, path) })
      -- (a .npy file, which rp.load reads, is no run's either)
      assert(rp.zeros(2):save(path))
      assert.are.same({ nil, path .. ": a .npy file, not a checkpoint of a run" },
        { rp.experiment.resumable(cfg, path) })
      local nok, nerr = pcall(rp.experiment.run, cfg, nil, { save = path, resume = true })
      assert.is_false(nok)
      assert.truthy(tostring(nerr):find("(option 'resume': " .. path .. ": a .npy file, not a "
        .. "checkpoint of a run)", 1, true), nerr)
      local n, why = rp.experiment.resumable(cfg, dir)
      assert.is_nil(n)
      assert.are.equal(select(2, rp.load(dir)), why)
      n, why = rp.experiment.resumable(cfg, path .. "/x.ckpt")
      assert.is_nil(n)
      assert.truthy(why:find("Not a directory", 1, true), why)
      -- a FIFO is told apart without opening it (an open would wait for a writer), at path
      -- and where the state would be
      os.remove(path)
      os.remove(path .. ".state")
      assert.is_true(os.execute("mkfifo " .. sh_quote(path)))
      assert.are.same({ nil, path .. ": not a regular file (a FIFO)" },
        { rp.experiment.resumable(cfg, path) })
      local fok, ferr = pcall(rp.experiment.run, cfg, nil, { save = path, resume = true })
      assert.is_false(fok)
      assert.truthy(tostring(ferr):find("(option 'resume': " .. path .. ": not a regular file (a "
        .. "FIFO))", 1, true), ferr)
      os.remove(path)
      assert.is_false(pcall(rp.experiment.run, cfg, function(step)
        if step == 7 then error("stopped") end
      end, { save = path, save_every = 3 }))
      os.remove(path .. ".state")
      assert.is_true(os.execute("mkfifo " .. sh_quote(path .. ".state")))
      assert.are.same({ nil, no_state, "no state" }, { rp.experiment.resumable(cfg, path) })
      os.remove(path .. ".state")
      os.remove(path)
      -- the model of a finished run (its state goes when the run ends): nothing is left to train
      assert.is_table(rp.experiment.run(cfg, nil, { save = path, save_every = 3 }))
      assert.is_false(exists(path .. ".state"))
      assert.are.same({ nil, path .. " is the model of a finished run (step 9 of steps = 9)",
        "finished" }, { rp.experiment.resumable(cfg, path) })
      os.remove(path)
      -- bad arguments raise naming the function
      local function raises(want, ...)
        local ok, err = pcall(rp.experiment.resumable, ...)
        assert.is_false(ok)
        assert.are.equal("bad argument " .. want, tostring(err):match("bad argument .*$"), err)
      end
      raises("#2 to 'rp.experiment.resumable' (path (a string) expected, got number)", cfg, 5)
      raises("#2 to 'rp.experiment.resumable' (path (a string) expected, got nil)", cfg)
      raises("#2 to 'rp.experiment.resumable' (path must be a nonempty string without NUL bytes)",
        cfg, "")
      raises("#2 to 'rp.experiment.resumable' (path must be a nonempty string without NUL bytes)",
        cfg, "a\0b")
      local ok, err = pcall(rp.experiment.resumable, { d_modle = 16 }, path)
      assert.is_false(ok)
      assert.truthy(tostring(err):find("bad argument #1 to 'rp.experiment.resumable' (unknown "
        .. "option 'd_modle'", 1, true), err)
      ok, err = pcall(rp.experiment.resumable, tiny { heads = 3 }, path)
      assert.is_false(ok)
      assert.truthy(tostring(err):find("bad argument #1 to 'rp.experiment.resumable' (model: ",
        1, true), err)
    end)

  it("checks its options before training", function()
    local calls = 0
    local function progress() calls = calls + 1 end
    local function raises(want, opts)
      local ok, msg = pcall(rp.experiment.run, tiny(), progress, opts)
      assert.is_false(ok)
      assert.are.equal("bad argument #3 to 'rp.experiment.run' (" .. want .. ")",
        (tostring(msg):gsub("^[^ ]-:%d+: ", "", 1)))
    end
    raises("options table expected, got number", 5)
    raises("unknown option 'keep' (known: keep_model, save, save_every, resume, keep_state, "
      .. "comm)",
      { keep = true })
    raises("option 'keep_model' must be a boolean, got string", { keep_model = "yes" })
    raises("option 'resume' must be a boolean, got number", { resume = 1 })
    raises("option 'resume' needs option 'save'", { resume = true })
    raises("option 'keep_state' must be a boolean, got number", { keep_state = 1 })
    raises("option 'keep_state' needs option 'save_every' or 'resume'", { keep_state = true,
      save = dir .. "/x.ckpt" })
    raises("option 'comm' must be a roper.Comm (rp.mpi.init()), got table", { comm = {} })
    raises("option 'save' must be a path (a string), got number", { save = 3 })
    raises("option 'save' must be a nonempty path without NUL bytes", { save = "" })
    raises("option 'save': " .. dir .. " is a folder, not a file", { save = dir })
    raises("option 'save': " .. dir .. "/no/m.ckpt: cannot write there (No such file or directory)",
      { save = dir .. "/no/m.ckpt" })
    -- (a path holding ": " is named whole, the reason after it)
    h.write(dir .. "/a: b", "")
    raises("option 'save': " .. dir .. "/a: b/x.ckpt: cannot write there (Not a directory)",
      { save = dir .. "/a: b/x.ckpt" })
    raises("option 'save_every' needs option 'save'", { save_every = 2 })
    raises("option 'save_every' must be >= 1, got 0", { save = dir .. "/x.ckpt",
      save_every = 0 })
    raises("option 'save_every' must be an integer, got table", { save = dir .. "/x.ckpt",
      save_every = {} })
    assert.are.equal(0, calls)
    assert.is_false(exists(dir .. "/x.ckpt"))
    assert.is_false(exists(dir .. "/x.ckpt.probe"))
  end)
end)

---------------------------------------------------------------------------------------------------
-- One tiny addition model saved by train.lua, shared by the tests of the scripts below.
local shared = {}
local function saved_model()
  if shared.ckpt and exists(shared.ckpt) then return shared end
  shared.dir = tmpdir()
  shared.ckpt = shared.dir .. "/add.ckpt"
  shared.cmd = ("%s scripts/train.lua --task addition --max-digits 2 --seq-len 64 --steps 6 "
    .. "--save-every 2 --threads 1 --log-every 1 %s --save %s"):format(sh_quote(BIN),
    TINY_ARGS:gsub("%-%-seq%-len 32 ", ""), sh_quote(shared.ckpt))
  local so, se, code = run(shared.cmd)
  assert.are.equal(0, code, so .. se)
  shared.stdout = so
  shared.json = read_json(shared.dir .. "/add.json")
  return shared
end

local function remove_saved_model()
  if shared.dir then h.remove_tree(shared.dir) end
end

describe("scripts/train.lua --save", function()
  teardown(remove_saved_model)

  it("writes the model with its optimiser, and the result JSON beside it", function()
    local s = saved_model()
    assert.are.same({ "add.ckpt", "add.csv", "add.json" }, ls(s.dir))
    assert.truthy(s.stdout:find("model saved to " .. s.ckpt, 1, true), s.stdout)
    local j = s.json
    assert.are.equal(s.ckpt, j.checkpoint)
    local m, opt = assert(rp.load(s.ckpt))
    assert.are.equal(6, opt:steps())
    assert.are.equal(j.params, m:num_params())
    assert.are.equal(64, m:config().seq_len)
    -- the saved model is the one that was evaluated
    assert.are.equal(j.eval_loss, eval_loss(m, j.config))
  end)

  it("records the run's provenance", function()
    local j = saved_model().json
    local p = j.provenance
    assert.is_table(p)
    assert.are.equal(rp._VERSION, p.roper)
    assert.are.equal(rp.build_info().commit, p.commit)
    assert.are.equal(("%s (-march=%s)"):format(rp.build_info().build, rp.build_info().target),
      p.build)
    assert.are.equal((rp.blas.core()), p.blas_core)
    assert.are.equal(rp.blas.config():match("^OpenBLAS (%S+)"), p.openblas)
    assert.are.equal(1, p.threads) -- --threads 1
    assert.are.equal(j.threads, p.threads)
    assert.is_string(p.wait_policy)
    assert.truthy(p.date:match("^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ$"), p.date)
    local y, mo, d, hh, mi, ss = p.date:match("^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)Z$")
    local utc_now = os.time(os.date("!*t"))
    local t = os.time { year = y, month = mo, day = d, hour = hh, min = mi, sec = ss }
    assert.is_true(math.abs(utc_now - t) < 600, p.date)
    local host = run("hostname")
    assert.are.equal(host:gsub("\n$", ""), p.host)
    assert.is_string(p.cpu)
    assert.is_true(#p.cpu > 0)
    -- the first processor's block of /proc/cpuinfo: its model name, cpu family and model
    local first = ((read("/proc/cpuinfo") or "") .. "\n\n"):match("^(.-\n)\n")
    local model = ("\n" .. first):match("\nmodel name%s*:%s*([^\n]-)%s*\n")
    local family = ("\n" .. first):match("\ncpu family%s*:%s*(%d+)%s*\n")
    local number = ("\n" .. first):match("\nmodel%s*:%s*(%d+)%s*\n")
    if model and family and number then
      assert.are.equal(("%s (family %s, model %s)"):format(model, family, number), p.cpu)
    elseif model then
      assert.are.equal(model, p.cpu)
    end
  end)

  -- it went on from the finished model with no curve and died in its summary: "bad argument #7
  -- to 'format' (number expected, got nil)", exit 1 (under mpirun the job aborted; issue 29)
  it("--resume with the finished run's checkpoint says so and exits 0, writing nothing", function()
    local s = saved_model()
    local files = { "add.ckpt", "add.csv", "add.json" }
    local before = {}
    for i, f in ipairs(files) do before[i] = read(s.dir .. "/" .. f) end
    local so, se, code = run(s.cmd .. " --resume")
    assert.are.equal(0, code, so .. se)
    assert.are.equal("", se)
    assert.are.equal(("train.lua: --resume: %s is the model of a finished run (step 6 of steps = "
      .. "6); nothing to do (its result: %s/add.json)\n"):format(s.ckpt, s.dir), so)
    assert.are.same(files, ls(s.dir))
    for i, f in ipairs(files) do assert.are.equal(before[i], read(s.dir .. "/" .. f), f) end
  end)

  it("--save-every: a run killed while training leaves a whole checkpoint and no result", function()
    local dir = tmpdir()
    local ckpt, progress = dir .. "/k.ckpt", dir .. "/k.progress"
    local p = io.popen(("%s scripts/train.lua --steps 1000000 --save-every 40 --threads 1 %s "
      .. "--save %s --progress %s > /dev/null 2>&1 & echo $!"):format(sh_quote(BIN), TINY_ARGS,
      sh_quote(ckpt), sh_quote(progress)))
    local pid = math.tointeger(tonumber(p:read("l")))
    p:close()
    local function step()
      local s = read(progress)
      return s and tonumber(s:match("^(%d+)")) or 0
    end
    local started = wait_for(function() return exists(ckpt) and step() >= 130 end, 60)
    os.execute("kill -9 " .. pid)
    assert.is_true(started, "no checkpoint after 60 s")
    assert.is_true(wait_for(function()
      local stat = read("/proc/" .. pid .. "/stat")
      return stat == nil or stat:match("%) (%a)") == "Z"
    end, 10))
    local m, opt = rp.load(ckpt)
    assert.is_not_nil(m, opt)
    assert.are.equal(0, opt:steps() % 40)
    assert.is_true(opt:steps() >= 40 and opt:steps() < 1000000)
    assert.is_false(exists(dir .. "/k.json"))
    -- A save names its anonymous temporary file <path>.tmp.<pid> just before renaming it into
    -- place: a kill in between leaves that name (the next save to the path removes it, as
    -- test_fileio checks). Nothing else may be left.
    for _, n in ipairs(ls(dir)) do
      local owner = n:match("%.tmp%.(%d+)$")
      assert.is_true(owner == nil or tonumber(owner) == pid, "left behind: " .. n)
      assert.is_nil((owner and n:gsub("%.tmp%.%d+$", "") or n):find("%.tmp%."), "left behind: " .. n)
    end
    h.remove_tree(dir)
  end)

  it("refuses bad --save options before training", function()
    local dir = tmpdir()
    local function fails(args, want)
      local so, se, code = run(sh_quote(BIN) .. " scripts/train.lua --steps 2 " .. TINY_ARGS
        .. " " .. args)
      assert.are.equal(2, code, so .. se)
      assert.are.equal("train.lua: " .. want .. "\n", se)
    end
    fails("--save-every 2", "--save-every needs --save")
    fails("--save " .. dir .. "/m.ckpt --save-every 0", "--save-every must be an integer >= 1")
    fails("--save " .. dir .. "/m.json", "--save " .. dir .. "/m.json: a checkpoint is not a "
      .. ".json or .csv file (use .ckpt)")
    fails("--save " .. dir, "--save " .. dir .. ": is a folder, not a file")
    fails("--save " .. dir .. "/m.ckpt --out " .. dir .. "/m.ckpt",
      "--save and --out name the same file")
    assert.are.same({}, ls(dir))
    h.remove_tree(dir)
  end)
end)

---------------------------------------------------------------------------------------------------
describe("scripts/sample.lua", function()
  teardown(remove_saved_model)
  local function sample(args)
    return run(sh_quote(BIN) .. " scripts/sample.lua " .. sh_quote(saved_model().ckpt) .. " "
      .. args)
  end
  local function model_and_task()
    local s = saved_model()
    return assert(rp.load(s.ckpt)), assert(rp.experiment.task(s.json.config))
  end

  it("--greedy continues the prompt as m:generate does, up to the terminator", function()
    local so, se, code = sample("--prompt '?d=12+34;' --greedy --n 40")
    assert.are.equal(0, code, so .. se)
    local m, task = model_and_task()
    local ids = m:generate(task:encode("?d=12+34;"), 40, { stop = task:encode("#")[1] })
    assert.are.equal("?d=12+34;" .. task:decode(ids) .. "\n", so)
    local again = sample("--prompt '?d=12+34;' --temperature 0 --n 40")
    assert.are.equal(so, again)
  end)

  it("samples reproducibly with --seed: sample i is m:generate_batch's prompt i", function()
    local args = "--prompt '?d=1' --samples 3 --temperature 0.8 --top-k 5 --seed 7 --n 12"
    local so, se, code = sample(args)
    assert.are.equal(0, code, so .. se)
    assert.are.equal(so, (sample(args)))
    local m, task = model_and_task()
    local p = task:encode("?d=1")
    local outs = m:generate_batch({ p, p, p }, 12, { temperature = 0.8, top_k = 5, seed = 8,
      stop = task:encode("#")[1] })
    local want = {}
    for i, ids in ipairs(outs) do
      want[#want + 1] = ("-- sample %d\n?d=1%s\n"):format(i, task:decode(ids))
    end
    assert.are.equal(table.concat(want), so)
    assert.are_not.equal(so, (sample(args:gsub("seed 7", "seed 8"))))
  end)

  it("without --prompt: fresh problems of the task, each answer checked", function()
    local so, se, code = sample("--samples 3 --greedy --seed 4")
    assert.are.equal(0, code, so .. se)
    local l = lines(so)
    assert.are.equal(4, #l, so)
    local task = select(2, model_and_task())
    local g, right = rp.rng(4), 0
    for i = 1, 3 do
      local q, a = task:problem(g)
      assert.are.equal(q, l[i]:sub(1, #q))
      if l[i]:match("   %[right%]$") then
        right = right + 1
      else
        assert.truthy(l[i]:find("   [wrong: the answer is " .. a .. "]", 1, true), l[i])
      end
    end
    assert.are.equal(("%d of 3 right"):format(right), l[4])
  end)

  it("needs the run's JSON: beside the checkpoint or --config", function()
    local s = saved_model()
    local dir = tmpdir()
    local other = dir .. "/other.ckpt"
    write(other, read(s.ckpt))
    local cmd = sh_quote(BIN) .. " scripts/sample.lua " .. sh_quote(other)
    local so, se, code = run(cmd .. " --greedy --prompt '?d=1'")
    assert.are.equal(2, code, so .. se)
    assert.are.equal(("sample.lua: %s: no run JSON beside it (%s/other.json) to tell the run's "
      .. "task; give the run's result JSON or config with --config\n"):format(other, dir), se)
    local so2, se2, code2 = run(cmd .. " --greedy --prompt '?d=1' --config "
      .. sh_quote(s.dir .. "/add.json"))
    assert.are.equal(0, code2, so2 .. se2)
    assert.are.equal(so2, (sample("--greedy --prompt '?d=1'")))
    -- a config of another task: its vocabulary is not the model's
    write(dir .. "/c.json", '{"task": "substring_index"}')
    local so3, se3, code3 = run(cmd .. " --config " .. sh_quote(dir .. "/c.json"))
    assert.are.equal(2, code3, so3 .. se3)
    assert.truthy(se3:find("not this checkpoint's run", 1, true), se3)
    -- a character outside the vocabulary
    local so4, se4, code4 = sample("--prompt 'hello'")
    assert.are.equal(2, code4, so4 .. se4)
    assert.truthy(se4:find("sample.lua: --prompt: ", 1, true), se4)
    assert.truthy(se4:find("is not in the vocabulary", 1, true), se4)
    -- an option typed that does nothing in the chosen mode (issue 48), unless --allow-unused
    for _, c in ipairs {
      { "--greedy --top-k 5", "--top-k 5 does nothing with --greedy: it applies to sampling" },
      { "--temperature 0 --top-k 5", "--top-k 5 does nothing with --temperature 0: it applies "
        .. "to sampling (--temperature > 0)" },
      { "--greedy --temperature 0.5",
        "--temperature 0.5 does nothing with --greedy: it applies to sampling" },
      { "--greedy --prompt '?d=1' --seed=3", "--seed 3 does nothing with --prompt and greedy "
        .. "decoding: it draws the problems and the samples" },
    } do
      local so5, se5, code5 = sample(c[1] .. " --n 4")
      assert.are.equal(2, code5, so5 .. se5)
      assert.are.equal("sample.lua: " .. c[2] .. " (--allow-unused runs it anyway)\n", se5)
      so5, se5, code5 = sample(c[1] .. " --n 4 --allow-unused")
      assert.are.equal(0, code5, so5 .. se5)
    end
    h.remove_tree(dir)
  end)

  it("on a run that did not keep its model, says so and names --keep-models", function()
    local s = saved_model()
    local dir = tmpdir()
    -- a run of compare.lua without --keep-models: its JSON, no checkpoint
    write(dir .. "/rope-s1.json", read(s.dir .. "/add.json"))
    for _, script in ipairs { "sample.lua", "attention_map.lua" } do
      local so, se, code = run(("%s scripts/%s %s"):format(sh_quote(BIN), script,
        sh_quote(dir .. "/rope-s1.ckpt")))
      assert.are.equal(2, code, so .. se)
      assert.are.equal(("%s: checkpoint %s/rope-s1.ckpt: no such file, but its run is there "
        .. "(%s/rope-s1.json): the run did not keep its model; run the same compare.lua or "
        .. "sweep.lua command again with --keep-models (it trains again only the runs without a "
        .. "model), or train.lua with --save\n"):format(script, dir, dir), se)
    end
    -- without the run either, the plain message
    local so, se, code = run(("%s scripts/sample.lua %s"):format(sh_quote(BIN),
      sh_quote(dir .. "/none.ckpt")))
    assert.are.equal(2, code, so .. se)
    assert.are.equal(("sample.lua: checkpoint %s/none.ckpt: no such file\n"):format(dir), se)
    h.remove_tree(dir)
  end)
end)

---------------------------------------------------------------------------------------------------
describe("scripts/attention_map.lua", function()
  local dir
  setup(function() dir = tmpdir() end)
  teardown(function()
    h.remove_tree(dir)
    remove_saved_model()
  end)

  local function attention_map(args)
    return run(sh_quote(BIN) .. " scripts/attention_map.lua " .. sh_quote(saved_model().ckpt)
      .. " " .. args)
  end

  -- The panels of a gnuplot script: {layer, head} of each plot line, in order.
  local function panels(gp)
    local t, title = {}, nil
    for l in gp:gmatch("[^\n]+") do
      local layer, head = l:match("^%s*set title 'layer (%d+), head (%d+)'")
      if layer then title = { tonumber(layer), tonumber(head) } end
      if l:match("^%s*plot ") then
        t[#t + 1] = title
        title = nil
      end
    end
    return t
  end

  it("draws one heatmap per layer and head (PNG and SVG) with the model's weights", function()
    local out = dir .. "/att"
    local so, se, code = attention_map("--input '?d=12+34;' --out " .. sh_quote(out))
    assert.are.equal(0, code, so .. se)
    assert.are.equal("\137PNG\r\n\26\n", assert(read(out .. ".png")):sub(1, 8))
    assert.truthy(assert(read(out .. ".svg")):find("<svg", 1, true))
    local gp = assert(read(out .. ".gp"))
    assert.are.same({ { 1, 1 }, { 1, 2 }, { 2, 1 }, { 2, 2 } }, panels(gp))
    assert.truthy(gp:find("set multiplot layout 2,2 ", 1, true), gp)
    assert.truthy(gp:find('set xtics ("?" 0, "d" 1, "=" 2, "1" 3, "2" 4, "+" 5, "3" 6, "4" 7, ";" 8)',
      1, true), gp)
    -- a labelled colour bar, a short title (no answer: the input is no whole problem), the input
    -- under the panels and how to read it
    assert.truthy(gp:find('\n  set label 2 "attention weight" at screen ', 1, true), gp)
    local name = saved_model().ckpt:match("[^/]*$")
    assert.truthy(gp:find(' title "' .. name .. ': addition, 9 tokens"', 1, true), gp)
    assert.truthy(gp:find('\n  set label 1 "input: ?d=12+34;\\nHow to read it: ', 1, true), gp)
    -- the data: a 9 x 9 matrix per panel, the weights of m:attention
    local m = assert(rp.load(saved_model().ckpt))
    local task = assert(rp.experiment.task(saved_model().json.config))
    local ids = task:encode("?d=12+34;")
    local blocks = h.gnuplot_blocks(assert(read(out .. ".dat")))
    assert.are.equal(4, #blocks)
    local k = 0
    for l = 1, 2 do
      local att = m:attention(l, { ids })
      for hd = 1, 2 do
        k = k + 1
        assert.are.equal(9, #blocks[k])
        h.approx(blocks[k], att[1][hd], 1e-4, ("layer %d head %d"):format(l, hd))
      end
    end
  end)

  -- The picture's geometry as the gnuplot script sets it: the terminal's width and height, the
  -- layout's rows and columns, and the width of a panel in pixels (the margins and the spacing
  -- of `set multiplot`, fractions of the width).
  local function geometry(gp)
    local w, ht = gp:match("set terminal pngcairo size (%d+),(%d+)")
    local r, c, l, rt, sx = gp:match("set multiplot layout (%d+),(%d+) margins ([%d.]+),([%d.]+),"
      .. "[%d.]+,[%d.]+ spacing ([%d.]+),")
    w, c = tonumber(w), tonumber(c)
    return { width = w, height = tonumber(ht), rows = tonumber(r), cols = c,
      panel = (tonumber(rt) - tonumber(l) - (c - 1) * tonumber(sx)) * w / c }
  end
  local function png_size(path)
    local data = assert(read(path))
    assert.are.equal("\137PNG\r\n\26\n", data:sub(1, 8))
    local w, ht = string.unpack(">I4I4", data, 17)
    return { w, ht }
  end

  it("fits the picture to 1280 pixels: a token at least 9 pixels, the panels in rows that fit",
    function()
    -- 64 tokens: both heads of a layer side by side, 9 pixels a token or more
    local input = ("?d=12+34; 2e0+4e0+0e0==6e0 and 1e1+3e1+0e1==4e1 and d==46#"):rep(2):sub(1, 64)
    local out = dir .. "/wide"
    local so, se, code = attention_map(("--input '%s' --out %s"):format(input, sh_quote(out)))
    assert.are.equal(0, code, so .. se)
    local g = geometry(assert(read(out .. ".gp")))
    assert.are.same({ 2, 2 }, { g.rows, g.cols })
    assert.is_true(g.width <= 1280 and g.width >= 1200, g.width)
    assert.is_true(g.panel / 64 >= 9, g.panel)
    assert.are.same({ g.width, g.height }, png_size(out .. ".png"))
    -- the SVG has the same size
    assert.truthy(assert(read(out .. ".svg")):find(('width="%d" height="%d"'):format(g.width,
      g.height), 1, true))
    -- --width 900: one panel a row, still 9 pixels a token or more
    so, se, code = attention_map(("--input '%s' --width 900 --out %s"):format(input,
      sh_quote(out)))
    assert.are.equal(0, code, so .. se)
    g = geometry(assert(read(out .. ".gp")))
    assert.are.same({ 4, 1 }, { g.rows, g.cols })
    assert.is_true(g.width <= 900 and g.panel / 64 >= 9, g.width .. " " .. g.panel)
    assert.are.same({ g.width, g.height }, png_size(out .. ".png"))
    -- a short input: cells of at most 28 pixels, so a narrower picture
    so, se, code = attention_map("--input '?d=12+34;' --out " .. sh_quote(out))
    assert.are.equal(0, code, so .. se)
    g = geometry(assert(read(out .. ".gp")))
    assert.are.same({ 2, 2 }, { g.rows, g.cols })
    assert.is_true(math.abs(g.panel - 28 * 9) < 1, g.panel)
    assert.are.same({ g.width, g.height }, png_size(out .. ".png"))
    -- too narrow for the tokens, or not a width
    for _, c in ipairs {
      { "--width 600", "attention_map.lua: --width 600 is too narrow for 64 tokens: one panel "
        .. "needs 576 pixels and its margins 70\n" },
      { "--width 399", "attention_map.lua: --width must be an integer in 400..20000\n" },
      { "--width wide",
        "attention_map.lua: --width wide: not a value this option takes (see --help)\n" },
    } do
      so, se, code = attention_map(("--input '%s' %s --out %s"):format(input, c[1],
        sh_quote(dir .. "/narrow")))
      assert.are.equal(2, code, so .. se)
      assert.are.equal(c[2], se)
    end
  end)

  it("says under the panels and in its output how to read an addition problem", function()
    local out = dir .. "/read"
    local so, se, code = attention_map("--input '?d=12+34;' --out " .. sh_quote(out))
    assert.are.equal(0, code, so .. se)
    local want = 'How to read it: ?d=A+B; asks for A+B; then one step per digit place k, units '
      .. 'first (joined by "and"): aek+bek+cek==sek adds digit a of A, digit b of B and the carry '
      .. 'c into s (s of 10 or more carries 1 to the next place); d==S is the sum and # ends the '
      .. 'problem.'
    assert.truthy(so:find("\nattention_map: " .. want .. "\n", 1, true), so)
    -- in the picture: the input's line, then the reading wrapped at spaces
    local text = assert(read(out .. ".gp")):match('set label 1 "(.-)" at screen')
    text = text:gsub('\\"', '"')
    assert.truthy(text, read(out .. ".gp"))
    local parts = {}
    for l in (text .. "\\n"):gmatch("(.-)\\n") do parts[#parts + 1] = l end
    assert.are.equal("input: ?d=12+34;", parts[1])
    assert.are.equal(want, table.concat(parts, " ", 2))
  end)

  it("--layers and --heads choose the panels; the default input is a problem of the task", function()
    local out = dir .. "/one"
    local so, se, code = attention_map("--layers 2 --heads 1 --out " .. sh_quote(out))
    assert.are.equal(0, code, so .. se)
    assert.are.same({ { 2, 1 } }, panels(assert(read(out .. ".gp"))))
    local input = so:match("tokens %b(): ([^\n]*)\n")
    assert.truthy(input and input:match("^%?d=%d+%+%d+;.*#$"), so)
    -- a whole problem: its answer in the title (the worked answer the input ends with)
    local a, b = input:match("^%?d=(%d+)%+(%d+);")
    local name = saved_model().ckpt:match("[^/]*$")
    assert.truthy(read(out .. ".gp"):find((' title "%s: addition, answer %d"'):format(name,
      tonumber(a) + tonumber(b)), 1, true), read(out .. ".gp"))
    -- the default name: beside the checkpoint
    local so2, se2, code2 = attention_map("--heads 2")
    assert.are.equal(0, code2, so2 .. se2)
    local prefix = saved_model().ckpt:gsub("%.ckpt$", "") .. "-attention"
    assert.is_true(exists(prefix .. ".png") and exists(prefix .. ".svg"))
    assert.are.same({ { 1, 2 }, { 2, 2 } }, panels(assert(read(prefix .. ".gp"))))
  end)

  it("refuses bad options", function()
    local function fails(args, want)
      local so, se, code = attention_map(args .. " --out " .. sh_quote(dir .. "/bad"))
      assert.are.equal(2, code, so .. se)
      assert.truthy(se:find(want, 1, true), se)
    end
    fails("--layers 3", "attention_map.lua: --layers 3: each must be an integer in 1..2")
    fails("--heads 1,1", "attention_map.lua: --heads 1,1: 1 is given twice")
    fails("--input '?d=1' --seed 4", "attention_map.lua: --seed 4 does nothing with --input: it "
      .. "draws the default input (--allow-unused runs it anyway)")
    fails("--input 'hello'", "is not in the vocabulary")
    fails("--input '" .. ("1"):rep(65) .. "'", "--input has 65 characters, more than the model's "
      .. "seq_len 64")
    assert.is_false(exists(dir .. "/bad.png"))
  end)
end)

---------------------------------------------------------------------------------------------------
describe("compare.lua and sweep.lua --keep-models", function()
  local dir
  setup(function() dir = tmpdir() end)
  teardown(function() h.remove_tree(dir) end)

  -- fine-tuning: each run starts from its own method's and seed's kept model ({pe}, {seed} and
  -- {method} in --init name it), here at twice the sequence length with PI
  it("compare.lua --init names each run's own base model with {pe}, {method} and {seed}", function()
    local base = dir .. "/base"
    local so, se, code = run(("%s scripts/compare.lua --seeds 2 --steps 3 %s --jobs 2 "
      .. "--keep-models --quiet --out %s"):format(sh_quote(BIN), TINY_ARGS, sh_quote(base)))
    assert.are.equal(0, code, so .. se)
    local ft = dir .. "/ft"
    so, se, code = run(("%s scripts/compare.lua --seeds 2 --steps 1 %s --jobs 2 --quiet "
      .. "--seq-len 64 --scaling pi --scaling-factor 2 --init %s --out %s")
      :format(sh_quote(BIN), TINY_ARGS:gsub("%-%-seq%-len 32 ", ""),
        sh_quote(base .. "/runs/{pe}-s{seed}.ckpt"), sh_quote(ft)))
    assert.are.equal(0, code, so .. se)
    for _, r in ipairs { "rope-s1", "rope-s2", "roper-s1", "roper-s2" } do
      local j = read_json(ft .. "/runs/" .. r .. ".json")
      assert.are.equal(base .. "/runs/" .. r .. ".ckpt", j.config.init)
      assert.are.equal(64, j.config.seq_len)
    end
    -- {method} is the method's label as in the file names
    so, se, code = run(("%s scripts/compare.lua --methods rope --seeds 1 --steps 1 %s --quiet "
      .. "--init %s --out %s"):format(sh_quote(BIN), TINY_ARGS,
        sh_quote(base .. "/runs/{method}-s{seed}.ckpt"), sh_quote(dir .. "/ft2")))
    assert.are.equal(0, code, so .. se)
    assert.are.equal(base .. "/runs/rope-s1.ckpt",
      read_json(dir .. "/ft2/runs/rope-s1.json").config.init)
    -- a run still to train whose checkpoint is missing stops the command before any run (exit 2)
    so, se, code = run(("%s scripts/compare.lua --methods rope --seeds 3 --steps 1 %s --quiet "
      .. "--init %s --out %s"):format(sh_quote(BIN), TINY_ARGS,
        sh_quote(base .. "/runs/{method}-s{seed}.ckpt"), sh_quote(dir .. "/ft3")))
    assert.are.equal(2, code, so .. se)
    assert.are.equal("compare.lua: --init " .. base .. "/runs/rope-s3.ckpt: no such file\n", se)
    assert.is_nil(lfs.attributes(dir .. "/ft3/runs/rope-s1.json"))
    -- an --init that is a model of the folder's own runs (written another way): refused before
    -- anything runs, with --force too, since a run removes its model before it trains
    for _, force in ipairs { "", " --force" } do
      so, se, code = run(("%s scripts/compare.lua --seeds 1 --steps 1 %s --quiet --init %s "
        .. "--out %s%s"):format(sh_quote(BIN), TINY_ARGS,
          sh_quote(base .. "/./runs/{pe}-s{seed}.ckpt"), sh_quote(base), force))
      assert.are.equal(2, code, so .. se)
      assert.are.equal("compare.lua: --init " .. base .. "/./runs/rope-s1.ckpt is the model of "
        .. "run rope s1 here (" .. base .. "/runs/rope-s1.ckpt), which the run removes before it "
        .. "trains: copy the models elsewhere and give --init there\n", se)
      assert.truthy(lfs.attributes(base .. "/runs/rope-s1.ckpt"))
    end
  end)

  it("compare.lua keeps each run's model beside its result, and a resume keeps them so", function()
    local out = dir .. "/cmp"
    local cmd = ("%s scripts/compare.lua --seeds 1 --steps 3 %s --jobs 2 --keep-models --out %s")
      :format(sh_quote(BIN), TINY_ARGS, sh_quote(out))
    local so, se, code = run(cmd .. " --quiet")
    assert.are.equal(0, code, so .. se)
    for _, r in ipairs { "rope-s1", "roper-s1" } do
      local j = read_json(out .. "/runs/" .. r .. ".json")
      local ckpt = out .. "/runs/" .. r .. ".ckpt"
      assert.are.equal(ckpt, j.checkpoint)
      local m = assert(rp.load(ckpt))
      assert.are.equal(j.eval_loss, eval_loss(m, j.config))
      -- the threads used: the cores shared by the 2 jobs
      assert.are.equal(j.threads, j.provenance.threads)
      local cores = math.tointeger(tonumber((run("nproc"))))
      assert.are.equal(math.max(1, cores // 2), j.provenance.threads)
    end
    local md = assert(read(out .. "/summary.md"))
    assert.truthy(md:find("\nProvenance: roper " .. rp._VERSION .. " (commit "
      .. rp.build_info().commit .. "; " .. rp.build_info().build .. " (-march="
      .. rp.build_info().target .. ") build); host ", 1, true), md)
    assert.truthy(md:find("Models: `" .. out .. "/runs/<run>.ckpt` (2 of the 2 runs;", 1, true), md)
    local sj = read_json(out .. "/summary.json")
    assert.are.same({ out .. "/runs/rope-s1.ckpt", out .. "/runs/roper-s1.ckpt" }, sj.models)
    assert.are.equal(2, sj.provenance.runs_with)
    assert.are.equal(0, sj.provenance.runs_without)
    assert.are.same({ { value = rp.build_info().commit, runs = 2 } }, sj.provenance.runs.commit)
    assert.are.equal(rp.build_info().commit, sj.provenance.summary.commit)

    -- a finished run whose model is gone is run again; the other is found
    local rope = read(out .. "/runs/rope-s1.json")
    os.remove(out .. "/runs/roper-s1.ckpt")
    local so2, se2, code2 = run(cmd)
    assert.are.equal(0, code2, so2 .. se2)
    assert.truthy(se2:find("found rope s1:", 1, true), se2)
    assert.truthy(se2:find("\nagain roper s1: its result is here but not its model " .. out
      .. "/runs/roper-s1.ckpt (--keep-models), so it runs again\n", 1, true), se2)
    assert.truthy(se2:find("done roper s1:", 1, true), se2)
    assert.is_true(exists(out .. "/runs/roper-s1.ckpt"))
    assert.are.equal(rope, read(out .. "/runs/rope-s1.json"))

    -- a result written before runs recorded provenance is read as it is
    local old = read_json(out .. "/runs/rope-s1.json")
    old.provenance = nil
    write(out .. "/runs/rope-s1.json", cjson.encode(old))
    local so3, se3, code3 = run(cmd .. " --quiet")
    assert.are.equal(0, code3, so3 .. se3)
    assert.truthy(so3:find("; 1 run without provenance (written before runs recorded it).", 1,
      true), so3)

    -- runs redone without --keep-models lose their (now stale) models
    local so4, se4, code4 = run(cmd:gsub("%-%-steps 3", "--steps 4"):gsub(" %-%-keep%-models", "")
      .. " --force --quiet")
    assert.are.equal(0, code4, so4 .. se4)
    for _, n in ipairs(ls(out .. "/runs")) do assert.is_nil(n:match("%.ckpt$"), n) end
    assert.is_nil(so4:find("Models:", 1, true))
  end)

  it("sweep.lua saves every point's model and passes --save in --print-commands", function()
    local out = dir .. "/sw"
    local tail = (" --steps 2 %s --jobs 2 --keep-models --out %s"):format(TINY_ARGS, sh_quote(out))
    local so, se, code = run(sh_quote(BIN) .. " scripts/sweep.lua --grid pe=rope,none --quiet" .. tail)
    assert.are.equal(0, code, so .. se)
    for _, n in ipairs { "pe-rope", "pe-none" } do
      assert.is_not_nil(rp.load(out .. "/runs/" .. n .. ".ckpt"))
    end
    assert.truthy(so:find("\nProvenance: roper ", 1, true), so)
    assert.truthy(so:find("Models: `" .. out .. "/runs/<point>.ckpt` (2 of the 2 runs;", 1, true), so)
    local so2, se2, code2 = run(sh_quote(BIN) .. " scripts/sweep.lua --grid pe=rope,none,roper "
      .. "--print-commands" .. tail)
    assert.are.equal(0, code2, so2 .. se2)
    local cmds = lines(so2)
    assert.are.equal(1, #cmds, so2)
    -- the printed lines run in the output folder (cd first), so the model path is relative
    assert.truthy(cmds[1]:find("^cd " .. out:gsub("%p", "%%%0") .. " && "), cmds[1])
    assert.truthy(cmds[1]:find("--save runs/pe-roper.ckpt --quiet", 1, true), cmds[1])
  end)
end)

---------------------------------------------------------------------------------------------------
describe("provenance in summaries", function()
  it("reads the committed results, written before runs recorded provenance", function()
    local results = {}
    for folder in lfs.dir("results") do
      local runs = "results/" .. folder .. "/runs"
      if folder:sub(1, 1) ~= "." and lfs.attributes(runs, "mode") == "directory" then
        for n in lfs.dir(runs) do
          if n:match("%.json$") and not n:match("%.cfg%.json$") then
            results[#results + 1] = read_json(runs .. "/" .. n)
          end
        end
      end
    end
    assert.is_true(#results > 10, #results .. " results")
    local d = provenance.digest(results)
    local without = 0
    for _, r in ipairs(results) do if r.provenance == nil then without = without + 1 end end
    assert.are.equal(without, d.without)
    assert.are.equal(#results - without, d.with)
    if without == #results then
      assert.are.equal(("Provenance: not recorded (%d runs written before runs recorded it).")
        :format(#results), provenance.line(d))
    end
  end)

  it("says every value the runs differ in, and the first and last date", function()
    local function res(commit, threads, date)
      return { provenance = { roper = "0.1.0", commit = commit, date = date, host = "h",
        cpu = "c", blas_core = "Zen", openblas = "0.3.21", threads = threads,
        wait_policy = "passive (set by roper)" } }
    end
    local d = provenance.digest { res("abc", 1, "2026-01-02T00:00:00Z"),
      res("def", 1, "2026-01-01T00:00:00Z"), res("abc", 2.0, "2026-01-03T00:00:00Z"), {} }
    assert.are.same({ { value = "abc", runs = 2 }, { value = "def", runs = 1 } }, d.fields.commit)
    assert.are.same({ { value = 1, runs = 2 }, { value = 2, runs = 1 } }, d.fields.threads)
    assert.are.same({ first = "2026-01-01T00:00:00Z", last = "2026-01-03T00:00:00Z" }, d.fields.date)
    assert.are.equal("Provenance: roper 0.1.0 (commit abc (2 runs), def (1 run)); host h; CPU c; "
      .. "OpenBLAS 0.3.21 with its Zen kernels; 1 (2 runs), 2 (1 run) threads per run, OpenMP "
      .. "wait policy passive (set by roper); started 2026-01-01T00:00:00Z .. "
      .. "2026-01-03T00:00:00Z (UTC); 1 run without provenance (written before runs recorded it).",
      provenance.line(d))
    -- the build, where runs record it
    local a, b = res("abc", 1, "2026-01-02T00:00:00Z"), res("abc", 1, "2026-01-02T00:00:00Z")
    a.provenance.build, b.provenance.build = "portable (-march=x86-64-v3)", "native (-march=native)"
    assert.truthy(provenance.line(provenance.digest { a, b, a }):find("^Provenance: roper 0%.1%.0 "
      .. "%(commit abc; portable %(%-march=x86%-64%-v3%) %(2 runs%), native %(%-march=native%) "
      .. "%(1 run%) build%); host h;"), provenance.line(provenance.digest { a, b, a }))
  end)
end)

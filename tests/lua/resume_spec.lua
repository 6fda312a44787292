-- Runs that can be stopped at any time and go on (train.lua --checkpoint, compare.lua and
-- sweep.lua --checkpoint-every, scripts/lib/resume.lua): a run killed while training goes on from
-- its last checkpoint and ends as the uninterrupted run, bit for bit (the curve, the losses, the
-- counts); a checkpoint of another run is refused with its reason, never overwritten; an
-- interrupted comparison keeps each run's checkpoint and a finished one leaves none;
-- rp.experiment.checkpoint_files names the files an interrupted run leaves. The scripts
-- run through the REPL binary (ROPER_BIN, default build/roper) from the repository root, on a
-- 16-wide model.

local rp = require "roper"
local lfs = require "lfs"

local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;scripts/?.lua;" .. package.path
local h = require "helpers"
local BIN = h.BIN
local sh_quote, read, write, run, tmpdir = h.sh_quote, h.read, h.write, h.run, h.tmpdir
local read_json, ls, wait_for = h.read_json, h.ls, h.wait_for
local resume = require "lib.resume"

local function exists(path) return lfs.attributes(path) ~= nil end

local TINY_ARGS = "--d-model 16 --heads 2 --layers 2 --seq-len 32 --batch 4 --problems 2 "
  .. "--valid-batches 1 --valid-every 20 --threads 1 --log-every 10 --dropout 0.1"

-- The step written in a --progress file (0 before the first).
local function progress_step(path)
  local s = read(path)
  return s and tonumber(s:match("^(%d+)")) or 0
end

-- Waits until process pid is gone (or a zombie).
local function gone(pid)
  return wait_for(function()
    local stat = read("/proc/" .. pid .. "/stat")
    return stat == nil or stat:match("%) (%a)") == "Z"
  end, 20)
end

-- Starts cmd in the background; its pid.
local function spawn(cmd)
  local p = io.popen(cmd .. " > /dev/null 2>&1 & echo $!")
  local pid = math.tointeger(tonumber(p:read("l")))
  p:close()
  return pid
end

-- The files of a run's resumable checkpoint that are there.
local function part_files(path)
  local t = {}
  for _, f in ipairs { path, path .. ".state", path .. ".run.json" } do
    if exists(f) then t[#t + 1] = f end
  end
  return t
end

-- Results equal as an uninterrupted run's: the curve and every number that depends on the weights.
local function same_run(want, got)
  assert.are.same(want.curve, got.curve)
  for _, k in ipairs { "eval_loss", "final_train_loss", "correct", "correct_greedy" } do
    assert.are.equal(want[k], got[k], k)
  end
end

describe("train.lua --checkpoint", function()
  local dir = tmpdir()
  local straight
  setup(function()
    local so, se, code = run(("%s scripts/train.lua --steps 3000 %s --out %s"):format(sh_quote(BIN),
      TINY_ARGS, sh_quote(dir .. "/straight.json")))
    assert(code == 0, so .. se)
    straight = read_json(dir .. "/straight.json")
  end)
  teardown(function() h.remove_tree(dir) end)

  it("a run killed while training goes on from its checkpoint and ends as the uninterrupted run",
    function()
      local ckpt, out = dir .. "/k.part.ckpt", dir .. "/k.json"
      local cmd = ("%s scripts/train.lua --steps 3000 %s --checkpoint %s --checkpoint-every 40 "
        .. "--out %s"):format(sh_quote(BIN), TINY_ARGS, sh_quote(ckpt), sh_quote(out))
      local pid = spawn(cmd .. " --progress " .. sh_quote(dir .. "/k.progress"))
      local started = wait_for(function()
        return exists(ckpt) and progress_step(dir .. "/k.progress") >= 130
      end, 60)
      os.execute("kill -9 " .. pid)
      assert.is_true(started, "no checkpoint after 60 s")
      assert.is_true(gone(pid))
      assert.is_false(exists(out))
      -- the checkpoint, its training state and the run's config
      assert.are.same({ ckpt, ckpt .. ".state", ckpt .. ".run.json" }, part_files(ckpt))
      local m, opt = rp.load(ckpt)
      assert.is_not_nil(m, opt)
      local at = opt:steps()
      assert.are.equal(0, at % 40)
      assert.is_true(at >= 40 and at < 3000, at)
      assert.are.equal("resume", (resume.check(rp, ckpt, straight.config)))

      -- another seed finds the checkpoint of this run: refused, and the files stay
      local so, se, code = run(cmd:gsub("%-%-threads 1", "--threads 1 --seed 2"))
      assert.are.equal(2, code, so .. se)
      assert.are.equal(("train.lua: --checkpoint %s is the checkpoint of another run (seed = 1 "
        .. "there, 2 here); remove it or choose another file\n"):format(ckpt), se)
      assert.are.equal(3, #part_files(ckpt))

      -- copies without their state, or with the state of another step, are not gone on from
      local lone = dir .. "/lone.part.ckpt"
      write(lone, read(ckpt))
      write(lone .. ".run.json", read(ckpt .. ".run.json"))
      local no_state = ("%s is at step %d and has no training state of that step beside it "
        .. "(%s.state)"):format(lone, at, lone)
      assert.are.same({ nil, no_state }, { resume.check(rp, lone, straight.config) })
      -- the state of step `at`: <ckpt>.state, or its .tmp when the kill came between the
      -- checkpoint and the state's rename (then <ckpt>.state is the previous step's)
      local src = read(ckpt .. ".state")
      if tonumber(src:match("^roper%-run%-state 3\n(%d+)")) ~= at then
        src = read(ckpt .. ".state.tmp")
      end
      assert.are.equal(at, tonumber(src:match("^roper%-run%-state 3\n(%d+)")))
      write(lone .. ".state", (src:gsub("^(roper%-run%-state 3\n)(%d+)",
        function(head, step) return head .. (tonumber(step) + 40) end)))
      assert.are.same({ nil, no_state }, { resume.check(rp, lone, straight.config) })
      so, se, code = run(("%s scripts/train.lua --steps 3000 %s --checkpoint %s "
        .. "--checkpoint-every 40"):format(sh_quote(BIN), TINY_ARGS, sh_quote(lone)))
      assert.are.equal(2, code, so .. se)
      assert.are.equal(("train.lua: --checkpoint %s; remove it or choose another file\n")
        :format(no_state), se)

      -- the same command goes on from step `at` and ends as the run that was never stopped
      so, se, code = run(cmd .. " --save " .. sh_quote(dir .. "/k.ckpt"))
      assert.are.equal(0, code, so .. se)
      local res = read_json(out)
      assert.are.equal(at, res.resumed_at)
      same_run(straight, res)
      -- the checkpoint became the --save file; nothing of it is left
      assert.are.equal(dir .. "/k.ckpt", res.checkpoint)
      local _, opt2 = rp.load(dir .. "/k.ckpt")
      assert.are.equal(3000, opt2:steps())
      assert.are.same({}, part_files(ckpt))
    end)

  it("a run killed while it evaluates goes on from its last step without training again",
    function()
      -- an evaluation of a few seconds (eval_lengths) after 200 steps of training
      local args = TINY_ARGS:gsub("%-%-problems 2", "--problems 1000 --eval-lengths 2,3,4,5,6,7,8")
      local ckpt, out, prog = dir .. "/e.part.ckpt", dir .. "/e.json", dir .. "/e.progress"
      local so, se, code = run(("%s scripts/train.lua --steps 200 %s --out %s"):format(
        sh_quote(BIN), args, sh_quote(dir .. "/e-straight.json")))
      assert.are.equal(0, code, so .. se)
      local want = read_json(dir .. "/e-straight.json")
      local cmd = ("%s scripts/train.lua --steps 200 %s --checkpoint %s --checkpoint-every 50 "
        .. "--out %s"):format(sh_quote(BIN), args, sh_quote(ckpt), sh_quote(out))
      local pid = spawn(cmd .. " --progress " .. sh_quote(prog))
      -- killed while it evaluates: the progress file's "step steps loss done total", done < total
      local evaluating = wait_for(function()
        local done, total = (read(prog) or ""):match("^200 200 %S+ (%d+) (%d+)")
        return done ~= nil and tonumber(done) < tonumber(total)
      end, 60)
      os.execute("kill -9 " .. pid)
      assert.is_true(evaluating, "no evaluation after 60 s")
      assert.is_true(gone(pid))
      assert.is_false(exists(out))
      -- the model of the last step and its training state stay until the result is written
      assert.are.same({ ckpt, ckpt .. ".state", ckpt .. ".run.json" }, part_files(ckpt))
      assert.are.equal(200, tonumber(read(ckpt .. ".state"):match("^roper%-run%-state 3\n(%d+)")))
      assert.are.equal("resume", (resume.check(rp, ckpt, want.config)))

      -- the same command goes on from step 200: no step is trained again, only the evaluation
      so, se, code = run(cmd)
      assert.are.equal(0, code, so .. se)
      local res = read_json(out)
      assert.are.equal(200, res.resumed_at)
      same_run(want, res)
      assert.are.same(want.by_length, res.by_length)
      assert.is_true(#res.by_length == 7 and res.curve[2].valid_loss ~= nil)
      assert.are.same({}, part_files(ckpt))
    end)

  it("writes its result before it moves its checkpoint to --save, so a failed move costs no "
    .. "training", function()
    local args = TINY_ARGS:gsub("%-%-problems 2", "--problems 1000 --eval-lengths 2,3,4,5,6,7,8")
    local ckpt, out, prog = dir .. "/g.part.ckpt", dir .. "/g.json", dir .. "/g.progress"
    local models = dir .. "/g-models"
    local so, se, code = run(("%s scripts/train.lua --steps 200 %s --out %s"):format(
      sh_quote(BIN), args, sh_quote(dir .. "/g-straight.json")))
    assert.are.equal(0, code, so .. se)
    local want = read_json(dir .. "/g-straight.json")
    assert(lfs.mkdir(models))
    local cmd = ("%s scripts/train.lua --steps 200 %s --checkpoint %s --checkpoint-every 50 "
      .. "--save %s --out %s"):format(sh_quote(BIN), args, sh_quote(ckpt),
      sh_quote(models .. "/g.ckpt"), sh_quote(out))
    local pid = spawn(cmd .. " --progress " .. sh_quote(prog))
    -- the folder of --save goes while the run evaluates: the move at its end fails
    local evaluating = wait_for(function()
      local done, total = (read(prog) or ""):match("^200 200 %S+ (%d+) (%d+)")
      return done ~= nil and tonumber(done) < tonumber(total)
    end, 60)
    assert(lfs.rmdir(models))
    assert.is_true(evaluating, "no evaluation after 60 s")
    assert.is_true(gone(pid))
    -- the result is there, and so is the checkpoint of the last step with its training state
    same_run(want, read_json(out))
    assert.are.same({ ckpt, ckpt .. ".state", ckpt .. ".run.json" }, part_files(ckpt))
    assert.are.equal("resume", (resume.check(rp, ckpt, want.config)))

    -- with the folder back, the same command only evaluates and moves the model
    assert(lfs.mkdir(models))
    so, se, code = run(cmd)
    assert.are.equal(0, code, so .. se)
    local res = read_json(out)
    assert.are.equal(200, res.resumed_at)
    same_run(want, res)
    assert.are.equal(models .. "/g.ckpt", res.checkpoint)
    assert.is_true(exists(models .. "/g.ckpt"))
    assert.are.same({}, part_files(ckpt))
  end)

  it("without --save the checkpoint goes when the run finishes", function()
    local ckpt, out = dir .. "/f.part.ckpt", dir .. "/f.json"
    local so, se, code = run(("%s scripts/train.lua --steps 3000 %s --checkpoint %s "
      .. "--checkpoint-every 1000 --out %s"):format(sh_quote(BIN), TINY_ARGS, sh_quote(ckpt),
      sh_quote(out)))
    assert.are.equal(0, code, so .. se)
    local res = read_json(out)
    assert.are.equal(0, res.resumed_at)
    assert.is_nil(res.checkpoint)
    same_run(straight, res)
    assert.are.same({}, part_files(ckpt))
  end)

  it("refuses bad options and files that are not its checkpoints before training", function()
    local function fails(args, want)
      local so, se, code = run(sh_quote(BIN) .. " scripts/train.lua --steps 2 " .. TINY_ARGS
        .. " " .. args)
      assert.are.equal(2, code, so .. se)
      assert.are.equal("train.lua: " .. want .. "\n", se)
    end
    local c = dir .. "/bad.ckpt"
    fails("--checkpoint-every 2", "--checkpoint-every needs --checkpoint")
    fails("--checkpoint " .. c, "--checkpoint needs --checkpoint-every")
    fails("--checkpoint " .. c .. " --checkpoint-every 0", "--checkpoint-every must be an integer >= 1")
    fails("--checkpoint " .. c .. " --checkpoint-every 2 --save " .. dir .. "/s.ckpt --save-every 2",
      "--checkpoint goes without --save-every and --resume (it saves and resumes itself)")
    fails("--checkpoint " .. c .. " --checkpoint-every 2 --save " .. dir .. "/s.ckpt --resume",
      "--checkpoint goes without --save-every and --resume (it saves and resumes itself)")
    fails("--checkpoint " .. dir .. "/c.json --checkpoint-every 2", "--checkpoint " .. dir
      .. "/c.json: a checkpoint is not a .json or .csv file (use .ckpt)")
    fails("--checkpoint " .. c .. " --checkpoint-every 2 --save " .. c,
      "--checkpoint names the file of --save")
    fails("--checkpoint " .. dir .. " --checkpoint-every 2", "--checkpoint " .. dir
      .. ": is a folder, not a file")
    -- --save on another file system than the checkpoint, which becomes it by a rename: refused
    -- before training (it failed after, the run file naming a model that was not there)
    local lfs = require "lfs"
    local shm = "/dev/shm/roper-resume-" .. tostring(os.time()) .. "-" .. math.random(1e9)
    if lfs.attributes("/dev/shm", "dev") and lfs.attributes("/dev/shm", "dev")
      ~= lfs.attributes(dir, "dev") then
      fails("--checkpoint " .. c .. " --checkpoint-every 2 --save " .. shm .. "/s.ckpt",
        ("--checkpoint %s and --save %s/s.ckpt are on different file systems: the checkpoint "
          .. "becomes --save by a rename; put them on one"):format(c, shm))
      os.execute("rm -rf '" .. shm .. "'")
    end
    -- a file that is not one of its checkpoints is never overwritten
    write(c, "precious")
    fails("--checkpoint " .. c .. " --checkpoint-every 2", ("--checkpoint %s has no run file "
      .. "beside it (%s.run.json): not a checkpoint of --checkpoint; remove it or choose another "
      .. "file"):format(c, c))
    write(c .. ".run.json", read(dir .. "/straight.json"):match('"config":(%b{})'))
    fails("--checkpoint " .. c .. " --checkpoint-every 2", ("--checkpoint %s is the checkpoint "
      .. "of another run (steps = 3000 there, 2 here); remove it or choose another file"):format(c))
    assert.are.equal("precious", read(c))
  end)
end)

describe("compare.lua --checkpoint-every", function()
  local dir = tmpdir()
  teardown(function() h.remove_tree(dir) end)

  it("an interrupted comparison goes on from each run's checkpoint", function()
    local out = dir .. "/c"
    local function compare(o, extra)
      return ("%s scripts/compare.lua --methods rope --seeds 1 --steps 3000 %s --jobs 1 "
        .. "--out %s --quiet%s"):format(sh_quote(BIN), TINY_ARGS, sh_quote(o), extra)
    end
    local cmd = compare(out, " --checkpoint-every 100")
    local runs = out .. "/runs/"
    local pid = spawn(cmd)
    local started = wait_for(function()
      return exists(runs .. "rope-s1.part.ckpt") and progress_step(runs .. "rope-s1.progress") >= 300
    end, 60)
    os.execute("kill -TERM " .. pid)
    assert.is_true(started, "no checkpoint after 60 s")
    assert.is_true(gone(pid))
    -- stopped: no result, the checkpoint kept
    assert.is_false(exists(runs .. "rope-s1.json"))
    assert.are.equal(3, #part_files(runs .. "rope-s1.part.ckpt"))
    local _, opt = rp.load(runs .. "rope-s1.part.ckpt")
    local at = opt:steps()
    assert.are.equal(0, at % 100)

    -- the printed command of the run carries the checkpoint
    local so, se, code = run(cmd .. " --print-commands")
    assert.are.equal(0, code, so .. se)
    assert.truthy(so:find(" --checkpoint runs/rope-s1.part.ckpt --checkpoint-every 100 --quiet\n",
      1, true), so)

    so, se, code = run(cmd)
    assert.are.equal(0, code, so .. se)
    local res = read_json(runs .. "rope-s1.json")
    assert.are.equal(at, res.resumed_at)
    assert.are.same({}, part_files(runs .. "rope-s1.part.ckpt"))
    -- summary.md's table of every run says which run went on from a checkpoint
    assert.truthy(read(out .. "/summary.md"):find(("\n| rope | 1 (resumed at step %d) |"):format(at),
      1, true), read(out .. "/summary.md"))
    -- the same numbers as a comparison never stopped
    local so2, se2, code2 = run(compare(dir .. "/u", ""))
    assert.are.equal(0, code2, so2 .. se2)
    local straight = read_json(dir .. "/u/runs/rope-s1.json")
    assert.is_nil(straight.resumed_at)
    assert.truthy(read(dir .. "/u/summary.md"):find("\n| rope | 1 |", 1, true))
    same_run(straight, res)
    for _, n in ipairs(ls(out .. "/runs")) do assert.is_nil(n:find("part"), n) end
  end)

  it("a leftover checkpoint of another config is replaced; a finished run's is removed", function()
    local out = dir .. "/l"
    local runs = out .. "/runs/"
    local cmd = ("%s scripts/compare.lua --methods rope --seeds 1 --steps 200 %s --jobs 1 "
      .. "--checkpoint-every 50 --out %s --quiet"):format(sh_quote(BIN), TINY_ARGS, sh_quote(out))
    -- the checkpoint of another seed where this comparison's run will look
    lfs.mkdir(out)
    lfs.mkdir(runs)
    local so, se, code = run(("%s scripts/train.lua --steps 200 %s --seed 7 --checkpoint %s "
      .. "--checkpoint-every 50 --save %s"):format(sh_quote(BIN), TINY_ARGS,
      sh_quote(dir .. "/other.part.ckpt"), sh_quote(runs .. "rope-s1.part.ckpt")))
    assert.are.equal(0, code, so .. se)
    -- with its run file and a state of its step: only the config tells it from this run's
    write(runs .. "rope-s1.part.ckpt.run.json",
      assert(read(runs .. "rope-s1.part.json")):match('"config":(%b{})'))
    local want = read_json(runs .. "rope-s1.part.json").config
    want.seed = 1
    os.remove(runs .. "rope-s1.part.json")
    os.remove(runs .. "rope-s1.part.csv")
    write(runs .. "rope-s1.part.ckpt.state", "roper-run-state 1\n200 0 0 0 0\n")
    assert.are.same({ nil, runs .. "rope-s1.part.ckpt is the checkpoint of another run (seed = 7 "
      .. "there, 1 here)" },
      { resume.check(rp, runs .. "rope-s1.part.ckpt", want) })
    so, se, code = run(cmd)
    assert.are.equal(0, code, so .. se)
    assert.are.equal(0, read_json(runs .. "rope-s1.json").resumed_at)
    assert.are.same({}, part_files(runs .. "rope-s1.part.ckpt"))
    -- a finished run found again: a stale checkpoint beside it goes
    write(runs .. "rope-s1.part.ckpt", "stale")
    so, se, code = run(cmd)
    assert.are.equal(0, code, so .. se)
    assert.are.same({}, part_files(runs .. "rope-s1.part.ckpt"))
  end)

  it("refuses --checkpoint-every below 1", function()
    for _, script in ipairs { "compare.lua", "sweep.lua --grid pe=rope" } do
      local so, se, code = run(("%s scripts/%s --checkpoint-every 0 --out %s"):format(
        sh_quote(BIN), script, sh_quote(dir .. "/z")))
      assert.are.equal(2, code, so .. se)
      assert.are.equal(script:match("^%S+") .. ": --checkpoint-every must be an integer >= 1\n", se)
    end
  end)
end)

describe("rp.experiment.run stopped in its evaluation", function()
  local dir = tmpdir()
  teardown(function() h.remove_tree(dir) end)

  it("keeps the training state of its last step until the result is complete", function()
    local cfg = { steps = 30, d_model = 16, heads = 2, layers = 2, seq_len = 32, batch = 4,
      problems = 20, valid_batches = 1, log_every = 5, valid_every = 10, eval_lengths = "2,3",
      threads = 1 }
    local straight = rp.experiment.run(cfg)
    -- the progress of the evaluation (done and total given) stops the run there
    local function stop_in_eval(_, _, _, done)
      if done then error("stopped in the evaluation") end
    end
    local path = dir .. "/e.ckpt"
    local ok, err = pcall(rp.experiment.run, cfg, stop_in_eval, { save = path, save_every = 7 })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("stopped in the evaluation", 1, true), err)
    assert.are.equal(30, rp.experiment.resumable(cfg, path))
    -- resumed: no training step runs (progress hears of none), the result is the straight run's
    local trained = 0
    local res = rp.experiment.run(cfg, function(_, _, _, done)
      if not done then trained = trained + 1 end
    end, { save = path, save_every = 7, resume = true })
    assert.are.equal(0, trained)
    assert.are.equal(30, res.resumed_at)
    same_run(straight, res)
    assert.are.same(straight.by_length, res.by_length)
    assert.is_not_nil(res.curve[2].valid_loss)
    -- the run is finished: no state is left, and resume has nothing to go on with
    assert.is_false(exists(path .. ".state") or exists(path .. ".state.tmp"))
    assert.are.same({ nil, path .. " is the model of a finished run (step 30 of steps = 30)",
      "finished" }, { rp.experiment.resumable(cfg, path) })
    -- without save_every or resume no state is ever written, stopped or not
    local plain = dir .. "/p.ckpt"
    assert.is_false((pcall(rp.experiment.run, cfg, stop_in_eval, { save = plain })))
    assert.is_true(exists(plain))
    assert.is_false(exists(plain .. ".state") or exists(plain .. ".state.tmp"))
  end)

  it("with keep_state leaves the state of its last step for the caller to remove", function()
    local cfg = { steps = 20, d_model = 16, heads = 2, layers = 2, seq_len = 32, batch = 4,
      problems = 20, valid_batches = 1, log_every = 5, threads = 1 }
    local straight = rp.experiment.run(cfg)
    local sub = dir .. "/keep"
    assert(lfs.mkdir(sub))
    local path = sub .. "/k.ckpt"
    local opts = { save = path, save_every = 7, keep_state = true }
    local res = rp.experiment.run(cfg, nil, opts)
    same_run(straight, res)
    -- finished, and still resumable at its last step: a process stopped before it stored the
    -- result goes on from there and trains nothing
    assert.are.equal(20, rp.experiment.resumable(cfg, path))
    local trained = 0
    opts.resume = true
    res = rp.experiment.run(cfg, function(_, _, _, done)
      if not done then trained = trained + 1 end
    end, opts)
    assert.are.equal(0, trained)
    assert.are.equal(20, res.resumed_at)
    same_run(straight, res)
    -- what the caller removes once the result is stored
    assert.are.same({ "k.ckpt", "k.ckpt.state" }, ls(sub))
    for _, f in ipairs(rp.experiment.checkpoint_files(path)) do os.remove(f) end
    assert.are.same({}, ls(sub))
  end)
end)

describe("rp.experiment.checkpoint_files", function()
  local dir = tmpdir()
  teardown(function() h.remove_tree(dir) end)
  local cfg = { steps = 9, d_model = 16, heads = 2, layers = 2, seq_len = 32, batch = 4,
    problems = 2, valid_batches = 1, log_every = 1, threads = 1 }

  it("names the files an interrupted run leaves, in their order", function()
    local path = dir .. "/c.ckpt"
    local files = rp.experiment.checkpoint_files(path)
    -- only names: nothing is there yet, and nothing is created
    assert.are.same({}, ls(dir))
    -- a run stopped after its save of step 3 leaves the model and the training state
    assert.is_false(pcall(rp.experiment.run, cfg, function(step)
      if step == 4 then error("stopped") end
    end, { save = path, save_every = 3 }))
    local base = #dir + 2
    local function names(list)
      local t = {}
      for i, f in ipairs(list) do t[i] = f:sub(base) end
      table.sort(t)
      return t
    end
    assert.are.same(names { files[1], files[2] }, ls(dir))
    -- resumed, and stopped in its save of step 6 after the state's first half (a folder where
    -- the model goes makes the model's save fail): the half-written state is left too
    assert.is_false(pcall(rp.experiment.run, cfg, function(step)
      if step == 6 then
        assert(os.remove(path))
        assert(lfs.mkdir(path))
      end
    end, { save = path, save_every = 3, resume = true }))
    assert.are.same(names(files), ls(dir))
    assert.are.same({ path, path .. ".state", path .. ".state.tmp" }, files)
    -- resume.discard removes them all, and the scripts' run file with them
    write(path .. ".run.json", "{}")
    resume.discard(path)
    assert.are.same({}, ls(dir))
    -- a new list each call
    files[1] = "changed"
    assert.are.equal(path, rp.experiment.checkpoint_files(path)[1])
  end)

  it("raises naming itself for a path that is not a nonempty string", function()
    local function raises(want, ...)
      local ok, err = pcall(rp.experiment.checkpoint_files, ...)
      assert.is_false(ok)
      assert.are.equal("bad argument " .. want, tostring(err):match("bad argument .*$"), err)
    end
    raises("#1 to 'rp.experiment.checkpoint_files' (path (a string) expected, got nil)")
    raises("#1 to 'rp.experiment.checkpoint_files' (path (a string) expected, got number)", 3)
    raises("#1 to 'rp.experiment.checkpoint_files' (path must be a nonempty string without NUL "
      .. "bytes)", "")
    raises("#1 to 'rp.experiment.checkpoint_files' (path must be a nonempty string without NUL "
      .. "bytes)", "a\0b")
  end)
end)

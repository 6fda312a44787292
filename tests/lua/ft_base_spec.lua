-- The fine-tuning base runs (results/v3-ft-base: substring by prefix at 0.1M, rope and roper,
-- seeds 1-5, their models kept for results/v3-ft-*; portable build at 5b3681a) are not committed
-- as models (.ckpt): results/run_v3.sh's finetune comment records the command that makes them
-- again,
--   build-portable/roper scripts/compare.lua --jobs 2 --quiet --threads 1 \
--     --task substring_prefix --methods rope roper --seeds 5 --keep-models \
--     --checkpoint-every 250 --out results/v3-ft-base
-- and they reproduce bit for bit at their own commit (docs/results.md, "Reproducing a stored run").
-- Since the cross-entropy in one pass (2026-11-28) the portable build rounds a training step
-- otherwise, so this spec shows that the recorded command still makes those runs' configs, that the
-- current portable build gives the bits of tests/fixtures/ft_base/ (the same points made with this
-- code; FT_BASE_WRITE=1 writes them again), and that those lie within 2e-3 of the stored runs'
-- losses (the same runs, rounded otherwise).
-- That command with --print-commands (into a temporary folder) writes each run's config and
-- prints its train.lua command; the configs must be the committed runs', and rope seed 1 and
-- roper seed 1 are run with their printed commands (two processes at once) up to the command's
-- first checkpoint, at step 250 of 2,000 (the schedule is the whole run's), where a hook given
-- with -e ends the process. The training state of that checkpoint holds the curve: its points
-- (steps 20-240) must be the fixture's, every loss and learning rate to the last bit (as %.17g
-- text), and the loss curve CSV that train.lua writes from them must be the one the fixture's
-- points give, as text. About 15 s. Pending on a CPU below x86-64-v3.
local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. dir_of .. "../../scripts/?.lua;" .. package.path
local h = require "helpers"
-- the checkout (absolute: the commands run in other folders)
local root = (dir_of:sub(1, 1) == "/" and "" or h.pwd() .. "/") .. dir_of .. "../../"
local sh_quote, run, read = h.sh_quote, h.run, h.read
local tables = require "lib.tables"
local resume = require "lib.resume"

local BIN = root .. "build-portable/roper"
local BASE = root .. "results/v3-ft-base/runs/"
local FIXTURE = root .. "tests/fixtures/ft_base/"
-- the recorded command (results/run_v3.sh, finetune), with --out in a temporary folder
local COMMAND = "scripts/compare.lua --jobs 2 --quiet --threads 1 --task substring_prefix "
  .. "--methods rope roper --seeds 5 --keep-models --checkpoint-every 250"
local CHECKPOINT = 250 -- its --checkpoint-every: the first checkpoint's step
local RUNS = { "rope-s1", "roper-s1" }

-- every variable roper or the tests set, removed first (as portable_spec does)
local CLEAN = "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u ROPER_OMP_WAIT_POLICY "
  .. "-u OPENBLAS_CORETYPE -u ROPER_BLAS_DETECTED -u ROPER_BLAS_REPLACED -u ROPER_KEEP_CORETYPE "
  .. "-u OMP_NUM_THREADS "

-- Run with -e before train.lua: the process ends at the step after the first checkpoint (saved,
-- with its training state, right after that step's progress call).
local HOOK = ("local run = rp.experiment.run "
  .. "rp.experiment.run = function(cfg, progress, opts) "
  .. "return run(cfg, function(step, ...) if step > %d then os.exit(0) end "
  .. "return progress(step, ...) end, opts) end"):format(CHECKPOINT)

-- the portable build needs x86-64-v3 (h.x86_64_v3: whether this CPU has it, by the build's own
-- check when it is built, and its flags)
local v3, flags = h.x86_64_v3(BIN)

-- A training state file's step and curve ({step, tokens, loss, lr} numbers as written: %.17g).
local function state_curve(text)
  local lines = h.lines(text)
  assert(lines[1] == "roper-run-state 3", "not a training state: " .. tostring(lines[1]))
  local step = math.tointeger(tonumber(lines[2]:match("^(%d+) ")))
  local nkeys = math.tointeger(tonumber(lines[3]:match("^config (%d+)$")))
  local curve = {}
  for i = 4 + nkeys, #lines do
    local s, t, loss, lr = lines[i]:match("^(%d+) (%d+) (%S+) (%S+)$")
    assert(s, "a curve line of the state: " .. lines[i])
    curve[#curve + 1] = { step = math.tointeger(tonumber(s)), tokens = math.tointeger(tonumber(t)),
      loss = tonumber(loss), lr = tonumber(lr) }
  end
  return step, curve
end

-- A curve point as text that holds its bits.
local function point(c)
  return ("%d %d %.17g %.17g"):format(math.tointeger(c.step), math.tointeger(c.tokens), c.loss,
    c.lr)
end

describe("the fine-tuning base runs (results/v3-ft-base)", function()
  if not v3 then
    pending("this CPU is below x86-64-v3 (" .. flags .. "): the portable build cannot run here")
    return
  end

  local dir, printed, results

  setup(function()
    assert(io.open(BIN, "rb"), BIN .. " is not built (make PORTABLE=1 build-portable/roper)")
      :close()
    dir = h.tmpdir()
    local out, err, code = run("cd " .. sh_quote(root) .. " && " .. CLEAN .. sh_quote(BIN) .. " "
      .. COMMAND .. " --out " .. sh_quote(dir) .. " --print-commands")
    assert.are.equal(0, code, err)
    printed = {}
    for _, l in ipairs(h.lines(out)) do
      printed[l:match("%-%-out runs/(%S+)%.json ") or l] = l
    end
    -- the runs' printed commands, the hook added (a shell runs them at once, each into its log)
    local jobs = {}
    for i, name in ipairs(RUNS) do
      local line = assert(printed[name], "no command printed for " .. name .. ":\n" .. out)
      -- "cd <folder> && <roper> <train.lua> --config ...": the hook goes after <roper>
      local at, to = line:find(" && ", 1, true)
      local bin, rest = line:sub(to + 1):match("^(%S+) (.*)$")
      assert(bin and bin:match("roper'?$"), line)
      jobs[i] = ("(%s && %s%s -e %s %s > %s 2>&1; echo $? > %s) &"):format(line:sub(1, at - 1),
        CLEAN, bin, sh_quote(HOOK), rest, sh_quote(dir .. "/" .. name .. ".out"),
        sh_quote(dir .. "/" .. name .. ".rc"))
    end
    local _, serr, scode = run(table.concat(jobs, " ") .. " wait")
    assert.are.equal(0, scode, serr)
    results = {}
    for _, name in ipairs(RUNS) do
      results[name] = { rc = (read(dir .. "/" .. name .. ".rc") or ""):match("^(%d+)"),
        out = read(dir .. "/" .. name .. ".out") or "",
        state = read(dir .. "/runs/" .. name .. ".part.ckpt.state") }
    end
  end)

  teardown(function() if dir then h.remove_tree(dir) end end)

  it("the recorded command gives every base run its committed config", function()
    for _, m in ipairs { "rope", "roper" } do
      for s = 1, 5 do
        local name = ("%s-s%d"):format(m, s)
        assert.is_not_nil(printed[name], "no command printed for " .. name)
        local cfg = h.read_json(dir .. "/runs/" .. name .. ".cfg.json")
        local committed = h.read_json(BASE .. name .. ".json")
        local same, key, there, here = resume.same_config(committed.config, cfg)
        assert.is_true(same, ("%s: %s = %s committed, %s now"):format(name, tostring(key),
          tostring(there), tostring(here)))
        assert.are.equal(1, math.tointeger(cfg.threads), name .. ": threads")
        assert.are.equal(1, math.tointeger(committed.config.threads), name .. ": threads")
      end
    end
  end)

  for _, name in ipairs(RUNS) do
    it(("re-makes %s's first %d steps bit for bit (the curve to step 240)"):format(name,
      CHECKPOINT), function()
      local r = results[name]
      assert.are.equal("0", r.rc, name .. ": " .. r.out)
      assert.is_string(r.state, name .. ": no training state at step " .. CHECKPOINT .. "\n"
        .. r.out)
      assert.is_nil(read(dir .. "/runs/" .. name .. ".json"), "the run was not stopped early")
      local step, curve = state_curve(r.state)
      assert.are.equal(CHECKPOINT, step)
      local committed = h.read_json(BASE .. name .. ".json")
      local n = CHECKPOINT // math.tointeger(committed.config.log_every)
      assert.are.equal(n, #curve)
      local got = {}
      for i = 1, n do got[i] = point(curve[i]) end
      if os.getenv("FT_BASE_WRITE") == "1" then
        h.write(FIXTURE .. name .. ".curve", table.concat(got, "\n") .. "\n")
      end
      local want = h.lines(assert(read(FIXTURE .. name .. ".curve")))
      assert.are.same(want, got)
      -- the same run as the stored one, rounded otherwise: every loss within 2e-3 of its, the
      -- steps, tokens and learning rates the same
      for i = 1, n do
        local c, k = committed.curve[i], curve[i]
        assert.are.same({ c.step, c.tokens, c.lr }, { k.step, k.tokens, k.lr })
        assert.is_true(math.abs(c.loss - k.loss) < 2e-3, ("%s step %d: %.6f stored, %.6f now")
          :format(name, k.step, c.loss, k.loss))
      end
      -- the CSV train.lua writes from the curve: the one the fixture's points give, as text
      local fixture = {}
      for i, l in ipairs(want) do
        local st, tk, loss, lr = l:match("^(%d+) (%d+) (%S+) (%S+)$")
        fixture[i] = { step = math.tointeger(tonumber(st)), tokens = math.tointeger(tonumber(tk)),
          loss = tonumber(loss), lr = tonumber(lr) }
      end
      assert.are.equal(tables.curve_csv { curve = fixture }, tables.curve_csv { curve = curve })
    end)
  end
end)

-- Runs outside roper's own scheduler (issue 15): GNU parallel, the light path over a few machines
-- (compare.lua and sweep.lua --print-commands lines run from any folder under `parallel --jobs N
-- --joblog`, a failed line is rerun by --resume-failed, and the same compare command then collects
-- every run without training anything again), and the Slurm job-array script of --print-sbatch,
-- whose tasks are run here as Slurm would run them (SLURM_ARRAY_TASK_ID set; no Slurm needed).

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"

local BIN = os.getenv("ROPER_BIN") or "build/roper"
local ABS_BIN = BIN:sub(1, 1) == "/" and BIN or (h.pwd() .. "/" .. BIN)
local TINY = "--seeds 2 --steps 2 --d-model 16 --heads 2 --layers 1 --seq-len 32 --batch 4 "
  .. "--problems 2 --valid-batches 1 --jobs 2"

local function lines(text)
  local out = {}
  for l in text:gmatch("[^\n]+") do out[#out + 1] = l end
  return out
end

-- The joblog's rows (after its header) as {seq =, exitval =, command =}.
local function joblog(path)
  local rows = {}
  for i, l in ipairs(lines(assert(h.read(path)))) do
    if i > 1 then
      local f = {}
      for c in (l .. "\t"):gmatch("([^\t]*)\t") do f[#f + 1] = c end
      rows[#rows + 1] = { seq = tonumber(f[1]), exitval = tonumber(f[7]), command = f[9] }
    end
  end
  return rows
end

describe("GNU parallel over --print-commands", function()
  local tmp
  setup(function() tmp = h.tmpdir() end)
  teardown(function() h.remove_tree(tmp) end)

  it("runs compare.lua's lines from another folder, reruns a failed one, and compare collects",
    function()
      local out = tmp .. "/cmp"
      local compare = ("%s scripts/compare.lua %s --out %s"):format(h.sh_quote(BIN), TINY,
        h.sh_quote(out))
      local cmds, se, code = h.run(compare .. " --print-commands")
      assert.are.equal(0, code, se)
      local l = lines(cmds)
      assert.are.equal(4, #l, cmds)
      assert.truthy(se:find("compare: 4 of 4 runs to do; collect them with the same command "
        .. "without --print-commands", 1, true), se)
      -- every line: cd to the absolute output folder, absolute interpreter and train.lua, the
      -- run's files relative to the folder, an explicit thread count
      local abs_out = h.pwd() .. "/" .. out:gsub("^%./", "")
      if out:sub(1, 1) == "/" then abs_out = out end
      for _, c in ipairs(l) do
        assert.truthy(c:find("cd " .. h.sh_quote(abs_out) .. " && " .. h.sh_quote(ABS_BIN) .. " ", 1,
          true) or c:find("cd " .. abs_out .. " && " .. ABS_BIN .. " ", 1, true), c)
        assert.truthy(c:find("/scripts/train%.lua %-%-config runs/[%w_.=-]+%.cfg%.json %-%-out "
          .. "runs/[%w_.=-]+%.json %-%-threads 1 %-%-quiet$"), c)
      end
      -- one line is broken on purpose (its config file unreadable), so parallel reports it
      local broken = l[3]:match("%-%-config (runs/[^ ]+)")
      local cfgpath = out .. "/" .. broken
      local good = assert(h.read(cfgpath))
      h.write(cfgpath, "{ not json")
      h.write(tmp .. "/cmds.txt", cmds)
      local env = "PARALLEL_HOME=" .. h.sh_quote(tmp .. "/ph")
      local log = tmp .. "/jobs.tsv"
      local p = ("cd / && %s parallel --jobs 2 --joblog %s < %s"):format(env, h.sh_quote(log),
        h.sh_quote(tmp .. "/cmds.txt"))
      local _, pse, pcode = h.run(p)
      assert.are.equal(1, pcode, pse)  -- parallel's exit status: the number of failed jobs
      local rows = joblog(log)
      assert.are.equal(4, #rows)
      local failed = {}
      for _, r in ipairs(rows) do
        if r.exitval ~= 0 then failed[#failed + 1] = r.seq end
      end
      assert.are.same({ 3 }, failed)
      -- fixed, and rerun: --resume-failed runs only that line
      h.write(cfgpath, good)
      local _, rse, rcode = h.run(p:gsub("%-%-joblog", "--resume-failed --joblog"))
      assert.are.equal(0, rcode, rse)
      rows = joblog(log)
      assert.are.equal(5, #rows)
      assert.are.same({ 3, 0 }, { rows[5].seq, rows[5].exitval })
      -- the same compare command collects: every run found, none trained again
      local so2, se2, code2 = h.run(compare)
      assert.are.equal(0, code2, so2 .. se2)
      local found = 0
      for _ in se2:gmatch("\nfound [%w:._=-]+ s%d") do found = found + 1 end
      if se2:find("^found ") then found = found + 1 end
      assert.are.equal(4, found, se2)
      assert.is_nil(se2:find("\ndone ", 1, true), se2)
      assert.truthy(h.read(out .. "/summary.md"):find("| roper | 2 |", 1, true))
      -- nothing left to print
      local cmds3, se3 = h.run(compare .. " --print-commands")
      assert.are.equal("", cmds3)
      assert.truthy(se3:find("compare: 0 of 4 runs to do", 1, true), se3)
    end)
end)

describe("--print-sbatch: the Slurm job array", function()
  local tmp
  setup(function() tmp = h.tmpdir() end)
  teardown(function() h.remove_tree(tmp) end)

  it("writes the array and its commands; each task runs one run; compare collects", function()
    local out = tmp .. "/sb"
    local compare = ("%s scripts/compare.lua %s --out %s"):format(h.sh_quote(BIN), TINY,
      h.sh_quote(out))
    local so, se, code = h.run(compare .. " --print-sbatch --partition debug --time 0:10:00 "
      .. "--mem 1G --sbatch=--account=proj --cpus-per-task 2")
    assert.are.equal(0, code, se)
    local script = out .. "/slurm/array.sbatch"
    assert.are.equal(script .. "\n", so)
    assert.truthy(se:find("compare: 4 of 4 runs in the job array; submit it with sbatch", 1, true), se)
    local body = assert(h.read(script))
    for _, want in ipairs { "#!/bin/bash\n", "\n#SBATCH --array=1-4\n", "\n#SBATCH --cpus-per-task=2\n",
      "\n#SBATCH --output=" .. out .. "/slurm/%A_%a.out\n", "\n#SBATCH --partition=debug\n",
      "\n#SBATCH --time=0:10:00\n", "\n#SBATCH --mem=1G\n", "\n#SBATCH --account=proj\n",
      "\n#SBATCH --job-name=roper-compare\n" } do
      assert.truthy(body:find(want, 1, true), want)
    end
    local cmds = lines(assert(h.read(out .. "/slurm/commands.txt")))
    assert.are.equal(4, #cmds)
    for _, c in ipairs(cmds) do assert.truthy(c:find(" %-%-threads 2 %-%-quiet$"), c) end
    -- outside an array the script refuses; a task beyond the array says so
    local _, e1, c1 = h.run("bash " .. h.sh_quote(script))
    assert.are_not.equal(0, c1)
    assert.truthy(e1:find("run by sbatch as a job array", 1, true), e1)
    local _, e5, c5 = h.run("SLURM_ARRAY_TASK_ID=5 bash " .. h.sh_quote(script))
    assert.are.equal(2, c5)
    assert.truthy(e5:find("no line 5", 1, true), e5)
    -- the tasks, as Slurm runs them, from another folder
    for i = 1, 4 do
      local _, ei, ci = h.run(("cd / && SLURM_ARRAY_TASK_ID=%d bash %s"):format(i, h.sh_quote(script)))
      assert.are.equal(0, ci, ei)
    end
    local so2, se2, code2 = h.run(compare)
    assert.are.equal(0, code2, so2 .. se2)
    assert.is_nil(se2:find("\ndone ", 1, true), se2)
    assert.truthy(h.read(out .. "/summary.md"):find("| rope | 2 |", 1, true))
    -- nothing left: no script is written
    local so3, se3, code3 = h.run(compare .. " --print-sbatch")
    assert.are.same({ 0, "" }, { code3, so3 })
    assert.truthy(se3:find("0 of 4 runs in the job array (nothing to do, no script written)", 1,
      true), se3)
  end)

  it("sweep.lua writes one too", function()
    local out = tmp .. "/sw"
    local so, se, code = h.run(("%s scripts/sweep.lua --grid seed=1,2,3 --steps 1 --d-model 16 "
      .. "--heads 2 --layers 1 --seq-len 32 --batch 4 --problems 2 --valid-batches 1 --out %s "
      .. "--print-sbatch"):format(h.sh_quote(BIN), h.sh_quote(out)))
    assert.are.equal(0, code, se)
    assert.are.equal(out .. "/slurm/array.sbatch\n", so)
    assert.truthy(assert(h.read(out .. "/slurm/array.sbatch")):find("\n#SBATCH --array=1-3\n", 1, true))
  end)

  for _, c in ipairs {
    { "--cpus-per-task 0", "--cpus-per-task must be an integer in 1..4096, got 0" },
    { "--partition 'a b'", '--partition must be one word, got "a b"' },
    { "--sbatch=account", '--sbatch takes an sbatch option such as --account=proj, got "account"' },
  } do
    it("refuses " .. c[1], function()
      local _, se, code = h.run(("%s scripts/compare.lua %s --out %s --print-sbatch %s"):format(
        h.sh_quote(BIN), TINY, h.sh_quote(tmp .. "/bad"), c[1]))
      assert.are.equal(2, code)
      assert.are.equal("compare.lua: " .. c[2] .. "\n", se)
    end)
  end
end)

-- results/lm2_cpu_monitor.py, the language-model study's CPU log: started again after a session
-- ended (its processes and the monitor with them), it first appends the last figures of the
-- processes that no longer run (LOG.now) to the log, with LOG.now's time as their end, and
-- leaves out those that still run; --summary counts them as spent, a run finished when last seen
-- at its last step or when its run file is there. It watches only the training processes working
-- in its own checkout (its working directory), and refuses to start in a checkout where none
-- works while its worktree's do. Each monitor here runs in a folder of its own, so that the
-- machine's own study (in a worktree of this checkout) does not reach it.
local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local sh_quote = h.sh_quote

local MON = (dir_of:sub(1, 1) == "/" and "" or require("lfs").currentdir() .. "/") .. dir_of
  .. "../../results/lm2_cpu_monitor.py"  -- (absolute: the monitor runs in other folders)

describe("results/lm2_cpu_monitor.py", function()
  it("carries the last figures of processes cut short into the log when started again",
    function()
      local dir = h.tmpdir()
      local log = dir .. "/cpu.log"
      h.write(log, "results/lm2-s/runs/rope-s1.json\t150.2\t800\t2026-11-28T10:00:00Z\t11\n")
      -- two processes that no longer run (no such pids), and a malformed line
      h.write(log .. ".now", "results/lm2-l/runs/roper-s1.json\t529.6\t831\t\t999999991\n"
        .. "results/lm2-s/runs/rope-s13.json\t130.0\t789\t\t999999992\nnot a line\n")
      local _, err, code = h.run("touch -d '2026-11-28 16:40:47 UTC' " .. sh_quote(log .. ".now"))
      assert.are.equal(0, code, err)
      -- runs until timeout ends it: the carry-over comes first, the scan after it (in its
      -- folder, where nothing trains: the machine's own study runs elsewhere)
      local _, err2, code2 = h.run("cd " .. sh_quote(dir) .. " && timeout 2 " .. h.PY .. " "
        .. sh_quote(MON) .. " " .. sh_quote(log))
      assert.are.equal(124, code2, err2)
      local lines = {}
      for l in h.read(log):gmatch("[^\n]+") do lines[#lines + 1] = l end
      -- (a training process of another test that ended meanwhile may follow them)
      assert.are.same({
        "results/lm2-s/runs/rope-s1.json\t150.2\t800\t2026-11-28T10:00:00Z\t11",
        "results/lm2-l/runs/roper-s1.json\t529.6\t831\t2026-11-28T16:40:47Z\t999999991",
        "results/lm2-s/runs/rope-s13.json\t130.0\t789\t2026-11-28T16:40:47Z\t999999992",
      }, { lines[1], lines[2], lines[3] })
      -- LOG.now is rewritten with what runs now: started again, nothing is carried twice
      assert.is_nil((h.read(log .. ".now") or ""):find("99999999", 1, true))
      local _, err3, code3 = h.run("cd " .. sh_quote(dir) .. " && timeout 2 " .. h.PY .. " "
        .. sh_quote(MON) .. " " .. sh_quote(log))
      assert.are.equal(124, code3, err3)
      local n = select(2, h.read(log):gsub("99999999%d", ""))
      assert.are.equal(2, n)
      -- --summary counts the carried CPU (the small run not finished, at step 789)
      local out, err4, code4 = h.run(h.PY .. " " .. sh_quote(MON) .. " --summary "
        .. sh_quote(log))
      assert.are.equal(0, code4, err4)
      assert.truthy(out:find("| first | 1 | 0.04 | 0.05 | 0.15 |", 1, true), out)
      assert.truthy(out:find("| small | 0 | 0.00 | 0.00 | 0.04 |", 1, true), out)
      h.remove_tree(dir)
    end)

  it("leaves out a process of LOG.now that still runs", function()
    local dir = h.tmpdir()
    local log = dir .. "/cpu.log"
    -- a stand-in training process: its command line names scripts/train.lua and --out
    local pid_text = h.run("cd " .. sh_quote(dir) .. " && sh -c 'sleep 10; :' scripts/train.lua "
      .. "--out results/lm2-s/runs/x-s1.json > /dev/null 2>&1 & echo $!")
    local pid = assert(pid_text:match("^(%d+)\n$"), pid_text)
    h.write(log .. ".now", "results/lm2-s/runs/x-s1.json\t1.0\t\t\t" .. pid .. "\n"
      .. "results/lm2-s/runs/y-s1.json\t2.0\t5\t\t999999993\n")
    local _, err, code = h.run("cd " .. sh_quote(dir) .. " && timeout 2 " .. h.PY .. " "
      .. sh_quote(MON) .. " " .. sh_quote(log))
    os.execute("kill " .. pid .. " 2>/dev/null")
    assert.are.equal(124, code, err)
    local text = h.read(log) or ""
    assert.truthy(text:find("results/lm2-s/runs/y-s1.json\t2.0\t5\t", 1, true), text)
    assert.is_nil(text:find("x-s1.json", 1, true), text)
    h.remove_tree(dir)
  end)

  it("--summary counts a run as finished at its last step or when its run file is there",
    function()
      local dir = h.tmpdir()
      os.execute("mkdir -p " .. sh_quote(dir .. "/results/lm2-s/runs"))
      local log = dir .. "/results/lm2-cpu.tsv"
      -- a small run of the small step last seen at step 799 of 800 (the scan before its end)
      h.write(log, "run\tcpu_seconds\tlast_step\tended_utc\tpid\n"
        .. "results/lm2-s/runs/none-s15.json\t180.0\t799\t2026-11-28T21:07:10Z\t12\n")
      local function small_row()
        local out, err, code = h.run(h.PY .. " " .. sh_quote(MON) .. " --summary " .. sh_quote(log))
        assert.are.equal(0, code, err)
        return out:match("\n(| small |[^\n]*)"), out
      end
      local row, out = small_row()
      assert.are.equal("| small | 0 | 0.00 | 0.00 | 0.05 |", row, out)
      h.write(dir .. "/results/lm2-s/runs/none-s15.json", "{}")
      row, out = small_row()
      assert.are.equal("| small | 1 | 0.05 | 0.05 | 0.00 |", row, out)
      h.remove_tree(dir)
    end)

  it("--summary names a finished run whose last process the log lacks, and leaves it out",
    function()
      local dir = h.tmpdir()
      os.execute("mkdir -p " .. sh_quote(dir .. "/results/lm2-s/runs"))
      local log = dir .. "/results/lm2-cpu.tsv"
      -- two small runs cut short at a session's end (the carry-over's lines, 21:00:00), each
      -- resumed by a process that began at 21:05:00: seed 16's was logged (last seen at step
      -- 799, so finished by its run file), seed 17's was not
      h.write(log, "run\tcpu_seconds\tlast_step\tended_utc\tpid\n"
        .. "results/lm2-s/runs/rope-s16.json\t40.0\t300\t2026-11-28T21:00:00Z\t12\n"
        .. "results/lm2-s/runs/rope-s17.json\t41.0\t310\t2026-11-28T21:00:00Z\t13\n"
        .. "results/lm2-s/runs/rope-s16.json\t140.0\t799\t2026-11-28T21:08:00Z\t14\n")
      for _, seed in ipairs { 16, 17 } do
        h.write(("%s/results/lm2-s/runs/rope-s%d.json"):format(dir, seed),
          '{"provenance": {"date": "2026-11-28T21:05:00Z"}}')
      end
      local out, err, code = h.run(h.PY .. " " .. sh_quote(MON) .. " --summary " .. sh_quote(log))
      assert.are.equal(0, code, err)
      assert.truthy(out:find("\n| small | 1 | 0.05 | 0.05 | 0.00 |\n", 1, true), out)
      assert.truthy(out:find("\nFinished, but the log lacks their last process (left out of the "
        .. "table above): results/lm2-s/runs/rope-s17.json (41.0 CPU-s logged, last seen at step "
        .. "310).\n", 1, true), out)
      h.remove_tree(dir)
    end)

  it("--summary takes each size's steps and CPU budget from the plan beside it", function()
    local dir = h.tmpdir()
    os.execute("mkdir -p " .. sh_quote(dir .. "/results"))
    os.execute("cp " .. sh_quote(MON) .. " " .. sh_quote(dir .. "/results/"))
    -- a plan whose small runs train 799 steps at 360 CPU-s each, and a log whose small run was
    -- last seen at step 799 (no run file): finished by that plan, its budget 0.10 CPU-hours
    h.write(dir .. "/results/lm2_plan.tsv", "# the plan\n"
      .. "size\tfolder\tmethods\tseeds\tsteps\trun_cpu_seconds\n"
      .. "small\tlm2-s\trope roper none\t24\t799\t360\n")
    local log = dir .. "/results/lm2-cpu.tsv"
    h.write(log, "run\tcpu_seconds\tlast_step\tended_utc\tpid\n"
      .. "results/lm2-s/runs/none-s15.json\t180.0\t799\t2026-11-28T21:07:10Z\t12\n"
      .. "results/lm2-m/runs/rope-s3.json\t720.0\t2200\t2026-11-28T21:59:51Z\t13\n")
    local out, err, code = h.run(h.PY .. " " .. sh_quote(dir .. "/results/lm2_cpu_monitor.py")
      .. " --summary " .. sh_quote(log))
    assert.are.equal(0, code, err)
    -- its steps are first and small only; the medium run is outside them
    assert.are.equal("| step | runs finished | CPU-hours spent on them | the plan's CPU-hours "
      .. "for them | CPU-hours on runs not finished |\n|---|---|---|---|---|\n"
      .. "| first | 0 | 0.00 | 0.00 | 0.00 |\n| small | 1 | 0.05 | 0.10 | 0.00 |\n"
      .. "| all | 1 | 0.05 | 0.10 | 0.00 |\n\nlm2-m (outside the steps above: a record kept "
      .. "outside the tables, or a secondary step, long or medium-lr): 0.20 CPU-hours.\n", out)
    h.remove_tree(dir)
  end)

  it("watches the training processes of its own checkout only", function()
    local dir = h.tmpdir()
    local log = dir .. "/cpu.log"
    -- two stand-ins with the same kind of command line: one working here (where the monitor
    -- starts), one in another folder (a test's or another clone's)
    local stand_in = "sh -c 'sleep 10; :' scripts/train.lua --out results/lm2-s/runs/%s-s1.json"
      .. " > /dev/null 2>&1 & echo $!"
    os.execute("mkdir " .. sh_quote(dir .. "/here") .. " " .. sh_quote(dir .. "/there"))
    local here = h.run("cd " .. sh_quote(dir .. "/here") .. " && " .. stand_in:format("here"))
    local there = h.run("cd " .. sh_quote(dir .. "/there") .. " && " .. stand_in:format("there"))
    local _, err, code = h.run("cd " .. sh_quote(dir .. "/here") .. " && timeout 2 " .. h.PY
      .. " " .. sh_quote(MON) .. " " .. sh_quote(log))
    os.execute("kill " .. here:match("%d+") .. " " .. there:match("%d+") .. " 2>/dev/null")
    assert.are.equal(124, code, err)
    -- LOG.now holds what the monitor saw running
    local now = h.read(log .. ".now") or ""
    assert.truthy(now:find("results/lm2-s/runs/here-s1.json\t", 1, true), now)
    assert.is_nil(now:find("there-s1.json", 1, true), now)
    h.remove_tree(dir)
  end)

  it("ends in a checkout where nothing trains while its worktree's runs do, at once or later",
    function()
    local dir = h.tmpdir()
    local real = assert(h.run("cd " .. sh_quote(dir) .. " && pwd -P"):match("[^\n]+"))
    os.execute("mkdir " .. sh_quote(dir .. "/main") .. " " .. sh_quote(dir .. "/other"))
    h.write(dir .. "/main/README", "a stand-in checkout\n")
    h.git_commit_all(dir .. "/main")
    local _, werr, wcode = h.run("cd " .. sh_quote(dir .. "/main") .. " && env -u GIT_DIR -u "
      .. "GIT_WORK_TREE git worktree add -q --detach ../wt")
    assert.are.equal(0, wcode, werr)
    local stand_in = "sh -c 'sleep 10; :' scripts/train.lua --out results/lm2-l/runs/rope-s7.json"
      .. " > /dev/null 2>&1 & echo $!"
    local pids = {}
    for _, d in ipairs { "wt", "other" } do  -- the worktree's run, and an unrelated folder's
      pids[#pids + 1] = h.run("cd " .. sh_quote(dir .. "/" .. d) .. " && " .. stand_in):match("%d+")
    end
    local function monitor(d)
      return h.run("cd " .. sh_quote(dir .. "/" .. d) .. " && timeout 2 " .. h.PY .. " "
        .. sh_quote(MON) .. " " .. sh_quote(dir .. "/cpu.log"))
    end
    local _, err, code = monitor("main")
    local _, err2, code2 = monitor("other")  -- where a run trains: it starts
    local _, err3, code3 = monitor("wt")
    os.execute("kill " .. table.concat(pids, " ") .. " 2>/dev/null")
    assert.are.equal(1, code, err)
    assert.are.equal("lm2_cpu_monitor: the study's runs train in " .. real .. "/wt, none in "
      .. real .. "/main: start the monitor with their checkout as its working directory\n", err)
    assert.are.equal(124, code2, err2)
    assert.are.equal(124, code3, err3)
    -- started before the worktree's run (as after a session's end), it ends at its next scan
    -- (20 s) once that run trains
    -- (killed by its pid, never by a pattern, which would match the machine's own study)
    local late = "(sleep 2; cd " .. sh_quote(dir .. "/wt") .. " && exec sh -c 'sleep 40; :' "
      .. "scripts/train.lua --out results/lm2-l/runs/rope-s9.json) > /dev/null 2>&1 & echo $! > "
      .. sh_quote(dir .. "/late.pid") .. ";"
    local _, err4, code4 = h.run(late .. " cd " .. sh_quote(dir .. "/main") .. " && timeout 35 "
      .. h.PY .. " " .. sh_quote(MON) .. " " .. sh_quote(dir .. "/cpu.log"))
    os.execute("kill " .. assert(h.read(dir .. "/late.pid")):match("%d+") .. " 2>/dev/null")
    assert.are.equal(1, code4, err4)
    assert.truthy(err4:find(real .. "/wt, none in " .. real .. "/main", 1, true), err4)
    h.remove_tree(dir)
  end)
end)

-- results/lm2_collect.sh: the language-model study's finished runs are copied from the runner's
-- worktree into the checkout that holds the script (run files new or changed, not the runner's
-- configs or checkpoints; summaries only when the size's runs are whole, by the plan in
-- results/lm2_plan.tsv, and they cover at least as many runs), and the CPU monitor's new lines of
-- the study's runs are appended to results/lm2-cpu.tsv once.
local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local q = h.sh_quote

local SCRIPT = dir_of .. "../../results/lm2_collect.sh"
local PLAN = dir_of .. "../../results/lm2_plan.tsv"
local PLAN_SH = dir_of .. "../../results/lm2_plan.sh"

-- a checkout holding a copy of the script and the plan, and a worktree holding a runner and the
-- files given
local function setup(files)
  local root = h.tmpdir()
  local main, work = root .. "/main", root .. "/work"
  assert(os.execute("mkdir -p " .. q(main .. "/results") .. " " .. q(work .. "/results")))
  assert(os.execute("cp " .. q(SCRIPT) .. " " .. q(PLAN) .. " " .. q(PLAN_SH) .. " "
    .. q(main .. "/results/")))
  h.write(work .. "/results/run_lm2.sh", "#!/bin/sh\n")
  for path, text in pairs(files) do
    assert(os.execute("mkdir -p " .. q((work .. "/" .. path):match("^(.*)/"))))
    h.write(work .. "/" .. path, text)
  end
  return root, main, work
end

local function collect(main, ...)
  local args = {}
  for i, a in ipairs { ... } do args[i] = q(a) end
  return h.run("bash " .. q(main .. "/results/lm2_collect.sh") .. " " .. table.concat(args, " "))
end

-- the finished run files of a whole large size (rope and roper, seeds 1-14) but the one named
local function large_but(missing)
  local files = {}
  for seed = 1, 14 do
    for _, m in ipairs { "rope", "roper" } do
      local name = ("%s-s%d.json"):format(m, seed)
      if name ~= missing then files["results/lm2-l/runs/" .. name] = "{}\n" end
    end
  end
  return files
end

describe("results/lm2_collect.sh", function()
  it("copies finished runs and summaries, not configs or checkpoints", function()
    local files = large_but("roper-s14.json")
    files["results/lm2-l/runs/rope-s1.csv"] = "step,loss\n1,2\n"
    files["results/lm2-l/runs/rope-s1.lengths.csv"] = "len\n256\n"
    files["results/lm2-l/runs/roper-s14.cfg.json"] = "{}\n"
    files["results/lm2-l/runs/roper-s14.part.ckpt"] = "x"
    files["results/lm2-l/runs/roper-s14.part.ckpt.run.json"] = "{}\n"
    files["results/lm2-l/runs/roper-s14.progress"] = "5 7100\n"
    files["results/lm2-l/summary.csv"] = "h\n1\n"
    -- (compare.lua's shape: the runs' dates under provenance.runs, the summary's own under
    -- provenance.summary, one key a line)
    local summary_json = '{\n  "provenance":{\n    "runs":{\n      "date":{\n        "first":"%s"\n'
      .. '      }\n    },\n    "summary":{\n      "date":"%s"\n    }\n  }\n}\n'
    files["results/lm2-l/summary.json"] = summary_json:format("a", "2026-11-29T05:52:31Z")
    files["results/lm2-l/loss.png"] = "png"
    local root, main, work = setup(files)
    finally(function() h.remove_tree(root) end)
    -- 27 of the 28 runs: the runs are copied, the summary and plots held back
    local out, err, code = collect(main, work)
    assert.are.equal(0, code, err)
    local runs = h.ls(main .. "/results/lm2-l/runs")
    assert.are.equal(29, #runs)
    for _, name in ipairs(runs) do
      assert.falsy(name:find("cfg", 1, true) or name:find("part", 1, true)
        or name:find("progress", 1, true), name)
    end
    assert.are.same({ "runs" }, h.ls(main .. "/results/lm2-l"))
    assert.truthy(out:find("collected results/lm2-l/runs/rope-s1.json\n", 1, true), out)
    local held = "\nheld back results/lm2-l's summary and plots: 27 of 28 runs finished\n"
    assert.are.equal(held, out:sub(-#held))
    -- the last run finishes: the size is whole, its summary and plots come too
    h.write(work .. "/results/lm2-l/runs/roper-s14.json", "{}\n")
    out, err, code = collect(main, work)
    assert.are.equal(0, code, err)
    assert.are.equal("collected results/lm2-l/runs/roper-s14.json\n"
      .. "collected results/lm2-l/summary.csv\ncollected results/lm2-l/summary.json\n"
      .. "collected results/lm2-l/loss.png\n", out)
    assert.are.same({ "loss.png", "runs", "summary.csv", "summary.json" },
      h.ls(main .. "/results/lm2-l"))
    -- again, with the summary drawn again at another date: nothing new, nothing printed
    h.write(work .. "/results/lm2-l/summary.json", summary_json:format("a", "2026-11-29T08:39:13Z"))
    local out2, err2, code2 = collect(main, work)
    assert.are.equal(0, code2, err2)
    assert.are.equal("", out2)
    -- a summary.json with more than its date new is copied
    h.write(work .. "/results/lm2-l/summary.json", summary_json:format("b", "2026-11-29T08:39:13Z"))
    out2, err2, code2 = collect(main, work)
    assert.are.equal(0, code2, err2)
    assert.are.equal("collected results/lm2-l/summary.json\n", out2)
    -- a changed run file is copied; a summary covering fewer runs than this checkout's is not
    h.write(work .. "/results/lm2-l/runs/rope-s1.json", "{\"a\":2}\n")
    h.write(main .. "/results/lm2-l/summary.csv", "h\n1\n2\n")
    h.write(work .. "/results/lm2-l/loss.png", "png2")
    local out3, err3, code3 = collect(main, work)
    assert.are.equal(0, code3, err3)
    assert.are.equal("collected results/lm2-l/runs/rope-s1.json\n", out3)
    assert.are.equal("{\"a\":2}\n", h.read(main .. "/results/lm2-l/runs/rope-s1.json"))
    assert.are.equal("png", h.read(main .. "/results/lm2-l/loss.png"))
  end)

  it("copies the secondary steps' finished runs, never their summaries, and no other folder",
    function()
    local root, main, work = setup {
      ["results/lm2-m-lr3e-3/runs/rope-s1.json"] = "{}\n",
      ["results/lm2-m-lr3e-3/runs/rope-s1.csv"] = "step,loss\n",
      ["results/lm2-m-lr3e-3/runs/roper-s1.cfg.json"] = "{}\n",
      ["results/lm2-m-lr3e-3/runs/roper-s1.part.ckpt"] = "x",
      ["results/lm2-m-lr3e-3/summary.md"] = "roper - rope\n",
      ["results/lm2-m-lr3e-3/summary.csv"] = "h\n1\n",
      ["results/lm2-s-long/summary.md"] = "no runs yet\n",
      ["results/lm2-pilot-lr1e-2/runs/rope-s1.json"] = "{}\n" }
    finally(function() h.remove_tree(root) end)
    local out, err, code = collect(main, work)
    assert.are.equal(0, code, err)
    assert.are.equal("collected results/lm2-m-lr3e-3/runs/rope-s1.json\n"
      .. "collected results/lm2-m-lr3e-3/runs/rope-s1.csv\n", out)
    assert.are.same({ "runs" }, h.ls(main .. "/results/lm2-m-lr3e-3"))
    assert.are.same({ "rope-s1.csv", "rope-s1.json" }, h.ls(main .. "/results/lm2-m-lr3e-3/runs"))
    assert.falsy(h.read(main .. "/results/lm2-s-long/summary.md"))
    assert.falsy(h.read(main .. "/results/lm2-pilot-lr1e-2/runs/rope-s1.json"))
    local out2, err2, code2 = collect(main, work)
    assert.are.equal(0, code2, err2)
    assert.are.equal("", out2)
    end)

  it("counts a size whole by the plan's runs, and refuses a plan it cannot read", function()
    local root, main, work = setup {
      ["results/lm2-m/runs/rope-s1.json"] = "{}\n", ["results/lm2-m/summary.csv"] = "h\n1\n" }
    finally(function() h.remove_tree(root) end)
    local plan = main .. "/results/lm2_plan.tsv"
    -- the committed plan: the medium size is rope and roper, seeds 1-24
    local out, err, code = collect(main, work)
    assert.are.equal(0, code, err)
    assert.are.equal("collected results/lm2-m/runs/rope-s1.json\n"
      .. "held back results/lm2-m's summary and plots: 1 of 48 runs finished\n", out)
    -- a plan of rope and roper at seed 1: a run outside it (rope's seed 2) does not count
    h.write(plan, "# a comment\nsize\tfolder\tmethods\tseeds\tsteps\trun_cpu_seconds\n"
      .. "medium\tlm2-m\trope roper\t1\t2200\t726\n")
    h.write(work .. "/results/lm2-m/runs/rope-s2.json", "{}\n")
    out, err, code = collect(main, work)
    assert.are.equal(0, code, err)
    assert.are.equal("collected results/lm2-m/runs/rope-s2.json\n"
      .. "held back results/lm2-m's summary and plots: 1 of 2 runs finished\n", out)
    h.write(work .. "/results/lm2-m/runs/roper-s1.json", "{}\n")
    out, err, code = collect(main, work)
    assert.are.equal(0, code, err)
    assert.are.equal("collected results/lm2-m/runs/roper-s1.json\n"
      .. "collected results/lm2-m/summary.csv\n", out)
    -- a plan it cannot read: the reason in one line (lm2_plan_spec checks the reader's rules)
    h.write(plan, "size\tfolder\tmethods\tseeds\tsteps\trun_cpu_seconds\n"
      .. "medium\tlm2-m\trope\tmany\t2200\t726\n")
    out, err, code = collect(main, work)
    assert.are.equal(2, code, err)
    assert.are.equal("lm2_collect.sh: cannot read the plan: " .. plan .. ": line 2: seeds \"many\" "
      .. "is not a count > 0\n", err)
    assert.are.equal("", out)
    os.remove(plan)
    out, err, code = collect(main, work)
    assert.are.equal(2, code, err)
    assert.are.equal("lm2_collect.sh: cannot read the plan: " .. plan .. ": cannot read it\n", err)
    assert.are.equal("", out)
  end)

  it("appends the study's new log lines once, and no other's", function()
    local root, main, work = setup {}
    finally(function() h.remove_tree(root) end)
    local tsv = main .. "/results/lm2-cpu.tsv"
    h.write(tsv, "run\tcpu_seconds\tlast_step\tended_utc\tpid\n"
      .. "results/lm2-s/runs/rope-s1.json\t168.2\t800\t2026-11-28T12:06:09Z\t7514\n")
    local log = root .. "/cpu.log"
    h.write(log, "results/lm2-s/runs/rope-s1.json\t168.2\t800\t2026-11-28T12:06:09Z\t7514\n"
      .. "results/lm2-m/runs/rope-s3.json\t678.0\t2200\t2026-11-28T21:59:51Z\t8001\n"
      .. "results/zoo/runs/rope-s1.json\t1.0\t10\t2026-11-28T21:00:00Z\t8002\n"
      .. "results/lm2-m/runs/roper-s3.json\t655.5\t2200\t2026-11-28T22:11:11Z\t8003")
    local out, err, code = collect(main, work, log)
    assert.are.equal(0, code, err)
    assert.are.equal("run\tcpu_seconds\tlast_step\tended_utc\tpid\n"
      .. "results/lm2-s/runs/rope-s1.json\t168.2\t800\t2026-11-28T12:06:09Z\t7514\n"
      .. "results/lm2-m/runs/rope-s3.json\t678.0\t2200\t2026-11-28T21:59:51Z\t8001\n"
      .. "results/lm2-m/runs/roper-s3.json\t655.5\t2200\t2026-11-28T22:11:11Z\t8003\n",
      h.read(tsv))
    assert.are.equal("logged results/lm2-m/runs/rope-s3.json\t678.0\t2200\t2026-11-28T21:59:51Z"
      .. "\t8001\nlogged results/lm2-m/runs/roper-s3.json\t655.5\t2200\t2026-11-28T22:11:11Z"
      .. "\t8003\n", out)
    local out2, err2, code2 = collect(main, work, log)
    assert.are.equal(0, code2, err2)
    assert.are.equal("", out2)
  end)

  it("refuses bad arguments with exit status 2 and one line", function()
    local root, main, work = setup {}
    finally(function() h.remove_tree(root) end)
    local cases = {
      { {}, "lm2_collect.sh: usage: results/lm2_collect.sh WORKTREE [LOG]\n" },
      { { root .. "/nowhere" }, "lm2_collect.sh: " .. root .. "/nowhere is not a checkout with "
        .. "results/run_lm2.sh\n" },
      { { work, root .. "/no.log" }, "lm2_collect.sh: cannot read the log " .. root
        .. "/no.log\n" },
    }
    for _, c in ipairs(cases) do
      local out, err, code = collect(main, table.unpack(c[1]))
      assert.are.equal(2, code, err)
      assert.are.equal(c[2], err)
      assert.are.equal("", out)
    end
    h.write(main .. "/results/run_lm2.sh", "#!/bin/sh\n")
    local _, err, code = collect(main, main)
    assert.are.equal(2, code)
    assert.are.equal("lm2_collect.sh: " .. main .. " is this checkout; name the runner's "
      .. "worktree\n", err)
  end)
end)

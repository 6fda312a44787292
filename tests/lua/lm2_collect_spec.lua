-- results/lm2_collect.sh: the language-model study's finished runs are copied from the runner's
-- worktree into the checkout that holds the script (run files new or changed, not the runner's
-- configs or checkpoints; summaries only when they cover at least as many runs), and the CPU
-- monitor's new lines of the study's runs are appended to results/lm2-cpu.tsv once.
local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local q = h.sh_quote

local SCRIPT = dir_of .. "../../results/lm2_collect.sh"

-- a checkout holding a copy of the script, and a worktree holding a runner and the files given
local function setup(files)
  local root = h.tmpdir()
  local main, work = root .. "/main", root .. "/work"
  assert(os.execute("mkdir -p " .. q(main .. "/results") .. " " .. q(work .. "/results")))
  assert(os.execute("cp " .. q(SCRIPT) .. " " .. q(main .. "/results/")))
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

describe("results/lm2_collect.sh", function()
  it("copies finished runs and summaries, not configs or checkpoints", function()
    local root, main, work = setup {
      ["results/lm2-m/runs/rope-s1.json"] = "{\"a\":1}\n",
      ["results/lm2-m/runs/rope-s1.csv"] = "step,loss\n1,2\n",
      ["results/lm2-m/runs/rope-s1.lengths.csv"] = "len\n256\n",
      ["results/lm2-m/runs/rope-s2.cfg.json"] = "{}\n",
      ["results/lm2-m/runs/rope-s2.part.ckpt"] = "x",
      ["results/lm2-m/runs/rope-s2.part.ckpt.run.json"] = "{}\n",
      ["results/lm2-m/runs/rope-s2.progress"] = "5 2200\n",
      ["results/lm2-m/summary.csv"] = "h\n1\n",
      ["results/lm2-m/loss.png"] = "png",
    }
    local out, err, code = collect(main, work)
    assert.are.equal(0, code, err)
    assert.are.same({ "rope-s1.csv", "rope-s1.json", "rope-s1.lengths.csv" },
      h.ls(main .. "/results/lm2-m/runs"))
    assert.are.equal("{\"a\":1}\n", h.read(main .. "/results/lm2-m/runs/rope-s1.json"))
    assert.are.same({ "loss.png", "runs", "summary.csv" }, h.ls(main .. "/results/lm2-m"))
    assert.truthy(out:find("collected results/lm2-m/runs/rope-s1.json\n", 1, true), out)
    -- again: nothing new, nothing printed
    local out2, err2, code2 = collect(main, work)
    assert.are.equal(0, code2, err2)
    assert.are.equal("", out2)
    -- a changed run file is copied; a summary covering fewer runs than this checkout's is not
    h.write(work .. "/results/lm2-m/runs/rope-s1.json", "{\"a\":2}\n")
    h.write(main .. "/results/lm2-m/summary.csv", "h\n1\n2\n")
    h.write(work .. "/results/lm2-m/loss.png", "png2")
    local out3, err3, code3 = collect(main, work)
    assert.are.equal(0, code3, err3)
    assert.are.equal("collected results/lm2-m/runs/rope-s1.json\n", out3)
    assert.are.equal("{\"a\":2}\n", h.read(main .. "/results/lm2-m/runs/rope-s1.json"))
    assert.are.equal("png", h.read(main .. "/results/lm2-m/loss.png"))
    h.remove_tree(root)
  end)

  it("appends the study's new log lines once, and no other's", function()
    local root, main, work = setup {}
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
    h.remove_tree(root)
  end)

  it("refuses bad arguments with exit status 2 and one line", function()
    local root, main, work = setup {}
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
    h.remove_tree(root)
  end)
end)

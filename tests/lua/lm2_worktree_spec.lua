-- results/lm2_worktree.sh: the language-model study's worktree made on a fresh machine, at the
-- one commit the plan's committed run files record, built before the study's files and folders
-- are copied in; refusals with one line saying why.
local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local lfs = require "lfs"
local q = h.sh_quote

local RESULTS = dir_of .. "../../results/"

-- a stand-in checkout: a git repository with the script, the plan and its reader, the runner's
-- files and a Makefile whose targets (the build, corpus) only leave a mark; returns its folder and
-- its commit
local function checkout(makefile)
  local main = h.tmpdir() .. "/main"
  assert(os.execute("mkdir -p " .. q(main .. "/results/lm2-l/runs")))
  for _, f in ipairs { "lm2_worktree.sh", "lm2_plan.tsv", "lm2_plan.sh" } do
    assert(os.execute("cp " .. q(RESULTS .. f) .. " " .. q(main .. "/results/")))
  end
  for _, f in ipairs { "run_lm2.sh", "own_group.sh", "build_check.sh" } do
    h.write(main .. "/results/" .. f, "# the commit's " .. f .. "\n")
  end
  h.write(main .. "/results/lm2-l/runs/old.json", "{}\n")
  h.write(main .. "/Makefile", makefile or ("all:\n\t@echo built $(PORTABLE) > built\n"
    .. "\t@cp results/run_lm2.sh built_saw\ncorpus:\n\t@touch corpus\n"))
  return main, h.git_commit_all(main)
end

local function run(main, env, folder)
  return h.run((env or "") .. " bash " .. q(main .. "/results/lm2_worktree.sh") .. " "
    .. q(folder))
end

local function run_file(commit)
  return ('{"provenance":{"commit":"%s","threads":1},"steps":10}\n'):format(commit)
end

describe("results/lm2_worktree.sh", function()
  it("makes the worktree at the run files' commit, builds it, then copies the study in",
    function()
      local main, commit = checkout()
      -- this checkout's study files (newer than the commit's) and finished runs
      h.write(main .. "/results/run_lm2.sh", "# the runner of now\n")
      os.remove(main .. "/results/lm2-l/runs/old.json")
      h.write(main .. "/results/lm2-l/runs/rope-s1.json", run_file(commit))
      h.write(main .. "/results/lm2-l/runs/rope-s1.cfg.json", run_file("0000000"))
      assert(os.execute("mkdir -p " .. q(main .. "/results/lm2-m-lr3e-3/runs")))
      h.write(main .. "/results/lm2-m-lr3e-3/runs/rope-s1.json", run_file(commit))
      local work = main .. "/../work"
      local out, err, code = run(main, nil, work)
      assert.equal(0, code, err)
      assert.truthy(out:find("the worktree of " .. commit .. " is ", 1, true), out)
      local head = h.run("git -C " .. q(work) .. " rev-parse --short HEAD")
      assert.equal(commit, head:match("%x+"))
      assert.equal("built 1\n", h.read(work .. "/built"))
      assert.truthy(h.read(work .. "/corpus"))
      assert.equal("# the runner of now\n", h.read(work .. "/results/run_lm2.sh"))
      assert.equal(run_file(commit), h.read(work .. "/results/lm2-l/runs/rope-s1.json"))
      assert.equal(run_file(commit), h.read(work .. "/results/lm2-m-lr3e-3/runs/rope-s1.json"))
      assert.is_nil(h.read(work .. "/results/lm2-l/runs/old.json")) -- the folder replaced
      -- the build came before the copies (it saw the commit's runner), and no temporary name is
      -- left
      assert.equal("# the commit's run_lm2.sh\n", h.read(work .. "/built_saw"))
      local left = h.run("find " .. q(work .. "/results") .. " -name '*.tmp.*'")
      assert.equal("", left)
    end)

  it("takes a relative folder from where it is started, and takes a failed build away", function()
    local main, commit = checkout()
    h.write(main .. "/results/lm2-l/runs/rope-s1.json", run_file(commit))
    local base = main:match("^(.*)/main$")
    local out, err, code = h.run("cd " .. q(base) .. " && bash main/results/lm2_worktree.sh rel")
    assert.equal(0, code, err)
    assert.truthy(out:find("is " .. base .. "/rel;", 1, true), out)
    assert.equal("built 1\n", h.read(base .. "/rel/built"))
    assert.is_nil(h.read(main .. "/rel/built"))
    -- a corpus that cannot be made: the worktree goes, and the next try starts anew
    local bad, bcommit = checkout("all:\n\t@true\ncorpus:\n\t@exit 1\n")
    h.write(bad .. "/results/lm2-l/runs/rope-s1.json", run_file(bcommit))
    local wt = bad .. "/../wt"
    _, err, code = run(bad, nil, wt)
    assert.equal(2, code)
    assert.truthy(err:find("lm2_worktree.sh: make corpus failed in " .. wt .. " (above); the "
      .. "worktree is removed\n", 1, true), err)
    assert.is_nil(lfs.attributes(wt))
    local list = h.run("git -C " .. q(bad) .. " worktree list")
    assert.equal(1, select(2, list:gsub("\n", "")), list) -- the checkout's own only
  end)

  it("prints what it would run with LM2_DRY=1", function()
    local main, commit = checkout()
    h.write(main .. "/results/lm2-l/runs/roper-s2.json", run_file(commit))
    os.remove(main .. "/results/lm2-l/runs/old.json")
    local out, err, code = run(main, "LM2_DRY=1", "/nonexistent/wt")
    assert.equal(0, code, err)
    local lines = {}
    for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.equal("git -C " .. main .. " worktree add --detach /nonexistent/wt " .. commit,
      lines[1])
    assert.equal("make -C /nonexistent/wt PORTABLE=1", lines[2])
    assert.equal("make -C /nonexistent/wt corpus", lines[3])
  end)

  it("refuses a folder that exists, other arguments, and run files of no or several commits",
    function()
      local main, commit = checkout()
      local _, err, code = run(main, nil, main)
      assert.equal(2, code)
      assert.equal("lm2_worktree.sh: " .. main .. " exists: start its runner again there "
        .. "(docs/results.md, \"How to run it\"), or name a new folder\n", err)
      _, err, code = h.run("bash " .. q(main .. "/results/lm2_worktree.sh"))
      assert.equal(2, code)
      assert.equal("lm2_worktree.sh: usage: results/lm2_worktree.sh FOLDER\n", err)
      _, err, code = run(main, nil, main .. "/../w0")
      assert.equal(2, code)
      assert.equal("lm2_worktree.sh: no run file of the plan's folders records a commit: no "
        .. "pinned commit to make the worktree of\n", err)
      h.write(main .. "/results/lm2-l/runs/rope-s1.json", run_file(commit))
      h.write(main .. "/results/lm2-l/runs/rope-s2.json", run_file("abcdef0"))
      _, err, code = run(main, nil, main .. "/../w1")
      assert.equal(2, code)
      local two = { commit, "abcdef0" }
      table.sort(two)
      assert.equal("lm2_worktree.sh: the plan's run files record 2 commits (" .. two[1] .. ", "
        .. two[2] .. "), not one: no pinned commit to make the worktree of\n", err)
      assert.is_nil(h.read(main .. "/../w1/Makefile")) -- nothing made
    end)
end)

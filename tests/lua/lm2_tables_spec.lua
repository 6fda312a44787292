-- results/lm2_tables.sh: the language-model study's tables are drawn only for a size whose runs
-- are whole by the plan (results/lm2_plan.tsv), the trend only when every size is; each file
-- holds its command (with the build's commit) and the command's whole output; nothing is written
-- on a refusal or a failed command. The interpreter is a stand-in that prints what it was asked.
local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local q = h.sh_quote

local RESULTS = dir_of .. "../../results/"

-- a checkout with the script, the plan's reader, a plan of two sizes (small: rope, roper and
-- none, 2 seeds; large: rope and roper, 1 seed) and a stand-in interpreter (COMMIT: what
-- rp.build_info().commit says; BROKEN: it fails at that; FAIL: exit 1 after printing)
local PLAN = "# a plan\nsize\tfolder\tmethods\tseeds\tsteps\trun_cpu_seconds\n"
  .. "small\tlm2-s\trope roper none\t2\t800\t185\nlarge\tlm2-l\trope roper\t1\t7100\t4780\n"
local STAND_IN = [[#!/bin/sh
if [ "$1" = -e ]; then [ -z "$BROKEN" ] || exit 1; echo "${COMMIT:-abc1234}"; exit 0; fi
echo "asked: $*"
[ -z "$FAIL" ] || exit 1
]]

local function setup()
  local root = h.tmpdir()
  assert(os.execute("mkdir -p " .. q(root .. "/results") .. " " .. q(root .. "/build") .. " "
    .. q(root .. "/scripts")))
  for _, f in ipairs { "lm2_tables.sh", "lm2_plan.sh", "build_check.sh" } do
    assert(os.execute("cp " .. q(RESULTS .. f) .. " " .. q(root .. "/results/")))
  end
  h.write(root .. "/results/lm2_plan.tsv", PLAN)
  h.write(root .. "/build/roper", STAND_IN)
  assert(os.execute("chmod +x " .. q(root .. "/build/roper")))
  return root
end

local function finish(root, folder, names)
  assert(os.execute("mkdir -p " .. q(root .. "/results/" .. folder .. "/runs")))
  for _, name in ipairs(names) do
    h.write(root .. "/results/" .. folder .. "/runs/" .. name, "{}")
  end
end

local function tables(root, env, ...)
  local args = {}
  for i, a in ipairs { ... } do args[i] = q(a) end
  return h.run("cd " .. q(root) .. " && " .. (env or "") .. " bash results/lm2_tables.sh "
    .. table.concat(args, " "))
end

local TODAY = os.date("!%Y-%m-%d")
-- the small size's six runs of the plan above
local SMALL_WHOLE = { "rope-s1.json", "rope-s2.json", "roper-s1.json", "roper-s2.json",
  "none-s1.json", "none-s2.json" }

describe("results/lm2_tables.sh", function()
  it("draws a size only when its runs are whole, with its command and build", function()
    local root = setup()
    finally(function() h.remove_tree(root) end)
    -- 5 of the small size's 6 runs (and another method's file, which does not count)
    finish(root, "lm2-s", { "rope-s1.json", "rope-s2.json", "roper-s1.json", "roper-s2.json",
      "none-s1.json", "alibi-s2.json", "none-s2.cfg.json" })
    local out, err, code = tables(root, nil, "small")
    assert.are.equal(2, code, err)
    assert.are.equal("lm2_tables.sh: the small size (results/lm2-s) has 5 of its 6 runs: the "
      .. "plan draws no table before a size is whole\n", err)
    assert.are.equal("", out)
    assert.are.same({ "runs" }, h.ls(root .. "/results/lm2-s"))
    -- the sixth: both files, each with its command and the command's output
    finish(root, "lm2-s", { "none-s2.json" })
    out, err, code = tables(root, nil, "small")
    assert.are.equal(0, code, err)
    assert.are.equal("wrote results/lm2-s/tables.md\nwrote results/lm2-s/convergence.md\n", out)
    -- readable by all, as a committed file is, and no temporary file left beside them
    assert.are.equal("644\n", h.run("stat -c %a " .. q(root .. "/results/lm2-s/tables.md")))
    assert.are.same({ "convergence.md", "runs", "tables.md" }, h.ls(root .. "/results/lm2-s"))
    local cmd = "build/roper scripts/pairs_report.lua results/lm2-s --lm --noninferiority "
      .. "roper/rope none/rope --margin 0.01 --gap-curve roper/rope"
    assert.are.equal("<!-- " .. cmd .. " (the build of abc1234, drawn " .. TODAY .. ") -->\n\n"
      .. "asked: " .. cmd:match("^build/roper (.*)$") .. "\n",
      h.read(root .. "/results/lm2-s/tables.md"))
    assert.are.equal("<!-- build/roper results/lm2_convergence.lua --margin 0.01 results/lm2-s "
      .. "(the build of abc1234, drawn " .. TODAY .. ") -->\n\nasked: results/lm2_convergence.lua "
      .. "--margin 0.01 results/lm2-s\n", h.read(root .. "/results/lm2-s/convergence.md"))
    -- the trend needs every size: the large one has none of its 2 runs
    out, err, code = tables(root, nil, "small", "trend")
    assert.are.equal(2, code, err)
    assert.are.equal("lm2_tables.sh: trend: the large size (results/lm2-l) has 0 of its 2 runs: "
      .. "the plan draws no table before a size is whole\n", err)
    assert.are.equal("", out)
    finish(root, "lm2-l", { "rope-s1.json", "roper-s1.json" })
    out, err, code = tables(root, nil, "trend")
    assert.are.equal(0, code, err)
    assert.are.equal("wrote results/lm2-trend.md\n", out)
    cmd = "scripts/pairs_report.lua results/lm2-s results/lm2-l --lm --noninferiority "
      .. "roper/rope none/rope --margin 0.01 --trend roper/rope --extrapolate 2e8"
    assert.are.equal("<!-- build/roper " .. cmd .. " (the build of abc1234, drawn " .. TODAY
      .. ") -->\n\nasked: " .. cmd .. "\n", h.read(root .. "/results/lm2-trend.md"))
    -- the large size has no none: its pairs are roper/rope only
    out, err, code = tables(root, nil, "large")
    assert.are.equal(0, code, err)
    assert.truthy(h.read(root .. "/results/lm2-l/tables.md"):find("asked: scripts/pairs_report.lua "
      .. "results/lm2-l --lm --noninferiority roper/rope --margin 0.01 --gap-curve roper/rope\n",
      1, true))
  end)

  it("in a git checkout, refuses scripts that are not the build's commit's", function()
    local root = setup()
    finally(function() h.remove_tree(root) end)
    finish(root, "lm2-s", SMALL_WHOLE)
    h.write(root .. "/scripts/pairs_report.lua", "-- the committed one\n")
    h.write(root .. "/results/lm2_convergence.lua", "-- the committed one\n")
    local head = h.git_commit_all(root)
    -- the build is of HEAD and the scripts are HEAD's: drawn
    local out, err, code = tables(root, "COMMIT=" .. head, "small")
    assert.are.equal(0, code, err)
    assert.truthy(h.read(root .. "/results/lm2-s/tables.md"):find("(the build of " .. head
      .. ", drawn ", 1, true))
    -- a script changed since: refused, the files drawn before left as they were
    local before = h.read(root .. "/results/lm2-s/tables.md")
    h.write(root .. "/scripts/pairs_report.lua", "-- changed\n")
    out, err, code = tables(root, "COMMIT=" .. head, "small")
    assert.are.equal(2, code, err)
    local again = "build again here (make, or make PORTABLE=1 for build-portable/roper)\n"
    local differ = "lm2_tables.sh: build/roper is a build of " .. head .. ", and this checkout's "
      .. "scripts or sources differ from that commit's: commit them, then " .. again
    assert.are.equal(differ, err)
    assert.are.equal("", out)
    assert.are.equal(before, h.read(root .. "/results/lm2-s/tables.md"))
    -- a new script not yet committed is a difference too
    h.write(root .. "/scripts/pairs_report.lua", "-- the committed one\n")
    h.write(root .. "/scripts/new.lua", "-- new\n")
    out, err, code = tables(root, "COMMIT=" .. head, "small")
    assert.are.equal(2, code, err)
    assert.are.equal(differ, err)
    os.remove(root .. "/scripts/new.lua")
    -- so is the convergence check's script, which lives in results/
    h.write(root .. "/results/lm2_convergence.lua", "-- changed\n")
    out, err, code = tables(root, "COMMIT=" .. head, "small")
    assert.are.equal(2, code, err)
    assert.are.equal(differ, err)
    h.write(root .. "/results/lm2_convergence.lua", "-- the committed one\n")
    -- a build of a commit this checkout does not have
    out, err, code = tables(root, "COMMIT=deadbee", "small")
    assert.are.equal(2, code, err)
    assert.are.equal("lm2_tables.sh: build/roper is a build of deadbee, which this checkout does "
      .. "not have: " .. again, err)
    assert.are.equal(before, h.read(root .. "/results/lm2-s/tables.md"))
  end)

  it("refuses with one line and writes nothing", function()
    local root = setup()
    finally(function() h.remove_tree(root) end)
    finish(root, "lm2-s", SMALL_WHOLE)
    local cases = {
      { {}, nil, "lm2_tables.sh: usage: results/lm2_tables.sh WHAT ... (a size: small large; or "
        .. "trend)\n" },
      { { "medium" }, nil, "lm2_tables.sh: unknown medium (a size: small large; or trend)\n" },
      { { "small" }, "COMMIT=abc1234-dirty", "lm2_tables.sh: build/roper is a build of "
        .. "'abc1234-dirty', not of a commit: commit, then build again here (make, or make "
        .. "PORTABLE=1 for build-portable/roper)\n" },
      { { "small" }, "BROKEN=1", "lm2_tables.sh: build/roper does not run: build again here "
        .. "(make, or make PORTABLE=1 for build-portable/roper)\n" },
      { { "small" }, "ROPER=build/none", "lm2_tables.sh: build/none: no such interpreter (make, "
        .. "or set ROPER)\n" },
      { { "small" }, "FAIL=1", "lm2_tables.sh: build/roper scripts/pairs_report.lua results/lm2-s "
        .. "--lm --noninferiority roper/rope none/rope --margin 0.01 --gap-curve roper/rope failed "
        .. "(nothing written to results/lm2-s/tables.md)\n" },
    }
    for _, c in ipairs(cases) do
      local out, err, code = tables(root, c[2], table.unpack(c[1]))
      assert.are.equal(2, code, err)
      assert.are.equal(c[3], err)
      assert.are.equal("", out)
      assert.are.same({ "runs" }, h.ls(root .. "/results/lm2-s"))
    end
    h.write(root .. "/results/lm2_plan.tsv", "size\tfolder\tmethods\tseeds\tsteps\t"
      .. "run_cpu_seconds\nsmall\tlm2-s\trope\tmany\t800\t185\n")
    local out, err, code = tables(root, nil, "small")
    assert.are.equal(2, code, err)
    assert.are.equal("lm2_tables.sh: cannot read the plan: results/lm2_plan.tsv: line 2: seeds "
      .. "\"many\" is not a count > 0\n", err)
    assert.are.equal("", out)
  end)
end)

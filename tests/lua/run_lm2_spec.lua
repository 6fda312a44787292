-- results/run_lm2.sh, the language-model study's runner, in a stand-in checkout whose portable
-- build prints the arguments it is given: reading the committed plan (results/lm2_plan.tsv) it
-- gives the compare.lua commands the runner gave before it read a plan (tests/fixtures/run_lm2/,
-- written by a276023's runner); another plan changes the seeds, folders and steps as it says;
-- a plan it cannot read, a finished run of another commit and a build that is not of the
-- checkout's sources stop it before any command, with one line and exit status 2.
local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local q = h.sh_quote

local RESULTS = dir_of .. "../../results/"
local FIXTURES = dir_of .. "../fixtures/run_lm2/"

-- the stand-in: its build_info commit (COMMIT, e0d6683 unless set), the study's ids folder for
-- rp.lm.ids, and every other call's arguments appended to calls.txt
local STAND_IN = [[#!/bin/sh
if [ "$1" = -e ]; then
  case "$2" in
    *build_info*) echo "${COMMIT:-e0d6683}" ;;
    *) echo data/linux-doc/ids/08cfe037dbd55829-fa49dcadab1113f5-p65536 ;;
  esac
  exit 0
fi
echo "$*" >> "$(dirname "$0")/../calls.txt"
]]

local function setup()
  local root = h.tmpdir()
  for _, d in ipairs { "/results", "/build-portable", "/data/linux-doc" } do
    assert(os.execute("mkdir -p " .. q(root .. d)))
  end
  for _, f in ipairs { "run_lm2.sh", "own_group.sh", "build_check.sh", "lm2_plan.tsv",
    "lm2_plan.sh" } do
    assert(os.execute("cp " .. q(RESULTS .. f) .. " " .. q(root .. "/results/")))
  end
  h.write(root .. "/data/linux-doc/manifest.json", "{}\n")
  h.write(root .. "/build-portable/roper", STAND_IN)
  assert(os.execute("chmod +x " .. q(root .. "/build-portable/roper")))
  return root
end

-- runs the runner with the steps given; its calls (nil when none), stderr and exit status
local function run(root, env, steps)
  os.remove(root .. "/calls.txt")
  local _, err, code = h.run("cd " .. q(root) .. " && RP_OWN_GROUP=0 " .. (env or "")
    .. " bash results/run_lm2.sh " .. steps)
  return h.read(root .. "/calls.txt"), err, code
end

local function sorted(text)
  local lines = {}
  for line in text:gmatch("[^\n]+") do lines[#lines + 1] = line end
  table.sort(lines)
  return table.concat(lines, "\n") .. "\n"
end

describe("results/run_lm2.sh", function()
  it("gives the study's commands from the committed plan", function()
    local root = setup()
    finally(function() h.remove_tree(root) end)
    local calls, err, code = run(root, nil, "first small medium large long")
    assert.are.equal(0, code, err)
    assert.are.equal(h.read(FIXTURES .. "commands.txt"), calls)
    calls, err, code = run(root, 'PILOT_SEEDS="1 2"', "pilot")
    assert.are.equal(0, code, err)
    assert.are.equal(h.read(FIXTURES .. "pilot.txt"), sorted(calls))
  end)

  it("gives the medium size at the large size's rate as the step medium-lr", function()
    local root = setup()
    finally(function() h.remove_tree(root) end)
    local calls, err, code = run(root, nil, "medium-lr")
    assert.are.equal(0, code, err)
    local medium = h.read(FIXTURES .. "commands.txt"):match("[^\n]*%-%-seeds 2 [^\n]*lm2%-m\n")
    local want = {}
    for n = 2, 8, 2 do
      want[#want + 1] = medium:gsub("%-%-seeds 2 ", "--seeds " .. n .. " ")
        :gsub("%-%-lr 1e%-2 %-%-min%-lr 0.001", "--lr 3e-3 --min-lr 0.0003")
        :gsub("results/lm2%-m\n$", "results/lm2-m-lr3e-3\n")
    end
    assert.are.equal(table.concat(want), calls)
  end)

  it("follows another plan's seeds, folders and steps", function()
    local root = setup()
    finally(function() h.remove_tree(root) end)
    -- small: 1 seed (first trains only it) of 900 steps; large: 3 seeds (its step: 2, then 3),
    -- 1000 steps, into another folder
    h.write(root .. "/results/lm2_plan.tsv", "size\tfolder\tmethods\tseeds\tsteps\t"
      .. "run_cpu_seconds\nsmall\tlm2-s\trope roper none\t1\t900\t185\n"
      .. "medium\tlm2-m\trope roper\t24\t2200\t726\n"
      .. "large\tlm2-x\trope roper\t3\t1000\t4780\n")
    local calls, err, code = run(root, nil, "first large")
    assert.are.equal(0, code, err)
    local seen = {}
    for line in calls:gmatch("[^\n]+") do
      local methods, seeds = line:match("%-%-methods (.-) %-%-seeds (%d+) ")
      local steps, every = line:match("%-%-steps (%d+) %-%-valid%-every (%d+)")
      seen[#seen + 1] = table.concat({ methods, seeds, steps, every, line:match("%-%-out (%S+)$") },
        " ")
    end
    assert.are.same({ "rope roper none 1 900 90 results/lm2-s",
      "rope roper 2 2200 220 results/lm2-m", "rope roper 2 1000 100 results/lm2-x",
      "rope roper 2 1000 100 results/lm2-x",
      "rope roper 3 1000 100 results/lm2-x" }, seen)
    -- the pilot is what it was, 800 steps, whatever the plan's small size says
    calls, err, code = run(root, "PILOT_SEEDS=1", "pilot")
    assert.are.equal(0, code, err)
    local n = 0
    for line in calls:gmatch("[^\n]+") do
      assert.truthy(line:find(" --steps 800 --valid-every 80 ", 1, true), line)
      n = n + 1
    end
    assert.are.equal(5, n)
  end)

  it("stops on a finished run of another commit in the plan's folders, before any command",
    function()
      local root = setup()
      finally(function() h.remove_tree(root) end)
      local plan = root .. "/results/lm2_plan.tsv"
      h.write(plan, (h.read(plan):gsub("\tlm2%-l\t", "\tlm2-x\t")))
      -- a run of the build's commit passes; one of another commit stops the runner, in the
      -- plan's folders (lm2-x for the large size), the long step's and medium-lr's
      for _, d in ipairs { "lm2-m", "lm2-x", "lm2-s-long", "lm2-m-lr3e-3" } do
        assert(os.execute("mkdir -p " .. q(root .. "/results/" .. d .. "/runs")))
        h.write(root .. "/results/" .. d .. "/runs/rope-s1.json",
          '{"provenance":{"commit":"e0d6683"}}')
        local calls, err, code = run(root, nil, "first")
        assert.are.equal(0, code, err)
        assert.truthy(calls)
        h.write(root .. "/results/" .. d .. "/runs/rope-s1.json",
          '{"provenance":{"commit":"deadbee"}}')
        calls, err, code = run(root, nil, "first")
        assert.are.equal(2, code, err)
        assert.are.equal("run_lm2.sh: results/" .. d .. "/runs/rope-s1.json is a run of deadbee, "
          .. "not of the build's e0d6683: move that folder's runs aside first\n", err)
        assert.is_nil(calls)
        os.remove(root .. "/results/" .. d .. "/runs/rope-s1.json")
      end
    end)

  it("stops on a plan it cannot read, before any command", function()
    local root = setup()
    finally(function() h.remove_tree(root) end)
    local plan = root .. "/results/lm2_plan.tsv"
    local committed = h.read(plan)
    h.write(plan, committed:gsub("\tlm2%-l\t", "\tlm2 l\t"))
    local calls, err, code = run(root, nil, "large")
    assert.are.equal(2, code, err)
    local line = select(2, committed:match("^(.-)\nlarge\t"):gsub("\n", "")) + 2
    assert.are.equal("run_lm2.sh: cannot read the plan: results/lm2_plan.tsv: line " .. line
      .. ": folder \"lm2 l\" is not a name\n", err)
    assert.is_nil(calls)
    h.write(plan, (committed:gsub("\nlarge\t[^\n]*", "")))
    calls, err, code = run(root, nil, "small")
    assert.are.equal(2, code, err)
    assert.are.equal("run_lm2.sh: results/lm2_plan.tsv has no size large\n", err)
    assert.is_nil(calls)
  end)

  it("stops on a build that is not of the checkout's sources, before any command", function()
    local root = setup()
    finally(function() h.remove_tree(root) end)
    assert(os.execute("mkdir -p " .. q(root .. "/scripts") .. " " .. q(root .. "/docs")))
    h.write(root .. "/scripts/compare.lua", "-- the committed one\n")
    h.write(root .. "/docs/results.md", "the committed one\n")
    local head = h.git_commit_all(root)
    local build = "COMMIT=" .. head
    -- the build is of HEAD and so are the sources: it runs, whatever the docs say
    h.write(root .. "/docs/results.md", "changed\n")
    local calls, err, code = run(root, build, "first")
    assert.are.equal(0, code, err)
    assert.truthy(calls)
    local differ = "run_lm2.sh: build-portable/roper is a build of " .. head .. ", and this "
      .. "checkout's scripts or sources differ from that commit's: commit them, then make "
      .. "PORTABLE=1\n"
    -- a script changed since the build's commit, or a new one beside them (untracked)
    h.write(root .. "/scripts/compare.lua", "-- changed\n")
    calls, err, code = run(root, build, "first")
    assert.are.equal(2, code, err)
    assert.are.equal(differ, err)
    assert.is_nil(calls)
    h.write(root .. "/scripts/compare.lua", "-- the committed one\n")
    h.write(root .. "/scripts/new.lua", "-- new\n")
    calls, err, code = run(root, build, "first")
    assert.are.equal(2, code, err)
    assert.are.equal(differ, err)
    assert.is_nil(calls)
    os.remove(root .. "/scripts/new.lua")
    -- a build of a commit the checkout lacks, and one that is not of a commit
    calls, err, code = run(root, "COMMIT=deadbee", "first")
    assert.are.equal(2, code, err)
    assert.are.equal("run_lm2.sh: build-portable/roper is a build of deadbee, which this "
      .. "checkout does not have: make PORTABLE=1\n", err)
    assert.is_nil(calls)
    calls, err, code = run(root, "COMMIT=" .. head .. "-dirty", "first")
    assert.are.equal(2, code, err)
    assert.are.equal("run_lm2.sh: build-portable/roper is a build of '" .. head .. "-dirty', "
      .. "not of a commit: commit, then make PORTABLE=1\n", err)
    assert.is_nil(calls)
  end)
end)

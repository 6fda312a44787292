-- Runs outside roper's own scheduler (issue 15): GNU parallel, the light path over a few machines
-- (compare.lua and sweep.lua --print-commands lines run from any folder under `parallel --jobs N
-- --joblog`, a failed line is rerun by --resume-failed, and the same compare command then collects
-- every run without training anything again), and the Slurm job-array script of --print-sbatch,
-- whose tasks are run here as Slurm would run them (SLURM_ARRAY_TASK_ID set; no Slurm needed).

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"

local BIN = h.BIN
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

-- A stand-in for Slurm's sbatch and squeue (on PATH before the real ones): sbatch --parsable
-- runs every task of the array at once, in order, as Slurm would (SLURM_ARRAY_TASK_ID set, output
-- to the script's --output pattern), except task $FAKE_FAIL, which it drops (a task that died);
-- $FAKE_REFUSE makes it refuse the job as sbatch does. squeue lists the job while $FAKE_QUEUED
-- is set. Job ids count from 1 in $FAKE_DIR/next.
local FAKE_SBATCH = [[#!/bin/bash
set -euo pipefail
[ "$1" = --parsable ] || { echo "fake sbatch: --parsable expected" >&2; exit 9; }
script=$2
if [ -n "${FAKE_REFUSE:-}" ]; then echo "sbatch: error: $FAKE_REFUSE" >&2; exit 1; fi
n=$(sed -n 's/^#SBATCH --array=1-\([0-9]*\)$/\1/p' "$script")
pattern=$(sed -n 's/^#SBATCH --output=\(.*\)$/\1/p' "$script")
jid=$(cat "$FAKE_DIR/next" 2>/dev/null || echo 1)
echo $((jid + 1)) > "$FAKE_DIR/next"
for i in $(seq 1 "$n"); do
  [ "$i" = "${FAKE_FAIL:-0}" ] && continue
  log=${pattern//%A/$jid}; log=${log//%a/$i}
  (cd / && SLURM_ARRAY_TASK_ID=$i bash "$script" > "$log" 2>&1) || true
done
echo "$jid"
]]
local FAKE_SQUEUE = [[#!/bin/bash
# squeue -h -j <jid> -o %i
[ -n "${FAKE_QUEUED:-}" ] && echo "$3" || true
]]

describe("--slurm: submit, report, rerun failed tasks, collect", function()
  local tmp, env
  setup(function()
    tmp = h.tmpdir()
    os.execute("mkdir -p " .. h.sh_quote(tmp .. "/bin"))
    h.write(tmp .. "/bin/sbatch", FAKE_SBATCH)
    h.write(tmp .. "/bin/squeue", FAKE_SQUEUE)
    os.execute("chmod +x " .. h.sh_quote(tmp .. "/bin/sbatch") .. " " .. h.sh_quote(tmp .. "/bin/squeue"))
    env = ("PATH=%s:$PATH FAKE_DIR=%s "):format(h.sh_quote(tmp .. "/bin"), h.sh_quote(tmp))
  end)
  teardown(function() h.remove_tree(tmp) end)

  it("a failed task is reported with its log and rerun by the next invocation", function()
    local out = tmp .. "/sl"
    local compare = ("%s scripts/compare.lua %s --out %s --slurm"):format(h.sh_quote(BIN), TINY,
      h.sh_quote(out))
    local _, se, code = h.run(env .. "FAKE_FAIL=2 " .. compare)
    assert.are.equal(0, code, se)
    assert.truthy(se:find("compare: submitted job array 1: 4 runs (", 1, true), se)
    assert.truthy(se:find("compare: job 1 submitted; run the same command again to collect", 1, true), se)
    assert.is_nil(h.read(out .. "/summary.md"))
    -- while the job is queued, nothing happens
    local _, seq, codeq = h.run(env .. "FAKE_QUEUED=1 " .. compare)
    assert.are.equal(0, codeq, seq)
    assert.truthy(seq:find("compare: job 1 is still in the queue; run the same command again later "
      .. "to collect", 1, true), seq)
    -- then: task 2 (rope s2) is reported and submitted again, alone
    local _, se2, code2 = h.run(env .. compare)
    assert.are.equal(0, code2, se2)
    assert.truthy(se2:find("compare: rope s2: array task 1_2 left no result (log " .. out
      .. "/slurm/1_2.out); it is submitted again", 1, true), se2)
    assert.truthy(se2:find("compare: submitted job array 2: 1 run (", 1, true), se2)
    -- and collected
    local so3, se3, code3 = h.run(env .. compare)
    assert.are.equal(0, code3, so3 .. se3)
    assert.is_nil(se3:find("\ndone ", 1, true), se3)
    assert.truthy(h.read(out .. "/summary.md"):find("| roper | 2 |", 1, true))
    assert.is_nil(h.read(out .. "/slurm/job"))
  end)

  it("--wait submits, waits and collects in one call; a failed task fails the call", function()
    local out = tmp .. "/sw"
    local compare = ("%s scripts/compare.lua %s --out %s --slurm --wait"):format(h.sh_quote(BIN),
      TINY, h.sh_quote(out))
    local _, se, code = h.run(env .. "FAKE_FAIL=3 " .. compare)
    assert.are.equal(1, code, se)
    assert.truthy(se:find("compare.lua: --slurm: 1 run failed; run the same command again to rerun "
      .. "it:\n  roper s1: array task ", 1, true), se)
    local so2, se2, code2 = h.run(env .. compare)
    assert.are.equal(0, code2, so2 .. se2)
    assert.truthy(h.read(out .. "/summary.md"):find("| rope | 2 |", 1, true))
  end)

  it("sweep.lua --slurm --wait runs the grid as an array and summarises", function()
    local out = tmp .. "/swp"
    local so, se, code = h.run(env .. ("%s scripts/sweep.lua --grid seed=1,2 --steps 1 --d-model 16 "
      .. "--heads 2 --layers 1 --seq-len 32 --batch 4 --problems 2 --valid-batches 1 --out %s "
      .. "--slurm --wait"):format(h.sh_quote(BIN), h.sh_quote(out)))
    assert.are.equal(0, code, so .. se)
    assert.truthy(se:find("sweep: submitted job array %d+: 2 runs"), se)
    assert.truthy(h.read(out .. "/summary.md"), "no summary")
  end)

  it("says so when Slurm is missing or refuses the job, with exit status 2", function()
    local compare = ("%s scripts/compare.lua %s --out %s --slurm"):format(h.sh_quote(BIN), TINY,
      h.sh_quote(tmp .. "/x"))
    local _, se, code = h.run("PATH=/nonexistent " .. h.sh_quote(ABS_BIN)
      .. compare:sub(#h.sh_quote(BIN) + 1))
    assert.are.equal(2, code, se)
    assert.are.equal("compare.lua: --slurm: sbatch not found (is Slurm installed and on PATH?)\n", se)
    local _, se2, code2 = h.run(env .. "FAKE_REFUSE='invalid partition specified: nope' " .. compare)
    assert.are.equal(2, code2, se2)
    assert.truthy(se2:find("compare.lua: --slurm: sbatch refused the job array (", 1, true), se2)
    assert.truthy(se2:find("): sbatch: error: invalid partition specified: nope\n", 1, true), se2)
    local _, se3, code3 = h.run(compare:gsub("%-%-slurm", "--wait"))
    assert.are.equal(2, code3)
    assert.are.equal("compare.lua: --wait needs --slurm\n", se3)
  end)
end)

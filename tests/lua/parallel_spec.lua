-- GNU parallel, the light path over a few machines (issue 15, item 3): compare.lua and sweep.lua
-- --print-commands lines run from any folder under `parallel --jobs N --joblog`, a failed line is
-- rerun by --resume-failed, and the same compare command then collects every run without
-- training anything again (docs/experiments.md, "Spreading a sweep over machines").

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

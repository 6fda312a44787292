-- The fuzz test (issue 9): every public function and method of the module, found by walking it,
-- called with a battery of bad values (tests/fuzz/cases.lua) in child processes of the roper
-- binary (tests/fuzz/driver.lua, tests/fuzz/child.lua). One test per function; it fails on a
-- death (a signal), a hang (the child's time limit), a sanitizer report (under make test
-- SANITIZE=1) or an error message that no bad argument may produce (a raw Lua error, '?' for the
-- function's name, a position inside the module's Lua sources, a temporary file name). The
-- figures are printed at the end.
--
-- FUZZ_FILTER=<Lua pattern> runs the functions whose name matches it only, e.g.
-- FUZZ_FILTER=attention BUSTED_ARGS=--filter=fuzz make test. FUZZ_SHARD=k/n (tests/run sets it
-- to run the shards side by side) runs the k-th of n shares of the functions (every n-th, from
-- the k-th), and the checks of the whole list in shard 1 only. FUZZ_SAMPLE=n runs one case in n
-- of each function (tests/fuzz/driver.lua; CI's plain run, whose sanitizer run fuzzes every
-- case); each test's name and the figures say so.

local dir_of = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*/[^/]*$") or "."
package.path = dir_of .. "/fuzz/?.lua;" .. dir_of .. "/lua/?.lua;" .. package.path
local driver = require "driver"

local BIN = require("helpers").BIN
local filter = os.getenv("FUZZ_FILTER")
local shard, shards = (os.getenv("FUZZ_SHARD") or ""):match("^(%d+)/(%d+)$")
shard, shards = tonumber(shard) or 1, tonumber(shards) or 1
assert(shards >= 1 and shard >= 1 and shard <= shards, "FUZZ_SHARD must be k/n with 1 <= k <= n")
-- `it` for the checks of the whole list: shard 1's
local whole = shard == 1 and it or function() end

describe("fuzz", function()
  local dir = driver.prepare(BIN)
  local fns = driver.list(BIN, dir)
  local total = { functions = 0, cases = 0, children = 0, deaths = 0, hangs = 0, sanitizer = 0,
    raw = 0, harness = 0, seconds = 0, unseeded = {}, slowest = {} }

  whole("finds every public function and method by walking the module", function()
    local names = {}
    for _, fn in ipairs(fns) do
      names[fn.name] = true
      assert.is_true(fn.cases > 0, fn.name .. " has no case")
    end
    for _, want in ipairs { "rp.attention", "rp.Model.generate", "rp.optim.adam", "rp.tasks.text",
      "rp.load", "rp.Tensor.add", "roper.Tensor.__index", "rp.experiment.run", "rp.eval.loss",
      "rp.Task.batch", "rp.Rng.randint", "rp.Optim.step", "roper.Model.__close",
      "rp.gnuplot_string" } do
      assert.is_true(names[want], want .. " was not found")
    end
    assert.is_true(#fns >= 140, #fns .. " functions")
  end)

  whole("every seed call and variant is a call its function accepts", function()
    -- (a refused one fuzzes only that refusal: the options read after the check that refuses
    -- it, and the kernels behind them, would never see a bad value)
    assert.are.same({}, driver.refused(BIN, dir))
  end)

  whole("every public function found by the walk has a help text", function()
    local rp = require "roper"
    local missing = {}
    for _, fn in ipairs(fns) do
      local path = fn.name:match("^rp%.(.*)$")
      if path then
        local f = rp
        for part in path:gmatch("[^.]+") do f = f[part] end
        if not rp.help(f) then missing[#missing + 1] = fn.name end
      end
    end
    assert.are.same({}, missing)
  end)

  for i, fn in ipairs(fns) do
    if (not filter or fn.name:find(filter)) and (i - 1) % shards == shard - 1 then
      local name = driver.sample == 1 and ("%s survives %d cases"):format(fn.name, fn.cases)
        or ("%s survives %d of its %d cases (FUZZ_SAMPLE=%d)"):format(fn.name,
          driver.sampled(fn, driver.sample), fn.cases, driver.sample)
      it(name, function()
        local r = driver.run(BIN, dir, fn, driver.sample)
        total.functions = total.functions + 1
        total.cases = total.cases + r.cases
        total.children = total.children + r.children
        total.seconds = total.seconds + r.seconds
        total.slowest[#total.slowest + 1] = { fn.name, r.seconds }
        if not fn.seeded then total.unseeded[#total.unseeded + 1] = fn.name end
        local problems = {}
        for _, kind in ipairs { "deaths", "hangs", "sanitizer", "raw", "harness" } do
          total[kind] = total[kind] + #r[kind]
          for _, p in ipairs(r[kind]) do problems[#problems + 1] = kind .. ": " .. p end
        end
        assert.are.equal(0, #problems, fn.name .. ":\n" .. table.concat(problems, "\n"))
      end)
    end
  end

  teardown(function()
    print(("\nfuzz%s: %d cases%s over %d functions in %d child processes, %.0f s: %d deaths, %d "
      .. "hangs, %d sanitizer reports, %d raw errors, %d harness errors"):format(
      shards > 1 and (" (shard %d of %d)"):format(shard, shards) or "", total.cases,
      driver.sample > 1 and (" (a sample: 1 case in %d of each function, FUZZ_SAMPLE=%d)"):format(
        driver.sample, driver.sample) or "",
      total.functions, total.children, total.seconds, total.deaths, total.hangs, total.sanitizer,
      total.raw, total.harness))
    table.sort(total.slowest, function(a, b) return a[2] > b[2] end)
    local slow = {}
    for i = 1, math.min(5, #total.slowest) do
      slow[i] = ("%s %.1f s"):format(total.slowest[i][1], total.slowest[i][2])
    end
    print("fuzz: the slowest: " .. table.concat(slow, ", "))
    if #total.unseeded > 0 then
      print("fuzz: without a seed call (battery at positions 1..3 only): "
        .. table.concat(total.unseeded, ", "))
    end
    driver.cleanup(dir)
  end)
end)

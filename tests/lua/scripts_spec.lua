-- Runs scripts/rotation_identity.lua and a tiny REPL session through the REPL binary
-- (ROPER_BIN, default build/roper), from the repository root.

local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"

local BIN = h.BIN
local sh_quote = h.sh_quote

-- Runs a shell command; returns its output (stdout and stderr) and the io.popen close results.
local function run(cmd)
  local p = assert(io.popen(cmd .. " 2>&1", "r"))
  local out = p:read("a")
  local ok, how, code = p:close()
  return out, ok, how, code
end

local function lines(s)
  local t = {}
  for line in s:gmatch("[^\n]*") do t[#t + 1] = line end
  return t
end

-- Checks the output of rotation_identity.lua; returns the number of passed checks.
local function check_identity_output(out)
  local n_pass, n_fail = out:match("rotation identity: (%d+) passed, (%d+) failed")
  assert.is_not_nil(n_pass, "no summary line in:\n" .. out)
  assert.equal("0", n_fail, out)
  assert.is_true(tonumber(n_pass) >= 8, "only " .. n_pass .. " checks")
  local pass_lines = 0
  for _, line in ipairs(lines(out)) do
    assert.is_nil(line:find("%f[%w]FAIL%f[%W]"), "a FAIL line: " .. line)
    if line:find("%f[%w]PASS%f[%W]") then pass_lines = pass_lines + 1 end
  end
  assert.equal(tonumber(n_pass), pass_lines, "summary count vs PASS lines")
  -- every numbered step 1..8 is there
  for k = 1, 8 do assert.truthy(out:find("\n" .. k .. "%. "), "step " .. k .. " missing") end
  return tonumber(n_pass)
end

describe("scripts/rotation_identity.lua", function()
  it("passes every check under the REPL binary and exits 0", function()
    local out, ok, how, code = run(sh_quote(BIN) .. " scripts/rotation_identity.lua")
    assert.is_true(ok == true, string.format("exit %s %s:\n%s", tostring(how), tostring(code), out))
    check_identity_output(out)
  end)

  it("takes --seed and --d", function()
    local out, ok = run(sh_quote(BIN) .. " scripts/rotation_identity.lua --seed 7 --d 16")
    assert.is_true(ok == true, out)
    check_identity_output(out)
    assert.truthy(out:find("seed 7", 1, true))
    assert.truthy(out:find("d = 16", 1, true))
    -- another seed draws other numbers: the printed errors differ
    local out1 = run(sh_quote(BIN) .. " scripts/rotation_identity.lua --seed 1 --d 16")
    local function errs(s)
      local t = {}
      for e in s:gmatch("max error (%S+),") do t[#t + 1] = e end
      return table.concat(t, " ")
    end
    assert.are_not.equal(errs(out1), errs(out))
  end)

  it("rejects a bad --d with exit status 2", function()
    local out, ok, how, code = run(sh_quote(BIN) .. " scripts/rotation_identity.lua --d 7")
    assert.is_not_true(ok)
    assert.equal("exit", how)
    assert.equal(2, code)
    assert.truthy(out:find("--d must be even", 1, true), out)
    out, ok, how, code = run(sh_quote(BIN) .. " scripts/rotation_identity.lua --d 1000000000")
    assert.equal(2, code)
    assert.equal("rotation_identity.lua: --d must be even and in 2..4096, got 1000000000\n", out)
  end)
end)

describe("the REPL", function()
  it("evaluates piped lines and prints the results", function()
    local out, ok = run("printf 'x = rp.ones{2,2}\\nx:sum()\\n' | " .. sh_quote(BIN))
    assert.is_true(ok == true, out)
    local found = false
    for _, line in ipairs(lines(out)) do
      local v = line:gsub("^[>%s]*", ""):gsub("%s+$", "")
      if v == "4" or v == "4.0" then found = true end
    end
    assert.is_true(found, "no line printing 4 in:\n" .. out)
  end)

  it("prints a tensor with its shape, reports an error and goes on; exit status 1 after an error", function()
    local out, ok, how, code = run("printf 'rp.zeros{2,3}\\nrp.zeros{2}:add(rp.ones{3})\\nprint(\"after\", 1 + 1)\\n' | "
                                   .. sh_quote(BIN))
    assert.truthy(out:find("[2 x 3]", 1, true), out)
    assert.truthy(out:find("shapes [2] and [3] do not broadcast", 1, true), out)
    assert.truthy(out:find("after\t2", 1, true), out)
    -- repl/repl.c: without a terminal the exit status is 1 if any chunk failed
    assert.is_not_true(ok)
    assert.equal("exit", how)
    assert.equal(1, code)
  end)
end)

describe("the identity scripts' layout (issue 31)", function()
  -- was: PASS at the end of rotation_identity's check lines, at the start of linear_identity's,
  -- at the end of pe_identity's 170-column rows; linear_identity's check that a shift changes the
  -- output printed "max error 0.00e+00 (tolerance 0e+00)"
  local outputs = {}
  local names = { "rotation_identity", "linear_identity", "pe_identity", "pe_identity_2d" }
  for _, name in ipairs(names) do
    outputs[name] = run(sh_quote(BIN) .. " scripts/" .. name .. ".lua")
  end

  it("puts every verdict at the start of its line, at one column, within 100 columns", function()
    for name, out in pairs(outputs) do
      local verdicts, summary = 0, out:match("identity[ 2d]*: (%d+) passed, 0 failed\n$")
      assert.truthy(summary, name .. ":\n" .. out)
      for _, line in ipairs(lines(out)) do
        assert.is_true(#line <= 100, ("%s: %d columns: %s"):format(name, #line, line))
        if line:find("%f[%w]PASS%f[%W]") or line:find("%f[%w]FAIL%f[%W]") then
          assert.truthy(line:find("^  PASS  %S"), name .. ": " .. line)
          verdicts = verdicts + 1
        end
      end
      assert.are.equal(tonumber(summary), verdicts, name)
    end
  end)

  it("shows the difference that must be there, and the least it must be", function()
    local out = outputs.linear_identity
    local diff = out:match("\n  PASS  before phi: the shift changes the output\n"
      .. "        difference (%S+), must exceed 1%.00e%-03\n")
    assert.truthy(diff, out)
    assert.is_true(tonumber(diff) > 1e-3, diff)
    local legacy = outputs.rotation_identity:match("\n  PASS  roper_legacy: the same shifts change "
      .. "the output by a clear margin %(NOT shift invariant%)\n        difference (%S+), must exceed (%S+)\n")
    assert.truthy(legacy, outputs.rotation_identity)
  end)

  it("lib/checks: NaN never passes, a difference must exceed its least, the exit status", function()
    package.path = "scripts/?.lua;" .. package.path
    local checks = require "lib.checks"
    local printed = {}
    local c = checks.new(function(line) printed[#printed + 1] = (line:gsub("%-nan", "nan")) end)
    local r = { c:close("a", 1e-9, 1e-6), c:close("b", 0 / 0, 1e-6), c:apart("c", 2e-3, 1e-3),
      c:apart("d", 1e-3, 1e-3), c:apart("e", 0 / 0, 1e-3), c:verdict(true, "f") }
    assert.are.same({ true, false, true, false, false, true }, r)
    assert.are.equal(1, c:summary("x"))
    assert.are.same({ "  PASS  a", "        max error 1.00e-09, tolerance 1.00e-06", "  FAIL  b",
      "        max error nan, tolerance 1.00e-06", "  PASS  c",
      "        difference 2.00e-03, must exceed 1.00e-03", "  FAIL  d",
      "        difference 1.00e-03, must exceed 1.00e-03", "  FAIL  e",
      "        difference nan, must exceed 1.00e-03", "  PASS  f", "", "x: 3 passed, 3 failed" },
      printed)
    assert.are.equal(0, checks.new(function() end):summary("y"))
  end)
end)

describe("scripts/pe_identity.lua", function()
  it("classifies every scheme as its formula says and exits 0", function()
    local out, ok, how, code = run(sh_quote(BIN) .. " scripts/pe_identity.lua --seed 3 --d 8")
    assert.is_true(ok == true, string.format("exit %s %s:\n%s", tostring(how), tostring(code), out))
    local n_pass, n_fail = out:match("pe identity: (%d+) passed, (%d+) failed\n$")
    assert.equal("0", n_fail, out)
    assert.is_true(tonumber(n_pass) >= 23, out)
    -- the rows that matter most, as printed
    -- a row: its verdict, then the name, six measurements, the score's and the output's words
    local function row(name)
      local r = out:match("\n  (%u%u%u%u  " .. name:gsub("%p", "%%%0") .. " +[^\n]*)")
      local words = {}
      for w in r:gmatch("%S+") do words[#words + 1] = w end
      return words[1] .. " " .. words[#words - 1] .. " " .. words[#words]
    end
    assert.are.equal("PASS relative relative", row("rotate qk (rope)"))
    assert.are.equal("PASS nothing relative", row("rotate vo (VO-RoPE)"))
    assert.are.equal("PASS nothing absolute", row("rotate v"))
    assert.are.equal("PASS relative absolute", row("roper_legacy (v by 2i)"))
    assert.are.equal("PASS clipped clipped", row("shaw (clip 16)"))
    assert.are.equal("PASS relative relative", row("alibi"))
    -- any frequencies keep the property; angles not linear in p do not; xPos's float range
    assert.is_true(tonumber(n_pass) >= 32, out)
    assert.are.equal("PASS relative relative", row("roper, random freq"))
    assert.are.equal("PASS absolute absolute", row("rope, angles p^1.5 theta"))
    assert.truthy(out:find("\n +40000 +[^\n]*broken", 1, false), out)
    assert.truthy(out:find("\n +20000 +[^\n]*invariant", 1, false), out)
  end)

  it("rejects a bad --d with exit status 2", function()
    local out, ok, how, code = run(sh_quote(BIN) .. " scripts/pe_identity.lua --d 3")
    assert.is_not_true(ok)
    assert.equal("exit", how)
    assert.equal(2, code)
    assert.truthy(out:find("--d must be even and in 4..4096, got 3", 1, true), out)
    -- sizes past the bound: the same one line, not a traceback after an allocation failed
    out, ok, how, code = run(sh_quote(BIN) .. " scripts/pe_identity.lua --d 100000000")
    assert.equal(2, code)
    assert.equal("pe_identity.lua: --d must be even and in 4..4096, got 100000000\n", out)
  end)
end)

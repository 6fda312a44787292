-- What the experiment scripts write and show (issue 12): the JSON files (lua-dkjson, keys sorted,
-- numbers in full, the committed results unchanged but for white space), the progress line
-- (cut to the terminal's width, plain lines when stderr is not a terminal or NO_COLOR is set),
-- and --help (each option once, 80 columns). Scripts run through the REPL binary (ROPER_BIN,
-- default build/roper) from the repository root; terminals are pseudo-terminals of script(1).

local cjson = require "cjson"
local rp = require "roper"

local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local sh_quote, run, read = h.sh_quote, h.run, h.read

package.path = "scripts/?.lua;" .. package.path
local fileio = require "lib.fileio"
local json = require "lib.json"

local BIN = h.BIN

-- cmd run on a pseudo-terminal of `cols` columns (stty; 0 leaves the size unknown), with env
-- (a prefix of NAME=value words) in front; returns what the terminal showed.
local function on_terminal(cmd, cols, env)
  local inner = ("stty cols %d rows 24; %s %s"):format(cols, env or "", cmd)
  local out, err, code = run("timeout 300 script -qec " .. sh_quote(inner) .. " /dev/null < /dev/null")
  -- script -e gives the command's exit status: 139 when it died of SIGSEGV (a closed tty handle
  -- left in libuv's loop once did that at exit, after printing everything)
  assert.are.equal(0, code, out .. (err or ""))
  return out
end

describe("json.encode (lua-dkjson)", function()
  it("writes keys sorted at every level, arrays, numbers in full, in dkjson's layout", function()
    local v = { b = { 1, 2, 3 }, a = 0.1, c = { { y = 2.5, x = 1 } }, e = {}, s = 'a/b"c\n',
      n = 1 / 3, f = 1.0, i = 3, inf = math.huge, mixed = { 1, 2, x = 3 } }
    assert.are.equal(table.concat({
      "{",
      '  "a":0.10000000000000001,',
      '  "b":[1,2,3],',
      '  "c":[{',
      '      "x":1,',
      '      "y":2.5',
      "    }],",
      '  "e":[],',
      '  "f":1,',
      '  "i":3,',
      '  "inf":null,',
      '  "mixed":{',
      '    "1":1,',
      '    "2":2,',
      '    "x":3',
      "  },",
      '  "n":0.33333333333333331,',
      '  "s":"a/b\\"c\\n"',
      "}",
      "" }, "\n"), json.encode(v))
  end)

  it("reads back bit for bit", function()
    local v = { 0.1, 1 / 3, 2 ^ -1074, 1e300, -123456789.123456789, 3, -7, 2 ^ 53 + 2.0 }
    assert.are.same(v, cjson.decode(json.encode(v)))
  end)

  -- The key sequence of a JSON text (every "name": in order) and its numbers as written.
  local function keys_and_numbers(text)
    local keys, nums = {}, {}
    for k in text:gmatch('"([^"]*)":') do keys[#keys + 1] = k end
    for n in text:gsub('"[^"]*"', ""):gmatch("[-%d][%d.eE+-]*") do nums[#nums + 1] = n end
    return table.concat(keys, " "), table.concat(nums, " ")
  end

  it("rewrites the committed result files with the same keys, order and numbers", function()
    local p = assert(io.popen("find results -name '*.json' | sort"))
    local n = 0
    for path in p:lines() do
      local text = assert(read(path))
      local again = json.encode(cjson.decode(text))
      local k1, n1 = keys_and_numbers(text)
      local k2, n2 = keys_and_numbers(again)
      assert.are.equal(k1, k2, path)
      assert.are.equal(n1, n2, path)
      assert.are.same(cjson.decode(text), cjson.decode(again), path)
      -- white space is all that differs
      assert.are.equal(text:gsub("%s", ""), (again:gsub("%s", "")), path)
      n = n + 1
    end
    p:close()
    assert.is_true(n >= 50, n .. " result files")
  end)
end)

describe("fileio.read", function()
  it("reads a file whole, and refuses a folder or a FIFO without opening it", function()
    local d = h.tmpdir()
    local f = d .. "/f.txt"
    h.write(f, "a\0b\n")
    assert.are.equal("a\0b\n", fileio.read(f))
    assert.are.same({ nil, d .. ": not a regular file (a folder)" }, { fileio.read(d) })
    assert.is_true(os.execute("mkfifo " .. sh_quote(d .. "/p")))
    -- (a hang here is the failure: the open would wait for a writer)
    assert.are.same({ nil, d .. "/p: not a regular file (a FIFO)" }, { fileio.read(d .. "/p") })
    local n, err = fileio.read(d .. "/missing")
    assert.is_nil(n)
    assert.are.equal(d .. "/missing: No such file or directory", err)
    h.remove_tree(d)
  end)
end)

describe("fileio.check_output", function()
  it("probes the folder with a file it removes, and leaves a file of that name alone", function()
    local d = h.tmpdir()
    fileio.check_output(d .. "/sub/r.json", "--out")
    assert.are.equal("directory", require("lfs").attributes(d .. "/sub", "mode"))
    assert.is_nil(require("lfs").attributes(d .. "/sub/r.json.probe"))
    h.write(d .. "/sub/r.json.probe", "mine")
    fileio.check_output(d .. "/sub/r.json", "--out")
    assert.are.equal("mine", read(d .. "/sub/r.json.probe"))
    h.remove_tree(d)
  end)

  it("removes the empty leftover of a probe cut short (kill -9 between write and removal)", function()
    local d = h.tmpdir()
    h.write(d .. "/r.json.probe", "")
    fileio.check_output(d .. "/r.json", "--out")
    assert.is_nil(require("lfs").attributes(d .. "/r.json.probe"))
    h.remove_tree(d)
  end)
end)

describe("the progress line", function()
  -- A script that shows three long lines through term.status(0) (every update printed).
  local driver = h.tmpdir() .. "/status.lua"
  h.write(driver, [[
package.path = "scripts/?.lua;" .. package.path
local term = require "lib.term"
local s = term.status(0)
for i = 1, 3 do s:update(("x"):rep(100) .. i) end
s:done()
io.stderr:write("live=", tostring(s.live), "\n")
]])
  local cmd = sh_quote(BIN) .. " " .. sh_quote(driver)
  teardown(function() h.remove_tree((driver:gsub("/status%.lua$", ""))) end)

  it("on a terminal: rewritten in place, cut to the width less one column", function()
    local out = on_terminal(cmd, 60)
    assert.truthy(out:find("live=true", 1, true), out)
    local n = 0
    for seg in out:gmatch("\r([^\r\n]*)") do
      if seg:find("^x") then
        n = n + 1
        assert.are.equal(("x"):rep(56) .. "...", seg)
      end
    end
    assert.are.equal(3, n, out)
  end)

  it("takes COLUMNS when the terminal does not tell its size", function()
    local out = on_terminal(cmd, 0, "COLUMNS=40")
    assert.truthy(out:find("\r" .. ("x"):rep(36) .. "...\r", 1, true), out)
  end)

  it("plain lines with NO_COLOR, or when stderr is not a terminal", function()
    local full = ("x"):rep(100)
    local out = on_terminal(cmd, 60, "NO_COLOR=1")
    out = out:gsub("\r\n", "\n")
    assert.is_nil(out:find("\r", 1, true), out)
    assert.are.equal(full .. "1\n" .. full .. "2\n" .. full .. "3\nlive=false\n", out)
    local so, se, code = run(cmd)
    assert.are.equal(0, code, se)
    assert.are.equal("", so)
    assert.are.equal(full .. "1\n" .. full .. "2\n" .. full .. "3\nlive=false\n", se)
    -- NO_COLOR set but empty counts as unset
    out = on_terminal(cmd, 60, "NO_COLOR=")
    assert.truthy(out:find("live=true", 1, true), out)
  end)

  it("compare.lua's bar fits a terminal of 60 columns", function()
    local out_dir = h.tmpdir()
    local out = on_terminal(sh_quote(BIN) .. " scripts/compare.lua --methods rope --seeds 2 "
      .. "--jobs 2 --steps 1500 --d-model 16 --heads 2 --layers 1 --seq-len 32 --batch 2 "
      .. "--problems 1 --valid-batches 1 --out " .. sh_quote(out_dir), 60)
    h.remove_tree(out_dir)
    local bars = 0
    for seg in out:gmatch("\r([^\r\n]*)") do
      if seg:find("^%[") then
        bars = bars + 1
        assert.is_true(#seg <= 59, ("%d columns: %s"):format(#seg, seg))
        assert.truthy(seg:find("^%[[#.]+%] +%d+%% %d/2 runs "), seg)
      end
    end
    assert.is_true(bars > 0, "no progress line in:\n" .. out)
  end)
end)

describe("--help", function()
  for _, script in ipairs { "train", "compare", "sweep" } do
    it(script .. ".lua lists each option once under --help-all, within 80 columns", function()
      local so, se, code = run(sh_quote(BIN) .. " scripts/" .. script .. ".lua --help-all")
      assert.are.equal(0, code, se)
      local seen, dup = {}, {}
      for line in so:gmatch("[^\n]+") do
        assert.is_true(#line <= 80, ("%d columns: %s"):format(#line, line))
        local name = line:match("^   (%-%-[%w_-]+)") or line:match("^   %-h, (%-%-help)")
        if name then
          if seen[name] then dup[#dup + 1] = name end
          seen[name] = true
        end
      end
      assert.are.same({}, dup)
      assert.is_nil(so:find("\n   %-%-[%w-]*_"), "an underscore alias is listed")
      for _, k in ipairs(rp.experiment.keys()) do
        if not (script == "compare" and k.name == "seed") then
          assert.is_true(seen["--" .. k.name:gsub("_", "-")], k.name)
        end
      end
      assert.truthy(so:find("^Usage: build/roper scripts/" .. script .. "%.lua %[options%] %[config keys%]\n"),
        so)
    end)
  end

  it("the underscore spelling of a key still works", function()
    local _, se, code = run(sh_quote(BIN) .. " scripts/train.lua --d_model 18 --heads 4 --quiet")
    assert.are.equal(2, code, se)
    assert.are.equal("train.lua: model: d_model 18 is not divisible by heads 4\n", se)
  end)
end)

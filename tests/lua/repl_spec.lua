-- What the REPL shows (issue 12): tables through rp.inspect (nested, sorted keys, a depth limit,
-- <cycle>, as wide as the terminal), one result per line, help("word") searching, and "?name".
-- rp.inspect is checked in this process (the module as plain lua5.4 loads it); the REPL through
-- the roper binary (ROPER_BIN, default build/roper): piped, and in a pseudo-terminal (script(1)
-- from util-linux) for the terminal's width.

local rp = require "roper"

local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"

local BIN = h.BIN

local function lines(s)
  local t = {}
  for l in s:gmatch("([^\n]*)\n") do t[#t + 1] = l end
  return t
end

-- Runs the REPL on piped input; returns stdout, stderr, exit code.
local function repl(input, env)
  return h.run("printf '%s' " .. h.sh_quote(input) .. " | " .. (env or "") .. " " .. h.sh_quote(BIN))
end

describe("rp.inspect", function()
  it("prints a table as a nested constructor with sorted keys", function()
    local t = { 3, 2, 1, z = true, a = "x", [10] = 0.5, ["not a name"] = 1, ["end"] = 2,
      sub = { list = { 1, 2 }, empty = {} } }
    assert.are.equal('{3, 2, 1, [10] = 0.5, a = "x", ["end"] = 2, ["not a name"] = 1, '
      .. 'sub = {empty = {}, list = {1, 2}}, z = true}', rp.inspect(t, { width = 200 }))
  end)

  it("breaks a table that does not fit into one entry per line, indented", function()
    local t = { name = "a long enough string to not fit", list = { 1, 2, 3 },
      nested = { key = "another string that is fairly long" } }
    assert.are.equal(table.concat({
      "{",
      "  list = {1, 2, 3},",
      '  name = "a long enough string to not fit",',
      '  nested = {key = "another string that is fairly long"}',
      "}" }, "\n"), rp.inspect(t, { width = 50 }))
  end)

  it("keeps every line within the width, packing the items of a sequence", function()
    local t = {}
    for i = 1, 200 do t[i] = i * 1.5 end
    local s = rp.inspect({ values = t, name = "x" }, { width = 40, items = 1000 })
    for _, l in ipairs(lines(s .. "\n")) do assert.is_true(#l <= 40, l) end
    assert.truthy(s:find("\n    1.5, 3.0, 4.5,", 1, true), s)
    assert.truthy(s:find("300.0\n  }\n}$"), s)
  end)

  it("stops at the depth limit with {...}", function()
    local t = { a = { b = { c = { d = { e = 1 } } } } }
    assert.are.equal("{a = {b = {c = {d = {...}}}}}", rp.inspect(t)) -- depth 4: d is level 5
    assert.are.equal("{a = {b = {...}}}", rp.inspect(t, { depth = 2 }))
    assert.are.equal("{{...}}", rp.inspect({ t }, { depth = 1 }))
    assert.are.equal("{a = {b = {c = {d = {e = 1}}}}}", rp.inspect(t, { depth = 5 }))
    assert.are.equal("{a = {b = {c = {d = {}}}}}", rp.inspect({ a = { b = { c = { d = {} } } } }))
  end)

  it("marks a table met again inside itself as <cycle>, a shared table is printed twice", function()
    local t = { name = "t" }
    t.self = t
    t.child = { parent = t, deeper = { root = t } }
    assert.are.equal('{child = {deeper = {root = <cycle>}, parent = <cycle>}, name = "t", '
      .. 'self = <cycle>}', rp.inspect(t, { width = 200 }))
    local shared = { 1 }
    assert.are.equal("{a = {1}, b = {1}}", rp.inspect({ a = shared, b = shared }))
  end)

  it("cuts a table after `items` entries", function()
    local t = {}
    for i = 1, 10 do t[i] = i end
    t.x = 1
    assert.are.equal("{1, 2, 3, ... (8 more)}", rp.inspect(t, { items = 3 }))
  end)

  it("quotes strings, shows tensors by shape and other values as tostring", function()
    local t = { s = 'a "q"\n\tb\\', t = rp.zeros { 2, 3 }, f = print, g = rp.rng(1) }
    local s = rp.inspect(t, { width = 400 })
    assert.truthy(s:find('s = "a \\"q\\"\\n\\tb\\\\"', 1, true), s)
    assert.truthy(s:find("t = roper.Tensor [2 x 3]", 1, true), s)
    assert.truthy(s:find("f = " .. tostring(print), 1, true), s)
    assert.truthy(s:find("g = roper.Rng (seed 1)", 1, true), s)
    -- a value that is not a table: tostring (a string quoted)
    assert.are.equal(tostring(rp.zeros { 2 }), rp.inspect(rp.zeros { 2 }))
    assert.are.equal('"x"', rp.inspect("x"))
    assert.are.equal("3", rp.inspect(3))
    assert.are.equal("nil", rp.inspect(nil))
  end)

  it("reads tables raw and uses a table's __tostring", function()
    local trap = setmetatable({ 1 }, {
      __index = function() error("__index called") end,
      __pairs = function() error("__pairs called") end,
    })
    assert.are.equal("{1}", rp.inspect(trap))
    local obj = setmetatable({}, { __tostring = function() return "obj!" end })
    assert.are.equal("{obj!}", rp.inspect({ obj }))
    local bad = setmetatable({}, { __tostring = function() error("boom") end })
    assert.are.equal("{<table: __tostring failed>}", rp.inspect({ bad }))
  end)

  for _, case in ipairs {
    { 5, "options table expected, got integer" },
    { { bogus = 1 }, "unknown option 'bogus' (known: depth, items, width)" },
    { { depth = 0 }, "option 'depth' must be in 1..100, got 0" },
    { { width = 2.5 }, "option 'width' must be an integer, got 2.5" },
    { { items = "3" }, "option 'items' must be an integer, got string" },
  } do
    it("rejects bad options: " .. case[2], function()
      local ok, err = pcall(rp.inspect, {}, case[1])
      assert.is_false(ok)
      assert.truthy(err:find("bad argument #2 to 'rp.inspect' (" .. case[2] .. ")", 1, true), err)
    end)
  end
end)

describe("the REPL prints", function()
  it("one result per line (no tab between results)", function()
    local out, err, code = repl('rp.rope.angles(3, 4)\n1, "two", nil, {3}\n')
    assert.are.equal(0, code, err)
    assert.is_nil(out:find("\t", 1, true), out)
    local l = lines(out)
    assert.are.equal("[3 x 2]", l[4])
    assert.are.equal(" 0.0000  0.0000", l[5])
    assert.are.equal("[3 x 2]", l[8])
    assert.are.same({ "1", "two", "nil", "{3}" }, { table.unpack(l, 9, 12) })
  end)

  it("tables nested, with a depth limit and <cycle>", function()
    local out, err, code = repl('t = {1, 2, {a = 1, b = {c = {d = {e = {}}}}}, s = "x"}\n'
      .. "t.me = t\nt\n")
    assert.are.equal(0, code, err)
    assert.are.equal('{1, 2, {a = 1, b = {c = {d = {...}}}}, me = <cycle>, s = "x"}\n', out)
  end)

  it("tables as wide as COLUMNS when not on a terminal", function()
    local input = "t = {} for i = 1, 60 do t[i] = i * 1000 end\nt\n"
    local out = repl(input, "env COLUMNS=40")
    assert.is_true(#lines(out) > 5, out)
    for _, l in ipairs(lines(out)) do assert.is_true(#l <= 40, l) end
    local wide = repl(input, "env COLUMNS=200")
    for _, l in ipairs(lines(wide)) do assert.is_true(#l <= 200, l) end
    assert.is_true(#lines(wide) < #lines(out))
  end)

  it("tables as wide as the terminal (in a pseudo-terminal of 50 columns)", function()
    local input = h.tmpdir() .. "/input"
    h.write(input, "t = {} for i = 1, 60 do t[i] = i * 1000 end\nt\nos.exit(0)\n")
    -- script(1) runs the REPL on a pseudo-terminal; stty sets its size; COLUMNS is unset so the
    -- width can only come from the terminal
    local out = h.run("(cat " .. h.sh_quote(input) .. "; sleep 1) | env -u COLUMNS timeout 60 "
      .. "script -qec " .. h.sh_quote("stty cols 50 rows 24; " .. h.sh_quote(BIN)) .. " /dev/null")
    h.remove_tree((input:gsub("/input$", "")))
    out = out:gsub("\27%[[%d;?]*[%a]", ""):gsub("\r", "")
    local table_lines = {}
    for _, l in ipairs(lines(out)) do
      if l:match("^  %d") then table_lines[#table_lines + 1] = l end
    end
    assert.is_true(#table_lines >= 5, out)
    local longest = 0
    for _, l in ipairs(table_lines) do longest = math.max(longest, #l) end
    assert.is_true(longest <= 50 and longest > 40, "longest line " .. longest .. ":\n" .. out)
  end)
end)

describe("the REPL prints (issue 31)", function()
  it("a generator, a 1-D tensor, the parameters and the memory plan readably", function()
    local out, err, code = repl("rp.rng(1)\nrp.ones{3}\nm = rp.model{vocab = 5, d_model = 8, "
      .. "heads = 2, layers = 1, d_ff = 8, seq_len = 4, max_batch = 1}\nm:params()\n"
      .. "rp.model_memory(m:config())\n")
    assert.are.equal(0, code, err)
    local l = lines(out)
    assert.are.equal("roper.Rng (seed 1)", l[1]) -- was roper.Rng: 0x55d0...
    assert.are.equal(" 1  1  1", l[2])            -- was one value per line
    assert.are.equal("[3]", l[3])
    assert.truthy(l[4]:find("^17 parameter tensors, 565 values "), l[4]) -- was 17 + 17 entries cut
    assert.truthy(l[5]:find("^   1  embed%.weight +%[5 x 8%] +norm "), l[5])
    assert.truthy(l[21]:find("^  17  head%.bias +%[5%] +norm "), l[21])
    assert.truthy(l[22]:find("^{model = %d+ %([%d.]+ KiB%), optimiser = 4520 %(4%.4 KiB%), "
      .. "params = 565, available = %d+ %([%d.]+ [GMT]iB%)}$"), l[22]) -- was raw bytes
    assert.are.equal(22, #l)
  end)
end)

describe("piped input", function()
  it("errors give the line of the input, multi-line chunks and functions included", function()
    local out, err, code = repl("x = 1\ny = nil\n\nprint(y.z)\nfunction f()\n  return nil + 1\n"
      .. "end\nf()\nrp.ones{2, 3}[0]\nx\n")
    assert.are.equal(1, code)
    assert.are.equal("1\n", out) -- the session went on after the errors
    local msgs = {}
    for m in err:gmatch("(stdin:%d+: [^\n]*)") do msgs[#msgs + 1] = m end
    assert.are.same({
      "stdin:4: attempt to index a nil value (global 'y')",
      "stdin:4: in main chunk",
      "stdin:6: attempt to perform arithmetic on a nil value",
      "stdin:6: in function 'f'", -- called from line 8 as "return f()", a tail call
      "stdin:9: bad argument #2 to 'index' (index 0 out of range for dim 1 of [2 x 3]; dims and "
        .. "indices are 1-based (1 is the first, -1 the last))",
      "stdin:9: in main chunk" }, msgs)
    -- a syntax error names its line too
    _, err = repl("x = 1\n\nx = = 2\n")
    assert.truthy(err:find("^stdin:3: unexpected symbol near '='"), err)
  end)

  it("after line 10,000 the chunk names the line it starts at", function()
    local out, err, code = repl(("x = 1\n"):rep(10000) .. "x = 1 +\n  nil\nx\n")
    assert.are.equal(1, code)
    assert.are.equal("1\n", out)
    assert.truthy(err:find("^stdin %(from line 10001%):1: attempt to perform arithmetic on a nil "
      .. "value"), err)
  end)
end)

describe("leaving the REPL", function()
  local HOW = "exit() or quit() leaves, as Ctrl-D does (os.exit(code) with an exit status)"
  it("exit and quit alone say how to leave; exit() and quit() leave as Ctrl-D does", function()
    local out, err, code = repl("exit\nquit\nprint(1)\nexit()\nprint(2)\n")
    assert.are.equal(HOW .. "\n" .. HOW .. "\n1\n", out)
    assert.are.equal("", err)
    assert.are.equal(0, code)
    out, err, code = repl("quit()\nprint(2)\n")
    assert.are.same({ "", "", 0 }, { out, err, code })
    -- piped input that failed before still exits 1; exit(code) is os.exit(code)
    out, _, code = repl("error('x')\nexit()\nprint(2)\n")
    assert.are.same({ "", 1 }, { out, code })
    out, _, code = repl("exit(3)\nprint(2)\n")
    assert.are.same({ "", 3 }, { out, code })
  end)

  it("in a pseudo-terminal too, and a global exit of the user's is left alone", function()
    local out = h.run("(printf 'exit\\nprint(7 * 6)\\nquit()\\nprint(99)\\n'; sleep 1) | timeout 60 "
      .. "script -qec " .. h.sh_quote(h.sh_quote(BIN)) .. " /dev/null")
    out = out:gsub("\27%[[%d;?]*[%a]", ""):gsub("\r", "")
    assert.truthy(out:find("\n" .. HOW:gsub("%p", "%%%0") .. "\n"), out)
    assert.truthy(out:find("\n42\n"), out)
    assert.is_nil(out:find("\n99\n"), out)
    local o2, _, code = repl("exit = 5\nexit\n")
    assert.are.same({ "5\n", 0 }, { o2, code })
    -- not in scripts or -e: there the name is the user's
    o2 = h.run(h.sh_quote(BIN) .. " -e 'print(exit, quit)'")
    assert.are.equal("nil\tnil\n", o2)
  end)
end)

describe("roper -e", function()
  local function e(...)
    local args = {}
    for i = 1, select("#", ...) do args[i] = "-e " .. h.sh_quote((select(i, ...))) end
    return h.run(h.sh_quote(BIN) .. " " .. table.concat(args, " "))
  end

  it("prints the values of an expression as the REPL does", function()
    assert.are.same({ "2.0\n", "", 0 }, { e("rp.ones{2}:sum()") }) -- lua5.4 -e prints nothing
    assert.are.same({ " 1  1\n[2]\nnil\ntwo\n", "", 0 }, { e("rp.ones{2}, nil, 'two'") })
    assert.are.same({ "{1, 2}\n", "", 0 }, { e("{1, 2}") })
  end)

  it("runs a statement as lua5.4 -e does, printing nothing of its own", function()
    assert.are.same({ "3\n", "", 0 }, { e("x = 1", "print(x + 2)") })
    assert.are.same({ "", "", 0 }, { e("local t = {} t[1] = 2") })
    local out, err, code = e("print(1)", "error('boom')", "print(2)")
    assert.are.equal("1\n", out)
    assert.truthy(err:find("roper: (command line):1: boom\n", 1, true), err)
    assert.are.equal(1, code)
  end)
end)

describe("pictures in the REPL", function()
  it("fill the terminal's width (in a pseudo-terminal of 100 columns)", function()
    local d = h.tmpdir()
    h.write(d .. "/input", "rp.plot({1, 3, 2})\nos.exit(0)\n")
    local out = h.run("(cat " .. h.sh_quote(d .. "/input") .. "; sleep 1) | env -u COLUMNS -u "
      .. "ROPER_PLOT_DIR -u ROPER_PLOT_TERMINAL timeout 60 script -qec " .. h.sh_quote("stty cols 100 "
      .. "rows 30; " .. h.sh_quote(BIN)) .. " /dev/null")
    h.remove_tree(d)
    out = out:gsub("\27%[[%d;?]*[%a]", ""):gsub("\r", "")
    local widest = 0
    for _, l in ipairs(lines(out)) do
      if l:find("+---", 1, true) then widest = math.max(widest, #(l:gsub("%s+$", ""))) end
    end
    assert.is_true(widest > 90 and widest <= 100, "widest frame line " .. widest .. ":\n" .. out)
  end)
end)

describe("help in the REPL", function()
  it("help(\"word\") searches the config keys, entries and topics", function()
    local out, err, code = repl('help("fraction_v")\n')
    assert.are.equal(0, code, err)
    assert.truthy(out:find("^Config key fraction_v %(number; default 1%)"), out)
    assert.truthy(out:find("\n  rp.attention(q, k, v[, opts]) -> out, att\n", 1, true), out)
  end)

  it("help says when nothing matched (and the session goes on, exit status 0)", function()
    local out, err, code = repl('help("xyzzy")\n?xyzzy\nprint("after")\n')
    assert.are.equal(0, code, err)
    local msg = "no help for 'xyzzy': no name or help text matches (rp.help() lists the topics)"
    assert.are.equal(msg .. "\n" .. msg .. "\nafter\n", out)
  end)

  it("?name is help for name: a value, a method of a variable, a search, the topics", function()
    local out, err, code = repl("?rp.zeros\n")
    assert.are.equal(0, code, err)
    assert.are.equal(rp.help(rp.zeros) .. "\n", out)
    out = repl("x = rp.zeros{2}\n?x:narrow\n  ? x.narrow  \n")
    assert.are.equal((rp.help(rp.Tensor.narrow) .. "\n"):rep(2), out)
    out = repl("?t:narrow\n") -- no variable t: the name is looked up as text
    assert.are.equal(rp.help("t:narrow") .. "\n", out)
    out = repl("?fraction_v\n")
    assert.are.equal(rp.help("fraction_v") .. "\n", out)
    out = repl("?rope\n?\n")
    assert.are.equal(rp.help("rope") .. "\n" .. rp.help() .. "\n", out)
  end)

  it("?name does not call anything: a call is looked up as text", function()
    local out, err, code = repl("called = false\nfunction f() called = true end\n?f()\ncalled\n")
    assert.are.equal(0, code, err)
    assert.truthy(out:find("no help for 'f()'", 1, true), out)
    assert.truthy(out:find("\nfalse\n$"), out)
  end)
end)

describe("the command line", function()
  local function run(args) return h.run(h.sh_quote(BIN) .. " " .. args) end

  it("the usage lists every one-letter option the parser accepts, -W included", function()
    local usage, err, code = run("-h")
    assert.are.same({ "", 0 }, { err, code })
    local listed, accepted = {}, {}
    for c in usage:gmatch("\n  %-(%a)[ ,]") do listed[#listed + 1] = c end
    -- every letter tried: a refused one says so before anything runs (-i, -v, -l and -e go on to
    -- the script x or run x; stdin is empty)
    for c in ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"):gmatch(".") do
      local _, e = run("-" .. c .. " x < /dev/null")
      if not e:find("unrecognized option", 1, true) then accepted[#accepted + 1] = c end
    end
    table.sort(listed)
    table.sort(accepted)
    assert.are.same(accepted, listed)
    assert.truthy(usage:find("\n  -W         turn warnings on\n", 1, true), usage)
    assert.are.same({ "Lua warning: x\n", 0 }, { select(2, run("-W -e 'warn(\"x\")'")) })
  end)

  for _, opt in ipairs { "--blas-env", "--blas-coretype", "--kernel" } do
    it(opt .. " with more arguments is refused as an unknown option", function()
      local usage = run("-h")
      for _, extra in ipairs { "x", "x y", "-e 1" } do
        local out, err, code = run(opt .. " " .. extra .. " < /dev/null")
        assert.are.same({ "", BIN .. ": unrecognized option or missing argument '" .. opt .. "'\n"
          .. usage, 1 }, { out, err, code })
      end
    end)
  end

  it("stdin that cannot be read (a folder) is an error, as it is for roper -", function()
    local msg = BIN .. ": cannot read stdin: Is a directory\n"
    assert.are.same({ "", msg, 1 }, { run("< /") })
    assert.are.same({ "", msg, 1 }, { run("- < /") })
  end)
end)

describe("a NUL byte in piped input", function()
  it("is part of the line, as in a file Lua compiles: no code after it is skipped", function()
    local d = h.tmpdir()
    -- the NUL ends no line: a syntax error, as lua5.4 gives for the same bytes in a file
    h.write(d .. "/in", '1\0error("hidden")\nprint("next")\n#"a\0b"\n')
    local out, err, code = h.run(h.sh_quote(BIN) .. " < " .. h.sh_quote(d .. "/in"))
    h.remove_tree(d)
    assert.are.same({ "next\n3\n", "stdin:1: unexpected symbol near '1'\n", 1 }, { out, err, code })
  end)
end)

describe("a __tostring that raises while the results print", function()
  local TB = "stack traceback:\n\t[C]: in function 'error'\n\t%s:1: in function <%s:1>\n"
    .. "\t[C]: in ?\n\t[C]: in ?\n"
  local BAD = 'setmetatable({}, {__tostring = function() error("boom") end})'
  it("gives the error and its traceback after one line that says what failed", function()
    local out, err, code = h.run(h.sh_quote(BIN) .. " -e " .. h.sh_quote(BAD))
    assert.are.same({ "", BIN .. ": error printing the results: (command line):1: boom\n"
      .. TB:format("(command line)", "(command line)"), 1 }, { out, err, code })
    out, err, code = repl(BAD .. "\nprint('on')\n")
    assert.are.same({ "on\n", "error printing the results: stdin:1: boom\n"
      .. TB:format("stdin", "stdin"), 1 }, { out, err, code })
  end)
end)

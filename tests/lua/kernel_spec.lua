-- The Jupyter kernel (python/roper_kernel, roper --kernel; docs/notebooks.md) driven through
-- jupyter_client as a notebook drives it: tests/kernel/kernel_test.py runs every case against one
-- kernel (a fresh one after a failure) and prints "ok NAME" or "FAIL NAME: why"; each case is one
-- test here. Needs Debian's python3-ipykernel and jupyter-client on /usr/bin/python3 (make test
-- installs them); every wait in it has a timeout, and the whole run is bounded by `timeout`.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"

local BIN, PY = h.BIN, h.PY

local CASES = { "kernel_info", "session_keeps_values", "prints_as_the_repl", "stdin_reads_nothing",
  "last_line_value",
  "tensor_html", "syntax_error", "runtime_error", "megabytes_of_print", "plot_inline",
  "plot_bad_data", "request_after_an_error", "request_before_an_error", "help_query", "complete",
  "inspect", "is_complete", "interrupt_loop", "interrupt_blas", "interrupt_shell", "oversized_cell",
  "roper_killed_mid_cell", "restart",
  "kernel_killed", "shutdown_removes_plots", "parent_gone_removes_plots" }

-- roper --kernel itself, without Jupyter: requests piped in, the replies (fd 3) read from a file.
local function kernel_session(requests, fd_env)
  local dir = h.tmpdir()
  h.write(dir .. "/in", requests)
  local out, err, code = h.run((fd_env or "") .. "timeout 60 " .. h.sh_quote(BIN) .. " --kernel < "
    .. h.sh_quote(dir .. "/in") .. " 3> " .. h.sh_quote(dir .. "/replies"))
  local replies = h.read(dir .. "/replies") or ""
  h.remove_tree(dir)
  return replies, out, err, code
end

local function req(verb, text, cursor)
  return ("%s %d%s\n%s"):format(verb, #text, cursor and (" " .. cursor) or "", text)
end

describe("roper --kernel", function()
  it("answers each request with one JSON line and prints what the cells print", function()
    local replies, out, err, code = kernel_session(req("execute", "print('hi')\nx = 20")
      .. req("execute", "x + 1, 'a\"b'") .. req("execute", "error('no')")
      .. req("execute", "x = = 1") .. req("complete", "y = rp.zer")
      .. req("inspect", "rp.ones{2}", 4) .. req("inspect", "  ", 1) .. req("is_complete", "do")
      .. req("is_complete", "x = )") .. req("is_complete", "x") .. req("execute", "io.read('a')")
      .. req("frobnicate", "execute 1\n2") .. req("execute", "x"))
    assert.are.equal(0, code, err)
    assert.are.equal("", err)
    assert.are.equal("hi\n", out)
    local help = h.run(h.sh_quote(BIN) .. " -e 'print(rp.help(rp.ones))'"):gsub("\n$", "")
    assert.are.same({
      '{"status":"ok","results":[]}',
      '{"status":"ok","results":[{"text":"21"},{"text":"a\\"b"}]}',
      '{"status":"error","kind":"runtime","message":"cell:1: no","traceback":"cell:1: no\\n'
        .. 'stack traceback:\\n\\t[C]: in function \'error\'\\n\\tcell:1: in main chunk\\n\\t[C]: in ?"}',
      '{"status":"error","kind":"syntax","message":"cell:1: unexpected symbol near \'=\'",'
        .. '"traceback":"cell:1: unexpected symbol near \'=\'"}',
      '{"status":"ok","start":4,"matches":["rp.zeros"]}',
      '{"status":"ok","found":true,"text":' .. require("cjson").encode(help):gsub("\\/", "/") .. '}',
      '{"status":"ok","found":false}',
      '{"status":"incomplete"}', '{"status":"invalid"}', '{"status":"complete"}',
      '{"status":"ok","results":[{"text":""}]}',
      '{"status":"error","kind":"protocol","message":"unknown request (execute, complete, inspect, is_complete)"}',
      '{"status":"ok","results":[{"text":"20"}]}',
    }, h.lines(replies))
  end)

  it("runs a cell as Lua reads it: a last line that continues the one above is not split off",
    function()
      local replies, _, err, code = kernel_session(req("execute", "a, b = 10, 3")
        .. req("execute", "d = a\n  - b") .. req("execute", "d")      -- d = a - b
        .. req("execute", "x = 1\nx") .. req("execute", "y = 5\ny + 1")  -- split: shown
        .. req("execute", "x = a\n(print)(1)")                         -- a(print)(1), as Lua
        .. req("execute", "f = tostring\ns = f\n'q'") .. req("execute", "s"))
      assert.are.equal(0, code, err)
      local r = h.lines(replies)
      assert.are.same({ '{"status":"ok","results":[]}', '{"status":"ok","results":[]}',
        '{"status":"ok","results":[{"text":"7"}]}', '{"status":"ok","results":[{"text":"1"}]}',
        '{"status":"ok","results":[{"text":"6"}]}' }, { table.unpack(r, 1, 5) })
      assert.truthy(r[6]:find("attempt to call a number value (global 'a')", 1, true), r[6])
      assert.are.same({ '{"status":"ok","results":[]}', '{"status":"ok","results":[{"text":"q"}]}' },
        { r[7], r[8] })
    end)

  it("compiles a cell whole: a NUL byte is part of it, not its end (as in a file Lua compiles)",
    function()
      local replies, out, err, code = kernel_session(req("execute", '1\0 error("hidden")')
        .. req("execute", 'x = 2\n#"a\0b\0c" + x') .. req("execute", "s = 'a\0b'\n#s"))
      assert.are.same({ "", "", 0 }, { out, err, code })
      assert.are.same({
        '{"status":"error","kind":"syntax","message":"cell:1: unexpected symbol near \'1\'",'
          .. '"traceback":"cell:1: unexpected symbol near \'1\'"}',
        '{"status":"ok","results":[{"text":"7"}]}', '{"status":"ok","results":[{"text":"3"}]}',
      }, h.lines(replies))
    end)

  it("gives a __tostring that raises as the error printing the results, with its traceback",
    function()
      local replies, out, err, code = kernel_session(req("execute",
        'setmetatable({}, {__tostring = function() error("boom") end})'))
      assert.are.same({ "", "", 0 }, { out, err, code })
      assert.are.same({ '{"status":"error","kind":"runtime","message":"error printing the '
        .. 'results: cell:1: boom","traceback":"error printing the results: cell:1: boom\\n'
        .. 'stack traceback:\\n\\t[C]: in function \'error\'\\n\\tcell:1: in function '
        .. '<cell:1>\\n\\t[C]: in ?\\n\\t[C]: in ?"}' }, h.lines(replies))
    end)

  -- frames: a refused request is skipped by its declared length (one reply), a header that
  -- declares no length ends the session (one reply); the text of a refused request is never read
  -- as requests
  local BAD_HEADER = '{"status":"error","kind":"protocol","message":"bad request header '
    .. '(expected \\"<verb> <bytes>[ <cursor>]\\"): the session ends"}'
  local ENDS = "roper --kernel: a request header without its length; the session ends\n"

  it("skips a request over 64 MiB by its declared length, running nothing hidden in it",
    function()
    local n = (64 << 20) + 1
    local hidden = req("execute", "print('ran')")
    local big = hidden .. ("x"):rep(n - 2 * #hidden) .. hidden
    local replies, out, err, code = kernel_session(("execute %d\n"):format(n) .. big
      .. req("execute", "1 + 1"))
    assert.are.equal(0, code, err)
    assert.are.equal("", out)
    assert.are.same({
      '{"status":"error","kind":"protocol","message":"a request of 67108865 bytes is refused (at '
        .. 'most 64 MiB; skipped)"}',
      '{"status":"ok","results":[{"text":"2"}]}',
    }, h.lines(replies))
  end)

  it("gives one reply to a long header and to one without a length, and then ends", function()
    -- a header of 300 bytes (cut at 255 by the old reader, its pieces read as requests)
    local replies, out, err, code = kernel_session("execute " .. ("0"):rep(290) .. "1\nx"
      .. req("execute", "print('ran')"))
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal(ENDS, err)
    assert.are.same({ '{"status":"error","kind":"protocol","message":"bad request header (longer '
      .. 'than 255 bytes): the session ends"}' }, h.lines(replies))
    for _, header in ipairs { "execute x", "execute -1", "execute", "execute  3", " execute 3",
      "execute 3 ", "execute 3 4 5", "execute 99999999999999999999999" } do
      replies, out, err, code = kernel_session(header .. "\n" .. req("execute", "print('ran')"))
      assert.are.equal(1, code, header)
      assert.are.equal("", out, header)
      assert.are.equal(ENDS, err, header)
      assert.are.same({ BAD_HEADER }, h.lines(replies), header)
    end
    -- leading zeros and a header of 100 bytes are still one request
    replies, _, err, code = kernel_session("execute " .. ("0"):rep(90) .. "5\n1 + 2"
      .. req("execute", "3"))
    assert.are.equal(0, code, err)
    assert.are.same({ '{"status":"ok","results":[{"text":"3"}]}',
      '{"status":"ok","results":[{"text":"3"}]}' }, h.lines(replies))
  end)

  it("completes and inspects a word of 400 KB without hanging (no name is that long)", function()
    -- the old inspect took about 5 s for a word of 40,000 characters, growing with the square: for
    -- this one, past the session's 60 s timeout (exit status 124)
    local word = ("a"):rep(400000)
    local cell = "s = " .. word .. " .. rp.ones"
    local replies, _, err, code = kernel_session(req("inspect", cell, 200000)
      .. req("complete", "x = " .. word) .. req("inspect", cell, #cell - 2))
    assert.are.equal(0, code, err)
    local lines = h.lines(replies)
    assert.are.equal(3, #lines)
    assert.are.equal('{"status":"ok","found":false}', lines[1])
    assert.are.equal('{"status":"ok","start":4,"matches":[]}', lines[2])
    assert.truthy(lines[3]:find('^{"status":"ok","found":true,"text":'), lines[3])
  end)

  it("ends cleanly at a cut request, and refuses a bad ROPER_KERNEL_FD", function()
    local replies, _, err, code = kernel_session("execute 100\nx = 1")
    assert.are.equal(0, code, err)
    assert.are.equal("", replies)
    replies, _, err, code = kernel_session(req("execute", "1"), "ROPER_KERNEL_FD=x ")
    assert.are.equal(1, code)
    assert.are.equal("roper --kernel: ROPER_KERNEL_FD must be a file descriptor, got x\n", err)
  end)
end)

describe("the Jupyter kernel", function()
  local results, out, err, code
  setup(function()
    out, err, code = h.run("timeout -k 10 300 " .. h.sh_quote(PY) .. " tests/kernel/kernel_test.py "
      .. h.sh_quote(BIN) .. " < /dev/null")
    results = {}
    for name, rest in out:gmatch("([%w_]+)[ :]*([^\n]*)\n") do
      if name == "ok" then results[rest] = "ok" elseif name == "FAIL" then
        local n, why = rest:match("^([%w_]+): (.*)$")
        if n then results[n] = why end
      end
    end
  end)

  it("runs every case of kernel_test.py and no other", function()
    local names = {}
    for n in pairs(results) do names[#names + 1] = n end
    table.sort(names)
    local want = {}
    for _, n in ipairs(CASES) do want[#want + 1] = n end
    table.sort(want)
    assert.are.same(want, names, "output:\n" .. out .. "\nstderr:\n" .. err)
  end)

  for _, name in ipairs(CASES) do
    it(name, function()
      assert.are.equal("ok", results[name], "stderr:\n" .. (err or ""):sub(-4000))
    end)
  end
end)

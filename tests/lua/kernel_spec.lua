-- The Jupyter kernel (python/roper_kernel, roper --kernel; docs/notebooks.md) driven through
-- jupyter_client as a notebook drives it: tests/kernel/kernel_test.py runs every case against one
-- kernel (a fresh one after a failure) and prints "ok NAME" or "FAIL NAME: why"; each case is one
-- test here. Needs Debian's python3-ipykernel and jupyter-client on /usr/bin/python3 (make test
-- installs them); every wait in it has a timeout, and the whole run is bounded by `timeout`.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"

local BIN = os.getenv("ROPER_BIN") or "build/roper"
local PY = os.getenv("ROPER_PYTHON") or "/usr/bin/python3"

local CASES = { "kernel_info", "session_keeps_values", "prints_as_the_repl", "stdin_reads_nothing",
  "last_line_value",
  "tensor_html", "syntax_error", "runtime_error", "megabytes_of_print", "plot_inline",
  "plot_bad_data", "help_query", "complete", "inspect", "is_complete", "interrupt_loop",
  "interrupt_blas", "roper_killed_mid_cell", "restart", "kernel_killed" }

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

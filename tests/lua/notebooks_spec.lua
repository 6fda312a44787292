-- The notebooks of notebooks/ (docs/notebooks.md): each is made anew from its markdown source and
-- executed on the roper kernel with nbclient (notebooks/make.py --check), which fails on any cell
-- error; the committed notebook must match what that gives (the cells' sources exactly, the
-- outputs' kinds and text with the numbers taken out). `make notebooks` writes them anew.
-- Needs Debian's python3-nbclient and python3-ipykernel (make test installs them). Under the
-- sanitizers (SANITIZE=1) the training notebook is left to the native suite: its 600 training
-- steps take minutes there, and the sanitized kernel still runs the other two.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"

local BIN = h.BIN
local PY = os.getenv("ROPER_PYTHON") or "/usr/bin/python3"
local NOTEBOOKS = { "roper_identity", "training", "tutorial" }
local SLOW = { training = os.getenv("SANITIZE") == "1" }
local run_names = {}
for _, n in ipairs(NOTEBOOKS) do
  if not SLOW[n] then run_names[#run_names + 1] = n end
end

describe("the notebooks", function()
  local out, err, code
  setup(function()
    out, err, code = h.run("timeout -k 10 900 " .. h.sh_quote(PY) .. " notebooks/make.py --check --bin "
      .. h.sh_quote(BIN) .. " " .. table.concat(run_names, " ") .. " < /dev/null")
  end)

  for _, name in ipairs(NOTEBOOKS) do
    it(name .. " runs without an error and is current", function()
      if SLOW[name] then
        pending("under the sanitizers the training notebook is left to the native suite")
        return
      end
      assert.is_truthy(out:match("\ncurrent " .. name .. " %(") or out:match("^current " .. name .. " %("),
        "output:\n" .. out .. "\nstderr:\n" .. err:sub(-6000))
    end)
  end

  it("are every notebook of notebooks/, and make.py says so with its exit status", function()
    local found = {}
    for f in io.popen("ls notebooks"):lines() do
      local n = f:match("^(.*)%.ipynb$")
      if n then found[#found + 1] = n end
    end
    table.sort(found)
    assert.are.same(NOTEBOOKS, found)
    assert.are.equal(0, code, out .. err:sub(-3000))
  end)
end)

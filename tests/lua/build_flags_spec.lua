-- The build folder records the compiler and flags it was built with ($(BUILD)/flags, Makefile):
-- make with another MARCH, PORTABLE or SANITIZE (the folder given with BUILD=, as check-build
-- gives it) compiles again what the folder holds, and make with the same flags compiles nothing.
-- One small object in a temporary build folder, so the spec stays short.
local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local lfs = require "lfs"

local ROOT = lfs.currentdir()
local SRC = "core/sys/status.c"

-- make of SRC's object in the tree, apart from the make that runs the tests (its jobserver and
-- command-line variables are not ours), with MARCH=x86-64-v2 and neither PORTABLE nor SANITIZE
-- unless `set` ("NAME=value") says otherwise: stdout and stderr together
local function make(build, set)
  local vars = {MARCH = "x86-64-v2", PORTABLE = "", SANITIZE = ""}
  local name, value = set:match("^(%w+)=(.*)$")
  vars[name] = value
  local args = "MARCH=" .. vars.MARCH .. " PORTABLE=" .. vars.PORTABLE .. " SANITIZE="
    .. vars.SANITIZE
  local out, ok, code = h.run_merged("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make "
    .. "--no-print-directory -C " .. h.sh_quote(ROOT) .. " BUILD=" .. h.sh_quote(build) .. " "
    .. args .. " " .. h.sh_quote(build .. "/obj/" .. SRC:gsub("%.c$", ".o")))
  assert(ok, "make " .. args .. " failed (" .. tostring(code) .. "):\n" .. out)
  return out
end

-- the compile line of SRC in make's output, or nil
local function compiled(out)
  for line in out:gmatch("[^\n]+") do
    if line:find(" -c " .. SRC .. " ", 1, true) then return line end
  end
end

describe("the build folder's flags", function()
  it("a change of MARCH, PORTABLE or SANITIZE compiles the folder again, the same flags nothing",
    function()
      local build = h.tmpname()
      os.remove(build)
      finally(function() os.execute("rm -rf " .. h.sh_quote(build)) end)
      local changed = build .. "/flags: the compiler or its flags changed, so " .. build
        .. " is compiled again"

      local out = make(build, "MARCH=x86-64-v2")
      local line = compiled(out)
      assert.is_truthy(line, out)
      assert.is_truthy(line:find(" -march=x86-64-v2 ", 1, true), line)
      assert.is_falsy(out:find(changed, 1, true), "a new folder is not a change")
      local flags = h.read(build .. "/flags")
      assert.is_truthy(flags:find("\nCFLAGS [^\n]* %-march=x86%-64%-v2 "), flags)

      out = make(build, "MARCH=x86-64-v2")
      assert.is_nil(compiled(out), out)

      -- the objects made for x86-64-v2 are not kept for another target
      for _, c in ipairs({
        {"MARCH=x86-64-v3", " -march=x86-64-v3 "},
        {"PORTABLE=1", " -DRP_PORTABLE=1 "},
        {"SANITIZE=1", " -fsanitize=address,undefined "},
      }) do
        out = make(build, c[1])
        line = compiled(out)
        assert.is_truthy(line, c[1] .. ":\n" .. out)
        assert.is_truthy(line:find(c[2], 1, true), line)
        assert.is_truthy(out:find(changed, 1, true), out)
        flags = h.read(build .. "/flags")
        assert.is_truthy(flags:find(c[2], 1, true), flags)
        out = make(build, c[1])
        assert.is_nil(compiled(out), c[1] .. " again:\n" .. out)
      end
      assert.is_nil(lfs.attributes(build .. "/flags.new"), "no flags.new left behind")
    end)
end)

-- tests/lua/helpers.lua itself, where a slip would pass unseen: the temporary paths it gives
-- (h.tmpdir, h.tmpname) are gone once busted is done with a spec, also one whose test failed
-- midway (a busted run of a stand-in spec, the roper module stubbed out).

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"
local lfs = require "lfs"

local HELPERS_DIR = dir:sub(1, 1) == "/" and dir or lfs.currentdir() .. "/" .. dir

describe("the specs' temporary paths", function()
  it("are removed after a spec that fails midway, a folder with a file in it included",
    function()
    local work = h.tmpdir()
    finally(function() h.remove_tree(work) end)
    h.write(work .. "/leaves_spec.lua", ([[
package.path = %q .. "?.lua;" .. package.path
package.loaded.roper = {}
local h = require "helpers"
it("fails midway", function()
  local d, f = h.tmpdir(), h.tmpname()
  local out = assert(io.open(d .. "/x", "w"))
  out:write("x")
  out:close()
  print("PATHS " .. d .. " " .. f)
  assert(io.open(f) and io.open(d .. "/x"))
  error("on purpose")
end)
]]):format(HELPERS_DIR))
    local out, err, code = h.run("cd " .. h.sh_quote(work)
      .. " && lua5.4 /usr/bin/busted -o plainTerminal leaves_spec.lua")
    assert.are_not.equal(0, code)
    assert.truthy(out:find("on purpose", 1, true), out .. err)
    local d, f = out:match("PATHS (%S+) (%S+)")
    assert.truthy(d, out .. err)
    assert.is_nil(lfs.attributes(d), d .. " is left behind")
    assert.is_nil(lfs.attributes(f), f .. " is left behind")
  end)
end)

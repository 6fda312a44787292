-- Argument errors of the module's Lua parts (rp.eval, rp.experiment, printing), in the form of
-- the C functions' errors: "bad argument #2 to 'rp.eval.loss' (message)", positioned at the
-- user's call. Shared through the private `internals` table:
--   internals.argerror(fname, arg, msg)   raises it
--   internals.user_level()                the level (for error) of the first function outside
--                                         the module's Lua parts, seen from user_level's caller
--   internals.inner(msg)                  the text of a C function's "bad argument ... (text)"
--
-- Called by luaopen_roper as chunk(rp, internals).
local _, internals = ...

-- The module's Lua parts run as chunks named "@bindings/lua/<file>".
local function inside(source)
  return source:sub(1, #"@bindings/lua/") == "@bindings/lua/"
end

function internals.user_level()
  local lvl = 2
  while true do
    local info = debug.getinfo(lvl + 1, "S")
    if info == nil then return 0 end
    if not inside(info.source) then return lvl end
    lvl = lvl + 1
  end
end

function internals.argerror(fname, arg, msg)
  error(("bad argument #%d to '%s' (%s)"):format(arg, fname, msg), internals.user_level())
end

function internals.inner(msg)
  msg = tostring(msg):gsub("^[^ ]-:%d+: ", "", 1)
  return msg:match("^bad argument #%d+ to '[^']*' %((.*)%)$") or msg
end

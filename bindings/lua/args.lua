-- roper.args: argument errors and checks of the module's Lua parts (rp.eval, rp.experiment,
-- printing, plots), in the form of the C functions' errors: "bad argument #2 to 'rp.eval.loss'
-- (message)", positioned at the user's call. Exports:
--   argerror(fname, arg, msg)   raises it
--   user_level()                the level (for error) of the first function outside the
--                               module's Lua parts, seen from user_level's caller
--   inner(msg)                  the text of a C function's "bad argument ... (text)"
--   describe(v)                 a value for messages: a short string quoted, a number, a
--                               userdata's type name, else the type
--   check_opts(fname, arg, opts, known)                 an options table checked and copied
--   opt_int(fname, arg, opts, key, def, lo, hi), opt_number(fname, arg, opts, key, def),
--   opt_enum(fname, arg, opts, key, names, def)         one option read and checked
local M = {}

-- The module's Lua parts run as chunks named "@bindings/lua/<path>" (bindings/roper.c).
local function inside(source)
  return source:sub(1, #"@bindings/lua/") == "@bindings/lua/"
end

function M.user_level()
  local lvl = 2
  while true do
    local info = debug.getinfo(lvl + 1, "S")
    if info == nil then return 0 end
    if not inside(info.source) then return lvl end
    lvl = lvl + 1
  end
end

function M.argerror(fname, arg, msg)
  error(("bad argument #%d to '%s' (%s)"):format(arg, fname, msg), M.user_level())
end

function M.inner(msg)
  msg = tostring(msg):gsub("^[^ ]-:%d+: ", "", 1)
  return msg:match("^bad argument #%d+ to '[^']*' %((.*)%)$") or msg
end

local argerror = M.argerror

local function describe(v)
  if type(v) == "string" then return #v <= 40 and ('string "' .. v .. '"') or "string" end
  -- (a NaN as "nan": the sign printf gives a NaN differs between machines)
  if type(v) == "number" then return v ~= v and "nan" or tostring(v) end
  local mt = getmetatable(v)
  if type(v) == "userdata" and type(mt) == "table" and type(mt.__name) == "string" then
    return mt.__name
  end
  return type(v)
end
M.describe = describe

-- Checks the options table (nil or a table with only known string keys); returns a plain copy
-- of its entries, so that later reads run no metamethod of the caller's table.
local function check_opts(fname, arg, opts, known)
  if opts == nil then return {} end
  if type(opts) ~= "table" then argerror(fname, arg, "options table expected, got " .. describe(opts)) end
  local set = {}
  for _, k in ipairs(known) do set[k] = true end
  local copy = {}
  for k, v in next, opts do
    if type(k) ~= "string" then
      argerror(fname, arg, "option names must be strings, got " .. describe(k))
    end
    if not set[k] then
      argerror(fname, arg, ("unknown option '%s' (known: %s)"):format(k, table.concat(known, ", ")))
    end
    copy[k] = v
  end
  return copy
end

-- Raises when arguments follow the last one a function takes (...: those after it, from position
-- arg), in lrp_checkend's words: "unexpected argument after <last> (<the first of them>)".
local function check_end(fname, arg, last, ...)
  if select("#", ...) > 0 then
    argerror(fname, arg, ("unexpected argument after %s (%s)"):format(last, describe((...))))
  end
end

-- v as an integer when it is one (a float with an integral value within 2^53 too: JSON numbers
-- and 2^30 come as floats), else nil.
local function integral(v)
  if math.type(v) == "float" and v == math.floor(v) and v >= -2^53 and v <= 2^53 then
    return math.tointeger(v)
  end
  return math.type(v) == "integer" and v or nil
end

-- (a value out of range is shown as given, 0.0 as 0.0: the C readers' lrp_describe does so)
local function opt_int(fname, arg, opts, key, def, lo, hi)
  local given = opts[key]
  if given == nil then return def end
  local v = integral(given) or given
  if math.type(v) ~= "integer" then
    argerror(fname, arg, ("option '%s' must be an integer, got %s"):format(key, describe(v)))
  end
  if (lo and v < lo) or (hi and v > hi) then
    local range = hi and ("in %d..%d"):format(lo, hi) or (">= " .. lo)
    argerror(fname, arg, ("option '%s' must be %s, got %s"):format(key, range, describe(given)))
  end
  return v
end

local function opt_number(fname, arg, opts, key, def)
  local v = opts[key]
  if v == nil then return def end
  if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then
    argerror(fname, arg, ("option '%s' must be a finite number, got %s"):format(key, describe(v)))
  end
  return v
end

local function opt_enum(fname, arg, opts, key, names, def)
  local v = opts[key]
  if v == nil then return def end
  for _, n in ipairs(names) do
    if v == n then return v end
  end
  local quoted = {}
  for i, n in ipairs(names) do quoted[i] = '"' .. n .. '"' end
  argerror(fname, arg, ("option '%s' must be one of %s, got %s"):format(key,
    table.concat(quoted, ", "), describe(v)))
end

M.integral = integral
M.check_opts, M.opt_int, M.opt_number, M.opt_enum = check_opts, opt_int, opt_number, opt_enum
M.check_end = check_end

return M

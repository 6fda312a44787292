-- roper.print: __tostring for roper.Tensor, torch7 style (and below: rp.inspect, and __tostring
-- for m:params(), m:grads() and rp.model_memory's tables); exports layout and shape_str (for roper.html).
--
-- A tensor's output: the values (one format for the whole
-- tensor: integers without decimals, otherwise 4 decimals, with a common scale line such as
-- "1e-03 *" when the magnitudes call for one, and "%11.4e" when they span too widely), then a last
-- line with the shape, "[2 x 3]". 1-D tensors print as a row, wrapped at 80 columns; tensors of
-- more than 2 dims print their 2-D slices, each headed "(1,1,.,.) = ". Big tensors are cut with
-- "...": at most 40 values of a 1-D tensor, 20 rows x 10 columns per slice and 10 slices.
local require = ...
local rp = require "roper"
local internals = require "roper.internals"
local args = require "roper.args"
local mt = internals.Tensor_mt
local is_live = internals.is_live

local MAX_ROWS, MAX_COLS, MAX_SLICES, MAX_VALUES, LINE_WIDTH = 20, 10, 10, 40, 80

local floor, abs, log10 = math.floor, math.abs, function(x) return math.log(x, 10) end
local huge = math.huge

-- Indices of 1..n to show: all of them, or the first and last max/2 with false marking the gap.
local function pick(n, max)
  local r = {}
  if n <= max then
    for i = 1, n do r[#r + 1] = i end
    return r
  end
  local head = max // 2
  for i = 1, head do r[#r + 1] = i end
  r[#r + 1] = false
  for i = n - (max - head) + 1, n do r[#r + 1] = i end
  return r
end

local function shape_str(sz)
  return "[" .. table.concat(sz, " x ") .. "]"
end

local function is_finite(v) return v == v and v ~= huge and v ~= -huge end

-- The printing mode for the values vals (torch7's rules): returns a function that formats one
-- value (without padding) and the common scale (nil when none).
local function printformat(vals)
  local int_mode, any = true, false
  local amin, amax = huge, 0
  for _, v in ipairs(vals) do
    if is_finite(v) then
      any = true
      if v ~= floor(v) then int_mode = false end
      local a = abs(v)
      if a < amin then amin = a end
      if a > amax then amax = a end
    end
  end
  local exp_min = (any and amin ~= 0) and floor(log10(amin)) + 1 or 1
  local exp_max = (any and amax ~= 0) and floor(log10(amax)) + 1 or 1
  local fmt, scale
  if int_mode then
    fmt = exp_max > 9 and "%.4e" or "%.0f"
  elseif exp_max - exp_min > 4 then
    fmt = "%.4e"
  elseif exp_max > 5 or exp_max < 0 then
    fmt, scale = "%.4f", 10.0 ^ (exp_max - 1)
  else
    fmt = "%.4f"
  end
  if fmt == "%.4f" then
    -- a nonzero value that 4 decimals would show as 0.0000 (beside a 0, or just past 4 orders
    -- below the largest) makes the format %.4e, so that no value is shown as what it is not
    for _, v in ipairs(vals) do
      if v ~= 0 and is_finite(v) and abs(scale and v / scale or v) < 0.00005 then
        fmt, scale = "%.4e", nil
        break
      end
    end
  end
  local function format(v)
    if v ~= v then return "nan" end
    if v == huge then return "inf" end
    if v == -huge then return "-inf" end
    if scale then v = v / scale end
    local s = string.format(fmt, v)
    if s:match("^%-0%.?0*$") or s:match("^%-0%.0+e%+00$") then s = s:sub(2) end -- no "-0"
    return s
  end
  return format, scale
end

-- The 2-D blocks to print: each has rows and cols (pick lists), get(r, c) and a header.
local function plan(t, sz)
  local nd = #sz
  if nd == 0 then
    local v = t:item()
    return { { rows = { 1 }, cols = { 1 }, get = function() return v end } }
  elseif nd == 1 then
    return { { rows = { 1 }, cols = pick(sz[1], MAX_VALUES), wrap = true,
               get = function(_, c) return t[c] end } }
  elseif nd == 2 then
    return { { rows = pick(sz[1], MAX_ROWS), cols = pick(sz[2], MAX_COLS),
               get = function(r, c) return t:get(r, c) end } }
  end
  local lead = 1
  for d = 1, nd - 2 do lead = lead * sz[d] end
  local blocks = {}
  for _, s in ipairs(pick(lead, MAX_SLICES)) do
    if not s then
      blocks[#blocks + 1] = false
    else
      local idx, rem = {}, s - 1
      for d = nd - 2, 1, -1 do
        idx[d] = rem % sz[d] + 1
        rem = rem // sz[d]
      end
      local parts = {}
      for d = 1, nd - 2 do parts[d] = tostring(idx[d]) end
      local header = "(" .. table.concat(parts, ",") .. ",.,.) = "
      local n = nd - 2
      blocks[#blocks + 1] = {
        header = header,
        rows = pick(sz[nd - 1], MAX_ROWS),
        cols = pick(sz[nd], MAX_COLS),
        get = function(r, c)
          idx[n + 1], idx[n + 2] = r, c
          return t:get(table.unpack(idx, 1, n + 2))
        end,
      }
    end
  end
  return blocks
end

local render

-- __tostring: the text of a live tensor; a tensor released before or while it is rendered (a
-- finalizer may run at any allocation) prints as released.
local function tensor_tostring(t)
  if not rp.is_tensor(t) then
    error(("bad argument #1 to 'roper.Tensor.__tostring' (roper.Tensor expected, got %s)"):format(
      type(t)), 2)
  end
  local ok, s = pcall(render, t)
  if ok then return s end
  if not is_live(t) then return "roper.Tensor (released)" end
  error(s, 0)
end

-- The cells shown of a live tensor with values: the blocks of plan() with b.vals[i][j] the text
-- of each shown value, the common scale (nil when none) and the width of the widest cell (with
-- room for a sign). render lays them out as text, rp.tohtml (html.lua) as an HTML table.
local function layout(t, sz)
  local blocks = plan(t, sz)

  -- read the shown values once
  local all = {}
  for _, b in ipairs(blocks) do
    if b then
      b.vals = {}
      for i, r in ipairs(b.rows) do
        if r then
          local row = {}
          for j, c in ipairs(b.cols) do
            if c then
              local v = b.get(r, c)
              row[j] = v
              all[#all + 1] = v
            end
          end
          b.vals[i] = row
        end
      end
    end
  end
  local format, scale = printformat(all)
  -- one width for every cell, with room for a sign
  local width = 1
  for _, b in ipairs(blocks) do
    if b then
      for i in pairs(b.vals) do
        for j, v in pairs(b.vals[i]) do
          local str = format(v)
          b.vals[i][j] = str
          local w = #str + (str:sub(1, 1) == "-" and 0 or 1)
          if w > width then width = w end
        end
      end
    end
  end
  return blocks, scale, width
end

function render(t)
  if not is_live(t) then return "roper.Tensor (released)" end
  local sz = t:shape()
  local shape_line = shape_str(sz)
  if t:numel() == 0 then return shape_line end
  local blocks, scale, width = layout(t, sz)

  local lines = {}
  local function add(s) lines[#lines + 1] = s end
  local gap = string.rep(" ", math.max(width - 3, 0)) .. "..."
  for bi, b in ipairs(blocks) do
    if not b then
      add("(...)")
      add("")
    else
      if b.header then add(b.header) end
      if scale then add(string.format("%.0e *", scale)) end
      -- a 1-D tensor's one row wraps: as many cells per line as fit in LINE_WIDTH
      local per_line = b.wrap and math.max(1, (LINE_WIDTH + 1) // (width + 1)) or #b.cols
      for i, r in ipairs(b.rows) do
        if not r then
          add(gap)
        else
          local cells = {}
          for j, c in ipairs(b.cols) do
            local str = c and b.vals[i][j] or "..."
            cells[#cells + 1] = string.rep(" ", width - #str) .. str
            if #cells == per_line then
              add(table.concat(cells, " "))
              cells = {}
            end
          end
          if #cells > 0 then add(table.concat(cells, " ")) end
        end
      end
      if b.header and bi < #blocks then add("") end
    end
  end
  add(shape_line)
  return table.concat(lines, "\n")
end

mt.__tostring = tensor_tostring

-- ---------------------------------------------------------------- rp.inspect: any value as text
-- Tables print as Lua constructors, nested: keys sorted (the sequence part first, in order, then
-- numbers, strings and the rest), on one line when that fits in `width` columns, else one entry
-- per line indented by two spaces. Tables deeper than `depth` print as {...}; a table that
-- contains itself (directly or further down) prints <cycle> where it recurs; after `items`
-- entries a table ends with "... (N more)". Inside a table a tensor is "roper.Tensor [2 x 3]"
-- and other values print as tostring gives them (first line only). Metamethods are not called
-- to walk a table (raw access only); a value's __tostring is called, protected.
local argerror, describe_type = args.argerror, function(v)
  return math.type(v) or type(v)
end

local KEYWORDS = {}
for w in ([[and break do else elseif end false for function goto if in local nil not or repeat
  return then true until while]]):gmatch("%a+") do KEYWORDS[w] = true end

local ESCAPES = { ["\n"] = "\\n", ["\t"] = "\\t", ["\r"] = "\\r", ['"'] = '\\"', ["\\"] = "\\\\" }
local function quote(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return ESCAPES[c] or ("\\%03d"):format(c:byte())
  end) .. '"'
end

-- One line for a value that is not walked (a scalar, a function, a userdata, a table with
-- __tostring).
local function leaf(v)
  local tv = type(v)
  if tv == "string" then return quote(v) end
  -- (a NaN as "nan", as the messages write it: printf's sign of a NaN differs between machines)
  if tv == "number" and v ~= v then return "nan" end
  if tv == "number" or tv == "boolean" or tv == "nil" then return tostring(v) end
  if rp.is_tensor(v) then
    if not is_live(v) then return "roper.Tensor (released)" end
    local ok, sz = pcall(v.shape, v)
    return ok and ("roper.Tensor " .. shape_str(sz)) or "roper.Tensor"
  end
  local ok, s = pcall(tostring, v)
  if not ok or type(s) ~= "string" then return "<" .. type(v) .. ": __tostring failed>" end
  local first = s:match("^[^\n]*")
  return first == s and s or first .. " ..."
end

-- Sorts keys: integers and other numbers first (ascending), then strings, then the rest (by type
-- name and text).
local KEY_RANK = { number = 1, string = 2 }
local function key_less(a, b)
  local ra, rb = KEY_RANK[type(a)] or 3, KEY_RANK[type(b)] or 3
  if ra ~= rb then return ra < rb end
  if ra < 3 then
    if a ~= a then return false end -- a NaN key cannot exist; kept for safety
    return a < b
  end
  local sa, sb = type(a) .. leaf(a), type(b) .. leaf(b)
  return sa < sb
end

local function is_walked(v)
  if type(v) ~= "table" then return false end
  local m = getmetatable(v)
  return not (type(m) == "table" and rawget(m, "__tostring") ~= nil)
end

local function inspect_value(v, o, indent, level, path)
  if not is_walked(v) then return leaf(v) end
  if path[v] then return "<cycle>" end
  if next(v) == nil then return "{}" end
  if level > o.depth then return "{...}" end
  path[v] = true
  local entries = {}
  local n = 0
  while rawget(v, n + 1) ~= nil do n = n + 1 end
  local keys = {}
  for k in next, v do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  table.sort(keys, key_less)
  local total = n + #keys
  local inner = indent .. "  "
  local shown = math.min(total, o.items)
  for i = 1, shown do
    local k, val
    if i <= n then
      val = rawget(v, i)
    else
      k = keys[i - n]
      val = rawget(v, k)
    end
    local text = inspect_value(val, o, inner, level + 1, path)
    if k ~= nil then
      local name
      if type(k) == "string" and k:match("^[%a_][%w_]*$") and not KEYWORDS[k] then
        name = k
      else
        name = "[" .. (is_walked(k) and "table" or leaf(k)) .. "]"
      end
      text = name .. " = " .. text
    end
    entries[#entries + 1] = text
  end
  if total > shown then entries[#entries + 1] = ("... (%d more)"):format(total - shown) end
  path[v] = nil
  local one = "{" .. table.concat(entries, ", ") .. "}"
  if #indent + #one <= o.width and not one:find("\n", 1, true) then return one end
  -- one entry per line, but the one-line items of the sequence part fill their lines
  local lines, line = {}, nil
  for i, e in ipairs(entries) do
    local packable = i <= math.min(n, shown) and not e:find("\n", 1, true)
    if packable and line and #inner + #line + 2 + #e + 1 <= o.width then
      line = line .. ", " .. e
    else
      if line then lines[#lines + 1] = line end
      line = e
      if not packable then
        lines[#lines + 1] = line
        line = nil
      end
    end
  end
  if line then lines[#lines + 1] = line end
  return "{\n" .. inner .. table.concat(lines, ",\n" .. inner) .. "\n" .. indent .. "}"
end

local INSPECT_OPTS = { depth = { 1, 100 }, width = { 10, 100000 }, items = { 1, 1000000 } }

-- rp.inspect(v[, opts]) -> string: see the entry "rp.inspect" in docs/lua_api.md.
function rp.inspect(v, opts)
  local fname = "rp.inspect"
  local o = { depth = 4, width = 80, items = 50 }
  if opts ~= nil then
    if type(opts) ~= "table" then
      argerror(fname, 2, "options table expected, got " .. describe_type(opts))
    end
    for k, val in next, opts do
      local range = INSPECT_OPTS[k]
      if not range then
        argerror(fname, 2, ("unknown option '%s' (known: depth, items, width)"):format(
          type(k) == "string" and k or describe_type(k)))
      end
      if math.type(val) ~= "integer" and not (math.type(val) == "float"
          and val == math.floor(val) and math.abs(val) < 2^53) then
        argerror(fname, 2, ("option '%s' must be an integer, got %s"):format(k,
          type(val) == "number" and (val ~= val and "nan" or tostring(val))
            or describe_type(val)))
      end
      val = math.tointeger(val)
      if val < range[1] or val > range[2] then
        argerror(fname, 2, ("option '%s' must be in %d..%d, got %d"):format(k, range[1], range[2],
          val))
      end
      o[k] = val
    end
  end
  if not is_walked(v) then
    if type(v) == "string" then return quote(v) end
    if rp.is_tensor(v) then return tostring(v) end
    local ok, s = pcall(tostring, v)
    if ok and type(s) == "string" then return s end
    return leaf(v)
  end
  return inspect_value(v, o, "", 1, {})
end

-- ---------------------------------------------------------------- result tables that print
-- m:params() and m:grads() print one line per tensor (index, name, shape, norm) under a line with
-- the counts; rp.model_memory(cfg) prints its fields with the bytes also in KiB/MiB/GiB. The
-- tables stay plain tables (raw fields); only their metatables' __tostring is set here.

-- 596357 -> "596,357"
local function grouped(n)
  local s = ("%d"):format(n)
  local head, digits = s:match("^(-?)(%d+)$")
  digits = digits:reverse():gsub("(%d%d%d)", "%1,"):reverse():gsub("^,", "")
  return head .. digits
end

local function tensor_list_tostring(t, what)
  local rows, wname, wshape, values = {}, 0, 0, 0
  for i = 1, rawlen(t) do
    local e = rawget(t, i)
    local name, x = type(e) == "table" and rawget(e, "name"), type(e) == "table" and rawget(e, "tensor")
    local shape, norm = "?", ""
    -- a tensor released before or while the table prints (a finalizer) prints as released
    local ok, sz, n, nrm = false, nil, nil, nil
    if rp.is_tensor(x) then ok, sz, n, nrm = pcall(function() return x:shape(), x:numel(), x:norm() end) end
    if ok then
      shape, values, norm = shape_str(sz), values + n, ("norm %.4g"):format(nrm)
    elseif rp.is_tensor(x) then
      shape = "(released)"
    end
    name = tostring(name)
    rows[i] = { name, shape, norm }
    wname, wshape = math.max(wname, #name), math.max(wshape, #shape)
  end
  local lines = { ("%d %s tensors, %s values (t[i] = {name =, tensor =}, t[name] = tensor):")
    :format(#rows, what, grouped(values)) }
  local wi = #tostring(#rows)
  for i, r in ipairs(rows) do
    lines[#lines + 1] = ("  %" .. wi .. "d  %-" .. wname .. "s  %-" .. wshape .. "s  %s"):format(
      i, r[1], r[2], r[3]):gsub("%s+$", "")
  end
  return table.concat(lines, "\n")
end

internals.Params_mt.__tostring = function(t) return tensor_list_tostring(t, "parameter") end
internals.Grads_mt.__tostring = function(t) return tensor_list_tostring(t, "gradient") end

-- 166330112 -> "166330112 (158.6 MiB)"
local function bytes_str(n)
  if math.type(n) ~= "integer" then return tostring(n) end
  local units, v, u = { "KiB", "MiB", "GiB", "TiB" }, n, nil
  for _, unit in ipairs(units) do
    if v < 1024 then break end
    v, u = v / 1024, unit
  end
  return u and ("%d (%.1f %s)"):format(n, v, u) or ("%d bytes"):format(n)
end

internals.Memory_mt.__tostring = function(t)
  local parts = {}
  for _, k in ipairs { "model", "optimiser", "params", "available" } do
    local v = rawget(t, k)
    if v ~= nil then
      parts[#parts + 1] = k .. " = " .. (k == "params" and grouped(v) or bytes_str(v))
    end
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

-- for roper.html (rp.tohtml): the cells of a tensor as render lays them out, and its shape line
return { layout = layout, shape_str = shape_str }

-- __tostring for roper.Tensor, torch7 style.
--
-- Called by luaopen_roper as chunk(rp, internals). Output: the values (one format for the whole
-- tensor: integers without decimals, otherwise 4 decimals, with a common scale line such as
-- "1e-03 *" when the magnitudes call for one, and "%11.4e" when they span too widely), then a last
-- line with the shape, "[2 x 3]". 1-D tensors print as a column; tensors of more than 2 dims print
-- their 2-D slices, each headed "(1,1,.,.) = ". Big tensors are cut with "...": at most 20 rows x
-- 10 columns per slice and 10 slices.
local rp, internals = ...
local mt = internals.Tensor_mt
local is_live = internals.is_live

local MAX_ROWS, MAX_COLS, MAX_SLICES = 20, 10, 10

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
    return { { rows = pick(sz[1], MAX_ROWS), cols = { 1 }, get = function(r) return t[r] end } }
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

function render(t)
  if not is_live(t) then return "roper.Tensor (released)" end
  local sz = t:shape()
  local shape_line = shape_str(sz)
  if t:numel() == 0 then return shape_line end
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
      for i, r in ipairs(b.rows) do
        if not r then
          add(gap)
        else
          local cells = {}
          for j, c in ipairs(b.cols) do
            local str = c and b.vals[i][j] or "..."
            cells[#cells + 1] = string.rep(" ", width - #str) .. str
          end
          add(table.concat(cells, " "))
        end
      end
      if b.header and bi < #blocks then add("") end
    end
  end
  add(shape_line)
  return table.concat(lines, "\n")
end

mt.__tostring = tensor_tostring

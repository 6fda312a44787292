-- A SentencePiece .model file (a serialized ModelProto of sentencepiece_model.proto) as a tree
-- that the file fuzzer (tests/fuzz/files.lua) edits and writes again, every enclosing length
-- recomputed, so that a forged field reaches the checks behind the framing.
--
--   local spm = require "spm"
--   local t = spm.parse(bytes)   -- { {num =, wt =, v = (wire type 0) | s = (1, 2, 5)
--                                --    [, fields = {...} (the messages: pieces, trainer spec,
--                                --    normalizer and denormalizer specs)]}, ... }
--   spm.encode(t) -> bytes
--   spm.varint(v) -> bytes       (v an integer; a negative one as ten bytes, as int32 fields are)
--   spm.charsmap(s) -> {trie_bytes =, units = {...}, strings =} | nil; spm.charsmap_bytes(m)
local M = {}

local function read_varint(s, i)
  local v, shift = 0, 0
  while true do
    local b = s:byte(i)
    if not b then error("varint past the end") end
    v, i, shift = v | ((b & 0x7F) << shift), i + 1, shift + 7
    if b < 0x80 then return v, i end
    if shift >= 70 then error("varint too long") end
  end
end

function M.varint(v)
  local out = {}
  repeat
    local b = v & 0x7F
    v = v >> 7 -- logical shift: a negative value gives ten bytes
    out[#out + 1] = string.char(v ~= 0 and (b | 0x80) or b)
  until v == 0
  return table.concat(out)
end

local MESSAGES = { [1] = true, [2] = true, [3] = true, [5] = true }

local function parse(s, nested)
  local t, i = {}, 1
  while i <= #s do
    local key
    key, i = read_varint(s, i)
    local f = { num = key >> 3, wt = key & 7 }
    if f.wt == 0 then
      f.v, i = read_varint(s, i)
    elseif f.wt == 2 then
      local len
      len, i = read_varint(s, i)
      f.s = s:sub(i, i + len - 1)
      if #f.s ~= len then error("field past the end") end
      i = i + len
      if nested and MESSAGES[f.num] then f.fields = parse(f.s, false) end
    elseif f.wt == 5 or f.wt == 1 then
      local n = f.wt == 5 and 4 or 8
      f.s = s:sub(i, i + n - 1)
      i = i + n
    else
      error("wire type " .. f.wt)
    end
    t[#t + 1] = f
  end
  return t
end

function M.parse(s) return parse(s, true) end

local function encode(t)
  local out = {}
  for _, f in ipairs(t) do
    out[#out + 1] = M.varint((f.num << 3) | f.wt)
    if f.wt == 0 then
      out[#out + 1] = M.varint(f.v)
    elseif f.wt == 2 then
      local s = f.fields and encode(f.fields) or f.s
      out[#out + 1] = M.varint(f.len or #s) .. s
    else
      out[#out + 1] = f.s
    end
  end
  return table.concat(out)
end

M.encode = encode

-- A precompiled character map: its size word, its trie's units and the strings after it (nil
-- when the map is shorter than a size word or the word claims more than follows).
function M.charsmap(s)
  if #s < 4 then return nil end
  local tb = string.unpack("<I4", s)
  if tb > #s - 4 or tb % 4 ~= 0 then return nil end
  local units = {}
  for k = 0, tb // 4 - 1 do units[k + 1] = string.unpack("<I4", s, 5 + 4 * k) end
  return { trie_bytes = tb, units = units, strings = s:sub(5 + tb) }
end

function M.charsmap_bytes(m)
  local parts = { string.pack("<I4", m.trie_bytes) }
  for _, u in ipairs(m.units) do parts[#parts + 1] = string.pack("<I4", u) end
  parts[#parts + 1] = m.strings
  return table.concat(parts)
end

-- The first field numbered num of t (and its index).
function M.field(t, num)
  for i, f in ipairs(t) do if f.num == num then return f, i end end
end

return M

-- The JSON files of the experiment scripts: json.encode(v) writes them (lua-dkjson: indented,
-- keys sorted, numbers in full), json.read(path) reads one (lua-cjson, through fileio.read).
local cjson = require "cjson"
local dkjson = require "dkjson"
local fileio = require "lib.fileio"

local json = {}

-- encode(v) -> text: v as indented JSON with every object's keys sorted (so files diff well and
-- resume checks compare equal texts), written by lua-dkjson. Two things are prepared first,
-- because dkjson writes the keys missing from its `keyorder` list in pairs() order and numbers
-- with tostring (14 significant digits): the list holds every key of v, sorted, and each number
-- goes in as a value with __tojson that writes it in full (integers as they are, floats with
-- %.17g, so they read back bit for bit; nan and inf as null). A table is an array when its keys
-- are exactly 1..n (an empty one is []); any other table is an object, its keys as strings.
local JSON_NUMBER = { __tojson = function(self) return self[1] end }

local function json_prepare(v, keys)
  local t = type(v)
  if t == "number" then
    local s
    if v ~= v or v == math.huge or v == -math.huge then
      s = "null"
    elseif math.type(v) == "integer" then
      s = tostring(v)
    else
      s = ("%.17g"):format(v)
    end
    return setmetatable({ s }, JSON_NUMBER)
  elseif t ~= "table" then
    return v
  end
  local n, count = #v, 0
  for _ in pairs(v) do count = count + 1 end
  local out = {}
  if count == n then -- an array (or empty)
    for i = 1, n do out[i] = json_prepare(v[i], keys) end
    return out
  end
  for k, x in pairs(v) do
    k = tostring(k)
    keys[k] = true
    out[k] = json_prepare(x, keys)
  end
  return out
end

function json.encode(v)
  local keys, order = {}, {}
  local prepared = json_prepare(v, keys)
  for k in pairs(keys) do order[#order + 1] = k end
  table.sort(order)
  return assert(dkjson.encode(prepared, { indent = true, keyorder = order })) .. "\n"
end

-- read(path) -> value | nil, message (a missing file, or JSON that does not parse)
function json.read(path)
  local text, err = fileio.read(path)
  if not text then return nil, err end
  local ok, v = pcall(cjson.decode, text)
  if not ok then return nil, path .. ": not valid JSON (" .. tostring(v) .. ")" end
  if v == cjson.null then return nil, path .. ": empty JSON" end
  return v
end

return json

-- Writes python/roper_torch/schema.json: what the PyTorch companion's numerics need of roper's
-- tables: the config keys (rp.model_keys(): each key's type, default, json column, names,
-- placements, freq field and needs, without ranges or messages: roper's core checks a config, the
-- companion calling it, python/roper_torch/core.py), the mode table (rp.pe_modes()), the scaling
-- table (rp.scalings(), with hf_map: Hugging Face's rope_scaling fields), the parameter layout
-- (rp.model_layout()) and what a safetensors file holds beside the parameters
-- (rp.safetensors_extras(): tensors, axes_key, version), the names of the axes' maps
-- (rp.axes_rules().maps) and the option readers' bounds with the templates of Hugging Face's
-- rope_scaling reader (rp.option_messages(): the companion's config.py reads rope_scaling).
-- Without the rules, the messages and the tables of the own tables', positions' and files'
-- checks: core checks those (core/io/config_check.h), the companion calling it. Run from the top
-- of the tree after `make`
-- when a config key, a mode or a scaling changes (torch_companion_spec fails until the file is
-- what this writes):
--   build/roper python/gen_schema.lua > python/roper_torch/schema.json
local rp = require "roper"
local cjson = require "cjson"

-- JSON of v with sorted object keys (the file's bytes do not depend on Lua's table order), an
-- infinite number as Python's json writes it, integers as integers and floats as floats
local function encode(v, indent)
  local t = type(v)
  if t == "number" then
    if v == math.huge then return "Infinity" end
    if v == -math.huge then return "-Infinity" end
    if math.type(v) == "integer" then return ("%d"):format(v) end
    local s = ("%.17g"):format(v)
    return s:find("[.e]") and s or s .. ".0" -- a float stays a float in Python

  elseif t ~= "table" then
    return cjson.encode(v)
  end
  local pad = "\n" .. (" "):rep(indent + 2)
  local out = {}
  if #v > 0 or next(v) == nil then
    for _, x in ipairs(v) do out[#out + 1] = encode(x, indent + 2) end
    if #out == 0 then return "[]" end
    -- a list of scalars on one line, of tables one per line
    if type(v[1]) ~= "table" then return "[" .. table.concat(out, ", ") .. "]" end
    return "[" .. pad .. table.concat(out, "," .. pad) .. "\n" .. (" "):rep(indent) .. "]"
  end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do out[#out + 1] = cjson.encode(k) .. ": " .. encode(v[k], indent + 2) end
  return "{" .. pad .. table.concat(out, "," .. pad) .. "\n" .. (" "):rep(indent) .. "}"
end

-- a table's list part alone (encode writes a table with a list part as a list)
local function list(t)
  local out = {}
  for i, x in ipairs(t) do out[i] = x end
  return out
end

-- a key's row without its messages and ranges (core checks a config: the companion calls it)
local KEEP = { name = true, type = true, default = true, required = true, json = true,
               names = true, needs = true, placements = true, unset_as = true, freq = true,
               use = true, help = true }
local function key_row(k)
  local r = {}
  for f, v in pairs(k) do if KEEP[f] then r[f] = v end end
  local needs = {}
  for i, n in ipairs(k.needs or {}) do needs[i] = { fact = n.fact, holds = n.holds } end
  r.needs = needs
  return r
end

local all, layout, extras = rp.scalings(), rp.model_layout(), rp.safetensors_extras()
local keys = {}
for i, k in ipairs(rp.model_keys()) do keys[i] = key_row(k) end
-- the maps' names (the axes' rules and their wordings are core's)
local maps = {}
for i, m in ipairs(rp.axes_rules().maps) do maps[i] = { name = m.name } end
-- the option readers' bounds and the messages of config.py's rope_scaling and rope_theta readers
local opts = rp.option_messages()
local hf = {}
for name, text in pairs(opts.messages) do
  if name:find("^hf_") or name == "base_exclude" or name == "number" or name == "finite"
      or name == "positive" then
    hf[name] = text
  end
end
io.write(encode({ keys = keys, modes = list(rp.pe_modes()),
                  scalings = list(all), hf_map = all.hf_map,
                  layout = { params = list(layout), dims = layout.dims },
                  extras = { tensors = list(extras), axes_key = extras.axes_key,
                             version = extras.version },
                  axes = { maps = maps },
                  options = { messages = hf, hf_unsupported = opts.hf_unsupported,
                              bounds = { max_axes = opts.bounds.max_axes,
                                         max_pos = opts.bounds.max_pos } } }, 0), "\n")

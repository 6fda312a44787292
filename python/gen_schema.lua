-- Writes python/roper_torch/schema.json: roper's model config schema (rp.model_keys(): with each
-- key's needs, the does-nothing rules; its messages: the schema's own, as key_messages), the
-- rules between keys (rp.model_rules(), with their messages; its messages: the rotary rules'
-- message templates, as messages), the mode table
-- (rp.pe_modes()), the scaling table (rp.scalings(), with its hf_map: Hugging Face's
-- rope_scaling fields; its rules: the frequency scheme's scalar rules, as freq_rules; its checks:
-- the messages of the scheme's coded rules on its own tables, axes and uses, as freq_checks), the
-- parameter layout (rp.model_layout(): layout.params, layout.dims), what a safetensors file
-- holds beside the parameters (rp.safetensors_extras(): extras.tensors, extras.axes_key,
-- extras.version (the roper.version roper writes and reads), the
-- reader's messages and limits: extras.messages, extras.max_axes, extras.config (roper.config's
-- reader) and extras.json (core's JSON reader: type names, number messages, limits)) and
-- the rules between the vector-position options with their messages (rp.axes_rules():
-- axes.maps, axes.rules, axes.wordings) and the option readers' messages with what they name
-- (rp.option_messages(): options.messages, options.tables, options.bounds,
-- options.hf_unsupported), from which the PyTorch companion checks a config as
-- rp.model checks it, lists its scalings, counts a model's parameters and reads and writes its
-- files. Run from the top of the tree after
-- `make` when a config key, a mode or a scaling changes (torch_companion_spec fails until the
-- file is what this writes):
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

local all, layout, extras, rules = rp.scalings(), rp.model_layout(), rp.safetensors_extras(),
  rp.model_rules()
local keys = rp.model_keys()
io.write(encode({ keys = list(keys), key_messages = keys.messages, modes = list(rp.pe_modes()),
                  rules = list(rules),
                  messages = rules.messages,
                  scalings = list(all), hf_map = all.hf_map, freq_rules = all.rules,
                  freq_checks = all.checks,
                  layout = { params = list(layout), dims = layout.dims },
                  extras = { tensors = list(extras), axes_key = extras.axes_key,
                             version = extras.version,
                             max_axes = extras.max_axes, messages = extras.messages,
                             config = extras.config, json = extras.json },
                  axes = rp.axes_rules(), options = rp.option_messages() }, 0), "\n")

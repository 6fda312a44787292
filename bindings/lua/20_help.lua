-- rp.help: help text for every public function and method, looked up by value
-- (rp.help(rp.zeros), rp.help(rp.Tensor.narrow), rp.help(t.narrow)), by name (rp.help("narrow"),
-- rp.help("rp.rope.rotate")) or by topic (rp.help("rope"), rp.help(rp.rope)). rp.help() lists
-- the topics.
--
-- Called by luaopen_roper as chunk(rp, internals).
local rp, internals = ...

-- The texts come from docs/lua_api.md: bindings/gen_help.lua turns it into the chunk
-- 19_help_data.lua (generated in the build folder, embedded before this file), which sets
-- internals.help_data = { entries = { {name, signature, text, aliases}, ... },
--                         topics = { {name, text}, ... } }.
local data = assert(internals.help_data, "the help data (docs/lua_api.md) was not embedded")
local entries, topics = data.entries, data.topics

-- The tables (and values) whose help is a topic, besides the names of the topics.
local topic_values = {
  tensor = { rp.Tensor }, rng = { rp.Rng }, rope = { rp.rope }, model = { rp.Model },
  optim = { rp.Optim, rp.optim }, tasks = { rp.tasks, rp.Task }, blas = { rp.blas },
}

-- ---------------------------------------------------------------- lookup tables
local by_value, by_name, by_short = {}, {}, {}

local function resolve(name)
  local v = { rp = rp }
  local cur = v
  for part in name:gmatch("[^.]+") do
    if type(cur) ~= "table" then return nil end
    cur = cur[part]
  end
  return cur
end

local function format_entry(e)
  return e[2] .. "\n" .. e[3]
end

local topic_text, topic_names = {}, {}
-- Built on the first rp.help call: functions defined by later files (rp.eval) resolve then.
local built = false
local function build()
  built = true
  local function add(name, text)
    by_name[name] = text
    local f = resolve(name)
    if f ~= nil then
      if by_value[f] and by_value[f] ~= text then by_value[f] = by_value[f] .. "\n\n" .. text
      else by_value[f] = text end
    end
    local short = name:match("([^.]+)$")
    if by_short[short] ~= text then
      by_short[short] = by_short[short] and (by_short[short] .. "\n\n" .. text) or text
    end
  end
  for _, e in ipairs(entries) do
    local text = format_entry(e)
    add(e[1], text)
    for _, alias in ipairs(e[4]) do add(alias, text) end
  end

  for _, t in ipairs(topics) do
    local text = "Topic " .. t[1] .. "\n" .. t[2]
    topic_text[t[1]] = text
    topic_names[#topic_names + 1] = t[1]
    for _, v in ipairs(topic_values[t[1]] or {}) do by_value[v] = text end
  end
  topic_text.tensors = topic_text.tensor
  topic_text.Tensor = topic_text.tensor
  topic_text.Rng = topic_text.rng
  topic_text.Model = topic_text.model
  topic_text.models = topic_text.model
  topic_text.Optim = topic_text.optim
  topic_text.Task = topic_text.tasks
  topic_text.task = topic_text.tasks
  if rp.eval then by_value[rp.eval] = topic_text.eval end
  if rp.experiment then by_value[rp.experiment] = topic_text.experiment end
  by_value[rp.help] = by_name["rp.help"]
end

local function overview()
  local lines = {
    "roper " .. tostring(rp._VERSION) .. ": rotary positional embeddings workbench.",
    "rp.help(f) gives the help of a function or method, e.g. rp.help(rp.rope.rotate),",
    "rp.help(rp.Tensor.narrow), rp.help(\"narrow\"). Topics (rp.help(\"name\")):",
    "  " .. table.concat(topic_names, ", "),
    "Functions:",
  }
  local names = {}
  for _, e in ipairs(entries) do names[#names + 1] = e[1] end
  local line = " "
  for _, n in ipairs(names) do
    if #line + #n + 1 > 92 then
      lines[#lines + 1] = line
      line = " "
    end
    line = line .. " " .. n
  end
  lines[#lines + 1] = line
  return table.concat(lines, "\n")
end


-- rp.help([f]): see the entry "rp.help" above.
function rp.help(...)
  if not built then build() end
  if select("#", ...) == 0 or (...) == nil then return overview() end
  local f = ...
  if f == rp then return overview() end
  if rp.is_tensor(f) then return topic_text.tensor end
  if getmetatable(f) == internals.Rng_mt then return topic_text.rng end
  if getmetatable(f) == internals.Model_mt then return topic_text.model end
  if getmetatable(f) == internals.Optim_mt then return topic_text.optim end
  if getmetatable(f) == internals.Task_mt then return topic_text.tasks end
  local text = by_value[f]
  if text then return text end
  if type(f) == "string" then
    local key = f:gsub("^%s+", ""):gsub("%s+$", ""):gsub("^t:", "rp.Tensor."):gsub("^g:", "rp.Rng.")
      :gsub("^m:", "rp.Model."):gsub("^opt:", "rp.Optim."):gsub("^task:", "rp.Task.")
    text = topic_text[key] or by_name[key] or by_name["rp." .. key] or by_short[key]
    if text then return text end
    return nil, "no help for '" .. f .. "' (rp.help() lists the topics)"
  end
  local what = type(f)
  if what == "userdata" then
    local mt = getmetatable(f)
    what = type(mt) == "table" and type(mt.__name) == "string" and mt.__name or what
  elseif what == "number" or what == "boolean" then
    what = what .. " " .. tostring(f)
  end
  return nil, "no help for this " .. what .. " (rp.help() lists the topics)"
end

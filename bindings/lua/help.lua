-- rp.help: help text for every public function and method, looked up by value
-- (rp.help(rp.zeros), rp.help(rp.Tensor.narrow), rp.help(t.narrow)), by name (rp.help("narrow"),
-- rp.help("rp.rope.rotate")) or by topic (rp.help("rope"), rp.help(rp.rope)); any other word is
-- searched for in the config keys, entries and topics. rp.help() lists the topics.
--
-- roper.help: adds rp.help; exports nothing. It reads the rest of rp (rp.eval, rp.experiment)
-- when first called, so it requires none of the modules that add them.
local require = ...
local rp = require "roper"
local internals = require "roper.internals"

-- The texts come from docs/lua_api.md: bindings/gen_help.lua turns it into the module
-- roper.help_data (generated in the build folder), which returns
-- { entries = { {name, signature, text, aliases}, ... }, topics = { {name, text}, ... } }.
local data = require "roper.help_data"
local entries, topics = data.entries, data.topics
-- No line rp.help returns is wider than WIDTH (the texts were wrapped so by the generator).
local WIDTH = data.width
local text_wrap = require "roper.text_wrap"

-- The classes whose help is a topic, besides the names of the topics (a module table of rp
-- named as a topic, rp.rope or rp.eval, has that topic's help: build).
local topic_values = {
  tensor = { rp.Tensor }, rng = { rp.Rng }, model = { rp.Model }, optim = { rp.Optim },
  tasks = { rp.Task }, mpi = { rp.Comm }, tokenizer = { rp.Tokenizer },
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
-- Built on the first rp.help call: functions that modules loaded later add (rp.eval) resolve then.
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
    if type(rp[t[1]]) == "table" then by_value[rp[t[1]]] = text end
  end
  topic_text.tensors = topic_text.tensor
  topic_text.Tensor = topic_text.tensor
  topic_text.Rng = topic_text.rng
  topic_text.Model = topic_text.model
  topic_text.models = topic_text.model
  topic_text.Optim = topic_text.optim
  topic_text.Task = topic_text.tasks
  topic_text.task = topic_text.tasks
  by_value[rp.help] = by_name["rp.help"]
end

local function overview()
  local lines = {
    "roper " .. tostring(rp._VERSION) .. ": rotary positional embeddings workbench.",
    "rp.help(f) gives the help of a function or method, e.g. rp.help(rp.rope.rotate),",
    "rp.help(rp.Tensor.narrow), rp.help(\"narrow\"); rp.help(\"word\") searches the texts",
    "(in the REPL: help(f), ?name). Topics (rp.help(\"name\")):",
  }
  text_wrap.add(lines, table.concat(topic_names, ", "), WIDTH, "  ", "  ")
  lines[#lines + 1] = "Functions:"
  local names = {}
  for _, e in ipairs(entries) do names[#names + 1] = e[1] end
  text_wrap.add(lines, table.concat(names, " "), WIDTH, "  ", "  ")
  return table.concat(lines, "\n")
end


-- ---------------------------------------------------------------- search
-- search(word) -> text | nil: what rp.help("word") shows for a word that names no function or
-- topic: the config keys of rp.experiment it names or whose help mentions it, then the entries
-- and topics whose name or text mention it (case-insensitive, plain text), each with the first
-- line that does. nil when nothing matches.
local MAX_HITS = 20

local function first_line_with(text, word)
  for line in text:gmatch("[^\n]+") do
    if line:lower():find(word, 1, true) then
      line = line:gsub("^%s+", "")
      -- shown indented by 6; cut between characters (a UTF-8 character is never split)
      local n = utf8.len(line) or #line
      if n > WIDTH - 6 then
        local cut = utf8.len(line) and utf8.offset(line, WIDTH - 8) or WIDTH - 8
        line = line:sub(1, cut - 1) .. "..."
      end
      return line
    end
  end
end

local function search(f)
  local word = f:gsub("^%s+", ""):gsub("%s+$", ""):lower()
  if word == "" then return nil end
  local lines, hits, more = {}, 0, 0
  local function hit(head, detail)
    if hits >= MAX_HITS then
      more = more + 1
      return
    end
    hits = hits + 1
    text_wrap.add(lines, head, WIDTH, "  ", "      ")
    if detail then lines[#lines + 1] = "      " .. detail end
  end
  -- the config keys of rp.experiment (the options of the scripts)
  local keys = rp.experiment and rp.experiment.keys() or {}
  local named_key, key_name
  for _, k in ipairs(keys) do
    local kind = type(k.kind) == "table" and table.concat(k.kind, "|") or k.kind
    local line = ("config key %s (%s; default %s): %s"):format(k.name, kind,
      k.default == "" and "none" or tostring(k.default), k.help)
    if k.name:lower() == word then
      named_key, key_name = line, k.name
    elseif k.name:lower():find(word, 1, true) or k.help:lower():find(word, 1, true) then
      hit(line)
    end
  end
  -- entries, then topics
  for _, e in ipairs(entries) do
    local names = { e[1], table.unpack(e[4]) }
    local by_its_name = false
    for _, n in ipairs(names) do
      if n:lower():find(word, 1, true) then by_its_name = true end
    end
    local line = first_line_with(e[3], word)
    if by_its_name or line or e[2]:lower():find(word, 1, true) then hit(e[2], line) end
  end
  for _, t in ipairs(topics) do
    local line = first_line_with(t[2], word)
    if line or t[1]:lower():find(word, 1, true) then hit("topic " .. t[1], line) end
  end
  if hits == 0 and not named_key then return nil end
  local out = {}
  if named_key then
    text_wrap.add(out, named_key:gsub("^config key", "Config key", 1) .. ".", WIDTH, "", "")
    -- (the key's own name, however the word was typed)
    text_wrap.add(out, "(an option of rp.experiment and of the scripts: --"
      .. key_name:gsub("_", "-") .. ")", WIDTH, "", "")
  end
  if hits > 0 then
    if #out > 0 then out[#out + 1] = "" end
    -- a config key of that name was found: the rest are where else the word stands
    text_wrap.add(out, named_key and "It is also mentioned in:"
      or ("No function or topic is named '%s'; it is mentioned in:"):format(f), WIDTH, "", "")
    for _, l in ipairs(lines) do out[#out + 1] = l end
    if more > 0 then out[#out + 1] = ("  ... and %d more"):format(more) end
    out[#out + 1] = "rp.help(\"name\") shows one of them in full."
  end
  return table.concat(out, "\n")
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
  if getmetatable(f) == internals.Tokenizer_mt then return topic_text.tokenizer end
  local text = by_value[f]
  if text then return text end
  if type(f) == "string" then
    local key = f:gsub("^%s+", ""):gsub("%s+$", ""):gsub("^t:", "rp.Tensor."):gsub("^g:", "rp.Rng.")
      :gsub("^m:", "rp.Model."):gsub("^opt:", "rp.Optim."):gsub("^task:", "rp.Task.")
      :gsub("^tok:", "rp.Tokenizer.")
      :gsub("^comm:", "rp.Comm.")
    text = topic_text[key] or by_name[key] or by_name["rp." .. key] or by_short[key]
    if text then return text end
    text = search(f)
    if text then return text end
    return nil, "no help for '" .. f .. "': no name or help text matches (rp.help() lists the "
      .. "topics)"
  end
  local what = type(f)
  if what == "userdata" then
    local mt = getmetatable(f)
    what = type(mt) == "table" and type(mt.__name) == "string" and mt.__name or what
  elseif what == "number" or what == "boolean" then
    what = what .. " " .. (f ~= f and "nan" or tostring(f))
  end
  return nil, "no help for this " .. what .. " (rp.help() lists the topics)"
end

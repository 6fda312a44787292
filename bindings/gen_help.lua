-- gen_help.lua: turns docs/lua_api.md into the help data of rp.help (a Lua module that embed.lua
-- compiles into the module next to the files of bindings/lua/).
--
--   lua5.4 bindings/gen_help.lua docs/lua_api.md > build/gen/lua/help_data.lua
--
-- The output, the module roper.help_data (required by bindings/lua/help.lua), returns
--   { entries = { {name, signature, text, aliases}, ... },
--     topics = { {name, text}, ... },   (in the order of the file)
--     width = 80 }
--
-- The format of lua_api.md (docs/lua_api.md says it too, under "Help"):
--  - an entry is a heading `### `signature`` (the whole heading one code span) and the text up to
--    the next heading or marker. The signature starts with the function's name: rp.name(,
--    rp.sub.name(, or a method t:name( (rp.Tensor), g: (rp.Rng), m: (rp.Model), opt: (rp.Optim),
--    task: (rp.Task), tok: (rp.Tokenizer), comm: (rp.Comm). "(also t:name(...))" inside the signature names an alias (the same function
--    reached as a method).
--  - a topic is the text between the lines `<!-- topic NAME -->` and `<!-- end topic -->`.
--  - every other part of the file is documentation only.
-- The text is markdown turned into the plain text of the REPL, no line wider than WIDTH (80)
-- columns: a paragraph's lines are joined and wrapped at WIDTH; fenced code becomes "Example:" and
-- lines "  > code" as the file has them (a code line must fit: the generator refuses a longer one);
-- a bullet "- x" becomes "  x", wrapped, its continuation lines "    ..." (or aligned with the
-- value of a bullet "- key   value"); a table its rows (header and rule dropped, cells aligned and
-- wrapped in their columns); backticks, ** and backslash escapes go, blank lines are dropped. A
-- word wider than its line (a long path) stands alone on a line. A malformed entry or marker
-- stops the generator with "file:line: message" on stderr and exit status 1.
--
-- The module also returns width = WIDTH, the width rp.help's own lines (the overview, the
-- search) keep.

local RECEIVERS = { t = "rp.Tensor", g = "rp.Rng", m = "rp.Model", opt = "rp.Optim",
  task = "rp.Task", tok = "rp.Tokenizer", comm = "rp.Comm" }
local WIDTH = 80

local function fail(file, line, msg)
  io.stderr:write(("%s:%d: %s\n"):format(file, line, msg))
  os.exit(1)
end

-- The public name of a call written as "rp.a.b(" or "t:b(", or nil.
local function call_name(s)
  local recv, meth = s:match("^([%a_][%w_]*):([%a_][%w_]*)%(")
  if recv then return RECEIVERS[recv] and (RECEIVERS[recv] .. "." .. meth) end
  return s:match("^(rp%.[%a_][%w_.]*[%w_])%(")
end

local function strip_inline(s)
  return (s:gsub("`", ""):gsub("%*%*", ""):gsub("\\([%p])", "%1"))
end

local function split_row(line)
  local cells = {}
  local body = line:gsub("^%s*|", ""):gsub("|%s*$", "")
  body = body:gsub("\\|", "\1")
  for cell in (body .. "|"):gmatch("(.-)|") do
    cells[#cells + 1] = strip_inline((cell:gsub("\1", "|"):gsub("^%s+", ""):gsub("%s+$", "")))
  end
  return cells
end

-- Words in lines (bindings/lua/text_wrap.lua, which rp.help uses too), found next to this file.
local text_wrap = dofile(((arg and arg[0] or ""):match("^(.*/)") or "./") .. "lua/text_wrap.lua")
local wrap = text_wrap.wrap

-- Rows of a markdown table (header and rule dropped) as aligned lines, every cell wrapped in its
-- column: the columns before the last are as wide as their cells but at most CELL_MAX (or their
-- longest word), so the last column, the meaning, keeps the rest of the WIDTH.
local CELL_MAX = 16
local function table_lines(rows, out)
  local widths = {}
  for _, r in ipairs(rows) do
    for i = 1, #r - 1 do
      local w = math.min(#r[i], CELL_MAX)
      for word in r[i]:gmatch("%S+") do w = math.max(w, #word) end
      widths[i] = math.max(widths[i] or 0, w)
    end
  end
  local start = 2
  for i = 1, #widths do start = start + widths[i] + 2 end
  local last_width = math.max(WIDTH - start, 24)
  for _, r in ipairs(rows) do
    local cells, height = {}, 1
    for i = 1, #r do
      cells[i] = wrap(r[i], i < #r and widths[i] or last_width)
      height = math.max(height, #cells[i])
    end
    for k = 1, height do
      local line = "  "
      for i = 1, #r - 1 do
        local piece = cells[i][k] or ""
        line = line .. piece .. (" "):rep(widths[i] - #piece + 2)
      end
      line = line .. (cells[#r][k] or "")
      out[#out + 1] = (line:gsub("%s+$", ""))
    end
  end
end

-- Markdown lines {text, lineno} of one entry or topic -> the plain text.
local CODE = "  > "
local function plain(file, lines)
  local out, rows = {}, nil
  local in_fence, example = false, false
  -- the paragraph or bullet being read: its words so far, and what starts its first line and the
  -- lines after (the first line's start holds the key of a bullet "- key   value"); in a bullet,
  -- bullet is the indent of the outer bullet's lines after the first (where an inner "- x" goes)
  local para = nil
  local function flush_para()
    if not para then return end
    text_wrap.add(out, table.concat(para.words, " "), WIDTH, para.first, para.rest)
    para = nil
  end
  local function flush_table()
    if rows then table_lines(rows, out) end
    rows = nil
  end
  for _, l in ipairs(lines) do
    local s, n = l[1], l[2]
    if in_fence then
      if s:match("^```%s*$") then
        in_fence = false
      elseif #CODE + #s > WIDTH then
        fail(file, n, ("an example line is %d columns in the help (%d at most): shorten it")
          :format(#CODE + #s, WIDTH))
      else
        out[#out + 1] = CODE .. s
      end
    elseif s:match("^```") then
      flush_para()
      flush_table()
      if not s:match("^```lua%s*$") and not s:match("^```%s*$") then
        fail(file, n, "an example must be a ```lua fence")
      end
      in_fence = true
      if not example then out[#out + 1] = "Example:" end
      example = true
    elseif s:match("^%s*$") then
      flush_para()
      flush_table()
    elseif s:match("^|") then
      flush_para()
      if not rows then
        rows = { header = true }
      elseif rows.header then
        if not s:match("^|[%s:|-]+$") then fail(file, n, "a table needs a |---| rule after its header") end
        rows.header = nil
      else
        rows[#rows + 1] = split_row(s)
      end
      example = false
    elseif s:match("^%- ") then
      flush_para()
      flush_table()
      -- "- key     value": the lines after the first align with the value, others indent by 4
      local key = s:match("^%- ([^%s`]+%s%s+)%S")
      local rest = (" "):rep(2 + (key and #key or 2))
      para = { bullet = rest, first = "  " .. (key or ""), rest = rest,
        words = { strip_inline(s:sub(3 + (key and #key or 0))) } }
      example = false
    elseif para and para.bullet and s:match("^  +%- ") then
      -- a bullet inside the bullet: "- x" at the outer one's indent, its lines after 2 further
      local indent = para.bullet
      flush_para()
      para = { bullet = indent, first = indent .. "- ", rest = indent .. "  ",
        words = { strip_inline((s:gsub("^%s+%- ", ""))) } }
    elseif para and para.bullet and s:match("^  +%S") then
      para.words[#para.words + 1] = strip_inline((s:gsub("^%s+", "")))
    else
      flush_table()
      if s:match("^%s") then fail(file, n, "an indented line outside a bullet (use a ```lua fence for code)") end
      if para and para.bullet then flush_para() end
      if not para then para = { first = "", rest = "", words = {} } end
      para.words[#para.words + 1] = strip_inline(s)
      example = false
    end
  end
  if in_fence then fail(file, lines[#lines][2], "a ``` fence is not closed") end
  flush_para()
  flush_table()
  return table.concat(out, "\n")
end

local function parse(file, src)
  local entries, topics, seen = {}, {}, {}
  local cur -- the entry or topic being read: {kind =, name =, line =, lines = {}}
  local in_fence = false
  local function close(n)
    if not cur then return end
    if cur.kind == "topic" then fail(file, cur.line, "topic '" .. cur.name .. "' has no <!-- end topic -->") end
    local text = plain(file, cur.lines)
    if text == "" then fail(file, cur.line, "entry " .. cur.name .. " has no text") end
    entries[#entries + 1] = { cur.name, cur.signature, text, cur.aliases }
    cur = nil
  end
  local n = 0
  for s in (src:gsub("\r\n", "\n") .. (src:sub(-1) == "\n" and "" or "\n")):gmatch("(.-)\n") do
    n = n + 1
    if in_fence then
      if s:match("^```%s*$") then in_fence = false end
      if cur then cur.lines[#cur.lines + 1] = { s, n } end
    elseif s:match("^```") then
      in_fence = true
      if cur then cur.lines[#cur.lines + 1] = { s, n } end
    elseif s:match("^<!%-%-") then
      local topic = s:match("^<!%-%- topic ([%w_]+) %-%->%s*$")
      if topic then
        close(n)
        if seen["topic " .. topic] then fail(file, n, "topic '" .. topic .. "' appears twice") end
        seen["topic " .. topic] = true
        cur = { kind = "topic", name = topic, line = n, lines = {} }
      elseif s:match("^<!%-%- end topic %-%->%s*$") then
        if not cur or cur.kind ~= "topic" then fail(file, n, "<!-- end topic --> without a topic") end
        local text = plain(file, cur.lines)
        if text == "" then fail(file, cur.line, "topic '" .. cur.name .. "' has no text") end
        topics[#topics + 1] = { cur.name, text }
        cur = nil
      elseif s:match("topic") then
        fail(file, n, "a topic marker is <!-- topic NAME --> or <!-- end topic -->")
      elseif cur then
        cur.lines[#cur.lines + 1] = { s, n }
      end
    elseif s:match("^#") then
      if cur and cur.kind == "topic" then fail(file, n, "a heading inside topic '" .. cur.name .. "'") end
      close(n)
      if s:match("^###%s") then
        local sig = s:match("^### `([^`]+)`%s*$")
        if not sig then fail(file, n, "an entry heading must be ### `signature` (one code span)") end
        if #sig > WIDTH then
          fail(file, n, ("the signature is %d columns (%d at most in the help): shorten it")
            :format(#sig, WIDTH))
        end
        local name = call_name(sig)
        if not name then
          fail(file, n, "the signature '" .. sig .. "' does not start with rp.name( or "
            .. "t:/g:/m:/opt:/task:name(")
        end
        local aliases = {}
        for call in sig:gmatch("also ([%w_:.]+%()") do
          local a = call_name(call)
          if not a then fail(file, n, "the alias '" .. call .. "' names no public function") end
          aliases[#aliases + 1] = a
        end
        for _, k in ipairs { name, table.unpack(aliases) } do
          if seen[k] then fail(file, n, k .. " has a second entry") end
          seen[k] = true
        end
        cur = { kind = "entry", name = name, signature = sig, aliases = aliases, line = n, lines = {} }
      elseif s:match("^####") then
        fail(file, n, "#### headings are not used (an entry is ### `signature`)")
      end
    elseif cur then
      cur.lines[#cur.lines + 1] = { s, n }
    end
  end
  if in_fence then fail(file, n, "a ``` fence is not closed") end
  close(n)
  if #entries == 0 then fail(file, n, "no entries") end
  return entries, topics
end

local file = ...
if not file then
  io.stderr:write("usage: lua5.4 bindings/gen_help.lua docs/lua_api.md > help_data.lua\n")
  os.exit(2)
end
local f, err = io.open(file, "rb")
if not f then
  io.stderr:write(err, "\n")
  os.exit(1)
end
local src = f:read("a")
f:close()
local entries, topics = parse(file, src)

local out = { "-- Generated by bindings/gen_help.lua from " .. file .. ". Do not edit.\n",
  "return { entries = {\n" }
for _, e in ipairs(entries) do
  local al = {}
  for _, a in ipairs(e[4]) do al[#al + 1] = ("%q"):format(a) end
  out[#out + 1] = ("  { %q, %q, %q, { %s } },\n"):format(e[1], e[2], e[3], table.concat(al, ", "))
end
out[#out + 1] = "}, topics = {\n"
for _, t in ipairs(topics) do out[#out + 1] = ("  { %q, %q },\n"):format(t[1], t[2]) end
out[#out + 1] = ("}, width = %d }\n"):format(WIDTH)
io.write(table.concat(out))

-- The help texts come from docs/lua_api.md (bindings/gen_help.lua, at build time): every public
-- function has an entry there, every entry names a function of the module, the module serves
-- exactly those texts, and the generator rejects a malformed file with file:line.

local spec_dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = spec_dir .. "?.lua;" .. package.path
local h = require "helpers"
local rp = require "roper"

-- Runs the generator on path; returns the help data table, or nil, stderr and the exit code.
local function generate(path)
  local out, err, code = h.run("lua5.4 bindings/gen_help.lua " .. h.sh_quote(path))
  if code ~= 0 then return nil, err, code end
  return assert(load(out, "=help_data"))()
end

-- Every function reachable as rp.name or rp.table.name (as the fuzz test walks the module).
local function public_functions()
  local names = {}
  for k, v in pairs(rp) do
    if type(v) == "function" then
      names[#names + 1] = "rp." .. k
    elseif type(v) == "table" then
      for k2, v2 in pairs(v) do
        if type(v2) == "function" then names[#names + 1] = "rp." .. k .. "." .. k2 end
      end
    end
  end
  table.sort(names)
  return names
end

local function resolve(name)
  local cur = { rp = rp }
  for part in name:gmatch("[^.]+") do
    if type(cur) ~= "table" then return nil end
    cur = cur[part]
  end
  return cur
end

describe("help from docs/lua_api.md", function()
  local data = assert(generate("docs/lua_api.md"))
  local documented = {}
  for _, e in ipairs(data.entries) do
    documented[e[1]] = e
    for _, a in ipairs(e[4]) do documented[a] = e end
  end

  it("walks the whole module", function()
    local names = public_functions()
    local tables = {}
    for _, n in ipairs(names) do tables[n:match("^rp%.(%a+)%.") or "rp"] = true end
    for _, t in ipairs { "rp", "Tensor", "Rng", "Model", "Optim", "Task", "rope", "optim", "tasks",
      "eval", "experiment", "blas", "Tokenizer", "tokenizer" } do
      assert.is_true(tables[t], t .. " was not walked")
    end
    assert.is_true(#names >= 120, #names .. " functions")
  end)

  it("has an entry for every public function", function()
    local missing = {}
    for _, n in ipairs(public_functions()) do
      if not documented[n] then missing[#missing + 1] = n end
    end
    assert.are.same({}, missing)
  end)

  it("has no entry that names a missing function (a stale entry)", function()
    local stale = {}
    for name in pairs(documented) do
      if type(resolve(name)) ~= "function" then stale[#stale + 1] = name end
    end
    table.sort(stale)
    assert.are.same({}, stale)
  end)

  it("is what the module serves (the build embeds the current file)", function()
    for _, e in ipairs(data.entries) do
      local want = e[2] .. "\n" .. e[3]
      assert.are.equal(want, rp.help(e[1]))
      for _, a in ipairs(e[4]) do assert.are.equal(want, rp.help(a)) end
      assert.truthy(rp.help(resolve(e[1])):find(want, 1, true), e[1])
    end
    local names = {}
    for _, t in ipairs(data.topics) do
      assert.are.equal("Topic " .. t[1] .. "\n" .. t[2], rp.help(t[1]))
      names[#names + 1] = t[1]
    end
    -- the topics' line, wrapped: its lines after the first are indented as it is
    assert.truthy(rp.help():gsub("\n  ", " "):find(table.concat(names, ", "), 1, true))
  end)

  it("has the topics, experiment included, and each table's help is its topic", function()
    local names = {}
    for _, t in ipairs(data.topics) do names[#names + 1] = t[1] end
    assert.are.same({ "tensor", "methods", "indexing", "arithmetic", "rng", "rope", "attention",
      "model", "optim", "tasks", "eval", "tokenizer", "lm", "experiment", "plot", "mpi", "memory",
      "blas" }, names)
    for t, v in pairs { tensor = rp.Tensor, rng = rp.Rng, rope = rp.rope, model = rp.Model,
      optim = rp.optim, tasks = rp.tasks, eval = rp.eval, experiment = rp.experiment,
      mpi = rp.mpi, blas = rp.blas, tokenizer = rp.tokenizer, lm = rp.lm } do
      assert.are.equal(rp.help(t), rp.help(v))
    end
    -- every module table of rp has a help text (rp.lm had none)
    for k, v in pairs(rp) do
      if type(v) == "table" then assert.truthy(rp.help(v), "rp." .. k) end
    end
    -- a topic's name wins over a function's last part, as the doc says; the path finds the task
    assert.truthy(rp.help("lm"):find("^Topic lm\n"))
    assert.truthy(rp.help("lm"):find("rp.tasks.lm", 1, true))
    assert.are.equal(rp.help(rp.tasks.lm), rp.help("tasks.lm"))
    assert.truthy(rp.help("tasks.lm"):find("^rp%.tasks%.lm%(opts%)"))
    assert.truthy(rp.help("experiment"):find("rp.experiment.check", 1, true))
    assert.are.equal(rp.help("mpi"), rp.help(rp.Comm))
    assert.truthy(rp.help("comm:allreduce"):find("^comm:allreduce%(x%)"))
    assert.are.equal(rp.help("tokenizer"), rp.help(rp.Tokenizer))
    assert.truthy(rp.help("tok:decode"):find("^tok:decode%(ids%)"))
  end)

  it("prints examples as '  > code' lines and drops markdown", function()
    local text = rp.help(rp.zeros)
    assert.truthy(text:find("\nExample:\n  > rp.zeros(2, 3)\n  > rp.zeros{2, 3}", 1, true))
    for _, e in ipairs(data.entries) do
      assert.is_nil(e[3]:find("```", 1, true), e[1])
      assert.is_nil(e[3]:find("`", 1, true), e[1])
    end
    assert.truthy(rp.help(rp.rng):find("xoshiro256**", 1, true))
  end)

  it("gives rp.model's options table a meaning column of 40 or more columns", function()
    local text = rp.help(rp.model)
    -- was 16 columns wide: the long key and default cells set the widths of their columns
    assert.truthy(text:find("\n  vocab +required +vocabulary size V; token ids are the\n", 1),
      text)
    local start
    for line in text:gmatch("[^\n]+") do
      if line:find("^  vocab ") then start = line:find("vocabulary", 1, true) end
    end
    assert.is_true(start <= 80 - 40, "the meanings start at column " .. tostring(start))
  end)

  it("keeps every line within 80 columns: every entry, topic, the overview and searches",
    function()
      local wide, lines = {}, 0
      local function check(what, text)
        for line in (text .. "\n"):gmatch("([^\n]*)\n") do
          lines = lines + 1
          if #line > 80 then wide[#wide + 1] = ("%s (%d): %s"):format(what, #line, line) end
        end
      end
      for _, e in ipairs(data.entries) do check(e[1], rp.help(e[1])) end
      for _, t in ipairs(data.topics) do check("topic " .. t[1], rp.help(t[1])) end
      check("rp.help()", rp.help())
      for _, word in ipairs { "fraction_v", "cosine", "integer", "seed", "path", "lr" } do
        check('rp.help("' .. word .. '")', rp.help(word))
      end
      assert.is_true(lines > 2000, lines .. " lines")
      assert.are.same({}, wide)
      assert.are.equal(80, data.width) -- what rp.help's own lines keep
    end)

  it("states the ranges the code checks (str_len 1..1000)", function()
    local text = rp.help(rp.tasks.substring_index)
    assert.truthy(text:find("str_len (1..1000", 1, true))
    assert.is_true(pcall(rp.tasks.substring_index, { str_len = 1000 }))
    assert.is_false(pcall(rp.tasks.substring_index, { str_len = 1001 }))
    assert.truthy(rp.help(rp.tasks.substring_prefix):find("substr_len (2..65536", 1, true))
    assert.is_true(pcall(rp.tasks.substring_prefix, { substr_len = 65536, seq_len = 2 ^ 18 }))
    assert.is_false(pcall(rp.tasks.substring_prefix, { substr_len = 65537, seq_len = 2 ^ 18 }))
  end)
end)

describe("rp.help(rp.attention)'s refusals", function()
  -- each message the entry names, with a call that raises it: the help lists them one a line
  -- ("  what: message", its continuation indented), and each is what rp.attention raises
  local q = rp.randn { 1, 4, 1, 8 }
  local grid = { { 0, 0 }, { 0, 1 }, { 1, 0 }, { 1, 1 } }
  local cases = {
    { { pe = "rope", fraction_o = 0.5 },
      "fraction_o 0.5 does nothing for pe rope rotating qk: it applies when o is rotated" },
    { { pe = "alibi", rel_clip = 8 },
      "rel_clip 8 does nothing for pe alibi: it applies to pe shaw or deberta" },
    { { pe = "none", rotate = "qk" },
      "option 'rotate' needs a rotary pe (rope, roper or roper_legacy), got pe 'none'" },
    { { pe = "none", positions = { 0, 1, 2, 3 } },
      "option 'positions' needs a rotary pe (rope, roper or roper_legacy), got pe 'none'" },
    { { pe = "rope", positions = { 0, 1, 2 } },
      "option 'positions' holds 3 positions; this call reads 4 (keys 0..3, queries 0..3)" },
    { { pe = "rope", positions = { 0, 1, 2, 3 }, pos_offset = 1 },
      "give option 'pos_offset' or 'positions', not both (shift the positions instead)" },
    { { pe = "rope", positions = { 0, 1, 2, 3 }, axes = "sections" },
      "option 'axes' does nothing with 1-D positions (give the positions as [n x axes] or a list "
        .. "of {r, c} lists)" },
    { { pe = "rope", axes = "sections" },
      "option 'axes' needs option 'positions' (vector positions: an [n x axes] tensor or a list "
        .. "of {r, c} lists)" },
    { { pe = "rope", positions = grid, axes = "sections", sections = { 1, 2 } },
      "sections {1, 2} hold 3 pairs; d_rot_q 8 has 4" },
    { { pe = "roper", positions = grid, axes = "sections", sections = { 1, 3 }, fraction_v = 0.5 },
      "d_rot_v 4 has 2" },
    { { pe = "rope", positions = grid, axes = "mixed", mix = rp.zeros { 2, 3 } },
      "option 'mix' is [2 x 3]; [2 x 4] expected (the positions' axes x d_rot/2)" },
    { { pe = "rope", positions = { -1, 0, 1, 2 }, angles = rp.zeros { 8, 4 } },
      "position -1 is below 0, where the angle table starts" },
    { { pe = "rope", positions = rp.zeros { 4, 4 } },
      "option 'positions' [4 x 4]: 1 to 3 axes expected" },
  }

  it("are a list, one refusal a line, each message as rp.attention raises it", function()
    local text = assert(rp.help(rp.attention))
    local part = assert(text:match("\nEvery rotated placement needs.-these messages:\n(.-)"
      .. "\nExample:"), text)
    -- the items: lines "  what: ...", each with its "    " continuation lines joined
    local items = {}
    for line in part:gmatch("[^\n]+") do
      if line:match("^  %S") then items[#items + 1] = line:sub(3)
      else
        assert.truthy(line:match("^    %S"), "not an item nor its continuation: " .. line)
        items[#items] = items[#items] .. " " .. line:sub(5)
      end
    end
    assert.are.equal(11, #items, part)
    for _, c in ipairs(cases) do
      local ok, err = pcall(rp.attention, q, q, q, c[1])
      assert.is_false(ok)
      local msg = err:match("^bad argument #4 to 'rp.attention' %((.*)%)$")
      assert.truthy(msg, err)
      assert.truthy(msg:find(c[2], 1, true), err)
      local found = false
      for _, it in ipairs(items) do
        if it:find(c[2], 1, true) then found = true end
      end
      assert.is_true(found, "not in the list: " .. c[2] .. "\n" .. part)
    end
  end)
end)

describe("rp.help(\"word\") for a word that names no function or topic", function()
  it("shows the config key of that name, then the entries that mention it", function()
    local text = assert(rp.help("fraction_v"))
    local key
    for _, k in ipairs(rp.experiment.keys()) do if k.name == "fraction_v" then key = k end end
    -- (wrapped at 80 columns)
    assert.are.equal(("Config key fraction_v (number; default 1): %s."):format(key.help),
      assert(text:match("^(.-)\n%(an option")):gsub("\n", " "))
    assert.truthy(text:find("(an option of rp.experiment and of the scripts: --fraction-v)", 1,
      true), text)
    assert.truthy(text:find("\n  rp.attention(q, k, v[, opts]) -> out, att\n      ", 1, true), text)
    assert.truthy(text:find("\n  rp.model(cfg) -> model\n", 1, true), text)
    -- the key is found, so the mentions are "also", not "no function or topic is named"
    assert.truthy(text:find("%(an option of rp.experiment and of the scripts: %-%-fraction%-v%)\n\n"
      .. "It is also mentioned in:\n  config key fraction_o "), text)
    assert.is_nil(text:find("No function or topic", 1, true), text)
    -- typed in capitals: the option is the key's own name
    assert.truthy(assert(rp.help(" FRACTION_V ")):find("(an option of rp.experiment and of the "
      .. "scripts: --fraction-v)", 1, true))
    -- a NaN named as the messages name it
    assert.are.same({ nil, "no help for this number nan (rp.help() lists the topics)" },
      { rp.help(0 / 0) })
  end)

  it("searches case-insensitively, names and texts, with the line that matches", function()
    local text = assert(rp.help("COSINE"))
    assert.truthy(text:find("^No function or topic is named 'COSINE'; it is mentioned in:\n"), text)
    assert.truthy(text:find("\n  config key min_lr ", 1, true), text)
    assert.truthy(text:find("\n  t:cos() -> tensor\n      Elementwise cosine.", 1, true), text)
    local last = '\nrp.help("name") shows one of them in full.'
    assert.are.equal(last, text:sub(-#last))
    -- a part of a function's name
    text = assert(rp.help("generate_b"))
    assert.truthy(text:find("\n  m:generate_batch(", 1, true), text)
    -- topics
    text = assert(rp.help("OPENBLAS_CORETYPE"))
    assert.truthy(text:find("\n  topic blas\n", 1, true), text)
  end)

  it("lists at most 20 matches and says how many more there are", function()
    local text = assert(rp.help("tensor"))
    assert.are.equal("Topic tensor", text:match("^[^\n]*")) -- a topic's name wins
    text = assert(rp.help("integer"))
    local n = select(2, text:gsub("\n  [^ .]", ""))
    assert.are.equal(20, n, text)
    assert.truthy(text:find("\n  ... and %d+ more\n"), text)
  end)

  it("says when nothing matched", function()
    for _, word in ipairs { "xyzzy", "", "   " } do
      local text, msg = rp.help(word)
      assert.is_nil(text)
      assert.are.equal("no help for '" .. word .. "': no name or help text matches (rp.help() "
        .. "lists the topics)", msg)
    end
  end)
end)

describe("gen_help.lua", function()
  local dir
  before_each(function() dir = h.tmpdir() end)
  after_each(function() h.remove_tree(dir) end)

  local function gen(lines)
    local path = dir .. "/api.md"
    h.write(path, table.concat(lines, "\n") .. "\n")
    return path, generate(path)
  end

  it("accepts a well-formed file", function()
    local _, data = gen { "# API", "## Part", "### `rp.ones(shape) -> tensor`", "", "Text.", "",
      "```lua", "rp.ones(2)", "```", "### `t:add(x) -> tensor (also t + x)`", "Adds." }
    assert.are.same({ "rp.ones", "rp.ones(shape) -> tensor", "Text.\nExample:\n  > rp.ones(2)",
      {} }, data.entries[1])
    assert.are.equal("rp.Tensor.add", data.entries[2][1])
  end)

  it("wraps a table's cells in their columns, the meaning keeping most of the width", function()
    local _, data = gen { "## A", "### `rp.ones(shape) -> tensor`", "Options:", "",
      "| key | default | meaning |", "|---|---|---|",
      "| `a` | 1 | short |",
      "| `fraction_q`, `fraction_k`, `fraction_o` | fraction_qk, fraction_qk, fraction_v | the "
        .. "width of one rotated placement, in (0, 1], a long enough meaning to wrap at the width "
        .. "of 80 |" }
    assert.are.equal(table.concat({
      "Options:",
      "  a                 1                 short",
      "  fraction_q,       fraction_qk,      the width of one rotated placement, in (0,",
      "  fraction_k,       fraction_qk,      1], a long enough meaning to wrap at the",
      "  fraction_o        fraction_v        width of 80" }, "\n"), data.entries[1][3])
  end)

  it("joins a paragraph's lines and wraps them at 80, bullets with their indent", function()
    local long = ("word "):rep(20)
    local _, data = gen { "## A", "### `rp.ones(shape) -> tensor`",
      "First line of a paragraph,", "its second `line` " .. long, "",
      "- key     a value " .. long, "- a plain bullet " .. long, "  its continuation",
      "  - an inner bullet " .. long, "    its continuation",
      "After the list.", "", "```lua", "x = 1  -- code as it is", "```" }
    assert.are.equal(table.concat({
      "First line of a paragraph, its second line word word word word word word word",
      "word word word word word word word word word word word word word",
      "  key     a value word word word word word word word word word word word word",
      "          word word word word word word word word",
      "  a plain bullet word word word word word word word word word word word word",
      "    word word word word word word word word its continuation",
      "    - an inner bullet word word word word word word word word word word word",
      "      word word word word word word word word word its continuation",
      "After the list.",
      "Example:",
      "  > x = 1  -- code as it is" }, "\n"), data.entries[1][3])
  end)

  local good = "### `rp.zeros(shape) -> tensor`"
  for _, case in ipairs {
    { { "## A", "### rp.ones(shape) -> tensor", "x" }, 2, "an entry heading must be ### `signature`" },
    { { "## A", "### `ones(shape) -> tensor`", "x" }, 2, "the signature 'ones(shape) -> tensor' does not start" },
    { { "## A", "### `x:ones() -> tensor`", "x" }, 2, "the signature 'x:ones() -> tensor' does not" },
    { { "## A", good, "x", good, "y" }, 4, "rp.zeros has a second entry" },
    { { "## A", good, "x", "### `rp.ones(s) -> t`", "## B" }, 4, "entry rp.ones has no text" },
    { { "## A", good, "x", "<!-- topic -->" }, 4, "a topic marker is <!-- topic NAME -->" },
    { { "## A", "<!-- topic t -->", "x", good, "y" }, 4, "a heading inside topic 't'" },
    { { "## A", "<!-- topic t -->", "x" }, 2, "topic 't' has no <!-- end topic -->" },
    { { "## A", good, "x", "```python", "print(1)", "```" }, 4, "an example must be a ```lua fence" },
    { { "## A", good, "x", "```lua", "rp.zeros(1)" }, 5, "a ``` fence is not closed" },
    { { "## A", good, "  indented" }, 3, "an indented line outside a bullet" },
    { { "## A", good, "x", "```lua", ("y"):rep(76), ("z"):rep(77), "```" }, 6,
      "an example line is 81 columns in the help (80 at most): shorten it" },
    { { "## A", "### `rp.zeros(" .. ("s"):rep(61) .. ") -> tensor`", "x" }, 2,
      "the signature is 81 columns (80 at most in the help): shorten it" },
  } do
    it("rejects a malformed file with file:line: " .. case[3], function()
      local path, data, err, code = gen(case[1])
      assert.is_nil(data)
      assert.are.equal(1, code)
      assert.truthy(err:find(path .. ":" .. case[2] .. ": " .. case[3], 1, true), err)
    end)
  end
end)

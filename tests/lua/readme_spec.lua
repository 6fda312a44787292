-- The README's front door: its first 30 lines take a reader from a clone to a first picture in
-- three blocks: shell (make test and make run first, then make and the REPL), Lua (three lines
-- typed in the REPL), shell again (an identity script, a short train.lua run and
-- attention_map.lua on its model). Every command there is run here as written, through the REPL
-- binary (ROPER_BIN, default build/roper), except that the training runs 3 steps instead of 1000
-- and writes into a temporary folder.

local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local BIN = h.BIN
local sh_quote, read, run = h.sh_quote, h.read, h.run

-- The README's code blocks that end within its first 30 lines: { {lang =, lines = {...}}, ... }.
local function front_door()
  local lines, blocks, open = {}, {}, nil
  for l in assert(read("README.md")):gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
  for i = 1, math.min(30, #lines) do
    if lines[i]:match("^```") then
      if open then
        blocks[#blocks + 1], open = open, nil
      else
        open = { lang = lines[i]:match("^```(%S*)"), lines = {} }
      end
    elseif open then
      open.lines[#open.lines + 1] = lines[i]
    end
  end
  return blocks
end

-- command part of a line (before its " # " or " -- " comment)
local function command(line)
  return (line:gsub("%s+#%s.*$", ""):gsub("%s+%-%-%s.*$", ""):gsub("%s+$", ""))
end

local function commands(block)
  local cmds = {}
  for _, l in ipairs(block.lines) do cmds[#cmds + 1] = command(l) end
  return cmds
end

-- The REPL's transcript in the README ("## The REPL"): each help command it shows (`help(...)` or
-- `?word`) with the lines shown after it, up to "..." or the next prompt.
local function transcript_help()
  local text = assert(read("README.md"))
  local block = text:match("\n## The REPL\n.-\n```\n(.-)\n```")
  local shown, cur = {}, nil
  for l in (block .. "\n"):gmatch("([^\n]*)\n") do
    local input = l:match("^roper> (.*)$")
    if input then
      cur = (input:match("^help%(") or input:match("^%?")) and { input = input, lines = {} } or nil
      if cur then shown[#shown + 1] = cur end
    elseif l == "..." then
      cur = nil
    elseif cur then
      cur.lines[#cur.lines + 1] = l
    end
  end
  return shown
end

describe("the README's REPL transcript", function()
  it("shows each help command's first lines as the REPL prints them", function()
    local shown = transcript_help()
    assert.is_true(#shown >= 2, #shown .. " help commands")
    for _, c in ipairs(shown) do
      local out, err, code = run("printf '%s\\n' " .. sh_quote(c.input) .. " | " .. sh_quote(BIN))
      assert.are.equal(0, code, out .. err)
      local got = {}
      for l in out:gmatch("([^\n]*)\n") do
        if #got < #c.lines then got[#got + 1] = l end
      end
      assert.are.same(c.lines, got, c.input)
    end
  end)
end)

describe("the README's first 30 lines", function()
  local blocks = front_door()

  it("hold three blocks: shell, Lua, shell, each marked with its language", function()
    local langs = {}
    for i, b in ipairs(blocks) do langs[i] = b.lang end
    assert.are.same({ "sh", "lua", "sh" }, langs)
  end)

  it("start with make test and make run, then make and the REPL", function()
    assert.are.same({ "make test", "make run", "make", "build/roper" }, commands(blocks[1]))
  end)

  it("give three lines of Lua that the REPL runs, printing an 8 x 8 tensor", function()
    local cmds = commands(blocks[2])
    assert.are.equal(3, #cmds)
    local quoted = {}
    for i = 1, 3 do
      assert.is_nil(cmds[i]:match("^build/"), cmds[i])
      quoted[#quoted + 1] = sh_quote(cmds[i])
    end
    local out, err, code = run("printf '%s\\n' " .. table.concat(quoted, " ") .. " | "
      .. sh_quote(BIN))
    assert.are.equal(0, code, out .. err)
    assert.truthy(out:find("\n%[8 x 8%]\n$"), out)
  end)

  it("run an identity script, a short training and its attention map", function()
    local cmds = commands(blocks[3])
    assert.are.equal(3, #cmds)
    local identity, train, map = cmds[1], cmds[2], cmds[3]
    assert.truthy(identity:match("^build/roper scripts/%w+_identity%.lua$"), identity)
    local out, err, code = run(identity:gsub("^build/roper", sh_quote(BIN)))
    assert.are.equal(0, code, out .. err)
    assert.truthy(out:find("0 failed"), out)
    local dir = h.tmpdir()
    assert.truthy(train:find(" --steps 1000 ", 1, true), train)
    assert.truthy(train:find(" --save runs/add.ckpt$"), train)
    local quick = train:gsub("^build/roper", sh_quote(BIN)):gsub(" %-%-steps 1000 ", " --steps 3 ")
      :gsub("runs/add%.ckpt$", sh_quote(dir .. "/add.ckpt"))
    out, err, code = run(quick)
    assert.are.equal(0, code, out .. err)
    assert.are.equal("build/roper scripts/attention_map.lua runs/add.ckpt", map)
    out, err, code = run(sh_quote(BIN) .. " scripts/attention_map.lua "
      .. sh_quote(dir .. "/add.ckpt"))
    assert.are.equal(0, code, out .. err)
    local png = read(dir .. "/add-attention.png")
    assert.are.equal("\137PNG", png:sub(1, 4))
    -- the problem the README reads out (the task's first problem with seed 1: not the model's)
    assert.truthy(out:find(": ?d=20+32; 0e0+2e0+0e0==2e0 and 2e1+3e1+0e1==5e1 and d==52#\n", 1,
      true), out)
    local readme = assert(read("README.md")):gsub("\n", " ")
    local sentence = readme:match("the picture %(1,280 pixels wide%).-`, which asks")
    assert.truthy(sentence, readme)
    assert.truthy(sentence:find("`?d=20+32; 0e0+2e0+0e0==2e0 and 2e1+3e1+0e1==5e1 and d==52#`", 1,
      true), sentence)
    -- drawn to be read 1280 pixels wide: its 58 tokens put 2 of the 4 heads in a row, at the
    -- full width, 4 rows down (the size docs/experiments.md gives)
    local w, ht = string.unpack(">I4I4", png, 17)
    assert.are.same({ 1280, 2788 }, { w, ht })
    -- the comment names the picture the command writes
    assert.truthy(blocks[3].lines[3]:find("runs/add-attention.png", 1, true), blocks[3].lines[3])
    h.remove_tree(dir)
  end)
end)

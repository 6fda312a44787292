-- The README's front door: its first 15 lines take a reader from a clone to a first picture
-- (make test and make run first, then make, the REPL with three lines of Lua, an identity script,
-- a short train.lua run and attention_map.lua on its model). Every command there is run here as
-- written, through the REPL binary (ROPER_BIN, default build/roper), except that the training
-- runs 3 steps instead of 1000 and writes into a temporary folder.

local BIN = os.getenv("ROPER_BIN") or "build/roper"

local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local sh_quote, read, run = h.sh_quote, h.read, h.run

-- The lines of the README's first code block, if it ends within the first 15 lines.
local function front_door()
  local lines, block, open = {}, nil, false
  for l in assert(read("README.md")):gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
  for i = 1, 15 do
    if lines[i]:match("^```") then
      if open then return block, i end
      open, block = true, {}
    elseif open then
      block[#block + 1] = lines[i]
    end
  end
  error("no code block that ends within the README's first 15 lines")
end

-- command part of a line (before its " # " or " -- " comment)
local function command(line)
  return (line:gsub("%s+#%s.*$", ""):gsub("%s+%-%-%s.*$", ""):gsub("%s+$", ""))
end

describe("the README's first 15 lines", function()
  local block = front_door()
  local cmds = {}
  for _, l in ipairs(block) do cmds[#cmds + 1] = command(l) end

  it("start with make test and make run, then make and the REPL", function()
    assert.are.same({ "make test", "make run", "make", "build/roper" },
      { cmds[1], cmds[2], cmds[3], cmds[4] })
  end)

  it("give three lines of Lua that the REPL runs, printing an 8 x 8 tensor", function()
    local quoted = {}
    for i = 5, 7 do
      assert.is_nil(cmds[i]:match("^build/"), cmds[i])
      quoted[#quoted + 1] = sh_quote(cmds[i])
    end
    local out, err, code = run("printf '%s\\n' " .. table.concat(quoted, " ") .. " | "
      .. sh_quote(BIN))
    assert.are.equal(0, code, out .. err)
    assert.truthy(out:find("\n%[8 x 8%]\n$"), out)
  end)

  it("run an identity script, a short training and its attention map", function()
    local identity, train, map = cmds[8], cmds[9], cmds[10]
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
    assert.are.equal("\137PNG", read(dir .. "/add-attention.png"):sub(1, 4))
    -- the comment names the picture the command writes
    assert.truthy(block[10]:find("runs/add-attention.png", 1, true), block[10])
    h.remove_tree(dir)
  end)
end)

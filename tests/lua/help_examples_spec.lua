-- Every script's --help as a newcomer meets it (issue 48): it opens with the usage, one
-- description and 3 to 5 example command lines, then the script's own options; --help-all adds
-- the config keys of the experiment scripts. Every example runs as written: each is run here
-- (from a fresh folder, with results/ of this checkout beside it), with --steps cut to 2,
-- --seeds (and a grid's seeds) to 1 and a smaller evaluation, in the order the scripts need
-- (train.lua first: its first example keeps the model the examples of sample.lua and
-- attention_map.lua open; compare.lua's makes the comparison of lengths_report.lua's).

local lfs = require "lfs"
local rp = require "roper"

local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local sh_quote, run = h.sh_quote, h.run

local BIN = h.BIN
if not BIN:match("^/") then BIN = h.pwd() .. "/" .. BIN end
local ROOT = h.pwd()

-- the scripts, train.lua first (its models), then the other experiment scripts, then the rest
local scripts = {}
for f in lfs.dir("scripts") do
  if f:match("%.lua$") then scripts[#scripts + 1] = f:gsub("%.lua$", "") end
end
local FIRST = { train = 1, compare = 2, sweep = 3 }
table.sort(scripts, function(a, b)
  local fa, fb = FIRST[a] or 9, FIRST[b] or 9
  if fa ~= fb then return fa < fb end
  return a < b
end)

-- help(script, flag) -> the text of `script --help` (or --help-all), asserting exit 0
local function help(script, flag)
  local out, err, code = run(sh_quote(BIN) .. " scripts/" .. script .. ".lua " .. (flag or "--help"))
  assert.are.equal(0, code, err)
  return out
end

-- The examples of a help text: { {what =, command =}, ... } (a command's lines after a " \"
-- joined), and the text's blocks (separated by blank lines) in order.
local function examples(text)
  local list, in_block, pending = {}, false, nil
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    if line == "Examples:" then
      in_block = true
    elseif in_block and line == "" then
      break
    elseif in_block then
      local what = line:match("^   # (.*)$")
      if what then
        if pending then list[#list].what = list[#list].what .. " " .. what
        else list[#list + 1] = { what = what } end
        pending = true
      else
        local cmd = line:gsub("^%s+", "")
        local e = list[#list]
        e.command = (e.command and (e.command .. " ") or "") .. cmd:gsub(" \\$", "")
        pending = false
        e.open = cmd:match(" \\$") ~= nil
      end
    end
  end
  return list
end

describe("--help of every script", function()
  it("covers every script of scripts/", function()
    assert.is_true(#scripts >= 11, #scripts .. " scripts")
  end)
  for _, script in ipairs(scripts) do
    it(script .. ".lua opens with the usage, a description and 3 to 5 examples", function()
      local text = help(script)
      for line in text:gmatch("[^\n]+") do
        assert.is_true(#line <= 80, ("%d columns: %s"):format(#line, line))
      end
      local usage = text:match("^(Usage: roper scripts/" .. script .. "%.lua [^\n]*)\n\n")
      assert.is_truthy(usage, text)
      assert.is_true(#usage <= 80, usage)
      local ex_at, opt_at = text:find("\nExamples:\n", 1, true), text:find("\nOptions:\n", 1, true)
      assert.is_truthy(ex_at and opt_at and ex_at < opt_at, text)
      -- one block between the usage and the examples: the description
      local between = text:sub(#usage + 3, ex_at - 1)
      assert.is_nil(between:find("\n\n", 1, true), between)
      local list = examples(text)
      assert.is_true(#list >= 3 and #list <= 5, #list .. " examples")
      for _, e in ipairs(list) do
        assert.is_truthy(e.what and #e.what > 0, "an example without its comment")
        assert.is_false(e.open, "a command ends in a continuation: " .. e.command)
        assert.is_truthy(e.command:find("^roper scripts/" .. script .. "%.lua"), e.command)
      end
      assert.is_truthy(text:find("\n   %-%-help%-all "), "no --help-all in:\n" .. text)
      -- the blocks after the examples: "Arguments:" and/or "Options:" (the option lists), then
      -- only the note on the config keys; nothing of argparse's own usage line among them
      local rest = text:sub(text:find("\n\n", ex_at + 1, true) + 2)
      local heads = {}
      for block in (rest .. "\n\n"):gmatch("(.-)\n\n") do heads[#heads + 1] = block:match("^[^\n]*") end
      local want = { "Options:" }
      if heads[1] == "Arguments:" then table.insert(want, 1, "Arguments:") end
      if FIRST[script] then want[#want + 1] = heads[#heads] end
      assert.are.same(want, heads, text)
      if FIRST[script] then assert.truthy(heads[#heads]:find("^Config keys: ")) end
      for line in rest:gmatch("[^\n]+") do
        -- a usage line's pieces: "[--opt <x>]" groups, "Usage:", a cut one ("ug]", "p-all]")
        assert.is_nil(line:find("%] %["), line)
        assert.is_nil(line:find("^%s*%["), line)
        assert.is_nil(line:find("^%S*%]"), line)
        assert.is_nil(line:find("Usage:", 1, true), line)
      end
    end)
  end

  it("lists the config keys under --help-all only, and says so", function()
    for _, script in ipairs { "train", "compare", "sweep" } do
      local short, all = help(script), help(script, "--help-all")
      assert.is_nil(short:find("\n   --d-model ", 1, true), script)
      assert.is_truthy(all:find("\n   --d-model ", 1, true), script)
      assert.is_truthy(short:find("\nConfig keys: each of the %d+ keys of an experiment config is "
        .. "an option too"), short)
      -- --help-all is --help with the config keys: the same start
      local cut = short:find("\n\nConfig keys: ", 1, true)
      assert.are.equal(short:sub(1, cut), all:sub(1, cut))
      local n = tonumber(short:match("each of the (%d+) keys"))
      local listed = select(2, all:sub(cut):gsub("\n   %-%-[%w-]+", ""))
      assert.are.equal(n, listed)
      assert.are.equal(#rp.experiment.keys() - (script == "compare" and 1 or 0), n)
    end
    -- a script without config keys: --help-all is --help
    assert.are.equal(help("sample"), help("sample", "--help-all"))
  end)
end)

describe("every example of every --help", function()
  local tmp
  setup(function()
    tmp = h.tmpdir()
    assert(os.execute("ln -s " .. sh_quote(ROOT .. "/results") .. " " .. sh_quote(tmp .. "/results")))
  end)
  teardown(function() h.remove_tree(tmp) end)

  for _, script in ipairs(scripts) do
    it(script .. ".lua's run as written (training cut to 2 steps, 1 seed)", function()
      for _, e in ipairs(examples(help(script))) do
        local cmd = e.command:gsub("%-%-steps %d+", "--steps 2"):gsub("%-%-seeds %d+", "--seeds 1")
          :gsub("seed=[%d,]+", "seed=1")
        cmd = cmd:gsub("^roper scripts/", sh_quote(BIN) .. " " .. sh_quote(ROOT) .. "/scripts/")
        -- the experiment scripts also evaluate less: fewer batches, and fewer problems where
        -- the task has problems (elsewhere --problems does nothing, and is refused)
        local extra = ""
        if FIRST[script] then
          extra = " --quiet --valid-batches 2"
          if not (cmd:find("--task substring_prefix", 1, true) or cmd:find("--task text", 1, true))
          then
            extra = extra .. " --problems 8"
          end
        end
        local out, err, code = run("cd " .. sh_quote(tmp) .. " && " .. cmd .. extra)
        assert.are.equal(0, code, e.command .. "\n" .. out .. err)
      end
    end)
  end
end)

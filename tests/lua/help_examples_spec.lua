-- Every script's --help as a newcomer meets it (issue 48): it opens with the usage, one
-- description and 3 to 5 example command lines, then the script's own options; --help-all adds
-- the config keys of the experiment scripts. Every example runs as written: each is run here
-- (from a fresh folder, with results/ of this checkout beside it), with --steps cut to 2,
-- --seeds (and a grid's seeds) to 1 and a smaller evaluation, in the order the scripts need
-- (train.lua first: its first example keeps the model the examples of sample.lua and
-- attention_map.lua open; compare.lua's makes the comparison of lengths_report.lua's).
--
-- The commands a user copies from the docs (issue 61): the --help examples and the README's and
-- docs/*.md's commands are written as a clone runs them after make, `build/roper
-- scripts/<name>.lua ...` (or say in the same section that they need make install: `roper-<name>`,
-- `roper scripts/...` from any folder); and every script command of their shell blocks runs
-- here as printed, made cheap the same way (see doc_commands below for what is cut, what is only
-- parsed and what is not run).

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
    if line:match("^Examples") then
      in_block = true
    elseif in_block and not line:match("^   ") and line ~= "" then
      -- the heading's second line
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
      local usage = text:match("^(Usage: build/roper scripts/" .. script .. "%.lua [^\n]*)\n\n")
      assert.is_truthy(usage, text)
      assert.is_true(#usage <= 80, usage)
      local ex_at, opt_at = text:find("\nExamples ", 1, true), text:find("\nOptions:\n", 1, true)
      -- the heading says where the commands run, and the installed command's name
      local heading = text:sub(ex_at + 1):match("^(.-):\n   ")
      assert.are.equal(("Examples (in a clone, after make; after make install, roper-%s is the same as "
        .. "build/roper scripts/%s.lua)"):format(script:gsub("_", "-"), script),
        heading:gsub("\n", " "))
      assert.is_truthy(ex_at and opt_at and ex_at < opt_at, text)
      -- one block between the usage and the examples: the description
      local between = text:sub(#usage + 3, ex_at - 1)
      assert.is_nil(between:find("\n\n", 1, true), between)
      local list = examples(text)
      assert.is_true(#list >= 3 and #list <= 5, #list .. " examples")
      for _, e in ipairs(list) do
        assert.is_truthy(e.what and #e.what > 0, "an example without its comment")
        assert.is_false(e.open, "a command ends in a continuation: " .. e.command)
        assert.is_truthy(e.command:find("^build/roper scripts/" .. script .. "%.lua"), e.command)
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

-- cheap(command) -> the shell command that runs `build/roper scripts/<name>.lua ...` as written
-- but short, from any folder: training cut to 2 steps (--steps 2 added where the command gives
-- none), --seeds, a method's seeds (roper_legacy@5) and a grid's seeds to 1, and the experiment scripts evaluate less (2 validation
-- batches; 8 problems where the task has problems: elsewhere --problems does nothing, and is
-- refused), without the progress bar. Everything else (options, paths, redirections) is kept.
local function cheap(command)
  local script = command:match("^build/roper scripts/([%w_]+)%.lua")
  local cmd = command:gsub("%-%-steps %d+", "--steps 2"):gsub("%-%-seeds %d+", "--seeds 1")
    :gsub("seed=[%d,]+", "seed=1"):gsub("(%f[%w][%w_:.=]+)@%d+", "%1@1")
  local extra = ""
  if FIRST[script] then
    extra = " --quiet --valid-batches 2"
    if not cmd:find("--steps ", 1, true) then extra = extra .. " --steps 2" end
    if script == "compare" and not cmd:find("--seeds ", 1, true) then extra = extra .. " --seeds 1" end
    if not (cmd:find("--task substring_prefix", 1, true) or cmd:find("--task text", 1, true)
      or cmd:find("--task lm", 1, true)) then
      extra = extra .. " --problems 8"
    end
  end
  -- the options go before a redirection ("... --print-commands > jobs.txt")
  local head, redirect = cmd:match("^(.-)( [<>].*)$")
  if not head then head, redirect = cmd, "" end
  head = head:gsub("^build/roper scripts/", sh_quote(BIN) .. " " .. sh_quote(ROOT) .. "/scripts/")
  return head .. extra .. redirect
end

-- fresh_folder() -> a temporary folder holding results/ with a link to each entry of this
-- checkout's results/ (the examples read the stored comparisons); a command writing into
-- results/<x> gets a folder of its own (unlink(dir, command) drops the link first), never the
-- checkout's.
local function fresh_folder()
  local tmp = h.tmpdir()
  assert(lfs.mkdir(tmp .. "/results"))
  for f in lfs.dir(ROOT .. "/results") do
    if f ~= "." and f ~= ".." then
      assert(lfs.link(ROOT .. "/results/" .. f, tmp .. "/results/" .. f, true))
    end
  end
  return tmp
end

local function unlink(tmp, command)
  for out in command:gmatch("%-%-out (results/[^%s/]+)") do
    local p = tmp .. "/" .. out
    if lfs.symlinkattributes(p, "mode") == "link" then os.remove(p) end
  end
end

describe("every example of every --help", function()
  local tmp
  setup(function() tmp = fresh_folder() end)
  teardown(function() h.remove_tree(tmp) end)

  for _, script in ipairs(scripts) do
    it(script .. ".lua's run as written (training cut to 2 steps, 1 seed)", function()
      for _, e in ipairs(examples(help(script))) do
        unlink(tmp, e.command)
        local out, err, code = run("cd " .. sh_quote(tmp) .. " && " .. cheap(e.command))
        assert.are.equal(0, code, e.command .. "\n" .. out .. err)
      end
    end)
  end
end)

-- ---------------------------------------------------------------- the docs' commands
-- The pages: the README and docs/*.md. doc_pages(true), the pages whose commands run here, leaves
-- out docs/language_model.md: its commands need the corpus that make corpus prepares (minutes of
-- Debian's linux-doc); lm_spec runs its first minute's as printed on a small corpus of its own.
local NOT_RUN = { ["docs/language_model.md"] = true }
local function doc_pages(to_run)
  local pages = { "README.md" }
  for f in assert(run("git ls-files 'docs/*.md'")):gmatch("[^\n]+") do
    if not (to_run and NOT_RUN[f]) then pages[#pages + 1] = f end
  end
  return pages
end

-- The commands of a page's ```sh blocks, in order: { {line =, command =}, ... }, a command's
-- lines after " \" joined, its " # comment" dropped.
local function doc_commands(text)
  local list, open, pending = {}, false, nil
  local n = 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if line:match("^```") then
      open = not open and line:match("^```sh%s*$") ~= nil
    elseif open then
      local cmd = line:gsub("%s+#%s.*$", ""):gsub("^#.*$", ""):gsub("%s+$", "")
      if pending then
        pending.command = pending.command .. " " .. cmd:gsub("^%s+", ""):gsub(" ?\\$", "")
      elseif cmd ~= "" then
        pending = { line = n, command = cmd:gsub(" ?\\$", "") }
        list[#list + 1] = pending
      end
      if not cmd:match("\\$") then pending = nil end
    end
  end
  return list
end

describe("the commands of the README and docs/*.md", function()
  -- the script names as commands: roper-train, roper-attention-map, ...
  local installed = {}
  for _, s in ipairs(scripts) do installed[#installed + 1] = "roper%-" .. s:gsub("_", "%%-") end

  it("are written as a clone runs them after make, or say they need make install", function()
    local bad = {}
    for _, page in ipairs(doc_pages()) do
      -- by section (a heading and the text up to the next): one that mentions make install
      -- may show the installed commands
      local sections, fence = { "" }, false
      for line in (assert(h.read(page)) .. "\n"):gmatch("([^\n]*)\n") do
        if line:match("^```") then fence = not fence end
        if not fence and line:match("^#") then sections[#sections + 1] = "" end
        sections[#sections] = sections[#sections] .. line .. "\n"
      end
      for _, para in ipairs(sections) do
        if not para:find("make install", 1, true) then
          -- "roper scripts/" but as build/roper, build-portable/roper or a path's end
          local at = 1
          while true do
            local i = para:find("roper scripts/", at, true)
            if not i then break end
            if not para:sub(1, i - 1):match("[%w/._-]$") then
              bad[#bad + 1] = page .. ": " .. para:sub(i, i + 40)
            end
            at = i + 1
          end
          for _, pat in ipairs(installed) do
            for hit in para:gmatch("%f[%w-]" .. pat .. "%f[^%w-]") do
              bad[#bad + 1] = page .. ": " .. hit .. " (without make install in its section)"
            end
          end
        end
      end
    end
    assert.are.same({}, bad)
  end)

  -- Each command of a ```sh block that runs a script is run here, in order, in a fresh folder for
  -- each page, so that a command finds the model or the runs an earlier one of its page made
  -- (runs/add.ckpt ...), as a reader following the page does:
  --  - through cheap(): as printed, but short (2 steps, 1 seed, a smaller evaluation);
  --  - mpirun -np N <command>: the command without mpirun (mpi_spec runs mpirun itself);
  --  - sbatch $(<command>): the command (it prints the job array's script);
  --  - --slurm: checked up to submitting, with a stand-in sbatch and squeue that refuse every job
  --    (every option read, the runs and the job array's script written, nothing submitted);
  --  - a command with "..." (options left out on purpose) is not run; nor are the commands of
  --    other programs (make, parallel, cd): the list of those left out is checked below.
  it("run as printed (cut short) in a fresh folder, each script command of their shell blocks",
    function()
    local bin = h.tmpdir()
    for _, p in ipairs { "sbatch", "squeue" } do
      h.write(bin .. "/" .. p, "#!/bin/sh\necho '" .. p .. ": error: not submitted (a test)' >&2\n"
        .. "exit 1\n")
      assert(os.execute("chmod +x " .. sh_quote(bin .. "/" .. p)))
    end
    local ran, left_out = 0, {}
    for _, page in ipairs(doc_pages(true)) do
      do
        local tmp = fresh_folder()
        for _, c in ipairs(doc_commands(assert(h.read(page)))) do
          local where = page .. ":" .. c.line .. ": " .. c.command
          local cmd = c.command:gsub("^mpirun %-np %d+ ", ""):gsub("^sbatch %$%((.*)%)$", "%1")
          if cmd:match("^echo '[^']*' > [%w.]+$") then
            assert(os.execute("cd " .. sh_quote(tmp) .. " && " .. cmd)) -- a file a command reads
          elseif not cmd:match("^build/roper scripts/") or cmd:find("...", 1, true) then
            left_out[#left_out + 1] = page .. ": " .. c.command:match("^%S+")
              .. (cmd:find("...", 1, true) and " ..." or "")
          else
            unlink(tmp, cmd)
            local slurm = cmd:find(" %-%-slurm%f[%s%z]") ~= nil
            -- a Slurm command in a folder of its own (the same --out here holds the runs an
            -- earlier command of the page finished: nothing would be submitted)
            local dir = slurm and h.tmpdir() or tmp
            local out, err, code = run("cd " .. sh_quote(dir) .. " && PATH=" .. sh_quote(bin)
              .. ":\"$PATH\" " .. cheap(cmd))
            if slurm then h.remove_tree(dir) end
            if slurm then
              assert.are.equal(2, code, where .. "\n" .. out .. err)
              assert.truthy(err:find("^compare%.lua: %-%-slurm: sbatch refused the job array %(.*"
                .. "/slurm/array%.sbatch%): sbatch: error: not submitted %(a test%)\n$"),
                where .. "\n" .. err)
            else
              assert.are.equal(0, code, where .. "\n" .. out .. err)
            end
            ran = ran + 1
          end
        end
        h.remove_tree(tmp)
      end
    end
    h.remove_tree(bin)
    assert.is_true(ran >= 30, ran .. " commands ran")
    -- what was not run: other programs, and the commands with "..." (a placeholder)
    table.sort(left_out)
    assert.are.same({
      "README.md: build/roper", -- the REPL (readme_spec types in it)
      "README.md: make", "README.md: make", "README.md: make", -- make test, make run, make
      "docs/cluster.md: mpirun ...", "docs/cluster.md: mpirun ...", -- placeholders
      "docs/cluster.md: parallel", "docs/cluster.md: parallel", "docs/cluster.md: parallel",
      "docs/experiments.md: build-portable/roper ...", -- after make PORTABLE=1, a placeholder
      "docs/experiments.md: cd", -- a line --print-commands prints, shown
      "docs/experiments.md: make", -- make PORTABLE=1
      "docs/experiments.md: parallel", "docs/experiments.md: parallel",
      "docs/experiments.md: parallel", "docs/experiments.md: parallel",
      "docs/install.md: make", "docs/install.md: make", -- make install, make uninstall
      "docs/notebooks.md: make", "docs/notebooks.md: make", "docs/notebooks.md: make",
      -- the language-model study's commands (hours at nice -n 19; the runner and the reports of
      -- results/lm2-*, which do not exist before it; lm2_tables_spec runs its tables' script)
      "docs/results.md: ROPER=build-portable/roper",
      "docs/results.md: build-portable/roper", "docs/results.md: build-portable/roper",
      "docs/results.md: nice", "docs/results.md: nice", "docs/results.md: nice",
      "docs/results.md: nice",
      "docs/tutorial.md: build/roper", "docs/tutorial.md: mkdir", -- the REPL (tutorial_spec)
    }, left_out)
  end)
end)

-- The command line of the experiment scripts and their errors for people: a script's main
-- (cli.main: one line on stderr, exit 2 for a usage problem, 1 for a failure while working),
-- usage problems (cli.usage), messages without the module's wrappers (cli.message, cli.inner),
-- the argparse parser of a script (cli.parser), and the options made from rp.experiment.keys()
-- (cli.add_config_options, cli.config_overrides) with rp.experiment.config and check without
-- raising (cli.config, cli.check), and the refusal of an option that does nothing for the run
-- (cli.refuse_unused, --allow-unused).
--
-- Library (Debian package): argparse (options).
local cli = {}

-- ---------------------------------------------------------------- errors for people

-- A usage problem (a bad option, a path that cannot be used): reported in one line, exit 2.
local Usage = {}
Usage.__tostring = function(e) return e.msg end

-- usage(msg): raises a usage problem.
function cli.usage(msg)
  error(setmetatable({ msg = msg }, Usage), 0)
end

-- message(err) -> the text of an error for a person: without the "file.lua:line: " position of
-- the Lua code that raised it (a position in the user's own file, "p.jsonl:2: ", stays) and
-- without the "bad argument #1 to 'rp.experiment.check' (...)" wrapper of the module's checks
-- (a script's user wrote options, not that call).
function cli.message(err)
  local msg = tostring(err):gsub("^[^ ]-%.lua:%d+: ", "", 1):gsub("^%[string [^]]*%]:%d+: ", "", 1)
  return msg:match("^bad argument #%d+ to 'rp%.experiment%.[%w_]+' %((.*)%)$") or msg
end

-- inner(err): cli.message without the "bad argument #1 to 'encode' (...)" wrapper of any
-- module function (for a problem in what the user typed, e.g. a prompt the vocabulary lacks).
function cli.inner(err)
  local msg = cli.message(err)
  return msg:match("^bad argument #%d+ to '[^']*' %((.*)%)$") or msg
end

-- main(name, fn): runs fn() and ends the script: exit 0 when fn returns, else one line
-- "<name>: <message>" on stderr and exit 2 for a usage problem (cli.usage, a bad option or
-- config), 1 for a failure while working. With --debug among the arguments or ROPER_DEBUG=1 the
-- message carries its Lua traceback. stdout is line-buffered, so that when stdout and stderr go
-- to one file (`> log 2>&1`) the lines stand in the order they were written: a table printed on
-- stdout is not cut by, nor put after, the progress and "wrote" lines that follow it on stderr
-- (stdio would hold a file's stdout back in a 4 KiB buffer while stderr goes out at once).
function cli.main(name, fn)
  io.stdout:setvbuf("line")
  local debugging = os.getenv("ROPER_DEBUG") == "1"
  for i = 1, #arg do
    if arg[i] == "--debug" then debugging = true end
  end
  local ok, err = xpcall(fn, function(e)
    if getmetatable(e) == Usage or not debugging then return e end
    return debug.traceback(tostring(e), 2)
  end)
  -- under mpirun (rp.mpi.init was called): a clean end shuts MPI down; an error ends every rank
  -- of the job (the others may wait for this one), each rank saying which it is
  local rp = package.loaded.roper
  local comm = type(rp) == "table" and rp.mpi and rp.mpi.world()
  if comm and not comm:mpi() then comm = nil end
  if ok then
    if comm then comm:finalize() end
    return
  end
  local who = comm and comm:size() > 1 and ("rank %d of %d: "):format(comm:rank(), comm:size())
    or ""
  local code = getmetatable(err) == Usage and 2 or 1
  -- one string, so one write: stderr is unbuffered, and under mpirun another process's output
  -- (its abort banner) would otherwise land between the pieces
  local text = code == 2 and err.msg or (debugging and tostring(err) or cli.message(err))
  io.stderr:write(table.concat { name, ": ", who, text, "\n" })
  if comm then comm:abort(code) end
  os.exit(code)
end

-- parser(name, description, examples) -> an argparse parser whose errors are one line,
-- "<message> (see --help)", raised as usage problems; it has the flags --debug, --help and
-- --help-all. name: the command as typed in a clone after make, "build/roper scripts/<x>.lua"
-- (the usage line's). examples: { {what, command}, ... }, 3 to 5 command lines that run as
-- written in a clone after make, each starting with name and under a comment saying what it
-- does; the heading says that after make install roper-<x> is the same command.
--
-- --help prints the usage, the description, the examples and the script's own options; the
-- config keys (cli.add_config_options), 70-odd options of every experiment script, are listed by
-- --help-all, which prints all of it. Both at most 80 columns wide: a long example continues on
-- the next line after a backslash, as a shell reads it.
local parser_names = setmetatable({}, { __mode = "k" })
local parser_examples = setmetatable({}, { __mode = "k" })
local config_options = setmetatable({}, { __mode = "k" })
local WIDTH = 80

-- words of text in lines of at most width columns (each line starts with indent)
local function wrap(text, width, indent, next_indent)
  local lines, line = {}, indent
  for word in text:gmatch("%S+") do
    if #line > #indent and #line + 1 + #word > width then
      lines[#lines + 1] = line
      line = next_indent .. word
    else
      line = line .. (#line > #indent and " " or "") .. word
    end
  end
  lines[#lines + 1] = line
  return table.concat(lines, "\n")
end

-- examples(parser) -> the "Examples (...):" block of a parser (nil without examples)
local function examples_block(p)
  local ex = parser_examples[p]
  if not ex or #ex == 0 then return nil end
  local installed = ("roper-" .. (parser_names[p]:match("([%w_]+)%.lua$") or "")):gsub("_", "-")
  local out = { wrap(("Examples (in a clone, after make; after make install, %s is the same as %s):")
    :format(installed, parser_names[p]), WIDTH, "", "") }
  for _, e in ipairs(ex) do
    out[#out + 1] = wrap(e[1], WIDTH, "   # ", "   # ")
    -- a long command continues after " \" on the next line, indented
    -- (an option and its first value stay on one line)
    local glued = e[2]:gsub("(%-%-[%w-]+) ([^-%s]%S*)", "%1\0%2")
    local cmd = wrap(glued, WIDTH - 2, "   ", "       "):gsub("\n", " \\\n"):gsub("%z", " ")
    out[#out + 1] = cmd
  end
  return table.concat(out, "\n")
end

-- help(parser, all) -> the text of --help (all: --help-all)
local function help_text(p, all)
  local hidden = {}
  if not all then
    for _, o in ipairs(config_options[p] or {}) do
      if not o._hidden then o._hidden = true; hidden[#hidden + 1] = o end
    end
  end
  if not p._usage then
    -- a short usage: the options are listed below it
    local words = { "Usage: " .. (parser_names[p] or "script"), "[options]" }
    for _, a in ipairs(p._arguments) do words[#words + 1] = a:_get_usage() end
    p:usage(table.concat(words, " "))
  end
  -- argparse's help is the usage, a blank line and the lists: the usage set above comes first,
  -- so the lists are what follows it (the help made before the usage was set began with
  -- argparse's own long usage, and cutting that at the short one's length left a piece of it)
  local usage = p:get_usage()
  local desc = p._description
  p._description = nil
  local text = p:get_help()
  p._description = desc
  for _, o in ipairs(hidden) do o._hidden = nil end
  assert(text:sub(1, #usage + 2) == usage .. "\n\n", "cli: argparse's help does not start with the usage")
  local blocks = { usage }
  if desc then blocks[#blocks + 1] = wrap(desc, WIDTH, "", "") end
  blocks[#blocks + 1] = examples_block(p)
  blocks[#blocks + 1] = text:sub(#usage + 3)
  if #hidden > 0 then
    blocks[#blocks + 1] = wrap(("Config keys: each of the %d keys of an experiment config is an "
      .. "option too (--task, --pe, --steps, --lr, ...); --help-all lists them with their "
      .. "defaults (docs/experiments.md)."):format(#hidden), WIDTH, "", "")
  end
  return table.concat(blocks, "\n\n")
end

-- help(parser[, all]) -> the text --help (all: --help-all) prints, for tests and docs
function cli.help(p, all) return help_text(p, all) end

function cli.parser(name, description, examples)
  local argparse = require "argparse"
  local p = argparse(name, description):help_max_width(WIDTH):add_help(false)
  parser_names[p] = name
  parser_examples[p] = examples
  -- an option that takes a list, given twice, is refused ("--methods given more than once"),
  -- not the last list kept: --methods rope --methods roper would compare roper alone. An option
  -- of one value keeps its last (a base command and an override); options meant to repeat say
  -- so with :count("*").
  local parse = p.parse
  function p.parse(self, ...)
    for _, o in ipairs(self._options) do
      if o._maxargs > 1 and o._maxcount == 1 then o:overwrite(false) end
    end
    return parse(self, ...)
  end
  assert(name:match("^build/roper scripts/[%w_]+%.lua$"), "cli.parser: name " .. name)
  for _, e in ipairs(examples or {}) do
    assert(e[2] == name or e[2]:sub(1, #name + 1) == name .. " ", "cli.parser: an example of " .. name
      .. " starts otherwise: " .. e[2])
  end
  p:flag("-h --help", "Show this help and exit.")
    :action(function() print(help_text(p, false)); os.exit(0) end)
  p:flag("--help-all", "Show this help with every option, and exit.")
    :action(function() print(help_text(p, true)); os.exit(0) end)
  p:flag("--debug", "On an error, print the Lua traceback too (or set ROPER_DEBUG=1).")
  p.error = function(_, msg)
    msg = msg:gsub("\n.*", "") -- argparse's "Did you mean ...?" line
    local value = msg:match("^unknown option '(%-[%d.][%d.eE+-]*)'$")
    if value then
      -- a negative number after an option: argparse takes it for an option itself
      for i = 2, #arg do
        if tonumber(arg[i]) and arg[i]:sub(1, #value) == value
          and arg[i - 1]:match("^%-%-[%w-]+$") then
          cli.usage(("%s %s: write a negative value as %s=%s (see --help)"):format(arg[i - 1],
            arg[i], arg[i - 1], arg[i]))
        end
      end
    end
    -- a value its option's converter refused (argparse names the value only): the option too
    local bad = msg:match("^malformed argument '(.*)'$")
    if bad then
      -- the options given that value (several: it is one of them, argparse does not say which)
      local opts, seen = {}, {}
      for i = 1, #arg do
        local opt, v = arg[i]:match("^(%-%-[%w_-]+)=(.*)$")
        if not opt and arg[i] == bad then
          -- the option whose values it is among (--jump-sensitivity 1 x)
          local j = i - 1
          while j >= 1 and not arg[j]:match("^%-") do j = j - 1 end
          if j >= 1 and arg[j]:match("^%-%-[%w_-]+$") then opt, v = arg[j], bad end
        end
        if opt and v == bad and not seen[opt] then seen[opt], opts[#opts + 1] = true, opt end
      end
      if #opts == 1 then
        cli.usage(("%s %s: not a value this option takes (see --help)"):format(opts[1], bad))
      elseif #opts > 1 then
        cli.usage(("%s: not a value one of %s takes (see --help)"):format(bad,
          table.concat(opts, ", ")))
      end
    end
    local twice = msg:match("^option '(.-)' must be used at most 1 time$")
    if twice then
      cli.usage(("%s given more than once: give its values after one %s (see --help)"):format(
        twice, twice))
    end
    cli.usage(msg .. " (see --help)")
  end
  return p
end

-- ---------------------------------------------------------------- command-line options
-- add_config_options(parser, rp[, skip]): one option per experiment key, --d-model, with the
-- default and the allowed values in the help; --d_model is accepted too but not listed (each
-- option appears once in --help, under "Config keys" after the script's own options, and the
-- usage line does not list them). A key of kind "bool" takes its value or none: --learn-freq is
-- --learn-freq true.
-- None gets an argparse default, so config_overrides can tell what was given.
function cli.add_config_options(parser, rp, skip)
  skip = skip or {}
  cli.allow_unused(parser)
  -- the script's own options (argparse's list of them so far) stay first, under "Options"
  local own = { table.unpack(parser._options or {}) }
  if #own > 0 then parser:group("Options", table.unpack(own)) end
  local options = {}
  for _, k in ipairs(rp.experiment.keys()) do
    if not skip[k.name] then
      local dashed = k.name:gsub("_", "-")
      local kind = type(k.kind) == "table" and table.concat(k.kind, " | ") or k.kind
      local def = k.default
      if def == "" then def = "none" end
      local o = parser:option("--" .. dashed, ("%s (%s; default %s)"):format(k.help, kind,
        tostring(def))):target(k.name)
        :argname("<" .. (type(k.kind) == "table" and "name" or k.kind) .. ">")
      if k.kind == "bool" then o:args("?") end -- argparse gives a list of 0 or 1 values
      if dashed ~= k.name then o:hidden_name("--" .. k.name) end
      options[#options + 1] = o
    end
  end
  parser:group("Config keys (docs/experiments.md; --d_model works as --d-model)",
    table.unpack(options))
  config_options[parser] = options
  parser:usage(("Usage: %s [options] [config keys]"):format(parser_names[parser] or "script"))
end

-- config(rp, overrides) -> cfg | nil, message: rp.experiment.config without raising; the message
-- is for people (cli.message).
function cli.config(rp, overrides)
  local ok, cfg = pcall(rp.experiment.config, overrides)
  if ok then return cfg end
  return nil, cli.message(cfg)
end

-- first_steps() -> progress, close: a progress(done, total, what) for rp.experiment.check's
-- option progress: the lm task's first steps on a corpus (its tokenizer trained, its ids
-- written: a minute or more that would otherwise look like a hang) as lines on stderr, terminal
-- or not: "<what> ..." when a step starts, " done in <s> s" on the same line when it ends.
-- close() ends a line left open (a step that failed), so that an error follows on its own line.
function cli.first_steps()
  local uv_ok, uv = pcall(require, "luv")
  local function now() return uv_ok and uv.hrtime() / 1e9 or os.time() end
  local started, open = {}, nil
  local function close()
    if open then io.stderr:write("\n") end
    open = nil
  end
  local function progress(done, total, what)
    if done == 0 then
      close()
      io.stderr:write(what, " ...")
      started[what], open = now(), what
    elseif done >= total then
      local t = started[what] and now() - started[what] or 0
      io.stderr:write(open == what and "" or (what .. ":"), (" done in %.1f s\n"):format(t))
      open = nil
    end
  end
  return progress, close
end

-- check(rp, overrides[, quiet[, resuming]]) -> cfg, memory | nil, message: rp.experiment.check
-- without raising (the model, the memory, the task and its corpus, the init checkpoint unless
-- resuming: a run that goes on from its own checkpoint, before any run starts); unless quiet,
-- the lm task's first steps on a corpus show on stderr (cli.first_steps).
function cli.check(rp, overrides, quiet, resuming)
  local progress, close
  if not quiet then progress, close = cli.first_steps() end
  local ok, cfg, mem = pcall(rp.experiment.check, overrides, { progress = progress,
    init = not resuming })
  if close then close() end
  if ok then return cfg, mem end
  return nil, cli.message(cfg)
end

-- config_overrides(args, rp) -> the experiment keys given on the command line, as strings
-- (rp.experiment.config converts them); a bool key given without a value is "true".
function cli.config_overrides(args, rp)
  local o = {}
  for _, k in ipairs(rp.experiment.keys()) do
    local v = args[k.name]
    if type(v) == "table" then v = v[1] or "true" end
    if v ~= nil then o[k.name] = v end
  end
  return o
end

-- ---------------------------------------------------------------- options that do nothing
-- allow_unused(parser): the flag --allow-unused of a script that refuses options that do nothing.
function cli.allow_unused(parser)
  parser:flag("--allow-unused", "Run even with an option that does nothing for the chosen task "
    .. "or mode (refused otherwise, with the reason).")
end

-- given(name) -> whether the command line holds option --name (or --name=...): typed, not a
-- default argparse filled in.
function cli.given(name)
  for i = 1, #arg do
    if arg[i] == "--" .. name or arg[i]:sub(1, #name + 3) == "--" .. name .. "=" then return true end
  end
  return false
end

-- refuse(args, label, why): a usage problem "<label> does nothing <why> (--allow-unused runs it
-- anyway)", unless args.allow_unused; the one form of every script's refusal.
function cli.refuse(args, label, why)
  if args.allow_unused then return end
  cli.usage(("%s does nothing %s (--allow-unused runs it anyway)"):format(label, why))
end

-- option(name, value) -> "--str-len 5": a config key as a command line gives it.
function cli.option(name, value)
  return ("--%s %s"):format(name:gsub("_", "-"), tostring(value))
end

-- typed(overrides) -> {key = "--str-len 5", ...}: the labels of config_overrides' keys.
function cli.typed(overrides)
  local t = {}
  for k, v in pairs(overrides) do t[k] = cli.option(k, v) end
  return t
end

-- refuse_unused(rp, args, given, configs[, across]): a usage problem for the first key of given
-- (in the order of rp.experiment.keys()) that does nothing for every config of configs, by
-- rp.experiment.applies (the one rule: the task's keys, rp.model's rule for the model keys, the
-- keys of some modes only), unless args.allow_unused (--allow-unused). given: {key = label}, the
-- keys the user wrote and how ("--str-len 5"); defaults and config files never count. configs:
-- the resolved configs of the runs the keys go into; across: what they are, for the message when
-- they are several and their reasons differ ("method", "point of the grid"):
--   --str-len 5 does nothing for task addition: it applies to task substring_index
--     (--allow-unused runs it anyway)
function cli.refuse_unused(rp, args, given, configs, across)
  if args.allow_unused then return end
  for _, k in ipairs(rp.experiment.keys()) do
    local label = given[k.name]
    if label then
      local whys, seen, used = {}, {}, false
      for _, cfg in ipairs(configs) do
        local ok, why = rp.experiment.applies(k.name, cfg)
        if ok then used = true; break end
        if not seen[why] then seen[why] = true; whys[#whys + 1] = why end
      end
      if not used and #whys > 0 then
        local why = #whys == 1 and whys[1]
          or ("for any %s: %s"):format(across or "run", table.concat(whys, "; "))
        cli.refuse(args, label, why)
      end
    end
  end
end

return cli

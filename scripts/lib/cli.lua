-- The command line of the experiment scripts and their errors for people: a script's main
-- (cli.main: one line on stderr, exit 2 for a usage problem, 1 for a failure while working),
-- usage problems (cli.usage), messages without the module's wrappers (cli.message, cli.inner),
-- the argparse parser of a script (cli.parser), and the options made from rp.experiment.keys()
-- (cli.add_config_options, cli.config_overrides) with rp.experiment.config and check without
-- raising (cli.config, cli.check).
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

-- message(err) -> the text of an error for a person: without the "file:line: " position and
-- without the "bad argument #1 to 'rp.experiment.check' (...)" wrapper of the module's checks
-- (a script's user wrote options, not that call).
function cli.message(err)
  local msg = tostring(err):gsub("^[^ ]-:%d+: ", "", 1)
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
  if code == 2 then
    io.stderr:write(name, ": ", who, err.msg, "\n")
  else
    io.stderr:write(name, ": ", who, debugging and tostring(err) or cli.message(err), "\n")
  end
  if comm then comm:abort(code) end
  os.exit(code)
end

-- parser(...) -> an argparse parser whose errors are one line, "<message> (see --help)", raised
-- as usage problems; it has the flag --debug. Its help is at most 80 columns wide.
local parser_names = setmetatable({}, { __mode = "k" })
function cli.parser(name, description)
  local argparse = require "argparse"
  local p = argparse(name, description):help_max_width(80)
  parser_names[p] = name
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
  parser:usage(("Usage: %s [options] [config keys]"):format(parser_names[parser] or "script"))
end

-- config(rp, overrides) -> cfg | nil, message: rp.experiment.config without raising; the message
-- is for people (cli.message).
function cli.config(rp, overrides)
  local ok, cfg = pcall(rp.experiment.config, overrides)
  if ok then return cfg end
  return nil, cli.message(cfg)
end

-- check(rp, overrides) -> cfg, memory | nil, message: rp.experiment.check without raising (the
-- model, the memory, the task and its corpus, before any run starts).
function cli.check(rp, overrides)
  local ok, cfg, mem = pcall(rp.experiment.check, overrides)
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

return cli

-- Small helpers shared by the experiment scripts (train.lua, compare.lua, sweep.lua):
-- running a script's main with errors for people (util.main), atomic file writes (through the
-- module's rp.write_file), JSON files,
-- folders, shell quoting, markdown and CSV tables, the progress line, and the command-line
-- options made from rp.experiment.keys().
--
-- Libraries (Debian packages): argparse (options), lua-cjson (reading JSON), lua-dkjson (writing
-- it, indented, keys sorted), penlight and lfs (paths, folders), luv (process id, signals to
-- pids, whether stderr is a terminal and its width). The CSV writer is ours: penlight's
-- pl.data.write quotes nothing (a comma in a cell splits it), stops a row at its first empty
-- cell and writes numbers with tostring's 14 digits.
local cjson = require "cjson"
local dkjson = require "dkjson"
local lfs = require "lfs"
local pldir = require "pl.dir"
local plpath = require "pl.path"
local uv = require "luv"
local rp = require "roper"

local util = {}

-- ---------------------------------------------------------------- errors for people

-- A usage problem (a bad option, a path that cannot be used): reported in one line, exit 2.
local Usage = {}
Usage.__tostring = function(e) return e.msg end

-- usage(msg): raises a usage problem.
function util.usage(msg)
  error(setmetatable({ msg = msg }, Usage), 0)
end

-- message(err) -> the text of an error for a person: without the "file:line: " position and
-- without the "bad argument #1 to 'rp.experiment.check' (...)" wrapper of the module's checks
-- (a script's user wrote options, not that call).
function util.message(err)
  local msg = tostring(err):gsub("^[^ ]-:%d+: ", "", 1)
  return msg:match("^bad argument #%d+ to 'rp%.experiment%.[%w_]+' %((.*)%)$") or msg
end

-- inner(err): util.message without the "bad argument #1 to 'encode' (...)" wrapper of any
-- module function (for a problem in what the user typed, e.g. a prompt the vocabulary lacks).
function util.inner(err)
  local msg = util.message(err)
  return msg:match("^bad argument #%d+ to '[^']*' %((.*)%)$") or msg
end

-- main(name, fn): runs fn() and ends the script: exit 0 when fn returns, else one line
-- "<name>: <message>" on stderr and exit 2 for a usage problem (util.usage, a bad option or
-- config), 1 for a failure while working. With --debug among the arguments or ROPER_DEBUG=1 the
-- message carries its Lua traceback. stdout is line-buffered, so that when stdout and stderr go
-- to one file (`> log 2>&1`) the lines stand in the order they were written: a table printed on
-- stdout is not cut by, nor put after, the progress and "wrote" lines that follow it on stderr
-- (stdio would hold a file's stdout back in a 4 KiB buffer while stderr goes out at once).
function util.main(name, fn)
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
    io.stderr:write(name, ": ", who, debugging and tostring(err) or util.message(err), "\n")
  end
  if comm then comm:abort(code) end
  os.exit(code)
end

-- parser(...) -> an argparse parser whose errors are one line, "<message> (see --help)", raised
-- as usage problems; it has the flag --debug. Its help is at most 80 columns wide.
local parser_names = setmetatable({}, { __mode = "k" })
function util.parser(name, description)
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
          util.usage(("%s %s: write a negative value as %s=%s (see --help)"):format(arg[i - 1],
            arg[i], arg[i - 1], arg[i]))
        end
      end
    end
    util.usage(msg .. " (see --help)")
  end
  return p
end

-- ---------------------------------------------------------------- the terminal, the progress line

-- isatty(fd) -> whether file descriptor fd (2: stderr) is a terminal (libuv; no shell started).
function util.isatty(fd)
  return uv.guess_handle(fd) == "tty"
end

-- columns() -> the width of the terminal on stderr: its window size, else $COLUMNS (a number
-- from 20 to 10000), else 80.
function util.columns()
  if util.isatty(2) then
    local tty = uv.new_tty(2, false)
    if tty then
      local w = tty:get_winsize()
      -- libuv never closes fds 0..2; the handle's close must complete in the loop before its
      -- memory goes: a handle closed but left in the loop crashed every process that asked
      -- for the width on a terminal (SIGSEGV inside luv when the Lua state closed at exit)
      tty:close()
      uv.run("nowait")
      if math.type(w) == "integer" and w >= 20 then return w end
    end
  end
  local c = math.tointeger(tonumber(os.getenv("COLUMNS") or ""))
  if c and c >= 20 and c <= 10000 then return c end
  return 80
end

-- fit(text, width) -> text cut to width characters (bytes), ending in "..." when cut.
function util.fit(text, width)
  if #text <= width then return text end
  if width <= 3 then return text:sub(1, width) end
  return text:sub(1, width - 3) .. "..."
end

-- status([every]) -> the progress line of a script, on stderr:
--   s:update(text)  on a terminal without NO_COLOR: text rewritten in place ("\r"), cut to the
--                   terminal's width less one column, so it never wraps; otherwise (stderr not a
--                   terminal, or NO_COLOR set to anything but ""): text as a plain line, at most
--                   one every `every` seconds (default 30), the first one `every` seconds in
--                   (update(text, true) writes at once)
--   s:clear()       removes the line (on a terminal), before other output to stderr
--   s:done()        ends the line (on a terminal), leaving it on the screen
--   s.live          whether the line is rewritten in place
function util.status(every)
  every = every or 30
  local function now() return uv.hrtime() / 1e9 end
  local no_color = os.getenv("NO_COLOR")
  local s = { live = util.isatty(2) and (no_color == nil or no_color == "") }
  local shown, last = "", now()
  function s:update(text, force)
    if self.live then
      text = util.fit(text, util.columns() - 1)
      io.stderr:write("\r", text, (" "):rep(math.max(0, #shown - #text)))
      shown = text
    elseif force or now() - last >= every then
      io.stderr:write(text, "\n")
      last = now()
    else
      return
    end
    io.stderr:flush()
  end
  function s:clear()
    if self.live and #shown > 0 then
      io.stderr:write("\r", (" "):rep(#shown), "\r")
      io.stderr:flush()
      shown = ""
    end
  end
  function s:done()
    if self.live and #shown > 0 then
      io.stderr:write("\n")
      io.stderr:flush()
      shown = ""
    end
  end
  return s
end

-- ---------------------------------------------------------------- cores and threads

-- The number of cores the runs of a script share: what `nproc` says (the CPUs this process may
-- run on; OMP_NUM_THREADS or OMP_THREAD_LIMIT, when set, decide it as they do for nproc), 1 when
-- it cannot tell.
function util.ncores()
  local p = io.popen("nproc 2>/dev/null")
  local n = p and math.tointeger(tonumber(p:read("l") or ""))
  if p then p:close() end
  return n and n >= 1 and n or 1
end

-- The OpenMP threads of each of `jobs` runs at once: the cores split evenly (at least 1), so the
-- runs do not fight over the cores.
function util.threads_per_job(jobs, cores)
  return math.max(1, (cores or util.ncores()) // jobs)
end

-- ---------------------------------------------------------------- files

-- This process's id.
function util.pid()
  return math.tointeger(uv.os_getpid())
end

-- write(path, text) -> true | nil, message: the module's atomic writer (rp.write_file, core's
-- rp_file_write_atomic): a reader never sees a partial file, an interrupted write leaves the old
-- file (or none), the data is fsync'ed before the rename, and what a killed write left
-- ("<path>.tmp.<pid>") is removed by the next write to path. Anything at path but a regular file
-- (a folder, a FIFO) is refused before anything is written. Messages name path, never the
-- temporary file.
function util.write(path, text)
  return rp.write_file(path, text)
end

-- check_output(path, what): before any work, makes sure a file can be written at path: its folder
-- exists (created when missing), path is not a folder, and a probe file "<path>.probe" can be
-- created and removed there. An empty regular file already at "<path>.probe" is the leftover of a
-- probe cut short (kill -9 between its write and its removal) and is removed; anything else there
-- is left alone and the probe skipped. Raises a usage problem naming `what` (the option, e.g.
-- "--out") and path.
function util.check_output(path, what)
  if plpath.isdir(path) then util.usage(("%s %s: is a folder, not a file"):format(what, path)) end
  local dir = plpath.dirname(path)
  if dir ~= "" then
    local ok, err = util.mkdir(dir)
    if not ok then
      util.usage(("%s %s: cannot create its folder (%s)"):format(what, path,
        tostring(err):gsub("^.-: ", "")))
    end
  end
  local probe = lfs.attributes(path .. ".probe")
  if probe and (probe.mode ~= "file" or probe.size ~= 0) then return end
  local ok, err = util.write(path .. ".probe", "")
  if not ok then
    util.usage(("%s %s: cannot write there (%s)"):format(what, path,
      tostring(err):gsub("^.-: ", "")))
  end
  os.remove(path .. ".probe")
end

-- lfs's word for a kind of file in the words of the C core's messages ("a folder", "a FIFO").
local KIND = { directory = "a folder", ["named pipe"] = "a FIFO",
  ["char device"] = "a character device", ["block device"] = "a block device",
  socket = "a socket", link = "a symbolic link" }
local function kind_of(mode) return KIND[mode] or "an unknown kind of file" end

-- check_input(path, what): path names a readable regular file; else a usage problem.
function util.check_input(path, what)
  local mode = lfs.attributes(path, "mode")
  if mode == nil then
    util.usage(("%s %s: no such file"):format(what, path))
  elseif mode ~= "file" then
    util.usage(("%s %s: not a regular file (%s)"):format(what, path, kind_of(mode)))
  end
end

-- read(path) -> text | nil, message: the whole file (rp.read_file, core's reader, up to 1 GiB);
-- anything but a regular file is refused before it is opened ("f: not a regular file (a FIFO)":
-- opening a FIFO would wait for a writer, and a folder opens but does not read)
function util.read(path)
  return rp.read_file(path)
end

-- json(v) -> text: v as indented JSON with every object's keys sorted (so files diff well and
-- resume checks compare equal texts), written by lua-dkjson. Two things are prepared first,
-- because dkjson writes the keys missing from its `keyorder` list in pairs() order and numbers
-- with tostring (14 significant digits): the list holds every key of v, sorted, and each number
-- goes in as a value with __tojson that writes it in full (integers as they are, floats with
-- %.17g, so they read back bit for bit; nan and inf as null). A table is an array when its keys
-- are exactly 1..n (an empty one is []); any other table is an object, its keys as strings.
local JSON_NUMBER = { __tojson = function(self) return self[1] end }

local function json_prepare(v, keys)
  local t = type(v)
  if t == "number" then
    local s
    if v ~= v or v == math.huge or v == -math.huge then
      s = "null"
    elseif math.type(v) == "integer" then
      s = tostring(v)
    else
      s = ("%.17g"):format(v)
    end
    return setmetatable({ s }, JSON_NUMBER)
  elseif t ~= "table" then
    return v
  end
  local n, count = #v, 0
  for _ in pairs(v) do count = count + 1 end
  local out = {}
  if count == n then -- an array (or empty)
    for i = 1, n do out[i] = json_prepare(v[i], keys) end
    return out
  end
  for k, x in pairs(v) do
    k = tostring(k)
    keys[k] = true
    out[k] = json_prepare(x, keys)
  end
  return out
end

function util.json(v)
  local keys, order = {}, {}
  local prepared = json_prepare(v, keys)
  for k in pairs(keys) do order[#order + 1] = k end
  table.sort(order)
  return assert(dkjson.encode(prepared, { indent = true, keyorder = order })) .. "\n"
end

-- read_json(path) -> value | nil, message (a missing file, or JSON that does not parse)
function util.read_json(path)
  local text, err = util.read(path)
  if not text then return nil, err end
  local ok, v = pcall(cjson.decode, text)
  if not ok then return nil, path .. ": not valid JSON (" .. tostring(v) .. ")" end
  if v == cjson.null then return nil, path .. ": empty JSON" end
  return v
end

-- mkdir(path) -> true | nil, message (creates parents; fine when it exists)
function util.mkdir(path)
  if plpath.isdir(path) then return true end
  local ok, err = pldir.makepath(path)
  if not ok then return nil, path .. ": " .. tostring(err) end
  return true
end

util.exists = plpath.exists
util.abspath = plpath.abspath
util.join = plpath.join
util.dirname = plpath.dirname

-- quote(s): s as one word for sh.
function util.quote(s)
  s = tostring(s)
  if s:match("^[%w%./_:=,+-]+$") then return s end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- A number for tables: integers as they are, others with 4 significant digits.
function util.num(v, fmt)
  if v == nil then return "-" end
  if type(v) ~= "number" then return tostring(v) end
  if math.type(v) == "integer" or (v == math.floor(v) and math.abs(v) < 1e15 and not fmt) then
    return ("%d"):format(v)
  end
  return (fmt or "%.4g"):format(v)
end

-- markdown(headers, rows) -> text: a pipe table; rows are lists of strings (numbers converted).
function util.markdown(headers, rows)
  local lines = { "| " .. table.concat(headers, " | ") .. " |" }
  local sep = {}
  for i = 1, #headers do sep[i] = "---" end
  lines[2] = "|" .. table.concat(sep, "|") .. "|"
  for _, r in ipairs(rows) do
    local cells = {}
    for i = 1, #headers do cells[i] = tostring(r[i] == nil and "" or r[i]) end
    lines[#lines + 1] = "| " .. table.concat(cells, " | ") .. " |"
  end
  return table.concat(lines, "\n") .. "\n"
end

-- test_row(label, c, diff_fmt) -> the cells of a significance table row for stats.compare's
-- result c: label, mean diff (diff_fmt), Welch t (df), Welch p, permutation p, pairs, paired t
-- p, sign-flip p (util.test_headers).
util.test_headers = { "difference", "mean diff", "Welch t", "Welch p", "permutation p", "pairs",
  "paired t p", "sign-flip p" }

function util.test_row(label, c, diff_fmt)
  local paired = c.paired
  return { label, c.mean_diff and util.num(c.mean_diff, diff_fmt) or "-",
    c.welch_t and ("%.2f (df %.1f)"):format(c.welch_t, c.welch_df) or "-",
    c.welch_p and util.num(c.welch_p, "%.3g") or "-",
    c.permutation_p and (util.num(c.permutation_p, "%.3g") .. (c.permutation_exact and ""
      or " (sampled)")) or "-",
    paired and tostring(paired.n) or "-",
    paired and paired.p_t and util.num(paired.p_t, "%.3g") or "-",
    paired and (util.num(paired.p_perm, "%.3g") .. (paired.exact and "" or " (sampled)")) or "-" }
end

-- csv(headers, rows) -> text (RFC 4180 quoting where needed).
function util.csv(headers, rows)
  local function cell(v)
    if v == nil then return "" end
    if type(v) == "number" then
      if math.type(v) == "integer" then return tostring(v) end
      return ("%.10g"):format(v)
    end
    v = tostring(v)
    if v:find('[,"\n]') then return '"' .. v:gsub('"', '""') .. '"' end
    return v
  end
  local lines = {}
  local h = {}
  for i, x in ipairs(headers) do h[i] = cell(x) end
  lines[1] = table.concat(h, ",")
  for _, r in ipairs(rows) do
    local c = {}
    for i = 1, #headers do c[i] = cell(r[i]) end
    lines[#lines + 1] = table.concat(c, ",")
  end
  return table.concat(lines, "\n") .. "\n"
end

-- The loss curve of a result as CSV (step, tokens, loss, lr).
function util.curve_csv(result)
  local rows = {}
  for i, p in ipairs(result.curve or {}) do rows[i] = { p.step, p.tokens, p.loss, p.lr } end
  return util.csv({ "step", "tokens", "loss", "lr" }, rows)
end

-- The metric at each length of a result (by_length) as CSV (length, scaling, factor, correct,
-- accuracy, loss; the cells a task does not have are empty).
function util.lengths_csv(result)
  local rows = {}
  for i, e in ipairs(result.by_length or {}) do
    rows[i] = { e.length, e.scaling, e.factor, e.correct, e.accuracy, e.loss }
  end
  return util.csv({ "length", "scaling", "factor", "correct", "accuracy", "loss" }, rows)
end
-- add_slurm_options(parser): the Slurm job-array options of compare.lua and sweep.lua
-- (--slurm, --wait, --print-sbatch and the sbatch settings); slurm_options(args) -> the opts of
-- runner.sbatch and slurm.step, or raises a usage problem for a bad value.
function util.add_slurm_options(parser)
  parser:flag("--slurm", "Run the pending runs as a Slurm job array (sbatch) instead of here; "
    .. "the same command again reports the job, reruns its failed tasks, or collects.")
  parser:flag("--wait", "With --slurm: wait for the job array to finish, then collect.")
  parser:option("--wait-timeout", "With --wait: give up waiting after this many seconds (the "
    .. "job goes on).")
    :argname("<s>")
  parser:flag("--print-sbatch", "Write a Slurm job array of the runs not yet done to "
    .. "<out>/slurm/array.sbatch (task i runs line i of <out>/slurm/commands.txt) and print its "
    .. "path; submit nothing (sbatch it yourself; the same command without this flag collects).")
  parser:option("--partition", "sbatch --partition of the array."):argname("<name>")
  parser:option("--time", "sbatch --time limit of each task, e.g. 2:00:00."):argname("<limit>")
  parser:option("--cpus-per-task", "sbatch --cpus-per-task, also each run's --threads.", "1")
    :argname("<n>")
  parser:option("--mem", "sbatch --mem of each task, e.g. 4G."):argname("<size>")
  parser:option("--sbatch", "Another sbatch option for the array's header, e.g. "
    .. "--sbatch=--account=proj (repeatable).")
    :count("*"):argname("<option>")
end

function util.slurm_options(args)
  local cpus = math.tointeger(tonumber(args.cpus_per_task))
  if not cpus or cpus < 1 or cpus > 4096 then
    util.usage("--cpus-per-task must be an integer in 1..4096, got " .. tostring(args.cpus_per_task))
  end
  local o = { cpus_per_task = cpus, extra = {}, wait = args.wait }
  if args.wait and not args.slurm then util.usage("--wait needs --slurm") end
  if args.slurm and args.print_sbatch then util.usage("give --slurm or --print-sbatch, not both") end
  if args.wait_timeout ~= nil then
    o.timeout = math.tointeger(tonumber(args.wait_timeout))
    if not o.timeout or o.timeout < 1 then
      util.usage("--wait-timeout must be an integer >= 1, got " .. tostring(args.wait_timeout))
    end
  end
  for _, k in ipairs { "partition", "time", "mem" } do
    local v = args[k]
    if v ~= nil then
      if v == "" or v:find("[%s'\"\\]") then
        util.usage(("--%s must be one word, got %q"):format(k, v))
      end
      o[k] = v
    end
  end
  for _, e in ipairs(args.sbatch or {}) do
    if not e:match("^%-%-?%w") or e:find("[\n\r]") then
      util.usage(("--sbatch takes an sbatch option such as --account=proj, got %q"):format(e))
    end
    o.extra[#o.extra + 1] = e
  end
  return o
end


-- ---------------------------------------------------------------- command-line options
-- add_config_options(parser, rp[, skip]): one option per experiment key, --d-model, with the
-- default and the allowed values in the help; --d_model is accepted too but not listed (each
-- option appears once in --help, under "Config keys" after the script's own options, and the
-- usage line does not list them).
-- None gets an argparse default, so config_overrides can tell what was given.
function util.add_config_options(parser, rp, skip)
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
      if dashed ~= k.name then o:hidden_name("--" .. k.name) end
      options[#options + 1] = o
    end
  end
  parser:group("Config keys (docs/experiments.md; --d_model works as --d-model)",
    table.unpack(options))
  parser:usage(("Usage: %s [options] [config keys]"):format(parser_names[parser] or "script"))
end

-- config(rp, overrides) -> cfg | nil, message: rp.experiment.config without raising; the message
-- is for people (util.message).
function util.config(rp, overrides)
  local ok, cfg = pcall(rp.experiment.config, overrides)
  if ok then return cfg end
  return nil, util.message(cfg)
end

-- check(rp, overrides) -> cfg, memory | nil, message: rp.experiment.check without raising (the
-- model, the memory, the task and its corpus, before any run starts).
function util.check(rp, overrides)
  local ok, cfg, mem = pcall(rp.experiment.check, overrides)
  if ok then return cfg, mem end
  return nil, util.message(cfg)
end

-- config_overrides(args, rp) -> the experiment keys given on the command line, as strings
-- (rp.experiment.config converts them).
function util.config_overrides(args, rp)
  local o = {}
  for _, k in ipairs(rp.experiment.keys()) do
    if args[k.name] ~= nil then o[k.name] = args[k.name] end
  end
  return o
end

return util

-- Runs of a comparison or sweep as a Slurm job array (compare.lua and sweep.lua --slurm): the
-- array of the pending runs (runner.sbatch) is submitted with `sbatch --parsable`, its job id kept
-- in <out>/slurm/job, and a later invocation of the same command either reports the job still
-- queued, or collects: the runs of the previous array that left no result are its failed tasks
-- (reported with their log paths) and are submitted again with every other pending run; when
-- nothing is pending the caller writes the summary. No accounting is needed (squeue alone).
--
--   slurm.step(runs, opts) -> "collect" | "submitted" | "running", message
--     opts: runner.sbatch's (out, train, force, cpus_per_task, partition, ...), wait (true: wait
--     for the job to leave the queue, then collect or report), poll (seconds, 0.5), timeout
--     (seconds to wait at most, nil = no limit), log(text) (progress lines).
--     Raises a usage problem when sbatch or squeue is missing or sbatch refuses the job, and a
--     failure naming every failed task's log when a waited-for job leaves runs without results.
--   slurm.dispatch(args, runs, o) -> "stop" | "collect" | nil: what compare.lua and sweep.lua do
--     for --slurm, --print-sbatch and --print-commands (args: the parsed options), with
--     o = slurm.options(args) plus out, train, force, and who ("compare", "sweep": the
--     prefix of the messages) and collect(flag) (how the same command collects afterwards).
--     "stop": the caller is done (a job submitted or queued, a script or commands printed);
--     "collect": --slurm found every run done; nil: none of the three was asked for.
--   slurm.add_options(parser): the options of all this (--slurm, --wait, --print-sbatch, the
--     sbatch settings); slurm.options(args) -> their values checked, for slurm.dispatch.
local cli = require "lib.cli"
local fileio = require "lib.fileio"
local proc = require "lib.proc"
local runner = require "lib.runner"

local slurm = {}

-- add_options(parser): the Slurm job-array options of compare.lua and sweep.lua (--slurm,
-- --wait, --print-sbatch and the sbatch settings); options(args) -> the opts of runner.sbatch
-- and slurm.step, or raises a usage problem for a bad value.
function slurm.add_options(parser)
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

function slurm.options(args)
  local cpus = math.tointeger(tonumber(args.cpus_per_task))
  if not cpus or cpus < 1 or cpus > 4096 then
    cli.usage("--cpus-per-task must be an integer in 1..4096, got " .. tostring(args.cpus_per_task))
  end
  local o = { cpus_per_task = cpus, extra = {}, wait = args.wait }
  if args.wait and not args.slurm then cli.usage("--wait needs --slurm") end
  if args.slurm and args.print_sbatch then cli.usage("give --slurm or --print-sbatch, not both") end
  if args.wait_timeout ~= nil then
    o.timeout = math.tointeger(tonumber(args.wait_timeout))
    if not o.timeout or o.timeout < 1 then
      cli.usage("--wait-timeout must be an integer >= 1, got " .. tostring(args.wait_timeout))
    end
  end
  for _, k in ipairs { "partition", "time", "mem" } do
    local v = args[k]
    if v ~= nil then
      if v == "" or v:find("[%s'\"\\]") then
        cli.usage(("--%s must be one word, got %q"):format(k, v))
      end
      o[k] = v
    end
  end
  for _, e in ipairs(args.sbatch or {}) do
    if not e:match("^%-%-?%w") or e:find("[\n\r]") then
      cli.usage(("--sbatch takes an sbatch option such as --account=proj, got %q"):format(e))
    end
    o.extra[#o.extra + 1] = e
  end
  return o
end

-- Runs a command; returns its stdout and exit status (a shell's code).
local function capture(cmd)
  local errfile = os.tmpname()
  local p = io.popen(cmd .. " 2>" .. proc.quote(errfile))
  local out = p:read("a")
  local ok, _, code = p:close()
  local f = io.open(errfile)
  local err = f and f:read("a") or ""
  if f then f:close() end
  os.remove(errfile)
  return out, ok and 0 or (code or 1), err
end

local function have(cmd)
  return capture("command -v " .. cmd) ~= ""
end

local function sleep(s)
  os.execute(("sleep %.3f"):format(s))
end

-- The job id recorded in <out>/slurm/job and the runs its array ran (their result paths, in task
-- order), or nil.
local function recorded(out)
  local text = fileio.read(fileio.join(out, "slurm", "job"))
  if not text then return nil end
  local jid = text:match("^(%d+)\n")
  if not jid then return nil end
  local paths = {}
  for p in text:gmatch("\n([^\n]+)") do paths[#paths + 1] = p end
  return jid, paths
end

-- True while job jid has tasks in the queue (pending or running).
local function queued(jid)
  local out, code, err = capture("squeue -h -j " .. jid .. " -o %i")
  if code ~= 0 then
    -- a job that left the queue long ago is unknown to squeue: it is not queued
    if err:find("Invalid job id", 1, true) then return false end
    cli.usage("--slurm: squeue failed: "
      .. (err ~= "" and err:gsub("\n$", "") or ("exit " .. code)))
  end
  return out:find("%S") ~= nil
end

-- The runs of the recorded array that have no result now (its failed tasks), as messages.
local function failed_tasks(runs, out, jid, paths)
  local by_path, msgs = {}, {}
  for _, run in ipairs(runs) do by_path[run.path] = run end
  for i, p in ipairs(paths) do
    local run = by_path[p]
    if run and runner.check_existing(run) ~= "done" then
      msgs[#msgs + 1] = ("%s: array task %s_%d left no result (log %s)"):format(run.id, jid, i,
        fileio.join(fileio.abspath(out), "slurm", ("%s_%d.out"):format(jid, i)))
    end
  end
  return msgs
end

function slurm.step(runs, opts)
  local log = opts.log or function() end
  for _, c in ipairs { "sbatch", "squeue" } do
    if not have(c) then
      cli.usage(("--slurm: %s not found (is Slurm installed and on PATH?)"):format(c))
    end
  end
  local out = opts.out
  local jid, paths = recorded(out)
  if jid and queued(jid) then
    if not opts.wait then
      return "running", ("job %s is still in the queue; run the same command again later to "
        .. "collect"):format(jid)
    end
  end
  if jid and opts.wait then
    local t0 = os.time()
    while queued(jid) do
      if opts.timeout and os.time() - t0 > opts.timeout then
        error(("--slurm: job %s still in the queue after %d s; it goes on, run the same command "
          .. "again to collect"):format(jid, opts.timeout), 0)
      end
      sleep(opts.poll or 0.5)
    end
  end
  if jid then
    local failed = failed_tasks(runs, out, jid, paths)
    for _, m in ipairs(failed) do log(m .. "; it is submitted again") end
    os.remove(fileio.join(out, "slurm", "job"))
  end
  -- submit whatever is pending (the failed tasks of the last array among them)
  local script, n, included = runner.sbatch(runs, opts)
  if script == nil then cli.usage(n) end
  if not script then return "collect", "every run has its result" end
  -- the runs of the array's tasks, in task order, recorded before anything can finish
  local list = {}
  for i, run in ipairs(included) do list[i] = run.path end
  assert(fileio.write(fileio.join(out, "slurm", "job"), "submitting\n" .. table.concat(list, "\n") .. "\n"))
  local so, code, err = capture("sbatch --parsable " .. proc.quote(script))
  local new = so:match("^(%d+)")
  if code ~= 0 or not new then
    os.remove(fileio.join(out, "slurm", "job"))
    cli.usage(("--slurm: sbatch refused the job array (%s): %s"):format(script,
      (err ~= "" and err or so):gsub("\n+$", "")))
  end
  assert(fileio.write(fileio.join(out, "slurm", "job"), new .. "\n" .. table.concat(list, "\n") .. "\n"))
  log(("submitted job array %s: %d run%s (%s)"):format(new, n, n == 1 and "" or "s", script))
  if not opts.wait then
    return "submitted", ("job %s submitted; run the same command again to collect"):format(new)
  end
  -- wait for it, then collect (or report its failed tasks, which the next invocation reruns)
  local t0 = os.time()
  while queued(new) do
    if opts.timeout and os.time() - t0 > opts.timeout then
      error(("--slurm: job %s still in the queue after %d s; it goes on, run the same command "
        .. "again to collect"):format(new, opts.timeout), 0)
    end
    sleep(opts.poll or 0.5)
  end
  local failed = failed_tasks(runs, out, new, list)
  if #failed > 0 then
    error(("--slurm: %d run%s failed; run the same command again to rerun %s:\n  %s"):format(
      #failed, #failed == 1 and "" or "s", #failed == 1 and "it" or "them",
      table.concat(failed, "\n  ")), 0)
  end
  os.remove(fileio.join(out, "slurm", "job"))
  return "collect", "every run has its result"
end

function slurm.dispatch(args, runs, o)
  local function say(text) io.stderr:write(o.who, ": ", text, "\n") end
  local function refuse(err) cli.usage(err .. "; use another --out folder or --force") end
  if args.slurm then
    o.log = say
    local state, msg = slurm.step(runs, o)
    if state == "collect" then return "collect" end
    say(msg)
    return "stop"
  end
  if args.print_sbatch then
    local script, n = runner.sbatch(runs, o)
    if script == nil then refuse(n) end
    if script then print(script) end
    say(("%d of %d runs in the job array%s; submit it with sbatch, then collect with %s"):format(
      n, #runs, script and "" or " (nothing to do, no script written)", o.collect("--print-sbatch")))
    return "stop"
  end
  if args.print_commands then
    -- the rule of the lines: runner.print_commands
    local n, err = runner.print_commands(runs, o)
    if not n then refuse(err) end
    say(("%d of %d runs to do; collect them with %s"):format(n, #runs,
      o.collect("--print-commands")))
    return "stop"
  end
end

return slurm

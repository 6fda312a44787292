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
--     o = util.slurm_options(args) plus out, train, force, and who ("compare", "sweep": the
--     prefix of the messages) and collect(flag) (how the same command collects afterwards).
--     "stop": the caller is done (a job submitted or queued, a script or commands printed);
--     "collect": --slurm found every run done; nil: none of the three was asked for.
local util = require "lib.util"
local runner = require "lib.runner"

local slurm = {}

-- Runs a command; returns its stdout and exit status (a shell's code).
local function capture(cmd)
  local errfile = os.tmpname()
  local p = io.popen(cmd .. " 2>" .. util.quote(errfile))
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
  local text = util.read(util.join(out, "slurm", "job"))
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
    util.usage("--slurm: squeue failed: " .. (err ~= "" and err:gsub("\n$", "") or ("exit " .. code)))
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
        util.join(util.abspath(out), "slurm", ("%s_%d.out"):format(jid, i)))
    end
  end
  return msgs
end

function slurm.step(runs, opts)
  local log = opts.log or function() end
  for _, c in ipairs { "sbatch", "squeue" } do
    if not have(c) then
      util.usage(("--slurm: %s not found (is Slurm installed and on PATH?)"):format(c))
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
    os.remove(util.join(out, "slurm", "job"))
  end
  -- submit whatever is pending (the failed tasks of the last array among them)
  local script, n, included = runner.sbatch(runs, opts)
  if script == nil then util.usage(n) end
  if not script then return "collect", "every run has its result" end
  -- the runs of the array's tasks, in task order, recorded before anything can finish
  local list = {}
  for i, run in ipairs(included) do list[i] = run.path end
  assert(util.write(util.join(out, "slurm", "job"), "submitting\n" .. table.concat(list, "\n") .. "\n"))
  local so, code, err = capture("sbatch --parsable " .. util.quote(script))
  local new = so:match("^(%d+)")
  if code ~= 0 or not new then
    os.remove(util.join(out, "slurm", "job"))
    util.usage(("--slurm: sbatch refused the job array (%s): %s"):format(script,
      (err ~= "" and err or so):gsub("\n+$", "")))
  end
  assert(util.write(util.join(out, "slurm", "job"), new .. "\n" .. table.concat(list, "\n") .. "\n"))
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
  os.remove(util.join(out, "slurm", "job"))
  return "collect", "every run has its result"
end

function slurm.dispatch(args, runs, o)
  local function say(text) io.stderr:write(o.who, ": ", text, "\n") end
  local function refuse(err) util.usage(err .. "; use another --out folder or --force") end
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

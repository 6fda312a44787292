-- Runs a list of experiment runs as independent processes of scripts/train.lua, at most `jobs`
-- at a time, with a progress bar and ETA, skipping runs whose result file already exists with
-- the same config (so an interrupted comparison or sweep resumes where it stopped).
--
-- The runs are children of this process (libuv's spawn, lua-luv), started with
-- ROPER_PARENT_PID set: the roper binary then asks Linux to send them SIGTERM when this process
-- dies, even by SIGKILL, so no run goes on training as an orphan. SIGINT or SIGTERM here stops
-- the runs first. A run's bookkeeping files (.progress, .cfg.json) are removed when it is
-- collected, and leftovers of earlier, interrupted sessions when a run is found finished or
-- started again.
--
--   runner.run(runs, opts) -> results, failures
--     runs: { {id = "rope s1", cfg = <full config>, path = "dir/rope-s1.json"[, model =
--           "dir/rope-s1.ckpt"]}, ... }; with model (compare.lua and sweep.lua --keep-models)
--           the run saves its trained model there (train.lua --save), and a finished run counts
--           as done only when its model is there too
--     opts: jobs (1), roper (the interpreter, arg[-1]), train (scripts/train.lua), quiet,
--           force (rerun runs whose file holds another config instead of stopping),
--           checkpoint_every (n: each run saves a checkpoint every n steps, name.part.ckpt
--           with its state and run file, lib/resume.lua, and a run stopped before it finished
--           goes on from there the next time; a run finished or found done has none),
--           on_done(run, result) (called as each run finishes or is found done),
--           on_stop(reason) (called when a signal stops the runs, before this process exits)
--     results[i] is run i's decoded result (nil when it failed); failures lists
--     {run =, message =}.
--   runner.check_existing(run) -> "done", result | "missing"[, why] | nil, message (another
--     config); a run with model whose model file is gone is "missing", why (a phrase saying so)
--   runner.tidy(run): removes the run's bookkeeping files
--   runner.model_path(run) -> the path of the run's model (name.ckpt)
--   runner.check_init(runs): refuses a run whose init is the model of a run of the list
--   runner.part_path(run) -> the path of the run's checkpoint while it trains (name.part.ckpt)
--   runner.print_commands(runs, opts) -> n, or nil, message: for every run not done, writes its
--     config file (name.cfg.json) and prints one self-contained train.lua command that runs it
--     from any folder (cd to the absolute output folder, the interpreter and train.lua as
--     absolute paths, config and result relative to the folder, an explicit --threads, --save
--     for a run with model, --checkpoint runs/name.part.ckpt with opts.checkpoint_every).
--     opts: out (the output folder), train (scripts/train.lua), roper
--     (the interpreter, arg[-1]: printed as given when it has no folder, as `roper` on PATH),
--     force (a run whose file holds another config is printed again instead of refused),
--     threads (the --threads of every line instead of each run's own), emit(line, run)
--     (instead of printing it)
--   runner.sbatch(runs, opts) -> script path, n, included | nil, message: the job array of the runs
--     not done: <out>/slurm/commands.txt (runner.print_commands' lines, --threads =
--     cpus_per_task) and <out>/slurm/array.sbatch, whose task i runs line i. opts: out, train,
--     roper, force, cpus_per_task (1), partition, time, mem, extra (a list of sbatch options),
--     name (the job name); included: the runs of its tasks, in task order. Nothing is submitted.
--     Nothing to do: false, 0 (no files written).
--   runner.kept_models(runs, results) -> the model files of the finished runs that have one
--
-- Each run writes path (result JSON, name.json), name.csv (loss curve), name.log (its output);
-- while it runs, name.progress ("step steps loss", rewritten about twice a second; "step steps
-- loss done total what" while it evaluates: done of total windows of what, the lm task's split
-- or "lengths", shown as "evaluating valid done/total windows"; runner.read_progress(path) reads
-- either) and
-- name.cfg.json (its config, read by train.lua). A name.ckpt beside them is always the model of
-- the run in name.json: it is removed when the run starts again, and when an interrupted run
-- had saved its model before its result (its evaluation was cut short). With checkpoint_every,
-- name.part.ckpt (with .part.ckpt.state and .part.ckpt.run.json) is the checkpoint of a run
-- that trains or was stopped: it stays when the run is stopped, and goes when it finishes. A run
-- stopped while it evaluates keeps it with the state of its last step: started again it trains
-- nothing, only evaluates.
local uv = require "luv"
local term = require "lib.term"
local fileio = require "lib.fileio"
local cli = require "lib.cli"
local json = require "lib.json"
local proc = require "lib.proc"
local resume = require "lib.resume"

local runner = {}

local function now() return uv.hrtime() / 1e9 end

local same_config, show = resume.same_config, resume.show

-- The bookkeeping files of a run: progress, config, and the exit-status file of older versions.
local function bookkeeping(run)
  local p = run.path:gsub("%.json$", "")
  return p .. ".progress", p .. ".cfg.json", p .. ".rc"
end

function runner.tidy(run)
  for _, f in ipairs { bookkeeping(run) } do os.remove(f) end
end

function runner.model_path(run)
  return (run.path:gsub("%.json$", "")) .. ".ckpt"
end

-- runner.check_init(runs): a usage problem when a run's init checkpoint (cfg.init) is the model
-- of a run of the list, which a run started (again, or with --force) removes before it trains
-- ("--init <path> is the model of run rope s1 here (<model>), which the run removes before it
-- trains: copy the models elsewhere and give --init there")
function runner.check_init(runs)
  for _, run in ipairs(runs) do
    local init = run.cfg.init
    if type(init) == "string" and init ~= "" then
      for _, other in ipairs(runs) do
        if fileio.same_path(init, runner.model_path(other)) then
          cli.usage(("--init %s is the model of run %s here (%s), which the run removes before "
            .. "it trains: copy the models elsewhere and give --init there"):format(init,
            other.id, runner.model_path(other)))
        end
      end
    end
  end
end

function runner.part_path(run)
  return (run.path:gsub("%.json$", "")) .. ".part.ckpt"
end

-- kept_models(runs, results): the model files of the finished runs that have one, in run order.
function runner.kept_models(runs, results)
  local models = {}
  for i, run in ipairs(runs) do
    if results[i] and fileio.exists(runner.model_path(run)) then
      models[#models + 1] = runner.model_path(run)
    end
  end
  return models
end

function runner.check_existing(run)
  if not fileio.exists(run.path) then return "missing" end
  local res, err = json.read(run.path)
  if not res then return nil, err end
  if type(res.config) ~= "table" then return nil, run.path .. ": not a result file (no config)" end
  local same, key, there, here = same_config(res.config, run.cfg)
  if not same then
    return nil, ("%s holds a run with another config (%s = %s there, %s here)"):format(run.path,
      key, show(there), show(here))
  end
  -- with --keep-models a run is done when its model is there too (else it is run again)
  if run.model and not fileio.exists(run.model) then
    return "missing", ("its result is here but not its model %s (--keep-models)"):format(
      run.model)
  end
  return "done", res
end

local function fmt_time(s)
  if s == nil or s ~= s or s == math.huge then return "?" end
  s = math.floor(s + 0.5)
  if s >= 3600 then return ("%dh%02dm"):format(s // 3600, s % 3600 // 60) end
  if s >= 60 then return ("%dm%02ds"):format(s // 60, s % 60) end
  return ("%ds"):format(s)
end
runner.fmt_time = fmt_time

-- A run's .progress file: step, steps, loss[, done, total[, what]] (train.lua's --progress;
-- done and total: the windows evaluated after training; what: of which part, the lm task's split
-- or "lengths"), or nil.
local function read_progress(path)
  local f = io.open(path, "r")
  if not f then return nil end
  local line = f:read("l")
  f:close()
  if not line then return nil end
  local step, steps, loss = line:match("^(%d+) (%d+) (%S+)")
  if not step then return nil end
  local done, total, what = line:match("^%d+ %d+ %S+ (%d+) (%d+) ?(%S*)")
  return tonumber(step), tonumber(steps), tonumber(loss), tonumber(done), tonumber(total),
    what ~= "" and what or nil
end
runner.read_progress = read_progress

local function tail(path, n)
  local text = fileio.read(path) or ""
  local lines = {}
  for l in text:gmatch("[^\n]+") do lines[#lines + 1] = l end
  return table.concat(lines, "\n", math.max(1, #lines - n + 1))
end

-- The environment of a child run: this one's, with ROPER_PARENT_PID set to this process.
local function child_env()
  local env = {}
  for k, v in pairs(uv.os_environ()) do
    if k ~= "ROPER_PARENT_PID" then env[#env + 1] = k .. "=" .. v end
  end
  env[#env + 1] = "ROPER_PARENT_PID=" .. proc.pid()
  return env
end

function runner.run(runs, opts)
  opts = opts or {}
  local jobs = math.max(1, opts.jobs or 1)
  local roper = opts.roper or arg[-1]
  local train = opts.train
  local results, failures = {}, {}
  local pending = {}
  for i, run in ipairs(runs) do
    local state, res = runner.check_existing(run)
    if state == "done" then
      results[i] = res
      runner.tidy(run)
      resume.discard(runner.part_path(run)) -- a leftover of an interrupted earlier run
      if opts.on_done then opts.on_done(run, res, true) end
    elseif state == "missing" or opts.force then
      pending[#pending + 1] = i
      -- "runs", not "trains": a checkpoint of its last step (train.lua keeps it until the
      -- result is written) makes it only evaluate
      if state == "missing" and res and not opts.quiet then
        io.stderr:write(("again %s: %s, so it runs again\n"):format(run.id, res))
      end
    else
      error(res .. "; use another --out folder, or --force to rerun it", 0)
    end
  end
  if #pending == 0 then return results, failures end
  local total_steps = 0
  for _, i in ipairs(pending) do total_steps = total_steps + runs[i].cfg.steps end

  local status = term.status(30) -- the progress line (term.status: terminal width, NO_COLOR)
  local running = {} -- index -> {started =, handle =}
  local exited = {}  -- index -> {code =, signal =}
  local nrunning, next_pending, finished_steps, nfinished = 0, 1, 0, 0
  local t0 = now()
  local env = child_env()
  local devnull = assert(uv.fs_open("/dev/null", "r", 0))

  local function files(i)
    local p = runs[i].path:gsub("%.json$", "")
    return p .. ".progress", p .. ".log", p .. ".cfg.json"
  end

  local function start(i)
    local run = runs[i]
    local progress, log, cfgfile = files(i)
    runner.tidy(run)
    os.remove(runner.model_path(run)) -- the model of an earlier run of this name
    assert(fileio.write(cfgfile, json.encode(run.cfg)))
    local fd, ferr = uv.fs_open(log, "w", tonumber("644", 8))
    if not fd then error(log .. ": " .. tostring(ferr), 0) end
    local args = { train, "--config", cfgfile, "--out", run.path, "--progress", progress }
    if run.model then
      args[#args + 1] = "--save"
      args[#args + 1] = run.model
    end
    if opts.checkpoint_every then
      -- the checkpoint of an interrupted run of this config is gone on from; any other goes
      local part = runner.part_path(run)
      if resume.check(require "roper", part, run.cfg) ~= "resume" then resume.discard(part) end
      for _, a in ipairs { "--checkpoint", part, "--checkpoint-every",
        tostring(opts.checkpoint_every) } do
        args[#args + 1] = a
      end
    end
    local handle, pid = uv.spawn(roper, {
      args = args,
      stdio = { devnull, fd, fd }, env = env,
    }, function(code, signal)
      exited[i] = { code = code, signal = signal }
    end)
    uv.fs_close(fd)
    if not handle then error(("cannot start %s: %s"):format(roper, tostring(pid)), 0) end
    running[i] = { started = now(), handle = handle }
    nrunning = nrunning + 1
  end

  -- The progress line: the bar, the share of all steps done, runs finished, time and ETA first,
  -- then each running run (a terminal line is cut at its width, so the tail goes first). On a
  -- terminal of 80 columns the bar has 10 cells; from 192 columns on, 24.
  local function status_line()
    local done = finished_steps
    local current = {}
    for i in pairs(running) do
      local step, steps, loss, evaluated, windows, what = read_progress((files(i)))
      if step and evaluated then
        done = done + step
        current[#current + 1] = ("%s evaluating %s%d/%d windows"):format(runs[i].id,
          what and (what .. " ") or "", evaluated, windows)
      elseif step then
        done = done + step
        current[#current + 1] = ("%s %d/%d loss %.3f"):format(runs[i].id, step, steps, loss)
      else
        current[#current + 1] = runs[i].id .. " starting"
      end
    end
    table.sort(current)
    local frac = total_steps > 0 and done / total_steps or 0
    local elapsed = now() - t0
    local eta = done > 0 and elapsed * (total_steps - done) / done or nil
    local width = status.live and math.max(6, math.min(24, term.columns() // 8)) or 24
    local fill = math.floor(frac * width + 0.5)
    return ("[%s%s] %3d%% %d/%d runs %s, ETA %s%s"):format(("#"):rep(fill),
      ("."):rep(width - fill), math.floor(frac * 100), nfinished, #pending, fmt_time(elapsed),
      fmt_time(eta), #current > 0 and (" | " .. table.concat(current, "; ")) or "")
  end

  local function show()
    if opts.quiet then return end
    status:update(status_line())
  end

  local function clear_line() status:clear() end

  local function finish(i, how)
    local run = runs[i]
    local _, log = files(i)
    running[i].handle:close()
    running[i] = nil
    runner.tidy(run)
    nrunning = nrunning - 1
    nfinished = nfinished + 1
    finished_steps = finished_steps + run.cfg.steps
    local res, err
    if how.code == 0 and how.signal == 0 then res, err = json.read(run.path) end
    clear_line()
    if res then
      results[i] = res
      if opts.on_done then opts.on_done(run, res, false) end
    else
      os.remove(runner.model_path(run)) -- no model without its result
      local msg = err or (how.signal ~= 0 and ("killed by signal %d"):format(how.signal)
        or ("exit status %d"):format(how.code))
      failures[#failures + 1] = { run = run, message = msg }
      io.stderr:write(("run %s failed (%s); its log %s ends with:\n%s\n"):format(run.id, msg, log,
        tail(log, 8)))
    end
  end

  -- SIGINT / SIGTERM: stop the runs, then this process
  local stop_signal
  local signals = {}
  for _, name in ipairs { "sigint", "sigterm" } do
    local h = uv.new_signal()
    h:start(name, function() stop_signal = stop_signal or name end)
    signals[#signals + 1] = h
  end
  local timer = uv.new_timer()
  timer:start(500, 500, function() end) -- wakes the loop to redraw the progress line

  local function stop_all()
    for _, r in pairs(running) do r.handle:kill("sigterm") end
    local deadline = now() + 10
    while nrunning > 0 and now() < deadline do
      uv.run("once")
      for i, how in pairs(exited) do
        exited[i] = nil
        running[i].handle:close()
        running[i] = nil
        nrunning = nrunning - 1
      end
    end
    for _, r in pairs(running) do r.handle:kill("sigkill") end
  end
  local started = {}

  local ok, err = pcall(function()
    while next_pending <= #pending or nrunning > 0 do
      while nrunning < jobs and next_pending <= #pending and not stop_signal do
        start(pending[next_pending])
        started[#started + 1] = pending[next_pending]
        next_pending = next_pending + 1
      end
      if stop_signal then error("interrupted by " .. stop_signal:upper(), 0) end
      uv.run("once")
      for i, how in pairs(exited) do
        exited[i] = nil
        finish(i, how)
      end
      show()
    end
  end)
  clear_line()
  if not ok then
    stop_all()
    for _, i in ipairs(pending) do runner.tidy(runs[i]) end
    -- a run stopped after it saved its model and before its result: no model without a result
    for _, i in ipairs(started) do
      if not results[i] then os.remove(runner.model_path(runs[i])) end
    end
    io.stderr:write(("stopped (%s); finished runs are kept: the same command resumes.\n"):format(
      tostring(err)))
    if opts.on_stop then pcall(opts.on_stop, tostring(err)) end
    os.exit(stop_signal == "sigterm" and 143 or 130)
  end
  timer:close()
  for _, h in ipairs(signals) do h:close() end
  uv.fs_close(devnull)
  uv.run("nowait")
  if not opts.quiet then
    io.stderr:write(("%d runs in %s\n"):format(#pending, fmt_time(now() - t0)))
  end
  return results, failures
end

function runner.print_commands(runs, opts)
  local out_abs = fileio.abspath(opts.out)
  local roper = opts.roper or arg[-1]
  roper = roper:find("/", 1, true) and fileio.abspath(roper) or roper
  local train_abs = fileio.abspath(opts.train)
  local n = 0
  for _, run in ipairs(runs) do
    local state, err = runner.check_existing(run)
    if state == nil and not opts.force then return nil, err end
    if state ~= "done" then
      local cfgfile = run.path:gsub("%.json$", "") .. ".cfg.json"
      local ok, werr = fileio.write(cfgfile, json.encode(run.cfg))
      if not ok then return nil, werr end
      local name = run.path:match("([^/]+)%.json$")
      local save = run.model and (" --save " .. proc.quote("runs/" .. name .. ".ckpt")) or ""
      if opts.checkpoint_every then
        save = save .. (" --checkpoint %s --checkpoint-every %d"):format(
          proc.quote("runs/" .. name .. ".part.ckpt"), opts.checkpoint_every)
      end
      local line = ("cd %s && %s %s --config %s --out %s --threads %d%s --quiet"):format(
        proc.quote(out_abs), proc.quote(roper), proc.quote(train_abs),
        proc.quote("runs/" .. name .. ".cfg.json"), proc.quote("runs/" .. name .. ".json"),
        opts.threads or run.cfg.threads, save)
      if opts.emit then opts.emit(line, run) else print(line) end
      n = n + 1
    end
  end
  return n
end

function runner.sbatch(runs, opts)
  local lines, included = {}, {}
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.threads = opts.cpus_per_task or 1
  o.emit = function(line, run)
    lines[#lines + 1] = line
    included[#included + 1] = run
  end
  local n, err = runner.print_commands(runs, o)
  if not n then return nil, err end
  if n == 0 then return false, 0 end
  local dir = fileio.join(fileio.abspath(opts.out), "slurm")
  local ok, merr = fileio.mkdir(dir)
  if not ok then return nil, merr end
  local cmds = fileio.join(dir, "commands.txt")
  ok, merr = fileio.write(cmds, table.concat(lines, "\n") .. "\n")
  if not ok then return nil, merr end
  local h = {
    "#!/bin/bash",
    "# A Slurm job array written by roper (compare.lua / sweep.lua --print-sbatch): task i runs",
    "# line i of commands.txt, one train.lua run with --threads = --cpus-per-task.",
    "#SBATCH --job-name=" .. (opts.name or "roper"),
    ("#SBATCH --array=1-%d"):format(n),
    ("#SBATCH --cpus-per-task=%d"):format(opts.cpus_per_task or 1),
    "#SBATCH --output=" .. fileio.join(dir, "%A_%a.out"),
  }
  if opts.partition then h[#h + 1] = "#SBATCH --partition=" .. opts.partition end
  if opts.time then h[#h + 1] = "#SBATCH --time=" .. opts.time end
  if opts.mem then h[#h + 1] = "#SBATCH --mem=" .. opts.mem end
  for _, e in ipairs(opts.extra or {}) do h[#h + 1] = "#SBATCH " .. e end
  h[#h + 1] = "set -euo pipefail"
  h[#h + 1] = ": \"${SLURM_ARRAY_TASK_ID:?run by sbatch as a job array}\""
  h[#h + 1] = ("line=$(sed -n \"${SLURM_ARRAY_TASK_ID}p\" %s)"):format(proc.quote(cmds))
  h[#h + 1] = "[ -n \"$line\" ] || { echo \"no line $SLURM_ARRAY_TASK_ID\" >&2; exit 2; }"
  h[#h + 1] = "exec bash -c \"$line\""
  local script = fileio.join(dir, "array.sbatch")
  ok, merr = fileio.write(script, table.concat(h, "\n") .. "\n")
  if not ok then return nil, merr end
  return script, n, included
end

return runner

-- A grid over any experiment config keys, each point one independent run (docs/experiments.md).
--
--   build/roper scripts/sweep.lua --grid pe=rope,roper --grid lr=3e-4,1e-3,3e-3 --grid seed=1,2,3
--   build/roper scripts/sweep.lua --grid d_model=32,64,128 --steps 1000 --jobs 2 --out results/width
--
-- With --jobs N each run gets (cores / N) OpenMP threads (at least 1; cores as `nproc` counts
-- them), unless --threads is given or threads is a grid key.
--   build/roper scripts/sweep.lua ... --print-commands > jobs.txt   # one train.lua command per run
--   build/roper scripts/sweep.lua ... --summary                     # only collect what is there
--
-- A line of --print-commands runs from any folder and says its threads:
--   cd /abs/out && /abs/build/roper /abs/scripts/train.lua --config runs/<point>.cfg.json \
--     --out runs/<point>.json --threads N --quiet
-- The output folder, the interpreter and train.lua are absolute (an interpreter given without a
-- folder, as `roper` found on PATH, stays as it is); the run's own files are relative to the
-- output folder, so a copy of the folder elsewhere needs only the `cd` changed. N is the run's
-- threads: --threads or the grid's value when given, else (cores / --jobs) of this machine: say
-- with --jobs how many of the lines will run at once on one machine.
--
-- Every run is a process of scripts/train.lua that writes <out>/runs/<point>.json (.csv, .log);
-- points already there with the same config are skipped, so a sweep resumes after an
-- interruption, and the runs of --print-commands can be spread over machines by GNU parallel or a
-- scheduler's job array (docs/experiments.md) and collected afterwards with --summary. The end
-- of a sweep writes <out>/summary.md (every run, and the mean over seeds per point when seed is a
-- grid key), summary.csv, summary.json, the loss curves loss.png and loss.svg (one colour per
-- point of the grid keys other than seed: each run thin, the mean over its seeds thick) and
-- report.html, all of it on one page for a browser with every run's details and provenance
-- (scripts/lib/html.lua; while the runs go, the runs finished so far, reloading itself).
--
-- --keep-models saves each run's trained model beside its result (<out>/runs/<point>.ckpt); every
-- run's JSON records its provenance, and the summaries say it once (scripts/lib/provenance.lua).
--
-- Every point's config is checked in full (rp.experiment.check) and the output folder is made
-- and tried before the first run starts. Errors are one line: exit 2 for a bad option or config,
-- 1 for failed runs; --debug (or ROPER_DEBUG=1) adds tracebacks.
--
-- A fixed option or a grid key that does nothing at every point of the grid is refused with
-- the reason, unless --allow-unused (cli.refuse_unused).
-- lib/ beside this file, wherever it runs from: roper, lua5.4 or an installed roper-<name>
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local rp = require "roper"
local cli = require "lib.cli"
local fileio = require "lib.fileio"
local json = require "lib.json"
local tables = require "lib.tables"
local proc = require "lib.proc"
local stats = require "lib.stats"
local runner = require "lib.runner"
local provenance = require "lib.provenance"
local slurmrun = require "lib.slurm"
local plot = require "lib.plot"
local html = require "lib.html"

-- --help opens with these (each runs as written from the repository's folder; tests/lua/
-- help_examples_spec.lua runs them)
local EXAMPLES = {
  { "RoPE and RoPER at three learning rates, 2 seeds each: 12 runs, 2 at a time",
    "build/roper scripts/sweep.lua --grid pe=rope,roper --grid " .. "lr=3e-4,1e-3,3e-3 --grid seed=1,2 --steps 1000 --jobs 2 --out " .. "runs/lr" },
  { "model widths on 2-digit addition",
    "build/roper scripts/sweep.lua --task addition --max-digits 2 --grid " .. "d_model=32,64 --steps 1000 --out runs/width" },
  { "only the summary of what a sweep has finished so far (nothing runs)",
    "build/roper scripts/sweep.lua --grid pe=rope,roper --grid " .. "lr=3e-4,1e-3,3e-3 --grid seed=1,2 --steps 1000 --out runs/lr " .. "--summary" },
}

cli.main("sweep.lua", function()
  local parser = cli.parser("build/roper scripts/sweep.lua",
    "Run a grid of experiment configs (the Cartesian product of the --grid values), each as its "
    .. "own process, resumably, and summarise the results.", EXAMPLES)
  parser:option("--grid", "A key and its values: pe=rope,roper or seed=1,2,3 (repeatable; every "
    .. "config key works).")
    :count("*"):argname("<key=v1,v2,...>")
  parser:option("--out", "Output folder.", "results/sweep"):argname("<dir>")
  parser:option("--jobs", "Runs at once, each its own process with (cores / jobs) threads.", "1")
    :convert(math.tointeger):argname("<n>")
  parser:flag("--print-commands", "Print one train.lua command per run not yet done (and write "
    .. "their config files) instead of running them; each runs from any folder, with --threads "
    .. "(cores / --jobs unless given).")
  parser:flag("--summary", "Do not run anything: summarise the results that are there.")
  parser:flag("--force", "Rerun runs whose result file holds another config.")
  parser:flag("--keep-models", "Save each run's trained model beside its result "
    .. "(<out>/runs/<point>.ckpt).")
  parser:option("--checkpoint-every", "Each run saves a checkpoint every n steps "
    .. "(<out>/runs/<point>.part.ckpt, removed when it finishes); a run stopped before it "
    .. "finished goes on from there when the command is run again.")
    :convert(math.tointeger):argname("<n>")
  slurmrun.add_options(parser)
  parser:flag("--quiet", "No progress bar.")
  cli.add_config_options(parser, rp)
  local args = parser:parse()

  local die = cli.usage
  if args.checkpoint_every ~= nil and args.checkpoint_every < 1 then
    die("--checkpoint-every must be an integer >= 1")
  end
  if not args.jobs or args.jobs < 1 then die("--jobs must be an integer >= 1") end

  local known = {}
  for _, k in ipairs(rp.experiment.keys()) do known[k.name] = true end

  -- the grid: an ordered list of {key, values}
  local grid = {}
  for _, g in ipairs(args.grid) do
    local key, list = g:match("^([%w_-]+)=(.+)$")
    if not key then die(("--grid %s: expected key=v1,v2,..."):format(g)) end
    key = key:gsub("-", "_")
    if not known[key] then die(("--grid %s: unknown config key '%s'"):format(g, key)) end
    for _, e in ipairs(grid) do
      if e.key == key then die(("--grid: key '%s' is given twice"):format(key)) end
    end
    -- values trimmed; none, or one given twice, is refused (twice: the same run twice, racing
    -- on its files and counted as two)
    local values, seen = {}, {}
    for v in list:gmatch("[^,]+") do
      v = v:match("^%s*(.-)%s*$")
      if v ~= "" then
        if seen[v] then die(("--grid %s: the value %s is given twice"):format(g, v)) end
        seen[v], values[#values + 1] = true, v
      end
    end
    if #values == 0 then
      die(("--grid %s: expected key=v1,v2,... with at least one value"):format(g))
    end
    grid[#grid + 1] = { key = key, values = values }
  end
  if #grid == 0 then die("give at least one --grid key=v1,v2,...") end

  local base = cli.config_overrides(args, rp)
  local typed = cli.typed(base)
  for _, e in ipairs(grid) do
    if base[e.key] ~= nil then die(("'%s' is both a grid key and a fixed option"):format(e.key)) end
  end
  -- the runs of --jobs run at once: each gets its share of the cores (as in compare.lua), unless
  -- threads is given or a grid key; printed commands carry the same count explicitly
  local threads_in_grid = false
  for _, e in ipairs(grid) do threads_in_grid = threads_in_grid or e.key == "threads" end
  if base.threads == nil and not threads_in_grid then
    base.threads = proc.threads_per_job(args.jobs)
  end

  -- the points, in odometer order (the last grid key varies fastest)
  local runs = {}
  local function expand(i, cur)
    if i > #grid then
      local o, parts, names = {}, {}, {}
      for k, v in pairs(base) do o[k] = v end
      for j, e in ipairs(grid) do
        o[e.key] = cur[j]
        parts[#parts + 1] = e.key .. "=" .. cur[j]
        names[#names + 1] = e.key .. "-" .. cur[j]
      end
      local cfg, err = cli.check(rp, o, args.quiet)
      if not cfg then die(("%s: %s"):format(table.concat(parts, " "), err)) end
      local name = table.concat(names, "_"):gsub("[^%w%._=-]", "_")
      local run = { id = table.concat(parts, " "), cfg = cfg, point = { table.unpack(cur) },
        path = fileio.join(args.out, "runs", name .. ".json") }
      if args.keep_models then run.model = runner.model_path(run) end
      runs[#runs + 1] = run
      return
    end
    for _, v in ipairs(grid[i].values) do
      cur[i] = v
      expand(i + 1, cur)
    end
    cur[i] = nil
  end
  expand(1, {})
  -- two points that are one run (seed=1,01: the same config written two ways)
  local function canonical(cfg)
    local keys = {}
    for k in pairs(cfg) do keys[#keys + 1] = k end
    table.sort(keys)
    for i, k in ipairs(keys) do
      local v = cfg[k]
      keys[i] = k .. "=" .. (math.type(v) == "float" and ("%.17g"):format(v) or tostring(v))
    end
    return table.concat(keys, "\0")
  end
  local point_of = {}
  for _, run in ipairs(runs) do
    local c = canonical(run.cfg)
    if point_of[c] then die(("points %s and %s are the same run"):format(point_of[c], run.id)) end
    point_of[c] = run.id
  end
  -- a fixed option or a grid key that does nothing at every point of the grid
  local cfgs = {}
  for i, run in ipairs(runs) do cfgs[i] = run.cfg end
  for _, e in ipairs(grid) do typed[e.key] = ("--grid %s=%s"):format(e.key,
    table.concat(e.values, ",")) end
  cli.refuse_unused(rp, args, typed, cfgs, "point of the grid")
  runner.check_init(runs)

  local train = fileio.join(fileio.dirname(arg[0]), "train.lua")
  fileio.check_output_folder(args.out, "--out")

  local slurm = slurmrun.options(args)
  slurm.out, slurm.train, slurm.force, slurm.name = args.out, train, args.force, "roper-sweep"
  slurm.checkpoint_every = args.checkpoint_every
  slurm.who = "sweep"
  slurm.collect = function() return "the same command and --summary" end
  local how = slurmrun.dispatch(args, runs, slurm)
  if how == "stop" then return end
  if how == "collect" then args.summary = true end

  local cmd = { "roper", "scripts/sweep.lua" }
  for i = 1, #arg do cmd[#cmd + 1] = proc.quote(arg[i]) end
  local function describe(res)
    return res.diverged and "diverged" or ("%s %s"):format(res.metric, tables.num(res.value))
  end

  local results, failures = {}, {}
  local report_path = fileio.join(args.out, "report.html")
  if args.summary then
    for i, run in ipairs(runs) do
      local state, res = runner.check_existing(run)
      if state == "done" then
        results[i] = res
        runner.tidy(run)
      elseif state == nil then
        die(res)
      end
    end
  else
    if not args.quiet then
      local t = base.threads
      io.stderr:write(("sweep: %d runs, %d at a time%s, into %s\n"):format(#runs, args.jobs,
        t and (", %d thread%s each"):format(t, t == 1 and "" or "s") or "", args.out))
    end
    -- report.html while the runs go: the runs finished so far, rewritten as each one ends
    local finished = {}
    local function live_report(stopped)
      local ok, err = fileio.write(report_path, html.live { title = "Sweep",
        command = table.concat(cmd, " "), total = #runs, runs = finished, stopped = stopped })
      if not ok and not args.quiet then io.stderr:write("sweep.lua: ", err, "\n") end
    end
    live_report()
    local ok_run
    ok_run, results, failures = pcall(runner.run, runs, { jobs = args.jobs, train = train,
      force = args.force, checkpoint_every = args.checkpoint_every,
      quiet = args.quiet,
      on_done = function(run, res, old)
        if not args.quiet then
          io.stderr:write(("%s %s: %s\n"):format(old and "found" or "done", run.id, describe(res)))
        end
        finished[#finished + 1] = { id = run.id, title = run.id .. ": " .. describe(res),
          result = res, files = html.files(run.path, args.out) }
        live_report()
      end,
      on_stop = live_report })
    if not ok_run then error(results, 0) end
  end

  -- ---------------------------------------------------------------- the summary
  local headers, rows, csv_rows = {}, {}, {}
  for _, e in ipairs(grid) do headers[#headers + 1] = e.key end
  for _, h in ipairs { "metric", "value", "greedy", "eval loss", "final train loss", "params",
    "train s" } do
    headers[#headers + 1] = h
  end
  local missing = {}
  for i, run in ipairs(runs) do
    local res = results[i]
    if res then
      local row = { table.unpack(run.point) }
      row[#row + 1] = res.metric
      row[#row + 1] = res.diverged and "diverged" or tables.num(res.value, res.metric == "loss" and "%.4f" or nil)
      row[#row + 1] = tables.num(res.correct_greedy)
      row[#row + 1] = tables.num(res.eval_loss, "%.4f")
      row[#row + 1] = tables.num(res.final_train_loss, "%.4f")
      row[#row + 1] = tables.num(res.params)
      row[#row + 1] = ("%.0f"):format(res.seconds_train)
      rows[#rows + 1] = row
      local c = { table.unpack(run.point) }
      for _, v in ipairs { res.metric, res.value, res.correct_greedy, res.eval_loss,
        res.final_train_loss, res.params, res.seconds_train } do
        c[#c + 1] = v
      end
      csv_rows[#csv_rows + 1] = c
    else
      missing[#missing + 1] = run.id
    end
  end

  local done_results = {}
  for i = 1, #runs do done_results[#done_results + 1] = results[i] end
  local digest = provenance.digest(done_results)
  local md = { "# Sweep", "", "Command: `" .. table.concat(cmd, " ") .. "`", "",
    provenance.line(digest), "", tables.markdown(headers, rows) }

  -- the mean over seeds for each point of the other grid keys
  local seed_at
  for j, e in ipairs(grid) do if e.key == "seed" then seed_at = j end end
  local models = runner.kept_models(runs, results)
  local summary_json = { command = table.concat(cmd, " "), grid = grid, runs = #runs,
    done = #rows, missing = missing, failures = #failures, models = models,
    provenance = { runs = digest.fields, runs_with = digest.with, runs_without = digest.without,
      summary = provenance.collect(rp) } }
  if seed_at and #grid > 1 then
    local groups, order = {}, {}
    for i, run in ipairs(runs) do
      local res = results[i]
      if res then
        local parts = {}
        for j, v in ipairs(run.point) do if j ~= seed_at then parts[#parts + 1] = v end end
        local key = table.concat(parts, "\0")
        local g = groups[key]
        if not g then
          g = { point = parts, values = { n = 0 }, metric = res.metric }
          groups[key] = g
          order[#order + 1] = key
        end
        g.values.n = g.values.n + 1
        g.values[g.values.n] = res.value
      end
    end
    local gh = {}
    for j, e in ipairs(grid) do if j ~= seed_at then gh[#gh + 1] = e.key end end
    for _, h in ipairs { "runs", "drop worst, mean", "mean", "std", "min", "max" } do gh[#gh + 1] = h end
    local grows = {}
    summary_json.groups = {}
    for _, key in ipairs(order) do
      local g = groups[key]
      local s = stats.summary(g.values, g.metric == "correct")
      local f = g.metric == "loss" and "%.4f" or "%.2f"
      local r = { table.unpack(g.point) }
      for _, v in ipairs { s.n, tables.num(s.protocol, f), tables.num(s.mean, f),
        s.std and tables.num(s.std, "%.3g") or "-", tables.num(s.min, f), tables.num(s.max, f) } do
        r[#r + 1] = v
      end
      grows[#grows + 1] = r
      summary_json.groups[#summary_json.groups + 1] = { point = g.point, metric = g.metric,
        summary = s }
    end
    md[#md + 1] = "Over seeds:\n"
    md[#md + 1] = tables.markdown(gh, grows)
  end
  if #missing > 0 then
    md[#md + 1] = ("Not done (%d): %s\n"):format(#missing, table.concat(missing, "; "))
  end
  if #models > 0 then
    md[#md + 1] = ("Models: `%s` (%d of the %d runs; open them with scripts/sample.lua and "
      .. "scripts/attention_map.lua).\n"):format(fileio.join(args.out, "runs", "<point>.ckpt"),
      #models, #runs)
  end
  -- the loss curves: a group per point of the other grid keys (its seeds), in grid order
  local plot_groups, group_of = {}, {}
  for i, run in ipairs(runs) do
    if results[i] then
      local parts = {}
      for j, e in ipairs(grid) do
        if j ~= seed_at then parts[#parts + 1] = e.key .. "=" .. run.point[j] end
      end
      local label = #parts > 0 and table.concat(parts, " ") or "all seeds"
      local g = group_of[label]
      if not g then
        g = { label = label, results = {} }
        group_of[label] = g
        plot_groups[#plot_groups + 1] = g
      end
      g.results[#g.results + 1] = results[i]
    end
  end
  local files, perr
  if #plot_groups > 0 then
    files, perr = plot.loss_curves(plot_groups, fileio.join(args.out, "loss"), {
      title = seed_at and "sweep: training loss (each run thin, the mean over its seeds thick)"
        or "sweep: training loss (one line per run)" })
  else
    perr = "no finished runs"
  end
  if files then
    md[#md + 1] = "Loss curves: `" .. files[1] .. "`, `" .. files[2] .. "`.\n"
  end
  local text = table.concat(md, "\n")
  assert(fileio.write(fileio.join(args.out, "summary.md"), text))
  local csv_headers = {}
  for _, e in ipairs(grid) do csv_headers[#csv_headers + 1] = e.key end
  for _, h in ipairs { "metric", "value", "correct_greedy", "eval_loss", "final_train_loss",
    "params", "seconds_train" } do
    csv_headers[#csv_headers + 1] = h
  end
  assert(fileio.write(fileio.join(args.out, "summary.csv"), tables.csv(csv_headers, csv_rows)))
  assert(fileio.write(fileio.join(args.out, "summary.json"), json.encode(summary_json)))
  -- report.html: the summary for a browser, the plot inline, and every run in detail
  local items = {}
  for i, run in ipairs(runs) do
    if results[i] then
      items[#items + 1] = { title = run.id .. ": " .. describe(results[i]), result = results[i],
        files = html.files(run.path, args.out) }
    end
  end
  assert(fileio.write(report_path, html.page { title = "Sweep",
    status = ("Finished: %d of %d runs%s%s (%s UTC)."):format(#rows, #runs,
      #failures > 0 and (", %d failed"):format(#failures) or "",
      #missing > #failures and (", %d not done"):format(#missing - #failures) or "",
      os.date("!%Y-%m-%d %H:%M:%S")),
    body = html.markdown(text) .. "\n<h2>Every run in detail</h2>\n" .. html.runs(items) }))
  io.write(text)
  if not files then io.stderr:write("sweep.lua: no plot: ", tostring(perr), "\n") end
  io.stderr:write(("sweep: wrote %s/summary.md, summary.csv, summary.json, report.html%s\n")
    :format(args.out, files and ", loss.png, loss.svg" or ""))
  if #failures > 0 then error(("%d of %d runs failed (their logs are in %s/runs)"):format(
    #failures, #runs, args.out), 0) end
end)

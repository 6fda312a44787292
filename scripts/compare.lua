-- Methods x seeds on one task, with the write-up's protocol (docs/experiments.md).
--
--   build/roper scripts/compare.lua                                  -- rope vs roper, 10 seeds
--   build/roper scripts/compare.lua --methods rope roper roper_legacy none --seeds 5 --task addition
--   build/roper scripts/compare.lua --methods rope roper:fraction_v=0.5 --steps 4000 --out results/fv
--
-- A method is a pe mode with optional config keys: "roper:fraction_v=0.5:lr=3e-3". Each run
-- (method, seed) is one process of scripts/train.lua writing <out>/runs/<method>-s<seed>.json
-- (and .csv, .log); runs already there with the same config are not redone, so an interrupted
-- comparison resumes. At the end: <out>/summary.md (the table, the significance tests, every run),
-- summary.csv, summary.json, the loss curves loss.png and loss.svg, and report.html: all of it
-- on one page for a browser, with every run's details and provenance (scripts/lib/html.lua;
-- while the runs go, the page shows the runs finished so far and reloads itself). With
-- --keep-models each run also saves its trained model as <out>/runs/<method>-s<seed>.ckpt
-- (scripts/sample.lua and scripts/attention_map.lua open it); a finished run without its model is run again. Every run's
-- JSON records its provenance, and the summaries say it once (scripts/lib/provenance.lua).
--
-- Fine-tuning: --init names each run's starting checkpoint, with {method}, {pe} and {seed}
-- replaced per run: --init 'results/base/runs/{pe}-s{seed}.ckpt' --seq-len 512 --scaling yarn
-- starts every method and seed from its own run of a comparison made with --keep-models.
--
-- Every method's config is checked in full (rp.experiment.check: model, memory, task, corpus)
-- and the output folder is made and tried before the first run starts. Errors are one line: exit
-- 2 for a bad option or config, 1 for failed runs; --debug (or ROPER_DEBUG=1) adds tracebacks.
--
-- An option of all methods that does nothing for every one of them, or a method's own key that
-- does nothing for it, is refused with the reason, unless --allow-unused (cli.refuse_unused).
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
local plot = require "lib.plot"
local provenance = require "lib.provenance"
local slurmrun = require "lib.slurm"
local lengths = require "lib.lengths"
local report = require "lib.report"
local lm_report = require "lib.lm_report"
local html = require "lib.html"
local studies = require "lib.studies"

-- --help opens with these (each runs as written from the repository's folder; tests/lua/
-- help_examples_spec.lua runs them)
local EXAMPLES = {
  { "RoPE against RoPER on substring by index, 3 seeds each",
    "build/roper scripts/compare.lua --methods rope roper --seeds 3 --steps " .. "2000 --out runs/index" },
  { "four methods on 3-digit addition, 5 seeds, every run's model kept",
    "build/roper scripts/compare.lua --task addition --max-digits 3 --methods " .. "rope roper roper_legacy none --seeds 5 --steps 2000 --keep-models " .. "--out runs/addition" },
  { "a method with keys of its own: RoPER rotating half of v and the output",
    "build/roper scripts/compare.lua --task substring_prefix --methods rope " .. "roper roper:fraction_v=0.5 --seeds 5 --steps 1000 --out runs/fv" },
  { "trained on 2-digit addition, evaluated at 2 to 4 digits (scripts/lengths_report.lua "
    .. "runs/len: its tables)",
    "build/roper scripts/compare.lua --task addition --max-digits 2 --methods rope roper --seeds 5 "
    .. "--steps 1000 --eval-lengths 2,3,4 --out runs/len" },
  { "one train.lua command per run, for GNU parallel or a cluster (then the same command without --print-commands collects them)",
    "build/roper scripts/compare.lua --methods rope roper --seeds 10 --steps " .. "2000 --out runs/index10 --print-commands" },
}

cli.main("compare.lua", function()
  local parser = cli.parser("build/roper scripts/compare.lua",
    "Compare positional encodings over several seeds on one task (the write-up's protocol: "
    .. "10 runs per method, drop the worst, mean of the rest), with significance tests and "
    .. "loss-curve plots.", EXAMPLES)
  parser:option("--methods", "Methods: a pe mode, optionally with config keys, as "
    .. "roper:fraction_v=0.5, and optionally @n to run only the first n seeds for it, as "
    .. "none@5 (default: rope roper).")
    :args("+"):argname("<method>")
  parser:option("--seeds", "Runs per method (seeds first-seed .. first-seed+seeds-1).", "10")
    :convert(math.tointeger):argname("<n>")
  parser:option("--first-seed", "The first seed.", "1"):convert(math.tointeger):argname("<n>")
  parser:option("--out", "Output folder (default results/compare-<task>).")
    :argname("<dir>")
  parser:option("--jobs", "Runs at once, each its own process (default: the number of cores).")
    :convert(math.tointeger):argname("<n>")
  parser:option("--x", "The plots' x axis.", "tokens"):choices({ "tokens", "step" })
  parser:option("--jump-loss", "A task learned in a jump: a run jumps at the first curve point "
    .. "with training loss below this; adds jump rates (Fisher), jump steps (log-rank) and a "
    .. "Kaplan-Meier plot.")
    :argname("<loss>"):convert(tonumber)
  parser:flag("--force", "Rerun runs whose result file holds another config.")
  parser:flag("--keep-models", "Save each run's trained model beside its result "
    .. "(<out>/runs/<run>.ckpt).")
  parser:flag("--print-commands", "Print one train.lua command per run not yet done (each runs "
    .. "from any folder, with its thread count: for GNU parallel or a cluster) and write their "
    .. "config files, then stop; the same command without this flag collects the results.")
  parser:option("--checkpoint-every", "Each run saves a checkpoint every n steps "
    .. "(<out>/runs/<run>.part.ckpt, removed when it finishes); a run stopped before it finished "
    .. "goes on from there when the command is run again.")
    :convert(math.tointeger):argname("<n>")
  slurmrun.add_options(parser)
  parser:flag("--quiet", "No progress bar.")
  cli.add_config_options(parser, rp, { seed = true })
  local args = parser:parse()

  local die = cli.usage
  if args.checkpoint_every ~= nil and args.checkpoint_every < 1 then
    die("--checkpoint-every must be an integer >= 1")
  end
  local slurm = slurmrun.options(args)

  -- (each seed is a run of every method; a seed is an integer within 2^53, as --seed's)
  if not args.seeds or args.seeds < 1 or args.seeds > 100000 then
    die("--seeds must be an integer in 1..100000")
  end
  if not args.first_seed or args.first_seed < -2^53 or args.first_seed > 2^53 - args.seeds + 1 then
    die("--first-seed must be an integer >= -2^53, and --first-seed + --seeds - 1 at most 2^53")
  end
  local cores = proc.ncores()
  local jobs = args.jobs or cores
  if jobs < 1 then die("--jobs must be an integer >= 1") end

  local base = cli.config_overrides(args, rp)
  local typed = cli.typed(base)
  if base.threads == nil then base.threads = proc.threads_per_job(jobs, cores) end

  -- methods: "pe[:key=value...]"
  local methods = {}
  for _, given in ipairs(args.methods or { "rope", "roper" }) do
    local spec, nseeds = given:match("^(.-)@(%d+)$")
    if spec then nseeds = math.tointeger(tonumber(nseeds)) else spec = given end
    if nseeds and (nseeds < 1 or nseeds > args.seeds) then
      die(("method %s: @%d must be in 1..--seeds (%d)"):format(given, nseeds, args.seeds))
    end
    local parts = {}
    for p in spec:gmatch("[^:]+") do parts[#parts + 1] = p end
    if #parts == 0 then die("empty method") end
    local o, own = {}, {}
    for k, v in pairs(base) do o[k] = v end
    o.pe = parts[1]
    for i = 2, #parts do
      local k, v = parts[i]:match("^([%w_-]+)=(.*)$")
      if not k then die(("method %s: '%s' is not key=value"):format(spec, parts[i])) end
      k = k:gsub("-", "_")
      -- (the seeds are --seeds and --first-seed: a method's own seed would be overwritten)
      if k == "seed" then
        die(("method %s: seed is not a method's key (the seeds are --seeds and --first-seed)")
          :format(spec))
      end
      o[k], own[k] = v, ("method %s: %s=%s"):format(spec, k, v)
    end
    -- an init with {method}, {pe} or {seed} names each run's own checkpoint: checked per run
    local template = type(o.init) == "string" and o.init:find("{%a+}") and o.init
    if template then o.init = nil end
    local cfg, mem = cli.check(rp, o, args.quiet)
    if not cfg then die(("method %s: %s"):format(spec, mem)) end
    if template then o.init, cfg.init = template, template end
    cli.refuse_unused(rp, args, own, { cfg })
    for _, m in ipairs(methods) do
      if m.label == spec then die("method " .. spec .. " is given twice") end
    end
    -- the runs of --jobs run at once: their memory together
    local need = (mem.model + mem.optimiser) * jobs
    if mem.available and jobs > 1 and need > mem.available then
      die(("method %s: %d runs at once (--jobs %d) need %.1f GiB, more than the %.1f GiB of "
        .. "memory available (use fewer --jobs)"):format(spec, jobs, jobs, need / 2^30,
        mem.available / 2^30))
    end
    methods[#methods + 1] = { label = spec, cfg = cfg, seeds = nseeds or args.seeds }
  end

  -- an option of all methods that does nothing for every one of them
  local cfgs = {}
  for i, m in ipairs(methods) do cfgs[i] = m.cfg end
  cli.refuse_unused(rp, args, typed, cfgs, "method")

  local task = methods[1].cfg.task
  for _, m in ipairs(methods) do
    if m.cfg.task ~= task then die("all methods must use the same task") end
  end
  local out = args.out or ("results/compare-" .. task)

  local function safe(label) return (label:gsub("[^%w%._=-]", "_")) end

  local runs, checked = {}, {}
  for mi, m in ipairs(methods) do
    for s = args.first_seed, args.first_seed + m.seeds - 1 do
      local cfg = {}
      for k, v in pairs(m.cfg) do cfg[k] = v end
      cfg.seed = s
      -- init (fine-tuning) names each run's own checkpoint: {method}, {pe} and {seed} replaced
      if type(cfg.init) == "string" then
        cfg.init = cfg.init:gsub("{(%a+)}", { method = safe(m.label), pe = cfg.pe,
          seed = tostring(s) })
      end
      local run = { id = ("%s s%d"):format(m.label, s), cfg = cfg, method = mi, seed = s,
        path = fileio.join(out, "runs", ("%s-s%d.json"):format(safe(m.label), s)) }
      if args.keep_models then run.model = runner.model_path(run) end
      -- a run still to train needs its init checkpoint, one that gives its model: refused
      -- before the first run starts
      if type(cfg.init) == "string" and cfg.init ~= "" and not fileio.exists(run.path) then
        fileio.check_input(cfg.init, "--init")
        if m.cfg.init:find("{%a+}") and not checked[mi .. "\0" .. cfg.init] then
          -- (the method's init is a template: each run's own file, checked once per method)
          local ok, err = cli.check(rp, cfg, true)
          if not ok then die(("run %s: %s"):format(run.id, err)) end
          checked[mi .. "\0" .. cfg.init] = true
        end
      end
      runs[#runs + 1] = run
    end
  end
  runner.check_init(runs)
  -- (after the runs' checks: a refused init leaves no folder behind)
  fileio.check_output_folder(out, "--out")

  local train = fileio.join(fileio.dirname(arg[0]), "train.lua")
  slurm.out, slurm.train, slurm.force, slurm.name = out, train, args.force, "roper-compare"
  slurm.checkpoint_every = args.checkpoint_every
  slurm.who = "compare"
  slurm.collect = function(flag) return "the same command without " .. flag end
  if slurmrun.dispatch(args, runs, slurm) == "stop" then return end

  local c1 = methods[1].cfg
  local metric = (task == "addition" or task == "substring_index" or task == "grid_offset")
    and "correct" or "loss"
  local metric_name = metric == "correct"
    and ("correct of %d (%s%s)"):format(c1.problems, c1.decode,
      c1.decode == "sample" and (", temperature " .. tables.num(c1.temperature)) or "")
    or task == "lm" and "validation loss (nats per token over the whole split)"
    or "evaluation loss"

  if not args.quiet then
    io.stderr:write(("compare: %s, %d methods, %d runs (up to %d seeds each), %d at a time with %d "
      .. "thread%s each, into %s\n"):format(task, #methods, #runs, args.seeds, jobs, base.threads,
      base.threads == 1 and "" or "s", out))
  end

  local function describe_run(res)
    if res.diverged then return "diverged" end
    if res.metric == "correct" then
      return ("correct %d (greedy %d), eval loss %.4f"):format(res.correct, res.correct_greedy,
        res.eval_loss)
    end
    if res.lm then
      return ("valid loss %.4f, perplexity %.2f, %s bits per byte"):format(res.lm.valid.loss,
        res.lm.valid.perplexity, res.lm.valid.bits_per_byte
          and ("%.4f"):format(res.lm.valid.bits_per_byte) or "-")
    end
    return ("eval loss %.4f"):format(res.eval_loss)
  end

  local cmd = { "roper", "scripts/compare.lua" }
  for i = 1, #arg do cmd[#cmd + 1] = proc.quote(arg[i]) end
  local labels = {}
  for i, m in ipairs(methods) do labels[i] = m.label end
  local title = ("%s: %s"):format(task, table.concat(labels, " vs "))

  -- report.html while the runs go: the runs finished so far, rewritten as each one ends
  local report_path, finished = fileio.join(out, "report.html"), {}
  local function live_report(stopped)
    local ok, err = fileio.write(report_path, html.live { title = title,
      command = table.concat(cmd, " "), total = #runs, runs = finished, stopped = stopped })
    if not ok and not args.quiet then io.stderr:write("compare.lua: ", err, "\n") end
  end
  live_report()

  local ok_run, results, failures = pcall(runner.run, runs, {
    jobs = jobs, train = train, force = args.force,
    checkpoint_every = args.checkpoint_every,
    quiet = args.quiet,
    on_done = function(run, res, old)
      if not args.quiet then
        io.stderr:write(("%s %s: %s (%.0f s)\n"):format(old and "found" or "done", run.id,
          describe_run(res), res.seconds_train + res.seconds_eval))
      end
      finished[#finished + 1] = { id = run.id, title = run.id .. ": " .. describe_run(res),
        result = res, files = html.files(run.path, out) }
      live_report()
    end,
    on_stop = live_report,
  })
  if not ok_run then error(results, 0) end

  -- ---------------------------------------------------------------- the summary
  local groups = {}
  for mi, m in ipairs(methods) do
    groups[mi] = { label = m.label, cfg = m.cfg, results = {}, values = { n = 0 }, runs = {} }
  end
  for i, run in ipairs(runs) do
    local g = groups[run.method]
    local res = results[i]
    if res then
      g.results[#g.results + 1] = res
      g.values.n = g.values.n + 1
      g.values[g.values.n] = res.value -- nil when diverged
      g.runs[#g.runs + 1] = { seed = run.seed, res = res,
        -- the validation curve of the lm task (valid_every: the CSV's column valid_loss)
        valid_curve = task == "lm" and lm_report.valid_curve((run.path:gsub("%.json$", ".csv")))
          or nil }
    end
  end

  local higher = metric == "correct"
  local function finite(values)
    local f = {}
    for i = 1, values.n do if values[i] ~= nil then f[#f + 1] = values[i] end end
    return f
  end

  local function mean_of(list, key)
    local s, n = 0, 0
    for _, r in ipairs(list) do
      if r[key] then s, n = s + r[key], n + 1 end
    end
    return n > 0 and s / n or nil
  end

  local function fmt(v)
    if v == nil then return "-" end
    if metric == "correct" then return tables.num(v, "%.2f") end
    return tables.num(v, "%.4f")
  end

  local table_rows, summary_json = {}, { task = task, metric = metric, metric_name = metric_name,
    methods = {} }
  for _, g in ipairs(groups) do
    local s = stats.summary(g.values, higher)
    g.summary = s
    local row = { g.label, ("%d"):format(s.n), fmt(s.protocol), fmt(s.mean), fmt(s.median),
      fmt(s.min), fmt(s.max), s.std and tables.num(s.std, "%.3g") or "-" }
    if metric == "correct" then
      row[#row + 1] = fmt(mean_of(g.results, "correct_greedy"))
      row[#row + 1] = tables.num(mean_of(g.results, "eval_loss"), "%.4f")
    else
      row[#row + 1] = tables.num(mean_of(g.results, "final_train_loss"), "%.4f")
    end
    if s.diverged > 0 then row[1] = row[1] .. (" (%d diverged)"):format(s.diverged) end
    local exploded = 0
    for _, r in ipairs(g.results) do if r.exploded then exploded = exploded + 1 end end
    if exploded > 0 then row[1] = row[1] .. (" (%d exploded)"):format(exploded) end
    table_rows[#table_rows + 1] = row
    summary_json.methods[#summary_json.methods + 1] = { label = g.label, config = g.cfg,
      summary = s, values = finite(g.values) }
  end
  -- a count of correct answers says of how many
  local of = metric == "correct" and (" (of %d)"):format(c1.problems) or ""
  local headers = { "method", "runs", "drop worst, mean" .. of, "mean" .. of, "median" .. of,
    "min" .. of, "max" .. of, "std" }
  if metric == "correct" then
    headers[#headers + 1] = "greedy mean" .. of
    headers[#headers + 1] = "eval loss"
  else
    headers[#headers + 1] = "final train loss"
  end

  -- significance: the first method against each other one
  local test_rows = {}
  summary_json.tests = {}
  local by_seed = report.by_seed

  local a = finite(groups[1].values)
  local a_seed = by_seed(groups[1])
  for gi = 2, #groups do
    local c = stats.compare(a, finite(groups[gi].values), a_seed, by_seed(groups[gi]))
    local label = groups[gi].label .. " - " .. groups[1].label
    test_rows[#test_rows + 1] = tables.test_row(label, c,
      metric == "correct" and "%+.2f" or "%+.4f")
    c.a, c.b = groups[1].label, groups[gi].label
    summary_json.tests[#summary_json.tests + 1] = c
  end

  local run_rows, csv_rows = {}, {}
  for _, g in ipairs(groups) do
    for _, r in ipairs(g.runs) do
      local res = r.res
      -- a run that went on from a checkpoint says so (its curve before that step came from the
      -- interrupted process, possibly on another machine)
      local notes = {}
      if res.exploded then notes[#notes + 1] = ("exploded at step %d"):format(res.exploded_at) end
      if (res.resumed_at or 0) > 0 then
        notes[#notes + 1] = ("resumed at step %d"):format(res.resumed_at)
      end
      local row = { g.label, r.seed .. (#notes > 0 and " (" .. table.concat(notes, "; ") .. ")"
        or "") }
      if metric == "correct" then
        row[#row + 1] = res.diverged and "diverged" or tables.num(res.value)
        row[#row + 1] = tables.num(res.correct_greedy)
      end
      row[#row + 1] = res.diverged and "diverged" or tables.num(res.eval_loss, "%.4f")
      row[#row + 1] = tables.num(res.final_train_loss, "%.4f")
      row[#row + 1] = ("%.0f"):format(res.seconds_train)
      run_rows[#run_rows + 1] = row
      csv_rows[#csv_rows + 1] = { g.label, r.seed, res.config.pe, res.value, res.correct,
        res.correct_greedy, res.eval_loss, res.final_train_loss, res.diverged and 1 or 0,
        res.exploded and 1 or 0, res.params, res.seconds_train, res.seconds_eval, res.tokens_per_s }
    end
  end

  local scale = ("d_model %d, %d layers, %d heads, d_ff %d, %s-norm, seq_len %d, batch %d, %d steps, "
    .. "%s lr %s (%s), seeds %d..%d (the first n for methods marked @n), %d parameters"):format(c1.d_model, c1.layers, c1.heads,
    c1.d_ff, c1.norm, c1.seq_len, c1.batch, c1.steps, c1.optimiser, tables.num(c1.lr), c1.schedule,
    args.first_seed, args.first_seed + args.seeds - 1, results[1] and results[1].params or 0)

  -- every pair of methods: intervals, effect sizes, Holm; the jump endpoint (--jump-loss)
  local diffs = report.differences(groups, metric)
  local jumps = report.jumps(groups, args.jump_loss)
  -- the committed study of the same question (results/ beside scripts/, when it is there)
  local root = fileio.abspath(fileio.join(fileio.dirname(arg[0]), ".."))
  local study, differing = studies.closest(task, c1, labels, root)

  local done_results = {}
  for i = 1, #runs do done_results[#done_results + 1] = results[i] end
  local digest = provenance.digest(done_results)
  local md = {
    "# " .. title,
    "",
    "Command: `" .. table.concat(cmd, " ") .. "`",
    "",
    report.reading(groups, metric, diffs, { jumps = jumps, unit = metric == "correct"
      and metric_name:match("^correct of %d+") or nil, study_seeds = study and study.seeds,
      problems = c1.problems }),
    study and studies.markdown(study, differing, c1, args.seeds, metric,
      studies.link(root, out)) or "",
    "Scale: " .. scale .. ".",
    "",
    provenance.line(digest),
    "",
    ("Metric: %s, %s is better. \"drop worst, mean\" is the write-up's protocol (the worst run "
      .. "of each method dropped, the rest averaged)."):format(metric_name,
      higher and "higher" or "lower"),
    "",
    tables.markdown(headers, table_rows),
  }
  if task == "lm" then
    -- the language-model figures of rp.eval.lm, each method's mean over its runs
    md[#md + 1] = lm_report.splits_markdown(groups)
  end
  -- the loss curves, right under the table they explain
  local plot_groups = report.plot_groups(groups, jumps)
  local files, perr = plot.loss_curves(plot_groups, fileio.join(out, "loss"), {
    title = ("%s: training loss (each run thin, the mean of the runs thick and dashed%s)")
      :format(task, jumps and ", apart for the runs that jumped" or ""),
    x = args.x })
  if files then
    md[#md + 1] = "Loss curves: `" .. files[1] .. "`, `" .. files[2] .. "`.\n"
  end
  -- the lm task with valid_every: the validation loss against tokens, as the training loss above
  local vfiles
  if task == "lm" then
    vfiles = lm_report.plot(groups, fileio.join(out, "valid"), "valid", {
      title = ("%s: validation loss (each run thin, the mean of the runs thick and dashed)")
        :format(task) })
    if vfiles then
      md[#md + 1] = "Validation loss curves: `" .. vfiles[1] .. "`, `" .. vfiles[2] .. "`.\n"
    end
  end
  if #test_rows > 0 then
    md[#md + 1] = ("Significance (two-sided): Welch's t-test and a permutation test on the "
      .. "difference of means over all runs; then the runs paired by seed (the same seed gives "
      .. "both methods the same initialisation and data): a paired t-test and the exact "
      .. "sign-flip test.\n")
    md[#md + 1] = tables.markdown(tables.test_headers, test_rows)
    -- the sign-flip floor is warned under the table of every pair, next
    local warn = tables.test_warnings(summary_json.tests, { sign_flip = #diffs.rows == 0 })
    if warn ~= "" then md[#md + 1] = warn end
  end
  -- every pair of methods: intervals, effect sizes, Holm
  summary_json.differences = diffs
  if #diffs.rows > 0 then md[#md + 1] = report.differences_markdown(diffs, metric) end
  -- the jump endpoint (--jump-loss): rates, steps, Kaplan-Meier
  local kfiles, kerr
  if jumps then
    summary_json.jumps = jumps
    md[#md + 1] = report.jumps_markdown(jumps, metric, of)
    kfiles, kerr = plot.km(report.km_series(jumps, c1.steps), fileio.join(out, "jumps"), {
      title = ("%s: runs that have not jumped yet (training loss above %s)"):format(task,
        tables.num(args.jump_loss)) })
    if kfiles then
      md[#md + 1] = "Kaplan-Meier plot: `" .. kfiles[1] .. "`, `" .. kfiles[2] .. "`.\n"
    end
  end
  -- length generalisation (eval_lengths): per method x scaling x length, tests, plot
  local ls = lengths.summarise(groups, metric)
  local lfiles, lerr
  if ls then
    md[#md + 1] = ("Length generalisation (eval_lengths %s, eval_scaling %s; %s): %s at each "
      .. "length, over the runs (seeds) of each method.\n"):format(c1.eval_lengths,
      c1.eval_scaling, task == "addition" and "operand digits" or task == "substring_index"
      and "str_len" or "seq_len", metric_name)
    md[#md + 1] = lengths.markdown(ls, metric)
    lfiles, lerr = lengths.plot(ls, fileio.join(out, "lengths"), {
      title = ("%s: %s against length (mean of the runs, bars min..max)"):format(task,
        metric == "correct" and "correct answers" or "evaluation loss"),
      xlabel = task == "addition" and "operand digits" or task == "substring_index"
        and "string length" or "sequence length",
      ylabel = metric == "correct" and ("correct of %d"):format(c1.problems) or "evaluation loss" })
    if lfiles then
      md[#md + 1] = "Lengths plot: `" .. lfiles[1] .. "`, `" .. lfiles[2] .. "`; table: `"
        .. fileio.join(out, "summary_lengths.csv") .. "`.\n"
    end
    summary_json.lengths = { rows = ls.rows, tests = ls.tests }
  end
  if task == "lm" then
    -- the lm task: the lengths as one table (the training length first) and the loss by position
    md[#md + 1] = lm_report.lengths_markdown(groups)
    md[#md + 1] = lm_report.positions_markdown(groups, lm_report.POSITION_BINS)
  end
  md[#md + 1] = "Every run:\n"
  local run_headers = metric == "correct"
    and { "method", "seed", "correct" .. of, "greedy" .. of, "eval loss", "final train loss",
      "train s" }
    or { "method", "seed", "eval loss", "final train loss", "train s" }
  md[#md + 1] = tables.markdown(run_headers, run_rows)
  if #failures > 0 then
    local ids = {}
    for i, f in ipairs(failures) do ids[i] = f.run.id end
    md[#md + 1] = ("%d runs failed: %s\n"):format(#failures, table.concat(ids, ", "))
  end
  local models = runner.kept_models(runs, results)
  if #models > 0 then
    md[#md + 1] = ("Models: `%s` (%d of the %d runs; open them with scripts/sample.lua and "
      .. "scripts/attention_map.lua).\n"):format(fileio.join(out, "runs", "<run>.ckpt"), #models,
      #runs)
  end


  local text = table.concat(md, "\n")
  local function write(path, data) assert(fileio.write(path, data)) end
  write(fileio.join(out, "summary.md"), text)
  write(fileio.join(out, "summary.csv"), tables.csv({ "method", "seed", "pe", "value",
    "correct", "correct_greedy", "eval_loss", "final_train_loss", "diverged", "exploded", "params",
    "seconds_train", "seconds_eval", "tokens_per_s" }, csv_rows))
  if ls then write(fileio.join(out, "summary_lengths.csv"), lengths.csv(ls)) end
  summary_json.command = table.concat(cmd, " ")
  summary_json.failures = #failures
  summary_json.models = models
  summary_json.provenance = { runs = digest.fields, runs_with = digest.with,
    runs_without = digest.without, summary = provenance.collect(rp) }
  write(fileio.join(out, "summary.json"), json.encode(summary_json))
  -- report.html: the summary for a browser, its plots inline, and every run in detail
  local items = {}
  for i, run in ipairs(runs) do
    if results[i] then
      items[#items + 1] = { title = ("%s, seed %d: %s"):format(methods[run.method].label,
        run.seed, describe_run(results[i])), result = results[i],
        files = html.files(run.path, out) }
    end
  end
  write(report_path, html.page { title = title,
    status = ("Finished: %d of %d runs%s (%s UTC)."):format(#runs - #failures, #runs,
      #failures > 0 and (", %d failed"):format(#failures) or "", os.date("!%Y-%m-%d %H:%M:%S")),
    body = html.markdown(text) .. "\n<h2>Every run in detail</h2>\n" .. html.runs(items) })

  io.write(text)
  if not files then io.stderr:write("compare.lua: no plot: ", tostring(perr), "\n") end
  if ls and not lfiles then io.stderr:write("compare.lua: no lengths plot: ", tostring(lerr), "\n") end
  if jumps and not kfiles then io.stderr:write("compare.lua: no jumps plot: ", tostring(kerr), "\n") end
  io.stderr:write(("compare: wrote %s/summary.md, summary.csv, summary.json, report.html%s%s%s%s\n")
    :format(out,
    files and ", loss.png, loss.svg" or "", vfiles and ", valid.png, valid.svg" or "",
    ls and (", summary_lengths.csv" .. (lfiles and ", lengths.png, lengths.svg" or "")) or "",
    kfiles and ", jumps.png, jumps.svg" or ""))
  if #failures > 0 then error(("%d of %d runs failed (their logs are in %s/runs)"):format(
    #failures, #runs, out), 0) end
end)

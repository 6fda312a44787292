-- The pair and jump tables of a finished comparison, recomputed from its run files (for a
-- results document, and for comparisons collected before compare.lua printed them):
--
--   build/roper scripts/pairs_report.lua results/substring_index [--jump-loss 1.5]
--   build/roper scripts/pairs_report.lua results/v2-lr-addition-3e-4 results/v2-lr-addition-1e-3 ...
--
-- Reads <dir>/summary.json (the metric and the methods, in order) and every
-- <dir>/runs/<method>-s<seed>.json, and prints what compare.lua's summary now holds
-- (scripts/lib/report.lua): every pair of methods paired by seed with its 95% t and bootstrap
-- intervals, d_z, and the paired t and sign-flip p with Holm over the table; with --jump-loss
-- also the jump rates, Kaplan-Meier medians, Fisher and log-rank tests. --metric
-- final_train_loss tests the mean of the last 5 curve points instead of the summary's metric
-- (the write-up's statistic on substring by prefix). Each folder's tables start with one row
-- per method: the write-up's "drop worst, mean", the mean, median, min, max and sd. With
-- several folders (the same task at several learning rates, say) each gets its tables, and
-- then one table holds every folder's pairs, labelled by folder, with Holm over all of them.
-- --metric mean_train_loss tests the mean of every curve point (the area under the training
-- loss curve over its length: an endpoint without a threshold, lower is better); --metric
-- eval_loss the evaluation loss (the held-out batches' mean; lower is better).
-- --jump-sensitivity t1 t2 ... adds the jump counts, Fisher and log-rank p at each threshold.
-- --skip-seeds 1-4 leaves those seeds out (a pilot's runs, say; a list: 1-4,7); DIR=1-4 only in
-- that folder (repeatable).
-- --interaction a/b ... (two folders: one task at two model sizes, say) adds, for each pair,
-- whether its paired difference a - b changes from the first folder to the second: the change
-- with its 95% interval and Welch's t-test over the two lists of per-seed differences.
-- --pairs a/b ... adds one compact table, a row per folder: each method's mean and the pairs
-- asked for (a - b) with their t interval and paired t p, Holm as in the table above it (the
-- learning-rate tables of docs/results.md).
-- --noninferiority a/b --margin m adds, for each folder with runs of both (the others named
-- below the table), whether a is worse than b by less than m
-- (lower is better, paired by seed): the one-sided paired t-test at that margin, its 95% upper
-- bound and the 90% equivalence interval (docs/results.md, language modelling).
-- --lm (a comparison of the lm task) adds, for each folder, the language-modelling tables and
-- curves (scripts/lib/lm_report.lua): each method's validation and test loss, perplexity and
-- bits per byte; the loss by evaluation length and context extension, the training length
-- first (with --eval-lengths); the loss by position in the window (--position-bins bins); and
-- the training and validation loss against tokens, each seed thin and the mean over the seeds
-- thick, drawn to <dir>/lm_train.png and .svg and <dir>/lm_valid.png and .svg (the validation
-- curve: the column valid_loss of the runs' CSV, written with valid_every).
-- --trend a/b ... (two folders or more: one study at several model sizes) adds the difference a - b
-- against size: each folder's per-seed differences with their mean and 95% t interval, at x =
-- log10 of the folder's parameter count (the runs' params; the runs of a and b must agree), and
-- the line d = alpha + beta x fitted by ordinary least squares over every per-seed difference
-- (n - 2 df): the slope with its standard error and 95% interval, the fitted value at each size
-- with its 95% confidence interval; --extrapolate <params> also the fitted value at that size
-- with its 95% confidence and prediction intervals, labelled an extrapolation beyond the sizes
-- measured (lib/lm_report.lua).
-- --gap-curve a/b ... (and --lm with --trend, for the trend's pairs) adds, for each folder, the
-- difference a - b of the validation loss against training tokens: paired by seed at each point
-- of the validation curves, its mean and 95% t band over the seeds, as a table and drawn to
-- <dir>/lm_gap_<a>-<b>.png and .svg.
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local lfs = require "lfs"
local cli = require "lib.cli"
local fileio = require "lib.fileio"
local json = require "lib.json"
local report = require "lib.report"
local saved = require "lib.saved"
local lm_report = require "lib.lm_report"

-- --help opens with these (each runs as written from the repository's folder; tests/lua/
-- help_examples_spec.lua runs them)
local EXAMPLES = {
  { "the pair and jump tables of the committed substring-by-index study",
    "build/roper scripts/pairs_report.lua results/v3-index-0.1m --jump-loss " .. "1.5" },
  { "three learning rates, one table of all their pairs (Holm over all)",
    "build/roper scripts/pairs_report.lua results/v2-lr-addition-3e-4 " .. "results/v2-lr-addition-1e-3 results/v2-lr-addition-3e-3" },
  { "the final training loss, the write-up's statistic on substring by prefix",
    "build/roper scripts/pairs_report.lua results/v2-prefix --metric " .. "final_train_loss" },
  { "whether roper - rope changes from 0.1M to 0.6M parameters",
    "build/roper scripts/pairs_report.lua results/v3-index-0.1m " .. "results/v3-index --interaction roper/rope" },
  { "roper - rope against size (2.8M and 8.8M), fitted and extrapolated to 200M parameters",
    "build/roper scripts/pairs_report.lua results/lm-2m results/lm-8m " .. "--trend roper/rope --extrapolate 2e8" },
}

cli.main("pairs_report.lua", function()
  local parser = cli.parser("build/roper scripts/pairs_report.lua",
    "Pair and jump tables of a comparison, recomputed from its run files.", EXAMPLES)
  parser:argument("dir", "The comparison's output folder (several: also one table of all their "
    .. "pairs, Holm over all)."):args("+")
  parser:option("--jump-loss", "Also the jump tables: a run jumps at the first curve point with "
    .. "training loss below this."):argname("<loss>"):convert(tonumber)
  parser:option("--metric", "The value tested: the summary's metric, the final training loss "
    .. "(the mean of the last 5 curve points), the mean training loss (of every curve point: "
    .. "the area under the loss curve, no threshold) or the evaluation loss.", "value")
    :choices({ "value", "final_train_loss", "mean_train_loss", "eval_loss" })
  parser:option("--jump-sensitivity", "Also the jump counts and tests at each of these "
    .. "thresholds, one row each."):args("+"):argname("<loss>"):convert(tonumber)
  parser:option("--skip-seeds", "Leave these seeds out (a pilot's, say): a list of seeds and "
    .. "ranges, as 1-4,7; DIR=1-4 leaves them out of that folder only (repeatable).")
    :argname("<list>"):count("*")
  parser:option("--interaction", "With two folders: for each pair a/b, whether its paired "
    .. "difference a - b changes from the first folder to the second (Welch's t-test over the "
    .. "per-seed differences)."):args("+"):argname("<a/b>")
  parser:option("--pairs", "Also one compact table, a row per folder: each method's mean and "
    .. "these pairs a/b (a - b) with their 95% t interval and paired t p (Holm as in the table "
    .. "of all folders)."):args("+"):argname("<a/b>")
  parser:option("--noninferiority", "Also a non-inferiority table, a row per folder that holds "
    .. "runs of both methods: a against b (a - b, lower is better), paired by seed, at "
    .. "--margin."):args("+"):argname("<a/b>")
  parser:option("--margin", "The non-inferiority margin, in the metric's units (fixed before "
    .. "the runs)."):argname("<m>"):convert(tonumber)
  parser:flag("--lm", "Also the language-modelling tables of each folder (a comparison of the "
    .. "lm task): validation and test loss, perplexity and bits per byte; loss by length and "
    .. "by position; and the training and validation curves, drawn to <dir>/lm_train.png and "
    .. "<dir>/lm_valid.png (and .svg).")
  parser:option("--position-bins", "With --lm: the bins of the by-position table.",
    tostring(lm_report.POSITION_BINS))
    :argname("<n>"):convert(math.tointeger)
  parser:option("--trend", "With two folders or more (sizes): the difference a - b against "
    .. "log10 of the folders' parameter counts, a line fitted by ordinary least squares over "
    .. "every per-seed difference, its slope and the fit at each size with 95% intervals (with "
    .. "--lm also the --gap-curve of each pair)."):args("+"):argname("<a/b>")
  parser:option("--extrapolate", "With --trend: also the fitted difference at this parameter "
    .. "count (2e8, say), with its 95% confidence and prediction intervals, labelled an "
    .. "extrapolation when beyond the sizes measured."):argname("<params>")
  parser:option("--gap-curve", "Also, per folder, the difference a - b of the validation loss "
    .. "against training tokens, paired by seed at each point of the validation curves, its "
    .. "mean and 95% t band, as a table and drawn to <dir>/lm_gap_<a>-<b>.png (and .svg)."
    ):args("+"):argname("<a/b>")
  local args = parser:parse()
  if not args.position_bins or args.position_bins < 1 then
    cli.usage("--position-bins: an integer >= 1 expected")
  end
  if args.noninferiority and not (args.margin and args.margin > 0 and args.margin < math.huge) then
    cli.usage("--noninferiority needs --margin, a finite number > 0")
  end
  if args.margin and not args.noninferiority then
    cli.usage("--margin applies to --noninferiority, which is not given")
  end
  local extrapolate
  if args.extrapolate then
    extrapolate = tonumber(args.extrapolate)
    if not (extrapolate and extrapolate > 0 and extrapolate < math.huge) then
      cli.usage(("--extrapolate %s: a parameter count > 0 expected (2e8, say)")
        :format(args.extrapolate))
    end
    if not args.trend then cli.usage("--extrapolate needs --trend") end
  end
  if args.trend and #args.dir < 2 then
    cli.usage(("--trend %s: two folders or more of different sizes expected, %d given")
      :format(args.trend[1], #args.dir))
  end
  -- skip[dir or true]: the ranges of seeds {lo, hi} left out of a folder (true: of every folder);
  -- a DIR= must be one of the folders given (a misspelt one would leave out nothing)
  local skip = { [true] = {} }
  for _, spec in ipairs(args.skip_seeds or {}) do
    local dir, list = spec:match("^(.*)=([^=]*)$")
    if dir == "" then cli.usage(("--skip-seeds %s: a folder expected before ="):format(spec)) end
    if dir then
      -- the folder as it is given among the arguments (another spelling of it too: ./x, x/)
      local as_given
      for _, d in ipairs(args.dir) do
        if fileio.same_path(d, dir) then as_given = d:gsub("/+$", "") end
      end
      if not as_given then
        cli.usage(("--skip-seeds %s: %s is not one of the folders given"):format(spec, dir))
      end
      dir = as_given
    else
      dir = true
    end
    skip[dir] = skip[dir] or {}
    for part in (list or spec):gmatch("[^,]+") do
      local a, b = part:match("^%s*(%d+)%s*%-%s*(%d+)%s*$")
      if not a then a = part:match("^%s*(%d+)%s*$"); b = a end
      if not a then cli.usage(("--skip-seeds %s: seeds and ranges expected, as 1-4,7 or DIR=1-4")
        :format(spec)) end
      a, b = math.tointeger(tonumber(a)), math.tointeger(tonumber(b))
      if not (a and b) then
        cli.usage(("--skip-seeds %s: %s holds a seed past the integers"):format(spec, part))
      end
      if a > b then
        cli.usage(("--skip-seeds %s: %s is not a range of seeds from the smaller up, as 1-4")
          :format(spec, part))
      end
      skip[dir][#skip[dir] + 1] = { a, b }
    end
  end
  local function within(ranges, seed)
    for _, r in ipairs(ranges or {}) do
      if seed >= r[1] and seed <= r[2] then return true end
    end
    return false
  end
  local function skipped(dir, seed)
    return within(skip[true], seed) or within(skip[(dir:gsub("/+$", ""))], seed)
  end
  local function skip_text(dir)
    local parts = {}
    for _, spec in ipairs(args.skip_seeds or {}) do
      local d, list = spec:match("^(.*)=([^=]*)$")
      if not d then parts[#parts + 1] = spec
      elseif fileio.same_path(d, dir) then parts[#parts + 1] = list end
    end
    return #parts > 0 and "; seeds " .. table.concat(parts, ",") .. " left out" or ""
  end

  -- the mean of every curve point's loss (nil without any)
  local function mean_curve_loss(r)
    local sum, n = 0, 0
    for _, p in ipairs(r.curve or {}) do
      if p.loss then sum, n = sum + p.loss, n + 1 end
    end
    return n > 0 and sum / n or nil
  end

  -- every folder's summary.json (the metric and the methods, in order), read once
  local summaries = {}
  for i, dir in ipairs(args.dir) do
    summaries[i] = saved.summary(dir)
  end

  -- --lm: one folder's language-modelling tables, and its curves drawn into it
  local function lm_tables(dir, groups)
    local parts = { lm_report.splits_markdown(groups), lm_report.lengths_markdown(groups),
      lm_report.positions_markdown(groups, args.position_bins) }
    for i = 1, 3 do
      if parts[i] then io.write("\n", parts[i]) end
    end
    local name = dir:gsub("/+$", ""):match("[^/]+$") or dir
    for _, which in ipairs { "train", "valid" } do
      local files, err = lm_report.plot(groups, fileio.join(dir, "lm_" .. which), which, {
        title = ("%s: %s loss (each seed thin, the mean over the seeds thick and dashed)")
          :format(name, which == "valid" and "validation" or "training") })
      if files then
        io.write(("\n%s curves: `%s`, `%s`.\n"):format(which == "valid" and "Validation"
          or "Training", files[1], files[2]))
      else
        io.write(("\nNo %s curves: %s.\n"):format(which == "valid" and "validation"
          or "training", tostring(err)))
      end
    end
  end

  -- a method's label as in its run files' names (compare.lua's rule)
  local function safe(label) return (label:gsub("[^%w%._=-]", "_")) end

  -- one folder's groups, read from its run files
  local function load(dir, summary)
    local okd, iter, state = pcall(lfs.dir, fileio.join(dir, "runs"))
    if not okd then cli.usage(dir .. ": no runs folder") end
    local files = {}
    for name in iter, state do files[#files + 1] = name end
    local groups = {}
    for i, m in ipairs(summary.methods) do
      local g = { label = m.label, runs = {} }
      local prefix = safe(m.label) .. "-s"
      for _, name in ipairs(files) do
        local s = name:sub(1, #prefix) == prefix and name:sub(#prefix + 1):match("^(%d+)%.json$")
        if s and not skipped(dir, math.tointeger(tonumber(s))) then
          local r = assert(json.read(fileio.join(dir, "runs", name)))
          if args.metric == "final_train_loss" then r.value = r.final_train_loss end
          if args.metric == "mean_train_loss" then r.value = mean_curve_loss(r) end
          if args.metric == "eval_loss" then r.value = r.eval_loss end
          -- a diverged run has no value under any metric (it counts as the worst run): its
          -- curve's finite points before it diverged are not its loss
          if r.diverged then r.value = nil end
          local run = { seed = math.tointeger(tonumber(s)), res = r }
          if args.lm or args.gap_curve then
            run.valid_curve = lm_report.valid_curve(fileio.join(dir, "runs",
              (name:gsub("%.json$", ".csv"))))
          end
          g.runs[#g.runs + 1] = run
        end
      end
      table.sort(g.runs, function(a, b) return a.seed < b.seed end)
      groups[i] = g
    end
    return groups
  end

  -- one folder: its tables (gaps: its gap curves, { {a =, b =, g = lm_report.gap_curve's or nil,
  -- err =}, ... }); returns its pair table and metric
  local function folder(dir, summary, groups, gaps)
    local metric = args.metric == "value" and summary.metric or "loss"
    local metric_name = ({ value = summary.metric_name,
      final_train_loss = "final training loss, the mean of the last 5 curve points",
      mean_train_loss = "mean training loss, of every curve point",
      eval_loss = "evaluation loss, the held-out batches' mean" })[args.metric]
    io.write(("%s (%s%s): %s\n\n"):format(dir, metric_name, skip_text(dir),
      table.concat((function()
        local l = {}
        for i, g in ipairs(groups) do l[i] = ("%s %d runs"):format(g.label, #g.runs) end
        return l
      end)(), ", ")))
    io.write(report.methods_markdown(groups, metric), "\n")
    local d = report.differences(groups, metric)
    io.write(report.differences_markdown(d, metric), "\n")
    local jumps = report.jumps(groups, args.jump_loss)
    if jumps then io.write(report.jumps_markdown(jumps, metric)) end
    if args.jump_sensitivity then
      io.write("\n", report.jump_sensitivity_markdown(groups, args.jump_sensitivity))
    end
    if args.lm then lm_tables(dir, groups) end
    for _, gap in ipairs(gaps) do
      local g, a, b = gap.g, gap.a, gap.b
      if g then
        io.write("\n", lm_report.gap_markdown(g, (lm_report.pair_params(groups, a, b))))
        local name = dir:gsub("/+$", ""):match("[^/]+$") or dir
        local files, err = lm_report.plot_gap(g, fileio.join(dir, ("lm_gap_%s-%s"):format(
          safe(a), safe(b))), { title =
          ("%s: validation loss %s - %s (each seed thin, the mean over the seeds thick, its 95%% "
          .. "t band shaded)"):format(name, a, b) })
        if files then
          io.write(("\nGap curve: `%s`, `%s`.\n"):format(files[1], files[2]))
        else
          io.write(("\nNo gap curve plot: %s.\n"):format(tostring(err)))
        end
      else
        io.write(("\nNo gap curve of %s - %s: %s.\n"):format(a, b, gap.err))
      end
    end
    return d, metric
  end

  -- the folders' metrics agree before anything is printed
  for i = 2, #args.dir do
    local a, b = summaries[1], summaries[i]
    if a.metric ~= b.metric then
      cli.usage(("%s measures %s, %s %s: one table cannot hold both"):format(args.dir[i],
        tostring(b.metric), args.dir[1], tostring(a.metric)))
    end
  end
  if args.interaction and #args.dir ~= 2 then
    cli.usage(("--interaction compares two folders, %d given"):format(#args.dir))
  end
  -- --pairs: every a/b names two methods of the first folder
  local wanted = {}
  if args.pairs then
    local labels = {}
    for _, m in ipairs(summaries[1].methods or {}) do labels[m.label] = true end
    for _, spec in ipairs(args.pairs) do
      local a, b = spec:match("^(.+)/(.+)$")
      if not a or not labels[a] or not labels[b] or a == b then
        cli.usage(("--pairs %s: two methods of the comparison a/b expected"):format(spec))
      end
      wanted[#wanted + 1] = { a, b }
    end
  end

  -- every folder's runs, then what can refuse (the trend, the gap curves) before a table is printed
  local folders = {}
  for i, dir in ipairs(args.dir) do
    folders[i] = { name = dir:gsub("/+$", ""):match("[^/]+$") or dir,
      groups = load(dir, summaries[i]) }
  end
  local function pair_of(option, spec)
    local a, b = spec:match("^(.+)/(.+)$")
    if not a or a == b then cli.usage(("%s %s: two methods a/b expected"):format(option, spec)) end
    return a, b
  end
  local trends = {}
  for _, spec in ipairs(args.trend or {}) do
    local a, b = pair_of("--trend", spec)
    local t, err = lm_report.trend(folders, a, b)
    if not t then cli.usage(("--trend %s: %s"):format(spec, err)) end
    trends[#trends + 1] = t
  end
  -- the non-inferiority rows: each pair in every folder that holds runs of both methods (NoPE,
  -- say, run at one size only), at least 2 pairs there; a pair no folder holds is refused
  local ni_rows, ni_absent
  if args.noninferiority then
    -- the test is of a metric where lower is better (a loss): on the correct answers it would
    -- call the worse method non-inferior
    for i, dir in ipairs(args.dir) do
      local m = args.metric == "value" and summaries[i].metric or "loss"
      if m ~= "loss" then
        cli.usage(("--noninferiority tests a loss (lower is better); %s's metric is %s: give "
          .. "--metric final_train_loss, mean_train_loss or eval_loss"):format(dir, tostring(m)))
      end
    end
    ni_rows, ni_absent = {}, {}
    for _, spec in ipairs(args.noninferiority) do
      local a, b = pair_of("--noninferiority", spec)
      local absent = {}
      for _, fo in ipairs(folders) do
        local has = {}
        for _, g in ipairs(fo.groups) do has[g.label] = #g.runs > 0 end
        if has[a] and has[b] then
          local r = report.noninferiority(fo.groups, a, b, args.margin)
          if not r then
            cli.usage(("--noninferiority %s: at least 2 runs of each paired by seed expected in "
              .. "%s"):format(spec, fo.name))
          end
          r.name = fo.name
          ni_rows[#ni_rows + 1] = r
        else
          absent[#absent + 1] = fo.name
        end
      end
      if #absent == #folders then
        cli.usage(("--noninferiority %s: no folder holds runs of both %s and %s")
          :format(spec, a, b))
      end
      if #absent > 0 then ni_absent[#ni_absent + 1] = { spec = spec, folders = absent } end
    end
  end
  -- the gap curves: --gap-curve's pairs, and with --lm the trend's (each pair once)
  local gap_pairs, seen = {}, {}
  for _, spec in ipairs(args.gap_curve or {}) do
    local a, b = pair_of("--gap-curve", spec)
    if not seen[a .. "/" .. b] then
      seen[a .. "/" .. b], gap_pairs[#gap_pairs + 1] = true, { a = a, b = b, asked = true }
    end
  end
  if args.lm then
    for _, t in ipairs(trends) do
      if not seen[t.a .. "/" .. t.b] then
        seen[t.a .. "/" .. t.b], gap_pairs[#gap_pairs + 1] = true, { a = t.a, b = t.b }
      end
    end
  end
  local gaps = {}
  for i, fo in ipairs(folders) do
    gaps[i] = {}
    for _, p in ipairs(gap_pairs) do
      local g, err = lm_report.gap_curve(fo.groups, p.a, p.b)
      if not g and p.asked then
        cli.usage(("--gap-curve %s/%s: %s: %s"):format(p.a, p.b, fo.name, err))
      end
      gaps[i][#gaps[i] + 1] = { a = p.a, b = p.b, g = g, err = err }
    end
  end

  local all, metric = {}, nil
  for i, dir in ipairs(args.dir) do
    if i > 1 then io.write("\n") end
    local d
    d, metric = folder(dir, summaries[i], folders[i].groups, gaps[i])
    all[#all + 1] = { name = folders[i].name, d = d }
  end
  local table_all = #all > 1 and report.combine(all) or all[1].d
  if #all > 1 then
    io.write(("\nAll %d folders together (Holm over every row):\n\n"):format(#all))
    io.write(report.differences_markdown(table_all, metric))
  end
  if #wanted > 0 then
    io.write("\n", report.compact_markdown(folders, table_all, wanted, metric))
  end
  if ni_rows then
    io.write("\n", report.noninferiority_markdown(ni_rows, metric))
    for _, n in ipairs(ni_absent) do
      io.write(("\n%s: no row for %s (no runs of both methods there).\n"):format(n.spec,
        table.concat(n.folders, ", ")))
    end
  end
  if args.interaction then
    local rows = {}
    for _, spec in ipairs(args.interaction) do
      local a, b = spec:match("^(.+)/(.+)$")
      local r = a and report.interaction(folders[1].groups, folders[2].groups, b, a)
      if not r then
        cli.usage(("--interaction %s: two methods a/b with at least 2 pairs in each folder "
          .. "expected"):format(spec))
      end
      rows[#rows + 1] = r
    end
    io.write("\n", report.interaction_markdown(rows, { folders[1].name, folders[2].name }, metric))
  end
  for _, t in ipairs(trends) do
    io.write("\n", lm_report.trend_markdown(t, metric, extrapolate))
  end
end)

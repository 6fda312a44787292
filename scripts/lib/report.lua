-- The statistics tables of a comparison beyond the first-method tests (issue 16):
--
--   report.differences(groups, metric[, opts]) -> {rows = {...}, family = n, floor_pairs = {...}}
--     every pair of methods (b - a for a listed before b), the runs paired by seed: mean
--     difference, its 95% paired t interval and, from report.BOOTSTRAP_MIN_PAIRS pairs on, its
--     percentile bootstrap interval, Cohen's d_z, the paired t p and the sign-flip p (exact, or
--     sampled over stats.SIGN_FLIP_MAX_EXACT pairs: row.sign_exact), each
--     with its Holm-adjusted p over the family of rows (the t and sign-flip families adjusted
--     apart), and whether the sign-flip test can reach 0.05 at all with that many pairs
--     (stats.sign_flip_floor). The markdown of a table of one row has no Holm columns (one
--     comparison: no adjustment).
--   report.combine(list) -> d: several report.differences results as one table, list =
--     { {name =, d =}, ... }: every row labelled "<name>: b - a", and Holm recomputed over all
--     the rows (one family per test: the comparisons across folders, say learning rates)
--   report.differences_markdown(d, metric[, opts]) -> text; opts.what: what the rows are (the
--     sentence before the table starts with it; default "Every pair of methods"), opts.columns:
--     { {header =, key =}, ... } cells of each row's own keys after the difference
--   report.pair(a, b[, opts]) -> row: one row of a differences table, b - a over the seeds both
--     have (a, b: {seed = value}); the caller labels it (a =, b =, name = and its own keys)
--   report.table(rows[, opts]) -> d: rows of report.pair as one table, Holm over them (what
--     report.differences returns, for rows that are not every pair of groups)
--   report.methods_markdown(groups, metric) -> text: one row per method: runs, the write-up's
--     "drop worst, mean" (stats.summary: the worst run dropped, the rest averaged), mean,
--     median, min, max and sd of the runs' values (res.value; nil: diverged)
--   report.compact_markdown(folders, d, pairs, metric) -> text: a row per folder (folders =
--     { {name =, groups =}, ... }): each method's mean and, for each {a, b} of pairs, a - b with
--     its t interval, paired t p and Holm, taken from d (report.combine of the folders, or the
--     one folder's report.differences); a pair d holds as b - a is turned round
--   report.jumps(groups, threshold[, opts]) -> table | nil: the "jump" endpoint of a task that is
--     learned suddenly: a run jumps at the first curve point whose training loss is below
--     threshold, and is censored at its last curve point when it never does. Per method: runs,
--     jumps, rate, the Kaplan-Meier curve and median jump step, the metric's mean over the runs
--     that jumped; per pair: Fisher's exact test of the jump rates and the log-rank test of the
--     jump steps, with Holm over the pairs (each test its own family)
--   report.jumps_markdown(j, metric[, of]) -> text; of: the metric's header suffix (" (of 128)")
--   report.interaction(g1, g2, a, b) -> row | nil: whether the paired difference b - a changes
--     between two comparisons (two model sizes, say): each comparison's per-seed differences b - a
--     (the seeds both methods have), their means d1 and d2, and Welch's t-test of d2 - d1 over
--     the two lists (independent seeds), with its 95% interval (Welch's df); g1, g2: the groups
--     of the two comparisons; nil when a list has fewer than 2 differences
--   report.jump_sensitivity_markdown(groups, thresholds) -> text
--   report.reading(groups, metric, d[, opts]) -> text: a plain-language reading of one comparison,
--     generated from its numbers: for each row of d (report.differences) against the first method,
--     the paired difference with its 95% interval, whether the interval excludes 0 (and with how
--     few seeds that is possible at all), on how many seeds the second method was better; how many
--     runs learned the task (opts.jumps: report.jumps) or how far the runs spread, and what so few
--     seeds cannot show. opts.problems: the problems a count is out of (a spread from near 0 to
--     above half of them is read as runs that learned the task and runs that did not); opts.unit: the metric's unit after a count ("correct of 128");
--     opts.study_seeds: the seeds of the committed study shown after it (studies.lua)
--   report.plot_groups(groups, jumps) -> plot.loss_curves' groups: each group's results, and with
--     jumps (report.jumps) whether each run jumped (plot.loss_curves then draws a mean per part)
--
-- groups: compare.lua's groups: { {label =, runs = { {seed =, res = result}, ... }}, ... }.
-- Pure Lua (lib.stats); nothing here runs a model.
local stats = require "lib.stats"
local tables = require "lib.tables"
local mean = stats.mean

local report = {}

-- The fewest pairs whose percentile bootstrap interval a table shows. With fewer the resampling
-- has few distinct resamples (stats.bootstrap_resamples: 10 for 3 pairs) and the interval is
-- too narrow: for normal differences a 95% interval held the true mean in only 75-80% of tables
-- of 3 pairs and about 90% of tables of 10 (tests/lua/stats_spec.lua simulates it), where the t
-- interval holds it in 95%.
report.BOOTSTRAP_MIN_PAIRS = 10

-- report.by_seed(g) -> {seed = value} of a group's runs with a finite metric value
function report.by_seed(g)
  local t = {}
  for _, r in ipairs(g.runs) do
    if r.res.value ~= nil then t[r.seed] = r.res.value end
  end
  return t
end

-- the values of b and a at the seeds both have, seeds ascending
local function pairs_of(a, b)
  local seeds = {}
  for s in pairs(b) do if a[s] ~= nil then seeds[#seeds + 1] = s end end
  table.sort(seeds)
  local va, vb = {}, {}
  for i, s in ipairs(seeds) do va[i], vb[i] = a[s], b[s] end
  return va, vb
end

-- The table of rows: Holm over them (the t and sign-flip p apart) and the sign-flip floors.
local function adjusted(rows, alpha, samples)
  local pt, ps = { n = #rows }, { n = #rows }
  for k, r in ipairs(rows) do pt[k], ps[k] = r.p_t, r.p_sign end
  local ht, hs = stats.holm(pt), stats.holm(ps)
  local floor_pairs = {}
  for k, r in ipairs(rows) do
    r.p_t_holm, r.p_sign_holm = ht[k], hs[k]
    if r.sign_can_reach == false then floor_pairs[r.pairs] = r.sign_floor end
  end
  return { rows = rows, family = #rows, alpha = alpha, floor_pairs = floor_pairs,
    samples = samples }
end

function report.pair(a, b, opts)
  opts = opts or {}
  local va, vb = pairs_of(a, b)
  local row = { pairs = #va }
  if #va >= 2 then
    local p = stats.paired(vb, va)
    row.mean_diff = p.mean_diff
    row.p_t, row.p_sign, row.sign_exact = p.p_t, p.p_perm, p.exact
    row.t_lo, row.t_hi = stats.paired_ci(vb, va)
    if #va >= report.BOOTSTRAP_MIN_PAIRS then
      row.boot_lo, row.boot_hi = stats.bootstrap_ci(vb, va, { paired = true,
        samples = opts.samples or 10000, seed = opts.seed or 1 })
    end
    row.d_z = stats.effect_size(vb, va, true)
    row.sign_floor = stats.sign_flip_floor(#va)
    row.sign_can_reach = stats.can_reach(#va, opts.alpha or 0.05)
  end
  return row
end

function report.table(rows, opts)
  opts = opts or {}
  return adjusted(rows, opts.alpha or 0.05, opts.samples or 10000)
end

function report.differences(groups, metric, opts)
  opts = opts or {}
  local rows = {}
  for i = 1, #groups do
    for j = i + 1, #groups do
      local row = report.pair(report.by_seed(groups[i]), report.by_seed(groups[j]), opts)
      row.a, row.b = groups[i].label, groups[j].label
      rows[#rows + 1] = row
    end
  end
  return report.table(rows, opts)
end

function report.combine(list)
  local rows, alpha, samples = {}, 0.05, 10000
  for _, e in ipairs(list) do
    for _, r in ipairs(e.d.rows) do
      local c = {}
      for k, v in pairs(r) do c[k] = v end
      c.name = e.name
      rows[#rows + 1] = c
    end
    alpha, samples = e.d.alpha, e.d.samples
  end
  return adjusted(rows, alpha, samples)
end

local function p_fmt(p) return p and tables.num(p, "%.3g") or "-" end

-- a difference and an interval in the metric's format
local function diff_fmt(metric) return metric == "correct" and "%+.2f" or "%+.4f" end
local function ci_fmt(lo, hi, f)
  if not lo then return "-" end
  return "[" .. tables.num(lo, f) .. ", " .. tables.num(hi, f) .. "]"
end

function report.differences_markdown(d, metric, opts)
  if #d.rows == 0 then return "" end
  opts = opts or {}
  local columns = opts.columns or {}
  local f = diff_fmt(metric)
  local function ci(lo, hi) return ci_fmt(lo, hi, f) end
  local holm = d.family > 1 -- one comparison: the adjusted p is the raw one
  local min_boot, short_boot = report.BOOTSTRAP_MIN_PAIRS, {}
  local body = {}
  for _, r in ipairs(d.rows) do
    local cells = { (r.name and (r.name .. ": ") or "") .. r.b .. " - " .. r.a }
    for _, c in ipairs(columns) do cells[#cells + 1] = tostring(r[c.key]) end
    local boot = ci(r.boot_lo, r.boot_hi)
    if r.mean_diff and not r.boot_lo and r.pairs < min_boot then
      boot = ("under %d pairs"):format(min_boot)
      short_boot[r.pairs] = true
    end
    for _, v in ipairs { tostring(r.pairs), r.mean_diff and tables.num(r.mean_diff, f) or "-",
      ci(r.t_lo, r.t_hi), boot, r.d_z and tables.num(r.d_z, "%.2f") or "-", p_fmt(r.p_t) } do
      cells[#cells + 1] = v
    end
    if holm then cells[#cells + 1] = p_fmt(r.p_t_holm) end
    cells[#cells + 1] = r.p_sign and (p_fmt(r.p_sign) .. (r.sign_exact == false and " (sampled)"
      or "") .. (r.sign_can_reach == false and " †" or "")) or "-"
    if holm then cells[#cells + 1] = p_fmt(r.p_sign_holm) end
    body[#body + 1] = cells
  end
  local headers = { "difference" }
  for _, c in ipairs(columns) do headers[#headers + 1] = c.header end
  for _, h in ipairs(holm and { "pairs", "mean diff", "95% t CI", "95% bootstrap CI", "d_z",
    "paired t p", "Holm", "sign-flip p", "Holm" } or { "pairs", "mean diff", "95% t CI",
    "95% bootstrap CI", "d_z", "paired t p", "sign-flip p" }) do
    headers[#headers + 1] = h
  end
  local out = {
    (opts.what or "Every pair of methods") .. (", the runs paired by seed (b - a over the "
      .. "seeds both have): the mean difference with its 95%% paired t interval and, from %d "
      .. "pairs on, its percentile bootstrap interval (%d resamples of the pairs), the effect "
      .. "size d_z = mean / sd of the differences, and the paired t and sign-flip p-values%s. "
      .. "The sign-flip p counts every sign pattern of the differences up to %d pairs and a "
      .. "sample of them beyond (marked sampled). An interval that holds 0 is no evidence of a "
      .. "difference at this scale, not evidence that there is none.\n"):format(min_boot,
      d.samples, holm and (", raw and Holm-adjusted over the %d comparisons of this table (each "
      .. "test its own family)"):format(d.family) or " (one comparison: no adjustment)",
      stats.SIGN_FLIP_MAX_EXACT),
    tables.markdown(headers, body),
  }
  local ns = {}
  for n in pairs(short_boot) do ns[#ns + 1] = n end
  table.sort(ns)
  if #ns > 0 then
    local counts = {}
    for i, n in ipairs(ns) do
      counts[i] = ("%d for %d pairs"):format(stats.bootstrap_resamples(n), n)
    end
    out[#out + 1] = ("No bootstrap interval below %d pairs: n pairs have only C(2n - 1, n) "
      .. "distinct resamples (%s), and with so few the percentile interval is too narrow (for "
      .. "normal differences a 95%% interval held the true mean in only 75-80%% of tables of 3 "
      .. "pairs and about 90%% of tables of 10); the t interval is the one to read.\n")
      :format(min_boot, table.concat(counts, ", "))
  end
  ns = {}
  for n in pairs(d.floor_pairs) do ns[#ns + 1] = n end
  table.sort(ns)
  for _, n in ipairs(ns) do
    out[#out + 1] = tables.sign_flip_warning(n, d.alpha, "rows marked †")
  end
  return table.concat(out, "\n")
end

-- stats.summary of a group's run values (nil: diverged)
local function summary_of(g, metric)
  local values = { n = #g.runs }
  for i, r in ipairs(g.runs) do values[i] = r.res.value end
  return stats.summary(values, metric == "correct")
end

function report.methods_markdown(groups, metric)
  local f = metric == "correct" and "%.2f" or "%.4f"
  local function num(v) return v and tables.num(v, f) or "-" end
  local body = {}
  for _, g in ipairs(groups) do
    local s = summary_of(g, metric)
    body[#body + 1] = { g.label .. (s.diverged > 0 and (" (%d diverged)"):format(s.diverged) or ""),
      tostring(s.n), num(s.protocol), num(s.mean), num(s.median), num(s.min), num(s.max),
      s.std and tables.num(s.std, "%.3g") or "-" }
  end
  return tables.markdown({ "method", "runs", "drop worst, mean", "mean", "median", "min", "max",
    "std" }, body)
end

function report.compact_markdown(folders, d, pairs_, metric)
  local f = diff_fmt(metric)
  local mean_f = metric == "correct" and "%.1f" or "%.4f"
  local headers, methods = { "folder" }, {}
  for _, g in ipairs(folders[1].groups) do
    methods[#methods + 1] = g.label
    headers[#headers + 1] = g.label
  end
  local holm = d.family > 1 -- one comparison: the adjusted p is the raw one
  for _, w in ipairs(pairs_) do
    headers[#headers + 1] = ("%s - %s [95%% t CI]"):format(w[1], w[2])
    headers[#headers + 1] = holm and "p (Holm)" or "p"
  end
  local body = {}
  for _, e in ipairs(folders) do
    local row, by_label = { e.name }, {}
    for _, g in ipairs(e.groups) do by_label[g.label] = g end
    for _, label in ipairs(methods) do
      local s = by_label[label] and summary_of(by_label[label], metric)
      row[#row + 1] = s and s.mean and tables.num(s.mean, mean_f) or "-"
    end
    for _, w in ipairs(pairs_) do
      -- the row of the pair in d (b - a), turned round when it is a - b
      local r, sign
      for _, x in ipairs(d.rows) do
        if x.name == (#folders > 1 and e.name or nil) then
          if x.b == w[1] and x.a == w[2] then r, sign = x, 1 end
          if x.b == w[2] and x.a == w[1] then r, sign = x, -1 end
        end
      end
      if r and r.mean_diff then
        local lo, hi = sign * r.t_lo, sign * r.t_hi
        if sign < 0 then lo, hi = hi, lo end
        row[#row + 1] = tables.num(sign * r.mean_diff, f) .. " " .. ci_fmt(lo, hi, f)
        row[#row + 1] = holm and ("%s (%s)"):format(p_fmt(r.p_t), p_fmt(r.p_t_holm))
          or p_fmt(r.p_t)
      else
        row[#row + 1], row[#row + 1] = "-", "-"
      end
    end
    body[#body + 1] = row
  end
  return (holm and ("In short (method means; a - b paired by seed, p the paired t-test's with "
    .. "Holm over the %d rows of the table%s):\n\n"):format(d.family, #folders > 1
    and " of all folders" or "") or "In short (method means; a - b paired by seed, p the paired "
    .. "t-test's; one comparison: no adjustment):\n\n")
    .. tables.markdown(headers, body)
end

-- The first curve step with loss < threshold, or nil (then censored at the last step).
local function jump_step(res, threshold)
  local last
  for _, p in ipairs(res.curve or {}) do
    if p.loss and p.loss < threshold then return p.step, true end
    last = p.step
  end
  return last, false
end

function report.jumps(groups, threshold, opts)
  if threshold == nil then return nil end
  opts = opts or {}
  local methods = {}
  for gi, g in ipairs(groups) do
    local times, events, after, runs = {}, {}, {}, {}
    for _, r in ipairs(g.runs) do
      local t, ev = jump_step(r.res, threshold)
      if t then
        times[#times + 1], events[#events + 1] = t, ev
        runs[#runs + 1] = { seed = r.seed, step = t, jumped = ev, value = r.res.value }
        if ev and r.res.value ~= nil then after[#after + 1] = r.res.value end
      end
    end
    local km = #times > 0 and stats.kaplan_meier(times, events) or {}
    -- the KM median: the first event time where the survival falls to 0.5 or below
    local median
    for _, k in ipairs(km) do
      if k.surv <= 0.5 then median = k.time; break end
    end
    local jumped = 0
    for _, e in ipairs(events) do if e then jumped = jumped + 1 end end
    methods[gi] = { label = g.label, runs = #times, jumped = jumped,
      rate = #times > 0 and jumped / #times or nil, km = km, median_step = median,
      mean_after = #after > 0 and stats.summary(after).mean or nil, by_run = runs,
      times = times, events = events }
  end
  local tests = {}
  for i = 1, #methods do
    for j = i + 1, #methods do
      local a, b = methods[i], methods[j]
      local t = { a = a.label, b = b.label }
      if a.runs > 0 and b.runs > 0 then
        t.fisher_p = stats.fisher_exact(b.jumped, b.runs, a.jumped, a.runs)
        t.logrank_chi2, t.logrank_p = stats.logrank(b.times, b.events, a.times, a.events)
      end
      tests[#tests + 1] = t
    end
  end
  local pf, pl = { n = #tests }, { n = #tests }
  for k, t in ipairs(tests) do pf[k], pl[k] = t.fisher_p, t.logrank_p end
  local hf, hl = stats.holm(pf), stats.holm(pl)
  for k, t in ipairs(tests) do t.fisher_p_holm, t.logrank_p_holm = hf[k], hl[k] end
  -- the JSON keeps no internal lists
  for _, m in ipairs(methods) do m.times, m.events = nil, nil end
  return { threshold = threshold, methods = methods, tests = tests }
end

function report.jumps_markdown(j, metric, of)
  local rows = {}
  for _, m in ipairs(j.methods) do
    rows[#rows + 1] = { m.label, tostring(m.runs), tostring(m.jumped),
      m.rate and ("%.0f%%"):format(100 * m.rate) or "-",
      m.median_step and tables.num(m.median_step) or "not reached",
      m.mean_after and tables.num(m.mean_after, metric == "correct" and "%.2f" or "%.4f") or "-" }
  end
  local trows = {}
  local holm = #j.tests > 1 -- one pair: the adjusted p is the raw one
  for _, t in ipairs(j.tests) do
    local row = { t.b .. " vs " .. t.a, p_fmt(t.fisher_p) }
    if holm then row[#row + 1] = p_fmt(t.fisher_p_holm) end
    row[#row + 1] = t.logrank_chi2 and tables.num(t.logrank_chi2, "%.3g") or "-"
    row[#row + 1] = p_fmt(t.logrank_p)
    if holm then row[#row + 1] = p_fmt(t.logrank_p_holm) end
    trows[#trows + 1] = row
  end
  local out = {
    ("Jumps (training loss below %s): a run jumps at the first curve point below the threshold "
      .. "and is censored at its last point when it never gets there. Jump step: the "
      .. "Kaplan-Meier median. The metric after the jump: the mean over the runs that jumped.\n")
      :format(tables.num(j.threshold)),
    tables.markdown({ "method", "runs", "jumped", "rate", "median jump step",
      "metric when jumped" .. (of or "") }, rows),
  }
  if #trows > 0 then
    out[#out + 1] = "Jump rate: Fisher's exact test; jump step: the log-rank test (censored "
      .. "runs included); " .. (holm and "Holm over the pairs, each test its own family.\n"
      or "one pair: no adjustment.\n")
    out[#out + 1] = tables.markdown(holm and { "pair", "Fisher p", "Holm", "log-rank chi2",
      "log-rank p", "Holm" } or { "pair", "Fisher p", "log-rank chi2", "log-rank p" }, trows)
  end
  return table.concat(out, "\n")
end

-- the groups of labels a and b, or nil when either is missing (report.two_groups)
local function two_groups(groups, a, b)
  local ga, gb
  for _, g in ipairs(groups) do
    if g.label == a then ga = g end
    if g.label == b then gb = g end
  end
  if ga and gb then return ga, gb end
end

-- the per-seed differences b - a of one comparison's groups (labels a and b), or nil
local function seed_differences(groups, a, b)
  local ga, gb = two_groups(groups, a, b)
  if not ga then return nil end
  local va, out = report.by_seed(ga), {}
  for seed, v in pairs(report.by_seed(gb)) do
    if va[seed] ~= nil then out[#out + 1] = v - va[seed] end
  end
  return out
end

function report.interaction(g1, g2, a, b)
  local d1, d2 = seed_differences(g1, a, b), seed_differences(g2, a, b)
  if not d1 or not d2 or #d1 < 2 or #d2 < 2 then return nil end
  local t, df, p = stats.welch(d2, d1)
  local row = { a = a, b = b, n1 = #d1, n2 = #d2, diff1 = mean(d1), diff2 = mean(d2) }
  row.change = row.diff2 - row.diff1
  row.t, row.df, row.p = t, df, p
  if t and t ~= 0 then
    local se = row.change / t
    local q = stats.t_quantile(0.975, df)
    row.lo, row.hi = row.change - q * math.abs(se), row.change + q * math.abs(se)
  end
  return row
end

-- report.noninferiority(groups, a, b, margin) -> row or nil: candidate a against reference b of
-- one comparison (labels; lower is better), paired by seed over the seeds where both have a
-- value, by stats.noninferiority (a - b against the margin; a one-sided 5% test, the 90%
-- equivalence interval). row: {a, b, margin, n, mean_a, mean_b, left_out (runs of a or b
-- without a partner or a value), and stats.noninferiority's fields}; nil with fewer than 2 pairs.
function report.noninferiority(groups, a, b, margin)
  local ga, gb = two_groups(groups, a, b)
  if not ga then return nil end
  local va, vb = report.by_seed(ga), report.by_seed(gb)
  local seeds = {}
  for seed in pairs(va) do if vb[seed] ~= nil then seeds[#seeds + 1] = seed end end
  table.sort(seeds)
  local xa, xb = {}, {}
  for i, seed in ipairs(seeds) do xa[i], xb[i] = va[seed], vb[seed] end
  local r = stats.noninferiority(xa, xb, margin)
  if not r then return nil end
  r.a, r.b, r.margin, r.mean_a, r.mean_b = a, b, margin, mean(xa), mean(xb)
  r.left_out = #ga.runs + #gb.runs - 2 * #seeds
  return r
end

-- report.noninferiority_markdown(rows, metric) -> text: one line per row of report.noninferiority
-- (rows[i].name: the comparison's name)
function report.noninferiority_markdown(rows, metric)
  local f = diff_fmt(metric)
  local body = {}
  for _, r in ipairs(rows) do
    body[#body + 1] = { r.name or "", r.a .. " - " .. r.b, tostring(r.n),
      tables.num(r.mean_a, "%.4f"), tables.num(r.mean_b, "%.4f"), tables.num(r.mean_diff, f),
      tables.num(r.upper, f), tables.num(r.margin, "%.4g"), p_fmt(r.p), ci_fmt(r.lo, r.hi, f),
      r.noninferior and "yes" or "no", r.equivalent and "yes" or "no",
      tostring(r.left_out) }
  end
  return "Non-inferiority, paired by seed (lower is better): the mean difference candidate - "
    .. "reference, its one-sided 95% upper bound against the margin, the p of the one-sided "
    .. "paired t-test of H0 'the difference is at least the margin', and the 90% interval (the "
    .. "two one-sided tests' equivalence interval: equivalent when it lies inside +-margin); "
    .. "runs without a partner or a value are left out:\n\n"
    .. tables.markdown({ "comparison", "difference", "pairs", "candidate", "reference", "mean",
      "95% upper", "margin", "p", "90% CI", "non-inferior", "equivalent", "left out" }, body)
end

-- report.interaction_markdown(rows, names, metric) -> text: the rows of report.interaction, the
-- two comparisons named names[1] and names[2]
function report.interaction_markdown(rows, names, metric)
  local f = diff_fmt(metric)
  local body = {}
  for _, r in ipairs(rows) do
    body[#body + 1] = { r.b .. " - " .. r.a, ("%s (%d)"):format(tables.num(r.diff1, f), r.n1),
      ("%s (%d)"):format(tables.num(r.diff2, f), r.n2), tables.num(r.change, f),
      r.lo and ci_fmt(r.lo, r.hi, f) or "-", r.df and tables.num(r.df, "%.1f") or "-", p_fmt(r.p) }
  end
  return ("Does the difference change between %s and %s? Each comparison's mean paired "
    .. "difference (over its seeds; pairs in brackets), the change (second - first) with "
    .. "its 95%% interval and Welch's two-sided t-test over the two lists of per-seed "
    .. "differences (the seeds of the two comparisons are independent runs):\n\n"):format(
      names[1], names[2])
    .. tables.markdown({ "difference", names[1], names[2], "change", "95% CI", "Welch df",
      "p" }, body)
end

-- report.jump_sensitivity_markdown(groups, thresholds) -> the jump analysis at each threshold,
-- one row per threshold: each method's jumped/runs and, for every pair, Fisher's p (jump rate)
-- and the log-rank p (jump step), raw (how much the jump endpoint's reading depends on where the
-- threshold is put).
function report.jump_sensitivity_markdown(groups, thresholds)
  local headers, rows = { "threshold" }, {}
  for ti, th in ipairs(thresholds) do
    local j = report.jumps(groups, th)
    local row = { tables.num(th) }
    for _, m in ipairs(j.methods) do
      if ti == 1 then headers[#headers + 1] = m.label .. " jumped" end
      row[#row + 1] = ("%d/%d"):format(m.jumped, m.runs)
    end
    for _, t in ipairs(j.tests) do
      if ti == 1 then
        headers[#headers + 1] = t.b .. " vs " .. t.a .. " Fisher p"
        headers[#headers + 1] = "log-rank p"
      end
      row[#row + 1] = p_fmt(t.fisher_p)
      row[#row + 1] = p_fmt(t.logrank_p)
    end
    rows[#rows + 1] = row
  end
  return "Jumps at each threshold (training loss below it; raw p, no adjustment):\n\n"
    .. tables.markdown(headers, rows)
end

-- report.km_series(j) -> plot.km's series: each method's Kaplan-Meier steps of "not yet jumped".
function report.km_series(j, last_step)
  local series = {}
  for _, m in ipairs(j.methods) do
    local pts = { { 0, 1 } }
    for _, k in ipairs(m.km) do pts[#pts + 1] = { k.time, k.surv } end
    pts[#pts + 1] = { last_step, pts[#pts][2] }
    series[#series + 1] = { label = m.label, points = pts }
  end
  return series
end

-- ---------------------------------------------------------------- the plain-language reading

local function plural(n, one, many) return n == 1 and one or (many or one .. "s") end

function report.reading(groups, metric, d, opts)
  opts = opts or {}
  local higher = metric == "correct"
  local f = metric == "correct" and "%+.1f" or "%+.4f"
  local vf = metric == "correct" and "%.0f" or "%.4f"
  local unit = opts.unit or (metric == "correct" and "correct" or "evaluation loss")
  local out = {}
  local by_label = {}
  for _, g in ipairs(groups) do by_label[g.label] = g end
  local first = groups[1] and groups[1].label
  local fewest
  for _, r in ipairs(d.rows) do
    if r.a == first then
      local s = {}
      if not r.mean_diff then
        s[#s + 1] = ("%s against %s: %d paired %s, too few for an interval."):format(r.b, r.a,
          r.pairs, plural(r.pairs, "seed"))
      else
        fewest = math.min(fewest or r.pairs, r.pairs)
        local better_b = (r.mean_diff > 0) == higher
        s[#s + 1] = ("**%s - %s: %s %s** (%s), paired by seed over %d %s, 95%% interval "
          .. "[%s, %s]."):format(r.b, r.a, tables.num(r.mean_diff, f), unit,
          higher and "higher is better" or "lower is better", r.pairs, plural(r.pairs, "seed"),
          tables.num(r.t_lo, f), tables.num(r.t_hi, f))
        -- on how many seeds b was better
        local va, vb = pairs_of(report.by_seed(by_label[r.a]), report.by_seed(by_label[r.b]))
        local wins, ties = 0, 0
        for i = 1, #va do
          if (higher and vb[i] > va[i]) or (not higher and vb[i] < va[i]) then wins = wins + 1 end
          if vb[i] == va[i] then ties = ties + 1 end
        end
        s[#s + 1] = ("%s did better on %d of the %d seeds%s."):format(r.b, wins, #va,
          ties > 0 and (" (%d tied)"):format(ties) or "")
        if r.t_lo > 0 or r.t_hi < 0 then
          s[#s + 1] = ("The interval excludes 0: these runs are evidence that %s does %s than "
            .. "%s on this task at this scale (paired t p %s), a difference between %s and %s."):format(
            r.b, better_b and "better" or "worse", r.a, tables.num(r.p_t, "%.2g"),
            tables.num(math.min(math.abs(r.t_lo), math.abs(r.t_hi)), vf),
            tables.num(math.max(math.abs(r.t_lo), math.abs(r.t_hi)), vf))
        else
          s[#s + 1] = ("The interval holds 0, so these %d %s cannot tell %s and %s apart: any "
            .. "difference from %s to %s fits them%s. That is no evidence of a difference, and no "
            .. "evidence that there is none."):format(r.pairs, plural(r.pairs, "seed"), r.b, r.a,
            tables.num(r.t_lo, f), tables.num(r.t_hi, f),
            (opts.problems and r.t_hi - r.t_lo > opts.problems) and (" (an interval wider than "
            .. "the whole scale of 0 to %d)"):format(opts.problems) or "")
        end
      end
      out[#out + 1] = table.concat(s, " ")
    end
  end
  -- how many runs learned the task, or how far the runs spread
  if opts.jumps then
    local parts, mixed = {}, false
    for _, m in ipairs(opts.jumps.methods) do
      parts[#parts + 1] = ("%s %d of %d"):format(m.label, m.jumped, m.runs)
      if m.jumped > 0 and m.jumped < m.runs then mixed = true end
    end
    local s = ("Runs that learned the task (training loss fell below %s): %s."):format(
      tables.num(opts.jumps.threshold), table.concat(parts, ", "))
    if mixed then
      s = s .. " Some runs learned it and others did not, so the results are two groups rather "
        .. "than a spread around one value: a mean mostly counts how many runs learned it, and "
        .. "a few seeds cannot tell whether one method learns it more often."
    end
    out[#out + 1] = s
  elseif metric == "correct" and opts.problems then
    -- without --jump-loss: a method whose runs score both near 0 (at most a tenth of the
    -- problems) and above half of them
    local parts, split = {}, false
    for _, g in ipairs(groups) do
      local lo, hi
      for _, r in ipairs(g.runs) do
        local v = r.res.value
        if v then lo, hi = math.min(lo or v, v), math.max(hi or v, v) end
      end
      if lo then
        parts[#parts + 1] = ("%s %s to %s"):format(g.label, tables.num(lo, vf), tables.num(hi, vf))
        if lo <= opts.problems / 10 and hi >= opts.problems / 2 then split = true end
      end
    end
    if split then
      out[#out + 1] = ("The runs range over %s %s: some runs near 0 and some above half, which "
        .. "is what runs that learned the task beside runs that did not look like, so a mean "
        .. "mostly counts how many learned it (--jump-loss counts them)."):format(
        table.concat(parts, ", "), unit)
    end
  end
  -- what so few seeds cannot show
  if fewest and fewest < 10 then
    local s = ("What %d %s cannot show: the interval rests on %d degrees of freedom, so only a "
      .. "large difference that every seed agrees on excludes 0"):format(fewest,
      plural(fewest, "seed"), fewest - 1)
    if not stats.can_reach(fewest, 0.05) then
      s = s .. (", and the exact sign-flip test cannot go below p %s whatever the data")
        :format(tables.num(stats.sign_flip_floor(fewest), "%.3g"))
    end
    out[#out + 1] = s .. ". A small difference, or how often each method learns the task, needs "
      .. (opts.study_seeds and ("many more seeds: the committed study below has %d.")
        :format(opts.study_seeds) or "many more seeds.")
  end
  if #out == 0 then return "" end
  return "## What this run shows\n\n" .. table.concat(out, "\n\n") .. "\n"
end

function report.plot_groups(groups, jumps)
  local out = {}
  for gi, g in ipairs(groups) do
    local pg = { label = g.label, results = {} }
    local by_seed = {}
    if jumps and jumps.methods[gi] then
      for _, r in ipairs(jumps.methods[gi].by_run) do by_seed[r.seed] = r.jumped end
      pg.jumped = {}
    end
    for i, r in ipairs(g.runs) do
      pg.results[i] = r.res
      if pg.jumped then pg.jumped[i] = by_seed[r.seed] == true end
    end
    out[gi] = pg
  end
  return out
end

report.two_groups = two_groups

return report

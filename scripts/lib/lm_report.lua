-- The language-modelling tables and curves of a comparison of the lm task (compare.lua with
-- --task lm; docs/language_model.md), from its run files: what pairs_report.lua --lm prints
-- beside its tables, and what compare.lua's summary and report page show.
--
--   lm_report.valid_curve(csv_path) -> { {step =, tokens =, loss =}, ... } | nil[, message]: the
--     validation curve of a run, the rows of its loss-curve CSV (tables.curve_csv) with a
--     number in the column valid_loss (the experiment key valid_every writes it; empty on the
--     other rows); nil without the column or any value in it, nil and a message when the file
--     cannot be read
--   lm_report.curve_groups(groups, which) -> plot.loss_curves' groups: which "train" (each run's
--     curve: the training loss) or "valid" (each run's valid_curve, set by the caller from
--     valid_curve); nil when no run has a point of that curve
--   lm_report.plot(groups, prefix, which, opts) -> files | nil, message: plot.loss_curves of
--     curve_groups (each run thin, the mean over the runs thick and dashed), against tokens;
--     opts.title
--   lm_report.splits_markdown(groups) -> text | nil: each method's mean over its runs of the
--     validation and test loss, perplexity and bits per byte (res.lm, rp.eval.lm); nil when no
--     run has res.lm
--   lm_report.lengths_markdown(groups) -> text | nil: the mean loss per method x context
--     extension (rows) x evaluation length (columns), the training length first (res.by_length;
--     at the training length, where by_length has no entry, the validation loss of res.lm: the
--     same model, every extension at factor 1 changes nothing); nil without by_length
--   lm_report.POSITION_BINS: the default number of bins of the by-position table (8)
--   lm_report.positions_markdown(groups, bins) -> text | nil: the mean loss per method over
--     `bins` equal bins of the window's positions (res.lm.by_position, the validation split;
--     each bin's positions averaged, then the runs); nil without by_position
--   lm_report.pair_params(groups, a, b) -> n | nil, message: the parameter count of methods a and
--     b of one comparison (res.params of each run of the two; the message when a run has none or
--     two runs disagree)
--   lm_report.trend(folders, a, b) -> t | nil, message: the paired difference d = a - b (res.value
--     at each seed both have) against the size, x = log10 of each folder's parameter count
--     (pair_params), folders = { {name =, groups =}, ... }: every folder's per-seed differences,
--     their mean and 95% t interval (stats.paired_ci), and stats.ols of d on x over all the
--     per-seed differences together (each seed one point), with stats.ols_at at each folder's
--     size. t = {a, b, n, sizes (how many distinct), rows = { {name, params, x, d = {...}, n,
--     mean, lo, hi, at}, ... }, fit}.
--     nil and a message when a folder lacks the pair or its size, or with fewer than two sizes
--     or three differences in all
--   lm_report.trend_markdown(t, metric[, extrapolate]) -> text: the table of the folders and the
--     slope; with extrapolate (a parameter count) the fitted d there, its 95% confidence interval
--     and 95% prediction interval, labelled an extrapolation when outside the sizes measured
--   lm_report.gap_curve(groups, a, b) -> g | nil, message: the paired difference a - b of the
--     validation loss at each point of the runs' validation curves (valid_curve, matched by step
--     at each seed both have), its mean over the seeds and 95% t band (2 seeds or more there):
--     g = {a, b, points = { {step, tokens, n, mean, lo, hi}, ... }, seeds = { {seed, points =
--     { {step, tokens, d}, ... }}, ... }}
--   lm_report.gap_markdown(g[, params]) -> text: its table (with params, tokens per parameter)
--   lm_report.plot_gap(g, prefix, opts) -> files | nil, message: plot.band of g against tokens
--     (each seed thin, the mean thick, the 95% band shaded, a line at 0); opts.title
--
-- groups: compare.lua's { {label =, runs = { {seed =, res = <result>[, valid_curve =]}, ...}},
-- ... }. Pure Lua but for the plots (gnuplot through lib.plot).
local tables = require "lib.tables"
local stats = require "lib.stats"
local plot = require "lib.plot"
local lengths = require "lib.lengths"
local fileio = require "lib.fileio"
local report = require "lib.report"

local lm_report = { POSITION_BINS = 8 }

local mean = stats.mean -- (nil for an empty list)

local function num(v, f) return v and tables.num(v, f or "%.4f") or "-" end

function lm_report.valid_curve(csv_path)
  local text, err = fileio.read(csv_path)
  if not text then return nil, err end
  local lines = {}
  for l in text:gmatch("[^\r\n]+") do lines[#lines + 1] = l end
  local cols = {}
  local i = 0
  for name in ((lines[1] or "") .. ","):gmatch("([^,]*),") do
    i = i + 1
    cols[name] = i
  end
  if not (cols.valid_loss and cols.step and cols.tokens) then return nil end
  local out = {}
  for k = 2, #lines do
    local cells, j = {}, 0
    for cell in (lines[k] .. ","):gmatch("([^,]*),") do
      j = j + 1
      cells[j] = cell
    end
    local v = tonumber(cells[cols.valid_loss])
    if v then
      out[#out + 1] = { step = tonumber(cells[cols.step]), tokens = tonumber(cells[cols.tokens]),
        loss = v }
    end
  end
  return #out > 0 and out or nil
end

function lm_report.curve_groups(groups, which)
  local out, any = {}, false
  for gi, g in ipairs(groups) do
    local pg = { label = g.label, results = {} }
    for _, r in ipairs(g.runs) do
      local curve
      if which == "valid" then curve = r.valid_curve else curve = r.res.curve end
      if curve and #curve > 0 then
        any = true
        pg.results[#pg.results + 1] = { curve = curve, config = r.res.config }
      end
    end
    out[gi] = pg
  end
  return any and out or nil
end

function lm_report.plot(groups, prefix, which, opts)
  local pg = lm_report.curve_groups(groups, which)
  if not pg then return nil, ("no %s curves to plot"):format(which == "valid" and "validation"
    or "training") end
  return plot.loss_curves(pg, prefix, { title = opts and opts.title, x = "tokens",
    ylabel = which == "valid" and "validation loss (nats per token)"
      or "training loss (nats per token)" })
end

function lm_report.splits_markdown(groups)
  local rows, any = {}, false
  for _, g in ipairs(groups) do
    local cols = {}
    for _, split in ipairs { "valid", "test" } do
      for _, key in ipairs { "loss", "perplexity", "bits_per_byte" } do
        local list = {}
        for _, r in ipairs(g.runs) do
          local lm = r.res.lm
          if lm and lm[split] and type(lm[split][key]) == "number" then
            list[#list + 1] = lm[split][key]
            any = true
          end
        end
        cols[#cols + 1] = num(mean(list), key == "perplexity" and "%.2f" or "%.4f")
      end
    end
    rows[#rows + 1] = { g.label, table.unpack(cols) }
  end
  if not any then return nil end
  return "Language modelling, the mean over each method's runs (rp.eval.lm: every token "
    .. "of a split scored once; bits per byte = nats / ln 2 / the split's UTF-8 bytes):\n\n"
    .. tables.markdown({ "method", "valid loss", "valid perplexity", "valid bits/byte",
      "test loss", "test perplexity", "test bits/byte" }, rows)
end

function lm_report.lengths_markdown(groups)
  local s = lengths.summarise(groups, "loss")
  if not s then return nil end
  -- the training length: the runs' seq_len (the first run's; a comparison has one)
  local T
  for _, g in ipairs(groups) do
    for _, r in ipairs(g.runs) do T = T or (r.res.config and r.res.config.seq_len) end
  end
  local at, Ls, seenL, keys, seenK = {}, {}, {}, {}, {}
  for _, row in ipairs(s.rows) do
    local k = row.method .. "\0" .. row.scaling
    if not seenK[k] then
      seenK[k] = true
      keys[#keys + 1] = { method = row.method, scaling = row.scaling, key = k }
    end
    if not seenL[row.length] and row.length ~= T then
      seenL[row.length] = true
      Ls[#Ls + 1] = row.length
    end
    at[k .. "\0" .. row.length] = row
  end
  table.sort(Ls)
  -- at the training length without a by_length entry: each method's mean validation loss
  local valid, from_valid = {}, false
  for _, g in ipairs(groups) do
    local list = {}
    for _, r in ipairs(g.runs) do
      local v = r.res.lm and r.res.lm.valid and r.res.lm.valid.loss
      if type(v) == "number" then list[#list + 1] = v end
    end
    valid[g.label] = mean(list)
  end
  local headers = { "method", "scaling", ("%s (training)"):format(tables.num(T)) }
  for _, L in ipairs(Ls) do headers[#headers + 1] = tables.num(L) end
  local body = {}
  for _, k in ipairs(keys) do
    local row = at[k.key .. "\0" .. tostring(T)]
    local first = row and row.mean
    if not row then
      first = valid[k.method]
      from_valid = from_valid or first ~= nil
    end
    local cells = { k.method, k.scaling, num(first) }
    for _, L in ipairs(Ls) do
      local e = at[k.key .. "\0" .. L]
      cells[#cells + 1] = e and num(e.mean) or "-"
    end
    body[#body + 1] = cells
  end
  return ("Loss by evaluation length (nats per token, the mean over each method's runs; "
    .. "rp.eval.lengths: random windows of the validation split at each length, with each "
    .. "context extension%s):\n\n"):format(from_valid and ("; at the training length %s the "
    .. "validation loss over the whole split, the same for every extension (each is at factor 1 "
    .. "there)"):format(tables.num(T)) or "")
    .. tables.markdown(headers, body)
end

function lm_report.positions_markdown(groups, bins)
  local T
  for _, g in ipairs(groups) do
    for _, r in ipairs(g.runs) do
      local bp = r.res.lm and r.res.lm.by_position
      if type(bp) == "table" and #bp > 0 then T = math.max(T or 0, #bp) end
    end
  end
  if not T then return nil end
  bins = math.max(1, math.min(bins, T))
  local edges = {}
  for k = 0, bins do edges[k] = (k * T) // bins end
  local headers = { "method", "runs" }
  for k = 1, bins do
    headers[#headers + 1] = edges[k - 1] + 1 == edges[k] and tables.num(edges[k])
      or ("%d-%d"):format(edges[k - 1] + 1, edges[k])
  end
  local body = {}
  for _, g in ipairs(groups) do
    local per_bin, runs = {}, 0
    for k = 1, bins do per_bin[k] = {} end
    for _, r in ipairs(g.runs) do
      local bp = r.res.lm and r.res.lm.by_position
      if type(bp) == "table" and #bp > 0 then
        runs = runs + 1
        for k = 1, bins do
          local vals = {}
          for j = edges[k - 1] + 1, edges[k] do
            if type(bp[j]) == "number" then vals[#vals + 1] = bp[j] end
          end
          local m = mean(vals)
          if m then per_bin[k][#per_bin[k] + 1] = m end
        end
      end
    end
    local cells = { g.label, tostring(runs) }
    for k = 1, bins do cells[#cells + 1] = num(mean(per_bin[k])) end
    body[#body + 1] = cells
  end
  return ("Loss by position in the window (nats per token, the validation split; position 1 "
    .. "predicts from one token of context, position %d from %d): each bin's positions "
    .. "averaged, then the runs:\n\n"):format(T, T)
    .. tables.markdown(headers, body)
end

-- the groups of labels a and b of one comparison (two labels), or nil
local function pair_groups(groups, a, b)
  if a ~= b then return report.two_groups(groups, a, b) end
end

-- a parameter count for text: 8,843,072 (integers), or 2e+08 as given
local function count(n)
  if n == math.floor(n) and math.abs(n) < 1e15 then
    local s = ("%d"):format(n)
    local out = s:reverse():gsub("(%d%d%d)", "%1,"):reverse()
    return (out:gsub("^,", ""))
  end
  return ("%g"):format(n)
end

function lm_report.pair_params(groups, a, b)
  local ga, gb = pair_groups(groups, a, b)
  if not ga then return nil, ("two methods a/b expected (the methods: %s)"):format(labels(groups)) end
  local n, first
  for _, g in ipairs { ga, gb } do
    for _, r in ipairs(g.runs) do
      local p = r.res.params
      local name = ("%s-s%d"):format(g.label, r.seed)
      if type(p) ~= "number" or p <= 0 then
        return nil, ("run %s has no params"):format(name)
      end
      if n and p ~= n then
        return nil, ("runs %s and %s disagree on params (%s and %s)"):format(first, name,
          count(n), count(p))
      end
      n, first = n or p, first or name
    end
  end
  if not n then return nil, "no runs of " .. a .. " and " .. b end
  return n
end

-- the methods of one comparison, for a message: "rope, roper and none"
local function labels(groups)
  local l = {}
  for i, g in ipairs(groups) do l[i] = g.label end
  if #l <= 1 then return l[1] or "no methods" end
  return table.concat(l, ", ", 1, #l - 1) .. " and " .. l[#l]
end

-- the per-seed differences a - b of one comparison's groups (res.value; the seeds both have,
-- ascending): the list of d and the list of seeds
local function seed_diffs(ga, gb)
  local va, vb = report.by_seed(ga), report.by_seed(gb)
  local seeds = {}
  for seed in pairs(va) do if vb[seed] ~= nil then seeds[#seeds + 1] = seed end end
  table.sort(seeds)
  local d = {}
  for i, seed in ipairs(seeds) do d[i] = va[seed] - vb[seed] end
  return d, seeds
end

-- n zeros (the second list of stats.paired_ci: the t interval of one list's mean)
local function zeros(n)
  local z = {}
  for i = 1, n do z[i] = 0 end
  return z
end

function lm_report.trend(folders, a, b)
  local rows, xs, ys, sizes = {}, {}, {}, {}
  for _, fo in ipairs(folders) do
    local ga, gb = pair_groups(fo.groups, a, b)
    if not ga then return nil, ("two methods a/b of every folder expected (%s has %s)")
      :format(fo.name, labels(fo.groups)) end
    local params, err = lm_report.pair_params(fo.groups, a, b)
    if not params then return nil, fo.name .. ": " .. err end
    local d = seed_diffs(ga, gb)
    if #d == 0 then return nil, fo.name .. " has no seed with both " .. a .. " and " .. b end
    local row = { name = fo.name, params = params, x = math.log(params, 10), d = d, n = #d,
      mean = mean(d) }
    if #d >= 2 then row.lo, row.hi = stats.paired_ci(d, zeros(#d)) end
    for _, v in ipairs(d) do xs[#xs + 1], ys[#ys + 1] = row.x, v end
    sizes[params] = true
    rows[#rows + 1] = row
  end
  local distinct = 0
  for _ in pairs(sizes) do distinct = distinct + 1 end
  if distinct < 2 then
    return nil, ("%d folder%s of one size (%s parameters): a trend needs two sizes or more")
      :format(#rows, #rows == 1 and "" or "s", rows[1] and count(rows[1].params) or "?")
  end
  local fit = stats.ols(xs, ys)
  if not fit then return nil, ("%d per-seed differences: a line with an interval needs 3 or "
    .. "more"):format(#ys) end
  for _, row in ipairs(rows) do row.at = stats.ols_at(fit, row.x) end
  return { a = a, b = b, n = #ys, sizes = distinct, rows = rows, fit = fit }
end

local function ci(lo, hi, f)
  if not lo then return "-" end
  return "[" .. tables.num(lo, f) .. ", " .. tables.num(hi, f) .. "]"
end

local function dfmt(metric) return metric == "correct" and "%+.2f" or "%+.4f" end

function lm_report.trend_markdown(t, metric, extrapolate)
  local f = dfmt(metric)
  local fit = t.fit
  local body = {}
  for _, r in ipairs(t.rows) do
    body[#body + 1] = { r.name, count(r.params), ("%.3f"):format(r.x), tostring(r.n),
      tables.num(r.mean, f), ci(r.lo, r.hi, f), tables.num(r.at.fit, f),
      ci(r.at.lo, r.at.hi, f) }
  end
  local q = stats.t_quantile(0.975, fit.df)
  local out = {
    ("The difference %s - %s against size: each folder's per-seed differences (paired by seed) "
      .. "with their mean and 95%% t interval, and the line d = alpha + beta log10(params) fitted "
      .. "by ordinary least squares over all %d per-seed differences together (each seed one "
      .. "point, so a folder with more pairs weighs more; the errors taken as independent, "
      .. "normal and of one variance at every size), its fitted value at each size with the "
      .. "95%% confidence interval of the mean (t with %d degrees of freedom, n - 2):\n\n")
      :format(t.a, t.b, t.n, fit.df),
    tables.markdown({ "folder", "params", "log10 params", "pairs", "mean " .. t.a .. " - " .. t.b,
      "95% CI", "fitted", "95% CI of the fit" }, body),
    ("\nSlope beta (the change in %s - %s per tenfold parameters): %s, standard error %s, "
      .. "95%% CI %s (t = %s, %d df, two-sided p %s); intercept alpha (at 1 parameter) %s, "
      .. "standard error %s; residual sd %s.\n"):format(t.a, t.b, tables.num(fit.beta, f),
      tables.num(fit.se_beta, "%.4f"), ci(fit.beta - q * fit.se_beta, fit.beta + q * fit.se_beta,
      f), fit.t and ("%.2f"):format(fit.t) or "-", fit.df, fit.p and tables.num(fit.p, "%.3g")
      or "-", tables.num(fit.alpha, f), tables.num(fit.se_alpha, "%.4f"),
      tables.num(fit.s, "%.4f")),
  }
  if t.sizes == 2 then
    out[#out + 1] = "\nWith two sizes the line goes through both folders' means: it cannot show "
      .. "whether the difference changes linearly in log10(params).\n"
  end
  if extrapolate then
    local lo, hi = math.huge, -math.huge
    for _, r in ipairs(t.rows) do lo, hi = math.min(lo, r.params), math.max(hi, r.params) end
    local at = stats.ols_at(fit, math.log(extrapolate, 10))
    local where
    if extrapolate > hi then
      where = ("an extrapolation outside the sizes measured, %sx the largest (%s parameters)")
        :format(("%.3g"):format(extrapolate / hi), count(hi))
    elseif extrapolate < lo then
      where = ("an extrapolation outside the sizes measured, 1/%s of the smallest (%s "
        .. "parameters)"):format(("%.3g"):format(lo / extrapolate), count(lo))
    else
      where = ("inside the sizes measured (%s to %s parameters): an interpolation"):format(
        count(lo), count(hi))
    end
    out[#out + 1] = ("\nAt %s parameters, %s: fitted %s - %s %s, 95%% confidence interval of "
      .. "the mean %s, 95%% prediction interval of one seed's difference %s. %s\n"):format(
      count(extrapolate), where, t.a, t.b, tables.num(at.fit, f), ci(at.lo, at.hi, f),
      ci(at.pred_lo, at.pred_hi, f), (extrapolate > hi or extrapolate < lo)
      and "The intervals hold only if the line in log10(params) goes on beyond the sizes "
      .. "measured, which these runs cannot test." or "")
  end
  return table.concat(out)
end

function lm_report.gap_curve(groups, a, b)
  local ga, gb = pair_groups(groups, a, b)
  if not ga then return nil, ("two methods a/b expected (the methods: %s)"):format(labels(groups)) end
  local curves = {}
  for _, r in ipairs(gb.runs) do curves[r.seed] = r.valid_curve end
  local seeds, by_step, steps = {}, {}, {}
  for _, r in ipairs(ga.runs) do
    local cb = curves[r.seed]
    if r.valid_curve and cb then
      local at = {}
      for _, p in ipairs(cb) do at[p.step] = p end
      local s = { seed = r.seed, points = {} }
      for _, p in ipairs(r.valid_curve) do
        local q = at[p.step]
        if q then
          local d = p.loss - q.loss
          s.points[#s.points + 1] = { step = p.step, tokens = p.tokens, d = d }
          local e = by_step[p.step]
          if not e then
            e = { step = p.step, tokens = p.tokens, d = {} }
            by_step[p.step], steps[#steps + 1] = e, p.step
          end
          e.d[#e.d + 1] = d
        end
      end
      if #s.points > 0 then seeds[#seeds + 1] = s end
    end
  end
  if #seeds == 0 then
    return nil, ("no seed has validation curves of both %s and %s"):format(a, b)
  end
  table.sort(seeds, function(x, y) return x.seed < y.seed end)
  table.sort(steps)
  local points = {}
  for i, step in ipairs(steps) do
    local e = by_step[step]
    local pt = { step = step, tokens = e.tokens, n = #e.d, mean = mean(e.d) }
    if #e.d >= 2 then pt.lo, pt.hi = stats.paired_ci(e.d, zeros(#e.d)) end
    points[i] = pt
  end
  return { a = a, b = b, points = points, seeds = seeds }
end

function lm_report.gap_markdown(g, params)
  local body = {}
  for _, p in ipairs(g.points) do
    local row = { tables.num(p.step), ("%.4g"):format(p.tokens / 1e6) }
    if params then row[#row + 1] = ("%.3g"):format(p.tokens / params) end
    row[#row + 1] = tostring(p.n)
    row[#row + 1] = tables.num(p.mean, "%+.4f")
    row[#row + 1] = ci(p.lo, p.hi, "%+.4f")
    body[#body + 1] = row
  end
  local headers = { "step", "tokens (M)" }
  if params then headers[#headers + 1] = "tokens/param" end
  for _, h in ipairs { "pairs", "mean " .. g.a .. " - " .. g.b, "95% band" } do
    headers[#headers + 1] = h
  end
  return ("The validation loss of %s - %s against training tokens (tokens = steps x tokens a "
    .. "step), paired by seed at each point of the validation curves (the runs' CSV column "
    .. "valid_loss): the mean over the seeds and its 95%% t band (pointwise, not adjusted "
    .. "over the points):\n\n"):format(g.a, g.b)
    .. tables.markdown(headers, body)
end

function lm_report.plot_gap(g, prefix, opts)
  local runs = {}
  for _, s in ipairs(g.seeds) do
    local pts = {}
    for _, p in ipairs(s.points) do pts[#pts + 1] = { p.tokens / 1e6, p.d } end
    runs[#runs + 1] = { label = ("seed %d"):format(s.seed), points = pts }
  end
  local band = {}
  for _, p in ipairs(g.points) do
    band[#band + 1] = { p.tokens / 1e6, p.mean, p.lo or p.mean, p.hi or p.mean }
  end
  return plot.band({ label = "mean over the seeds", points = band,
    band = "95% t band of the mean (pointwise)", runs = runs },
    prefix, { title = opts and opts.title, xlabel = "tokens (millions)",
      ylabel = ("validation loss %s - %s (nats per token)"):format(g.a, g.b), zero = true })
end

return lm_report

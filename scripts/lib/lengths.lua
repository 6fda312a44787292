-- The length-generalisation part of a comparison's summary (compare.lua): the by_length entries
-- of the runs (rp.experiment.run with eval_lengths) summed up per method x context extension x
-- length, the tests of the comparison between the methods at each (extension, length), and the
-- plot of the metric against the length.
--
--   lengths.summarise(groups, metric) -> summary | nil (no run has by_length)
--     groups: { {label =, runs = { {seed =, res = <result>}, ... }}, ... } (compare.lua's)
--     metric: "correct" (the value is by_length's correct) or "loss"
--     summary = {
--       rows  = { {method =, scaling =, length =, factor =, n =, mean =, sd =, min =, max =,
--                 values = {...}}, ... }     (method order, then scaling, then length, as met)
--       tests = { {scaling =, length =, a =, b =, <stats.compare's fields>}, ... }   (the first
--                 method with values there against each other one, paired by seed)
--       scalings = { "none", ... }, one_scaling = true | false }
--   lengths.markdown(summary, metric) -> text (the table and the tests)
--   lengths.csv(summary) -> text (one line per row of the table)
--   lengths.plot(summary, prefix, opts) -> files | nil, message (plot.lengths: one line per
--     method and extension, the mean over the seeds with error bars over min..max)
local tables = require "lib.tables"
local stats = require "lib.stats"
local plot = require "lib.plot"

local lengths = {}

function lengths.summarise(groups, metric)
  local rows, by_key, scalings, seen_scaling = {}, {}, {}, {}
  local any = false
  for _, g in ipairs(groups) do
    for _, r in ipairs(g.runs) do
      for _, e in ipairs(type(r.res.by_length) == "table" and r.res.by_length or {}) do
        local v = metric == "correct" and e.correct or e.loss
        if type(v) == "number" and type(e.length) == "number" then
          any = true
          local sc = e.scaling or "none"
          if not seen_scaling[sc] then
            seen_scaling[sc] = true
            scalings[#scalings + 1] = sc
          end
          local key = g.label .. "\0" .. sc .. "\0" .. e.length
          local row = by_key[key]
          if not row then
            row = { method = g.label, scaling = sc, length = e.length, factor = e.factor,
              values = {}, by_seed = {} }
            by_key[key] = row
            rows[#rows + 1] = row
          end
          row.values[#row.values + 1] = v
          row.by_seed[r.seed] = v
        end
      end
    end
  end
  if not any then return nil end
  local order = {}
  for i, g in ipairs(groups) do order[g.label] = i end
  local sorder = {}
  for i, s in ipairs(scalings) do sorder[s] = i end
  table.sort(rows, function(a, b)
    if a.method ~= b.method then return order[a.method] < order[b.method] end
    if a.scaling ~= b.scaling then return sorder[a.scaling] < sorder[b.scaling] end
    return a.length < b.length
  end)
  for _, row in ipairs(rows) do
    local s = stats.summary(row.values)
    row.n, row.mean, row.sd, row.min, row.max = s.n, s.mean, s.std, s.min, s.max
  end

  -- the tests: at each (scaling, length), the first method with values against each other one
  local tests = {}
  local at, places = {}, {}
  for _, row in ipairs(rows) do
    local k = row.scaling .. "\0" .. row.length
    if not at[k] then
      at[k] = {}
      places[#places + 1] = { scaling = row.scaling, length = row.length, key = k }
    end
    at[k][#at[k] + 1] = row
  end
  table.sort(places, function(a, b)
    if a.scaling ~= b.scaling then return sorder[a.scaling] < sorder[b.scaling] end
    return a.length < b.length
  end)
  for _, p in ipairs(places) do
    local list = at[p.key]
    for i = 2, #list do
      local c = stats.compare(list[1].values, list[i].values, list[1].by_seed, list[i].by_seed)
      c.scaling, c.length, c.a, c.b = p.scaling, p.length, list[1].method, list[i].method
      tests[#tests + 1] = c
    end
  end
  for _, row in ipairs(rows) do row.by_seed = nil end
  return { rows = rows, tests = tests, scalings = scalings, one_scaling = #scalings == 1 }
end

local function fmt(metric, v)
  if v == nil then return "-" end
  return tables.num(v, metric == "correct" and "%.2f" or "%.4f")
end

function lengths.markdown(s, metric)
  local out = {}
  local body = {}
  for _, r in ipairs(s.rows) do
    body[#body + 1] = { r.method, r.scaling, tables.num(r.length), tables.num(r.factor, "%.3g"),
      tostring(r.n), fmt(metric, r.mean), r.sd and tables.num(r.sd, "%.3g") or "-",
      fmt(metric, r.min) .. ".." .. fmt(metric, r.max) }
  end
  out[#out + 1] = tables.markdown({ "method", "scaling", "length", "factor", "runs",
    metric == "correct" and "mean correct" or "mean loss", "sd", "min..max" }, body)
  if #s.tests > 0 then
    out[#out + 1] = "Significance at each length (the tests of the main table, per scaling "
      .. "and length):\n"
    local trows = {}
    for _, c in ipairs(s.tests) do
      trows[#trows + 1] = tables.test_row(("%s - %s (%s, %d)"):format(c.b, c.a, c.scaling,
        c.length), c, metric == "correct" and "%+.2f" or "%+.4f")
    end
    out[#out + 1] = tables.markdown(tables.test_headers, trows)
    local warn = tables.test_warnings(s.tests)
    if warn ~= "" then out[#out + 1] = warn end
  end
  return table.concat(out, "\n")
end

function lengths.csv(s)
  local rows = {}
  for i, r in ipairs(s.rows) do
    rows[i] = { r.method, r.scaling, r.length, r.factor, r.n, r.mean, r.sd, r.min, r.max }
  end
  return tables.csv({ "method", "scaling", "length", "factor", "n", "mean", "sd", "min", "max" },
    rows)
end

function lengths.plot(s, prefix, opts)
  local series, by_label = {}, {}
  for _, r in ipairs(s.rows) do
    local label = s.one_scaling and r.method or (r.method .. " " .. r.scaling)
    local sr = by_label[label]
    if not sr then
      sr = { label = label, points = {}, group = r.method, style = r.scaling }
      by_label[label] = sr
      series[#series + 1] = sr
    end
    sr.points[#sr.points + 1] = { r.length, r.mean, r.min, r.max }
  end
  return plot.lengths(series, prefix, opts)
end

return lengths

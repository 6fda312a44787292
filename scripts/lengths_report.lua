-- The length-generalisation tables of a finished comparison (compare.lua with --eval-lengths),
-- for a results document: every number recomputes from the run files.
--
--   build/roper scripts/lengths_report.lua results/len-substring_prefix [--pairs roper/rope ...]
--
-- Reads <dir>/summary.json (the methods, in order) and <dir>/runs/<method>-s<seed>.json (each
-- run's by_length) and prints markdown:
--   1. the metric at every length: one row per method and context extension, mean (sd) over the
--      seeds at each length;
--   2. method against method (--pairs a/b: a - b), at every extension and length, paired by
--      seed: the rows of compare.lua's pair table (lib/report.lua): the mean difference, its 95%
--      paired t and bootstrap intervals, d_z, the paired t and exact sign-flip p, each
--      Holm-adjusted over the rows of the table;
--   3. each extension against none within each rotary method, at every length where it ran
--      with a factor above 1 (the same model evaluated both ways, paired by seed), the same
--      columns, Holm over this table.
-- An extension at factor 1 (the training length) changes nothing: its rows are not tested.
-- With n seeds the sign-flip p cannot go below 2 / 2^n (0.0625 for 5): it is listed, marked,
-- with a warning under the table, and the t-test (which assumes roughly normal differences)
-- carries the decision.
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local lfs = require "lfs"
local cli = require "lib.cli"
local fileio = require "lib.fileio"
local json = require "lib.json"
local tables = require "lib.tables"
local stats = require "lib.stats"
local report = require "lib.report"
local saved = require "lib.saved"

local args
-- --help opens with these (each runs as written from the repository's folder; tests/lua/
-- help_examples_spec.lua runs them)
local EXAMPLES = {
  { "the length tables of the committed addition study (results/len-addition)",
    "build/roper scripts/lengths_report.lua results/len-addition" },
  { "RoPER and RoPE with xPos against RoPE, on substring by prefix",
    "build/roper scripts/lengths_report.lua results/len-substring_prefix " .. "--pairs roper/rope rope:xpos=0.4/rope" },
  { "a comparison of your own, made with --eval-lengths",
    "build/roper scripts/lengths_report.lua runs/len" },
}

cli.main("lengths_report.lua", function()
  local parser = cli.parser("build/roper scripts/lengths_report.lua",
    "Length-generalisation tables of a comparison made with --eval-lengths.", EXAMPLES)
  parser:argument("dir", "The comparison's output folder.")
  parser:option("--pairs", "Method pairs a/b compared as a - b (default: every method against "
    .. "the first).")
    :args("+"):argname("<a/b>")
  args = parser:parse()

  local summary = saved.summary(args.dir)
  local metric = summary.metric
  local higher = metric == "correct"
  local methods = {}
  for i, m in ipairs(summary.methods) do methods[i] = m.label end

  -- values[method][scaling][length][seed] = metric; plain[scaling][length]: the extension ran
  -- with factor 1 there (it changes nothing: the rows repeat none's and are left out of the tests)
  local values, lengths, scalings, seeds_of, plain = {}, {}, {}, {}, {}
  local seen_len, seen_sc = {}, {}
  -- the run files of each method, whatever its seeds (--first-seed): <safe label>-s<seed>.json
  local files = {}
  local okd, iter, state = pcall(lfs.dir, fileio.join(args.dir, "runs"))
  if not okd then cli.usage(args.dir .. ": no runs folder") end
  for name in iter, state do files[#files + 1] = name end
  for _, label in ipairs(methods) do
    values[label] = {}
    seeds_of[label] = {}
    local safe = label:gsub("[^%w%._=-]", "_")
    for _, name in ipairs(files) do
      local s = name:sub(1, #safe + 2) == safe .. "-s" and name:sub(#safe + 3):match("^(%d+)%.json$")
      if s then seeds_of[label][#seeds_of[label] + 1] = math.tointeger(tonumber(s)) end
    end
    table.sort(seeds_of[label])
    for _, seed in ipairs(seeds_of[label]) do
      local r = assert(json.read(fileio.join(args.dir, "runs", ("%s-s%d.json"):format(safe, seed))))
      for _, e in ipairs(r.by_length or {}) do
        local v = higher and e.correct or e.loss
        local sc, L = e.scaling or "none", math.tointeger(e.length) or e.length
        if not seen_len[L] then seen_len[L], lengths[#lengths + 1] = true, L end
        if not seen_sc[sc] then seen_sc[sc], scalings[#scalings + 1] = true, sc end
        values[label][sc] = values[label][sc] or {}
        values[label][sc][L] = values[label][sc][L] or {}
        values[label][sc][L][seed] = v
        plain[sc] = plain[sc] or {}
        plain[sc][L] = sc ~= "none" and e.factor == 1
      end
    end
  end
  table.sort(lengths)
  if #lengths == 0 then cli.usage(args.dir .. ": no run has by_length (run compare.lua with "
    .. "--eval-lengths)") end
  local fmt = higher and "%.1f" or "%.4f"

  -- 1. the metric at every length
  print(("Metric: %s (%s), mean (sd) over the seeds.\n"):format(summary.metric_name or metric,
    higher and "higher is better" or "lower is better"))
  local headers = { "method", "scaling", "seeds" }
  for _, L in ipairs(lengths) do headers[#headers + 1] = tostring(L) end
  local rows = {}
  for _, label in ipairs(methods) do
    for _, sc in ipairs(scalings) do
      local at = values[label][sc]
      if at then
        local row = { label, sc, "" }
        local n = 0
        for _, L in ipairs(lengths) do
          local list = {}
          for _, s in ipairs(seeds_of[label]) do list[#list + 1] = at[L] and at[L][s] end
          local st = stats.summary(list)
          n = math.max(n, st.n)
          row[#row + 1] = st.n > 0 and (fmt .. " (%s)"):format(st.mean,
            st.std and ("%.2g"):format(st.std) or "-") or "-"
        end
        row[3] = tostring(n)
        rows[#rows + 1] = row
      end
    end
  end
  print(tables.markdown(headers, rows))

  -- a table of rows of report.pair (b - a), Holm over its rows
  local columns = { { header = "scaling", key = "scaling" }, { header = "length", key = "length" } }
  local function table_of(what, list)
    if #list == 0 then return end
    print()
    io.write(report.differences_markdown(report.table(list), metric, { what = what,
      columns = columns }))
  end
  -- b - a at one extension and length, labelled
  local function row(a, b, fields)
    local r = report.pair(a, b)
    for k, v in pairs(fields) do r[k] = v end
    return r
  end

  -- 2. method against method
  local pairs_ = {}
  for _, spec in ipairs(args.pairs or {}) do
    local a, b = spec:match("^(.+)/(.+)$")
    if not a or not values[a] or not values[b] then
      cli.usage(("--pairs %s: two methods of the comparison a/b expected"):format(spec))
    end
    pairs_[#pairs_ + 1] = { a, b }
  end
  if #pairs_ == 0 then
    for i = 2, #methods do pairs_[#pairs_ + 1] = { methods[i], methods[1] } end
  end
  local list = {}
  for _, pr in ipairs(pairs_) do
    for _, sc in ipairs(scalings) do
      for _, L in ipairs(lengths) do
        local va, vb = values[pr[1]][sc], values[pr[2]][sc]
        if va and vb and va[L] and vb[L] and not plain[sc][L] then
          list[#list + 1] = row(vb[L], va[L], { a = pr[2], b = pr[1], scaling = sc, length = L })
        end
      end
    end
  end
  table_of("Methods against each other at every extension and length", list)

  -- 3. each extension against none, within a method
  list = {}
  for _, label in ipairs(methods) do
    local none = values[label].none
    for _, sc in ipairs(scalings) do
      if sc ~= "none" and values[label][sc] and none then
        for _, L in ipairs(lengths) do
          if values[label][sc][L] and none[L] and not plain[sc][L] then
            list[#list + 1] = row(none[L], values[label][sc][L], { name = label, a = "none",
              b = sc, scaling = sc, length = L })
          end
        end
      end
    end
  end
  table_of("Each extension against none on the same models", list)
end)

-- The length-generalisation tables of a finished comparison (compare.lua with --eval-lengths),
-- for a results document: every number recomputes from the run files.
--
--   roper scripts/lengths_report.lua results/len-substring_prefix [--pairs roper/rope ...]
--
-- Reads <dir>/summary.json (the methods, in order) and <dir>/runs/<method>-s<seed>.json (each
-- run's by_length) and prints markdown:
--   1. the metric at every length: one row per method and context extension, mean (sd) over the
--      seeds at each length;
--   2. method against method (--pairs a/b: a - b), at every extension and length, paired by
--      seed: the mean difference, its 95% paired t interval, the paired t p and the exact
--      sign-flip p, and the t p Holm-adjusted over the rows of the table;
--   3. each extension against none within each rotary method, at every length where it ran
--      with a factor above 1 (the same model evaluated both ways, paired by seed),
--      Holm-adjusted over the table.
-- An extension at factor 1 (the training length) changes nothing: its rows are not tested.
-- With n seeds the sign-flip p cannot go below 2 / 2^n (0.0625 for 5): it is listed, and the
-- t-test (which assumes roughly normal differences) carries the decision.
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local lfs = require "lfs"
local util = require "lib.util"
local stats = require "lib.stats"

local args
util.main("lengths_report.lua", function()
  local parser = util.parser("roper scripts/lengths_report.lua",
    "Length-generalisation tables of a comparison made with --eval-lengths.")
  parser:argument("dir", "The comparison's output folder.")
  parser:option("--pairs", "Method pairs a/b compared as a - b (default: every method against "
    .. "the first).")
    :args("+"):argname("<a/b>")
  args = parser:parse()

  local summary, err = util.read_json(util.join(args.dir, "summary.json"))
  if not summary then util.usage(tostring(err)) end
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
  local okd, iter, state = pcall(lfs.dir, util.join(args.dir, "runs"))
  if not okd then util.usage(args.dir .. ": no runs folder") end
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
      local r = assert(util.read_json(util.join(args.dir, "runs", ("%s-s%d.json"):format(safe, seed))))
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
  if #lengths == 0 then util.usage(args.dir .. ": no run has by_length (run compare.lua with "
    .. "--eval-lengths)") end
  local fmt = higher and "%.1f" or "%.4f"
  local dfmt = higher and "%+.1f" or "%+.4f"

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
  print(util.markdown(headers, rows))

  -- a paired comparison of a[s] - b[s] over the seeds both have
  local function paired(a, b)
    local xa, xb = {}, {}
    for s, v in pairs(a or {}) do
      if b and b[s] ~= nil then xa[#xa + 1], xb[#xb + 1] = v, b[s] end
    end
    local p = stats.paired(xa, xb)
    local lo, hi = stats.paired_ci(xa, xb)
    return p, lo, hi
  end
  local function table_of(title, list)
    if #list == 0 then return end
    local ps = { n = #list }
    for i, c in ipairs(list) do ps[i] = c.p and c.p.p_t end
    local adj = stats.holm(ps)
    local body = {}
    for i, c in ipairs(list) do
      local p = c.p
      body[i] = { c.label, c.scaling, tostring(c.length), p and dfmt:format(p.mean_diff) or "-",
        c.lo and ("[" .. dfmt .. ", " .. dfmt .. "]"):format(c.lo, c.hi) or "-",
        p and tostring(p.n) or "-", p and p.p_t and ("%.2g"):format(p.p_t) or "-",
        adj[i] and ("%.2g"):format(adj[i]) or "-", p and ("%.3g"):format(p.p_perm) or "-" }
    end
    print()
    print(title)
    print()
    print(util.markdown({ "difference", "scaling", "length", "mean diff", "95% CI", "pairs",
      "paired t p", "Holm p", "sign-flip p" }, body))
  end

  -- 2. method against method
  local pairs_ = {}
  for _, spec in ipairs(args.pairs or {}) do
    local a, b = spec:match("^(.+)/(.+)$")
    if not a or not values[a] or not values[b] then
      util.usage(("--pairs %s: two methods of the comparison a/b expected"):format(spec))
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
          local p, lo, hi = paired(va[L], vb[L])
          list[#list + 1] = { label = pr[1] .. " - " .. pr[2], scaling = sc, length = L, p = p,
            lo = lo, hi = hi }
        end
      end
    end
  end
  table_of("Methods against each other, paired by seed (Holm over the rows of this table):", list)

  -- 3. each extension against none, within a method
  list = {}
  for _, label in ipairs(methods) do
    local none = values[label].none
    for _, sc in ipairs(scalings) do
      if sc ~= "none" and values[label][sc] and none then
        for _, L in ipairs(lengths) do
          if values[label][sc][L] and none[L] and not plain[sc][L] then
            local p, lo, hi = paired(values[label][sc][L], none[L])
            list[#list + 1] = { label = label .. ": " .. sc .. " - none", scaling = sc, length = L,
              p = p, lo = lo, hi = hi }
          end
        end
      end
    end
  end
  table_of("Each extension against none on the same models, paired by seed (Holm over the rows "
    .. "of this table):", list)
end)

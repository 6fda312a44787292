-- The tables of the experiment scripts' reports: a number for a table (tables.num), markdown
-- pipe tables, a row of a significance table (tables.test_row), CSV, and a result's loss curve
-- and metric per length as CSV. The CSV writer is ours: penlight's pl.data.write quotes nothing
-- (a comma in a cell splits it), stops a row at its first empty cell and writes numbers with
-- tostring's 14 digits.
local stats = require "lib.stats"

local tables = {}

-- A number for tables: integers as they are, others with 4 significant digits.
function tables.num(v, fmt)
  if v == nil then return "-" end
  if type(v) ~= "number" then return tostring(v) end
  if math.type(v) == "integer" or (v == math.floor(v) and math.abs(v) < 1e15 and not fmt) then
    return ("%d"):format(v)
  end
  return (fmt or "%.4g"):format(v)
end

-- markdown(headers, rows) -> text: a pipe table; rows are lists of strings (numbers converted),
-- a cell's "|" written "\|" (a method's label or a path may hold one: it would start a cell) and
-- its line breaks (CR, LF) spaces (a table row is one line: a break would end it).
function tables.markdown(headers, rows)
  local lines = { "| " .. table.concat(headers, " | ") .. " |" }
  local sep = {}
  for i = 1, #headers do sep[i] = "---" end
  lines[2] = "|" .. table.concat(sep, "|") .. "|"
  for _, r in ipairs(rows) do
    local cells = {}
    for i = 1, #headers do
      cells[i] = (tostring(r[i] == nil and "" or r[i]):gsub("|", "\\|"):gsub("[\r\n]", " "))
    end
    lines[#lines + 1] = "| " .. table.concat(cells, " | ") .. " |"
  end
  return table.concat(lines, "\n") .. "\n"
end

-- test_row(label, c, diff_fmt) -> the cells of a significance table row for stats.compare's
-- result c: label, mean diff (diff_fmt), Welch t (df), Welch p, permutation p, pairs, paired t
-- p, sign-flip p (tables.test_headers). An exact permutation or sign-flip p whose test cannot
-- reach 0.05 with so few runs, whatever the data, is marked " †" (tables.test_warnings says why).
tables.test_headers = { "difference", "mean diff", "Welch t", "Welch p", "permutation p", "pairs",
  "paired t p", "sign-flip p" }
tables.ALPHA = 0.05

-- whether an exact test of stats.compare's c cannot reach alpha: the permutation test, the
-- sign-flip test
local function perm_short(c, alpha)
  return c.permutation_p ~= nil and c.permutation_exact and c.permutation_floor ~= nil
    and c.permutation_floor > alpha
end
local function sign_short(c, alpha)
  return c.paired ~= nil and c.paired.exact and not stats.can_reach(c.paired.n, alpha)
end

function tables.test_row(label, c, diff_fmt)
  local paired = c.paired
  local dagger = function(short) return short and " †" or "" end
  return { label, c.mean_diff and tables.num(c.mean_diff, diff_fmt) or "-",
    c.welch_t and ("%.2f (df %.1f)"):format(c.welch_t, c.welch_df) or "-",
    c.welch_p and tables.num(c.welch_p, "%.3g") or "-",
    c.permutation_p and (tables.num(c.permutation_p, "%.3g") .. (c.permutation_exact and ""
      or " (sampled)") .. dagger(perm_short(c, tables.ALPHA))) or "-",
    paired and tostring(paired.n) or "-",
    paired and paired.p_t and tables.num(paired.p_t, "%.3g") or "-",
    paired and (tables.num(paired.p_perm, "%.3g") .. (paired.exact and "" or " (sampled)")
      .. dagger(sign_short(c, tables.ALPHA))) or "-" }
end

-- sign_flip_warning(n, alpha, marked) -> the warning that n pairs cannot give a sign-flip p of
-- alpha or less whatever the data (stats.sign_flip_floor); marked: which cells carry the †
function tables.sign_flip_warning(n, alpha, marked)
  return ("Warning: with %d pairs the exact sign-flip test cannot give p below 2 / 2^%d = %s, so "
    .. "it cannot reach %s whatever the data (%s); %d pairs are the fewest that can.\n"):format(n,
    n, tables.num(stats.sign_flip_floor(n), "%.4g"), tables.num(alpha), marked,
    math.ceil(1 - math.log(alpha, 2)))
end

-- permutation_warning(na, nb, alpha, marked) -> the same for the exact permutation test of two
-- groups of na and nb runs (stats.permutation_floor)
function tables.permutation_warning(na, nb, alpha, marked)
  local fewest = ""
  if na == nb then
    local n = na
    while stats.permutation_floor(n, n) > alpha do n = n + 1 end
    fewest = ("; %d runs a method are the fewest that can"):format(n)
  end
  return ("Warning: with %s the exact permutation test cannot give p below %d / C(%d, %d) = %s, "
    .. "so it cannot reach %s whatever the data (%s)%s.\n"):format(na == nb
    and ("%d runs a method"):format(na) or ("%d and %d runs"):format(na, nb),
    na == nb and 2 or 1, na + nb, math.min(na, nb),
    tables.num(stats.permutation_floor(na, nb), "%.4g"), tables.num(alpha), marked, fewest)
end

-- test_warnings(cs[, opts]) -> text: after a table of test_row rows (cs: their stats.compare
-- results), a warning for each run count whose exact test cannot reach 0.05 (the cells marked
-- †); "" when there is none. opts.sign_flip = false leaves out the sign-flip test's (for a
-- table followed by report.differences_markdown's, which warns for the same pair counts).
function tables.test_warnings(cs, opts)
  opts = opts or {}
  local out, seen = {}, {}
  for _, c in ipairs(cs) do
    if perm_short(c, tables.ALPHA) then
      local key = ("perm %d %d"):format(math.min(c.na, c.nb), math.max(c.na, c.nb))
      if not seen[key] then
        seen[key] = true
        out[#out + 1] = tables.permutation_warning(c.na, c.nb, tables.ALPHA, "marked †")
      end
    end
  end
  for _, c in ipairs(opts.sign_flip == false and {} or cs) do
    if sign_short(c, tables.ALPHA) then
      local key = ("sign %d"):format(c.paired.n)
      if not seen[key] then
        seen[key] = true
        out[#out + 1] = tables.sign_flip_warning(c.paired.n, tables.ALPHA, "marked †")
      end
    end
  end
  return table.concat(out, "\n")
end

-- csv(headers, rows) -> text (RFC 4180 quoting where needed).
function tables.csv(headers, rows)
  local function cell(v)
    if v == nil then return "" end
    if type(v) == "number" then
      if math.type(v) == "integer" then return tostring(v) end
      return ("%.10g"):format(v)
    end
    v = tostring(v)
    if v:find('[,"\n]') then return '"' .. v:gsub('"', '""') .. '"' end
    return v
  end
  local lines = {}
  local h = {}
  for i, x in ipairs(headers) do h[i] = cell(x) end
  lines[1] = table.concat(h, ",")
  for _, r in ipairs(rows) do
    local c = {}
    for i = 1, #headers do c[i] = cell(r[i]) end
    lines[#lines + 1] = table.concat(c, ",")
  end
  return table.concat(lines, "\n") .. "\n"
end

-- The loss curve of a result as CSV (step, tokens, loss, lr; and valid_loss, empty on the
-- points without one, when the run had valid_every).
function tables.curve_csv(result)
  local rows, valid = {}, false
  for i, p in ipairs(result.curve or {}) do
    rows[i] = { p.step, p.tokens, p.loss, p.lr, p.valid_loss }
    valid = valid or p.valid_loss ~= nil
  end
  return tables.csv({ "step", "tokens", "loss", "lr", valid and "valid_loss" or nil }, rows)
end

-- The metric at each length of a result (by_length) as CSV (length, scaling, factor, correct,
-- accuracy, loss; the cells a task does not have are empty).
function tables.lengths_csv(result)
  local rows = {}
  for i, e in ipairs(result.by_length or {}) do
    rows[i] = { e.length, e.scaling, e.factor, e.correct, e.accuracy, e.loss }
  end
  return tables.csv({ "length", "scaling", "factor", "correct", "accuracy", "loss" }, rows)
end

return tables

-- The non-inferiority test of the language-modelling study (docs/results.md): stats.noninferiority
-- against the t statistic, the published t quantiles and a one-sided p integrated here from
-- Student's density (Simpson's rule), and pairs_report.lua --noninferiority on made-up run files:
-- a clearly non-inferior candidate, a clearly inferior one, and the messages.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. dir .. "../../scripts/?.lua;" .. package.path
local h = require "helpers"
local stats = require "lib.stats"

local BIN = h.BIN

-- P(T <= t) for Student's t with df degrees of freedom, by Simpson's rule on its density
local function t_cdf(t, df)
  local function lgamma(x) -- Stirling with 8 shifts: ample here
    local s = 0
    while x < 8 do s, x = s - math.log(x), x + 1 end
    return s + (x - 0.5) * math.log(x) - x + 0.5 * math.log(2 * math.pi) + 1 / (12 * x)
      - 1 / (360 * x ^ 3)
  end
  local c = math.exp(lgamma((df + 1) / 2) - lgamma(df / 2)) / math.sqrt(df * math.pi)
  local function f(x) return c * (1 + x * x / df) ^ (-(df + 1) / 2) end
  local a, b, n = 0, math.abs(t), 20000
  local hh, s = (b - a) / n, f(a) + f(b)
  for i = 1, n - 1 do s = s + (i % 2 == 1 and 4 or 2) * f(a + i * hh) end
  local half = s * hh / 3
  return t >= 0 and 0.5 + half or 0.5 - half
end

local function close(want, got, tol, what)
  assert.is_true(math.abs(want - got) <= tol, ("%s: want %.10g, got %.10g"):format(what, want, got))
end

describe("stats.noninferiority", function()
  -- differences a - b: 0.004, -0.002, 0.010, 0.001, 0.002 (n 5)
  local b = { 5.0, 5.1, 4.9, 5.2, 5.05 }
  local d = { 0.004, -0.002, 0.010, 0.001, 0.002 }
  local a = {}
  for i = 1, 5 do a[i] = b[i] + d[i] end
  local m, ss = 0, 0
  for i = 1, 5 do m = m + d[i] / 5 end
  for i = 1, 5 do ss = ss + (d[i] - m) ^ 2 end
  local se = math.sqrt(ss / 4) / math.sqrt(5)

  it("tests mean(a - b) < margin with the paired t, one-sided, and gives the 90% interval", function()
    local r = stats.noninferiority(a, b, 0.02)
    close(m, r.mean_diff, 1e-12, "mean")
    close(math.sqrt(ss / 4), r.sd, 1e-12, "sd")
    assert.equal(4, r.df)
    -- t(0.95, 4) = 2.131847 (published tables)
    close(m + 2.131847 * se, r.upper, 1e-8, "upper")
    close(m - 2.131847 * se, r.lo, 1e-8, "lo")
    close(r.upper, r.hi, 0, "hi")
    close((m - 0.02) / se, r.t, 1e-12, "t")
    close(t_cdf((m - 0.02) / se, 4), r.p, 1e-6, "p")
    assert.is_true(r.p < 0.05 and r.noninferior and r.equivalent)
    -- at a margin below the upper bound: not shown non-inferior, and p >= 0.05
    local tight = stats.noninferiority(a, b, 0.005)
    assert.is_false(tight.noninferior)
    assert.is_true(tight.p > 0.05, tight.p)
    close(t_cdf((m - 0.005) / se, 4), tight.p, 1e-6, "p above 0.5 side")
    -- the 5% level at a margin right at the upper bound
    close(0.05, stats.noninferiority(a, b, r.upper).p, 1e-6, "p at the bound")
    -- alpha 0.025: t(0.975, 4) = 2.776445
    close(m + 2.776445 * se, stats.noninferiority(a, b, 0.02, 0.025).upper, 1e-8, "alpha")
  end)

  it("handles constant differences and refuses what it cannot test", function()
    -- differences exactly 0.25 (binary fractions): sd 0
    local r = stats.noninferiority({ 1.5, 2.5 }, { 1.25, 2.25 }, 0.5)
    assert.equal(0.25, r.upper)
    assert.equal(0, r.p)
    assert.is_true(r.noninferior)
    assert.equal(1, stats.noninferiority({ 1.5, 2.5 }, { 1.25, 2.25 }, 0.125).p)
    assert.is_nil(stats.noninferiority({ 1 }, { 1 }, 0.02))
    assert.has_error(function() stats.noninferiority({ 1, 2 }, { 1 }, 0.02) end,
      "noninferiority: the lists differ in length")
    assert.has_error(function() stats.noninferiority({ 1, 2 }, { 1, 2 }, 0) end,
      "noninferiority: the margin must be a number > 0")
  end)
end)

describe("pairs_report.lua --noninferiority on made-up run files", function()
  local tmp
  setup(function() tmp = h.tmpdir() end)
  teardown(function() h.remove_tree(tmp) end)

  -- a comparison folder: summary.json and runs/<label>-s<seed>.json with the values given
  local function comparison(name, values)
    local d = tmp .. "/" .. name
    assert(os.execute("mkdir -p '" .. d .. "/runs'"))
    local methods = {}
    for _, label in ipairs { "rope", "roper", "none" } do
      if values[label] then methods[#methods + 1] = ('{"label": "%s"}'):format(label) end
      for seed, v in ipairs(values[label] or {}) do
        h.write(("%s/runs/%s-s%d.json"):format(d, label, seed),
          ('{"value": %.17g, "metric": "loss", "config": {"seed": %d}}'):format(v, seed))
      end
    end
    h.write(d .. "/summary.json", '{"metric": "loss", "metric_name": "validation loss", '
      .. '"methods": [' .. table.concat(methods, ", ") .. "]}")
    return d
  end

  it("says non-inferior for a candidate within the margin and not for a clearly worse one", function()
    local rope = { 5.10, 5.02, 5.15, 4.98, 5.07 }
    local good, bad, none = {}, {}, {}
    local dg = { 0.003, -0.004, 0.001, 0.002, -0.001 } -- mean 0.0002: well inside 0.02
    local db = { 0.061, 0.048, 0.055, 0.052, 0.064 }   -- mean 0.056: clearly worse
    for i = 1, 5 do
      good[i], bad[i], none[i] = rope[i] + dg[i], rope[i] + db[i], rope[i] + 0.3
    end
    local fine = comparison("fine", { rope = rope, roper = good, none = none })
    local worse = comparison("worse", { rope = rope, roper = bad, none = none })
    local out, err, code = h.run(("%s scripts/pairs_report.lua %s %s --noninferiority roper/rope "
      .. "none/rope --margin 0.02"):format(BIN, fine, worse))
    assert.are.equal(0, code, err)
    local function row(name, pair)
      return out:match("\n| " .. name .. " | " .. pair .. " | ([^\n]*) |\n")
    end
    local function cells(r)
      local t = {}
      for c in (r .. " |"):gmatch("(.-) | ") do t[#t + 1] = c end
      return t
    end
    local f = cells(assert(row("fine", "roper %- rope"), out))
    local want = stats.noninferiority(good, rope, 0.02)
    assert.are.equal("5", f[1])
    assert.are.equal(("%+.4f"):format(want.mean_diff), f[4])
    assert.are.equal(("%+.4f"):format(want.upper), f[5])
    assert.are.equal("yes", f[9])
    assert.are.equal("yes", f[10])
    assert.is_true(want.p < 0.001, want.p)
    local w = cells(assert(row("worse", "roper %- rope"), out))
    assert.are.equal("+0.0560", w[4])
    assert.are.equal("no", w[9])
    assert.are.equal("no", w[10])
    assert.is_true(tonumber(w[7]) > 0.99, w[7])
    local n = cells(assert(row("fine", "none %- rope"), out))
    assert.are.equal("+0.3000", n[4])
    assert.are.equal("no", n[9])
    -- the messages
    local _, merr, mcode = h.run(("%s scripts/pairs_report.lua %s --noninferiority roper/rope")
      :format(BIN, fine))
    assert.are.equal(2, mcode)
    assert.are.equal("pairs_report.lua: --noninferiority needs --margin, a finite number > 0\n",
      merr)
    _, merr, mcode = h.run(("%s scripts/pairs_report.lua %s --noninferiority roper/rope --margin "
      .. "1e400"):format(BIN, fine))
    assert.are.equal(2, mcode)
    assert.are.equal("pairs_report.lua: --noninferiority needs --margin, a finite number > 0\n",
      merr)
    _, merr, mcode = h.run(("%s scripts/pairs_report.lua %s --margin 0.02"):format(BIN, fine))
    assert.are.equal(2, mcode)
    assert.are.equal("pairs_report.lua: --margin applies to --noninferiority, which is not given\n",
      merr)
    -- a metric where higher is better (the correct answers): refused, not tested as a loss, which
    -- would call the worse method non-inferior
    local acc = comparison("acc", { rope = { 101, 102, 103 }, roper = { 12, 14, 16 } })
    h.write(acc .. "/summary.json", '{"metric": "correct", "metric_name": "correct of 128", '
      .. '"methods": [{"label": "rope"}, {"label": "roper"}]}')
    local aout
    aout, merr, mcode = h.run(("%s scripts/pairs_report.lua %s --noninferiority roper/rope "
      .. "--margin 1"):format(BIN, acc))
    assert.are.equal(2, mcode)
    assert.are.equal("pairs_report.lua: --noninferiority tests a loss (lower is better); " .. acc
      .. "'s metric is correct: give --metric final_train_loss, mean_train_loss or eval_loss\n",
      merr)
    assert.are.equal("", aout)
    -- a sweep's folder (its summary.json has no methods): said in one line, for both reports
    local sweep = tmp .. "/sweep"
    assert(os.execute("mkdir -p '" .. sweep .. "/runs'"))
    h.write(sweep .. "/summary.json", '{"metric": "loss", "runs": 2}')
    for _, script in ipairs { "pairs_report.lua", "lengths_report.lua" } do
      aout, merr, mcode = h.run(("%s scripts/%s %s"):format(BIN, script, sweep))
      assert.are.equal(2, mcode)
      assert.are.equal(script .. ": " .. sweep .. "/summary.json: not a compare.lua summary (no "
        .. "methods)\n", merr)
      -- a folder without a summary: the file's own error, one line, the same from both
      aout, merr, mcode = h.run(("%s scripts/%s %s/none"):format(BIN, script, tmp))
      assert.are.equal(2, mcode)
      assert.are.equal("", aout)
      assert.are.equal(script .. ": " .. tmp .. "/none/summary.json: No such file or directory\n",
        merr)
      -- JSON that is no summary: false, methods without labels (one line each, exit 2)
      for _, c in ipairs { { "false", "(no methods)" }, { '{"methods": [1, 2]}',
        "(method 1 has no label)" } } do
        assert(os.execute("mkdir -p '" .. tmp .. "/odd'"))
        h.write(tmp .. "/odd/summary.json", c[1])
        aout, merr, mcode = h.run(("%s scripts/%s %s/odd"):format(BIN, script, tmp))
        assert.are.equal(2, mcode)
        assert.are.equal(script .. ": " .. tmp .. "/odd/summary.json: not a compare.lua summary "
          .. c[2] .. "\n", merr)
      end
    end
    local pout, perr = h.run(("%s scripts/pairs_report.lua %s --noninferiority roper/xpos "
      .. "--margin 0.02"):format(BIN, fine))
    assert.are.equal("pairs_report.lua: --noninferiority roper/xpos: no folder holds runs of both "
      .. "roper and xpos\n", perr)
    assert.are.equal("", pout) -- refused before any table
    local short = comparison("short", { rope = { 5.1 }, roper = { 5.2 } })
    pout, perr = h.run(("%s scripts/pairs_report.lua %s %s --noninferiority roper/rope --margin "
      .. "0.02"):format(BIN, fine, short))
    assert.are.equal("pairs_report.lua: --noninferiority roper/rope: at least 2 runs of each "
      .. "paired by seed expected in short\n", perr)
    assert.are.equal("", pout)
  end)

  it("gives a pair's rows where both methods ran and names the folders without them", function()
    -- NoPE at the smallest size only, as in the study of 20 tokens per parameter
    local rope = { 5.10, 5.02, 5.15 }
    local small = comparison("small", { rope = rope, roper = { 5.11, 5.00, 5.16 },
      none = { 5.40, 5.33, 5.44 } })
    local large = comparison("large", { rope = { 4.1, 4.0, 4.2 }, roper = { 4.12, 4.01, 4.18 } })
    local out, err, code = h.run(("%s scripts/pairs_report.lua %s %s --noninferiority roper/rope "
      .. "none/rope --margin 0.02"):format(BIN, small, large))
    assert.are.equal(0, code, err)
    assert.truthy(out:find("\n| small | roper - rope | 3 | ", 1, true), out)
    assert.truthy(out:find("\n| large | roper - rope | 3 | ", 1, true), out)
    assert.truthy(out:find("\n| small | none - rope | 3 | 5.3900 | 5.0900 | +0.3000 | ", 1, true), out)
    assert.is_nil(out:find("| large | none - rope |", 1, true), out)
    assert.truthy(out:find("\nnone/rope: no row for large (no runs of both methods there).\n", 1,
      true), out)
  end)
end)

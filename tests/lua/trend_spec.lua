-- The language-model study's report across sizes (issue 63): stats.ols and stats.ols_at against a
-- case worked by hand and against numpy's least squares (the matrix form, /usr/bin/python3; pending
-- without numpy), and pairs_report.lua --trend, --extrapolate and --gap-curve on made-up run
-- folders of three sizes with known answers, and their messages.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. dir .. "../../scripts/?.lua;" .. package.path
local h = require "helpers"
local stats = require "lib.stats"

local BIN = h.BIN

local function close(want, got, tol, what)
  assert.is_true(got ~= nil and math.abs(want - got) <= tol,
    ("%s: want %.10g, got %s"):format(what, want, tostring(got)))
end

-- published two-sided 95% t quantiles t(0.975, df)
local T975 = { [2] = 4.302653, [3] = 3.182446, [8] = 2.306004, [9] = 2.262157 }

-- numpy's answer for the line y = alpha + beta x and its intervals at x0s: by the matrix form
-- (X'X)^-1 s^2, independent of stats.ols's sums; nil and why without numpy
local function numpy_ols(x, y, x0s)
  local PY = h.PY
  local _, err, code = h.run(PY .. " -c 'import numpy'")
  if code ~= 0 then return nil, PY .. " has no numpy (" .. err:gsub("\n.*", "") .. ")" end
  local function list(v)
    local t = {}
    for i, e in ipairs(v) do t[i] = ("%.17g"):format(e) end
    return "[" .. table.concat(t, ", ") .. "]"
  end
  local script = ([[
import numpy as np
x = np.array(%s); y = np.array(%s); x0s = %s
X = np.column_stack([np.ones_like(x), x])
b, *_ = np.linalg.lstsq(X, y, rcond=None)
r = y - X @ b
s2 = r @ r / (len(y) - 2)
cov = s2 * np.linalg.inv(X.T @ X)
print("%%.17g %%.17g %%.17g %%.17g %%.17g" %% (b[0], b[1], np.sqrt(cov[0, 0]), np.sqrt(cov[1, 1]), np.sqrt(s2)))
for x0 in x0s:
    v = np.array([1.0, x0])
    se = np.sqrt(v @ cov @ v)
    print("%%.17g %%.17g %%.17g" %% (v @ b, se, np.sqrt(s2 + se * se)))
]]):format(list(x), list(y), list(x0s))
  local path = h.tmpname()
  h.write(path, script)
  local out, perr, pcode = h.run(PY .. " " .. h.sh_quote(path))
  os.remove(path)
  assert.are.equal(0, pcode, perr)
  local lines = {}
  for l in out:gmatch("[^\n]+") do
    local t = {}
    for v in l:gmatch("%S+") do t[#t + 1] = tonumber(v) end
    lines[#lines + 1] = t
  end
  local r = { alpha = lines[1][1], beta = lines[1][2], se_alpha = lines[1][3],
    se_beta = lines[1][4], s = lines[1][5], at = {} }
  for i = 2, #lines do r.at[i - 1] = { fit = lines[i][1], se = lines[i][2], se_pred = lines[i][3] } end
  return r
end

describe("stats.ols and stats.ols_at", function()
  it("fit a line worked by hand, with its standard errors and intervals", function()
    -- x 0..3, y 1 3 2 5: xbar 1.5, ybar 2.75, sxx 5, sxy 5.5, beta 1.1, alpha 1.1; residuals
    -- -0.1 0.8 -1.3 0.6, SSE 2.7, s^2 = 2.7 / 2 = 1.35
    local f = stats.ols({ 0, 1, 2, 3 }, { 1, 3, 2, 5 })
    assert.are.equal(4, f.n)
    assert.are.equal(2, f.df)
    close(1.1, f.beta, 1e-12, "beta")
    close(1.1, f.alpha, 1e-12, "alpha")
    close(math.sqrt(1.35), f.s, 1e-12, "s")
    close(math.sqrt(1.35 / 5), f.se_beta, 1e-12, "se beta")
    close(math.sqrt(1.35 * (1 / 4 + 2.25 / 5)), f.se_alpha, 1e-12, "se alpha")
    close(1.1 / math.sqrt(0.27), f.t, 1e-12, "t")
    -- at x0 = 5: fit 6.6, leverage 1/4 + 3.5^2 / 5 = 2.7
    local at = stats.ols_at(f, 5)
    close(6.6, at.fit, 1e-12, "fit")
    close(math.sqrt(1.35 * 2.7), at.se, 1e-12, "se")
    close(math.sqrt(1.35 * 3.7), at.se_pred, 1e-12, "se pred")
    close(6.6 - T975[2] * math.sqrt(1.35 * 2.7), at.lo, 1e-5, "lo")
    close(6.6 + T975[2] * math.sqrt(1.35 * 3.7), at.pred_hi, 1e-5, "pred hi")
    -- the two-sided p of t = 2.117 with 2 df: 2 (1 - F(t)), F(t) = 1/2 + t / (2 sqrt(2 + t^2))
    local t = 1.1 / math.sqrt(0.27)
    close(1 - t / math.sqrt(2 + t * t), f.p, 1e-10, "p")
  end)

  it("agrees with numpy's least squares and its covariance matrix", function()
    local x, y = {}, {}
    local sizes = { 5.7, 6.18, 6.6 }
    local seed = 7
    for k = 1, 11 do
      seed = (seed * 1103515245 + 12345) % 2147483648
      x[k] = sizes[(k - 1) % 3 + 1]
      y[k] = 0.02 - 0.01 * (x[k] - 6) + (seed / 2147483648 - 0.5) * 0.02
    end
    local x0s = { 5.7, 6.6, 8.3 }
    local np, why = numpy_ols(x, y, x0s)
    if not np then return pending(why) end
    local f = stats.ols(x, y)
    assert.are.equal(9, f.df)
    for _, k in ipairs { "alpha", "beta", "se_alpha", "se_beta", "s" } do
      close(np[k], f[k], 1e-10 * math.max(1, math.abs(np[k])), k)
    end
    for i, x0 in ipairs(x0s) do
      local at = stats.ols_at(f, x0)
      close(np.at[i].fit, at.fit, 1e-10, "fit at " .. x0)
      close(np.at[i].se, at.se, 1e-10, "se at " .. x0)
      close(np.at[i].se_pred, at.se_pred, 1e-10, "se pred at " .. x0)
      close(np.at[i].fit + T975[9] * np.at[i].se, at.hi, 1e-6, "hi at " .. x0)
      close(np.at[i].fit - T975[9] * np.at[i].se_pred, at.pred_lo, 1e-6, "pred lo at " .. x0)
    end
  end)

  it("refuses what it cannot fit", function()
    assert.is_nil(stats.ols({ 1, 2 }, { 1, 2 }))
    assert.is_nil(stats.ols({ 2, 2, 2 }, { 1, 2, 3 }))
    assert.has_error(function() stats.ols({ 1, 2, 3 }, { 1, 2 }) end,
      "ols: the lists differ in length")
    -- a perfect line: no residual, no t
    local f = stats.ols({ 1, 2, 3 }, { 2, 4, 6 })
    assert.are.equal(0, f.s)
    assert.is_nil(f.t)
    local at = stats.ols_at(f, 4)
    assert.are.equal(8, at.fit)
    assert.are.equal(8, at.lo)
    assert.are.equal(8, at.pred_hi)
  end)
end)

describe("pairs_report.lua --trend and --gap-curve on made-up run folders", function()
  local tmp
  setup(function() tmp = h.tmpdir() end)
  teardown(function() h.remove_tree(tmp) end)

  local STEPS, TOKENS = { 100, 200, 300 }, 4096 -- tokens a step

  -- a comparison folder of the lm task: summary.json, runs/<label>-s<seed>.json (the shape of a
  -- real run file, cut: value, params, config, curve, lm) and, with curves, runs/<label>-s<seed>
  -- .csv with the column valid_loss at STEPS. spec = {params =, values = {label = {...}}, valid =
  -- {label = { {seed's valid_loss at each step}, ... }}, params_of = {["label-sN"] = n}}
  local function comparison(name, spec)
    local d = tmp .. "/" .. name
    assert(os.execute("mkdir -p '" .. d .. "/runs'"))
    local methods = {}
    for _, label in ipairs { "rope", "roper", "none" } do
      methods[#methods + 1] = ('{"label": "%s"}'):format(label)
      for seed, v in ipairs(spec.values[label]) do
        local run = ("%s-s%d"):format(label, seed)
        local params = (spec.params_of or {})[run] or spec.params
        local curve, csv = {}, { "step,tokens,loss,lr,valid_loss" }
        local valid = spec.valid and spec.valid[label] and spec.valid[label][seed]
        for i, step in ipairs(STEPS) do
          local vl = valid and valid[i]
          curve[i] = ('{"step": %d, "tokens": %d, "loss": %.17g, "lr": 0.001%s}'):format(step,
            step * TOKENS, v + 0.5, vl and (', "valid_loss": %.17g'):format(vl) or "")
          csv[#csv + 1] = ("%d,%d,%.10g,0.001,%s"):format(step, step * TOKENS, v + 0.5,
            vl and ("%.10g"):format(vl) or "")
        end
        h.write(("%s/runs/%s.json"):format(d, run), ('{"value": %.17g, "metric": "loss", '
          .. '%s"config": {"seed": %d, "task": "lm", "seq_len": 256}, "curve": [%s], '
          .. '"lm": {"valid": {"loss": %.17g}}}'):format(v, params and ('"params": %d, ')
          :format(params) or "", seed, table.concat(curve, ", "), v))
        if valid then h.write(("%s/runs/%s.csv"):format(d, run), table.concat(csv, "\n") .. "\n") end
      end
    end
    h.write(d .. "/summary.json", '{"metric": "loss", "metric_name": "validation loss", '
      .. '"task": "lm", "methods": [' .. table.concat(methods, ", ") .. "]}")
    return d
  end

  -- three sizes: rope's values and the differences roper - rope per seed
  local SIZES = {
    { name = "s", params = 500000, rope = { 4.10, 4.02, 4.15, 3.98 },
      d = { 0.010, 0.030, 0.018, 0.022 } },
    { name = "m", params = 1500000, rope = { 3.80, 3.85, 3.78, 3.83 },
      d = { 0.012, 0.004, 0.020, 0.010 } },
    { name = "l", params = 4000000, rope = { 3.60, 3.55, 3.62 }, d = { 0.001, 0.009, -0.004 } },
  }
  local folders, xs, ys = {}, {}, {}

  local function cells(line)
    local t = {}
    for c in (line .. " | "):gmatch("(.-) | ") do t[#t + 1] = c end
    return t
  end
  local function num(s) return assert(tonumber((s:gsub(",", ""))), s) end
  local function interval(s)
    local lo, hi = s:match("^%[(%S+), (%S+)%]$")
    return num(assert(lo, s)), num(hi)
  end

  setup(function()
    for i, sz in ipairs(SIZES) do
      local roper, none = {}, {}
      for k, v in ipairs(sz.rope) do
        roper[k], none[k] = v + sz.d[k], v + 0.3
        xs[#xs + 1], ys[#ys + 1] = math.log(sz.params, 10), (v + sz.d[k]) - v
      end
      folders[i] = comparison(sz.name, { params = sz.params, values = { rope = sz.rope,
        roper = roper, none = none } })
    end
  end)

  it("fits roper - rope against log10 params over every per-seed difference", function()
    local out, err, code = h.run(("%s scripts/pairs_report.lua %s %s %s --trend roper/rope "
      .. "--extrapolate 2e8"):format(BIN, folders[1], folders[2], folders[3]))
    assert.are.equal(0, code, err)
    assert.truthy(out:find("ordinary least squares over all 11 per-seed differences", 1, true), out)
    assert.truthy(out:find("(t with 9 degrees of freedom, n - 2)", 1, true), out)
    -- the independent answer (numpy), else the one worked here from the sums
    local x0s = { math.log(5e5, 10), math.log(1.5e6, 10), math.log(4e6, 10), math.log(2e8, 10) }
    local want = numpy_ols(xs, ys, x0s)
    if not want then
      local f = stats.ols(xs, ys)
      want = { beta = f.beta, se_beta = f.se_beta, at = {} }
      for i, x0 in ipairs(x0s) do want.at[i] = stats.ols_at(f, x0) end
    end
    local tol = 0.5e-4 + 1e-9 -- the tables print 4 decimals
    for i, sz in ipairs(SIZES) do
      local line = assert(out:match("\n| " .. sz.name .. " | ([^\n]*) |\n"), out)
      local c = cells(line)
      assert.are.equal(({ "500,000", "1,500,000", "4,000,000" })[i], c[1])
      close(math.log(sz.params, 10), num(c[2]), 0.5e-3, "log10 params")
      assert.are.equal(tostring(#sz.d), c[3])
      local m, ss = 0, 0
      for _, v in ipairs(sz.d) do m = m + v / #sz.d end
      for _, v in ipairs(sz.d) do ss = ss + (v - m) ^ 2 end
      local half = T975[#sz.d - 1] * math.sqrt(ss / (#sz.d - 1) / #sz.d)
      close(m, num(c[4]), tol, sz.name .. " mean")
      local lo, hi = interval(c[5])
      close(m - half, lo, tol, sz.name .. " lo")
      close(m + half, hi, tol, sz.name .. " hi")
      close(want.at[i].fit, num(c[6]), tol, sz.name .. " fitted")
      local flo, fhi = interval(c[7])
      close(want.at[i].fit - T975[9] * want.at[i].se, flo, tol, sz.name .. " fit lo")
      close(want.at[i].fit + T975[9] * want.at[i].se, fhi, tol, sz.name .. " fit hi")
    end
    local beta, se, blo, bhi = out:match("per tenfold parameters%): (%S+), standard error (%S+), "
      .. "95%% CI (%b[])")
    assert.truthy(beta, out)
    close(want.beta, num(beta), tol, "beta")
    close(want.se_beta, num(se), tol, "se beta")
    blo, bhi = interval(blo)
    close(want.beta - T975[9] * want.se_beta, blo, tol, "beta lo")
    close(want.beta + T975[9] * want.se_beta, bhi, tol, "beta hi")
    -- the extrapolation, labelled, with both intervals
    local e = want.at[4]
    local fit, ci, pi = out:match("At 200,000,000 parameters, an extrapolation outside the sizes "
      .. "measured, 50x the largest %(4,000,000 parameters%): fitted roper %- rope (%S+), 95%% "
      .. "confidence interval of the mean (%b[]), 95%% prediction interval of one seed's "
      .. "difference (%b[])%. The intervals hold only if")
    assert.truthy(fit, out)
    close(e.fit, num(fit), tol, "extrapolated fit")
    local lo, hi = interval(ci)
    close(e.fit - T975[9] * e.se, lo, tol, "extrapolated lo")
    close(e.fit + T975[9] * e.se, hi, tol, "extrapolated hi")
    lo, hi = interval(pi)
    close(e.fit - T975[9] * e.se_pred, lo, tol, "prediction lo")
    close(e.fit + T975[9] * e.se_pred, hi, tol, "prediction hi")
    assert.is_nil(out:find("With two sizes", 1, true))
    -- inside the sizes and below them
    local inside = h.run(("%s scripts/pairs_report.lua %s %s %s --trend roper/rope --extrapolate "
      .. "1e6"):format(BIN, folders[1], folders[2], folders[3]))
    assert.truthy(inside:find("At 1,000,000 parameters, inside the sizes measured (500,000 to "
      .. "4,000,000 parameters): an interpolation: fitted", 1, true), inside)
    local below = h.run(("%s scripts/pairs_report.lua %s %s %s --trend roper/rope --extrapolate "
      .. "1e5"):format(BIN, folders[1], folders[2], folders[3]))
    assert.truthy(below:find("At 100,000 parameters, an extrapolation outside the sizes measured, "
      .. "1/5 of the smallest (500,000 parameters): fitted", 1, true), below)
    -- two sizes: said to be no test of the line's shape
    local two = h.run(("%s scripts/pairs_report.lua %s %s --trend roper/rope"):format(BIN,
      folders[1], folders[3]))
    assert.truthy(two:find("With two sizes the line goes through both folders' means", 1, true), two)
  end)

  it("draws roper - rope against training tokens per folder, with its band over the seeds", function()
    -- valid_loss of rope and roper at each step (seeds 1-3); roper's seed 3 has no point at 300
    local rope = { { 5.0, 4.5, 4.2 }, { 5.1, 4.6, 4.3 }, { 4.9, 4.4, 4.1 } }
    local d = { { 0.03, 0.020, 0.010 }, { 0.05, 0.025, 0.014 }, { 0.04, 0.015 } }
    local roper = {}
    for s = 1, 3 do
      roper[s] = {}
      for i, v in ipairs(d[s]) do roper[s][i] = rope[s][i] + v end
    end
    local values = { rope = { 4.2, 4.3, 4.1 }, roper = { 4.21, 4.314, 4.115 },
      none = { 4.5, 4.6, 4.4 } }
    local g = comparison("gap", { params = 409600, values = values,
      valid = { rope = rope, roper = roper } })
    local out, err, code = h.run(("%s scripts/pairs_report.lua %s --gap-curve roper/rope")
      :format(BIN, g))
    assert.are.equal(0, code, err)
    assert.truthy(out:find("| step | tokens (M) | tokens/param | pairs | mean roper - rope | "
      .. "95% band |", 1, true), out)
    for i, step in ipairs(STEPS) do
      local line = assert(out:match("\n| " .. step .. " | ([^\n]*) |\n"), out)
      local c = cells(line)
      local list = {}
      for s = 1, 3 do list[#list + 1] = d[s][i] end
      local n = #list
      assert.are.equal(("%.4g"):format(step * TOKENS / 1e6), c[1])
      assert.are.equal(("%.3g"):format(step * TOKENS / 409600), c[2])
      assert.are.equal(tostring(n), c[3])
      local m, ss = 0, 0
      for _, v in ipairs(list) do m = m + v / n end
      for _, v in ipairs(list) do ss = ss + (v - m) ^ 2 end
      local half = T975[n - 1] and T975[n - 1] * math.sqrt(ss / (n - 1) / n)
      if n == 2 then half = 12.706205 * math.sqrt(ss / n) end -- t(0.975, 1)
      close(m, num(c[4]), 0.5e-4 + 1e-9, step .. " mean")
      local lo, hi = interval(c[5])
      close(m - half, lo, 0.5e-4 + 1e-9, step .. " lo")
      close(m + half, hi, 0.5e-4 + 1e-9, step .. " hi")
    end
    -- the plot beside the folder's other plots, its data the table's
    assert.truthy(out:find("Gap curve: `" .. g .. "/lm_gap_roper-rope.png`, `" .. g
      .. "/lm_gap_roper-rope.svg`.", 1, true), out)
    for _, ext in ipairs { ".png", ".svg", ".gp", ".dat" } do
      assert.truthy(h.read(g .. "/lm_gap_roper-rope" .. ext), ext)
    end
    local blocks = h.gnuplot_blocks(assert(h.read(g .. "/lm_gap_roper-rope.dat")))
    assert.are.equal(4, #blocks) -- the mean and band, then a block per seed
    close(200 * TOKENS / 1e6, blocks[1][2][1], 1e-12, "x in millions of tokens")
    close(0.02, blocks[1][2][2], 1e-6, "mean at 200")
    assert.are.equal(2, #blocks[4]) -- seed 3: two points
    -- with --lm and --trend, the trend's pair gets its gap curve too (a folder without curves
    -- says so); the folders' sizes differ
    local s2 = h.run(("%s scripts/pairs_report.lua %s %s --lm --trend roper/rope"):format(BIN,
      g, folders[2]))
    assert.truthy(s2:find("Gap curve: `" .. g .. "/lm_gap_roper-rope.png`", 1, true), s2)
    assert.truthy(s2:find("No gap curve of roper - rope: no seed has validation curves of both "
      .. "roper and rope.", 1, true), s2)
  end)

  it("refuses in one line naming the option, exit 2", function()
    local function refused(args, want)
      local out, err, code = h.run(("%s scripts/pairs_report.lua %s"):format(BIN, args))
      assert.are.equal(2, code, args .. "\n" .. out .. err)
      assert.are.equal("", out)
      assert.are.equal("pairs_report.lua: " .. want .. "\n", err)
    end
    local s, m, l = folders[1], folders[2], folders[3]
    refused(s .. " --trend roper/rope", "--trend roper/rope: two folders or more of different "
      .. "sizes expected, 1 given")
    refused(("%s %s --trend roper/rope"):format(s, s), "--trend roper/rope: 2 folders of one size "
      .. "(500,000 parameters): a trend needs two sizes or more")
    refused(("%s %s --trend roper/xpos"):format(s, m), "--trend roper/xpos: two methods a/b of "
      .. "every folder expected (s has rope, roper and none)")
    refused(("%s %s --trend roper"):format(s, m), "--trend roper: two methods a/b expected")
    refused(("%s %s --trend roper/rope --extrapolate 2e8x"):format(s, m), "--extrapolate 2e8x: "
      .. "a parameter count > 0 expected (2e8, say)")
    refused(("%s %s --trend roper/rope --extrapolate=-5"):format(s, m), "--extrapolate -5: "
      .. "a parameter count > 0 expected (2e8, say)")
    refused(("%s %s --extrapolate 2e8"):format(s, m), "--extrapolate needs --trend")
    refused(l .. " --gap-curve roper/xpos", "--gap-curve roper/xpos: l: two methods a/b expected "
      .. "(the methods: rope, roper and none)")
    refused(l .. " --gap-curve roper/rope", "--gap-curve roper/rope: l: no seed has validation "
      .. "curves of both roper and rope")
    -- a folder whose runs disagree on params, or lack them
    local v = { rope = { 4, 4.1 }, roper = { 4.01, 4.12 }, none = { 4.3, 4.4 } }
    local odd = comparison("odd", { params = 2000000, values = v,
      params_of = { ["rope-s2"] = 2000001 } })
    refused(("%s %s --trend roper/rope"):format(s, odd), "--trend roper/rope: odd: runs roper-s1 "
      .. "and rope-s2 disagree on params (2,000,000 and 2,000,001)")
    local bare = comparison("bare", { values = v })
    refused(("%s %s --trend roper/rope"):format(s, bare), "--trend roper/rope: bare: run "
      .. "roper-s1 has no params")
    -- one pair in all three folders but too few differences for a line with an interval
    local one1 = comparison("one1", { params = 1000, values = { rope = { 4 }, roper = { 4.1 },
      none = { 4.2 } } })
    local one2 = comparison("one2", { params = 2000, values = { rope = { 4 }, roper = { 4.1 },
      none = { 4.2 } } })
    refused(("%s %s --trend roper/rope"):format(one1, one2), "--trend roper/rope: 2 per-seed "
      .. "differences: a line with an interval needs 3 or more")
  end)
end)

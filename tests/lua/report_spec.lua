-- scripts/lib/report.lua (issue 16): the table of every pair of methods (paired intervals, effect
-- sizes, Holm) and the jump endpoint (Fisher, log-rank, Kaplan-Meier), on made-up runs whose
-- answers are worked out by hand here, and compare.lua writing both.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. dir .. "../../scripts/?.lua;" .. package.path
local h = require "helpers"
local report = require "lib.report"
local stats = require "lib.stats"

local BIN = h.BIN

-- a group of runs: values by seed (nil: diverged), curves optional
local function group(label, values, curves)
  local g = { label = label, runs = {} }
  for seed, v in pairs(values) do
    g.runs[#g.runs + 1] = { seed = seed, res = { value = v ~= false and v or nil,
      curve = curves and curves[seed] } }
  end
  table.sort(g.runs, function(x, y) return x.seed < y.seed end)
  return g
end

local function close(want, got, tol, what)
  assert.is_true(math.abs(want - got) <= tol, ("%s: want %.10g, got %.10g"):format(what, want, got))
end

describe("report.differences", function()
  -- b - a at seeds 1..5: 1, 2, 3, 4, 5 (mean 3, sd sqrt(2.5)); c lacks seed 5 and diverged at 4
  local a = group("a", { 10, 10, 10, 10, 10 })
  local b = group("b", { 11, 12, 13, 14, 15 })
  local c = group("c", { 9, 10, 12, false, 20, [6] = 7 })
  local d = report.differences({ a, b, c }, "correct")

  it("has every pair, later minus earlier, paired over the seeds both have", function()
    assert.are.equal(3, #d.rows)
    assert.are.same({ "a", "b" }, { d.rows[1].a, d.rows[1].b })
    assert.are.same({ "a", "c" }, { d.rows[2].a, d.rows[2].b })
    assert.are.same({ "b", "c" }, { d.rows[3].a, d.rows[3].b })
    assert.are.equal(5, d.rows[1].pairs)
    -- c: seeds 1, 2, 3, 5 (4 diverged, 6 not in a)
    assert.are.equal(4, d.rows[2].pairs)
    close(3, d.rows[1].mean_diff, 1e-12, "b - a")
    close(((9 + 10 + 12 + 20) - 40) / 4, d.rows[2].mean_diff, 1e-12, "c - a")
  end)

  it("gives the paired t interval, d_z and p by the closed forms", function()
    local r = d.rows[1]
    -- mean 3, sd sqrt(2.5), n 5: half width t_{0.975,4} sqrt(2.5 / 5), t_{0.975,4} = 2.776445105
    local half = 2.776445105 * math.sqrt(0.5)
    close(3 - half, r.t_lo, 1e-8, "t lo")
    close(3 + half, r.t_hi, 1e-8, "t hi")
    close(3 / math.sqrt(2.5), r.d_z, 1e-12, "d_z")
    -- t = 3 / sqrt(0.5) on 4 df: two-sided p = 1 - x (3 - x^2) / 2 with x = t / sqrt(4 + t^2)
    -- (the closed form of Student's t at 4 degrees of freedom)
    local t = 3 / math.sqrt(0.5)
    local x = t / math.sqrt(4 + t * t)
    close(1 - x * (3 - x * x) / 2, r.p_t, 1e-9, "p_t")
    -- every difference positive: the sign-flip p is its floor 2 / 32, which cannot reach 0.05
    close(0.0625, r.p_sign, 1e-15, "p_sign")
    assert.is_false(r.sign_can_reach)
    -- 5 pairs: too few for a bootstrap interval (report.BOOTSTRAP_MIN_PAIRS)
    assert.are.equal(10, report.BOOTSTRAP_MIN_PAIRS)
    assert.is_nil(r.boot_lo)
    assert.is_nil(r.boot_hi)
  end)

  it("gives the bootstrap interval from 10 pairs on, and says why not below", function()
    -- b - a = 1..10 at seeds 1..10; c - a the same but seed 10 missing (9 pairs)
    local va, vb, vc = {}, {}, {}
    for i = 1, 10 do va[i], vb[i], vc[i] = 0, i, i end
    vc[10] = nil
    local t = report.differences({ group("a", va), group("b", vb), group("c", vc) }, "loss")
    local ten, nine = t.rows[1], t.rows[2]
    assert.are.same({ 10, 9 }, { ten.pairs, nine.pairs })
    -- the interval of stats.bootstrap_ci itself, with the table's resamples and seed
    local d = {}
    for i = 1, 10 do d[i] = i end
    local lo, hi = stats.bootstrap_ci(d, va, { paired = true, samples = 10000, seed = 1 })
    assert.are.same({ lo, hi }, { ten.boot_lo, ten.boot_hi })
    assert.is_true(lo > 1 and lo < 5.5 and hi > 5.5 and hi < 10)
    assert.is_nil(nine.boot_lo)
    local text = report.differences_markdown(t, "loss")
    assert.truthy(text:find(("| c - a | 9 | +5.0000 | [%+.4f, %+.4f] | under 10 pairs |")
      :format(nine.t_lo, nine.t_hi), 1, true), text)
    assert.truthy(text:find(("| b - a | 10 | +5.5000 | [%+.4f, %+.4f] | [%+.4f, %+.4f] |")
      :format(ten.t_lo, ten.t_hi, lo, hi), 1, true), text)
    assert.truthy(text:find("and, from 10 pairs on, its percentile bootstrap interval (10000 "
      .. "resamples of the pairs)", 1, true), text)
    -- C(17, 9) = 24310 distinct resamples of 9 pairs
    assert.truthy(text:find("\nNo bootstrap interval below 10 pairs: n pairs have only "
      .. "C(2n - 1, n) distinct resamples (24310 for 9 pairs), and with so few the percentile "
      .. "interval is too narrow (for normal differences a 95% interval held the true mean in "
      .. "only 75-80% of tables of 3 pairs and about 90% of tables of 10); the t interval is the "
      .. "one to read.\n", 1, true), text)
    -- 10 pairs and more: no such note
    local only_ten = report.differences({ group("a", va), group("b", vb) }, "loss")
    assert.is_nil(report.differences_markdown(only_ten, "loss"):find("No bootstrap", 1, true))
  end)

  it("counts every sign pattern up to 20 pairs and marks the sampled sign-flip p beyond", function()
    -- b - a = 1..n, all positive: only the two all-same sign patterns reach |sum|, p = 2 / 2^n
    local function table_of(n)
      local va, vb = {}, {}
      for i = 1, n do va[i], vb[i] = 0, i end
      local t = report.differences({ group("a", va), group("b", vb) }, "loss")
      return t.rows[1], report.differences_markdown(t, "loss")
    end
    local twenty, text20 = table_of(20)
    assert.is_true(twenty.sign_exact)
    assert.are.equal(2 / 2 ^ 20, twenty.p_sign)
    assert.truthy(text20:find("| 1.91e-06 |\n", 1, true), text20)
    assert.is_nil(text20:find("(sampled)", 1, true), text20)
    -- 21 pairs: 100,000 sampled patterns (the observed one counted once), so p >= 1 / 100001
    local twentyone, text21 = table_of(21)
    assert.is_false(twentyone.sign_exact)
    assert.is_true(twentyone.p_sign >= 1 / 100001 and twentyone.p_sign < 1e-4, twentyone.p_sign)
    assert.truthy(text21:find(("| %s (sampled) |\n"):format(("%.3g"):format(twentyone.p_sign)), 1,
      true), text21)
  end)

  it("has no Holm columns for one comparison", function()
    local one = report.differences({ group("a", { 10, 10, 10 }), group("b", { 11, 12, 14 }) },
      "correct")
    assert.are.equal(1, one.family)
    local text = report.differences_markdown(one, "correct")
    assert.truthy(text:find("\n| difference | pairs | mean diff | 95% t CI | 95% bootstrap CI | "
      .. "d_z | paired t p | sign-flip p |\n|---|---|---|---|---|---|---|---|\n", 1, true), text)
    local r = one.rows[1]
    assert.truthy(text:find(("\n| b - a | 3 | +2.33 | [%+.2f, %+.2f] | under 10 pairs | %.2f | %s "
      .. "| 0.25 † |\n"):format(r.t_lo, r.t_hi, r.d_z, ("%.3g"):format(r.p_t)), 1, true), text)
    assert.truthy(text:find("and the paired t and sign-flip p-values (one comparison: no "
      .. "adjustment). The sign-flip p counts every sign pattern of the differences up to 20 "
      .. "pairs and a sample of them beyond (marked sampled).", 1, true), text)
    -- 3 pairs: every pattern counted, nothing marked
    assert.is_nil(text:find("(sampled)", 1, true), text)
    assert.is_nil(text:find("Holm", 1, true), text)
    -- two comparisons: both Holm columns
    local two = report.differences({ group("a", { 10, 10, 10 }), group("b", { 11, 12, 14 }),
      group("c", { 9, 9, 8 }) }, "correct")
    assert.truthy(report.differences_markdown(two, "correct"):find("| paired t p | Holm | "
      .. "sign-flip p | Holm |\n", 1, true))
    -- the compact table: p without Holm for one comparison
    local compact = report.compact_markdown({ { name = "x", groups = { group("a", { 10, 10, 10 }),
      group("b", { 11, 12, 14 }) } } }, one, { { "b", "a" } }, "correct")
    assert.truthy(compact:find("In short (method means; a - b paired by seed, p the paired "
      .. "t-test's; one comparison: no adjustment):\n\n| folder | a | b | b - a [95% t CI] | p |\n",
      1, true), compact)
    assert.truthy(compact:find(("| x | 10.0 | 12.3 | +2.33 [%+.2f, %+.2f] | %s |\n"):format(r.t_lo,
      r.t_hi, ("%.3g"):format(r.p_t)), 1, true), compact)
  end)

  it("adjusts each family by Holm over the rows", function()
    local ps = {}
    for i, r in ipairs(d.rows) do ps[i] = r.p_t end
    -- Holm by hand: sort ascending, multiply by 3, 2, 1, running maximum
    local order = { 1, 2, 3 }
    table.sort(order, function(x, y) return ps[x] < ps[y] end)
    local run = 0
    for k, i in ipairs(order) do
      run = math.max(run, math.min(1, (4 - k) * ps[i]))
      close(run, d.rows[i].p_t_holm, 1e-15, "holm " .. i)
    end
  end)

  it("warns about the sign-flip floor with the pair counts that cannot reach 0.05", function()
    local text = report.differences_markdown(d, "correct")
    assert.truthy(text:find("| b - a | 5 | +3.00 | [+1.04, +4.96] |", 1, true), text)
    assert.truthy(text:find("0.0625 †", 1, true), text)
    assert.truthy(text:find("Warning: with 4 pairs the exact sign-flip test cannot give p below "
      .. "2 / 2^4 = 0.125, so it cannot reach 0.05 whatever the data", 1, true), text)
    assert.truthy(text:find("with 5 pairs", 1, true), text)
    assert.truthy(text:find("6 pairs are the fewest that can", 1, true), text)
    -- six pairs: no warning
    local six = report.differences({ group("a", { 1, 2, 3, 4, 5, 6 }),
      group("b", { 2, 4, 4, 6, 7, 9 }) }, "loss")
    assert.is_true(six.rows[1].sign_can_reach)
    assert.is_nil(report.differences_markdown(six, "loss"):find("Warning", 1, true))
  end)
end)

describe("the significance table (tables.test_row) and its floors", function()
  local tables = require "lib.tables"
  local function seeds(v)
    local t = {}
    for i, x in ipairs(v) do t[i] = x end
    return t
  end
  local function compare(a, b) return stats.compare(a, b, seeds(a), seeds(b)) end

  it("marks the exact permutation p that cannot reach 0.05 and says why, as the sign-flip p", function()
    -- 3 runs a method, every b above every a: the permutation p is its floor, 2 of the 20
    -- labellings (this one and its mirror), and the sign-flip p its floor 2 / 8
    local c = compare({ 1, 2, 3 }, { 11, 12, 13 })
    assert.are.equal(0.1, c.permutation_p)
    assert.are.equal(0.1, c.permutation_floor)
    assert.are.same({ "b - a", "+10.00", "12.25 (df 4.0)", ("%.3g"):format(c.welch_p), "0.1 †", "3",
      "-", "0.25 †" }, tables.test_row("b - a", c, "%+.2f"))
    assert.are.equal("Warning: with 3 runs a method the exact permutation test cannot give p "
      .. "below 2 / C(6, 3) = 0.1, so it cannot reach 0.05 whatever the data (marked †); 4 runs a "
      .. "method are the fewest that can.\n\nWarning: with 3 pairs the exact sign-flip test "
      .. "cannot give p below 2 / 2^3 = 0.25, so it cannot reach 0.05 whatever the data (marked "
      .. "†); 6 pairs are the fewest that can.\n", tables.test_warnings({ c, c }))
    assert.are.equal("Warning: with 3 runs a method the exact permutation test cannot give p "
      .. "below 2 / C(6, 3) = 0.1, so it cannot reach 0.05 whatever the data (marked †); 4 runs a "
      .. "method are the fewest that can.\n", tables.test_warnings({ c }, { sign_flip = false }))
    -- 2 and 3 runs: no mirror labelling, the floor is 1 / C(5, 2) = 0.1
    local u = stats.compare({ 1, 2 }, { 11, 12, 13 }, {}, {})
    assert.are.equal(0.1, u.permutation_p)
    assert.are.equal("0.1 †", tables.test_row("b - a", u, "%+.2f")[5])
    assert.are.equal("Warning: with 2 and 3 runs the exact permutation test cannot give p below "
      .. "1 / C(5, 2) = 0.1, so it cannot reach 0.05 whatever the data (marked †).\n",
      tables.test_warnings({ u }))
    -- 4 runs a method can (2 / 70), 6 pairs can (2 / 64): no mark, no warning
    local four = compare({ 1, 2, 3, 4 }, { 11, 12, 13, 14 })
    assert.are.equal(2 / 70, four.permutation_p)
    assert.are.equal(("%.3g"):format(2 / 70), tables.test_row("b - a", four, "%+.2f")[5])
    assert.are.equal("", tables.test_warnings({ four }, { sign_flip = false }))
    local six = compare({ 1, 2, 3, 4, 5, 6 }, { 11, 12.5, 13, 14, 15, 16 })
    assert.are.equal("", tables.test_warnings({ six }))
    assert.is_nil(tables.test_row("b - a", six, "%+.2f")[8]:find("†", 1, true))
  end)
end)

describe("report.combine", function()
  it("labels each folder's rows and adjusts by Holm over all of them", function()
    local one = report.differences({ group("a", { 10, 10, 10, 10, 10 }),
      group("b", { 11, 12, 13, 14, 15 }), group("c", { 9, 10, 12, 13, 20 }) }, "correct")
    local two = report.differences({ group("a", { 1, 2, 3, 4, 5, 6 }),
      group("b", { 2, 4, 4, 6, 7, 9 }) }, "correct")
    local all = report.combine({ { name = "lr-1", d = one }, { name = "lr-2", d = two } })
    assert.are.equal(4, all.family)
    local ps = { one.rows[1].p_t, one.rows[2].p_t, one.rows[3].p_t, two.rows[1].p_t }
    local order = { 1, 2, 3, 4 }
    table.sort(order, function(x, y) return ps[x] < ps[y] end)
    local run = 0
    for k, i in ipairs(order) do
      run = math.max(run, math.min(1, (5 - k) * ps[i]))
      close(run, all.rows[i].p_t_holm, 1e-15, "holm " .. i)
      close(ps[i], all.rows[i].p_t, 0, "raw " .. i)
    end
    -- the folders' own tables keep their own adjustment
    close(math.min(1, two.rows[1].p_t), two.rows[1].p_t_holm, 1e-15, "one row")
    local text = report.differences_markdown(all, "correct")
    assert.truthy(text:find("| lr-1: b - a | 5 | +3.00 | [+1.04, +4.96] |", 1, true), text)
    assert.truthy(text:find("| lr-2: b - a | 6 |", 1, true), text)
    assert.truthy(text:find("Holm-adjusted over the 4 comparisons of this table", 1, true), text)
  end)
end)

describe("report.methods_markdown", function()
  it("drops the worst run by the metric's direction and counts the diverged", function()
    -- counts 10, 12, 14, 20: the worst is 10, (12 + 14 + 20) / 3 = 15.33, sd sqrt(56 / 3) = 4.32
    -- (whole counts print as integers, as in compare.lua's table)
    local text = report.methods_markdown({ group("a", { 12, 10, 20, 14 }),
      group("c", { 1, false, 3 }) }, "correct")
    assert.truthy(text:find("| method | runs | drop worst, mean | mean | median | min | max | std |",
      1, true), text)
    assert.truthy(text:find("\n| a | 4 | 15.33 | 14.00 | 13.00 | 10 | 20 | 4.32 |\n", 1, true),
      text)
    -- one diverged run is the one dropped: the rest's mean
    assert.truthy(text:find("\n| c (1 diverged) | 3 | 2.00 | 2.00 | 2.00 | 1 | 3 | 1.41 |\n",
      1, true), text)
    -- a loss: the worst is the largest
    local loss = report.methods_markdown({ group("b", { 0.3, 0.5, 0.4 }) }, "loss")
    assert.truthy(loss:find("\n| b | 3 | 0.3500 | 0.4000 | 0.4000 | 0.3000 | 0.5000 | 0.1 |\n",
      1, true), loss)
  end)
end)

describe("report.interaction", function()
  it("tests the change of a paired difference between two comparisons by Welch", function()
    -- first: b - a = 1, 2, 3 (mean 2, var 1); second: 5, 9 (mean 7, var 8)
    local first = { group("a", { 10, 10, 10 }), group("b", { 11, 12, 13 }) }
    local second = { group("a", { 0, 0, 50 }), group("b", { 5, 9 }) } -- seed 3 has no pair
    local r = report.interaction(first, second, "a", "b")
    assert.are.same({ 3, 2 }, { r.n1, r.n2 })
    close(2, r.diff1, 1e-12, "diff1")
    close(7, r.diff2, 1e-12, "diff2")
    close(5, r.change, 1e-12, "change")
    -- se^2 = 8 / 2 + 1 / 3 = 13 / 3; df = (13/3)^2 / (16 / 1 + (1/9) / 2)
    local se2 = 13 / 3
    close(5 / math.sqrt(se2), r.t, 1e-12, "t")
    close(se2 ^ 2 / (16 + 1 / 18), r.df, 1e-12, "df")
    local q = stats.t_quantile(0.975, r.df)
    close(5 - q * math.sqrt(se2), r.lo, 1e-9, "lo")
    close(5 + q * math.sqrt(se2), r.hi, 1e-9, "hi")
    close(stats.t_sf2(r.t, r.df), r.p, 1e-12, "p")
    assert.is_nil(report.interaction(first, { group("a", { 1 }), group("b", { 2 }) }, "a", "b"))
    local text = report.interaction_markdown({ r }, { "small", "large" }, "correct")
    assert.truthy(text:find("| b - a | +2.00 (3) | +7.00 (2) | +5.00 |", 1, true), text)
  end)
end)

describe("report.jumps", function()
  -- curves logged every 10 steps to step 100; a run jumps where its loss first falls below 1
  local function curve(jump_at)
    local c = {}
    for s = 10, 100, 10 do c[#c + 1] = { step = s, loss = (jump_at and s >= jump_at) and 0.5 or 2 } end
    return c
  end
  local late = group("late", { 1, 2, 3, 4 }, { curve(nil), curve(nil), curve(nil), curve(nil) })
  local early = group("early", { 90, 80, 70, 60 }, { curve(10), curve(10), curve(10), curve(10) })
  local mixed = group("mixed", { 5, 6, 7, 8 }, { curve(30), curve(nil), curve(50), curve(nil) })
  local j = report.jumps({ late, early, mixed }, 1.0)

  it("finds each run's jump step, censoring the runs that never jump", function()
    assert.are.equal(0, j.methods[1].jumped)
    assert.are.equal(4, j.methods[2].jumped)
    assert.are.equal(2, j.methods[3].jumped)
    assert.are.same({ 30, 100, 50, 100 }, { j.methods[3].by_run[1].step, j.methods[3].by_run[2].step,
      j.methods[3].by_run[3].step, j.methods[3].by_run[4].step })
    assert.is_false(j.methods[3].by_run[2].jumped)
    assert.are.equal(10, j.methods[2].median_step)
    -- mixed: KM 3/4 after step 30, 3/4 * 2/3 = 1/2 after step 50: the median is 50
    assert.are.equal(50, j.methods[3].median_step)
    assert.is_nil(j.methods[1].median_step)
    close(75, j.methods[2].mean_after, 1e-12, "early after")
    close(6, j.methods[3].mean_after, 1e-12, "mixed after") -- seeds 1 and 3: 5 and 7
  end)

  it("tests the jump rates by Fisher and the jump steps by log-rank", function()
    local t = j.tests[1] -- early vs late
    assert.are.same({ "late", "early" }, { t.a, t.b })
    -- 4 of 4 against 0 of 4: two tables as extreme, each 1 / C(8, 4): p = 2 / 70
    close(2 / 70, t.fisher_p, 1e-12, "fisher")
    -- at step 10: n = 8 at risk, d = 4 events, all in early: E = 2, V = 4*4*4*4 / (64 * 7)
    local v = 256 / 448
    close((4 - 2) ^ 2 / v, t.logrank_chi2, 1e-12, "chi2")
    close(0.0081509, t.logrank_p, 1e-6, "log-rank p") -- P(chi2_1 >= 7)
    -- Holm over the three pairs of each family
    assert.is_true(t.fisher_p_holm >= t.fisher_p and t.logrank_p_holm >= t.logrank_p)
  end)

  it("draws the Kaplan-Meier steps and writes the tables", function()
    local km = report.km_series(j, 100)
    assert.are.same({ { 0, 1 }, { 30, 0.75 }, { 50, 0.5 }, { 100, 0.5 } }, km[3].points)
    assert.are.same({ { 0, 1 }, { 100, 1 } }, km[1].points)
    local text = report.jumps_markdown(j, "correct")
    assert.truthy(text:find("| early | 4 | 4 | 100% | 10 | 75.00 |", 1, true), text)
    assert.truthy(text:find("| late | 4 | 0 | 0% | not reached | - |", 1, true), text)
    assert.truthy(text:find("| early vs late | 0.0286 |", 1, true), text)
    assert.truthy(text:find("Holm over the pairs, each test its own family.\n\n| pair | Fisher p | "
      .. "Holm | log-rank chi2 | log-rank p | Holm |\n", 1, true), text)
    assert.is_nil(report.jumps({ late }, nil))
    -- one pair: no Holm columns
    local one = report.jumps_markdown(report.jumps({ late, early }, 1.0), "correct")
    assert.truthy(one:find("(censored runs included); one pair: no adjustment.\n\n| pair | "
      .. "Fisher p | log-rank chi2 | log-rank p |\n|---|---|---|---|\n| early vs late | 0.0286 | "
      .. "7 | 0.00815 |\n", 1, true), one)
  end)

  it("gives the jump counts and raw p at each threshold, one row each", function()
    -- below 1.0 as above; below 3.0 every run "jumps" at its first point (every loss is 0.5 or 2)
    local text = report.jump_sensitivity_markdown({ late, early }, { 1.0, 3.0 })
    assert.truthy(text:find("| threshold | late jumped | early jumped | early vs late Fisher p | "
      .. "log-rank p |", 1, true), text)
    -- Fisher and log-rank as in the test above (4 of 4 against 0 of 4; chi2 7)
    assert.truthy(text:find("\n| 1 | 0/4 | 4/4 | 0.0286 | 0.00815 |\n", 1, true), text)
    -- all jump at step 10 on both sides: nothing to tell apart
    assert.truthy(text:find("\n| 3 | 4/4 | 4/4 | 1 | ", 1, true), text)
  end)
end)

describe("compare.lua with the new tables", function()
  it("writes every pair's row, the jump tables and the Kaplan-Meier plot", function()
    local out = h.tmpdir()
    local _, err, code = h.run(("%s scripts/compare.lua --methods rope roper --seeds 2 --steps 20 "
      .. "--d-model 16 --heads 2 --layers 1 --seq-len 32 --batch 4 --problems 4 --valid-batches 1 "
      .. "--log-every 5 --jobs 2 --quiet --jump-loss 3.4 --out %s"):format(h.sh_quote(BIN),
      h.sh_quote(out)))
    assert.are.equal(0, code, err)
    local md = h.read(out .. "/summary.md")
    assert.truthy(md:find("| roper - rope | 2 |", 1, true), md)
    -- the significance table: 2 runs a method cannot give a permutation p below 1/3, and the
    -- sign-flip floor is warned once, under the table of every pair
    assert.truthy(md:find("\n| roper %- rope | [^|]* | [^|]* | [^|]* | [%d.]+ † | 2 | "), md)
    assert.truthy(md:find("\nWarning: with 2 runs a method the exact permutation test cannot give "
      .. "p below 2 / C(4, 2) = 0.3333, so it cannot reach 0.05 whatever the data (marked †); 4 "
      .. "runs a method are the fewest that can.\n", 1, true), md)
    local _, warned = md:gsub("Warning: with 2 pairs the exact sign%-flip test", "")
    assert.are.equal(1, warned, md)
    assert.truthy(md:find("Jumps (training loss below 3.4)", 1, true), md)
    -- counts say of how many problems, in every table that holds one
    assert.truthy(md:find("| method | runs | drop worst, mean (of 4) | mean (of 4) |", 1, true), md)
    assert.truthy(md:find("| method | seed | correct (of 4) | greedy (of 4) |", 1, true), md)
    assert.truthy(md:find("| rate | median jump step | metric when jumped (of 4) |", 1, true), md)
    -- the reading comes first, with the runs that learned the task
    local reading = md:match("## What this run shows\n\n(.-)\nScale:")
    assert.truthy(reading, md)
    assert.truthy(reading:find("Runs that learned the task (training loss fell below 3.4): rope ",
      1, true), reading)
    local s = h.read_json(out .. "/summary.json")
    assert.are.equal(1, #s.differences.rows)
    assert.are.equal(3.4, s.jumps.threshold)
    assert.truthy(h.read(out .. "/jumps.png"))
    -- pairs_report.lua recomputes the same tables from the run files
    local text, rerr, rcode = h.run(("%s scripts/pairs_report.lua %s --jump-loss 3.4"):format(
      h.sh_quote(BIN), h.sh_quote(out)))
    assert.are.equal(0, rcode, rerr)
    local row = md:match("(| roper %- rope | 2 |[^\n]*)")
    assert.truthy(text:find(row, 1, true), text)
    assert.truthy(text:find("Jumps (training loss below 3.4)", 1, true), text)
    local ftl, ferr, fcode = h.run(("%s scripts/pairs_report.lua %s --metric final_train_loss")
      :format(h.sh_quote(BIN), h.sh_quote(out)))
    assert.are.equal(0, fcode, ferr)
    assert.truthy(ftl:find("final training loss, the mean of the last 5 curve points", 1, true))
    -- the method rows of the final training loss: of 2 runs, the drop-worst mean is the smaller
    local l1 = h.read_json(out .. "/runs/roper-s1.json").final_train_loss
    local l2 = h.read_json(out .. "/runs/roper-s2.json").final_train_loss
    local roper_row = ("\n| roper | 2 | %.4f | %.4f |"):format(math.min(l1, l2), (l1 + l2) / 2)
    assert.truthy(ftl:find(roper_row, 1, true), roper_row .. "\n" .. ftl)
    -- the mean of every curve point, and a seed left out
    local mtl, merr0, mcode0 = h.run(("%s scripts/pairs_report.lua %s --metric mean_train_loss "
      .. "--skip-seeds 2"):format(h.sh_quote(BIN), h.sh_quote(out)))
    assert.are.equal(0, mcode0, merr0)
    assert.truthy(mtl:find("(mean training loss, of every curve point; seeds 2 left out): rope 1 "
      .. "runs, roper 1 runs", 1, true), mtl)
    local c1, sum1 = h.read_json(out .. "/runs/roper-s1.json").curve, 0
    for _, pt in ipairs(c1) do sum1 = sum1 + pt.loss end
    local mean_row = ("\n| roper | 1 | %.4f | %.4f |"):format(sum1 / #c1, sum1 / #c1)
    assert.truthy(mtl:find(mean_row, 1, true), mean_row .. "\n" .. mtl)
    -- the evaluation loss
    local evl, everr, evcode = h.run(("%s scripts/pairs_report.lua %s --metric eval_loss")
      :format(h.sh_quote(BIN), h.sh_quote(out)))
    assert.are.equal(0, evcode, everr)
    assert.truthy(evl:find("(evaluation loss, the held-out batches' mean): rope 2 runs, roper 2 "
      .. "runs", 1, true), evl)
    local e1 = h.read_json(out .. "/runs/roper-s1.json").eval_loss
    local e2 = h.read_json(out .. "/runs/roper-s2.json").eval_loss
    local eval_row = ("\n| roper | 2 | %.4f | %.4f |"):format(math.min(e1, e2), (e1 + e2) / 2)
    assert.truthy(evl:find(eval_row, 1, true), eval_row .. "\n" .. evl)
    local _, serr0, scode0 = h.run(("%s scripts/pairs_report.lua %s --skip-seeds 1-x"):format(
      h.sh_quote(BIN), h.sh_quote(out)))
    assert.are.equal(2, scode0)
    assert.are.equal("pairs_report.lua: --skip-seeds 1-x: seeds and ranges expected, as 1-4,7 "
      .. "or DIR=1-4\n", serr0)
    -- a range from the larger seed down, and a folder that is not among those given: refused
    -- (they would leave out nothing); a huge range costs nothing (ranges, not every seed)
    _, serr0, scode0 = h.run(("%s scripts/pairs_report.lua %s --skip-seeds 3-1"):format(
      h.sh_quote(BIN), h.sh_quote(out)))
    assert.are.equal(2, scode0)
    assert.are.equal("pairs_report.lua: --skip-seeds 3-1: 3-1 is not a range of seeds from the "
      .. "smaller up, as 1-4\n", serr0)
    _, serr0, scode0 = h.run(("%s scripts/pairs_report.lua %s --skip-seeds %s=1"):format(
      h.sh_quote(BIN), h.sh_quote(out), h.sh_quote(out .. "X")))
    assert.are.equal(2, scode0)
    assert.are.equal("pairs_report.lua: --skip-seeds " .. out .. "X=1: " .. out .. "X is not one "
      .. "of the folders given\n", serr0)
    _, serr0, scode0 = h.run(("%s scripts/pairs_report.lua %s --skip-seeds =1"):format(
      h.sh_quote(BIN), h.sh_quote(out)))
    assert.are.equal(2, scode0)
    assert.are.equal("pairs_report.lua: --skip-seeds =1: a folder expected before =\n", serr0)
    -- the folder written another way is the folder given
    local other = h.run(("%s scripts/pairs_report.lua %s --metric mean_train_loss --skip-seeds "
      .. "%s/./=2"):format(h.sh_quote(BIN), h.sh_quote(out), h.sh_quote(out)))
    assert.truthy(other:find("seeds 2 left out): rope 1 runs, roper 1 runs", 1, true), other)
    local huge, herr, hcode = h.run(("%s scripts/pairs_report.lua %s --skip-seeds 2-99999999999")
      :format(h.sh_quote(BIN), h.sh_quote(out)))
    assert.are.equal(0, hcode, herr)
    assert.truthy(huge:find("seeds 2-99999999999 left out): rope 1 runs, roper 1 runs", 1, true),
      huge)
    -- a diverged run has no value under the training-loss metrics (its curve's finite points
    -- before it diverged are not its loss): the method row says so
    local dv = h.tmpdir()
    assert(os.execute("cp -r " .. h.sh_quote(out) .. "/. " .. h.sh_quote(dv)))
    local f2 = dv .. "/runs/roper-s2.json"
    h.write(f2, (h.read(f2):gsub('"diverged":false', '"diverged":true')))
    for _, metric in ipairs { "final_train_loss", "mean_train_loss" } do
      local dout, derr, dcode = h.run(("%s scripts/pairs_report.lua %s --metric %s"):format(
        h.sh_quote(BIN), h.sh_quote(dv), metric))
      assert.are.equal(0, dcode, derr)
      assert.truthy(dout:find("\n| roper (1 diverged) | 2 |", 1, true), dout)
    end
    h.remove_tree(dv)
    -- a folder's own list: here the only folder, so the same runs are left out
    local own = h.run(("%s scripts/pairs_report.lua %s --metric mean_train_loss --skip-seeds %s=2")
      :format(h.sh_quote(BIN), h.sh_quote(out), h.sh_quote(out)))
    assert.truthy(own:find("seeds 2 left out): rope 1 runs, roper 1 runs", 1, true), own)
    -- --interaction wants two folders
    local _, ierr, icode = h.run(("%s scripts/pairs_report.lua %s --interaction roper/rope")
      :format(h.sh_quote(BIN), h.sh_quote(out)))
    assert.are.equal(2, icode)
    assert.are.equal("pairs_report.lua: --interaction compares two folders, 1 given\n", ierr)
    -- the same folder twice: the change is 0 (and Welch's p 1)
    local same = h.run(("%s scripts/pairs_report.lua %s %s/ --interaction roper/rope --metric "
      .. "final_train_loss"):format(h.sh_quote(BIN), h.sh_quote(out), h.sh_quote(out)))
    assert.truthy(same:find("| roper - rope | ", 1, true) and same:find(" | +0.0000 | ", 1, true),
      same)
    local _, uerr, ucode = h.run(("%s scripts/pairs_report.lua %s/nowhere"):format(
      h.sh_quote(BIN), h.sh_quote(out)))
    assert.are.equal(2, ucode)
    assert.truthy(uerr:find("^pairs_report.lua: "), uerr)
    -- two folders (here the same one twice): each its tables, then both rows in one table,
    -- Holm over the two (the final training loss: the tiny runs' counts are all 0)
    local both, berr, bcode = h.run(("%s scripts/pairs_report.lua %s %s/ --metric "
      .. "final_train_loss"):format(h.sh_quote(BIN), h.sh_quote(out), h.sh_quote(out)))
    assert.are.equal(0, bcode, berr)
    local function p_of(text, label)
      local cells = {}
      for c in text:match("\n| " .. label:gsub("%p", "%%%0") .. " |([^\n]*)"):gmatch("([^|]+)|") do
        cells[#cells + 1] = c:match("^%s*(.-)%s*$")
      end
      return tonumber(cells[6]), cells[7] -- paired t p and the next cell
    end
    local p, sign = p_of(ftl, "roper - rope")
    assert.is_true(p > 0 and p <= 1, ftl)
    -- one row: no Holm column (the sign-flip p of 2 pairs, which cannot reach 0.05, follows the
    -- paired t p)
    assert.truthy(sign:match("^[%d.]+ †$"), sign)
    assert.truthy(ftl:find("| d_z | paired t p | sign-flip p |\n", 1, true), ftl)
    assert.truthy(both:find("All 2 folders together (Holm over every row):", 1, true), both)
    local name = out:match("[^/]+$")
    local _, n = both:gsub(("| %s: roper - rope | 2 |"):format(name):gsub("%p", "%%%0"), "")
    assert.are.equal(2, n, both)
    local p2, adj = p_of(both, name .. ": roper - rope")
    adj = tonumber(adj)
    assert.are.equal(p, p2)
    close(math.min(1, 2 * p), adj, 5e-3 * adj, "Holm over two equal rows")
    -- --pairs: the compact table, a row per folder, from the rows of the table of all folders
    -- (a - b either way round: rope - roper is roper - rope negated, its interval turned)
    local short, serr, scode = h.run(("%s scripts/pairs_report.lua %s %s/ --metric "
      .. "final_train_loss --pairs roper/rope rope/roper"):format(h.sh_quote(BIN), h.sh_quote(out),
      h.sh_quote(out)))
    assert.are.equal(0, scode, serr)
    local cells = {}
    for c in both:match("\n| " .. (name .. ": roper - rope"):gsub("%p", "%%%0")
      .. " |([^\n]*)"):gmatch("([^|]+)|") do
      cells[#cells + 1] = c:match("^%s*(.-)%s*$")
    end
    local diff, lo, hi = cells[2], cells[3]:match("^%[(%S+), (%S+)%]$")
    local neg = function(v) return v:sub(1, 1) == "+" and "-" .. v:sub(2) or "+" .. v:sub(2) end
    local l1 = h.read_json(out .. "/runs/rope-s1.json").final_train_loss
    local l2 = h.read_json(out .. "/runs/rope-s2.json").final_train_loss
    local row = ("| %s | %.4f | "):format(name, (l1 + l2) / 2)
    local _, rows = short:gsub(row:gsub("%p", "%%%0"), "")
    assert.are.equal(2, rows, short)
    local want = ("%s [%s, %s] | %s (%s) | %s [%s, %s] | %s (%s) |\n"):format(diff, lo, hi,
      cells[6], cells[7], neg(diff), neg(hi), neg(lo), cells[6], cells[7])
    local _, same = short:gsub(want:gsub("%p", "%%%0"), "")
    assert.are.equal(2, same, want .. "\n" .. short)
    assert.truthy(short:find("Holm over the 2 rows of the table of all folders", 1, true), short)
    local _, perr, pcode = h.run(("%s scripts/pairs_report.lua %s --pairs roper/nope"):format(
      h.sh_quote(BIN), h.sh_quote(out)))
    assert.are.equal(2, pcode)
    assert.are.equal("pairs_report.lua: --pairs roper/nope: two methods of the comparison a/b "
      .. "expected\n", perr)
    -- folders of different metrics cannot share a table
    local _, merr, mcode = h.run(("%s scripts/pairs_report.lua %s results/substring_prefix")
      :format(h.sh_quote(BIN), h.sh_quote(out)))
    assert.are.equal(2, mcode, merr)
    assert.are.equal(("pairs_report.lua: results/substring_prefix measures loss, %s correct: one "
      .. "table cannot hold both\n"):format(out), merr)
    h.remove_tree(out)
  end)
end)

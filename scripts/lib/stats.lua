-- Statistics for comparing runs (pure Lua, no roper needed):
--   stats.summary(values, higher_is_better) -> {n, mean, median, min, max, std, protocol, dropped}
--   stats.mean(v)                           -> the mean of a list of numbers (nil when empty)
--   stats.welch(a, b)                       -> t, df, p   (two-sided Welch t-test)
--   stats.permutation(a, b[, opts])         -> p, exact   (two-sided, difference of means)
--   stats.paired(a, b[, opts])              -> paired t-test and sign-flip test by seed
--   stats.t_sf2(t, df)                      -> two-sided tail probability P(|T| >= |t|)
--   stats.compare(a, b, a_seed, b_seed)     -> the tests of b against a that the summaries report
--   stats.t_quantile(q, df)                 -> t with P(T <= t) = q (Student's t, df > 0)
--   stats.paired_ci(a, b[, level])          -> lo, hi: the paired t interval of mean(a - b)
--   stats.holm(ps)                          -> Holm-adjusted p-values, in the order given
--   stats.noninferiority(a, b, margin[, alpha]) -> paired one-sided t-test that mean(a - b) < margin
--   stats.ols(x, y)                         -> the least-squares line y = alpha + beta x, t-tested
--   stats.ols_at(fit, x0[, level])          -> the fitted line at x0: its confidence interval and
--                                              the prediction interval of one new y
--   stats.bootstrap_ci(a, b[, opts])        -> lo, hi, est: percentile bootstrap, mean difference
--   stats.effect_size(a, b[, paired])       -> Cohen's d_z (paired) or Hedges' g (unpaired)
--   stats.sign_flip_floor(n)                -> the smallest p the sign-flip test can give, 2 / 2^n
--   stats.can_reach(n, alpha)               -> true when that floor is <= alpha
--   stats.permutation_floor(na, nb)         -> the smallest p stats.permutation can give exactly
--   stats.bootstrap_resamples(n)            -> the distinct resamples of n values, C(2n - 1, n)
--   stats.fisher_exact(x1, n1, x2, n2)      -> p: two-sided Fisher exact test of x1/n1 vs x2/n2
--   stats.kaplan_meier(times, events)       -> {{time, at_risk, events, surv}} at each event time
--   stats.logrank(t1, e1, t2, e2)           -> chi2, p: two-group log-rank (Mantel-Cox) test
--   stats.chi2_sf(x, df)                    -> P(X >= x) for chi-square with df degrees of freedom
-- Values are plain Lua numbers; a nil entry (a diverged run) counts as the worst run.
local stats = {}

local function sorted_copy(v)
  local s = {}
  for i = 1, #v do s[i] = v[i] end
  table.sort(s)
  return s
end

-- splitmix64: the next state and a 64-bit output (the samplers use it so that Lua's own
-- math.random is left alone).
local function splitmix(state)
  state = state + 0x9E3779B97F4A7C15
  local z = state
  z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
  z = (z ~ (z >> 27)) * 0x94D049BB133111EB
  return state, z ~ (z >> 31)
end

local function mean(v)
  if #v == 0 then return nil end
  local s = 0
  for i = 1, #v do s = s + v[i] end
  return s / #v
end
stats.mean = mean

-- summary(values, higher_is_better) -> table
-- values: a list (nil holes allowed: pass n as values.n) of numbers or nil (diverged).
-- protocol: the write-up's statistic, the mean after dropping the single worst run (a diverged
-- run first); with one run it is that run. mean/median/min/max/std are over the finite values.
function stats.summary(values, higher_is_better)
  local n = values.n or #values
  local finite, diverged = {}, 0
  for i = 1, n do
    if values[i] == nil then diverged = diverged + 1 else finite[#finite + 1] = values[i] end
  end
  local out = { n = n, diverged = diverged }
  if #finite == 0 then return out end
  local s = sorted_copy(finite)
  out.min, out.max = s[1], s[#s]
  out.mean = mean(s)
  local m = #s
  out.median = m % 2 == 1 and s[(m + 1) // 2] or (s[m // 2] + s[m // 2 + 1]) / 2
  if m >= 2 then
    local ss = 0
    for i = 1, m do ss = ss + (s[i] - out.mean) ^ 2 end
    out.std = math.sqrt(ss / (m - 1))
  end
  -- the write-up's protocol: drop the worst run, average the rest
  if n == 1 then
    out.protocol = finite[1]
  elseif diverged >= 1 then
    if diverged == 1 then out.protocol, out.dropped = out.mean, "diverged" end
    -- more than one diverged run: the protocol has no finite value
  else
    local kept = {}
    if higher_is_better then
      for i = 2, m do kept[#kept + 1] = s[i] end
      out.dropped = s[1]
    else
      for i = 1, m - 1 do kept[#kept + 1] = s[i] end
      out.dropped = s[m]
    end
    out.protocol = mean(kept)
  end
  return out
end

-- The continued fraction of the regularised incomplete beta function I_x(a, b) (modified Lentz),
-- valid for x < (a + 1) / (a + b + 2).
local function betacf(a, b, x)
  local tiny = 1e-300
  local qab, qap, qam = a + b, a + 1, a - 1
  local c, d = 1, 1 - qab * x / qap
  if math.abs(d) < tiny then d = tiny end
  d = 1 / d
  local h = d
  for m = 1, 10000 do
    local m2 = 2 * m
    local aa = m * (b - m) * x / ((qam + m2) * (a + m2))
    d = 1 + aa * d
    if math.abs(d) < tiny then d = tiny end
    c = 1 + aa / c
    if math.abs(c) < tiny then c = tiny end
    d = 1 / d
    h = h * d * c
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
    d = 1 + aa * d
    if math.abs(d) < tiny then d = tiny end
    c = 1 + aa / c
    if math.abs(c) < tiny then c = tiny end
    d = 1 / d
    local del = d * c
    h = h * del
    if math.abs(del - 1) < 1e-15 then break end
  end
  return h
end

-- log Gamma (Lanczos, g = 7, n = 9; relative error about 1e-15 for x > 0).
local LANCZOS = { 0.99999999999980993, 676.5203681218851, -1259.1392167224028,
  771.32342877765313, -176.61502916214059, 12.507343278686905, -0.13857109526572012,
  9.9843695780195716e-6, 1.5056327351493116e-7 }
local function lgamma(x)
  if x < 0.5 then
    return math.log(math.pi / math.abs(math.sin(math.pi * x))) - lgamma(1 - x)
  end
  x = x - 1
  local a = LANCZOS[1]
  local t = x + 7.5
  for i = 1, 8 do a = a + LANCZOS[i + 1] / (x + i) end
  return 0.5 * math.log(2 * math.pi) + (x + 0.5) * math.log(t) - t + math.log(a)
end

-- I_x(a, b), the regularised incomplete beta function.
local function ibeta(x, a, b)
  if x <= 0 then return 0 end
  if x >= 1 then return 1 end
  local lbt = lgamma(a + b) - lgamma(a) - lgamma(b) + a * math.log(x) + b * math.log(1 - x)
  local bt = math.exp(lbt)
  if x < (a + 1) / (a + b + 2) then return bt * betacf(a, b, x) / a end
  return 1 - bt * betacf(b, a, 1 - x) / b
end
stats.ibeta = ibeta

-- t_sf2(t, df) -> P(|T| >= |t|) for Student's t with df > 0 degrees of freedom (df may be
-- fractional, as Welch's is).
function stats.t_sf2(t, df)
  if t ~= t then return nil end
  if math.abs(t) == math.huge then return 0 end
  return ibeta(df / (df + t * t), df / 2, 0.5)
end

-- welch(a, b) -> t, df, p: Welch's unequal-variance t-test of mean(a) vs mean(b), two-sided.
-- Needs at least 2 values in each; when both variances are 0 the test is undefined: returns
-- nil, nil, (1 when the means are equal, 0 otherwise) so identical constant groups give p = 1.
function stats.welch(a, b)
  local na, nb = #a, #b
  if na < 2 or nb < 2 then return nil, nil, nil end
  local ma, mb = mean(a), mean(b)
  local va, vb = 0, 0
  for i = 1, na do va = va + (a[i] - ma) ^ 2 end
  for i = 1, nb do vb = vb + (b[i] - mb) ^ 2 end
  va, vb = va / (na - 1), vb / (nb - 1)
  local se2 = va / na + vb / nb
  if se2 == 0 then return nil, nil, ma == mb and 1 or 0 end
  local t = (ma - mb) / math.sqrt(se2)
  local df = se2 * se2 / ((va / na) ^ 2 / (na - 1) + (vb / nb) ^ 2 / (nb - 1))
  return t, df, stats.t_sf2(t, df)
end

-- permutation(a, b[, {max_exact = 200000, samples = 100000, seed = 1}]) -> p, exact
-- Two-sided permutation test of the difference of means: the share of relabellings of the
-- pooled values whose |mean difference| is at least the observed one (with a 1e-12 relative
-- tolerance for ties). Every relabelling is enumerated when there are at most max_exact of
-- them (exact = true); otherwise `samples` random ones (its own splitmix64 generator seeded by
-- opts.seed, so the answer is reproducible) plus the observed labelling.
function stats.permutation(a, b, opts)
  opts = opts or {}
  local na, nb = #a, #b
  if na == 0 or nb == 0 then return nil, false end
  local pool, total = {}, 0
  for i = 1, na do pool[i] = a[i]; total = total + a[i] end
  for i = 1, nb do pool[na + i] = b[i]; total = total + b[i] end
  local n = na + nb
  local function diff(sum_a) return math.abs(sum_a / na - (total - sum_a) / nb) end
  local sa = 0
  for i = 1, na do sa = sa + a[i] end
  local observed = diff(sa)
  local tol = 1e-12 * math.max(1, math.abs(observed))
  -- the number of relabellings, C(n, na)
  local combos = 1
  for i = 1, na do combos = combos * (n - na + i) / i end
  if combos <= (opts.max_exact or 200000) then
    local count, seen = 0, 0
    local function rec(start, left, sum)
      if left == 0 then
        seen = seen + 1
        if diff(sum) >= observed - tol then count = count + 1 end
        return
      end
      for i = start, n - left + 1 do rec(i + 1, left - 1, sum + pool[i]) end
    end
    rec(1, na, 0)
    return count / seen, true
  end
  local samples = opts.samples or 100000
  local state = opts.seed or 1
  local function uniform(i, hi) -- j uniform in i..hi
    local z
    state, z = splitmix(state)
    return i + (z >> 11) % (hi - i + 1)
  end
  local idx = {}
  for i = 1, n do idx[i] = i end
  local count = 1 -- the observed labelling
  for _ = 1, samples do
    local s = 0
    for i = 1, na do -- partial Fisher-Yates: the first na of a random permutation
      local j = uniform(i, n)
      idx[i], idx[j] = idx[j], idx[i]
      s = s + pool[idx[i]]
    end
    if diff(s) >= observed - tol then count = count + 1 end
  end
  return count / (samples + 1), false
end

-- paired(a, b[, opts]) -> {n, mean_diff, t, df, p_t, p_perm, exact}
-- The runs of two methods paired by seed (a[i] and b[i] from the same seed: the same
-- initialisation and the same data), tested on the differences d_i = a[i] - b[i]: the paired
-- t-test (t = mean(d) / (sd(d) / sqrt(n)), n - 1 degrees of freedom, two-sided; nil when every
-- d is equal) and the exact sign-flip permutation test (the share of the 2^n sign patterns whose
-- |sum| is at least the observed one; sampled as in stats.permutation when n > opts.max_exact_n,
-- stats.SIGN_FLIP_MAX_EXACT; exact tells which). Needs n >= 2 pairs, else nil.
stats.SIGN_FLIP_MAX_EXACT = 20
function stats.paired(a, b, opts)
  opts = opts or {}
  local n = #a
  if n ~= #b then error("paired: the lists differ in length", 2) end
  if n < 2 then return nil end
  local d, sum = {}, 0
  for i = 1, n do
    d[i] = a[i] - b[i]
    sum = sum + d[i]
  end
  local mean_d = sum / n
  local ss = 0
  for i = 1, n do ss = ss + (d[i] - mean_d) ^ 2 end
  local sd = math.sqrt(ss / (n - 1))
  local out = { n = n, mean_diff = mean_d }
  if sd > 0 then
    out.t = mean_d / (sd / math.sqrt(n))
    out.df = n - 1
    out.p_t = stats.t_sf2(out.t, n - 1)
  end
  local observed = math.abs(sum)
  local tol = 1e-12 * math.max(1, observed)
  local count, total = 0, 0
  if n <= (opts.max_exact_n or stats.SIGN_FLIP_MAX_EXACT) then
    for mask = 0, (1 << n) - 1 do
      local s = 0
      for i = 1, n do
        if mask & (1 << (i - 1)) ~= 0 then s = s - d[i] else s = s + d[i] end
      end
      if math.abs(s) >= observed - tol then count = count + 1 end
      total = total + 1
    end
    out.exact = true
  else
    local state = opts.seed or 1
    count, total = 1, 1
    for _ = 1, opts.samples or 100000 do
      local s = 0
      for i = 1, n do
        local z
        state, z = splitmix(state)
        if z < 0 then s = s - d[i] else s = s + d[i] end
      end
      if math.abs(s) >= observed - tol then count = count + 1 end
      total = total + 1
    end
    out.exact = false
  end
  out.p_perm = count / total
  return out
end

-- compare(a, b, a_seed, b_seed) -> {mean_diff, welch_t, welch_df, welch_p, permutation_p,
-- permutation_exact, permutation_floor, na, nb, paired}: method b against method a, as the
-- comparison summaries report it (permutation_floor: stats.permutation_floor(#b, #a), the
-- smallest p the exact test could give; na, nb: how many values a and b have).
-- a, b: the finite values of each method's runs; a_seed, b_seed: the same values by seed
-- ({[seed] = value}), paired by seed for stats.paired (b - a). mean_diff is mean(b) - mean(a)
-- (nil when either list is empty); a test that needs more values is nil.
function stats.compare(a, b, a_seed, b_seed)
  local t, df, pw = stats.welch(b, a)
  local pp, exact = stats.permutation(b, a)
  local diff = (#a > 0 and #b > 0) and (stats.summary(b).mean - stats.summary(a).mean) or nil
  -- paired by seed: the same seed gives both methods the same initialisation and data
  local seeds = {}
  for seed in pairs(b_seed) do
    if a_seed[seed] ~= nil then seeds[#seeds + 1] = seed end
  end
  table.sort(seeds)
  local pa, pb = {}, {}
  for i, seed in ipairs(seeds) do pa[i], pb[i] = b_seed[seed], a_seed[seed] end
  return { mean_diff = diff, welch_t = t, welch_df = df, welch_p = pw, permutation_p = pp,
    permutation_exact = exact, permutation_floor = stats.permutation_floor(#b, #a), na = #a,
    nb = #b, paired = stats.paired(pa, pb) }
end

-- t_quantile(q, df) -> t with P(T <= t) = q, 0 < q < 1 (bisection on t_sf2 to 1e-12).
function stats.t_quantile(q, df)
  if not (q > 0 and q < 1) or not (df > 0) then error("t_quantile: need 0 < q < 1 and df > 0", 2) end
  if q == 0.5 then return 0 end
  -- P(T <= t) = 1 - t_sf2(t) / 2 for t > 0
  local tail = q > 0.5 and 2 * (1 - q) or 2 * q
  local lo, hi = 0, 1
  while stats.t_sf2(hi, df) > tail do hi = hi * 2 end
  for _ = 1, 200 do
    local mid = (lo + hi) / 2
    if stats.t_sf2(mid, df) > tail then lo = mid else hi = mid end
    if hi - lo <= 1e-12 * math.max(1, hi) then break end
  end
  local t = (lo + hi) / 2
  return q > 0.5 and t or -t
end

-- paired_ci(a, b[, level = 0.95]) -> lo, hi: mean(d) -+ t_{(1+level)/2, n-1} sd(d) / sqrt(n),
-- d_i = a[i] - b[i] (pairs by position, as stats.paired); nil with fewer than 2 pairs.
-- the differences d_i = a[i] - b[i] of n pairs: their mean and sum of squared deviations
local function diff_moments(a, b, n)
  local d, m = {}, 0
  for i = 1, n do
    d[i] = a[i] - b[i]
    m = m + d[i] / n
  end
  local ss = 0
  for i = 1, n do ss = ss + (d[i] - m) ^ 2 end
  return m, ss
end

function stats.paired_ci(a, b, level)
  local n = #a
  if n ~= #b then error("paired_ci: the lists differ in length", 2) end
  if n < 2 then return nil end
  local m, ss = diff_moments(a, b, n)
  local half = stats.t_quantile((1 + (level or 0.95)) / 2, n - 1) * math.sqrt(ss / (n - 1) / n)
  return m - half, m + half
end

-- noninferiority(a, b, margin[, alpha = 0.05]) -> {n, mean_diff, sd, upper, t, df, p, lo, hi,
-- noninferior, equivalent}, or nil for fewer than 2 pairs.
-- a[i], b[i]: two methods' values from seed i, lower better (a the candidate, b the reference),
-- tested on d_i = a[i] - b[i]: H0 mean(d) >= margin against H1 mean(d) < margin (the candidate
-- is worse by less than the margin) with the paired t statistic t = (mean(d) - margin) / (sd(d) /
-- sqrt(n)), n - 1 degrees of freedom; p = P(T <= t), one-sided. upper is the one-sided 1 - alpha
-- upper confidence bound of mean(d) (noninferior: upper < margin, the same decision as p < alpha);
-- lo, hi the two-sided 1 - 2 alpha interval (90% at alpha 0.05), the two one-sided tests'
-- equivalence interval (equivalent: -margin < lo and hi < margin). Every d equal (sd 0): the bounds
-- are that value, p 0 or 1 as it is below the margin or not.
function stats.noninferiority(a, b, margin, alpha)
  alpha = alpha or 0.05
  local n = #a
  if n ~= #b then error("noninferiority: the lists differ in length", 2) end
  if type(margin) ~= "number" or margin <= 0 then
    error("noninferiority: the margin must be a number > 0", 2)
  end
  if n < 2 then return nil end
  local m, ss = diff_moments(a, b, n)
  local sd = math.sqrt(ss / (n - 1))
  local se, df = sd / math.sqrt(n), n - 1
  local r = { n = n, mean_diff = m, sd = sd, df = df }
  if se == 0 then
    r.upper, r.lo, r.hi = m, m, m
    r.p = m < margin and 0 or 1
  else
    local q = stats.t_quantile(1 - alpha, df)
    r.upper, r.lo, r.hi = m + q * se, m - q * se, m + q * se
    r.t = (m - margin) / se
    local two = stats.t_sf2(r.t, df)
    r.p = r.t < 0 and two / 2 or 1 - two / 2
  end
  r.noninferior = r.upper < margin
  r.equivalent = r.lo > -margin and r.hi < margin
  return r
end

-- ols(x, y) -> {n, df, alpha, beta, se_alpha, se_beta, s, t, p, xbar, sxx} or nil: ordinary
-- least squares of y[i] = alpha + beta x[i] + e[i] (e independent, one variance, normal for the
-- t statistics), n - 2 degrees of freedom (df); s the residual standard deviation (sum of the
-- squared residuals / df, square-rooted); t = beta / se_beta and p its two-sided p (H0: beta =
-- 0; nil when se_beta is 0). nil with fewer than 3 points or with every x equal.
function stats.ols(x, y)
  local n = #x
  if n ~= #y then error("ols: the lists differ in length", 2) end
  if n < 3 then return nil end
  local xbar, ybar = 0, 0
  for i = 1, n do xbar, ybar = xbar + x[i] / n, ybar + y[i] / n end
  local sxx, sxy = 0, 0
  for i = 1, n do
    sxx = sxx + (x[i] - xbar) ^ 2
    sxy = sxy + (x[i] - xbar) * (y[i] - ybar)
  end
  if sxx == 0 then return nil end
  local beta = sxy / sxx
  local alpha = ybar - beta * xbar
  local sse = 0
  for i = 1, n do sse = sse + (y[i] - alpha - beta * x[i]) ^ 2 end
  local df = n - 2
  local s = math.sqrt(sse / df)
  local r = { n = n, df = df, alpha = alpha, beta = beta, s = s, xbar = xbar, sxx = sxx,
    se_beta = s / math.sqrt(sxx), se_alpha = s * math.sqrt(1 / n + xbar ^ 2 / sxx) }
  if r.se_beta > 0 then
    r.t = beta / r.se_beta
    r.p = stats.t_sf2(r.t, df)
  end
  return r
end

-- ols_at(fit, x0[, level = 0.95]) -> {x, fit, se, lo, hi, se_pred, pred_lo, pred_hi}: the line
-- of stats.ols at x0, fit = alpha + beta x0, with the two-sided level confidence interval of the
-- mean of y there, fit -+ t_{(1+level)/2, df} se, se = s sqrt(1/n + (x0 - xbar)^2 / sxx), and the
-- prediction interval of one new y there, se_pred = s sqrt(1 + 1/n + (x0 - xbar)^2 / sxx).
function stats.ols_at(fit, x0, level)
  local q = stats.t_quantile((1 + (level or 0.95)) / 2, fit.df)
  local lever = 1 / fit.n + (x0 - fit.xbar) ^ 2 / fit.sxx
  local y = fit.alpha + fit.beta * x0
  local se, se_pred = fit.s * math.sqrt(lever), fit.s * math.sqrt(1 + lever)
  return { x = x0, fit = y, se = se, lo = y - q * se, hi = y + q * se, se_pred = se_pred,
    pred_lo = y - q * se_pred, pred_hi = y + q * se_pred }
end

-- holm(ps) -> the Holm-Bonferroni adjusted p-values of the family ps (a list, length ps.n or #ps;
-- nil entries are left out of the family and stay nil): with the m p-values sorted ascending,
-- the i-th (1-based) gets max over j <= i of min(1, (m - j + 1) p_(j)).
function stats.holm(ps)
  local idx = {}
  for i = 1, ps.n or #ps do
    if ps[i] ~= nil then idx[#idx + 1] = i end
  end
  table.sort(idx, function(x, y)
    if ps[x] ~= ps[y] then return ps[x] < ps[y] end
    return x < y
  end)
  local m, out, run = #idx, {}, 0
  for r, i in ipairs(idx) do
    run = math.max(run, math.min(1, (m - r + 1) * ps[i]))
    out[i] = run
  end
  return out
end

-- type-7 quantile (R's default: linear interpolation between order statistics) of the sorted
-- list s at probability q in [0, 1].
local function quantile7(s, q)
  local h = (#s - 1) * q + 1
  local k = math.floor(h)
  if k >= #s then return s[#s] end
  return s[k] + (h - k) * (s[k + 1] - s[k])
end

-- bootstrap_ci(a, b[, {level = 0.95, samples = 10000, seed = 1, paired = false}]) -> lo, hi, est
-- Percentile bootstrap interval of a difference of means: est is the observed statistic, lo and
-- hi the type-7 quantiles (1 - level) / 2 and (1 + level) / 2 of `samples` bootstrap statistics.
-- paired: a[i] and b[i] are paired by position; the n differences d_i = a[i] - b[i] are
-- resampled with replacement and the statistic is mean(d) (the lists must have one length).
-- Otherwise a and b are resampled independently and the statistic is mean(a) - mean(b).
-- The values are finite numbers (leave diverged runs out first); nil when a group (or the
-- pairs) has fewer than 2 values. Resampling uses its own splitmix64 generator seeded by
-- opts.seed (an integer), so the interval is reproducible.
function stats.bootstrap_ci(a, b, opts)
  opts = opts or {}
  local level = opts.level or 0.95
  if not (level > 0 and level < 1) then error("bootstrap_ci: need 0 < level < 1", 2) end
  local samples = opts.samples or 10000
  if math.type(samples) ~= "integer" or samples < 1 then
    error("bootstrap_ci: samples must be a positive integer", 2)
  end
  local state = math.tointeger(opts.seed or 1)
  if not state then error("bootstrap_ci: seed must be an integer", 2) end
  local function index(n) -- uniform in 1..n
    local z
    state, z = splitmix(state)
    return (z >> 11) % n + 1
  end
  local stat = {}
  local est
  if opts.paired then
    local n = #a
    if n ~= #b then error("bootstrap_ci: the lists differ in length", 2) end
    if n < 2 then return nil end
    local d = {}
    for i = 1, n do d[i] = a[i] - b[i] end
    est = mean(d)
    for r = 1, samples do
      local s = 0
      for _ = 1, n do s = s + d[index(n)] end
      stat[r] = s / n
    end
  else
    local na, nb = #a, #b
    if na < 2 or nb < 2 then return nil end
    est = mean(a) - mean(b)
    for r = 1, samples do
      local sa, sb = 0, 0
      for _ = 1, na do sa = sa + a[index(na)] end
      for _ = 1, nb do sb = sb + b[index(nb)] end
      stat[r] = sa / na - sb / nb
    end
  end
  table.sort(stat)
  return quantile7(stat, (1 - level) / 2), quantile7(stat, (1 + level) / 2), est
end

-- effect_size(a, b[, paired]) -> value
-- paired: Cohen's d_z = mean(d) / sd(d) of the differences d_i = a[i] - b[i] (pairs by
-- position, sd with n - 1); nil with fewer than 2 pairs or when every d_i is equal (sd = 0).
-- Otherwise Hedges' g = J (mean(a) - mean(b)) / s_pooled, with
-- s_pooled = sqrt(((na - 1) var(a) + (nb - 1) var(b)) / (na + nb - 2)) and the small-sample
-- correction J = 1 - 3 / (4 (na + nb) - 9); nil when a group has fewer than 2 values or both
-- groups are constant (s_pooled = 0). Values are finite numbers (leave diverged runs out).
function stats.effect_size(a, b, paired)
  if paired then
    local n = #a
    if n ~= #b then error("effect_size: the lists differ in length", 2) end
    if n < 2 then return nil end
    local d, constant = {}, true
    for i = 1, n do
      d[i] = a[i] - b[i]
      if d[i] ~= d[1] then constant = false end
    end
    -- tested on the values, not on sd: rounding can leave a tiny sd for equal differences
    if constant then return nil end
    local m, ss = mean(d), 0
    for i = 1, n do ss = ss + (d[i] - m) ^ 2 end
    return m / math.sqrt(ss / (n - 1))
  end
  local na, nb = #a, #b
  if na < 2 or nb < 2 then return nil end
  local constant = true
  for i = 2, na do if a[i] ~= a[1] then constant = false end end
  for i = 2, nb do if b[i] ~= b[1] then constant = false end end
  if constant then return nil end
  local ma, mb, ss = mean(a), mean(b), 0
  for i = 1, na do ss = ss + (a[i] - ma) ^ 2 end
  for i = 1, nb do ss = ss + (b[i] - mb) ^ 2 end
  local s_pooled = math.sqrt(ss / (na + nb - 2))
  return (1 - 3 / (4 * (na + nb) - 9)) * (ma - mb) / s_pooled
end

-- sign_flip_floor(n) -> the smallest two-sided p the exact sign-flip test of stats.paired can
-- give with n pairs: 2 / 2^n (only the all-plus and all-minus patterns reach the observed |sum|
-- when every difference has one sign); 1 for n <= 1.
function stats.sign_flip_floor(n)
  if math.tointeger(n) == nil then error("sign_flip_floor: n must be an integer", 2) end
  if n <= 1 then return 1 end
  return 2 / 2 ^ n
end

-- can_reach(n, alpha) -> boolean: whether n pairs can give a sign-flip p <= alpha at all
-- (stats.sign_flip_floor(n) <= alpha); 5 pairs cannot reach 0.05 (floor 0.0625), 6 can.
function stats.can_reach(n, alpha)
  return stats.sign_flip_floor(n) <= alpha
end

-- C(n, k) as a float, by the product (exact for the sizes of a comparison's runs)
local function choose(n, k)
  local c = 1
  for i = 1, k do c = c * (n - k + i) / i end
  return c
end

-- permutation_floor(na, nb) -> the smallest two-sided p the exact permutation test of
-- stats.permutation can give with groups of na and nb values: 2 / C(na + nb, na) when na == nb
-- (the observed labelling and its mirror, the groups swapped, have the same |mean difference|),
-- 1 / C(na + nb, na) otherwise (reached when the groups lie far apart); 1 when a group is empty.
-- 3 runs a method: 2 / C(6, 3) = 0.1, so the test cannot reach 0.05; 4 runs: 2 / 70.
function stats.permutation_floor(na, nb)
  if math.tointeger(na) == nil or math.tointeger(nb) == nil or na < 0 or nb < 0 then
    error("permutation_floor: na and nb must be integers >= 0", 2)
  end
  if na == 0 or nb == 0 then return 1 end
  return (na == nb and 2 or 1) / choose(na + nb, na)
end

-- bootstrap_resamples(n) -> the number of distinct resamples (multisets) of n values drawn with
-- replacement, C(2n - 1, n): 10 for 3 values, 126 for 5, 92378 for 10. A percentile bootstrap
-- of n pairs has no more distinct statistics than this.
function stats.bootstrap_resamples(n)
  if math.tointeger(n) == nil or n < 1 then
    error("bootstrap_resamples: n must be an integer >= 1", 2)
  end
  return math.tointeger(choose(2 * n - 1, n)) or choose(2 * n - 1, n)
end

local function lchoose(n, k)
  return lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1)
end

-- fisher_exact(x1, n1, x2, n2) -> p: the two-sided Fisher exact test of the 2x2 table with x1
-- successes of n1 against x2 of n2 (integers, 0 <= x <= n). With the margins fixed, the
-- successes of the first row are hypergeometric; p is the sum of the probabilities of the
-- tables no more probable than the observed one, within a relative 1e-7 (R's fisher.test rule,
-- so that ties computed with rounding count). Probabilities from log-factorials (lgamma).
function stats.fisher_exact(x1, n1, x2, n2)
  for _, v in ipairs { x1, n1, x2, n2 } do
    if math.tointeger(v) == nil or v < 0 then
      error("fisher_exact: counts must be non-negative integers", 2)
    end
  end
  if x1 > n1 or x2 > n2 then error("fisher_exact: more successes than trials", 2) end
  local m = x1 + x2
  local lo, hi = math.max(0, m - n2), math.min(n1, m)
  local logp, top = {}, -math.huge
  for k = lo, hi do
    local l = lchoose(n1, k) + lchoose(n2, m - k)
    logp[k - lo + 1] = l
    if l > top then top = l end
  end
  local total, prob = 0, {}
  for i = 1, hi - lo + 1 do
    prob[i] = math.exp(logp[i] - top)
    total = total + prob[i]
  end
  local cut = prob[x1 - lo + 1] * (1 + 1e-7)
  local p = 0
  for i = 1, hi - lo + 1 do
    if prob[i] <= cut then p = p + prob[i] end
  end
  return math.min(1, p / total)
end

-- kaplan_meier(times, events) -> {{time =, at_risk =, events =, surv =}, ...}
-- The Kaplan-Meier estimate of the survival function: one entry per distinct time at which an
-- event happened, in increasing time: the number at risk just before it (those whose time is
-- >= it), the events at it and S(t) = product over event times u <= t of (1 - d_u / n_u).
-- events[i] is true when the event happened at times[i], false when censored there; at a tie
-- the events come first (a run censored at t was still at risk at t). {} when nothing happened.
function stats.kaplan_meier(times, events)
  local n = #times
  if n ~= #events then error("kaplan_meier: times and events differ in length", 2) end
  local idx = {}
  for i = 1, n do
    if type(times[i]) ~= "number" or times[i] ~= times[i] then
      error("kaplan_meier: times must be numbers", 2)
    end
    if type(events[i]) ~= "boolean" then error("kaplan_meier: events must be booleans", 2) end
    idx[i] = i
  end
  table.sort(idx, function(x, y) return times[x] < times[y] end)
  local out, at_risk, surv, i = {}, n, 1, 1
  while i <= n do
    local t, d, c = times[idx[i]], 0, 0
    while i <= n and times[idx[i]] == t do
      if events[idx[i]] then d = d + 1 else c = c + 1 end
      i = i + 1
    end
    if d > 0 then
      surv = surv * (1 - d / at_risk)
      out[#out + 1] = { time = t, at_risk = at_risk, events = d, surv = surv }
    end
    -- the censored at t leave after the events at t
    at_risk = at_risk - d - c
  end
  return out
end

-- Q(a, x), the regularised upper incomplete gamma function, a > 0, x >= 0: the series of
-- P(a, x) when x < a + 1, else the continued fraction of Q (modified Lentz).
local function gamma_q(a, x)
  if x <= 0 then return 1 end
  if x == math.huge then return 0 end
  local lpre = a * math.log(x) - x - lgamma(a)
  if x < a + 1 then
    local ap, del = a, 1 / a
    local sum = del
    for _ = 1, 100000 do
      ap = ap + 1
      del = del * x / ap
      sum = sum + del
      if del < sum * 1e-17 then break end
    end
    return 1 - sum * math.exp(lpre)
  end
  local tiny = 1e-300
  local b = x + 1 - a
  local c, d = 1 / tiny, 1 / b
  local h = d
  for i = 1, 100000 do
    local an = -i * (i - a)
    b = b + 2
    d = an * d + b
    if math.abs(d) < tiny then d = tiny end
    c = b + an / c
    if math.abs(c) < tiny then c = tiny end
    d = 1 / d
    local del = d * c
    h = h * del
    if math.abs(del - 1) < 1e-15 then break end
  end
  return math.exp(lpre) * h
end

-- chi2_sf(x, df) -> P(X >= x) for X chi-square with df > 0 degrees of freedom, Q(df/2, x/2);
-- for df = 1 it is erfc(sqrt(x / 2)). 1 for x <= 0, nil for a NaN x.
function stats.chi2_sf(x, df)
  if not (df > 0) then error("chi2_sf: need df > 0", 2) end
  if x ~= x then return nil end
  return gamma_q(df / 2, x / 2)
end

-- logrank(t1, e1, t2, e2) -> chi2, p: the two-group log-rank (Mantel-Cox) test of survival
-- times t1 (events e1: true for an event, false for a censoring, as in stats.kaplan_meier)
-- against t2 (e2). At each distinct event time, with n at risk (n1 in group 1), d events:
-- E1 += d n1 / n and V += n1 n2 d (n - d) / (n^2 (n - 1)); the censored at a time are still
-- at risk at it. chi2 = (O1 - E1)^2 / V on 1 degree of freedom, p = P(chi2_1 >= chi2).
-- nil, nil when V = 0 (no event, or no time with both groups at risk and a variance).
function stats.logrank(t1, e1, t2, e2)
  if #t1 ~= #e1 or #t2 ~= #e2 then error("logrank: times and events differ in length", 2) end
  local all = {}
  for g, tt in ipairs { { t1, e1 }, { t2, e2 } } do
    local times, events = tt[1], tt[2]
    for i = 1, #times do
      if type(times[i]) ~= "number" or times[i] ~= times[i] then
        error("logrank: times must be numbers", 2)
      end
      if type(events[i]) ~= "boolean" then error("logrank: events must be booleans", 2) end
      all[#all + 1] = { t = times[i], event = events[i], g = g }
    end
  end
  table.sort(all, function(x, y) return x.t < y.t end)
  local n1, n2 = #t1, #t2
  local o1, e1sum, v = 0, 0, 0
  local i = 1
  while i <= #all do
    local t = all[i].t
    local d1, d2, c1, c2 = 0, 0, 0, 0
    while i <= #all and all[i].t == t do
      local r = all[i]
      if r.g == 1 then
        if r.event then d1 = d1 + 1 else c1 = c1 + 1 end
      else
        if r.event then d2 = d2 + 1 else c2 = c2 + 1 end
      end
      i = i + 1
    end
    local d, n = d1 + d2, n1 + n2
    if d > 0 then
      o1 = o1 + d1
      e1sum = e1sum + d * n1 / n
      if n > 1 then v = v + n1 * n2 * d * (n - d) / (n * n * (n - 1)) end
    end
    n1, n2 = n1 - d1 - c1, n2 - d2 - c2
  end
  if not (v > 0) then return nil, nil end
  local chi2 = (o1 - e1sum) ^ 2 / v
  return chi2, stats.chi2_sf(chi2, 1)
end

return stats

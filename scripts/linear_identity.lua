--[[
linear_identity.lua: RoPE and RoPER in causal linear attention (RoFormer §3.3, eq. 19), checked
with numbers.

    build/roper scripts/linear_identity.lua [--seed N] [--T N] [--d N]

Causal linear attention (Katharopoulos et al. 2020) replaces softmax(q.k) by phi(q).phi(k) with
phi(x) = elu(x) + 1 > 0, so that the sums over keys become running states. RoFormer's eq. 19 puts
the rotation after the feature map and in the numerator only:

    out_n = sum_{m<=n} (R_n phi(q_n))^T (R_m phi(k_m)) v_m  /  (sum_{m<=n} phi(q_n)^T phi(k_m) + eps)

Because R_n^T R_m = R((m-n) theta), the numerator is the explicit double sum

    sum_{m<=n} phi(q_n)^T R((m-n) theta) phi(k_m) v_m,

in which only the distance n - m appears. The library computes the left form with a running
state S_n = sum_m (R_m phi(k_m)) v_m^T, in O(T d^2) (float32); this script evaluates the right
form directly in Lua doubles, with 2x2 rotations built from math.cos and math.sin, and compares.
RoPER also rotates the values by their position and the output back by -n, so its output is
sum_m w_nm R((m-n) theta) v_m / den_n. Positions start at 5000 and 60000 as well as 0: the result
depends on distances only, which the script also checks by shifting them.

Every check prints PASS or FAIL and what it checked, with its numbers below (the max error and
the tolerance; for a difference that must be there, the difference and its least). It ends with
"linear identity: N passed, N failed" and exits with status 1 if any check failed.
]]

-- lib/ beside this file, wherever it runs from: roper, lua5.4 or an installed roper-<name>
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local rp = require "roper"
local cli = require "lib.cli"
local checks = require "lib.checks"

-- A bad argument is one line on stderr and exit status 2 (cli.main, cli.parser).
local args
-- --help opens with these (each runs as written from the repository's folder; tests/lua/
-- help_examples_spec.lua runs them)
local EXAMPLES = {
  { "RoPE and RoPER in causal linear attention against the explicit double sum",
    "build/roper scripts/linear_identity.lua" },
  { "a longer sequence and a larger head",
    "build/roper scripts/linear_identity.lua --T 64 --d 32" },
  { "other random inputs",
    "build/roper scripts/linear_identity.lua --seed 7" },
}

cli.main("linear_identity.lua", function()
  local parser = cli.parser("build/roper scripts/linear_identity.lua",
    "Checks RoPE/RoPER in causal linear attention (RoFormer eq. 19) against the explicit double "
    .. "sum.", EXAMPLES)
  parser:option("--seed", "Seed of the random inputs.", "1"):convert(math.tointeger)
  parser:option("--T", "Sequence length (2..512).", "24"):convert(math.tointeger)
  parser:option("--d", "Head size (even, 2..256).", "16"):convert(math.tointeger)
  args = parser:parse()
  if args.T < 2 or args.T > 512 then cli.usage("--T must be an integer in 2..512, got " .. args.T) end
  if args.d < 2 or args.d > 256 or args.d % 2 ~= 0 then
    cli.usage("--d must be even and in 2..256, got " .. args.d)
  end
end)

local T, D, H, B = args.T, args.d, 2, 1
local HALF = D // 2
local BASE, EPS = 10000, 1e-6
local TOL = 2e-5 -- relative to the output's largest magnitude (float32 state sums)

local report = checks.new()
local function check(name, err, tol) report:close(name, err, tol) end

-- random inputs (the same tensors feed the library and the double-precision reference)
local g = rp.rng(args.seed)
local q = rp.randn({ B, T, H, D }, g)
local k = rp.randn({ B, T, H, D }, g)
local v = rp.randn({ B, T, H, D }, g)
local Q, K, V = q:totable(), k:totable(), v:totable()

local function phi(x) return x > 0 and x + 1 or math.exp(x) end

local theta = {}
for j = 0, HALF - 1 do theta[j] = BASE ^ (-2 * j / D) end

-- x rotated by angle a*theta (half pairing: feature j with j + D/2), a copy
local function rot(x, a)
  local y = {}
  for i = 1, D do y[i] = x[i] end
  for j = 0, HALF - 1 do
    local c, s = math.cos(a * theta[j]), math.sin(a * theta[j])
    local x1, x2 = x[j + 1], x[j + 1 + HALF]
    y[j + 1] = c * x1 - s * x2
    y[j + 1 + HALF] = s * x1 + c * x2
  end
  return y
end

local function dot(a, b)
  local s = 0
  for i = 1, D do s = s + a[i] * b[i] end
  return s
end

local function phivec(x)
  local y = {}
  for i = 1, D do y[i] = phi(x[i]) end
  return y
end

-- The explicit double sum: out[t][h][i], w[h][t][j], den[h][t] (positions offset + t - 1).
-- roper: values turned by R((m-n) theta) as well.
local function reference(roper)
  local out, w, den = {}, {}, {}
  for h = 1, H do
    w[h], den[h] = {}, {}
    for t = 1, T do
      local fq = phivec(Q[1][t][h])
      local num, d = {}, EPS
      for i = 1, D do num[i] = 0 end
      w[h][t] = {}
      for m = 1, t do
        local fk = phivec(K[1][m][h])
        local wm = dot(fq, rot(fk, m - t)) -- phi(q_n)^T R((m-n) theta) phi(k_m)
        w[h][t][m] = wm
        d = d + dot(fq, fk)
        local vm = roper and rot(V[1][m][h], m - t) or V[1][m][h]
        for i = 1, D do num[i] = num[i] + wm * vm[i] end
      end
      den[h][t] = d
      out[t] = out[t] or {}
      out[t][h] = {}
      for i = 1, D do out[t][h][i] = num[i] / d end
    end
  end
  return out, w, den
end

local function max_abs_diff(got, want, scale)
  local e = 0
  for t = 1, T do
    for h = 1, H do
      for i = 1, D do
        e = math.max(e, math.abs(got[1][t][h][i] - want[t][h][i]) / scale)
      end
    end
  end
  return e
end

local function magnitude(want)
  local s = 0
  for t = 1, T do for h = 1, H do for i = 1, D do s = math.max(s, math.abs(want[t][h][i])) end end end
  return math.max(s, 1e-30)
end

local step = 0
local function title(s)
  step = step + 1
  print(("\n%d. %s"):format(step, s))
end

print(("linear attention identity: T %d, %d heads of d %d, seed %d, eps %g"):format(T, H, D,
  args.seed, EPS))

for _, mode in ipairs { "rope", "roper" } do
  local want, ww, wden = reference(mode == "roper")
  local scale = magnitude(want)
  title(("pe %s, rotation after phi (eq. 19): the running-state kernel equals the double sum"):format(mode))
  for _, offset in ipairs { 0, 5000, 60000 } do
    local out, w, den = rp.linear_attention(q, k, v, { pe = mode, q_offset = offset })
    check(("output, positions %d..%d"):format(offset, offset + T - 1),
      max_abs_diff(out:totable(), want, scale), TOL)
    -- the weights the library reports (w_nm, rotated form) are the distance-only ones
    local W, DEN = w:totable(), den:totable()
    local ew, ed, wscale = 0, 0, 0
    for h = 1, H do
      for t = 1, T do
        for m = 1, t do wscale = math.max(wscale, math.abs(ww[h][t][m])) end
      end
    end
    for h = 1, H do
      for t = 1, T do
        for m = 1, t do ew = math.max(ew, math.abs(W[1][h][t][m] - ww[h][t][m]) / wscale) end
        ed = math.max(ed, math.abs(DEN[1][h][t] - wden[h][t]) / wden[h][t])
      end
    end
    check(("weights (R_n phi q)^T (R_m phi k) = phi(q)^T R((m-n)theta) phi(k), offset %d"):format(
      offset), ew, TOL)
    check(("denominators (unrotated), offset %d"):format(offset), ed, TOL)
  end
end

title("the numerator weights can be negative; the denominator cannot")
do
  local _, w, den = rp.linear_attention(q, k, v, { pe = "rope" })
  local W, DEN = w:totable(), den:totable()
  local min_w, min_norm, min_den = math.huge, math.huge, math.huge
  for h = 1, H do
    for t = 1, T do
      min_den = math.min(min_den, DEN[1][h][t])
      for m = 1, t do
        min_w = math.min(min_w, W[1][h][t][m])
        min_norm = math.min(min_norm, W[1][h][t][m] / DEN[1][h][t])
      end
    end
  end
  print(("%ssmallest weight %.4g (normalised %.4g), smallest denominator %.4g"):format(checks.INDENT,
    min_w, min_norm, min_den))
  local _, w0 = rp.linear_attention(q, k, v, { pe = "none" })
  local W0, min0 = w0:totable(), math.huge
  for h = 1, H do
    for t = 1, T do
      for m = 1, t do min0 = math.min(min0, W0[1][h][t][m]) end
    end
  end
  print(("%swithout rotation the smallest weight is %.4g (phi > 0 keeps every weight >= 0)"):format(
    checks.INDENT, min0))
  report:verdict(min0 >= 0, "every unrotated weight is >= 0", ("smallest %.4g"):format(min0))
  report:verdict(min_den > EPS, "every denominator is > eps",
    ("smallest %.4g, eps %g"):format(min_den, EPS))
end

title("rotation before phi (performer-style) is not a function of distance alone")
do
  local a = rp.linear_attention(q, k, v, { pe = "rope", linear_rope = "before", q_offset = 0 })
  local b = rp.linear_attention(q, k, v, { pe = "rope", linear_rope = "before", q_offset = 5000 })
  local c = rp.linear_attention(q, k, v, { pe = "rope", q_offset = 0 })
  local d = rp.linear_attention(q, k, v, { pe = "rope", q_offset = 5000 })
  local moved = (a - b):abs():max()
  local kept = (c - d):abs():max()
  print(("%sshifting every position by 5000 changes the output by %.3g before phi, by %.3g after")
    :format(checks.INDENT, moved, kept))
  check("after phi: shift-invariant", kept / magnitude(reference(false)), TOL)
  report:apart("before phi: the shift changes the output", moved, 1e-3)
end

os.exit(report:summary("linear identity"))

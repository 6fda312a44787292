--[[
pe_identity.lua: what the attention score and the output of each positional scheme depend on,
shown with numbers.

    build/roper scripts/pe_identity.lua [--seed N] [--d N]

One query sits at position n = 150 and attends (causally) over keys at positions 0 .. 150, with
random contents. Three experiments tell what a scheme's numbers depend on:

  shift      every position moves by 777 (rp.attention's pos_offset; absolute tables are read
             777 rows further): a scheme that sees only distances gives the same weights and
             output; one that sees absolute positions does not.
  near swap  the contents (key and value) at positions 148 and 149 (distances 2 and 1) trade
             places: the weights trade places too, and the output stays, only when the scheme
             ignores positions altogether.
  far swap   the same for positions 10 and 20 (distances 140 and 130, beyond a clip of 16 and
             beyond T5's max_distance of 128): a scheme that clips (or buckets) distances cannot
             tell them apart, one that sees exact distances can.

Beside the modes it runs the frequency schemes of issue 14: random frequencies, the context
extensions (PI, NTK-aware, YaRN), xPos and an angle table that is not linear in the position; the
property needs angles p theta_i for some theta_i, nothing more. Last, xPos's shift test at large
offsets shows where its float32 magnitudes leave the float range (about 36,000 positions for the
default scale base 512).

From these the script names the dependence of the score (the attention weights) and of the output:
"absolute positions", "relative distance", "clipped distance" or "nothing", and checks it against
what the scheme's formula says (the "expected" column, derived by hand: for rotations, the score
is relative when q and k are rotated alike, the output when v and o are too; pe.h and
docs/positional.md give the argument). Every row starts with PASS or FAIL; the script ends with
"pe identity: N passed, N failed" and exits with status 1 if any check failed.
]]

package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local rp = require "roper"

local cli = require "lib.cli"
local checks = require "lib.checks"

local opts
-- --help opens with these (each runs as written from the repository's folder; tests/lua/
-- help_examples_spec.lua runs them)
local EXAMPLES = {
  { "what each positional scheme's score and output depend on",
    "build/roper scripts/pe_identity.lua" },
  { "with head size 32",
    "build/roper scripts/pe_identity.lua --d 32" },
  { "other random contents",
    "build/roper scripts/pe_identity.lua --seed 5" },
}

cli.main("pe_identity.lua", function()
  local parser = cli.parser("build/roper scripts/pe_identity.lua",
    "Shows what the attention score and output of each positional scheme depend on.", EXAMPLES)
  parser:option("--seed", "Seed of the random contents.", "1"):convert(math.tointeger)
    :argname("<n>")
  parser:option("--d", "Head size: features per head (even, 4..4096).", "16")
    :convert(math.tointeger):argname("<n>")
  opts = parser:parse()
  if opts.d < 4 or opts.d > 4096 or opts.d % 2 ~= 0 then
    cli.usage("--d must be even and in 4..4096, got " .. opts.d)
  end
end)

local D = opts.d
local N = 150          -- the query's position; keys at 0 .. N
local S = N + 1
local SHIFT = 777
local NEAR = { 148, 149 }
local FAR = { 10, 20 }
local g = rp.rng(opts.seed)

-- Contents: q [1 x 1 x 1 x D], k and v [1 x S x 1 x D]. Keys are scaled so that scores vary by a
-- few units and every weight matters.
local q0 = g:randn { 1, 1, 1, D }
local k0 = g:randn { 1, S, 1, D }
local v0 = g:randn { 1, S, 1, D }

-- The contents with rows a and b (0-based positions) of k and v swapped.
local function swapped(a, b)
  local k, v = k0:clone(), v0:clone()
  for _, t in ipairs { { k, k0 }, { v, v0 } } do
    local dst, src = t[1], t[2]
    dst:narrow(2, a + 1, 1):copy(src:narrow(2, b + 1, 1))
    dst:narrow(2, b + 1, 1):copy(src:narrow(2, a + 1, 1))
  end
  return k, v
end

-- Runs a scheme: its attention of the query over contents k, v with every position shifted by
-- `shift`; returns out (a Lua list of D numbers) and the log-weights (a list of S: the scores
-- less their log-sum-exp, which the swaps and a relative shift leave alone).
local function attend(scheme, k, v, shift)
  local q = q0
  if scheme.embed then q, k, v = scheme.embed(q, k, v, shift) end
  local o = { q_offset = N, pos_offset = shift }
  for key, val in pairs(scheme.opts) do o[key] = val end
  local out, att = rp.attention(q, k, v, o)
  return out:view(D):totable(), att:view(S):log():totable()
end

-- The largest difference; NaN when any entry is NaN (a comparison would skip it).
local function maxdiff(a, b)
  local m = 0
  for i = 1, #a do
    local d = math.abs(a[i] - b[i])
    if d ~= d then return d end
    m = math.max(m, d)
  end
  return m
end

-- The weights after a swap of a and b, put back in the original order.
local function unswap(w, a, b)
  local u = { table.unpack(w) }
  u[a + 1], u[b + 1] = w[b + 1], w[a + 1]
  return u
end

-- Absolute encodings act on the embeddings, not inside attention: q, k, v get the Vaswani table
-- of their positions added (with identity projections), as a model's first layer sees them.
local function sinusoidal(q, k, v, shift)
  local P = rp.rope.sinusoidal(S, D, { offset = shift }):view(1, S, 1, D)
  return q + P:narrow(2, N + 1, 1), k + P, v + P
end

-- The measurements of one scheme: how much the log-weights (w) and the output (o) move.
local function measure(scheme)
  local o, w = attend(scheme, k0, v0, 0)
  local os_, ws = attend(scheme, k0, v0, SHIFT)
  local r = { shift = { w = maxdiff(w, ws), o = maxdiff(o, os_) } }
  for _, t in ipairs { { "near", NEAR }, { "far", FAR } } do
    local a, b = t[2][1], t[2][2]
    local k, v = swapped(a, b)
    local o2, w2 = attend(scheme, k, v, 0)
    -- the output moves by at most the share of the two keys: measured relative to it
    -- (at least 2 / S, the share of two keys of uniform weights: float rounding stays small)
    local share = math.max(math.exp(w[a + 1]) + math.exp(w[b + 1]), 2 / S)
    r[t[1]] = { w = maxdiff(w, unswap(w2, a, b)), o = maxdiff(o, o2) / share }
  end
  return r
end

-- Invariance holds to float32 rounding of angles of ~1000 rad; a dependence shows far above.
local SAME, DIFFERENT = 1e-4, 1e-3

-- What a score or an output depends on: absolute positions, the relative distance, the distance
-- clipped (or bucketed), or nothing.
local ABS, REL, CLIP, NOTHING = "absolute", "relative", "clipped", "nothing"

local function classify(r, part)
  local function same(x) return x[part] <= SAME end
  local function diff(x) return x[part] > DIFFERENT end
  if diff(r.shift) then return ABS end
  if not same(r.shift) then return "unclear" end
  if same(r.near) then return same(r.far) and NOTHING or "unclear" end
  if not diff(r.near) then return "unclear" end
  if same(r.far) then return CLIP end
  if diff(r.far) then return REL end
  return "unclear"
end

---------------------------------------------------------------------------------------------------
-- The schemes and what their formulas say.

local schemes = {
  { name = "none", opts = { pe = "none" }, score = NOTHING, output = NOTHING },
  { name = "sinusoidal (embeddings)", opts = { pe = "none" }, embed = sinusoidal,
    score = ABS, output = ABS },
}
-- every subset of the rotations of q, k, v and o (pe rope with rotate)
for mask = 1, 15 do
  local sub = ""
  for i, c in ipairs { "q", "k", "v", "o" } do
    if mask & (1 << (i - 1)) ~= 0 then sub = sub .. c end
  end
  local function has(c) return sub:find(c, 1, true) ~= nil end
  local score = has("q") ~= has("k") and ABS or has("q") and REL or NOTHING
  local output
  if score == ABS or has("v") ~= has("o") then output = ABS
  elseif has("v") then output = REL
  else output = score end
  local label = ({ qk = " (rope)", qkvo = " (roper)", vo = " (VO-RoPE)" })[sub] or ""
  schemes[#schemes + 1] = { name = "rotate " .. sub .. label, opts = { pe = "rope", rotate = sub },
    score = score, output = output }
end
schemes[#schemes + 1] = { name = "roper_legacy (v by 2i)", opts = { pe = "roper_legacy" },
  score = REL, output = ABS }
-- the relative baselines (RoFormer section 2.3 and ALiBi) with random tables: Shaw and DeBERTa
-- clip distances at 16, T5's buckets end at 128 (distances 130 and 140 share the last one)
local function tab(...) return g:randn { ... } end
schemes[#schemes + 1] = { name = "shaw (clip 16)", score = CLIP, output = CLIP,
  opts = { pe = "shaw", rel_clip = 16, rel_k = tab(33, D), rel_v = tab(33, D) } }
schemes[#schemes + 1] = { name = "xl", score = REL, output = REL,
  opts = { pe = "xl", rel_k = tab(S, 1, D), rel_u = tab(1, D), rel_w = tab(1, D) } }
schemes[#schemes + 1] = { name = "t5 (32 buckets, max 128)", score = CLIP, output = CLIP,
  opts = { pe = "t5", rel_bias = tab(1, 32) } }
schemes[#schemes + 1] = { name = "deberta (clip 16)", score = CLIP, output = CLIP,
  opts = { pe = "deberta", rel_clip = 16, rel_k = tab(32, 1, D), rel_q = tab(32, 1, D) } }
schemes[#schemes + 1] = { name = "alibi", opts = { pe = "alibi" }, score = REL, output = REL }
-- frequency schemes (issue 14): the proof of the relative-distance property needs angles linear in
-- the position (p theta_i), not the standard theta_i: random frequencies, the context extensions
-- (which only change theta_i) and xPos (its magnitudes multiply to zeta^((n - i) / scale_base))
-- keep it; an angle table that is not linear in p does not.
local freq, th = {}, {}
for i = 1, D // 2 do freq[i], th[i] = g:uniform() * 2, 10000 ^ (-2 * (i - 1) / D) end
local function add(name, o, score, output)
  schemes[#schemes + 1] = { name = name, opts = o, score = score, output = output }
end
add("rope, random freq", { pe = "rope", freq = freq }, REL, REL)
add("roper, random freq", { pe = "roper", freq = freq }, REL, REL)
add("rope, pi x4", { pe = "rope", scaling = "pi", scaling_factor = 4 }, REL, REL)
add("rope, ntk x4", { pe = "rope", scaling = "ntk", scaling_factor = 4 }, REL, REL)
add("roper, yarn x4 (L 64)", { pe = "roper", scaling = "yarn", scaling_factor = 4, orig_len = 64 },
  REL, REL)
add("rope, xpos 0.4", { pe = "rope", xpos = 0.4 }, REL, REL)
add("roper, xpos 0.4", { pe = "roper", xpos = 0.4 }, REL, REL)
add("rope, angles p^1.5 theta", { pe = "rope", angles = function(p, i) return p ^ 1.5 * th[i + 1] end },
  ABS, ABS)

---------------------------------------------------------------------------------------------------

print(("One query at position %d over keys 0..%d (d = %d, seed %d). The columns: how far the"):format(
  N, N, D, opts.seed))
print("log-weights (w) and the output (o; under the swaps, relative to the weight of the two keys)")
print(("move under the shift by %d and the near and far swaps (invariant: <= %g, dependent:"):format(
  SHIFT, SAME))
print(("> %g), then what the score and the output depend on: absolute positions, the relative"):format(
  DIFFERENT))
print("distance, the distance clipped (or bucketed), or nothing.")
print()
local report = checks.new()
local width = 0
for _, s in ipairs(schemes) do width = math.max(width, #s.name) end
local fmt = "%-" .. width .. "s %-7s %-7s %-7s %-7s %-7s %-7s %-8s %s"
report:line((fmt:format("scheme", "shift w", "shift o", "near w", "near o", "far w", "far o",
  "score", "output")))
for _, s in ipairs(schemes) do
  local r = measure(s)
  local cs, co = classify(r, "w"), classify(r, "o")
  local ok = cs == s.score and co == s.output
  report:verdict(ok, (fmt:format(s.name, ("%.1e"):format(r.shift.w), ("%.1e"):format(r.shift.o),
    ("%.1e"):format(r.near.w), ("%.1e"):format(r.near.o), ("%.1e"):format(r.far.w),
    ("%.1e"):format(r.far.o), cs, co)), not ok and ("expected %s / %s"):format(s.score, s.output)
    or nil)
end

-- xPos in float32: the query side is scaled by zeta_i^(+p/512) and the key side by
-- zeta_i^(-p/512), zeta_0 = 0.4 / 1.4. Their product depends on n - i alone, but each factor is
-- stored on its own: near p = 88.7 * 512 / ln(1.4 / 0.4) = 36,250 the key side's exceeds the
-- float range (and the query side's underflows), so the shift test breaks there.
print()
print("xPos (gamma 0.4, scale base 512) in float32: the shift test of rope + xpos at large offsets")
report:line(("%-10s %-14s %s"):format("offset", "shift w", "shift o"))
local xs = { name = "xpos", opts = { pe = "rope", xpos = 0.4 } }
local o0, w0 = attend(xs, k0, v0, 0)
local first_bad
for _, off in ipairs { 1000, 10000, 20000, 30000, 34000, 35000, 36000, 40000 } do
  local o1, w1 = attend(xs, k0, v0, off)
  local dw, dv = maxdiff(w0, w1), maxdiff(o0, o1)
  local bad = not (dw <= DIFFERENT and dv <= DIFFERENT) -- NaN is bad too
  if bad and not first_bad then first_bad = off end
  report:line(("%-10d %-14.3e %-14.3e %s"):format(off, dw, dv, bad and "broken" or "invariant"))
end
report:verdict(first_bad and first_bad > 20000 and first_bad <= 40000,
  "xPos keeps the shift test up to offset 20000 and loses it by 40000",
  ("first broken: %s"):format(tostring(first_bad)))
os.exit(report:summary("pe identity"))

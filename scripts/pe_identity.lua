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

From these the script names the dependence of the score (the attention weights) and of the output:
"absolute positions", "relative distance", "clipped distance" or "nothing", and checks it against
what the scheme's formula says (the "expected" column, derived by hand: for rotations, the score
is relative when q and k are rotated alike, the output when v and o are too; pe.h and
docs/positional.md give the argument). Every check prints PASS or FAIL; the script ends with
"pe identity: N passed, N failed" and exits with status 1 if any check failed.
]]

package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local rp = require "roper"

local util = require "lib.util"

local opts
util.main("pe_identity.lua", function()
  local parser = util.parser("roper scripts/pe_identity.lua",
    "Shows what the attention score and output of each positional scheme depend on.")
  parser:option("--seed", "Seed of the random contents.", "1"):convert(math.tointeger)
    :argname("<n>")
  parser:option("--d", "Head size: features per head (even, >= 4).", "16")
    :convert(math.tointeger):argname("<n>")
  opts = parser:parse()
  if opts.d < 4 or opts.d % 2 ~= 0 then util.usage("--d must be even and >= 4, got " .. opts.d) end
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

local function maxdiff(a, b)
  local m = 0
  for i = 1, #a do m = math.max(m, math.abs(a[i] - b[i])) end
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
    local share = math.exp(w[a + 1]) + math.exp(w[b + 1])
    r[t[1]] = { w = maxdiff(w, unswap(w2, a, b)), o = maxdiff(o, o2) / share }
  end
  return r
end

-- Invariance holds to float32 rounding of angles of ~1000 rad; a dependence shows far above.
local SAME, DIFFERENT = 2e-4, 1e-2

local function classify(r, part)
  local function same(x) return x[part] <= SAME end
  local function diff(x) return x[part] > DIFFERENT end
  if diff(r.shift) then return "absolute positions" end
  if not same(r.shift) then return "unclear" end
  if same(r.near) then return same(r.far) and "nothing" or "unclear" end
  if not diff(r.near) then return "unclear" end
  if same(r.far) then return "clipped distance" end
  if diff(r.far) then return "relative distance" end
  return "unclear"
end

---------------------------------------------------------------------------------------------------
-- The schemes and what their formulas say.

local ABS, REL, CLIP, NOTHING = "absolute positions", "relative distance", "clipped distance", "nothing"

local schemes = {
  { name = "none", opts = { pe = "none" }, score = NOTHING, output = NOTHING },
  { name = "sinusoidal (on the embeddings)", opts = { pe = "none" }, embed = sinusoidal,
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

---------------------------------------------------------------------------------------------------

print(("One query at position %d over keys 0..%d (d = %d, seed %d). Columns: how far the "
  .. "log-weights (w)"):format(N, N, D, opts.seed))
print(("and the output (o; under the swaps, relative to the weight of the two keys) move under the "
  .. "shift by %d"):format(SHIFT))
print(("and the near and far swaps; invariant means <= %g, dependent > %g."):format(SAME, DIFFERENT))
print()
local fmt = "%-32s %-9s %-9s %-9s %-9s %-9s %-9s  %-18s %-18s %s"
print(fmt:format("scheme", "shift w", "shift o", "near w", "near o", "far w", "far o",
  "score depends on", "output depends on", ""))
local passed, failed = 0, 0
for _, s in ipairs(schemes) do
  local r = measure(s)
  local cs, co = classify(r, "w"), classify(r, "o")
  local ok = cs == s.score and co == s.output
  if ok then passed = passed + 1 else failed = failed + 1 end
  print(fmt:format(s.name, ("%.1e"):format(r.shift.w), ("%.1e"):format(r.shift.o),
    ("%.1e"):format(r.near.w), ("%.1e"):format(r.near.o), ("%.1e"):format(r.far.w),
    ("%.1e"):format(r.far.o), cs, co,
    ok and "PASS" or ("FAIL (expected %s / %s)"):format(s.score, s.output)))
end
print()
print(("pe identity: %d passed, %d failed"):format(passed, failed))
os.exit(failed == 0 and 0 or 1)

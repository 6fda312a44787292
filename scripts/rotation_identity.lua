--[[
rotation_identity.lua: the RoPER derivation, checked step by step with numbers.

    build/roper scripts/rotation_identity.lua [--seed N] [--d N]
    LUA_CPATH='build/?.so' lua5.4 scripts/rotation_identity.lua [--seed N] [--d N]

RoPE (rotary position embedding) splits a head of d features into d/2 pairs and turns pair j of
the vector at position m by the angle m*theta_j, theta_j = base^(-2j/d), base = 10000. With the
default "half" pairing, pair j is (feature j, feature j + d/2) (0-based j). For one pair

    RoPE(x1, x2, m) = R(m theta) (x1, x2)^T,    R(a) = | cos a  -sin a |
                                                     | sin a   cos a |

RoPER (RoPE with Relative distances) also rotates the values: v_i by +i*theta, takes the weighted
sum with the attention weights a_{n,i}, and rotates the result back by -n*theta. Its output is

    o_n = R(-n theta) sum_i a_{n,i} R(i theta) v_i = sum_i a_{n,i} R((i - n) theta) v_i,

the weighted average of the values, each turned by its distance to the query. Every step below
checks one piece of that argument: the library (roper, float32) computes one side, and the other
side is computed here independently, in Lua doubles, from explicit 2x2 rotation matrices built
from math.cos and math.sin. Positions go well above 10^4 on purpose (12345, 40000, random ones up
to 10^5): that is where a sloppy implementation (angles computed in float) loses accuracy.

Every check prints PASS or FAIL, what it checked, and its max error and tolerance (a check that a
formula is wrong: the difference and the least it must be) below. The script ends with
"rotation identity: N passed, N failed" and exits with status 1 if any check failed.
]]

-- lib/ beside this file, wherever it runs from: roper, lua5.4 or an installed roper-<name>
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local rp = require "roper"

local cli = require "lib.cli"
local checks = require "lib.checks"

---------------------------------------------------------------------------------------------------
-- Arguments: --seed N (default 1), --d N (head size, even, default 64). A bad one is one line on
-- stderr and exit status 2 (cli.main, cli.parser).

local opts
-- --help opens with these (each runs as written from the repository's folder; tests/lua/
-- help_examples_spec.lua runs them)
local EXAMPLES = {
  { "the derivation checked in numbers, head size 64",
    "build/roper scripts/rotation_identity.lua" },
  { "the same with head size 16 and other random vectors",
    "build/roper scripts/rotation_identity.lua --d 16 --seed 2" },
  { "a head size that is not a power of two",
    "build/roper scripts/rotation_identity.lua --d 6" },
}

cli.main("rotation_identity.lua", function()
  local parser = cli.parser("build/roper scripts/rotation_identity.lua",
    "Walks through the RoPER derivation of the write-up with numbers.", EXAMPLES)
  parser:option("--seed", "Seed of the random vectors and positions.", "1")
    :convert(math.tointeger):argname("<n>")
  parser:option("--d", "Head size: features per head (even, 2..4096).", "64")
    :convert(math.tointeger):argname("<n>")
  opts = parser:parse()
  if opts.d < 2 or opts.d > 4096 or opts.d % 2 ~= 0 then
    cli.usage("--d must be even and in 2..4096, got " .. opts.d)
  end
end)
local D = opts.d          -- head size
local HALF = D // 2       -- number of rotated pairs
local BASE = 10000
local EPS = 1e-5          -- relative tolerance for float32 results (float32 rounding is 6e-8)
local g = rp.rng(opts.seed)

---------------------------------------------------------------------------------------------------
-- Reporting

local report = checks.new()
local step_no = 0

local function step(title, ...)
  step_no = step_no + 1
  print()
  print(string.format("%d. %s", step_no, title))
  for _, line in ipairs({ ... }) do print(checks.INDENT .. line) end
end

-- One check. By default it passes when err <= tol. With expect_large it passes when err > tol:
-- used where the point is that a formula is WRONG by a clear margin. NaN never passes.
local function check(label, err, tol, expect_large)
  if expect_large then report:apart(label, err, tol) else report:close(label, err, tol) end
end

local function note(line) report:note(line) end

---------------------------------------------------------------------------------------------------
-- Plain-Lua (double precision) helpers: these never call the library's rotation.

-- theta_j = base^(-2j/d), j = 0 .. d/2-1 (stored 1-based: TH[j+1]).
local TH = {}
for j = 0, HALF - 1 do TH[j + 1] = BASE ^ (-2 * j / D) end

-- The 2x2 rotation matrix R(a) and small matrix helpers.
local function R(a)
  local c, s = math.cos(a), math.sin(a)
  return { { c, -s }, { s, c } }
end
local function mat_t(M) return { { M[1][1], M[2][1] }, { M[1][2], M[2][2] } } end
local function mat_mul(A, B)
  local C = { { 0, 0 }, { 0, 0 } }
  for r = 1, 2 do
    for c = 1, 2 do C[r][c] = A[r][1] * B[1][c] + A[r][2] * B[2][c] end
  end
  return C
end
local function mat_vec(M, x1, x2) return M[1][1] * x1 + M[1][2] * x2, M[2][1] * x1 + M[2][2] * x2 end

-- RoPE of a whole d-vector (a Lua table) by angle pos*theta_j for pair j, "half" pairing:
-- pair j is (x[j], x[j + d/2]) in 1-based Lua indices.
local function rotate_ref(x, pos)
  local y = {}
  for j = 1, HALF do
    y[j], y[j + HALF] = mat_vec(R(pos * TH[j]), x[j], x[j + HALF])
  end
  return y
end

local function dot(a, b)
  local s = 0
  for j = 1, #a do s = s + a[j] * b[j] end
  return s
end
local function norm(a) return math.sqrt(dot(a, a)) end

-- Flattens a tensor or a nested table of numbers into one list.
local function flat(x)
  if rp.is_tensor(x) then x = x:totable() end
  local out = {}
  local function walk(t)
    if type(t) == "number" then out[#out + 1] = t else for _, e in ipairs(t) do walk(e) end end
  end
  walk(x)
  return out
end

-- Max |a - b| over all elements (tensors or nested tables of the same size); NaN if any is NaN.
local function maxdiff(a, b)
  local fa, fb = flat(a), flat(b)
  assert(#fa == #fb, "maxdiff: different sizes " .. #fa .. " and " .. #fb)
  local m = 0
  for i = 1, #fa do
    local e = math.abs(fa[i] - fb[i])
    if e ~= e then return e end
    if e > m then m = e end
  end
  return m
end
local function maxabs(a)
  local m = 0
  for _, x in ipairs(flat(a)) do m = math.max(m, math.abs(x)) end
  return m
end

local function randvec() -- a Lua table of D standard normal doubles
  local x = {}
  for j = 1, D do x[j] = g:normal() end
  return x
end

-- Positions used throughout: small ones, the two fixed large ones, and random ones up to 10^5.
local function positions()
  return { 0, 1, g:int(2, 1000), 12345, 40000, g:int(10001, 100000) }
end

print(string.format("RoPER rotation identity, checked with numbers\n(seed %d, head size d = %d, "
                    .. "%d pairs, base %d, half pairing)", opts.seed, D, HALF, BASE))

---------------------------------------------------------------------------------------------------
step("RoPE is a rotation: it keeps every length",
     "RoPE turns each pair (x_j, x_{j+d/2}) by the angle m*theta_j. A rotation never changes a",
     "length, so the norm of every pair, and of the whole vector, must be the same after RoPE.")

do
  local pair_err, vec_err, mat_err, scale = 0, 0, 0, 0
  for _, m in ipairs(positions()) do
    local x = randvec()
    local y = rp.rope.rotate(rp.tensor(x), { positions = m }):totable()
    for j = 1, HALF do
      local before = math.sqrt(x[j] ^ 2 + x[j + HALF] ^ 2)
      local after = math.sqrt(y[j] ^ 2 + y[j + HALF] ^ 2)
      pair_err = math.max(pair_err, math.abs(after - before))
    end
    vec_err = math.max(vec_err, math.abs(norm(y) - norm(x)))
    -- and it is exactly the matrix R(m theta_j) applied to pair j:
    mat_err = math.max(mat_err, maxdiff(y, rotate_ref(x, m)))
    scale = math.max(scale, norm(x))
  end
  check("norm of every pair, 6 positions from 0 to 10^5", pair_err, EPS * scale)
  check("norm of the whole vector", vec_err, EPS * scale)
  check("RoPE(x, m) equals the explicit 2x2 matrices R(m theta_j) applied pair by pair",
        mat_err, EPS * scale)
  note("(tolerances are 1e-5 x the largest vector norm; float32 keeps about 7 digits)")
end

---------------------------------------------------------------------------------------------------
step("R(m)^T R(n) = R(n - m): rotations compose by subtracting angles",
     "Turning back by m theta after turning forward by n theta is one turn by (n - m) theta. We",
     "build R(m theta_j), R(n theta_j) from the library's cos/sin tables (rp.rope.angles).")

do
  local tab_err, rot_err, scale = 0, 0, 0
  local pairs_mn = { { 3, 10 }, { 12345, 40000 }, { 40000, 12345 } }
  for _ = 1, 3 do pairs_mn[#pairs_mn + 1] = { g:int(0, 100000), g:int(0, 100000) } end
  for _, mn in ipairs(pairs_mn) do
    local m, n = mn[1], mn[2]
    local cos, sin = rp.rope.angles({ m, n }, D)
    local c, s = cos:totable(), sin:totable()
    for j = 1, HALF do
      local Rm = { { c[1][j], -s[1][j] }, { s[1][j], c[1][j] } }
      local Rn = { { c[2][j], -s[2][j] }, { s[2][j], c[2][j] } }
      local lhs = mat_mul(mat_t(Rm), Rn)
      local rhs = R((n - m) * TH[j])       -- in doubles, straight from the angle
      tab_err = math.max(tab_err, maxdiff(lhs, rhs))
    end
    -- the same with whole vectors: rotate forward by n, then backward (sign = -1) by m
    local x = randvec()
    local y = rp.rope.rotate(rp.tensor(x), { positions = n })
    y = rp.rope.rotate(y, { positions = m, sign = -1 })
    rot_err = math.max(rot_err, maxdiff(y, rotate_ref(x, n - m)))
    scale = math.max(scale, norm(x))
  end
  check("R(m)^T R(n) - R(n-m), entries of all d/2 blocks, m, n up to 10^5", tab_err, 1e-6)
  check("RoPE(RoPE(x, n), -m) = R((n - m) theta) x, whole vectors", rot_err, EPS * scale)
  -- What float angles would cost: round theta_j and the product m * theta_j to float32.
  local function f32(x) return (string.unpack("f", string.pack("f", x))) end
  local float_err = 0
  for j = 1, HALF do
    local exact = 40000 * TH[j]
    float_err = math.max(float_err, math.abs(math.cos(f32(40000 * f32(TH[j]))) - math.cos(exact)))
  end
  note("(the tables must hold cos/sin of angles computed in double: with m * theta_j computed in")
  note(string.format(" float, cos at position 40000 would already be off by %.1e)", float_err))
end

---------------------------------------------------------------------------------------------------
step("After RoPE, the score q.k depends only on the distance m - n",
     "(R(m theta) q) . (R(n theta) k) = q^T R(m)^T R(n) k = q^T R((n - m) theta) k. So shifting",
     "both positions by the same amount s must leave the score unchanged.")

do
  local shift_err, ref_err, scale = 0, 0, 0
  local shifts = { 1, 12345, 40000, g:int(10001, 100000) }
  for _ = 1, 4 do
    local q, k = randvec(), randvec()
    local qt, kt = rp.tensor(q), rp.tensor(k)
    local m, n = g:int(0, 2000), g:int(0, 2000)
    local function score(a, b)
      local qr = rp.rope.rotate(qt, { positions = a }):totable()
      local kr = rp.rope.rotate(kt, { positions = b }):totable()
      return dot(qr, kr)
    end
    local s0 = score(m, n)
    for _, s in ipairs(shifts) do shift_err = math.max(shift_err, math.abs(score(m + s, n + s) - s0)) end
    -- against the closed form q^T R((n - m) theta) k, in doubles
    ref_err = math.max(ref_err, math.abs(s0 - dot(q, rotate_ref(k, n - m))))
    scale = math.max(scale, norm(q) * norm(k))
  end
  check("score(m + s, n + s) - score(m, n), shifts s up to 10^5", shift_err, EPS * scale)
  check("score(m, n) - q^T R((n - m) theta) k (closed form in doubles)", ref_err, EPS * scale)
  note("(tolerance 1e-5 x |q| |k|, the size a score can have)")

  -- A whole sequence: Q, K are [T x d], row t at position offset + t; scores = Q_rot K_rot^T.
  local T = 8
  local Q, K = g:randn { T, D }, g:randn { T, D }
  local function scores(offset)
    local qr = rp.rope.rotate(Q, { offset = offset })
    local kr = rp.rope.rotate(K, { offset = offset })
    return rp.matmul(qr, kr:t())
  end
  local base_scores = scores(0)
  local err = 0
  for _, s in ipairs { 7, 12345, 40000 } do err = math.max(err, maxdiff(scores(s), base_scores)) end
  local qn, kn = 0, 0
  for t = 1, T do
    qn = math.max(qn, Q[t]:norm())
    kn = math.max(kn, K[t]:norm())
  end
  check(string.format("%d x %d score matrix with rotate{offset = s} vs offset 0, s up to 40000", T, T),
        err, EPS * qn * kn)
end

---------------------------------------------------------------------------------------------------
step("The reverse rotation (sign = -1) undoes RoPE",
     "R(-m theta) R(m theta) = I: rotating by +m theta and then by -m theta gives the input back.",
     "This is the rotation RoPER applies to its output, here on a [B x T x H x d] batch.")

do
  local T = 6
  local x = g:randn { 2, T, 3, D }
  local pos = { 0, 5, 12345, 40000, g:int(10001, 100000), 99999 }
  local err, moved = 0, 0
  for _, o in ipairs { { offset = 0 }, { offset = 40000 }, { positions = pos } } do
    local fwd = { offset = o.offset, positions = o.positions }
    local back = { offset = o.offset, positions = o.positions, sign = -1 }
    local there = rp.rope.rotate(x, fwd)
    local y = rp.rope.rotate(there, back)
    err = math.max(err, maxdiff(y, x))
    moved = math.max(moved, maxdiff(there, x))
  end
  check("rotate(rotate(x), sign = -1) - x, offsets 0 and 40000 and positions up to 10^5",
        err, EPS * maxabs(x))
  note(string.format("(the forward rotation alone moved x by up to %.3g, so this is no accident)", moved))
end

---------------------------------------------------------------------------------------------------
step("'half' and 'interleaved' pairings are the same rotation, with features renumbered",
     "'half' pairs feature j with j + d/2 (labml, GPT-NeoX); 'interleaved' pairs 2j with 2j+1",
     "(the RoFormer paper). Both turn pair j by m theta_j, so moving feature j to 2j and j + d/2",
     "to 2j+1 before and after must turn one into the other.")

do
  local T = 5
  local xh = g:randn { T, D }
  -- perm[i] = the 'half' feature that sits at 'interleaved' feature i (1-based)
  local perm = {}
  for j = 1, HALF do
    perm[2 * j - 1] = j
    perm[2 * j] = j + HALF
  end
  local function to_interleaved(rows)
    local out = {}
    for t, row in ipairs(rows) do
      out[t] = {}
      for i = 1, D do out[t][i] = row[perm[i]] end
    end
    return out
  end
  local xi = rp.tensor(to_interleaved(xh:totable()))
  local err, unpermuted = 0, 0
  for _, offset in ipairs { 0, 12345, 40000 } do
    local yh = rp.rope.rotate(xh, { offset = offset, pairing = "half" })
    local yi = rp.rope.rotate(xi, { offset = offset, pairing = "interleaved" })
    err = math.max(err, maxdiff(to_interleaved(yh:totable()), yi))
    unpermuted = math.max(unpermuted, maxdiff(rp.rope.rotate(xh, { offset = offset, pairing = "interleaved" }),
                                              yh))
  end
  check("P(rotate_half(x)) - rotate_interleaved(P(x)), offsets 0, 12345, 40000", err, EPS * maxabs(xh))
  note(string.format("(without the renumbering the two differ by up to %.3g: the layouts really differ)",
                     unpermuted))
end

---------------------------------------------------------------------------------------------------
-- RoPE attention weights in doubles: a_{n,i} = softmax over i <= n of
-- (R(n theta) q_n) . (R(i theta) k_i) / sqrt(d). q, k: lists of d-vectors; qpos, kpos: positions.
local function weights_ref(q, k, qpos, kpos)
  local a = {}
  for t, qv in ipairs(q) do
    local n = qpos[t]
    local qr = rotate_ref(qv, n)
    local row, mx = {}, -math.huge
    for s, kv in ipairs(k) do
      local i = kpos[s]
      if i > n then row[s] = -math.huge      -- the causal mask: no looking ahead
      else row[s] = dot(qr, rotate_ref(kv, i)) / math.sqrt(D) end
      mx = math.max(mx, row[s])
    end
    local z = 0
    for s = 1, #row do row[s] = math.exp(row[s] - mx); z = z + row[s] end
    for s = 1, #row do row[s] = row[s] / z end
    a[t] = row
  end
  return a
end

-- o_n = sum_i a_{n,i} R(turn(i, n) theta) v_i in doubles; turn(i, n) = i - n for RoPER.
local function mix_ref(a, v, qpos, kpos, turn)
  local out = {}
  for t = 1, #a do
    local o = {}
    for j = 1, D do o[j] = 0 end
    for s = 1, #v do
      local r = rotate_ref(v[s], turn(kpos[s], qpos[t]))
      for j = 1, D do o[j] = o[j] + a[t][s] * r[j] end
    end
    out[t] = o
  end
  return out
end

local function roper_turn(i, n) return i - n end
local function legacy_turn(i, n) return 2 * i - n end

-- Runs rp.attention on random q, k, v [B x T x H x d], [B x S x H x d] and returns the pieces,
-- split per (batch, head) into Lua lists of d-vectors.
local function attention_case(pe, B, T, S, H, q_offset, qkv)
  local q, k, v
  if qkv then q, k, v = qkv.q, qkv.k, qkv.v
  else q, k, v = g:randn { B, T, H, D }, g:randn { B, S, H, D }, g:randn { B, S, H, D } end
  local out, att = rp.attention(q, k, v, { pe = pe, q_offset = q_offset })
  local qo = q_offset or (S - T)
  local qpos, kpos = {}, {}
  for t = 1, T do qpos[t] = qo + t - 1 end
  for s = 1, S do kpos[s] = s - 1 end
  local c = { q = q, k = k, v = v, out = out, att = att, qpos = qpos, kpos = kpos, heads = {} }
  local qt, kt, vt, ot, at = q:totable(), k:totable(), v:totable(), out:totable(), att:totable()
  for b = 1, B do
    for h = 1, H do
      local hd = { q = {}, k = {}, v = {}, out = {}, att = at[b][h] }
      for t = 1, T do hd.q[t], hd.out[t] = qt[b][t][h], ot[b][t][h] end
      for s = 1, S do hd.k[s], hd.v[s] = kt[b][s][h], vt[b][s][h] end
      c.heads[#c.heads + 1] = hd
    end
  end
  return c
end

-- Max errors of one case: weights vs weights_ref, out vs mix_ref(att from the library), scale.
local function compare_case(c, turn)
  local w_err, o_err, scale = 0, 0, 0
  for _, hd in ipairs(c.heads) do
    w_err = math.max(w_err, maxdiff(hd.att, weights_ref(hd.q, hd.k, c.qpos, c.kpos)))
    o_err = math.max(o_err, maxdiff(hd.out, mix_ref(hd.att, hd.v, c.qpos, c.kpos, turn)))
    scale = math.max(scale, maxabs(hd.v))
  end
  return w_err, o_err, scale
end

step("RoPER's output is sum_i a_{n,i} R((i - n) theta) v_i",
     "rp.attention{pe = 'roper'} rotates v_i by +i theta, sums with the weights, and turns the",
     "result back by -n theta. We rebuild each output row from the returned weights 'att' and",
     "explicit rotations by (i - n) theta_j, and check the weights themselves are RoPE's.")

local single -- the one-head case, reused by step 7
do
  single = attention_case("roper", 1, 6, 6, 1)
  local far = attention_case("roper", 1, 3, 6, 1, 40000)   -- queries at 40000..40002
  local multi = attention_case("roper", 2, 5, 5, 3)
  for _, c in ipairs {
    { single, "one head, T = S = 6, causal" },
    { far, "queries at 40000..40002, keys at 0..5" },
    { multi, "batch 2, 3 heads, T = S = 5" } } do
    local w_err, o_err, scale = compare_case(c[1], roper_turn)
    check(c[2] .. ": weights att vs softmax of RoPE scores", w_err, EPS)
    check(c[2] .. ": output vs sum_i a R((i - n) theta) v_i", o_err, EPS * scale)
  end
end

---------------------------------------------------------------------------------------------------
step("The write-up's printed final result does not hold; the corrected one does",
     "The write-up ends with the second component sum a v1 cos(i-n)theta + sum a v2 sin(i-n)theta",
     "and the summary sum a RoPE(v1, v1, (i-n)theta). Expanding R((i-n)theta)(v1, v2) gives instead",
     "v2 cos + v1 sin, i.e. RoPE(v1, v2, (i-n)theta). We evaluate all three against roper's output.")

do
  local hd = single.heads[1]
  local c = single
  local lit_err, sum_err, fix_err, first_err = 0, 0, 0, 0
  local scale = maxabs(hd.out)
  for t = 1, #hd.out do
    local n = c.qpos[t]
    for j = 1, HALF do
      -- the four sums of the derivation, phi = (i - n) theta_j
      local v1c, v2s, v2c, v1s = 0, 0, 0, 0
      local rv1 = { 0, 0 } -- sum a RoPE(v1, v1, phi)
      for s = 1, #hd.v do
        local a, phi = hd.att[t][s], (c.kpos[s] - n) * TH[j]
        local v1, v2 = hd.v[s][j], hd.v[s][j + HALF]
        v1c = v1c + a * v1 * math.cos(phi)
        v2s = v2s + a * v2 * math.sin(phi)
        v2c = v2c + a * v2 * math.cos(phi)
        v1s = v1s + a * v1 * math.sin(phi)
        local r1, r2 = mat_vec(R(phi), v1, v1)
        rv1[1], rv1[2] = rv1[1] + a * r1, rv1[2] + a * r2
      end
      local o1, o2 = hd.out[t][j], hd.out[t][j + HALF]
      first_err = math.max(first_err, math.abs(o1 - (v1c - v2s)))        -- first component: right
      lit_err = math.max(lit_err, math.abs(o2 - (v1c + v2s)))            -- printed second component
      sum_err = math.max(sum_err, math.abs(o1 - rv1[1]), math.abs(o2 - rv1[2]))
      fix_err = math.max(fix_err, math.abs(o2 - (v2c + v1s)))            -- corrected second component
    end
  end
  local margin = 0.1 * scale
  check("literal second component sum a v1 cos + sum a v2 sin is WRONG by a clear margin",
        lit_err, margin, true)
  check("literal summary sum a RoPE(v1, v1, (i-n)theta) is WRONG by a clear margin",
        sum_err, margin, true)
  note(string.format("(both pass only if off by more than 0.1 x max|o| = %.3g; a true identity would", margin))
  note(string.format(" be off by about 1e-7 x max|o|; the first component, sum a v1 cos - sum a v2 sin,"))
  note(string.format(" is right: off by %.3e)", first_err))
  check("corrected second component sum a v2 cos + sum a v1 sin, i.e. RoPE(v1, v2, (i-n)theta)",
        math.max(fix_err, first_err), EPS * maxabs(hd.v))
end

---------------------------------------------------------------------------------------------------
step("What roper_legacy computes instead: sum_i a_{n,i} R((2i - n) theta) v_i",
     "From 2022-05-31 to 2024-06-20 the labml code rotated the values twice (+2i theta), so the",
     "output keeps the absolute position i: o_n = R(-n theta) sum a R(2i theta) v_i. Shifting every",
     "position by s leaves the weights alone (step 3) but turns legacy's output by s theta.")

do
  local T, S = 6, 6
  local q, k, v = g:randn { 1, T, 1, D }, g:randn { 1, S, 1, D }, g:randn { 1, S, 1, D }
  local leg = attention_case("roper_legacy", 1, T, S, 1, nil, { q = q, k = k, v = v })
  local rop = attention_case("roper", 1, T, S, 1, nil, { q = q, k = k, v = v })
  local w_err, o_err, scale = compare_case(leg, legacy_turn)
  check("roper_legacy weights att vs softmax of RoPE scores", w_err, EPS)
  check("roper_legacy output vs sum_i a R((2i - n) theta) v_i", o_err, EPS * scale)
  local multi = attention_case("roper_legacy", 2, 4, 5, 2)
  local _, o_err2, scale2 = compare_case(multi, legacy_turn)
  check("roper_legacy, batch 2, 2 heads, T = 4 < S = 5: output vs the double-rotation sum",
        o_err2, EPS * scale2)

  -- The same pipeline, built from rp.rope.rotate and rp.matmul, with every position shifted by s:
  --   roper:  o_n = R(-(n+s) theta) sum_i a R((i+s) theta) v_i
  --   legacy: o_n = R(-(n+s) theta) sum_i a R(2(i+s) theta) v_i   (rotate with scale = 2)
  -- The weights a do not change under a shift (step 3), so we reuse att.
  local a = rop.att[1][1]                 -- [T x S]
  local v2 = v:view { S, D }
  local q_offset = S - T
  local function pipeline(s, legacy)
    local vr = rp.rope.rotate(v2, { offset = s, scale = legacy and 2 or 1 })
    local o = rp.matmul(a, vr)
    return rp.rope.rotate(o, { offset = q_offset + s, sign = -1 })
  end
  local out_r, out_l = rop.out:view { T, D }, leg.out:view { T, D }
  local vmax = maxabs(v)
  check("the rotate/matmul pipeline at shift 0 reproduces rp.attention (roper and legacy)",
        math.max(maxdiff(pipeline(0, false), out_r), maxdiff(pipeline(0, true), out_l)), EPS * vmax)
  local inv_err, leak, turn_err = 0, 0, 0
  for _, s in ipairs { 12345, 40000 } do
    inv_err = math.max(inv_err, maxdiff(pipeline(s, false), out_r))
    local shifted = pipeline(s, true)
    leak = math.max(leak, maxdiff(shifted, out_l))
    -- the shifted legacy output is the unshifted one turned by s theta (in doubles)
    local turned = {}
    for t, row in ipairs(out_l:totable()) do turned[t] = rotate_ref(row, s) end
    turn_err = math.max(turn_err, maxdiff(shifted, turned))
  end
  check("roper: every position shifted by 12345 and 40000, output unchanged", inv_err, EPS * vmax)
  check("roper_legacy: the same shifts change the output by a clear margin (NOT shift invariant)",
        leak, 0.1 * maxabs(out_l), true)
  check("roper_legacy: the shifted output is the old one turned by s theta", turn_err, EPS * vmax)
  note("(legacy's output depends on where the window sits, not only on distances: the double")
  note(" rotation leaves R(i theta) of the absolute position i in every term)")
end

---------------------------------------------------------------------------------------------------
os.exit(report:summary("rotation identity"))

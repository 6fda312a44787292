-- Other libraries' rotary options mapped onto roper's (docs/interop.md, "Mapping other libraries'
-- options"): for each row of the table the mapped roper call (rp.rope.rotate, rp.attention) gives
-- the numbers of that library's formula, written here in plain Lua doubles from the library's
-- public documentation and source (the formulas are described in docs/interop.md; no code of
-- theirs is used), within TOL. Where a library differs in a way no option reproduces, the test
-- checks what agrees and the size of what does not.
--   rotary-embedding-torch (lucidrains/rotary-embedding-torch, RotaryEmbedding): dim, theta,
--     interleaved pairs, freqs_for 'lang' / 'pixel' / 'constant' (max_freq, num_freqs),
--     custom_freqs, interpolate_factor, theta_rescale_factor, offset, queries after cached keys,
--     use_xpos and xpos_scale_base (positions centred at seq_len // 2)
--   labml (labml_nn.transformers.rope and rope.value_pe, the labml.ai annotated
--     implementation): RotaryPositionalEmbeddings(d, base) and its reverse rotation,
--     RotaryPEMultiHeadAttention (rope_percentage), RotaryValuePEMultiHeadAttention (RoPER:
--     rope_value_percentage)

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"
local rp = require "roper"

local TOL = 1e-6 -- inputs in [-1, 1): float32 rounding of the tables and products

-- x (a tensor) as its rows along the last dim: { {vec = {...}, idx = {i1, i2, ...}}, ... } in
-- row-major order, idx the 0-based index of the row over the leading dims.
local function rows(x)
  local out = {}
  local function walk(t, idx)
    if type(t[1]) == "number" then
      out[#out + 1] = { vec = t, idx = { table.unpack(idx) } }
      return
    end
    for i, sub in ipairs(t) do
      idx[#idx + 1] = i - 1
      walk(sub, idx)
      idx[#idx] = nil
    end
  end
  walk(x:totable(), {})
  return out
end

-- The flat list of fn(row) over the rows of x (fn returns the new vector).
local function map_rows(x, fn)
  local flat = {}
  for _, r in ipairs(rows(x)) do
    for _, v in ipairs(fn(r.vec, r.idx)) do flat[#flat + 1] = v end
  end
  return flat
end

local function uniform(g, shape) return g:rand(shape) * 2 - 1 end

---------------------------------------------------------------------------------------------------
-- rotary-embedding-torch, RotaryEmbedding(dim, custom_freqs, freqs_for, theta, max_freq, num_freqs,
-- use_xpos, xpos_scale_base, interpolate_factor, theta_rescale_factor):
--   freqs  'lang': f_j = theta'^(-2j/dim), j = 0 .. dim/2 - 1, theta' = theta *
--          theta_rescale_factor^(dim/(dim-2)); 'pixel': f_j = pi * linspace(1, max_freq/2, dim/2)_j;
--          'constant': num_freqs ones; or custom_freqs
--   angle of feature 2j and 2j+1 (each frequency repeated twice: interleaved pairs) at sequence
--   index t: p f_j, p = (t + offset) / interpolate_factor
--   rotation  out = x cos + rotate_half(x) sin, rotate_half(x)_(2j, 2j+1) = (-x_(2j+1), x_2j),
--   on the first 2 #freqs features; the others pass
--   xPos (rotate_queries_and_keys): pair j of q times s_j^w, of k times s_j^-w, s_j = (2j +
--   0.4 dim) / (1.4 dim), w = (p - floor(n / 2)) / xpos_scale_base, n the sequence length
local ret = {}

function ret.freqs(o)
  if o.custom_freqs then return o.custom_freqs end
  local f, dim = {}, o.dim
  if (o.freqs_for or "lang") == "lang" then
    local theta = (o.theta or 10000) * (o.theta_rescale_factor or 1) ^ (dim / (dim - 2))
    for j = 0, dim // 2 - 1 do f[j + 1] = 1 / theta ^ (2 * j / dim) end
  elseif o.freqs_for == "pixel" then
    local n, hi = dim // 2, (o.max_freq or 10) / 2
    for j = 0, n - 1 do f[j + 1] = (1 + (hi - 1) * j / (n - 1)) * math.pi end
  else -- constant
    for j = 1, o.num_freqs or 1 do f[j] = 1 end
  end
  return f
end

-- One vector x at sequence index t; side 1 (q) or -1 (k) for xPos, n the sequence length.
function ret.rotate(x, t, o, side, n)
  local f = ret.freqs(o)
  local p = (t + (o.offset or 0)) / (o.interpolate_factor or 1)
  local y = {}
  for i, v in ipairs(x) do y[i] = v end
  for j = 0, #f - 1 do
    local a, b = x[2 * j + 1], x[2 * j + 2]
    local c, s = math.cos(p * f[j + 1]), math.sin(p * f[j + 1])
    local scale = 1
    if o.use_xpos then
      local sj = (2 * j + 0.4 * o.dim) / (1.4 * o.dim)
      scale = sj ^ (side * (p - n // 2) / (o.xpos_scale_base or 512))
    end
    y[2 * j + 1] = (a * c - b * s) * scale
    y[2 * j + 2] = (b * c + a * s) * scale
  end
  return y
end

---------------------------------------------------------------------------------------------------
-- labml's annotated RoPE (labml_nn/transformers/rope): RotaryPositionalEmbeddings(d, base) on x
-- [seq_len x batch x heads x features]: theta_i = base^(-2i/d), i = 0 .. d/2 - 1; feature i paired
-- with i + d/2 (half pairing), at sequence index m:
--   x'_i = x_i cos m theta_i - x_(i+d/2) sin m theta_i,  x'_(i+d/2) = x_(i+d/2) cos + x_i sin,
-- the features beyond d pass; ReverseRotaryPositionalEmbeddings turns by -m theta_i.
-- RotaryPEMultiHeadAttention(heads, d_model, rope_percentage): q and k rotated with d =
-- int(d_k rope_percentage), scores q.k / sqrt(d_k), the mask, softmax over the keys;
-- RotaryValuePEMultiHeadAttention adds rope_value_percentage: v_i rotated by +i theta (d_v =
-- int(d_k rope_value_percentage)), the weighted sum rotated by -n theta (RoPER).
local labml = {}

function labml.rotate(x, m, d, base, sign)
  local y = {}
  for i, v in ipairs(x) do y[i] = v end
  for i = 0, d // 2 - 1 do
    local th = 1 / (base or 10000) ^ (2 * i / d)
    local c, s = math.cos(m * th), (sign or 1) * math.sin(m * th)
    local a, b = x[i + 1], x[i + 1 + d // 2]
    y[i + 1] = a * c - b * s
    y[i + 1 + d // 2] = b * c + a * s
  end
  return y
end

-- The attention output of one sequence, x [seq][heads][d_k] each for q, k, v (labml's layout
-- without the batch), causal mask: out [seq][heads][d_k].
function labml.attention(q, k, v, rope_pct, value_pct)
  local T, H, dk = #q, #q[1], #q[1][1]
  local d, dv = math.floor(dk * rope_pct), value_pct and math.floor(dk * value_pct)
  local out = {}
  for n = 1, T do
    out[n] = {}
    for hh = 1, H do
      local qn = labml.rotate(q[n][hh], n - 1, d)
      local sc = {}
      for i = 1, T do
        if i > n then
          sc[i] = -math.huge
        else
          sc[i] = h.naive.dot(qn, labml.rotate(k[i][hh], i - 1, d)) / math.sqrt(dk)
        end
      end
      local a = h.naive.softmax(sc)
      local o = {}
      for j = 1, dk do o[j] = 0 end
      for i = 1, n do
        local vi = dv and labml.rotate(v[i][hh], i - 1, dv) or v[i][hh]
        for j = 1, dk do o[j] = o[j] + a[i] * vi[j] end
      end
      out[n][hh] = dv and labml.rotate(o, n - 1, dv, nil, -1) or o
    end
  end
  return out
end

---------------------------------------------------------------------------------------------------

describe("rotary-embedding-torch's RotaryEmbedding mapped onto rp.rope.rotate", function()
  local g = rp.rng(32)

  -- { the library's options, roper's, what the row maps }
  local cases = {
    { { dim = 16, theta = 10000 }, { d_rot = 16, pairing = "interleaved" },
      "dim, theta: d_rot, base; pairs (2j, 2j+1): pairing interleaved" },
    { { dim = 8, theta = 500 }, { d_rot = 8, base = 500, pairing = "interleaved" },
      "dim < the head's features: the rest pass" },
    { { dim = 12, interpolate_factor = 4 },
      { d_rot = 12, pairing = "interleaved", scaling = "pi", scaling_factor = 4 },
      "interpolate_factor s: scaling pi, scaling_factor s" },
    { { dim = 16, theta_rescale_factor = 8 },
      { d_rot = 16, pairing = "interleaved", scaling = "ntk", scaling_factor = 8 },
      "theta_rescale_factor s: scaling ntk, scaling_factor s" },
    { { dim = 12, freqs_for = "pixel", max_freq = 6 },
      { d_rot = 12, pairing = "interleaved", freq = ret.freqs { dim = 12, freqs_for = "pixel",
                                                                max_freq = 6 } },
      "freqs_for pixel, max_freq: freq = pi linspace(1, max_freq/2, dim/2)" },
    { { dim = 16, freqs_for = "constant", num_freqs = 3 },
      { d_rot = 6, pairing = "interleaved", freq = { 1, 1, 1 } },
      "freqs_for constant, num_freqs n: freq = n ones, d_rot = 2n" },
    { { dim = 8, custom_freqs = { 0.9, 0.3, 0.05, 0.002 } },
      { d_rot = 8, pairing = "interleaved", freq = { 0.9, 0.3, 0.05, 0.002 } },
      "custom_freqs: freq" },
    { { dim = 16, offset = 7 }, { d_rot = 16, pairing = "interleaved", offset = 7 },
      "rotate_queries_or_keys(t, offset = n): offset n" },
  }
  for _, c in ipairs(cases) do
    it(c[3], function()
      local x = uniform(g, { 2, 3, 9, 20 }) -- [batch x heads x seq x features], seq_dim -2
      local opts = { dim = -2 }
      for key, v in pairs(c[2]) do opts[key] = v end
      local y = rp.rope.rotate(x, opts)
      h.approx(y, map_rows(x, function(vec, idx) return ret.rotate(vec, idx[3], c[1]) end), TOL)
      assert.is_true(rp.maxdiff(x, y) > 0.1) -- the positions did something
    end)
  end

  it("queries after cached keys (rotate_queries_with_cached_keys): offset S - T, "
    .. "rp.attention's default q_offset", function()
    local o = { dim = 16 }
    local q, k = uniform(g, { 1, 2, 3, 16 }), uniform(g, { 1, 2, 10, 16 })
    local yq = rp.rope.rotate(q, { dim = -2, pairing = "interleaved", offset = 7 })
    h.approx(yq, map_rows(q, function(vec, idx) return ret.rotate(vec, idx[3] + 7, o) end), TOL)
    -- the scores of the rotated vectors are rp.attention's (q at 7..9, keys 0..9)
    local qs, ks = q:totable(), k:totable()
    local att_want = {}
    for hh = 1, 2 do
      att_want[hh] = {}
      for n = 1, 3 do
        local qn, sc = ret.rotate(qs[1][hh][n], n - 1 + 7, o), {}
        for i = 1, 10 do sc[i] = h.naive.dot(qn, ret.rotate(ks[1][hh][i], i - 1, o)) / 4 end
        att_want[hh][n] = h.naive.softmax(sc)
      end
    end
    local bthd = function(t) return t:permute(1, 3, 2, 4):contiguous() end
    local _, att = rp.attention(bthd(q), bthd(k), bthd(k), { pe = "rope", pairing = "interleaved",
                                                             causal = false })
    h.approx(att, { att_want }, TOL)
  end)

  -- xPos: the library scales pair j of q by s_j^((p - c)/B) and of k by s_j^(-(p - c)/B) with
  -- c = seq_len // 2; roper (Sun et al.) by zeta_j^(p/B) and zeta_j^(-p/B), zeta_j = s_j for gamma
  -- 0.4. The vectors differ by the constant factor s_j^(-+c/B) of each pair; q.k, and so the
  -- scores and the attention, agree.
  it("use_xpos, xpos_scale_base B: xpos 0.4, xpos_scale_base B; q and k differ by s_j^(-+c/B), "
    .. "c = seq_len // 2; the scores agree", function()
    local o = { dim = 12, use_xpos = true, xpos_scale_base = 8 }
    local T = 9
    local q, k, v = uniform(g, { 1, 2, T, 16 }), uniform(g, { 1, 2, T, 16 }), uniform(g, { 1, 2, T, 5 })
    local f = { dim = -2, d_rot = 12, pairing = "interleaved", xpos = 0.4, xpos_scale_base = 8 }
    local yq = rp.rope.rotate(q, f)
    local ref_q = map_rows(q, function(vec, idx) return ret.rotate(vec, idx[3], o, 1, T) end)
    local fk = {}
    for key, val in pairs(f) do fk[key] = val end
    fk.xpos_side = -1
    local yk = rp.rope.rotate(k, fk)
    local ref_k = map_rows(k, function(vec, idx) return ret.rotate(vec, idx[3], o, -1, T) end)
    -- the library's vectors times s_j^(+c/B) (q) or s_j^(-c/B) (k) are roper's
    local c = T // 2
    local function unshift(flat, side)
      local out = {}
      for i, val in ipairs(flat) do
        local feat = (i - 1) % 16
        local sj = feat < 12 and (2 * (feat // 2) + 0.4 * 12) / (1.4 * 12) or 1
        out[i] = val * sj ^ (side * c / 8)
      end
      return out
    end
    h.approx(yq, unshift(ref_q, 1), TOL)
    h.approx(yk, unshift(ref_k, -1), TOL)
    local factor = (0.4 * 12 / (1.4 * 12)) ^ (c / 8) -- pair 0's: 0.53
    assert.is_true(math.abs(h.flatten(yq)[1] / ref_q[1] - factor) < 1e-5 and factor < 0.6,
      "the vectors themselves differ")
    -- rp.attention with the mapped options: the library's scores, softmax, weighted sum
    local qs, ks, vs = q:totable(), k:totable(), v:totable()
    local want = {}
    for n = 1, T do
      want[n] = {}
      for hh = 1, 2 do
        local qn, sc = ret.rotate(qs[1][hh][n], n - 1, o, 1, T), {}
        for i = 1, T do sc[i] = h.naive.dot(qn, ret.rotate(ks[1][hh][i], i - 1, o, -1, T)) / 4 end
        local a, out = h.naive.softmax(sc), {}
        for j = 1, 5 do
          out[j] = 0
          for i = 1, T do out[j] = out[j] + a[i] * vs[1][hh][i][j] end
        end
        want[n][hh] = out
      end
    end
    local bthd = function(t) return t:permute(1, 3, 2, 4):contiguous() end
    local out = rp.attention(bthd(q), bthd(k), bthd(v), { pe = "rope", pairing = "interleaved",
      fraction_qk = 12 / 16, xpos = 0.4, xpos_scale_base = 8, causal = false })
    h.approx(out, { want }, TOL)
  end)
end)

describe("labml's annotated RoPE and RoPER mapped onto rp.rope.rotate and rp.attention", function()
  local g = rp.rng(33)

  it("RotaryPositionalEmbeddings(d, base) on [seq x batch x heads x features]: d_rot d, base, "
    .. "dim 1 (half pairing, roper's default); the reverse rotation: sign -1", function()
    local x = uniform(g, { 11, 2, 3, 24 })
    for _, c in ipairs { { 24, 10000 }, { 16, 10000 }, { 12, 1000 } } do
      local y = rp.rope.rotate(x, { d_rot = c[1], base = c[2], dim = 1 })
      h.approx(y, map_rows(x, function(vec, idx) return labml.rotate(vec, idx[1], c[1], c[2]) end),
        TOL)
      local r = rp.rope.rotate(x, { d_rot = c[1], base = c[2], dim = 1, sign = -1 })
      h.approx(r, map_rows(x, function(vec, idx)
        return labml.rotate(vec, idx[1], c[1], c[2], -1)
      end), TOL)
    end
  end)

  -- labml's tensors are [seq x batch x heads x d_k]; rp.attention's [batch x seq x heads x d_k]
  local function attention_case(pe, rope_pct, value_pct)
    local T, H, dk = 10, 2, 16
    local q, k, v = uniform(g, { 1, T, H, dk }), uniform(g, { 1, T, H, dk }), uniform(g, { 1, T, H, dk })
    local opts = { pe = pe, fraction_qk = rope_pct, fraction_v = value_pct }
    local out = rp.attention(q, k, v, opts)
    local want = labml.attention(q:totable()[1], k:totable()[1], v:totable()[1], rope_pct, value_pct)
    h.approx(out, { want }, TOL)
    return out, rp.attention(q, k, v, { pe = "rope", fraction_qk = rope_pct })
  end

  it("RotaryPEMultiHeadAttention(rope_percentage p): pe rope, fraction_qk p (causal)", function()
    attention_case("rope", 0.5)
    attention_case("rope", 1)
  end)

  it("RotaryValuePEMultiHeadAttention(rope_percentage p, rope_value_percentage pv): pe roper, "
    .. "fraction_qk p, fraction_v pv (v turned by +i theta, the sum by -n theta)", function()
    for _, c in ipairs { { 0.5, 0.5 }, { 1, 0.25 } } do
      local roper, rope = attention_case("roper", c[1], c[2])
      assert.is_true(rp.maxdiff(roper, rope) > 0.01) -- the value rotation did something
    end
  end)
end)

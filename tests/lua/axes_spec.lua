-- Vector positions (issue 35) in rp.rope.angles, rp.rope.rotate and rp.attention: positions of 1
-- to 3 axes with the pair-to-axis maps axial (Su's 2-D RoPE, EVA-02, rotary-embedding-torch),
-- sections (Qwen2-VL's M-RoPE) and mixed (RoPE-Mixed, Heo et al. 2024), against plain-Lua float64
-- formulas written from those sources (attention: rotate, softmax, sum); one axis bit for bit as
-- 1-D positions; the 2-D shift property of q . k and of attention; and every refusal's message.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"
local rp = require "roper"
local naive = h.naive

-- ---- the references ----------------------------------------------------------------------------

-- The angle of each pair (1-based list of d_rot/2) at the vector position pos (a list of A
-- integers). axial: one 1-D RoPE per axis, concatenated, axis a taking floor(half / A) pairs and
-- one more when a <= half mod A, its frequencies base^(-2j / (2 n_a)); sections: the 1-D
-- frequencies base^(-2i / d_rot), pair i turned by the axis whose section holds it; mixed:
-- sum_a pos_a W[a][i].
local function ref_angles(pos, d_rot, o)
  local half, A, base = d_rot // 2, #pos, o.base or 10000
  local ang = {}
  if o.axes == "mixed" then
    for i = 1, half do
      local s = 0
      for a = 1, A do s = s + pos[a] * o.mix[a][i] end
      ang[i] = s
    end
  elseif o.axes == "sections" then
    local a, stop = 0, 0
    for i = 1, half do
      while i > stop do a = a + 1; stop = stop + o.sections[a] end
      ang[i] = pos[a] * base ^ (-2 * (i - 1) / d_rot)
    end
  else
    for a = 1, A do
      local na = half // A + ((a - 1) < half % A and 1 or 0)
      for j = 0, na - 1 do ang[#ang + 1] = pos[a] * base ^ (-2 * j / (2 * na)) end
    end
  end
  return ang
end

-- x (a list) rotated pair by pair by the angles (sign -1: backwards).
local function ref_rotate(x, ang, d_rot, pairing, sign)
  local y = {}
  for j = 1, #x do y[j] = x[j] end
  for i = 1, d_rot // 2 do
    local a, b = naive.pair(i, d_rot, pairing)
    local c, s = math.cos(ang[i]), (sign or 1) * math.sin(ang[i])
    y[a] = c * x[a] - s * x[b]
    y[b] = s * x[a] + c * x[b]
  end
  return y
end

local W2 = { { 0.9, -0.3, 0.05, 0.7, 0.01, -0.2, 0.4, 0.002 },
             { 0.1, 0.8, -0.6, 0.02, 0.3, 0.25, -0.004, 0.5 } }
local W3 = { { 0.5, 0.1, -0.2, 0.03, 0.7, 0.001 }, { -0.4, 0.6, 0.2, 0.05, -0.1, 0.3 },
             { 0.2, -0.3, 0.9, 0.01, 0.02, -0.6 } }

-- The schemes: the options (also the reference's), the axes and d_rot.
local SCHEMES = {
  { name = "axial, 2 axes (default)", o = {}, A = 2, d = 16 },
  { name = "axial, 3 axes, 3+2+2 pairs", o = { axes = "axial" }, A = 3, d = 14 },
  { name = "axial, 2 axes, base 100", o = { base = 100 }, A = 2, d = 12 },
  { name = "sections {2, 3, 3}", o = { axes = "sections", sections = { 2, 3, 3 } }, A = 3, d = 16 },
  { name = "sections {16, 24, 24} (Qwen2-VL)", o = { axes = "sections", sections = { 16, 24, 24 } },
    A = 3, d = 128 },
  { name = "sections {3, 5}", o = { axes = "sections", sections = { 3, 5 } }, A = 2, d = 16 },
  { name = "mixed, 2 axes", o = { axes = "mixed", mix = W2 }, A = 2, d = 16 },
  { name = "mixed, 3 axes", o = { axes = "mixed", mix = W3 }, A = 3, d = 12 },
}

-- n vector positions of A axes in [lo, hi], from a seeded generator.
local function positions(n, A, lo, hi, seed)
  local g = rp.rng(seed)
  local p = {}
  for r = 1, n do
    p[r] = {}
    for a = 1, A do p[r][a] = lo + math.floor(g:uniform() * (hi - lo + 1)) end
  end
  return p
end

local function rows(t) return t:totable() end

-- ---- tables ------------------------------------------------------------------------------------

describe("rp.rope.angles with vector positions", function()
  for k, s in ipairs(SCHEMES) do
    it(s.name .. ": cos and sin are the reference's within one float rounding", function()
      local pos = positions(7, s.A, -50, 300, k)
      local c, sn = rp.rope.angles(pos, s.d, s.o)
      assert.same({ 7, s.d // 2 }, c:shape())
      local wc, ws = {}, {}
      for r = 1, 7 do
        local ang = ref_angles(pos[r], s.d, s.o)
        wc[r], ws[r] = {}, {}
        for i = 1, s.d // 2 do wc[r][i], ws[r][i] = math.cos(ang[i]), math.sin(ang[i]) end
      end
      h.approx(c, wc, 6e-8, "cos")
      h.approx(sn, ws, 6e-8, "sin")
      -- a list of lists and a [n x A] tensor are the same positions
      local c2, s2 = rp.rope.angles(rp.tensor(pos), s.d, s.o)
      h.approx(c2, c, 0)
      h.approx(s2, sn, 0)
    end)
  end

  it("one axis gives the tables of 1-D positions bit for bit, under any scheme", function()
    local p1 = { 0, 5, -3, 100, 77, 9999 }
    local col = {}
    for i, p in ipairs(p1) do col[i] = { p } end
    for _, f in ipairs {
      {}, { scaling = "yarn", scaling_factor = 4, orig_len = 30 },
      { scaling = "dynamic", scaling_factor = 4, orig_len = 20 }, { xpos = 0.4, xpos_side = -1 },
      { freq = { 0.9, -0.31, 2.5, 0.01, 1, 2 }, scaling = "ntk", scaling_factor = 3 },
    } do
      local c0, s0 = rp.rope.angles(p1, 12, f)
      for _, o in ipairs { {}, { axes = "axial" }, { axes = "sections", sections = { 6 } } } do
        local c1, s1 = rp.rope.angles(col, 12, h.merged(f, o))
        h.approx(c1, c0, 0)
        h.approx(s1, s0, 0)
        local c2, s2 = rp.rope.angles(rp.tensor(col), 12, h.merged(f, o))
        h.approx(c2, c0, 0)
        h.approx(s2, s0, 0)
      end
    end
    -- mixed with one axis: the freq table of its row
    local W = { 0.9, -0.31, 2.5, 0.01, 1, -2 }
    local c0, s0 = rp.rope.angles(p1, 12, { freq = W })
    local c1, s1 = rp.rope.angles(col, 12, { axes = "mixed", mix = { W } })
    h.approx(c1, c0, 0)
    h.approx(s1, s0, 0)
  end)

  it("sections at (t, t, t) are the 1-D table (Qwen2-VL's text positions); axial's are not",
    function()
      local tt = {}
      for t = 1, 9 do tt[t] = { t - 1, t - 1, t - 1 } end
      local c0, s0 = rp.rope.angles(9, 16)
      local c1, s1 = rp.rope.angles(tt, 16, { axes = "sections", sections = { 2, 3, 3 } })
      h.approx(c1, c0, 0)
      h.approx(s1, s0, 0)
      local c2 = rp.rope.angles(tt, 16)
      assert.is_true(h.maxdiff(c2, c0) > 0.1)
    end)

  it("the scalings apply per axis with axial, to the 1-D frequencies with sections", function()
    local f = { scaling = "ntk", scaling_factor = 4 }
    -- axial d 16, 2 axes: each block is the 1-D NTK RoPE of width 8
    local c = rows((rp.rope.angles({ { 3, 0 }, { 0, 3 } }, 16, f)))
    local c8 = rows((rp.rope.angles({ 3 }, 8, f)))
    for i = 1, 4 do
      assert.equal(c8[1][i], c[1][i])
      assert.equal(c8[1][i], c[2][4 + i])
      assert.equal(1, c[1][4 + i])
    end
    -- sections: the 1-D NTK frequencies of width 16, split
    local s = rows((rp.rope.angles({ { 3, 0 } }, 16, h.merged(f, { axes = "sections",
      sections = { 5, 3 } }))))
    local c16 = rows((rp.rope.angles({ 3 }, 16, f)))
    for i = 1, 8 do assert.equal(i <= 5 and c16[1][i] or 1, s[1][i]) end
    -- and the reference: NTK's base' = base s^(d/(d-2)) over the block's width 8
    local b = 10000 * 4 ^ (8 / 6)
    for j = 0, 3 do assert.near(math.cos(3 * b ^ (-2 * j / 8)), c[1][j + 1], 6e-8) end
  end)
end)

-- ---- rotations ---------------------------------------------------------------------------------

describe("rp.rope.rotate with vector positions", function()
  for k, s in ipairs(SCHEMES) do
    for _, pairing in ipairs { "half", "interleaved" } do
      it(("%s, %s pairs: the reference rotation, its inverse, and q . k a function of P - Q")
        :format(s.name, pairing), function()
          local T = 6
          local pos = positions(T, s.A, -40, 90, 10 + k)
          local x = rp.randn({ T, 2, s.d }, rp.rng(k))
          local o = h.merged(s.o, { positions = pos, pairing = pairing })
          local y = rp.rope.rotate(x, o)
          local xt, want = x:totable(), {}
          for t = 1, T do
            want[t] = {}
            local ang = ref_angles(pos[t], s.d, s.o)
            for m = 1, 2 do want[t][m] = ref_rotate(xt[t][m], ang, s.d, pairing) end
          end
          h.approx(y, want, 2e-6, "rotate")
          h.approx(rp.rope.rotate(y, h.merged(o, { sign = -1 })), x, 2e-6, "inverse")
          -- q at P, k at Q: the score, then every position shifted by S (negative entries
          -- too), then k moved by one step along axis 1
          local q, kk = xt[1][1], xt[1][2]
          local function score(P, Q)
            local v = rp.rope.rotate(rp.tensor { q, kk }, h.merged(s.o, { positions = { P, Q },
              pairing = pairing })):totable()
            return naive.dot(v[1], v[2])
          end
          local P, Q, S = pos[1], pos[2], { 97, -130, 41 }
          local Ps, Qs, Q1 = {}, {}, {}
          for a = 1, s.A do
            Ps[a], Qs[a], Q1[a] = P[a] + S[a], Q[a] + S[a], Q[a] + (a == 1 and 1 or 0)
          end
          local s0 = score(P, Q)
          local dl, aP, aQ = {}, ref_angles(P, s.d, s.o), ref_angles(Q, s.d, s.o)
          for i = 1, s.d // 2 do dl[i] = aQ[i] - aP[i] end
          assert.near(naive.dot(q, ref_rotate(kk, dl, s.d, pairing)), s0, 1e-5)
          assert.near(s0, score(Ps, Qs), 1e-5)
          assert.is_true(math.abs(score(P, Q1) - s0) > 1e-3, "the score ignores P - Q")
        end)
    end
  end

  it("takes [T x A] positions on the default position dim, and {{r, c}} for one vector", function()
    local x = rp.randn({ 2, 3, 4, 8 }, rp.rng(5)) -- [B x T x H x D]: dim 2
    local pos = { { 1, 2 }, { 3, 4 }, { 5, -6 } }
    local y = rp.rope.rotate(x, { positions = rp.tensor(pos) })
    local xt, yt = x:totable(), y:totable()
    for b = 1, 2 do
      for t = 1, 3 do
        local ang = ref_angles(pos[t], 8, {})
        for m = 1, 4 do h.approx(yt[b][t][m], ref_rotate(xt[b][t][m], ang, 8), 2e-6) end
      end
    end
    local v = rp.randn({ 8 }, rp.rng(6))
    h.approx(rp.rope.rotate(v, { positions = { { 3, -2 } } }),
      ref_rotate(v:totable(), ref_angles({ 3, -2 }, 8, {}), 8), 2e-6)
  end)

  it("takes the grid task's (row, column) positions as they come (task:positions2d)", function()
    local t = rp.tasks.grid_offset {}
    local pos = t:positions2d(20)
    local x = rp.randn({ 20, 8 }, rp.rng(8))
    local y, xt, pt = rp.rope.rotate(x, { positions = pos }):totable(), x:totable(), pos:totable()
    for r = 1, 20 do h.approx(y[r], ref_rotate(xt[r], ref_angles(pt[r], 8, {}), 8), 2e-6) end
  end)

  it("one axis rotates as 1-D positions, bit for bit", function()
    local x = rp.randn({ 5, 12 }, rp.rng(7))
    local y0 = rp.rope.rotate(x, { positions = { 0, 4, -9, 70, 2 }, xpos = 0.4 })
    local y1 = rp.rope.rotate(x, { positions = { { 0 }, { 4 }, { -9 }, { 70 }, { 2 } },
      xpos = 0.4 })
    h.approx(y1, y0, 0)
  end)
end)

-- ---- attention ---------------------------------------------------------------------------------

-- Attention with positions pos (a list of rows of A integers: key i at row i, query t at row
-- q_offset + t) from the formulas, in doubles: q and k rotated by the angles of their rows (the
-- first d_rot features), scores scale q . k masked to i <= q_offset + t, softmax; roper: v
-- rotated by the angles of its row, the weighted sum rotated back by those of the QUERY's row.
-- q [B][T][H][D], k [B][S][H][D], v [B][S][H][Dv] (nested tables); returns out and att.
local function ref_attention(q, k, v, pos, o, d_rot, q_offset, pe)
  local B, T, S, H, D = #q, #q[1], #k[1], #q[1][1], #q[1][1][1]
  local scale, pr = 1 / math.sqrt(D), o.pairing
  local out, att = {}, {}
  for b = 1, B do
    out[b], att[b] = {}, {}
    for t = 1, T do out[b][t] = {} end
    for hh = 1, H do
      att[b][hh] = {}
      for t = 1, T do
        local n = q_offset + t - 1
        local qv = ref_rotate(q[b][t][hh], ref_angles(pos[n + 1], d_rot, o), d_rot, pr)
        local row = {}
        for s = 1, S do
          local kv = ref_rotate(k[b][s][hh], ref_angles(pos[s], d_rot, o), d_rot, pr)
          row[s] = s - 1 > n and -math.huge or scale * naive.dot(qv, kv)
        end
        local a = naive.softmax(row)
        local sum = {}
        for j = 1, #v[b][1][hh] do sum[j] = 0 end
        for s = 1, S do
          local vv = v[b][s][hh]
          if pe == "roper" then vv = ref_rotate(vv, ref_angles(pos[s], d_rot, o), d_rot, pr) end
          for j = 1, #sum do sum[j] = sum[j] + a[s] * vv[j] end
        end
        if pe == "roper" then
          sum = ref_rotate(sum, ref_angles(pos[n + 1], d_rot, o), d_rot, pr, -1)
        end
        att[b][hh][t], out[b][t][hh] = a, sum
      end
    end
  end
  return out, att
end

describe("rp.attention with vector positions", function()
  for k, s in ipairs(SCHEMES) do
    for _, pe in ipairs { "rope", "roper" } do
      local pairing = k % 2 == 0 and "interleaved" or "half"
      -- half of D and Dv rotated; queries past the keys (rows 0 .. 6) or T < S at q_offset 2
      local T, S, qo = 3, k % 2 == 0 and 5 or 6, k % 2 == 0 and 4 or 2
      it(("%s, pe %s, %s pairs, T %d, S %d, q_offset %d: the reference's out and att")
        :format(s.name, pe, pairing, T, S, qo), function()
          local g = rp.rng(100 + k)
          local q, kk, v = g:randn { 2, T, 2, 2 * s.d }, g:randn { 2, S, 2, 2 * s.d },
            g:randn { 2, S, 2, 2 * s.d }
          local pos = positions(math.max(S, qo + T), s.A, -30, 80, k)
          local o = h.merged(s.o, { pe = pe, pairing = pairing, q_offset = qo, positions = pos,
            fraction_qk = 0.5, fraction_v = pe == "roper" and 0.5 or nil })
          local out, att = rp.attention(q, kk, v, o)
          local rout, ratt = ref_attention(q:totable(), kk:totable(), v:totable(), pos,
            h.merged(s.o, { pairing = pairing }), s.d, qo, pe)
          h.approx(att, ratt, 1e-5, "att")
          h.approx(out, rout, 1e-5, "out")
          -- a [rows x A] tensor is the same positions
          local out2, att2 = rp.attention(q, kk, v, h.merged(o, { positions = rp.tensor(pos) }))
          h.approx(out2, out, 0)
          h.approx(att2, att, 0)
        end)
    end
  end

  it("one axis: explicit positions are today's 1-D ones bit for bit (0 .. S-1, pos_offset)",
    function()
      local g = rp.rng(3)
      local q, k, v = g:randn { 2, 3, 2, 8 }, g:randn { 2, 5, 2, 8 }, g:randn { 2, 5, 2, 6 }
      for _, pe in ipairs { "rope", "roper", "roper_legacy" } do
        for _, f in ipairs { {}, { xpos = 0.4 }, { scaling = "yarn", scaling_factor = 4,
          orig_len = 4 } } do
          local o = h.merged(f, { pe = pe, fraction_v = pe ~= "rope" and 2 / 3 or nil })
          local out0, att0 = rp.attention(q, k, v, o)
          local out9, att9 = rp.attention(q, k, v, h.merged(o, { pos_offset = 9 }))
          local idx, shifted, col = {}, {}, {}
          for i = 1, 5 do idx[i], shifted[i], col[i] = i - 1, 9 + i - 1, { i - 1 } end
          for _, p in ipairs { idx, rp.tensor(idx), col, rp.tensor(col) } do
            local out, att = rp.attention(q, k, v, h.merged(o, { positions = p }))
            h.approx(out, out0, 0)
            h.approx(att, att0, 0)
          end
          local out, att = rp.attention(q, k, v, h.merged(o, { positions = shifted }))
          h.approx(out, out9, 0)
          h.approx(att, att9, 0)
          if pe == "roper_legacy" then -- R((2i - n) theta): pos_offset moves it
            assert.is_true(out9:maxdiff(out0) > 1e-3, "pos_offset 9 changes nothing")
          end
        end
      end
    end)

  it("every position shifted by one vector leaves out and att (and a 4 x 4 grid works)",
    function()
      local g = rp.rng(4)
      local q, k, v = g:randn { 1, 16, 2, 16 }, g:randn { 1, 16, 2, 16 }, g:randn { 1, 16, 2, 16 }
      local grid, moved = {}, {}
      for r = 0, 3 do
        for c = 0, 3 do
          grid[#grid + 1] = { r, c }
          moved[#moved + 1] = { r + 50, c - 7 }
        end
      end
      for _, o in ipairs { {}, { axes = "mixed", mix = W2 } } do
        for _, pe in ipairs { "rope", "roper" } do
          local out, att = rp.attention(q, k, v, h.merged(o, { pe = pe, positions = grid }))
          local out2, att2 = rp.attention(q, k, v, h.merged(o, { pe = pe, positions = moved }))
          h.approx(out2, out, 2e-6)
          h.approx(att2, att, 2e-6)
          assert.is_true(out:maxdiff(rp.attention(q, k, v, { pe = pe })) > 1e-3)
        end
      end
    end)
end)

-- ---- refusals ----------------------------------------------------------------------------------

describe("vector positions refuse", function()
  local function refuses(fn, msg)
    local ok, err = pcall(fn)
    assert.is_false(ok, "no error for: " .. msg)
    assert.truthy(err:find("(" .. msg .. ")", 1, true), err)
  end
  local angles = function(pos, d, o) return function() rp.rope.angles(pos, d, o) end end
  local rotate = function(x, o) return function() rp.rope.rotate(x, o) end end
  local p2 = { { 1, 2 }, { 3, 4 } }
  local p4 = { { 0, 0 }, { 0, 1 }, { 1, 0 }, { 1, 1 } }
  local x4 = rp.zeros { 1, 4, 1, 8 }
  local attn = function(o) return function() rp.attention(x4, x4, x4, o) end end
  local ONE_D = " does nothing with 1-D positions (give the positions as [n x axes] or a list of "
    .. "{r, c} lists)"
  local NEEDS = " needs option 'positions' (vector positions: an [n x axes] tensor or a list of "
    .. "{r, c} lists)"
  local cases = {
    { angles(rp.zeros { 5, 4 }, 8), "positions [5 x 4]: 1 to 3 axes expected" },
    { angles(rp.zeros { 5, 0 }, 8), "positions [5 x 0]: 1 to 3 axes expected" },
    { angles(rp.zeros { 2, 2, 2 }, 8),
      "positions must be a 1-D tensor or [n x axes], got [2 x 2 x 2]" },
    { angles({ { 1, 2, 3, 4 } }, 8), "positions[1] holds 4 integers: 1 to 3 axes expected" },
    { angles({ {} }, 8), "positions[1] holds 0 integers: 1 to 3 axes expected" },
    { angles({ { 1, 2 }, { 1 } }, 8),
      "positions[2] must be a list of 2 integers (as positions[1]), got table" },
    { angles({ { 1, 2 }, 3 }, 8),
      "positions[2] must be a list of 2 integers (as positions[1]), got 3" },
    { angles({ { 1, 2 }, { 1, 2.5 } }, 8), "positions[2][2] must be an integer within 2^53, got 2.5" },
    { angles(rp.tensor { { 1, 2 }, { 1, 2.5 } }, 8),
      "positions[2][2] must be an integer within 2^53, got 2.5" },
    { angles({ { 1, 2 ^ 60 } }, 8), "positions[1][2] must be an integer within 2^53, got 1.1529215046068e+18" },
    { angles({ 1, { 2, 3 } }, 8), "positions[2] must be an integer within 2^53, got table" },
    { angles({ { 1, 2, 3 } }, 128, { axes = "sections", sections = { 16, 24, 20 } }),
      "sections {16, 24, 20} hold 60 pairs; d_rot 128 has 64" },
    { angles({ { 1, 2, 3 } }, 128, { axes = "sections" }),
      "axes \"sections\" needs option 'sections' (the pairs of each axis, e.g. {16, 24, 24})" },
    { angles({ { 1, 2 } }, 8, { axes = "sections", sections = { 2, 2, 0 } }),
      "option 'sections' has 3 entries; the positions have 2 axes" },
    { angles({ { 1, 2 } }, 8, { axes = "sections", sections = { 1, -1 } }),
      "option 'sections'[2] must be an integer >= 0 (a pair count), got -1" },
    { angles({ { 1, 2 } }, 8, { axes = "sections", sections = { 1, 1.5 } }),
      "option 'sections'[2] must be an integer >= 0 (a pair count), got 1.5" },
    { angles({ { 1, 2 } }, 8, { axes = "sections", sections = {} }),
      "option 'sections' must be a list of 1 to 3 pair counts (one per axis), got table" },
    { angles({ { 1, 2 } }, 8, { axes = "sections", sections = 4 }),
      "option 'sections' must be a list of 1 to 3 pair counts (one per axis), got 4" },
    { angles({ { 1, 2 } }, 8, { sections = { 2, 2 } }),
      "option 'sections' does nothing with axes \"axial\" (it gives the pairs of axes \"sections\")" },
    { angles({ { 1, 2 } }, 8, { axes = "sections", sections = { 2, 2 }, mix = W2 }),
      "option 'mix' does nothing with axes \"sections\" (it is the frequency matrix of axes \"mixed\")" },
    { angles({ { 1, 2, 3 } }, 4), "axes axial: d_rot 4 has 2 pairs, fewer than its 3 axes" },
    { angles({ { 1, 2 } }, 8, { axes = "cube" }),
      "option 'axes' must be one of \"axial\", \"sections\", \"mixed\", got string \"cube\"" },
    { angles({ 1, 2, 3 }, 8, { axes = "axial" }),
      "option 'axes'" .. ONE_D },
    { angles(4, 8, { sections = { 4 } }),
      "option 'sections'" .. ONE_D },
    { angles({}, 8, { mix = W2 }),
      "option 'mix'" .. ONE_D },
    { angles(p2, 8, { axes = "mixed" }),
      "axes \"mixed\" needs option 'mix' (the [axes x d_rot/2] frequency matrix)" },
    { angles(p2, 8, { axes = "mixed", mix = { { 1, 2, 3, 4 } } }),
      "option 'mix' is [1 x 4]; [2 x 4] expected (the positions' axes x d_rot/2)" },
    { angles(p2, 8, { axes = "mixed", mix = rp.zeros { 2, 5 } }),
      "option 'mix' is [2 x 5]; [2 x 4] expected (the positions' axes x d_rot/2)" },
    { angles(p2, 8, { axes = "mixed", mix = rp.zeros { 8 } }),
      "option 'mix' must be a 2-D tensor ([axes x pairs]), got [8]" },
    { angles(p2, 8, { axes = "mixed", mix = "W" }),
      "option 'mix' must be a tensor, a list of lists, got string \"W\"" },
    { angles(p2, 8, { axes = "mixed", mix = { 1, 2 } }),
      "option 'mix'[1] must be a list of frequencies, got 1" },
    { angles(p2, 8, { axes = "mixed", mix = { { 1, 2, 3, 4 }, { 1, 2 } } }),
      "option 'mix'[2] must be a list of 4 frequencies, got table" },
    { angles(p2, 8, { axes = "mixed", mix = { { 1, 2, 3, 4 }, { 1, 2, 3, math.huge } } }),
      "option 'mix'[2][4] must be a finite number, got inf" },
    { angles(p2, 8, { axes = "mixed", mix = W2, freq = { 1, 2, 3, 4 } }),
      "option 'mix' is [2 x 8]; [2 x 4] expected (the positions' axes x d_rot/2)" },
    { angles(p2, 16, { axes = "mixed", mix = W2, freq = { 1, 2, 3, 4, 5, 6, 7, 8 } }),
      "freq and mix exclude each other (the mix matrix holds the frequencies)" },
    { angles(p2, 16, { axes = "mixed", mix = W2, scaling = "pi", scaling_factor = 2 }),
      "scaling pi does not apply to a mix matrix (its frequencies are final; scale them yourself)" },
    { angles(p2, 8, { xpos = 0.4 }),
      "xpos (its decay runs along one position) needs scalar positions; these have 2 axes" },
    { angles(p2, 8, { scaling = "dynamic", scaling_factor = 2, orig_len = 8 }),
      "scaling dynamic (its factor grows with the position) needs scalar positions; these have 2 axes" },
    { angles(p2, 8, { angles = function() error("never called") end }),
      "option 'angles' (a table of one position per row) needs scalar positions; these have 2 axes" },
    { rotate(rp.zeros { 3, 8 }, { positions = rp.zeros { 3, 4 } }),
      "option 'positions' [3 x 4]: 1 to 3 axes expected" },
    { rotate(rp.zeros { 3, 8 }, { positions = p2 }),
      "option 'positions' has 2 entries, expected 3 (the size of dim 1 of [3 x 8])" },
    { rotate(rp.zeros { 3, 8 }, { offset = 2, axes = "axial" }), "option 'axes'" .. NEEDS },
    { rotate(rp.zeros { 3, 8 }, { positions = { 0, 1, 2 }, axes = "axial" }),
      "option 'axes'" .. ONE_D },
    { rotate(rp.zeros { 2, 8 }, { positions = p2, axes = "sections", sections = { 2, 3 } }),
      "sections {2, 3} hold 5 pairs; d_rot 8 has 4" },
    { rotate(rp.zeros { 2, 8 }, { positions = p2, fraction = 0.5, axes = "mixed", mix = W2 }),
      "option 'mix' is [2 x 8]; [2 x 2] expected (the positions' axes x d_rot/2)" },
    { rotate(rp.zeros { 8 }, { positions = { { 1, 2 }, { 3, 4 } } }),
      "option 'positions' has 2 entries, expected 1 (x is one vector [8])" },
    -- rp.attention (q, k, v [1 x 4 x 1 x 8]; q_offset 0 unless given)
    { attn { positions = p4 },
      "option 'positions' needs a rotary pe (rope, roper or roper_legacy), got pe 'none'" },
    { attn { pe = "rope", positions = { 0, 1, 2 } },
      "option 'positions' holds 3 positions; this call reads 4 (keys 0..3, queries 0..3)" },
    { attn { pe = "rope", positions = p4, q_offset = 1 },
      "option 'positions' holds 4 positions; this call reads 5 (keys 0..3, queries 1..4)" },
    { attn { pe = "rope", positions = p4, pos_offset = 0 },
      "give option 'pos_offset' or 'positions', not both (shift the positions instead)" },
    { attn { pe = "rope", positions = rp.zeros { 4, 4 } },
      "option 'positions' [4 x 4]: 1 to 3 axes expected" },
    { attn { pe = "rope", axes = "axial" }, "option 'axes'" .. NEEDS },
    { attn { pe = "rope", positions = { 0, 1, 2, 3 }, sections = { 2, 2 } },
      "option 'sections'" .. ONE_D },
    { attn { pe = "roper", mix = W2 }, "option 'mix'" .. NEEDS },
    { attn { pe = "roper", positions = { 0, 1, 2, 3 }, mix = W2 }, "option 'mix'" .. ONE_D },
    { attn { pe = "rope", positions = p4, axes = "sections", sections = { 1, 2 } },
      "sections {1, 2} hold 3 pairs; d_rot_q 8 has 4" },
    { attn { pe = "roper", positions = p4, axes = "sections", sections = { 2, 2 },
      fraction_v = 0.5 }, "sections {2, 2} hold 4 pairs; d_rot_v 4 has 2" },
    { attn { pe = "rope", positions = p4, axes = "mixed", mix = { { 1, 2, 3 }, { 1, 2, 3 } } },
      "option 'mix' is [2 x 3]; [2 x 4] expected (the positions' axes x d_rot/2)" },
    { attn { pe = "rope", positions = { 0, -1, 2, 3 }, angles = rp.zeros { 4, 4 } },
      "position -1 is below 0, where the angle table starts" },
    { attn { pe = "rope", positions = p4, angles = rp.zeros { 4, 4 } },
      "option 'angles' (a table of one position per row) needs scalar positions; these have 2 "
      .. "axes" },
  }
  for _, c in ipairs(cases) do
    it(c[2]:sub(1, 70), function() refuses(c[1], c[2]) end)
  end

  it("negative positions are taken on every axis (no table limits them)", function()
    local c = rp.rope.angles({ { -5, 7 }, { 5, -7 } }, 8)
    local ct = c:totable()
    for i = 1, 4 do assert.equal(ct[1][i], ct[2][i]) end -- cos is even
  end)
end)

describe("rp.rope.mixed", function()
  -- naver-ai/rope-vit's init_random_2d_freqs(dim, theta, rotate=True) for one head, written from
  -- its source: mag = 1 / theta^(arange(0, dim, 4) / dim); fx = cat(mag cos(a), mag cos(pi/2 +
  -- a)), fy = cat(mag sin(a), mag sin(pi/2 + a)), a the random angle. Ours is its matrix at
  -- a = pi/2 - phi with rows (y, x) and the second half negated: W[1] = fy', W[2] = fx' there.
  local function rope_vit(dim, theta, a)
    local fx, fy = {}, {}
    local q = dim // 4
    for j = 0, q - 1 do
      local mag = 1 / theta ^ (4 * j / dim)
      fx[j + 1], fy[j + 1] = mag * math.cos(a), mag * math.sin(a)
      fx[q + j + 1], fy[q + j + 1] = mag * math.cos(math.pi / 2 + a), mag * math.sin(math.pi / 2 + a)
    end
    return fx, fy
  end

  it("is rope-vit's matrix: at pi/2 - phi, rows (y, x), its second half turning the other way",
    function()
      for _, c in ipairs { { 16, 10, 0.3 }, { 64, 10000, 4.0 }, { 4, 100, 1.0 }, { 32, 10, 6.2 } } do
        local d, base, phi = c[1], c[2], c[3]
        local W = rp.rope.mixed(d, { base = base, phi = phi })
        local fx, fy = rope_vit(d, base, math.pi / 2 - phi)
        assert.equal(2, #W)
        assert.equal(d // 2, #W[1])
        for i = 1, d // 2 do
          local s = i <= d // 4 and 1 or -1
          assert.is_true(math.abs(W[1][i] - s * fy[i]) < 1e-15, ("%d %d"):format(d, i))
          assert.is_true(math.abs(W[2][i] - s * fx[i]) < 1e-15, ("%d %d"):format(d, i))
        end
      end
    end)

  it("draws phi from rp.rng(seed) (seed 0) or from the rng given, once", function()
    local g = rp.rng(7)
    local u = rp.rng(7):uniform()
    assert.same(rp.rope.mixed(8, { phi = u * 2 * math.pi }), rp.rope.mixed(8, { rng = g }))
    local g2 = rp.rng(7)
    g2:uniform()
    assert.equal(g2:uniform(), g:uniform()) -- one draw was taken
    assert.same(rp.rope.mixed(8, { phi = rp.rng(3):uniform() * 2 * math.pi }),
      rp.rope.mixed(8, { seed = 3 }))
    assert.same(rp.rope.mixed(8, { seed = 0 }), rp.rope.mixed(8))
    assert.is_not.same(rp.rope.mixed(8, { seed = 1 }), rp.rope.mixed(8))
  end)

  local cases = {
    { function() return rp.rope.mixed(6) end,
      "bad argument #1 to 'rp.rope.mixed' (d_rot must be a multiple of 4 from 4 to 2^24 (two "
      .. "halves of pairs), got 6)" },
    { function() return rp.rope.mixed("8") end,
      "bad argument #1 to 'rp.rope.mixed' (d_rot must be a multiple of 4 from 4 to 2^24 (two "
      .. "halves of pairs), got string \"8\")" },
    { function() return rp.rope.mixed(8, { base = 0 }) end,
      "bad argument #2 to 'rp.rope.mixed' (option 'base' must be > 0, got 0)" },
    { function() return rp.rope.mixed(8, { base = 0 / 0 }) end,
      "bad argument #2 to 'rp.rope.mixed' (option 'base' must be a finite number, got nan)" },
    { function() return rp.rope.mixed(8, { phi = 1, seed = 2 }) end,
      "bad argument #2 to 'rp.rope.mixed' (give one of options 'phi', 'seed' and 'rng')" },
    { function() return rp.rope.mixed(8, { rng = 3 }) end,
      "bad argument #2 to 'rp.rope.mixed' (option 'rng' must be a roper.Rng, got 3)" },
    { function() return rp.rope.mixed(8, { seed = 1.5 }) end,
      "bad argument #2 to 'rp.rope.mixed' (option 'seed' must be an integer, got 1.5)" },
    { function() return rp.rope.mixed(8, { theta = 10 }) end,
      "bad argument #2 to 'rp.rope.mixed' (unknown option 'theta' (known: base, phi, seed, rng))" },
  }
  for _, c in ipairs(cases) do
    it("refuses: " .. c[2]:match("%((.*)%)?$"):sub(1, 60), function()
      local ok, err = pcall(c[1])
      assert.is_false(ok)
      assert.equal(c[2], err:sub(1, #c[2]))
    end)
  end
end)

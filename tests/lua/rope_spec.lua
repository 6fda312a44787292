-- rp.rope: rotate against a plain-Lua rotation (both pairings, partial rotation, offsets, explicit
-- positions, sign -1, base, scale, dim), theta, angles and the sinusoidal table.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"
local rp = require "roper"
local naive = h.naive

-- Reference rotation of a [T x D] tensor given as a nested table, row t at position pos(t).
local function rotate_rows(rows, pos, opts)
  local out = {}
  for t, row in ipairs(rows) do out[t] = naive.rotate(row, pos(t), opts) end
  return out
end

local TOL = 2e-6 -- values are N(0,1); float32 rounding of cos/sin and products

describe("rp.rope.rotate", function()
  local g = rp.rng(101)

  for _, pairing in ipairs { "half", "interleaved" } do
    it("matches the plain-Lua rotation, " .. pairing .. " pairing, [T x D]", function()
      local x = g:randn { 7, 12 }
      local y = rp.rope.rotate(x, { pairing = pairing })
      assert.same({ 7, 12 }, y:shape())
      h.approx(y, rotate_rows(x:totable(), function(t) return t - 1 end, { pairing = pairing }), TOL)
      -- position 0 is the identity, later rows are not
      h.approx(y[1], x[1], 0)
      assert.is_true(y[2]:maxdiff(x[2]) > 1e-3)
    end)
  end

  it("uses the half pairing by default", function()
    local x = g:randn { 5, 8 }
    h.approx(rp.rope.rotate(x), rp.rope.rotate(x, { pairing = "half" }), 0)
    assert.is_true(rp.rope.rotate(x):maxdiff(rp.rope.rotate(x, { pairing = "interleaved" })) > 1e-3)
  end)

  it("does not modify its input", function()
    local x = g:randn { 4, 6 }
    local x0 = x:clone()
    rp.rope.rotate(x, { offset = 3 })
    assert.equal(0, x:maxdiff(x0))
  end)

  it("rotates only the first d_rot = fraction * D features", function()
    local x = g:randn { 6, 8 }
    local y = rp.rope.rotate(x, { fraction = 0.5 })
    -- theta over d_rot = 4 features: base^(-2i/4)
    h.approx(y, rotate_rows(x:totable(), function(t) return t - 1 end, { d_rot = 4 }), TOL)
    h.approx(y:narrow(2, 5, 4), x:narrow(2, 5, 4), 0, "features beyond d_rot unchanged")
    -- d_rot overrides fraction
    local z = rp.rope.rotate(x, { d_rot = 6, fraction = 0.5, pairing = "interleaved" })
    h.approx(z, rotate_rows(x:totable(), function(t) return t - 1 end,
                            { d_rot = 6, pairing = "interleaved" }), TOL)
    h.approx(z:narrow(2, 7, 2), x:narrow(2, 7, 2), 0)
    -- fraction 0.75 of 8 = 6
    h.approx(rp.rope.rotate(x, { fraction = 0.75 }), rp.rope.rotate(x, { d_rot = 6 }), 0)
  end)

  it("offset shifts every position; explicit positions give any position", function()
    local x = g:randn { 5, 8 }
    local y = rp.rope.rotate(x, { offset = 12345 })
    h.approx(y, rotate_rows(x:totable(), function(t) return 12345 + t - 1 end), TOL)
    local pos = { 3, 0, 40000, 7, 99999 }
    local z = rp.rope.rotate(x, { positions = pos })
    h.approx(z, rotate_rows(x:totable(), function(t) return pos[t] end), TOL)
    h.approx(rp.rope.rotate(x, { positions = rp.tensor(pos) }), z, 0, "positions as a tensor")
    h.approx(rp.rope.rotate(x, { positions = { 12345, 12346, 12347, 12348, 12349 } }), y, 0)
  end)

  it("sign -1 rotates by -pos*theta and undoes sign +1", function()
    local x = g:randn { 6, 10 }
    local back = rp.rope.rotate(x, { sign = -1, offset = 40000 })
    h.approx(back, rotate_rows(x:totable(), function(t) return 40000 + t - 1 end, { sign = -1 }), TOL)
    local there = rp.rope.rotate(x, { offset = 40000, pairing = "interleaved" })
    local again = rp.rope.rotate(there, { offset = 40000, pairing = "interleaved", sign = -1 })
    h.approx(again, x, TOL)
    assert.is_true(there:maxdiff(x) > 0.1)
  end)

  it("base and scale change the angles", function()
    local x = g:randn { 4, 8 }
    h.approx(rp.rope.rotate(x, { base = 500 }),
             rotate_rows(x:totable(), function(t) return t - 1 end, { base = 500 }), TOL)
    h.approx(rp.rope.rotate(x, { scale = 2, offset = 3 }),
             rotate_rows(x:totable(), function(t) return 2 * (3 + t - 1) end), TOL)
    h.approx(rp.rope.rotate(x, { scale = 2, offset = 3 }), rp.rope.rotate(x, { positions = { 6, 8, 10, 12 } }), 1e-6)
  end)

  it("positions run along dim 2 of [B,T,H,D], dim 1 of [T,H,D], or the dim given", function()
    local x = g:randn { 2, 5, 3, 8 }
    local y = rp.rope.rotate(x, { offset = 7 })
    local xt, yt = x:totable(), y:totable()
    for b = 1, 2 do
      for t = 1, 5 do
        for hh = 1, 3 do
          h.approx(yt[b][t][hh], naive.rotate(xt[b][t][hh], 7 + t - 1), TOL)
        end
      end
    end
    local x3 = g:randn { 4, 2, 6 }
    local y3 = rp.rope.rotate(x3)
    for t = 1, 4 do
      for hh = 1, 2 do h.approx(y3[t][hh], naive.rotate(x3[t][hh]:totable(), t - 1), TOL) end
    end
    -- dim = 2 on a [B x T x D] tensor
    local x2 = g:randn { 3, 4, 6 }
    local y2 = rp.rope.rotate(x2, { dim = 2 })
    for b = 1, 3 do
      for t = 1, 4 do h.approx(y2[b][t], naive.rotate(x2[b][t]:totable(), t - 1), TOL) end
    end
  end)

  it("a 1-D x is one vector at positions = n", function()
    local v = g:randn { 8 }
    h.approx(rp.rope.rotate(v, { positions = 40000 }), naive.rotate(v:totable(), 40000), TOL)
    h.approx(rp.rope.rotate(v), v, 0, "position 0 by default")
  end)

  it("accepts a non-contiguous input", function()
    local x = g:randn { 8, 5 }:t() -- [5 x 8], strided
    h.approx(rp.rope.rotate(x, { offset = 2 }), rp.rope.rotate(x:contiguous(), { offset = 2 }), 0)
  end)
end)

describe("rp.rope.theta and rp.rope.angles", function()
  it("theta_i = base^(-2i/d_rot)", function()
    h.approx(rp.rope.theta(8), naive.theta(8), 1e-7)
    h.approx(rp.rope.theta(8), { 1, 0.1, 0.01, 0.001 }, 1e-7)
    h.approx(rp.rope.theta(6, 500), naive.theta(6, 500), 1e-7)
    assert.same({ 32 }, rp.rope.theta(64):shape())
  end)

  it("angles gives cos and sin [n x d_rot/2] of pos*theta computed in double", function()
    local cos, sin = rp.rope.angles(3, 8)
    assert.same({ 3, 4 }, cos:shape())
    assert.same({ 3, 4 }, sin:shape())
    local pos = { 0, 1, 12345, 40000, 99999 }
    local c, s = rp.rope.angles(pos, 16)
    local th = naive.theta(16)
    local rc, rs = {}, {}
    for r, p in ipairs(pos) do
      rc[r], rs[r] = {}, {}
      for i = 1, 8 do
        rc[r][i] = math.cos(p * th[i])
        rs[r][i] = math.sin(p * th[i])
      end
    end
    -- float rounding of the values only (6e-8); angles in float would be off by ~1e-3 at 40000
    h.approx(c, rc, 1.2e-7, "cos")
    h.approx(s, rs, 1.2e-7, "sin")
    -- a number n means positions 0 .. n-1
    local c4, s4 = rp.rope.angles(4, 8)
    local th8 = naive.theta(8)
    local rc4, rs4 = {}, {}
    for r = 1, 4 do
      rc4[r], rs4[r] = {}, {}
      for i = 1, 4 do
        rc4[r][i] = math.cos((r - 1) * th8[i])
        rs4[r][i] = math.sin((r - 1) * th8[i])
      end
    end
    h.approx(c4, rc4, 1.2e-7, "cos, positions 0..3")
    h.approx(s4, rs4, 1.2e-7, "sin, positions 0..3")
    h.approx(rp.rope.angles(rp.tensor(pos), 16), c, 0, "positions as a tensor")
  end)

  it("angles takes base and scale", function()
    local c, s = rp.rope.angles({ 5, 9 }, 4, { base = 100, scale = 2 })
    local th = naive.theta(4, 100)
    h.approx(c, { { math.cos(10 * th[1]), math.cos(10 * th[2]) }, { math.cos(18 * th[1]), math.cos(18 * th[2]) } },
             1.2e-7)
    h.approx(s, { { math.sin(10 * th[1]), math.sin(10 * th[2]) }, { math.sin(18 * th[1]), math.sin(18 * th[2]) } },
             1.2e-7)
  end)
end)

describe("rp.rope.sinusoidal", function()
  it("matches sin/cos(p / base^(2i/d)) interleaved", function()
    local t = rp.rope.sinusoidal(6, 8)
    assert.same({ 6, 8 }, t:shape())
    h.approx(t, naive.sinusoidal(6, 8), 1.2e-7)
    h.approx(t[1], { 0, 1, 0, 1, 0, 1, 0, 1 }, 0, "position 0")
  end)

  it("takes base and offset (computed in double)", function()
    h.approx(rp.rope.sinusoidal(3, 6, { base = 100 }), naive.sinusoidal(3, 6, 100), 1.2e-7)
    h.approx(rp.rope.sinusoidal(4, 10, { offset = 40000 }), naive.sinusoidal(4, 10, 10000, 40000), 1.2e-7)
  end)
end)

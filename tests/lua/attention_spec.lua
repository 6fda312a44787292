-- rp.attention against a plain-Lua double-precision reference (helpers.naive.attention) for every
-- pe mode, the causal mask, T < S with q_offset, partial rotation, and the options.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"
local rp = require "roper"
local naive = h.naive

local TOL = 1e-5 -- inputs N(0,1), outputs are convex combinations of rotated values

local function case(g, B, T, S, H, D, Dv)
  return g:randn { B, T, H, D }, g:randn { B, S, H, D }, g:randn { B, S, H, Dv or D }
end

-- Runs rp.attention and the reference with the same options; returns both pairs.
local function both(q, k, v, opts, ref_opts)
  local out, att = rp.attention(q, k, v, opts)
  local rout, ratt = naive.attention(q:totable(), k:totable(), v:totable(), ref_opts or opts)
  return out, att, rout, ratt
end

describe("rp.attention", function()
  local g = rp.rng(2024)

  for _, pe in ipairs(h.pe_names("not relative")) do
    it("pe = " .. pe .. " matches the double reference (B 2, T = S = 5, H 2, D 8, Dv 6)", function()
      local q, k, v = case(g, 2, 5, 5, 2, 8, 6)
      local out, att, rout, ratt = both(q, k, v, { pe = pe })
      assert.same({ 2, 5, 2, 6 }, out:shape())
      assert.same({ 2, 2, 5, 5 }, att:shape())
      h.approx(att, ratt, TOL, pe .. " att")
      h.approx(out, rout, TOL, pe .. " out")
    end)
  end

  it("defaults to pe = none, and the absolute modes act like none", function()
    local q, k, v = case(g, 1, 4, 4, 2, 8)
    local out = rp.attention(q, k, v)
    h.approx(rp.attention(q, k, v, { pe = "none" }), out, 0)
    h.approx(rp.attention(q, k, v, { pe = "sinusoidal" }), out, 0)
    h.approx(rp.attention(q, k, v, { pe = "learned" }), out, 0)
    assert.is_true(rp.attention(q, k, v, { pe = "rope" }):maxdiff(out) > 1e-3)
  end)

  it("the pe modes really differ from each other", function()
    local q, k, v = case(g, 1, 6, 6, 1, 8)
    local outs = {}
    for _, pe in ipairs { "none", "rope", "roper", "roper_legacy" } do outs[pe] = rp.attention(q, k, v, { pe = pe }) end
    assert.is_true(outs.none:maxdiff(outs.rope) > 1e-3)
    assert.is_true(outs.rope:maxdiff(outs.roper) > 1e-3)
    assert.is_true(outs.roper:maxdiff(outs.roper_legacy) > 1e-3)
  end)

  it("causal: the upper triangle of att is exactly 0 and every row sums to 1", function()
    local q, k, v = case(g, 2, 6, 6, 3, 8)
    for _, pe in ipairs { "none", "rope", "roper" } do
      local _, att = rp.attention(q, k, v, { pe = pe })
      local a = att:totable()
      for b = 1, 2 do
        for hh = 1, 3 do
          for t = 1, 6 do
            local sum = 0
            for s = 1, 6 do
              if s > t then assert.equal(0, a[b][hh][t][s]) else assert.is_true(a[b][hh][t][s] > 0) end
              sum = sum + a[b][hh][t][s]
            end
            assert.near(1, sum, 1e-6)
          end
        end
      end
      -- the first query sees only the first key
      assert.equal(1, a[1][1][1][1])
    end
  end)

  it("causal = false lets every query see every key", function()
    local q, k, v = case(g, 1, 4, 4, 2, 8)
    for _, pe in ipairs { "none", "rope", "roper" } do
      local out, att, rout, ratt = both(q, k, v, { pe = pe, causal = false })
      h.approx(att, ratt, TOL, pe .. " att")
      h.approx(out, rout, TOL, pe .. " out")
      assert.is_true(att:min() > 0)
    end
  end)

  it("T < S: queries are the last T positions by default (q_offset = S - T)", function()
    local q, k, v = case(g, 1, 3, 7, 2, 8)
    for _, pe in ipairs { "none", "rope", "roper", "roper_legacy" } do
      local out, att, rout, ratt = both(q, k, v, { pe = pe })
      assert.same({ 1, 2, 3, 7 }, att:shape())
      h.approx(att, ratt, TOL, pe .. " att")
      h.approx(out, rout, TOL, pe .. " out")
      -- query t (0-based) sits at 4 + t: it sees keys 0 .. 4 + t, not the ones after
      local a = att:totable()
      assert.equal(0, a[1][1][1][6])
      assert.equal(0, a[1][2][1][7])
      assert.equal(0, a[1][1][2][7])
      assert.is_true(a[1][1][1][5] > 0 and a[1][1][3][7] > 0)
    end
    -- the same as an explicit q_offset = 4
    h.approx(rp.attention(q, k, v, { pe = "roper", q_offset = 4 }), rp.attention(q, k, v, { pe = "roper" }), 0)
  end)

  it("an explicit q_offset places the queries (large positions too)", function()
    local q, k, v = case(g, 1, 2, 5, 1, 8)
    for _, qo in ipairs { 0, 2, 40000 } do
      for _, pe in ipairs(h.pe_names("rotary")) do
        local out, att, rout, ratt = both(q, k, v, { pe = pe, q_offset = qo })
        h.approx(att, ratt, TOL, pe .. " att, q_offset " .. qo)
        h.approx(out, rout, TOL, pe .. " out, q_offset " .. qo)
      end
    end
  end)

  it("fraction_qk and fraction_v rotate only part of the features", function()
    local q, k, v = case(g, 1, 5, 5, 2, 8, 8)
    local out, att, rout, ratt = both(q, k, v, { pe = "roper", fraction_qk = 0.5, fraction_v = 0.25 },
                                      { pe = "roper", d_rot_qk = 4, d_rot_v = 2 })
    h.approx(att, ratt, TOL, "att")
    h.approx(out, rout, TOL, "out")
    -- with fraction_v = 0.25 features 3..8 of the output are the plain weighted sum of v
    local plain = rp.attention(q, k, v, { pe = "rope", fraction_qk = 0.5 })
    h.approx(out:narrow(4, 3, 6), plain:narrow(4, 3, 6), 1e-6)
    assert.is_true(out:narrow(4, 1, 2):maxdiff(plain:narrow(4, 1, 2)) > 1e-3)
    local o2, a2, r2, ra2 = both(q, k, v, { pe = "rope", fraction_qk = 0.75 }, { pe = "rope", d_rot_qk = 6 })
    h.approx(a2, ra2, TOL)
    h.approx(o2, r2, TOL)
  end)

  it("takes scale, base and pairing", function()
    local q, k, v = case(g, 1, 4, 4, 2, 8)
    for _, opts in ipairs {
      { pe = "rope", scale = 0.7 },
      { pe = "roper", base = 100 },
      { pe = "roper", pairing = "interleaved" },
      { pe = "roper_legacy", pairing = "interleaved", base = 500 },
    } do
      local out, att, rout, ratt = both(q, k, v, opts)
      h.approx(att, ratt, TOL, "att")
      h.approx(out, rout, TOL, "out")
    end
    assert.is_true(rp.attention(q, k, v, { pe = "none", scale = 0.7 })
      :maxdiff(rp.attention(q, k, v, { pe = "none" })) > 1e-4)
  end)

  it("accepts non-contiguous q, k, v", function()
    local q = g:randn { 1, 2, 4, 8 }:transpose(2, 3) -- [1 x 4 x 2 x 8], strided
    local k = g:randn { 1, 2, 4, 8 }:transpose(2, 3)
    local v = g:randn { 1, 2, 4, 8 }:transpose(2, 3)
    local out, att = rp.attention(q, k, v, { pe = "roper" })
    local out2, att2 = rp.attention(q:contiguous(), k:contiguous(), v:contiguous(), { pe = "roper" })
    h.approx(out, out2, 0)
    h.approx(att, att2, 0)
    local rout = naive.attention(q:totable(), k:totable(), v:totable(), { pe = "roper" })
    h.approx(out, rout, TOL)
  end)

  it("does not modify its inputs", function()
    local q, k, v = case(g, 1, 3, 3, 1, 4)
    local q0, k0, v0 = q:clone(), k:clone(), v:clone()
    rp.attention(q, k, v, { pe = "roper" })
    assert.equal(0, q:maxdiff(q0) + k:maxdiff(k0) + v:maxdiff(v0))
  end)
end)

describe("rp.pe_modes", function()
  it("lists the modes in the order of their codes, with what each does", function()
    -- name, absolute, rotate, rotary, linear, relative, rel_keys (pe.h, docs/positional.md)
    local clip, t5 = { "rel_clip" }, { "rel_buckets", "rel_max_distance" }
    local want = {
      { "none", "none", "", false, true, false, {} },
      { "sinusoidal", "sinusoidal", "", false, true, false, {} },
      { "learned", "learned", "", false, true, false, {} },
      { "rope", "none", "qk", true, true, false, {} },
      { "roper", "none", "qkvo", true, true, false, {} },
      { "roper_legacy", "none", "qkvo", true, false, false, {} },
      { "shaw", "none", "", false, false, true, clip },
      { "xl", "none", "", false, false, true, {} },
      { "t5", "none", "", false, false, true, t5 },
      { "deberta", "none", "", false, false, true, clip },
      { "alibi", "none", "", false, false, true, {} },
    }
    local t = rp.pe_modes()
    assert.equal(#want, #t)
    for i, w in ipairs(want) do
      local row = t[i]
      assert.same(w, { row.name, row.absolute, row.rotate, row.rotary, row.linear, row.relative,
        row.rel_keys })
      assert.equal(row, t[row.name])
    end
  end)

  it("rel_dims: the sizes rel_params name, as a model's parameters take them", function()
    -- the sizes of docs/positional.md's terms, written out for K = 3, 2 heads of 8, 5 buckets
    local cfg = { vocab = 4, d_model = 16, heads = 2, layers = 1, seq_len = 8 }
    local size = { clip1 = 7, clip2 = 6, d_k = 8, d_model = 16, heads = 2, buckets = 5 }
    local named = {}
    for _, row in ipairs(rp.pe_modes()) do
      for _, q in ipairs(row.rel_params) do
        local c = {}
        for k, v in pairs(cfg) do c[k] = v end
        c.pe = row.name
        for _, k in ipairs(row.rel_keys) do c[k] = ({ rel_clip = 3, rel_buckets = 5 })[k] end
        local of = { rel_clip = 3, d_k = 8, d_model = 16, heads = 2, rel_buckets = 5 }
        local p = rp.model(c):params()
        local t = p[q.name] or p["layers.0." .. q.name]
        for j, dim in ipairs { q.rows, q.cols } do
          local d = row.rel_dims[dim]
          assert.equal(size[dim], d.times * of[d.of] + d.plus, row.name .. " " .. dim)
          assert.equal(size[dim], t:shape()[j], row.name .. " " .. q.name)
          named[dim] = true
        end
      end
    end
    assert.same({ clip1 = true, clip2 = true, d_k = true, d_model = true, heads = true,
      buckets = true }, named)
  end)

  it("gives a new table at each call", function()
    local t = rp.pe_modes()
    t.rope.rotary = false
    t[1] = nil
    assert.is_true(rp.pe_modes().rope.rotary)
    assert.equal("none", rp.pe_modes()[1].name)
  end)
end)

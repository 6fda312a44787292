-- The placement ablation (issue 13): rotate any subset of q, k, v, o, each by its own width, in
-- rp.attention (against the plain-Lua double reference, helpers.naive.attention), in models
-- (config, safetensors, checkpoints of format version 2) and the errors that name the key.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"
local rp = require "roper"
local naive = h.naive

local TOL = 1e-5

-- Every non-empty subset of qkvo, in the canonical order.
local SUBSETS = {}
for mask = 1, 15 do
  local s = ""
  for i, c in ipairs { "q", "k", "v", "o" } do
    if mask & (1 << (i - 1)) ~= 0 then s = s .. c end
  end
  SUBSETS[#SUBSETS + 1] = s
end

local function case(g, B, T, S, H, D, Dv)
  return g:randn { B, T, H, D }, g:randn { B, S, H, D }, g:randn { B, S, H, Dv or D }
end

describe("rp.attention rotate", function()
  local g = rp.rng(13)

  for _, pe in ipairs(h.pe_names("rotary")) do
    for _, sub in ipairs(SUBSETS) do
      it(("%s rotate %q with a width per placement matches the reference"):format(pe, sub), function()
        local q, k, v = case(g, 1, 4, 6, 2, 8, 6)
        local opts = { pe = pe, rotate = sub, fraction_v = 1, pos_offset = 9 }
        -- a width of its own for each rotated placement (one for a placement that is not
        -- rotated does nothing, and is refused)
        for c, f in pairs { q = 0.75, k = 0.5, o = 0.34 } do
          if sub:find(c, 1, true) then opts["fraction_" .. c] = f end
        end
        local out, att = rp.attention(q, k, v, opts)
        local rout, ratt = naive.attention(q:totable(), k:totable(), v:totable(), opts)
        h.approx(att, ratt, TOL, "att")
        h.approx(out, rout, TOL, "out")
      end)
    end
  end

  it("takes the letters in any order, and the mode's own set by default", function()
    local q, k, v = case(g, 1, 3, 3, 1, 8, 8)
    h.approx(rp.attention(q, k, v, { pe = "rope", rotate = "okvq" }),
      rp.attention(q, k, v, { pe = "roper" }), 0)
    h.approx(rp.attention(q, k, v, { pe = "roper", rotate = "kq" }),
      rp.attention(q, k, v, { pe = "rope" }), 0)
  end)

  -- The shift test: moving every position by 500 leaves the weights alone exactly when q and k
  -- are rotated together (or neither), and the output when, besides, v and o are.
  for _, sub in ipairs(SUBSETS) do
    local function has(c) return sub:find(c, 1, true) ~= nil end
    local qk = has("q") == has("k")
    local vo = has("v") == has("o")
    it(("shift test %q: weights %s, output %s"):format(sub, qk and "relative" or "absolute",
      qk and vo and "relative" or "absolute"), function()
      local q, k, v = case(g, 1, 5, 5, 2, 8, 8)
      local opts = { pe = "rope", rotate = sub }
      local o0, a0 = rp.attention(q, k, v, opts)
      opts.pos_offset = 500
      local o1, a1 = rp.attention(q, k, v, opts)
      local da, dout = rp.maxdiff(a0, a1), rp.maxdiff(o0, o1)
      if qk then assert.is_true(da < 1e-4, "weights moved " .. da)
      else assert.is_true(da > 1e-2, "weights did not move: " .. da) end
      if qk and vo then assert.is_true(dout < 1e-4, "output moved " .. dout)
      else assert.is_true(dout > 1e-2, "output did not move: " .. dout) end
    end)
  end

  local q, k, v = case(rp.rng(1), 1, 2, 2, 1, 8, 8)
  local bad = {
    { { pe = "none", rotate = "vo" },
      "option 'rotate' needs a rotary pe (" .. h.pe_list("rotary") .. "), got pe 'none'" },
    { { pe = "rope", rotate = "qq" }, "option 'rotate' must name the rotated placements, distinct "
      .. "letters of \"qkvo\" (\"qk\", \"vo\", \"qkvo\", ...), got string \"qq\"" },
    { { pe = "rope", rotate = "" }, "got string \"\"" },
    { { pe = "rope", rotate = "qkvox" }, "got string \"qkvox\"" },
    { { pe = "rope", rotate = "q\0" }, "option 'rotate' must name the rotated placements" },
    { { pe = "rope", rotate = 3 }, "option 'rotate' must name the rotated placements" },
    { { pe = "rope", rotate = "v", fraction_v = 0.1 },
      "d_rot must be at least 2, got 0 (from fraction_v 0.1 of Dv = 8)" },
    { { pe = "rope", rotate = "o", fraction_o = 0.375 },
      "d_rot must be even, got 3 (from fraction_o 0.375 of Dv = 8)" },
    { { pe = "rope", rotate = "q", fraction_q = 0 },
      "option 'fraction_q' must be in (0, 1], got 0.0" },
    { { pe = "rope", fraction_k = "x" }, "option 'fraction_k' must be a number, got string \"x\"" },
    { { pe = "rope", pos_offset = -1 }, "option 'pos_offset' must be between 0 and 2^53, got -1" },
  }
  h.refusals(it, function(o) return rp.attention(q, k, v, o) end,
    "bad argument #4 to 'attention' (", bad)
end)

describe("models with rotate", function()
  local function tiny(o)
    local c = { vocab = 9, d_model = 16, heads = 2, layers = 2, d_ff = 16, seq_len = 8,
                max_batch = 2, seed = 5 }
    for key, val in pairs(o or {}) do c[key] = val end
    return rp.model(c)
  end
  local tok = { { 1, 2, 3, 4, 5, 6 }, { 7, 8, 0, 1, 2, 3 } }
  local tgt = { { 2, 3, 4, 5, 6, 7 }, { 8, 0, 1, 2, 3, 4 } }

  it("reports rotate and the fractions it was given, and nothing for the mode's own", function()
    local m = tiny { pe = "rope", rotate = "vo", fraction_o = 0.5 }
    local c = m:config()
    assert.equal("vo", c.rotate)
    assert.equal(0.5, c.fraction_o)
    assert.is_nil(c.fraction_q)
    assert.equal("roper.Model: 3.7K parameters (d_model 16, 2 heads, 2 layers, d_ff 16, seq_len 8, "
      .. "pe rope rotate vo, pre-norm)", tostring(m))
    -- the mode's own set and a fraction equal to the shared one are the same model
    local r = tiny { pe = "roper", rotate = "oqkv", fraction_q = 1 }:config()
    assert.equal("qkvo", r.rotate)
    assert.is_nil(r.fraction_q)
    assert.same(r, tiny { pe = "roper" }:config())
    assert.is_nil(tiny { pe = "none" }:config().rotate)
  end)

  it("a model rotating v and o only equals roper on identical weights when q, k are not rotated",
    function()
      -- rope rotate "vo" against roper's q/k left alone: same weights, same logits as a none model
      -- whose attention is VO-RoPE; checked through rp.attention on the first layer instead:
      local a = tiny { pe = "rope", rotate = "qkvo" }
      local b = tiny { pe = "roper" }
      assert.equal(0, rp.maxdiff(a:forward(tok), b:forward(tok)))
      local c = tiny { pe = "rope", rotate = "vo" }
      assert.is_true(rp.maxdiff(c:forward(tok), b:forward(tok)) > 1e-3)
    end)

  it("trains: the loss falls for every subset", function()
    for _, sub in ipairs { "q", "o", "vo", "qkv" } do
      -- fraction_q where q is rotated (it does nothing, and is refused, elsewhere)
      local m = tiny { pe = "rope", rotate = sub, fraction_q = sub:find("q") and 0.5 or nil }
      local opt = rp.optim.adam(m, { lr = 1e-2 })
      local first = m:train_step(tok, tgt, nil, opt)
      local last
      for _ = 1, 20 do last = m:train_step(tok, tgt, nil, opt) end
      assert.is_true(last < first * 0.8, sub .. ": " .. first .. " -> " .. last)
    end
  end)

  it("saves and loads: version 2 files for rotate, version 1 for the earlier configs", function()
    local d = h.tmpdir()
    local m = tiny { pe = "roper_legacy", rotate = "qv", fraction_q = 0.5, fraction_v = 0.75 }
    assert.is_true(m:save(d .. "/a.ckpt"))
    local m2 = rp.load(d .. "/a.ckpt")
    assert.same(m:config(), m2:config())
    assert.equal(0, rp.maxdiff(m:forward(tok), m2:forward(tok)))
    local bytes = h.read(d .. "/a.ckpt")
    assert.equal(2, string.unpack("<I4", bytes, 5))
    assert.is_true(tiny { pe = "roper" }:save(d .. "/b.ckpt"))
    assert.equal(1, string.unpack("<I4", h.read(d .. "/b.ckpt"), 5))
    -- safetensors carries the new keys in roper.config
    assert.is_true(m:save_safetensors(d .. "/a.safetensors"))
    local m3 = rp.load(d .. "/a.safetensors")
    assert.same(m:config(), m3:config())
    assert.equal(0, rp.maxdiff(m:forward(tok), m3:forward(tok)))
    h.remove_tree(d)
  end)

  local bad = {
    { { pe = "none", rotate = "v" },
      "option 'rotate' needs a rotary pe (" .. h.pe_list("rotary") .. "), got pe 'none'" },
    { { pe = "rope", rotate = "vv" }, "option 'rotate' must name the rotated placements" },
    { { pe = "rope", rotate = "o", fraction_o = 0.2 },
      "fraction_o 0.2 gives d_rot 1 for d_k 8; it must be even and >= 2" },
    { { pe = "rope", fraction_q = 1.5 }, "fraction_q 1.5 must be in (0, 1]" },
    { { pe = "rope", rotate = "q", attention = "linear" }, "linear attention takes the mode's own "
      .. "rotate and fraction_qk, fraction_v (not rotate, fraction_q, fraction_k, fraction_o)" },
    { { pe = "shaw", rel_clip = 0 }, "rel_clip 0 must be in 1..65536" },
    { { pe = "t5", rel_buckets = -2 }, "rel_buckets -2 must be in 2..4096" },
  }
  h.refusals(it, tiny, "bad argument #1 to 'model' (", bad)
end)

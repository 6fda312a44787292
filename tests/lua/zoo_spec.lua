-- The relative modes (issue 13): pe shaw, xl, t5, deberta, alibi in rp.attention (against a
-- plain-Lua double reference written from the formulas of docs/positional.md) and in models
-- (training, checkpoints, safetensors, decoding), with the errors that name the key.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"
local rp = require "roper"

local RELATIVE = h.pe_names("relative")
-- READS.rel_clip[pe]: the mode's relative terms read rel_clip (rp.pe_modes' rel_keys)
local READS = { rel_clip = {}, rel_buckets = {} }
for key, set in pairs(READS) do
  for _, pe in ipairs(h.pe_names(key)) do set[pe] = true end
end

-- The reference: one head h of q [T][D], k [S][D], v [S][Dv] (Lua tables, 1-based), causal,
-- query t at position q_offset + t - 1, with the tables of opts as nested Lua tables.
local function ref_head(pe, q, k, v, h0, H, o)
  local T, S, D = #q, #k, #q[1]
  local scale = o.scale or 1 / math.sqrt(D)
  local K = o.rel_clip or 16
  local function clamp(x, lo, hi) return math.max(lo, math.min(hi, x)) end
  local function dot(a, b) local s = 0 for j = 1, #a do s = s + a[j] * b[j] end return s end
  local function row(tab, r) -- a [rows][H][D] table's head row, or a [rows][D] one
    local x = tab[r]
    return type(x[1]) == "table" and x[h0] or x
  end
  local slope = 2 ^ (-8 * h0 / H) -- H a power of two here
  local out = {}
  for t = 1, T do
    local n = o.q_offset + t - 1
    local sc, m = {}, -math.huge
    for i = 1, n + 1 do
      local d = (i - 1) - n -- key minus query
      local s = dot(q[t], k[i])
      if pe == "shaw" then s = s + dot(q[t], row(o.rel_k, clamp(d, -K, K) + K + 1))
      elseif pe == "xl" then
        local e = row(o.rel_k, -d + 1) -- row r for the distance n - i = r (causal, from 0)
        local qu, qw = {}, {}
        for j = 1, D do qu[j], qw[j] = q[t][j] + o.rel_u[h0][j], q[t][j] + o.rel_w[h0][j] end
        s = dot(qu, k[i]) + dot(qw, e)
      elseif pe == "deberta" then
        s = s + dot(q[t], row(o.rel_k, clamp(-d + K, 0, 2 * K - 1) + 1))
          + dot(k[i], row(o.rel_q, clamp(d + K, 0, 2 * K - 1) + 1))
      end
      s = s * scale
      if pe == "alibi" then s = s + slope * d end
      if pe == "t5" then s = s + o.rel_bias[h0][o.bucket(-d) + 1] end
      sc[i] = s
      m = math.max(m, s)
    end
    local z = 0
    for i = 1, n + 1 do sc[i] = math.exp(sc[i] - m); z = z + sc[i] end
    local y = {}
    for j = 1, #v[1] do y[j] = 0 end
    for i = 1, n + 1 do
      local a = sc[i] / z
      local vv = v[i]
      if pe == "shaw" then
        local e = row(o.rel_v, clamp((i - 1) - n, -K, K) + K + 1)
        for j = 1, #vv do y[j] = y[j] + a * (vv[j] + e[j]) end
      else
        for j = 1, #vv do y[j] = y[j] + a * vv[j] end
      end
    end
    out[t] = y
  end
  return out
end

-- T5's one-sided bucket of a distance dist = n - i >= 0 for 6 buckets, max_distance 8: exact
-- below 3, then 3 + floor(log(dist / 3) / log(8 / 3) * 3), at most 5 (by hand: dist 4 gives
-- 3 + floor(0.88), 5 gives 3 + floor(1.56), 6 gives 3 + floor(2.12)).
local T5_6_8 = { [0] = 0, 1, 2, 3, 3, 4, 5, 5, 5, 5, 5, 5, 5 }

describe("rp.attention, relative modes", function()
  local g = rp.rng(31)
  local T, S, H, D = 6, 9, 2, 4
  local q, k, v = g:randn { 1, T, H, D }, g:randn { 1, S, H, D }, g:randn { 1, S, H, D }
  local opts = {
    shaw = { rel_clip = 2, rel_k = g:randn { 5, D }, rel_v = g:randn { 5, D } },
    xl = { rel_k = g:randn { S, H, D }, rel_u = g:randn { H, D }, rel_w = g:randn { H, D } },
    t5 = { rel_buckets = 6, rel_max_distance = 8, rel_bias = g:randn { H, 6 } },
    deberta = { rel_clip = 2, rel_k = g:randn { 4, H, D }, rel_q = g:randn { 4, H, D } },
    alibi = {},
  }
  for _, pe in ipairs(RELATIVE) do
    it(pe .. " matches the double reference (causal, T 6 over S 9)", function()
      local o = { pe = pe, q_offset = S - T }
      for key, val in pairs(opts[pe]) do o[key] = val end
      local out = rp.attention(q, k, v, o):totable()[1]
      local ref = { q_offset = S - T, bucket = function(d) return T5_6_8[d] end }
      for key, val in pairs(opts[pe]) do ref[key] = rp.is_tensor(val) and val:totable() or val end
      if pe == "t5" then ref.rel_bias = opts.t5.rel_bias:totable() end
      local qt, kt, vt = q:totable()[1], k:totable()[1], v:totable()[1]
      for hh = 1, H do
        local function head(x) local r = {} for i = 1, #x do r[i] = x[i][hh] end return r end
        local want = ref_head(pe, head(qt), head(kt), head(vt), hh, H, ref)
        local got = head(out)
        for t = 1, T do h.approx(got[t], want[t], 2e-5, ("%s head %d row %d"):format(pe, hh, t)) end
      end
    end)
  end

  it("does not move under pos_offset", function()
    for _, pe in ipairs(RELATIVE) do
      local o = { pe = pe }
      for key, val in pairs(opts[pe]) do o[key] = val end
      local xo = rp.attention(q, k, v, o)
      o.pos_offset = 1000
      assert.equal(0, rp.maxdiff(xo, rp.attention(q, k, v, o)), pe)
    end
  end)

  local bad = {
    { { pe = "shaw", rel_clip = 2, rel_k = rp.zeros { 5, D } },
      "option 'rel_v' (shaw's a^V, [5 x 4]) is required by pe 'shaw'" },
    { { pe = "shaw", rel_clip = 2, rel_k = rp.zeros { 4, D }, rel_v = rp.zeros { 5, D } },
      "expected [5 x 4], got [4 x 4]" },
    { { pe = "xl", rel_k = rp.zeros { S, H, D }, rel_u = rp.zeros { H, D } },
      "option 'rel_w' (xl's v, [2 x 4]) is required by pe 'xl'" },
    -- a table is named as the mode's (its kind's symbol): rel_k is deberta's K^r
    { { pe = "deberta", rel_clip = 2, rel_q = rp.zeros { 4, H, D } },
      "option 'rel_k' (deberta's K^r, [4 x 2 x 4]) is required by pe 'deberta'" },
    { { pe = "xl", rel_k = rp.zeros { S, D }, rel_u = rp.zeros { H, D }, rel_w = rp.zeros { H, D } },
      "option 'rel_k' (xl's W_kR R): expected [9 x 2 x 4], got [9 x 4]" },
    { { pe = "t5", rel_bias = rp.zeros { H, 32 }, rel_k = rp.zeros { 1, 1 } },
      "option 'rel_k' is not used by pe 't5'" },
    { { pe = "t5", rel_bias = "x" }, "option 'rel_bias' must be a roper.Tensor, got string \"x\"" },
    { { pe = "t5", rel_buckets = 1, rel_bias = rp.zeros { H, 1 } },
      "rel_buckets 1 must be in 2..4096" },
    { { pe = "t5", rel_max_distance = 16, rel_bias = rp.zeros { H, 32 } },
      "rel_max_distance 16 must be in 17..2147483647" },
    { { pe = "deberta", rel_clip = 0 }, "rel_clip 0 must be in 1..65536" },
    { { pe = "alibi", rel_bias = rp.zeros { H, 32 } }, "option 'rel_bias' is not used by pe 'alibi'" },
    -- t5's limits as rp.attention's help states them: without the mask at least 4 buckets, and
    -- the distance beyond rel_buckets / 4 (with it: / 2, above)
    { { pe = "t5", causal = false, rel_buckets = 3, rel_bias = rp.zeros { H, 3 } },
      "rel_buckets 3 must be in 4..4096 for pe t5 without the causal mask (it halves them)" },
    { { pe = "t5", causal = false, rel_buckets = 8, rel_max_distance = 2,
      rel_bias = rp.zeros { H, 8 } }, "rel_max_distance 2 must be in 3..2147483647" },
  }
  h.refusals(it, function(o) return rp.attention(q, k, v, o) end,
    "bad argument #4 to 'attention' (", bad)

  it("t5 takes the limits its help states, and its help states the causal default", function()
    assert.is_not_nil(rp.attention(q, k, v, { pe = "t5", causal = false, rel_buckets = 4,
      rel_max_distance = 2, rel_bias = rp.zeros { H, 4 } }))
    assert.is_not_nil(rp.attention(q, k, v, { pe = "t5", rel_buckets = 8, rel_max_distance = 5,
      rel_bias = rp.zeros { H, 8 } }))
    local help = rp.help(rp.attention):gsub("%s+", " ")
    for _, want in ipairs { "causal true (the default): query n sees keys i <= n only; false: "
      .. "every key", "rel_buckets 2..4096, at least 4 without the causal mask",
      "rel_max_distance must exceed where the exact buckets end: rel_buckets / 2 with the mask, "
      .. "rel_buckets / 4 without it" } do
      assert.truthy(help:find(want, 1, true), want)
    end
  end)

  -- docs/positional.md: -m_h |n - i|, symmetric without the mask. With q = 0 the weights are
  -- the bias's softmax alone.
  it("alibi without the causal mask: the bias is -m_h |n - i| on both sides", function()
    local H4, n, g2 = 4, 5, rp.rng(29)
    local zq, kk, vv = rp.zeros { 1, n, H4, 2 }, g2:randn { 1, n, H4, 2 }, g2:randn { 1, n, H4, 2 }
    local _, att = rp.attention(zq, kk, vv, { pe = "alibi", causal = false })
    local want = { {} }
    for hh = 1, H4 do
      local m = 2 ^ (-8 * hh / H4)
      want[1][hh] = {}
      for t = 1, n do
        local row, sum = {}, 0
        for i = 1, n do
          row[i] = math.exp(-m * math.abs(t - i))
          sum = sum + row[i]
        end
        for i = 1, n do row[i] = row[i] / sum end
        want[1][hh][t] = row
      end
    end
    h.approx(att, want, 1e-6, "alibi weights")
  end)

  it("refuses a released table, also one released by a later option read", function()
    local function release(t) getmetatable(t).__close(t) end
    local dead = rp.zeros { 5, D }
    release(dead)
    local ok, err = pcall(rp.attention, q, k, v, { pe = "shaw", rel_clip = 2, rel_k = dead,
      rel_v = rp.zeros { 5, D } })
    assert.is_false(ok)
    assert.truthy(err:find("(option 'rel_k' is a released tensor)", 1, true), err)
    local rk = rp.zeros { 5, D }
    local o = setmetatable({ pe = "shaw", rel_clip = 2, rel_k = rk }, { __index = function(_, key)
      if key == "rel_v" then release(rk); return rp.zeros { 5, D } end
    end })
    ok, err = pcall(rp.attention, q, k, v, o)
    assert.is_false(ok)
    assert.truthy(err:find("(option 'rel_k' is a released tensor)", 1, true), err)
  end)

  it("reads a non-contiguous table as its values", function()
    local big = g:randn { D, 5 }
    local o = { pe = "shaw", rel_clip = 2, rel_k = big:t(), rel_v = g:randn { 5, D } }
    local a = rp.attention(q, k, v, o)
    o.rel_k = big:t():clone()
    assert.equal(0, rp.maxdiff(a, rp.attention(q, k, v, o)))
  end)
end)

describe("models with relative modes", function()
  local function tiny(o)
    local c = { vocab = 9, d_model = 16, heads = 2, layers = 2, d_ff = 16, seq_len = 8,
                max_batch = 2, seed = 5 }
    -- each mode's own settings (a key that does nothing for the mode is refused)
    local pe = o and o.pe
    if READS.rel_clip[pe] then c.rel_clip = 3 end
    if READS.rel_buckets[pe] then c.rel_buckets, c.rel_max_distance = 6, 8 end
    for key, val in pairs(o or {}) do c[key] = val end
    return rp.model(c)
  end
  local tok = { { 1, 2, 3, 4, 5, 6 }, { 7, 8, 0, 1, 2, 3 } }
  local tgt = { { 2, 3, 4, 5, 6, 7 }, { 8, 0, 1, 2, 3, 4 } }

  for _, pe in ipairs(RELATIVE) do
    it(pe .. ": trains, saves and loads (checkpoint and safetensors), decodes", function()
      local m = tiny { pe = pe }
      local c = m:config()
      assert.equal(pe, c.pe)
      if READS.rel_clip[pe] then assert.equal(3, c.rel_clip) end
      if READS.rel_buckets[pe] then
        assert.equal(6, c.rel_buckets)
        assert.equal(8, c.rel_max_distance)
      end
      local opt = rp.optim.adam(m, { lr = 1e-2 })
      local first = m:train_step(tok, tgt, nil, opt)
      local last
      for _ = 1, 20 do last = m:train_step(tok, tgt, nil, opt) end
      assert.is_true(last < first * 0.8, pe .. ": " .. first .. " -> " .. last)
      local d = h.tmpdir()
      assert.is_true(m:save(d .. "/m.ckpt", opt))
      local m2 = rp.load(d .. "/m.ckpt")
      assert.same(c, m2:config())
      assert.equal(0, rp.maxdiff(m:forward(tok), m2:forward(tok)))
      -- the relative modes' settings need format version 2; a file with an optimiser is
      -- version 7 (docs/checkpoint.md)
      assert.equal(7, string.unpack("<I4", h.read(d .. "/m.ckpt"), 5))
      assert.is_true(m:save(d .. "/alone.ckpt"))
      assert.equal(2, string.unpack("<I4", h.read(d .. "/alone.ckpt"), 5))
      assert.is_true(m:save_safetensors(d .. "/m.safetensors"))
      local m3 = rp.load(d .. "/m.safetensors")
      assert.same(c, m3:config())
      assert.equal(0, rp.maxdiff(m:forward(tok), m3:forward(tok)))
      h.remove_tree(d)
      -- greedy generation equals the argmax of full forwards
      local out = m:generate({ 1, 2 }, 4, { temperature = 0 })
      local seq = { 1, 2 }
      for _ = 1, 4 do
        local logits = m:forward({ seq }):totable()[1][#seq]
        local best = 1
        for j = 2, #logits do if logits[j] > logits[best] then best = j end end
        seq[#seq + 1] = best - 1
      end
      assert.same({ seq[3], seq[4], seq[5], seq[6] }, out)
    end)
  end

  it("names its parameters as docs/positional.md says", function()
    local names = {}
    for _, e in ipairs(tiny { pe = "deberta" }:params()) do names[#names + 1] = e.name end
    assert.equal("rel.weight", names[2])
    local has = {}
    for _, n in ipairs(names) do has[n] = true end
    assert.is_true(has["layers.1.attn.rel_q_proj.weight"] and has["layers.0.attn.rel_k_proj.weight"])
    local p = tiny { pe = "xl" }:params()
    assert.same({ 16, 16 }, p["layers.0.attn.rel_proj.weight"]:shape())
    assert.same({ 2, 8 }, p["layers.1.attn.rel_u"]:shape())
    assert.same({ 7, 8 }, tiny { pe = "shaw" }:params()["layers.0.attn.rel_k"]:shape())
    assert.same({ 2, 6 }, tiny { pe = "t5" }:params()["layers.1.attn.rel_bias"]:shape())
  end)

  local bad = {
    { { pe = "shaw", attention = "linear" }, "linear attention does not support pe shaw" },
    { { pe = "xl", d_model = 15, heads = 3 }, "pe xl needs an even d_model (its sinusoid R), got 15" },
    { { pe = "t5", rel_buckets = 5000 }, "rel_buckets 5000 must be in 2..4096" },
    { { pe = "t5", rel_buckets = 8, rel_max_distance = 4 }, "rel_max_distance 4 must be in 5..2147483647" },
    { { pe = "deberta", rel_clip = 70000 }, "rel_clip 70000 must be in 1..65536" },
    { { pe = "alibi", rotate = "qk" },
      "option 'rotate' needs a rotary pe (" .. h.pe_list("rotary") .. "), got pe 'alibi'" },
  }
  h.refusals(it, tiny, nil, bad)
end)

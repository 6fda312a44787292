-- Linear attention from Lua: rp.linear_attention against a plain-Lua O(T^2) evaluation and its
-- errors; models with attention = "linear" (config, tostring, weights, linear_stats, training,
-- generation, checkpoints); scripts/linear_identity.lua; experiments with attention = "linear".

local rp = require "roper"
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local helpers = require "helpers"

local function phi(x) return x > 0 and x + 1 or math.exp(x) end

-- out[t][h][i] for pe none: sum_m phi(q_t).phi(k_m) v_m / (sum_m phi(q_t).phi(k_m) + eps)
local function naive_none(Q, K, V, eps)
  local T, H, D, Dv = #Q[1], #Q[1][1], #Q[1][1][1], #V[1][1][1]
  local out = {}
  for t = 1, T do
    out[t] = {}
    for h = 1, H do
      local num, den = {}, eps
      for i = 1, Dv do num[i] = 0 end
      for m = 1, t do
        local w = 0
        for i = 1, D do w = w + phi(Q[1][t][h][i]) * phi(K[1][m][h][i]) end
        den = den + w
        for i = 1, Dv do num[i] = num[i] + w * V[1][m][h][i] end
      end
      out[t][h] = {}
      for i = 1, Dv do out[t][h][i] = num[i] / den end
    end
  end
  return out
end

local function tmpname()
  local p = helpers.tmpname()
  os.remove(p)
  return p
end

describe("rp.linear_attention", function()
  local g = rp.rng(3)
  local q, k, v = rp.randn({ 1, 7, 2, 4 }, g), rp.randn({ 1, 7, 2, 4 }, g), rp.randn({ 1, 7, 2, 6 }, g)

  it("matches a plain-Lua evaluation for pe none, with D != Dv", function()
    local out, w, den = rp.linear_attention(q, k, v)
    assert.same({ 1, 7, 2, 6 }, out:shape())
    assert.same({ 1, 2, 7, 7 }, w:shape())
    assert.same({ 1, 2, 7 }, den:shape())
    local want = naive_none(q:totable(), k:totable(), v:totable(), 1e-6)
    local got = out:totable()
    for t = 1, 7 do
      for h = 1, 2 do
        for i = 1, 6 do
          assert.is_true(math.abs(got[1][t][h][i] - want[t][h][i]) < 1e-5,
            ("out[%d][%d][%d] %g vs %g"):format(t, h, i, got[1][t][h][i], want[t][h][i]))
        end
      end
    end
    -- w is lower-triangular and non-negative without rotation; out = w v / den
    local W, DEN = w:totable(), den:totable()
    for h = 1, 2 do
      for t = 1, 7 do
        local s = 1e-6
        for m = 1, 7 do
          if m > t then assert.equal(0, W[1][h][t][m]) else
            assert.is_true(W[1][h][t][m] > 0)
            s = s + W[1][h][t][m]
          end
        end
        assert.is_true(math.abs(s - DEN[1][h][t]) < 1e-4 * s)
      end
    end
  end)

  it("is shift-invariant with rope after phi and not before it", function()
    local a = rp.linear_attention(q, k, v, { pe = "rope", q_offset = 0 })
    local b = rp.linear_attention(q, k, v, { pe = "rope", q_offset = 777 })
    assert.is_true((a - b):abs():max() < 1e-5)
    local c = rp.linear_attention(q, k, v, { pe = "rope", linear_rope = "before" })
    local d = rp.linear_attention(q, k, v, { pe = "rope", linear_rope = "before", q_offset = 777 })
    assert.is_true((c - d):abs():max() > 1e-3)
  end)

  it("names bad arguments", function()
    local function err(f)
      local ok, e = pcall(f)
      assert.is_false(ok)
      return tostring(e)
    end
    assert.truthy(err(function() rp.linear_attention(q, rp.randn { 1, 6, 2, 4 }, v) end)
      :find("expected k as [1 x 7 x 2 x 4], got [1 x 6 x 2 x 4]", 1, true))
    assert.truthy(err(function() rp.linear_attention(q, k, rp.randn { 1, 7, 3, 6 }) end)
      :find("expected v as [1 x 7 x 2 x 6], got [1 x 7 x 3 x 6]", 1, true))
    assert.truthy(err(function() rp.linear_attention(q, k, v, { pe = "roper_legacy" }) end)
      :find("option 'pe' must be one of", 1, true))
    assert.truthy(err(function() rp.linear_attention(q, k, v, { eps = 0 }) end)
      :find("eps must be a finite number > 0, got 0", 1, true))
    assert.truthy(err(function() rp.linear_attention(q, k, v, { linear_rope = "middle" }) end)
      :find("option 'linear_rope' must be one of", 1, true))
    assert.truthy(err(function() rp.linear_attention(q, k, v, { pe = "rope", fraction_qk = 0.25 }) end)
      :find("fraction_qk", 1, true))
    assert.truthy(err(function() rp.linear_attention(q, k, v, { q_offset = -1 }) end)
      :find("q_offset", 1, true))
    assert.truthy(err(function() rp.linear_attention(q, k, v, { bogus = 1 }) end)
      :find("unknown option 'bogus'", 1, true))
  end)

  it("names its options in the order it reads them (the first bad one is the one named)", function()
    local function err(f)
      local ok, e = pcall(f)
      assert.is_false(ok)
      return tostring(e)
    end
    local q = rp.randn { 1, 4, 2, 8 }
    local e = err(function() rp.linear_attention(q, q, q, { bogus = 1 }) end)
    assert.are.equal("bad argument #4 to 'linear_attention' (unknown option 'bogus' (known: pe, "
      .. "linear_rope, eps, base, pairing, fraction_qk, fraction_v, q_offset))", e:match("bad argument.*"))
    local bad = { pe = "shaw", linear_rope = 3, eps = "x", base = "y", pairing = 1,
                  fraction_qk = "z", fraction_v = "w", q_offset = "v" }
    for _, name in ipairs({ "pe", "linear_rope", "eps", "base", "pairing", "fraction_qk",
                            "fraction_v", "q_offset" }) do
      assert.truthy(err(function() rp.linear_attention(q, q, q, bad) end)
        :find("option '" .. name .. "' must be", 1, true), name)
      bad[name] = nil
    end
  end)
end)

describe("models with linear attention", function()
  local cfg = { vocab = 6, d_model = 16, heads = 2, layers = 2, d_ff = 32, seq_len = 16,
                max_batch = 2, attention = "linear", pe = "roper", seed = 2 }

  it("reports its config and kind", function()
    local m = rp.model(cfg)
    assert.equal("linear", m:config().attention)
    assert.equal("after", m:config().linear_rope)
    assert.truthy(tostring(m):find(", linear attention)", 1, true))
    local m2 = rp.model(m:config())
    assert.equal("linear", m2:config().attention)
    local c = {}
    for key, val in pairs(cfg) do c[key] = val end
    c.linear_rope = "before"
    assert.truthy(tostring(rp.model(c)):find("linear attention (rope before phi)", 1, true))
    c.pe = "roper_legacy"
    local ok, e = pcall(rp.model, c)
    assert.is_false(ok)
    assert.truthy(tostring(e):find("linear attention does not support pe roper_legacy", 1, true))
    c.pe, c.attention = "rope", "quadratic"
    ok, e = pcall(rp.model, c)
    assert.is_false(ok)
    assert.truthy(tostring(e):find("option 'attention' must be one of", 1, true))
  end)

  it("gives normalised weights and their smallest values", function()
    local m = rp.model(cfg)
    local toks = { 0, 1, 2, 3, 4, 5, 0, 1 }
    local w = m:attention(1, toks)
    assert.same({ 1, 2, 8, 8 }, w:shape())
    local min_w, min_den = m:linear_stats(toks)
    local W, lo = w:totable(), math.huge
    for h = 1, 2 do
      for t = 1, 8 do
        for j = 1, 8 do
          if j > t then assert.equal(0, W[1][h][t][j]) else lo = math.min(lo, W[1][h][t][j]) end
        end
      end
    end
    assert.is_true(min_w <= lo + 1e-7) -- over both layers, so at most layer 1's minimum
    assert.is_true(min_den > 1e-6)
    local soft = rp.model { vocab = 6, d_model = 16, heads = 2, layers = 1, seq_len = 8 }
    local ok, e = pcall(soft.linear_stats, soft, toks)
    assert.is_false(ok)
    assert.truthy(tostring(e):find("linear_stats needs a model with linear attention", 1, true))
  end)

  it("trains, decodes with its state like the full forward, and survives a checkpoint", function()
    local m = rp.model(cfg)
    local opt = rp.optim.adam(m, { lr = 1e-2 })
    local seq = {}
    for i = 1, 17 do seq[i] = (i - 1) % 3 end
    local x, y = { table.unpack(seq, 1, 16) }, { table.unpack(seq, 2, 17) }
    local first = m:loss(x, y)
    for _ = 1, 60 do m:train_step(x, y, nil, opt) end
    local last = m:loss(x, y)
    assert.is_true(last < 0.5 * first, ("loss %g -> %g"):format(first, last))
    -- greedy generation (state decoding) equals the argmax of full forwards
    local prompt = { 0, 1 }
    local gen = m:generate(prompt, 6)
    local toks = { 0, 1 }
    for _ = 1, 6 do
      local logits = m:forward(toks)
      local row, best, arg = logits[1][#toks], -math.huge, nil
      for id = 1, 6 do if row[id] > best then best, arg = row[id], id - 1 end end
      toks[#toks + 1] = arg
    end
    assert.same({ table.unpack(toks, 3) }, gen)
    local path = tmpname()
    assert.is_true(m:save(path, opt))
    local m2 = rp.load(path)
    os.remove(path)
    assert.equal("linear", m2:config().attention)
    assert.equal(m:loss(x, y), m2:loss(x, y))
  end)
end)

describe("scripts/linear_identity.lua", function()
  it("passes every check and exits 0", function()
    local out, ok = helpers.run_merged(helpers.sh_quote(helpers.BIN)
      .. " scripts/linear_identity.lua --T 12 --d 8")
    assert.is_true(ok, out)
    local p, f = out:match("linear identity: (%d+) passed, (%d+) failed")
    assert.equal("0", f, out)
    assert.is_true(tonumber(p) >= 20, out)
    assert.is_nil(out:find("FAIL", 1, true), out)
  end)

  it("rejects a bad --d", function()
    local out, ok = helpers.run_merged(helpers.sh_quote(helpers.BIN)
      .. " scripts/linear_identity.lua --d 7")
    assert.is_falsy(ok)
    assert.truthy(out:find("--d must be even", 1, true), out)
    out = helpers.run_merged(helpers.sh_quote(helpers.BIN) .. " scripts/linear_identity.lua --d "
      .. "1000000000")
    assert.are.equal("linear_identity.lua: --d must be even and in 2..256, got 1000000000\n", out)
  end)
end)

describe("experiments with attention = linear", function()
  it("train through rp.experiment.run", function()
    local r = rp.experiment.run { task = "substring_prefix", attention = "linear", pe = "rope",
      d_model = 16, layers = 1, seq_len = 32, batch = 2, steps = 3, valid_batches = 1 }
    assert.equal("linear", r.config.attention)
    assert.equal("loss", r.metric)
    assert.is_true(r.value > 0 and r.value < 10)
  end)
end)

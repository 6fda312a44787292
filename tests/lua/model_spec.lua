-- roper.Model: construction and its errors, tostring, parameter and gradient views, forward and
-- token errors, the loss against a plain-Lua cross-entropy, generation, attention weights,
-- activations, checkpoints (round trip and every kind of file failure), help texts.

local rp = require "roper"

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"

-- A small model: vocab 7, d_model 16, 2 heads, 2 layers, seq_len 8, max_batch 3.
local TINY = { vocab = 7, d_model = 16, heads = 2, layers = 2, d_ff = 32, seq_len = 8,
               max_batch = 3, seed = 1 }
local function tiny(extra)
  local cfg = {}
  for k, v in pairs(TINY) do cfg[k] = v end
  for k, v in pairs(extra or {}) do cfg[k] = v end
  return rp.model(cfg)
end

-- Floats of a model, counted from the layout of core/model/model.h.
local function expected_count(c)
  local C, F, V = c.d_model, c.d_ff, c.vocab
  local per_layer = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (F * C + F) + (C * F + C)
  local n = V * C + c.layers * per_layer + (V * C + V)
  if (c.norm or "pre") == "pre" then n = n + 2 * C end
  if c.pe == "learned" then n = n + c.seq_len * C end
  return n
end

-- The parameter names of core/model/model.h in layout order.
local function expected_names(layers, norm, pe)
  local names = { "embed.weight" }
  if pe == "learned" then names[#names + 1] = "pos.weight" end
  for l = 0, layers - 1 do
    for _, s in ipairs { "norm1.weight", "norm1.bias", "attn.qkv.weight", "attn.qkv.bias",
                         "attn.out.weight", "attn.out.bias", "norm2.weight", "norm2.bias",
                         "ff.w1.weight", "ff.w1.bias", "ff.w2.weight", "ff.w2.bias" } do
      names[#names + 1] = "layers." .. l .. "." .. s
    end
  end
  if norm == "pre" then
    names[#names + 1] = "norm_f.weight"
    names[#names + 1] = "norm_f.bias"
  end
  names[#names + 1] = "head.weight"
  names[#names + 1] = "head.bias"
  return names
end

-- Index (0-based id) of the largest value of a flat Lua list (first on ties).
local function argmax0(row)
  local best = 1
  for i = 2, #row do if row[i] > row[best] then best = i end end
  return best - 1
end

-- Mean cross-entropy in doubles from nested logits [B][T][V], targets [B][T] (-1 = unscored)
-- and an optional mask [B][T] (0/false = unscored).
local function naive_loss(logits, targets, mask)
  local sum, n = 0, 0
  for b = 1, #logits do
    for t = 1, #logits[b] do
      local y = targets[b][t]
      local m = mask == nil or (mask[b][t] ~= 0 and mask[b][t] ~= false)
      if y >= 0 and m then
        local row = logits[b][t]
        local mx = -math.huge
        for _, x in ipairs(row) do mx = math.max(mx, x) end
        local z = 0
        for _, x in ipairs(row) do z = z + math.exp(x - mx) end
        sum = sum + (math.log(z) + mx - row[y + 1])
        n = n + 1
      end
    end
  end
  return sum / n
end

-- A fresh temporary folder (h.tmpdir) and a function that removes it.
local function tmpdir()
  local d = h.tmpdir()
  return d, function() h.remove_tree(d) end
end

---------------------------------------------------------------------------------------------------

describe("rp.model construction errors", function()
  local known = "vocab, d_model, heads, layers, d_ff, seq_len, max_batch, norm, activation, "
      .. "dropout, pe, fraction_qk, fraction_v, base, pairing, seed, attention, linear_rope, "
      .. "rotate, fraction_q, fraction_k, fraction_o, rel_clip, rel_buckets, rel_max_distance, "
      .. "scaling, scaling_factor, orig_len, yarn_alpha, yarn_beta, xpos, xpos_scale_base, "
      .. "yarn_ramp, low_freq_factor, high_freq_factor, attention_factor, learn_freq, "
      .. "tie_embeddings, freq, angles, positions, axes, sections, mix, rope_scaling, rope_theta"
  local cases = {
    { "an unknown key", { vocab = 5, d_modle = 16 },
      "bad argument #1 to 'model' (unknown option 'd_modle' (known: " .. known .. "))" },
    { "d_model not divisible by heads", { vocab = 5, d_model = 100, heads = 3 },
      "bad argument #1 to 'model' (d_model 100 is not divisible by heads 3)" },
    { "an odd d_rot from fraction_qk", { vocab = 5, d_model = 32, heads = 2, fraction_qk = 0.2 },
      "bad argument #1 to 'model' (fraction_qk 0.2 gives d_rot 3 for d_k 16; it must be even and >= 2)" },
    { "an odd d_rot from fraction_v (roper)",
      { vocab = 5, d_model = 32, heads = 2, pe = "roper", fraction_v = 0.2 },
      "bad argument #1 to 'model' (fraction_v 0.2 gives d_rot 3 for d_k 16; it must be even and >= 2)" },
    { "an unknown pe", { vocab = 5, pe = "alibi2" },
      "bad argument #1 to 'model' (option 'pe' must be one of \"" .. table.concat(h.pe_names(), "\", \"")
      .. "\", got string \"alibi2\")" },
    { "vocab missing", { d_model = 16 },
      "bad argument #1 to 'model' (option 'vocab' (the vocabulary size) is required)" },
    { "vocab 0", { vocab = 0 },
      "bad argument #1 to 'model' (vocab 0 must be in 1..2147483647)" },
    { "a fractional d_model", { vocab = 5, d_model = 1.5 },
      "bad argument #1 to 'model' (option 'd_model' must be an integer, got 1.5)" },
    { "dropout 1", { vocab = 5, dropout = 1 },
      "bad argument #1 to 'model' (dropout 1 must be in [0, 1))" },
    { "an unknown norm", { vocab = 5, norm = "mid" },
      "bad argument #1 to 'model' (option 'norm' must be one of \"pre\", \"post\", got string \"mid\")" },
    { "a string seed", { vocab = 5, seed = "1" },
      "bad argument #1 to 'model' (option 'seed' must be an integer, got string \"1\")" },
    { "no table", nil, "bad argument #1 to 'model' (config table expected, got nil)" },
    { "fraction_qk above 1 (any pe)", { vocab = 5, pe = "none", fraction_qk = 1.5 },
      "bad argument #1 to 'model' (fraction_qk 1.5 must be in (0, 1])" },
    { "base 0", { vocab = 5, base = 0 },
      "bad argument #1 to 'model' (base must be a finite number > 0, got 0)" },
  }
  for _, c in ipairs(cases) do
    it(c[1], function()
      assert.has_error(function() return rp.model(c[2]) end, c[3])
    end)
  end

  it("a model too large to allocate is a clean error", function()
    local ok, err = pcall(rp.model, { vocab = 2 ^ 31 - 1, d_model = 4096, heads = 4, layers = 1,
                                      d_ff = 4, seq_len = 4, max_batch = 1 })
    assert.is_false(ok)
    assert.truthy(err:find("more than 2^40", 1, true), err)
  end)
end)

describe("roper.Model", function()
  it("prints its size and shape", function()
    local m = rp.model { vocab = 65, pe = "roper", max_batch = 1 }
    assert.equal("roper.Model: 0.6M parameters (d_model 128, 4 heads, 3 layers, d_ff 512, "
                 .. "seq_len 512, pe roper, pre-norm)", tostring(m))
    local t = tiny { norm = "post", pe = "learned" }
    assert.equal(string.format("roper.Model: %.1fK parameters (d_model 16, 2 heads, 2 layers, "
                                .. "d_ff 32, seq_len 8, pe learned, post-norm)",
                                expected_count(t:config()) / 1000), tostring(t))
    local small = rp.model { vocab = 2, d_model = 2, heads = 1, layers = 1, d_ff = 2, seq_len = 2,
                             max_batch = 1 }
    assert.equal(58, small:num_params())
    assert.equal("roper.Model: 58 parameters (d_model 2, 1 head, 1 layer, d_ff 2, seq_len 2, "
                 .. "pe rope, pre-norm)", tostring(small))
    assert.equal("roper.Model", getmetatable(m).__name)
  end)

  it("reports its config, and rebuilds the same model from it", function()
    local m = tiny { pe = "roper", fraction_v = 0.5, dropout = 0.25, seed = -3 }
    local c = m:config()
    assert.same({ vocab = 7, d_model = 16, heads = 2, layers = 2, d_ff = 32, seq_len = 8,
                  max_batch = 3, norm = "pre", activation = "relu", dropout = 0.25, pe = "roper",
                  fraction_qk = 1, fraction_v = 0.5, base = 10000, pairing = "half", seed = -3,
                  attention = "softmax", rotate = "qkvo" }, c)
    local m2 = rp.model(c)
    local p1, p2 = m:params(), m2:params()
    for i, e in ipairs(p1) do assert.equal(0, rp.maxdiff(e.tensor, p2[i].tensor), e.name) end
    -- another seed, other weights
    c.seed = 4
    assert.is_true(rp.maxdiff(p1[1].tensor, rp.model(c):params()[1].tensor) > 0)
  end)

  it("is released by a to-be-closed variable, safely twice", function()
    local m
    do
      local x <close> = tiny()
      m = x
    end
    assert.equal("roper.Model (released)", tostring(m))
    getmetatable(m).__close(m)
    getmetatable(m).__gc(m)
    assert.has_error(function() return m:forward { 1 } end,
                     "calling 'forward' on bad self (attempt to use a released model)")
    assert.has_error(function() return m:params() end,
                     "calling 'params' on bad self (attempt to use a released model)")
  end)
end)

describe("m:params() and m:grads()", function()
  for _, v in ipairs { { "pre", "rope" }, { "post", "learned" } } do
    local norm, pe = v[1], v[2]
    it("names and shapes in layout order (" .. norm .. "-norm, pe " .. pe .. ")", function()
      local m = tiny { norm = norm, pe = pe }
      local p, g = m:params(), m:grads()
      local names = expected_names(2, norm, pe)
      assert.equal(#names, #p)
      assert.equal(#names, #g)
      local total = 0
      for i, name in ipairs(names) do
        assert.equal(name, p[i].name)
        assert.equal(name, g[i].name)
        assert.equal(p[i].tensor, p[name])
        assert.equal(g[i].tensor, g[name])
        assert.same(p[i].tensor:shape(), g[i].tensor:shape())
        total = total + p[i].tensor:numel()
      end
      assert.equal(expected_count(m:config()), total)
      assert.equal(total, m:num_params())
      local C, V, F = 16, 7, 32
      assert.same({ V, C }, p["embed.weight"]:shape())
      assert.same({ 3 * C, C }, p["layers.1.attn.qkv.weight"]:shape())
      assert.same({ 3 * C }, p["layers.0.attn.qkv.bias"]:shape())
      assert.same({ F, C }, p["layers.0.ff.w1.weight"]:shape())
      assert.same({ C, F }, p["layers.1.ff.w2.weight"]:shape())
      assert.same({ V, C }, p["head.weight"]:shape())
      if pe == "learned" then assert.same({ 8, C }, p["pos.weight"]:shape()) end
      -- LayerNorm weights start at 1 and biases at 0; gradients at 0
      assert.equal(C, p["layers.0.norm1.weight"]:sum())
      assert.equal(0, p["layers.0.norm2.bias"]:abs():sum())
      for _, e in ipairs(g) do assert.equal(0, e.tensor:abs():sum(), e.name) end
    end)
  end

  -- rp.model_layout() read as docs/lua_api.md says (the rows, their dims and conditions, the
  -- relative kind's rows from rp.pe_modes()) must give every model's m:params(): names, shapes,
  -- and values as the init and fan_in say (rope.freq excepted: its values are the frequencies)
  it("are what rp.model_layout() says, for every mode, norm and learn_freq", function()
    local layout, modes, keys = rp.model_layout(), rp.pe_modes(), {}
    for _, k in ipairs(rp.model_keys()) do keys[k.name] = k end
    local cases = {}
    for _, pe in ipairs(h.pe_names()) do
      local c = { pe = pe, norm = "post", rel_clip = modes[pe].rel ~= "" and
                  (modes[pe].rel == "shaw" or modes[pe].rel == "deberta") and 3 or nil }
      cases[#cases + 1] = c
      if modes[pe].rotary then cases[#cases + 1] = { pe = pe, learn_freq = true, fraction_qk = 0.5 } end
    end
    cases[#cases + 1] = { pe = "learned" }
    for _, extra in ipairs(cases) do
      local m = tiny(extra)
      local c = m:config()
      local function value(key) if c[key] == nil then return keys[key].default end return c[key] end
      local function size(dim)
        local d = layout.dims[dim]
        local rot, f = modes[c.pe].rotate, 0 -- the widest rotated placement's fraction
        if rot:find("[qk]") then f = extra.fraction_qk or 1 end
        if rot:find("[vo]") then f = 1 end
        local of = d.of == nil and 0 or d.of == "d_rot/2" and math.floor(c.d_model / c.heads * f / 2) or
                   d.of == "d_k" and c.d_model // c.heads or value(d.of)
        return d.times * of + d.plus
      end
      local want = {}
      local function add(name, shape, row) want[#want + 1] = { name = name, shape = shape, row = row } end
      for _, scope in ipairs { "model", "layer", "after" } do
        for l = 0, scope == "layer" and c.layers - 1 or 0 do
          local pre = scope == "layer" and ("layers." .. l .. ".") or ""
          for _, r in ipairs(layout) do
            if r.scope == scope and r.rel then
              local mode = modes[c.pe]
              for _, q in ipairs(mode.rel_params) do
                if (q.use == "shared") == (scope == "model") then
                  local function rs(dim)
                    local d = mode.rel_dims[dim]
                    local of = d.of == "d_k" and c.d_model // c.heads or value(d.of)
                    return d.times * of + d.plus
                  end
                  add(pre .. q.name, { rs(q.rows), rs(q.cols) })
                end
              end
            elseif r.scope == scope and (r.when == nil or
                (r.when.absolute and modes[c.pe].absolute == r.when.absolute) or
                (r.when.key and value(r.when.key) == r.when.value)) then
              local shape = {}
              for i, d in ipairs(r.dims) do shape[i] = size(d) end
              add(pre .. r.name, shape, r)
            end
          end
        end
      end
      local p = m:params()
      assert.equal(#want, #p, c.pe)
      for i, w in ipairs(want) do
        assert.equal(w.name, p[i].name)
        assert.same(w.shape, p[i].tensor:shape(), w.name)
        local t, r = p[i].tensor, w.row
        if r and r.init == "ones" then assert.equal(t:numel(), t:sum(), w.name) end
        if r and (r.init == "zeros" and r.name ~= "rope.freq") then
          assert.equal(0, t:abs():sum(), w.name)
        end
        if r and r.init == "uniform" then
          local b = 1 / math.sqrt(size(r.fan_in))
          assert.is_true(t:abs():max() <= b and t:abs():max() > 0.5 * b, w.name)
        end
        if r and r.init == "normal" then assert.is_true(t:abs():max() > 1.5, w.name) end
      end
    end
  end)

  it("share storage with the model: writing a view changes its output", function()
    local m = tiny()
    local p = m:params()
    p["head.weight"]:zero()
    p["head.bias"]:copy(rp.range(0, 6))
    local logits = m:forward { { 1, 2, 3 }, { 4, 5, 6 } }
    local want = rp.range(0, 6):view(1, 1, 7):add(rp.zeros { 2, 3, 7 })
    assert.equal(0, rp.maxdiff(want, logits))
    -- a fresh params() call sees the same numbers
    assert.equal(21, m:params()["head.bias"]:sum())
  end)

  it("print one line per tensor (index, name, shape, norm) under the counts", function()
    local m = tiny()
    local p = m:params()
    local text = tostring(p)
    local lines = {}
    for l in text:gmatch("[^\n]+") do lines[#lines + 1] = l end
    local values = tostring(m:num_params()):reverse():gsub("(%d%d%d)", "%1,"):reverse():gsub("^,", "")
    assert.equal(("%d parameter tensors, %s values (t[i] = {name =, tensor =}, t[name] = tensor):")
      :format(#p, values), lines[1])
    assert.equal(#p + 1, #lines)
    for i, e in ipairs(p) do
      local idx, name, shape, norm = lines[i + 1]:match("^ +(%d+)  (%S+) +(%[[%d x]+%]) +norm (%S+)$")
      assert.equal(tostring(i), idx, lines[i + 1])
      assert.equal(e.name, name)
      assert.equal("[" .. table.concat(e.tensor:shape(), " x ") .. "]", shape)
      assert.near(e.tensor:norm(), tonumber(norm), 1e-3 * e.tensor:norm() + 1e-12)
    end
    -- the names line up in one column
    local col = lines[2]:find("embed", 1, true)
    for i = 3, #lines do assert.equal(col, lines[i]:find("%a"), lines[i]) end
    assert.truthy(tostring(m:grads()):find("^%d+ gradient tensors, "), tostring(m:grads()))
    -- a released view prints as released
    local q = m:params()
    getmetatable(q[2].tensor).__close(q[2].tensor)
    assert.truthy(tostring(q):find("\n   2  layers%.0%.norm1%.weight +%(released%)\n"), tostring(q))
    -- still a plain table: fields, # and ipairs as before; inside a table the first line
    assert.equal(p[1].tensor, p["embed.weight"])
    local inside = rp.inspect({ p = p }, { width = 400 })
    assert.truthy(inside:find("^{p = %d+ parameter tensors, [^\n]* %.%.%.}$"), inside)
  end)

  it("gradient views follow the model's gradient buffer", function()
    local m = tiny()
    local g = m:grads()
    local opt = rp.optim.adam(m, { clip = 0 })
    m:train_step({ { 1, 2, 3 } }, { { 2, 3, 4 } }, nil, opt)
    assert.is_true(g["embed.weight"]:norm() > 0)
    assert.is_true(g["head.bias"]:norm() > 0)
    -- the embedding rows of tokens that did not occur get no gradient
    assert.equal(0, g["embed.weight"][1]:norm())
    assert.is_true(g["embed.weight"][2]:norm() > 0)
  end)

  it("outlive the model (garbage collected or closed)", function()
    local m = tiny()
    local w = m:params()["embed.weight"]
    local gr = m:grads()["head.bias"]
    local before = w:clone()
    m = nil -- luacheck: ignore
    collectgarbage()
    collectgarbage()
    assert.equal(0, rp.maxdiff(before, w))
    w:fill(2)
    assert.equal(2 * 7 * 16, w:sum())
    assert.equal(0, gr:sum())
    local v
    do
      local m2 <close> = tiny()
      v = m2:params()["layers.1.ff.w1.bias"]
    end
    collectgarbage()
    assert.equal(32, v:numel())
    assert.is_true(v:abs():sum() > 0)
  end)
end)

describe("m:forward", function()
  local m = tiny()

  it("gives [B x T x V] logits for every input form", function()
    local a = m:forward { 1, 2, 3 }
    assert.same({ 1, 3, 7 }, a:shape())
    local b = m:forward { { 1, 2, 3 }, { 4, 5, 6 } }
    assert.same({ 2, 3, 7 }, b:shape())
    -- (sgemm blocks a batch differently: equal up to rounding)
    assert.is_true(rp.maxdiff(a[1], b[1]) < 1e-5)
    assert.equal(0, rp.maxdiff(b, m:forward(rp.tensor { { 1, 2, 3 }, { 4, 5, 6 } })))
    assert.equal(0, rp.maxdiff(a, m:forward(rp.tensor { 1, 2, 3 })))
    -- a strided tensor: column 2 of a [3 x 2] tensor
    local s = rp.tensor { { 0, 1 }, { 0, 2 }, { 0, 3 } }:select(2, 2)
    assert.equal(0, rp.maxdiff(a, m:forward(s)))
    -- full size: max_batch x seq_len
    local full = {}
    for i = 1, 3 do full[i] = { 0, 1, 2, 3, 4, 5, 6, 0 } end
    assert.same({ 3, 8, 7 }, m:forward(full):shape())
    -- causal: the logits of position 2 do not depend on position 3
    local c = m:forward { 1, 2, 6 }
    assert.equal(0, rp.maxdiff(a:narrow(2, 1, 2), c:narrow(2, 1, 2)))
    assert.is_true(rp.maxdiff(a:narrow(2, 3, 1), c:narrow(2, 3, 1)) > 0)
    -- the result is a copy
    a:zero()
    assert.is_true(m:forward { 1, 2, 3 }:abs():sum() > 0)
  end)

  local cases = {
    { "a token out of the vocabulary, with its position", { { 0, 1, 2 }, { 3, 7, 1 } },
      "bad argument #1 to 'forward' (token at [2][2] must be an integer in 0..6 (vocab 7), got 7)" },
    { "a negative token in a flat table", { 0, 1, -1 },
      "bad argument #1 to 'forward' (token at [3] must be an integer in 0..6 (vocab 7), got -1)" },
    { "a fractional token in a tensor", rp.tensor { 1, 2.5 },
      "bad argument #1 to 'forward' (token at [2] must be an integer in 0..6 (vocab 7), got 2.5)" },
    { "a token out of the vocabulary in a [B x T] tensor", rp.tensor { { 1, 2 }, { 9, 1 } },
      "bad argument #1 to 'forward' (token at [2][1] must be an integer in 0..6 (vocab 7), got 9)" },
    { "a string token", { 1, "2" },
      "bad argument #1 to 'forward' (token at [2] must be an integer in 0..6 (vocab 7), got string \"2\")" },
    { "a sequence longer than seq_len", { 0, 1, 2, 3, 4, 5, 6, 0, 1 },
      "bad argument #1 to 'forward' (sequence length 9 exceeds seq_len 8)" },
    { "a batch larger than max_batch", { { 0 }, { 1 }, { 2 }, { 3 } },
      "bad argument #1 to 'forward' (a batch of 4 sequences exceeds max_batch 3)" },
    { "a ragged batch", { { 0, 1 }, { 1 } },
      "bad argument #1 to 'forward' (tokens[2] has 1 entries, expected 2 (as tokens[1]))" },
    { "a batch with a number for a row", { { 0, 1 }, 2 },
      "bad argument #1 to 'forward' (tokens[2] must be a table (one sequence), got 2)" },
    { "an empty table", {},
      "bad argument #1 to 'forward' (tokens must hold at least one token, got an empty table)" },
    { "an empty tensor", rp.zeros { 0 },
      "bad argument #1 to 'forward' (tokens must hold at least one token, got [0])" },
    { "a 3-D tensor", rp.zeros { 1, 2, 2 },
      "bad argument #1 to 'forward' (tokens must be a [T] or [B x T] tensor, got [1 x 2 x 2])" },
    { "a string", "abc",
      "bad argument #1 to 'forward' (tokens must be a table or a tensor, got string \"abc\")" },
  }
  for _, c in ipairs(cases) do
    it("rejects " .. c[1], function()
      assert.has_error(function() return m:forward(c[2]) end, c[3])
    end)
  end
end)

describe("m:loss", function()
  it("equals a plain-Lua cross-entropy of m:forward's logits (mask and a -1 target)", function()
    local m = tiny { seed = 5 }
    local tok = { { 0, 1, 2, 3, 4 }, { 6, 5, 4, 3, 2 } }
    local tgt = { { 1, 2, 3, -1, 5 }, { 5, 4, 3, 2, 1 } }
    local mask = { { 1, 1, 1, 1, 0 }, { true, false, true, true, true } }
    local logits = m:forward(tok):totable()
    local want = naive_loss(logits, tgt, mask)
    local got = m:loss(tok, tgt, mask)
    assert.is_true(math.abs(got - want) <= 1e-5 * math.abs(want), string.format("%.9g vs %.9g", got, want))
    -- without the mask, only the -1 target is left out
    local want2 = naive_loss(logits, tgt)
    assert.is_true(math.abs(m:loss(tok, tgt) - want2) <= 1e-5 * want2)
    assert.is_true(math.abs(want - want2) > 1e-4)
    -- a mask tensor does the same as the table
    local mt = rp.tensor { { 1, 1, 1, 1, 0 }, { 1, 0, 1, 1, 1 } }
    assert.equal(got, m:loss(rp.tensor(tok), rp.tensor(tgt), mt))
    -- nothing scored: nan
    local none = m:loss({ 1, 2 }, { -1, -1 })
    assert.is_true(none ~= none)
  end)

  it("runs in eval mode (no dropout: the same value twice)", function()
    local m = tiny { dropout = 0.5 }
    local a = m:loss({ 1, 2, 3 }, { 2, 3, 4 })
    assert.equal(a, m:loss({ 1, 2, 3 }, { 2, 3, 4 }))
    local want = naive_loss(m:forward { { 1, 2, 3 } }:totable(), { { 2, 3, 4 } })
    assert.is_true(math.abs(a - want) <= 1e-5 * want)
  end)

  local m = tiny()
  local cases = {
    { "targets of another shape", function() return m:loss({ 1, 2 }, { 1, 2, 3 }) end,
      "bad argument #2 to 'loss' (targets has shape [3], expected [2] (the shape of tokens))" },
    { "a batch of targets of another shape", function() return m:loss({ { 1, 2 } }, { { 1 }, { 2 } }) end,
      "bad argument #2 to 'loss' (targets has shape [2 x 1], expected [1 x 2] (the shape of tokens))" },
    { "a target out of range", function() return m:loss({ 1, 2 }, { 1, 9 }) end,
      "bad argument #2 to 'loss' (target at [2] must be -1 (not scored) or an integer in 0..6 (vocab 7), got 9)" },
    { "a target of -2", function() return m:loss({ { 1, 2 } }, { { -2, 1 } }) end,
      "bad argument #2 to 'loss' (target at [1][1] must be -1 (not scored) or an integer in 0..6 (vocab 7), got -2)" },
    { "a mask value of 0.5", function() return m:loss({ 1, 2 }, { 1, 2 }, { 1, 0.5 }) end,
      "bad argument #3 to 'loss' (mask at [2] must be 0, 1, true or false, got 0.5)" },
    { "a mask of another shape", function() return m:loss({ 1, 2 }, { 1, 2 }, { 1 }) end,
      "bad argument #3 to 'loss' (mask has shape [1], expected [2] (the shape of tokens))" },
    { "missing targets", function() return m:loss({ 1, 2 }) end,
      "bad argument #2 to 'loss' (targets must be a table or a tensor, got nil)" },
  }
  for _, c in ipairs(cases) do
    it("rejects " .. c[1], function() assert.has_error(c[2], c[3]) end)
  end
end)

describe("m:generate", function()
  it("greedy decoding equals repeated argmax of full forwards (within the window)", function()
    for _, pe in ipairs(h.pe_names(function(m) return m.rotary or m.absolute == "learned" end)) do
      local m = tiny { pe = pe, seed = 11 }
      local prompt = { 3, 1 }
      local got = m:generate(prompt, 6)
      assert.equal(6, #got)
      local seq = { 3, 1 }
      local want = {}
      for i = 1, 6 do
        local lt = m:forward(seq):totable()
        local nxt = argmax0(lt[1][#seq])
        want[i] = nxt
        seq[#seq + 1] = nxt
      end
      assert.same(want, got, pe)
      -- a tensor prompt gives the same
      assert.same(got, m:generate(rp.tensor(prompt), 6))
      -- stop: generation ends right after the stop token
      assert.same({ want[1] }, m:generate(prompt, 6, { stop = want[1] }))
    end
  end)

  it("runs past the window and for n = 0", function()
    local m = tiny()
    local out = m:generate({ 1, 2, 3, 4, 5, 6, 0, 1, 2, 3 }, 20) -- a prompt longer than seq_len
    assert.equal(20, #out)
    for _, t in ipairs(out) do assert.is_true(t >= 0 and t < 7 and math.type(t) == "integer") end
    assert.same({}, m:generate({ 1 }, 0))
  end)

  it("samples reproducibly from a seed or a generator", function()
    local m = tiny { seed = 2 }
    local a = m:generate({ 0 }, 30, { temperature = 1, seed = 42 })
    local b = m:generate({ 0 }, 30, { temperature = 1, seed = 42 })
    assert.same(a, b)
    local c = m:generate({ 0 }, 30, { temperature = 1, seed = 43 })
    assert.are_not.same(a, c)
    local g1, g2 = rp.rng(9), rp.rng(9)
    assert.same(m:generate({ 0 }, 30, { temperature = 0.7, top_k = 3, rng = g1 }),
                m:generate({ 0 }, 30, { temperature = 0.7, top_k = 3, rng = g2 }))
    assert.are_not.same(m:generate({ 0 }, 30, { temperature = 0.7, rng = g1 }),
                        m:generate({ 0 }, 30, { temperature = 0.7, rng = rp.rng(9) }))
    -- the default generator follows rp.seed
    rp.seed(5)
    local d1 = m:generate({ 0 }, 30, { temperature = 1 })
    rp.seed(5)
    assert.same(d1, m:generate({ 0 }, 30, { temperature = 1 }))
    -- top_k = 1 is greedy
    assert.same(m:generate({ 0 }, 10), m:generate({ 0 }, 10, { temperature = 2, top_k = 1, seed = 1 }))
  end)

  local m = tiny()
  local cases = {
    { "an empty prompt", function() return m:generate({}, 3) end,
      "bad argument #1 to 'generate' (prompt must hold at least one token, got an empty table)" },
    { "a 2-D prompt tensor", function() return m:generate(rp.zeros { 1, 2 }, 3) end,
      "bad argument #1 to 'generate' (prompt must be a 1-D tensor, got [1 x 2])" },
    { "a prompt token out of range", function() return m:generate({ 1, 7 }, 3) end,
      "bad argument #1 to 'generate' (token at [2] must be an integer in 0..6 (vocab 7), got 7)" },
    { "n = -1", function() return m:generate({ 1 }, -1) end,
      "bad argument #2 to 'generate' (n must be between 0 and 2^31-1, got -1)" },
    { "a negative temperature", function() return m:generate({ 1 }, 3, { temperature = -1 }) end,
      "bad argument #3 to 'generate' (option 'temperature' must be >= 0, got -1.0)" },
    { "seed and rng together", function() return m:generate({ 1 }, 3, { seed = 1, rng = rp.rng(1) }) end,
      "bad argument #3 to 'generate' (give option 'seed' or 'rng', not both)" },
    { "rng not a generator", function() return m:generate({ 1 }, 3, { rng = 3 }) end,
      "bad argument #3 to 'generate' (option 'rng' must be a roper.Rng, got 3)" },
    { "a stop token out of range", function() return m:generate({ 1 }, 3, { stop = 7 }) end,
      "bad argument #3 to 'generate' (option 'stop' must be a token id in 0..6 (vocab 7), got 7)" },
    { "an unknown option", function() return m:generate({ 1 }, 3, { temp = 1 }) end,
      "bad argument #3 to 'generate' (unknown option 'temp' (known: temperature, top_k, top_p, seed, rng, stop))" },
  }
  for _, c in ipairs(cases) do
    it("rejects " .. c[1], function() assert.has_error(c[2], c[3]) end)
  end
end)

describe("m:attention and m:activations", function()
  it("attention rows sum to 1 and are causal", function()
    local m = tiny { pe = "roper" }
    local tok = { { 0, 1, 2, 3, 4 }, { 6, 6, 5, 1, 0 } }
    for layer = 1, 2 do
      local att = m:attention(layer, tok)
      assert.same({ 2, 2, 5, 5 }, att:shape())
      local a = att:totable()
      for b = 1, 2 do
        for hd = 1, 2 do
          for t = 1, 5 do
            local s = 0
            for j = 1, 5 do
              local w = a[b][hd][t][j]
              if j > t then assert.equal(0, w) else assert.is_true(w > 0) end
              s = s + w
            end
            assert.is_true(math.abs(s - 1) < 1e-5, string.format("row sum %.9g", s))
          end
        end
      end
      -- the first query sees only itself
      assert.equal(1, a[1][1][1][1])
    end
    assert.is_true(rp.maxdiff(m:attention(1, tok), m:attention(2, tok)) > 0)
    assert.has_error(function() return m:attention(3, tok) end,
                     "bad argument #1 to 'attention' (layer 3 out of range (the model has 2 layers))")
    assert.has_error(function() return m:attention(0, tok) end,
                     "bad argument #1 to 'attention' (layer 0 out of range (the model has 2 layers, numbered "
                     .. "from 1 here))")
  end)

  it("activations: the embedding output and one residual stream per layer", function()
    local m = tiny()
    local tok = { { 0, 1, 2 }, { 6, 5, 4 } }
    local a = m:activations(tok)
    assert.equal(2, #a)
    for l = 0, 2 do assert.same({ 2, 3, 16 }, a[l]:shape()) end
    assert.is_nil(a[3])
    -- [0] is the embedding rows (pe rope adds nothing)
    local E = m:params()["embed.weight"]
    for b = 1, 2 do
      for t = 1, 3 do assert.equal(0, rp.maxdiff(a[0][b][t], E[tok[b][t] + 1])) end
    end
    -- the layers change the stream
    assert.is_true(rp.maxdiff(a[0], a[1]) > 0)
    assert.is_true(rp.maxdiff(a[1], a[2]) > 0)
    -- pre-norm: logits = head(LN_f(stream after the last layer))
    local p = m:params()
    local x = a[2]
    local mu = x:mean(3, true)
    local xc = x - mu
    local var = (xc * xc):mean(3, true)
    local y = xc / (var + 1e-5):sqrt() * p["norm_f.weight"] + p["norm_f.bias"]
    local logits = y:matmul(p["head.weight"]:t()) + p["head.bias"]
    h.approx(m:forward(tok), logits, 1e-4, "logits from the last activation")
  end)

  it("activations include the position table for pe sinusoidal", function()
    local m = tiny { pe = "sinusoidal" }
    local a = m:activations { 3, 3, 3, 3 }
    local E = m:params()["embed.weight"][4]
    local want = rp.rope.sinusoidal(4, 16) + E
    h.approx(a[0][1], want, 1e-5, "embedding + sinusoidal")
  end)
end)

describe("checkpoints", function()
  local d, cleanup
  setup(function() d, cleanup = tmpdir() end)
  teardown(function() cleanup() end)

  it("round trip: identical logits, config and optimiser state", function()
    local m = tiny { pe = "roper", norm = "post", dropout = 0.1, seed = 3 }
    local opt = rp.optim.adamw(m, { lr = 3e-3, weight_decay = 0.01, schedule = "cosine",
                                    warmup = 2, total_steps = 50 })
    for _ = 1, 3 do m:train_step({ { 1, 2, 3, 4 } }, { { 2, 3, 4, 5 } }, nil, opt) end
    local path = d .. "/a.ck"
    assert.is_true(m:save(path, opt))
    local m2, opt2 = rp.load(path)
    assert.equal("roper.Model", getmetatable(m2).__name)
    assert.same(m:config(), m2:config())
    local tok = { { 0, 1, 2, 3, 4, 5 }, { 6, 5, 4, 3, 2, 1 } }
    assert.equal(0, rp.maxdiff(m:forward(tok), m2:forward(tok)))
    assert.equal(3, opt2:steps())
    assert.equal(opt:lr(), opt2:lr())
    assert.same(opt:config(), opt2:config())
    -- without an optimiser: one result
    local path2 = d .. "/b.ck"
    assert.is_true(m:save(path2))
    assert.equal(1, select("#", rp.load(path2)))
    local m3 = rp.load(path2)
    assert.equal(0, rp.maxdiff(m:forward(tok), m3:forward(tok)))
    -- overwriting works and leaves no temporary files behind
    assert.is_true(m:save(path2))
    local p = io.popen("ls -A '" .. d .. "'")
    local listing = p:read("a")
    p:close()
    assert.equal("a.ck\nb.ck\n", listing)
  end)

  it("returns nil and 'path: reason' for a missing, truncated, garbage or corrupted file", function()
    local m = tiny()
    local good = d .. "/good.ck"
    assert.is_true(m:save(good))
    local bytes = assert(h.read(good))

    local missing = d .. "/missing.ck"
    local r, msg = rp.load(missing)
    assert.is_nil(r)
    assert.equal(missing .. ": No such file or directory", msg)

    local trunc = d .. "/trunc.ck"
    h.write(trunc, bytes:sub(1, #bytes // 2))
    r, msg = rp.load(trunc)
    assert.is_nil(r)
    assert.equal(trunc .. ": ", msg:sub(1, #trunc + 2))
    assert.truthy(msg:find("truncated", 1, true), msg)

    local garbage = d .. "/garbage.ck"
    h.write(garbage, "this is not a checkpoint at all, just some text\n")
    r, msg = rp.load(garbage)
    assert.is_nil(r)
    assert.equal(garbage .. ": not a roper checkpoint, .npy or safetensors file", msg)

    local flipped = d .. "/flipped.ck"
    local i = #bytes // 2
    h.write(flipped, bytes:sub(1, i - 1) .. string.char((bytes:byte(i) + 1) % 256) .. bytes:sub(i + 1))
    r, msg = rp.load(flipped)
    assert.is_nil(r)
    assert.equal(flipped .. ": checksum mismatch", msg)

    local empty = d .. "/empty.ck"
    h.write(empty, "")
    r, msg = rp.load(empty)
    assert.is_nil(r)
    assert.equal(empty .. ": ", msg:sub(1, #empty + 2))

    r, msg = rp.load(d) -- a folder
    assert.is_nil(r)
    assert.equal(d .. ": ", msg:sub(1, #d + 2))
  end)

  it("m:save returns nil and 'path: reason' for an unwritable path", function()
    local m = tiny()
    local p1 = d .. "/no/such/folder/x.ck"
    local ok, msg = m:save(p1)
    assert.is_nil(ok)
    assert.equal(p1 .. ": ", msg:sub(1, #p1 + 2))
    -- a regular file used as a folder
    local f = d .. "/plain"
    h.write(f, "x")
    local p2 = f .. "/x.ck"
    ok, msg = m:save(p2)
    assert.is_nil(ok)
    assert.equal(p2 .. ": ", msg:sub(1, #p2 + 2))
  end)

  it("raises for wrong argument types", function()
    local m = tiny()
    local other = rp.optim.adam(tiny())
    assert.has_error(function() return m:save(42) end,
                     "bad argument #1 to 'save' (path must be a string, got 42)")
    assert.has_error(function() return m:save("") end,
                     "bad argument #1 to 'save' (path must not be empty)")
    assert.has_error(function() return m:save(d .. "/x.ck", 5) end,
                     "bad argument #2 to 'save' (roper.Optim expected, got 5)")
    assert.has_error(function() return m:save(d .. "/x.ck", other) end,
                     "bad argument #2 to 'save' (the optimiser belongs to another model)")
    assert.has_error(function() return rp.load() end,
                     "bad argument #1 to 'load' (path must be a string, got no value)")
    assert.has_error(function() return rp.load("a\0b") end,
                     "bad argument #1 to 'load' (path contains a NUL byte)")
  end)
end)

describe("help", function()
  it("has a text for every model and optimiser function and method", function()
    for name, f in pairs(rp.Model) do assert.truthy(rp.help(f), "rp.Model." .. name) end
    for name, f in pairs(rp.Optim) do assert.truthy(rp.help(f), "rp.Optim." .. name) end
    for name, f in pairs(rp.optim) do assert.truthy(rp.help(f), "rp.optim." .. name) end
    assert.truthy(rp.help(rp.model):find("^rp%.model%(cfg%)"))
    assert.truthy(rp.help(rp.load):find("^rp%.load%(path%[, opts%]%)"))
    assert.truthy(rp.help("m:train_step"):find("^m:train_step"))
    assert.truthy(rp.help("opt:lr"):find("^opt:lr"))
    local m = tiny()
    assert.truthy(rp.help(m):find("^Topic model"))
    assert.truthy(rp.help(rp.optim.adam(m)):find("^Topic optim"))
    assert.truthy(rp.help(m.generate):find("^m:generate"))
  end)
end)

describe("non-finite training steps and saves", function()
  local x, y = { 1, 2, 3, 4 }, { 2, 3, 4, 5 }

  -- the model's parameters as one flat Lua list
  local function snapshot(m)
    local out = {}
    for _, p in ipairs(m:params()) do
      for _, v in ipairs(h.flatten(p.tensor)) do out[#out + 1] = v end
    end
    return out
  end

  local function same_bits(a, b)
    if #a ~= #b then return false end
    for i = 1, #a do
      if not (a[i] == b[i] or (a[i] ~= a[i] and b[i] ~= b[i])) then return false end
    end
    return true
  end

  it("train_step raises on a nan loss and leaves weights and optimiser untouched", function()
    local m = tiny()
    local opt = rp.optim.adam(m, { lr = 1e-2 })
    m:train_step(x, y, nil, opt)
    m:params()["head.bias"]:set(1, 0 / 0) -- every logit of the first token becomes nan
    local before = snapshot(m)
    assert.has_error(function() m:train_step(x, y, nil, opt) end,
      "train_step: the loss is nan; the weights were not updated (pass {nonfinite = \"skip\"} "
      .. "to skip such steps)")
    assert.is_true(same_bits(before, snapshot(m)))
    assert.are.equal(1, opt:steps())
    local loss, norm, updated = m:train_step(x, y, nil, opt, { nonfinite = "skip" })
    assert.is_true(loss ~= loss)
    assert.is_true(norm ~= norm)
    assert.is_false(updated)
    assert.is_true(same_bits(before, snapshot(m)))
    assert.are.equal(1, opt:steps())
  end)

  it("train_step returns updated = true on a finite step", function()
    local m = tiny()
    local opt = rp.optim.adamw(m)
    local loss, norm, updated = m:train_step(x, y, nil, opt)
    assert.is_true(loss > 0 and norm > 0 and updated == true)
    assert.are.equal(1, opt:steps())
  end)

  it("train_step checks its options", function()
    local m = tiny()
    local opt = rp.optim.adam(m)
    assert.has_error(function() m:train_step(x, y, nil, opt, { nonfinite = "ignore" }) end,
      "bad argument #5 to 'train_step' (option 'nonfinite' must be one of \"error\", \"skip\", "
      .. "got string \"ignore\")")
    assert.has_error(function() m:train_step(x, y, nil, opt, { skip = true }) end,
      "bad argument #5 to 'train_step' (unknown option 'skip' (known: nonfinite, comm))")
  end)

  it("opt:step raises on an inf gradient and updates nothing", function()
    local m = tiny()
    local opt = rp.optim.adam(m)
    m:grads()["embed.weight"]:set(2, 3, 1 / 0)
    local before = snapshot(m)
    assert.has_error(function() opt:step() end,
      "step: the gradient norm is inf; the weights were not updated (pass {nonfinite = \"skip\"} "
      .. "to skip such steps)")
    local norm, updated = opt:step { nonfinite = "skip" }
    assert.are.equal(math.huge, norm)
    assert.is_false(updated)
    assert.is_true(same_bits(before, snapshot(m)))
    assert.are.equal(0, opt:steps())
    m:grads()["embed.weight"]:set(2, 3, 0)
    norm, updated = opt:step()
    assert.is_true(updated and norm == 0)
    assert.are.equal(1, opt:steps())
  end)

  it("m:save refuses non-finite weights unless allowed", function()
    local m = tiny()
    local path = h.tmpname()
    m:params()["layers.1.ff.w2.weight"]:set(1, 1, 0 / 0)
    assert.has_error(function() m:save(path) end,
      "m:save: parameter 'layers.1.ff.w2.weight' holds nan or inf (the model diverged); pass "
      .. "{allow_nonfinite = true} to save it anyway")
    assert.is_true(m:save(path, nil, { allow_nonfinite = true }))
    local back = rp.load(path)
    local v = back:params()["layers.1.ff.w2.weight"]:get(1, 1)
    assert.is_true(v ~= v)
    os.remove(path)
    assert.has_error(function() m:save(path, nil, { allow = true }) end,
      "bad argument #3 to 'save' (unknown option 'allow' (known: allow_nonfinite))")
  end)
end)

describe("rp.model_memory", function()
  it("gives the bytes of a model without making it, and checks the config as rp.model does", function()
    local mem = rp.model_memory(TINY)
    local m = tiny()
    assert.are.equal(m:num_params(), mem.params)
    assert.are.equal(8 * mem.params, mem.optimiser)
    -- at least the parameters, the gradients and the attention weights of 2 layers
    assert.is_true(mem.model >= 4 * (2 * mem.params + 2 * 3 * 2 * 8 * 8))
    assert.is_true(math.type(mem.available) == "integer" and mem.available > 0)
    assert.has_error(function() rp.model_memory { vocab = 7, d_model = 16, heads = 3 } end,
      "bad argument #1 to 'model_memory' (d_model 16 is not divisible by heads 3)")
  end)

  it("counts learn_freq's buffers (the parameter in double, a seq_len x d_rot/2 sum)", function()
    local cfg = { vocab = 7, d_model = 16, heads = 2, layers = 1, d_ff = 8, seq_len = 4096,
                  max_batch = 1, pe = "rope" }
    local plain = rp.model_memory(cfg)
    cfg.learn_freq = true
    local learned = rp.model_memory(cfg)
    local half = 4 -- d_k 8
    assert.equal(plain.params + 3 * half, learned.params)
    -- beyond the parameter, its gradient and their layout rows: 8 bytes x half x (3 + seq_len)
    -- and an int per pair
    local extra = 8 * half * (3 + 4096) + 4 * half
    assert.is_true(learned.model - plain.model >= extra + 8 * 3 * half,
      learned.model - plain.model .. " < " .. extra)
    assert.is_true(learned.model - plain.model < extra + 1024, learned.model - plain.model)
  end)

  it("prints the bytes with their units, the fields stay numbers", function()
    local mem = rp.model_memory(TINY)
    local text = tostring(mem)
    local scale = { KiB = 2 ^ 10, MiB = 2 ^ 20, GiB = 2 ^ 30, TiB = 2 ^ 40 }
    for _, k in ipairs { "model", "optimiser", "available" } do
      local n, v, u = text:match(k .. " = (%d+) %(([%d.]+) (%a+)%)")
      assert.equal(tostring(mem[k]), n, text)
      assert.is_true(scale[u] ~= nil and mem[k] / scale[u] >= 1 and mem[k] / scale[u] < 1024, text)
      assert.near(mem[k] / scale[u], tonumber(v), 0.05)
    end
    -- the parameter count with thousands separators: 1234567 -> 1,234,567
    local count = text:match("params = ([%d,]*%d)")
    assert.equal(tostring(mem.params), (count:gsub(",", "")))
    assert.truthy(count:match("^%d%d?%d?,%d%d%d$"), count) -- TINY has thousands of parameters
    assert.truthy(text:find("^{model = .*, optimiser = .*, params = .*, available = .*}$"), text)
    assert.equal("integer", math.type(mem.model))
  end)

  it("rp.model refuses a model larger than the memory available", function()
    local cfg = { vocab = 100, d_model = 4096, heads = 4, layers = 3, seq_len = 8192, max_batch = 64 }
    local mem = rp.model_memory(cfg)
    assert.is_true(mem.model > mem.available)
    local ok, err = pcall(rp.model, cfg)
    assert.is_false(ok)
    assert.matches("^bad argument #1 to 'rp.model' %(a model of d_model 4096, 3 layers for max_batch 64 "
      .. "x seq_len 8192 needs [%d.]+ GiB, more than the [%d.]+ [GMT]iB of memory available%)$", err)
  end)
end)

describe("functions of the submodules are named in errors", function()
  it("even when the call site gives no name", function()
    local m = tiny()
    local kind = "adam"
    local ok, err = pcall(function() local o = rp.optim[kind](m, { warmup = -1 }); return o end)
    assert.is_false(ok)
    assert.matches(":%d+: bad argument #2 to 'rp.optim.adam' %(warmup must be >= 0, got %-1%)$", err)
    ok, err = pcall(rp.rope.rotate, "x")
    assert.are.equal("bad argument #1 to 'rp.rope.rotate' (roper.Tensor expected, got string)", err)
    local t = { rp.eye }
    ok, err = pcall(function() return t[1](-1) end)
    assert.matches("bad argument #1 to 'rp.eye' %(n must be between 0 and 2^20, got %-1%)$", err)
    -- a name given at the call site stays
    local myrotate = rp.rope.rotate
    ok, err = pcall(function() return myrotate(1) end)
    assert.matches("bad argument #1 to 'myrotate' %(roper.Tensor expected, got number%)$", err)
  end)
end)

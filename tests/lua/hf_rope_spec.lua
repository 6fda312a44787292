-- Hugging Face's rope vocabulary (issue 32): the rope_scaling table as config.json writes it and
-- rope_theta, in rp.rope.*, rp.attention and rp.model, against a plain-Lua double reference of
-- the frequencies written from the formulas Hugging Face publishes for each rope_type
-- (transformers' modeling_rope_utils: default, linear, dynamic, yarn, llama3); dynamic NTK and
-- llama3 in models (cached decoding equals the forward, checkpoints keep them); the errors.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"
local rp = require "roper"

-- ---- the reference: inverse frequencies of a rotary dim d (pairs i = 0 .. d/2 - 1) -----------

local function default_inv(d, base)
  local f = {}
  for i = 0, d / 2 - 1 do f[i + 1] = 1 / base ^ (2 * i / d) end
  return f
end

-- rope_type "linear": every frequency divided by the factor.
local function linear_inv(d, base, c)
  local f = default_inv(d, base)
  for i = 1, #f do f[i] = f[i] / c.factor end
  return f
end

-- rope_type "dynamic" at sequence length n: base * ((factor n / L) - (factor - 1))^(d/(d-2)) when
-- n > L (L: original_max_position_embeddings, here also max_position_embeddings), else base.
local function dynamic_inv(d, base, c, n)
  local L = c.original_max_position_embeddings
  if n > L then base = base * ((c.factor * n / L) - (c.factor - 1)) ^ (d / (d - 2)) end
  return default_inv(d, base)
end

-- rope_type "yarn": the correction range of beta_fast / beta_slow rotations, a linear ramp over
-- the pair index between them, interpolation (freq / factor) below the ramp's start; the
-- attention factor 0.1 ln(factor) + 1 (or mscale / mscale_all_dim) on cos and sin.
local function yarn_inv(d, base, c)
  local L = c.original_max_position_embeddings
  local function corr_dim(rot)
    return d * math.log(L / (rot * 2 * math.pi)) / (2 * math.log(base))
  end
  local lo, hi = corr_dim(c.beta_fast or 32), corr_dim(c.beta_slow or 1)
  if c.truncate ~= false then lo, hi = math.floor(lo), math.ceil(hi) end
  lo, hi = math.max(lo, 0), math.min(hi, d - 1)
  if lo == hi then hi = hi + 0.001 end
  local f = {}
  for i = 0, d / 2 - 1 do
    local pos_freq = base ^ (2 * i / d)
    local extra, inter = 1 / pos_freq, 1 / (c.factor * pos_freq)
    local ramp = math.min(math.max((i - lo) / (hi - lo), 0), 1)
    local extrapolation_share = 1 - ramp
    f[i + 1] = inter * (1 - extrapolation_share) + extra * extrapolation_share
  end
  local function mscale(s, m) return s <= 1 and 1 or 0.1 * m * math.log(s) + 1 end
  local af = c.attention_factor
  if not af and c.mscale and c.mscale_all_dim then
    af = mscale(c.factor, c.mscale) / mscale(c.factor, c.mscale_all_dim)
  end
  return f, af or mscale(c.factor, 1)
end

-- rope_type "llama3": by wavelength 2 pi / freq against L / high_freq_factor and
-- L / low_freq_factor, smooth interpolation between.
local function llama3_inv(d, base, c)
  local f, L = default_inv(d, base), c.original_max_position_embeddings
  local low_wl, high_wl = L / c.low_freq_factor, L / c.high_freq_factor
  for i = 1, #f do
    local wl = 2 * math.pi / f[i]
    if wl > low_wl then
      f[i] = f[i] / c.factor
    elseif wl >= high_wl then
      local smooth = (L / wl - c.low_freq_factor) / (c.high_freq_factor - c.low_freq_factor)
      f[i] = (1 - smooth) * f[i] / c.factor + smooth * f[i]
    end
  end
  return f
end

-- The largest |cos - cos(p f_i)|, |sin - sin(p f_i)| over the rows of rp.rope.angles (row r at
-- position r), inv(p) giving the frequencies of position p.
local function angles_err(c, s, inv)
  local e = 0
  local n, half = c:size(1), c:size(2)
  for r = 1, n do
    local f = inv(r - 1)
    for i = 1, half do
      e = math.max(e, math.abs(c:get(r, i) - math.cos((r - 1) * f[i])),
        math.abs(s:get(r, i) - math.sin((r - 1) * f[i])))
    end
  end
  return e
end

-- One rope_scaling example per rope_type, as published model configs write them (sizes shrunk
-- to a small head: the formulas do not depend on the model's size).
local D, T = 16, 96
local EXAMPLES = {
  { name = "default", rs = { rope_type = "default" },
    inv = function(base) return default_inv(D, base) end },
  { name = "linear", rs = { rope_type = "linear", factor = 4.0 },
    inv = function(base, c) return linear_inv(D, base, c) end },
  { name = "dynamic",
    rs = { rope_type = "dynamic", factor = 2.0, original_max_position_embeddings = 24 },
    per_pos = true, inv = function(base, c, p) return dynamic_inv(D, base, c, p + 1) end },
  { name = "yarn (Qwen's: type, factor 4)", rs = { type = "yarn", factor = 4.0,
    original_max_position_embeddings = 32 },
    inv = function(base, c) return (yarn_inv(D, base, c)) end },
  { name = "yarn, truncate false", rs = { rope_type = "yarn", factor = 8.0, beta_fast = 16,
    beta_slow = 2, truncate = false, original_max_position_embeddings = 40 },
    inv = function(base, c) return (yarn_inv(D, base, c)) end },
  { name = "yarn with mscale (DeepSeek's form)", rs = { type = "yarn", factor = 40, beta_fast = 32,
    beta_slow = 1, mscale = 1.0, mscale_all_dim = 0.707, original_max_position_embeddings = 64 },
    inv = function(base, c) return (yarn_inv(D, base, c)) end },
  { name = "llama3 (Llama 3.1's)", rs = { rope_type = "llama3", factor = 8.0, low_freq_factor = 1.0,
    high_freq_factor = 4.0, original_max_position_embeddings = 64 },
    inv = function(base, c) return llama3_inv(D, base, c) end },
}

describe("rope_scaling as Hugging Face writes it: the frequencies of its formulas", function()
  for _, ex in ipairs(EXAMPLES) do
    for _, base in ipairs { 10000, 500000 } do
      it(("%s, rope_theta %d: rp.rope.angles"):format(ex.name, base), function()
        local c, s = rp.rope.angles(T, D, { rope_scaling = ex.rs, rope_theta = base })
        local err = angles_err(c, s, function(p) return ex.inv(base, ex.rs, p) end)
        assert.is_true(err < 6e-8, ("max error %.3g"):format(err)) -- float32 rounding: 2^-25
      end)
    end
  end

  it("the scalings change the angles (the comparison above can fail)", function()
    local c0 = rp.rope.angles(T, D)
    for _, ex in ipairs(EXAMPLES) do
      if ex.name ~= "default" then
        local c = rp.rope.angles(T, D, { rope_scaling = ex.rs })
        assert.is_true(rp.maxdiff(c, c0) > 1e-3, ex.name)
      end
    end
    -- and the reference tells the scalings apart
    local c, s = rp.rope.angles(T, D, { rope_scaling = EXAMPLES[5].rs })
    local other = yarn_inv(D, 10000, EXAMPLES[4].rs)
    assert.is_true(angles_err(c, s, function() return other end) > 1e-3)
  end)

  it("dynamic: a full forward at length n is NTK with factor s(n) = s n / L - (s - 1)", function()
    local rs = EXAMPLES[3].rs
    for _, n in ipairs { 24, 50, 96 } do
      local sn = math.max(1, rs.factor * n / rs.original_max_position_embeddings - (rs.factor - 1))
      local c, s = rp.rope.angles(n, D, sn > 1 and { scaling = "ntk", scaling_factor = sn } or nil)
      local err = angles_err(c, s, function() return dynamic_inv(D, 10000, rs, n) end)
      assert.is_true(err < 6e-8, ("n %d: max error %.3g"):format(n, err))
    end
  end)

  it("yarn's attention factor multiplies the scores by its square (cos and sin times it)",
    function()
    local g = rp.rng(7)
    local q, k, v = g:randn { 1, 12, 2, D }, g:randn { 1, 12, 2, D }, g:randn { 1, 12, 2, D }
    for _, i in ipairs { 4, 5, 6 } do
      local rs = EXAMPLES[i].rs
      local f, af = yarn_inv(D, 10000, rs)
      local out = rp.attention(q, k, v, { pe = "rope", rope_scaling = rs })
      local want = rp.attention(q, k, v, { pe = "rope", freq = f, scale = af * af / math.sqrt(D) })
      local err = rp.maxdiff(out, want)
      assert.is_true(err < 1e-5, ("%s: max error %.3g"):format(EXAMPLES[i].name, err))
      local plain = rp.attention(q, k, v, { pe = "rope", freq = f })
      if math.abs(af - 1) > 0.01 then assert.is_true(rp.maxdiff(out, plain) > 1e-4) end
    end
  end)

  it("maps onto roper's own keys: the same numbers bitwise", function()
    local pairs_ = {
      { { rope_scaling = { rope_type = "linear", factor = 4 } },
        { scaling = "pi", scaling_factor = 4 } },
      { { rope_scaling = EXAMPLES[3].rs },
        { scaling = "dynamic", scaling_factor = 2, orig_len = 24 } },
      { { rope_scaling = EXAMPLES[4].rs }, { scaling = "yarn", scaling_factor = 4, orig_len = 32,
        yarn_ramp = "dims" } },
      { { rope_scaling = EXAMPLES[5].rs }, { scaling = "yarn", scaling_factor = 8, orig_len = 40,
        yarn_alpha = 2, yarn_beta = 16, yarn_ramp = "dims_exact" } },
      { { rope_scaling = EXAMPLES[7].rs, rope_theta = 500000 },
        { scaling = "llama3", scaling_factor = 8,
        orig_len = 64, low_freq_factor = 1, high_freq_factor = 4, base = 500000 } },
    }
    for _, p in ipairs(pairs_) do
      local a, b = rp.rope.angles(T, D, p[1]), rp.rope.angles(T, D, p[2])
      assert.are.equal(0, rp.maxdiff(a, b))
    end
  end)
end)

describe("rope_scaling and rope_theta in models", function()
  local cfg = { vocab = 11, d_model = 32, heads = 2, layers = 2, d_ff = 32, seq_len = 40, seed = 3 }
  local function with(extra) return h.merged(cfg, extra) end

  it("rp.model maps them onto its config keys (m:config shows roper's names)", function()
    local m = rp.model(with { pe = "roper", rope_theta = 500000, rope_scaling = EXAMPLES[7].rs })
    local c = m:config()
    assert.are.same({ "llama3", 8, 64, 1, 4, 500000 }, { c.scaling, c.scaling_factor, c.orig_len,
      c.low_freq_factor, c.high_freq_factor, c.base })
    local m2 = rp.model(with { pe = "roper", base = 500000, scaling = "llama3", scaling_factor = 8,
      orig_len = 64 })
    local tok = rp.tensor { { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 } }
    assert.are.equal(0, rp.maxdiff(m:forward(tok), m2:forward(tok)))
    local y = rp.model(with { rope_scaling = EXAMPLES[6].rs }):config()
    assert.are.equal("dims", y.yarn_ramp)
    local want = (0.1 * math.log(40) + 1) / (0.1 * 0.707 * math.log(40) + 1)
    assert.is_true(math.abs(y.attention_factor - want) < 1e-12)
  end)

  it("reads a config.json's null as absent: rope_scaling null, a field null", function()
    local cjson = require "cjson"
    local plain = rp.model(with { pe = "roper" }):config()
    local c = cjson.decode('{"rope_scaling": null, "rope_theta": 10000.0}')
    local got = rp.model(with { pe = "roper", rope_theta = c.rope_theta,
      rope_scaling = c.rope_scaling }):config()
    assert.are.same(plain, got)
    local f = cjson.decode('{"rope_type": "yarn", "factor": 4, '
      .. '"original_max_position_embeddings": 8, "attention_factor": null}')
    assert.are.equal(cjson.null, f.attention_factor)
    local y = rp.model(with { rope_scaling = f }):config()
    f.attention_factor = nil
    assert.are.same(rp.model(with { rope_scaling = f }):config(), y)
    assert.are.equal("none", rp.experiment.config { rope_scaling = cjson.null }.scaling)
  end)

  it("m:derive takes Hugging Face's names over m's keys they stand for", function()
    local m = rp.model(with { rope_scaling = { rope_type = "yarn", factor = 4,
      original_max_position_embeddings = 8 } })
    local d = m:derive { seq_len = 64, rope_scaling = { rope_type = "yarn", factor = 8,
      original_max_position_embeddings = 8 } }
    assert.are.same({ "yarn", 8, 8 }, { d:config().scaling, d:config().scaling_factor,
      d:config().orig_len })
    -- the scaling's own keys of m gone with it: a llama3 table over a yarn model
    local l = m:derive { rope_scaling = EXAMPLES[7].rs }
    assert.are.same(rp.model(with { rope_scaling = EXAMPLES[7].rs }):config(), l:config())
    local r = rp.model(with { pe = "rope" })
    assert.are.equal(500000, r:derive { rope_theta = 500000 }:config().base)
    -- both names of one key in the overrides: still refused
    assert.has_error(function() r:derive { rope_theta = 5, base = 6 } end,
      "bad argument #1 to 'derive' (options 'rope_theta' and 'base' exclude each other "
      .. "(rope_theta is Hugging Face's name of base))")
  end)

  for _, sc in ipairs { "dynamic", "llama3" } do
    for _, pe in ipairs { "rope", "roper" } do
      it(("%s, pe %s: greedy decoding with the cache equals argmax of the forward, past "
        .. "orig_len"):format(sc, pe), function()
        local m = rp.model(with { pe = pe, scaling = sc, scaling_factor = 4, orig_len = 6 })
        local seq = { 3, 1 }
        local got = m:generate(seq, 30)
        for _ = 1, 30 do
          local lg = m:forward(rp.tensor { seq })
          local T_ = #seq
          local best, bi = -math.huge, nil
          for j = 1, 11 do
            local x = lg:get(1, T_, j)
            if x > best then best, bi = x, j - 1 end
          end
          seq[#seq + 1] = bi
        end
        assert.are.same({ table.unpack(seq, 3) }, got)
      end)
    end
  end

  it("dynamic: the logits of a prefix do not change when the sequence grows (a cache stays "
    .. "exact)", function()
    local m = rp.model(with { pe = "roper", scaling = "dynamic", scaling_factor = 4, orig_len = 6 })
    local long = rp.tensor { { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 } }
    local a = m:forward(long):narrow(2, 1, 12)
    local b = m:forward(long:narrow(2, 1, 12))
    assert.is_true(rp.maxdiff(a, b) < 1e-5)
    -- and the positions past orig_len are scaled (the model differs from plain rope there)
    local plain = rp.model(with { pe = "roper" })
    local x = long:narrow(2, 1, 6)
    assert.is_true(rp.maxdiff(m:forward(x), plain:forward(x)) < 1e-6)
    assert.is_true(rp.maxdiff(m:forward(long), plain:forward(long)) > 1e-4)
  end)

  it("checkpoints (format version 4) and safetensors keep dynamic, llama3, the ramp and the "
    .. "factor", function()
    local d = h.tmpdir()
    for i, extra in ipairs {
      { scaling = "dynamic", scaling_factor = 2, orig_len = 8 },
      { rope_scaling = EXAMPLES[7].rs },
      { rope_scaling = EXAMPLES[6].rs },
    } do
      local m = rp.model(with(extra))
      local tok = rp.tensor { { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 } }
      local path = d .. "/m" .. i .. ".ckpt"
      assert.is_true(m:save(path))
      local f = assert(io.open(path, "rb"))
      local head = f:read(8)
      f:close()
      assert.are.equal(4, head:byte(5))
      local back = assert(rp.load(path))
      assert.are.same(m:config(), back:config())
      assert.are.equal(0, rp.maxdiff(m:forward(tok), back:forward(tok)))
      local st = d .. "/m" .. i .. ".safetensors"
      assert.is_true(m:save_safetensors(st))
      local back2 = assert(rp.load(st))
      assert.are.same(m:config(), back2:config())
    end
  end)
end)

describe("rope_scaling and rope_theta: what is refused", function()
  h.refusals(it, function(o) return rp.rope.angles(8, 8, o) end,
    "bad argument #3 to 'angles' (", {
    { { rope_scaling = { rope_type = "longrope", factor = 2 } }, "option 'rope_scaling': rope_type "
      .. "\"longrope\" (LongRoPE's per-pair factors) is not supported; give the frequencies as "
      .. "option 'freq')" },
    { { rope_scaling = { rope_type = "warp", factor = 2 } },
      "option 'rope_scaling': rope_type \"warp\" "
      .. "is not default, linear, yarn, dynamic or llama3)" },
    { { rope_scaling = { rope_type = "linear", type = "yarn", factor = 2 } },
      "option 'rope_scaling': "
      .. "'rope_type' and 'type' differ)" },
    { { rope_scaling = { factor = 2 } }, "option 'rope_scaling': 'rope_type' (or 'type') must be a "
      .. "string, got nil)" },
    { { rope_scaling = { rope_type = "linear" } },
      "option 'rope_scaling': rope_type \"linear\" needs "
      .. "factor)" },
    { { rope_scaling = { rope_type = "linear", factor = 2, beta_fast = 8 } },
      "option 'rope_scaling': "
      .. "field 'beta_fast' does nothing for rope_type \"linear\")" },
    { { rope_scaling = { rope_type = "linear", factor = 2, finetuned = true } }, "option "
      .. "'rope_scaling': unknown field 'finetuned' (roper reads rope_type or type, factor" },
    { { rope_scaling = { rope_type = "llama3", factor = 8,
        original_max_position_embeddings = 64 } },
      "option 'rope_scaling': rope_type \"llama3\" needs low_freq_factor and high_freq_factor)" },
    { { rope_scaling = { rope_type = "llama3", factor = 8, low_freq_factor = 1,
        high_freq_factor = 4 } },
      "option 'rope_scaling': rope_type \"llama3\" needs original_max_position_embeddings)" },
    { { rope_scaling = { rope_type = "yarn", factor = 2, original_max_position_embeddings = 6.5 } },
      "option 'rope_scaling': 'original_max_position_embeddings' must be an integer in "
      .. "1..2147483647, got 6.5)" },
    { { rope_scaling = { rope_type = "yarn", factor = 2, original_max_position_embeddings = 8,
      truncate = 1 } }, "option 'rope_scaling': 'truncate' must be a boolean, got 1)" },
    { { rope_scaling = { rope_type = "linear", factor = "2" } }, "option 'rope_scaling': 'factor' "
      .. "must be a finite number, got string \"2\")" },
    -- a value out of its range or its rule: named by its field, not by the key it sets
    { { rope_scaling = { rope_type = "linear", factor = 0 } }, "option 'rope_scaling': 'factor' "
      .. "must be a finite number > 0, got 0)" },
    { { rope_scaling = { rope_type = "yarn", factor = 4, original_max_position_embeddings = 4,
      beta_fast = 1, beta_slow = 32 } }, "option 'rope_scaling': 'beta_slow' 32 must be below "
      .. "'beta_fast' 1 (YaRN's ramp runs from the first to the second))" },
    { { rope_scaling = { rope_type = "yarn", factor = 4, original_max_position_embeddings = 4,
      beta_slow = 40 } }, "option 'rope_scaling': 'beta_slow' 40 must be below 'beta_fast' 32 "
      .. "(YaRN's ramp runs from the first to the second))" },
    { { rope_scaling = { rope_type = "yarn", factor = 4, original_max_position_embeddings = 4,
      beta_fast = -1 } }, "option 'rope_scaling': 'beta_fast' must be a finite number >= 0, got "
      .. "-1)" },
    { { rope_scaling = { rope_type = "yarn", factor = 4, original_max_position_embeddings = 4,
      attention_factor = -1 } }, "option 'rope_scaling': 'attention_factor' must be a finite "
      .. "number >= 0, got -1)" },
    { { rope_scaling = { rope_type = "dynamic", factor = 2,
      original_max_position_embeddings = 2 ^ 53 } }, "option 'rope_scaling': "
      .. "'original_max_position_embeddings' must be an integer in 1..2147483647, got "
      .. "9.007199254741e+15)" },
    { { rope_scaling = { rope_type = "llama3", factor = 2, original_max_position_embeddings = 8,
      low_freq_factor = 4, high_freq_factor = 1 } }, "option 'rope_scaling': 'low_freq_factor' 4 "
      .. "must be below 'high_freq_factor' 1)" },
    { { rope_scaling = { rope_type = "yarn", factor = 4, original_max_position_embeddings = 4,
      attention_factor = 0 } }, "option 'rope_scaling': 'attention_factor' 0 multiplies every "
      .. "score by 0 in Hugging Face's reading; leave the field out for the scaling's own "
      .. "factor)" },
    -- mscale and mscale_all_dim's ratio: a finite number > 0 (a 0 would read as the scaling's own)
    { { rope_scaling = { rope_type = "yarn", factor = 4, original_max_position_embeddings = 4,
      mscale = -7.213475204444817, mscale_all_dim = 1 } }, "option 'rope_scaling': 'mscale' and "
      .. "'mscale_all_dim' give an attention factor of 0.0 (get_mscale(factor, mscale) / "
      .. "get_mscale(factor, mscale_all_dim)); it must be a finite number > 0)" },
    { { rope_scaling = { rope_type = "yarn", factor = 4, original_max_position_embeddings = 4,
      mscale = 1, mscale_all_dim = -7.213475204444817 } }, "an attention factor of inf (" },
    { { rope_scaling = { rope_type = "yarn", factor = 4, original_max_position_embeddings = 4,
      mscale = -100, mscale_all_dim = 1 } }, "an attention factor of -11.296865515019 (" },
    { { rope_scaling = { rope_type = "linear", factor = 1e400 } }, "option 'rope_scaling': "
      .. "'factor' must be a finite number, got inf)" },
    { { rope_scaling = { rope_type = "dynamic", factor = 2 } }, "option 'orig_len' (the original "
      .. "context length) is required with scaling \"dynamic\" (rope_scaling's "
      .. "original_max_position_embeddings))" },
    { { rope_scaling = { rope_type = "linear", factor = 2 }, scaling_factor = 2 }, "options "
      .. "'rope_scaling' and 'scaling_factor' exclude each other (give Hugging Face's table or "
      .. "roper's keys))" },
    { { rope_scaling = { rope_type = "linear", factor = 2 }, scaling = "pi" }, "options "
      .. "'rope_scaling' and 'scaling' exclude each other" },
    { { rope_scaling = "linear" }, "option 'rope_scaling' must be a table (Hugging Face's "
      .. "config.json rope_scaling), got string \"linear\")" },
    { { rope_theta = 10000, base = 10000 }, "options 'rope_theta' and 'base' exclude each other "
      .. "(rope_theta is Hugging Face's name of base))" },
    { { rope_theta = -1 }, "option 'rope_theta' must be > 0, got -1.0)" },
    { { scaling = "dynamic", scaling_factor = 2 },
      "option 'orig_len' (the original context length) "
      .. "is required with scaling \"dynamic\")" },
    { { scaling = "llama3", scaling_factor = 2, orig_len = 8, low_freq_factor = 4 },
      "low_freq_factor 4 must be below high_freq_factor 4" },
    { { scaling = "pi", scaling_factor = 2, low_freq_factor = 2 }, "low_freq_factor 2 does nothing "
      .. "with scaling pi: it applies to scaling llama3" },
    { { scaling = "pi", scaling_factor = 2, yarn_ramp = "dims" },
      "yarn_ramp dims does nothing with "
      .. "scaling pi: it applies to scaling yarn" },
    { { attention_factor = 1.2 }, "attention_factor 1.2 does nothing with scaling none: it applies "
      .. "to the scalings (pi, ntk, yarn, dynamic or llama3)" },
    { { scaling = "yarn", scaling_factor = 2, orig_len = 8, yarn_ramp = "steps" }, "option "
      .. "'yarn_ramp' must be one of" },
  })
  it("rp.model refuses them as rp.rope.angles does, naming rp.model", function()
    local ok, err = pcall(rp.model,
      { vocab = 4, rope_scaling = { rope_type = "longrope", factor = 2 } })
    assert.is_false(ok)
    assert.matches("rp.model", err, 1, true)
    assert.matches("LongRoPE's per-pair factors", err, 1, true)
    ok, err = pcall(rp.model, { vocab = 4, rope_theta = 1e4, base = 1e4 })
    assert.is_false(ok)
    assert.matches("options 'rope_theta' and 'base' exclude each other", err, 1, true)
  end)
end)

describe("rope_scaling and rope_theta in experiments and length evaluation", function()
  it("rp.experiment.config maps them onto roper's keys, and refuses them beside those", function()
    local c = rp.experiment.config { rope_theta = 500000, rope_scaling = EXAMPLES[7].rs }
    assert.are.same({ "llama3", 8, 64, 500000, 1, 4 }, { c.scaling, c.scaling_factor, c.orig_len,
      c.base, c.low_freq_factor, c.high_freq_factor })
    assert.is_nil(c.rope_scaling)
    local ok, err = pcall(rp.experiment.config,
      { rope_scaling = EXAMPLES[2].rs, scaling_factor = 2 })
    assert.is_false(ok)
    assert.matches("bad argument #1 to 'rp.experiment.config' (options 'rope_scaling' and "
      .. "'scaling_factor' exclude each other", err, 1, true)
  end)

  it("rp.eval.lengths evaluates dynamic and llama3 (orig_len = the trained length)", function()
    local task = rp.tasks.substring_prefix { seq_len = 32 }
    local m = rp.model { vocab = task:vocab_size(), d_model = 16, heads = 2, layers = 1, d_ff = 16,
      seq_len = 32, pe = "roper" }
    local function losses(sc)
      local out = {}
      for i, e in ipairs(rp.eval.lengths(m, task, { lengths = { 32, 128 }, scaling = sc,
        batches = 2, batch_size = 4, seed = 7 })) do out[i] = e.loss end
      return out
    end
    local none, dyn, l3 = losses("none"), losses("dynamic"), losses("llama3")
    -- at the trained length both are the model itself; at 4x they change the angles
    assert.are.equal(none[1], dyn[1])
    assert.are.equal(none[1], l3[1])
    assert.are_not.equal(none[2], dyn[2])
    assert.are_not.equal(none[2], l3[2])
    assert.are_not.equal(dyn[2], l3[2])
    -- dynamic at 128 is the model derived with orig_len 32 and factor 1 (its base grows to NTK
    -- with 128 / 32 at the last position by itself)
    local d = m:derive { seq_len = 128, max_batch = 4, scaling = "dynamic", scaling_factor = 1,
      orig_len = 32 }
    local t128 = rp.tasks.substring_prefix { seq_len = 128 }
    assert.are.equal(dyn[2], rp.eval.loss(d, t128, { batches = 2, batch_size = 4, seed = 7 }))
  end)
end)

describe("rope_scaling's mapping as rp.scalings() exports it (the companion's table)", function()
  -- Hugging Face's fields of each rope_type (transformers' modeling_rope_utils validation) and
  -- the roper key each stands for (docs/interop.md), written out here as the reference
  local FIELDS = {
    linear = { "factor" },
    dynamic = { "factor", "original_max_position_embeddings" },
    yarn = { "factor", "original_max_position_embeddings", "beta_fast", "beta_slow",
      "attention_factor", "mscale", "mscale_all_dim", "truncate" },
    llama3 = { "factor", "original_max_position_embeddings", "low_freq_factor",
      "high_freq_factor" },
    default = {},
  }
  local KEYS = { factor = "scaling_factor", original_max_position_embeddings = "orig_len",
    beta_fast = "yarn_beta", beta_slow = "yarn_alpha", low_freq_factor = "low_freq_factor",
    high_freq_factor = "high_freq_factor", attention_factor = "attention_factor",
    truncate = "yarn_ramp" }

  it("names each rope_type's fields and the key each sets", function()
    local sc = rp.scalings()
    for _, row in ipairs(sc) do
      if row.hf then assert.are.same(FIELDS[row.hf], row.hf_fields, row.hf) end
    end
    local names = {}
    for i, f in ipairs(sc.hf_map) do
      names[i] = f.name
      assert.are.equal(KEYS[f.name], f.key, f.name)
      -- the largest integer: orig_len's own bound (the one key of integers)
      assert.are.equal(f.key == "orig_len" and 2147483647 or nil, f.max, f.name)
    end
    assert.are.same({ "factor", "original_max_position_embeddings", "beta_fast", "beta_slow",
      "low_freq_factor", "high_freq_factor", "attention_factor", "mscale", "mscale_all_dim",
      "truncate" }, names)
    assert.are.same({ { "factor" }, { "original_max_position_embeddings" },
      { "low_freq_factor", "high_freq_factor" } }, sc.llama3.hf_needs)
    assert.are.same({ { "factor" } }, sc.yarn.hf_needs)
  end)

  it("each field given sets its key to its value (truncate: the ramp)", function()
    local base = { yarn = { rope_type = "yarn", factor = 3 },
      llama3 = { rope_type = "llama3", factor = 3, original_max_position_embeddings = 50,
        low_freq_factor = 1.5, high_freq_factor = 3.5 } }
    local values = { factor = 3, original_max_position_embeddings = 50, beta_fast = 24,
      beta_slow = 2, low_freq_factor = 1.5, high_freq_factor = 3.5, attention_factor = 1.25 }
    for _, f in ipairs(rp.scalings().hf_map) do
      local ty = (f.name == "low_freq_factor" or f.name == "high_freq_factor") and "llama3"
        or "yarn"
      local rs = {}
      for k, v in pairs(base[ty]) do rs[k] = v end
      if f.on then
        rs[f.name] = false
        assert.are.equal("dims_exact", rp.experiment.config({ rope_scaling = rs })[f.key])
        rs[f.name] = nil
        assert.are.equal("dims", rp.experiment.config({ rope_scaling = rs })[f.key])
      elseif f.key then
        rs[f.name] = values[f.name]
        assert.are.equal(values[f.name], rp.experiment.config({ rope_scaling = rs })[f.key],
          f.name)
      end
    end
  end)
end)

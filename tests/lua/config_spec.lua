-- The model config's one validation path (issue 29) and the keys that do nothing (issue 29,
-- point 10), through the Lua API: rp.model, rp.model_memory, m:derive, rp.attention,
-- rp.linear_attention, rp.rope.rotate and rp.rope.angles refuse a key whose value does nothing for
-- the mode with the same message, and accept it at its default; m:config() gives the keys that do
-- something and rebuilds the model, also for files of older roper that hold values that do
-- nothing; a forged checkpoint with a nan the mode does not use is refused by rp.load; an
-- experiment config serves every pe (rp.experiment passes rp.model the keys that apply).

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"
-- the modes the messages list, from the mode table (rp.pe_modes)
local ROTARY = h.pe_list("rotary")
local LINEAR_ROTARY = h.pe_list(function(m) return m.rotary and m.linear end)
local CLIP, BUCKETS = h.pe_list("rel_clip"), h.pe_list("rel_buckets")
local rp = require "roper"

local FIXTURES = "tests/fixtures/config/"

local function cfg(o)
  local c = { vocab = 5, d_model = 8, heads = 1, layers = 1, d_ff = 4, seq_len = 6, max_batch = 1 }
  for k, v in pairs(o or {}) do c[k] = v end
  return c
end

local function raises(msg, fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "no error, want: " .. msg)
  assert.truthy(err:find(msg, 1, true), ("\n got: %s\nwant: %s"):format(err, msg))
end

describe("keys that do nothing for the mode", function()
  -- { config, the reason after "bad argument #1 to 'model' (" }
  local cases = {
    { { pe = "shaw", base = 500 }, "base 500 does nothing for pe shaw: it applies to the rotary "
      .. "modes (" .. ROTARY .. ")" },
    { { pe = "alibi", pairing = "interleaved" }, "pairing interleaved does nothing for pe alibi: "
      .. "it applies to the rotary modes (" .. ROTARY .. ")" },
    { { pe = "alibi", rel_clip = 8 }, "rel_clip 8 does nothing for pe alibi: it applies to pe "
      .. CLIP },
    { { pe = "t5", rel_clip = 8 }, "rel_clip 8 does nothing for pe t5: it applies to pe " .. CLIP },
    { { pe = "rope", rel_max_distance = 64 }, "rel_max_distance 64 does nothing for pe rope: it "
      .. "applies to pe " .. BUCKETS },
    { { pe = "rope", scaling_factor = 2 }, "scaling_factor 2 does nothing with scaling none: it "
      .. "applies to the scalings (pi, ntk, yarn, dynamic or llama3)" },
    { { pe = "rope", scaling = "pi", scaling_factor = 2, orig_len = 6 }, "orig_len 6 does "
      .. "nothing with scaling pi: it applies to scaling yarn, dynamic or llama3" },
    { { pe = "rope", xpos_scale_base = 64 }, "xpos_scale_base 64 does nothing with xpos 0: it "
      .. "applies when xpos > 0 (xPos on)" },
    { { pe = "rope", fraction_v = 0.5 }, "fraction_v 0.5 does nothing for pe rope rotating qk: it "
      .. "applies when v or o is rotated" },
    { { pe = "roper", rotate = "vo", fraction_k = 0.5 }, "fraction_k 0.5 does nothing for pe "
      .. "roper rotating vo: it applies when k is rotated" },
    { { pe = "learned", fraction_qk = 0.5 }, "fraction_qk 0.5 does nothing for pe learned: it "
      .. "applies to the rotary modes (" .. ROTARY .. ")" },
    { { pe = "rope", linear_rope = "before" }, "linear_rope before does nothing with softmax "
      .. "attention: it applies to linear attention with pe " .. LINEAR_ROTARY },
    { { pe = "none", attention = "linear", linear_rope = "before" }, "linear_rope before does "
      .. "nothing for pe none: it applies to linear attention with pe " .. LINEAR_ROTARY },
    { { pe = "none", learn_freq = true }, "learn_freq true does nothing for pe none: it applies "
      .. "to the rotary modes (" .. ROTARY .. ")" },
    { { pe = "rope", attention = "linear", learn_freq = true }, "learn_freq true does nothing "
      .. "with linear attention: it applies to softmax attention" },
  }
  for _, c in ipairs(cases) do
    it("rp.model and rp.model_memory: " .. c[2]:match("^%S+ %S+ does nothing [^:]*"), function()
      raises("bad argument #1 to 'model' (" .. c[2] .. ")",
        function() return rp.model(cfg(c[1])) end)
      raises("bad argument #1 to 'model_memory' (" .. c[2] .. ")",
        function() return rp.model_memory(cfg(c[1])) end)
    end)
  end

  it("accepts a key at its default: the same model as without it", function()
    for _, o in ipairs {
      { pe = "rope", rel_clip = 16, rel_buckets = 32, scaling_factor = 1, xpos_scale_base = 512,
        linear_rope = "after", fraction_o = 1 },
      { pe = "shaw", base = 10000, pairing = "half", fraction_qk = 1.0, fraction_v = 1 },
      { pe = "none", attention = "linear", linear_rope = "after", yarn_beta = 32 },
      { pe = "shaw", learn_freq = false },
    } do
      local bare = { pe = o.pe, attention = o.attention }
      assert.same(rp.model(cfg(bare)):config(), rp.model(cfg(o)):config())
    end
  end)

  local q = rp.randn { 1, 4, 2, 8 }
  h.refusals(it, function(o) return rp.attention(q, q, q, o) end,
    "bad argument #4 to 'attention' (", {
    { { pe = "alibi", rel_clip = 8 }, "rel_clip 8 does nothing for pe alibi: it applies to pe "
      .. CLIP },
    { { pe = "none", base = 500 }, "base 500 does nothing for pe none: it applies to the rotary "
      .. "modes (" .. ROTARY .. ")" },
    { { pe = "rope", fraction_o = 0.5 }, "fraction_o 0.5 does nothing for pe rope rotating qk: it "
      .. "applies when o is rotated" },
    { { pe = "rope", scaling_factor = 2 }, "scaling_factor 2 does nothing with scaling none: it "
      .. "applies to the scalings (pi, ntk, yarn, dynamic or llama3)" },
    { { pe = "roper", scaling = "ntk", scaling_factor = 2, yarn_alpha = 2 }, "yarn_alpha 2 does "
      .. "nothing with scaling ntk: it applies to scaling yarn" },
  })
  h.refusals(it, function(o) return rp.linear_attention(q, q, q, o) end,
    "bad argument #4 to 'linear_attention' (", {
    { { pe = "none", linear_rope = "before" }, "linear_rope before does nothing for pe none: it "
      .. "applies to linear attention with pe " .. LINEAR_ROTARY },
    { { pe = "rope", fraction_v = 0.5 }, "fraction_v 0.5 does nothing for pe rope rotating qk: it "
      .. "applies when v or o is rotated" },
    { { pe = "learned", pairing = "interleaved" }, "pairing interleaved does nothing for pe "
      .. "learned: it applies to the rotary modes (" .. ROTARY .. ")" },
  })
  h.refusals(it, function(o) return rp.rope.rotate(q, o) end, "bad argument #2 to 'rotate' (", {
    { { scaling_factor = 2 }, "scaling_factor 2 does nothing with scaling none: it applies to the "
      .. "scalings (pi, ntk, yarn, dynamic or llama3)" },
    { { scaling = "pi", scaling_factor = 2, orig_len = 6 }, "orig_len 6 does nothing with "
      .. "scaling pi: it applies to scaling yarn, dynamic or llama3" },
  })
  h.refusals(it, function(o) return rp.rope.angles(4, 8, o) end, "bad argument #3 to 'angles' (", {
    { { xpos_scale_base = 64 }, "xpos_scale_base 64 does nothing with xpos 0: it applies when xpos "
      .. "> 0 (xPos on)" },
    { { yarn_beta = 16 }, "yarn_beta 16 does nothing with scaling none: it applies to scaling "
      .. "yarn" },
  })

  it("rp.attention and rp.rope take the keys that do something, and defaults", function()
    assert.is_true(pcall(rp.attention, q, q, q, { pe = "shaw", rel_clip = 2, base = 10000,
      rel_k = rp.zeros { 5, 8 }, rel_v = rp.zeros { 5, 8 } }))
    assert.is_true(pcall(rp.attention, q, q, q, { pe = "rope", rotate = "qo", fraction_o = 0.5,
      fraction_v = 1, scaling = "yarn", scaling_factor = 2, orig_len = 4, yarn_beta = 16 }))
    assert.is_true(pcall(rp.rope.rotate, q, { xpos = 0.4, xpos_scale_base = 64 }))
    assert.is_true(pcall(rp.linear_attention, q, q, q, { pe = "roper", linear_rope = "before",
      fraction_v = 0.5 }))
  end)

  it("m:derive drops m's keys that do nothing for the new mode, and refuses such overrides",
    function()
      local m = rp.model(cfg { pe = "roper", fraction_v = 0.5, base = 500 })
      local d = m:derive { pe = "rope" }
      assert.is_nil(d:config().fraction_v)
      assert.equal(500, d:config().base)
      raises("bad argument #1 to 'derive' (fraction_v 0.25 does nothing for pe rope rotating qk: "
        .. "it applies when v or o is rotated)",
        function() return m:derive { pe = "rope", fraction_v = 0.25 } end)
      local y = rp.model(cfg { pe = "rope", scaling = "yarn", scaling_factor = 2, yarn_beta = 8 })
      local p = y:derive { scaling = "pi" }
      assert.same({ "pi", 2 }, { p:config().scaling, p:config().scaling_factor })
      assert.is_nil(p:config().yarn_beta)
    end)
end)

describe("m:config()", function()
  local modes = h.pe_names()
  local reads_clip = {}
  for _, pe in ipairs(h.pe_names("rel_clip")) do reads_clip[pe] = true end

  it("gives the keys that do something, and rebuilds the same model (every pe, both attentions)",
    function()
      for _, pe in ipairs(modes) do
        for _, attention in ipairs { "softmax", "linear" } do
          local ok, m = pcall(rp.model, cfg { pe = pe, attention = attention, seed = 3 })
          if ok then
            local c = m:config()
            assert.same(c, rp.model(c):config(), pe)
            local rotary = rp.pe_modes()[pe].rotary
            assert.equal(rotary, c.base ~= nil, pe .. " base")
            assert.equal(rotary, c.rotate ~= nil, pe .. " rotate")
            assert.equal(reads_clip[pe] == true, c.rel_clip ~= nil, pe .. " rel_clip")
            assert.equal(attention == "linear" and rotary, c.linear_rope ~= nil,
              pe .. " linear_rope")
            assert.equal(0, rp.maxdiff(m:params()[1].tensor, rp.model(c):params()[1].tensor))
          else
            assert.equal("linear", attention, m)
          end
        end
      end
    end)

  it("of a file of an older roper that holds values that do nothing: without them", function()
    -- each file and the keys it holds values of that do nothing
    for f, keys in pairs {
      ["v1_learned_unused_values.rpck"] = { "base", "pairing", "fraction_qk", "fraction_v" },
      ["v1_learned_unused_values.safetensors"] = { "base", "pairing", "fraction_qk" },
      ["v1_sinusoidal.rpck"] = { "linear_rope" },
      ["v2_rope_unused_rel_clip.rpck"] = { "rel_clip" },
      ["v3_unused_factor.rpck"] = { "scaling_factor" },
    } do
      local m = assert(rp.load(FIXTURES .. f))
      local c = m:config()
      for _, k in ipairs(keys) do assert.is_nil(c[k], f .. " " .. k) end
      assert.same(c, rp.model(c):config(), f)
    end
  end)
end)

describe("a config from a file passes rp.model's checks", function()
  -- FNV-1a 64 (docs/checkpoint.md), with Lua's wrapping integers
  local function fnv(s)
    local x = -3750763034362895579 -- 0xcbf29ce484222325
    for i = 1, #s do x = (x ~ s:byte(i)) * 1099511628211 end
    return x
  end

  it("rp.load refuses a version 2 checkpoint of pe shaw with fraction_qk nan (issue 29)", function()
    local d = h.tmpdir()
    local path = d .. "/shaw.ckpt"
    assert.is_true(rp.model(cfg { pe = "shaw" }):save(path))
    local b = h.read(path)
    assert.equal(2, string.unpack("<I4", b, 5))
    -- fraction_qk: the version 1 block's second double, at byte 96 (0-based)
    b = b:sub(1, 96) .. string.pack("<i8", 0x7FF8000000000000) .. b:sub(105, -9) -- a quiet nan
    h.write(path, b .. string.pack("<i8", fnv(b)))
    assert.same({ nil, path .. ": bad model config: fraction_qk nan must be in (0, 1]" },
      { rp.load(path) })
    h.remove_tree(d)
  end)
end)

describe("rp.experiment and the model keys", function()
  it("checks every model key's range, and passes rp.model the keys that do something", function()
    raises("option 'fraction_v' must be in (0, 1], got 0", rp.experiment.config, { fraction_v = 0 })
    raises("option 'rel_clip' must be in 1..65536, got 0", rp.experiment.config, { rel_clip = 0 })
    raises("option 'scaling_factor' must be > 0, got 0", rp.experiment.config,
      { scaling_factor = 0 })
    -- one config for a comparison of rope, shaw and t5: each run takes what applies to it
    for _, pe in ipairs { "rope", "shaw", "t5", "roper" } do
      local c, mem = rp.experiment.check { pe = pe, rel_clip = 4, rel_buckets = 8, fraction_v = 0.5,
        base = 500, d_model = 16, seq_len = 16, layers = 1, steps = 1 }
      assert.equal(pe, c.pe)
      assert.is_true(mem.params > 0)
    end
  end)
end)

describe("tie_embeddings, a bool key (issue 63)", function()
  it("rp.model takes a boolean for every mode: no head.weight, the logits read embed.weight",
    function()
      for _, pe in ipairs { "none", "rope", "roper", "learned", "alibi" } do
        local m = rp.model(cfg { pe = pe, tie_embeddings = true, seed = 3, norm = "post" })
        assert.is_true(m:config().tie_embeddings, pe)
        assert.is_true(rp.model(m:config()):config().tie_embeddings, pe)
        local p = m:params()
        assert.is_nil(p["head.weight"], pe)
        local untied = rp.model(cfg { pe = pe, seed = 3, norm = "post" })
        assert.equal(untied:num_params() - 5 * 8, m:num_params(), pe)
        assert.is_nil(rp.model(cfg { pe = pe, tie_embeddings = false }):config().tie_embeddings)
        -- the logits (post-norm: no LN_f): the last layer's output times embed.weight^T + bias
        local tok = rp.tensor { { 1, 4, 0, 2 } }
        local logits = m:forward(tok):view { 4, 5 }
        local last = m:activations(tok)[1]:view { 4, 8 }
        local want = last:matmul(p["embed.weight"]:t()) + p["head.bias"]
        assert.is_true(rp.maxdiff(logits, want) < 1e-5, pe)
      end
    end)

  h.refusals(it, function(o) return rp.model(cfg(o)) end, "bad argument #1 to 'model' (", {
    { { tie_embeddings = 1 }, "option 'tie_embeddings' must be a boolean, got 1)" },
    { { tie_embeddings = "yes" }, "option 'tie_embeddings' must be a boolean, got string "
      .. "\"yes\")" },
  })

  it("is kept in checkpoints (version 6) and safetensors files (JSON true)", function()
    local d = h.tmpdir()
    local m = rp.model(cfg { tie_embeddings = true })
    assert.is_true(m:save(d .. "/m.ckpt"))
    assert.equal(6, string.unpack("<I4", h.read(d .. "/m.ckpt"), 5))
    local back = assert(rp.load(d .. "/m.ckpt"))
    assert.is_true(back:config().tie_embeddings)
    assert.equal(0, rp.maxdiff(back:forward(rp.tensor { { 1, 2 } }), m:forward(rp.tensor { { 1, 2 } })))
    assert.is_true(m:save_safetensors(d .. "/m.safetensors"))
    assert.truthy(h.read(d .. "/m.safetensors"):find('\\"tie_embeddings\\":true}', 1, true))
    assert.falsy(h.read(d .. "/m.safetensors"):find("head.weight", 1, true))
    assert.is_true(assert(rp.load(d .. "/m.safetensors")):config().tie_embeddings)
    local plain = rp.model(cfg())
    assert.same({ nil, d .. "/m.safetensors: the file's roper.config has tie_embeddings true, the "
      .. "model false" }, { plain:load_safetensors(d .. "/m.safetensors") })
    h.remove_tree(d)
  end)

  it("is an rp.experiment key of kind bool and a flag of the scripts", function()
    local key
    for _, k in ipairs(rp.experiment.keys()) do if k.name == "tie_embeddings" then key = k end end
    assert.same({ name = "tie_embeddings", default = false, kind = "bool",
      help = "the output layer's weight is the token embedding (tied, as GPT-2; its bias stays "
        .. "its own)" }, key)
    assert.is_true(rp.experiment.config { tie_embeddings = "true" }.tie_embeddings)
    raises("option 'tie_embeddings' must be true or false, got 1", rp.experiment.config,
      { tie_embeddings = 1 })
  end)
end)

describe("learn_freq, a bool key", function()
  it("rp.model takes a boolean for a rotary pe with softmax attention; m:config() gives true",
    function()
      for _, pe in ipairs { "rope", "roper" } do
        local m = rp.model(cfg { pe = pe, learn_freq = true })
        assert.is_true(m:config().learn_freq, pe)
        assert.is_true(rp.model(m:config()):config().learn_freq, pe)
        -- false is the default: not given back (an unset key)
        assert.is_nil(rp.model(cfg { pe = pe, learn_freq = false }):config().learn_freq, pe)
        assert.is_nil(rp.model(cfg { pe = pe }):config().learn_freq, pe)
      end
    end)

  h.refusals(it, function(o) return rp.model(cfg(o)) end, "bad argument #1 to 'model' (", {
    { { learn_freq = 1 }, "option 'learn_freq' must be a boolean, got 1)" },
    { { learn_freq = "true" }, "option 'learn_freq' must be a boolean, got string \"true\")" },
    { { learn_freq = {} }, "option 'learn_freq' must be a boolean, got table)" },
  })

  it("is not an option of rp.rope.* and rp.attention (no model, no parameter)", function()
    local q = rp.randn { 1, 4, 2, 8 }
    raises("bad argument #3 to 'angles' (unknown option 'learn_freq'",
      function() return rp.rope.angles(4, 8, { learn_freq = true }) end)
    raises("bad argument #4 to 'attention' (unknown option 'learn_freq'",
      function() return rp.attention(q, q, q, { learn_freq = true }) end)
  end)

  it("is kept in checkpoints (version 5) and safetensors files (JSON true)", function()
    local d = h.tmpdir()
    local m = rp.model(cfg { learn_freq = true })
    assert.is_true(m:save(d .. "/m.ckpt"))
    assert.equal(5, string.unpack("<I4", h.read(d .. "/m.ckpt"), 5))
    assert.is_true(assert(rp.load(d .. "/m.ckpt")):config().learn_freq)
    assert.is_true(m:save_safetensors(d .. "/m.safetensors"))
    assert.truthy(h.read(d .. "/m.safetensors"):find('\\"learn_freq\\":true}', 1, true))
    assert.is_true(assert(rp.load(d .. "/m.safetensors")):config().learn_freq)
    -- a model without it does not take that file's weights, nor the other way round
    local plain = rp.model(cfg())
    assert.same({ nil, d .. "/m.safetensors: the file's roper.config has learn_freq true, the "
      .. "model false" }, { plain:load_safetensors(d .. "/m.safetensors") })
    -- a model without it: no key in the file, version 1 as before
    assert.is_true(plain:save(d .. "/p.ckpt"))
    assert.equal(1, string.unpack("<I4", h.read(d .. "/p.ckpt"), 5))
    assert.is_true(plain:save_safetensors(d .. "/p.safetensors"))
    assert.falsy(h.read(d .. "/p.safetensors"):find("learn_freq", 1, true))
    h.remove_tree(d)
  end)

  it("is an rp.experiment key of kind bool: true, false or their text", function()
    local key
    for _, k in ipairs(rp.experiment.keys()) do if k.name == "learn_freq" then key = k end end
    assert.same({ name = "learn_freq", default = false, kind = "bool",
      help = "rotary pe: train the frequencies (theta_i, or axes mixed's matrix) as parameters" },
      key)
    assert.is_false(rp.experiment.config().learn_freq)
    assert.is_true(rp.experiment.config { learn_freq = "true" }.learn_freq)
    assert.is_false(rp.experiment.config { learn_freq = "false" }.learn_freq)
    assert.is_true(rp.experiment.config { learn_freq = true }.learn_freq)
    raises("option 'learn_freq' must be true or false, got 1", rp.experiment.config,
      { learn_freq = 1 })
    raises("option 'learn_freq' must be true or false, got yes", rp.experiment.config,
      { learn_freq = "yes" })
    local c, mem = rp.experiment.check { learn_freq = true, d_model = 16, seq_len = 16,
      layers = 1, steps = 1 }
    assert.is_true(c.learn_freq)
    assert.is_true(mem.params > 0)
  end)
end)

describe("rp.model_keys", function()
  local keys = rp.model_keys()

  it("lists every key of m:config() and rp.experiment's model keys, in the schema's order",
    function()
      local names, seen = {}, {}
      for i, k in ipairs(keys) do names[i], seen[k.name] = k.name, true end
      assert.same({ "vocab", "d_model", "heads" }, { names[1], names[2], names[3] })
      assert.equal("tie_embeddings", names[#names])
      for name in pairs(rp.model(cfg { pe = "roper", scaling = "yarn", scaling_factor = 2,
                                       xpos = 0.5 }):config()) do
        assert.is_true(seen[name], name)
      end
      assert.is_not.equal(keys, rp.model_keys()) -- a new table at each call
    end)

  -- each int and number row at the ends of its range and one step past them (an int by 1, a
  -- number by 1e-9 of its size), on a config where the row does something: past an end
  -- rp.model_memory refuses it naming the range, at an end it does not refuse the range (another
  -- rule may refuse the value: d_model 1 and heads 2, say)
  it("gives each key's range as rp.model takes it, and each enum's names", function()
    local where = { placement = { pe = "roper" }, freq = { pe = "rope" },
                    scaled = { scaling = "yarn", scaling_factor = 2 }, xpos = { xpos = 0.5 },
                    linear_rotary = { attention = "linear", pe = "rope" },
                    relative = { pe = "t5" } }
    local function refusal(k, v)
      local c = cfg(where[k.use])
      if k.name == "rel_clip" then c.pe = "shaw" end
      if k.use == "scalings" then c.scaling = k.scalings[#k.scalings] end
      c[k.name] = v
      local ok, err = pcall(rp.model_memory, c)
      return not ok and err or nil
    end
    -- refused with the row's range message (its {value}: an int as %d, a number as %g)
    local function range_refused(k, v)
      local err = refusal(k, v)
      local want = k.range:gsub("{value}", (k.type == "int" and "%d" or "%g"):format(v))
      return err ~= nil and err:find("(" .. want .. ")", 1, true) ~= nil
    end
    local n = 0
    for _, k in ipairs(keys) do
      if k.type == "int" or k.type == "number" then
        local step = k.type == "int" and 1 or math.max(math.abs(k.lo), 1) * 1e-9
        local lo = (k.lo_open or (k.unset0 and k.lo == 0)) and k.lo + step or k.lo
        -- rel_max_distance's low end is rel_buckets / 2 + 1, a rule beside its range
        if k.name ~= "rel_max_distance" then
          assert.is_false(range_refused(k, lo), k.name .. " at " .. lo)
        end
        assert.is_true(range_refused(k, k.lo_open and k.lo or k.lo - step), k.name .. " below")
        if k.hi ~= math.huge then
          assert.is_false(range_refused(k, k.hi_open and k.hi - step or k.hi), k.name)
          assert.is_true(range_refused(k, k.hi_open and k.hi or k.hi + step), k.name .. " above")
        end
        n = n + 1
      elseif k.type == "enum" then
        local found = false
        for _, v in ipairs(k.names) do
          found = found or v == k.default
          assert.is_false((refusal(k, v) or ""):find("must be one of", 1, true) ~= nil, v)
        end
        assert.is_true(found, k.name)
        assert.truthy(refusal(k, "no such value"):find("must be one of", 1, true), k.name)
        n = n + 1
      end
    end
    assert.is_true(n >= 30, n)
  end)

  it("says what a safetensors roper.config holds of each key (json), as m:save_safetensors "
    .. "writes and rp.load reads it", function()
    local d = h.tmpdir()
    -- the roper.config of m's file, and a function that writes that file with another text
    local function file_of(m)
      local path = d .. "/m.safetensors"
      assert.is_true(m:save_safetensors(path))
      local header, data = h.st_parts(path)
      local text = header.__metadata__["roper.config"]
      local held = {}
      for k in text:gmatch('"([%w_]+)":') do held[k] = true end
      return held, function(t)
        header.__metadata__["roper.config"] = t
        h.st_write(path, header, data)
        return path
      end, text
    end
    local held, rewrite, text = file_of(rp.model(cfg { pe = "rope" }))
    local kinds, relative = {}, {}
    for _, m in ipairs(rp.pe_modes()) do
      for _, k in ipairs(m.rel_keys) do relative[k] = relative[k] or m.name end
    end
    for _, k in ipairs(keys) do
      kinds[k.json] = (kinds[k.json] or 0) + 1
      -- a default model's file holds the "required" and "always" keys and no other
      assert.equal(k.json == "required" or k.json == "always", held[k.name] == true, k.name)
      if k.json == "required" or k.json == "always" then
        -- left out: a "required" key is refused by name, an "always" one reads as its default
        local cut = text:gsub('"' .. k.name .. '":[^,}]+,?', ""):gsub(",}", "}")
        local m, err = rp.load(rewrite(cut))
        if k.json == "required" then
          assert.is_nil(m, k.name)
          assert.equal(d .. "/m.safetensors: bad roper.config (no key '" .. k.name .. "')", err)
        else
          assert.is_not_nil(m, err)
          local c = cfg { pe = "rope" }
          c[k.name] = nil
          assert.same(rp.model(c):config(), m:config())
        end
      elseif k.json == "applies" then
        -- written at its default where it does something
        local o = relative[k.name] and { pe = relative[k.name] }
          or k.use == "scaled" and { pe = "rope", scaling = "pi" }
        assert.is_table(o, k.name .. ": a config where it applies")
        if o.pe == "alibi" then o.d_model, o.heads = 8, 2 end
        local w = file_of(rp.model(cfg(o)))
        assert.is_true(w[k.name], k.name)
      else
        assert.equal("set", k.json, k.name)
      end
    end
    assert.is_true(kinds.required >= 10 and kinds.always >= 3 and kinds.applies >= 4
      and kinds.set >= 10)
    -- a "set" key is written once it differs from its default
    assert.is_true(file_of(rp.model(cfg { pe = "rope", fraction_q = 0.5 })).fraction_q)
    assert.is_true(file_of(rp.model(cfg { pe = "rope", xpos = 0.5 })).xpos)
    h.remove_tree(d)
  end)

  -- rp.load's words for a roper.config whose value is of another type, a literal out of range,
  -- not an object, with an unknown key, word for word (core/io/safetensors_config.c's and
  -- json.c's messages, behind the file's path and "bad roper.config")
  it("gives rp.load's refusals of a bad roper.config, word for word", function()
    local d = h.tmpdir()
    local path = d .. "/m.safetensors"
    assert.is_true(rp.model(cfg { pe = "rope" }):save_safetensors(path))
    local header, data = h.st_parts(path)
    local text = header.__metadata__["roper.config"]
    local function refused(t, want)
      header.__metadata__["roper.config"] = t
      h.st_write(path, header, data)
      local m, err = rp.load(path)
      assert.is_nil(m, t)
      assert.equal(path .. ": bad roper.config (" .. want .. ")", err)
    end
    -- the file's text with key's value v (key left out when v is nil)
    local function with(key, v)
      local t = text:gsub('"' .. key .. '":[^,}]+,?', ""):gsub(",?}$", "")
      return t .. (v and ',"' .. key .. '":' .. v or "") .. "}"
    end
    -- what a row of each type must be, as the reader says it
    local must = { int = "be an integer, got ", seed = "be an integer, got ",
                   number = "be a number, got ", bool = "be true or false, got ",
                   rotate = "be a string of distinct letters of qkvo, got " }
    local function stored(k, got)
      local m = k.type == "enum" and ("be one of " .. table.concat(k.names, ", ") .. "; got ")
        or must[k.type]
      return "'" .. k.name .. "' must " .. m .. got
    end
    for _, k in ipairs(keys) do
      -- null for every row; a string that names nothing for a rotate or an enum row
      refused(with(k.name, "null"), stored(k, "null"))
      if k.type == "rotate" or k.type == "enum" then
        refused(with(k.name, '"zz"'), stored(k, '"zz"'))
      end
    end
    refused(with("vocab", "1.5"), "'vocab': 1.5 is not an integer")
    refused(with("vocab", ("9"):rep(64)),
      "'vocab': number " .. ("9"):rep(40) .. "... is out of range")
    refused(with("vocab", ("9"):rep(63)), "'vocab': " .. ("9"):rep(63) .. " is out of range")
    refused(with("seed", "1e999"), "'seed': 1e999 is not an integer")
    refused(with("dropout", "1e999"), "'dropout': 1e999 is out of range")
    refused(with("dropout", ("1"):rep(512)),
      "'dropout': number " .. ("1"):rep(40) .. "... is out of range")
    refused("[1]", "not a JSON object (an array)")
    refused(with("zz", "1"), "unknown key 'zz'")
    refused(with("vocab"), "no key 'vocab'")
    h.remove_tree(d)
  end)

  it("says when each key does something: a value other than its default is refused elsewhere",
    function()
      -- a non-default value of each row, on a config where the row's use says it does nothing
      local value = function(k)
        if k.type == "enum" then return k.names[2] end
        if k.type == "bool" then return true end
        if k.type == "rotate" then return "q" end
        if k.type == "int" then return k.default + 1 end
        return k.default == 0 and 0.5 or k.default / 2
      end
      local elsewhere = { rotary = { pe = "shaw" }, placement = { pe = "rope" },
                          relative = { pe = "rope" }, freq = { pe = "alibi" },
                          scaled = { pe = "rope" }, scalings = { pe = "rope", scaling = "pi",
                          scaling_factor = 2 }, xpos = { pe = "rope" },
                          linear_rotary = { pe = "rope" } }
      local n = 0
      for _, k in ipairs(keys) do
        local o = elsewhere[k.use]
        if o and not (k.use == "placement" and k.placements:find("[qk]")) then
          local c = {}
          for a, b in pairs(o) do c[a] = b end
          c[k.name] = value(k)
          local ok, err = pcall(rp.model_memory, cfg(c))
          assert.is_false(ok, k.name)
          assert.truthy(err:find(k.name, 1, true), err)
          n = n + 1
        end
        if k.use == "always" then
          assert.is_nil(k.placements)
          assert.is_nil(k.scalings)
        end
      end
      assert.is_true(n >= 15, n)
    end)
end)

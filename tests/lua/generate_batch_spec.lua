-- m:generate_batch, g:jump and the batched rp.eval.accuracy: every prompt of a batch gets the
-- tokens m:generate gives it alone (token for token), for every pe mode, softmax and linear
-- attention, greedy and sampled, ragged prompts (longer than seq_len too), stops at different
-- steps, windows that fill, more prompts than lanes; the records of rp.eval.accuracy are the
-- same for every batch and equal a loop over m:generate with the per-problem generators; the
-- argument errors.

local rp = require "roper"

local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  return (tostring(e):gsub("^[^:]*:%d+: ", ""))
end

-- Prompts of lengths 1 .. 20 (seq_len is 12 below: the longer ones are cut) over vocab V.
local function prompts(V, n, seed)
  local g, ps = rp.rng(seed or 1), {}
  local lens = { 1, 3, 5, 12, 20, 2, 7, 16, 4, 9, 1, 13, 6 }
  for i = 1, n do
    local p = {}
    for j = 1, lens[(i - 1) % #lens + 1] do p[j] = g:int(0, V - 1) end
    ps[i] = i % 3 == 0 and rp.tensor(p) or p
  end
  return ps
end

local function model(extra)
  local cfg = { vocab = 13, d_model = 24, heads = 2, layers = 2, d_ff = 40, seq_len = 12,
                max_batch = 1, seed = 4 }
  for k, v in pairs(extra or {}) do cfg[k] = v end
  return rp.model(cfg)
end

-- Each prompt of ps alone through m:generate, with the generator of prompt i for sampling.
local function one_at_a_time(m, ps, n, opts)
  local outs = {}
  for i, p in ipairs(ps) do
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    if o.seed then
      o.rng, o.seed = rp.rng(o.seed):jump(i - 1), nil
    end
    o.lanes = nil
    outs[i] = m:generate(p, n, o)
  end
  return outs
end

describe("m:generate_batch", function()
  local modes = {
    { pe = "none" }, { pe = "sinusoidal", norm = "post" }, { pe = "learned" },
    { pe = "rope", activation = "gelu" }, { pe = "roper", fraction_v = 0.5 },
    { pe = "roper_legacy", norm = "post" },
    { pe = "none", attention = "linear" }, { pe = "rope", attention = "linear" },
    { pe = "roper", attention = "linear", linear_rope = "before" },
    { pe = "learned", attention = "linear" },
  }
  local decodes = {
    {}, { temperature = 1, seed = 3 }, { temperature = 0.7, top_k = 3, seed = 9 },
  }

  it("gives every prompt the tokens of m:generate alone (all modes, greedy and sampled)", function()
    local lengths = {}
    for _, mode in ipairs(modes) do
      local m = model(mode)
      local ps = prompts(13, 13, 2)
      for _, dec in ipairs(decodes) do
        -- without a stop token, then stopping at a token the first prompt emits
        local want = one_at_a_time(m, ps, 30, dec)
        for _, stop in ipairs { false, want[1][6] } do
          local o = {}
          for k, v in pairs(dec) do o[k] = v end
          o.stop = stop or nil
          if stop then want = one_at_a_time(m, ps, 30, o) end
          for _, lanes in ipairs { 1, 4, 64, "default" } do
            o.lanes = lanes ~= "default" and lanes or nil -- the default: from the caches
            local got = m:generate_batch(ps, 30, o)
            assert.are.same(want, got, ("%s %s, lanes %s"):format(mode.attention or "softmax",
              mode.pe, lanes))
          end
          for _, w in ipairs(want) do lengths[#w] = true end
        end
      end
    end
    local kinds = 0
    for _ in pairs(lengths) do kinds = kinds + 1 end
    assert.is_true(kinds >= 5 and lengths[30] and lengths[1], "lanes stop at different steps")
  end)

  it("leaves the generators as documented", function()
    local m = model { pe = "roper" }
    local ps = prompts(13, 5)
    -- rng: prompt i from g jumped i - 1 times; g ends jumped #ps times
    local g = rp.rng(8)
    local got = m:generate_batch(ps, 10, { temperature = 1, rng = g })
    assert.are.same(one_at_a_time(m, ps, 10, { temperature = 1, seed = 8 }), got)
    assert.are.equal(rp.rng(8):jump(5):uniform(), g:uniform())
    -- the default generator follows rp.seed and is jumped the same way
    rp.seed(6)
    local d1 = m:generate_batch(ps, 10, { temperature = 1 })
    rp.seed(6)
    assert.are.same(d1, m:generate_batch(ps, 10, { temperature = 1 }))
    assert.are.same(one_at_a_time(m, ps, 10, { temperature = 1, seed = 6 }), d1)
    -- greedy draws nothing
    local h = rp.rng(2)
    m:generate_batch(ps, 10, { rng = h })
    assert.are.equal(rp.rng(2):uniform(), h:uniform())
    -- empty batches, n = 0
    assert.are.same({}, m:generate_batch({}, 5))
    assert.are.same({ {}, {} }, m:generate_batch({ { 1 }, { 2, 3 } }, 0))
  end)

  local m = model()
  local cases = {
    { "prompts not a table", function() return m:generate_batch(5, 3) end,
      "bad argument #1 to 'generate_batch' (prompts must be a table of prompts, got 5)" },
    { "an empty prompt", function() return m:generate_batch({ { 1 }, {} }, 3) end,
      "bad argument #1 to 'generate_batch' (prompts[2] must hold at least one token)" },
    { "a prompt of the wrong type", function() return m:generate_batch({ { 1 }, "ab" }, 3) end,
      "bad argument #1 to 'generate_batch' (prompts[2] must be a table or a 1-D tensor of token ids, got string \"ab\")" },
    { "a 2-D prompt tensor", function() return m:generate_batch({ rp.zeros { 1, 2 } }, 3) end,
      "bad argument #1 to 'generate_batch' (prompts[1] must be a 1-D tensor, got [1 x 2])" },
    { "a token out of range", function() return m:generate_batch({ { 1 }, { 1, 13 } }, 3) end,
      "bad argument #1 to 'generate_batch' (token at [2][2] must be an integer in 0..12 (vocab 13), got 13)" },
    { "a tensor token out of range", function() return m:generate_batch({ rp.tensor { 1.5 } }, 3) end,
      "bad argument #1 to 'generate_batch' (token at [1][1] must be an integer in 0..12 (vocab 13), got 1.5)" },
    { "n = -1", function() return m:generate_batch({ { 1 } }, -1) end,
      "bad argument #2 to 'generate_batch' (n must be between 0 and 2^31-1, got -1)" },
    { "n times the prompts beyond 2^31-1", function() return m:generate_batch({ { 1 }, { 2 } }, 2^30 + 1) end,
      "bad argument #2 to 'generate_batch' (n = 1073741825 for 2 prompts: more than 2^31-1 new tokens in all)" },
    { "lanes = 0", function() return m:generate_batch({ { 1 } }, 3, { lanes = 0 }) end,
      "bad argument #3 to 'generate_batch' (option 'lanes' must be between 1 and 2^31-1, got 0)" },
    { "a fractional lanes", function() return m:generate_batch({ { 1 } }, 3, { lanes = 1.5 }) end,
      "bad argument #3 to 'generate_batch' (option 'lanes' must be an integer, got 1.5)" },
    { "seed and rng together", function() return m:generate_batch({ { 1 } }, 3, { seed = 1, rng = rp.rng(1) }) end,
      "bad argument #3 to 'generate_batch' (give option 'seed' or 'rng', not both)" },
    { "a negative temperature", function() return m:generate_batch({ { 1 } }, 3, { temperature = -1 }) end,
      "bad argument #3 to 'generate_batch' (option 'temperature' must be >= 0, got -1.0)" },
    { "a stop token out of range", function() return m:generate_batch({ { 1 } }, 3, { stop = 13 }) end,
      "bad argument #3 to 'generate_batch' (option 'stop' must be a token id in 0..12 (vocab 13), got 13)" },
    { "an unknown option", function() return m:generate_batch({ { 1 } }, 3, { lane = 2 }) end,
      "bad argument #3 to 'generate_batch' (unknown option 'lane' (known: temperature, top_k, top_p, seed, rng, stop, lanes))" },
    { "a released prompt tensor", function()
        local t = rp.tensor { 1, 2 }
        getmetatable(t).__close(t)
        return m:generate_batch({ { 1 }, t }, 3)
      end,
      "bad argument #1 to 'generate_batch' (prompts[2]: attempt to use a released tensor)" },
  }
  for _, c in ipairs(cases) do
    it("rejects " .. c[1], function() assert.are.equal(c[3], err_of(c[2])) end)
  end
end)

describe("m:lanes", function()
  local small = rp.model { vocab = 13, d_model = 16, heads = 2, layers = 2, d_ff = 24,
                           seq_len = 8 }
  -- 2 x layers x seq_len x d_model floats of cache per lane: 2 x 2 x 4096 x 512 x 4 bytes =
  -- 32 MiB, so 8 lanes' caches alone are the 256 MiB limit and their other buffers pass it
  local big = rp.model { vocab = 11, d_model = 512, heads = 8, layers = 2, d_ff = 64,
                         seq_len = 4096, max_batch = 1 }

  it("is the default of m:generate_batch: 8 .. 64 lanes, fewer where 256 MiB does not hold them",
    function()
      local d = small:lanes()
      assert.is_true(math.type(d) == "integer" and d >= 8 and d <= 64, tostring(d))
      assert.are.equal(d, small:lanes(nil, nil))
      assert.are.equal(7, big:lanes())
      assert.are.equal(7, big:lanes(64, 64))
      assert.are.equal(7, big:lanes(8))
      assert.are.equal(6, big:lanes(6, 64))
    end)

  it("is min(prompts, lanes), at least 1, while the caches fit", function()
    local d = small:lanes()
    for _, c in ipairs { { 0, nil, 1 }, { 1, nil, 1 }, { 3, nil, 3 }, { 2 ^ 31 - 1, nil, d },
                         { 100, 5, 5 }, { 2, 5, 2 }, { 1000, 1000, 1000 }, { 0, 1, 1 },
                         { nil, 3, 3 }, { d + 1, nil, d } } do
      assert.are.equal(c[3], small:lanes(c[1], c[2]), ("%s, %s"):format(c[1], c[2]))
    end
  end)

  local cases = {
    { "a negative count", function() return small:lanes(-1) end,
      "bad argument #1 to 'lanes' (prompts must be a count between 0 and 2^31-1, got -1)" },
    { "a count past 2^31-1", function() return small:lanes(2 ^ 31) end,
      "bad argument #1 to 'lanes' (prompts must be a count between 0 and 2^31-1, got 2147483648)" },
    { "a fractional count", function() return small:lanes(1.5) end,
      "bad argument #1 to 'lanes' (prompts must be an integer, got 1.5)" },
    { "a string count", function() return small:lanes("3") end,
      "bad argument #1 to 'lanes' (prompts must be an integer, got string \"3\")" },
    { "lanes = 0", function() return small:lanes(3, 0) end,
      "bad argument #2 to 'lanes' (lanes must be between 1 and 2^31-1, got 0)" },
    { "a table of lanes", function() return small:lanes(3, {}) end,
      "bad argument #2 to 'lanes' (lanes must be an integer, got table)" },
    { "a released model", function()
        local m = rp.model { vocab = 3, d_model = 4, heads = 1, layers = 1, d_ff = 4, seq_len = 2 }
        m:free()
        return m:lanes()
      end, "calling 'lanes' on bad self (attempt to use a released model)" },
  }
  for _, c in ipairs(cases) do
    it("rejects " .. c[1], function() assert.are.equal(c[3], err_of(c[2])) end)
  end
end)

describe("g:jump", function()
  it("advances by whole streams: jump(n) = n jumps, and returns g", function()
    local a, b = rp.rng(5), rp.rng(5)
    assert.are.equal(a, a:jump(3))
    b:jump():jump():jump()
    assert.are.equal(a:uniform(), b:uniform())
    local c = rp.rng(5)
    assert.are_not.equal(rp.rng(5):jump():uniform(), c:uniform())
    assert.are.equal(rp.rng(5):uniform(), rp.rng(5):jump(0):uniform())
  end)

  it("rejects bad counts", function()
    local g = rp.rng(1)
    assert.are.equal("bad argument #1 to 'jump' (n must be between 0 and 2^20, got -1)",
      err_of(function() return g:jump(-1) end))
    assert.are.equal("bad argument #1 to 'jump' (n must be between 0 and 2^20, got 1048577)",
      err_of(function() return g:jump(2^20 + 1) end))
    assert.are.equal("bad argument #1 to 'jump' (n must be an integer, got 0.5)",
      err_of(function() return g:jump(0.5) end))
  end)
end)

describe("rp.eval.accuracy in batches", function()
  local t = rp.tasks.addition { max_digits = 2, seq_len = 64 }
  local m = rp.model { vocab = t:vocab_size(), d_model = 16, heads = 2, layers = 1, d_ff = 32,
                       seq_len = 64, max_batch = 1, seed = 3 }

  it("gives the same records for every batch, those of a loop over m:generate", function()
    for _, dec in ipairs { { decode = "greedy" }, { decode = "sample", temperature = 0.9, top_k = 4 } } do
      local o = { problems = 9, seed = 4, max_new = 24 }
      for k, v in pairs(dec) do o[k] = v end
      local recs = {}
      for _, b in ipairs { 1, 2, 64, "default" } do
        o.batch = b ~= "default" and b or nil -- the default: m:generate_batch's lanes
        local _, _, r = rp.eval.accuracy(m, t, o)
        recs[#recs + 1] = r
      end
      assert.are.same(recs[1], recs[2])
      assert.are.same(recs[1], recs[3])
      assert.are.same(recs[1], recs[4])
      -- the protocol by hand: problems from rp.rng(seed), problem i sampling from
      -- rp.rng(seed + 1) jumped i - 1 times
      local prng, stop = rp.rng(4), nil
      for i, ch in ipairs(t:vocab()) do
        if ch == "#" then stop = i - 1 end
      end
      for i = 1, 9 do
        local q = t:problem(prng)
        local g = { stop = stop }
        if dec.decode == "sample" then
          g.temperature, g.top_k, g.rng = 0.9, 4, rp.rng(5):jump(i - 1)
        end
        local out = t:decode(m:generate(t:encode(q), 24, g))
        assert.are.equal(q, recs[1][i].question)
        assert.are.equal(out, recs[1][i].output)
      end
    end
  end)

  it("rejects a bad batch", function()
    assert.are.equal("bad argument #3 to 'rp.eval.accuracy' (option 'batch' must be >= 1, got 0)",
      err_of(function() return rp.eval.accuracy(m, t, { batch = 0 }) end))
    -- a value out of range is shown as given (a float as a float), as the C readers show it
    assert.are.equal("bad argument #3 to 'rp.eval.accuracy' (option 'problems' must be >= 1, got "
      .. "0.0)", err_of(function() return rp.eval.accuracy(m, t, { problems = 0.0 }) end))
  end)
end)

-- Frequency schemes (issue 14): the context extensions (PI, NTK-aware, YaRN), xPos and the user's
-- own frequencies or angles, in rp.rope.angles, rp.rope.rotate, rp.attention and models, against
-- the plain-Lua double formulas of helpers.naive (written from the papers), and the errors.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"
local rp = require "roper"
local naive = h.naive

local TOL = 1e-5

-- The schemes every check runs over (the table is both the option table and naive's freq).
local SCHEMES = {
  { name = "pi", f = { scaling = "pi", scaling_factor = 4 } },
  { name = "ntk", f = { scaling = "ntk", scaling_factor = 3 } },
  { name = "yarn", f = { scaling = "yarn", scaling_factor = 4, orig_len = 6, yarn_alpha = 0.5,
    yarn_beta = 4 } },
  { name = "xpos", f = { xpos = 0.4, xpos_scale_base = 8 } },
  { name = "yarn + xpos", f = { scaling = "yarn", scaling_factor = 2, orig_len = 10, xpos = 0.7,
    xpos_scale_base = 16 } },
  { name = "freq", f = { freq = { 0.9, 0.31, 2.5, 0.01 } } },
  { name = "freq + pi", f = { freq = { 0.9, 0.31, 2.5, 0.01 }, scaling = "pi", scaling_factor = 2 } },
  { name = "angles fn", f = { angles = function(p, i) return math.sin(p * (i + 1)) * 3 + p * 0.1 end } },
}

local copy = h.merged

describe("rp.rope.angles with a frequency scheme", function()
  for _, s in ipairs(SCHEMES) do
    for _, side in ipairs { 1, -1 } do
      it(("%s, xpos side %d: cos and sin are the formulas'"):format(s.name, side), function()
        local c, sn = rp.rope.angles(12, 8, copy(s.f, { xpos_side = side }))
        local want_c, want_s = {}, {}
        for p = 0, 11 do
          -- rotating the unit vectors e_a gives (m cos, m sin) in the pair's features
          want_c[p + 1], want_s[p + 1] = {}, {}
          for i = 1, 4 do
            local e = { 0, 0, 0, 0, 0, 0, 0, 0 }
            e[i] = 1
            local y = naive.rotate(e, p, { d_rot = 8, freq = s.f, side = side })
            want_c[p + 1][i], want_s[p + 1][i] = y[i], y[i + 4]
          end
        end
        h.approx(c, want_c, 2e-6, "cos")
        h.approx(sn, want_s, 2e-6, "sin")
      end)
    end
  end

  it("the standard scheme through freq or angles equals no option, bitwise", function()
    local th = naive.theta(8)
    local c0, s0 = rp.rope.angles(20, 8)
    local c1, s1 = rp.rope.angles(20, 8, { freq = th })
    local c2, s2 = rp.rope.angles(20, 8, { angles = function(p, i) return p * th[i + 1] end })
    h.approx(c1, c0, 0)
    h.approx(s1, s0, 0)
    h.approx(c2, c0, 0)
    h.approx(s2, s0, 0)
  end)

  it("YaRN keeps the fast pairs, interpolates the slow ones and ramps between", function()
    -- d_rot 16, L = 64: r_i = 64 theta_i / (2 pi) runs from 10.2 (i = 0) to 0.003 (i = 7)
    local f = { scaling = "yarn", scaling_factor = 8, orig_len = 64, yarn_alpha = 1, yarn_beta = 8 }
    local th, y = naive.theta(16), rp.rope.angles({ 1 }, 16, f)
    local got = {}
    for i = 1, 8 do got[i] = math.atan(select(2, rp.rope.angles({ 1 }, 16, f)):get(1, i), y:get(1, i)) end
    assert.near(th[1], got[1], 1e-7)                   -- r > beta: unchanged
    assert.near(th[8] / 8, got[8], 1e-9)               -- r < alpha: divided by s
    local r3 = 64 * th[3] / (2 * math.pi)              -- 1.6: on the ramp
    assert.is_true(r3 > 1 and r3 < 8)
    local g3 = (r3 - 1) / 7
    assert.near((1 - g3) * th[3] / 8 + g3 * th[3], got[3], 1e-7)
  end)

  -- docs/positional.md: the wavelength is 2 pi / |theta|, so a negative own frequency is scaled
  -- as its magnitude (2 pi / theta would leave every negative one below alpha: theta / s)
  it("YaRN scales a negative own frequency as its magnitude, on each part of the ramp", function()
    local f = { scaling = "yarn", scaling_factor = 4, orig_len = 64, yarn_alpha = 1, yarn_beta = 8,
      freq = { -2.5, -0.31, -0.09, 0.31 } } -- r = 64 |theta| / (2 pi): 25.5, 3.2, 0.92, 3.2
    local c, sn = rp.rope.angles({ 1 }, 8, f)
    for i = 1, 4 do
      local t = f.freq[i]
      local r = 64 * math.abs(t) / (2 * math.pi)
      local gm = r < 1 and 0 or r > 8 and 1 or (r - 1) / 7
      assert.near((1 - gm) * t / 4 + gm * t, math.atan(sn:get(1, i), c:get(1, i)), 1e-7)
    end
    assert.near(-math.atan(sn:get(1, 4), c:get(1, 4)), math.atan(sn:get(1, 2), c:get(1, 2)), 1e-7)
  end)
end)

describe("rp.rope.rotate with a frequency scheme", function()
  local g = rp.rng(14)
  for _, s in ipairs(SCHEMES) do
    it(s.name .. ": every row against the reference, offset and explicit positions", function()
      local x = g:randn { 5, 2, 8 }
      for _, o in ipairs { { offset = 3 }, { positions = { 7, 0, 2, 9, 4 } } } do
        local y = rp.rope.rotate(x, copy(s.f, copy(o, { xpos_side = -1 })))
        local xt, want = x:totable(), {}
        for t = 1, 5 do
          local p = o.positions and o.positions[t] or o.offset + t - 1
          want[t] = {}
          for m = 1, 2 do want[t][m] = naive.rotate(xt[t][m], p, { freq = s.f, side = -1 }) end
        end
        h.approx(y, want, TOL, s.name)
      end
    end)
  end

  it("refuses positions an angle table does not hold, below 0 or past its end", function()
    local a = { angles = rp.zeros { 6, 4 } }
    assert.has_error(function() rp.rope.rotate(rp.zeros { 3, 8 }, copy(a, { offset = -1 })) end,
      "bad argument #2 to 'rotate' (position -1 is below 0, where the angle table starts)")
    assert.has_error(function() rp.rope.rotate(rp.zeros { 3, 8 }, copy(a, { offset = 4 })) end,
      "bad argument #2 to 'rotate' (angles hold positions 0..5; position 6 is asked)")
    assert.has_error(function() rp.rope.angles({ 2, -3 }, 8, a) end,
      "bad argument #3 to 'angles' (position -3 is below 0, where the angle table starts)")
    assert.has_error(function() rp.rope.angles(7, 8, a) end,
      "bad argument #3 to 'angles' (angles hold positions 0..5; position 6 is asked)")
    -- a plain scheme takes negative positions as before
    assert.is_not_nil(rp.rope.rotate(rp.zeros { 3, 8 }, { offset = -1 }))
  end)

  -- with xPos, sign -1 multiplied by the magnitude again instead of dividing by it: the round
  -- trip gave x times zeta^(2 side p / scale_base) (issue 29)
  it("sign -1 with the same options undoes the rotation, xPos on either side included", function()
    local x = g:randn { 6, 8 }
    for _, s in ipairs(SCHEMES) do
      for _, side in ipairs { 1, -1 } do
        local o = copy(s.f, { xpos_side = side, offset = 5 })
        local y = rp.rope.rotate(x, o)
        local back = rp.rope.rotate(y, copy(o, { sign = -1 }))
        h.approx(back, x, 1e-5, ("%s, side %d"):format(s.name, side))
        -- the rule: rotated back by the angle, divided by the side's magnitude
        local xt, want = x:totable(), {}
        for t = 1, 6 do
          want[t] = naive.rotate(xt[t], 4 + t, { freq = s.f, sign = -1, side = -side })
        end
        h.approx(rp.rope.rotate(x, copy(o, { sign = -1 })), want, TOL, s.name .. " sign -1")
      end
    end
  end)
end)

describe("rp.attention with a frequency scheme", function()
  local g = rp.rng(15)
  for _, pe in ipairs(h.pe_names("rotary")) do
    for _, s in ipairs(SCHEMES) do
      it(("%s, %s: out and weights against the reference"):format(pe, s.name), function()
        local q, k, v = g:randn { 1, 5, 2, 8 }, g:randn { 1, 7, 2, 8 }, g:randn { 1, 7, 2, 8 }
        local opts = copy(s.f, { pe = pe, pos_offset = 3 })
        local out, att = rp.attention(q, k, v, opts)
        local rout, ratt = naive.attention(q:totable(), k:totable(), v:totable(),
          { pe = pe, pos_offset = 3, freq = s.f })
        h.approx(att, ratt, TOL, "att")
        h.approx(out, rout, TOL, "out")
      end)
    end
  end

  -- The relative-distance property holds for any frequencies: shifting every position leaves
  -- rope's weights and roper's output alone, for random frequencies as for the standard ones.
  -- xPos keeps it in exact arithmetic (its magnitudes multiply to zeta^((n - m) / scale_base)) but
  -- not in floats: each factor alone grows or shrinks with the absolute position.
  it("random frequencies: rope's weights and roper's output do not move under a shift", function()
    local freq = {}
    for i = 1, 4 do freq[i] = g:uniform() * 2 end
    local q, k, v = g:randn { 1, 6, 2, 8 }, g:randn { 1, 6, 2, 8 }, g:randn { 1, 6, 2, 8 }
    for _, pe in ipairs { "rope", "roper" } do
      local o0, a0 = rp.attention(q, k, v, { pe = pe, freq = freq })
      local o1, a1 = rp.attention(q, k, v, { pe = pe, freq = freq, pos_offset = 1000 })
      h.approx(a1, a0, 2e-4, pe .. " weights")
      if pe == "roper" then h.approx(o1, o0, 2e-4, "roper output") end
    end
  end)

  it("xPos: shift-invariant near 0, broken by float range far away", function()
    local q, k, v = g:randn { 1, 6, 2, 8 }, g:randn { 1, 6, 2, 8 }, g:randn { 1, 6, 2, 8 }
    local f = { pe = "rope", xpos = 0.4, xpos_scale_base = 16 }
    local _, a0 = rp.attention(q, k, v, f)
    local _, a1 = rp.attention(q, k, v, copy(f, { pos_offset = 20 }))
    h.approx(a1, a0, 1e-4, "a small shift")
    -- zeta_0 = 0.4 / 1.4: at position 3000 zeta^(3000/16) = 1e-102 underflows in float
    local _, a2 = rp.attention(q, k, v, copy(f, { pos_offset = 3000 }))
    assert.is_true(h.maxdiff(a2, a0) > 1e-2 or a2:isnan():sum() > 0, "far shift still equal")
  end)

  h.refusals(it, function(o)
    local q = rp.zeros { 1, 4, 2, 8 }
    return rp.attention(q, q, q, o)
  end, "bad argument #4 to 'attention'", {
    { { pe = "alibi", xpos = 0.4 }, "scaling, xpos, freq and angles need a rotary pe ("
      .. h.pe_list("rotary") .. "), not alibi" },
    { { pe = "rope", scaling = "pi", scaling_factor = 0 }, "scaling_factor must be a finite number "
      .. "> 0, got 0" },
    { { pe = "rope", scaling = "pi", scaling_factor = 0 / 0 }, "scaling_factor must be a finite" },
    { { pe = "rope", scaling = "ntk", scaling_factor = math.huge }, "scaling_factor must be a "
      .. "finite number > 0, got inf" },
    { { pe = "rope", scaling = "yarn", scaling_factor = 2 }, "option 'orig_len' (the original "
      .. "context length) is required with scaling \"yarn\"" },
    { { pe = "rope", scaling = "yarn", scaling_factor = 2, orig_len = 4, yarn_alpha = 32, yarn_beta = 32 },
      "yarn_alpha 32 must be below yarn_beta 32 (YaRN's ramp runs from the first to the second)" },
    { { pe = "rope", scaling = "warp" }, "option 'scaling' must be one of" },
    { { pe = "rope", xpos = -1 }, "xpos must be a finite number >= 0, got -1" },
    { { pe = "rope", xpos = 0.4, xpos_scale_base = 0 }, "xpos_scale_base must be a finite number > 0, "
      .. "got 0" },
    { { pe = "rope", freq = { 1, 0.1 } }, "freq holds 2 frequencies; d_rot_q 8 needs 4" },
    { { pe = "rope", freq = { 1, 0.1, 0 / 0, 1 } }, "option 'freq'[3] must be a finite number, got" },
    { { pe = "rope", freq = rp.tensor { 1, 0.1, 1 / 0, 1 } }, "freq: pair 2 has frequency inf; "
      .. "frequencies must be finite" },
    { { pe = "rope", freq = rp.zeros { 2, 4 } }, "option 'freq' must be a 1-D tensor ([n]), got [2 x 4]" },
    { { pe = "rope", angles = rp.zeros { 3, 4 } }, "angles hold positions 0..2; position 3 is asked" },
    { { pe = "rope", angles = rp.zeros { 4, 3 } }, "angles hold 3 per position; d_rot_q 8 needs 4" },
    { { pe = "rope", angles = rp.zeros { 4 } }, "option 'angles' must be a 2-D tensor ([positions x n]), "
      .. "got [4]" },
    { { pe = "rope", angles = { { 1, 2, 3, 4 }, { 1, 2 } } }, "option 'angles'[2] must be a list of 4 "
      .. "angles, got table" },
    { { pe = "rope", angles = function() return "x" end }, "option 'angles': the function's value at "
      .. "p = 0, i = 0 must be a finite number, got string" },
    { { pe = "rope", angles = function(p) return p == 2 and 0 / 0 or 0 end }, "option 'angles': the "
      .. "function's value at p = 2, i = 0 must be a finite number" },
    { { pe = "rope", freq = { 1, 1, 1, 1 }, angles = function() return 0 end }, "give option 'freq' or "
      .. "'angles', not both" },
    { { pe = "rope", scaling = "pi", scaling_factor = 2, angles = function() return 0 end },
      "scaling pi does not apply to an angle table" },
    { { pe = "rope", angles = 7 }, "option 'angles' must be a tensor, a list of lists or a function(p, "
      .. "i), got 7" },
    -- empty tensors (a [4 x 0] table once divided by its 0 width: SIGFPE)
    { { pe = "rope", angles = rp.zeros { 4, 0 } }, "option 'angles' must not be empty" },
    { { pe = "rope", angles = rp.zeros { 0, 4 } }, "option 'angles' must not be empty" },
    { { pe = "rope", angles = { {}, {} } }, "option 'angles' must not be empty" },
    { { pe = "rope", freq = rp.zeros { 0 } }, "option 'freq' must not be empty" },
  })

  it("an angle function's own error reaches the caller", function()
    local q = rp.zeros { 1, 2, 1, 4 }
    assert.has_error(function()
      rp.attention(q, q, q, { pe = "rope", angles = function() error("mine", 0) end })
    end, "mine")
  end)

  it("an angle function that releases the call's tensors is caught", function()
    local q = rp.zeros { 1, 2, 1, 4 }
    local ok, err = pcall(rp.attention, q, q, q, { pe = "rope", angles = function(p, i)
      getmetatable(q).__close(q)
      return p * i
    end })
    assert.is_false(ok)
    assert.truthy(err:find("released", 1, true), err)
  end)
end)

describe("models with a frequency scheme", function()
  local function cfg(extra)
    return copy({ vocab = 9, d_model = 16, heads = 2, layers = 1, d_ff = 16, seq_len = 12,
      max_batch = 2, pe = "roper", seed = 3 }, extra)
  end
  local x = rp.randint(0, 8, { 2, 12 }, rp.rng(4))

  it("the standard frequencies given as freq or as a function give the same logits bitwise", function()
    local th = naive.theta(8)
    local y = rp.model(cfg()):forward(x)
    h.approx(rp.model(cfg { freq = th }):forward(x), y, 0)
    h.approx(rp.model(cfg { angles = function(p, i) return p * th[i + 1] end }):forward(x), y, 0)
  end)

  it("each scheme changes the logits, and m:config() rebuilds the same model", function()
    local y0 = rp.model(cfg()):forward(x)
    for _, s in ipairs(SCHEMES) do
      local m = rp.model(cfg(s.f))
      local y = m:forward(x)
      assert.is_true(h.maxdiff(y, y0) > 1e-4, s.name .. " changed nothing")
      h.approx(rp.model(m:config()):forward(x), y, 0, s.name .. " rebuilt")
    end
  end)

  it("reports the settings it was given, and the tables as exact numbers", function()
    assert.truthy(tostring(rp.model(cfg { scaling = "yarn", scaling_factor = 2, orig_len = 6, xpos = 0.4 }))
      :find("pe roper yarn x2 xpos 0.4, pre-norm", 1, true))
    assert.truthy(tostring(rp.model(cfg { freq = { 1, 1, 1, 1 } })):find("pe roper own frequencies,", 1, true))
    local c = rp.model(cfg { scaling = "yarn", scaling_factor = 2, orig_len = 6 }):config()
    assert.same({ "yarn", 2, 6, 1, 32 }, { c.scaling, c.scaling_factor, c.orig_len, c.yarn_alpha,
      c.yarn_beta })
    assert.is_nil(c.xpos)
    local c2 = rp.model(cfg { freq = { 1 / 3, 0.1, 0.01, 0.001 } }):config()
    assert.equal(1 / 3, c2.freq[1])
    local c3 = rp.model(cfg()):config()
    assert.is_nil(c3.scaling)
    assert.is_nil(c3.freq)
  end)

  it("trains: a step lowers the loss with xPos and YaRN", function()
    for _, f in ipairs { { xpos = 0.4, xpos_scale_base = 8 }, { scaling = "yarn", scaling_factor = 2 } } do
      local m = rp.model(cfg(f))
      local opt = rp.optim.adam(m, { lr = 1e-2 })
      local y = rp.randint(0, 8, { 2, 12 }, rp.rng(5))
      local l0 = m:train_step(x, y, nil, opt)
      for _ = 1, 5 do m:train_step(x, y, nil, opt) end
      assert.is_true(m:loss(x, y) < l0)
    end
  end)

  it("saves (format version 3) and loads with everything, in checkpoints and safetensors files",
    function()
    local tmp = h.tmpdir()
    for _, s in ipairs(SCHEMES) do
      local m = rp.model(cfg(s.f))
      local path = tmp .. "/m.ckpt"
      assert(m:save(path))
      assert.equal(3, string.unpack("<I4", h.read(path), 5))
      h.approx(assert(rp.load(path)):forward(x), m:forward(x), 0, s.name)
      local ok, err = m:save_safetensors(tmp .. "/m.safetensors") -- own tables too
      assert.truthy(ok, err)
      h.approx(assert(rp.load(tmp .. "/m.safetensors")):forward(x), m:forward(x), 0, s.name)
    end
    assert(rp.model(cfg()):save(tmp .. "/plain.ckpt"))
    assert.equal(1, string.unpack("<I4", h.read(tmp .. "/plain.ckpt"), 5))
    h.remove_tree(tmp)
  end)

  h.refusals(it, function(o) return rp.model(cfg(o)) end, "bad argument #1 to 'model'", {
    { { pe = "alibi", scaling = "pi", scaling_factor = 2 }, "scaling and xpos need a rotary pe ("
      .. h.pe_list("rotary") .. ") with softmax attention, not alibi" },
    { { pe = "rope", attention = "linear", xpos = 0.4 }, "not rope with linear attention" },
    { { scaling = "pi", scaling_factor = -2 }, "scaling_factor must be a finite number > 0, got -2" },
    { { orig_len = -1 }, "orig_len -1 must be in 0..2147483647" },
    { { scaling = "yarn", scaling_factor = 2, yarn_alpha = 5, yarn_beta = 2 }, "yarn_alpha 5 must be "
      .. "below yarn_beta 2" },
    { { angles = rp.zeros { 11, 4 } }, "angles hold positions 0..10; position 11 is asked" },
    { { freq = { 1, 2, 3 } }, "freq holds 3 frequencies; d_rot_q 8 needs 4" },
    { { pe = "none", angles = function() return 0 end }, "option 'angles': nothing is rotated here" },
    { { pe = "none", freq = { 1, 2, 3, 4 } }, "freq and angles need a rotary pe ("
      .. h.pe_list("rotary") .. ") with softmax attention, not none" },
  })
end)

describe("user tables: empty ones, and positions beyond them", function()
  -- a [n x 0] tensor was divided by its 0 columns before it was refused: SIGFPE (issue 29)
  it("an empty table of any shape is refused by every call that takes one", function()
    local q = rp.zeros { 1, 4, 2, 8 }
    local mcfg = { vocab = 9, d_model = 16, heads = 2, layers = 1, d_ff = 16, seq_len = 12,
      max_batch = 2, pe = "roper" }
    local m = rp.model(mcfg)
    local function calls(o)
      return {
        { function() return rp.rope.angles(4, 8, o) end, "bad argument #3 to 'angles'" },
        { function() return rp.rope.rotate(rp.zeros { 4, 8 }, o) end,
          "bad argument #2 to 'rotate'" },
        { function() return rp.attention(q, q, q, copy(o, { pe = "rope" })) end,
          "bad argument #4 to 'attention'" },
        { function() return rp.model(copy(mcfg, o)) end, "bad argument #1 to 'model'" },
        { function() return m:derive(o) end, "bad argument #1 to 'derive'" },
      }
    end
    local n = 0
    local empty = { angles = { rp.zeros { 3, 0 }, rp.zeros { 0, 4 }, { {}, {}, {} }, {} },
      freq = { rp.zeros { 0 }, {} } }
    for key, values in pairs(empty) do
      for _, v in ipairs(values) do
        for _, c in ipairs(calls { [key] = v }) do
          assert.has_error(c[1], ("%s (option '%s' must not be empty)"):format(c[2], key))
          n = n + 1
        end
      end
    end
    assert.are.equal(30, n)
  end)

  -- a count of positions was walked three times before the table's range was checked (2^31
  -- positions: 5.6 s; 2^40, the largest count: hours): in a child, killed after 60 s
  it("a count of positions beyond an angle table is refused before anything is done", function()
    local bin = h.BIN
    local script = [[
      local a = { angles = rp.zeros { 3, 4 } }
      print(select(2, pcall(rp.rope.angles, 2^40, 8, a)))
      print(select(2, pcall(rp.rope.angles, 2^31, 8, a)))
    ]]
    local out, err, code = h.run(("timeout -s KILL 60 %s -e %s"):format(h.sh_quote(bin),
      h.sh_quote(script)))
    assert.are.equal(0, code, err)
    assert.are.equal("bad argument #3 to 'rp.rope.angles' (angles hold positions 0..2; position "
      .. "1099511627775 is asked)\nbad argument #3 to 'rp.rope.angles' (angles hold positions "
      .. "0..2; position 2147483647 is asked)\n", out)
  end)
end)

-- rp.model's positions (issue 35): explicit 1-D positions and vector positions (axial, M-RoPE
-- sections, RoPE-Mixed) for every sequence of the model. The attention weights of a one-layer
-- model against a plain-Lua float64 reference written from the formulas (layer norm, the q/k
-- projection, each pair turned by its axis's angle, the causal softmax); 1-D positions 0, 1, ..
-- bit for bit as no positions; sections over (t, t) bit for bit as 1-D; the 2-D shift property of
-- rope and roper; decoding equal to the forward; m:config(), m:derive and checkpoints keep them;
-- every refusal's message.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"
local rp = require "roper"
local naive = h.naive

local T = 12 -- a 3 x 4 grid

local function grid(shift_r, shift_c)
  local pos = {}
  for i = 0, T - 1 do pos[#pos + 1] = { i // 4 + (shift_r or 0), i % 4 + (shift_c or 0) } end
  return pos
end

local function cfg(over)
  local c = { vocab = 11, d_model = 16, heads = 2, layers = 1, d_ff = 32, seq_len = T,
              pe = "rope", seed = 7 }
  for k, v in pairs(over or {}) do c[k] = v end
  return c
end

local toks = { { 1, 4, 2, 8, 5, 7, 3, 9, 10, 0, 6, 2 }, { 3, 3, 1, 0, 9, 4, 4, 2, 7, 5, 1, 8 } }

-- The angle of pair i (0-based) at the vector position p (a list of A integers), written from
-- the papers: axial (one 1-D RoPE of its own width per axis, the first half mod A axes one pair
-- more), sections (the 1-D frequencies, pair i turned by the axis whose section holds it), mixed
-- (sum_a p_a W[a][i]).
local function angle(p, i, half, o)
  local A = #p
  if o.axes == "mixed" then
    local s = 0
    for a = 1, A do s = s + p[a] * o.mix[a][i + 1] end
    return s
  elseif o.axes == "sections" then
    local a, stop = 0, 0
    while i >= stop do a = a + 1; stop = stop + o.sections[a] end
    return p[a] * 10000 ^ (-2 * i / (2 * half))
  end
  local start = 0
  for a = 1, A do
    local na = half // A + ((a - 1) < half % A and 1 or 0)
    if i < start + na then return p[a] * 10000 ^ (-2 * (i - start) / (2 * na)) end
    start = start + na
  end
end

-- The attention weights [b][h][t][s] of layer 1 of the pre-norm model m for tokens, with the
-- positions pos (a list of {r, c}) and the axes options o, in float64 from m's parameters.
local function ref_attention(m, tokens, pos, o)
  local P = m:params()
  local C, H = 16, 2
  local dk = C // H
  local x = m:activations(tokens)[0]:totable()
  local lw, lb = P["layers.0.norm1.weight"]:totable(), P["layers.0.norm1.bias"]:totable()
  local W, bias = P["layers.0.attn.qkv.weight"]:totable(), P["layers.0.attn.qkv.bias"]:totable()
  local out = {}
  for b = 1, #tokens do
    local q, k = {}, {}
    for t = 1, T do
      local row, mean, var = x[b][t], 0, 0
      for c = 1, C do mean = mean + row[c] / C end
      for c = 1, C do var = var + (row[c] - mean) ^ 2 / C end
      local ln = {}
      for c = 1, C do ln[c] = (row[c] - mean) / math.sqrt(var + 1e-5) * lw[c] + lb[c] end
      q[t], k[t] = {}, {}
      for j = 1, C do
        local sq, sk = bias[j], bias[C + j]
        for c = 1, C do sq, sk = sq + W[j][c] * ln[c], sk + W[C + j][c] * ln[c] end
        q[t][j], k[t][j] = sq, sk
      end
    end
    out[b] = {}
    for hd = 1, H do
      local function head(v, t)
        local y = {}
        for d = 1, dk do y[d] = v[t][(hd - 1) * dk + d] end
        return naive.rotate(y, t - 1, { freq = { angles = function(p, i)
          return angle(pos[p + 1], i, dk // 2, o)
        end } })
      end
      out[b][hd] = {}
      for t = 1, T do
        local qt, s = head(q, t), {}
        for j = 1, t do s[j] = naive.dot(qt, head(k, j)) / math.sqrt(dk) end
        local w = naive.softmax(s)
        for j = t + 1, T do w[j] = 0 end
        out[b][hd][t] = w
      end
    end
  end
  return out
end

local mix = { { 0.9, 0.3, -0.2, 0.05 }, { -0.4, 0.7, 0.25, 0.01 } }
local maps = {
  { name = "axial", o = {} },
  { name = "sections", o = { axes = "sections", sections = { 1, 3 } } },
  { name = "mixed", o = { axes = "mixed", mix = mix } },
}

-- Greedy decoding of m (one prompt at a time and 5 lanes) against its forward pass: 24 prompts of
-- 3 tokens, each continued to the end of the window; at every step where the forward's best
-- logit leads the next by more than 1e-4 the decoder must have chosen it.
local function decodes_as_forward(m)
  local prompts, checked = {}, 0
  for i = 1, 24 do prompts[i] = { i % 11, (3 * i) % 11, (7 * i + 1) % 11 } end
  local outs = m:generate_batch(prompts, T - 3, { lanes = 5 })
  for i, prompt in ipairs(prompts) do
    assert.same(m:generate(prompt, T - 3), outs[i])
    local seq = {}
    for _, v in ipairs(prompt) do seq[#seq + 1] = v end
    for _, v in ipairs(outs[i]) do seq[#seq + 1] = v end
    local logits = m:forward(seq):totable()[1]
    for t = 3, T - 1 do
      local l = logits[t]
      local order = {}
      for v = 1, 11 do order[v] = v end
      table.sort(order, function(a, b) return l[a] > l[b] end)
      if l[order[1]] - l[order[2]] > 1e-4 then
        assert.equal(order[1] - 1, seq[t + 1], "prompt " .. i .. ", token " .. (t + 1))
        checked = checked + 1
      end
    end
  end
  assert.is_true(checked > 150, "only " .. checked .. " steps had a clear best token")
end

describe("rp.model with vector positions", function()
  for _, mp in ipairs(maps) do
    it("gives layer 1's weights of the float64 formula (" .. mp.name .. ")", function()
      local m = rp.model(cfg { positions = grid(), axes = mp.o.axes, sections = mp.o.sections,
                               mix = mp.o.mix })
      local want = ref_attention(m, toks, grid(), { axes = mp.o.axes or "axial",
                                                     sections = mp.o.sections, mix = mp.o.mix })
      h.approx(want, m:attention(1, toks):totable(), 2e-6)
      -- the 1-D model's weights are other ones: the positions reach the attention
      local plain = rp.model(cfg())
      assert.is_true(rp.maxdiff(plain:attention(1, toks), m:attention(1, toks)) > 1e-3)
    end)
  end

  it("with 1-D positions 0, 1, .. gives the bits of no positions (rope, roper)", function()
    for _, pe in ipairs { "rope", "roper" } do
      local p = {}
      for i = 0, T - 1 do p[i + 1] = i end
      local a, b = rp.model(cfg { pe = pe }), rp.model(cfg { pe = pe, positions = p })
      assert.equal(a:loss(toks, toks), b:loss(toks, toks))
      assert.equal(0, rp.maxdiff(a:forward(toks), b:forward(toks)))
    end
  end)

  it("with sections {4, 0} over (t, t) gives the bits of 1-D positions", function()
    local p = {}
    for i = 0, T - 1 do p[i + 1] = { i, i } end
    local a = rp.model(cfg { pe = "roper" })
    local b = rp.model(cfg { pe = "roper", positions = p, axes = "sections", sections = { 4, 0 } })
    assert.equal(0, rp.maxdiff(a:forward(toks), b:forward(toks)))
  end)

  it("keeps rope's and roper's logits when every position moves by (5, 9)", function()
    for _, pe in ipairs { "rope", "roper" } do
      for _, mp in ipairs(maps) do
        local o = mp.o
        local a = rp.model(cfg { pe = pe, positions = grid(), axes = o.axes,
                                 sections = o.sections, mix = o.mix })
        local b = rp.model(cfg { pe = pe, positions = grid(5, 9), axes = o.axes,
                                 sections = o.sections, mix = o.mix })
        local d = rp.maxdiff(a:forward(toks), b:forward(toks))
        assert.is_true(d < 2e-5, pe .. " " .. mp.name .. ": " .. d)
        assert.is_true(d > 0 or mp.name == "sections", pe .. " " .. mp.name .. " moved nothing")
      end
    end
  end)

  it("decodes what the forward predicts (greedy), with and without lanes", function()
    decodes_as_forward(rp.model(cfg { pe = "roper", positions = grid(), d_model = 32, heads = 2 }))
  end)

  it("keeps them in m:config(), m:derive and a checkpoint", function()
    local m = rp.model(cfg { pe = "roper", positions = grid(), axes = "mixed", mix = mix })
    local c = m:config()
    assert.same(grid(), c.positions)
    assert.equal("mixed", c.axes)
    h.approx(mix, c.mix, 0)
    assert.equal(tostring(m):match("pe roper 2%-D mixed positions") ~= nil, true)
    local d = m:derive { dropout = 0.1 }
    assert.same(grid(), d:config().positions)
    local path = h.tmpname()
    assert.is_true(m:save(path))
    local l = rp.load(path)
    assert.same(c, l:config())
    assert.equal(m:loss(toks, toks), l:loss(toks, toks))
    os.remove(path)
    -- a safetensors file holds them too (the positions, the map, the mix: docs/interop.md)
    assert.is_true(m:save_safetensors(path))
    local s = assert(rp.load(path))
    assert.same(c, s:config())
    assert.equal(m:loss(toks, toks), s:loss(toks, toks))
    os.remove(path)
  end)

  -- the extras table as docs/interop.md's "The file" gives it, and what m:save_safetensors
  -- writes for each map (its header read by lua-cjson): every tensor the metadata names has its
  -- row's dtype, a rank of its ranks and the tensor name of its key, the map its row's
  it("hold in safetensors files what rp.safetensors_extras() says", function()
    local x = rp.safetensors_extras()
    assert.equal("roper.axes", x.axes_key)
    local rows = {}
    for i, r in ipairs(x) do
      rows[i] = { r.key, r.option, r.dtype, table.concat(r.ranks, ","), r.shape, r.map }
    end
    assert.same({ { "roper.freq", "freq", "F64", "1", "[pairs]" },
                  { "roper.angles", "angles", "F64", "2", "[positions x pairs]" },
                  { "roper.positions", "positions", "I64", "1,2",
                    "[rows] or [rows x axes], 1 to 3 axes" },
                  { "roper.sections", "sections", "I64", "1", "[axes]", "sections" },
                  { "roper.mix", "mix", "F64", "2", "[axes x pairs]", "mixed" } }, rows)
    local path = h.tmpname()
    for _, mp in ipairs(maps) do
      local m = rp.model(cfg { positions = grid(), axes = mp.o.axes, sections = mp.o.sections,
                               mix = mp.o.mix,
                               freq = not mp.o.mix and { 1, 0.5, 0.25, 0.125 } or nil })
      assert.is_true(m:save_safetensors(path))
      local hd = h.st_parts(path)
      local held = {}
      for _, r in ipairs(x) do
        local name = hd.__metadata__[r.key]
        if name then
          held[#held + 1] = r.option
          assert.equal(r.key, name)
          assert.equal(r.dtype, hd[name].dtype, r.key)
          local rank_ok = false
          for _, n in ipairs(r.ranks) do rank_ok = rank_ok or n == #hd[name].shape end
          assert.is_true(rank_ok, r.key)
          if r.map then assert.equal(r.map, hd.__metadata__[x.axes_key]) end
        end
      end
      local want = mp.name == "mixed" and { "positions", "mix" } or mp.name == "sections" and
                   { "freq", "positions", "sections" } or { "freq", "positions" }
      assert.same(want, held, mp.name)
      assert.equal(mp.name, hd.__metadata__[x.axes_key])
    end
    os.remove(path)
  end)

  -- core's rules of the vector-position options (core/nn/axes_plan.h) as rp.axes_rules() gives
  -- them, and each rule in rp.model's wording, word for word, as rp.model's refusal of a call
  -- that breaks it (tests/c/test_axes_plan.c checks the metadata's wording)
  it("refuse what rp.axes_rules() says, with its messages", function()
    local r = rp.axes_rules()
    assert.same({ "positions", "scalar", "nothing", "needed", "rows", "angles" }, r.rules)
    assert.same({ { name = "axial" },
                  { name = "sections", table = "sections", does = "gives the pairs of",
                    what = "the pairs of each axis, e.g. {16, 24, 24}" },
                  { name = "mixed", table = "mix", does = "is the frequency matrix of",
                    what = "the [axes x d_rot/2] frequency matrix" } }, r.maps)
    assert.is_nil(r.wordings)
    local line, ang = {}, {}
    for i = 0, T - 1 do line[i + 1] = i; ang[i + 1] = { 0.1, 0.2, 0.3, 0.4 } end
    local cases = {
      { { sections = { 2, 2 } }, "option 'sections' needs option 'positions' (vector positions: "
        .. "an [n x axes] tensor or a list of {r, c} lists)" },
      { { positions = line, axes = "mixed" }, "option 'axes' does nothing with 1-D positions "
        .. "(give the positions as [n x axes] or a list of {r, c} lists)" },
      { { positions = grid(), mix = { { 1, 1, 1, 1 }, { 1, 1, 1, 1 } } }, "option 'mix' does "
        .. "nothing with axes \"axial\" (it is the frequency matrix of axes \"mixed\")" },
      { { positions = grid(), axes = "sections" }, "axes \"sections\" needs option 'sections' "
        .. "(the pairs of each axis, e.g. {16, 24, 24})" },
      { { positions = grid(), axes = "sections", sections = { 4 } },
        "option 'sections' has 1 entries; the positions have 2 axes" },
      { { positions = grid(), angles = ang }, "option 'angles' (a table of one position per "
        .. "row) needs scalar positions; these have 2 axes" },
    }
    for _, c in ipairs(cases) do
      assert.has_error(function() return rp.model(cfg(c[1])) end,
                       "bad argument #1 to 'model' (" .. c[2] .. ")")
    end
  end)

  -- the config's coded rules as rp.model_rules() gives them (core/config/model_config.c's rules),
  -- each filled in by hand, and the rotary rules' messages (core/nn/pe.c, model_config.c,
  -- attention.c), word for word, as the refusal of a call that breaks it
  it("refuse what rp.model_rules() says, with its templates, and the rotary rules", function()
    local r = rp.model_rules()
    local m, rule = r.messages, {}
    for _, x in ipairs(r) do
      if x.check then rule[x.check] = x end
    end
    local rotary = "a rotary pe (rope, roper or roper_legacy)"
    assert.same({ grid = "option 'positions' grid needs " .. rotary
                    .. " with softmax attention, not {pe}{linear}",
                  linear = " with linear attention" }, m)
    assert.same({ 2147483647, 2147483647 }, { rule.rows.max, rule.buckets.max })
    assert.same({ nil, nil, nil }, { rule.rotate.why, rule.widths.why, rule.freq.why })
    local function say(t, v)
      return (t:gsub("{([%w_]+)}", function(k) return v[k] and tostring(v[k]) end))
    end
    local line, ang = {}, {}
    for i = 0, T - 1 do line[i + 1] = i - 1; ang[i + 1] = { 0.1, 0.2, 0.3, 0.4 } end
    local cases = {
      { { pe = "shaw", rotate = "q" }, "option 'rotate' needs " .. rotary .. ", got pe 'shaw'" },
      { { pe = "shaw", freq = { 1, 2, 3, 4 } },
        "freq and angles need " .. rotary .. " with softmax attention, not shaw" },
      { { positions = line, attention = "linear" },
        "positions need " .. rotary .. " with softmax attention, not rope with linear attention" },
      { { positions = { 0, 1, 2 } }, "positions hold 3 rows; the model's seq_len is " .. T },
      { { positions = line, angles = ang },
        "positions: row 0 holds -1, below 0, where the angle table starts" },
      { { angles = ang, learn_freq = true }, "angles are final and learn_freq learns frequencies "
        .. "(give freq, the starting frequencies, instead)" },
      { { fraction_qk = 0 }, "fraction_qk 0 must be in (0, 1]" },
      { { fraction_qk = 0.2 },
        "fraction_qk 0.2 gives d_rot 1 for d_k 8; it must be even and >= 2" },
      { { max_batch = 1 << 30, seq_len = 4 },
        say(rule.rows.why, { max_batch = 1 << 30, seq_len = 4 }) },
      { { heads = 3 }, say(rule.heads.why, { d_model = 16, heads = 3 }) },
      { { pe = "xl", d_model = 15, heads = 3 },
        say(rule.sinusoid.why, { pe = "xl", d_model = 15 }) },
      { { pe = "t5", rel_buckets = 32, rel_max_distance = 8 },
        say(rule.buckets.why, { rel_max_distance = 8, lo = 17, hi = rule.buckets.max }) },
    }
    for _, c in ipairs(cases) do
      assert.has_error(function() return rp.model(cfg(c[1])) end,
                       "bad argument #1 to 'model' (" .. c[2] .. ")")
    end
    local q = rp.randn { 1, 4, 1, 8 }
    assert.has_error(function()
      return rp.attention(q, q, q, { pe = "alibi", positions = { 0, 1, 2, 3 } })
    end, "bad argument #4 to 'attention' (option 'positions' needs " .. rotary
      .. ", got pe 'alibi')")
  end)

  local bad = {
    { "axes without positions", { axes = "axial" },
      "option 'axes' needs option 'positions' (vector positions: an [n x axes] tensor or a list "
        .. "of {r, c} lists)" },
    { "too few rows", { positions = { { 0, 0 }, { 0, 1 } } },
      "positions hold 2 rows; the model's seq_len is 12" },
    { "a mode that does not rotate", { pe = "none", positions = grid() },
      "positions need a rotary pe (rope, roper or roper_legacy) with softmax attention, not none" },
    { "sections that do not add up", { positions = grid(), axes = "sections", sections = { 1, 1 } },
      "sections {1, 1} hold 2 pairs; d_rot_q 8 has 4" },
    { "a mix of the wrong width", { positions = grid(), axes = "mixed", mix = { { 1 }, { 2 } } },
      "option 'mix' is [2 x 1]; [2 x 4] expected (the positions' axes x d_rot/2)" },
    { "a ragged position", { positions = { { 0, 0 }, { 1 } } },
      "option 'positions'[2] must be a list of 2 integers (as option 'positions'[1]), got table" },
    { "a fractional position", { positions = { 0.5 } },
      "option 'positions'[1] must be an integer within 2^53, got 0.5" },
  }
  for _, c in ipairs(bad) do
    it("refuses " .. c[1], function()
      assert.has_error(function() return rp.model(cfg(c[2])) end,
                       "bad argument #1 to 'model' (" .. c[3] .. ")")
    end)
  end

  it("refuses a negative position with an angle table", function()
    local p, ang = {}, {}
    for i = 0, T - 1 do p[i + 1] = i - 1; ang[i + 1] = { 0.1, 0.2, 0.3, 0.4 } end
    assert.has_error(function() return rp.model(cfg { positions = p, angles = ang }) end,
                     "bad argument #1 to 'model' (positions: row 0 holds -1, below 0, where "
                       .. "the angle table starts)")
  end)
end)

describe("rp.experiment's positions key", function()
  local base = { task = "grid_offset", rows = 3, cols = 4, max_offset = 2, pe = "roper",
                 steps = 3, seq_len = 32, batch = 2, d_model = 16, heads = 2, problems = 2 }
  local function with(over)
    local c = {}
    for k, v in pairs(base) do c[k] = v end
    for k, v in pairs(over) do c[k] = v end
    return c
  end

  it("trains on the grid's (row, column) with positions grid, on the index without", function()
    local _, m, task = rp.experiment.run(with { positions = "grid" }, nil, { keep_model = true })
    local want = task:positions2d(32)
    assert.same(want:totable(), m:config().positions)
    assert.equal(m:config().positions[6][1], 1) -- token 5 of a 4-wide layout: row 1, column 1
    assert.equal(m:config().positions[6][2], 1)
    local _, m1 = rp.experiment.run(with {}, nil, { keep_model = true })
    assert.is_nil(m1:config().positions)
  end)

  it("refuses positions grid for a mode that does not rotate", function()
    assert.has_error(function() rp.experiment.check(with { pe = "none", positions = "grid" }) end,
      "bad argument #1 to 'rp.experiment.check' (option 'positions' grid needs a rotary pe "
        .. "(rope, roper or roper_legacy) with softmax attention, not none)")
  end)

  it("does not resume a run of the other positions", function()
    local path = h.tmpname()
    rp.experiment.run(with { positions = "grid" }, nil, { save = path })
    local ok, err = rp.experiment.resumable(with {}, path)
    assert.is_nil(ok)
    assert.equal(path .. " was trained with positions = grid, the config asks for index", err)
    os.remove(path)
    os.remove(path .. ".state")
  end)
end)

describe("rp.experiment's axes key", function()
  it("starts axes mixed from rope-vit's init_random_2d_freqs, its angle from the seed", function()
    local cfg = { task = "grid_offset", rows = 3, cols = 4, max_offset = 2, pe = "rope",
                  positions = "grid", axes = "mixed", steps = 2, seq_len = 32, batch = 2,
                  d_model = 32, heads = 2, problems = 2, seed = 5, base = 100 }
    local path = h.tmpname()
    local _, m = rp.experiment.run(cfg, nil, { keep_model = true, save = path })
    local mix = m:config().mix
    -- d_k 16: 8 pairs, magnitudes 100^(-4j/16) for j = 0..3, pairs 1-4 along phi, 5-8 along
    -- phi + pi/2
    local phi = rp.rng(5):uniform() * 2 * math.pi
    local want = { {}, {} }
    for j = 0, 3 do
      local mag = 100 ^ (-j / 4)
      want[1][j + 1], want[2][j + 1] = mag * math.cos(phi), mag * math.sin(phi)
      want[1][j + 5], want[2][j + 5] = -mag * math.sin(phi), mag * math.cos(phi)
    end
    h.approx(want, mix, 1e-15)
    assert.equal("mixed", m:config().axes)
    -- a run of the same config goes on from its checkpoint (the matrix is no obstacle)
    cfg.steps = 2
    assert.equal("finished", select(3, rp.experiment.resumable(cfg, path)))
    os.remove(path)
    os.remove(path .. ".state")
  end)

  it("refuses axes mixed for heads that do not split in quarters", function()
    assert.has_error(function()
      rp.experiment.check { task = "grid_offset", pe = "roper", positions = "grid",
                            axes = "mixed", d_model = 24, heads = 4 }
    end, "bad argument #1 to 'rp.experiment.check' (option 'axes' mixed rotates whole heads in "
      .. "quarters (d_k a multiple of 4, fraction_qk and fraction_v 1, the mode's own rotate), "
      .. "got d_k 6)")
  end)
end)

describe("learn_freq", function()
  -- the standard theta_i = 10000^(-2i/d_rot) of d_k 8, as float
  local function standard(half)
    local th = {}
    for i = 0, half - 1 do th[i + 1] = 10000 ^ (-2 * i / (2 * half)) end
    return th
  end

  it("starts rope.freq at the scheme's frequencies and trains them", function()
    local m = rp.model(cfg { pe = "roper", learn_freq = true })
    local f = m:params()["rope.freq"]
    assert.same({ 3, 4 }, f:shape())
    local t = f:totable()
    h.approx(standard(4), t[1], 6e-8)
    assert.same({ 0, 0, 0, 0 }, t[2])
    assert.same({ 0, 0, 0, 0 }, t[3])
    assert.is_true(m:config().learn_freq)
    assert.truthy(tostring(m))
    local opt = rp.optim.adam(m, { lr = 1e-2, schedule = "constant" })
    for _ = 1, 3 do m:train_step(toks, toks, nil, opt) end
    local after = m:params()["rope.freq"]:totable()
    assert.is_true(h.maxdiff(t[1], after[1]) > 1e-3, "theta did not move")
    assert.same({ 0, 0, 0, 0 }, after[2]) -- unused rows: zero gradient
  end)

  -- one parameter for every placement: each rotated placement d wide turns its pairs by the
  -- first d/2 entries of rope.freq, which start at the widest placement's frequencies. Equal
  -- widths start as the model without learn_freq; a narrower v and o start from q and k's theta_i
  -- (as a model given those as its freq), not from their own 10000^(-2i/4)
  it("shares rope.freq between the placements, started at the widest one's frequencies", function()
    local function logits(over)
      local c = cfg(over)
      c.seed = 5
      return rp.model(c):forward(toks)
    end
    local same = rp.maxdiff(logits { pe = "roper", learn_freq = true }, logits { pe = "roper" })
    assert.is_true(same <= 1e-6, same)
    local th = rp.tensor(standard(4)):totable() -- as float, as rope.freq holds them
    local narrow = logits { pe = "roper", fraction_v = 0.5, learn_freq = true }
    local given = rp.maxdiff(narrow, logits { pe = "roper", fraction_v = 0.5, freq = th })
    assert.is_true(given <= 1e-6, given)
    local own = rp.maxdiff(narrow, logits { pe = "roper", fraction_v = 0.5 })
    assert.is_true(own > 1e-3, own)
  end)

  it("decodes and evaluates with the learned values", function()
    local m = rp.model(cfg { pe = "roper", positions = grid(), learn_freq = true, d_model = 32,
                             heads = 2 })
    -- frequencies no scheme gives: decoding must read them, as the forward does
    m:params()["rope.freq"]:copy(rp.tensor { { 0.7, -1.3, 0.05, 2.2, 0.4, 0.9, -0.6, 0.3 },
                                             { 0, 0, 0, 0, 0, 0, 0, 0 },
                                             { 0, 0, 0, 0, 0, 0, 0, 0 } })
    decodes_as_forward(m)
    -- changed after the decoder built its rows: it must see the change (and a forward pass
    -- with the values unchanged must not hide it)
    m:params()["rope.freq"]:select(1, 1):copy(rp.tensor { 1.1, 0.2, -0.9, 0.6, 1.7, -0.2, 0.8,
                                                          0.05 })
    decodes_as_forward(m)
  end)

  it("starts a mixed matrix at the given mix, and keeps the learned values in files", function()
    local m = rp.model(cfg { pe = "roper", positions = grid(), axes = "mixed", mix = mix,
                             learn_freq = true })
    local t = m:params()["rope.freq"]:totable()
    h.approx(mix, { t[1], t[2] }, 3e-8)
    assert.same({ 0, 0, 0, 0 }, t[3])
    local opt = rp.optim.adam(m, { lr = 1e-2 })
    m:train_step(toks, toks, nil, opt)
    local path = h.tmpname()
    assert.is_true(m:save(path))
    local l = rp.load(path)
    assert.equal(0, rp.maxdiff(m:params()["rope.freq"], l:params()["rope.freq"]))
    assert.equal(m:loss(toks, toks), l:loss(toks, toks))
    assert.same(mix, l:config().mix) -- the starting matrix (config), not the learned one
    os.remove(path)
    -- a 1-D learn_freq model through safetensors
    local m1 = rp.model(cfg { pe = "rope", learn_freq = true })
    m1:train_step(toks, toks, nil, rp.optim.adam(m1, { lr = 1e-2 }))
    assert.is_true(m1:save_safetensors(path))
    local s1 = rp.load(path)
    assert.is_true(s1:config().learn_freq)
    assert.equal(m1:loss(toks, toks), s1:loss(toks, toks))
    os.remove(path)
  end)

  it("refuses a scaling and an angle table beside it", function()
    assert.has_error(function() return rp.model(cfg { learn_freq = true, scaling = "pi",
                                                      scaling_factor = 2 }) end,
      "bad argument #1 to 'model' (learn_freq learns the frequencies themselves; scaling pi "
        .. "does not apply to them (train at the longer length instead))")
    local ang = {}
    for i = 1, T do ang[i] = { 0.1, 0.2, 0.3, 0.4 } end
    assert.has_error(function() return rp.model(cfg { learn_freq = true, angles = ang }) end,
      "bad argument #1 to 'model' (angles are final and learn_freq learns frequencies (give "
        .. "freq, the starting frequencies, instead))")
  end)
end)

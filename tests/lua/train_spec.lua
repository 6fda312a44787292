-- Training: a tiny model learns a repeating sequence; Adam/AdamW arithmetic, clipping and
-- learning-rate schedules through opt:step; dropout reproducibility; train_step's errors; and
-- resuming from a checkpoint in another process (the REPL binary, ROPER_BIN, default
-- build/roper) continues bit-identically.

local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local rp = require "roper"

local BIN = h.BIN

local CFG = { vocab = 5, d_model = 16, heads = 2, layers = 1, d_ff = 32, seq_len = 16,
              max_batch = 4 }
local function tiny(extra)
  local cfg = {}
  for k, v in pairs(CFG) do cfg[k] = v end
  for k, v in pairs(extra or {}) do cfg[k] = v end
  return rp.model(cfg)
end

-- 4 sequences of 16 tokens of the repeating sequence 0 1 2 3 4 0 1 ..., each starting one token
-- later than the one before; targets are the next tokens.
local function repeating(shift)
  shift = shift or 0
  local tok, tgt = {}, {}
  for b = 1, 4 do
    tok[b], tgt[b] = {}, {}
    for t = 1, 16 do
      tok[b][t] = (b + t + shift) % 5
      tgt[b][t] = (b + t + shift + 1) % 5
    end
  end
  return tok, tgt
end

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Runs a shell command; returns its output (stdout and stderr) and whether it exited with 0.
local function run(cmd)
  local p = assert(io.popen(cmd .. " 2>&1", "r"))
  local out = p:read("a")
  local ok = p:close()
  return out, ok == true
end

describe("training", function()
  -- Chosen by experiment: with seed 1 the loss starts at 1.69 (log 5 = 1.61) and is 0.006 after
  -- 40 steps (seeds 0..3: 0.006 .. 0.009); the bound 0.05 leaves a margin of 5x or more.
  local STEPS, BOUND = 40, 0.05

  it("a tiny model learns a repeating sequence with Adam", function()
    local m = tiny { seed = 1 }
    local opt = rp.optim.adam(m, { lr = 1e-2, schedule = "constant" })
    local tok, tgt = repeating()
    local initial = m:loss(tok, tgt)
    assert.is_true(math.abs(initial - math.log(5)) < 0.5,
                   string.format("initial loss %.4f is not near log(5) = %.4f", initial, math.log(5)))
    local first, last
    for i = 1, STEPS do
      local loss, norm = m:train_step(tok, tgt, nil, opt)
      assert.is_true(loss == loss and norm == norm and norm > 0)
      if i == 1 then first = loss end
      last = loss
    end
    -- without dropout the first training loss is the eval loss before any step
    assert.is_true(math.abs(first - initial) < 1e-6)
    local final = m:loss(tok, tgt)
    assert.is_true(final < BOUND, string.format("loss %.4f after %d steps (bound %.2f)", final, STEPS, BOUND))
    assert.is_true(last < BOUND * 2)
    assert.equal(STEPS, opt:steps())
    -- it predicts the sequence: greedy generation continues it
    assert.same({ 3, 4, 0, 1, 2, 3, 4, 0 }, m:generate({ 0, 1, 2 }, 8))
  end)

  it("with a mask, only the scored positions are learned", function()
    local m = tiny { seed = 2 }
    local opt = rp.optim.adam(m, { lr = 1e-2, schedule = "constant" })
    local tok, tgt = repeating()
    local mask = {}
    for b = 1, 4 do
      mask[b] = {}
      for t = 1, 16 do mask[b][t] = tok[b][t] ~= 2 end -- never scored after token 2
    end
    for _ = 1, STEPS do m:train_step(tok, tgt, mask, opt) end
    assert.is_true(m:loss(tok, tgt, mask) < BOUND)
  end)

  it("dropout: reproducible from the seed, off in eval", function()
    local tok, tgt = repeating()
    local function losses(seed)
      local m = tiny { dropout = 0.3, seed = seed }
      local opt = rp.optim.adam(m, { lr = 1e-2 })
      local eval0 = m:loss(tok, tgt)
      local out = {}
      for i = 1, 5 do out[i] = m:train_step(tok, tgt, nil, opt) end
      return out, eval0
    end
    local a, eval0 = losses(7)
    local b = losses(7)
    assert.same(a, b)
    assert.are_not.equal(eval0, a[1]) -- the first training forward dropped units
  end)
end)

describe("optimisers", function()
  -- A model whose gradients are all 0 except one element of head.bias.
  local function one_grad(g_value)
    local m = tiny()
    m:grads()["head.bias"][2] = g_value
    return m, m:params()["head.bias"]
  end

  it("opt:step follows Adam's first-step formula and returns the gradient norm", function()
    local m, b = one_grad(0.5)
    local w0 = b[2]
    local other = b[3]
    local opt = rp.optim.adam(m, { lr = 0.01, schedule = "constant" })
    assert.equal(0.01, opt:lr())
    local norm = opt:step()
    assert.is_true(math.abs(norm - 0.5) < 1e-12)
    -- m = 0.05, v = 0.00025, step_size = lr sqrt(1 - b2) / (1 - b1): the update is lr * g/|g|
    local g, lr, b1, b2, eps = 0.5, 0.01, 0.9, 0.999, 1e-8
    local mm, vv = (1 - b1) * g, (1 - b2) * g * g
    local want = w0 - lr * math.sqrt(1 - b2) / (1 - b1) * mm / (math.sqrt(vv) + eps)
    assert.is_true(math.abs(b[2] - want) < 1e-6, string.format("%.9g vs %.9g", b[2], want))
    assert.equal(other, b[3])
    assert.equal(1, opt:steps())
  end)

  it("clips the gradient in place to clip", function()
    local m = one_grad(4)
    local opt = rp.optim.adam(m, { clip = 2 })
    assert.is_true(math.abs(opt:step() - 4) < 1e-12)
    assert.is_true(math.abs(m:grads()["head.bias"][2] - 2) < 1e-5)
    local m2 = one_grad(4)
    assert.is_true(math.abs(rp.optim.adam(m2, { clip = 0 }):step() - 4) < 1e-12)
    assert.equal(4, m2:grads()["head.bias"][2])
  end)

  it("AdamW decays the weights by lr * weight_decay; Adam adds the decay to the gradient", function()
    local m = tiny()
    local w = m:params()["layers.0.ff.w1.weight"]
    local before = w:clone()
    local opt = rp.optim.adamw(m, { lr = 0.1, weight_decay = 0.5, schedule = "constant" })
    opt:step() -- gradients are 0
    assert.is_true(rp.maxdiff(w, before * (1 - 0.1 * 0.5)) < 1e-6)
    local m2 = tiny()
    local w2 = m2:params()["layers.0.ff.w1.weight"]
    rp.optim.adam(m2, { lr = 0.1, weight_decay = 0.5, clip = 0, schedule = "constant" }):step()
    -- each weight moves by about lr against its sign (the gradient is wd * w)
    local d = (w2 - before):abs()
    assert.is_true(math.abs(d:max() - 0.1) < 1e-3 and math.abs(d:min() - 0.1) < 1e-3)
  end)

  it("learning-rate schedules", function()
    local m = tiny()
    local c = rp.optim.adam(m, { lr = 1, schedule = "cosine", warmup = 2, total_steps = 6, min_lr = 0.1 })
    local lrs = {}
    for i = 1, 7 do
      lrs[i] = c:lr()
      c:step()
    end
    local function cosine(t) return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (t - 2) / 4)) end
    local want = { 0.5, 1, cosine(3), cosine(4), cosine(5), 0.1, 0.1 }
    for i = 1, 7 do assert.is_true(math.abs(lrs[i] - want[i]) < 1e-12, i .. ": " .. lrs[i]) end
    -- noam takes d_model from the model (16)
    local n = rp.optim.adam(m, { lr = 2, schedule = "noam", warmup = 4 })
    assert.is_true(math.abs(n:lr() - 2 * 16 ^ -0.5 * 1 * 4 ^ -1.5) < 1e-12)
    -- the defaults (rp.experiment's): the cosine schedule's first warm-up step of 100
    assert.equal(1e-3 * 1 / 100, rp.optim.adam(m):lr())
  end)

  it("has one default per name with rp.experiment (core's table of the optimiser's keys)", function()
    local m = tiny()
    local got = rp.optim.adam(m):config()
    local want = { lr = 1e-3, weight_decay = 0, schedule = "cosine", warmup = 100, min_lr = 1e-4,
      clip = 1, total_steps = 2000, eps = 1e-8 }
    for k, v in pairs(want) do assert.equal(v, got[k], k) end
    assert.same({ 0.9, 0.999 }, got.betas)
    local shared = 0
    for _, k in ipairs(rp.experiment.keys()) do
      if got[k.name] ~= nil then
        assert.equal(got[k.name], k.default, k.name)
        shared = shared + 1
      end
    end
    assert.equal(6, shared) -- lr, weight_decay, schedule, warmup, min_lr, clip
    assert.equal(got.total_steps, rp.experiment.config().steps)
    assert.equal("adam", rp.experiment.config().optimiser)
  end)

  it("reports its config, and accepts it back", function()
    local m = tiny()
    local opt = rp.optim.adamw(m, { lr = 3e-4, betas = { 0.8, 0.99 }, eps = 1e-6, weight_decay = 0.1,
                                    clip = 0.5, schedule = "cosine", warmup = 10, total_steps = 100,
                                    min_lr = 1e-5 })
    local c = opt:config()
    assert.same({ kind = "adamw", lr = 3e-4, betas = { 0.8, 0.99 }, eps = 1e-6, weight_decay = 0.1,
                  clip = 0.5, schedule = "cosine", warmup = 10, total_steps = 100, min_lr = 1e-5 }, c)
    assert.same(c, rp.optim[c.kind](m, c):config())
    assert.equal("roper.Optim: adamw, lr 0.0003 (cosine schedule), 0 steps", tostring(opt))
    assert.equal("roper.Optim", getmetatable(opt).__name)
  end)

  it("keeps its model alive, and is released by a to-be-closed variable", function()
    local opt = rp.optim.adam(tiny(), { lr = 1e-2 })
    collectgarbage()
    collectgarbage()
    assert.is_true(opt:step() == 0)
    local o2
    do
      local x <close> = rp.optim.adam(tiny())
      o2 = x
    end
    assert.equal("roper.Optim (released)", tostring(o2))
    getmetatable(o2).__close(o2)
    assert.has_error(function() return o2:lr() end,
                     "calling 'lr' on bad self (attempt to use a released optimiser)")
    -- a closed model makes its optimiser unusable
    local m = tiny()
    local o3 = rp.optim.adam(m)
    getmetatable(m).__close(m)
    assert.has_error(function() return o3:step() end,
                     "calling 'step' on bad self (the optimiser's model was released)")
  end)

  local m = tiny()
  local cases = {
    { "no model", function() return rp.optim.adam() end,
      "bad argument #1 to 'adam' (roper.Model expected, got no value)" },
    { "a negative lr", function() return rp.optim.adam(m, { lr = -1 }) end,
      "bad argument #2 to 'adam' (lr must be a finite number > 0, got -1)" },
    { "an eps that float32 flushes to 0", function() return rp.optim.adam(m, { eps = 1e-40 }) end,
      "bad argument #2 to 'adam' (eps must be a finite number >= 1.17549435e-38 (float32's "
        .. "smallest normal number), got 1e-40)" },
    { "a weight decay past float32", function() return rp.optim.adamw(m, { weight_decay = 1e39 }) end,
      "bad argument #2 to 'adamw' (weight_decay must be at most 3.40282347e+38 (float32's "
        .. "largest), got 1e+39)" },
    { "beta1 = 1", function() return rp.optim.adamw(m, { betas = { 1, 0.999 } }) end,
      "bad argument #2 to 'adamw' (beta1 must be in [0, 1), got 1)" },
    { "one beta", function() return rp.optim.adam(m, { betas = { 0.9 } }) end,
      "bad argument #2 to 'adam' (option 'betas' must be a table of two numbers {beta1, beta2}, got table)" },
    { "an unknown schedule", function() return rp.optim.adam(m, { schedule = "step" }) end,
      "bad argument #2 to 'adam' (option 'schedule' must be one of \"constant\", \"cosine\", \"noam\", got string \"step\")" },
    { "cosine without total_steps", function() return rp.optim.adam(m, { total_steps = 0 }) end,
      "bad argument #2 to 'adam' (total_steps must be >= 1 for the cosine schedule, got 0)" },
    { "an unknown option", function() return rp.optim.adam(m, { learning_rate = 1 }) end,
      "bad argument #2 to 'adam' (unknown option 'learning_rate' (known: lr, betas, eps, weight_decay, "
      .. "clip, schedule, warmup, total_steps, min_lr, kind))" },
    { "the other kind", function() return rp.optim.adam(m, { kind = "adamw" }) end,
      "bad argument #2 to 'adam' (option 'kind' is \"adamw\", but this is rp.optim.adam)" },
  }
  for _, c in ipairs(cases) do
    it("rejects " .. c[1], function() assert.has_error(c[2], c[3]) end)
  end
end)

describe("m:train_step errors", function()
  local m = tiny()
  local opt = rp.optim.adam(m)
  local cases = {
    { "a missing optimiser", function() return m:train_step({ 1, 2 }, { 2, 3 }) end,
      "bad argument #4 to 'train_step' (roper.Optim expected, got nil)" },
    { "an optimiser of another model",
      function() return m:train_step({ 1, 2 }, { 2, 3 }, nil, rp.optim.adam(tiny())) end,
      "bad argument #4 to 'train_step' (the optimiser belongs to another model)" },
    { "nothing scored", function() return m:train_step({ 1, 2 }, { -1, -1 }, nil, opt) end,
      "bad argument #2 to 'train_step' (no position is scored (every target is -1 or masked out))" },
    { "everything masked", function() return m:train_step({ 1, 2 }, { 1, 2 }, { false, 0 }, opt) end,
      "bad argument #2 to 'train_step' (no position is scored (every target is -1 or masked out))" },
    { "the optimiser in the mask's place", function() return m:train_step({ 1, 2 }, { 2, 3 }, opt) end,
      "bad argument #3 to 'train_step' (mask or nil expected before the optimiser (m:train_step(tokens, targets, nil, opt)))" },
    { "a bad mask", function() return m:train_step({ 1, 2 }, { 1, 2 }, 1, opt) end,
      "bad argument #3 to 'train_step' (mask must be a table or a tensor, got 1)" },
    { "a token out of range", function() return m:train_step({ 1, 5 }, { 1, 2 }, nil, opt) end,
      "bad argument #1 to 'train_step' (token at [2] must be an integer in 0..4 (vocab 5), got 5)" },
  }
  for _, c in ipairs(cases) do
    it("rejects " .. c[1], function() assert.has_error(c[2], c[3]) end)
  end
  it("leaves the model untouched after an error", function()
    local before = m:params()["head.weight"]:clone()
    pcall(cases[3][2])
    assert.equal(0, rp.maxdiff(before, m:params()["head.weight"]))
    assert.equal(0, opt:steps())
  end)
end)

describe("resuming from a checkpoint", function()
  -- The script trains a model with dropout and a cosine schedule, on data that depends on the
  -- step count, printing each loss with %.9g:
  --   script.lua straight N        N steps from scratch
  --   script.lua first N path      N steps from scratch, then saves model + optimiser to path
  --   script.lua resume M path     loads path, M more steps
  local SCRIPT = [[
local rp = require "roper"
local mode, n, path = arg[1], tonumber(arg[2]), arg[3]
local m, opt
if mode == "resume" then
  m, opt = rp.load(path)
  assert(m, opt)
  assert(opt, "no optimiser in the checkpoint")
else
  m = rp.model { vocab = 5, d_model = 16, heads = 2, layers = 1, d_ff = 32, seq_len = 16,
                 max_batch = 4, dropout = 0.2, pe = "roper", seed = 9 }
  opt = rp.optim.adam(m, { lr = 1e-2, schedule = "cosine", warmup = 3, total_steps = 20 })
end
for _ = 1, n do
  local s = opt:steps()
  local tok, tgt = {}, {}
  for b = 1, 4 do
    tok[b], tgt[b] = {}, {}
    for t = 1, 16 do
      tok[b][t] = (b * s + t) % 5
      tgt[b][t] = (b * s + t + 1 + s % 2) % 5
    end
  end
  local loss, norm = m:train_step(tok, tgt, nil, opt)
  print(string.format("%.9g %.9g", loss, norm))
end
if mode == "first" then assert(m:save(path, opt)) end
]]

  local d
  setup(function()
    d = h.tmpname()
    os.remove(d)
    assert(os.execute("mkdir -p " .. sh_quote(d)))
    local f = assert(io.open(d .. "/train.lua", "w"))
    f:write(SCRIPT)
    f:close()
  end)
  teardown(function() os.execute("rm -rf " .. sh_quote(d)) end)

  local function script(...)
    local args = { sh_quote(BIN), sh_quote(d .. "/train.lua") }
    for _, a in ipairs { ... } do args[#args + 1] = sh_quote(tostring(a)) end
    local out, ok = run(table.concat(args, " "))
    assert.is_true(ok, out)
    local lines = {}
    for line in out:gmatch("[^\n]+") do lines[#lines + 1] = line end
    return lines
  end

  it("N steps, save, load in another process, M steps == N + M steps straight", function()
    local N, M = 6, 7
    local straight = script("straight", N + M)
    assert.equal(N + M, #straight)
    local ck = d .. "/run.ck"
    local first = script("first", N, ck)
    local second = script("resume", M, ck)
    assert.equal(N, #first)
    assert.equal(M, #second)
    local resumed = {}
    for _, l in ipairs(first) do resumed[#resumed + 1] = l end
    for _, l in ipairs(second) do resumed[#resumed + 1] = l end
    assert.same(straight, resumed)
    -- the run is not trivially constant
    assert.are_not.equal(straight[1], straight[N + 1])
  end)
end)

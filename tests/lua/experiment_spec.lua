-- rp.experiment (the modules of bindings/lua/experiment/): config
-- defaults, conversion of command-line strings and option errors; tiny training runs on every
-- task (result fields checked against each other, determinism, the progress callback). Then the
-- scripts built on it, run through the REPL binary (ROPER_BIN, default build/roper) from the
-- repository root: train.lua, compare.lua (tables, plots, resuming, config clashes, methods)
-- and sweep.lua (grids, --print-commands, --summary). Every run is a few steps of a 16-wide
-- model.

local rp = require "roper"
local cjson = require "cjson"

local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local BIN = h.BIN
local sh_quote, read, write, run, tmpdir = h.sh_quote, h.read, h.write, h.run, h.tmpdir

-- The message of a failing call, and the same without a "file:line: " prefix.
local function err_of(f, ...)
  local ok, msg = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  msg = tostring(msg)
  return msg, (msg:gsub("^[^ ]-:%d+: ", "", 1))
end

-- Checks that calling f raises exactly `want` (after an optional position prefix).
local function raises(want, f, ...)
  local msg, bare = err_of(f, ...)
  assert.truthy(msg:find(want, 1, true), "message: " .. msg)
  assert.are.equal(want, bare)
end

-- The same for an argument error of rp.experiment.<fname>: "bad argument #1 to
-- 'rp.experiment.<fname>' (<want>)".
local function raises_for(fname, want, f, ...)
  raises(("bad argument #1 to 'rp.experiment.%s' (%s)"):format(fname, want), f, ...)
end


local read_json = h.read_json


-- The names in a folder, one a line.
local function ls(dir)
  local p = assert(io.popen("ls " .. sh_quote(dir)))
  local s = p:read("a")
  p:close()
  return s
end

local function lines(s)
  local t = {}
  for l in s:gmatch("[^\n]+") do t[#t + 1] = l end
  return t
end



-- The tiny settings of every run here.
local TINY = { steps = 5, d_model = 16, heads = 2, layers = 1, seq_len = 32, batch = 4,
  problems = 3, valid_batches = 1, log_every = 2 }
local function tiny(extra)
  local o = {}
  for k, v in pairs(TINY) do o[k] = v end
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

-- The same options for a script command line.
local TINY_ARGS = "--d-model 16 --heads 2 --layers 1 --seq-len 32 --batch 4 --problems 2 "
  .. "--valid-batches 1"

local function is_finite(x) return type(x) == "number" and x == x and math.abs(x) ~= math.huge end

---------------------------------------------------------------------------------------------------
describe("rp.experiment.config", function()
  it("fills in the defaults and resolves max_digits, quirk, d_ff and log_every", function()
    local c = rp.experiment.config()
    assert.are.equal("substring_index", c.task)
    assert.are.equal("writeup", c.format)
    assert.are.equal(8, c.max_digits)
    assert.are.equal("off", c.quirk)
    assert.are.equal(64, c.d_model)
    assert.are.equal(256, c.d_ff)
    assert.are.equal(2000, c.steps)
    assert.are.equal(20, c.log_every)
    assert.are.equal("rope", c.pe)
    -- every key is there
    local keys = rp.experiment.keys()
    for _, k in ipairs(keys) do assert.is_not_nil(c[k.name], k.name) end
    local n = 0
    for _ in pairs(c) do n = n + 1 end
    assert.are.equal(#keys, n)
    assert.are.same(c, rp.experiment.config({}))

    local l = rp.experiment.config { format = "labml" }
    assert.are.equal(7, l.max_digits)
    assert.are.equal("on", l.quirk)
    local l2 = rp.experiment.config { format = "labml", quirk = "off", max_digits = 3 }
    assert.are.equal("off", l2.quirk)
    assert.are.equal(3, l2.max_digits)
    assert.are.equal("on", rp.experiment.config { quirk = "on" }.quirk)

    assert.are.equal(64, rp.experiment.config { d_model = 16 }.d_ff)
    assert.are.equal(10, rp.experiment.config { d_model = 16, d_ff = 10 }.d_ff)
    assert.are.equal(1, rp.experiment.config { steps = 50 }.log_every)
    assert.are.equal(1, rp.experiment.config { steps = 1 }.log_every)
    assert.are.equal(2, rp.experiment.config { steps = 250 }.log_every)
    assert.are.equal(7, rp.experiment.config { steps = 250, log_every = 7 }.log_every)
  end)

  it("converts strings from a command line", function()
    local c = rp.experiment.config { lr = "0.5", steps = "3", d_model = "32", pe = "roper",
      eval_digits = "9,10", task = "addition", fraction_v = "1e-1", seed = "7.0" }
    assert.are.equal(0.5, c.lr)
    assert.are.equal("float", math.type(c.lr))
    assert.are.equal(3, c.steps)
    assert.are.equal("integer", math.type(c.steps))
    assert.are.equal(32, c.d_model)
    assert.are.equal(128, c.d_ff) -- resolved from the converted width
    assert.are.equal("integer", math.type(c.seed))
    assert.are.equal(7, c.seed)
    assert.are.equal(0.1, c.fraction_v)
    assert.are.equal("roper", c.pe)
    assert.are.equal("9,10", c.eval_digits)
    -- numbers given as floats with integer values become integers
    assert.are.equal("integer", math.type(rp.experiment.config { steps = 4.0 }.steps))
  end)

  it("raises for an unknown key, naming every known key", function()
    local names = {}
    for i, k in ipairs(rp.experiment.keys()) do names[i] = k.name end
    local msg, bare = err_of(rp.experiment.config, { d_modle = 16 })
    assert.truthy(msg:find("unknown option 'd_modle' (known: ", 1, true), msg)
    assert.are.equal("bad argument #1 to 'rp.experiment.config' (unknown option 'd_modle' (known: "
      .. table.concat(names, ", ") .. "))", bare)
    assert.truthy(bare:find(", d_model, ", 1, true))
  end)

  it("raises exact messages for bad values", function()
    local cfg = rp.experiment.config
    raises_for("config", "option 'pe' must be one of " .. table.concat(h.pe_names(), ", ")
      .. ", got bogus", cfg, { pe = "bogus" })
    raises_for("config", "option 'steps' must be an integer, got 2.5", cfg, { steps = 2.5 })
    raises_for("config", "option 'steps' must be an integer, got 2.5", cfg, { steps = "2.5" })
    raises_for("config", "option 'steps' must be an integer, got abc", cfg, { steps = "abc" })
    raises_for("config", "option 'lr' must be a finite number, got fast", cfg, { lr = "fast" })
    -- the optimiser's ranges are core's rows, worded as rp.optim words them
    raises_for("config", "option 'lr' must be a finite number > 0, got -1", cfg, { lr = -1 })
    raises_for("config", "option 'min_lr' must be at most 3.40282347e+38 (float32's largest), got "
      .. "1e+39", cfg, { min_lr = 1e39 })
    raises_for("config", "option 'clip' must be a finite number >= 0 (0 = off), got -1", cfg,
      { clip = -1 })
    raises_for("config", "option 'warmup' must be >= 0, got -3", cfg, { warmup = -3 })
    local tiny <close> = rp.model { vocab = 4, d_model = 8, heads = 1, layers = 1, seq_len = 4 }
    for _, o in ipairs { { "lr", 0 }, { "weight_decay", -0.5 }, { "min_lr", 1e39 },
      { "clip", -2 } } do
      local ok, e = pcall(rp.optim.adamw, tiny, { [o[1]] = o[2] })
      assert.is_false(ok)
      local core = e:match("%((.*)%)$")
      raises_for("config", ("option '%s' %s"):format(o[1], core:sub(#o[1] + 2)), cfg,
        { [o[1]] = o[2] })
    end
    raises_for("config", "option 'steps' must be >= 1, got 0", cfg, { steps = 0 })
    raises_for("config", "option 'problems' must be >= 1, got -2", cfg, { problems = -2 })
    raises_for("config", "option 'temperature' must be > 0 for sampling, got 0", cfg, { temperature = 0 })
    raises_for("config", "option 'eval_digits' applies to the addition task only", cfg, { eval_digits = "9" })
    raises_for("config", "option 'eval_digits' must list digit counts in 1..18, got 19", cfg,
      { task = "addition", eval_digits = "9,19" })
    raises_for("config", "option 'path' must be a string, got 3", cfg, { path = 3 })
    -- a NUL byte, which the file calls would cut a path at, in any string key
    raises_for("config", "option 'corpus' contains a NUL byte", cfg, { corpus = "data\0x" })
    raises_for("config", "option 'eval_lengths' contains a NUL byte", cfg, { eval_lengths = "3\0" })
    -- a list that names nothing or a length twice (evaluated twice), an integer past 2^53, and
    -- a JSON null (cjson's) named as such
    raises_for("config", "option 'eval_lengths' must list lengths (integers >= 1), got nothing",
      cfg, { eval_lengths = "," })
    raises_for("config", "option 'eval_lengths' names 14 twice", cfg, { eval_lengths = "14,14" })
    raises_for("config", "option 'seed' must be an integer within 2^53, got 9223372036854775807",
      cfg, { seed = math.maxinteger })
    -- (math.abs of the smallest integer is itself: the bound is checked on both sides)
    raises_for("config", "option 'seed' must be an integer within 2^53, got -9223372036854775808",
      cfg, { seed = math.mininteger })
    raises_for("config", "option 'steps' must be an integer, got null", cfg,
      { steps = require("cjson").null })
    raises_for("config", "table expected, got number", cfg, 5)
    -- greedy decoding needs no temperature
    assert.are.equal(0, cfg { temperature = 0, decode = "greedy" }.temperature)
  end)
end)

describe("rp.experiment.better and keys", function()
  it("compares by the metric's direction, nil (diverged) being worst", function()
    assert.is_true(rp.experiment.better("loss", 0.5, 0.6))
    assert.is_false(rp.experiment.better("loss", 0.6, 0.5))
    assert.is_true(rp.experiment.better("correct", 6, 5))
    assert.is_false(rp.experiment.better("correct", 5, 6))
    assert.is_true(rp.experiment.better("loss", 9, nil))
    assert.is_false(rp.experiment.better("correct", nil, 0))
    assert.is_false(rp.experiment.better("correct", nil, nil))
  end)

  it("lists the keys as fresh copies with their task", function()
    local k = rp.experiment.keys()
    assert.are.equal("task", k[1].name)
    local byname = {}
    for _, e in ipairs(k) do byname[e.name] = e end
    assert.are.equal("addition", byname.max_digits.task)
    assert.is_nil(byname.pe.task)
    assert.are.equal("int", byname.steps.kind)
    local npe = #byname.pe.kind
    assert.is_true(npe >= 6)
    table.insert(byname.pe.kind, "mine")
    local again = {}
    for _, e in ipairs(rp.experiment.keys()) do again[e.name] = e end
    assert.are.equal(npe, #again.pe.kind)
    assert.is_true(rp.experiment.applies("path", "text"))
    assert.is_false(rp.experiment.applies("path", "addition"))
    assert.is_true(rp.experiment.applies("lr", "text"))
  end)
end)

---------------------------------------------------------------------------------------------------
-- Checks the fields of a (non-diverged) result against each other and against cfg.
local function check_result(r, cfg, metric)
  local c = r.config
  assert.are.equal(metric, r.metric)
  assert.is_false(r.diverged)
  for k, v in pairs(cfg) do assert.are.equal(v, c[k], k) end
  assert.is_true(math.type(r.params) == "integer" and r.params > 0)
  for _, f in ipairs { "seconds_train", "seconds_eval", "tokens_per_s", "eval_loss",
                       "final_train_loss" } do
    assert.is_true(is_finite(r[f]), f)
  end
  -- measured on a clock finer than whole seconds (os.time once made a short run's 0 s and its
  -- rate the tokens over 1e-9 s); the rate: the tokens trained (the curve's last point) per second
  assert.are.equal("float", math.type(r.seconds_train))
  assert.is_true(r.seconds_train > 0 and r.seconds_eval > 0)
  assert.are.equal(r.curve[#r.curve].tokens / r.seconds_train, r.tokens_per_s)
  -- the CPU time of the training and of the whole run (os.clock: every thread of the process)
  assert.are.equal("float", math.type(r.cpu_seconds_train))
  assert.is_true(r.cpu_seconds_train > 0 and r.cpu_seconds > r.cpu_seconds_train,
    ("%s %s"):format(r.cpu_seconds_train, r.cpu_seconds))
  if metric == "correct" then
    assert.are.equal(r.correct, r.value)
    assert.is_true(math.type(r.correct) == "integer", "correct is an integer")
    assert.is_true(r.correct >= 0 and r.correct <= c.problems)
    assert.is_true(r.correct_greedy >= 0 and r.correct_greedy <= c.problems)
    assert.is_true(math.abs(r.accuracy - r.correct / c.problems) < 1e-12)
    assert.are.equal(math.min(3, c.problems), #r.examples)
    local ok = 0
    for _, e in ipairs(r.examples) do
      assert.is_string(e.question)
      if e.ok then ok = ok + 1 end
    end
    -- with at most 3 problems the examples are every record
    if c.problems <= 3 then assert.are.equal(ok, r.correct) end
  else
    assert.are.equal(r.eval_loss, r.value)
    assert.is_nil(r.correct)
  end
  -- the curve: one point per log_every steps and one at the end
  assert.are.equal(math.ceil(c.steps / c.log_every), #r.curve)
  local prev = 0
  for i, p in ipairs(r.curve) do
    assert.is_true(p.step > prev, "steps increase")
    prev = p.step
    assert.are.equal(i < #r.curve and i * c.log_every or c.steps, p.step)
    assert.are.equal(p.step * c.batch * c.seq_len, p.tokens)
    assert.is_true(is_finite(p.loss) and p.loss > 0)
    assert.is_true(is_finite(p.lr) and p.lr > 0)
  end
  local k, s = math.min(5, #r.curve), 0
  for i = #r.curve - k + 1, #r.curve do s = s + r.curve[i].loss end
  assert.is_true(math.abs(s / k - r.final_train_loss) < 1e-12, "final_train_loss")
end

describe("rp.experiment.run", function()
  it("trains and evaluates substring_index (metric correct)", function()
    local cfg = tiny { task = "substring_index" }
    local r = rp.experiment.run(cfg)
    check_result(r, cfg, "correct")
    assert.are.equal(3, #r.curve)
    assert.is_nil(r.by_digits)
  end)

  it("trains addition and evaluates at other operand lengths (eval_digits)", function()
    local cfg = tiny { task = "addition", eval_digits = "2,3", max_digits = 2, seq_len = 64,
      steps = 6, log_every = 1 }
    local r = rp.experiment.run(cfg)
    check_result(r, cfg, "correct")
    assert.are.equal(6, #r.curve)
    assert.are.equal(2, #r.by_digits)
    for i, d in ipairs { 2, 3 } do
      local e = r.by_digits[i]
      assert.are.equal(d, e.digits)
      assert.is_true(e.accuracy >= 0 and e.accuracy <= 1)
      assert.are.equal(math.floor(e.accuracy * cfg.problems + 0.5), e.correct)
      assert.is_true(e.correct >= 0 and e.correct <= cfg.problems)
    end
  end)

  it("trains substring_prefix (metric loss)", function()
    local cfg = tiny { task = "substring_prefix", seq_len = 64, steps = 4, log_every = 3 }
    local r = rp.experiment.run(cfg)
    check_result(r, cfg, "loss")
    assert.are.equal(2, #r.curve)
    assert.are.same({ 3, 4 }, { r.curve[1].step, r.curve[2].step })
  end)

  it("trains on a text file (metric loss, the validation split)", function()
    local path = h.tmpname()
    write(path, ("héllo wörld ☃ naïve café\nthe quick brown fox\n"):rep(40))
    local cfg = tiny { task = "text", path = path, steps = 3, log_every = 1 }
    local ok, r = pcall(rp.experiment.run, cfg)
    local missing = path .. ".missing"
    local ok2, msg = pcall(rp.experiment.run, tiny { task = "text", path = missing })
    os.remove(path)
    assert.is_true(ok, tostring(r))
    check_result(r, cfg, "loss")
    assert.is_false(ok2)
    assert.are.equal("bad argument #1 to 'rp.experiment.run' (" .. missing
      .. ": No such file or directory)", msg)
  end)

  it("with valid_every adds the validation loss to the curve and leaves training as it was",
    function()
    local cfg = tiny { task = "substring_prefix", steps = 6, log_every = 1 }
    local plain = rp.experiment.run(cfg)
    cfg.valid_every = 3
    local r = rp.experiment.run(cfg)
    assert.are.equal(6, #r.curve)
    for i, p in ipairs(r.curve) do
      -- the training loss is the same bits: the evaluations draw nothing from the data stream
      assert.are.equal(plain.curve[i].loss, p.loss)
      if i % 3 == 0 then
        assert.is_true(is_finite(p.valid_loss), "point " .. i)
      else
        assert.is_nil(p.valid_loss, "point " .. i)
      end
    end
    -- the last point's validation loss is the evaluation loss: the same batches of eval_seed
    assert.are.equal(r.eval_loss, r.curve[6].valid_loss)
    assert.are_not.equal(r.curve[3].valid_loss, r.curve[6].valid_loss)
    assert.are.equal(plain.eval_loss, r.eval_loss)
    raises_for("run",
      "option 'valid_every' must be a multiple of log_every (2), got 3",
      rp.experiment.run, tiny { task = "substring_prefix", valid_every = 3 })
    raises_for("run", "option 'valid_every' must be >= 0, got -1",
      rp.experiment.run, tiny { task = "substring_prefix", valid_every = -1 })
  end)

  it("is deterministic for a config; another seed trains differently", function()
    local cfg = tiny { task = "substring_index", log_every = 1 }
    local a = rp.experiment.run(cfg)
    local b = rp.experiment.run(cfg)
    assert.are.same(a.curve, b.curve)
    assert.are.equal(a.value, b.value)
    assert.are.equal(a.eval_loss, b.eval_loss)
    assert.are.equal(a.final_train_loss, b.final_train_loss)
    assert.are.same(a.examples, b.examples)
    local c = rp.experiment.run(tiny { task = "substring_index", log_every = 1, seed = 2 })
    assert.are_not.same(a.curve, c.curve)
    assert.are_not.equal(a.curve[1].loss, c.curve[1].loss)
    assert.are_not.equal(a.eval_loss, c.eval_loss)
    -- the evaluation problems depend on eval_seed only, the same for every run
    for i = 1, #a.examples do
      assert.are.equal(a.examples[i].question, c.examples[i].question)
      assert.are.equal(a.examples[i].answer, c.examples[i].answer)
    end
    local d = rp.experiment.run(tiny { task = "substring_index", log_every = 1, steps = 1,
      eval_seed = 99 })
    assert.are_not.equal(a.examples[1].question, d.examples[1].question)
  end)

  it("calls progress once per step with (step, steps, loss)", function()
    local cfg = tiny { task = "substring_prefix", seq_len = 64, steps = 4, log_every = 1 }
    local calls = {}
    local r = rp.experiment.run(cfg, function(...) calls[#calls + 1] = table.pack(...) end)
    assert.are.equal(4, #calls)
    for i, c in ipairs(calls) do
      assert.are.equal(3, c.n)
      assert.are.equal(i, c[1])
      assert.are.equal(4, c[2])
      assert.is_true(is_finite(c[3]))
      -- with log_every 1 each curve point is that step's loss
      assert.is_true(math.abs(c[3] - r.curve[i].loss) < 1e-12)
    end
  end)

  it("raises for an invalid progress argument or config before training", function()
    raises("bad argument #2 to 'rp.experiment.run' (function expected, got number)",
      rp.experiment.run, tiny(), 5)
    raises("bad argument #2 to 'rp.experiment.run' (function expected, got table)",
      rp.experiment.run, tiny(), {})
    raises_for("run", "option 'steps' must be >= 1, got 0", rp.experiment.run, tiny { steps = 0 })
  end)

  -- init: the weights of a checkpoint under the run's model keys (a longer seq_len and YaRN
  -- here); a step at lr 1e-9 leaves them within 1e-7 of the saved ones, while a fresh model of
  -- the same seed is far from them.
  it("starts from a checkpoint's weights with init (fine-tuning at another seq_len)", function()
    local dir = tmpdir()
    local ckpt = dir .. "/a.ckpt"
    rp.experiment.run(tiny { task = "substring_prefix", steps = 20 }, nil, { save = ckpt })
    local cfg = tiny { task = "substring_prefix", init = ckpt, seq_len = 64, scaling = "yarn",
      scaling_factor = 2, orig_len = 32, steps = 1, lr = 1e-9, warmup = 0 }
    local r, m = rp.experiment.run(cfg, nil, { keep_model = true })
    assert.are.equal(ckpt, r.config.init)
    assert.are.equal(64, m:config().seq_len)
    assert.are.equal("yarn", m:config().scaling)
    local saved = rp.load(ckpt)
    local _, fresh = rp.experiment.run(tiny { task = "substring_prefix", steps = 1, lr = 1e-9,
      warmup = 0 }, nil, { keep_model = true })
    local near, far = 0, 0
    for i, p in ipairs(saved:params()) do
      near = math.max(near, (p.tensor - m:params()[i].tensor):abs():max())
      far = math.max(far, (p.tensor - fresh:params()[i].tensor):abs():max())
    end
    assert.is_true(near < 1e-7, "init moved the weights by " .. near)
    assert.is_true(far > 1e-3, "a fresh model is as near: " .. far)
    h.remove_tree(dir)
  end)

  it("refuses an init that is missing, not a checkpoint, or of another layout", function()
    local dir = tmpdir()
    local ckpt = dir .. "/a.ckpt"
    rp.experiment.run(tiny { task = "substring_prefix", steps = 1 }, nil, { save = ckpt })
    write(dir .. "/x.txt", "hello")
    rp.zeros { 2, 2 }:save(dir .. "/t.npy")
    -- each refused by run and, before anything is built, by check (the scripts' check)
    for _, c in ipairs {
      { "/none.ckpt: No such file or directory", tiny { init = dir .. "/none.ckpt" } },
      { "/x.txt: not a roper checkpoint, .npy or safetensors file",
        tiny { init = dir .. "/x.txt" } },
      { "/t.npy holds roper.Tensor, not a model", tiny { init = dir .. "/t.npy" } },
      { "/a.ckpt: parameter embed.weight is 5x32 in the derived model, 5x16 in the model (the "
        .. "overrides change the layout)", tiny { task = "substring_prefix", init = ckpt,
        d_model = 32 } },
    } do
      raises_for("run", "option 'init': " .. dir .. c[1], rp.experiment.run, c[2])
      raises_for("check", "option 'init': " .. dir .. c[1], rp.experiment.check, c[2])
    end
    -- a layout the checkpoint gives passes check (seq_len may change)
    assert.is_table(rp.experiment.check(tiny { task = "substring_prefix", init = ckpt,
      seq_len = 40 }))
    h.remove_tree(dir)
  end)

  it("stops at a non-finite loss and marks the run diverged", function()
    local calls = 0
    local r = rp.experiment.run(tiny { steps = 6, log_every = 1, lr = 1e30, clip = 0,
      schedule = "constant" }, function() calls = calls + 1 end)
    assert.is_true(r.diverged)
    assert.is_nil(r.value)
    assert.is_nil(r.eval_loss)
    assert.is_true(#r.curve < 6)
    assert.is_nil(r.curve[#r.curve].loss)
    assert.are.equal(#r.curve, calls) -- the diverged step is reported too
    assert.is_true(rp.experiment.better("correct", 0, r.value))
  end)
end)

---------------------------------------------------------------------------------------------------
describe("scripts/train.lua", function()
  local dir
  setup(function() dir = tmpdir() end)
  teardown(function() os.execute("rm -rf " .. sh_quote(dir)) end)

  it("writes the validation loss of valid_every as the CSV's last column", function()
    local out = dir .. "/v/r.json"
    local so, se, code = run(("%s scripts/train.lua --task substring_prefix --steps 4 --log-every 1 "
      .. "--valid-every 2 --allow-unused %s --out %s"):format(sh_quote(BIN), TINY_ARGS, sh_quote(out)))
    assert.are.equal(0, code, so .. se)
    local r = read_json(out)
    local csv = lines(assert(read(dir .. "/v/r.csv")))
    assert.are.equal("step,tokens,loss,lr,valid_loss", csv[1])
    for i = 1, 4 do
      local last = csv[i + 1]:match(",([^,]*)$")
      if i % 2 == 0 then
        assert.is_true(math.abs(tonumber(last) - r.curve[i].valid_loss) < 1e-8, csv[i + 1])
      else
        assert.are.equal("", last)
      end
    end
  end)

  it("writes the result JSON and the loss curve CSV", function()
    local out = dir .. "/sub/r.json"
    local so, se, code = run(("%s scripts/train.lua --steps 3 --log-every 1 %s --out %s")
      :format(sh_quote(BIN), TINY_ARGS, sh_quote(out)))
    assert.are.equal(0, code, so .. se)
    assert.truthy(so:find("correct %d+ of 2"), so)
    local r = read_json(out)
    -- the summary's time and rate are the result's (check_result: measured, tokens per second)
    assert.truthy(so:find((", 3 steps in %.1f s (%.0f tokens/s), eval %.1f s\n"):format(
      r.seconds_train, r.tokens_per_s, r.seconds_eval), 1, true), so)
    assert.are.equal(3, r.config.steps)
    assert.are.equal(16, r.config.d_model)
    assert.are.equal("correct", r.metric)
    assert.are.equal(3, #r.curve)
    local csv = lines(assert(read(dir .. "/sub/r.csv")))
    assert.are.equal(4, #csv)
    assert.are.equal("step,tokens,loss,lr", csv[1])
    for i = 1, 3 do
      local step, tokens, loss = csv[i + 1]:match("^(%d+),(%d+),([^,]+),[^,]+$")
      assert.are.equal(i, tonumber(step))
      assert.are.equal(i * 4 * 32, tonumber(tokens))
      assert.is_true(math.abs(tonumber(loss) - r.curve[i].loss) < 1e-8)
    end
  end)

  it("reads --config and lets options override it", function()
    local cfgfile, out = dir .. "/c.json", dir .. "/o.json"
    write(cfgfile, '{"steps": 2, "d_model": 16, "heads": 2, "layers": 1, "seq_len": 32, '
      .. '"batch": 4, "problems": 2, "valid_batches": 1, "pe": "roper"}')
    local so, se, code = run(("%s scripts/train.lua --config %s --pe none --out %s")
      :format(sh_quote(BIN), sh_quote(cfgfile), sh_quote(out)))
    assert.are.equal(0, code, so .. se)
    local r = read_json(out)
    assert.are.equal("none", r.config.pe)
    assert.are.equal(2, r.config.steps)
  end)

  it("exits 2 on a bad option value, with the message", function()
    local so, se, code = run(sh_quote(BIN) .. " scripts/train.lua --pe bogus")
    assert.are.equal(2, code, so .. se)
    assert.truthy(se:find("train.lua: option 'pe' must be one of "
      .. table.concat(h.pe_names(), ", ") .. ", got bogus\n", 1, true), se)
    assert.are.equal(1, select(2, se:gsub("\n", "")), se) -- one line, no traceback
  end)

  it("fails on a missing --config file", function()
    local missing = dir .. "/nope.json"
    local so, se, code = run(sh_quote(BIN) .. " scripts/train.lua --config " .. sh_quote(missing))
    assert.are.equal(2, code)
    assert.are.equal("train.lua: --config " .. missing .. ": no such file\n", se)
  end)

  it("prints its help with every config option (--help-all)", function()
    local so, se, code = run(sh_quote(BIN) .. " scripts/train.lua --help-all")
    assert.are.equal(0, code, se)
    assert.truthy(so:find("--d-model", 1, true), so)
    assert.truthy(so:find("--fraction-v", 1, true), so)
    assert.truthy(so:find("--config", 1, true), so)
  end)
end)

---------------------------------------------------------------------------------------------------
-- The "Every run:" table's rows (and the lines before it) of a compare summary.md.
local function table_rows_after(md, heading)
  local at = md:find(heading, 1, true)
  if not at then return nil end
  local rows = {}
  local started = false
  for l in (md:sub(at) .. "\n"):gmatch("([^\n]*)\n") do
    if l:match("^|") then
      started = true
      if not l:match("^|%-") then rows[#rows + 1] = l end
    elseif started then
      break
    end
  end
  table.remove(rows, 1) -- the header
  return rows
end

describe("scripts/compare.lua", function()
  local dir, out, base_cmd
  setup(function()
    dir = tmpdir()
    out = dir .. "/cmp"
    base_cmd = ("%s scripts/compare.lua --seeds 2 --steps 3 %s --jobs 2 --out %s")
      :format(sh_quote(BIN), TINY_ARGS, sh_quote(out))
  end)
  teardown(function() os.execute("rm -rf " .. sh_quote(dir)) end)

  local runs = { "rope-s1", "rope-s2", "roper-s1", "roper-s2" }
  local function snapshot()
    local s = {}
    for _, r in ipairs(runs) do
      s[r .. ".json"] = read(out .. "/runs/" .. r .. ".json")
      s[r .. ".csv"] = read(out .. "/runs/" .. r .. ".csv")
    end
    return s
  end
  local first

  it("runs methods x seeds and writes the summary, tables and plots", function()
    local so, se, code = run(base_cmd .. " --quiet")
    assert.are.equal(0, code, so .. se)
    local md = assert(read(out .. "/summary.md"))
    assert.are.equal(md, so) -- the summary is also printed
    assert.truthy(md:find("| method | runs | drop worst, mean %(of %d+%) |"), md) -- of how many
    local main = table_rows_after(md, "| method | runs")
    assert.are.equal(2, #main, md)
    assert.truthy(main[1]:match("^| rope | 2 | "), main[1])
    assert.truthy(main[2]:match("^| roper | 2 | "), main[2])
    assert.truthy(md:find("| roper - rope |", 1, true), md)
    local every = table_rows_after(md, "Every run:")
    assert.are.equal(4, #every, md)
    for i, want in ipairs { "| rope | 1 |", "| rope | 2 |", "| roper | 1 |", "| roper | 2 |" } do
      assert.are.equal(want, every[i]:sub(1, #want))
    end
    local csv = lines(assert(read(out .. "/summary.csv")))
    assert.are.equal(5, #csv)
    assert.truthy(csv[1]:find("^method,seed,pe,value,"), csv[1])
    assert.truthy(csv[2]:find("^rope,1,rope,"), csv[2])
    assert.truthy(csv[5]:find("^roper,2,roper,"), csv[5])
    local png = assert(read(out .. "/loss.png"))
    assert.are.equal("\137PNG\r\n\26\n", png:sub(1, 8))
    assert.truthy(assert(read(out .. "/loss.svg")):find("<svg", 1, true))
    local sj = read_json(out .. "/summary.json")
    assert.are.equal("correct", sj.metric)
    assert.are.equal(2, #sj.methods)
    assert.are.equal(0, sj.failures)
    first = snapshot()
    for _, r in ipairs(runs) do
      assert.is_string(first[r .. ".json"], r)
      local res = cjson.decode(first[r .. ".json"])
      assert.are.equal(3, res.config.steps)
      assert.are.equal(r:match("^(%a+)"), res.config.pe)
      assert.are.equal(tonumber(r:match("(%d+)$")), res.config.seed)
      assert.is_string(first[r .. ".csv"], r)
    end
    -- the value column of the csv is each run's value
    local rs1 = cjson.decode(first["rope-s1.json"])
    assert.are.equal(rs1.value, tonumber(csv[2]:match("^rope,1,rope,([^,]*),")))
    -- no leftovers of the runner
    local names = ls(out .. "/runs")
    assert.is_nil(names:find("%.progress"), names)
    assert.is_nil(names:find("%.rc"), names)
    assert.is_nil(names:find("%.cfg%.json"), names)
    assert.is_nil(names:find("%.tmp%-"), names)
  end)

  it("draws every run's loss curve thin under each method's mean, in loss.png and loss.svg",
    function()
    assert.is_not_nil(first, "needs the first test")
    -- the data blocks of loss.dat (gnuplot's index order), each a list of rows of numbers
    local blocks = h.gnuplot_blocks(assert(read(out .. "/loss.dat")))
    -- the plot command: thin lines in the method's colour (the first of each titled with the
    -- method), then one thick dashed line per method titled as the mean of its runs
    local gp = assert(read(out .. "/loss.gp"))
    local thin, thick = {}, {}
    for index, rest in gp:gmatch('index (%d+) using 1:2 with lines ([^,\n]*)') do
      if not rest:find("mean of the", 1, true) then
        assert.is_nil(next(thick), "a run drawn over a mean: " .. gp)
        assert.truthy(rest:find("^lw 1%.2 lc rgb \"#60"), rest)
        thin[#thin + 1] = tonumber(index) + 1
      else
        assert.truthy(rest:find("^lw 3 dt 2 "), rest)
        thick[#thick + 1] = { tonumber(index) + 1, rest:match('title "([^"]*)"') }
      end
    end
    assert.are.equal(4, #thin, gp)
    assert.are.same({ "rope: mean of the 2 runs", "roper: mean of the 2 runs" },
      { thick[1][2], thick[2][2] })
    -- each thin line is one run's curve (tokens, loss), each thick one the mean of its runs'
    local curves = {}
    for i, r in ipairs(runs) do
      local res = cjson.decode(first[r .. ".json"])
      local rows = {}
      for j, p in ipairs(res.curve) do rows[j] = { p.tokens / 1e6, p.loss } end -- millions
      curves[i] = rows
      local got = blocks[thin[i]]
      assert.are.equal(#rows, #got, r)
      for j = 1, #rows do
        assert.is_true(math.abs(rows[j][1] - got[j][1]) <= 1e-9 * rows[j][1], r)
        assert.is_true(math.abs(rows[j][2] - got[j][2]) <= 1e-5 * rows[j][2], r)
      end
    end
    for m = 1, 2 do
      local mean = blocks[thick[m][1]]
      for j, row in ipairs(mean) do
        local a, b = curves[2 * m - 1][j][2], curves[2 * m][j][2]
        assert.is_true(math.abs(curves[2 * m - 1][j][1] - row[1]) <= 1e-9 * row[1])
        assert.is_true(math.abs((a + b) / 2 - row[2]) <= 1e-5 * row[2], thick[m][2])
      end
    end
    -- the SVG has a path per line: 4 runs and 2 means (and the key's samples)
    local svg = assert(read(out .. "/loss.svg"))
    local paths = select(2, svg:gsub("<path", ""))
    assert.is_true(paths >= 6, paths)
  end)

  it("does not rerun finished runs when the command is repeated", function()
    assert.is_not_nil(first, "needs the previous test")
    local so, se, code = run(base_cmd)
    assert.are.equal(0, code, so .. se)
    for _, r in ipairs { "rope s1", "rope s2", "roper s1", "roper s2" } do
      assert.truthy(se:find("found " .. r .. ":", 1, true), se)
    end
    assert.is_nil(se:find("\ndone ", 1, true), se)
    assert.are.same(first, snapshot())
  end)

  it("with stdout and stderr in one file, the table is whole and before the \"wrote\" line",
    function()
    assert.is_not_nil(first, "needs the first test")
    local log = dir .. "/both.log"
    local so, se, code = run("(" .. base_cmd .. " > " .. sh_quote(log) .. " 2>&1)")
    assert.are.equal(0, code, so .. se)
    local both = assert(read(log))
    local md = assert(read(out .. "/summary.md"))
    -- the progress lines, then the table in one piece, then the last line
    local at = both:find(md, 1, true)
    assert.is_not_nil(at, "the table is not in one piece:\n" .. both)
    local before, after = both:sub(1, at - 1), both:sub(at + #md)
    assert.truthy(before:find("found roper s2:", 1, true), before)
    assert.truthy(before:find("\n$"), before)
    assert.are.equal(("compare: wrote %s/summary.md, summary.csv, summary.json, report.html, "
      .. "loss.png, loss.svg\n"):format(out), after)
  end)

  it("stops when a run file holds another config", function()
    assert.is_not_nil(first, "needs the first test")
    local cmd = base_cmd:gsub("%-%-steps 3", "--steps 4")
    assert.are_not.equal(base_cmd, cmd)
    local so, se, code = run(cmd .. " --quiet")
    assert.are_not.equal(0, code)
    assert.truthy(se:find("holds a run with another config", 1, true), se)
    assert.truthy(se:find("steps", 1, true), se)
    assert.are.same(first, snapshot())
  end)

  it("takes a method with config keys and a seed count", function()
    local o2 = dir .. "/m"
    local so, se, code = run(("%s scripts/compare.lua --seeds 2 --steps 2 %s --jobs 2 --quiet "
      .. "--methods roper:fraction_v=0.5@1 --out %s"):format(sh_quote(BIN), TINY_ARGS, sh_quote(o2)))
    assert.are.equal(0, code, so .. se)
    local md = assert(read(o2 .. "/summary.md"))
    local main = table_rows_after(md, "| method | runs")
    assert.are.equal(1, #main, md)
    assert.truthy(main[1]:find("^| roper:fraction_v=0.5 | 1 | "), main[1])
    local every = table_rows_after(md, "Every run:")
    assert.are.equal(1, #every, md)
    local json = {}
    for _, n in ipairs(lines(ls(o2 .. "/runs"))) do
      if n:match("%.json$") then json[#json + 1] = n end
    end
    assert.are.same({ "roper_fraction_v=0.5-s1.json" }, json)
    local r = read_json(o2 .. "/runs/roper_fraction_v=0.5-s1.json")
    assert.are.equal(0.5, r.config.fraction_v)
    assert.are.equal("roper", r.config.pe)
    assert.are.equal(1, r.config.seed)
  end)

  it("exits 2 on a method that is not pe:key=value", function()
    local o3 = dir .. "/bad"
    local so, se, code = run(("%s scripts/compare.lua --methods roper:nokey --out %s --quiet")
      :format(sh_quote(BIN), sh_quote(o3)))
    assert.are.equal(2, code, so .. se)
    assert.truthy(se:find("compare.lua: method roper:nokey: 'nokey' is not key=value\n", 1, true), se)
    -- nothing was created
    assert.is_nil(read(o3 .. "/summary.md"))
    local so2, se2, code2 = run(("%s scripts/compare.lua --methods bogus --out %s --quiet")
      :format(sh_quote(BIN), sh_quote(o3)))
    assert.are.equal(2, code2, so2 .. se2)
    assert.truthy(se2:find("compare.lua: method bogus: option 'pe' must be one of", 1, true), se2)
    -- a method's own seed (the seeds are --seeds and --first-seed: it would be overwritten), and
    -- seeds that would overflow or pass 2^53: refused before anything
    for _, c in ipairs {
      { "--methods rope:seed=3", "compare.lua: method rope:seed=3: seed is not a method's key (the "
        .. "seeds are --seeds and --first-seed)\n" },
      { "--seeds 9223372036854775807", "compare.lua: --seeds must be an integer in 1..100000\n" },
      { "--seeds 2 --first-seed 9223372036854775807", "compare.lua: --first-seed must be an "
        .. "integer >= -2^53, and --first-seed + --seeds - 1 at most 2^53\n" },
      { "--seeds 2 --first-seed 9007199254740992", "compare.lua: --first-seed must be an "
        .. "integer >= -2^53, and --first-seed + --seeds - 1 at most 2^53\n" },
    } do
      local so4, se4, code4 = run(("%s scripts/compare.lua %s --out %s --quiet")
        :format(sh_quote(BIN), c[1], sh_quote(o3)))
      assert.are.equal(2, code4, so4 .. se4)
      assert.are.equal(c[2], se4)
    end
    assert.is_nil(read(o3 .. "/summary.md"))
    -- an --out that is a file, or empty: named as the user gave it
    local afile = dir .. "/afile"
    h.write(afile, "x")
    for _, c in ipairs { { afile, "--out " .. afile .. ": not a folder (a regular file)" },
      { "''", "--out: a folder name expected, got an empty one" } } do
      for _, script in ipairs { "compare.lua --seeds 1", "sweep.lua --grid pe=rope" } do
        local so5, se5, code5 = run(("%s scripts/%s --out %s --quiet"):format(sh_quote(BIN),
          script, c[1]))
        assert.are.equal(2, code5, so5 .. se5)
        assert.are.equal(script:match("^%S+") .. ": " .. c[2] .. "\n", se5)
      end
    end
  end)
end)

---------------------------------------------------------------------------------------------------
describe("scripts/sweep.lua", function()
  local dir, out, tail
  setup(function()
    dir = tmpdir()
    out = dir .. "/sw"
    tail = (" --steps 2 %s --jobs 2 --out %s"):format(TINY_ARGS, sh_quote(out))
  end)
  teardown(function() os.execute("rm -rf " .. sh_quote(dir)) end)
  local function sweep(args) return run(sh_quote(BIN) .. " scripts/sweep.lua " .. args .. tail) end
  local names = { "pe-rope_seed-1", "pe-rope_seed-2", "pe-none_seed-1", "pe-none_seed-2" }
  local ran = false

  it("runs every point of the grid and averages over seeds", function()
    local so, se, code = sweep("--grid pe=rope,none --grid seed=1,2 --quiet")
    assert.are.equal(0, code, so .. se)
    ran = true
    for _, n in ipairs(names) do
      local r = read_json(out .. "/runs/" .. n .. ".json")
      assert.are.equal(n:match("pe%-(%a+)"), r.config.pe)
      assert.are.equal(tonumber(n:match("seed%-(%d+)")), r.config.seed)
      assert.are.equal(2, r.config.steps)
    end
    local md = assert(read(out .. "/summary.md"))
    local all = table_rows_after(md, "| pe | seed |")
    assert.are.equal(4, #all, md)
    for i, want in ipairs { "| rope | 1 |", "| rope | 2 |", "| none | 1 |", "| none | 2 |" } do
      assert.are.equal(want, all[i]:sub(1, #want))
    end
    local over = table_rows_after(md, "Over seeds:")
    assert.are.equal(2, #over, md)
    assert.truthy(over[1]:find("^| rope | 2 | "), over[1])
    assert.truthy(over[2]:find("^| none | 2 | "), over[2])
    assert.is_nil(md:find("Not done", 1, true))
    assert.are.equal(5, #lines(assert(read(out .. "/summary.csv"))))
    -- the loss curves: a colour per point of the other keys, its seeds thin, their mean thick
    assert.truthy(md:find(("Loss curves: `%s/loss.png`, `%s/loss.svg`."):format(out, out), 1,
      true), md)
    assert.are.equal("\137PNG\r\n\26\n", assert(read(out .. "/loss.png")):sub(1, 8))
    assert.truthy(assert(read(out .. "/loss.svg")):find("<svg", 1, true))
    local gp = assert(read(out .. "/loss.gp"))
    local thin, titles = 0, {}
    for rest in gp:gmatch("using 1:2 with lines ([^,\n]*)") do
      if rest:find("notitle", 1, true) then
        thin = thin + 1
      else
        titles[#titles + 1] = rest:match('title "([^"]*)"')
      end
    end
    -- each run in its colour, the key naming each point once and each mean as a mean
    assert.are.equal(2, thin, gp)
    assert.are.same({ "pe=rope: each run (2)", "pe=none: each run (2)",
      "pe=rope: mean of the 2 runs", "pe=none: mean of the 2 runs" }, titles)
    assert.truthy(gp:find("each run thin, the mean over its seeds thick", 1, true), gp)
    -- stdout and stderr in one file: the table in one piece before the "wrote" line
    local log = dir .. "/both.log"
    local so1, se1, code1 = run("(" .. sh_quote(BIN) .. " scripts/sweep.lua --grid pe=rope,none "
      .. "--grid seed=1,2" .. tail .. " > " .. sh_quote(log) .. " 2>&1)")
    assert.are.equal(0, code1, so1 .. se1)
    local both = assert(read(log))
    md = assert(read(out .. "/summary.md")) -- its command has no --quiet now
    local at = both:find(md, 1, true)
    assert.is_not_nil(at, "the table is not in one piece:\n" .. both)
    assert.truthy(both:sub(1, at - 1):find("found pe=none seed=2:", 1, true), both)
    assert.are.equal(("sweep: wrote %s/summary.md, summary.csv, summary.json, report.html, "
      .. "loss.png, loss.svg\n"):format(out), both:sub(at + #md))
  end)

  it("prints the commands of the runs not done, which produce them when run", function()
    assert.is_true(ran, "needs the previous test")
    local grid = "--grid pe=rope,none,roper --grid seed=1,2"
    local so, se, code = sweep(grid .. " --print-commands")
    assert.are.equal(0, code, so .. se)
    assert.truthy(se:find("sweep: 2 of 6 runs to do", 1, true), se)
    local cmds = lines(so)
    assert.are.equal(2, #cmds, so)
    -- "cd <out> && <roper> <train.lua> --config runs/<n>.cfg.json --out runs/<n>.json
    -- --threads <cores / jobs> --quiet", the paths absolute (out is absolute here)
    local abs_bin = BIN:sub(1, 1) == "/" and BIN or (h.pwd() .. "/" .. BIN)
    local threads = math.max(1, h.nproc() // 2) -- --jobs 2
    for i, n in ipairs { "pe-roper_seed-1", "pe-roper_seed-2" } do
      local c = cmds[i]
      assert.are.equal(("cd %s && %s %s/scripts/train.lua --config runs/%s.cfg.json --out "
        .. "runs/%s.json --threads %d --quiet"):format(out, abs_bin, h.pwd(), n, n, threads), c)
      assert.is_nil(read(out .. "/runs/" .. n .. ".json"))
      assert.are.equal(threads, read_json(out .. "/runs/" .. n .. ".cfg.json").threads)
    end
    -- before they run, --summary reports them as missing
    local so1, se1, code1 = sweep(grid .. " --summary")
    assert.are.equal(0, code1, so1 .. se1)
    assert.truthy(so1:find("Not done (2): pe=roper seed=1; pe=roper seed=2", 1, true), so1)
    for i, c in ipairs(cmds) do
      -- from another folder
      assert.is_true(os.execute("cd / && " .. c .. " > /dev/null 2>&1") == true, c)
      local n = ({ "pe-roper_seed-1", "pe-roper_seed-2" })[i]
      local r = read_json(out .. "/runs/" .. n .. ".json")
      assert.are.equal("roper", r.config.pe)
      assert.are.equal(i, r.config.seed)
      assert.are.equal(threads, r.config.threads)
    end
    -- nothing left to do
    local so2, se2, code2 = sweep(grid .. " --print-commands")
    assert.are.equal(0, code2, se2)
    assert.are.equal("", so2)
    assert.truthy(se2:find("sweep: 0 of 6 runs to do", 1, true), se2)
    -- --summary collects all six, without running anything
    local before = read(out .. "/runs/pe-rope_seed-1.json")
    local so3, se3, code3 = sweep(grid .. " --summary")
    assert.are.equal(0, code3, so3 .. se3)
    local md = assert(read(out .. "/summary.md"))
    assert.are.equal(md, so3)
    assert.are.equal(6, #table_rows_after(md, "| pe | seed |"), md)
    assert.are.equal(3, #table_rows_after(md, "Over seeds:"), md)
    assert.is_nil(md:find("Not done", 1, true), md)
    assert.are.equal(before, read(out .. "/runs/pe-rope_seed-1.json"))
  end)

  it("prints commands that run from any folder for a relative --out", function()
    local cwd = tmpdir()
    local abs_bin = BIN:sub(1, 1) == "/" and BIN or (h.pwd() .. "/" .. BIN)
    local so, se, code = run(("cd %s && %s %s/scripts/sweep.lua --grid seed=3 --threads 1 "
      .. "--steps 1 %s --out rel/sw --print-commands"):format(sh_quote(cwd), sh_quote(abs_bin),
      sh_quote(h.pwd()), TINY_ARGS))
    assert.are.equal(0, code, so .. se)
    local c = lines(so)[1]
    assert.are.equal(("cd %s/rel/sw && %s %s/scripts/train.lua --config runs/seed-3.cfg.json "
      .. "--out runs/seed-3.json --threads 1 --quiet"):format(cwd, abs_bin, h.pwd()), c)
    assert.is_true(os.execute("cd " .. sh_quote(dir) .. " && " .. c .. " > /dev/null 2>&1") == true,
      c)
    assert.are.equal(3, read_json(cwd .. "/rel/sw/runs/seed-3.json").config.seed)
    h.remove_tree(cwd)
  end)

  it("exits 2 on an unknown grid key", function()
    local so, se, code = sweep("--grid d_modle=16,32")
    assert.are.equal(2, code, so .. se)
    assert.truthy(se:find("unknown config key 'd_modle'", 1, true), se)
    local so2, se2, code2 = sweep("--grid steps=2,3")
    assert.are.equal(2, code2, so2 .. se2)
    assert.truthy(se2:find("'steps' is both a grid key and a fixed option", 1, true), se2)
    -- a value given twice, also written two ways (one run twice, racing on its files and
    -- counted as two seeds), and a key without values
    for _, c in ipairs {
      { "--grid seed=1,1", "sweep.lua: --grid seed=1,1: the value 1 is given twice\n" },
      { "--grid 'seed=1, 1'", "sweep.lua: --grid seed=1, 1: the value 1 is given twice\n" },
      { "--grid seed=1,01", "sweep.lua: points seed=1 and seed=01 are the same run\n" },
      { "--grid pe=,", "sweep.lua: --grid pe=,: expected key=v1,v2,... with at least one value\n" },
    } do
      local so3, se3, code3 = sweep(c[1])
      assert.are.equal(2, code3, so3 .. se3)
      assert.are.equal(c[2], se3)
    end
  end)
end)

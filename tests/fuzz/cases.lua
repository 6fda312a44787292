-- The cases of the fuzz test: every public function and method of the module, found by walking
-- it (so a new function is covered without a line here), called with bad values.
--
--   local cases = require "cases"
--   local list = cases.functions(rp)          -- { {name =, f =}, ... } sorted by name
--   local n = cases.count(rp, fn)             -- cases of one function
--   local desc, run = cases.case(rp, ctx, fn, i)  -- case i (1-based) of fn: a description and a
--                                                 -- function that makes the arguments and calls
--
-- A function with a valid seed call (seeds below) is called with that call's arguments, one of
-- them (or one field of an option table) replaced by each value of the battery; every tensor
-- among them (an argument or an option's value) also by degenerate tensors of its own shape
-- (degenerate_shapes: a 0 in each dim, a single row in each dim, 2^31 positions in each dim of
-- an empty tensor); then with each of its objects released, with aliased tensors, with option
-- tables whose __index releases the call's objects, and with a finalizer that releases them at
-- the first allocation inside the call. A function without a seed gets each battery value at
-- positions 1 to 3.
-- Everything is rebuilt for each case (objects get released), deterministically: case i is the
-- same in every process, so a child can start at any case.
local M = {}

local function close(x)
  local mt = getmetatable(x)
  if type(mt) == "table" and type(mt.__close) == "function" then pcall(mt.__close, x) end
end

-- ---------------------------------------------------------------- the battery
-- Each entry: {name, make(ctx) -> value}. ctx.objects holds the case's objects (filled before the
-- call), which the "closing" values release.
local function battery(rp)
  local B = {}
  local function add(name, make) B[#B + 1] = { name, make } end
  local function const(name, v) add(name, function() return v end) end
  const("nil", nil)
  const("false", false)
  const("true", true)
  for _, v in ipairs { 0, -1, 1, 2, 3 } do const(tostring(v), v) end
  const("1.5", 1.5)
  const("2^31", 2 ^ 31)
  const("2^53", math.tointeger(2 ^ 53))
  const("mininteger", math.mininteger)
  const("2^63 float", 2.0 ^ 63)
  const("1e300", 1e300)
  const("nan", 0 / 0)
  const("inf", math.huge)
  const("-inf", -math.huge)
  const("\"\"", "")
  const("\"x\"", "x")
  const("\"1\"", "1")
  const("10k string", ("a"):rep(10000))
  const("string with NUL", "a\0b")
  const("\"rope\"", "rope")
  add("function", function() return function() end end)
  add("erroring function", function() return function() error("fuzz sentinel") end end)
  add("coroutine", function() return coroutine.create(function() end) end)
  add("{}", function() return {} end)
  add("{1, 2, 3}", function() return { 1, 2, 3 } end)
  add("ragged table", function() return { { 1, 2 }, { 3 } } end)
  add("{n = 1}", function() return { n = 1 } end)
  add("table with a hole", function() return { 1, nil, 3 } end)
  add("__index releases the objects", function(ctx)
    return setmetatable({}, { __index = function()
      for _, o in ipairs(ctx.objects) do close(o) end
    end })
  end)
  add("__index raises", function()
    return setmetatable({}, { __index = function() error("fuzz sentinel") end })
  end)
  add("__index returns a table", function()
    return setmetatable({}, { __index = function() return {} end })
  end)
  add("__len raises", function()
    return setmetatable({ 1 }, { __len = function() error("fuzz sentinel") end })
  end)
  -- tensors
  add("tensor [0]", function() return rp.zeros { 0 } end)
  add("tensor [0 x 3]", function() return rp.zeros { 0, 3 } end)
  add("tensor [3 x 0]", function() return rp.zeros { 3, 0 } end)
  add("0-dim tensor", function() return rp.zeros {} end)
  add("tensor [3]", function() return rp.randn({ 3 }, rp.rng(1)) end)
  add("tensor [2 x 3]", function() return rp.randn({ 2, 3 }, rp.rng(2)) end)
  add("tensor [1 x 4 x 2 x 8]", function() return rp.randn({ 1, 4, 2, 8 }, rp.rng(3)) end)
  add("tensor of 6 dims", function() return rp.ones { 1, 2, 1, 2, 1, 2 } end)
  add("transposed view", function() return rp.randn({ 3, 4 }, rp.rng(4)):t() end)
  add("narrowed view", function() return rp.randn({ 4, 6 }, rp.rng(5)):narrow(2, 2, 3) end)
  add("selected view", function() return rp.randn({ 3, 4, 2 }, rp.rng(6)):select(2, 2) end)
  add("nan tensor", function() return rp.full({ 3 }, 0 / 0) end)
  add("inf tensor", function() return rp.full({ 2, 2 }, math.huge) end)
  add("integer tensor", function() return rp.tensor { 0, 1, 2 } end)
  add("released tensor", function()
    local t = rp.ones { 2 }
    close(t)
    return t
  end)
  -- other objects
  add("rng", function() return rp.rng(1) end)
  add("model", function(ctx) return ctx.model() end)
  add("released model", function(ctx)
    local m = ctx.model()
    close(m)
    return m
  end)
  add("optimiser", function(ctx) return rp.optim.adam(ctx.model()) end)
  add("released optimiser", function(ctx)
    local o = rp.optim.adam(ctx.model())
    close(o)
    return o
  end)
  add("task", function() return rp.tasks.addition { max_digits = 2, seq_len = 32 } end)
  add("released task", function()
    local t = rp.tasks.addition {}
    close(t)
    return t
  end)
  add("the module", function() return rp end)
  -- paths
  add("path of a FIFO", function(ctx) return ctx.dir .. "/fifo" end)
  add("/dev/zero", function() return "/dev/zero" end)
  add("/dev/null", function() return "/dev/null" end)
  add("path of a folder", function(ctx) return ctx.dir end)
  add("path of an empty folder", function(ctx) return ctx.dir .. "/emptydir" end)
  add("missing path", function(ctx) return ctx.dir .. "/missing/x" end)
  add("path of a binary file", function(ctx) return ctx.dir .. "/bin.dat" end)
  add("very long path", function() return ("a/"):rep(3000) .. "x" end)
  add("path of a .npy file", function(ctx) return ctx.npy end)
  add("path of a safetensors file", function(ctx) return ctx.safetensors end)
  return B
end

-- ---------------------------------------------------------------- the seeds
-- name -> function(ctx) returning the arguments of a valid call (a table with n).
local function pack(...) return table.pack(...) end

local function seeds(rp)
  local S = {}
  local function T(...) return rp.randn({ ... }, rp.rng(7)) end
  -- the cheapest run: a loss task (no generation), one step of a tiny model
  local function tiny_cfg()
    return { task = "substring_prefix", substr_len = 4, rnd_len = 3, steps = 1, d_model = 8,
      heads = 2, layers = 1, d_ff = 8, seq_len = 16, batch = 1, problems = 1, valid_batches = 1,
      log_every = 1 }
  end
  local function model_cfg()
    return { vocab = 5, d_model = 8, heads = 2, layers = 1, d_ff = 8, seq_len = 8, max_batch = 2,
      norm = "pre", activation = "relu", dropout = 0, pe = "roper", fraction_qk = 1,
      fraction_v = 1, base = 10000, pairing = "half", seed = 1, attention = "softmax",
      linear_rope = "after", rotate = "qkvo", fraction_q = 0.5, fraction_k = 0.5,
      fraction_o = 0.5, rel_clip = 16, rel_buckets = 32, rel_max_distance = 128,
      scaling = "yarn", scaling_factor = 2, orig_len = 4, yarn_alpha = 1, yarn_beta = 8,
      xpos = 0.4, xpos_scale_base = 16, freq = T(2) }
  end
  -- constructors and functions of the module
  S["rp.tensor"] = function() return pack({ { 1, 2 }, { 3, 4 } }) end
  S["rp.zeros"] = function() return pack({ 2, 3 }) end
  S["rp.ones"] = S["rp.zeros"]
  S["rp.full"] = function() return pack({ 2, 2 }, 1) end
  S["rp.range"] = function() return pack(1, 5, 1) end
  S["rp.linspace"] = function() return pack(0, 1, 5) end
  S["rp.eye"] = function() return pack(3) end
  S["rp.rand"] = function() return pack({ 2, 3 }, rp.rng(1)) end
  S["rp.randn"] = S["rp.rand"]
  S["rp.randint"] = function() return pack(0, 9, { 2, 3 }, rp.rng(1)) end
  S["rp.rng"] = function() return pack(1) end
  S["rp.seed"] = function() return pack(1) end
  S["rp.is_tensor"] = function() return pack(T(2)) end
  S["rp.maxdiff"] = function() return pack(T(2, 3), T(2, 3)) end
  S["rp.matmul"] = function() return pack(T(2, 3), T(3, 4)) end
  S["rp.help"] = function() return pack(rp.zeros) end
  S["rp.inspect"] = function() return pack({ 1, a = { T(2) } }, { depth = 2, width = 40, items = 3 }) end
  S["rp.tohtml"] = function() return pack(T(2, 3)) end
  S["rp.set_num_threads"] = function() return pack(1) end
  S["rp.memory"] = function() return pack() end
  -- pictures: into text files of the fuzz folder (out replaced by nil draws on stdout); of the
  -- string options only the title (each accepted value runs gnuplot, about 50 ms)
  local function pic(ctx, extra)
    local o = { title = "t", out = ctx.dir .. "/pic.txt", size = { 40, 12 } }
    for k, v in pairs(extra) do o[k] = v end
    return o
  end
  S["rp.plot"] = function(ctx)
    return pack({ 1, 2, 3 }, { T(3), { 1, 3, 2 } }, pic(ctx, { labels = { "a", "b" }, logx = true,
      xrange = { 1, 3 }, yrange = { -3, 3 } }))
  end
  S["rp.scatter"] = function(ctx)
    return pack(T(4), { 1, 2, 3, 4 }, pic(ctx, { labels = { "a" }, logy = true, xrange = { -2, 2 },
      yrange = { 1, 5 } }))
  end
  S["rp.heatmap"] = function(ctx) return pack(T(3, 4), pic(ctx, { range = { -1, 1 } })) end
  S["rp.hist"] = function(ctx) return pack(T(2, 10), pic(ctx, { bins = 4, range = { -1, 1 } })) end
  S["rp.gnuplot"] = function(ctx)
    return pack({ "unset key", "plot x" }, { out = ctx.dir .. "/g.txt", size = { 40, 12 }, font_size = 9 })
  end
  S["rp.gnuplot_string"] = function() return pack("a'b\\c\n", "text") end
  S["rp.rope.theta"] = function() return pack(8, 10000) end
  S["rp.rope.angles"] = function()
    return pack(4, 8, { base = 10000, scale = 1, xpos_side = -1, xpos = 0.4, xpos_scale_base = 16,
      angles = T(4, 4) })
  end
  S["rp.rope.rotate"] = function()
    return pack(T(1, 4, 2, 8), { base = 10000, pairing = "half", sign = 1, fraction = 1,
      offset = 0, scale = 1, xpos_side = 1, scaling = "yarn", scaling_factor = 2, orig_len = 4,
      yarn_alpha = 1, yarn_beta = 8, freq = T(4) })
  end
  S["rp.rope.sinusoidal"] = function() return pack(4, 8, { base = 10000, offset = 0 }) end
  S["rp.rope.mixed"] = function() return pack(8, { base = 100, seed = 2 }) end
  S["rp.attention"] = function()
    -- a relative mode with its tables (tensors inside the options); the rotation options are
    -- read for every mode (rotate itself, refused with shaw, is fuzzed through rp.model's seed),
    -- here at their defaults (a key that does nothing for the mode is refused: the variants set
    -- them where they apply)
    return pack(T(1, 4, 2, 8), T(1, 4, 2, 8), T(1, 4, 2, 8), { pe = "shaw", causal = true,
      scale = 0.35, base = 10000, pairing = "half", fraction_qk = 1, fraction_v = 1,
      q_offset = 0, fraction_q = 0, fraction_k = 0, fraction_o = 0, pos_offset = 3,
      rel_clip = 2, rel_buckets = 32, rel_max_distance = 128, rel_k = T(5, 8), rel_v = T(5, 8) })
  end
  S["rp.linear_attention"] = function()
    return pack(T(1, 4, 2, 8), T(1, 4, 2, 8), T(1, 4, 2, 8), { pe = "roper",
      linear_rope = "after", eps = 1e-6, base = 10000, pairing = "half", fraction_qk = 1,
      fraction_v = 1, q_offset = 0 })
  end
  S["rp.model"] = function() return pack(model_cfg()) end
  S["rp.model_memory"] = S["rp.model"]
  S["rp.load"] = function(ctx) return pack(ctx.checkpoint) end
  S["rp.read_file"] = function(ctx) return pack(ctx.checkpoint, 1 << 20) end
  S["rp.write_file"] = function(ctx) return pack(ctx.dir .. "/written.txt", "some text") end
  S["rp.optim.adam"] = function(ctx)
    return pack(ctx.model(), { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0,
      clip = 1, schedule = "cosine", warmup = 1, total_steps = 10, min_lr = 0 })
  end
  S["rp.optim.adamw"] = S["rp.optim.adam"]
  S["rp.tasks.addition"] = function()
    return pack({ format = "writeup", max_digits = 2, quirk = false, seq_len = 32 })
  end
  S["rp.tasks.substring_index"] = function() return pack({ str_len = 5, seq_len = 32 }) end
  S["rp.tasks.substring_prefix"] = function()
    return pack({ substr_len = 4, rnd_len = 3, seq_len = 32 })
  end
  S["rp.tasks.grid_offset"] = function()
    return pack({ rows = 3, cols = 4, alphabet = 5, max_offset = 2, seq_len = 32 })
  end
  S["rp.tasks.text"] = function(ctx)
    return pack({ path = ctx.corpus, valid_fraction = 0.1, seq_len = 16, max_bytes = 100000 })
  end
  -- the tokenizer: a BPE model of 300 pieces trains on the fuzz corpus in milliseconds
  S["rp.tokenizer.train"] = function(ctx)
    return pack({ input = { ctx.corpus }, model = ctx.dir .. "/fz.model", vocab_size = 300,
      type = "bpe", byte_fallback = true, character_coverage = 1, max_sentence_length = 4192,
      input_sentence_size = 0, threads = 1 })
  end
  S["rp.tokenizer.load"] = function(ctx) return pack(ctx.tokmodel) end
  S["rp.tasks.lm"] = function(ctx)
    return pack({ path = ctx.lm_ids, vocab_size = 5, seq_len = 8 })
  end
  S["rp.eval.lm"] = function(ctx)
    return pack(ctx.model(5, 8), rp.tasks.lm { path = ctx.lm_ids, vocab_size = 5, seq_len = 8 },
      { split = "valid", batch_size = 2, bytes = 80, max_windows = 2, progress = function() end })
  end
  -- a stand-in tokenizer of vocabulary 5 (rp.lm takes any object of rp.tokenizer's interface)
  local function stub_tokenizer()
    return { vocab_size = function() return 5 end,
      encode = function(_, text, o)
        local ids = {}
        for i = 1, #text do ids[i] = text:byte(i) % 5 end
        return o and o.tensor and rp.tensor(ids) or ids
      end,
      decode = function(_, ids)
        if type(ids) ~= "table" then ids = ids:totable() end
        return ("x"):rep(#ids)
      end }
  end
  S["rp.lm.ids"] = function(ctx)
    return pack(ctx.lm_corpus, ctx.lm_corpus .. "/tok.model",
      { tokenizer = stub_tokenizer(), cache = ctx.dir .. "/lmcache", chunk_bytes = 64 })
  end
  S["rp.lm.info"] = function(ctx) return pack(ctx.lm_ids) end
  S["rp.lm.sha256"] = function(ctx) return pack(ctx.lm_ids .. "/ids.txt") end
  S["rp.lm.tokenizer"] = function(ctx)
    return pack(ctx.lm_corpus, 300, "unigram", { progress = function() end })
  end
  S["rp.lm.sample"] = function(ctx)
    return pack(ctx.model(5, 8), stub_tokenizer(), "abc",
      { n = 3, temperature = 0.5, top_k = 2, top_p = 0.9, seed = 1 })
  end
  S["rp.eval.accuracy"] = function(ctx)
    return pack(ctx.model(20), rp.tasks.addition { max_digits = 1, seq_len = 32 },
      { problems = 1, decode = "greedy", temperature = 1, top_k = 0, seed = 1, max_new = 5,
        n_digits = 1 })
  end
  S["rp.eval.length_generalisation"] = function(ctx)
    return pack(ctx.model(20), rp.tasks.addition { max_digits = 1, seq_len = 32 },
      { digits = { 1, 2 }, problems = 1, max_new = 5 })
  end
  S["rp.eval.lengths"] = function(ctx)
    return pack(ctx.model(20), rp.tasks.addition { max_digits = 1, seq_len = 32 },
      { lengths = { 1, 2 }, scaling = "none", train_length = 1, problems = 1, max_new = 5,
        progress = function() end })
  end
  S["rp.eval.loss"] = function(ctx)
    return pack(ctx.model(20, 32), rp.tasks.addition { max_digits = 1, seq_len = 32 },
      { batches = 1, batch_size = 1, split = "train", seed = 1 })
  end
  S["rp.experiment.config"] = function() return pack(tiny_cfg()) end
  S["rp.experiment.check"] = function() return pack(tiny_cfg(), { progress = function() end }) end
  S["rp.experiment.run"] = function(ctx)
    return pack(tiny_cfg(), function() end, { keep_model = true, save = ctx.dir .. "/run.ckpt",
      save_every = 1, keep_state = true })
  end
  S["rp.experiment.task"] = S["rp.experiment.config"]
  S["rp.experiment.resumable"] = function(ctx)
    return pack(tiny_cfg(), ctx.dir .. "/run.ckpt")
  end
  S["rp.experiment.checkpoint_files"] = function(ctx) return pack(ctx.dir .. "/run.ckpt") end
  -- with a config: its fields fuzzed too (the string form is the battery's "rope", "x", ...)
  S["rp.experiment.applies"] = function() return pack("fraction_v", tiny_cfg()) end
  S["rp.experiment.better"] = function() return pack("loss", 1, 2) end
  -- models
  local TOK, TGT = { 0, 1, 2 }, { 1, 2, 3 }
  local function m(ctx) return ctx.model() end
  S["rp.Model.forward"] = function(ctx) return pack(m(ctx), TOK) end
  S["rp.Model.loss"] = function(ctx) return pack(m(ctx), TOK, TGT, { 1, 1, 0 }) end
  S["rp.Model.losses"] = S["rp.Model.loss"]
  S["rp.Model.train_step"] = function(ctx)
    local mm = m(ctx)
    return pack(mm, TOK, TGT, nil, rp.optim.adam(mm), { nonfinite = "skip" })
  end
  S["rp.Model.derive"] = function(ctx) return pack(m(ctx), { max_batch = 1, dropout = 0 }) end
  S["rp.Model.generate"] = function(ctx)
    return pack(m(ctx), { 0, 1 }, 3,
      { temperature = 0.5, top_k = 2, top_p = 0.9, seed = 1, stop = 1 })
  end
  S["rp.Model.generate_batch"] = function(ctx)
    return pack(m(ctx), { { 0, 1 }, { 2 } }, 3,
      { temperature = 0.5, top_k = 2, top_p = 0.9, seed = 1, stop = 1, lanes = 2 })
  end
  S["rp.Model.lanes"] = function(ctx) return pack(m(ctx), 128, 8) end
  S["rp.Model.attention"] = function(ctx) return pack(m(ctx), 1, TOK) end
  S["rp.Model.linear_stats"] = function(ctx) return pack(ctx.model(5, 8, "linear"), TOK) end
  S["rp.Model.activations"] = function(ctx) return pack(m(ctx), TOK) end
  S["rp.Model.save"] = function(ctx)
    local mm = m(ctx)
    return pack(mm, ctx.dir .. "/s.ckpt", rp.optim.adam(mm), { allow_nonfinite = false })
  end
  S["rp.Model.save_safetensors"] = function(ctx)
    return pack(m(ctx), ctx.dir .. "/s.safetensors", { allow_nonfinite = false })
  end
  S["rp.Model.load_safetensors"] = function(ctx) return pack(m(ctx), ctx.safetensors) end
  for _, k in ipairs { "config", "num_params", "params", "grads", "free" } do
    S["rp.Model." .. k] = function(ctx) return pack(m(ctx)) end
  end
  -- optimisers
  S["rp.Optim.step"] = function(ctx) return pack(rp.optim.adam(m(ctx)), { nonfinite = "skip" }) end
  for _, k in ipairs { "lr", "steps", "config", "free" } do
    S["rp.Optim." .. k] = function(ctx) return pack(rp.optim.adam(m(ctx))) end
  end
  -- generators
  S["rp.Rng.int"] = function() return pack(rp.rng(1), 1, 6) end
  S["rp.Rng.normal"] = function() return pack(rp.rng(1)) end
  S["rp.Rng.uniform"] = S["rp.Rng.normal"]
  S["rp.Rng.rand"] = function() return pack(rp.rng(1), { 2, 3 }) end
  S["rp.Rng.randn"] = S["rp.Rng.rand"]
  S["rp.Rng.randint"] = function() return pack(rp.rng(1), 0, 5, { 2, 2 }) end
  S["rp.Rng.seed"] = function() return pack(rp.rng(1), 3) end
  S["rp.Rng.jump"] = function() return pack(rp.rng(1), 2) end
  S["roper.Rng.__tostring"] = function() return pack(rp.rng(1)) end
  -- tasks
  local function add_task() return rp.tasks.addition { max_digits = 2, seq_len = 32 } end
  S["rp.Task.batch"] = function() return pack(add_task(), 2, rp.rng(1), "train") end
  S["rp.Task.check"] = function() return pack(add_task(), "?d=1+2;", " d==3#") end
  S["rp.Task.decode"] = function() return pack(add_task(), { 1, 2, 3 }) end
  S["rp.Task.encode"] = function() return pack(add_task(), "1+2") end
  S["rp.Task.problem"] = function() return pack(add_task(), rp.rng(1), 1) end
  S["rp.Task.positions2d"] = function()
    return pack(rp.tasks.grid_offset { rows = 3, cols = 4, alphabet = 5, max_offset = 2,
      seq_len = 32 }, 10)
  end
  S["rp.Task.windows"] = function(ctx)
    return pack(rp.tasks.lm { path = ctx.lm_ids, vocab_size = 5, seq_len = 8 }, "valid", 1, 2)
  end
  S["rp.Task.split_sizes"] = function(ctx)
    return pack(rp.tasks.text { path = ctx.corpus, seq_len = 16 })
  end
  for _, k in ipairs { "config", "vocab", "vocab_size", "free" } do
    S["rp.Task." .. k] = function() return pack(add_task()) end
  end
  -- tokenizers
  local function tok(ctx) return assert(rp.tokenizer.load(ctx.tokmodel)) end
  S["rp.Tokenizer.encode"] = function(ctx)
    return pack(tok(ctx), "the fox \0 é", { tensor = true, continued = true })
  end
  S["rp.Tokenizer.decode"] = function(ctx) return pack(tok(ctx), { 1, 2, 3, 299 }) end
  S["rp.Tokenizer.piece"] = function(ctx) return pack(tok(ctx), 5) end
  S["rp.Tokenizer.id"] = function(ctx) return pack(tok(ctx), "the") end
  for _, k in ipairs { "vocab_size", "unk_id", "bos_id", "eos_id", "byte_fallback", "free" } do
    S["rp.Tokenizer." .. k] = function(ctx) return pack(tok(ctx)) end
  end
  for _, k in ipairs { "__tostring", "__gc", "__close" } do
    S["roper.Tokenizer." .. k] = function(ctx) return pack(tok(ctx)) end
  end
  -- tensors
  local one = { abs = 1, clone = 1, contiguous = 1, cos = 1, dim = 1, exp = 1,
    is_contiguous = 1, log = 1, neg = 1, norm = 1, numel = 1, relu = 1, shape = 1, sigmoid = 1,
    sin = 1, sqrt = 1, tanh = 1, totable = 1, zero = 1, item = 1, free = 1 }
  for k in pairs(one) do S["rp.Tensor." .. k] = function() return pack(T(2, 3)) end end
  S["rp.Tensor.item"] = function() return pack(T(1)) end
  for _, k in ipairs { "add", "mul", "div", "pow" } do
    S["rp.Tensor." .. k] = function() return pack(T(2, 3), 2) end
  end
  S["rp.Tensor.sub"] = function() return pack(T(3, 4), 1, 2, 1, 2) end
  S["rp.Tensor.argmax"] = function() return pack(T(2, 3), 1, false) end
  S["rp.Tensor.softmax"] = function() return pack(T(2, 3), 2) end
  for _, k in ipairs { "sum", "mean", "max", "min" } do
    S["rp.Tensor." .. k] = function() return pack(T(2, 3), 1, true) end
  end
  S["rp.Tensor.narrow"] = function() return pack(T(3, 4), 1, 1, 2) end
  S["rp.Tensor.select"] = function() return pack(T(3, 4), 1, 2) end
  S["rp.Tensor.view"] = function() return pack(T(3, 4), { 4, 3 }) end
  S["rp.Tensor.reshape"] = S["rp.Tensor.view"]
  S["rp.Tensor.transpose"] = function() return pack(T(3, 4), 1, 2) end
  S["rp.Tensor.t"] = function() return pack(T(3, 4)) end
  S["rp.Tensor.permute"] = function() return pack(T(2, 3, 4), 3, 1, 2) end
  S["rp.Tensor.get"] = function() return pack(T(2, 3), 1, 2) end
  S["rp.Tensor.set"] = function() return pack(T(2, 3), 1, 2, 5) end
  S["rp.Tensor.size"] = function() return pack(T(2, 3), 1) end
  S["rp.Tensor.stride"] = S["rp.Tensor.size"]
  S["rp.Tensor.copy"] = function() return pack(T(2, 3), T(1, 3)) end
  S["rp.Tensor.fill"] = function() return pack(T(2, 3), 1) end
  S["rp.Tensor.matmul"] = function() return pack(T(2, 3), T(3, 2)) end
  S["rp.Tensor.maxdiff"] = function() return pack(T(2, 3), T(2, 3)) end
  S["rp.Tensor.dot"] = function() return pack(T(5), T(5)) end
  S["rp.Tensor.diag"] = function() return pack(T(3, 4), 1) end
  -- token ids as int64 (the battery at position 3 reaches the float path without options too)
  S["rp.Tensor.save"] = function(ctx)
    return pack(rp.tensor { { 1, 2, 3 }, { 4, 5, 6 } }:t(), ctx.dir .. "/s.npy", { dtype = "int64" })
  end
  -- metamethods
  S["roper.Tensor.__index"] = function() return pack(T(3, 4), { 2, { 1, 3 } }) end
  S["roper.Tensor.__newindex"] = function() return pack(T(3, 4), { 2, { 1, 3 } }, 0) end
  for _, k in ipairs { "__add", "__sub", "__mul", "__div", "__pow" } do
    S["roper.Tensor." .. k] = function() return pack(T(2, 3), T(2, 3)) end
  end
  for _, k in ipairs { "__unm", "__len", "__tostring", "__gc", "__close" } do
    S["roper.Tensor." .. k] = function() return pack(T(2, 3)) end
  end
  for _, k in ipairs { "__tostring", "__gc", "__close" } do
    S["roper.Model." .. k] = function(ctx) return pack(m(ctx)) end
    S["roper.Optim." .. k] = function(ctx) return pack(rp.optim.adam(m(ctx))) end
    S["roper.Task." .. k] = function() return pack(add_task()) end
  end
  return S
end

-- ---------------------------------------------------------------- the variants
-- The tensor-valued options a seed does not hold (it holds one mode's): name -> function(T)
-- returning { pos =, drop = {keys}, set = {key = value} } option sets, each a valid call when
-- merged into the seed's options at pos (drop removed first). Their tensors get the degenerate
-- shapes as the seed's own do.
local function variants(rp)
  local V = {}
  local function T(...) return rp.randn({ ... }, rp.rng(7)) end
  local REL = { "rel_k", "rel_q", "rel_v", "rel_u", "rel_w", "rel_bias" }
  local NOREL = { "rel_clip", table.unpack(REL) } -- (rel_clip is shaw's and deberta's)
  -- a rotary mode: the seed's fractions of one placement (0: refused where it is rotated) out
  local ROT = { "fraction_q", "fraction_k", "fraction_o", table.unpack(NOREL) }
  local SCALING = { "scaling", "scaling_factor", "orig_len", "yarn_alpha", "yarn_beta" }
  V["rp.attention"] = function()
    return {
      { pos = 4, drop = NOREL,
        set = { pe = "xl", rel_k = T(4, 2, 8), rel_u = T(2, 8), rel_w = T(2, 8) } },
      { pos = 4, drop = NOREL,
        set = { pe = "t5", rel_bias = T(2, 8), rel_buckets = 8, rel_max_distance = 16 } },
      { pos = 4, drop = REL, set = { pe = "deberta", rel_k = T(4, 2, 8), rel_q = T(4, 2, 8) } },
      -- the rotary modes with their own placement widths
      { pos = 4, drop = NOREL,
        set = { pe = "rope", freq = T(4), fraction_q = 0.5, fraction_k = 0.75 } },
      { pos = 4, drop = ROT, set = { pe = "roper", angles = T(7, 4), fraction_o = 0.5 } },
      -- explicit positions (the seed's T = S = 4, D 8): 1-D, and vector positions with M-RoPE
      -- sections (every placement 4 pairs wide) and a mix matrix (pos_offset excludes them)
      { pos = 4, drop = { "pos_offset", table.unpack(ROT) },
        set = { pe = "roper", positions = rp.tensor { 0, 2, 4, 6 } } },
      { pos = 4, drop = { "pos_offset", table.unpack(ROT) },
        set = { pe = "rope", positions = rp.tensor { { 0, 1, 2 }, { 1, 2, 3 }, { 2, 3, 4 },
          { 3, 4, 5 } }, axes = "sections", sections = { 1, 2, 1 } } },
      { pos = 4, drop = { "pos_offset", table.unpack(ROT) },
        set = { pe = "roper", positions = rp.tensor { { 0, 1 }, { 1, -2 }, { 2, 3 }, { 3, 4 } },
          axes = "mixed", mix = T(2, 4) } },
    }
  end
  V["rp.rope.rotate"] = function()
    return {
      { pos = 2, drop = { "offset" }, set = { positions = rp.tensor { 0, 1, 2, 3 } } },
      { pos = 2, drop = { "freq", table.unpack(SCALING) }, set = { angles = T(4, 4) } },
      -- vector positions (the seed's T = 4, d_rot 8): M-RoPE sections, and a mix matrix
      { pos = 2, drop = { "offset" }, set = { positions = rp.tensor { { 0, 1, 2 }, { 1, 2, 3 },
        { 2, 3, 4 }, { 3, 4, 5 } }, axes = "sections", sections = { 1, 2, 1 } } },
      { pos = 2, drop = { "offset", "freq", table.unpack(SCALING) },
        set = { positions = rp.tensor { { 0, 1 }, { 1, -2 }, { 2, 3 }, { 3, 4 } }, axes = "mixed",
          mix = T(2, 4) } },
      -- Hugging Face's names (the key batteries put every kind of value in place of each)
      { pos = 2, drop = { "base", table.unpack(SCALING) }, set = { rope_theta = 500000,
        rope_scaling = { rope_type = "llama3", factor = 8, low_freq_factor = 1,
          high_freq_factor = 4, original_max_position_embeddings = 4 } } },
    }
  end
  V["rp.model"] = function()
    -- the seed's 8 positions on a 2 x 4 grid (d_k 4, full rotation: two pairs, one per axis)
    local grid = rp.tensor { { 0, 0 }, { 0, 1 }, { 0, 2 }, { 0, 3 }, { 1, 0 }, { 1, 1 },
      { 1, 2 }, { 1, 3 } }
    -- (the seed's relative and placement keys and its scaling would be refused before the
    -- positions are read)
    local plain = { "rotate", "fraction_q", "fraction_k", "fraction_o", "rel_clip", "rel_buckets",
      "rel_max_distance", table.unpack(SCALING) }
    local function with(...)
      local t = { ... }
      for _, k in ipairs(plain) do t[#t + 1] = k end
      return t
    end
    return {
      { pos = 1, drop = { "freq", table.unpack(SCALING) }, set = { angles = T(8, 2) } },
      -- vector positions, axial with the seed's own frequencies; learned frequencies, 1-D and
      -- of a mix matrix
      { pos = 1, drop = with("xpos", "xpos_scale_base"),
        set = { positions = grid, axes = "axial" } },
      { pos = 1, drop = with(), set = { learn_freq = true } },
      -- tied input and output embeddings (issue 63)
      { pos = 1, drop = with(), set = { tie_embeddings = true } },
      { pos = 1, drop = with("freq", "xpos", "xpos_scale_base"),
        set = { positions = grid, axes = "mixed", mix = T(2, 2), learn_freq = true } },
    }
  end
  V["rp.model_memory"] = V["rp.model"]
  return V
end

-- ---------------------------------------------------------------- degenerate tensors

-- The degenerate variants of a tensor's shape: each dim 0 (the tensor empty), each dim 1 (a
-- single row), each dim 2^31 with another dim 0 (2^31 positions, no memory). Each entry:
-- { shape =, what = }.
local function degenerate_shapes(shape)
  local list = {}
  local function variant(what, change)
    local s = {}
    for i, n in ipairs(shape) do s[i] = n end
    change(s)
    list[#list + 1] = { shape = s, what = what }
  end
  for d = 1, #shape do
    variant(("a 0 in dim %d"):format(d), function(s) s[d] = 0 end)
    if shape[d] ~= 1 then
      variant(("a single row in dim %d"):format(d), function(s) s[d] = 1 end)
    end
    if #shape >= 2 then
      variant(("2^31 in dim %d, empty"):format(d), function(s)
        s[d] = 2 ^ 31
        s[d == #shape and 1 or #shape] = 0
      end)
    end
  end
  return list
end

-- "[0 x 4 x 2 x 8]"
local function shape_str(s)
  local parts = {}
  for i, n in ipairs(s) do parts[i] = ("%d"):format(n) end
  return "[" .. table.concat(parts, " x ") .. "]"
end

-- A tensor of that shape: random values when it holds any, zeros (no memory) otherwise.
local function degenerate_tensor(rp, shape)
  for _, n in ipairs(shape) do
    if n == 0 then return rp.zeros(shape) end
  end
  return rp.randn(shape, rp.rng(8))
end

-- ---------------------------------------------------------------- the functions

-- Every function reachable from the module (rp.x, rp.x.y) and every metamethod of its userdata
-- types (roper.Tensor.__add, ...), sorted by name.
function M.functions(rp)
  local list = {}
  local function add(name, f) list[#list + 1] = { name = name, f = f } end
  for k, v in pairs(rp) do
    if type(v) == "function" then
      add("rp." .. k, v)
    elseif type(v) == "table" then
      for k2, v2 in pairs(v) do
        if type(v2) == "function" then add("rp." .. k .. "." .. k2, v2) end
      end
    end
  end
  local m = rp.model { vocab = 5, d_model = 8, heads = 2, layers = 1, d_ff = 8, seq_len = 4,
    max_batch = 1 }
  -- (a tokenizer needs a file: its metatable is taken from the registry)
  local tok_mt = debug.getregistry()["roper.Tokenizer"]
  for _, obj in ipairs { rp.zeros(1), rp.rng(1), m, rp.optim.adam(m), rp.tasks.addition {},
    tok_mt and setmetatable({}, tok_mt) } do
    local mt = getmetatable(obj)
    for k, v in pairs(mt) do
      if type(v) == "function" and k:sub(1, 2) == "__" then add(mt.__name .. "." .. k, v) end
    end
  end
  table.sort(list, function(a, b) return a.name < b.name end)
  return list
end

-- ---------------------------------------------------------------- the cases of a function

-- The plan of fn: a list of case descriptors {kind =, pos =, key =, value =}.
local plan_cache = {}
local function plan(rp, ctx, fn)
  if plan_cache[fn.name] then return plan_cache[fn.name] end
  local B = battery(rp)
  local S = seeds(rp)
  local p = {}
  local seed = S[fn.name]
  if not seed then
    p[#p + 1] = { kind = "none" }
    for pos = 1, 3 do
      for vi = 1, #B do p[#p + 1] = { kind = "arg", pos = pos, value = vi } end
    end
  else
    local args = seed(ctx)
    p[#p + 1] = { kind = "seed" }
    for pos = 1, args.n + 1 do
      for vi = 1, #B do p[#p + 1] = { kind = "arg", pos = pos, value = vi } end
    end
    for pos = 1, args.n do
      local a = args[pos]
      if type(a) == "table" and getmetatable(a) == nil then
        local keys = {}
        for k in pairs(a) do if type(k) == "string" then keys[#keys + 1] = k end end
        table.sort(keys)
        for _, k in ipairs(keys) do
          for vi = 1, #B do p[#p + 1] = { kind = "key", pos = pos, key = k, value = vi } end
          if rp.is_tensor(a[k]) then
            for _, v in ipairs(degenerate_shapes(a[k]:shape())) do
              p[#p + 1] = { kind = "key shape", pos = pos, key = k, shape = v.shape, what = v.what }
            end
          end
        end
        if #keys > 0 then p[#p + 1] = { kind = "closing options", pos = pos } end
      elseif rp.is_tensor(a) then
        for _, v in ipairs(degenerate_shapes(a:shape())) do
          p[#p + 1] = { kind = "arg shape", pos = pos, shape = v.shape, what = v.what }
        end
      end
    end
    local V = variants(rp)[fn.name]
    for vi, v in ipairs(V and V() or {}) do
      p[#p + 1] = { kind = "variant", var = vi }
      local keys = {}
      for k, val in pairs(v.set) do if rp.is_tensor(val) then keys[#keys + 1] = k end end
      table.sort(keys)
      for _, k in ipairs(keys) do
        for _, d in ipairs(degenerate_shapes(v.set[k]:shape())) do
          p[#p + 1] = { kind = "variant shape", var = vi, key = k, shape = d.shape, what = d.what }
        end
      end
    end
    local nobj, ntensor = 0, 0
    for pos = 1, args.n do
      if type(args[pos]) == "userdata" then
        nobj = nobj + 1
        p[#p + 1] = { kind = "released", pos = pos }
        if rp.is_tensor(args[pos]) then ntensor = ntensor + 1 end
      end
    end
    if ntensor >= 2 then p[#p + 1] = { kind = "alias" } end
    if nobj > 0 then
      for k = 1, 3 do p[#p + 1] = { kind = "finalizer", countdown = k } end
    end
  end
  plan_cache[fn.name] = p
  return p
end

function M.count(rp, ctx, fn)
  return #plan(rp, ctx, fn)
end

-- The cases of fn that must be valid calls: its seed call and each variant (their tensors at the
-- given shapes). A seed or variant that the function refuses fuzzes only that refusal.
function M.valid_cases(rp, ctx, fn)
  local list = {}
  for i, p in ipairs(plan(rp, ctx, fn)) do
    if p.kind == "seed" or p.kind == "variant" then list[#list + 1] = i end
  end
  return list
end

function M.has_seed(rp, fn)
  return seeds(rp)[fn.name] ~= nil
end

-- Runs f(args) with a finalizer armed to release every object of ctx at the countdown-th
-- collection cycle inside the call (a cycle completes at every allocation: pause 1, stepmul
-- 1000). Returns pcall's results.
local function with_finalizer(ctx, countdown, f, args)
  local left = countdown
  local function arm()
    setmetatable({}, { __gc = function()
      left = left - 1
      if left > 0 then arm() return end
      for _, o in ipairs(ctx.objects) do close(o) end
    end })
  end
  collectgarbage("incremental", 1, 1000)
  collectgarbage()
  arm()
  local r = table.pack(pcall(f, table.unpack(args, 1, args.n)))
  collectgarbage("incremental", 200, 100)
  collectgarbage()
  return table.unpack(r, 1, r.n)
end

-- Case i of fn: its description and a function that builds its arguments and makes the call
-- (returning pcall's results).
function M.case(rp, ctx, fn, i)
  local p = plan(rp, ctx, fn)[i]
  local B = battery(rp)
  local S = seeds(rp)
  local desc
  if p.kind == "none" then desc = "no arguments"
  elseif p.kind == "seed" then desc = "the seed call"
  elseif p.kind == "arg" then desc = ("argument %d = %s"):format(p.pos, B[p.value][1])
  elseif p.kind == "key" then desc = ("argument %d, option %s = %s"):format(p.pos, p.key,
      B[p.value][1])
  elseif p.kind == "arg shape" then desc = ("argument %d = tensor %s (%s)"):format(p.pos,
      shape_str(p.shape), p.what)
  elseif p.kind == "key shape" then desc = ("argument %d, option %s = tensor %s (%s)"):format(
      p.pos, p.key, shape_str(p.shape), p.what)
  elseif p.kind == "variant" or p.kind == "variant shape" then
    local v = variants(rp)[fn.name]()[p.var]
    local keys = {}
    for k in pairs(v.set) do keys[#keys + 1] = k end
    table.sort(keys)
    desc = ("argument %d with options %s"):format(v.pos, table.concat(keys, ", "))
    if p.kind == "variant shape" then
      desc = desc .. (", %s = tensor %s (%s)"):format(p.key, shape_str(p.shape), p.what)
    end
  elseif p.kind == "closing options" then
    desc = ("argument %d with an __index that releases the objects"):format(p.pos)
  elseif p.kind == "released" then desc = ("argument %d released before the call"):format(p.pos)
  elseif p.kind == "alias" then desc = "every tensor argument the same tensor"
  else desc = ("a finalizer releases the objects at collection %d in the call"):format(
      p.countdown) end
  local function call()
    ctx.objects = {}
    local args = S[fn.name] and S[fn.name](ctx) or table.pack()
    if p.kind == "arg" then
      args[p.pos] = B[p.value][2](ctx)
      if p.pos > args.n then args.n = p.pos end
    elseif p.kind == "key" then
      args[p.pos][p.key] = B[p.value][2](ctx)
    elseif p.kind == "arg shape" then
      args[p.pos] = degenerate_tensor(rp, p.shape)
    elseif p.kind == "key shape" then
      args[p.pos][p.key] = degenerate_tensor(rp, p.shape)
    elseif p.kind == "variant" or p.kind == "variant shape" then
      local v = variants(rp)[fn.name]()[p.var]
      local o = args[v.pos]
      for _, k in ipairs(v.drop) do o[k] = nil end
      for k, val in pairs(v.set) do o[k] = val end
      if p.kind == "variant shape" then o[p.key] = degenerate_tensor(rp, p.shape) end
    elseif p.kind == "closing options" then
      local raw = args[p.pos]
      args[p.pos] = setmetatable({}, { __index = function(_, k)
        for _, o in ipairs(ctx.objects) do close(o) end
        return raw[k]
      end })
    elseif p.kind == "alias" then
      local first
      for j = 1, args.n do
        if rp.is_tensor(args[j]) then
          first = first or args[j]
          args[j] = first
        end
      end
    end
    -- the call's objects: userdata arguments, and userdata values of its option tables (the
    -- relative tables of rp.attention, a generator in an options table), which the releasing
    -- cases release too
    local function register(o) ctx.objects[#ctx.objects + 1] = o end
    for j = 1, args.n do
      local a = args[j]
      if type(a) == "userdata" then register(a)
      elseif type(a) == "table" and getmetatable(a) == nil then
        for _, val in pairs(a) do if type(val) == "userdata" then register(val) end end
      end
    end
    if p.kind == "released" then close(args[p.pos]) end
    if p.kind == "finalizer" then return with_finalizer(ctx, p.countdown, fn.f, args) end
    return pcall(fn.f, table.unpack(args, 1, args.n))
  end
  return desc, call
end

-- Whether an error message is a raw Lua error or points inside the module: what no bad argument
-- may produce (messages of the battery's own metamethods carry "fuzz sentinel" and are fine).
function M.raw_error(msg)
  if type(msg) ~= "string" then return "a non-string error (" .. type(msg) .. ")" end
  if msg:find("fuzz sentinel", 1, true) or msg:find("fuzz budget", 1, true) then return nil end
  for _, pat in ipairs { "attempt to index", "attempt to call", "attempt to compare",
    "attempt to perform arithmetic", "attempt to concatenate", "bad argument #%d+ to '%?'",
    "bindings/lua/", "%.tmp%.%d", "%.tmp%-" } do
    if msg:find(pat) then return "matches " .. pat end
  end
  return nil
end

return M

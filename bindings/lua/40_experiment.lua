-- rp.experiment: one training run described by a flat config (every value a string, number or
-- boolean), the unit that scripts/train.lua runs once and scripts/compare.lua and
-- scripts/sweep.lua repeat over methods, seeds and grids (docs/experiments.md).
--   rp.experiment.keys()               -> the config keys in order: {name, default, kind, help}
--   rp.experiment.config([overrides])  -> a full, checked config (defaults filled in)
--   rp.experiment.run(cfg[, progress]) -> result table (see run below)
--
-- Called by luaopen_roper as chunk(rp, internals).
local rp = ...

local experiment = {}
rp.experiment = experiment

-- {name, default, kind, help}; kind: a list of allowed strings, "int", "number", "bool",
-- "string". Keys named "<task>: ..." in their help apply to that task only (TASK_OF below).
local KEYS = {
  -- the task
  { "task", "substring_index", { "substring_index", "addition", "substring_prefix", "text" },
    "the task (docs/tasks.md)" },
  { "format", "writeup", { "writeup", "labml" }, "addition: problem format" },
  { "max_digits", 0, "int", "addition: largest operand length (0: 8 for writeup, 7 for labml)" },
  { "quirk", "auto", { "auto", "on", "off" }, "addition: labml's digit quirk (auto: on for labml)" },
  { "str_len", 13, "int", "substring_index: letters per string" },
  { "substr_len", 16, "int", "substring_prefix: copy length" },
  { "rnd_len", 12, "int", "substring_prefix: filler lengths 1..rnd_len-1" },
  { "path", "/usr/share/games/fortunes/cookie", "string",
    "text: a UTF-8 file or a folder of them (default: Debian's fortunes package)" },
  { "valid_fraction", 0.1, "number", "text: share kept for validation" },
  -- the model
  { "pe", "rope", { "none", "sinusoidal", "learned", "rope", "roper", "roper_legacy" },
    "positional encoding" },
  { "fraction_qk", 1, "number", "rotated share of d_k for q and k (rope modes)" },
  { "fraction_v", 1, "number", "rotated share of d_k for v (roper modes)" },
  { "base", 10000, "number", "RoPE base" },
  { "pairing", "half", { "half", "interleaved" }, "RoPE pairing" },
  { "attention", "softmax", { "softmax", "linear" },
    "attention kind (linear: causal linear attention, phi = elu + 1)" },
  { "linear_rope", "after", { "after", "before" },
    "linear attention: RoPE after phi (RoFormer eq. 19) or before it" },
  { "d_model", 64, "int", "model width" },
  { "heads", 4, "int", "attention heads" },
  { "layers", 2, "int", "transformer blocks" },
  { "d_ff", 0, "int", "feed-forward width (0: 4 * d_model)" },
  { "norm", "pre", { "pre", "post" }, "LayerNorm placement" },
  { "activation", "relu", { "relu", "gelu" }, "feed-forward activation" },
  { "dropout", 0, "number", "dropout on the residual branches" },
  { "seq_len", 128, "int", "training sequence length (tokens per row)" },
  -- training
  { "steps", 2000, "int", "optimiser steps" },
  { "batch", 16, "int", "rows per step" },
  { "optimiser", "adam", { "adam", "adamw" }, "optimiser" },
  { "lr", 1e-3, "number", "peak learning rate" },
  { "weight_decay", 0, "number", "L2 (adam) or decoupled (adamw) weight decay" },
  { "schedule", "cosine", { "constant", "cosine", "noam" }, "learning-rate schedule" },
  { "warmup", 100, "int", "warmup steps (cosine, noam)" },
  { "min_lr", 1e-4, "number", "cosine: final learning rate" },
  { "clip", 1, "number", "gradient-norm clip (0: off)" },
  { "seed", 1, "int", "model initialisation and training data" },
  { "threads", 0, "int", "OpenMP threads for this run (0: leave as set)" },
  -- evaluation
  { "problems", 128, "int", "accuracy tasks: problems evaluated" },
  { "decode", "sample", { "sample", "greedy" }, "accuracy tasks: decoding (the write-up samples)" },
  { "temperature", 1, "number", "sampling temperature" },
  { "top_k", 0, "int", "sample among the top k logits (0: all)" },
  { "eval_seed", 12345, "int", "evaluation problems and sampling (the same for every run)" },
  { "eval_digits", "", "string", "addition: also evaluate at these operand lengths, e.g. 9,10,11" },
  { "valid_batches", 16, "int", "loss tasks: fresh batches for the evaluation loss" },
  { "log_every", 0, "int", "steps per loss-curve point (0: steps / 100, at least 1)" },
}

local BY_NAME = {}
for _, k in ipairs(KEYS) do BY_NAME[k[1]] = k end

-- The task a task-specific key belongs to (the others apply to every task).
local TASK_OF = { format = "addition", max_digits = "addition", quirk = "addition",
  eval_digits = "addition", str_len = "substring_index", substr_len = "substring_prefix",
  rnd_len = "substring_prefix", path = "text", valid_fraction = "text" }

-- rp.experiment.keys() -> a copy of KEYS as tables {name =, default =, kind =, help =, task =}
-- (task: the only task the key applies to, or nil for every task)
function experiment.keys()
  local out = {}
  for i, k in ipairs(KEYS) do
    local kind = k[3]
    if type(kind) == "table" then kind = table.move(kind, 1, #kind, 1, {}) end
    out[i] = { name = k[1], default = k[2], kind = kind, help = k[4], task = TASK_OF[k[1]] }
  end
  return out
end

-- rp.experiment.applies(key, task) -> true when config key `key` matters for `task` (keys of
-- other tasks, such as path for substring_index, do not change a run)
function experiment.applies(key, task)
  local t = TASK_OF[key]
  return t == nil or t == task
end

-- error(msg) at `level` as seen from the caller of fail (fail's own frame is skipped)
local function fail(msg, level)
  error(msg, level + 1)
end

-- Converts v (a value or its text, as from a command line) to key k's kind, or raises.
local function coerce(k, v, level)
  local name, kind = k[1], k[3]
  if type(v) == "string" and kind ~= "string" and type(kind) ~= "table" then
    if kind == "bool" then
      if v == "true" then v = true elseif v == "false" then v = false end
    else
      v = tonumber(v) or v
    end
  end
  if type(kind) == "table" then
    for _, s in ipairs(kind) do
      if v == s then return v end
    end
    fail(("option '%s' must be one of %s, got %s"):format(name, table.concat(kind, ", "),
      tostring(v)), level)
  elseif kind == "int" then
    if type(v) == "number" and v == math.floor(v) and math.abs(v) <= 2^53 then
      return math.tointeger(v)
    end
    fail(("option '%s' must be an integer, got %s"):format(name, tostring(v)), level)
  elseif kind == "number" then
    if type(v) == "number" and v == v and math.abs(v) ~= math.huge then return v end
    fail(("option '%s' must be a finite number, got %s"):format(name, tostring(v)), level)
  elseif kind == "bool" then
    if type(v) == "boolean" then return v end
    fail(("option '%s' must be true or false, got %s"):format(name, tostring(v)), level)
  else
    if type(v) == "string" then return v end
    fail(("option '%s' must be a string, got %s"):format(name, tostring(v)), level)
  end
end

local function parse_digits(s, level)
  local out = {}
  for part in s:gmatch("[^,%s]+") do
    local d = math.tointeger(tonumber(part))
    if not d or d < 1 or d > 18 then
      fail(("option 'eval_digits' must list digit counts in 1..18, got %s"):format(part), level)
    end
    out[#out + 1] = d
  end
  return out
end

-- rp.experiment.config([overrides]) -> cfg: every key of KEYS, overrides checked and converted
-- (strings from a command line are accepted for numbers), the "resolved by config" defaults
-- filled in (max_digits, quirk, d_ff, log_every). Unknown keys raise. A config fed back in keeps
-- its resolved values (d_ff stays 256 when d_model changes): set them to 0 / "auto" again.
function experiment.config(overrides)
  if overrides ~= nil and type(overrides) ~= "table" then
    fail("bad argument #1 to 'config' (table expected, got " .. type(overrides) .. ")", 2)
  end
  local cfg = {}
  for _, k in ipairs(KEYS) do cfg[k[1]] = k[2] end
  for name, v in pairs(overrides or {}) do
    local k = BY_NAME[name]
    if not k then
      local names = {}
      for i, kk in ipairs(KEYS) do names[i] = kk[1] end
      fail(("unknown option '%s' (known: %s)"):format(tostring(name), table.concat(names, ", ")), 2)
    end
    cfg[name] = coerce(k, v, 3)
  end
  if cfg.max_digits == 0 then cfg.max_digits = cfg.format == "labml" and 7 or 8 end
  if cfg.quirk == "auto" then cfg.quirk = cfg.format == "labml" and "on" or "off" end
  if cfg.d_ff == 0 then cfg.d_ff = 4 * cfg.d_model end
  if cfg.log_every == 0 then cfg.log_every = math.max(1, cfg.steps // 100) end
  local function positive(name)
    if cfg[name] < 1 then fail(("option '%s' must be >= 1, got %s"):format(name, cfg[name]), 3) end
  end
  for _, name in ipairs { "steps", "batch", "problems", "valid_batches", "log_every" } do
    positive(name)
  end
  if cfg.threads < 0 then fail("option 'threads' must be >= 0, got " .. cfg.threads, 2) end
  if cfg.decode == "sample" and cfg.temperature <= 0 then
    fail("option 'temperature' must be > 0 for sampling, got " .. cfg.temperature, 2)
  end
  parse_digits(cfg.eval_digits, 3)
  if cfg.eval_digits ~= "" and cfg.task ~= "addition" then
    fail("option 'eval_digits' applies to the addition task only", 2)
  end
  return cfg
end

-- The task of cfg (raises on bad options; a text file problem raises with its message).
local function make_task(cfg)
  local t = cfg.task
  if t == "addition" then
    return rp.tasks.addition { format = cfg.format, max_digits = cfg.max_digits,
      quirk = cfg.quirk == "on", seq_len = cfg.seq_len }
  elseif t == "substring_index" then
    return rp.tasks.substring_index { str_len = cfg.str_len, seq_len = cfg.seq_len }
  elseif t == "substring_prefix" then
    return rp.tasks.substring_prefix { substr_len = cfg.substr_len, rnd_len = cfg.rnd_len,
      seq_len = cfg.seq_len }
  end
  local task, err = rp.tasks.text { path = cfg.path, valid_fraction = cfg.valid_fraction,
    seq_len = cfg.seq_len }
  if not task then error(err, 0) end
  return task
end

local function wall_clock()
  local ok, system = pcall(require, "system")
  if ok and type(system) == "table" and system.gettime then return system.gettime end
  return os.time
end

-- rp.experiment.run(cfg[, progress]) -> result
-- Trains a fresh model on cfg's task for cfg.steps steps and evaluates it. cfg is checked with
-- rp.experiment.config first (so a partial table works). progress(step, steps, loss), when
-- given, is called after every step. The result:
--   config        the full config
--   params        parameter count
--   metric        "correct" (addition, substring_index: higher is better) or "loss" (lower)
--   value         the metric's value: correct answers out of cfg.problems with cfg.decode, or the
--                 evaluation loss (mean over cfg.valid_batches fresh batches; the validation split
--                 for text). nil when training diverged.
--   correct, accuracy, correct_greedy (greedy as well when decode is "sample"), examples
--                 (the first 3 records of rp.eval.accuracy)
--   eval_loss, final_train_loss (mean of the last 5 curve points, the write-up's "final loss")
--   by_digits     addition with eval_digits: { {digits =, correct =, accuracy =}, ... }
--   curve         { {step =, tokens =, loss =, lr =}, ... }: mean training loss per log_every steps
--   diverged      true when a training loss was not finite (training stopped there)
--   seconds_train, seconds_eval, tokens_per_s, threads
function experiment.run(cfg, progress)
  cfg = experiment.config(cfg)
  if progress ~= nil and type(progress) ~= "function" then
    fail("bad argument #2 to 'run' (function expected, got " .. type(progress) .. ")", 2)
  end
  local clock = wall_clock()
  if cfg.threads > 0 then rp.set_num_threads(cfg.threads) end
  local task <close> = make_task(cfg)
  local m <close> = rp.model { vocab = task:vocab_size(), d_model = cfg.d_model, heads = cfg.heads,
    layers = cfg.layers, d_ff = cfg.d_ff, seq_len = cfg.seq_len, max_batch = cfg.batch,
    norm = cfg.norm, activation = cfg.activation, dropout = cfg.dropout, pe = cfg.pe,
    fraction_qk = cfg.fraction_qk, fraction_v = cfg.fraction_v, base = cfg.base,
    pairing = cfg.pairing, seed = cfg.seed, attention = cfg.attention,
    linear_rope = cfg.linear_rope }
  local oc = { lr = cfg.lr, weight_decay = cfg.weight_decay, clip = cfg.clip,
    schedule = cfg.schedule }
  if cfg.schedule == "cosine" then
    oc.warmup, oc.total_steps = math.min(cfg.warmup, cfg.steps), cfg.steps
    oc.min_lr = math.min(cfg.min_lr, cfg.lr)
  elseif cfg.schedule == "noam" then
    oc.warmup = math.max(1, cfg.warmup)
  end
  local opt <close> = rp.optim[cfg.optimiser](m, oc)
  -- the data stream is seeded apart from the initialisation (which uses cfg.seed itself)
  local data = rp.rng(cfg.seed + 0x100000000)

  local res = { config = cfg, params = m:num_params(), curve = {}, diverged = false,
    threads = rp.blas.threads() }
  local t0 = clock()
  local sum, n, tokens = 0, 0, 0
  local row_tokens = cfg.seq_len
  for step = 1, cfg.steps do
    local lr = opt:lr()
    local x, y = task:batch(cfg.batch, data)
    local loss = m:train_step(x, y, nil, opt, { nonfinite = "skip" }) -- diverged: stop below
    tokens = tokens + cfg.batch * row_tokens
    if loss ~= loss or loss == math.huge or loss == -math.huge then
      res.diverged = true
      res.curve[#res.curve + 1] = { step = step, tokens = tokens, loss = nil, lr = lr }
      if progress then progress(step, cfg.steps, loss) end
      break
    end
    sum, n = sum + loss, n + 1
    if step % cfg.log_every == 0 or step == cfg.steps then
      res.curve[#res.curve + 1] = { step = step, tokens = tokens, loss = sum / n, lr = lr }
      sum, n = 0, 0
    end
    if progress then progress(step, cfg.steps, loss) end
  end
  local t1 = clock()
  res.seconds_train = t1 - t0
  res.tokens_per_s = tokens / math.max(t1 - t0, 1e-9)

  local last, k = 0, 0
  for i = #res.curve, math.max(1, #res.curve - 4), -1 do
    if res.curve[i].loss then last, k = last + res.curve[i].loss, k + 1 end
  end
  res.final_train_loss = k > 0 and last / k or nil

  local kind = cfg.task
  res.metric = (kind == "addition" or kind == "substring_index") and "correct" or "loss"
  if not res.diverged then
    if res.metric == "correct" then
      local eo = { problems = cfg.problems, seed = cfg.eval_seed, decode = cfg.decode }
      if cfg.decode == "sample" then eo.temperature, eo.top_k = cfg.temperature, cfg.top_k end
      local acc, correct, records = rp.eval.accuracy(m, task, eo)
      res.accuracy, res.correct, res.value = acc, correct, correct
      res.examples = { table.unpack(records, 1, math.min(3, #records)) }
      if cfg.decode == "sample" then
        local _, cg = rp.eval.accuracy(m, task, { problems = cfg.problems, seed = cfg.eval_seed })
        res.correct_greedy = cg
      else
        res.correct_greedy = correct
      end
      local digits = parse_digits(cfg.eval_digits, 2)
      if #digits > 0 then
        eo.digits = digits
        local accs = rp.eval.length_generalisation(m, task, eo)
        res.by_digits = {}
        for i, d in ipairs(digits) do
          res.by_digits[i] = { digits = d, accuracy = accs[d],
            correct = math.floor(accs[d] * cfg.problems + 0.5) }
        end
      end
    end
    local el = rp.eval.loss(m, task, { batches = cfg.valid_batches,
      batch_size = math.min(cfg.batch, 16), seed = cfg.eval_seed })
    res.eval_loss = el
    if res.metric == "loss" then res.value = el end
  end
  res.seconds_eval = clock() - t1
  return res
end

-- rp.experiment.better(metric, a, b) -> true when value a is better than value b (nil, a
-- diverged run, is worse than anything).
function experiment.better(metric, a, b)
  if a == nil then return false end
  if b == nil then return true end
  if metric == "loss" then return a < b end
  return a > b
end

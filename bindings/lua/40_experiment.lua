-- rp.experiment: one training run described by a flat config (every value a string, number or
-- boolean), the unit that scripts/train.lua runs once and scripts/compare.lua and
-- scripts/sweep.lua repeat over methods, seeds and grids (docs/experiments.md).
--   rp.experiment.keys()               -> the config keys in order: {name, default, kind, help}
--   rp.experiment.config([overrides])  -> a full config (defaults filled in, types and ranges
--                                         of single keys checked)
--   rp.experiment.check([overrides])   -> the same, and everything else that can be known before
--                                         training (model, memory, task, corpus splits)
--   rp.experiment.task(cfg)            -> the task of a config (as run builds it)
--   rp.experiment.run(cfg[, progress[, opts]]) -> result table (see run below); with
--                                         opts.keep_model also the model, its task and optimiser
--   rp.experiment.resumable(cfg, path) -> the step run with {save = path, resume = true} would
--                                         go on from (0: afresh), or nil and why (and
--                                         "finished" for the model of a finished run)
-- Errors name the public function: "bad argument #1 to 'rp.experiment.run' (option 'steps' must
-- be >= 1, got 0)".
--
-- Called by luaopen_roper as chunk(rp, internals).
local rp, internals = ...
local path_kind, read_file, write_file = internals.path_kind, internals.read_file,
  internals.write_file

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
  { "max_bytes", 268435456, "int", "text: the largest corpus in bytes (a folder's files together)" },
}

-- The model: the keys of rp.model's config (core's config schema: internals.model_keys), in its
-- order, but vocab (the task's), max_batch (batch) and seed (a training key below); the
-- experiment's own default and help where they differ from rp.model's. A number whose default is
-- integral is an integer (as the experiment has always written it: base 10000).
local MODEL_OWN = {
  d_model = { 64 }, layers = { 2 }, d_ff = { 0, "feed-forward width (0: 4 * d_model)" },
  seq_len = { 128, "training sequence length (tokens per row)" },
  rotate = { "", "rotary pe: the placements rotated, letters of qkvo (\"vo\", \"qkv\"; \"\": the "
    .. "mode's own, rope qk, roper qkvo)" },
}
local NOT_MODEL = { vocab = true, max_batch = true, seed = true }
local MODEL_ROW = {}
for _, row in ipairs(internals.model_keys) do
  if not NOT_MODEL[row.name] then
    local own = MODEL_OWN[row.name] or {}
    local kind = row.type == "enum" and row.names or row.type == "rotate" and "string"
      or row.type == "number" and "number" or "int"
    local default = own[1]
    if default == nil then default = math.tointeger(row.default) or row.default end
    KEYS[#KEYS + 1] = { row.name, default, kind, own[2] or row.help }
    MODEL_ROW[row.name] = row
  end
end

for _, k in ipairs {
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
  { "eval_lengths", "", "string", "also evaluate at these lengths, e.g. 3,6,12 (addition: operand "
    .. "digits; substring_index: str_len; substring_prefix, text: seq_len; rp.eval.lengths)" },
  { "eval_scaling", "none", "string", "eval_lengths: the context extensions evaluated, a list of "
    .. "none, pi, ntk, yarn (a pe that rotates nothing: none only)" },
  { "valid_batches", 16, "int", "loss tasks: fresh batches for the evaluation loss" },
  { "log_every", 0, "int", "steps per loss-curve point (0: steps / 100, at least 1)" },
} do
  KEYS[#KEYS + 1] = k
end

local BY_NAME = {}
for _, k in ipairs(KEYS) do BY_NAME[k[1]] = k end

-- The task a task-specific key belongs to (the others apply to every task).
local TASK_OF = { format = "addition", max_digits = "addition", quirk = "addition",
  eval_digits = "addition", str_len = "substring_index", substr_len = "substring_prefix",
  rnd_len = "substring_prefix", path = "text", valid_fraction = "text", max_bytes = "text" }

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

local argerror, inner = internals.argerror, internals.inner

-- rp.experiment.applies(key, task) -> true when config key `key` matters for `task` (keys of
-- other tasks, such as path for substring_index, do not change a run)
function experiment.applies(key, task)
  local fname = "rp.experiment.applies"
  if type(key) ~= "string" or not BY_NAME[key] then
    argerror(fname, 1, ("a config key expected, got %s"):format(type(key) == "string"
      and ("%q"):format(key) or type(key)))
  end
  local tasks = BY_NAME.task[3]
  local known = false
  for _, t in ipairs(tasks) do known = known or t == task end
  if not known then
    argerror(fname, 2, ("a task (%s) expected, got %s"):format(table.concat(tasks, ", "),
      type(task) == "string" and ("%q"):format(task) or type(task)))
  end
  local t = TASK_OF[key]
  return t == nil or t == task
end

-- Converts v (a value or its text, as from a command line) to key k's kind, or raises naming
-- the public function fname.
local function coerce(k, v, fname)
  local name, kind = k[1], k[3]
  if type(v) == "string" and kind ~= "string" and type(kind) ~= "table" then
    if kind == "bool" then
      if v == "true" then v = true elseif v == "false" then v = false end
    else
      v = tonumber(v) or v
    end
  end
  local function bad(what) argerror(fname, 1, ("option '%s' must be %s, got %s"):format(name, what,
    tostring(v))) end
  if type(kind) == "table" then
    for _, s in ipairs(kind) do
      if v == s then return v end
    end
    bad("one of " .. table.concat(kind, ", "))
  elseif kind == "int" then
    if type(v) == "number" and v == math.floor(v) and math.abs(v) <= 2^53 then
      return math.tointeger(v)
    end
    bad("an integer")
  elseif kind == "number" then
    if type(v) == "number" and v == v and math.abs(v) ~= math.huge then return v end
    bad("a finite number")
  elseif kind == "bool" then
    if type(v) == "boolean" then return v end
    bad("true or false")
  else
    if type(v) == "string" then return v end
    bad("a string")
  end
end

-- The digit counts of eval_digits ("9,10,11"), or raises naming fname.
local function parse_digits(s, fname)
  local out = {}
  for part in s:gmatch("[^,%s]+") do
    local d = math.tointeger(tonumber(part))
    if not d or d < 1 or d > 18 then
      argerror(fname, 1, ("option 'eval_digits' must list digit counts in 1..18, got %s"):format(part))
    end
    out[#out + 1] = d
  end
  return out
end

-- The lengths of eval_lengths ("3,6,12": integers >= 1; each task's own range is checked by
-- validate), or raises naming fname.
local function parse_lengths(s, fname)
  local out = {}
  for part in s:gmatch("[^,%s]+") do
    local L = math.tointeger(tonumber(part))
    if not L or L < 1 then
      argerror(fname, 1, ("option 'eval_lengths' must list lengths (integers >= 1), got %s"):format(
        part))
    end
    out[#out + 1] = L
  end
  return out
end

-- The context extensions of eval_scaling ("none,pi"; at least one, each once), or raises. With
-- cfg, those that apply to its model: a scaling changes the rotation angles, so a pe that rotates
-- nothing (or linear attention) is evaluated as it is, under "none" alone.
local function parse_scalings(s, fname, cfg)
  local out, seen = {}, {}
  for part in s:gmatch("[^,%s]+") do
    local ok = false
    for _, n in ipairs(internals.scalings) do ok = ok or n == part end
    if not ok then
      argerror(fname, 1, ("option 'eval_scaling' must list names of %s, got %s"):format(
        table.concat(internals.scalings, ", "), part))
    end
    if seen[part] then
      argerror(fname, 1, ("option 'eval_scaling' names %s twice"):format(part))
    end
    seen[part] = true
    out[#out + 1] = part
  end
  if #out == 0 then
    argerror(fname, 1, ("option 'eval_scaling' must list names of %s, got nothing"):format(
      table.concat(internals.scalings, ", ")))
  end
  if cfg and (not internals.pe_modes[cfg.pe].rotary or cfg.attention == "linear") then
    return { "none" }
  end
  return out
end

-- Ranges of single keys, as {key, lowest, strict, highest, strict at the top}: the value must be
-- > lowest (strict) or >= lowest, and when highest is given < or <= it. The training and
-- evaluation keys (the C constructors do not see them), then every model key's range from the
-- config schema, so that a bad value is refused even where the run's model does not use the key
-- (model_opts leaves it out then); an unset per-placement fraction is 0.
local RANGES = {
  { "steps", 1 }, { "batch", 1 }, { "problems", 1 }, { "valid_batches", 1 }, { "log_every", 1 },
  { "lr", 0, true }, { "weight_decay", 0 }, { "clip", 0 }, { "warmup", 0 }, { "min_lr", 0 },
  { "threads", 0 }, { "top_k", 0 },
}
local function int(x) return math.tointeger(x) or x end
for _, row in ipairs(internals.model_keys) do
  if MODEL_ROW[row.name] and row.lo then
    RANGES[#RANGES + 1] = { row.name, int(row.lo), row.lo_open,
      row.hi ~= math.huge and int(row.hi) or nil, row.hi_open, unset0 = row.unset0,
      int = row.type == "int" }
  end
end

-- config without its public name: fname names the function the user called.
local function resolve(fname, overrides)
  if overrides ~= nil and type(overrides) ~= "table" then
    argerror(fname, 1, "table expected, got " .. type(overrides))
  end
  local cfg = {}
  for _, k in ipairs(KEYS) do cfg[k[1]] = k[2] end
  for name, v in next, overrides or {} do
    local k = BY_NAME[name]
    if not k then
      local names = {}
      for i, kk in ipairs(KEYS) do names[i] = kk[1] end
      argerror(fname, 1, ("unknown option '%s' (known: %s)"):format(tostring(name),
        table.concat(names, ", ")))
    end
    cfg[name] = coerce(k, v, fname)
  end
  if cfg.max_digits == 0 then cfg.max_digits = cfg.format == "labml" and 7 or 8 end
  if cfg.quirk == "auto" then cfg.quirk = cfg.format == "labml" and "on" or "off" end
  if cfg.d_ff == 0 then cfg.d_ff = 4 * cfg.d_model end
  if cfg.log_every == 0 then cfg.log_every = math.max(1, cfg.steps // 100) end
  for _, r in ipairs(RANGES) do
    local name, lo, strict, hi, hi_strict = r[1], r[2], r[3], r[4], r[5]
    local v = cfg[name]
    if not (r.unset0 and v == 0) then
      if hi and (v < lo or (strict and v == lo) or v > hi or (hi_strict and v == hi)) then
        local range = r.int and ("%d..%d"):format(lo, hi)
          or ("%s%s, %s%s"):format(strict and "(" or "[", lo, hi, hi_strict and ")" or "]")
        argerror(fname, 1, ("option '%s' must be in %s, got %s"):format(name, range, v))
      elseif v < lo or (strict and v == lo) then
        argerror(fname, 1, ("option '%s' must be %s %s, got %s"):format(name,
          strict and ">" or ">=", lo, v))
      end
    end
  end
  if cfg.threads > 1024 then
    argerror(fname, 1, "option 'threads' must be at most 1024, got " .. cfg.threads)
  end
  if cfg.decode == "sample" and cfg.temperature <= 0 then
    argerror(fname, 1, "option 'temperature' must be > 0 for sampling, got " .. cfg.temperature)
  end
  parse_digits(cfg.eval_digits, fname)
  parse_lengths(cfg.eval_lengths, fname)
  parse_scalings(cfg.eval_scaling, fname)
  if cfg.eval_digits ~= "" and cfg.task ~= "addition" then
    argerror(fname, 1, "option 'eval_digits' applies to the addition task only")
  end
  return cfg
end

-- rp.experiment.config([overrides]) -> cfg: every key of KEYS, overrides checked and converted
-- (strings from a command line are accepted for numbers), the "resolved by config" defaults
-- filled in (max_digits, quirk, d_ff, log_every). Unknown keys raise. A config fed back in keeps
-- its resolved values (d_ff stays 256 when d_model changes): set them to 0 / "auto" again.
function experiment.config(overrides)
  return resolve("rp.experiment.config", overrides)
end

-- The options of rp.tasks.<task> for cfg.
local function task_opts(cfg)
  local t = cfg.task
  if t == "addition" then
    return { format = cfg.format, max_digits = cfg.max_digits, quirk = cfg.quirk == "on",
      seq_len = cfg.seq_len }
  elseif t == "substring_index" then
    return { str_len = cfg.str_len, seq_len = cfg.seq_len }
  elseif t == "substring_prefix" then
    return { substr_len = cfg.substr_len, rnd_len = cfg.rnd_len, seq_len = cfg.seq_len }
  end
  return { path = cfg.path, valid_fraction = cfg.valid_fraction, seq_len = cfg.seq_len,
    max_bytes = cfg.max_bytes }
end

-- The task of cfg, or nil and a one-line message (bad options, a corpus that cannot be used).
local function make_task(cfg)
  local ok, task, err = pcall(rp.tasks[cfg.task], task_opts(cfg))
  if not ok then return nil, "task " .. cfg.task .. ": " .. inner(task) end
  if not task then return nil, err end
  return task
end

-- rp.experiment.task(cfg) -> task | nil, message: the task of an experiment config, as
-- rp.experiment.run builds it (to encode and decode for a model saved by a run, or to draw its
-- problems). cfg as for rp.experiment.config; bad keys and options raise, a corpus that cannot be
-- read returns nil and "path: reason" (as rp.tasks.text).
function experiment.task(cfg)
  local fname = "rp.experiment.task"
  cfg = resolve(fname, cfg)
  local ok, task, err = pcall(rp.tasks[cfg.task], task_opts(cfg))
  if not ok then argerror(fname, 1, "task " .. cfg.task .. ": " .. inner(task)) end
  return task, err
end

-- The config of rp.model for cfg and a task of vocabulary V: every model key of cfg (rotate ""
-- and an unset fraction left out), less those that do nothing for the run's model (a shared
-- config sets rel_clip for shaw and rope alike; internals.model_merge).
local function model_opts(cfg, V)
  local o = { vocab = V, max_batch = cfg.batch, seed = cfg.seed }
  for name, row in pairs(MODEL_ROW) do
    local v = cfg[name]
    if not (row.unset0 and v == 0) and not (row.type == "rotate" and v == "") then o[name] = v end
  end
  return internals.model_merge(o)
end

-- The length a task trains at, in the units of eval_lengths (rp.eval.lengths's default).
local function eval_train_length(tc)
  if tc.kind == "addition" then return tc.max_digits end
  if tc.kind == "substring_index" then return tc.str_len end
  return tc.seq_len
end

local function gib(bytes) return ("%.1f GiB"):format(bytes / 2^30) end

-- Everything about cfg (already resolved) that can be known before training, or raises naming
-- fname: the task and its corpus (both splits hold a window of seq_len + 1 characters), the model
-- config, and the memory of the model and its optimiser against the memory available. Returns
-- cfg, rp.model_memory's table and the task's vocabulary size.
local function validate(fname, cfg)
  local task, err = make_task(cfg)
  if not task then argerror(fname, 1, err) end
  local V = task:vocab_size()
  if cfg.task == "substring_prefix" and cfg.seq_len < cfg.substr_len + cfg.rnd_len + 1 then
    -- a row scores its first character at position substr_len + filler + 2 (filler up to
    -- rnd_len - 1): a shorter row may score nothing, and a batch of such rows stops training
    getmetatable(task).__close(task)
    argerror(fname, 1, ("option 'seq_len' must be at least substr_len + rnd_len + 1 = %d for "
      .. "substring_prefix (a shorter row may score nothing), got %d"):format(
      cfg.substr_len + cfg.rnd_len + 1, cfg.seq_len))
  end
  if cfg.task == "text" then
    local train, valid = task:split_sizes()
    local need = cfg.seq_len + 1
    if train < need then
      argerror(fname, 1, ("option 'path': the training split of %s holds %d characters, fewer "
        .. "than seq_len + 1 = %d"):format(cfg.path, train, need))
    end
    if cfg.valid_fraction > 0 and valid < need then
      argerror(fname, 1, ("option 'path': the validation split of %s holds %d characters, fewer "
        .. "than seq_len + 1 = %d (use a larger corpus, a larger valid_fraction or a smaller "
        .. "seq_len)"):format(cfg.path, valid, need))
    end
  end
  local tc, split_sizes = task:config(), cfg.task == "text" and { task:split_sizes() }
  getmetatable(task).__close(task)
  local mc = model_opts(cfg, V)
  local ok, mem = pcall(rp.model_memory, mc)
  if not ok then argerror(fname, 1, "model: " .. inner(mem):gsub("max_batch", "batch")) end
  local need = mem.model + mem.optimiser
  if mem.available and need > mem.available then
    argerror(fname, 1, ("the model (d_model %d, %d layer%s, batch %d x seq_len %d) needs %s with "
      .. "its optimiser, more than the %s of memory available"):format(cfg.d_model, cfg.layers,
      cfg.layers == 1 and "" or "s", cfg.batch, cfg.seq_len, gib(need), gib(mem.available)))
  end
  -- every length of eval_lengths with every context extension of eval_scaling, as run will
  -- evaluate them (rp.eval.lengths's checks)
  local lengths = parse_lengths(cfg.eval_lengths, fname)
  if #lengths > 0 then
    local split = cfg.task == "text" and cfg.valid_fraction > 0 and "valid" or "train"
    for _, sc in ipairs(parse_scalings(cfg.eval_scaling, fname, cfg)) do
      local pok, perr = pcall(internals.length_plan, fname, 1, mc, tc, { lengths = lengths,
        scaling = sc, train_length = eval_train_length(tc),
        batch_size = math.min(cfg.batch, 16), split = split,
        split_size = split_sizes and split_sizes[split == "valid" and 2 or 1] })
      if not pok then
        argerror(fname, 1, ("option 'eval_lengths'%s: %s"):format(sc == "none" and ""
          or (" with eval_scaling " .. sc), inner(perr)))
      end
    end
  end
  return cfg, mem, V
end

-- rp.experiment.check([overrides]) -> cfg, memory: rp.experiment.config, then everything that
-- can be known before training (validate); memory is rp.model_memory's table for the run.
function experiment.check(overrides)
  local cfg, mem = validate("rp.experiment.check", resolve("rp.experiment.check", overrides))
  return cfg, mem
end

-- The options of rp.experiment.run (argument 3), checked and copied (no metamethod of the
-- caller's table runs later): keep_model (boolean), save (a path), save_every (steps, with save),
-- resume (boolean, with save), comm (a roper.Comm). The folder of save must take a file: a probe
-- file "<save>.probe" is created and removed (unless something is there already, which is left
-- alone), so a path that cannot be written is an error before training, not after it.
local RUN_OPTS = { "keep_model", "save", "save_every", "resume", "comm" }

local function run_opts(fname, opts)
  if opts == nil then return {} end
  if type(opts) ~= "table" then
    argerror(fname, 3, "options table expected, got " .. type(opts))
  end
  local known = {}
  for _, k in ipairs(RUN_OPTS) do known[k] = true end
  local o = {}
  for k, v in next, opts do
    if not known[k] then
      argerror(fname, 3, ("unknown option '%s' (known: %s)"):format(tostring(k),
        table.concat(RUN_OPTS, ", ")))
    end
    o[k] = v
  end
  for _, k in ipairs { "keep_model", "resume" } do
    if o[k] ~= nil and type(o[k]) ~= "boolean" then
      argerror(fname, 3, ("option '%s' must be a boolean, got %s"):format(k, type(o[k])))
    end
  end
  if o.comm ~= nil then
    local mt = type(o.comm) == "userdata" and getmetatable(o.comm)
    if not (mt and mt.__index == rp.Comm) then
      argerror(fname, 3, "option 'comm' must be a roper.Comm (rp.mpi.init()), got " .. type(o.comm))
    end
    if rp.mpi.world() == nil then argerror(fname, 3, "option 'comm': MPI was finalised") end
  end
  if o.resume and o.save == nil then argerror(fname, 3, "option 'resume' needs option 'save'") end
  if o.save ~= nil then
    if type(o.save) ~= "string" then
      argerror(fname, 3, "option 'save' must be a path (a string), got " .. type(o.save))
    end
    if o.save == "" or o.save:find("\0", 1, true) then
      argerror(fname, 3, "option 'save' must be a nonempty path without NUL bytes")
    end
    if path_kind(o.save) == "a folder" then
      argerror(fname, 3, ("option 'save': %s is a folder, not a file"):format(o.save))
    end
    -- (a file of that name is left alone, and so is a FIFO, whose open would block)
    local probe = o.save .. ".probe"
    local there, err = path_kind(probe)
    if there == false then
      local f
      f, err = io.open(probe, "wb")
      if f then
        f:close()
        os.remove(probe)
      end
      there = f and true or nil
    end
    if there == nil then
      argerror(fname, 3, ("option 'save': %s: cannot write there (%s)"):format(o.save,
        tostring(err):gsub("^.-: ", "")))
    end
  end
  if o.save_every ~= nil then
    local n = o.save_every
    if math.type(n) == "float" and n == math.floor(n) and math.abs(n) <= 2^53 then
      n = math.tointeger(n)
    end
    if math.type(n) ~= "integer" or n < 1 then
      argerror(fname, 3, "option 'save_every' must be an integer >= 1, got " .. tostring(n))
    end
    if o.save == nil then argerror(fname, 3, "option 'save_every' needs option 'save'") end
    o.save_every = n
  end
  return o
end

local function wall_clock()
  local ok, system = pcall(require, "system")
  if ok and type(system) == "table" and system.gettime then return system.gettime end
  return os.time
end

-- A config value as one word (for comm:agree and the training state): numbers in their shortest
-- exact form, strings with spaces, controls, %, ; and = escaped as %XX. Equal values give equal
-- words, and a word never holds a separator.
local function config_word(v)
  if math.type(v) == "float" then
    for digits = 15, 17 do
      local t = ("%." .. digits .. "g"):format(v)
      if tonumber(t) == v or digits == 17 then return t end
    end
  end
  if type(v) == "string" then
    return (v:gsub("[%c%s%%;=]", function(c) return ("%%%02X"):format(c:byte()) end))
  end
  return tostring(v)
end

-- The config as one string, the same on every rank that was given the same config (keys in
-- KEYS order, each value a config_word), for comm:agree.
local function config_text(cfg, opts)
  local parts = {}
  for _, k in ipairs(KEYS) do parts[#parts + 1] = k[1] .. "=" .. config_word(cfg[k[1]]) end
  parts[#parts + 1] = ("save=%s;save_every=%s;resume=%s"):format(tostring(opts.save ~= nil),
    tostring(opts.save_every), tostring(opts.resume))
  return table.concat(parts, ";")
end

-- The training state beside a checkpoint (<save>.state): the step, the tokens, the seconds of
-- training so far, the open log_every window (sum, count), the run's config and the curve, so a
-- resumed run gives the result of an uninterrupted one, and only the run it belongs to goes on
-- from it. Written whole under a temporary name before the checkpoint and renamed after it
-- (write_state, commit_state); read back only when its step is the checkpoint's. Version 1
-- (before the config was kept) is still read.
local STATE_HEAD = "roper-run-state 2"
-- (a state is a few lines per curve point: a larger file is none)
local STATE_MAX_BYTES = 1 << 32

-- The keys a resumed run must share with the run it goes on from: all of them but threads and
-- the keys of other tasks (they do not change the result).
local function state_keys(cfg)
  local keys = {}
  for _, k in ipairs(KEYS) do
    local t = TASK_OF[k[1]]
    if k[1] ~= "threads" and (t == nil or t == cfg.task) then keys[#keys + 1] = k[1] end
  end
  return keys
end

local function fmt_num(x)
  if x ~= x then return "nan" end
  return ("%.17g"):format(x)
end

-- The state is written in two halves around the model's save, so that a run killed at any
-- moment leaves a model and a state of the same step: write_state writes <path>.tmp whole
-- (before the model is saved; atomically, through core's writer as the model is, which refuses
-- a FIFO or a folder there), commit_state renames it to <path> (after). Killed between the
-- model's rename and the state's, the model's step is in <path>.tmp, and read_state is asked
-- for both files.
local function write_state(path, st, cfg)
  local lines = { STATE_HEAD, ("%d %d %s %s %d"):format(st.step, st.tokens, fmt_num(st.seconds),
    fmt_num(st.sum), st.n) }
  local keys = state_keys(cfg)
  lines[3] = ("config %d"):format(#keys)
  for _, k in ipairs(keys) do lines[#lines + 1] = k .. " " .. config_word(cfg[k]) end
  for _, c in ipairs(st.curve) do
    lines[#lines + 1] = ("%d %d %s %s"):format(c.step, c.tokens, c.loss and fmt_num(c.loss) or "-",
      fmt_num(c.lr))
  end
  return write_file(path .. ".tmp", table.concat(lines, "\n") .. "\n")
end

local function commit_state(path)
  local rok, rerr = os.rename(path .. ".tmp", path)
  if not rok then
    os.remove(path .. ".tmp")
    return nil, rerr
  end
  return true
end

-- The state at path when it is whole and at step; nil otherwise.
local function read_state(path, step)
  local text = read_file(path, STATE_MAX_BYTES)
  if not text then return nil end
  local lines = {}
  for l in text:gmatch("[^\n]+") do lines[#lines + 1] = l end
  local version = lines[1] == STATE_HEAD and 2 or lines[1] == "roper-run-state 1" and 1
  if not version or not lines[2] then return nil end
  local at, tokens, seconds, sum, n = lines[2]:match("^(%d+) (%d+) (%S+) (%S+) (%d+)$")
  if math.tointeger(tonumber(at)) ~= step then return nil end
  local st = { step = step, tokens = math.tointeger(tonumber(tokens)), seconds = tonumber(seconds),
    sum = tonumber(sum), n = math.tointeger(tonumber(n)), curve = {} }
  if not (st.tokens and st.seconds and st.sum and st.n) then return nil end
  local first = 3
  if version == 2 then
    local nkeys = math.tointeger(tonumber((lines[3] or ""):match("^config (%d+)$")))
    if not nkeys then return nil end
    st.config = {}
    for i = 4, 3 + nkeys do
      local k, v = (lines[i] or ""):match("^(%S+) (.*)$")
      if not k then return nil end
      st.config[k] = v
    end
    first = 4 + nkeys
  end
  for i = first, #lines do
    local cs, ct, cl, clr = lines[i]:match("^(%d+) (%d+) (%S+) (%S+)$")
    if not cs then return nil end
    st.curve[#st.curve + 1] = { step = math.tointeger(tonumber(cs)),
      tokens = math.tointeger(tonumber(ct)), loss = tonumber(cl), lr = tonumber(clr) }
  end
  return st
end

-- The options of the optimiser cfg builds (rp.optim[cfg.optimiser]'s), for a model of any size.
local function optim_opts(cfg)
  local oc = { lr = cfg.lr, weight_decay = cfg.weight_decay, clip = cfg.clip,
    schedule = cfg.schedule }
  if cfg.schedule == "cosine" then
    oc.warmup, oc.total_steps = math.min(cfg.warmup, cfg.steps), cfg.steps
    oc.min_lr = math.min(cfg.min_lr, cfg.lr)
  elseif cfg.schedule == "noam" then
    oc.warmup = math.max(1, cfg.warmup)
  end
  return oc
end

-- The checkpoint a run saved at path, checked against the run cfg builds (mc: rp.model's
-- options, the model loaded for mc.max_batch rows; oc: the optimiser's): the model, its
-- optimiser and the training state of the optimiser's step (from <path>.state, or from
-- <path>.state.tmp where a run killed between its two saves left it; nil when neither holds
-- it). Otherwise nil and why, a sentence that starts with path: it cannot be loaded, holds no
-- optimiser, was trained with another model or optimiser or (its state says) another config,
-- or is beyond cfg.steps. The caller owns (and closes) the model and the optimiser.
local function open_checkpoint(path, cfg, mc, oc)
  local ok, m, opt = pcall(rp.load, path, { max_batch = mc.max_batch })
  if not ok then
    -- (max_batch is an error for a .npy or safetensors file: no run saves those)
    local kind = inner(m):match("is an? (%S+) file$")
    return nil, kind and ("%s: a %s file, not a checkpoint of a run"):format(path, kind) or inner(m)
  end
  if not m then return nil, tostring(opt) end
  local function bad(what)
    if type(opt) == "userdata" then getmetatable(opt).__close(opt) end
    getmetatable(m).__close(m)
    return nil, ("%s %s"):format(path, what)
  end
  local function trained_with(k, have, want)
    return bad(("was trained with %s = %s, the config asks for %s"):format(k, tostring(have),
      tostring(want)))
  end
  if type(opt) ~= "userdata" then return bad("holds no optimiser (it was not saved by a run)") end
  -- the first difference in key order, so the one named is always the same
  local function differs(want, have, skip)
    local keys = {}
    for k in pairs(want) do keys[#keys + 1] = k end
    table.sort(keys)
    for _, k in ipairs(keys) do
      -- (keys a pe ignores are absent from m:config())
      if not skip[k] and have[k] ~= nil and have[k] ~= want[k] then return k, have[k], want[k] end
    end
  end
  local k, have, want = differs(mc, m:config(), { max_batch = true })
  if k then return trained_with(k, have, want) end
  local ogot = opt:config()
  if ogot.kind ~= cfg.optimiser then
    return bad(("was trained with %s, the config asks for %s"):format(ogot.kind, cfg.optimiser))
  end
  k, have, want = differs(oc, ogot, {})
  if k then return trained_with(k, have, want) end
  local steps = opt:steps()
  if steps > cfg.steps then
    return bad(("is at step %d, beyond the config's steps = %d"):format(steps, cfg.steps))
  end
  if steps == 0 then return m, opt, nil end
  local state = path .. ".state"
  local st = read_state(state, steps) or read_state(state .. ".tmp", steps)
  -- the state names the run it belongs to: another run's checkpoint is refused, whatever its
  -- model (the seed, the task's data, the schedule's length all count); a version 1 state
  -- names none
  for _, key in ipairs(st and st.config and state_keys(cfg) or {}) do
    local there, here = st.config[key], config_word(cfg[key])
    if there ~= nil and there ~= here then return trained_with(key, there, here) end
  end
  return m, opt, st
end

-- rp.experiment.resumable(cfg, path) -> step | nil, why[, "finished"]
-- The step rp.experiment.run(cfg, progress, {save = path, resume = true}) would go on from, when
-- that run gives the result of an uninterrupted one: 0 when nothing is at path (it starts
-- afresh); the step of the checkpoint at path when its model and optimiser are the ones cfg
-- builds, its step at most cfg.steps, and a training state of that step is beside it (saved
-- with save_every) whose config is cfg's. Otherwise nil and why, a sentence that starts with
-- path: run would refuse the file (another model, optimiser or config, as it raises), or would
-- go on from it without the curve so far (no state of its step: a state lost, or a finished
-- run's model: at step cfg.steps, its state removed when the run ended; then also "finished",
-- there is nothing left to train). cfg as for rp.experiment.run (bad configs raise as there);
-- path a nonempty string without NUL bytes. Reads the files only (the model is loaded for one
-- row, then released).
function experiment.resumable(cfg, path)
  local fname = "rp.experiment.resumable"
  cfg = resolve(fname, cfg)
  if type(path) ~= "string" then
    argerror(fname, 2, "path (a string) expected, got " .. type(path))
  end
  if path == "" or path:find("\0", 1, true) then
    argerror(fname, 2, "path must be a nonempty string without NUL bytes")
  end
  local _, _, V = validate(fname, cfg)
  local kind, err = path_kind(path)
  if kind == false then return 0 end
  if not kind then return nil, err end
  local mc = model_opts(cfg, V)
  mc.max_batch = 1
  local m, opt, st = open_checkpoint(path, cfg, mc, optim_opts(cfg))
  if not m then return nil, opt end
  local steps = opt:steps()
  getmetatable(opt).__close(opt)
  getmetatable(m).__close(m)
  if steps > 0 and not st and steps == cfg.steps then
    return nil, ("%s is the model of a finished run (step %d of steps = %d)"):format(path, steps,
      steps), "finished"
  end
  if steps > 0 and not st then
    return nil, ("%s is at step %d and has no training state of that step beside it (%s.state)")
      :format(path, steps, path)
  end
  return steps
end

-- rp.experiment.run(cfg[, progress[, opts]]) -> result[, model, task, optimiser]
-- Trains a fresh model on cfg's task for cfg.steps steps and evaluates it. cfg is checked with
-- rp.experiment.config first (so a partial table works). progress(step, steps, loss), when
-- given, is called after every step (on rank 0 only with comm). opts (run_opts above):
--   keep_model    true: also return the trained model, its task and its optimiser (otherwise
--                 all three are released when run returns, or raises)
--   save          a path: the trained model and its optimiser are saved there (m:save, atomic)
--                 when training ends, before the evaluation; result.checkpoint is the path
--   save_every    n: also every n steps during training, to the same path (overwritten), so an
--                 interrupted run leaves the model of its last multiple of n; with save_every or
--                 resume, the training state (curve, tokens, time) goes beside it as <save>.state
--                 until the run has finished
--   resume        true: when save exists, go on from it (the model, optimiser, data stream and
--                 curve of the interrupted run; the result is the uninterrupted run's)
--   comm          a roper.Comm (rp.mpi.init()): data-parallel training over its ranks. Every
--                 rank runs the same config (checked by a hash); each takes its share of each
--                 batch's rows (at most ceil(batch / ranks)), the gradients are summed; rank 0
--                 alone saves, reports progress and evaluates. Other ranks return the result
--                 without the evaluation (result.rank set).
-- The result:
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
--   by_length     with eval_lengths: for each context extension of eval_scaling, each length:
--                 { {length =, scaling =, factor =, correct =, accuracy =} (addition,
--                 substring_index) or {length =, scaling =, factor =, loss =}, ... }
--                 (rp.eval.lengths with the evaluation's options); seconds_eval_lengths its time
--   curve         { {step =, tokens =, loss =, lr =}, ... }: mean training loss per log_every steps
--   diverged      true when a training loss was not finite (training stopped there; nothing
--                 non-finite ever reached the weights)
--   exploded      true when the loss blew up but stayed finite: a curve point above both twice
--                 the lowest earlier point and ln(vocab), the loss of uniform guessing (the model
--                 had learned something and then became worse than guessing); exploded_at: the
--                 step of the first such point
--   seconds_train, seconds_eval, tokens_per_s, threads
--   checkpoint    the path of opts.save (absent without it)
--   resumed_at    with resume: the step the run went on from (0: it started afresh)
--   ranks, comm_seconds   with comm: the number of ranks and the seconds in MPI_Allreduce
-- Everything rp.experiment.check finds is raised before anything is built or trained.
function experiment.run(cfg, progress, opts)
  local fname = "rp.experiment.run"
  cfg = validate(fname, resolve(fname, cfg))
  if progress ~= nil and type(progress) ~= "function" then
    argerror(fname, 2, "function expected, got " .. type(progress))
  end
  opts = run_opts(fname, opts)
  local comm = opts.comm
  local ranks, rank = comm and comm:size() or 1, comm and comm:rank() or 0
  if ranks > cfg.batch then
    argerror(fname, 1, ("%d ranks share a batch of %d sequence%s (each rank needs at least one: "
      .. "use at most %d ranks or a larger batch)"):format(ranks, cfg.batch,
      cfg.batch == 1 and "" or "s", cfg.batch))
  end
  if ranks > 1 and not comm:agree(config_text(cfg, opts)) then
    argerror(fname, 1, ("the %d ranks were given different configs (every rank must run the same "
      .. "command)"):format(ranks))
  end
  if rank ~= 0 then progress = nil end
  local clock = wall_clock()
  local threads = rp.blas.threads()
  if cfg.threads > 0 then
    rp.set_num_threads(cfg.threads)
  elseif ranks > 1 and (os.getenv("OMP_NUM_THREADS") or "") == "" then
    -- the cores of a node shared by the ranks on it
    rp.set_num_threads(math.max(1, threads // comm:local_size()))
  end
  -- a failure here (the memory that check saw gone meanwhile) is named after run, not after
  -- the constructor it happened in
  local function build(f, ...)
    local ok, obj, err = pcall(f, ...)
    if not ok then argerror(fname, 1, inner(obj)) end
    if obj == nil then argerror(fname, 1, tostring(err)) end
    return obj
  end
  -- the task, model and optimiser are released when run ends (returns or raises), unless they
  -- are returned (keep_model)
  local built, kept = {}, false
  local _ <close> = setmetatable({}, { __close = function()
    if kept then return end
    for i = #built, 1, -1 do getmetatable(built[i]).__close(built[i]) end
  end })
  local function keep(obj)
    built[#built + 1] = obj
    return obj
  end
  local task = keep(build(rp.tasks[cfg.task], task_opts(cfg)))
  local mc = model_opts(cfg, task:vocab_size())
  mc.max_batch = (cfg.batch + ranks - 1) // ranks
  local oc = optim_opts(cfg)
  local m, opt, st
  if opts.resume and path_kind(opts.save) ~= false then
    m, opt, st = open_checkpoint(opts.save, cfg, mc, oc)
    if not m then argerror(fname, 3, "option 'resume': " .. opt) end
    keep(m)
    keep(opt)
  else
    m = keep(build(rp.model, mc))
    opt = keep(build(rp.optim[cfg.optimiser], m, oc))
  end
  -- every rank holds the same weights (a hash of each parameter compared over the ranks)
  local function weights_agree()
    local same = true
    for _, p in ipairs(m:params()) do same = comm:agree(p.tensor) and same end
    return same
  end
  if ranks > 1 and not weights_agree() then
    argerror(fname, 1, ("the %d ranks built different initial models"):format(ranks))
  end
  local state_path = opts.save and (opts.save .. ".state")
  local res = { config = cfg, params = m:num_params(), curve = {}, diverged = false,
    threads = rp.blas.threads() }
  local sum, n, tokens, before = 0, 0, 0, 0
  local first = opt:steps() + 1
  if opts.resume then res.resumed_at = first - 1 end
  if st then
    -- (without its state a checkpoint is gone on from with the curve from there on)
    res.curve, sum, n, tokens, before = st.curve, st.sum, st.n, st.tokens, st.seconds
  end
  local t0
  local keep_state = opts.save_every ~= nil or opts.resume
  local function save(step)
    if rank ~= 0 then return end
    -- nothing non-finite reaches the weights (train_step skips such steps); should it anyway,
    -- the run's model is still what is asked for
    local ok, err = true, nil
    if keep_state then
      ok, err = write_state(state_path, { step = step, tokens = tokens, sum = sum, n = n,
        seconds = before + clock() - t0, curve = res.curve }, cfg)
    end
    if ok then ok, err = m:save(opts.save, opt, { allow_nonfinite = true }) end
    if ok and keep_state then ok, err = commit_state(state_path) end
    if not ok then
      error(("rp.experiment.run: cannot save the model: %s"):format(err), internals.user_level())
    end
  end
  -- the data stream is seeded apart from the initialisation (which uses cfg.seed itself); a
  -- resumed run draws the batches it already trained on again to reach its place in it
  local data = rp.rng(cfg.seed + 0x100000000)
  for _ = 1, first - 1 do task:batch(cfg.batch, data) end

  t0 = clock()
  local row_tokens = cfg.seq_len
  local step_opts = { nonfinite = "skip", comm = ranks > 1 and comm or nil }
  local last_step = first - 1
  for step = first, cfg.steps do
    local lr = opt:lr()
    local x, y = task:batch(cfg.batch, data)
    local loss = m:train_step(x, y, nil, opt, step_opts) -- diverged: stop below
    tokens = tokens + cfg.batch * row_tokens
    last_step = step
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
    if opts.save_every and step % opts.save_every == 0 and step < cfg.steps then save(step) end
  end
  local t1 = clock()
  res.seconds_train = before + (t1 - t0)
  res.tokens_per_s = tokens / math.max(res.seconds_train, 1e-9)
  if ranks > 1 then
    if not weights_agree() then
      error(("rp.experiment.run: the weights of the %d ranks differ after training"):format(ranks),
        internals.user_level())
    end
    res.ranks, res.comm_seconds = ranks, comm:stats().seconds
  end
  if opts.save then
    save(last_step)
    -- the state serves an unfinished run only
    if rank == 0 and keep_state then
      os.remove(state_path)
      os.remove(state_path .. ".tmp")
    end
    res.checkpoint = opts.save
    t1 = clock()
  end
  if rank ~= 0 then
    -- the evaluation is rank 0's
    res.rank = rank
    if opts.keep_model then
      kept = true
      return res, m, task, opt
    end
    return res
  end
  if cfg.threads == 0 then rp.set_num_threads(threads) end
  if mc.max_batch < cfg.batch then
    -- the evaluation's batches are the single-process run's
    m = keep(m:derive { max_batch = cfg.batch })
  end

  -- a loss that exploded but stayed finite
  res.exploded = false
  local best, uniform = math.huge, math.log(task:vocab_size())
  for _, p in ipairs(res.curve) do
    if p.loss then
      if p.loss > 2 * best and p.loss > uniform then
        res.exploded, res.exploded_at = true, p.step
        break
      end
      best = math.min(best, p.loss)
    end
  end

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
      local digits = parse_digits(cfg.eval_digits, fname)
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
  local lengths = parse_lengths(cfg.eval_lengths, fname)
  if not res.diverged and #lengths > 0 then
    local t2 = clock()
    res.by_length = {}
    for _, sc in ipairs(parse_scalings(cfg.eval_scaling, fname, cfg)) do
      local eo = { lengths = lengths, scaling = sc, seed = cfg.eval_seed }
      if res.metric == "correct" then
        eo.problems, eo.decode = cfg.problems, cfg.decode
        if cfg.decode == "sample" then eo.temperature, eo.top_k = cfg.temperature, cfg.top_k end
      else
        eo.batches, eo.batch_size = cfg.valid_batches, math.min(cfg.batch, 16)
      end
      for _, r in ipairs(rp.eval.lengths(m, task, eo)) do
        res.by_length[#res.by_length + 1] = { length = r.length, scaling = sc, factor = r.factor,
          accuracy = r.accuracy, correct = r.correct, loss = r.loss }
      end
    end
    res.seconds_eval_lengths = clock() - t2
  end
  if opts.keep_model then
    kept = true
    return res, m, task, opt
  end
  return res
end

-- rp.experiment.better(metric, a, b) -> true when value a is better than value b (nil, a
-- diverged run, is worse than anything).
function experiment.better(metric, a, b)
  local fname = "rp.experiment.better"
  if metric ~= "loss" and metric ~= "correct" then
    argerror(fname, 1, ("metric must be \"loss\" or \"correct\", got %s"):format(
      type(metric) == "string" and ("%q"):format(metric) or type(metric)))
  end
  for i, v in ipairs { a, b } do
    if v ~= nil and type(v) ~= "number" then
      argerror(fname, i + 1, ("a number or nil expected, got %s"):format(type(v)))
    end
  end
  if a == nil then return false end
  if b == nil then return true end
  if metric == "loss" then return a < b end
  return a > b
end

-- rp.experiment: one training run described by a flat config (every value a string, number or
-- boolean), the unit that scripts/train.lua runs once and scripts/compare.lua and
-- scripts/sweep.lua repeat over methods, seeds and grids (docs/experiments.md).
--   rp.experiment.keys()               -> the config keys in order: {name, default, kind, help}
--   rp.experiment.config([overrides])  -> a full config (defaults filled in, types and ranges
--                                         of single keys checked)
--   rp.experiment.check([overrides[, opts]]) -> the same, and everything else that can be known
--                                         before training (model, memory, task, corpus splits;
--                                         opts.progress: the lm task's first steps)
--   rp.experiment.task(cfg)            -> the task of a config (as run builds it)
--   rp.experiment.run(cfg[, progress[, opts]]) -> result table (experiment/run.lua); with
--                                         opts.keep_model also the model, its task and optimiser
--   rp.experiment.resumable(cfg, path) -> the step run with {save = path, resume = true} would
--                                         go on from (0: afresh), or nil and why (and
--                                         "finished" for the model of a finished run, "no
--                                         state" for a checkpoint without its state)
--   rp.experiment.applies(key, task | cfg) -> whether config key `key` does something for
--                                         `task`, or for the run of config cfg; false and why
--                                         not
--   rp.experiment.better(metric, a, b) -> whether value a of the metric beats value b
-- Errors name the public function: "bad argument #1 to 'rp.experiment.run' (option 'steps' must
-- be >= 1, got 0)".
--
-- rp.experiment is five modules (bindings/lua/experiment/), one concern each; each returns its
-- private parts that the others require (never globals):
--   roper.experiment.keys    (this one) the config keys, their conversion and ranges:
--                            keys, applies, config; exports the table rp.experiment
--                            (experiment), resolve and the parsers of the list-valued keys
--   roper.experiment.check   what a config builds (the options of its task, model and
--                            optimiser) and everything known before training: task, check;
--                            exports validate and the option builders
--   roper.experiment.state   the training state beside a checkpoint and the checkpoint a run
--                            goes on from: resumable; exports them to run
--   roper.experiment.run     run, in named steps
--   roper.experiment.better  better: which of two values of a metric is better
local require = ...
local rp = require "roper"
local internals = require "roper.internals"
local args = require "roper.args"
local eval = require "roper.eval"

local experiment = {}
rp.experiment = experiment
-- what this module exports to the other modules of rp.experiment (filled in at the end)
local E = {}

-- {name, default, kind, help}; kind: a list of allowed strings, "int", "number", "bool",
-- "string". Keys named "<task>: ..." in their help apply to that task only (TASK_OF below).
local KEYS = {
  { "task", "substring_index", { "substring_index", "addition", "substring_prefix", "text",
    "grid_offset", "lm" }, "the task (docs/tasks.md; lm: docs/language_model.md)" },
}
-- The task a task-specific key belongs to (the others apply to every task).
local TASK_OF = {}

-- The task's keys: the rows of the task table (core's tasks/task_keys.c: internals.task_keys)
-- that rp.experiment offers (run), by task and in row order, with the row's default, kind and
-- help (after "<its task>: "), so that an option of rp.tasks.<task> is a key here with its
-- default and help in one place; task_opts (experiment/check.lua) passes them on. Where the
-- experiment takes a value of its own, TASK_OWN says which (the addition format's own length and
-- quirk: resolve asks rp.tasks.addition for them). The experiment's own keys of a task
-- (TASK_EXTRA) follow the key they name in `after`.
local TASK_OWN = {
  max_digits = { 0, "int", "addition: largest operand length (0: 8 for writeup, 7 for labml)" },
  quirk = { "auto", { "auto", "on", "off" }, "addition: labml's digit quirk (auto: on for labml)" },
}
local TASK_EXTRA = {
  { after = "rnd_len", task = "text",
    { "path", "/usr/share/games/fortunes/cookie", "string",
      "text: a UTF-8 file or a folder of them (default: Debian's fortunes package)" } },
  { after = "max_bytes", task = "lm",
    { "corpus", "data/linux-doc", "string", "lm: a corpus prepared by scripts/corpus.lua (make "
      .. "corpus writes the default), or a folder of token ids with an ids.txt (rp.lm.info)" },
    { "tokenizer", "", "string", "lm: a SentencePiece model (\"\": <corpus>/tokenizer-unigram-"
      .. "<vocab_size>.model, trained on the corpus's train split when missing)" },
    { "vocab_size", 8000, "int", "lm: the vocabulary of the default tokenizer" },
    { "eval_windows", 0, "int", "lm: evaluate the first n windows of seq_len tokens of the "
      .. "validation and test splits (0: the whole splits, and bits per byte)" } },
  { after = "max_offset", task = "grid_offset",
    { "positions", "index", { "index", "grid" }, "grid_offset: what a rotary pe turns by: index "
      .. "(the flattened token index) or grid (2-D (row, column) of the layout, task:positions2d, "
      .. "axial pairs)" },
    { "axes", "axial", { "axial", "mixed" }, "grid_offset with positions grid: how the rotation "
      .. "pairs map to (row, column): axial (each axis its own pairs) or mixed (RoPE-Mixed: each "
      .. "pair turns by a combination of both, W as rope-vit's init_random_2d_freqs, its angle "
      .. "from the seed)" } },
}
local TASK_ROW = {} -- name -> the task table's row, for the keys it offers
do
  local extra_after, groups, group_of = {}, {}, {}
  for _, e in ipairs(TASK_EXTRA) do extra_after[e.after] = e end
  for _, row in ipairs(internals.task_keys) do -- grouped by task, each in row order
    if row.run then
      assert(#row.kinds == 1, "rp.experiment: a task key of one task: " .. row.name)
      local task = row.kinds[1]
      if not group_of[task] then
        group_of[task] = {}
        groups[#groups + 1] = group_of[task]
      end
      table.insert(group_of[task], row)
      TASK_OF[row.name], TASK_ROW[row.name] = task, row
    end
  end
  for _, group in ipairs(groups) do
    for _, row in ipairs(group) do
      local own, task = TASK_OWN[row.name], TASK_OF[row.name]
      local kind = row.type == "enum" and row.names or row.type
      KEYS[#KEYS + 1] = own and { row.name, own[1], own[2], own[3] }
        or { row.name, math.tointeger(row.default) or row.default, kind, task .. ": " .. row.help }
      local e = extra_after[row.name]
      for _, k in ipairs(e or {}) do
        KEYS[#KEYS + 1] = k
        TASK_OF[k[1]] = e.task
      end
    end
  end
end

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
      or row.type == "number" and "number" or row.type == "bool" and "bool" or "int"
    local default = own[1]
    if default == nil then default = math.tointeger(row.default) or row.default end
    KEYS[#KEYS + 1] = { row.name, default, kind, own[2] or row.help }
    MODEL_ROW[row.name] = row
  end
end

-- The optimiser: the rows of core's table of the optimiser's keys (internals.optim_keys) that
-- rp.experiment offers (a row's experiment place, in that order), each with the row's default,
-- kind, range and help: one default per name for rp.optim, rp.experiment and the scripts.
-- decoupled is offered as optimiser (its values adam and adamw name the constructor,
-- rp.optim[cfg.optimiser]); the others by their names, as options of rp.optim (optim_opts). The
-- run's steps are the cosine schedule's total_steps, whose default they take.
local OPTIM_ROW, OPTIM = {}, {}
local OPTIM_NAME = { decoupled = "optimiser" }
for _, row in ipairs(internals.optim_keys) do
  OPTIM_ROW[row.name] = row
  if row.experiment then
    OPTIM[#OPTIM + 1] = { name = OPTIM_NAME[row.name] or row.name, row = row }
  end
end
table.sort(OPTIM, function(a, b) return a.row.experiment < b.row.experiment end)

-- training: the steps, the batch, the optimiser's keys, then the rest
KEYS[#KEYS + 1] = { "steps", OPTIM_ROW.total_steps.default, "int", "optimiser steps" }
KEYS[#KEYS + 1] = { "batch", 16, "int", "rows per step" }
for _, k in ipairs(OPTIM) do
  local row = k.row
  KEYS[#KEYS + 1] = { k.name, math.tointeger(row.default) or row.default,
    row.type == "enum" and row.names or row.type, row.help }
end
for _, k in ipairs {
  { "seed", 1, "int", "model initialisation and training data" },
  { "init", "", "string", "start from the weights of this checkpoint (fine-tuning: the run's "
    .. "model keys, such as seq_len and scaling, over them; a fresh optimiser; \"\": afresh)" },
  { "threads", 0, "int", "OpenMP threads for this run (0: leave as set)" },
  -- evaluation
  { "problems", 128, "int", "accuracy tasks: problems evaluated" },
  { "decode", "sample", { "sample", "greedy" }, "accuracy tasks: decoding (the write-up samples)" },
  { "temperature", 1, "number", "sampling temperature" },
  { "top_k", 0, "int", "sample among the top k logits (0: all)" },
  { "eval_seed", 12345, "int", "evaluation problems and sampling (the same for every run)" },
  { "eval_digits", "", "string", "addition: also evaluate at these operand lengths, e.g. 9,10,11" },
  { "eval_lengths", "", "string", "also evaluate at these lengths, e.g. 3,6,12 (addition: operand "
    .. "digits; substring_index: str_len; substring_prefix, text: seq_len; not grid_offset; "
    .. "rp.eval.lengths)" },
  { "eval_scaling", "none", "string", "eval_lengths: the context extensions evaluated, a list of "
    .. "rp.model's scalings (none, pi, ntk, yarn, dynamic, llama3; a pe that rotates nothing: none "
    .. "only)" },
  { "valid_batches", 16, "int", "loss tasks: fresh batches for the evaluation loss" },
  { "log_every", 0, "int", "steps per loss-curve point (0: steps / 100, at least 1)" },
  { "valid_every", 0, "int", "steps per validation-loss point on the loss curve (0: none; a "
    .. "multiple of log_every): the evaluation loss over valid_batches batches drawn with "
    .. "eval_seed, the same batches at every point" },
} do
  KEYS[#KEYS + 1] = k
end

local BY_NAME = {}
for _, k in ipairs(KEYS) do BY_NAME[k[1]] = k end

-- eval_digits is addition's (an evaluation key)
TASK_OF.eval_digits = "addition"

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

local argerror = args.argerror

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
  -- (a JSON null of a --config file, cjson's lightuserdata, is named as such; a NaN as "nan")
  local function bad(what) argerror(fname, 1, ("option '%s' must be %s, got %s"):format(name, what,
    type(v) == "userdata" and "null" or v ~= v and "nan" or tostring(v))) end
  if type(kind) == "table" then
    for _, s in ipairs(kind) do
      if v == s then return v end
    end
    bad("one of " .. table.concat(kind, ", "))
  elseif kind == "int" then
    local n = args.integral(v)
    if n and n >= -2^53 and n <= 2^53 then return n end
    bad(type(v) == "number" and v == math.floor(v) and "an integer within 2^53" or "an integer")
  elseif kind == "number" then
    if type(v) == "number" and v == v and math.abs(v) ~= math.huge then return v end
    bad("a finite number")
  elseif kind == "bool" then
    if type(v) == "boolean" then return v end
    bad("true or false")
  else
    if type(v) ~= "string" then bad("a string") end
    -- (no key holds a NUL byte: the paths among them would be read cut at it)
    if v:find("\0", 1, true) then
      argerror(fname, 1, ("option '%s' contains a NUL byte"):format(name))
    end
    return v
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
  local out, seen = {}, {}
  for part in s:gmatch("[^,%s]+") do
    local L = math.tointeger(tonumber(part))
    if not L or L < 1 then
      argerror(fname, 1, ("option 'eval_lengths' must list lengths (integers >= 1), got %s"):format(
        part))
    end
    if seen[L] then argerror(fname, 1, ("option 'eval_lengths' names %d twice"):format(L)) end
    seen[L] = true
    out[#out + 1] = L
  end
  -- ("" is the default, no lengths; a list that names none, ",", is a mistake)
  if #out == 0 and s ~= "" then
    argerror(fname, 1, "option 'eval_lengths' must list lengths (integers >= 1), got nothing")
  end
  return out
end

-- Whether cfg's model rotates nothing (a pe that is not rotary, or linear attention): a scaling
-- changes the rotation angles, so it has nothing to change there.
local function rotates_nothing(cfg)
  return not internals.pe_modes[cfg.pe].rotary or cfg.attention == "linear"
end

-- The context extensions of eval_scaling ("none,pi"; at least one, each once), or raises. With
-- cfg, those that apply to its model: a scaling changes the rotation angles, so a pe that rotates
-- nothing (or linear attention) is evaluated as it is, under "none" alone.
local function parse_scalings(s, fname, cfg)
  local out, seen = {}, {}
  for part in s:gmatch("[^,%s]+") do
    local ok = false
    for _, n in ipairs(eval.scalings) do ok = ok or n == part end
    if not ok then
      argerror(fname, 1, ("option 'eval_scaling' must list names of %s, got %s"):format(
        table.concat(eval.scalings, ", "), part))
    end
    if seen[part] then
      argerror(fname, 1, ("option 'eval_scaling' names %s twice"):format(part))
    end
    seen[part] = true
    out[#out + 1] = part
  end
  if #out == 0 then
    argerror(fname, 1, ("option 'eval_scaling' must list names of %s, got nothing"):format(
      table.concat(eval.scalings, ", ")))
  end
  if cfg and rotates_nothing(cfg) then return { "none" } end
  return out
end

-- Ranges of single keys, as {key, lowest, strict, highest, strict at the top}: the value must be
-- > lowest (strict) or >= lowest, and when highest is given < or <= it. The training and
-- evaluation keys (the C constructors do not see them); the optimiser's as {key, optim = its
-- row's name}, checked and worded by core (internals.optim_check); then every model key's range
-- from the config schema, so that a bad value is refused even where the run's model does not use
-- the key (model_opts leaves it out then); an unset per-placement fraction is 0.
local RANGES = {
  { "steps", 1 }, { "batch", 1 }, { "problems", 1 }, { "valid_batches", 1 }, { "log_every", 1 },
  { "valid_every", 0 }, { "threads", 0 }, { "top_k", 0 }, { "eval_windows", 0 }, { "vocab_size", 1 },
}
local function int(x) return math.tointeger(x) or x end
for _, k in ipairs(OPTIM) do -- the optimiser's ranges: checked and worded by core's rows
  if k.row.lo then RANGES[#RANGES + 1] = { k.name, optim = k.row.name } end
end
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
  -- Hugging Face's names (rope_scaling, rope_theta) become roper's keys (rp.model's mapping)
  if overrides and (overrides.rope_scaling ~= nil or overrides.rope_theta ~= nil) then
    local ok, mapped = pcall(internals.hf_rope, overrides)
    if not ok then argerror(fname, 1, args.inner(mapped)) end
    local o = {}
    for k, v in next, overrides do o[k] = v end
    o.rope_scaling, o.rope_theta = nil, nil
    for k, v in next, mapped do
      if o[k] ~= nil and k ~= "base" then
        argerror(fname, 1, ("options 'rope_scaling' and '%s' exclude each other"):format(k))
      end
      o[k] = v
    end
    overrides = o
  end
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
  if cfg.max_digits == 0 or cfg.quirk == "auto" then -- the format's own: rp.tasks.addition's
    local own <close> = rp.tasks.addition { format = cfg.format }
    local c = own:config()
    if cfg.max_digits == 0 then cfg.max_digits = c.max_digits end
    if cfg.quirk == "auto" then cfg.quirk = c.quirk and "on" or "off" end
  end
  if cfg.d_ff == 0 then cfg.d_ff = 4 * cfg.d_model end
  if cfg.log_every == 0 then cfg.log_every = math.max(1, cfg.steps // 100) end
  for _, r in ipairs(RANGES) do
    local name, lo, strict, hi, hi_strict = r[1], r[2], r[3], r[4], r[5]
    local v = cfg[name]
    if r.optim then
      local msg = internals.optim_check(r.optim, v) -- "lr must be ...": the option's name first
      if msg then argerror(fname, 1, ("option '%s' %s"):format(name, msg:sub(#r.optim + 2))) end
    elseif not (r.unset0 and v == 0) then
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
  if cfg.valid_every > 0 and cfg.valid_every % cfg.log_every ~= 0 then
    argerror(fname, 1, ("option 'valid_every' must be a multiple of log_every (%d), got %d"):format(
      cfg.log_every, cfg.valid_every))
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

-- The model keys of cfg as rp.model's config (vocab: V): every model key but a rotate "" and an
-- unset fraction (41_experiment_check.lua's model_opts adds the positions and merges).
local function model_table(cfg, V)
  local o = { vocab = V, max_batch = cfg.batch, seed = cfg.seed }
  for name, row in pairs(MODEL_ROW) do
    local v = cfg[name]
    if not (row.unset0 and v == 0) and not (row.type == "rotate" and v == "") then o[name] = v end
  end
  return o
end

local function task_list(pred)
  local out = {}
  for _, t in ipairs(BY_NAME.task[3]) do out[#out + 1] = pred(t) and t or nil end
  return table.concat(out, ", ", 1, #out - 1) .. (#out > 1 and " or " or "") .. out[#out]
end

-- "rope, roper or roper_legacy": the rotary modes (the mode table's)
local function rotary_list()
  local out = {}
  for _, row in ipairs(rp.pe_modes()) do out[#out + 1] = row.rotary and row.name or nil end
  return table.concat(out, ", ", 1, #out - 1) .. " or " .. out[#out]
end

-- Why a key does nothing for the run of cfg (resolved), beyond its task (TASK_OF) and rp.model's
-- own rule for the model keys: key -> function(cfg) -> nil (it does something) or the reason,
-- in rp.model's words ("for pe rope: it applies to pe shaw or deberta").
local function accuracy_only(cfg)
  if not eval.accuracy_task(cfg.task) then
    return ("for task %s: it applies to the accuracy tasks (task %s)"):format(cfg.task,
      task_list(eval.accuracy_task))
  end
end
local function sampling_only(cfg)
  local why = accuracy_only(cfg)
  if why then return why end
  if cfg.decode ~= "sample" then
    return ("with decode %s: it applies to decode sample"):format(cfg.decode)
  end
end
local UNUSED_WHEN = {
  axes = function(cfg)
    if cfg.positions ~= "grid" then
      return ("with positions %s: it applies to positions grid"):format(cfg.positions)
    end
  end,
  problems = accuracy_only, decode = accuracy_only,
  temperature = sampling_only, top_k = sampling_only,
  warmup = function(cfg)
    if cfg.schedule == "constant" then
      return "with schedule constant: it applies to schedule cosine or noam"
    end
  end,
  min_lr = function(cfg)
    if cfg.schedule ~= "cosine" then
      return ("with schedule %s: it applies to schedule cosine"):format(cfg.schedule)
    end
  end,
  eval_scaling = function(cfg)
    if cfg.eval_lengths == "" then
      return "without eval_lengths: it applies when eval_lengths is given"
    end
    -- a pe that rotates nothing is evaluated under none alone (parse_scalings)
    if rotates_nothing(cfg) then
      return cfg.attention == "linear" and "with linear attention: it applies to softmax attention"
        or ("for pe %s: it applies to the rotary modes (%s)"):format(cfg.pe, rotary_list())
    end
  end,
}

-- rp.experiment.applies(key, task | cfg) -> true | false, why. With a task: whether config key
-- `key` matters for runs of the task (keys of other tasks, such as path for substring_index, do
-- not change a run). With an experiment config (as for rp.experiment.config): whether it does
-- something for that run: its task's keys, the keys of the run's model (rp.model's rule: rel_clip
-- for pe shaw or deberta, fraction_v where v or the output is rotated, ...) and the training and
-- evaluation keys that hold in some modes only (min_lr: schedule cosine; temperature: decode
-- sample of an accuracy task; ...). why: the reason in rp.model's words, "for task addition: it
-- applies to task substring_index". The scripts refuse an option that does nothing with it.
function experiment.applies(key, what)
  local fname = "rp.experiment.applies"
  if type(key) ~= "string" or not BY_NAME[key] then
    argerror(fname, 1, ("a config key expected, got %s"):format(type(key) == "string"
      and ("%q"):format(key) or type(key)))
  end
  local cfg, task
  if type(what) == "table" then
    local ok, c = pcall(resolve, fname, what)
    if not ok then argerror(fname, 2, args.inner(c)) end
    cfg, task = c, c.task
  else
    task = what
    local tasks = BY_NAME.task[3]
    local known = false
    for _, t in ipairs(tasks) do known = known or t == task end
    if not known then
      argerror(fname, 2, ("a task (%s) or a config table expected, got %s"):format(
        table.concat(tasks, ", "), type(task) == "string" and ("%q"):format(task) or type(task)))
    end
  end
  local t = TASK_OF[key]
  if t ~= nil and t ~= task then
    return false, ("for task %s: it applies to task %s"):format(task, t)
  end
  if not cfg then return true end
  local when = UNUSED_WHEN[key]
  local why = when and when(cfg)
  if not why and MODEL_ROW[key] then
    local ok, unused = pcall(internals.model_unused, model_table(cfg, 2))
    why = ok and unused[key] or nil
  end
  if why then return false, why end
  return true
end

-- rp.experiment.config([overrides]) -> cfg: every key of KEYS, overrides checked and converted
-- (strings from a command line are accepted for numbers), the "resolved by config" defaults
-- filled in (max_digits, quirk, d_ff, log_every). Unknown keys raise. A config fed back in keeps
-- its resolved values (d_ff stays 256 when d_model changes): set them to 0 / "auto" again.
function experiment.config(overrides)
  return resolve("rp.experiment.config", overrides)
end

E.keys, E.task_of, E.task_row, E.model_row, E.model_table = KEYS, TASK_OF, TASK_ROW, MODEL_ROW,
  model_table
E.optim, E.unused_when = OPTIM, UNUSED_WHEN
E.resolve, E.parse_digits, E.parse_lengths, E.parse_scalings = resolve, parse_digits,
  parse_lengths, parse_scalings
E.experiment = experiment

return E

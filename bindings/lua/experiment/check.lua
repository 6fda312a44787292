-- rp.experiment, what a config builds and what can be known before training: the options of
-- its task, model and optimiser (shared with run and resumable), rp.experiment.task and
-- rp.experiment.check, and validate, their checks before anything is built or trained (shared
-- with run and resumable). The keys and resolve are roper.experiment.keys's.
--
-- roper.experiment.check: adds rp.experiment.task and rp.experiment.check; exports task_opts,
-- model_opts, optim_opts, validate and init_model.
local require = ...
local rp = require "roper"
local internals = require "roper.internals"
local args = require "roper.args"
local derive = require "roper.derive"
local eval = require "roper.eval"
local keys = require "roper.experiment.keys"
require "roper.rope_mixed" -- rp.rope.mixed (axes "mixed")

local experiment, E = keys.experiment, {}
local argerror, inner = args.argerror, args.inner
local resolve, parse_lengths, parse_scalings = keys.resolve, keys.parse_lengths, keys.parse_scalings

-- The token ids of an lm config and their rp.lm.info: cfg.corpus itself when it is a folder of
-- ids (with an ids.txt), else the ids cache of the corpus under cfg.tokenizer (rp.lm.ids; the
-- default tokenizer of the corpus, trained when missing, for tokenizer ""). nil and a message
-- when that cannot be done (a corpus or tokenizer that cannot be used). progress (nil or a
-- function) is rp.lm.tokenizer's and rp.lm.ids's: progress(done, total, what).
local function lm_ids(cfg, progress)
  if internals.path_kind(cfg.corpus .. "/ids.txt") then
    local info, err = rp.lm.info(cfg.corpus)
    if not info then return nil, err end
    return cfg.corpus, info
  end
  local tok, err = cfg.tokenizer, nil
  if tok == "" then
    tok, err = rp.lm.tokenizer(cfg.corpus, cfg.vocab_size, nil, { progress = progress })
    if not tok then return nil, err end
  end
  return rp.lm.ids(cfg.corpus, tok, { progress = progress })
end

-- The options of rp.tasks.<task> for cfg, or nil and a message (an lm corpus that cannot be
-- used). progress: lm_ids's. They are the task table's rows of the task that rp.experiment
-- offers (keys.task_row: a bool row's "on" and "off" as true and false), the model's seq_len, and
-- the files: text's path, lm's folder of token ids and its vocabulary.
local function task_opts(cfg, progress)
  local t = cfg.task
  local o = { seq_len = cfg.seq_len }
  if t == "lm" then
    local folder, info = lm_ids(cfg, progress)
    if not folder then return nil, info end
    o.path, o.vocab_size = folder, info.vocab_size
  elseif t == "text" then
    o.path = cfg.path
  end
  for name, row in pairs(keys.task_row) do
    if row.kinds[1] == t then
      local v = cfg[name]
      if row.type == "bool" and type(v) == "string" then v = v == "on" end
      o[name] = v
    end
  end
  return o
end

-- The task of cfg, or nil and a one-line message (bad options, a corpus that cannot be used).
local function make_task(cfg, progress)
  local opts, oerr = task_opts(cfg, progress)
  if not opts then return nil, oerr end
  local ok, task, err = pcall(rp.tasks[cfg.task], opts)
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
  local opts, oerr = task_opts(cfg)
  if not opts then return nil, oerr end
  local ok, task, err = pcall(rp.tasks[cfg.task], opts)
  if not ok then argerror(fname, 1, "task " .. cfg.task .. ": " .. inner(task)) end
  return task, err
end

-- The config of rp.model for cfg and a task of vocabulary V: every model key of cfg (rotate ""
-- and an unset fraction left out), less those that do nothing for the run's model (a shared
-- config sets rel_clip for shaw and rope alike; derive.model_merge); with positions "grid" the
-- grid task's 2-D positions of the seq_len tokens of a row (task:positions2d), and with axes
-- "mixed" RoPE-Mixed's matrix over the whole head (d_rot = d_k).
local function model_opts(cfg, V)
  local o = keys.model_table(cfg, V)
  if cfg.task == "grid_offset" and cfg.positions == "grid" then
    local task <close> = setmetatable({ rp.tasks.grid_offset(task_opts(cfg)) }, {
      __close = function(t) getmetatable(t[1]).__close(t[1]) end })
    o.positions = task[1]:positions2d(cfg.seq_len)
    if cfg.axes == "mixed" then
      -- RoPE-Mixed's start, phi from the run's seed (one matrix for every head); heads that do
      -- not split in quarters get none (validate refuses them)
      local dk = cfg.d_model // cfg.heads
      o.axes = "mixed"
      o.mix = dk % 4 == 0 and dk <= 2 ^ 24 and rp.rope.mixed(dk, { base = cfg.base,
                                                                   seed = cfg.seed }) or {}
    end
  end
  return derive.model_merge(o)
end

-- The options of the optimiser cfg builds (rp.optim[cfg.optimiser]'s), for a model of any size:
-- the experiment's optimiser keys that are options of rp.optim (keys.lua's optim), those that do
-- something for cfg's schedule (its unused_when: warmup not with constant, min_lr with cosine
-- only), the cosine schedule's warmup and min_lr within its steps and lr, noam's warmup >= 1.
local function optim_opts(cfg)
  local oc = {}
  for _, k in ipairs(keys.optim) do
    local unused = keys.unused_when[k.name]
    if k.row.option and not (unused and unused(cfg)) then oc[k.name] = cfg[k.name] end
  end
  if cfg.schedule == "cosine" then
    oc.warmup, oc.total_steps = math.min(cfg.warmup, cfg.steps), cfg.steps
    oc.min_lr = math.min(cfg.min_lr, cfg.lr)
  elseif cfg.schedule == "noam" then
    oc.warmup = math.max(1, cfg.warmup)
  end
  return oc
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
-- cfg, rp.model_memory's table and the task's vocabulary size. progress: lm_ids's (the lm task's
-- first steps on a corpus: its tokenizer trained, its ids written).
local function validate(fname, cfg, progress)
  local task, err = make_task(cfg, progress)
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
  if cfg.task == "lm" then
    local sizes, names = { task:split_sizes() }, { "training", "validation", "test" }
    for i, n in ipairs(sizes) do
      if n < cfg.seq_len + 1 then
        getmetatable(task).__close(task)
        argerror(fname, 1, ("option 'corpus': the %s split of %s holds %d tokens, fewer than "
          .. "seq_len + 1 = %d"):format(names[i], cfg.corpus, n, cfg.seq_len + 1))
      end
    end
  end
  local tc = task:config()
  local split_sizes = (cfg.task == "text" or cfg.task == "lm") and { task:split_sizes() }
  getmetatable(task).__close(task)
  local mc = model_opts(cfg, V)
  if mc.positions and (not internals.pe_modes[cfg.pe].rotary or cfg.attention == "linear") then
    local msg = rp.model_rules().messages -- core's template (pe.h's RP_PE_GRID_NEEDS)
    local marks = { pe = cfg.pe, linear = cfg.attention == "linear" and msg.linear or "" }
    argerror(fname, 1, (msg.grid:gsub("{(%w+)}", marks)))
  end
  if mc.axes == "mixed" and ((cfg.d_model // cfg.heads) % 4 ~= 0 or cfg.fraction_qk ~= 1
      or cfg.fraction_v ~= 1 or cfg.rotate ~= "") then
    argerror(fname, 1, ("option 'axes' mixed rotates whole heads in quarters (d_k a multiple of 4, "
      .. "fraction_qk and fraction_v 1, the mode's own rotate), got d_k %d"):format(
      cfg.d_model // cfg.heads))
  end
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
    local split = (cfg.task == "lm" or cfg.task == "text" and cfg.valid_fraction > 0) and "valid"
      or "train"
    for _, sc in ipairs(parse_scalings(cfg.eval_scaling, fname, cfg)) do
      local pok, perr = pcall(eval.length_plan, fname, 1, mc, tc, { lengths = lengths,
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

-- The model of a run with init (fine-tuning): the model of the checkpoint at path with the run's
-- model options mc over its config (m:derive: the layout must stay, so seq_len, scaling, the
-- rotations may change, d_model or the vocabulary may not); what the file held is released.
local function init_model(fname, path, mc)
  local ok, src, extra = pcall(rp.load, path)
  if ok and src == nil then ok, src = false, extra end
  if not ok then argerror(fname, 1, "option 'init': " .. inner(src)) end
  local _ <close> = setmetatable({}, { __close = function()
    for _, x in ipairs { src, extra } do
      local mt = getmetatable(x)
      if type(x) == "userdata" and type(mt) == "table" and mt.__close then mt.__close(x) end
    end
  end })
  if getmetatable(src) ~= internals.Model_mt then
    argerror(fname, 1, ("option 'init': %s holds %s, not a model"):format(path,
      args.describe(src)))
  end
  local derived
  ok, derived = pcall(src.derive, src, mc)
  if not ok then
    local msg = inner(derived):gsub("^bad argument #1 to 'derive' %((.*)%)$", "%1")
    argerror(fname, 1, "option 'init': " .. path .. ": " .. msg)
  end
  return derived
end

-- rp.experiment.check([overrides[, opts]]) -> cfg, memory: rp.experiment.config, then
-- everything that can be known before training (validate), and with init that the checkpoint
-- there gives the run's model (init_model: loaded, derived for one row, released); memory is
-- rp.model_memory's table for the run. opts.init = false leaves init unopened (a run that goes
-- on from its own checkpoint does not read it). opts.progress: called as progress(done, total,
-- what) by the lm task's first steps on a corpus (rp.lm.tokenizer's training, rp.lm.ids's
-- encoding; what says which).
function experiment.check(overrides, opts)
  local fname = "rp.experiment.check"
  opts = args.check_opts(fname, 2, opts, { "progress", "init" })
  if opts.progress ~= nil and type(opts.progress) ~= "function" then
    argerror(fname, 2, "option 'progress' must be a function (called as progress(done, total, "
      .. "what)), got " .. args.describe(opts.progress))
  end
  if opts.init ~= nil and type(opts.init) ~= "boolean" then
    argerror(fname, 2, "option 'init' must be a boolean, got " .. args.describe(opts.init))
  end
  local cfg, mem, V = validate(fname, resolve(fname, overrides), opts.progress)
  if cfg.init ~= "" and opts.init ~= false then
    local mc = model_opts(cfg, V)
    mc.max_batch = 1
    local m = init_model(fname, cfg.init, mc)
    getmetatable(m).__close(m)
  end
  return cfg, mem
end

E.task_opts, E.model_opts, E.optim_opts, E.validate = task_opts, model_opts, optim_opts, validate
E.init_model = init_model
E.lm_ids = lm_ids

return E

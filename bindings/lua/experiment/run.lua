-- rp.experiment.run, in named steps: its options (run_opts), the ranks of a data-parallel run
-- (join_ranks), its threads (set_threads), the objects it builds and releases (Owned,
-- build_objects), the training with its saves (start_training, train, save, finish_training),
-- what the curve says (summarise_curve) and the evaluation (evaluate, evaluate_lengths). The
-- checks before anything is built are roper.experiment.check's; the training state and the
-- checkpoint a run goes on from, roper.experiment.state's.
--
-- roper.experiment.run: adds rp.experiment.run; exports nothing.
local require = ...
local rp = require "roper"
local internals = require "roper.internals"
local args = require "roper.args"
local eval = require "roper.eval" -- and rp.eval
local keys = require "roper.experiment.keys"
local check = require "roper.experiment.check"
local state = require "roper.experiment.state"
require "roper.derive" -- m:derive

local experiment = keys.experiment
local argerror, inner, path_kind = args.argerror, args.inner, internals.path_kind
local KEYS = keys.keys
local resolve, validate = keys.resolve, check.validate
local parse_digits, parse_lengths, parse_scalings = keys.parse_digits, keys.parse_lengths,
  keys.parse_scalings
local task_opts, model_opts, optim_opts, init_model = check.task_opts, check.model_opts,
  check.optim_opts, check.init_model
local config_word, state_files, write_state, commit_state, open_checkpoint = state.config_word,
  state.state_files, state.write_state, state.commit_state, state.open_checkpoint

-- The options of rp.experiment.run (argument 3), checked and copied (no metamethod of the
-- caller's table runs later): keep_model (boolean), save (a path), save_every (steps, with save),
-- resume (boolean, with save), keep_state (boolean, with save_every or resume), comm (a
-- roper.Comm). The folder of save must take a file: a probe file "<save>.probe" is created and
-- removed (unless something is there already, which is left alone), so a path that cannot be
-- written is an error before training, not after it.
local RUN_OPTS = { "keep_model", "save", "save_every", "resume", "keep_state", "comm" }

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
  for _, k in ipairs { "keep_model", "resume", "keep_state" } do
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
  if o.keep_state and o.save_every == nil and not o.resume then
    argerror(fname, 3, "option 'keep_state' needs option 'save_every' or 'resume'")
  end
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
      -- (the reason alone: err is "<probe>: <reason>", and the path may hold ": " itself)
      err = tostring(err)
      local head = probe .. ": "
      if err:sub(1, #head) == head then err = err:sub(#head + 1) end
      argerror(fname, 3, ("option 'save': %s: cannot write there (%s)"):format(o.save, err))
    end
  end
  o.save_every = args.opt_int(fname, 3, o, "save_every", nil, 1)
  if o.save_every ~= nil and o.save == nil then
    argerror(fname, 3, "option 'save_every' needs option 'save'")
  end
  return o
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

-- The ranks of the run and this process's (1 and 0 without comm), checked: every rank needs a
-- row of the batch, and all must have been given the same config.
local function join_ranks(fname, cfg, opts)
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
  return ranks, rank
end

-- Sets the run's OpenMP threads: cfg.threads, or with several ranks (and no OMP_NUM_THREADS)
-- the cores of a node shared by the ranks on it. Returns the threads set before.
local function set_threads(cfg, ranks, comm)
  local threads = rp.blas.threads()
  if cfg.threads > 0 then
    rp.set_num_threads(cfg.threads)
  elseif ranks > 1 and (os.getenv("OMP_NUM_THREADS") or "") == "" then
    -- the cores of a node shared by the ranks on it
    rp.set_num_threads(math.max(1, threads // comm:local_size()))
  end
  return threads
end

-- f(...)'s object. A failure here (the memory that check saw gone meanwhile) is named after run
-- (fname), not after the constructor it happened in.
local function build(fname, f, ...)
  local ok, obj, err = pcall(f, ...)
  if not ok then argerror(fname, 1, inner(obj)) end
  if obj == nil then argerror(fname, 1, tostring(err)) end
  return obj
end

-- The metatable of run's to-be-closed list of what it built (the task, model and optimiser):
-- own:add(obj) -> obj; when run ends (returns or raises) they are released, last first, unless
-- own.kept (keep_model: they are returned).
local Owned = { __index = {} }

function Owned.__index.add(own, obj)
  own[#own + 1] = obj
  return obj
end

function Owned.__close(own)
  if own.kept then return end
  for i = #own, 1, -1 do getmetatable(own[i]).__close(own[i]) end
end

-- The task, model and optimiser of the run, each added to own: built afresh, or with resume (and
-- something at opts.save) the checkpoint there and its training state st (nil when it has none).
-- mc: rp.model's options, the model built for each rank's share of the batch.
local function build_objects(fname, cfg, opts, ranks, own)
  local topts, terr = task_opts(cfg)
  if not topts then argerror(fname, 1, terr) end
  local task = own:add(build(fname, rp.tasks[cfg.task], topts))
  local mc = model_opts(cfg, task:vocab_size())
  mc.max_batch = (cfg.batch + ranks - 1) // ranks
  local oc = optim_opts(cfg)
  local m, opt, st
  if opts.resume and path_kind(opts.save) ~= false then
    m, opt, st = open_checkpoint(opts.save, cfg, mc, oc)
    if not m then argerror(fname, 3, "option 'resume': " .. opt) end
    own:add(m)
    own:add(opt)
  else
    m = own:add(cfg.init ~= "" and init_model(fname, cfg.init, mc) or build(fname, rp.model, mc))
    opt = own:add(build(fname, rp.optim[cfg.optimiser], m, oc))
  end
  return task, m, opt, st, mc
end

-- Whether every rank holds the same weights (a hash of each parameter compared over the ranks).
local function weights_agree(comm, m)
  local same = true
  for _, p in ipairs(m:params()) do same = comm:agree(p.tensor) and same end
  return same
end

-- Starts the account of a run's training, which train keeps and save writes. tr holds the run
-- (cfg, opts, ranks, comm, rank, clock, the model m, the optimiser opt, the result res); added:
-- the first step to train, the tokens so far, the open log_every window (sum, n), the seconds
-- trained before this process (a resumed run's) on the clock and on the CPU (cpu_before; nil
-- when a state of an older version did not record it), and whether the training state is kept
-- beside opts.save (keep_state: with save_every or resume). A resumed run goes on from its
-- checkpoint's state st.
local function start_training(tr, st)
  local opts, res = tr.opts, tr.res
  tr.sum, tr.n, tr.tokens, tr.before, tr.cpu_before = 0, 0, 0, 0, 0
  tr.first = tr.opt:steps() + 1
  if opts.resume then res.resumed_at = tr.first - 1 end
  if st then
    -- (without its state a checkpoint is gone on from with the curve from there on)
    res.curve, tr.sum, tr.n, tr.tokens, tr.before = st.curve, st.sum, st.n, st.tokens, st.seconds
    tr.cpu_before = st.cpu_seconds
  end
  tr.keep_state = opts.save_every ~= nil or opts.resume
  return tr
end

-- Saves the model and its optimiser to opts.save at step (rank 0 only); with the training state
-- kept, the state's two halves around it (write_state, commit_state), so that a run killed at
-- any moment leaves a model and a state of the same step.
local function save(tr, step)
  if tr.rank ~= 0 then return end
  -- nothing non-finite reaches the weights (train_step skips such steps); should it anyway,
  -- the run's model is still what is asked for
  local ok, err = true, nil
  if tr.keep_state then
    ok, err = write_state(tr.opts.save, { step = step, tokens = tr.tokens, sum = tr.sum,
      n = tr.n, seconds = tr.before + tr.clock() - tr.t0, curve = tr.res.curve,
      cpu_seconds = tr.cpu_before and tr.cpu_before + os.clock() - tr.c0 }, tr.cfg)
  end
  if ok then ok, err = tr.m:save(tr.opts.save, tr.opt, { allow_nonfinite = true }) end
  if ok and tr.keep_state then ok, err = commit_state(tr.opts.save) end
  if not ok then
    error(("rp.experiment.run: cannot save the model: %s"):format(err), args.user_level())
  end
end

-- Trains from step tr.first to cfg.steps: a batch of the data stream per step, a curve point
-- (the mean loss) every log_every steps and at the end, progress after every step, a save every
-- opts.save_every steps. Stops at a step whose loss is not finite (res.diverged: its curve point
-- has no loss). Sets tr.t0 and tr.c0 (when this process began to train: the clock, and its CPU
-- time by os.clock) and tr.last_step.
local function train(tr, task, progress)
  local cfg, opts, m, opt, res = tr.cfg, tr.opts, tr.m, tr.opt, tr.res
  -- the data stream is seeded apart from the initialisation (which uses cfg.seed itself); a
  -- resumed run with steps left draws the batches it already trained on again to reach its
  -- place in it (one resumed at its last step, killed while it evaluated, trains no more)
  local data = rp.rng(cfg.seed + 0x100000000)
  if tr.first <= cfg.steps then
    for _ = 1, tr.first - 1 do task:batch(cfg.batch, data) end
  end

  tr.t0, tr.c0 = tr.clock(), os.clock()
  local row_tokens = cfg.seq_len
  local step_opts = { nonfinite = "skip", comm = tr.ranks > 1 and tr.comm or nil }
  tr.last_step = tr.first - 1
  for step = tr.first, cfg.steps do
    local lr = opt:lr()
    local x, y = task:batch(cfg.batch, data)
    local loss = m:train_step(x, y, nil, opt, step_opts) -- diverged: stop below
    tr.tokens = tr.tokens + cfg.batch * row_tokens
    tr.last_step = step
    if loss ~= loss or loss == math.huge or loss == -math.huge then
      res.diverged = true
      res.curve[#res.curve + 1] = { step = step, tokens = tr.tokens, loss = nil, lr = lr }
      if progress then progress(step, cfg.steps, loss) end
      break
    end
    tr.sum, tr.n = tr.sum + loss, tr.n + 1
    if step % cfg.log_every == 0 or step == cfg.steps then
      local point = { step = step, tokens = tr.tokens, loss = tr.sum / tr.n, lr = lr }
      if cfg.valid_every > 0 and step % cfg.valid_every == 0 then
        point.valid_loss = rp.eval.loss(m, task, { batches = cfg.valid_batches,
          batch_size = math.min(cfg.batch, 16), seed = cfg.eval_seed })
      end
      res.curve[#res.curve + 1] = point
      tr.sum, tr.n = 0, 0
    end
    if progress then progress(step, cfg.steps, loss) end
    if opts.save_every and step % opts.save_every == 0 and step < cfg.steps then save(tr, step) end
  end
end

-- Removes the training state (rank 0 only): it serves an unfinished run only.
local function drop_state(tr)
  if tr.rank == 0 and tr.keep_state then
    for _, f in ipairs { state_files(tr.opts.save) } do os.remove(f) end
  end
end

-- The end of training: its seconds and speed; with several ranks, the check that their weights
-- still agree, res.ranks and res.comm_seconds; with opts.save the last save and res.checkpoint.
-- The training state of the last step stays until the evaluation is done (experiment.run drops
-- it then), so that a run killed while it evaluates goes on from there without training again;
-- a run that diverged has nothing to evaluate, and its state (of a step before cfg.steps) goes
-- now. Returns the clock at the start of the evaluation.
local function finish_training(tr)
  local opts, res = tr.opts, tr.res
  local t1 = tr.clock()
  res.seconds_train = tr.before + (t1 - tr.t0)
  res.cpu_seconds_train = tr.cpu_before and tr.cpu_before + (os.clock() - tr.c0)
  -- (none when no time could be measured)
  res.tokens_per_s = res.seconds_train > 0 and tr.tokens / res.seconds_train or nil
  if tr.ranks > 1 then
    if not weights_agree(tr.comm, tr.m) then
      error(("rp.experiment.run: the weights of the %d ranks differ after training"):format(
        tr.ranks), args.user_level())
    end
    res.ranks, res.comm_seconds = tr.ranks, tr.comm:stats().seconds
  end
  if opts.save then
    save(tr, tr.last_step)
    if res.diverged then drop_state(tr) end
    res.checkpoint = opts.save
    t1 = tr.clock()
  end
  return t1
end

-- What the curve says, for a task of vocabulary V: exploded and exploded_at, final_train_loss.
local function summarise_curve(res, V)
  -- a loss that exploded but stayed finite
  res.exploded = false
  local best, uniform = math.huge, math.log(V)
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
end

-- The metric of the run, and unless training diverged its evaluation: the accuracy (with
-- cfg.decode, and greedy), the examples and the accuracy per operand length (eval_digits) of the
-- accuracy tasks, the evaluation loss, and the metric's value.
-- The progress callback of an evaluation: progress(steps, steps, nil, done, total, what) as
-- windows are done (nil without progress); what: the split rp.eval.lm names, or label.
local function eval_progress(cfg, progress, label)
  return progress and function(done, total, what)
    progress(cfg.steps, cfg.steps, nil, done, total, label or what)
  end
end

local function evaluate(fname, cfg, res, m, task, progress)
  local kind = cfg.task
  res.metric = eval.accuracy_task(kind) and "correct" or "loss"
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
    if kind == "lm" then
      -- the whole validation and test splits (or their first eval_windows windows), each token
      -- once (rp.eval.lm)
      local _, info = check.lm_ids(cfg)
      res.lm = {}
      for _, split in ipairs { "valid", "test" } do
        local r = rp.eval.lm(m, task, { split = split, batch_size = math.min(cfg.batch, 16),
          progress = eval_progress(cfg, progress),
          bytes = info and info.splits[split].bytes,
          max_windows = cfg.eval_windows > 0 and cfg.eval_windows or nil })
        res.lm[split] = { loss = r.loss, perplexity = r.perplexity,
          bits_per_byte = r.bits_per_byte, tokens = r.tokens, bytes = r.bytes }
        if split == "valid" then res.lm.by_position = r.by_position end
      end
      res.eval_loss, res.value = res.lm.valid.loss, res.lm.valid.loss
      return
    end
    local el = rp.eval.loss(m, task, { batches = cfg.valid_batches,
      batch_size = math.min(cfg.batch, 16), seed = cfg.eval_seed })
    res.eval_loss = el
    if res.metric == "loss" then res.value = el end
  end
end

-- Unless training diverged, the metric at every length of eval_lengths under every context
-- extension of eval_scaling (res.by_length) and its seconds.
local function evaluate_lengths(fname, cfg, res, m, task, clock, progress)
  local lengths = parse_lengths(cfg.eval_lengths, fname)
  if not res.diverged and #lengths > 0 then
    local t2 = clock()
    res.by_length = {}
    for _, sc in ipairs(parse_scalings(cfg.eval_scaling, fname, cfg)) do
      local eo = { lengths = lengths, scaling = sc, seed = cfg.eval_seed,
        progress = eval_progress(cfg, progress, "lengths") }
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
end

-- rp.experiment.run(cfg[, progress[, opts]]) -> result[, model, task, optimiser]
-- Trains a fresh model on cfg's task for cfg.steps steps and evaluates it. cfg is checked with
-- rp.experiment.config first (so a partial table works). progress(step, steps, loss), when
-- given, is called after every step (on rank 0 only with comm), and as progress(steps, steps,
-- nil, done, total, what) as the evaluation of the lm task and of eval_lengths scores its
-- windows (what: the lm task's split, "valid" or "test", or "lengths"). opts (run_opts above):
--   keep_model    true: also return the trained model, its task and its optimiser (otherwise
--                 all three are released when run returns, or raises)
--   save          a path: the trained model and its optimiser are saved there (m:save, atomic)
--                 when training ends, before the evaluation; result.checkpoint is the path
--   save_every    n: also every n steps during training, to the same path (overwritten), so an
--                 interrupted run leaves the model of its last multiple of n; with save_every or
--                 resume, the training state (curve, tokens, time) goes beside it as <save>.state
--                 until the run has finished, its evaluation included (a run killed while it
--                 evaluates goes on from its last step: it trains nothing again, only evaluates)
--   resume        true: when save exists, go on from it (the model, optimiser, data stream and
--                 curve of the interrupted run; the result is the uninterrupted run's)
--   keep_state    true (with save_every or resume): the state of the last step stays when run
--                 returns; the caller removes it (experiment.checkpoint_files names it) once it
--                 has stored the result, so that a process stopped in between goes on from its
--                 last step too
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
--   cpu_seconds_train, cpu_seconds   the CPU time (os.clock: user + system, every thread of the
--                 process; rank 0's with comm) of the training from its first step, summed over
--                 the processes of a resumed run as seconds_train is, and of that training with
--                 the evaluation and eval_lengths (the set-up before the first step is in
--                 neither); absent when the run went on from a training state that did not
--                 record it (versions 1 and 2 of the state)
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
  local ranks, rank = join_ranks(fname, cfg, opts)
  if rank ~= 0 then progress = nil end
  local clock = internals.clock
  local threads = set_threads(cfg, ranks, comm)
  local own <close> = setmetatable({}, Owned)
  local task, m, opt, st, mc = build_objects(fname, cfg, opts, ranks, own)
  if ranks > 1 and not weights_agree(comm, m) then
    argerror(fname, 1, ("the %d ranks built different initial models"):format(ranks))
  end
  local res = { config = cfg, params = m:num_params(), curve = {}, diverged = false,
    threads = rp.blas.threads() }
  -- what run returns: the result, with keep_model also the model (the one evaluated), its task
  -- and its optimiser, which `own` then leaves to the caller
  local function returned()
    if not opts.keep_model then return res end
    own.kept = true
    return res, m, task, opt
  end
  local tr = start_training({ cfg = cfg, opts = opts, ranks = ranks, comm = comm, rank = rank,
    clock = clock, m = m, opt = opt, res = res }, st)
  train(tr, task, progress)
  local t1 = finish_training(tr)
  local c1 = os.clock()
  if rank ~= 0 then
    -- the evaluation is rank 0's
    res.rank = rank
    return returned()
  end
  if cfg.threads == 0 then rp.set_num_threads(threads) end
  if mc.max_batch < cfg.batch then
    -- the evaluation's batches are the single-process run's
    m = own:add(m:derive { max_batch = cfg.batch })
  end
  summarise_curve(res, task:vocab_size())
  evaluate(fname, cfg, res, m, task, progress)
  res.seconds_eval = clock() - t1
  evaluate_lengths(fname, cfg, res, m, task, clock, progress)
  res.cpu_seconds = res.cpu_seconds_train and res.cpu_seconds_train + (os.clock() - c1)
  -- the result is complete: the state of the last step goes (finish_training kept it), or stays
  -- for the caller to remove once it has stored the result
  if opts.save and not opts.keep_state then drop_state(tr) end
  return returned()
end

-- rp.eval: evaluation of a model on a task (labml's protocol, `sample` of
-- labml_nn/experiments/arithmetic_dataset.py in labml's repository, and docs/tasks.md).
--   rp.eval.accuracy(m, task[, opts])               -> accuracy, correct, records
--   rp.eval.length_generalisation(m, task, opts)    -> { [digits] = accuracy }, { [digits] = records }
--   rp.eval.loss(m, task[, opts])                   -> mean loss over fresh batches (eval mode)
--   rp.eval.lengths(m, task, opts)                  -> { {length =, accuracy =, correct =} | {length =, loss =}, ... }
--   rp.eval.lm(m, task[, opts])                     -> {loss =, perplexity =, bits_per_byte =, by_position =, ...}
-- A problem is prompted with its question (encoded with the task's vocabulary), the model
-- generates with its KV cache until the task's terminator ('#', or '\n' for labml's addition
-- format) or max_new tokens, and task:check decides (exact answer). The problems are decoded
-- together by m:generate_batch, opts.batch at a time (default: its lanes, sized to this
-- machine's caches): the answers are those of one-at-a-time decoding, and problem i samples
-- from its own generator (rp.rng(seed + 1) jumped i - 1 times), so its answer does not depend
-- on the others.
--
-- roper.eval: adds rp.eval; exports accuracy_task, scalings and length_plan (below) to
-- rp.experiment's modules.
local require = ...
local rp = require "roper"
local internals = require "roper.internals"
local args = require "roper.args"
local derive = require "roper.derive"

local M = {}

local eval = {}
rp.eval = eval

local Model_mt, Task_mt = internals.Model_mt, internals.Task_mt

local argerror, user_level, describe = args.argerror, args.user_level, args.describe
local check_opts, opt_int, opt_number, opt_enum = args.check_opts, args.opt_int, args.opt_number,
  args.opt_enum

-- Runs body(...) for the public function fname. An error of a module function that body calls
-- (the model or task released while the call runs, by a finalizer for instance) is raised as an
-- argument error of fname, so the message names the function the user called; body's own
-- argument errors and errors of the user's code pass through.
local function guard(fname, body, ...)
  local r = table.pack(pcall(body, ...))
  if r[1] then return table.unpack(r, 2, r.n) end
  local msg = r[2]
  if type(msg) ~= "string" then error(msg, 0) end
  local bare = msg:gsub("^[^ ]-:%d+: ", "", 1)
  if bare:find("^bad argument #%d+ to '" .. fname:gsub("%.", "%%.") .. "'") then
    error(bare, user_level())
  end
  local inner = bare:match("^bad argument #%d+ to '[^']*' %((.*)%)$")
    or bare:match("^calling '[^']*' on bad self %((.*)%)$")
  if not inner then error(msg, 0) end
  argerror(fname, inner:find("released task", 1, true) and 2 or 1, inner)
end

-- eval[name](m, task, opts): body(m, task, opts) run through guard as "rp.eval.<name>"
-- (with_fname: body takes that name first), so an error names the function the user called.
local function public(name, body, with_fname)
  local fname = "rp.eval." .. name
  eval[name] = with_fname
    and function(m, task, opts) return guard(fname, body, fname, m, task, opts) end
    or function(m, task, opts) return guard(fname, body, m, task, opts) end
end


-- A live object at argument arg: its metatable mt (named type), and its method probe runs (a
-- released object raises here, not later inside m:generate); what: "model" or "task".
local function check_live(fname, arg, x, mt, type_name, probe, what)
  if getmetatable(x) ~= mt then
    argerror(fname, arg, type_name .. " expected, got " .. describe(x))
  end
  if not pcall(x[probe], x) then argerror(fname, arg, "attempt to use a released " .. what) end
end

-- The model at argument 1 and the task at argument 2 of every rp.eval function.
local function check_objects(fname, m, task)
  check_live(fname, 1, m, Model_mt, "roper.Model", "num_params", "model")
  check_live(fname, 2, task, Task_mt, "roper.Task", "vocab_size", "task")
end


-- The tasks with evaluation problems (task:problem, task:check): their metric is accuracy.
local ACCURACY_TASKS = { addition = true, substring_index = true, grid_offset = true }
local function accuracy_task(kind) return ACCURACY_TASKS[kind] == true end
M.accuracy_task = accuracy_task

-- The model must read the task's tokens: vocab >= the task's, seq_len >= the task's (for loss).
local function check_fit(fname, m, task, need_seq)
  local mc, tc = m:config(), task:config()
  if mc.vocab < task:vocab_size() then
    argerror(fname, 1, ("the model's vocab %d is smaller than the task's %d"):format(mc.vocab,
      task:vocab_size()))
  end
  if need_seq and mc.seq_len < tc.seq_len then
    argerror(fname, 1, ("the task's seq_len %d exceeds the model's seq_len %d"):format(tc.seq_len,
      mc.seq_len))
  end
  return mc, tc
end

-- check_objects, the options (argument 3) against the names known, and check_fit: opts (a
-- checked copy), mc, tc.
local function check_call(fname, m, task, opts, known, need_seq)
  check_objects(fname, m, task)
  opts = check_opts(fname, 3, opts, known)
  local mc, tc = check_fit(fname, m, task, need_seq)
  return opts, mc, tc
end

-- The token id of the task's terminator.
local function terminator(task)
  local tc = task:config()
  local term = (tc.kind == "addition" and tc.format == "labml") and "\n" or "#"
  for i, ch in ipairs(task:vocab()) do
    if ch == term then return i - 1 end
  end
  error("the task's vocabulary has no terminator " .. string.format("%q", term), user_level())
end

-- Enough new tokens for the longest continuation of a problem with n-digit operands (addition:
-- the steps, " and d==", the sum, the terminator) or of a substring question ("'suffix'#"); one
-- for grid_offset (its training scores the answer symbol alone, never the '#' after it).
local function default_max_new(tc, n_digits)
  if tc.kind == "grid_offset" then return 1 end
  if tc.kind == "addition" then
    local places = (n_digits or tc.max_digits) + 2 -- quirk digits of 10 add a place
    local sep = tc.format == "labml" and 1 or 5
    local n = 0
    for e = 0, places - 1 do n = n + 13 + 4 * #tostring(e) + sep end
    return n + 4 + places + 1 + 8
  end
  return tc.str_len + 3 + 8
end

local accuracy_opts = { "problems", "decode", "temperature", "top_k", "seed", "max_new",
                        "n_digits", "batch" }

-- Problems per m:generate_batch call (their prompts and answers are held in tables meanwhile).
local CHUNK = 1024

-- The options of rp.eval.accuracy (opts already a checked copy) for a task of config tc.
-- max_new stays nil when not given (run_accuracy takes the default for the task it runs on).
local function accuracy_options(fname, opts, tc)
  local o = {}
  o.problems = opt_int(fname, 3, opts, "problems", 128, 1)
  o.decode = opt_enum(fname, 3, opts, "decode", { "greedy", "sample" }, "greedy")
  o.temperature = opt_number(fname, 3, opts, "temperature", 1)
  if o.decode == "sample" and o.temperature <= 0 then
    argerror(fname, 3, ("option 'temperature' must be > 0 for sampling, got %s"):format(
      describe(o.temperature)))
  end
  o.top_k = opt_int(fname, 3, opts, "top_k", 0, 0)
  o.seed = opt_int(fname, 3, opts, "seed", 0)
  o.n_digits = opt_int(fname, 3, opts, "n_digits", nil, 1, 18)
  if o.n_digits and tc.kind ~= "addition" then
    argerror(fname, 3, "option 'n_digits' applies to addition tasks only")
  end
  o.max_new = opt_int(fname, 3, opts, "max_new", nil, 1, internals.i32_max)
  o.batch = opt_int(fname, 3, opts, "batch", nil, 1) -- nil: m:generate_batch's default lanes
  return o
end

local run_accuracy

local function accuracy(fname, m, task, opts)
  local _, tc
  opts, _, tc = check_call(fname, m, task, opts, accuracy_opts, false)
  if not accuracy_task(tc.kind) then
    argerror(fname, 2, "accuracy needs an addition, substring_index or grid_offset task (this is "
      .. tc.kind .. ")")
  end
  return run_accuracy(m, task, tc, accuracy_options(fname, opts, tc))
end

-- Decodes o.problems problems of task (config tc) with m; o as accuracy_options returns it.
function run_accuracy(m, task, tc, o)
  local problems, decode, seed, n_digits, batch = o.problems, o.decode, o.seed, o.n_digits, o.batch
  local temperature, top_k = o.temperature, o.top_k
  local max_new = o.max_new or default_max_new(tc, n_digits)
  local stop = terminator(task)
  local V = task:vocab_size()
  local prng = rp.rng(seed)           -- the problems
  local grng = rp.rng(seed + 1)       -- sampling: problem i from grng jumped i - 1 times
  local gen = { stop = stop, lanes = batch and math.min(batch, CHUNK) }
  if decode == "sample" then
    gen.temperature, gen.top_k, gen.rng = temperature, top_k, grng
  end
  local records, correct = {}, 0
  for first = 1, problems, CHUNK do
    local last = math.min(problems, first + CHUNK - 1)
    local qs, as, prompts = {}, {}, {}
    for i = first, last do
      local q, a = task:problem(prng, n_digits)
      qs[#qs + 1], as[#as + 1], prompts[#prompts + 1] = q, a, task:encode(q)
    end
    local outs = m:generate_batch(prompts, max_new, gen) -- leaves grng jumped #prompts times
    for k, ids in ipairs(outs) do
      local q = qs[k]
      -- a model with a larger vocab than the task's may emit ids the task cannot decode: the
      -- output ends there (with U+FFFD) and the problem counts as wrong
      local bad
      for j, id in ipairs(ids) do
        if id >= V then bad = j; break end
      end
      if bad then ids = table.move(ids, 1, bad - 1, 1, {}) end
      local out = task:decode(ids)
      local ok = false
      if bad then out = out .. "\u{FFFD}" else ok = task:check(q, out) end
      if ok then correct = correct + 1 end
      records[first + k - 1] = { question = q, answer = as[k], output = out, ok = ok }
    end
  end
  return correct / problems, correct, records
end

-- rp.eval.accuracy(m, task[, opts]) -> accuracy, correct, records
public("accuracy", accuracy, true)

-- rp.eval.length_generalisation(m, task, {digits = {..}, ...}) -> { [d] = accuracy }, { [d] = records }
local function length_generalisation(m, task, opts)
  local fname = "rp.eval.length_generalisation"
  check_objects(fname, m, task)
  local known = { "digits" }
  for _, k in ipairs(accuracy_opts) do
    if k ~= "n_digits" then known[#known + 1] = k end
  end
  opts = check_opts(fname, 3, opts, known)
  if task:config().kind ~= "addition" then
    argerror(fname, 2, "length_generalisation needs an addition task (this is "
      .. task:config().kind .. ")")
  end
  local digits = opts.digits
  if type(digits) ~= "table" or rawlen(digits) == 0 then
    argerror(fname, 3, "option 'digits' must be a nonempty table of digit counts, got "
      .. describe(digits))
  end
  digits = table.move(digits, 1, rawlen(digits), 1, {}) -- a plain copy (no metamethods)
  local sub = {}
  for k, v in pairs(opts) do
    if k ~= "digits" then sub[k] = v end
  end
  local acc, recs = {}, {}
  for i, d in ipairs(digits) do
    if math.type(d) ~= "integer" or d < 1 or d > 18 then
      argerror(fname, 3, ("digits[%d] must be an integer in 1..18, got %s"):format(i, describe(d)))
    end
    sub.n_digits = d
    local a, _, r = accuracy(fname, m, task, sub)
    acc[d], recs[d] = a, r
  end
  return acc, recs
end

public("length_generalisation", length_generalisation)

-- The option 'progress' of a long evaluation: nil or a function, called as progress(done, total)
-- as the evaluation goes (the user's code: its errors pass through).
local function opt_progress(fname, arg, opts)
  local f = opts.progress
  if f ~= nil and type(f) ~= "function" then
    argerror(fname, arg, "option 'progress' must be a function (called as progress(done, "
      .. "total)), got " .. describe(f))
  end
  return f
end

-- The options of rp.eval.loss (opts a checked copy) for a model of config mc and a task of
-- config tc.
local function loss_options(fname, opts, mc, tc)
  local o = {}
  o.batches = opt_int(fname, 3, opts, "batches", 8, 1)
  o.batch_size = opt_int(fname, 3, opts, "batch_size", math.min(8, mc.max_batch), 1, mc.max_batch)
  local lm_task = tc.kind == "lm"
  o.split = opt_enum(fname, 3, opts, "split", lm_task and { "train", "valid", "test" }
    or { "train", "valid" },
    (lm_task or tc.kind == "text" and tc.valid_fraction > 0) and "valid" or "train")
  if o.split == "valid" and tc.kind ~= "text" and not lm_task then
    argerror(fname, 3, "split \"valid\" exists only for text and lm tasks (this is " .. tc.kind
      .. ")")
  end
  o.seed = opt_int(fname, 3, opts, "seed", 0)
  return o
end

local loss_opts = { "batches", "batch_size", "split", "seed" }

-- The mean of m:loss over o.batches fresh batches of task; tick(), when given, after each batch.
local function run_loss(m, task, o, tick)
  local g = rp.rng(o.seed)
  local sum = 0
  for _ = 1, o.batches do
    local x, y = task:batch(o.batch_size, g, o.split)
    sum = sum + m:loss(x, y)
    if tick then tick() end
  end
  return sum / o.batches
end

-- rp.eval.loss(m, task[, opts]) -> mean loss over fresh batches (eval mode)
local function loss(m, task, opts)
  local fname = "rp.eval.loss"
  local mc, tc
  opts, mc, tc = check_call(fname, m, task, opts, loss_opts, true)
  return run_loss(m, task, loss_options(fname, opts, mc, tc))
end

public("loss", loss)

-- ---------------------------------------------------------------- language modelling

local lm_opts = { "split", "batch_size", "bytes", "max_windows", "progress" }

-- rp.eval.lm(m, task[, opts]) -> the evaluation of a language model on an lm task's split: every
-- token of it but the first scored once, through task:windows (its deterministic windows of
-- seq_len + 1 tokens), the cross-entropies (m:losses) summed in float64.
-- opts.progress is called as progress(done, total, split) after each batch of windows.
local function lm(m, task, opts)
  local fname = "rp.eval.lm"
  local mc, tc
  opts, mc, tc = check_call(fname, m, task, opts, lm_opts, true)
  if tc.kind ~= "lm" then argerror(fname, 2, "lm needs an lm task (this is " .. tc.kind .. ")") end
  local split = opt_enum(fname, 3, opts, "split", { "train", "valid", "test" }, "valid")
  local B = opt_int(fname, 3, opts, "batch_size", math.min(8, mc.max_batch), 1, mc.max_batch)
  local bytes = args.integral(opts.bytes) -- (an integral float is the integer, as opt_int takes it)
  if opts.bytes ~= nil and (bytes == nil or bytes < 1) then
    argerror(fname, 3, "option 'bytes' must be an integer >= 1 (the split's UTF-8 bytes), got "
      .. describe(opts.bytes))
  end
  local max_windows = opt_int(fname, 3, opts, "max_windows", nil, 1)
  local progress = opt_progress(fname, 3, opts)
  local T = tc.seq_len
  -- a split shorter than one window: said here, not as task:windows' error from inside this
  local n = select(({ train = 1, valid = 2, test = 3 })[split], task:split_sizes())
  if n < T + 1 then
    argerror(fname, 2, ("the %s split of %s has %d %s; a window needs seq_len + 1 = %d")
      :format(split, tc.path, n, n == 1 and "token" or "tokens", T + 1))
  end
  local nats, count, windows, all = 0.0, 0, nil, nil
  local pos_sum, pos_n = {}, {}
  for j = 1, T do pos_sum[j], pos_n[j] = 0.0, 0 end
  local first = 1
  repeat
    local rows = max_windows and math.min(B, max_windows - first + 1) or B
    local x, y, W = task:windows(split, first, rows)
    windows, all = max_windows and math.min(W, max_windows) or W, W
    if x then
      local losses, tgt = m:losses(x, y):totable(), y:totable()
      for r = 1, #tgt do
        local lr, tr = losses[r], tgt[r]
        for j = 1, T do
          if tr[j] >= 0 then
            local v = lr[j]
            nats, count = nats + v, count + 1
            pos_sum[j], pos_n[j] = pos_sum[j] + v, pos_n[j] + 1
          end
        end
      end
    end
    first = first + rows
    if progress then progress(math.min(first - 1, windows), windows, split) end
  until first > windows
  local by_position = {}
  for j = 1, T do by_position[j] = pos_n[j] > 0 and pos_sum[j] / pos_n[j] or nil end
  local loss = nats / count
  local r = { split = split, loss = loss, perplexity = math.exp(loss), nats = nats,
    tokens = count, windows = windows, by_position = by_position, by_position_count = pos_n }
  -- (bits per byte are of the whole split: its bytes over all its tokens)
  if bytes and windows == all then r.bytes, r.bits_per_byte = bytes, nats / math.log(2) / bytes end
  return r
end

public("lm", lm)

-- ---------------------------------------------------------------- lengths

-- The context extensions rp.eval.lengths applies: rp.model's scaling names (core's config schema).
local SCALINGS
for _, k in ipairs(internals.model_keys) do
  if k.name == "scaling" then SCALINGS = k.names end
end
M.scalings = SCALINGS

-- The longest prompt of a substring_index problem of n letters ("?s='<n letters>'; s[<i>:]=="
-- with i < n) and max_new tokens after it.
local function substring_need(n, max_new)
  return n + 13 + #tostring(n - 1) + max_new
end

-- A task key's upper bound, from core's task table (tasks/task_keys.c: internals.task_keys).
local function task_key_hi(name)
  for _, row in ipairs(internals.task_keys) do
    if row.name == name then return row.hi end
  end
  error("eval.lua: no task key " .. name)
end
-- The largest seq_len of a task, and the longest substring_index string.
local MAX_SEQ_LEN, MAX_STR_LEN = task_key_hi("seq_len"), task_key_hi("str_len")

-- M.length_plan(fname, arg, mc, tc, o) -> plans: what rp.eval.lengths does at each
-- length, every length checked before anything is evaluated (errors name fname, argument arg).
--   mc  the model's config (m:config(), or the rp.model config an experiment builds)
--   tc  the task's config (task:config())
--   o   {lengths = {...} (integers), scaling = a name of rp.model's scaling, train_length =,
--       max_new = (accuracy tasks, or nil), batch_size = (loss tasks), split =, split_size =
--       (text: the characters of that split)}
-- A plan: {length =, factor =, seq_len = (of the model that evaluates), n_digits = (addition),
-- task = (options of a task built for this length, or nil: the task itself), derive = (the
-- overrides of m:derive, or nil: m itself)}.
function M.length_plan(fname, arg, mc, tc, o)
  local kind, plans = tc.kind, {}
  local function bad(L, msg) argerror(fname, arg, ("length %d: %s"):format(L, msg)) end
  if kind == "grid_offset" then
    argerror(fname, arg, "grid_offset has no length to vary (lengths apply to addition, "
      .. "substring_index, substring_prefix and text)")
  end
  for i, L in ipairs(o.lengths) do
    local lo, hi = 1, 18
    if kind == "substring_index" then hi = MAX_STR_LEN
    elseif kind == "substring_prefix" then lo, hi = tc.substr_len + tc.rnd_len + 1, MAX_SEQ_LEN
    elseif kind == "text" or kind == "lm" then lo, hi = 8, MAX_SEQ_LEN end
    if math.type(L) ~= "integer" or L < lo or L > hi then
      local what = kind == "addition" and "operand digits" or kind == "substring_index"
        and "a str_len" or "a seq_len"
      local why = kind == "substring_prefix" and " (substr_len + rnd_len + 1 and up: a shorter "
        .. "row may score nothing)" or ""
      argerror(fname, arg, ("lengths[%d] must be %s in %d..%d%s, got %s"):format(i, what, lo, hi,
        why, describe(L)))
    end
    local factor = math.max(1.0, L / o.train_length)
    local p = { length = L, factor = factor, seq_len = mc.seq_len }
    if kind == "addition" then
      p.n_digits = L
      -- the window of the model grows with the context extension (no scaling: the model's own,
      -- sliding as rp.eval.accuracy's generation does)
      if o.scaling ~= "none" then p.seq_len = math.ceil(mc.seq_len * factor) end
    elseif kind == "substring_index" then
      p.task = { str_len = L, seq_len = tc.seq_len }
      -- the whole problem in one window: its string is read back from the prompt
      p.seq_len = math.max(mc.seq_len, substring_need(L, o.max_new or default_max_new(
        { kind = kind, str_len = L })))
    else
      p.task = { seq_len = L }
      for k, v in pairs(tc) do if p.task[k] == nil then p.task[k] = v end end
      p.seq_len = math.max(mc.seq_len, L)
      if (kind == "text" or kind == "lm") and o.split_size < L + 1 then
        bad(L, ("the %s split of %s holds %d %s, fewer than length + 1 = %d"):format(
          o.split == "valid" and "validation" or o.split == "test" and "test" or "training",
          tc.path, o.split_size, kind == "lm" and "tokens" or "characters", L + 1))
      end
    end
    if p.seq_len > mc.seq_len or o.scaling ~= "none" then
      local d = { seq_len = p.seq_len, max_batch = accuracy_task(kind) and 1 or o.batch_size }
      if o.scaling ~= "none" then
        -- dynamic NTK grows with the position by itself: with factor 1 the last position of a
        -- length-L window takes NTK with L / orig_len, what the other scalings get as factor
        d.scaling, d.scaling_factor = o.scaling, o.scaling == "dynamic" and 1 or factor
        -- the trained length as orig_len where the scaling reads one (yarn, dynamic, llama3:
        -- the config schema's rule)
        local probe = derive.model_merge(mc, { scaling = o.scaling, orig_len = mc.seq_len })
        local ok, unused = pcall(internals.model_unused, probe)
        if ok and not unused.orig_len then d.orig_len = mc.seq_len end
      end
      if derive.has_learned(mc.pe) and p.seq_len > mc.seq_len then
        bad(L, derive.learned_limit(mc.seq_len, p.seq_len))
      end
      -- the model m:derive(d) builds (mc's keys that do nothing for it dropped)
      local cfg = derive.model_merge(mc, d)
      local ok, mem = pcall(rp.model_memory, cfg)
      if not ok then bad(L, args.inner(mem)) end
      if mem.available and mem.model > mem.available then
        bad(L, ("the model at seq_len %d needs %.1f GiB, more than the %.1f GiB of memory "
          .. "available"):format(p.seq_len, mem.model / 2^30, mem.available / 2^30))
      end
      p.derive = d
    end
    if p.task then
      -- the task's own limits (checked by building it; the text corpus is read when evaluated)
      if kind ~= "text" and kind ~= "lm" then
        local ok, t = pcall(rp.tasks[kind], p.task)
        if not ok then bad(L, args.inner(t)) end
        getmetatable(t).__close(t)
      end
    end
    plans[i] = p
  end
  return plans
end

-- rp.eval.lengths(m, task, opts) -> { {length =, accuracy =, correct =, factor =, seq_len =} |
-- {length =, loss =, factor =, seq_len =}, ... } in the order of opts.lengths
local function lengths(m, task, opts)
  local fname = "rp.eval.lengths"
  check_objects(fname, m, task)
  local tc = task:config()
  local by_accuracy = accuracy_task(tc.kind)
  -- the options of lengths itself (own); the rest go on to the evaluation at each length
  local known, own = { "lengths", "scaling", "train_length", "progress" }, {}
  for _, k in ipairs(known) do own[k] = true end
  for _, k in ipairs(by_accuracy and accuracy_opts or loss_opts) do
    if k ~= "n_digits" then known[#known + 1] = k end
  end
  opts = check_opts(fname, 3, opts, known)
  local mc = check_fit(fname, m, task, false)
  local list = opts.lengths
  if type(list) ~= "table" or rawlen(list) == 0 then
    argerror(fname, 3, "option 'lengths' must be a nonempty list of lengths, got " .. describe(list))
  end
  list = table.move(list, 1, rawlen(list), 1, {}) -- a plain copy (no metamethods)
  for i, L in ipairs(list) do list[i] = args.integral(L) or L end
  local scaling = opt_enum(fname, 3, opts, "scaling", SCALINGS, "none")
  local def = tc.kind == "addition" and tc.max_digits or tc.kind == "substring_index"
    and tc.str_len or tc.seq_len
  local train_length = opt_int(fname, 3, opts, "train_length", def, 1)
  local progress = opt_progress(fname, 3, opts)
  local sub = {}
  for k, v in pairs(opts) do
    if not own[k] then sub[k] = v end
  end
  local o = by_accuracy and accuracy_options(fname, sub, tc) or loss_options(fname, sub, mc, tc)
  local split_size
  if tc.kind == "text" or tc.kind == "lm" then
    local train, valid, test = task:split_sizes()
    split_size = o.split == "valid" and valid or o.split == "test" and test or train
  end
  local plans = M.length_plan(fname, 3, mc, tc, { lengths = list, scaling = scaling,
    train_length = train_length, max_new = o.max_new, batch_size = o.batch_size, split = o.split,
    split_size = split_size })

  -- the tasks and models built here are released when lengths returns or raises
  local held = {}
  local _ <close> = setmetatable({}, { __close = function()
    for i = #held, 1, -1 do
      getmetatable(held[i]).__close(held[i])
      held[i] = nil
    end
  end })
  -- progress(done, total): in batches of windows (loss tasks, after each batch) or in lengths
  -- (accuracy tasks, after each length)
  local done, total = 0, by_accuracy and #plans or #plans * o.batches
  local function tick()
    done = done + 1
    progress(done, total)
  end
  local out = {}
  for i, p in ipairs(plans) do
    local t, mm = task, m
    if p.task then
      local err
      t, err = rp.tasks[tc.kind](p.task)
      if not t then argerror(fname, 2, ("length %d: %s"):format(p.length, tostring(err))) end
      held[#held + 1] = t
    end
    if p.derive then
      mm = m:derive(p.derive)
      held[#held + 1] = mm
    end
    local r = { length = p.length, factor = p.factor, seq_len = p.seq_len }
    if by_accuracy then
      o.n_digits = p.n_digits
      r.accuracy, r.correct = run_accuracy(mm, t, t:config(), o)
      if progress then tick() end
    else
      r.loss = run_loss(mm, t, o, progress and tick)
    end
    out[i] = r
    for j = #held, 1, -1 do -- this length's task and model, before the next ones are built
      getmetatable(held[j]).__close(held[j])
      held[j] = nil
    end
  end
  return out
end

public("lengths", lengths)

return M

-- rp.experiment, the training state and resuming: the state file beside a run's checkpoint
-- (written in two halves around the model's save, read back), the checkpoint a run goes on
-- from (open_checkpoint: checked against the run's config), and rp.experiment.resumable.
--
-- roper.experiment.state: adds rp.experiment.resumable and rp.experiment.checkpoint_files;
-- exports config_word, state_files, write_state, commit_state and open_checkpoint (to
-- roper.experiment.run).
local require = ...
local rp = require "roper"
local internals = require "roper.internals"
local args = require "roper.args"
local keys = require "roper.experiment.keys"
local check = require "roper.experiment.check"

local experiment, E = keys.experiment, {}
local argerror, inner = args.argerror, args.inner
local path_kind, read_file, write_file = internals.path_kind, internals.read_file,
  internals.write_file
local KEYS, TASK_OF = keys.keys, keys.task_of
local resolve, validate, model_opts, optim_opts = keys.resolve, check.validate, check.model_opts,
  check.optim_opts

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

-- The names of the training state beside the checkpoint at path, and of the state while it is
-- half-written (the one home of both: the state's writer, reader and remover, and
-- rp.experiment.checkpoint_files, take them from here).
local function state_files(path)
  local state = path .. ".state"
  return state, state .. ".tmp"
end

-- The training state beside a checkpoint (state_files): the step, the tokens, the seconds of
-- training so far (on the clock and, from version 3, on the CPU: "-" when a resumed run's older
-- state did not hold them), the open log_every window (sum, count), the run's config and the
-- curve (with the validation curve's points: a state without them made a resumed run's curve
-- lose them), so a resumed run gives the result of an uninterrupted one, and only the run it
-- belongs to goes on from it. Written whole under a temporary name before the checkpoint and
-- renamed after it (write_state, commit_state); read back only when its step is the checkpoint's. Versions 1
-- (before the config was kept) and 2 (before the CPU seconds) are still read.
local STATE_HEAD = "roper-run-state 3"
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
-- moment leaves a model and a state of the same step: write_state writes the half-written state
-- of the checkpoint at path whole (before the model is saved; atomically, through core's writer
-- as the model is, which refuses a FIFO or a folder there), commit_state renames it to the state
-- (after). Killed between the model's rename and the state's, the model's step is in the
-- half-written one, and read_state is asked for both files.
local function write_state(path, st, cfg)
  local lines = { STATE_HEAD, ("%d %d %s %s %d %s"):format(st.step, st.tokens, fmt_num(st.seconds),
    fmt_num(st.sum), st.n, st.cpu_seconds and fmt_num(st.cpu_seconds) or "-") }
  local keys = state_keys(cfg)
  lines[3] = ("config %d"):format(#keys)
  for _, k in ipairs(keys) do lines[#lines + 1] = k .. " " .. config_word(cfg[k]) end
  for _, c in ipairs(st.curve) do
    -- a point of the validation curve (valid_every) adds its loss as a fifth field
    lines[#lines + 1] = ("%d %d %s %s%s"):format(c.step, c.tokens, c.loss and fmt_num(c.loss) or "-",
      fmt_num(c.lr), c.valid_loss and " " .. fmt_num(c.valid_loss) or "")
  end
  local _, half = state_files(path)
  return write_file(half, table.concat(lines, "\n") .. "\n")
end

local function commit_state(path)
  local state, half = state_files(path)
  local rok, rerr = os.rename(half, state)
  if not rok then
    os.remove(half)
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
  local version = math.tointeger(tonumber((lines[1] or ""):match("^roper%-run%-state ([123])$")))
  if not version or not lines[2] then return nil end
  local at, tokens, seconds, sum, n, cpu
  if version == 3 then
    at, tokens, seconds, sum, n, cpu = lines[2]:match("^(%d+) (%d+) (%S+) (%S+) (%d+) (%S+)$")
  else
    at, tokens, seconds, sum, n = lines[2]:match("^(%d+) (%d+) (%S+) (%S+) (%d+)$")
  end
  if math.tointeger(tonumber(at)) ~= step then return nil end
  local st = { step = step, tokens = math.tointeger(tonumber(tokens)), seconds = tonumber(seconds),
    sum = tonumber(sum), n = math.tointeger(tonumber(n)), curve = {},
    cpu_seconds = cpu and cpu ~= "-" and tonumber(cpu) or nil }
  if not (st.tokens and st.seconds and st.sum and st.n) then return nil end
  local first = 3
  if version >= 2 then
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
    local cs, ct, cl, clr, cv = lines[i]:match("^(%d+) (%d+) (%S+) (%S+) ?(%S*)$")
    if not cs or (cv ~= "" and not tonumber(cv)) then return nil end
    st.curve[#st.curve + 1] = { step = math.tointeger(tonumber(cs)),
      tokens = math.tointeger(tonumber(ct)), loss = tonumber(cl), lr = tonumber(clr),
      valid_loss = tonumber(cv) }
  end
  return st
end

-- The checkpoint a run saved at path, checked against the run cfg builds (mc: rp.model's
-- options, the model loaded for mc.max_batch rows; oc: the optimiser's): the model, its
-- optimiser and the training state of the optimiser's step (from the state beside it, or from
-- the half-written one where a run killed between its two saves left it: state_files; nil when
-- neither holds it). Otherwise nil and why, a sentence that starts with path: it cannot be
-- loaded, holds no optimiser, was trained with another model or optimiser or (its state says)
-- another config, or is beyond cfg.steps. The caller owns (and closes) the model and the optimiser.
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
    -- (the optimiser's total_steps is the config's steps)
    return bad(("was trained with %s = %s, the config asks for %s"):format(
      k == "total_steps" and "steps" or k, tostring(have), tostring(want)))
  end
  if type(opt) ~= "userdata" then return bad("holds no optimiser (it was not saved by a run)") end
  -- the first difference in the rows' order (a key given before the keys derived from it: d_model
  -- before d_ff), so the one named is always the same
  local function differs(want, have, skip, rows)
    for _, row in ipairs(rows) do
      local k = row.name
      -- (keys a pe ignores are absent from m:config())
      if want[k] ~= nil and not skip[k] and have[k] ~= nil and have[k] ~= want[k] then
        return k, have[k], want[k]
      end
    end
  end
  local mconf = m:config()
  local k, have, want = differs(mc, mconf, { max_batch = true, positions = true, mix = true },
    internals.model_keys)
  if k then return trained_with(k, have, want) end
  -- the positions (a tensor in mc, a table in m:config()): grid or the token index
  if (mc.positions == nil) ~= (mconf.positions == nil) then
    local function kind(p) return p and "grid" or "index" end
    return trained_with("positions", kind(mconf.positions), kind(mc.positions))
  end
  local ogot = opt:config()
  if ogot.kind ~= cfg.optimiser then
    return bad(("was trained with %s, the config asks for %s"):format(ogot.kind, cfg.optimiser))
  end
  -- (total_steps, the config's steps, first: a warmup not given follows it)
  local orows = { { name = "total_steps" } }
  for _, row in ipairs(internals.optim_keys) do
    if row.name ~= "total_steps" then orows[#orows + 1] = row end
  end
  k, have, want = differs(oc, ogot, {}, orows)
  if k then return trained_with(k, have, want) end
  local steps = opt:steps()
  if steps > cfg.steps then
    return bad(("is at step %d, beyond the config's steps = %d"):format(steps, cfg.steps))
  end
  if steps == 0 then return m, opt, nil end
  local state, half = state_files(path)
  local st = read_state(state, steps) or read_state(half, steps)
  -- the state names the run it belongs to: another run's checkpoint is refused, whatever its
  -- model (the seed, the task's data, the schedule's length all count); a version 1 state
  -- names none
  for _, key in ipairs(st and st.config and state_keys(cfg) or {}) do
    local there, here = st.config[key], config_word(cfg[key])
    if there ~= nil and there ~= here then return trained_with(key, there, here) end
  end
  return m, opt, st
end

-- A checkpoint's path at argument arg of fname: a nonempty string without NUL bytes (core takes
-- C strings), or an argument error.
local function check_path(fname, arg, path)
  if type(path) ~= "string" then
    argerror(fname, arg, "path (a string) expected, got " .. type(path))
  end
  if path == "" or path:find("\0", 1, true) then
    argerror(fname, arg, "path must be a nonempty string without NUL bytes")
  end
end

-- rp.experiment.resumable(cfg, path) -> step | nil, why[, "finished" | "no state"]
-- The step rp.experiment.run(cfg, progress, {save = path, resume = true}) would go on from, when
-- that run gives the result of an uninterrupted one: 0 when nothing is at path (it starts
-- afresh); the step of the checkpoint at path when its model and optimiser are the ones cfg
-- builds, its step at most cfg.steps, and a training state of that step is beside it (saved
-- with save_every) whose config is cfg's. Otherwise nil and why, a sentence that starts with
-- path: run would refuse the file (another model, optimiser or config, as it raises), or would
-- go on from it without the curve so far (no state of its step: a state lost, then also "no
-- state"; or a finished run's model: at step cfg.steps, its state removed when the run ended,
-- then also "finished", there is nothing left to train). cfg as for rp.experiment.run (bad
-- configs raise as there); path a nonempty string without NUL bytes. Reads the files only (the
-- model is loaded for one row, then released).
function experiment.resumable(cfg, path)
  local fname = "rp.experiment.resumable"
  cfg = resolve(fname, cfg)
  check_path(fname, 2, path)
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
    return nil, ("%s is at step %d and has no training state of that step beside it (%s)")
      :format(path, steps, (state_files(path))), "no state"
  end
  return steps
end

-- rp.experiment.checkpoint_files(path) -> list
-- The files a resumable checkpoint at path consists of (rp.experiment.run with save = path and
-- save_every or resume), in this order: path (the model and its optimiser), the training state
-- beside it and the state while it is half-written (state_files), whether they exist or not: it
-- computes names only and touches no file. path a nonempty string without NUL bytes. A new
-- table each call.
function experiment.checkpoint_files(path)
  check_path("rp.experiment.checkpoint_files", 1, path)
  local state, half = state_files(path)
  return { path, state, half }
end

E.config_word, E.state_files, E.write_state, E.commit_state, E.open_checkpoint = config_word,
  state_files, write_state, commit_state, open_checkpoint

return E

-- A run's resumable checkpoint (train.lua --checkpoint; compare.lua and sweep.lua
-- --checkpoint-every): rp.experiment.run saves the model with its optimiser to <path> every n
-- steps and its training state beside it (the curve, tokens and time so far; kept through the
-- evaluation after training, so a run stopped while it evaluates goes on from its last step and
-- only evaluates): rp.experiment.checkpoint_files(path) names the checkpoint's files;
-- <path>.run.json holds the run's config, so that a checkpoint is gone on from only by the run
-- it belongs to (rp.experiment.run checks the model and optimiser, and the config kept in the
-- state; a state of version 1 keeps none, so the run file is checked too).
--
--   resume.same_config(stored, wanted) -> true | false, key, stored value, wanted value: two
--     configs give the same result (both resolved by rp.experiment.config; threads and the keys
--     of other tasks do not count; a key unknown to this version makes them differ)
--   resume.check(rp, path, cfg) -> "resume": path holds this run's checkpoint with its state;
--     "fresh": nothing is at path; nil, reason (a sentence starting with path): something else
--     is (another run's checkpoint, one without its run file, or one rp.experiment.resumable
--     refuses: without a state of its step, of another model, or no checkpoint)
--   resume.start(path, cfg) -> true | nil, message: writes <path>.run.json (atomically)
--   resume.discard(path): removes rp.experiment.checkpoint_files(path) and the run file (those
--     that are there)
local fileio = require "lib.fileio"
local json = require "lib.json"

local resume = {}

-- Keys that do not change a run's result beyond the last bits (threads) are left out, and so are
-- the keys of other tasks. Both sides are resolved by rp.experiment.config first: a key missing
-- from the stored config (written before the key existed) takes its default, and resolved values
-- compare equal to the "0 / auto" they came from.
local IGNORED = { threads = true }

function resume.same_config(stored, wanted)
  local rp = require "roper"
  local known = {}
  for _, k in ipairs(rp.experiment.keys()) do known[k.name] = true end
  local a0 = {}
  for k, v in pairs(stored) do
    if not known[k] then return false, k end
    a0[k] = v
  end
  local ok, a = pcall(rp.experiment.config, a0)
  if not ok then return false, "config" end
  local b = rp.experiment.config(wanted)
  local function matters(k) return not IGNORED[k] and rp.experiment.applies(k, b.task) end
  for k, v in pairs(b) do
    if matters(k) and a[k] ~= v then return false, k, a[k], v end
  end
  return true
end

-- A value for messages: integral floats (JSON numbers come back as floats) without ".0".
function resume.show(v)
  if math.type(v) == "float" and v == math.floor(v) and math.abs(v) < 2^53 then
    return tostring(math.tointeger(v))
  end
  return tostring(v)
end

-- The run file beside the checkpoint at path (the scripts' own file; the checkpoint's are
-- rp.experiment.checkpoint_files's).
local function run_file(path) return path .. ".run.json" end

function resume.check(rp, path, cfg)
  if not fileio.exists(path) then return "fresh" end
  local runf = run_file(path)
  local stored = fileio.exists(runf) and json.read(runf)
  if type(stored) ~= "table" then
    return nil, ("%s has no run file beside it (%s): not a checkpoint of --checkpoint"):format(
      path, runf)
  end
  local same, key, there, here = resume.same_config(stored, cfg)
  if not same then
    return nil, ("%s is the checkpoint of another run (%s = %s there, %s here)"):format(path, key,
      resume.show(there), resume.show(here))
  end
  -- the model, the optimiser and the training state of the same step, as rp.experiment.run
  -- would go on from them (the run file serves states that do not name their config)
  local step, why = rp.experiment.resumable(cfg, path)
  if not step then return nil, why end
  return "resume"
end

function resume.start(path, cfg)
  return fileio.write(run_file(path), json.encode(cfg))
end

function resume.discard(path)
  local rp = require "roper"
  local files = rp.experiment.checkpoint_files(path)
  files[#files + 1] = run_file(path)
  for _, f in ipairs(files) do os.remove(f) end
end

return resume

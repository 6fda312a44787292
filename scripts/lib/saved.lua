-- Opening a model that a run saved (train.lua --save, compare.lua / sweep.lua --keep-models), for
-- sample.lua and attention_map.lua. A checkpoint holds the model (config, parameters) but not
-- its task; the task comes from the run's experiment config, read from the run's result JSON
-- beside the checkpoint (run.ckpt -> run.json: train.lua writes it there, and compare.lua and
-- sweep.lua keep runs/<run>.ckpt next to runs/<run>.json) or from the file given with --config.
--
--   saved.beside(ckpt) -> the path of the run JSON beside a checkpoint
--   saved.open(rp, ckpt[, config]) -> model, task, cfg
--     config: a run JSON (a result, whose "config" is used) or a JSON object of config keys
--     (as train.lua --config takes); default saved.beside(ckpt). Problems (a missing or bad
--     checkpoint, no run JSON, a task whose vocabulary is not the model's) are usage problems
--     (util.usage: one line, exit 2). A checkpoint that is missing while its run's JSON is there
--     is a run that did not keep its model: the message says how to keep it (--keep-models).
local util = require "lib.util"

local saved = {}

function saved.beside(ckpt)
  return (ckpt:gsub("%.ckpt$", "")) .. ".json"
end

function saved.open(rp, ckpt, config)
  if not util.exists(ckpt) and ckpt:match("%.ckpt$") and util.exists(saved.beside(ckpt)) then
    util.usage(("checkpoint %s: no such file, but its run is there (%s): the run did not keep its "
      .. "model; run the same compare.lua or sweep.lua command again with --keep-models (it "
      .. "trains again only the runs without a model), or train.lua with --save"):format(ckpt,
      saved.beside(ckpt)))
  end
  util.check_input(ckpt, "checkpoint")
  local cfgpath = config or saved.beside(ckpt)
  if not config and not util.exists(cfgpath) then
    util.usage(("%s: no run JSON beside it (%s) to tell the run's task; give the run's result JSON "
      .. "or config with --config"):format(ckpt, cfgpath))
  end
  util.check_input(cfgpath, "--config")
  local j, jerr = util.read_json(cfgpath)
  if not j then util.usage("--config " .. tostring(jerr)) end
  if type(j) ~= "table" then
    util.usage("--config " .. cfgpath .. ": a run's result JSON or a JSON object of config keys "
      .. "expected")
  end
  local stored = type(j.config) == "table" and j.config or j
  -- only the keys this version knows (a run JSON may come from an older or newer roper)
  local cfg = {}
  for _, k in ipairs(rp.experiment.keys()) do cfg[k.name] = stored[k.name] end
  local ok, resolved = pcall(rp.experiment.config, cfg)
  if not ok then util.usage(cfgpath .. ": " .. util.message(resolved)) end
  local tok, task, terr = pcall(rp.experiment.task, resolved)
  if not tok then util.usage(cfgpath .. ": " .. util.message(task)) end
  if not task then util.usage(cfgpath .. ": " .. tostring(terr)) end

  local m, merr = rp.load(ckpt)
  if not m then util.usage(merr) end
  local V, MV = task:vocab_size(), m:config().vocab
  if V ~= MV then
    util.usage(("%s: the task of %s has %d tokens, the model %d: not this checkpoint's run "
      .. "(give its JSON with --config)"):format(ckpt, cfgpath, V, MV))
  end
  return m, task, resolved
end

return saved

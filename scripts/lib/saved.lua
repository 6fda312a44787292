-- Opening what runs saved: a comparison's summary, for the reports; a model that a run saved
-- (train.lua --save, compare.lua / sweep.lua --keep-models), for sample.lua and
-- attention_map.lua. A checkpoint holds the model (config, parameters) but not
-- its task; the task comes from the run's experiment config, read from the run's result JSON
-- beside the checkpoint (run.ckpt -> run.json: train.lua writes it there, and compare.lua and
-- sweep.lua keep runs/<run>.ckpt next to runs/<run>.json) or from the file given with --config.
--
--   saved.beside(ckpt) -> the path of the run JSON beside a checkpoint
--   saved.open(rp, ckpt[, config]) -> model, task, cfg
--     config: a run JSON (a result, whose "config" is used) or a JSON object of config keys
--     (as train.lua --config takes); default saved.beside(ckpt). Problems (a missing or bad
--     checkpoint, no run JSON, a task whose vocabulary is not the model's) are usage problems
--     (cli.usage: one line, exit 2). A checkpoint that is missing while its run's JSON is there
--     is a run that did not keep its model: the message says how to keep it (--keep-models).
--   saved.summary(dir) -> a comparison's summary (dir/summary.json, compare.lua's or sweep.lua's:
--     its metric and its methods, in order); one that cannot be read or has no methods is a usage
--     problem (cli.usage)
local cli = require "lib.cli"
local fileio = require "lib.fileio"
local json = require "lib.json"

local saved = {}

function saved.beside(ckpt)
  return (ckpt:gsub("%.ckpt$", "")) .. ".json"
end

function saved.summary(dir)
  local path = fileio.join(dir, "summary.json")
  local summary, err = json.read(path)
  if summary == nil then cli.usage(tostring(err)) end
  if type(summary) ~= "table" or type(summary.methods) ~= "table" then
    cli.usage(path .. ": not a compare.lua summary (no methods)")
  end
  for i, m in ipairs(summary.methods) do
    if type(m) ~= "table" or type(m.label) ~= "string" then
      cli.usage(("%s: not a compare.lua summary (method %d has no label)"):format(path, i))
    end
  end
  return summary
end

function saved.open(rp, ckpt, config)
  if not fileio.exists(ckpt) and ckpt:match("%.ckpt$") and fileio.exists(saved.beside(ckpt)) then
    cli.usage(("checkpoint %s: no such file, but its run is there (%s): the run did not keep its "
      .. "model; run the same compare.lua or sweep.lua command again with --keep-models (it "
      .. "trains again only the runs without a model), or train.lua with --save"):format(ckpt,
      saved.beside(ckpt)))
  end
  fileio.check_input(ckpt, "checkpoint")
  local cfgpath = config or saved.beside(ckpt)
  if not config and not fileio.exists(cfgpath) then
    cli.usage(("%s: no run JSON beside it (%s) to tell the run's task; give the run's result JSON "
      .. "or config with --config"):format(ckpt, cfgpath))
  end
  fileio.check_input(cfgpath, "--config")
  local j, jerr = json.read(cfgpath)
  if not j then cli.usage("--config " .. tostring(jerr)) end
  if type(j) ~= "table" then
    cli.usage("--config " .. cfgpath .. ": a run's result JSON or a JSON object of config keys "
      .. "expected")
  end
  local stored = type(j.config) == "table" and j.config or j
  -- only the keys this version knows (a run JSON may come from an older or newer roper)
  local cfg = {}
  for _, k in ipairs(rp.experiment.keys()) do cfg[k.name] = stored[k.name] end
  local ok, resolved = pcall(rp.experiment.config, cfg)
  if not ok then cli.usage(cfgpath .. ": " .. cli.message(resolved)) end
  local tok, task, terr = pcall(rp.experiment.task, resolved)
  if not tok then cli.usage(cfgpath .. ": " .. cli.message(task)) end
  if not task then cli.usage(cfgpath .. ": " .. tostring(terr)) end

  local m, merr = rp.load(ckpt)
  if not m then cli.usage(merr) end
  local V, MV = task:vocab_size(), m:config().vocab
  if V ~= MV then
    cli.usage(("%s: the task of %s has %d tokens, the model %d: not this checkpoint's run "
      .. "(give its JSON with --config)"):format(ckpt, cfgpath, V, MV))
  end
  return m, task, resolved
end

return saved

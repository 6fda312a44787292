-- rp.experiment, comparing results: rp.experiment.better, which of two values of a run's metric
-- (result.metric, result.value: roper.experiment.run) is the better one.
--
-- roper.experiment.better: adds rp.experiment.better; exports nothing.
local require = ...
local args = require "roper.args"
local keys = require "roper.experiment.keys"

local experiment, argerror = keys.experiment, args.argerror

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

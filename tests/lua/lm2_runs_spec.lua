-- The language-model study's committed runs (docs/results.md, "Language modelling at 20 tokens
-- per parameter"): every run file in the folders of the plan (results/lm2_plan.tsv) is one of the
-- plan's runs (a method of its size at a seed from 1 to its seeds), made by the pinned commit's
-- portable build on one thread, trained at its size's rate for the plan's steps to at least 20
-- tokens per parameter, neither diverged nor exploded, with its curve and its lengths beside it,
-- and with the same configuration as the folder's other runs but for the seed and the method. A
-- run collected by mistake (another commit, build, rate or length) fails here before it reaches a
-- table.
local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local q = h.sh_quote

local RESULTS = dir_of .. "../../results/"
-- the commit every main run is made by (docs/results.md, "Amendments": the pinned commit)
local PINNED = "e0d6683"
-- each size's peak rate (docs/results.md: the pilot's 1e-2, "Learning rate: the pilot"; the large
-- size's 3e-3, "Amendment: the large size's rate"), cosine to a tenth of it
local RATE = { small = 1e-2, medium = 1e-2, large = 3e-3 }

-- the plan's sizes as results/lm2_plan.sh reads them: { size, folder, methods = {...}, seeds,
-- steps }
local function plan()
  local out, err, code = h.run("bash -c " .. q(". " .. q(RESULTS .. "lm2_plan.sh")
    .. " && lm2_plan_rows " .. q(RESULTS .. "lm2_plan.tsv")))
  assert(code == 0, err .. out)
  local sizes = {}
  for line in out:gmatch("[^\n]+") do
    local size, folder, methods, seeds, steps = line:match("^(%S+) (%S+) (%S+) (%d+) (%d+)$")
    local list = {}
    for m in methods:gmatch("[^,]+") do list[m] = true end
    sizes[#sizes + 1] = { size = size, folder = folder, methods = list, seeds = tonumber(seeds),
      steps = tonumber(steps) }
  end
  return sizes
end

-- a run's configuration without its seed and method, as one comparable string
local function shared_config(config)
  local keys = {}
  for k in pairs(config) do
    if k ~= "seed" and k ~= "pe" then keys[#keys + 1] = k end
  end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. tostring(config[k]) end
  return table.concat(parts, ";")
end

describe("the language-model study's committed runs", function()
  for _, size in ipairs(plan()) do
    it("in results/" .. size.folder .. " are the plan's, of " .. PINNED .. ", at the size's rate, "
      .. "with their curves, and alike", function()
        local dir = RESULTS .. size.folder .. "/runs/"
        local seen, config = 0, nil
        for _, name in ipairs(h.ls(dir)) do
          if name:match("%.json$") and not name:match("%.cfg%.json$")
             and not name:match("%.run%.json$") then
            local method, seed = name:match("^(.+)%-s(%d+)%.json$")
            seed = tonumber(seed)
            assert.truthy(method and size.methods[method], name .. ": not a method of the plan's")
            assert.truthy(seed >= 1 and seed <= size.seeds, name .. ": not a seed of the plan's")
            local run = h.read_json(dir .. name)
            local p = run.provenance
            assert.are.equal(PINNED, p.commit, name)
            assert.are.equal(1, p.threads, name)
            assert.are.equal(1, run.threads, name)
            assert.are.equal("portable (-march=x86-64-v3)", p.build, name)
            assert.are.equal(false, run.diverged, name)
            assert.are.equal(false, run.exploded, name)
            assert.are.equal(method, run.config.pe, name)
            assert.are.equal(seed, run.config.seed, name)
            assert.are.equal(size.steps, run.config.steps, name)
            assert.is_truthy(RATE[size.size], size.size .. ": no rate known for this size")
            assert.is_true(math.abs(run.config.lr - RATE[size.size]) < 1e-12, name .. ": rate")
            assert.is_true(math.abs(run.config.min_lr - RATE[size.size] / 10) < 1e-12,
              name .. ": final rate")
            local tokens = run.config.steps * run.config.batch * run.config.seq_len
            assert.is_true(tokens / run.params >= 20, name .. ": under 20 tokens per parameter")
            for _, beside in ipairs { ".csv", ".lengths.csv" } do
              assert.truthy(h.read(dir .. name:gsub("%.json$", beside)), name .. ": no " .. beside)
            end
            local c = shared_config(run.config)
            config = config or c
            assert.are.equal(config, c, name .. ": a configuration unlike the folder's others")
            seen = seen + 1
          end
        end
        assert.is_true(seen > 0, "no runs in results/" .. size.folder)
      end)
  end
end)

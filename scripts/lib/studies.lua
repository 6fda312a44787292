-- The committed studies a comparison's report sets beside its own runs (issue 48): for each task,
-- the folders of results/ whose runs docs/results.md reads, and the heading of its section there.
-- This table only names them: the numbers (configuration, seeds, the paired difference and its
-- interval) are computed from the stored runs themselves (<folder>/runs/<method>-s<seed>.json,
-- report.pair), so they are the ones docs/results.md quotes and have no second home.
--
--   studies.LIST: { {task =, folder =, section =, a =, b =}, ... }: section: the heading of the
--     study's section in docs/results.md (without the #s); a, b: the two methods (b - a)
--   studies.KEYS: the configuration keys compared between a run and a study
--   studies.anchor(heading) -> the GitHub anchor of a markdown heading ("Substring by index (the
--     write-up's biggest gap)" -> "substring-by-index-the-write-ups-biggest-gap")
--   studies.load(study, root) -> {study =, config =, seeds =, row = report.pair's row} | nil: the
--     study's stored runs under root (the repository's top folder); nil when they are not there
--     (an installed script, or a checkout without results/)
--   studies.closest(task, cfg, labels, root) -> loaded, differing | nil: of the studies of task
--     that compare two methods both among labels, the one whose configuration differs from cfg in
--     the fewest of studies.KEYS (ties: the most seeds); differing: the keys that differ
--   studies.link(root, out) -> docs/results.md under root as a path relative to the folder out
--     (where report.html is)
--   studies.markdown(loaded, differing, cfg, nseeds, metric, link) -> the paragraph that sets the
--     study beside the run: its configuration, how close it is to this run's (steps, size,
--     seeds), its seeds, each method's mean, the paired difference with its 95% interval and a
--     link to its section (link: the path of docs/results.md as the report should name it)
local json = require "lib.json"
local fileio = require "lib.fileio"
local report = require "lib.report"
local tables = require "lib.tables"
local plpath = require "pl.path"

local studies = {}

studies.LIST = {
  { task = "substring_prefix", folder = "results/substring_prefix", a = "rope", b = "roper",
    section = "Substring by prefix (labml's copy_repeat)" },
  { task = "substring_index", folder = "results/substring_index", a = "rope", b = "roper",
    section = "Substring by index (the write-up's biggest gap)" },
  { task = "substring_index", folder = "results/v2-index", a = "rope", b = "roper",
    section = "Substring by index with the jump endpoint (20 seeds, 6,000 steps)" },
}

studies.KEYS = { "d_model", "layers", "heads", "d_ff", "norm", "seq_len", "batch", "steps",
  "optimiser", "lr", "schedule", "problems", "decode", "temperature", "str_len", "max_digits",
  "eval_seed" }

function studies.anchor(heading)
  return (heading:lower():gsub("[^%w_%- ]", ""):gsub(" ", "-"))
end

function studies.load(study, root)
  local values, config = { [study.a] = {}, [study.b] = {} }, nil
  local seeds, params = 0, nil
  for _, m in ipairs { study.a, study.b } do
    local s = 1
    while true do
      local res = json.read(fileio.join(root, study.folder, "runs", ("%s-s%d.json"):format(m, s)))
      if type(res) ~= "table" then break end
      config, params = config or res.config, params or res.params
      values[m][s] = res.value
      s = s + 1
    end
    if s == 1 then return nil end
    if m == study.a then seeds = s - 1 end
  end
  local row = report.pair(values[study.a], values[study.b])
  local function mean(t)
    local sum, n = 0, 0
    for _, v in pairs(t) do sum, n = sum + v, n + 1 end
    return n > 0 and sum / n or nil
  end
  return { study = study, config = config, seeds = seeds, row = row, params = params,
    mean_a = mean(values[study.a]), mean_b = mean(values[study.b]) }
end

local function differing_keys(a, b)
  local out = {}
  for _, k in ipairs(studies.KEYS) do
    if a[k] ~= b[k] then out[#out + 1] = k end
  end
  return out
end

function studies.closest(task, cfg, labels, root)
  local have = {}
  for _, l in ipairs(labels) do have[l] = true end
  local best, best_diff
  for _, st in ipairs(studies.LIST) do
    if st.task == task and have[st.a] and have[st.b] then
      local loaded = studies.load(st, root)
      if loaded and loaded.row.mean_diff then
        local d = differing_keys(cfg, loaded.config)
        if not best or #d < #best_diff or (#d == #best_diff and loaded.seeds > best.seeds) then
          best, best_diff = loaded, d
        end
      end
    end
  end
  return best, best_diff
end

function studies.link(root, out)
  return plpath.relpath(plpath.join(root, "docs", "results.md"), fileio.abspath(out))
end

local function size(params)
  return params and ("%.1fM parameters"):format(params / 1e6) or "?"
end

function studies.markdown(loaded, differing, cfg, nseeds, metric, link)
  local st, c, r = loaded.study, loaded.config, loaded.row
  local f = metric == "correct" and "%+.1f" or "%+.4f"
  local mf = metric == "correct" and "%.1f" or "%.4f"
  local unit = metric == "correct" and (" correct of %d"):format(c.problems) or " evaluation loss"
  local close
  if #differing == 0 then
    close = ("the same configuration as this run (%d steps, d_model %d, %d layers), with %d "
      .. "seeds where this run has %d"):format(c.steps, c.d_model, c.layers, loaded.seeds, nseeds)
  else
    local parts = {}
    for _, k in ipairs(differing) do
      local function v(x) return type(x) == "number" and tables.num(x) or tostring(x) end
      parts[#parts + 1] = ("%s %s (this run %s)"):format(k, v(c[k]), v(cfg[k]))
    end
    close = ("the same task with another configuration: %s; %d seeds where this run has %d")
      :format(table.concat(parts, ", "), loaded.seeds, nseeds)
  end
  local excludes = r.t_lo > 0 or r.t_hi < 0
  return ("**The committed study of the same question** ([docs/results.md, \"%s\"](%s#%s); "
    .. "`%s`): %s. Over its %d seeds (%d pairs; %s, %d steps, %s) %s - %s is %s%s, 95%% paired "
    .. "t interval [%s, %s] (paired t p %s; means %s %s, %s %s): %s.\n"):format(
    st.section, link, studies.anchor(st.section), st.folder, close, loaded.seeds, r.pairs,
    size(loaded.params),
    c.steps, st.task, st.b, st.a, tables.num(r.mean_diff, f), unit, tables.num(r.t_lo, f),
    tables.num(r.t_hi, f), tables.num(r.p_t, "%.3g"), st.a, tables.num(loaded.mean_a, mf), st.b,
    tables.num(loaded.mean_b, mf),
    excludes and "the interval excludes 0, evidence of a difference at that scale"
      or "the interval holds 0, no evidence of a difference at that scale")
end

return studies

-- What compare.lua's report says first (issue 48): the plain-language reading of a run made from
-- its numbers (report.reading) for made-up runs whose intervals are worked out by hand here (a
-- clear difference, none, runs that learned the task beside runs that did not, a loss metric),
-- the committed study beside it (lib/studies.lua: present when the task and methods match,
-- absent otherwise, its numbers those docs/results.md quotes), and the loss plot's ranges, key
-- and means (lib/plot.lua's gnuplot script and data).

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. dir .. "../../scripts/?.lua;" .. package.path
local h = require "helpers"
local report = require "lib.report"
local studies = require "lib.studies"

local ROOT = dir .. "../.."

-- a group of runs: values by seed, curves optional
local function group(label, values, curves)
  local g = { label = label, runs = {} }
  for seed, v in ipairs(values) do
    g.runs[#g.runs + 1] = { seed = seed, res = { value = v, curve = curves and curves[seed] } }
  end
  return g
end

local function reading(a, b, metric, opts)
  local gs = { group("rope", a), group("roper", b) }
  return report.reading(gs, metric, report.differences(gs, metric), opts)
end

local function has(text, s) assert.truthy(text:find(s, 1, true), ("%q not in:\n%s"):format(s, text)) end
local function lacks(text, s) assert.falsy(text:find(s, 1, true), ("%q in:\n%s"):format(s, text)) end

-- t_{0.975, 2} (Student's t, 2 degrees of freedom: sqrt(2) q / sqrt(1 - q^2), q = 2 * 0.975 - 1)
local T2 = math.sqrt(2) * 0.95 / math.sqrt(1 - 0.95 ^ 2)

describe("report.reading", function()
  local OPTS = { unit = "correct of 128", problems = 128 }

  it("a clear difference: the interval excludes 0, every seed agrees", function()
    -- differences 40, 41, 42: mean 41, sd 1, half width t_{0.975,2} / sqrt(3)
    local text = reading({ 10, 20, 30 }, { 50, 61, 72 }, "correct", OPTS)
    local half = T2 / math.sqrt(3)
    has(text, "## What this run shows")
    has(text, ("**roper - rope: +41.0 correct of 128** (higher is better), paired by seed over 3 "
      .. "seeds, 95%% interval [%+.1f, %+.1f]."):format(41 - half, 41 + half))
    has(text, "roper did better on 3 of the 3 seeds.")
    has(text, "The interval excludes 0: these runs are evidence that roper does better than rope")
    lacks(text, "cannot tell")
    -- what 3 seeds cannot show: 2 degrees of freedom, the sign-flip floor 2 / 2^3
    has(text, "What 3 seeds cannot show: the interval rests on 2 degrees of freedom")
    has(text, "cannot go below p 0.25 whatever the data")
    lacks(text, "learned the task")
  end)

  it("no difference: the interval holds 0 and the seeds cannot tell the methods apart", function()
    -- differences -1, 0, 1: mean 0, sd 1
    local text = reading({ 60, 61, 62 }, { 59, 61, 63 }, "correct", OPTS)
    local half = T2 / math.sqrt(3)
    has(text, ("95%% interval [%+.1f, %+.1f]"):format(-half, half))
    has(text, "roper did better on 1 of the 3 seeds (1 tied).")
    has(text, "The interval holds 0, so these 3 seeds cannot tell roper and rope apart")
    has(text, "That is no evidence of a difference, and no evidence that there is none.")
    lacks(text, "The interval excludes 0")
    lacks(text, "wider than the whole scale")
  end)

  it("bimodal runs: the issue's 41 / 61 / 1 against 0 / 3 / 68 read as two groups", function()
    local text = reading({ 41, 61, 1 }, { 0, 3, 68 }, "correct", OPTS)
    has(text, "**roper - rope: -10.7 correct of 128**")
    has(text, "roper did better on 1 of the 3 seeds.")
    has(text, "cannot tell roper and rope apart")
    has(text, "(an interval wider than the whole scale of 0 to 128)")
    has(text, "The runs range over rope 1 to 61, roper 0 to 68 correct of 128: some runs near 0 "
      .. "and some above half")
    -- with the jump endpoint: how many runs learned it
    local function curve(jumps)
      return { { step = 10, loss = 2 }, { step = 20, loss = jumps and 1 or 2 } }
    end
    local gs = { group("rope", { 41, 61, 1 }, { curve(true), curve(true), curve(false) }),
      group("roper", { 0, 3, 68 }, { curve(false), curve(false), curve(true) }) }
    local j = report.jumps(gs, 1.5)
    local jt = report.reading(gs, "correct", report.differences(gs, "correct"),
      { jumps = j, unit = "correct of 128", problems = 128, study_seeds = 10 })
    has(jt, "Runs that learned the task (training loss fell below 1.5): rope 2 of 3, roper 1 of 3.")
    has(jt, "Some runs learned it and others did not, so the results are two groups")
    has(jt, "many more seeds: the committed study below has 10.")
    lacks(jt, "The runs range over")
  end)

  it("a loss: lower is better, and 10 seeds need no warning about few seeds", function()
    local a, b = {}, {}
    for i = 1, 10 do a[i], b[i] = 0.28 + i / 1000, 0.24 + i / 1000 + (i % 2) / 1000 end
    local text = reading(a, b, "loss", {})
    has(text, "**roper - rope: -0.0395 evaluation loss** (lower is better)")
    has(text, "roper did better on 10 of the 10 seeds.")
    has(text, "evidence that roper does better than rope")
    lacks(text, "cannot show")
    -- one seed each: no interval
    local one = reading({ 1 }, { 2 }, "correct", OPTS)
    has(one, "roper against rope: 1 paired seed, too few for an interval.")
  end)
end)

describe("the committed study beside the run (lib/studies.lua)", function()
  local CFG = { d_model = 64, layers = 2, heads = 4, d_ff = 256, norm = "pre", seq_len = 128,
    batch = 16, steps = 2000, optimiser = "adam", lr = 0.001, schedule = "cosine", problems = 128,
    decode = "sample", temperature = 1, str_len = 13, max_digits = 8, eval_seed = 12345 }
  local results_md = assert(h.read(ROOT .. "/docs/results.md"))

  it("every study's section is a heading of docs/results.md and its folder has runs", function()
    for _, st in ipairs(studies.LIST) do
      assert.truthy(results_md:find("\n#+ " .. st.section:gsub("%p", "%%%0") .. "\n"), st.section)
      assert.truthy(studies.load(st, ROOT), st.folder)
    end
    assert.are.equal("substring-by-index-the-write-ups-biggest-gap",
      studies.anchor("Substring by index (the write-up's biggest gap)"))
  end)

  it("substring by index at make run's old configuration: the 10-seed study, as docs quote it",
    function()
    local st, differing = studies.closest("substring_index", CFG, { "rope", "roper" }, ROOT)
    assert.are.equal("results/substring_index", st.study.folder)
    assert.are.same({}, differing)
    -- the interval docs/results.md's table of every pair gives
    has(results_md, "| roper - rope | 10 | -6.00 | [-44.49, +32.49] |")
    local text = studies.markdown(st, differing, CFG, 3, "correct", "../../docs/results.md")
    has(text, "(../../docs/results.md#substring-by-index-the-write-ups-biggest-gap)")
    has(text, "the same configuration as this run (2000 steps, d_model 64, 2 layers), with 10 "
      .. "seeds where this run has 3")
    has(text, "roper - rope is -6.0 correct of 128, 95% paired t interval [-44.5, +32.5]")
    has(text, "the interval holds 0, no evidence of a difference at that scale")
  end)

  it("6,000 steps pick the 20-seed study and say which key differs", function()
    local cfg = {}
    for k, v in pairs(CFG) do cfg[k] = v end
    cfg.steps = 6000
    local st, differing = studies.closest("substring_index", cfg, { "rope", "roper" }, ROOT)
    assert.are.equal("results/v2-index", st.study.folder)
    has(results_md, "| roper - rope | 20 | -25.60 | [-48.03, -3.17] |")
    local text = studies.markdown(st, differing, cfg, 3, "correct", "x.md")
    has(text, "roper - rope is -25.6 correct of 128, 95% paired t interval [-48.0, -3.2]")
    has(text, "the interval excludes 0")
    assert.are.equal(6000, st.config.steps)
    assert.are.same({}, differing)
  end)

  it("substring by prefix: the study whose interval excludes 0", function()
    local st, differing = studies.closest("substring_prefix", CFG, { "rope", "roper" }, ROOT)
    assert.are.equal("results/substring_prefix", st.study.folder)
    local text = studies.markdown(st, differing, CFG, 3, "loss", "x.md")
    has(results_md, "-0.0404 [-0.0464, -0.0344]")
    has(text, "roper - rope is -0.0404 evaluation loss, 95% paired t interval [-0.0464, -0.0344]")
  end)

  it("absent for another task, other methods, or without the stored runs", function()
    assert.is_nil(studies.closest("addition", CFG, { "rope", "roper" }, ROOT))
    assert.is_nil(studies.closest("substring_index", CFG, { "rope", "none" }, ROOT))
    assert.is_nil(studies.closest("substring_index", CFG, { "rope", "roper" }, h.tmpdir()))
  end)

  it("a differing key is named with both values", function()
    local cfg = {}
    for k, v in pairs(CFG) do cfg[k] = v end
    cfg.d_model = 32
    local st, differing = studies.closest("substring_prefix", cfg, { "rope", "roper" }, ROOT)
    assert.are.same({ "d_model" }, differing)
    has(studies.markdown(st, differing, cfg, 3, "loss", "x.md"),
      "the same task with another configuration: d_model 64 (this run 32); 10 seeds where this "
      .. "run has 3")
  end)
end)

describe("the loss plot (lib/plot.lua)", function()
  local plot = require "lib.plot"
  local function curve(last_tokens, jumps)
    local c = {}
    for i = 1, 4 do
      c[i] = { step = i * 500, tokens = last_tokens * i / 4, loss = (jumps and i > 2) and 1 or 2 }
    end
    return c
  end

  it("ends the x axis at the last point, in millions of tokens, a key per method", function()
    local out = h.tmpdir()
    local files = assert(plot.loss_curves({
      { label = "rope", results = { { curve = curve(4096000) }, { curve = curve(4096000) } } },
      { label = "roper", results = { { curve = curve(4096000) }, { curve = curve(4000000) } } },
    }, out .. "/loss"))
    local gp = assert(h.read(files[3]))
    has(gp, "set xrange [0:4.096]")
    has(gp, "set format x '%g'")
    has(gp, "tokens (millions)")
    lacks(gp, "%c") -- gnuplot's 500.0k
    has(gp, 'title "rope: each run (2)"')
    has(gp, 'title "roper: each run (2)"')
    has(gp, 'title "rope: mean of the 2 runs"')
    has(gp, 'title "roper: mean of the 2 runs"')
    local _, nmean = gp:gsub("mean of the", "")
    assert.are.equal(2, nmean) -- a mean per method, drawn once (the SVG is a replot)
  end)

  it("runs that jumped and runs that did not get a mean each, never one across both", function()
    local out = h.tmpdir()
    local files = assert(plot.loss_curves({
      { label = "rope", results = { { curve = curve(1e6, true) }, { curve = curve(1e6, true) },
        { curve = curve(1e6, false) } }, jumped = { true, true, false } },
      { label = "roper", results = { { curve = curve(1e6, true) }, { curve = curve(1e6, false) } },
        jumped = { true, false } },
    }, out .. "/loss", { x = "step" }))
    local gp, dat = assert(h.read(files[3])), assert(h.read(files[4]))
    has(gp, "set xrange [0:2000]")
    has(gp, 'title "rope: mean of the 2 runs that jumped"')
    -- one run alone is no mean: rope's run that did not jump, and both of roper's parts
    lacks(gp, "mean of the 1 runs")
    lacks(gp, 'roper: mean')
    lacks(dat, "mean of the 3 runs")
    -- the mean of the two that jumped: loss 1 from step 1500 on, as both runs have it
    has(dat, "# rope, mean of the 2 runs that jumped: step  mean  min  max\n500 2 2 2\n1000 2 2 2\n"
      .. "1500 1 1 1\n2000 1 1 1")
  end)

  it("report.plot_groups marks each run by whether it jumped", function()
    local function c(j) return { { step = 10, loss = 2 }, { step = 20, loss = j and 1 or 2 } } end
    local gs = { group("rope", { 1, 2, 3 }, { c(true), c(false), c(true) }) }
    local pg = report.plot_groups(gs, report.jumps(gs, 1.5))
    assert.are.same({ true, false, true }, pg[1].jumped)
    assert.are.equal(3, #pg[1].results)
    assert.is_nil(report.plot_groups(gs, nil)[1].jumped)
  end)
end)

-- Length generalisation (issue 14, item 1): m:derive (bindings/lua/derive.lua), rp.eval.lengths
-- (bindings/lua/eval.lua) on every task against rp.eval.accuracy / rp.eval.loss called by
-- hand, the experiment keys eval_lengths and eval_scaling and the context-extension keys
-- (bindings/lua/experiment/keys.lua), and compare.lua with --eval-lengths (the run files, the
-- lengths table of summary.md, summary_lengths.csv, summary.json, lengths.dat). Every model is
-- tiny (16 wide, one layer, a few steps).

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"
local rp = require "roper"
local cjson = require "cjson"

local BIN = h.BIN

-- The message of a failing call without its "file:line: " prefix.
local function err_of(f, ...)
  local ok, msg = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  return (tostring(msg):gsub("^[^ ]-:%d+: ", "", 1))
end

local function model(task, extra)
  local c = { vocab = task:vocab_size(), seq_len = 32, d_model = 16, heads = 2, layers = 1,
    seed = 7, max_batch = 4 }
  for k, v in pairs(extra or {}) do c[k] = v end
  return rp.model(c)
end

local CORPUS = "/usr/share/games/fortunes/cookie"

describe("m:derive", function()
  local task = rp.tasks.substring_prefix { seq_len = 32, substr_len = 4, rnd_len = 4 }

  it("copies every parameter exactly: the same logits at the same length", function()
    local m = model(task, { pe = "roper" })
    local m2 = m:derive { max_batch = 2 }
    assert.are_not.equal(m, m2)
    local x = task:batch(2, rp.rng(1))
    assert.are.equal(0, rp.maxdiff(m:forward(x), m2:forward(x)))
    for _, p in ipairs(m:params()) do
      assert.are.equal(0, rp.maxdiff(p.tensor, m2:params()[p.name]), p.name)
    end
    assert.are.equal(2, m2:config().max_batch)
    assert.are.equal(4, m:config().max_batch) -- the original is untouched
  end)

  it("a longer causal rope model gives the first T positions m's logits", function()
    local m = model(task, { pe = "rope" })
    local long = m:derive { seq_len = 128 }
    assert.are.equal(128, long:config().seq_len)
    assert.are.equal(32, m:config().seq_len)
    local x = task:batch(1, rp.rng(2))          -- [1 x 32]
    local xl = rp.tasks.substring_prefix { seq_len = 128, substr_len = 4, rnd_len = 4 }
      :batch(1, rp.rng(3))
    xl:narrow(2, 1, 32):copy(x)
    local a = m:forward(x)
    local b = long:forward(xl):narrow(2, 1, 32)
    h.approx(b, a, 1e-5, "first 32 positions")
    -- and the model differs from a fresh one (the copy is not the initialisation)
    local fresh = model(task, { pe = "rope", seed = 8, seq_len = 128 })
    assert.is_true(rp.maxdiff(fresh:forward(xl):narrow(2, 1, 32), a) > 1e-3)
  end)

  it("refuses a learned position table longer than it is, and other layout changes", function()
    local m = model(task, { pe = "learned" })
    assert.are.equal("bad argument #1 to 'derive' (learned absolute positions hold 32 positions; "
      .. "seq_len 512 asks for more (a learned table cannot be extended))",
      err_of(function() return m:derive { seq_len = 512 } end))
    assert.are.equal("bad argument #1 to 'derive' (parameter embed.weight is 5x32 in the derived "
      .. "model, 5x16 in the model (the overrides change the layout))",
      err_of(function() return m:derive { d_model = 32 } end))
    assert.are.equal("bad argument #1 to 'derive' (the derived model has 17 parameter tensors, the "
      .. "model 18 (the overrides change the layout))",
      err_of(function() return m:derive { pe = "rope" } end))
    -- the same seq_len is fine, and copies the table
    local same = m:derive { max_batch = 1 }
    assert.are.equal(0, rp.maxdiff(m:params()["pos.weight"], same:params()["pos.weight"]))
  end)

  it("reports bad overrides, rp.model's errors and bad selves for derive", function()
    local m = model(task)
    assert.are.equal("bad argument #1 to 'derive' (overrides table expected, got 5)",
      err_of(function() return m:derive(5) end))
    assert.are.equal("bad argument #1 to 'derive' (option names must be strings, got 1)",
      err_of(function() return m:derive { 3 } end))
    local e = err_of(function() return m:derive { bogus = 1 } end)
    assert.truthy(e:find("^bad argument #1 to 'derive' %(unknown option 'bogus' %(known: vocab, "), e)
    assert.are.equal("calling 'derive' on bad self (roper.Model expected, got 5)",
      err_of(m.derive, 5))
    local r = model(task)
    getmetatable(r).__close(r)
    assert.are.equal("calling 'derive' on bad self (attempt to use a released model)",
      err_of(function() return r:derive {} end))
  end)

  it("takes the context-extension keys", function()
    local m = model(task, { pe = "rope" })
    local d = m:derive { seq_len = 64, scaling = "yarn", scaling_factor = 2, orig_len = 32 }
    local c = d:config()
    assert.are.same({ "yarn", 2, 32, 64 }, { c.scaling, c.scaling_factor, c.orig_len, c.seq_len })
    assert.is_nil(m:config().scaling)
    -- scaling with factor 1 changes nothing
    local one = m:derive { scaling = "pi", scaling_factor = 1 }
    local x = task:batch(1, rp.rng(4))
    assert.are.equal(0, rp.maxdiff(m:forward(x), one:forward(x)))
  end)
end)

describe("rp.eval.lengths", function()
  it("addition: operand digits, as rp.eval.accuracy with n_digits", function()
    local task = rp.tasks.addition { max_digits = 2, seq_len = 32 }
    local m = model(task)
    local r = rp.eval.lengths(m, task, { lengths = { 2, 4 }, problems = 6, decode = "sample",
      seed = 3 })
    assert.are.equal(2, #r)
    for i, L in ipairs { 2, 4 } do
      local acc, correct = rp.eval.accuracy(m, task, { problems = 6, decode = "sample", seed = 3,
        n_digits = L })
      assert.are.same({ length = L, accuracy = acc, correct = correct, factor = L / 2,
        seq_len = 32 }, r[i])
    end
  end)

  it("addition with a context extension: a derived model with a window widened by the factor",
    function()
      local task = rp.tasks.addition { max_digits = 2, seq_len = 32 }
      local m = model(task, { pe = "rope" })
      local r = rp.eval.lengths(m, task, { lengths = { 4 }, problems = 5, scaling = "pi" })
      local d = m:derive { seq_len = 64, max_batch = 1, scaling = "pi", scaling_factor = 2 }
      local acc, correct = rp.eval.accuracy(d, task, { problems = 5, n_digits = 4 })
      assert.are.same({ length = 4, accuracy = acc, correct = correct, factor = 2,
        seq_len = 64 }, r[1])
    end)

  it("substring_index: str_len, on a task with that str_len and a window that holds a problem",
    function()
      local task = rp.tasks.substring_index { str_len = 3, seq_len = 32 }
      local m = model(task)
      local r = rp.eval.lengths(m, task, { lengths = { 3, 20 }, problems = 5, seed = 1 })
      -- str_len 3: the model itself (a prompt of 3 + 13 + 1 and 14 new tokens fit in 32)
      local acc, correct = rp.eval.accuracy(m, task, { problems = 5, seed = 1 })
      assert.are.same({ length = 3, accuracy = acc, correct = correct, factor = 1,
        seq_len = 32 }, r[1])
      -- str_len 20: a prompt of 20 + 13 + 2 and 31 new tokens need a window of 66
      local t20 = rp.tasks.substring_index { str_len = 20, seq_len = 32 }
      local acc20, c20 = rp.eval.accuracy(m:derive { seq_len = 66, max_batch = 1 }, t20,
        { problems = 5, seed = 1 })
      assert.are.same({ length = 20, accuracy = acc20, correct = c20, factor = 20 / 3,
        seq_len = 66 }, r[2])
      -- str_len 4 needs 33: the window grows by one
      assert.are.equal(33, rp.eval.lengths(m, task, { lengths = { 4 }, problems = 1 })[1].seq_len)
    end)

  it("substring_prefix and text: seq_len, rp.eval.loss on a task and model of that length",
    function()
      local task = rp.tasks.substring_prefix { seq_len = 32, substr_len = 4, rnd_len = 4 }
      local m = model(task)
      local r = rp.eval.lengths(m, task, { lengths = { 32, 64 }, batches = 2, seed = 5 })
      assert.are.same({ length = 32, loss = rp.eval.loss(m, task, { batches = 2, seed = 5 }),
        factor = 1, seq_len = 32 }, r[1])
      local t64 = rp.tasks.substring_prefix { seq_len = 64, substr_len = 4, rnd_len = 4 }
      local m64 = m:derive { seq_len = 64, max_batch = 4 }
      assert.are.same({ length = 64, loss = rp.eval.loss(m64, t64, { batches = 2, seed = 5,
        batch_size = 4 }), factor = 2, seq_len = 64 }, r[2])

      local text = assert(rp.tasks.text { path = CORPUS, seq_len = 32 })
      local mt = model(text, { pe = "roper" })
      local rt = rp.eval.lengths(mt, text, { lengths = { 16, 128 }, batches = 1, scaling = "ntk" })
      local t16 = assert(rp.tasks.text { path = CORPUS, seq_len = 16 })
      local d16 = mt:derive { seq_len = 32, max_batch = 4, scaling = "ntk", scaling_factor = 1 }
      assert.are.same({ length = 16, loss = rp.eval.loss(d16, t16, { batches = 1, batch_size = 4 }),
        factor = 1, seq_len = 32 }, rt[1])
      local t128 = assert(rp.tasks.text { path = CORPUS, seq_len = 128 })
      local d128 = mt:derive { seq_len = 128, max_batch = 4, scaling = "ntk", scaling_factor = 4 }
      assert.are.same({ length = 128, loss = rp.eval.loss(d128, t128, { batches = 1,
        batch_size = 4 }), factor = 4, seq_len = 128 }, rt[2])
    end)

  it("checks every length before evaluating any, with exact messages", function()
    local pre = rp.tasks.substring_prefix { seq_len = 32, substr_len = 4, rnd_len = 4 }
    local learned = model(pre, { pe = "learned" })
    local function msg(m, task, opts) return err_of(rp.eval.lengths, m, task, opts) end
    local B = "bad argument #3 to 'rp.eval.lengths' ("
    assert.are.equal(B .. "length 64: learned absolute positions hold 32 positions; seq_len 64 asks "
      .. "for more (a learned table cannot be extended))",
      msg(learned, pre, { lengths = { 32, 64 } }))
    assert.are.equal(B .. "length 32: scaling and xpos need a rotary pe ("
      .. h.pe_list("rotary") .. ") with softmax attention, not learned)",
      msg(learned, pre, { lengths = { 32 }, scaling = "pi" }))
    assert.are.equal(B .. "lengths[2] must be a seq_len in 9..16777216 (substr_len + rnd_len + 1 "
      .. "and up: a shorter row may score nothing), got 8)", msg(learned, pre, { lengths = { 32, 8 } }))
    -- substring_index's lengths: the task's own str_len range (core's task table), not a copy
    local idx = rp.tasks.substring_index { str_len = 8, seq_len = 64 }
    assert.are.equal(B .. "lengths[1] must be a str_len in 1..1000, got 1001)",
      msg(model(idx, { pe = "rope" }), idx, { lengths = { 1001 } }))
    assert.are.equal(B .. "option 'lengths' must be a nonempty list of lengths, got table)",
      msg(learned, pre, { lengths = {} }))
    assert.are.equal(B .. "option 'lengths' must be a nonempty list of lengths, got nil)",
      msg(learned, pre, {}))
    assert.are.equal(B .. "option 'scaling' must be one of \"none\", \"pi\", \"ntk\", \"yarn\", "
      .. "\"dynamic\", \"llama3\", got string \"x\")", msg(learned, pre, { lengths = { 32 }, scaling = "x" }))
    assert.are.equal(B .. "unknown option 'problems' (known: lengths, scaling, train_length, progress, "
      .. "batches, batch_size, split, seed))", msg(learned, pre, { lengths = { 32 }, problems = 3 }))
    local add = rp.tasks.addition { max_digits = 2, seq_len = 32 }
    local ma = model(add)
    assert.are.equal(B .. "lengths[1] must be operand digits in 1..18, got 19)",
      msg(ma, add, { lengths = { 19 } }))
    assert.are.equal(B .. "lengths[2] must be operand digits in 1..18, got string \"3\")",
      msg(ma, add, { lengths = { 2, "3" } }))
    assert.are.equal(B .. "unknown option 'n_digits' (known: lengths, scaling, train_length, progress, "
      .. "problems, decode, temperature, top_k, seed, max_new, batch))",
      msg(ma, add, { lengths = { 2 }, n_digits = 3 }))
    assert.are.equal(B .. "option 'train_length' must be >= 1, got 0)",
      msg(ma, add, { lengths = { 2 }, train_length = 0 }))
    assert.are.equal("bad argument #1 to 'rp.eval.lengths' (roper.Model expected, got nil)",
      err_of(rp.eval.lengths, nil, add, { lengths = { 2 } }))
    local text = assert(rp.tasks.text { path = CORPUS, seq_len = 32, valid_fraction = 0.0001 })
    local _, valid = text:split_sizes()
    local mt = model(text)
    assert.are.equal(("%slength 4096: the validation split of %s holds %d characters, fewer than "
      .. "length + 1 = 4097)"):format(B, CORPUS, valid),
      msg(mt, text, { lengths = { 16, 4096 }, batches = 1 }))
  end)
end)

describe("experiment keys eval_lengths and eval_scaling", function()
  local TINY = { steps = 3, d_model = 16, heads = 2, layers = 1, seq_len = 32, batch = 4,
    problems = 2, valid_batches = 1 }
  local function tiny(extra) return h.merged(TINY, extra) end
  local function check_msg(extra) return err_of(rp.experiment.check, tiny(extra)) end
  local B = "bad argument #1 to 'rp.experiment.check' ("

  it("are checked before training", function()
    assert.are.equal(B .. "option 'eval_lengths' must list lengths (integers >= 1), got x)",
      check_msg { eval_lengths = "2,x" })
    assert.are.equal(B .. "option 'eval_scaling' must list names of none, pi, ntk, yarn, dynamic, llama3, got "
      .. "bogus)", check_msg { eval_scaling = "pi,bogus" })
    assert.are.equal(B .. "option 'eval_scaling' names pi twice)", check_msg { eval_scaling = "pi,pi" })
    assert.are.equal(B .. "option 'eval_scaling' must list names of none, pi, ntk, yarn, dynamic, llama3, got "
      .. "nothing)", check_msg { eval_scaling = "" })
    assert.are.equal(B .. "option 'eval_lengths': length 64: learned absolute positions hold 32 "
      .. "positions; seq_len 64 asks for more (a learned table cannot be extended))",
      check_msg { task = "text", pe = "learned", eval_lengths = "16,64" })
    -- a pe that rotates nothing is evaluated under "none" alone (the scalings change rotations)
    assert.is_table(rp.experiment.check(tiny { task = "addition", pe = "none", eval_lengths = "4",
      eval_scaling = "none,yarn" }))
    local res = rp.experiment.run(tiny { task = "addition", pe = "alibi", max_digits = 2,
      eval_lengths = "2,4", eval_scaling = "pi,yarn" })
    assert.are.same({ "none", "none" }, { res.by_length[1].scaling, res.by_length[2].scaling })
    assert.are.equal(2, #res.by_length)
    assert.are.equal(B .. "option 'eval_lengths': lengths[1] must be operand digits in 1..18, got "
      .. "20)", check_msg { task = "addition", eval_lengths = "20" })
    -- a learned model is fine where no longer window is needed
    assert.is_table(rp.experiment.check(tiny { task = "addition", pe = "learned",
      eval_lengths = "2,4,12" }))
  end)

  it("run: by_length for every scaling and length, equal to rp.eval.lengths on the model",
    function()
      local cfg = tiny { task = "substring_prefix", substr_len = 4, rnd_len = 4,
        eval_lengths = "32,64", eval_scaling = "none,pi" }
      local res, m, task = rp.experiment.run(cfg, nil, { keep_model = true })
      assert.are.equal(4, #res.by_length)
      assert.is_number(res.seconds_eval_lengths)
      local k = 0
      for _, sc in ipairs { "none", "pi" } do
        local want = rp.eval.lengths(m, task, { lengths = { 32, 64 }, scaling = sc, batches = 1,
          batch_size = 4, seed = res.config.eval_seed })
        for i = 1, 2 do
          k = k + 1
          assert.are.same({ length = want[i].length, scaling = sc, factor = want[i].factor,
            loss = want[i].loss }, res.by_length[k])
        end
      end
      getmetatable(m).__close(m)
      getmetatable(task).__close(task)
      -- without eval_lengths: no by_length
      assert.is_nil(rp.experiment.run(tiny { task = "addition", max_digits = 2 }).by_length)
    end)

  it("passes the context-extension keys to the model only when set", function()
    local _, m = rp.experiment.run(tiny { task = "addition", max_digits = 2, xpos = 0.4,
      scaling = "pi", scaling_factor = 2 }, nil, { keep_model = true })
    local c = m:config()
    assert.are.same({ 0.4, "pi", 2 }, { c.xpos, c.scaling, c.scaling_factor })
    local _, m0 = rp.experiment.run(tiny { task = "addition", max_digits = 2 }, nil,
      { keep_model = true })
    assert.is_nil(m0:config().scaling)
    assert.is_nil(m0:config().xpos)
  end)
end)

describe("compare.lua --eval-lengths", function()
  local tmp
  setup(function() tmp = h.tmpdir() end)
  teardown(function() os.execute("rm -rf " .. h.sh_quote(tmp)) end)

  it("writes by_length in each run, the lengths table, its CSV, JSON and plot data", function()
    local out = tmp .. "/cmp"
    local so, se, code = h.run(("%s scripts/compare.lua --methods rope roper --seeds 2 --steps 2 "
      .. "--task substring_index --str-len 3 --d-model 16 --heads 2 --layers 1 --seq-len 32 "
      .. "--batch 4 --problems 2 --valid-batches 1 --jobs 2 --quiet --eval-lengths 3,6 "
      .. "--eval-scaling none,yarn --out %s"):format(h.sh_quote(BIN), h.sh_quote(out)))
    assert.are.equal(0, code, so .. se)
    local res = h.read_json(out .. "/runs/roper-s2.json")
    assert.are.equal(4, #res.by_length)
    assert.are.same({ 3, "none", 1 }, { res.by_length[1].length, res.by_length[1].scaling,
      res.by_length[1].factor })
    assert.are.same({ 6, "yarn", 2 }, { res.by_length[4].length, res.by_length[4].scaling,
      res.by_length[4].factor })
    local lcsv = assert(h.read(out .. "/runs/roper-s2.lengths.csv"))
    assert.are.equal(("length,scaling,factor,correct,accuracy,loss\n6,yarn,2,%d,%s,\n"):format(
      res.by_length[4].correct, ("%.10g"):format(res.by_length[4].accuracy)),
      "length,scaling,factor,correct,accuracy,loss\n" .. lcsv:match("\n(6,yarn[^\n]*\n)$"))
    local md = assert(h.read(out .. "/summary.md"))
    assert.truthy(md:find("| method | scaling | length | factor | runs | mean correct | sd | "
      .. "min..max |", 1, true), md)
    -- the rows: rope's, then roper's, each none then yarn, lengths ascending; the mean is the
    -- mean of the runs' correct at that length
    local r1 = h.read_json(out .. "/runs/roper-s1.json")
    local mean = (r1.by_length[4].correct + res.by_length[4].correct) / 2
    assert.truthy(md:find(("| roper | yarn | 6 | 2 | 2 | %.2f |"):format(mean), 1, true), md)
    assert.truthy(md:find("| roper - rope (yarn, 6) |", 1, true), md)
    local scsv = assert(h.read(out .. "/summary_lengths.csv"))
    local lines = {}
    for l in scsv:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.are.equal(9, #lines)
    assert.are.equal("method,scaling,length,factor,n,mean,sd,min,max", lines[1])
    assert.truthy(lines[2]:find("^rope,none,3,1,2,"), lines[2])
    assert.truthy(lines[9]:find("^roper,yarn,6,2,2,"), lines[9])
    local sj = h.read_json(out .. "/summary.json")
    assert.are.equal(8, #sj.lengths.rows)
    assert.are.equal(4, #sj.lengths.tests)
    local dat = assert(h.read(out .. "/lengths.dat"))
    assert.truthy(dat:find("# rope none: length  mean  min  max\n3 ", 1, true), dat)
    assert.truthy(dat:find("# roper yarn: length  mean  min  max\n3 ", 1, true), dat)
    assert.truthy(assert(h.read(out .. "/lengths.gp")):find("yerrorlines", 1, true))
    assert.truthy(so:find("lengths.png", 1, true), so)

    -- lengths_report.lua on the same folder: the paired rows recompute from the run files
    local rep, rse, rcode = h.run(("%s scripts/lengths_report.lua %s"):format(h.sh_quote(BIN),
      h.sh_quote(out)))
    assert.are.equal(0, rcode, rep .. rse)
    local r0 = { h.read_json(out .. "/runs/rope-s1.json"), h.read_json(out .. "/runs/rope-s2.json") }
    local d1 = r1.by_length[4].correct - r0[1].by_length[4].correct
    local d2 = res.by_length[4].correct - r0[2].by_length[4].correct
    -- the pair table's columns (lib/report.lua) after the extension and length: 2 pairs, the
    -- mean difference, and each of the 2 pairs' sign-flip p cannot reach 0.05 (the warning)
    assert.truthy(rep:find(("| roper - rope | yarn | 6 | 2 | %+.2f |"):format((d1 + d2) / 2), 1,
      true), rep)
    assert.truthy(rep:find("| difference | scaling | length | pairs | mean diff | 95% t CI | "
      .. "95% bootstrap CI | d_z | paired t p | Holm | sign-flip p | Holm |", 1, true), rep)
    assert.truthy(rep:find("Warning: with 2 pairs the exact sign-flip test cannot give p below", 1,
      true), rep)
    local m3 = (r1.by_length[3].correct + res.by_length[3].correct) / 2
    local a3, a6 = rep:match("\n| roper | yarn | 2 | ([%d.]+) %b() | ([%d.]+) %b() |\n")
    assert.are.same({ ("%.1f"):format(m3), ("%.1f"):format(mean) }, { a3, a6 }, rep)
    -- within roper: yarn against none at length 6, the same models
    local e1 = r1.by_length[4].correct - r1.by_length[2].correct
    local e2 = res.by_length[4].correct - res.by_length[2].correct
    assert.truthy(rep:find(("| roper: yarn - none | yarn | 6 | 2 | %+.2f |"):format((e1 + e2) / 2),
      1, true), rep)
    -- runs of other seeds (--first-seed 11) are found as well: the same tables
    local moved = tmp .. "/moved"
    os.execute(("cp -r %s %s"):format(h.sh_quote(out), h.sh_quote(moved)))
    for _, m in ipairs { "rope", "roper" } do
      for s = 1, 2 do
        os.rename(("%s/runs/%s-s%d.json"):format(moved, m, s), ("%s/runs/%s-s%d.json"):format(moved, m, s + 10))
      end
    end
    local rep2, rse2, rcode2 = h.run(("%s scripts/lengths_report.lua %s"):format(h.sh_quote(BIN),
      h.sh_quote(moved)))
    assert.are.equal(0, rcode2, rse2)
    assert.are.equal(rep, rep2)
    local _, bse, bcode = h.run(("%s scripts/lengths_report.lua %s --pairs roper/nope"):format(
      h.sh_quote(BIN), h.sh_quote(out)))
    assert.are.equal(2, bcode)
    assert.are.equal("lengths_report.lua: --pairs roper/nope: two methods of the comparison a/b "
      .. "expected\n", bse)
  end)

  it("stops before any run for a length the methods cannot take", function()
    local out = tmp .. "/bad"
    local _, se, code = h.run(("%s scripts/compare.lua --methods rope learned --seeds 1 --steps 1 "
      .. "--task text --d-model 16 --heads 2 --layers 1 --seq-len 32 --batch 4 --quiet "
      .. "--eval-lengths 64 --out %s"):format(h.sh_quote(BIN), h.sh_quote(out)))
    assert.are.equal(2, code)
    assert.are.equal("compare.lua: method learned: option 'eval_lengths': length 64: learned "
      .. "absolute positions hold 32 positions; seq_len 64 asks for more (a learned table cannot "
      .. "be extended)\n", se)
  end)
end)

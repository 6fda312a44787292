-- rp.tasks.grid_offset (docs/tasks.md): an independent solver written here parses every problem's
-- text (the grid cell by cell, the marked cell, the query's offset) and checks the task's answer,
-- its task:check and its packed rows (layout, padding, the answer alone scored); task:positions2d
-- against (i // cols, i % cols); the option errors (exact messages); rp.eval.accuracy with a tiny
-- model; the experiment keys (config, check, run) and scripts/train.lua --task grid_offset through
-- the REPL binary (ROPER_BIN, default build/roper).

local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local rp = require "roper"

local BIN = h.BIN

local function err_of(f, ...)
  local ok, msg = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  return (tostring(msg):gsub("^[^:]*:%d+: ", ""))
end

-- The answer to question q of a rows x cols grid over `alphabet` letters, or nil and why.
local function solve(q, rows, cols, alphabet)
  local n = rows * cols
  if #q ~= n + 6 then return nil, "length " .. #q end
  local last = string.char(("a"):byte() + alphabet - 1)
  local mark
  for i = 1, n do
    local ch = q:sub(i, i)
    if ch == "*" then
      if mark then return nil, "two marked cells" end
      mark = i - 1
    elseif not ch:match("^[a-" .. last .. "]$") then
      return nil, "cell " .. i .. " is " .. ch
    end
  end
  if not mark then return nil, "no marked cell" end
  local sr, r, sc, c = q:sub(n + 1):match("^%?([+-])(%d)([+-])(%d)=$")
  if not sr then return nil, "query " .. q:sub(n + 1) end
  local dr = (sr == "-" and -1 or 1) * tonumber(r)
  local dc = (sc == "-" and -1 or 1) * tonumber(c)
  local tr, tc = mark // cols + dr, mark % cols + dc
  if tr < 0 or tr >= rows or tc < 0 or tc >= cols then return nil, "target outside" end
  local idx = tr * cols + tc + 1
  return q:sub(idx, idx), dr, dc
end

describe("rp.tasks.grid_offset", function()
  it("has the documented vocabulary, defaults and config round trip", function()
    local t = rp.tasks.grid_offset {}
    assert.are.same({ "a", "b", "c", "d", "e", "f", "g", "h", "0", "1", "2", "3", "4", "5", "6",
                      "7", "8", "9", "*", "?", "+", "-", "=", "#", "." }, t:vocab())
    assert.are.same({ kind = "grid_offset", rows = 6, cols = 8, alphabet = 8, max_offset = 3,
                      seq_len = 256 }, t:config())
    assert.are.equal("roper.Task: grid_offset (6 x 8, 8 letters, offsets up to 3), vocab 25, "
      .. "seq_len 256", tostring(t))
    local u = rp.tasks.grid_offset { rows = 4, cols = 3, alphabet = 26, max_offset = 2, seq_len = 40 }
    assert.are.same(u:config(), rp.tasks.grid_offset(u:config()):config())
    assert.are.equal(26 + 17, u:vocab_size())
    -- defaults that follow the grid: max_offset at most rows - 1 and cols - 1, seq_len one problem
    assert.are.same({ kind = "grid_offset", rows = 2, cols = 2, alphabet = 8, max_offset = 1,
                      seq_len = 256 }, rp.tasks.grid_offset { rows = 2, cols = 2 }:config())
    assert.are.equal(1056, rp.tasks.grid_offset { rows = 32, cols = 32 }:config().seq_len)
  end)

  for _, shape in ipairs { { 6, 8, 8, 3 }, { 3, 5, 4, 2 }, { 5, 2, 3, 1 }, { 10, 12, 26, 9 } } do
    local rows, cols, alphabet, m = shape[1], shape[2], shape[3], shape[4]
    it(("problems of %dx%d, %d letters, offsets up to %d: the solver agrees, check accepts "
      .. "and refuses"):format(rows, cols, alphabet, m), function()
      local t = rp.tasks.grid_offset { rows = rows, cols = cols, alphabet = alphabet,
                                       max_offset = m, seq_len = 1024 }
      local g = rp.rng(11)
      local seen, n = {}, 3000
      for _ = 1, n do
        local q, a = t:problem(g)
        local want, dr, dc = solve(q, rows, cols, alphabet)
        assert.is_not_nil(want, dr and (dr .. " in " .. q))
        assert.are.equal(want, a, q)
        assert.is_true(math.abs(dr) <= m and math.abs(dc) <= m and not (dr == 0 and dc == 0), q)
        seen[dr .. "," .. dc] = true
        assert.is_true(t:check(q, a), q)
        assert.is_true(t:check(q, a .. "#"), q)
        assert.is_true(t:check(q, a .. "#abc"), q)
        local wrong = a == "a" and "b" or "a"
        assert.is_false(t:check(q, wrong), q)
        assert.is_false(t:check(q, wrong .. "#"), q)
        assert.is_false(t:check(q, a .. a), q)
        assert.is_false(t:check(q, ""), q)
      end
      local k = 0
      for _ in pairs(seen) do k = k + 1 end
      assert.are.equal((2 * m + 1) ^ 2 - 1, k, "every nonzero offset occurs")
    end)
  end

  it("packs whole problems of (rows + query rows) * cols tokens and scores only the answers",
    function()
      for _, shape in ipairs { { 6, 8, 8, 3, 256 }, { 3, 5, 4, 2, 64 }, { 4, 3, 5, 2, 45 } } do
        local rows, cols, alphabet, m, T = table.unpack(shape)
        local t = rp.tasks.grid_offset { rows = rows, cols = cols, alphabet = alphabet,
                                         max_offset = m, seq_len = T }
        local qrows = -(-8 // cols)
        local P = (rows + qrows) * cols
        local x, y = t:batch(8, rp.rng(3))
        assert.are.same({ 8, T }, x:shape())
        local problems = 0
        for b = 1, 8 do
          local text = t:decode(x[b])
          for p0 = 0, T - P, P do
            local pr = text:sub(p0 + 1, p0 + P)
            local q = pr:sub(1, rows * cols + 6)
            local want = solve(q, rows, cols, alphabet)
            assert.is_not_nil(want, pr)
            assert.are.equal(want .. "#" .. ("."):rep(P - rows * cols - 8),
              pr:sub(rows * cols + 7), pr)
            problems = problems + 1
          end
          for j = 1, T do
            local scored = j % P == rows * cols + 6 -- the position before the answer
            local tg = math.tointeger(y[b][j])
            if scored then
              if j < T then assert.are.equal(math.tointeger(x[b][j + 1]), tg) end
              assert.is_true(tg >= 0 and tg < alphabet)
            else
              assert.are.equal(-1, tg, ("row %d position %d"):format(b, j))
            end
          end
        end
        assert.is_true(problems >= 8)
      end
    end)

  it("gives the same data for the same generator state", function()
    local t = rp.tasks.grid_offset {}
    local a = t:batch(3, rp.rng(5))
    local b = t:batch(3, rp.rng(5))
    local c = t:batch(3, rp.rng(6))
    assert.are.same(a:totable(), b:totable())
    assert.are_not.same(a:totable(), c:totable())
    -- the question is the start of the packed row drawn from the same state
    local q, ans = t:problem(rp.rng(9))
    assert.are.equal(q .. ans, t:decode(t:batch(1, rp.rng(9))[1]):sub(1, #q + 1))
    -- pinned (docs/tasks.md): rp_rng is the same on every platform
    local e = rp.tasks.grid_offset { rows = 3, cols = 5, alphabet = 4, max_offset = 2, seq_len = 40 }
    assert.are.equal("bcaddccbbabc*bd?+0+2=d#..", t.decode(e, e:batch(1, rp.rng(1))[1]):sub(1, 25))
  end)

  it("task:positions2d: (i // cols, i % cols) for the first n tokens", function()
    local t = rp.tasks.grid_offset { rows = 3, cols = 5, alphabet = 4, max_offset = 2, seq_len = 40 }
    local p = t:positions2d(55)
    assert.are.same({ 55, 2 }, p:shape())
    local rows = p:totable()
    for i = 0, 54 do assert.are.same({ i // 5, i % 5 }, rows[i + 1]) end
    assert.are.same({ 40, 2 }, t:positions2d():shape())
    assert.are.same({ 0, 2 }, t:positions2d(0):shape())
    -- a question's tokens: the grid cells at their (row, column), the query on the row after it
    local q = t:problem(rp.rng(2))
    local pq = t:positions2d(#q):totable()
    local star = q:find("*", 1, true) - 1
    assert.are.same({ star // 5, star % 5 }, pq[star + 1])
    assert.are.same({ 3, 0 }, pq[16]) -- '?' starts layout row 3
  end)

  it("refuses bad options and misuse with exact messages", function()
    local fn = "bad argument #1 to 'rp.tasks.grid_offset' "
    local cases = {
      { { rows = 1 }, "(option 'rows' must be in 2..32, got 1)" },
      { { rows = 33 }, "(option 'rows' must be in 2..32, got 33)" },
      { { cols = 1 }, "(option 'cols' must be in 2..32, got 1)" },
      { { cols = 33 }, "(option 'cols' must be in 2..32, got 33)" },
      { { alphabet = 1 }, "(option 'alphabet' must be in 2..26, got 1)" },
      { { alphabet = 27 }, "(option 'alphabet' must be in 2..26, got 27)" },
      { { max_offset = 0 },
        "(option 'max_offset' must be in 1..5 (at most 9, rows - 1 and cols - 1), got 0)" },
      { { max_offset = 6 },
        "(option 'max_offset' must be in 1..5 (at most 9, rows - 1 and cols - 1), got 6)" },
      { { rows = 32, cols = 32, max_offset = 10 },
        "(option 'max_offset' must be in 1..9 (at most 9, rows - 1 and cols - 1), got 10)" },
      { { rows = 20, cols = 3, max_offset = 3 },
        "(option 'max_offset' must be in 1..2 (at most 9, rows - 1 and cols - 1), got 3)" },
      { { seq_len = 55 },
        "(option 'seq_len' must be >= 56, the length of one problem ((rows + 1) * cols), got 55)" },
      { { cols = 3, max_offset = 2, seq_len = 26 },
        "(option 'seq_len' must be >= 27, the length of one problem ((rows + 3) * cols), got 26)" },
      { { seq_len = 7 }, "(option 'seq_len' must be in 8..16777216, got 7)" },
      { { rows = 2.5 }, "(option 'rows' must be an integer, got 2.5)" },
      { { max_offset = "2" }, "(option 'max_offset' must be an integer, got string \"2\")" },
      { { str_len = 3 },
        "(unknown option 'str_len' (known: rows, cols, alphabet, max_offset, seq_len, kind))" },
      { { kind = "text" }, "(option 'kind' is \"text\", but this is rp.tasks.grid_offset)" },
    }
    for _, c in ipairs(cases) do
      assert.are.equal(fn .. c[2], err_of(rp.tasks.grid_offset, c[1]))
    end
    local t = rp.tasks.grid_offset {}
    assert.are.equal("bad argument #1 to 'positions2d' (n must be in 0..16777216, got -1)",
      err_of(function() return t:positions2d(-1) end))
    assert.are.equal("bad argument #1 to 'positions2d' (n must be an integer, got 1.5)",
      err_of(function() return t:positions2d(1.5) end))
    assert.are.equal("task:positions2d needs a grid_offset task (this is addition)",
      err_of(function() return rp.tasks.addition {}:positions2d(4) end))
    assert.are.equal("bad argument #2 to 'problem' (n_digits applies to addition tasks only)",
      err_of(function() return t:problem(nil, 3) end))
  end)
end)

describe("grid_offset in rp.eval and rp.experiment", function()
  it("rp.eval.accuracy runs with a tiny model: one generated token, checked by the solver",
    function()
      local t = rp.tasks.grid_offset { rows = 3, cols = 5, alphabet = 4, max_offset = 2, seq_len = 40 }
      local m = rp.model { vocab = t:vocab_size(), d_model = 16, heads = 2, layers = 1, d_ff = 32,
                           seq_len = 40, max_batch = 4, seed = 3 }
      local acc, correct, records = rp.eval.accuracy(m, t, { problems = 40, decode = "greedy" })
      assert.are.equal(40, #records)
      local right = 0
      for _, r in ipairs(records) do
        assert.are.equal(solve(r.question, 3, 5, 4), r.answer)
        assert.are.equal(1, #r.output, r.output)
        assert.are.equal(r.output == r.answer, r.ok)
        if r.ok then right = right + 1 end
      end
      assert.are.equal(right, correct)
      assert.are.equal(right / 40, acc)
      local acc2 = rp.eval.accuracy(m, t, { problems = 40, decode = "greedy" })
      assert.are.equal(acc, acc2)
      assert.are.equal("bad argument #3 to 'rp.eval.accuracy' (option 'n_digits' applies to "
        .. "addition tasks only)", err_of(rp.eval.accuracy, m, t, { n_digits = 3 }))
      assert.are.equal("bad argument #3 to 'rp.eval.lengths' (grid_offset has no length to vary "
        .. "(lengths apply to addition, substring_index, substring_prefix and text))",
        err_of(rp.eval.lengths, m, t, { lengths = { 3 } }))
    end)

  it("has its experiment keys: config, applies, check and a 3-step run", function()
    local keys = {}
    for _, k in ipairs(rp.experiment.keys()) do keys[k.name] = k end
    for name, default in pairs { rows = 6, cols = 8, alphabet = 8, max_offset = 3 } do
      assert.are.equal(default, keys[name].default, name)
      assert.are.equal("grid_offset", keys[name].task, name)
      assert.is_true(rp.experiment.applies(name, "grid_offset"))
      assert.is_false(rp.experiment.applies(name, "addition"))
    end
    assert.is_false(rp.experiment.applies("str_len", "grid_offset"))
    local base = { task = "grid_offset", rows = 4, cols = 6, alphabet = 5, max_offset = 2,
                   seq_len = 64, d_model = 16, layers = 1, batch = 4, steps = 3, problems = 8,
                   decode = "greedy", log_every = 1 }
    local cfg = rp.experiment.check(base)
    assert.are.equal("grid_offset", cfg.task)
    local t = rp.experiment.task(cfg)
    assert.are.same({ kind = "grid_offset", rows = 4, cols = 6, alphabet = 5, max_offset = 2,
                      seq_len = 64 }, t:config())
    local res = rp.experiment.run(base)
    assert.are.equal("correct", res.metric)
    assert.is_true(res.correct >= 0 and res.correct <= 8)
    assert.are.equal(res.correct, res.value)
    for _, e in ipairs(res.examples) do
      assert.are.equal(solve(e.question, 4, 6, 5), e.answer)
    end
    local function bad(over, msg)
      local o = {}
      for k, v in pairs(base) do o[k] = v end
      for k, v in pairs(over) do o[k] = v end
      assert.are.equal("bad argument #1 to 'rp.experiment.check' (" .. msg .. ")",
        err_of(rp.experiment.check, o))
    end
    bad({ seq_len = 30 }, "task grid_offset: option 'seq_len' must be >= 36, the length of one "
      .. "problem ((rows + 2) * cols), got 30")
    bad({ max_offset = 4 }, "task grid_offset: option 'max_offset' must be in 1..3 (at most 9, "
      .. "rows - 1 and cols - 1), got 4")
    bad({ eval_lengths = "3" }, "option 'eval_lengths': grid_offset has no length to vary "
      .. "(lengths apply to addition, substring_index, substring_prefix and text)")
  end)

  it("scripts/train.lua --task grid_offset trains and evaluates (exit 0)", function()
    local cmd = ("%s scripts/train.lua --task grid_offset --rows 3 --cols 5 --alphabet 4 "
      .. "--max-offset 2 --seq-len 50 --steps 3 --d-model 16 --layers 1 --batch 2 --problems 6 "
      .. "--quiet 2>&1"):format(BIN)
    local p = assert(io.popen(cmd, "r"))
    local out = p:read("a")
    local ok = p:close()
    assert.is_true(ok, out)
    assert.truthy(out:find("^grid_offset, pe rope, %d+ params, 3 steps"), out)
    assert.truthy(out:find("\ncorrect %d of 6 %(sample, temperature 1%), greedy %d"), out)
  end)

  it("scripts/compare.lua counts grid_offset by correct answers", function()
    local dir = h.tmpname()
    os.remove(dir)
    local cmd = ("%s scripts/compare.lua --task grid_offset --rows 3 --cols 5 --alphabet 4 "
      .. "--max-offset 2 --seq-len 50 --seeds 1 --steps 2 --d-model 16 --layers 1 --batch 2 "
      .. "--problems 4 --methods rope --jobs 1 --quiet --out %s 2>&1"):format(BIN, dir)
    local p = assert(io.popen(cmd, "r"))
    local out = p:read("a")
    local ok = p:close()
    local f = io.open(dir .. "/summary.json")
    local summary = f and f:read("a") or ""
    if f then f:close() end
    os.execute("rm -rf '" .. dir .. "'")
    assert.is_true(ok, out)
    assert.truthy(out:find("\nMetric: correct of 4 %(sample, temperature 1%), higher is better%."),
      out)
    assert.truthy(summary:find('"metric":"correct"', 1, true), summary)
  end)
end)

-- roper.Task (rp.tasks.*) and rp.eval: vocabularies, encode/decode, packed batches (shapes,
-- problem boundaries, shifted targets, the substring_prefix score mask recomputed in Lua),
-- determinism, problems and the answer check against plain-Lua sums and slices, text tasks on a
-- UTF-8 file, option errors (exact messages), release, and rp.eval on a tiny untrained model.

local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local rp = require "roper"

-- The message of a failing call without its "file:line: " prefix.
local function err_of(f, ...)
  local ok, msg = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  return (tostring(msg):gsub("^[^:]*:%d+: ", ""))
end

-- Row b of a [B x T] tensor as a Lua table of integers.
local function row(x, b)
  local t = {}
  for j = 1, x:size(2) do t[j] = math.tointeger(x[b][j]) end
  return t
end

-- The steps of an addition as the task writes them (labml's get_add_explanation,
-- labml_nn/experiments/arithmetic_dataset.py).
local function steps(x, y)
  local carry, e, out = 0, 0, {}
  while x > 0 or y > 0 or carry > 0 do
    local rx, ry = x % 10, y % 10
    local total = rx + ry + carry
    out[#out + 1] = ("%de%d+%de%d+%de%d==%de%d"):format(rx, e, ry, e, carry, e, total, e)
    x, y, carry = x // 10, y // 10, total // 10
    e = e + 1
  end
  return out
end

-- The full text of an addition problem after its question: " <steps> and d==S#" or labml's
-- " <steps> x==S\n".
local function continuation(fmt, a, b)
  if fmt == "labml" then return " " .. table.concat(steps(a, b), " ") .. " x==" .. (a + b) .. "\n" end
  return " " .. table.concat(steps(a, b), " and ") .. " and d==" .. (a + b) .. "#"
end

describe("rp.tasks vocabularies", function()
  it("lists the characters in token order", function()
    local add = rp.tasks.addition {}
    assert.are.same({ "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "d", "e", " ", "=", "#",
                      "?", "+", ";", "a", "n" }, add:vocab())
    assert.are.equal(20, add:vocab_size())
    local labml = rp.tasks.addition { format = "labml" }
    assert.are.same({ "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "x", "e", " ", "=", "\n",
                      "?", "+", ";" }, labml:vocab())
    assert.are.same({ "a", "c", "g", "t", ">" }, rp.tasks.substring_prefix {}:vocab())
    local si = rp.tasks.substring_index {}
    local seen = {}
    for _, ch in ipairs(si:vocab()) do
      assert.are.equal(1, #ch)
      assert.is_nil(seen[ch])
      seen[ch] = true
    end
    for ch in ("abcdefghijklmnopqrstuvwxyz0123456789?='; []:#"):gmatch(".") do
      assert.is_true(seen[ch], ch)
    end
    assert.are.equal(#si:vocab(), si:vocab_size())
  end)

  it("encodes and decodes (tables and tensors)", function()
    local t = rp.tasks.addition {}
    local s = "?d=12+3; 2e0+3e0+0e0==5e0 and 1e1+0e1+0e1==1e1 and d==15#"
    local ids = t:encode(s)
    assert.are.equal(#s, #ids)
    assert.are.equal(15, ids[1]) -- '?'
    assert.are.equal(s, t:decode(ids))
    local ft = {}
    for i, v in ipairs(ids) do ft[i] = v end
    assert.are.equal(s, t:decode(rp.tensor(ft)))
    assert.are.equal("", t:decode({}))
    assert.are.same({}, t:encode(""))
  end)
end)

describe("task:batch", function()
  local kinds = {
    { "addition writeup", function() return rp.tasks.addition { seq_len = 96 } end, "?" },
    { "addition labml", function() return rp.tasks.addition { format = "labml", seq_len = 96 } end, "?" },
    { "substring_index", function() return rp.tasks.substring_index { seq_len = 96 } end, "?" },
    { "substring_prefix", function() return rp.tasks.substring_prefix { seq_len = 96 } end, nil },
  }
  for _, k in ipairs(kinds) do
    it("gives [B x seq_len] inputs and shifted targets: " .. k[1], function()
      local t = k[2]()
      local x, y = t:batch(3, rp.rng(7))
      assert.are.same({ 3, 96 }, x:shape())
      assert.are.same({ 3, 96 }, y:shape())
      for b = 1, 3 do
        local xi, yi = row(x, b), row(y, b)
        local text = t:decode(xi)
        if k[3] then assert.are.equal(k[3], text:sub(1, 1)) end
        for j = 1, 95 do
          if yi[j] ~= -1 then assert.are.equal(xi[j + 1], yi[j], "target " .. j) end
        end
        if k[1] ~= "substring_prefix" then
          -- every position scored: the decoded targets are the text shifted by one
          local ytext = t:decode(yi)
          assert.are.equal(text:sub(2), ytext:sub(1, 95))
        end
      end
    end)
  end

  it("packs complete problems the Lua rules reproduce (addition, both formats)", function()
    for _, fmt in ipairs { "writeup", "labml" } do
      local t = rp.tasks.addition { format = fmt, seq_len = 512 }
      local x, y = t:batch(2, rp.rng(3))
      for b = 1, 2 do
        local text = t:decode(row(x, b)) .. t:vocab()[math.tointeger(y[b][512]) + 1]
        local v = fmt == "labml" and "x" or "d"
        local n = 0
        for a, bb, rest in text:gmatch("%?" .. v .. "=(%d+)%+(%d+);([^?]*)") do
          local term = fmt == "labml" and "\n" or "#"
          if rest:sub(-1) == term then -- complete (not the cut-off last problem)
            n = n + 1
            assert.are.equal(continuation(fmt, tonumber(a), tonumber(bb)), rest)
          end
        end
        assert.is_true(n >= 2, fmt .. ": " .. n .. " complete problems")
      end
    end
  end)

  it("scores substring_prefix exactly on characters 2..16 of each copy", function()
    local t = rp.tasks.substring_prefix { seq_len = 300 }
    local x, y = t:batch(4, rp.rng(11))
    local V = t:vocab()
    for b = 1, 4 do
      local xi, yi = row(x, b), row(y, b)
      local s = {}
      for j = 1, 300 do s[j] = V[xi[j] + 1] end
      -- scored[p]: whether character p of the packed text (1..301) is scored
      local scored = {}
      local p = 17 -- the first 16 characters are the initial string
      local copies = 0
      while p <= 301 do
        while p <= 300 and s[p] ~= ">" do p = p + 1 end -- filler
        if p > 300 then break end
        p = p + 1                                        -- '>'
        local start = p
        for q = start + 1, start + 15 do scored[q] = true end -- chars 2..16 of the copy
        -- the copy is a substring of the text so far without the markers
        if start + 15 <= 300 then
          local pure = table.concat(s, "", 1, start - 1):gsub(">", "")
          local copy = table.concat(s, "", start, start + 15)
          assert.is_truthy(pure:find(copy, 1, true), "copy " .. copy)
          copies = copies + 1
        end
        p = start + 16
      end
      assert.is_true(copies >= 5)
      for j = 1, 300 do
        if scored[j + 1] then
          assert.are_not.equal(-1, yi[j], "position " .. j .. " must be scored")
          if j < 300 then assert.are.equal(xi[j + 1], yi[j]) end
        else
          assert.are.equal(-1, yi[j], "position " .. j .. " must not be scored")
        end
      end
    end
  end)

  it("is deterministic for a seed", function()
    for _, t in ipairs { rp.tasks.addition { seq_len = 64 }, rp.tasks.substring_prefix { seq_len = 64 } } do
      local x1, y1 = t:batch(2, rp.rng(5))
      local x2, y2 = t:batch(2, rp.rng(5))
      local x3 = t:batch(2, rp.rng(6))
      assert.are.equal(0, rp.maxdiff(x1, x2))
      assert.are.equal(0, rp.maxdiff(y1, y2))
      assert.is_true(rp.maxdiff(x1, x3) > 0)
    end
    -- without a generator: the module's default one (rp.seed)
    local t = rp.tasks.substring_index { seq_len = 32 }
    rp.seed(9); local a = t:batch(1)
    rp.seed(9); local b = t:batch(1)
    assert.are.equal(0, rp.maxdiff(a, b))
  end)

  it("feeds m:train_step", function()
    local t = rp.tasks.addition { max_digits = 2, seq_len = 32 }
    local m = rp.model { vocab = t:vocab_size(), d_model = 16, heads = 2, layers = 1, d_ff = 32,
                         seq_len = 32, max_batch = 2, seed = 1 }
    local opt = rp.optim.adam(m, { lr = 1e-3 })
    local x, y = t:batch(2, rp.rng(1))
    local loss = m:train_step(x, y, nil, opt)
    assert.is_true(loss > 0 and loss < 10)
  end)
end)

describe("task:problem and task:check", function()
  for _, fmt in ipairs { "writeup", "labml" } do
    it("addition (" .. fmt .. "): answers are the sums, the check is exact", function()
      local t = rp.tasks.addition { format = fmt }
      local g = rp.rng(21)
      local v = fmt == "labml" and "x" or "d"
      for _ = 1, 50 do
        local q, a = t:problem(g)
        local x, y = q:match("^%?" .. v .. "=(%d+)%+(%d+);$")
        assert.is_truthy(x, q)
        x, y = tonumber(x), tonumber(y)
        assert.are.equal(tostring(x + y), a)
        assert.is_true(t:check(q, continuation(fmt, x, y)))
        local term = fmt == "labml" and "\n" or "#"
        assert.is_true(t:check(q, " " .. v .. "==" .. a .. term))
        assert.is_false(t:check(q, " " .. v .. "==" .. (x + y + 1) .. term))
        assert.is_false(t:check(q, " " .. v .. "==" .. a))                  -- no terminator
        assert.is_false(t:check(q, continuation(fmt, x, y + 1)))
      end
    end)
  end

  it("addition: n_digits fixes the operand length", function()
    local t = rp.tasks.addition {}
    local g = rp.rng(2)
    for _, n in ipairs { 1, 5, 9, 12 } do
      for _ = 1, 10 do
        local q, a = t:problem(g, n)
        local x, y = q:match("^%?d=(%d+)%+(%d+);$")
        assert.are.equal(n, #x)
        assert.are.equal(n, #y)
        assert.are.equal(tostring(tonumber(x) + tonumber(y)), a)
      end
    end
  end)

  it("substring_index: answers are the slices", function()
    local t = rp.tasks.substring_index {}
    local g = rp.rng(4)
    for _ = 1, 50 do
      local q, a = t:problem(g)
      local s, i = q:match("^%?s='(%l+)'; s%[(%d+):%]==$")
      assert.is_truthy(s, q)
      assert.are.equal(13, #s)
      i = tonumber(i)
      assert.is_true(i >= 0 and i <= 12)
      assert.are.equal("'" .. s:sub(i + 1) .. "'", a)
      assert.is_true(t:check(q, a .. "#"))
      assert.is_true(t:check(q, a .. "#?s='junk"))
      assert.is_false(t:check(q, a))
      assert.is_false(t:check(q, "'" .. s:sub(i + 2) .. "'#"))
    end
  end)

  it("is deterministic for a seed", function()
    local t = rp.tasks.addition {}
    local q1, a1 = t:problem(rp.rng(8))
    local q2, a2 = t:problem(rp.rng(8))
    assert.are.equal(q1, q2)
    assert.are.equal(a1, a2)
  end)
end)

describe("rp.eval", function()
  local t = rp.tasks.addition { max_digits = 2, seq_len = 64 }
  local m = rp.model { vocab = t:vocab_size(), d_model = 16, heads = 2, layers = 1, d_ff = 32,
                       seq_len = 64, max_batch = 4, seed = 3 }

  it("accuracy: a number in [0, 1], records with the right fields, deterministic", function()
    local acc, correct, recs = rp.eval.accuracy(m, t, { problems = 6, seed = 1 })
    assert.are.equal("number", type(acc))
    assert.is_true(acc >= 0 and acc <= 1)
    assert.are.equal(math.type(correct), "integer")
    assert.are.equal(correct / 6, acc)
    assert.are.equal(6, #recs)
    local n = 0
    for _, r in ipairs(recs) do
      assert.truthy(r.question:match("^%?d=%d+%+%d+;$"))
      assert.are.equal("string", type(r.answer))
      assert.are.equal("string", type(r.output))
      assert.are.equal("boolean", type(r.ok))
      assert.are.equal(t:check(r.question, r.output), r.ok)
      if r.ok then n = n + 1 end
    end
    assert.are.equal(correct, n)
    local _, _, recs2 = rp.eval.accuracy(m, t, { problems = 6, seed = 1 })
    assert.are.same(recs, recs2)
    local _, _, s1 = rp.eval.accuracy(m, t, { problems = 4, seed = 2, decode = "sample",
                                              temperature = 0.8, top_k = 5, max_new = 20 })
    local _, _, s2 = rp.eval.accuracy(m, t, { problems = 4, seed = 2, decode = "sample",
                                              temperature = 0.8, top_k = 5, max_new = 20 })
    assert.are.same(s1, s2)
    for _, r in ipairs(s1) do
      local k = #t:encode(r.output)
      assert.is_true(k <= 20)
      assert.is_true(k == 20 or r.output:sub(-1) == "#")
    end
  end)

  it("accuracy on substring_index and length_generalisation", function()
    local si = rp.tasks.substring_index { seq_len = 64 }
    local m2 = rp.model { vocab = si:vocab_size(), d_model = 16, heads = 2, layers = 1, d_ff = 32,
                          seq_len = 64, max_batch = 2 }
    local acc, _, recs = rp.eval.accuracy(m2, si, { problems = 3 })
    assert.is_true(acc >= 0 and acc <= 1)
    assert.are.equal(3, #recs)
    local accs, rs = rp.eval.length_generalisation(m, t, { digits = { 1, 3 }, problems = 2 })
    assert.is_true(accs[1] >= 0 and accs[1] <= 1)
    assert.is_true(accs[3] >= 0 and accs[3] <= 1)
    assert.truthy(rs[3][1].question:match("^%?d=%d%d%d%+%d%d%d;$"))
  end)

  it("accuracy: ids beyond the task's vocabulary end the output and count as wrong", function()
    local big = rp.model { vocab = t:vocab_size() + 40, d_model = 16, heads = 2, layers = 1,
                           d_ff = 32, seq_len = 64, max_batch = 2, seed = 5 }
    local acc, _, recs = rp.eval.accuracy(big, t, { problems = 8, decode = "sample", seed = 3 })
    assert.is_true(acc >= 0 and acc <= 1)
    local cut = 0
    for _, r in ipairs(recs) do
      if r.output:find("\u{FFFD}", 1, true) then
        cut = cut + 1
        assert.is_false(r.ok)
      end
    end
    assert.is_true(cut > 0) -- 40 of 60 ids are outside the task's vocabulary
  end)

  it("loss: the mean over fresh batches", function()
    local l1 = rp.eval.loss(m, t, { batches = 2, batch_size = 2, seed = 4 })
    local l2 = rp.eval.loss(m, t, { batches = 2, batch_size = 2, seed = 4 })
    assert.are.equal(l1, l2)
    assert.is_true(l1 > 0 and l1 < 10)
    local g = rp.rng(4)
    local want = 0
    for _ = 1, 2 do
      local x, y = t:batch(2, g)
      want = want + m:loss(x, y)
    end
    assert.are.equal(want / 2, l1)
    local sp = rp.tasks.substring_prefix { seq_len = 64 }
    local m3 = rp.model { vocab = sp:vocab_size(), d_model = 16, heads = 2, layers = 1, d_ff = 32,
                          seq_len = 64, max_batch = 2 }
    assert.is_true(rp.eval.loss(m3, sp, { batches = 1 }) > 0)
  end)

  it("raises for bad arguments", function()
    local small = rp.model { vocab = 5, d_model = 16, heads = 2, layers = 1, d_ff = 32, seq_len = 16 }
    local cases = {
      { function() return rp.eval.accuracy(m, t, { problemz = 1 }) end,
        "bad argument #3 to 'rp.eval.accuracy' (unknown option 'problemz' (known: problems, decode, temperature, top_k, seed, max_new, n_digits, batch))" },
      { function() return rp.eval.accuracy(t, t) end,
        "bad argument #1 to 'rp.eval.accuracy' (roper.Model expected, got roper.Task)" },
      { function() return rp.eval.accuracy(m, m) end,
        "bad argument #2 to 'rp.eval.accuracy' (roper.Task expected, got roper.Model)" },
      { function() return rp.eval.accuracy(m, t, { decode = "beam" }) end,
        "bad argument #3 to 'rp.eval.accuracy' (option 'decode' must be one of \"greedy\", \"sample\", got string \"beam\")" },
      { function() return rp.eval.accuracy(m, t, { problems = 0 }) end,
        "bad argument #3 to 'rp.eval.accuracy' (option 'problems' must be >= 1, got 0)" },
      { function() return rp.eval.accuracy(small, t) end,
        "bad argument #1 to 'rp.eval.accuracy' (the model's vocab 5 is smaller than the task's 20)" },
      { function() return rp.eval.accuracy(m, rp.tasks.substring_prefix {}) end,
        "bad argument #2 to 'rp.eval.accuracy' (accuracy needs an addition, substring_index or grid_offset task (this is substring_prefix))" },
      { function() return rp.eval.length_generalisation(m, t, { problems = 2 }) end,
        "bad argument #3 to 'rp.eval.length_generalisation' (option 'digits' must be a nonempty table of digit counts, got nil)" },
      { function() return rp.eval.loss(m, rp.tasks.addition { seq_len = 128 }) end,
        "bad argument #1 to 'rp.eval.loss' (the task's seq_len 128 exceeds the model's seq_len 64)" },
      { function() return rp.eval.loss(m, t, { split = "valid" }) end,
        "bad argument #3 to 'rp.eval.loss' (split \"valid\" exists only for text and lm tasks (this is addition))" },
    }
    for _, c in ipairs(cases) do assert.are.equal(c[2], err_of(c[1])) end
  end)
end)

describe("rp.tasks.text", function()
  local path = h.tmpname()
  local line = "héllo wörld ☃ naïve café\n"
  local f = assert(io.open(path, "wb"))
  f:write(line:rep(60))
  f:close()
  teardown(function() os.remove(path) end)

  it("builds the sorted character vocabulary of a UTF-8 file", function()
    local t = assert(rp.tasks.text { path = path, seq_len = 32 })
    local cps, set = {}, {}
    for _, c in utf8.codes(line) do
      if not set[c] then set[c] = true; cps[#cps + 1] = c end
    end
    table.sort(cps)
    local want = {}
    for i, c in ipairs(cps) do want[i] = utf8.char(c) end
    assert.are.same(want, t:vocab())
    assert.are.equal(line, t:decode(t:encode(line)))
    assert.are.equal(utf8.len(line), #t:encode(line))
    assert.are.equal("roper.Task: text (" .. path .. "), vocab " .. #want .. ", seq_len 32",
                     tostring(t))
    local c = t:config()
    assert.are.equal("text", c.kind)
    assert.are.equal(path, c.path)
    assert.are.equal(0.1, c.valid_fraction)
  end)

  it("takes windows of the train and validation parts", function()
    local t = assert(rp.tasks.text { path = path, seq_len = 32, valid_fraction = 0.25 })
    local text = line:rep(60)
    for _, split in ipairs { "train", "valid" } do
      local x, y = t:batch(3, rp.rng(1), split)
      assert.are.same({ 3, 32 }, x:shape())
      for b = 1, 3 do
        local s = t:decode(row(x, b))
        assert.are.equal(32, utf8.len(s))
        assert.is_truthy(text:find(s, 1, true))
        assert.are.equal(utf8.offset(s, 2) and s:sub(utf8.offset(s, 2)),
                         t:decode(row(y, b)):sub(1, #s - utf8.offset(s, 2) + 1))
      end
    end
    -- a split shorter than a window: said once, with the function's name
    local short = assert(rp.tasks.text { path = path, seq_len = 32, valid_fraction = 0.001 })
    local n = select(2, short:split_sizes())
    assert.has_error(function() short:batch(1, rp.rng(1), "valid") end,
      ("rp.Task.batch: the validation split of %s has %d characters, a window needs seq_len + 1 "
        .. "= 33"):format(path, n))
  end)

  it("returns nil and a message for file problems", function()
    local missing = path .. ".missing"
    local t, msg = rp.tasks.text { path = missing }
    assert.is_nil(t)
    assert.are.equal(missing .. ": No such file or directory", msg)
    local empty = h.tmpname()
    local t2, msg2 = rp.tasks.text { path = empty }
    os.remove(empty)
    assert.is_nil(t2)
    assert.are.equal(empty .. ":", msg2:sub(1, #empty + 1))
  end)

  it("limits the corpus size (max_bytes) and tells the split sizes", function()
    local size = #line:rep(60)
    local t = assert(rp.tasks.text { path = path, seq_len = 32, max_bytes = size })
    assert.are.equal(size, t:config().max_bytes)
    local n = utf8.len(line) * 60
    local valid = math.floor(n * 0.1)
    assert.are.same({ n - valid, valid }, { t:split_sizes() })
    local t2, msg = rp.tasks.text { path = path, max_bytes = size - 1 }
    assert.is_nil(t2)
    assert.are.equal(("%s: %.1f KiB is more than the limit of %.1f KiB (max_bytes)"):format(path,
      size / 1024, (size - 1) / 1024), msg)
    assert.are.equal(256 * 2 ^ 20, assert(rp.tasks.text { path = path }):config().max_bytes)
    assert.has_error(function() rp.tasks.text { path = path, max_bytes = 0 } end,
      "bad argument #1 to 'text' (option 'max_bytes' must be >= 1, got 0)")
    assert.has_error(function() rp.tasks.addition {}:split_sizes() end,
      "task:split_sizes needs a text or lm task (this is addition)")
  end)

  it("refuses FIFOs, devices and folders without files at once (in a child, 10 s limit)", function()
    local bin = h.BIN
    local dir = h.tmpname()
    os.remove(dir)
    assert(os.execute(("mkdir -p %s/empty && mkfifo %s/fifo"):format(dir, dir)))
    local script = ([[
      local d = %q
      for _, p in ipairs { d .. "/fifo", "/dev/zero", "/dev/null", d .. "/empty" } do
        print(select(2, rp.tasks.text { path = p }))
        print(select(2, rp.load(p)))
      end
    ]]):format(dir)
    local f = assert(io.popen(("timeout -s KILL 10 %s -e %q 2>&1; echo \"exit $?\""):format(bin,
      script)))
    local out = f:read("a")
    f:close()
    os.execute(("rm -rf %s"):format(dir))
    assert.are.equal(table.concat({
      dir .. "/fifo: not a regular file (a FIFO)",
      dir .. "/fifo: not a regular file (a FIFO)",
      "/dev/zero: not a regular file (a character device)",
      "/dev/zero: not a regular file (a character device)",
      "/dev/null: not a regular file (a character device)",
      "/dev/null: not a regular file (a character device)",
      dir .. "/empty: no regular files in this folder",
      dir .. "/empty: not a regular file (a folder)",
      "exit 0", "" }, "\n"), out)
  end)

  it("rejects characters outside the vocabulary in encode", function()
    local t = assert(rp.tasks.text { path = path, seq_len = 32 })
    assert.are.equal("bad argument #1 to 'encode' (encode: character U+0078 'x' at byte 3 is not "
                     .. "in the vocabulary)", err_of(function() return t:encode("héx") end))
  end)
end)

describe("task errors", function()
  local t = rp.tasks.addition {}
  local sp = rp.tasks.substring_prefix {}
  local cases = {
    { function() return rp.tasks.addition { max_digits = 0 } end,
      "bad argument #1 to 'addition' (option 'max_digits' must be in 1..18, got 0)" },
    { function() return rp.tasks.addition { max_digits = 2.5 } end,
      "bad argument #1 to 'addition' (option 'max_digits' must be an integer, got 2.5)" },
    { function() return rp.tasks.addition { format = "x" } end,
      "bad argument #1 to 'addition' (option 'format' must be one of \"writeup\", \"labml\", got string \"x\")" },
    { function() return rp.tasks.addition { quirk = 1 } end,
      "bad argument #1 to 'addition' (option 'quirk' must be a boolean, got 1)" },
    { function() return rp.tasks.addition { seq_len = 4 } end,
      "bad argument #1 to 'addition' (option 'seq_len' must be in 8..16777216, got 4)" },
    { function() return rp.tasks.addition { digits = 3 } end,
      "bad argument #1 to 'addition' (unknown option 'digits' (known: format, max_digits, quirk, seq_len, kind))" },
    { function() return rp.tasks.addition { kind = "text" } end,
      "bad argument #1 to 'addition' (option 'kind' is \"text\", but this is rp.tasks.addition)" },
    { function() return rp.tasks.addition(5) end,
      "bad argument #1 to 'addition' (options table expected, got 5)" },
    { function() return rp.tasks.substring_index { str_len = 0 } end,
      "bad argument #1 to 'substring_index' (option 'str_len' must be in 1..1000, got 0)" },
    { function() return rp.tasks.substring_prefix { substr_len = 1 } end,
      "bad argument #1 to 'substring_prefix' (option 'substr_len' must be in 2..65536, got 1)" },
    { function() return rp.tasks.substring_prefix { rnd_len = 1 } end,
      "bad argument #1 to 'substring_prefix' (option 'rnd_len' must be in 2..65536, got 1)" },
    { function() return rp.tasks.text() end,
      "bad argument #1 to 'text' (options table expected (with 'path'), got no value)" },
    { function() return rp.tasks.text {} end,
      "bad argument #1 to 'text' (option 'path' (a UTF-8 text file) is required)" },
    { function() return rp.tasks.text { path = 3 } end,
      "bad argument #1 to 'text' (option 'path' must be a string, got 3)" },
    { function() return rp.tasks.text { path = "" } end,
      "bad argument #1 to 'text' (option 'path' must not be empty)" },
    { function() return rp.tasks.text { path = "a", valid_fraction = 1 } end,
      "bad argument #1 to 'text' (option 'valid_fraction' must be in [0, 1), got 1)" },
    { function() return t:batch(0) end, "bad argument #1 to 'batch' (B must be >= 1, got 0)" },
    { function() return t:batch("2") end,
      "bad argument #1 to 'batch' (B must be an integer, got string \"2\")" },
    { function() return t:batch(2, 5) end,
      "bad argument #2 to 'batch' (roper.Rng expected, got number)" },
    { function() return t:batch(2, nil, "test") end,
      "bad argument #3 to 'batch' (split must be \"train\" or \"valid\", got string \"test\")" },
    { function() return t:batch(2, nil, "valid") end,
      "bad argument #3 to 'batch' (split \"valid\" exists only for text and lm tasks (this is addition))" },
    { function() return t:problem(nil, 0) end,
      "bad argument #2 to 'problem' (n_digits must be in 1..18, got 0)" },
    { function() return rp.tasks.substring_index {}:problem(nil, 3) end,
      "bad argument #2 to 'problem' (n_digits applies to addition tasks only)" },
    { function() return sp:problem() end,
      "task:problem needs an addition, substring_index or grid_offset task (this is substring_prefix)" },
    { function() return sp:check("a", "b") end,
      "task:check needs an addition, substring_index or grid_offset task (this is substring_prefix)" },
    { function() return t:check(1, "x") end,
      "bad argument #1 to 'check' (question must be a string, got 1)" },
    { function() return t:encode("?d=1+z") end,
      "bad argument #1 to 'encode' (encode: character U+007A 'z' at byte 5 is not in the vocabulary)" },
    { function() return t:decode({ 1, 20 }) end,
      "bad argument #1 to 'decode' (token at [2] must be an integer in 0..19 (vocab 20), got 20)" },
    { function() return t:decode(rp.tensor { 0.5 }) end,
      "bad argument #1 to 'decode' (token at [1] must be an integer in 0..19 (vocab 20), got 0.5)" },
    { function() return t:decode(rp.zeros(2, 2)) end,
      "bad argument #1 to 'decode' (ids must be a 1-D tensor, got [2 x 2])" },
    { function() return t:decode("12") end,
      "bad argument #1 to 'decode' (ids must be a table or a tensor, got string \"12\")" },
    { function() return rp.Task.vocab(5) end,
      "bad argument #1 to 'vocab' (roper.Task expected, got number; call methods with ':', as in "
        .. "x:vocab())" },
  }
  for i, c in ipairs(cases) do
    it("case " .. i .. ": " .. c[2]:sub(1, 60), function()
      assert.are.equal(c[2], err_of(c[1]))
    end)
  end
end)

describe("roper.Task userdata", function()
  it("prints its config and round-trips task:config()", function()
    assert.are.equal("roper.Task: addition (writeup, up to 8 digits), vocab 20, seq_len 256",
                     tostring(rp.tasks.addition {}))
    assert.are.equal("roper.Task: addition (labml, up to 7 digits, digit quirk), vocab 18, seq_len 512",
                     tostring(rp.tasks.addition { format = "labml", seq_len = 512 }))
    assert.are.equal("roper.Task: substring_index (13 letters), vocab 45, seq_len 256",
                     tostring(rp.tasks.substring_index {}))
    assert.are.equal("roper.Task: substring_prefix (copies of 16, filler 1..11), vocab 5, seq_len 256",
                     tostring(rp.tasks.substring_prefix {}))
    for _, t in ipairs { rp.tasks.addition { format = "labml", quirk = false, max_digits = 5 },
                         rp.tasks.substring_index { str_len = 9 },
                         rp.tasks.substring_prefix { substr_len = 8, rnd_len = 4, seq_len = 64 } } do
      local c = t:config()
      assert.are.equal(tostring(t), tostring(rp.tasks[c.kind](c)))
    end
    assert.are.same({ kind = "addition", format = "writeup", max_digits = 8, quirk = false,
                      seq_len = 256 }, rp.tasks.addition {}:config())
  end)

  it("is released by __close (safe twice) and then refuses use", function()
    local keep
    do
      local t <close> = rp.tasks.addition {}
      keep = t
    end
    assert.are.equal("roper.Task (released)", tostring(keep))
    getmetatable(keep).__close(keep)
    getmetatable(keep).__gc(keep)
    assert.are.equal("bad argument #1 to 'vocab_size' (attempt to use a released task)",
                     err_of(function() return rp.Task.vocab_size(keep) end))
    assert.are.equal("roper.Task", getmetatable(keep).__name)
  end)

  it("has help texts", function()
    for name, f in pairs(rp.Task) do assert.truthy(rp.help(f), "rp.Task." .. name) end
    for name, f in pairs(rp.tasks) do assert.truthy(rp.help(f), "rp.tasks." .. name) end
    for name, f in pairs(rp.eval) do assert.truthy(rp.help(f), "rp.eval." .. name) end
    assert.truthy(rp.help("task:batch"):find("^task:batch"))
    assert.truthy(rp.help(rp.tasks.addition {}):find("^Topic tasks"))
    assert.truthy(rp.help("eval"):find("^Topic eval"))
    local t = rp.tasks.addition {}
    assert.is_true(t:check("?d=1+2;", " 1e0+2e0+0e0==3e0 and d==3#")) -- the help's example
  end)
end)

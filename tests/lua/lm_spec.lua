-- Language modelling (docs/language_model.md): the lm task's windows against naive slicing of
-- the id stream, m:losses and rp.eval.lm against a float64 computation from the logits, top_p
-- sampling against the nucleus computed here, the ids cache with a stand-in byte-level tokenizer
-- (ids = bytes: the glue is tested without the SentencePiece one), the exact messages for bad
-- input, and a tiny training through rp.experiment on a synthetic stream whose loss falls.
local rp = require "roper"

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = here .. "?.lua;" .. package.path
local h = require "helpers"

local sh_quote, tmpdir, rmrf, write = h.sh_quote, h.tmpdir, h.remove_tree, h.write
-- the roper binary of the scripts' tests, and a command's output (stderr too) and success
local BIN, run = h.BIN, h.run_merged

-- A folder of ids: each split a Lua array of ids, written as int32 .npy, and an ids.txt.
local function ids_folder(dir, V, splits, bytes)
  for _, s in ipairs { "train", "valid", "test" } do
    assert(rp.tensor(splits[s]):save(dir .. "/" .. s .. ".npy", { dtype = "int32" }))
  end
  local b = bytes or {}
  write(dir .. "/ids.txt", ("roper-ids 1\nvocab_size %d\ntrain %d %d\nvalid %d %d\ntest %d %d\n")
    :format(V, #splits.train, b.train or 4 * #splits.train, #splits.valid,
      b.valid or 4 * #splits.valid, #splits.test, b.test or 4 * #splits.test))
end

local function random_stream(n, V, seed)
  local g, t = rp.rng(seed), {}
  for i = 1, n do t[i] = g:int(0, V - 1) end
  return t
end

-- float64 cross-entropy of logits row (a Lua array of V) at target (0-based)
local function xent(row, target)
  local mx = -math.huge
  for _, v in ipairs(row) do mx = math.max(mx, v) end
  local s = 0.0
  for _, v in ipairs(row) do s = s + math.exp(v - mx) end
  return math.log(s) + mx - row[target + 1]
end

describe("rp.tasks.lm", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmrf(dir) end)

  it("cuts a split into windows that score every token but the first exactly once", function()
    local V = 37
    local streams = { train = random_stream(500, V, 1), valid = random_stream(203, V, 2),
      test = random_stream(17, V, 3) }
    ids_folder(dir, V, streams)
    for _, T in ipairs { 8, 16, 50 } do
      local task = assert(rp.tasks.lm { path = dir, vocab_size = V, seq_len = T })
      local tr, va, te = task:split_sizes()
      assert.same({ 500, 203, 17 }, { tr, va, te })
      for _, split in ipairs { "train", "valid", "test" } do
        local s = streams[split]
        local n = #s
        if n < T + 1 then
          assert.has_error(function() task:windows(split, 1, 1) end,
            ("task:windows: windows: the %s split of %s has %d tokens, a window needs seq_len "
              .. "+ 1 = %d"):format(split, dir, n, T + 1))
        else
          local W = math.ceil((n - 1) / T)
          local scored = {}
          local first = 1
          while first <= W do
            local x, y, w = task:windows(split, first, 3)
            assert.equal(W, w)
            x, y = x:totable(), y:totable()
            for r = 1, #x do
              local k = first + r - 2          -- 0-based window
              local start = math.min(k * T, n - T - 1)
              for j = 1, T do
                local i = start + j - 1        -- 0-based index of the input token
                assert.equal(s[i + 1], x[r][j])
                if i >= k * T then
                  assert.equal(s[i + 2], y[r][j])
                  assert.is_nil(scored[i + 1])
                  scored[i + 1] = true
                else
                  assert.equal(-1, y[r][j])
                end
              end
            end
            first = first + 3
          end
          for i = 1, n - 1 do assert.is_true(scored[i] == true, "token " .. i) end
          local x, y, w = task:windows(split, W + 1, 2)
          assert.is_nil(x)
          assert.is_nil(y)
          assert.equal(W, w)
        end
      end
      -- random windows: each row a slice of the split
      local x, y = task:batch(4, rp.rng(5), "valid")
      for _, row in ipairs(x:totable()) do
        local found = false
        for o = 0, #streams.valid - T - 1 do
          local same = true
          for j = 1, T do same = same and streams.valid[o + j] == row[j] end
          found = found or same
        end
        assert.is_true(found)
      end
      local yt = y:totable()
      for r, row in ipairs(x:totable()) do
        for j = 1, T - 1 do assert.equal(row[j + 1], yt[r][j]) end
      end
      getmetatable(task).__close(task)
    end
  end)

  it("refuses bad ids folders with a message naming the file and the fault", function()
    local V = 10
    local lm = rp.tasks.lm
    local t, err = lm { path = dir, vocab_size = V }
    assert.is_nil(t)
    assert.equal(dir .. "/train.npy: No such file or directory", err)
    ids_folder(dir, V, { train = { 1, 2, 12 }, valid = { 1 }, test = { 2 } })
    t, err = lm { path = dir, vocab_size = V }
    assert.equal(dir .. "/train.npy: token id 12 at index 2 is outside the vocabulary 0..9 "
      .. "(vocab_size 10)", err)
    assert(rp.tensor { 1.5, 2 }:save(dir .. "/train.npy"))
    t, err = lm { path = dir, vocab_size = V }
    assert.equal(dir .. "/train.npy: holds floating-point numbers, not token ids (an integer "
      .. "dtype: int32, int64, uint16, ...)", err)
    assert(rp.tensor { { 1, 2 } }:save(dir .. "/train.npy", { dtype = "int32" }))
    t, err = lm { path = dir, vocab_size = V }
    assert.equal(dir .. "/train.npy: must be a 1-D array of token ids, got 2 dimensions", err)
    assert(rp.zeros(0):save(dir .. "/valid.npy", { dtype = "int32" }))
    assert(rp.tensor { 1, 2 }:save(dir .. "/train.npy", { dtype = "int32" }))
    t, err = lm { path = dir, vocab_size = V }
    assert.equal(dir .. "/valid.npy: empty (no tokens)", err)
    write(dir .. "/valid.npy", "\x93NUMPY\x01\x00")
    t, err = lm { path = dir, vocab_size = V }
    assert.is_nil(t)
    assert.truthy(err:find(dir .. "/valid.npy: ", 1, true), err)
    local function refuses(o, msg)
      local ok, e = pcall(rp.tasks.lm, o)
      assert.is_false(ok)
      assert.equal(msg, e)
    end
    refuses({ path = dir },
      "bad argument #1 to 'rp.tasks.lm' (option 'vocab_size' (the tokenizer's) is required)")
    refuses({ path = dir, vocab_size = 0 },
      "bad argument #1 to 'rp.tasks.lm' (option 'vocab_size' must be in 1..16777216, got 0)")
    refuses({ vocab_size = 3 },
      "bad argument #1 to 'rp.tasks.lm' (option 'path' (a folder of token ids) is required)")
    refuses({ path = dir, vocab_size = 3, valid_fraction = 0.1 }, "bad argument #1 to 'rp.tasks.lm' (unknown option 'valid_fraction' (known: path, "
      .. "vocab_size, seq_len, kind))")
  end)

  it("has no characters: vocab, encode and decode are the tokenizer's", function()
    ids_folder(dir, 5, { train = random_stream(20, 5, 1), valid = { 1, 2 }, test = { 3, 4 } })
    local task = assert(rp.tasks.lm { path = dir, vocab_size = 5, seq_len = 8 })
    assert.equal(5, task:vocab_size())
    assert.same({ kind = "lm", path = dir, vocab_size = 5, seq_len = 8 }, task:config())
    assert.has_error(function() task:vocab() end,
      "task:vocab: an lm task's vocabulary is its tokenizer's (tok:piece)")
    assert.has_error(function() task:encode("a") end,
      "task:encode: an lm task's vocabulary is its tokenizer's (tok:encode)")
    assert.has_error(function() task:batch(1, nil, "nope") end,
      "bad argument #3 to 'batch' (split must be \"train\", \"valid\" or \"test\", got string \"nope\")")
  end)
end)

describe("m:losses and rp.eval.lm", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmrf(dir) end)

  it("give each position's cross-entropy and the split's totals as float64 from the logits says",
    function()
    local V, T = 23, 8
    local streams = { train = random_stream(100, V, 4), valid = random_stream(45, V, 5),
      test = random_stream(30, V, 6) }
    ids_folder(dir, V, streams, { valid = 97 })
    local task = assert(rp.tasks.lm { path = dir, vocab_size = V, seq_len = T })
    local m = rp.model { vocab = V, d_model = 16, heads = 2, layers = 1, seq_len = T,
      max_batch = 4, seed = 3 }
    local x, y = task:windows("valid", 1, 4)
    local logits, losses, yt = m:forward(x):totable(), m:losses(x, y):totable(), y:totable()
    local sum, count = 0.0, 0
    local pos_sum, pos_n = {}, {}
    for r = 1, #yt do
      for j = 1, T do
        if yt[r][j] >= 0 then
          local want = xent(logits[r][j], yt[r][j])
          assert.is_true(math.abs(want - losses[r][j]) < 1e-5, ("%g vs %g"):format(want,
            losses[r][j]))
        else
          assert.equal(0, losses[r][j])
        end
      end
    end
    -- the whole split: every window
    local W = math.ceil((#streams.valid - 1) / T)
    for first = 1, W, 4 do
      local xx, yy = task:windows("valid", first, 4)
      local lg, ty = m:forward(xx):totable(), yy:totable()
      for r = 1, #ty do
        for j = 1, T do
          if ty[r][j] >= 0 then
            local l = xent(lg[r][j], ty[r][j])
            sum, count = sum + l, count + 1
            pos_sum[j], pos_n[j] = (pos_sum[j] or 0) + l, (pos_n[j] or 0) + 1
          end
        end
      end
    end
    assert.equal(#streams.valid - 1, count)
    local r = rp.eval.lm(m, task, { split = "valid", batch_size = 3, bytes = 97 })
    assert.equal(count, r.tokens)
    assert.equal(W, r.windows)
    assert.is_true(math.abs(r.nats - sum) < 1e-4 * count)
    assert.is_true(math.abs(r.loss - sum / count) < 1e-5)
    assert.is_true(math.abs(r.perplexity - math.exp(sum / count)) < 1e-4)
    assert.is_true(math.abs(r.bits_per_byte - sum / math.log(2) / 97) < 1e-4)
    for j = 1, T do
      assert.is_true(math.abs(r.by_position[j] - pos_sum[j] / pos_n[j]) < 1e-5)
      assert.equal(pos_n[j], r.by_position_count[j])
    end
    -- a part of the split: no bits per byte (they are the whole split's)
    local part = rp.eval.lm(m, task, { split = "valid", max_windows = 2, bytes = 97 })
    -- (97.0 is 97, as integers given as floats are elsewhere)
    assert.same(part, rp.eval.lm(m, task, { split = "valid", max_windows = 2, bytes = 97.0 }))
    assert.equal(2, part.windows)
    assert.equal(2 * T, part.tokens)
    assert.is_nil(part.bits_per_byte)
    assert.has_error(function() rp.eval.lm(m, task, { split = "dev" }) end,
      "bad argument #3 to 'rp.eval.lm' (option 'split' must be one of \"train\", \"valid\", "
      .. "\"test\", got string \"dev\")")
    assert.has_error(function() rp.eval.lm(m, task, { bytes = 0 }) end,
      "bad argument #3 to 'rp.eval.lm' (option 'bytes' must be an integer >= 1 (the split's UTF-8 "
      .. "bytes), got 0)")
    assert.has_error(function() rp.eval.lm(m, task, { bytes = 97.5 }) end,
      "bad argument #3 to 'rp.eval.lm' (option 'bytes' must be an integer >= 1 (the split's UTF-8 "
      .. "bytes), got 97.5)")
    assert.has_error(function() rp.eval.lm(m, task, { bytes = -math.huge }) end,
      "bad argument #3 to 'rp.eval.lm' (option 'bytes' must be an integer >= 1 (the split's UTF-8 "
      .. "bytes), got -inf)")
    local add = rp.tasks.addition { seq_len = T }
    assert.has_error(function() rp.eval.lm(rp.model { vocab = 30, seq_len = T }, add) end,
      "bad argument #2 to 'rp.eval.lm' (lm needs an lm task (this is addition))")
  end)

  it("rp.eval.lm refuses a split shorter than a window in its own name, in words", function()
    local V, T = 23, 8
    ids_folder(dir, V, { train = random_stream(100, V, 4), valid = random_stream(1, V, 5),
      test = random_stream(5, V, 6) })
    local task = assert(rp.tasks.lm { path = dir, vocab_size = V, seq_len = T })
    local m = rp.model { vocab = V, d_model = 16, heads = 2, layers = 1, seq_len = T, seed = 3 }
    assert.has_error(function() rp.eval.lm(m, task) end,
      "bad argument #2 to 'rp.eval.lm' (the valid split of " .. dir .. " has 1 token; a window "
        .. "needs seq_len + 1 = 9)")
    assert.has_error(function() rp.eval.lm(m, task, { split = "test" }) end,
      "bad argument #2 to 'rp.eval.lm' (the test split of " .. dir .. " has 5 tokens; a window "
        .. "needs seq_len + 1 = 9)")
    -- task:windows itself says "1 token" too
    assert.has_error(function() task:windows("valid", 1, 1) end,
      "task:windows: windows: the valid split of " .. dir .. " has 1 token, a window needs "
        .. "seq_len + 1 = 9")
    assert.is_true(rp.eval.lm(m, task, { split = "train" }).tokens == 99)
  end)

  it("report their progress: progress(done, total[, split]) after each batch of windows",
    function()
    local V, T = 23, 8
    ids_folder(dir, V, { train = random_stream(100, V, 4), valid = random_stream(203, V, 5),
      test = random_stream(30, V, 6) })
    local task = assert(rp.tasks.lm { path = dir, vocab_size = V, seq_len = T })
    local m = rp.model { vocab = V, d_model = 16, heads = 2, layers = 1, seq_len = T,
      max_batch = 4, seed = 3 }
    local calls = {}
    local function progress(done, total, what)
      calls[#calls + 1] = done .. "/" .. total .. (what and (" " .. what) or "")
    end
    -- 202 targets in windows of 8: 26 windows, 4 a batch; rp.eval.lm names its split
    local plain = rp.eval.lm(m, task, { batch_size = 4 })
    local r = rp.eval.lm(m, task, { batch_size = 4, progress = progress })
    assert.same({ "4/26 valid", "8/26 valid", "12/26 valid", "16/26 valid", "20/26 valid",
      "24/26 valid", "26/26 valid" }, calls)
    assert.equal(plain.nats, r.nats)
    calls = {}
    rp.eval.lm(m, task, { batch_size = 4, max_windows = 5, progress = progress, split = "train" })
    assert.same({ "4/5 train", "5/5 train" }, calls)
    -- rp.eval.lengths: after each batch of each length (loss tasks)
    calls = {}
    local ls = rp.eval.lengths(m, task, { lengths = { 8, 16 }, batches = 3, batch_size = 2,
      progress = progress })
    assert.same({ "1/6", "2/6", "3/6", "4/6", "5/6", "6/6" }, calls)
    assert.equal(rp.eval.lengths(m, task, { lengths = { 8, 16 }, batches = 3,
      batch_size = 2 })[2].loss, ls[2].loss)
    -- and after each length (accuracy tasks)
    calls = {}
    local add = rp.tasks.addition { max_digits = 1, seq_len = 32 }
    rp.eval.lengths(rp.model { vocab = add:vocab_size(), seq_len = 32, d_model = 16, heads = 2,
      layers = 1 }, add, { lengths = { 1, 2 }, problems = 2, max_new = 3, progress = progress })
    assert.same({ "1/2", "2/2" }, calls)
    for _, f in ipairs { "rp.eval.lm", "rp.eval.lengths" } do
      local call = f == "rp.eval.lm" and function(o) return rp.eval.lm(m, task, o) end
        or function(o) o.lengths = { 8 }; return rp.eval.lengths(m, task, o) end
      assert.has_error(function() call { progress = 1 } end,
        ("bad argument #3 to '%s' (option 'progress' must be a function (called as "
          .. "progress(done, total)), got 1)"):format(f))
    end
    -- the runner of compare.lua reads a run's .progress in both forms (train.lua writes
    -- '<step> <steps> <loss>' while training, '... <done> <total> <what>' while evaluating; an
    -- older train.lua wrote no <what>)
    package.path = "scripts/?.lua;" .. package.path
    local runner = require "lib.runner"
    local pf = dir .. "/r.progress"
    write(pf, "7 10 2.5\n")
    assert.same({ 7, 10, 2.5 }, { runner.read_progress(pf) })
    write(pf, "10 10 2.25 48 384\n")
    assert.same({ 10, 10, 2.25, 48, 384 }, { runner.read_progress(pf) })
    write(pf, "10 10 2.25 48 384 test\n")
    assert.same({ 10, 10, 2.25, 48, 384, "test" }, { runner.read_progress(pf) })
    write(pf, "garbage\n")
    assert.is_nil(runner.read_progress(pf))
    -- an error of the callback is the caller's, as it is
    assert.has_error(function()
      rp.eval.lm(m, task, { progress = function() error("stop here", 0) end })
    end, "stop here")
  end)
end)

describe("top_p sampling", function()
  it("samples only inside the nucleus, and top_p near 0 is greedy", function()
    local V = 12
    local m = rp.model { vocab = V, d_model = 16, heads = 2, layers = 1, seq_len = 8,
      max_batch = 1, seed = 9 }
    -- make the logits of the prompt spread: train one step at a large rate on random rows
    local prompt = { 3, 1, 4 }
    local row = m:forward(rp.tensor { prompt }):totable()[1][3]
    local order = {}
    for i = 1, V do order[i] = i end
    table.sort(order, function(a, b)
      if row[a] ~= row[b] then return row[a] > row[b] end
      return a < b
    end)
    local mx, total = -math.huge, 0.0
    for _, v in ipairs(row) do mx = math.max(mx, v) end
    local p = {}
    for i = 1, V do p[i] = math.exp(row[i] - mx); total = total + p[i] end
    for _, top_p in ipairs { 0.3, 0.6, 0.9 } do
      local nucleus, acc = {}, 0.0
      for _, i in ipairs(order) do
        nucleus[i - 1] = true
        acc = acc + p[i]
        if acc >= top_p * total then break end
      end
      local prompts = {}
      for k = 1, 400 do prompts[k] = prompt end
      local outs = m:generate_batch(prompts, 1, { temperature = 1, top_p = top_p, seed = 1 })
      local seen, distinct = {}, 0
      for _, o in ipairs(outs) do
        assert.is_true(nucleus[o[1]] == true, ("top_p %g gave %d"):format(top_p, o[1]))
        if not seen[o[1]] then seen[o[1]], distinct = true, distinct + 1 end
      end
      local size = 0
      for _ in pairs(nucleus) do size = size + 1 end
      assert.equal(size, distinct)
    end
    local greedy = m:generate(prompt, 6, { temperature = 0 })
    assert.same(greedy, m:generate(prompt, 6, { temperature = 1, top_p = 1e-12, seed = 4 }))
    assert.same(m:generate(prompt, 6, { seed = 4, temperature = 1 }),
      m:generate(prompt, 6, { seed = 4, temperature = 1, top_p = 1 }))
    assert.has_error(function() m:generate(prompt, 2, { top_p = 1.5 }) end,
      "bad argument #3 to 'generate' (option 'top_p' must be in [0, 1], got 1.5)")
  end)
end)

-- A stand-in of rp.tokenizer's interface: ids = bytes.
local function byte_tokenizer()
  local tok = { calls = 0 }
  function tok:vocab_size() return 256 end
  function tok:encode(text, opts)
    self.calls = self.calls + 1
    local ids = { text:byte(1, -1) }
    if opts and opts.tensor then return rp.tensor(ids) end
    return ids
  end
  function tok:decode(ids)
    if type(ids) ~= "table" then ids = ids:totable() end
    return string.char(table.unpack(ids))
  end
  return tok
end

describe("rp.lm", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmrf(dir) end)

  local function corpus_folder(texts)
    for s, t in pairs(texts) do write(dir .. "/" .. s .. ".txt", t) end
    write(dir .. "/manifest.json", '{"format": "roper-corpus 1"}\n')
    write(dir .. "/tok.model", "model one")
  end

  it("sha256 gives a file's SHA-256 as Python's hashlib does, and says what it cannot read",
    function()
    local path = dir .. "/a file's bytes.bin"
    write(path, "abc\0\255 é\n")
    local p = assert(io.popen("/usr/bin/python3 -c 'import hashlib,sys; print(hashlib.sha256("
      .. "open(sys.argv[1], \"rb\").read()).hexdigest())' " .. sh_quote(path)))
    local want = p:read("l")
    p:close()
    assert.equal(64, #want)
    assert.equal(want, rp.lm.sha256(path))
    assert.same({ nil, dir .. "/none: No such file or directory" },
      { rp.lm.sha256(dir .. "/none") })
    assert.same({ nil, dir .. ": not a regular file (a folder)" }, { rp.lm.sha256(dir) })
    assert.has_error(function() rp.lm.sha256("") end,
      "bad argument #1 to 'rp.lm.sha256' (a file path (a string) expected, got string \"\")")
  end)

  it("caches the ids of a corpus under a tokenizer, keyed by both checksums", function()
    local texts = { train = ("the train split é\n"):rep(20), valid = "valid text\n",
      test = "test\n" }
    corpus_folder(texts)
    local tok = byte_tokenizer()
    local folder, info = rp.lm.ids(dir, dir .. "/tok.model", { tokenizer = tok })
    assert.truthy(folder, info)
    assert.equal(3, tok.calls)
    local function sum(path)
      local p = io.popen("sha256sum " .. sh_quote(path))
      local s = p:read("l"):match("^%x+")
      p:close()
      return s
    end
    local msum, tsum = sum(dir .. "/manifest.json"), sum(dir .. "/tok.model")
    assert.equal(("%s/ids/%s-%s"):format(dir, msum:sub(1, 16), tsum:sub(1, 16)), folder)
    assert.equal(msum, info.corpus_sha256)
    assert.equal(tsum, info.tokenizer_sha256)
    assert.equal(256, info.vocab_size)
    for s, t in pairs(texts) do
      assert.same({ tokens = #t, bytes = #t }, info.splits[s])
      assert.same({ t:byte(1, -1) }, rp.load(folder .. "/" .. s .. ".npy"):totable())
    end
    assert.same(info, rp.lm.info(folder))
    -- again: from the cache, nothing encoded
    local again = rp.lm.ids(dir, dir .. "/tok.model", { tokenizer = tok })
    assert.equal(folder, again)
    assert.equal(3, tok.calls)
    -- another tokenizer model: another key, encoded afresh
    write(dir .. "/tok.model", "model two")
    local other = rp.lm.ids(dir, dir .. "/tok.model", { tokenizer = tok })
    assert.are_not.equal(folder, other)
    assert.equal(6, tok.calls)
    -- the task reads it
    local task = assert(rp.tasks.lm { path = other, vocab_size = 256, seq_len = 8 })
    assert.same({ #texts.train, #texts.valid, #texts.test }, { task:split_sizes() })
  end)

  it("reports the encoding of each split to progress(done, total, what), once", function()
    local texts = { train = ("x"):rep(160000), valid = "valid text\n", test = "test\n" }
    corpus_folder(texts)
    local calls = {}
    local function progress(...) calls[#calls + 1] = { ... } end
    assert(rp.lm.ids(dir, dir .. "/tok.model", { tokenizer = byte_tokenizer(),
      progress = progress }))
    local function what(s, size)
      return ("encoding %s/%s.txt (%s) into token ids"):format(dir, s, size)
    end
    -- done 0 when a split starts, its bytes when its ids are written
    assert.same({
      { 0, 160000, what("train", "0.2 MB") }, { 160000, 160000, what("train", "0.2 MB") },
      { 0, 11, what("valid", "11 bytes") }, { 11, 11, what("valid", "11 bytes") },
      { 0, 5, what("test", "5 bytes") }, { 5, 5, what("test", "5 bytes") },
    }, calls)
    -- from the cache: nothing to report
    calls = {}
    assert(rp.lm.ids(dir, dir .. "/tok.model", { tokenizer = byte_tokenizer(),
      progress = progress }))
    assert.same({}, calls)
    assert.has_error(function()
      rp.lm.ids(dir, dir .. "/tok.model", { progress = 1 })
    end, "bad argument #3 to 'rp.lm.ids' (option 'progress' must be a function (called as "
      .. "progress(done, total, what)), got 1)")
    assert.has_error(function() rp.lm.tokenizer(dir, 8, nil, { progress = 1 }) end,
      "bad argument #4 to 'rp.lm.tokenizer' (option 'progress' must be a function (called as "
      .. "progress(done, total, what)), got 1)")
    assert.has_error(function() rp.lm.tokenizer(dir, 8, "bpe", { every = 1 }) end,
      "bad argument #4 to 'rp.lm.tokenizer' (unknown option 'every' (known: progress))")
    assert.has_error(function() rp.experiment.check({ task = "lm" }, { progress = 1 }) end,
      "bad argument #2 to 'rp.experiment.check' (option 'progress' must be a function (called "
      .. "as progress(done, total, what)), got 1)")
    assert.has_error(function() rp.experiment.check({}, { quiet = true }) end,
      "bad argument #2 to 'rp.experiment.check' (unknown option 'quiet' (known: progress, init))")
  end)

  it("refuses what is not a prepared corpus or an ids folder", function()
    local none, err = rp.lm.ids(dir .. "/x", dir .. "/tok.model")
    assert.is_nil(none)
    assert.equal(dir .. "/x: no manifest.json (not a corpus prepared by scripts/corpus.lua)", err)
    corpus_folder { train = "a", valid = "b", test = "c" }
    none, err = rp.lm.ids(dir, dir .. "/missing.model", { tokenizer = byte_tokenizer() })
    assert.equal(dir .. "/missing.model: No such file or directory", err)
    write(dir .. "/ids.txt", "roper-ids 1\nvocab_size 5\ntrain 1 1\n")
    none, err = rp.lm.info(dir)
    assert.equal(dir .. "/ids.txt: no line for the valid split", err)
    write(dir .. "/ids.txt", "hello\n")
    none, err = rp.lm.info(dir)
    assert.equal(dir .. "/ids.txt: not an ids file (its first line is not \"roper-ids 1\")", err)
  end)

  it("refuses ids from a user's tokenizer that are not tokens of its vocabulary, writing none",
    function()
    corpus_folder { train = "a train text", valid = "b", test = "c" }
    local function ids_of(encoded)
      local tok = { encode = function() return encoded end, decode = function() return "" end,
        vocab_size = function() return 256 end }
      return rp.lm.ids(dir, dir .. "/tok.model", { tokenizer = tok, cache = dir .. "/c" })
    end
    local train = dir .. "/train.txt"
    for _, case in ipairs {
      { { 1, 2.5 }, train .. ": the tokenizer's encode gave ids that are not integers (element "
        .. "[2] is 2.5, not an integer (dtype int32))" },
      { { 1, 0 / 0 }, train .. ": the tokenizer's encode gave NaN among its ids" },
      { { 1, 1e10 }, train .. ": the tokenizer's encode gave the id 10000000000, outside its "
        .. "vocabulary (0 .. 255)" },
      { { -1, 3 }, train .. ": the tokenizer's encode gave the id -1, outside its vocabulary "
        .. "(0 .. 255)" },
      { { 256 }, train .. ": the tokenizer's encode gave the id 256, outside its vocabulary "
        .. "(0 .. 255)" },
      { { 1, "2" }, train .. ": the tokenizer's encode gave a table that is not token ids: "
        .. "expected a number at [2], got string \"2\"" },
      { "12", train .. ": the tokenizer's encode gave string \"12\", not token ids" },
      { rp.zeros(0), train .. ": no tokens" },
    } do
      local folder, err = ids_of(case[1])
      assert.is_nil(folder)
      assert.equal(case[2], err)
      -- nothing cached: no ids.txt, so the next call encodes again
      local p = assert(io.popen("find " .. sh_quote(dir .. "/c") .. " -name ids.txt 2>/dev/null"))
      assert.equal("", p:read("a"))
      p:close()
    end
    -- a vocabulary no model can take (past 2^31 - 1), or not an integer: refused, as
    -- rp.lm.continuation and rp.lm.sample refuse it
    for _, V in ipairs { 2^60, 2^31, 300.5, 0 } do
      local tok = { encode = function() return { 1 } end, decode = function() return "" end,
        vocab_size = function() return V end }
      local folder, err = rp.lm.ids(dir, dir .. "/tok.model", { tokenizer = tok,
        cache = dir .. "/c" })
      assert.is_nil(folder)
      assert.equal(dir .. "/tok.model: the tokenizer's vocab_size() is not an integer in "
        .. "1..2147483647", err)
      assert.has_error(function() rp.lm.continuation(tok, {}, {}) end, "bad argument #1 to "
        .. "'rp.lm.continuation' (the tokenizer's vocab_size() is not an integer in 1..2147483647)")
    end
    -- the largest id of the vocabulary is a token, and then the cache is written
    assert.truthy(ids_of { 0, 255 })
    local p = assert(io.popen("find " .. sh_quote(dir .. "/c") .. " -name ids.txt"))
    assert.truthy(p:read("a"):find("ids.txt", 1, true))
    p:close()
  end)

  it("encodes in pieces that end at line ends with chunk_bytes, into a cache of their own",
    function()
    local train = "one\ntwo two\n" .. ("long"):rep(10) .. "\nx\ny\n\nlast line, no end"
    corpus_folder { train = train, valid = "v\n", test = "t" }
    local tok, pieces = byte_tokenizer(), {}
    local enc = tok.encode
    function tok:encode(text, o)
      pieces[#pieces + 1] = text
      return enc(self, text, o)
    end
    local whole = assert(rp.lm.ids(dir, dir .. "/tok.model", { tokenizer = tok }))
    pieces = {}
    local folder, info = rp.lm.ids(dir, dir .. "/tok.model", { tokenizer = tok, chunk_bytes = 12 })
    assert.truthy(folder, info)
    assert.equal(whole .. "-p12", folder)
    assert.equal(12, info.chunk_bytes)
    assert.same(info, rp.lm.info(folder))
    -- the train split's pieces: whole lines of at most 12 bytes, a longer line alone
    assert.same({ "one\ntwo two\n", ("long"):rep(10) .. "\n", "x\ny\n\n", "last line, no end",
      "v\n", "t" }, pieces)
    -- the same ids as the whole split (a byte tokenizer has no ties), in one tensor a split
    for _, s in ipairs { "train", "valid", "test" } do
      assert.same(rp.load(whole .. "/" .. s .. ".npy"):totable(),
        rp.load(folder .. "/" .. s .. ".npy"):totable())
    end
    -- from the cache the next time; another chunk_bytes is another cache
    pieces = {}
    assert.equal(folder, rp.lm.ids(dir, dir .. "/tok.model", { tokenizer = tok, chunk_bytes = 12 }))
    assert.same({}, pieces)
    assert.equal(whole .. "-p4096",
      rp.lm.ids(dir, dir .. "/tok.model", { tokenizer = tok, chunk_bytes = 4096 }))
    for _, bad in ipairs { { 0, "0" }, { 1.5, "1.5" }, { "12", 'string "12"' },
      { (1 << 30) + 1, "1073741825" } } do
      assert.has_error(function()
        rp.lm.ids(dir, dir .. "/tok.model", { tokenizer = tok, chunk_bytes = bad[1] })
      end, "bad argument #3 to 'rp.lm.ids' (option 'chunk_bytes' must be an integer in 1..2^30, "
        .. "got " .. bad[2] .. ")")
    end
  end)

  it("refuses to encode a split whole when it would need more than the memory available",
    function()
    -- a train split of 1/100 of the memory available (read from /proc/meminfo): encoding it whole
    -- would need 1.2 times that memory; refused before anything is encoded
    local f = io.open("/proc/meminfo")
    local avail = f and tonumber(f:read("a"):match("MemAvailable:%s*(%d+) kB"))
    if f then f:close() end
    if not avail or avail > (40 << 20) then
      return pending("MemAvailable unknown or over 40 GiB: the split would be too large to write")
    end
    local n = avail * 1024 // 100
    corpus_folder { train = ("a line\n"):rep(n // 7), valid = "v\n", test = "t\n" }
    local tok = byte_tokenizer()
    local folder, err = rp.lm.ids(dir, dir .. "/tok.model", { tokenizer = tok, cache = dir .. "/c" })
    assert.is_nil(folder)
    assert.matches("^" .. (dir .. "/train.txt"):gsub("%p", "%%%0") .. ": encoding it in one call "
      .. "needs about %d+%.%d GiB %(120 bytes a byte of text%), more than the %d+%.%d GiB of "
      .. "memory available; rp.lm.ids's chunk_bytes encodes it in pieces$", err)
    assert.equal(0, tok.calls)
  end)

  it("reads any file name, refuses paths with a NUL byte, an empty cache, and split lines that "
    .. "count nothing", function()
    -- sha256sum escapes a name with a backslash or a newline (its line then starts with \)
    local odd = dir .. "/back\\slash\nand newline"
    write(odd, "abc")
    assert.equal("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
      rp.lm.sha256(odd))
    for _, c in ipairs {
      { function() return rp.lm.sha256(odd .. "\0x") end,
        "bad argument #1 to 'rp.lm.sha256' (path contains a NUL byte)" },
      { function() return rp.lm.info(dir .. "\0") end,
        "bad argument #1 to 'rp.lm.info' (path contains a NUL byte)" },
      { function() return rp.lm.info("") end,
        "bad argument #1 to 'rp.lm.info' (a folder (a string) expected, got string \"\")" },
      { function() return rp.lm.ids(dir .. "\0x", dir .. "/tok.model") end,
        "bad argument #1 to 'rp.lm.ids' (path contains a NUL byte)" },
      { function() return rp.lm.ids(dir, dir .. "/tok.model\0") end,
        "bad argument #2 to 'rp.lm.ids' (path contains a NUL byte)" },
      { function() return rp.lm.ids(dir, dir .. "/tok.model", { cache = "" }) end,
        "bad argument #3 to 'rp.lm.ids' (option 'cache' must be a folder (a nonempty string), "
          .. "got string \"\")" },
      { function() return rp.lm.ids(dir, dir .. "/tok.model", { cache = dir .. "\0" }) end,
        "bad argument #3 to 'rp.lm.ids' (option 'cache': path contains a NUL byte)" },
      { function() return rp.lm.tokenizer(dir .. "\0", 300) end,
        "bad argument #1 to 'rp.lm.tokenizer' (path contains a NUL byte)" },
      { function() return rp.lm.tokenizer(dir, 300, false) end,
        "bad argument #3 to 'rp.lm.tokenizer' (type must be \"unigram\" or \"bpe\", got boolean)" },
    } do
      assert.has_error(c[1], c[2])
    end
    -- an integral float is an integer, as elsewhere: the tokenizer that is there is found
    write(dir .. "/tokenizer-unigram-300.model", "x")
    assert.equal(dir .. "/tokenizer-unigram-300.model", rp.lm.tokenizer(dir, 300.0))
    -- a split that counts no tokens or no bytes is refused when read, not at evaluation
    assert(os.execute("mkdir -p " .. sh_quote(dir .. "/ids0")))
    ids_folder(dir .. "/ids0", 20, { train = { 1, 2, 3 }, valid = { 1, 2 }, test = { 3 } },
      { valid = 0 })
    local info, err = rp.lm.info(dir .. "/ids0")
    assert.is_nil(info)
    assert.equal(dir .. "/ids0/ids.txt:4: the valid split's tokens and bytes must be integers "
      .. ">= 1, got \"valid 2 0\"", err)
  end)

  it("refuses a tokenizer's 2-D encoding, whole or in pieces, and caches nothing", function()
    corpus_folder { train = "ab\ncd\n", valid = "v\n", test = "t\n" }
    local tok = { vocab_size = function() return 256 end, decode = function() return "" end,
      encode = function() return { { 1, 2, 3 }, { 4, 5, 6 } } end }
    for _, chunk in ipairs { false, 3 } do
      local folder, err = rp.lm.ids(dir, dir .. "/tok.model",
        { tokenizer = tok, cache = dir .. "/c", chunk_bytes = chunk or nil })
      assert.is_nil(folder)
      assert.equal(dir .. "/train.txt: the tokenizer's encode gave a 2-D tensor [2 x 3], not a "
        .. "list of token ids", err)
    end
    local left = h.run("find " .. sh_quote(dir .. "/c") .. " -name ids.txt")
    assert.equal("", left)
  end)

  it("samples a continuation decoded to text", function()
    local m = rp.model { vocab = 256, d_model = 16, heads = 2, layers = 1, seq_len = 32,
      max_batch = 1, seed = 2 }
    local tok = byte_tokenizer()
    local text, ids = rp.lm.sample(m, tok, "Hello", { n = 10, seed = 7, top_k = 20, top_p = 0.9 })
    assert.equal(10, #ids)
    assert.equal(tok:decode(ids), text)
    assert.same(ids, m:generate({ ("Hello"):byte(1, -1) }, 10,
      { seed = 7, top_k = 20, top_p = 0.9, temperature = 1 }))
    assert.has_error(function() rp.lm.sample(m, tok, "", {}) end,
      "bad argument #3 to 'rp.lm.sample' (prompt must be a nonempty string, got string \"\")")
    local small = rp.model { vocab = 50, d_model = 16, heads = 2, layers = 1, seq_len = 8 }
    assert.has_error(function() rp.lm.sample(small, tok, "z") end,
      "bad argument #2 to 'rp.lm.sample' (the tokenizer's id 122 (token 1 of the prompt) is "
      .. "outside the model's vocabulary 0..49)")
    -- each argument blamed for its own fault
    local function fake(ids, V)
      return { vocab_size = function() return V or 256 end, decode = function() return "x" end,
        encode = function() return ids end }
    end
    for _, c in ipairs {
      { m, fake { 1.0, 2 }, "bad argument #2 to 'rp.lm.sample' (the tokenizer's encode gave 1.0 "
        .. "as token 1 of the prompt, not an integer id)" },
      { m, fake { 1, nil, 3 }, "bad argument #2 to 'rp.lm.sample' (the tokenizer's encode gave "
        .. "nil as token 2 of the prompt, not an integer id)" },
      { m, fake {}, "bad argument #3 to 'rp.lm.sample' (the prompt encodes to no tokens)" },
      { m, fake({ 1 }, 200), "bad argument #1 to 'rp.lm.sample' (the model's vocabulary (256 "
        .. "ids) is larger than the tokenizer's (200): an id it samples past 199 has no piece)" },
    } do
      assert.has_error(function() rp.lm.sample(c[1], c[2], "Hello", { n = 2 }) end, c[3])
    end
    local released = { vocab_size = function() error("attempt to use a released tokenizer") end,
      encode = function() error("attempt to use a released tokenizer") end,
      decode = function() return "" end }
    assert.has_error(function() rp.lm.sample(m, released, "Hello") end,
      "bad argument #2 to 'rp.lm.sample' (attempt to use a released tokenizer)")
  end)

  it("decodes a continuation as the text its ids add after the prompt's", function()
    -- a tokenizer that marks word starts as SentencePiece does: piece "_w" is " w", and the
    -- mark of a text's first piece is dropped
    local pieces = { [0] = "_the", "_kernel", "_driver", "s" }
    local tok = { vocab_size = function() return 4 end, encode = function() return { 0 } end }
    function tok.decode(_, ids)
      local out = {}
      for i, id in ipairs(ids) do out[i] = pieces[id] end
      return (table.concat(out):gsub("_", " "):gsub("^ ", ""))
    end
    assert.equal("kernel driver", tok:decode { 1, 2 })
    assert.equal(" drivers", rp.lm.continuation(tok, { 0, 1 }, { 2, 3 }))
    assert.equal("s", rp.lm.continuation(tok, { 0, 1 }, { 3 }))
    assert.equal("", rp.lm.continuation(tok, { 0 }, {}))
    -- rp.lm.sample prints the model's text so: prompt .. text reads as the ids decoded together
    local m = rp.model { vocab = 4, d_model = 16, heads = 2, layers = 1, seq_len = 16, seed = 3 }
    local text, ids = rp.lm.sample(m, tok, "the", { n = 6, seed = 4 })
    local all = { 0 }
    for _, id in ipairs(ids) do all[#all + 1] = id end
    assert.equal(tok:decode(all), "the" .. text)
    assert.has_error(function() rp.lm.continuation(tok, { 0 }, "x") end,
      "bad argument #3 to 'rp.lm.continuation' (a list of token ids expected, got string \"x\")")
    assert.has_error(function() rp.lm.continuation(tok, { 0 }, { 2, 4 }) end,
      "bad argument #3 to 'rp.lm.continuation' (token [2] must be an integer id in 0..3, got 4)")
    assert.has_error(function() rp.lm.continuation(tok, { 0, 1.5 }, { 2 }) end,
      "bad argument #2 to 'rp.lm.continuation' (token [2] must be an integer id in 0..3, got 1.5)")
    assert.has_error(function() rp.lm.continuation({}, { 0 }, {}) end,
      "bad argument #1 to 'rp.lm.continuation' (a tokenizer (with encode, decode and vocab_size) "
        .. "expected, got table)")
  end)
end)

describe("rp.experiment with the lm task", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmrf(dir) end)

  it("trains on a synthetic stream and its loss falls", function()
    -- a stream with a rule: each id is the one before plus 1 or plus 2, mod V
    local V, g = 16, rp.rng(11)
    local function stream(n)
      local t, x = {}, 0
      for i = 1, n do
        x = (x + g:int(1, 2)) % V
        t[i] = x
      end
      return t
    end
    ids_folder(dir, V, { train = stream(3000), valid = stream(400), test = stream(300) },
      { valid = 1000 })
    local res = rp.experiment.run { task = "lm", corpus = dir, seq_len = 16, d_model = 32,
      layers = 1, heads = 2, steps = 150, batch = 8, lr = 3e-3, warmup = 10 }
    assert.equal("loss", res.metric)
    assert.equal(res.lm.valid.loss, res.value)
    -- ln 2 is the best possible (two equally likely successors); ln 16 is guessing
    assert.is_true(res.curve[1].loss > 2.0, res.curve[1].loss)
    assert.is_true(res.value < 1.0, res.value)
    assert.is_true(res.lm.valid.bits_per_byte > 0)
    assert.equal(399, res.lm.valid.tokens)
    assert.equal(16, #res.lm.by_position)
    -- the evaluation reports its windows through progress (loss nil, the step the last one):
    -- valid's 3 and test's 3 in batches of 2, then the batch of each of the 2 lengths
    local calls = {}
    local part = rp.experiment.run({ task = "lm", corpus = dir, seq_len = 16, d_model = 16,
      layers = 1, heads = 2, steps = 2, batch = 2, eval_windows = 3, eval_lengths = "8,16",
      valid_batches = 1 }, function(step, steps, loss, done, total)
      if done then calls[#calls + 1] = ("%d/%d %s %d/%d"):format(step, steps, loss, done, total) end
    end)
    assert.same({ "2/2 nil 2/3", "2/2 nil 3/3", "2/2 nil 2/3", "2/2 nil 3/3", "2/2 nil 1/2",
      "2/2 nil 2/2" }, calls)
    assert.equal(3 * 16, part.lm.valid.tokens)
    assert.equal(3 * 16, part.lm.test.tokens)
    assert.is_nil(part.lm.valid.bits_per_byte)
    assert.has_error(function()
      rp.experiment.check { task = "lm", corpus = dir, eval_windows = -1 }
    end, "bad argument #1 to 'rp.experiment.check' (option 'eval_windows' must be >= 0, got -1)")
    assert.has_error(function()
      rp.experiment.check { task = "lm", corpus = dir .. "/none" }
    end, ("bad argument #1 to 'rp.experiment.check' (%s/none: no manifest.json (not a corpus "
      .. "prepared by scripts/corpus.lua))"):format(dir))
    assert.has_error(function()
      rp.experiment.check { task = "lm", corpus = dir, seq_len = 300 }
    end, ("bad argument #1 to 'rp.experiment.check' (option 'corpus': the test split of %s holds "
      .. "300 tokens, fewer than seq_len + 1 = 301)"):format(dir))
  end)
end)

describe("scripts with the lm task", function()

  it("train.lua prints and compare.lua tabulates the validation and test figures", function()
    local dir = tmpdir()
    local V = 20
    ids_folder(dir, V, { train = random_stream(600, V, 1), valid = random_stream(100, V, 2),
      test = random_stream(80, V, 3) }, { valid = 250, test = 200 })
    local common = (" --task lm --corpus %s --seq-len 16 --d-model 16 --layers 1 --heads 2 "
      .. "--steps 5 --batch 2 --quiet"):format(sh_quote(dir))
    local out, ok = run(sh_quote(BIN) .. " scripts/train.lua" .. common .. " --out "
      .. sh_quote(dir .. "/r.json"))
    assert.is_true(ok, out)
    local res = require("cjson").decode(io.open(dir .. "/r.json"):read("a"))
    local v = res.lm.valid
    assert.equal(99, v.tokens)
    assert.is_true(math.abs(v.bits_per_byte - v.loss * 99 / math.log(2) / 250) < 1e-9)
    out, ok = run(sh_quote(BIN) .. " scripts/train.lua" .. common)
    assert.is_true(ok, out)
    assert.truthy(out:find("\nvalid loss %d%.%d+ nats/token, perplexity %d+%.%d+, %d%.%d+ bits per "
      .. "byte %(99 tokens%)\ntest loss"), out)
    out, ok = run(sh_quote(BIN) .. " scripts/compare.lua" .. common .. " --seeds 1 --out "
      .. sh_quote(dir .. "/cmp"))
    assert.is_true(ok, out)
    -- sample.lua: an lm run's text goes through its tokenizer
    out, ok = run(sh_quote(BIN) .. " scripts/train.lua" .. common .. " --save "
      .. sh_quote(dir .. "/run.ckpt"))
    assert.is_true(ok, out)
    out, ok = run(sh_quote(BIN) .. " scripts/sample.lua " .. sh_quote(dir .. "/run.ckpt")
      .. " --prompt hi")
    assert.is_falsy(ok)
    assert.equal(("sample.lua: the run's corpus %s is a folder of ids: give its tokenizer with "
      .. "--tokenizer\n"):format(dir), out)
    local md = io.open(dir .. "/cmp/summary.md"):read("a")
    assert.truthy(md:find("Metric: validation loss (nats per token over the whole split), lower is "
      .. "better.", 1, true), md)
    assert.truthy(md:find("| method | valid loss | valid perplexity | valid bits/byte | test loss "
      .. "| test perplexity | test bits/byte |", 1, true), md)
    rmrf(dir)
  end)
end)

describe("pairs_report.lua --lm", function()
  local function mean(t)
    local s = 0
    for _, v in ipairs(t) do s = s + v end
    return s / #t
  end
  local function f4(v) return ("%.4f"):format(v) end

  it("tabulates tiny real runs: splits, lengths, positions, curves, non-inferiority", function()
    local dir = tmpdir()
    local V = 20
    ids_folder(dir, V, { train = random_stream(600, V, 1), valid = random_stream(100, V, 2),
      test = random_stream(80, V, 3) }, { valid = 250, test = 200 })
    local cmp = dir .. "/cmp"
    local out, ok = run(sh_quote(BIN) .. (" scripts/compare.lua --task lm --corpus %s --seq-len 16 "
      .. "--d-model 16 --layers 1 --heads 2 --steps 4 --log-every 1 --batch 2 --quiet --methods "
      .. "rope roper none --seeds 2 --eval-lengths 24,32 --eval-scaling none,pi --out %s")
      :format(sh_quote(dir), sh_quote(cmp)))
    assert.is_true(ok, out)
    local cjson = require "cjson"
    local res = {}
    for _, m in ipairs { "rope", "roper", "none" } do
      res[m] = {}
      for seed = 1, 2 do
        res[m][seed] = cjson.decode(io.open(("%s/runs/%s-s%d.json"):format(cmp, m, seed)):read("a"))
      end
    end
    -- a validation curve as valid_every writes it: the column valid_loss, empty on some rows
    -- (rope's runs only: the others have none)
    for seed = 1, 2 do
      local path = ("%s/runs/rope-s%d.csv"):format(cmp, seed)
      local lines = {}
      for l in io.open(path):lines() do lines[#lines + 1] = l end
      for i, l in ipairs(lines) do
        lines[i] = l .. "," .. (i == 1 and "valid_loss" or i % 2 == 1 and
          tostring(5 + seed + i / 10) or "")
      end
      write(path, table.concat(lines, "\n") .. "\n")
    end
    out, ok = run(sh_quote(BIN) .. (" scripts/pairs_report.lua %s --lm --position-bins 3 "
      .. "--noninferiority roper/rope --margin 0.02"):format(sh_quote(cmp)))
    assert.is_true(ok, out)
    -- the splits: each method's mean over its runs
    for _, m in ipairs { "rope", "roper", "none" } do
      local r1, r2 = res[m][1].lm, res[m][2].lm
      local row = ("| %s | %s | %s | %s | %s | %s | %s |"):format(m,
        f4((r1.valid.loss + r2.valid.loss) / 2),
        ("%.2f"):format((r1.valid.perplexity + r2.valid.perplexity) / 2),
        f4((r1.valid.bits_per_byte + r2.valid.bits_per_byte) / 2),
        f4((r1.test.loss + r2.test.loss) / 2),
        ("%.2f"):format((r1.test.perplexity + r2.test.perplexity) / 2),
        f4((r1.test.bits_per_byte + r2.test.bits_per_byte) / 2))
      assert.truthy(out:find(row, 1, true), row .. "\n" .. out)
    end
    -- the lengths: the training length first (the validation loss), then 24 and 32
    assert.truthy(out:find("| method | scaling | 16 (training) | 24 | 32 |", 1, true), out)
    for _, m in ipairs { "rope", "roper" } do
      for _, sc in ipairs { "none", "pi" } do
        local at = { [24] = {}, [32] = {} }
        for seed = 1, 2 do
          for _, e in ipairs(res[m][seed].by_length) do
            if e.scaling == sc then table.insert(at[e.length], e.loss) end
          end
        end
        local row = ("| %s | %s | %s | %s | %s |"):format(m, sc,
          f4((res[m][1].lm.valid.loss + res[m][2].lm.valid.loss) / 2), f4(mean(at[24])),
          f4(mean(at[32])))
        assert.truthy(out:find(row, 1, true), row .. "\n" .. out)
      end
    end
    -- the positions: 16 positions in 3 bins (1-5, 6-10, 11-16)
    assert.truthy(out:find("| method | runs | 1-5 | 6-10 | 11-16 |", 1, true), out)
    for _, m in ipairs { "rope", "roper", "none" } do
      local cells = {}
      for k, b in ipairs { { 1, 5 }, { 6, 10 }, { 11, 16 } } do
        local per_run = {}
        for seed = 1, 2 do
          local bp = res[m][seed].lm.by_position
          assert.equal(16, #bp)
          local vals = {}
          for j = b[1], b[2] do vals[#vals + 1] = bp[j] end
          per_run[seed] = mean(vals)
        end
        cells[k] = f4(mean(per_run))
      end
      local row = ("| %s | 2 | %s |"):format(m, table.concat(cells, " | "))
      assert.truthy(out:find(row, 1, true), row .. "\n" .. out)
    end
    -- the non-inferiority row (lib/report.lua's, tested in noninferiority_spec)
    assert.truthy(out:find("| cmp | roper - rope | 2 |", 1, true), out)
    -- the curves: the training loss of every run; the validation loss of rope's runs only
    assert.truthy(out:find("Training curves: `" .. cmp .. "/lm_train.png`", 1, true), out)
    assert.truthy(out:find("Validation curves: `" .. cmp .. "/lm_valid.png`", 1, true), out)
    for _, f in ipairs { "lm_train.png", "lm_train.svg", "lm_valid.png", "lm_valid.svg" } do
      assert.truthy(io.open(cmp .. "/" .. f), f)
    end
    local dat = io.open(cmp .. "/lm_valid.dat"):read("a")
    assert.falsy(dat:find("roper", 1, true), dat)
    -- each seed's block: the rows with a valid_loss (the CSV's odd lines after the header)
    local want = {}
    for seed = 1, 2 do
      local pts = {}
      for i, p in ipairs(res.rope[seed].curve) do
        if (i + 1) % 2 == 1 then
          pts[#pts + 1] = ("%.10g %.6g"):format(p.tokens / 1e6, 5 + seed + (i + 1) / 10)
        end
      end
      want[seed] = table.concat(pts, "\n")
      assert.truthy(dat:find(want[seed], 1, true), want[seed] .. "\n---\n" .. dat)
    end
    -- the mean of the two seeds at the first point
    local first = res.rope[1].curve[2]
    assert.truthy(dat:find(("%.10g %.6g"):format(first.tokens / 1e6, (6 + 7 + 2 * 0.3) / 2), 1,
      true), dat)
    -- without any valid_loss: said, no plot
    for seed = 1, 2 do
      local path = ("%s/runs/rope-s%d.csv"):format(cmp, seed)
      local lines = {}
      for l in io.open(path):lines() do lines[#lines + 1] = l:gsub(",[^,]*$", "") end
      write(path, table.concat(lines, "\n") .. "\n")
    end
    out, ok = run(sh_quote(BIN) .. (" scripts/pairs_report.lua %s --lm"):format(sh_quote(cmp)))
    assert.is_true(ok, out)
    assert.truthy(out:find("No validation curves: no validation curves to plot.", 1, true), out)
    out, ok = run(sh_quote(BIN) .. (" scripts/pairs_report.lua %s --lm --position-bins 0")
      :format(sh_quote(cmp)))
    assert.is_falsy(ok)
    assert.truthy(out:find("pairs_report.lua: --position-bins: an integer >= 1 expected", 1, true),
      out)
    rmrf(dir)
  end)
end)

describe("the lm task under mpirun", function()
  it("gives 2 ranks, each training on its rows of every batch, one process's result", function()
    local dir = tmpdir()
    local V = 20
    ids_folder(dir, V, { train = random_stream(600, V, 1), valid = random_stream(100, V, 2),
      test = random_stream(80, V, 3) })
    local args = (" scripts/train.lua --task lm --corpus %s --seq-len 16 --d-model 16 --layers 1 "
      .. "--heads 2 --steps 20 --batch 4 --quiet --out "):format(sh_quote(dir))
    local env = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1 "
      .. "OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none "
      .. "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 OMP_NUM_THREADS=1 "
    assert(os.execute(env .. sh_quote(BIN) .. args .. sh_quote(dir .. "/one.json")
      .. " > /dev/null 2>&1"))
    assert(os.execute(env .. "timeout -k 5 300 mpirun -np 2 " .. sh_quote(BIN) .. args
      .. sh_quote(dir .. "/two.json") .. " > /dev/null 2>&1"))
    local cjson = require "cjson"
    local one = cjson.decode(io.open(dir .. "/one.json"):read("a"))
    local two = cjson.decode(io.open(dir .. "/two.json"):read("a"))
    assert.equal(2, two.ranks)
    for _, split in ipairs { "valid", "test" } do
      assert.is_true(math.abs(one.lm[split].loss - two.lm[split].loss) < 1e-5,
        ("%s: %g vs %g"):format(split, one.lm[split].loss, two.lm[split].loss))
    end
    rmrf(dir)
  end)
end)

-- The glue above with a real SentencePiece model (rp.tokenizer) in place of the stand-in: a tiny
-- corpus of fortune-file prose (the fortunes the tokenizer's spec reads), its ids cache against
-- the model's own encoding, rp.experiment with tokenizer = "" (the corpus's default tokenizer,
-- trained on its train split) and scripts/sample.lua on the run it saved.
-- A tiny corpus of fortune-file prose in dir, laid out as scripts/corpus.lua lays one out
-- (train.txt, valid.txt, test.txt and a manifest.json).
local function fortune_corpus(dir)
  local FORTUNES = "/usr/share/games/fortunes/"
  local src = assert(io.open(FORTUNES .. "computers", "rb")):read("a")
    .. assert(io.open(FORTUNES .. "science", "rb")):read("a")
  -- by document (entries between "%" lines): most to train, a few to validate and test
  local splits = { train = {}, valid = {}, test = {} }
  local k = 0
  for entry in (src .. "\n%\n"):gmatch("(.-)\n%%\n") do
    k = k + 1
    local s = (k % 20 == 0) and "valid" or (k % 20 == 1) and "test" or "train"
    splits[s][#splits[s] + 1] = entry
  end
  for s, t in pairs(splits) do write(dir .. "/" .. s .. ".txt", table.concat(t, "\n\n") .. "\n") end
  write(dir .. "/manifest.json", '{"format": "roper-corpus 1"}\n')
end

describe("rp.lm with a real SentencePiece tokenizer", function()
  local dir
  setup(function()
    dir = tmpdir()
    fortune_corpus(dir)
  end)
  teardown(function() rmrf(dir) end)

  it("encodes in pieces with the whole text's ids: each piece after the first continues it",
    function()
      local model = dir .. "/spm_pieces.model"
      local tok = assert(rp.tokenizer.train { input = dir .. "/train.txt", model = model,
        vocab_size = 600 })
      -- continued: no word-boundary mark added at the start (the model's dummy prefix)
      assert.equal("\u{2581}", tok:piece(tok:encode("the cat")[1]):sub(1, 3))
      local c = tok:encode("the cat", { continued = true })
      assert.are_not.equal("\u{2581}", tok:piece(c[1]):sub(1, 3))
      assert.equal("the cat", tok:decode(c))
      local whole = assert(rp.lm.ids(dir, model))
      -- pieces of 300 bytes, cut at line ends: each split's text comes back whole from its ids;
      -- the validation and test splits (about 20 KB each, some 70 pieces) have the ids of the
      -- whole split, id for id. The training split (about 400 KB) has as many ids but not the
      -- same: at its id 25,843 the whole split's float32 path score (SentencePiece sums the
      -- pieces' log probabilities from the start of the text) has lost the precision that tells
      -- "ers" "t" from "er" "st" apart, a near tie that the pieces' shorter sums still resolve
      local folder, info = rp.lm.ids(dir, model, { chunk_bytes = 300 })
      assert.truthy(folder, info)
      for _, sp in ipairs { "train", "valid", "test" } do
        local text = assert(io.open(dir .. "/" .. sp .. ".txt", "rb")):read("a")
        assert.is_true(#text > 15000, sp)
        local ids = rp.load(folder .. "/" .. sp .. ".npy"):totable()
        local wids = rp.load(whole .. "/" .. sp .. ".npy"):totable()
        assert.equal(text, tok:decode(ids))
        assert.equal(#wids, #ids)
        if sp ~= "train" then assert.same(wids, ids) end
      end
      -- a model that marks word ends cannot continue a text (a forged trainer spec field 24)
      package.path = "tests/fuzz/?.lua;" .. package.path
      local spm = require "spm"
      local t = spm.parse(assert(io.open(model, "rb")):read("a"))
      local tr = spm.field(t, 2).fields
      tr[#tr + 1] = { num = 24, wt = 0, v = 1 }
      write(dir .. "/suffix.model", spm.encode(t))
      local stok = assert(rp.tokenizer.load(dir .. "/suffix.model"))
      assert.has_error(function() stok:encode("a b", { continued = true }) end,
        "bad argument #2 to 'encode' (option 'continued': this model marks the ends of words "
        .. "(treat_whitespace_as_suffix), so a text cannot be encoded as the continuation of "
        .. "another)")
  end)

  it("caches the ids the model gives, and trains, evaluates and samples with the default one",
    function()
      local model = dir .. "/spm.model"
      local tok = assert(rp.tokenizer.train { input = dir .. "/train.txt", model = model,
        vocab_size = 600 })
      local folder, info = rp.lm.ids(dir, model)
      assert.truthy(folder, info)
      assert.equal(600, info.vocab_size)
      for _, s in ipairs { "train", "valid", "test" } do
        local text = assert(io.open(dir .. "/" .. s .. ".txt", "rb")):read("a")
        local want = tok:encode(text)
        assert.same(want, rp.load(folder .. "/" .. s .. ".npy"):totable())
        assert.same({ tokens = #want, bytes = #text }, info.splits[s])
        assert.equal(text, tok:decode(want))
      end
      -- tokenizer = "": the corpus's default tokenizer, trained here on its train split
      local res = rp.experiment.run { task = "lm", corpus = dir, tokenizer = "", vocab_size = 500,
        seq_len = 16, d_model = 16, layers = 1, heads = 2, steps = 30, batch = 4, lr = 3e-3,
        warmup = 2 }
      local default = dir .. "/tokenizer-unigram-500.model"
      local dtok = assert(rp.tokenizer.load(default))
      assert.equal(500, dtok:vocab_size())
      assert.equal(default, rp.lm.tokenizer(dir, 500))
      local dfolder = assert(rp.lm.ids(dir, default))
      local vtext = assert(io.open(dir .. "/valid.txt", "rb")):read("a")
      local vids = dtok:encode(vtext)
      assert.same(vids, rp.load(dfolder .. "/valid.npy"):totable())
      -- the whole validation split is scored (every token but the first) over its UTF-8 bytes
      assert.equal(#vids - 1, res.lm.valid.tokens)
      assert.equal(#vtext, res.lm.valid.bytes)
      assert.is_true(math.abs(res.lm.valid.bits_per_byte
        - res.lm.valid.loss * (#vids - 1) / math.log(2) / #vtext) < 1e-9)
      assert.is_true(res.lm.valid.loss < math.log(500), res.lm.valid.loss)
      -- scripts/sample.lua on a saved tiny run: the run's default tokenizer decodes its text
      local ck = dir .. "/run.ckpt"
      local p = assert(io.popen(("%s scripts/train.lua --task lm --corpus %s --tokenizer '' "
        .. "--vocab-size 500 --seq-len 16 --d-model 16 --layers 1 --heads 2 --steps 5 --batch 2 "
        .. "--quiet --save %s 2>&1"):format(sh_quote(BIN), sh_quote(dir), sh_quote(ck))))
      local out = p:read("a")
      assert.is_true(p:close(), out)
      p = assert(io.popen(("%s scripts/sample.lua %s --prompt 'The computer' --n 12 "
        .. "--greedy 2>&1"):format(sh_quote(BIN), sh_quote(ck))))
      out = p:read("a")
      assert.is_true(p:close(), out)
      package.path = "scripts/?.lua;" .. package.path
      local m = require("lib.saved").open(rp, ck)
      local text = rp.lm.sample(m, dtok, "The computer", { n = 12, temperature = 0 })
      assert.truthy(out:find(text, 1, true), ("%q not in %q"):format(text, out))
    end)
end)

-- docs/language_model.md's commands, from a folder whose data/linux-doc is the fortune corpus
-- above (build/roper: this build's binary): the first minute's two as printed but for
-- --vocab-size 500 added to the training, only to keep the suite short (the default 8,000 pieces
-- train on this corpus too, but the output layer made the 300 steps 83 s of CPU against 14 s on
-- the 2-vCPU AMD EPYC), then the page's other commands, cut short.
describe("docs/language_model.md's commands", function()
  local doc, work, corpus, root, bin
  setup(function()
    doc = assert(io.open("docs/language_model.md", "rb")):read("a")
    work = tmpdir()
    corpus = work .. "/data/linux-doc"
    assert(os.execute("mkdir -p " .. sh_quote(corpus)))
    fortune_corpus(corpus)
    root = h.pwd()
    assert(os.execute(("ln -s %s %s"):format(sh_quote(root .. "/scripts"),
      sh_quote(work .. "/scripts"))))
    bin = BIN:match("^/") and BIN or (root .. "/" .. BIN)
  end)
  teardown(function() rmrf(work) end)
  local function shell(cmd)
    return "cd " .. sh_quote(work) .. " && " .. cmd:gsub("^build/roper ", sh_quote(bin) .. " ", 1)
  end
  -- the commands of a ```sh block: { {command =, time =} } (time: its comment)
  local function commands(block)
    local list = {}
    for line in block:gmatch("[^\n]+") do
      local cmd, time = line:match("^(.-)%s+# (.*)$")
      list[#list + 1] = { command = cmd or line, time = time }
    end
    return list
  end

  it("the first minute runs as printed: its first steps and each split's evaluation said on "
    .. "stderr, the sample's prompt marked", function()
    local section = doc:match("\n## The first minute\n(.-)\n## ")
    assert.truthy(section, "no section 'The first minute'")
    local cmds = {}
    for _, c in ipairs(commands(section:match("```sh\n(.-)```"))) do
      -- each with its time beside it
      assert.truthy(c.command:find("^build/roper scripts/"), c.command)
      assert.truthy(c.time and c.time:find("^%d[%d.-]* s"), c.command)
      cmds[#cmds + 1] = c.command
    end
    assert.equal(2, #cmds)
    assert.truthy(cmds[1]:find("^build/roper scripts/train%.lua .*%-%-save runs/lm%.ckpt$"),
      cmds[1])
    assert.truthy(cmds[2]:find("^build/roper scripts/sample%.lua runs/lm%.ckpt "), cmds[2])

    local out, err, code = h.run(shell(cmds[1] .. " --vocab-size 500"))
    assert.equal(0, code, out .. err)
    local size = {}
    for _, s in ipairs { "train", "valid", "test" } do
      local f = assert(io.open(corpus .. "/" .. s .. ".txt", "rb"))
      local n = f:seek("end")
      f:close()
      size[s] = n < 100000 and ("%d bytes"):format(n) or ("%.1f MB"):format(n / 1e6)
    end
    local info = assert(rp.lm.info(assert(rp.lm.ids(corpus, corpus
      .. "/tokenizer-unigram-500.model"))))
    -- the windows scored: --eval-windows 200 of each split, or all of a shorter one
    local function windows(s) return math.min(200, (info.splits[s].tokens - 1 + 127) // 128) end
    local want = {
      "^training the tokenizer data/linux%-doc/tokenizer%-unigram%-500%.model %(SentencePiece "
        .. "unigram, 500 pieces%) on data/linux%-doc/train%.txt %(" .. size.train:gsub("%.", "%%.")
        .. "%) %.%.%. done in %d+%.%d s$",
    }
    for _, s in ipairs { "train", "valid", "test" } do
      want[#want + 1] = ("^encoding data/linux%%-doc/%s%%.txt %%(%s%%) into token ids %%.%%.%%. "
        .. "done in %%d+%%.%%d s$"):format(s, size[s]:gsub("%.", "%%."))
    end
    for _, s in ipairs { "valid", "test" } do
      local w = windows(s)
      want[#want + 1] = ("^step 300/300  loss %%d+%%.%%d+  evaluating the %s split: 16/%d windows$")
        :format(s, w)
      want[#want + 1] = ("^step 300/300  loss %%d+%%.%%d+  evaluating the %s split: %d/%d windows, "
        .. "%%d+%%.%%d s$"):format(s, w, w)
    end
    local got = {}
    for l in err:gmatch("[^\n]+") do
      -- (a slow machine's log also has a line of the training every 30 s)
      if not l:match("^step %d+/300  loss %d+%.%d+$") then got[#got + 1] = l end
    end
    assert.equal(#want, #got, err)
    for i, p in ipairs(want) do assert.truthy(got[i]:find(p), got[i] .. "\n" .. p) end
    assert.truthy(out:find("^lm, pe rope, %d+ params, 300 steps in "), out)
    assert.truthy(out:find("\nmodel saved to runs/lm%.ckpt\n$"), out)
    local res = require("cjson").decode(assert(io.open(work .. "/runs/lm.json")):read("a"))
    assert.same({ 300, 3e-3, 200, 500 }, { res.config.steps, res.config.lr,
      res.config.eval_windows, res.config.vocab_size })

    -- the sample: the header, then 32 tokens of a window of the validation split (drawn with the
    -- seed, 1), the mark, and what the model generates from them (sampled with seed + 1), all
    -- computed again here
    out, err, code = h.run(shell(cmds[2]))
    assert.equal(0, code, out .. err)
    assert.equal("", err)
    local n = math.tointeger(tonumber(cmds[2]:match("%-%-n (%d+)")))
    local m = assert(rp.load(work .. "/runs/lm.ckpt"))
    res.config.corpus = corpus
    local task = assert(rp.experiment.task(res.config))
    local tok = assert(rp.tokenizer.load(corpus .. "/tokenizer-unigram-500.model"))
    local x = task:batch(1, rp.rng(1), "valid")
    local prompt = tok:decode(x[1]:narrow(1, 1, 32))
    local ids = m:generate_batch({ tok:encode(prompt) }, n, { temperature = 1, top_k = 0,
      top_p = 1, seed = 2 })[1]
    -- the model's text is what its ids add to the prompt's: the prompt's ids and the model's
    -- decoded together read as the prompt, then that text (SentencePiece drops the word-start
    -- mark of a text's first piece, so the model's ids decoded alone would lose a space)
    local function after(head, new)
      local all = {}
      for _, id in ipairs(head) do all[#all + 1] = id end
      for _, id in ipairs(new) do all[#all + 1] = id end
      local whole, start = tok:decode(all), tok:decode(head)
      assert.equal(start, whole:sub(1, #start))
      return whole:sub(#start + 1)
    end
    local model = after(tok:encode(prompt), ids)
    assert.equal("-- prompt: 32 tokens of the validation split (real text), up to <|model|>; then "
      .. "the model's text\n" .. prompt .. "<|model|>" .. model
      .. (model:sub(-1) == "\n" and "" or "\n"), out)
    -- the prompt is real text: the validation split's, as the tokenizer gives it back
    local valid = assert(io.open(corpus .. "/valid.txt", "rb")):read("a")
    assert.truthy(tok:decode(tok:encode(valid)):find(prompt, 1, true), prompt)
    -- several samples: one header, each sample its own prompt, marked
    out, err, code = h.run(shell(cmds[2] .. " --samples 2 --seed 5"))
    assert.equal(0, code, out .. err)
    x = task:batch(2, rp.rng(5), "valid")
    local prompts, texts = {}, {}
    for i = 1, 2 do
      texts[i] = tok:decode(x[i]:narrow(1, 1, 32))
      prompts[i] = tok:encode(texts[i])
    end
    local outs = m:generate_batch(prompts, n, { temperature = 1, top_k = 0, top_p = 1, seed = 6 })
    local want = { "-- prompts: 32 tokens of the validation split (real text), up to <|model|>; "
      .. "then the model's text\n" }
    for i = 1, 2 do
      local t = after(prompts[i], outs[i])
      want[#want + 1] = ("-- sample %d\n%s<|model|>%s%s"):format(i, texts[i], t,
        t:sub(-1) == "\n" and "" or "\n")
    end
    assert.equal(table.concat(want), out)
  end)

  -- The page's other commands of its ```sh blocks, each with its time beside it, run in order as
  -- printed but cut short (--steps 2, --seeds 1, --eval-windows 8, --vocab-size 500 as above), the
  -- placeholders' files made first (a folder of texts, a JSON-lines file: the fortunes, one
  -- document each). Not run: the default corpus.lua, which reads Debian's linux-doc-6.1 (make
  -- corpus installs it; the suite does not).
  it("its other commands run as printed, cut short", function()
    local texts, lines = {}, {}
    local src = assert(io.open(corpus .. "/train.txt", "rb")):read("a")
    for entry in (src .. "\n\n"):gmatch("(.-)\n\n") do
      if #texts < 200 and entry:find("%S") then texts[#texts + 1] = entry end
    end
    assert(os.execute("mkdir -p " .. sh_quote(work .. "/my_texts")))
    for i, t in ipairs(texts) do
      write(("%s/my_texts/%03d.txt"):format(work, i), t .. "\n")
      lines[i] = require("cjson").encode { text = t }
    end
    write(work .. "/pages.jsonl", table.concat(lines, "\n") .. "\n")
    local ran, left_out = {}, {}
    for block in doc:gmatch("\n```sh\n(.-)```") do
      for _, c in ipairs(commands(block)) do
        local t = c.time or ""
        assert.truthy(t:find("%d s%f[%A]") or t:find("%d min%f[%A]") or t:find("%d h%f[%A]"),
          "no time beside: " .. c.command)
        local cmd = c.command
        local script = cmd:match("^build/roper scripts/([%w_]+)%.lua")
        assert.truthy(script, cmd)
        if cmd == "build/roper scripts/corpus.lua" then
          left_out[#left_out + 1] = cmd
        elseif script ~= "sample" and not cmd:find("%-%-save runs/lm%.ckpt$") then
          if script == "train" or script == "compare" then
            cmd = cmd:gsub("%-%-steps %d+", "--steps 2"):gsub("%-%-seeds %d+", "--seeds 1")
            cmd = cmd .. (cmd:find("--steps", 1, true) and "" or " --steps 2")
              .. " --vocab-size 500 --eval-windows 8 --quiet"
          end
          local out, err, code = h.run(shell(cmd))
          assert.equal(0, code, cmd .. "\n" .. out .. err)
          ran[#ran + 1] = script
        end
      end
    end
    assert.same({ "corpus", "corpus", "train", "compare" }, ran)
    assert.same({ "build/roper scripts/corpus.lua" }, left_out)
    -- what they made
    for _, f in ipairs { "data/mine/manifest.json", "data/pages/manifest.json",
      "runs/lm-roper.ckpt", "results/lm/summary.md" } do
      assert.truthy(io.open(work .. "/" .. f), f)
    end
  end)
end)

-- scripts/lib/corpus.lua and scripts/corpus.lua: the split rule against FNV-1a's published test
-- vectors, the cleaning of reStructuredText line by line, a prepared corpus checked file by file
-- (every document in exactly one split, in name order, the bytes and SHA-256 of the manifest
-- recomputed with Python's hashlib), the exact messages for bad input with nothing written, and
-- the script's command line.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = "scripts/?.lua;" .. here .. "?.lua;" .. package.path
local corpus = require "lib.corpus"
local h = require "helpers"

local BIN, sh_quote, write, read, tmpdir, rmrf = h.BIN, h.sh_quote, h.write, h.read, h.tmpdir,
  h.remove_tree

-- The command's output (stdout and stderr) and exit code.
local function run(cmd)
  local out, _, code = h.run_merged(cmd)
  return out, code
end

local function listing(d) return table.concat(h.ls(d), " ") end

local function py_sha256(path)
  local out = run(sh_quote(h.PY) .. " -c 'import hashlib,sys; "
    .. "print(hashlib.sha256(open(sys.argv[1],\"rb\").read()).hexdigest())' " .. sh_quote(path))
  return out:match("^(%x+)")
end

describe("corpus: the split rule", function()
  it("hashes with FNV-1a 32 (its published test vectors)", function()
    assert.equal(0x811c9dc5, corpus.fnv1a32(""))
    assert.equal(0xe40c292c, corpus.fnv1a32("a"))
    assert.equal(0xbf9cf968, corpus.fnv1a32("foobar"))
  end)

  it("splits by the hash mod 100: 0..89 train, 90..94 valid, 95..99 test", function()
    local counts = { train = 0, valid = 0, test = 0 }
    for i = 1, 20000 do
      local name = ("doc/%d.txt"):format(i)
      local r = corpus.fnv1a32(name) % 100
      local want = r < 90 and "train" or r < 95 and "valid" or "test"
      local got = corpus.split_of(name)
      assert.equal(want, got, name)
      counts[got] = counts[got] + 1
    end
    -- about 90/5/5 (a uniform hash: within 4 standard deviations)
    assert.is_true(math.abs(counts.train - 18000) < 4 * math.sqrt(20000 * 0.09), counts.train)
    assert.is_true(math.abs(counts.valid - 1000) < 4 * math.sqrt(20000 * 0.0475), counts.valid)
  end)
end)

describe("corpus: cleaning", function()
  it("drops markup lines of reStructuredText and keeps the prose and code", function()
    local rst = table.concat({
      ".. SPDX-License-Identifier: GPL-2.0",
      "",
      "=====",
      "Title",
      "=====",
      "",
      "Some prose   ",
      "on two lines.\r",
      "",
      "",
      "",
      ".. toctree::",
      "   :maxdepth: 2",
      "",
      "   intro",
      "   usage",
      "",
      ".. note::",
      "   :class: x",
      "",
      "   A note's prose stays.",
      "",
      ".. code-block:: c",
      "",
      "\tint x = 1;",
      "",
      ".. a comment",
      "   that goes on",
      "",
      "Section",
      "-------",
      "End.",
    }, "\n")
    assert.equal("Title\n\nSome prose\non two lines.\n\n   A note's prose stays.\n\n"
      .. "\tint x = 1;\n\nSection\nEnd.\n", corpus.clean_rst(rst))
  end)

  it("normalises every document: line ends, trailing blanks, blank runs, one final newline",
    function()
    assert.equal("a\n\nb\n", corpus.normalise("\n\na  \r\n\n\n\nb\t\n\n"))
    assert.equal("", corpus.normalise(" \n\t\n"))
    assert.equal("x\n", corpus.normalise("x"))
  end)
end)

describe("corpus.prepare", function()
  local dir, out
  before_each(function()
    dir, out = tmpdir(), tmpdir()
  end)
  after_each(function()
    rmrf(dir)
    rmrf(out)
  end)

  it("puts every document in one split, in name order, with the manifest's bytes and SHA-256",
    function()
    local texts = {}
    assert(os.execute("mkdir -p " .. sh_quote(dir .. "/sub")))
    for i = 1, 200 do
      local name = (i % 3 == 0 and "sub/" or "") .. ("d%03d.txt"):format(i)
      texts[name] = ("Document %d.\nIts second line, été %d.\n"):format(i, i * i)
      write(dir .. "/" .. name, texts[name])
    end
    write(dir .. "/blank.txt", "  \n\n")   -- empty after cleaning: no document
    local m = assert(corpus.prepare { input = dir, out = out, clean = "none", max_bytes = 1e6 })
    assert.equal("roper-corpus 1", m.format)
    assert.equal(200, m.documents)
    assert.equal(1, m.empty_after_cleaning)
    local names = {}
    for name in pairs(texts) do names[#names + 1] = name end
    table.sort(names)
    local seen = 0
    for _, s in ipairs { "train", "valid", "test" } do
      local want, files = {}, {}
      for _, name in ipairs(names) do
        if corpus.fnv1a32(name) % 100 < (s == "train" and 90 or s == "valid" and 95 or 100)
            and corpus.fnv1a32(name) % 100 >= (s == "train" and 0 or s == "valid" and 90 or 95)
        then
          want[#want + 1] = texts[name]
          files[#files + 1] = { name = name, bytes = #texts[name] }
        end
      end
      assert.is_true(#want > 0, s .. " is empty in this fixture")
      seen = seen + #want
      local text = read(out .. "/" .. s .. ".txt")
      assert.equal(table.concat(want, "\n"), text)
      local sp = m.splits[s]
      assert.same(files, sp.files)
      assert.equal(#text, sp.bytes)
      assert.equal(#want, sp.documents)
      assert.equal(py_sha256(out .. "/" .. s .. ".txt"), sp.sha256)
    end
    assert.equal(200, seen)
    -- the manifest on disk is the one returned
    local cjson = require "cjson"
    local disk = cjson.decode(read(out .. "/manifest.json"))
    assert.equal(m.splits.valid.sha256, disk.splits.valid.sha256)
    assert.equal("manifest.json test.txt train.txt valid.txt", listing(out))
  end)

  it("reads JSON lines, one document a line, named <file>:<line>", function()
    local lines = {}
    for i = 1, 200 do lines[#lines + 1] = ('{"id": %d, "body": "line %d\\nmore"}'):format(i, i) end
    write(dir .. "/c.jsonl", table.concat(lines, "\n") .. "\n")
    local m = assert(corpus.prepare { jsonl = dir .. "/c.jsonl", field = "body", out = out,
      clean = "none", max_bytes = 1e6 })
    assert.equal(200, m.documents)
    local first = m.splits.train.files[1].name
    assert.truthy(first:match("^c%.jsonl:%d+$"), first)
    local n = tonumber(first:match(":(%d+)$"))
    assert.equal(("line %d\nmore\n"):format(n), read(out .. "/train.txt"):sub(1, #("line " .. n) + 6))
  end)

  local function refused(opts, msg)
    write(out .. "/manifest.json", "{}") -- an earlier corpus: a refusal leaves it alone
    opts.out = out
    opts.max_bytes = opts.max_bytes or 1e6
    opts.clean = opts.clean or "none"
    local m, err = corpus.prepare(opts)
    assert.is_nil(m)
    assert.equal(msg, err)
    assert.equal("manifest.json", listing(out))
  end

  it("refuses bad input with a message naming the file and the fault, writing nothing", function()
    refused({ input = dir }, dir .. ": no regular files in this folder")
    write(dir .. "/a.txt", "")
    write(dir .. "/b.txt", "\n \n")
    refused({ input = dir }, dir .. ": empty (no text to train on)")
    write(dir .. "/c.txt", "ab\xffcd")
    refused({ input = dir }, "c.txt: invalid UTF-8 at byte 2 (not a text file?)")
    write(dir .. "/c.txt", "ab\xed\xa0\x80") -- a surrogate
    refused({ input = dir }, "c.txt: invalid UTF-8 at byte 2 (not a text file?)")
    write(dir .. "/c.txt", ("x"):rep(600))
    refused({ input = dir, max_bytes = 500 },
      dir .. ": its files hold more than the limit of 0.0 MiB (max_bytes), passed at c.txt")
    refused({ input = dir .. "/nothing" }, dir .. "/nothing: no such file or folder")
    write(dir .. "/c.txt", "one document")
    refused({ input = dir }, dir .. ": its 1 document leave the valid split empty (the split is "
      .. "by a hash of each document's name, about 90/5/5: use more documents)")
    write(dir .. "/j.jsonl", '{"text": "a"}\n{"text": 3}\n')
    refused({ jsonl = dir .. "/j.jsonl" }, dir .. "/j.jsonl:2: no string field 'text'")
    write(dir .. "/j.jsonl", '{"text": "a"}\n{"text": \n')
    local _, err = corpus.prepare { jsonl = dir .. "/j.jsonl", out = out, clean = "none",
      max_bytes = 1e6 }
    assert.truthy(err:find("^" .. dir:gsub("%p", "%%%0") .. "/j%.jsonl:2: not JSON %("), err)
    write(dir .. "/g.txt.gz", "not gzip")
    refused({ input = dir, suffix = ".gz" }, "g.txt.gz: not a gzip file that gzip -dc can read")
  end)

  it("follows links but reads each real folder and file once (a link to a folder above ends)",
    function()
    assert(os.execute("mkdir " .. sh_quote(dir .. "/d")))
    for i = 1, 200 do write(("%s/d/t%03d.txt"):format(dir, i), ("text %d\n"):format(i)) end
    local m0 = assert(corpus.prepare { input = dir .. "/d", out = out, clean = "none",
      max_bytes = 1e6 })
    assert.equal(200, m0.documents)
    assert.is_nil(m0.repeated_paths_skipped)
    -- a link to the folder itself and one to its parent: without the check, the first repeats
    -- every document under ever longer names until the path is too long, and both make the walk
    -- 2^depth paths long; a link to a file repeats its text under another name
    assert(os.execute(("ln -s . %s/d/again && ln -s .. %s/d/up && ln -s t001.txt %s/d/t999.txt")
      :format(sh_quote(dir), sh_quote(dir), sh_quote(dir))))
    local m = assert(corpus.prepare { input = dir .. "/d", out = out, clean = "none",
      max_bytes = 1e6 })
    assert.equal(200, m.documents)
    -- again (the folder itself), up/d (the folder again, through its parent, which holds no
    -- other file), t999.txt (t001.txt)
    assert.equal(3, m.repeated_paths_skipped)
    local names = {}
    for _, s in ipairs(corpus.SPLITS) do
      for _, f in ipairs(m.splits[s].files) do names[#names + 1] = f.name end
    end
    table.sort(names)
    assert.equal("t001.txt", names[1])
    assert.equal("t200.txt", names[200])
    for _, s in ipairs(corpus.SPLITS) do
      assert.equal(m0.splits[s].sha256, m.splits[s].sha256, s)
    end
  end)

  it("keeps an earlier corpus whole when writing the new one fails (its manifest removed only "
    .. "at the renames)", function()
    for i = 1, 200 do write(("%s/t%03d.txt"):format(dir, i), ("text number %d\n"):format(i)) end
    assert(corpus.prepare { input = dir, out = out, clean = "none", max_bytes = 1e6 })
    local before = read(out .. "/manifest.json")
    local train = read(out .. "/train.txt")
    write(dir .. "/t201.txt", "one more\n")
    -- the test split's temporary name cannot be written (a folder holds it), as a full disk
    -- fails the write after the train and valid splits
    assert(os.execute("mkdir " .. sh_quote(out .. "/test.txt.part")))
    write(out .. "/test.txt.part/x", "")
    local m, err = corpus.prepare { input = dir, out = out, clean = "none", max_bytes = 1e6 }
    assert.is_nil(m)
    assert.truthy(err:find("test.txt.part", 1, true), err)
    assert.equal(before, read(out .. "/manifest.json"))
    assert.equal(train, read(out .. "/train.txt"))
    assert.equal("manifest.json test.txt test.txt.part train.txt valid.txt", listing(out))
  end)

  it("reads gzip files", function()
    for i = 1, 200 do
      write(("%s/f%03d.rst"):format(dir, i), ("Title %d\n=======\n\nText %d.\n"):format(i, i))
    end
    assert(os.execute("gzip " .. sh_quote(dir) .. "/*.rst"))
    -- (a limit of 2^40 is a cap only: each file is read in pieces, not into a buffer of the
    -- limit's size, which could not be allocated)
    local m = assert(corpus.prepare { input = dir, out = out, clean = "rst", suffix = ".rst.gz",
      max_bytes = 1 << 40 })
    assert.equal(200, m.documents)
    local name = m.splits.train.files[1].name
    assert.truthy(name:match("^f%d%d%d%.rst$"), name)
    local i = tonumber(name:match("%d+"))
    assert.equal(("Title %d\n\nText %d.\n"):format(i, i), read(out .. "/train.txt"):sub(1,
      #("Title %d\n\nText %d.\n"):format(i, i)))
  end)
end)

describe("scripts/corpus.lua", function()
  it("prepares a folder and prints each split's documents, bytes and SHA-256", function()
    local dir, out = tmpdir(), tmpdir()
    for i = 1, 200 do write(("%s/t%03d.txt"):format(dir, i), ("text number %d\n"):format(i)) end
    local text, code = run(("%s scripts/corpus.lua --input %s --out %s"):format(sh_quote(BIN),
      sh_quote(dir), sh_quote(out .. "/c")))
    assert.equal(0, code, text)
    local sum = text:match("valid +%d+ documents +%d+ bytes  sha256 (%x+)")
    assert.equal(py_sha256(out .. "/c/valid.txt"), sum, text)
    text, code = run(("%s scripts/corpus.lua --input %s --jsonl x --out %s"):format(
      sh_quote(BIN), sh_quote(dir), sh_quote(out)))
    assert.equal(2, code)
    assert.equal("corpus.lua: give --input or --jsonl, not both\n", text)
    -- an --out that is a file, or below one: exit 2, the option named, before any reading
    write(out .. "/f", "x")
    for _, o in ipairs { { "/f", "/f: not a folder (a regular file)" },
      { "/f/c", "/f/c: cannot create it (" .. out .. "/f is a regular file, not a folder)" } } do
      text, code = run(("%s scripts/corpus.lua --input %s --out %s"):format(sh_quote(BIN),
        sh_quote(dir), sh_quote(out .. o[1])))
      assert.equal(2, code)
      assert.equal("corpus.lua: --out " .. out .. o[2] .. "\n", text)
    end
    write(dir .. "/bad.txt", "\xc3")
    text, code = run(("%s scripts/corpus.lua --input %s --out %s"):format(sh_quote(BIN),
      sh_quote(dir), sh_quote(out .. "/d")))
    assert.equal(1, code)
    assert.equal("corpus.lua: bad.txt: invalid UTF-8 at byte 0 (not a text file?)\n", text)
    -- a position in the user's file stays in the message (a Lua position would not)
    write(dir .. "/p.jsonl", '{"text": "a"}\n{"text": \n')
    text, code = run(("%s scripts/corpus.lua --jsonl %s --out %s"):format(sh_quote(BIN),
      sh_quote(dir .. "/p.jsonl"), sh_quote(out .. "/e")))
    assert.equal(1, code)
    assert.truthy(text:find("^corpus%.lua: " .. (dir .. "/p.jsonl"):gsub("%p", "%%%0")
      .. ":2: not JSON %("), text)
    rmrf(dir)
    rmrf(out)
  end)
end)

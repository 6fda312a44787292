-- The experiment scripts as a careless user meets them (issue 9): every config problem that can
-- be known before training is reported before training, in one line naming the option and the
-- value, with exit status 2 (1 for a failure while working); a traceback only with --debug or
-- ROPER_DEBUG=1. Then what must not be left behind: temporary files of killed writes, bookkeeping
-- files of collected runs, and runs training on after compare.lua was killed. And the record of a
-- run whose loss exploded. Scripts run through the REPL binary (ROPER_BIN, default build/roper)
-- from the repository root.

local rp = require "roper"
local cjson = require "cjson"
local lfs = require "lfs"

local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local BIN = h.BIN
local sh_quote, read, write, run, tmpdir = h.sh_quote, h.read, h.write, h.run, h.tmpdir

local ls = h.ls

local dir = tmpdir()
teardown(function() h.remove_tree(dir) end)

local TRAIN = sh_quote(BIN) .. " scripts/train.lua --steps 1 --d-model 16 --heads 2 --layers 1 "
  .. "--seq-len 32 --batch 2 --problems 1 --valid-batches 1 --quiet"

describe("train.lua reports config problems before training, in one line", function()
  -- fixtures
  write(dir .. "/small.txt", "hello world\n")
  write(dir .. "/bogus.json", '{"bogus": 1}')
  write(dir .. "/null.json", '{"dropout": null}')
  write(dir .. "/empty.txt", "")
  write(dir .. "/bin.dat", "\127ELF\255\254")
  lfs.mkdir(dir .. "/emptydir")
  lfs.mkdir(dir .. "/folder")
  os.execute("mkfifo " .. sh_quote(dir .. "/fifo"))
  os.execute("ln -s folder " .. sh_quote(dir .. "/link")) -- another name of the folder
  local D = dir
  -- { arguments, the one stderr line (without "train.lua: "), exit code }
  local cases = {
    { "--heads 3", "model: d_model 16 is not divisible by heads 3" },
    { "--pe rope --fraction-qk 0.375",
      "model: fraction_qk 0.375 gives d_rot 3 for d_k 8; it must be even and >= 2" },
    { "--pe roper --fraction-v 0.1",
      "model: fraction_v 0.1 gives d_rot 0 for d_k 8; it must be even and >= 2" },
    { "--fraction-v 0", "option 'fraction_v' must be in (0, 1], got 0" },
    { "--d-model 4096 --seq-len 8192 --batch 64",
      "the model %(d_model 4096, 1 layer, batch 64 x seq_len 8192%) needs %d+%.%d GiB with its "
      .. "optimiser, more than the %d+%.%d GiB of memory available", pattern = true },
    { "--seq-len 4", "task substring_index: option 'seq_len' must be in 8..16777216, got 4" },
    { "--task grid_offset --seq-len 40", "task grid_offset: option 'seq_len' must be >= 56, the "
      .. "length of one problem ((rows + 1) * cols), got 40" },
    { "--task text --path " .. D .. "/nope.txt", D .. "/nope.txt: No such file or directory" },
    { "--task text --path " .. D .. "/empty.txt", D .. "/empty.txt: empty (no text to train on)" },
    { "--task text --path " .. D .. "/bin.dat",
      D .. "/bin.dat: invalid UTF-8 at byte 4 (not a text file?)" },
    { "--task text --path " .. D .. "/emptydir", D .. "/emptydir: no regular files in this folder" },
    { "--task text --path " .. D .. "/fifo", D .. "/fifo: not a regular file (a FIFO)" },
    { "--task text --path /dev/zero", "/dev/zero: not a regular file (a character device)" },
    { "--task text --path " .. D .. "/small.txt",
      "option 'path': the training split of " .. D .. "/small.txt holds 11 characters, fewer "
      .. "than seq_len + 1 = 33" },
    { "--task text --path " .. D .. "/small.txt --seq-len 8 --valid-fraction 0.1",
      "option 'path': the validation split of " .. D .. "/small.txt holds 1 characters, fewer "
      .. "than seq_len + 1 = 9 (use a larger corpus, a larger valid_fraction or a smaller seq_len)" },
    { "--task text --path " .. D .. "/small.txt --max-bytes 5",
      D .. "/small.txt: 12 B is more than the limit of 5 B (max_bytes)" },
    { "--max-bytes 0 --task text --path " .. D .. "/small.txt",
      "task text: option 'max_bytes' must be >= 1, got 0" },
    { "--config " .. D .. "/folder", "--config " .. D .. "/folder: not a regular file (a folder)" },
    { "--config " .. D .. "/fifo", "--config " .. D .. "/fifo: not a regular file (a FIFO)" },
    { "--config " .. D .. "/nope.json", "--config " .. D .. "/nope.json: no such file" },
    { "--config " .. D .. "/small.txt",
      "--config " .. D .. "/small.txt: not valid JSON %(.*%)", pattern = true },
    -- a key of the file (not one typed over it): the file named
    { "--config " .. D .. "/bogus.json", "--config " .. D .. "/bogus.json: unknown option "
      .. "'bogus' %(known: task, .*%)", pattern = true },
    { "--config " .. D .. "/null.json", "--config " .. D .. "/null.json: option 'dropout' must "
      .. "be a finite number, got null" },
    { "--config " .. D .. "/null.json --dropout 1", "option 'dropout' must be in [0, 1), got 1" },
    { "--out " .. D .. "/folder", "--out " .. D .. "/folder: is a folder, not a file" },
    -- a folder's name that is not there yet, an empty name, and two outputs in one file
    -- however written (the later write would replace the other): refused before any work
    { "--out " .. D .. "/newfolder/", "--out " .. D .. "/newfolder/: is a folder, not a file" },
    { "--out ''", "--out: a file name expected, got an empty one" },
    { "--progress ''", "--progress: a file name expected, got an empty one" },
    { "--save " .. D .. "/m.ckpt --out " .. D .. "/./m.ckpt", "--save and --out name the same file" },
    { "--save " .. D .. "/m.ckpt --progress " .. D .. "//m.ckpt",
      "--save and --progress name the same file (" .. D .. "//m.ckpt)" },
    { "--out " .. D .. "/r.json --progress " .. D .. "/r.csv",
      "--out's curve and --progress name the same file (" .. D .. "/r.csv)" },
    { "--save " .. D .. "/folder/m.ckpt --progress " .. D .. "/link/m.ckpt",
      "--save and --progress name the same file (" .. D .. "/link/m.ckpt)" },
    { "--checkpoint " .. D .. "/c.ckpt --checkpoint-every 2 --progress " .. D .. "/c.ckpt.state",
      "--checkpoint's state and --progress name the same file (" .. D .. "/c.ckpt.state)" },
    { "--out " .. D .. "/small.txt/sub/r.json", "--out " .. D .. "/small.txt/sub/r.json: cannot "
      .. "create its folder (" .. D .. "/small.txt is a regular file, not a folder)" },
    { "--out /proc/r.json", "--out /proc/r.json: cannot write there (No such file or directory)" },
    { "--progress /proc/p", "--progress /proc/p: cannot write there (No such file or directory)" },
    { "--steps -5", "--steps -5: write a negative value as --steps=-5 (see --help)" },
    { "--steps=-5", "option 'steps' must be >= 1, got -5" },
    { "--steps 2.5", "option 'steps' must be an integer, got 2.5" },
    -- a script's own option whose value its converter refuses: named with the value
    { "--save " .. D .. "/m2.ckpt --save-every 2.5",
      "--save-every 2.5: not a value this option takes (see --help)" },
    { "--checkpoint-every=x", "--checkpoint-every x: not a value this option takes (see --help)" },
    -- the value given to two options: both named (argparse does not say which refused it)
    { "--lr 2.5 --save " .. D .. "/m2.ckpt --save-every 2.5",
      "2.5: not a value one of --lr, --save-every takes (see --help)" },
    { "--lr 0", "option 'lr' must be a finite number > 0, got 0" },
    { "--lr 1e39", "option 'lr' must be at most 3.40282347e+38 (float32's largest), got 1e+39" },
    { "--lr fast", "option 'lr' must be a finite number, got fast" },
    { "--warmup=-1", "option 'warmup' must be >= 0, got -1" },
    { "--dropout 1", "option 'dropout' must be in [0, 1), got 1" },
    { "--threads 5000", "option 'threads' must be at most 1024, got 5000" },
    { "--pe bogus", "option 'pe' must be one of " .. table.concat(h.pe_names(), ", ") .. ", got bogus" },
    { "--bogus 1", "unknown option '--bogus' (see --help)" },
    { "--decode sample --temperature 0", "option 'temperature' must be > 0 for sampling, got 0" },
    { "--eval-digits 9", "option 'eval_digits' applies to the addition task only" },
    { "--pe roper_legacy --attention linear",
      "model: linear attention does not support pe roper_legacy" },
    { "--learn-freq yes", "option 'learn_freq' must be true or false, got yes" },
  }
  for _, c in ipairs(cases) do
    it(c[1], function()
      local out, err, code = run(TRAIN .. " " .. c[1])
      assert.are.equal(2, code, out .. err)
      local line = err:match("^train%.lua: ([^\n]*)\n$")
      assert.is_not_nil(line, "not one line: " .. err)
      if c.pattern then
        assert.is_truthy(line:match("^" .. c[2] .. "$"), line)
      else
        assert.are.equal(c[2], line)
      end
    end)
  end

  it("--init and --resume: a checkpoint the run would refuse, refused before training", function()
    local ckpt = dir .. "/init.ckpt"
    local _, err, code = run(TRAIN .. " --save " .. sh_quote(ckpt))
    assert.are.equal(0, code, err)
    for _, c in ipairs {
      { "--init " .. dir .. "/none.ckpt", "option 'init': " .. dir .. "/none.ckpt: No such file "
        .. "or directory" },
      { "--d-model 32 --init " .. ckpt, "option 'init': " .. ckpt .. ": parameter embed.weight "
        .. "is 45x32 in the derived model, 45x16 in the model (the overrides change the layout)" },
      { "--seed 2 --resume --save " .. ckpt, "--resume: " .. ckpt .. " was trained with seed = "
        .. "1, the config asks for 2" },
    } do
      local out = dir .. "/init-run.json"
      local so
      so, err, code = run(TRAIN .. " " .. c[1] .. " --out " .. sh_quote(out))
      assert.are.equal(2, code, so .. err)
      assert.are.equal("train.lua: " .. c[2] .. "\n", err)
      assert.is_nil(lfs.attributes(out), "nothing trained")
    end
  end)

  it("--resume goes on from a fine-tuning run's checkpoint without its --init (gone)", function()
    local base, part = dir .. "/ft-base.ckpt", dir .. "/ft-part.ckpt"
    local _, err, code = run(TRAIN .. " --save " .. sh_quote(base))
    assert.are.equal(0, code, err)
    -- the fine-tuning run stopped after its step-2 save (a progress that raises at step 3)
    local cfg = rp.experiment.config { steps = 4, d_model = 16, heads = 2, layers = 1,
      seq_len = 32, batch = 2, problems = 1, valid_batches = 1, init = base }
    assert.is_false(pcall(rp.experiment.run, cfg, function(s)
      if s == 3 then error("stopped") end
    end, { save = part, save_every = 2 }))
    assert.are.equal(2, rp.experiment.resumable(cfg, part))
    -- a copy without its training state (lost): gone on from too, without the curve so far
    local lone = dir .. "/ft-lone.ckpt"
    write(lone, read(part))
    assert.are.equal("no state", select(3, rp.experiment.resumable(cfg, lone)))
    os.remove(base)
    write(dir .. "/ft.cfg.json", cjson.encode(cfg))
    for _, p in ipairs { part, lone } do
      local out
      out, err, code = run(sh_quote(BIN) .. " scripts/train.lua --config " .. sh_quote(dir
        .. "/ft.cfg.json") .. " --resume --save " .. sh_quote(p) .. " --out "
        .. sh_quote(dir .. "/ft.json"))
      assert.are.equal(0, code, out .. err)
      assert.are.equal(2, cjson.decode(read(dir .. "/ft.json")).resumed_at)
    end
    -- a fresh run of that config still needs its --init
    _, err, code = run(sh_quote(BIN) .. " scripts/train.lua --config " .. sh_quote(dir
      .. "/ft.cfg.json") .. " --out " .. sh_quote(dir .. "/ft2.json"))
    assert.are.equal(2, code)
    assert.are.equal("train.lua: --config " .. dir .. "/ft.cfg.json: option 'init': " .. base
      .. ": No such file or directory\n", err)
  end)

  it("prints the traceback only with --debug or ROPER_DEBUG=1", function()
    local bad = sh_quote(dir .. "/nope.txt")
    -- a runtime failure: a corpus that vanishes between the check and the run cannot be staged
    -- here, so a failing --out write stands in: the folder is removed under the run
    local _, err, code = run("ROPER_DEBUG=1 " .. TRAIN .. " --task text --path " .. bad)
    assert.are.equal(2, code)
    assert.are.equal(1, select(2, err:gsub("\n", "")), err) -- usage problems: one line anyway
    _, err, code = run(sh_quote(BIN) .. " -e 'package.path = \"scripts/?.lua;\" .. package.path"
      .. " arg = {[0] = \"x\", \"--debug\"} local cli = require \"lib.cli\""
      .. " cli.main(\"x\", function() local t = nil; return t.field end)'")
    assert.are.equal(1, code)
    assert.is_truthy(err:find("^x: [^\n]*attempt to index a nil value"), err)
    assert.is_truthy(err:find("stack traceback:", 1, true), err)
    _, err, code = run(sh_quote(BIN) .. " -e 'package.path = \"scripts/?.lua;\" .. package.path"
      .. " arg = {[0] = \"x\"} local cli = require \"lib.cli\""
      .. " cli.main(\"x\", function() error(\"disk full\", 0) end)'")
    assert.are.equal(1, code)
    assert.are.equal("x: disk full\n", err)
  end)
end)

describe("compare.lua and sweep.lua check every config before the first run", function()
  it("compare.lua: a bad method stops everything before anything runs", function()
    local out = dir .. "/cmp-bad"
    local _, err, code = run(sh_quote(BIN) .. " scripts/compare.lua --methods rope roper:heads=3 "
      .. "--seeds 1 --steps 1 --d-model 16 --heads 2 --quiet --out " .. sh_quote(out))
    assert.are.equal(2, code)
    assert.are.equal("compare.lua: method roper:heads=3: model: d_model 16 is not divisible by "
      .. "heads 3\n", err)
    assert.is_nil(lfs.attributes(out), "nothing was created")
  end)

  it("compare.lua: an --out that cannot be made", function()
    local _, err, code = run(sh_quote(BIN) .. " scripts/compare.lua --seeds 1 --steps 1 --quiet "
      .. "--out " .. sh_quote(dir .. "/small.txt/x"))
    assert.are.equal(2, code)
    -- the folder given named, and the file in its way (not mkdir's "File exists")
    assert.are.equal("compare.lua: --out " .. dir .. "/small.txt/x: cannot create it (" .. dir
      .. "/small.txt is a regular file, not a folder)\n", err)
  end)

  it("compare.lua: the path in the way of an --out named, whatever it holds", function()
    local base = dir .. "/in-way: a"
    assert(lfs.mkdir(base))
    assert(lfs.mkdir(base .. "/o2") and lfs.mkdir(base .. "/o2/runs"))
    assert(lfs.mkdir(base .. "/o2/runs/probe.json"))
    assert(lfs.mkdir(base .. "/o1"))
    h.write(base .. "/o1/runs", "x")
    h.write(base .. "/f", "x")
    assert(lfs.link("nowhere", base .. "/dl", true))
    for _, c in ipairs {
      { "/o2", "/o2: " .. base .. "/o2/runs/probe.json is a folder in the way of its files" },
      { "/o1", "/o1: cannot create " .. base .. "/o1/runs (" .. base .. "/o1/runs is a regular "
        .. "file, not a folder)" },
      { "/dl/x", "/dl/x: cannot create it (" .. base .. "/dl is a symbolic link to nothing, not "
        .. "a folder)" },
      -- (a ": " in the path stays: only the message's own prefix is taken off)
      { "/f/x", "/f/x: cannot create it (" .. base .. "/f is a regular file, not a folder)" },
    } do
      local _, err, code = run(sh_quote(BIN) .. " scripts/compare.lua --seeds 1 --steps 1 "
        .. "--quiet --out " .. sh_quote(base .. c[1]))
      assert.are.equal(2, code, err)
      assert.are.equal("compare.lua: --out " .. base .. c[2] .. "\n", err)
    end
  end)

  it("compare.lua: an --init its runs' models cannot start from, before any run", function()
    local ckpt, out = dir .. "/cmp-init.ckpt", dir .. "/cmp-init"
    local _, err, code = run(TRAIN .. " --save " .. sh_quote(ckpt))
    assert.are.equal(0, code, err)
    _, err, code = run(sh_quote(BIN) .. " scripts/compare.lua --seeds 1 --steps 1 --d-model 32 "
      .. "--heads 2 --layers 1 --seq-len 32 --quiet --init " .. sh_quote(ckpt) .. " --out "
      .. sh_quote(out))
    assert.are.equal(2, code)
    assert.are.equal("compare.lua: method rope: option 'init': " .. ckpt .. ": parameter "
      .. "embed.weight is 45x32 in the derived model, 45x16 in the model (the overrides change "
      .. "the layout)\n", err)
    assert.is_nil(lfs.attributes(out), "nothing was created")
    -- each run's own checkpoint ({pe}, {seed}): the run named
    assert(os.rename(ckpt, dir .. "/rope-s1.ckpt"))
    _, err, code = run(sh_quote(BIN) .. " scripts/compare.lua --methods rope --seeds 1 --steps 1 "
      .. "--d-model 32 --heads 2 --layers 1 --seq-len 32 --quiet --init "
      .. sh_quote(dir .. "/{pe}-s{seed}.ckpt") .. " --out " .. sh_quote(out))
    assert.are.equal(2, code)
    assert.are.equal("compare.lua: run rope s1: option 'init': " .. dir .. "/rope-s1.ckpt: "
      .. "parameter embed.weight is 45x32 in the derived model, 45x16 in the model (the overrides "
      .. "change the layout)\n", err)
    assert.is_nil(lfs.attributes(out), "nothing was created")
  end)

  it("compare.lua: an option given twice", function()
    local out = dir .. "/cmp-twice"
    local _, err, code = run(sh_quote(BIN) .. " scripts/compare.lua --methods rope --methods "
      .. "roper --seeds 1 --steps 1 --quiet --out " .. sh_quote(out))
    assert.are.equal(2, code)
    assert.are.equal("compare.lua: --methods given more than once: give its values after one "
      .. "--methods (see --help)\n", err)
    assert.is_nil(lfs.attributes(out), "nothing was created")
  end)

  it("sweep.lua: a bad grid point stops everything before anything runs", function()
    local out = dir .. "/sweep-bad"
    local _, err, code = run(sh_quote(BIN) .. " scripts/sweep.lua --grid seq_len=32,4 --steps 1 "
      .. "--d-model 16 --heads 2 --quiet --out " .. sh_quote(out))
    assert.are.equal(2, code)
    assert.are.equal("sweep.lua: seq_len=4: task substring_index: option 'seq_len' must be in "
      .. "8..16777216, got 4\n", err)
    assert.is_nil(lfs.attributes(out), "nothing was created")
  end)
end)

describe("a bool config key on the command line: --learn-freq", function()
  -- the config each script writes for its runs (--print-commands writes them, runs nothing)
  local function cfgs(out)
    local got = {}
    for _, f in ipairs(ls(out .. "/runs")) do
      if f:match("%.cfg%.json$") then got[f] = cjson.decode(read(out .. "/runs/" .. f)) end
    end
    return got
  end
  local SMALL = "--steps 1 --d-model 16 --heads 2 --quiet --print-commands --out "

  it("alone, with true or false, before another option; compare.lua's methods", function()
    for i, c in ipairs {
      { "--learn-freq", true }, { "--learn-freq true", true }, { "--learn-freq false", false },
      { "--learn-freq=true", true }, { "", false },
    } do
      local out = dir .. "/bool" .. i
      local _, err, code = run(sh_quote(BIN) .. " scripts/compare.lua --methods rope "
        .. "rope:learn_freq=true --seeds 1 " .. c[1] .. " " .. SMALL .. sh_quote(out))
      assert.are.equal(0, code, err)
      local got = cfgs(out)
      assert.are.equal(c[2], got["rope-s1.cfg.json"].learn_freq, c[1])
      assert.is_true(got["rope_learn_freq=true-s1.cfg.json"].learn_freq, c[1])
    end
  end)

  it("sweep.lua: a grid of false and true", function()
    local out = dir .. "/bool-sweep"
    local _, err, code = run(sh_quote(BIN) .. " scripts/sweep.lua --grid learn_freq=false,true "
      .. SMALL .. sh_quote(out))
    assert.are.equal(0, code, err)
    local got = cfgs(out)
    assert.is_false(got["learn_freq-false.cfg.json"].learn_freq)
    assert.is_true(got["learn_freq-true.cfg.json"].learn_freq)
  end)

  it("train.lua: the run's config holds it", function()
    local out = dir .. "/bool-train.json"
    local _, err, code = run(TRAIN .. " --learn-freq --out " .. sh_quote(out))
    assert.are.equal(0, code, err)
    assert.is_true(cjson.decode(read(out)).config.learn_freq)
  end)
end)

describe("nothing is left behind", function()
  it("fileio.write: a killed write's temporary file is removed by the next write", function()
    package.path = "scripts/?.lua;" .. package.path
    local fileio = require "lib.fileio"
    local path = dir .. "/w.json"
    -- a process that is gone: a shell that has exited
    local p = io.popen("sh -c 'echo $$'")
    local dead = math.tointeger(tonumber(p:read("l")))
    p:close()
    write(("%s.tmp.%d"):format(path, dead), "half")
    write(("%s.tmp.%d"):format(path, 1), "a live process's") -- pid 1 always exists
    assert.is_true(fileio.write(path, "whole"))
    assert.are.equal("whole", read(path))
    assert.is_nil(read(("%s.tmp.%d"):format(path, dead)))
    assert.are.equal("a live process's", read(("%s.tmp.1"):format(path)))
    os.remove(("%s.tmp.1"):format(path))
    -- errors name the path, never the temporary file
    local ok, err = fileio.write(dir .. "/nope/x.json", "x")
    assert.is_nil(ok)
    assert.are.equal(dir .. "/nope/x.json: No such file or directory", err)
    ok, err = fileio.write(dir .. "/folder", "x")
    assert.are.equal(dir .. "/folder: not a regular file (a folder)", err)
    -- a FIFO is refused before anything opens it (which would wait for a reader)
    assert.is_true(os.execute("mkfifo " .. h.sh_quote(dir .. "/w.fifo")))
    ok, err = fileio.write(dir .. "/w.fifo", "x")
    assert.are.equal(dir .. "/w.fifo: not a regular file (a FIFO)", err)
  end)

  -- The pids of the children of pid (from /proc).
  local function children(pid)
    local t = {}
    for name in lfs.dir("/proc") do
      local stat = name:match("^%d+$") and read("/proc/" .. name .. "/stat")
      if stat then
        local ppid = stat:match("%) %a (%d+)")
        if tonumber(ppid) == pid then t[#t + 1] = math.tointeger(tonumber(name)) end
      end
    end
    return t
  end

  -- Whether pid is a live (not zombie) process.
  local function alive(pid)
    local stat = read("/proc/" .. pid .. "/stat")
    return stat ~= nil and stat:match("%) (%a)") ~= "Z"
  end

  local wait_for = h.wait_for

  -- Starts compare.lua with args in the background; returns its pid.
  local function start_compare(args)
    local p = io.popen(sh_quote(BIN) .. " scripts/compare.lua " .. args
      .. " > /dev/null 2>&1 & echo $!")
    local pid = math.tointeger(tonumber(p:read("l")))
    p:close()
    return pid
  end

  local SMALL = "--d-model 16 --heads 2 --layers 1 --seq-len 32 --batch 2 --problems 1 "
    .. "--valid-batches 1 --quiet"

  for _, how in ipairs { "KILL", "TERM" } do
    it("SIG" .. how .. " to compare.lua ends the run it started (a run of minutes)", function()
      local out = dir .. "/cmp-" .. how
      local pid = start_compare("--methods rope --seeds 1 --steps 1000000 " .. SMALL
        .. " --out " .. sh_quote(out))
      local progress = out .. "/runs/rope-s1.progress"
      assert.is_true(wait_for(function()
        return lfs.attributes(progress) ~= nil and #children(pid) == 1
      end, 60), "the run did not start")
      local kid = children(pid)[1]
      os.execute("kill -" .. how .. " " .. pid)
      assert.is_true(wait_for(function() return not alive(kid) end, 10),
        "the run goes on after compare.lua got SIG" .. how)
      assert.is_nil(lfs.attributes(out .. "/runs/rope-s1.json"))
    end)
  end

  it("a resume after kill -9 reruns only the unfinished runs and leaves only results", function()
    local out = dir .. "/cmp-resume"
    local args = "--methods rope roper --seeds 2 --jobs 1 --steps 1500 " .. SMALL .. " --out "
      .. sh_quote(out)
    local pid = start_compare(args)
    local first = out .. "/runs/rope-s1.json"
    assert.is_true(wait_for(function()
      return lfs.attributes(first) ~= nil and #children(pid) > 0
    end, 120), "the first run did not finish")
    local first_text = read(first)
    os.execute("kill -9 " .. pid)
    local _, err, code = run(sh_quote(BIN) .. " scripts/compare.lua " .. args)
    assert.are.equal(0, code, err)
    assert.are.equal(first_text, read(first))
    local names = ls(out .. "/runs")
    for _, n in ipairs(names) do
      assert.is_nil(n:match("%.progress$") or n:match("%.cfg%.json$") or n:match("%.rc$")
        or n:match("%.tmp%.%d+$") or n:match("%.probe$"), "left behind: " .. n)
    end
    assert.are.same({ "rope-s1.csv", "rope-s1.json", "rope-s1.log", "rope-s2.csv",
      "rope-s2.json", "rope-s2.log", "roper-s1.csv", "roper-s1.json", "roper-s1.log",
      "roper-s2.csv", "roper-s2.json", "roper-s2.log" }, names)
  end)

  it("a run started with ROPER_PARENT_PID of a process that is gone stops at once", function()
    local p = io.popen("sh -c 'echo $$'")
    local dead = p:read("l")
    p:close()
    local _, err, code = run("ROPER_PARENT_PID=" .. dead .. " " .. TRAIN)
    assert.are.equal(1, code)
    assert.are.equal(("roper: the process that started this run (pid %s) is gone\n"):format(dead),
      err)
  end)
end)

describe("the record of a run", function()
  it("flags a loss that exploded but stayed finite", function()
    local base = { task = "substring_prefix", steps = 20, d_model = 16, heads = 2, layers = 1,
      seq_len = 32, batch = 4, valid_batches = 1, log_every = 2, clip = 0,
      schedule = "constant", warmup = 0 }
    base.lr = 1
    local r = rp.experiment.run(base)
    assert.is_false(r.diverged)
    assert.is_true(r.exploded)
    assert.are.equal(4, r.exploded_at)
    -- the criterion, recomputed from the curve: above twice the best before and above ln(V)
    assert.is_true(r.curve[2].loss > 2 * r.curve[1].loss and r.curve[2].loss > math.log(5))
    base.lr = 0.01
    r = rp.experiment.run(base)
    assert.is_false(r.exploded)
    assert.is_nil(r.exploded_at)
  end)
end)

-- Issue 48: an option typed on the command line that does nothing for the run's task or mode is
-- refused before anything runs, with the reason (rp.experiment.applies with the run's config:
-- the rule rp.model applies to its keys), unless --allow-unused; defaults and --config files
-- never count.
describe("an option that does nothing for the chosen task or mode", function()
  local TAIL = " (--allow-unused runs it anyway)"
  local BASE = " --steps 1 --d-model 16 --heads 2 --layers 1 --seq-len 32 --batch 2 "
    .. "--valid-batches 1 --quiet"
  local ROT = "(rope, roper or roper_legacy)"
  -- { script and arguments, the stderr line without the script's name and TAIL }
  local cases = {
    { "train --task addition --str-len 5",
      "--str-len 5 does nothing for task addition: it applies to task substring_index" },
    { "train --max-digits 3",
      "--max-digits 3 does nothing for task substring_index: it applies to task addition" },
    { "train --task substring_index --rows 4",
      "--rows 4 does nothing for task substring_index: it applies to task grid_offset" },
    { "train --task grid_offset --rows 3 --cols 4 --max-offset 2 --axes mixed",
      "--axes mixed does nothing with positions index: it applies to positions grid" },
    { "train --pe rope --rel-clip 8",
      "--rel-clip 8 does nothing for pe rope: it applies to pe shaw or deberta" },
    { "train --pe rope --fraction-v 0.5",
      "--fraction-v 0.5 does nothing for pe rope rotating qk: it applies when v or o is rotated" },
    { "train --pe alibi --learn-freq",
      "--learn-freq true does nothing for pe alibi: it applies to the rotary modes " .. ROT },
    { "train --scaling-factor 2",
      "--scaling-factor 2 does nothing with scaling none: it applies to the scalings (pi, ntk, "
      .. "yarn, dynamic or llama3)" },
    { "train --scaling pi --scaling-factor 2 --orig-len 16",
      "--orig-len 16 does nothing with scaling pi: it applies to scaling yarn, dynamic or llama3" },
    { "train --linear-rope before",
      "--linear-rope before does nothing with softmax attention: it applies to linear attention "
      .. "with pe rope or roper" },
    { "train --schedule constant --min-lr 1e-5",
      "--min-lr 1e-5 does nothing with schedule constant: it applies to schedule cosine" },
    { "train --schedule constant --warmup 10",
      "--warmup 10 does nothing with schedule constant: it applies to schedule cosine or noam" },
    { "train --task substring_prefix --problems 4",
      "--problems 4 does nothing for task substring_prefix: it applies to the accuracy tasks "
      .. "(task substring_index, addition or grid_offset)" },
    { "train --decode greedy --temperature 0.5",
      "--temperature 0.5 does nothing with decode greedy: it applies to decode sample" },
    { "train --eval-scaling pi",
      "--eval-scaling pi does nothing without eval_lengths: it applies when eval_lengths is given" },
    { "train --pe none --eval-lengths 13 --eval-scaling none,pi",
      "--eval-scaling none,pi does nothing for pe none: it applies to the rotary modes " .. ROT },
    -- compare.lua: an option of every method, refused when it does nothing for any of them
    { "compare --methods rope none --fraction-v 0.5",
      "--fraction-v 0.5 does nothing for any method: for pe rope rotating qk: it applies when v "
      .. "or o is rotated; for pe none: it applies to the rotary modes " .. ROT },
    { "compare --task addition --methods rope roper --str-len 5",
      "--str-len 5 does nothing for task addition: it applies to task substring_index" },
    { "compare --methods rope:rel_clip=4 roper",
      "method rope:rel_clip=4: rel_clip=4 does nothing for pe rope: it applies to pe shaw or "
      .. "deberta" },
    -- sweep.lua: a fixed option or a grid key that does nothing at any point
    { "sweep --grid pe=rope,none --fraction-v 0.5",
      "--fraction-v 0.5 does nothing for any point of the grid: for pe rope rotating qk: it "
      .. "applies when v or o is rotated; for pe none: it applies to the rotary modes " .. ROT },
    { "sweep --task addition --grid str_len=5,7",
      "--grid str_len=5,7 does nothing for task addition: it applies to task substring_index" },
  }
  for _, c in ipairs(cases) do
    local script, args = c[1]:match("^(%S+) (.*)$")
    it(script .. ".lua " .. args, function()
      local out = dir .. "/unused-" .. script
      local cmd = sh_quote(BIN) .. " scripts/" .. script .. ".lua " .. args .. BASE
        .. (script == "compare" and " --seeds 1" or "")
        .. (script ~= "train" and (" --print-commands --out " .. sh_quote(out)) or "")
      local so, err, code = run(cmd)
      assert.are.equal(2, code, so .. err)
      assert.are.equal(script .. ".lua: " .. c[2] .. TAIL .. "\n", err)
      assert.is_nil(lfs.attributes(out), "nothing was created")
      -- --allow-unused lets it through (compare.lua and sweep.lua print their commands)
      so, err, code = run(cmd .. " --allow-unused")
      assert.are.equal(0, code, so .. err)
      h.remove_tree(out)
    end)
  end

  it("an option that does something for one method or point is not refused", function()
    for i, args in ipairs {
      "compare.lua --methods rope shaw --rel-clip 8 --seeds 1",
      "compare.lua --methods rope roper --fraction-v 0.5 --seeds 1",
      "compare.lua --methods none rope --eval-lengths 13 --eval-scaling none,pi --seeds 1",
      "sweep.lua --grid pe=rope,roper --fraction-v 0.5",
      "sweep.lua --grid task=addition,substring_index --max-digits 3",
      "sweep.lua --grid schedule=cosine,constant --min-lr 1e-5",
    } do
      local out = dir .. "/used" .. i
      local so, err, code = run(sh_quote(BIN) .. " scripts/" .. args .. BASE
        .. " --print-commands --out " .. sh_quote(out))
      assert.are.equal(0, code, args .. ": " .. so .. err)
      h.remove_tree(out)
    end
  end)

  it("defaults never count, nor the keys of a --config file", function()
    -- every task with nothing but the tiny model's options (grid_offset needs 56 tokens)
    for _, t in ipairs { "substring_index", "addition", "substring_prefix", "text",
                         "grid_offset --seq-len 64" } do
      local _, err, code = run(sh_quote(BIN) .. " scripts/train.lua" .. BASE .. " --task " .. t)
      assert.are.equal(0, code, t .. ": " .. err)
    end
    -- a full config (as compare.lua writes for its runs): every key, most doing nothing here
    local cfg_path = dir .. "/full.cfg.json"
    local cfg = rp.experiment.config { task = "addition", steps = 1, d_model = 16, heads = 2,
      layers = 1, seq_len = 32, batch = 2, valid_batches = 1, str_len = 5, schedule = "constant" }
    write(cfg_path, cjson.encode(cfg))
    local _, err, code = run(sh_quote(BIN) .. " scripts/train.lua --quiet --config "
      .. sh_quote(cfg_path))
    assert.are.equal(0, code, err)
    -- compare.lua and sweep.lua with their defaults
    for i, args in ipairs { "compare.lua --seeds 1", "sweep.lua --grid seed=1" } do
      local out = dir .. "/defaults" .. i
      local so
      so, err, code = run(sh_quote(BIN) .. " scripts/" .. args .. " --print-commands --out "
        .. sh_quote(out))
      assert.are.equal(0, code, args .. ": " .. so .. err)
      h.remove_tree(out)
    end
  end)
end)

describe("rp.experiment.applies with a config", function()
  it("gives the reason a key does nothing, and true where it does something", function()
    local A = rp.experiment.applies
    assert.are.same({ false, "for task addition: it applies to task substring_index" },
      { A("str_len", { task = "addition" }) })
    assert.are.same({ false, "for task addition: it applies to task substring_index" },
      { A("str_len", "addition") })
    assert.are.same({ true }, { A("str_len", {}) })
    assert.are.same({ true }, { A("rel_clip", { pe = "deberta" }) })
    assert.are.same({ false, "for pe rope: it applies to pe shaw or deberta" },
      { A("rel_clip", { pe = "rope" }) })
    assert.are.same({ true }, { A("fraction_v", { pe = "rope", rotate = "qkv" }) })
    assert.are.same({ true }, { A("min_lr", {}) })
    assert.are.same({ true }, { A("temperature", { task = "grid_offset" }) })
    assert.are.same({ true }, { A("lr", { task = "text" }) })
    assert.has_error(function() A("lr", { pe = "bogus" }) end, "bad argument #2 to "
      .. "'rp.experiment.applies' (option 'pe' must be one of "
      .. table.concat(h.pe_names(), ", ") .. ", got bogus)")
    assert.has_error(function() A("lr", 3) end, "bad argument #2 to 'rp.experiment.applies' (a "
      .. "task (substring_index, addition, substring_prefix, text, grid_offset, lm) or a config "
      .. "table expected, got number)")
  end)
end)

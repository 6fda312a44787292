-- The driver of the fuzz test: prepares the fuzz folder, asks a child for the list of functions,
-- and runs every function's cases in child processes of the roper binary (tests/fuzz/child.lua),
-- so that a crash, a hang or a sanitizer report ends a child, not the test. After such an end the
-- driver records the case the child was running (it wrote it before starting it) and starts a new
-- child at the next case.
--
--   local driver = require "driver"
--   local dir = driver.prepare()                       -- the fuzz folder (remove with cleanup)
--   local fns = driver.list(bin, dir)                  -- { {name =, cases =, seeded =}, ... }
--   local report = driver.run(bin, dir, fn [, step])   -- the outcome of one function's cases
--                                                      -- (step n: one in n, M.sampled; default 1)
--   local refused = driver.refused(bin, dir)           -- seeds and variants refused: lines
--   driver.cleanup(dir)
--
-- report: { cases = (the cases run), of = (the function's cases), children =, seconds =,
-- deaths = {...}, hangs = {...}, sanitizer = {...}, raw = {...}, harness = {...}, config = {...} },
-- each list holding one-line descriptions
-- "case 12 (argument 2 = nan): <what happened>" (config: the file fuzzer's "config: " findings,
-- tests/fuzz/files.lua).
--
-- Environment: ROPER_BIN (the binary), SANITIZE=1 (ASan build: no ulimit -v, allocations over
-- 3 GiB fail instead), FUZZ_CHILD_SECONDS (the time limit of one child, default 120; 600 under
-- ASan), FUZZ_CASE_SECONDS (the Lua time budget of a case, default 0.5), FUZZ_SAMPLE=n (M.sample,
-- default 1; the API fuzz test, fuzz_spec, passes it to M.run as its step).
local M = {}

M.sample = math.tointeger(tonumber(os.getenv("FUZZ_SAMPLE") or "1"))
assert(M.sample and M.sample >= 1, "FUZZ_SAMPLE must be a whole number >= 1 (1: every case)")

-- The sample of step n (M.run's step) runs one case in n: cases k, k + n, k + 2n, ... from a k in
-- 1..n picked by the function's name, so that the functions sample different kinds of case.
local function first_case(fn, step)
  local h = 0
  for i = 1, #fn.name do h = (h * 31 + fn.name:byte(i)) % 1000003 end
  return 1 + h % math.max(1, math.min(step, fn.cases))
end

-- The number of cases of fn (from list) that the sample of step n runs.
function M.sampled(fn, step)
  return math.max(0, (fn.cases - first_case(fn, step)) // step + 1)
end

local lfs = require "lfs"

-- path made absolute (children run in the fuzz folder)
local function absolute(path)
  if path:sub(1, 1) == "/" then return path end
  return lfs.currentdir() .. "/" .. path
end

local here = absolute(debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".")

local h = require "helpers" -- tests/lua/helpers.lua (fuzz_spec puts it on the path)
local sh_quote, read, write = h.sh_quote, h.read, h.write

local sanitize = os.getenv("SANITIZE") == "1"

-- The fuzz folder: a FIFO, an empty folder, a binary file, a small corpus, a checkpoint, the same
-- model as a safetensors file, a .npy file and a tokenizer's .model trained on the corpus.
function M.prepare(bin)
  bin = absolute(bin)
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. sh_quote(dir .. "/emptydir") .. " && mkfifo "
    .. sh_quote(dir .. "/fifo")))
  write(dir .. "/bin.dat", "\127ELF\2\1\1\255\254")
  write(dir .. "/corpus.txt", ("the quick brown fox jumps over the lazy dog\n"):rep(40))
  assert(os.execute(sh_quote(bin) .. " -e " .. sh_quote(("local m = rp.model{vocab = 5, d_model = "
    .. "8, heads = 2, layers = 1, d_ff = 8, seq_len = 8, max_batch = 2} assert(m:save(%q)) "
    .. "assert(m:save_safetensors(%q)) assert(rp.range(1, 6):view(2, 3):save(%q)) "
    .. "assert(rp.tokenizer.train{input = %q, model = %q, vocab_size = 300, type = 'bpe', "
    .. "threads = 1})"):format(dir .. "/model.ckpt", dir .. "/model.safetensors", dir .. "/t.npy",
      dir .. "/corpus.txt", dir .. "/tok.model"))))
  -- an lm task's folder of ids (vocab 5) and a prepared corpus with a tokenizer file
  assert(os.execute("mkdir -p " .. sh_quote(dir .. "/lmids") .. " " .. sh_quote(dir .. "/lmcorpus")))
  assert(os.execute(sh_quote(bin) .. " -e " .. sh_quote(("for s, n in pairs{train = 40, "
    .. "valid = 20, test = 20} do assert(rp.randint(0, 4, {n}, rp.rng(n)):save(%q .. s .. "
    .. "\".npy\", {dtype = \"int32\"})) end"):format(dir .. "/lmids/"))))
  write(dir .. "/lmids/ids.txt", "roper-ids 1\nvocab_size 5\ntrain 40 160\nvalid 20 80\n"
    .. "test 20 80\n")
  for _, s in ipairs { "train", "valid", "test" } do
    write(dir .. "/lmcorpus/" .. s .. ".txt", ("text of the %s split\n"):format(s))
  end
  write(dir .. "/lmcorpus/manifest.json", "{\"format\": \"roper-corpus 1\"}\n")
  write(dir .. "/lmcorpus/tok.model", "a tokenizer model")
  return dir
end

function M.cleanup(dir)
  os.execute("rm -rf " .. sh_quote(dir))
end

-- The command line of a child: in the fuzz folder, under a time limit, with its memory bounded.
local function child_cmd(bin, dir, args, errfile)
  bin = absolute(bin)
  local limit = tonumber(os.getenv("FUZZ_CHILD_SECONDS") or "") or (sanitize and 600 or 120)
  local env = ""
  local ulimit = ""
  if sanitize then
    -- ASan reserves terabytes of address space: no ulimit -v; huge allocations fail instead
    env = "ASAN_OPTIONS=" .. sh_quote((os.getenv("ASAN_OPTIONS") or "")
      .. ":allocator_may_return_null=1:max_allocation_size_mb=3072") .. " "
  else
    ulimit = "ulimit -v 4194304; " -- 4 GiB: a huge allocation fails instead of eating the machine
  end
  return ("cd %s && %s%sexec timeout -s KILL %d %s %s %s > /dev/null 2> %s"):format(sh_quote(dir),
    ulimit, env, limit, sh_quote(bin), sh_quote(here .. "/child.lua"), args, sh_quote(errfile))
end

-- Runs a shell command; returns the exit code (128 + n when killed by signal n).
local function status_of(cmd)
  local ok, how, code = os.execute(cmd)
  if ok then return 0 end
  if how == "signal" then return 128 + code end
  return code
end

-- The lines a child prints in `mode` (child.lua list or valid); `what` names the job in the error
-- when the child fails.
local function child_lines(bin, dir, mode, what)
  local errfile = dir .. "/" .. mode .. ".err"
  local cmd = child_cmd(bin, dir, mode .. " " .. sh_quote(dir), errfile):gsub("> /dev/null", "> "
    .. sh_quote(dir .. "/" .. mode .. ".out"))
  local code = status_of(cmd)
  assert(code == 0, "the fuzz child could not " .. what .. " (exit " .. code .. "): "
    .. tostring(read(errfile)))
  local lines = {}
  for line in (read(dir .. "/" .. mode .. ".out") or ""):gmatch("[^\n]+") do
    lines[#lines + 1] = line
  end
  return lines
end

function M.list(bin, dir)
  local fns = {}
  for _, line in ipairs(child_lines(bin, dir, "list", "list the functions")) do
    local name, n, seeded = line:match("^(%S+)\t(%d+)\t(%d)$")
    if name then fns[#fns + 1] = { name = name, cases = tonumber(n), seeded = seeded == "1" } end
  end
  return fns
end

-- The seed calls and variants that their functions refuse (child.lua valid), one line each:
-- "<name>\t<case>\t<error>".
function M.refused(bin, dir)
  return child_lines(bin, dir, "valid", "run the seeds")
end

local SANITIZER_MARKS = { "ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
  "SUMMARY: UndefinedBehaviorSanitizer", "SUMMARY: AddressSanitizer" }

local function sanitizer_report(text)
  for _, m in ipairs(SANITIZER_MARKS) do
    local at = text:find(m, 1, true)
    if at then
      local line = text:sub(at):match("^[^\n]*")
      return line
    end
  end
  return nil
end

local function now()
  local ok, uv = pcall(require, "luv")
  if ok then return uv.hrtime() / 1e9 end
  return os.time()
end

-- Runs the cases of fn (from list), or the sample of step n, in children; returns the report.
function M.run(bin, dir, fn, step)
  step = step or 1
  local r = { name = fn.name, cases = M.sampled(fn, step), of = fn.cases, children = 0,
    deaths = {}, hangs = {}, sanitizer = {}, raw = {}, harness = {}, config = {} }
  local t0 = now()
  local safe = fn.name:gsub("[^%w]", "_")
  local progress, findings, errfile = dir .. "/" .. safe .. ".progress",
    dir .. "/" .. safe .. ".findings", dir .. "/" .. safe .. ".err"
  os.remove(findings)
  local first = first_case(fn, step)
  while first <= fn.cases do
    os.remove(progress)
    r.children = r.children + 1
    local code = status_of(child_cmd(bin, dir, ("run %s %s %d %d %d %s %s"):format(sh_quote(dir),
      sh_quote(fn.name), first, fn.cases, step, sh_quote(progress), sh_quote(findings)),
      errfile))
    local p = read(progress) or ""
    local err = read(errfile) or ""
    local report = sanitizer_report(err)
    if p == "done" then
      if code ~= 0 or report then
        -- after the last case: a leak report at exit, or an exit status of its own
        r.sanitizer[#r.sanitizer + 1] = ("cases %d..%d: exit %d at the end: %s"):format(first,
          fn.cases, code, report or err:sub(1, 300))
      end
      break
    end
    local i, desc = p:match("^(%d+)\t(.*)$")
    i = tonumber(i)
    if not i then
      -- it died before its first case: nothing to blame a case for; stop this function
      r.harness[#r.harness + 1] = ("the child did not start (exit %d): %s"):format(code,
        err:sub(1, 300))
      break
    end
    local what = ("case %d (%s)"):format(i, desc)
    if code == 137 then
      r.hangs[#r.hangs + 1] = what .. ": no answer within the time limit"
    elseif report then
      r.sanitizer[#r.sanitizer + 1] = what .. ": " .. report
    elseif code > 128 then
      r.deaths[#r.deaths + 1] = ("%s: killed by signal %d"):format(what, code - 128)
    else
      r.deaths[#r.deaths + 1] = ("%s: the process ended with exit %d: %s"):format(what, code,
        err:gsub("\n", " "):sub(1, 300))
    end
    first = i + step
  end
  for line in (read(findings) or ""):gmatch("[^\n]+") do
    local i, desc, rest = line:match("^(%d+)\t([^\t]*)\t(.*)$")
    local entry = ("case %s (%s): %s"):format(i or "?", desc or "?", rest or line)
    if rest and rest:match("^harness: ") then r.harness[#r.harness + 1] = entry
    elseif rest and rest:match("^config: ") then r.config[#r.config + 1] = entry
    else r.raw[#r.raw + 1] = entry end
  end
  r.seconds = now() - t0
  return r
end

return M

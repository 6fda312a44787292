-- One child process of the fuzz test (started by tests/fuzz/driver.lua through the roper binary):
--
--   roper tests/fuzz/child.lua list <dir>
--       prints "<name>\t<cases>\t<seeded>" for every function
--   roper tests/fuzz/child.lua valid <dir>
--       runs every function's seed call and variants (cases.valid_cases) and prints
--       "<name>\t<case>\t<error>" for each one the function refuses
--   roper tests/fuzz/child.lua run <dir> <name> <first> <last> <step> <progress> <findings>
--       runs cases first, first + step, ... up to last of function <name> (step > 1: the sample
--       of FUZZ_SAMPLE, tests/fuzz/driver.lua); before each case it writes
--       "<case>\t<description>" to <progress> (so that the driver can name the case that killed
--       or hung the process), appends "<case>\t<description>\t<problem>" to <findings> for an error
--       message no bad argument may produce, and writes "done" to <progress> at the end.
--
-- <dir> is the fuzz folder (special files, a corpus, a checkpoint, a safetensors and a .npy file)
-- and the working directory, so that whatever a case writes under a relative name lands there.
-- A <name> of the file fuzzer ("file:npy", tests/fuzz/files.lua) runs that kind's forged files:
-- a case's call returns nil or "<class>: <problem>", which goes to <findings> as it is.
-- Each case has a time budget of FUZZ_CASE_SECONDS (default 0.5) of Lua execution: a call that is
-- valid but long (an experiment with a large value) is stopped by a hook and counts as done, not
-- as a hang.
local here = arg[0]:match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. here .. "/../lua/?.lua;" .. package.path
local rp = require "roper"
local uv = require "luv"
local cases = require "cases"
local files = require "files"

local mode, dir = arg[1], arg[2]

-- Objects the cases need, made afresh for each case.
local ctx = { dir = dir, corpus = dir .. "/corpus.txt", checkpoint = dir .. "/model.ckpt",
  safetensors = dir .. "/model.safetensors", npy = dir .. "/t.npy", tokmodel = dir .. "/tok.model",
  lm_ids = dir .. "/lmids", lm_corpus = dir .. "/lmcorpus" }
function ctx.model(vocab, seq_len, attention)
  return rp.model { vocab = vocab or 5, d_model = 8, heads = 2, layers = 1, d_ff = 8,
    seq_len = seq_len or 8, max_batch = 2, attention = attention }
end

local function find(name)
  for _, fn in ipairs(cases.functions(rp)) do
    if fn.name == name then return fn end
  end
  error("no function " .. name)
end

if mode == "list" then
  for _, fn in ipairs(cases.functions(rp)) do
    print(("%s\t%d\t%d"):format(fn.name, cases.count(rp, ctx, fn), cases.has_seed(rp, fn) and 1 or 0))
  end
  os.exit(0)
end

if mode == "valid" then
  for _, fn in ipairs(cases.functions(rp)) do
    for _, i in ipairs(cases.valid_cases(rp, ctx, fn)) do
      local desc, call = cases.case(rp, ctx, fn, i)
      local ok, err = call()
      if not ok then
        print((("%s\t%s\t%s"):format(fn.name, desc, tostring(err)):gsub("\n", " ")))
      end
      collectgarbage()
    end
  end
  os.exit(0)
end

assert(mode == "run", "usage: child.lua list|valid|run ...")
local is_file = files.is_kind(arg[3])
local fn = is_file and { name = arg[3] } or find(arg[3])
local first, last = math.tointeger(tonumber(arg[4])), math.tointeger(tonumber(arg[5]))
local step = math.tointeger(tonumber(arg[6]))
local progress_path, findings_path = arg[7], arg[8]
local findings = assert(io.open(findings_path, "a"))
findings:setvbuf("line")
local budget = tonumber(os.getenv("FUZZ_CASE_SECONDS") or "") or 0.5

local function progress(text)
  local f = assert(io.open(progress_path, "w"))
  f:write(text)
  f:close()
end

for i = first, last, step do
  local made, desc, call
  if is_file then made, desc, call = pcall(files.case, rp, ctx, fn.name, i)
  else made, desc, call = true, cases.case(rp, ctx, fn, i) end
  if not made then -- forging the file failed: the harness's problem, named as such
    local why = tostring(desc):gsub("\n", " ")
    findings:write(("%d\tforging the file\tharness: %s\n"):format(i, why))
    desc, call = "forging the file failed", function() return nil end
  end
  progress(("%d\t%s"):format(i, desc))
  local deadline = uv.hrtime() + budget * 1e9
  -- the hook removes itself when it fires, so it fires once; when that is just after the call
  -- returned (a loaded machine), before the hook is removed, the enclosing pcall catches it and
  -- the case counts as stopped by its budget, as one that fires inside the call does
  debug.sethook(function()
    if uv.hrtime() > deadline then
      debug.sethook()
      error("fuzz budget", 2)
    end
  end, "", 100)
  -- call() returns pcall(fn, ...): true and the results, or false and the error message
  local outer
  local in_time = pcall(function()
    outer = table.pack(pcall(call))
    debug.sethook()
  end)
  debug.sethook()
  if not in_time then outer = outer or table.pack(false, "fuzz budget") end
  local line
  if not outer[1] then
    -- building the case's arguments failed: a problem of the harness, reported as such
    if not tostring(outer[2]):find("fuzz budget", 1, true) then
      line = ("%d\t%s\tharness: %s"):format(i, desc, tostring(outer[2]))
    end
  elseif is_file then
    if outer[2] then line = ("%d\t%s\t%s"):format(i, desc, outer[2]) end
  elseif not outer[2] then
    local why = cases.raw_error(outer[3])
    if why then line = ("%d\t%s\t%s: %s"):format(i, desc, why, tostring(outer[3])) end
  end
  if line then findings:write((line:gsub("\n", " ")), "\n") end
  -- drop what the case made (released or not) before the next one
  collectgarbage()
end
findings:close()
progress("done")

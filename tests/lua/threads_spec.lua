-- The environment the roper binary starts with (core/sys/blas.c: rp_blas_fix_env):
-- OMP_WAIT_POLICY=passive and the OpenBLAS kernels only when the user set nothing (or a value
-- naming slower kernels than the CPU runs, which roper drops unless ROPER_KEEP_CORETYPE is set),
-- what `roper -v`, --blas-env, rp.blas.core() and rp.blas.threads() tell, and that sweep.lua --jobs
-- N gives each run (cores / N) threads. The binary is ROPER_BIN (default build/roper); every
-- command starts from an environment without the variables (tests/with_blas_env may have set them
-- for busted).
local cjson = require "cjson"
local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local sh_quote, run, tmpdir = h.sh_quote, h.run, h.tmpdir

local BIN = h.BIN

-- every variable the tests set or that roper sets, removed first
local CLEAN = "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u ROPER_OMP_WAIT_POLICY "
  .. "-u OPENBLAS_CORETYPE -u ROPER_BLAS_DETECTED -u ROPER_BLAS_REPLACED -u ROPER_KEEP_CORETYPE "
  .. "-u OMP_NUM_THREADS "

-- runs `roper -e code` with extra "NAME=value" assignments; returns stdout, stderr, exit code
local function roper(vars, code)
  return run(CLEAN .. vars .. " " .. sh_quote(BIN) .. " -e " .. sh_quote(code))
end

-- Prescott (SSE3) runs on every x86-64 CPU roper builds for; on one with AVX2 and FMA the kernel
-- rule names faster kernels, so roper drops OPENBLAS_CORETYPE=Prescott unless told to keep it
local flags = (io.open("/proc/cpuinfo"):read("a"):match("\nflags%s*:([^\n]*)") or "") .. " "
local fast_cpu = flags:find(" avx2 ", 1, true) and flags:find(" fma ", 1, true)

-- the portable build (make PORTABLE=1 test) runs OpenBLAS's Haswell kernels whatever the
-- environment or the CPU: there the tests of the kernel rule check that instead
local portable = (run(CLEAN .. sh_quote(BIN) .. ' -e "print(rp.build_info().build)"')) == "portable\n"
local PORTABLE_SET = "set by roper: the portable build runs OpenBLAS's Haswell kernels on every CPU "
  .. "(its results are the same on every x86-64-v3 machine)"

local SHOW = 'print(os.getenv"OMP_WAIT_POLICY", os.getenv"GOMP_SPINCOUNT", select(2, rp.blas.threads()))'

describe("the roper binary's OpenMP wait policy", function()
  it("is passive when the user set neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT", function()
    local out, err, code = roper("", SHOW)
    assert.are.equal(0, code, err)
    assert.are.equal("passive\tnil\tpassive (set by roper)\n", out)
  end)

  it("keeps the user's OMP_WAIT_POLICY", function()
    local out, err, code = roper("OMP_WAIT_POLICY=active", SHOW)
    assert.are.equal(0, code, err)
    assert.are.equal("active\tnil\tactive (set by the user: OMP_WAIT_POLICY=active)\n", out)
  end)

  it("sets no policy when the user set GOMP_SPINCOUNT", function()
    local out, err, code = roper("GOMP_SPINCOUNT=1000", SHOW)
    assert.are.equal(0, code, err)
    assert.are.equal("nil\t1000\tspin count 1000 (set by the user: GOMP_SPINCOUNT=1000)\n", out)
  end)

  it("reaches the processes a script starts", function()
    local out, err, code = roper("", 'local p = io.popen("printenv OMP_WAIT_POLICY") '
      .. 'io.write(p:read("a")) p:close()')
    assert.are.equal(0, code, err)
    assert.are.equal("passive\n", out)
  end)
end)

describe("the roper binary's OpenBLAS kernels", function()
  local SHOW_CORE = 'print(os.getenv"OPENBLAS_CORETYPE", os.getenv"ROPER_BLAS_REPLACED", rp.blas.core())'
  local NOTE = ", in place of OPENBLAS_CORETYPE=Prescott from the environment (slower kernels on "
    .. "this CPU; ROPER_KEEP_CORETYPE=1 keeps such a value)"

  it("keeps the user's OPENBLAS_CORETYPE with ROPER_KEEP_CORETYPE and says so", function()
    local out, err, code = roper("ROPER_KEEP_CORETYPE=1 OPENBLAS_CORETYPE=Prescott", SHOW_CORE)
    assert.are.equal(0, code, err)
    if portable then -- kept nowhere: the portable build's kernels are Haswell
      assert.are.equal("Haswell\tPrescott\tHaswell\t" .. PORTABLE_SET .. ", in place of "
        .. "OPENBLAS_CORETYPE=Prescott from the environment\n", out)
      return
    end
    assert.are.equal("Prescott\tnil\tPrescott\tset by the user: OPENBLAS_CORETYPE=Prescott\n", out)
  end)

  it("drops an OPENBLAS_CORETYPE that names slower kernels than the CPU runs, and says so", function()
    local out, err, code = roper("OPENBLAS_CORETYPE=Prescott", SHOW_CORE)
    assert.are.equal(0, code, err)
    if portable then
      assert.are.equal("Haswell\tPrescott\tHaswell\t" .. PORTABLE_SET .. ", in place of "
        .. "OPENBLAS_CORETYPE=Prescott from the environment\n", out)
      return
    end
    if not fast_cpu then -- Prescott is the best this CPU has: kept
      assert.are.equal("Prescott\tnil\tPrescott\tset by the user: OPENBLAS_CORETYPE=Prescott\n", out)
      return
    end
    local env, replaced, core, why = out:match("^(%S+)\t(%S+)\t(%S+)\t([^\n]+)\n$")
    assert.is_truthy(env, out)
    assert.are.equal("Prescott", replaced)
    assert.are_not.equal("Prescott", core)
    -- OpenBLAS chose by itself (the variable unset), or roper set the rule's kernels
    if env == "nil" then
      assert.are.equal("chosen by OpenBLAS for this CPU" .. NOTE, why)
    else
      assert.are.equal(core, env)
      assert.is_truthy(why:match("^set by roper: ") and why:sub(-#NOTE) == NOTE, why)
    end
  end)

  it("tests/with_blas_env replaces such a value in the environment it passes on", function()
    local out, err, code = run(CLEAN .. "OPENBLAS_CORETYPE=Prescott tests/with_blas_env "
      .. "printenv OPENBLAS_CORETYPE ROPER_BLAS_REPLACED")
    assert.are.equal(0, code, err)
    if portable then
      assert.are.equal("Haswell\nPrescott\n", out)
      assert.are.equal("with_blas_env: OPENBLAS_CORETYPE=Haswell in place of Prescott from the "
        .. "environment (the portable build's kernels on every CPU)\n", err)
      local _, err2, code2 = run(CLEAN .. "tests/with_blas_env true")
      assert.are.equal(0, code2, err2)
      assert.are.equal("with_blas_env: OPENBLAS_CORETYPE=Haswell (the portable build's kernels on "
        .. "every CPU)\n", err2)
      return
    end
    if not fast_cpu then
      assert.are.equal("Prescott\n", out)
      return
    end
    local core = out:match("^(%S+)\nPrescott\n$")
    assert.is_truthy(core and core ~= "Prescott", out)
    assert.are.equal("with_blas_env: OPENBLAS_CORETYPE=" .. core .. " in place of Prescott from the "
      .. "environment (slower kernels here; ROPER_KEEP_CORETYPE=1 keeps such a value)\n", err)
  end)

  -- A plain lua5.4 cannot change the kernels once OpenBLAS has loaded: loading the module warns.
  -- An LD_PRELOAD shim makes OpenBLAS report Prescott (as 0.3.21 does on CPUs it does not know);
  -- every x86-64 CPU roper builds for with AVX2 and FMA then wants Haswell or SkylakeX. Not under
  -- SANITIZE=1: lua5.4 needs the sanitizer runtimes preloaded first there.
  local sanitized = (os.getenv("BUILD") or "build"):match("build%-san/?$")
  local pit = sanitized and pending or it
  pit("loading the module under slower kernels warns once, naming the kernels and the fix", function()
    local dir = tmpdir()
    local shim = dir .. "/shim.so"
    local _, err, code = run("printf 'char *openblas_get_corename(void) { return \"Prescott\"; }\\n' > "
      .. sh_quote(dir .. "/shim.c") .. " && cc -shared -fPIC -o " .. sh_quote(shim) .. " "
      .. sh_quote(dir .. "/shim.c"))
    assert.are.equal(0, code, err)
    local build = os.getenv("BUILD") or "build"
    local out
    out, err, code = run(CLEAN .. "LD_PRELOAD=" .. sh_quote(shim) .. " LUA_CPATH="
      .. sh_quote(build .. "/?.so;;") .. " lua5.4 -e "
      .. sh_quote('local rp = require "roper" package.loaded.roper = nil require "roper" '
        .. 'print(rp.blas.wanted_coretype())'))
    h.remove_tree(dir)
    assert.are.equal(0, code, err)
    if portable then
      assert.are.equal("Haswell\n", out)
      assert.are.equal("roper: OpenBLAS 0.3.21 runs its Prescott kernels, chosen by OpenBLAS, not "
        .. "the portable build's Haswell kernels: its results are not the same on every machine "
        .. "then; start with OPENBLAS_CORETYPE=Haswell (the roper REPL does this itself)\n", err)
      return
    end
    local want = out:match("^(%S+)\n$")
    assert.is_truthy(want == "SkylakeX" or want == "Haswell", out)
    local what = want == "SkylakeX" and "AVX-512" or "AVX2"
    assert.are.equal("roper: OpenBLAS 0.3.21 runs its Prescott kernels, chosen by OpenBLAS, slower than "
      .. want .. " on this " .. what .. " CPU that OpenBLAS does not know (it falls back to "
      .. "Prescott): start with OPENBLAS_CORETYPE=" .. want .. " (the roper REPL does this itself)\n",
      err)
  end)

  -- tests/with_blas_env asks $BUILD/roper (default build/) for the variables: a make target of
  -- another variant (PORTABLE=1, whose rule is Haswell's kernels everywhere) must name its own
  -- build, or the native build's rule is applied and reported (or nothing, where build/ is absent)
  it("every make target passes its own build folder to tests/with_blas_env", function()
    for _, variant in ipairs { { "PORTABLE=1", "build-portable" }, { "", "build" } } do
      -- (the variables of the make that runs the tests, SANITIZE=1 say, removed first)
      local out, err, code = run(CLEAN .. "-u MAKEFLAGS -u MFLAGS -u MAKEOVERRIDES -u MAKELEVEL "
        .. "-u SANITIZE -u PORTABLE -u BUILD make -n --no-print-directory bench bench-torch run "
        .. "test-cluster " .. variant[1] .. " 2>&1")
      assert.are.equal(0, code, err .. out)
      local n = 0
      for line in out:gmatch("[^\n]+") do
        if line:find("tests/with_blas_env ", 1, true) then
          n = n + 1
          assert.truthy(line:find("BUILD=" .. variant[2] .. " tests/with_blas_env ", 1, true),
            variant[1] .. ": " .. line)
        end
      end
      assert.are.equal(9, n, out)
    end
  end)

  it("rp.blas.core() names the kernels and why they run", function()
    local out, err, code = roper("", 'local c, why = rp.blas.core() print(c) print(why)')
    assert.are.equal(0, code, err)
    local core, why = out:match("^([^\n]+)\n([^\n]+)\n$")
    assert.is_truthy(core, out)
    -- roper set the variable, or OpenBLAS's own choice was the fastest it has
    assert.is_truthy(why == "chosen by OpenBLAS for this CPU" or why:match("^set by roper: "), why)
  end)
end)

describe("roper -v and --blas-env", function()
  it("-v tells the kernels, why, and the wait policy", function()
    local out, err, code = run(CLEAN .. sh_quote(BIN) .. " -v")
    assert.are.equal(0, code, err)
    local core = out:match("^roper [^\n]* OpenBLAS core (%S+), %d+ threads?\n")
    assert.is_truthy(core, out)
    assert.is_truthy(out:find("\n  kernels: " .. core .. " %((.-)%)\n"), out)
    assert.is_truthy(out:find("\n  OpenMP wait policy: passive (set by roper)\n", 1, true), out)
  end)

  it("--blas-env prints only what is not set yet", function()
    local out, err, code = run(CLEAN .. sh_quote(BIN) .. " --blas-env")
    assert.are.equal(0, code, err)
    assert.is_truthy(out:find("^OMP_WAIT_POLICY=passive\n") or out:find("\nOMP_WAIT_POLICY=passive\n"),
      out)
    assert.is_truthy(out:find("ROPER_OMP_WAIT_POLICY=passive\n", 1, true), out)
    out, err, code = run(CLEAN .. "OMP_WAIT_POLICY=active GOMP_SPINCOUNT=5 OPENBLAS_CORETYPE=Prescott "
      .. "ROPER_KEEP_CORETYPE=1 " .. sh_quote(BIN) .. " --blas-env")
    assert.are.equal(0, code, err)
    if portable then -- Haswell in place of the user's value, with the markers
      assert.is_truthy(out:match("^OPENBLAS_CORETYPE=Haswell\nROPER_BLAS_DETECTED=%S+\n"
        .. "ROPER_BLAS_REPLACED=Prescott\n$"), out)
      return
    end
    assert.are.equal("", out)
  end)

  it("--blas-env and --blas-coretype name the kernels that replace a dropped value", function()
    local vars = CLEAN .. "OMP_WAIT_POLICY=active OPENBLAS_CORETYPE=Prescott "
    local out, err, code = run(vars .. sh_quote(BIN) .. " --blas-env")
    assert.are.equal(0, code, err)
    local core_out
    core_out, err, code = run(vars .. sh_quote(BIN) .. " --blas-coretype")
    assert.are.equal(0, code, err)
    if not fast_cpu then
      assert.are.equal("", out)
      assert.are.equal("", core_out)
      return
    end
    local core, detected = out:match("^OPENBLAS_CORETYPE=(%S+)\nROPER_BLAS_DETECTED=(%S+)\n"
      .. "ROPER_BLAS_REPLACED=Prescott\n$")
    -- detected is OpenBLAS's own choice: Prescott itself on a CPU it does not know (0.3.21 on
    -- an Emerald Rapids Xeon, family 6 model 207), where the rule names SkylakeX
    assert.is_truthy(core and core ~= "Prescott" and detected, out)
    assert.are.equal(core .. "\n", core_out)
  end)
end)

describe("sweep.lua --jobs", function()
  local dir = tmpdir()
  local TINY = "--steps 1 --d-model 16 --heads 2 --layers 1 --seq-len 32 --batch 2 --problems 1 "
    .. "--valid-batches 1 --quiet"

  -- the threads each run of a 2-point sweep reported in its result file
  local function sweep_threads(name, extra)
    local out = dir .. "/" .. name
    -- nproc (and so the cores a script shares out) follows OMP_NUM_THREADS: 4 cores
    local _, err, code = run(CLEAN .. "OMP_NUM_THREADS=4 " .. sh_quote(BIN)
      .. " scripts/sweep.lua --grid seed=1,2 " .. TINY .. " " .. extra .. " --out "
      .. sh_quote(out))
    assert.are.equal(0, code, err)
    local got = {}
    for _, seed in ipairs { 1, 2 } do
      local f = assert(io.open(out .. "/runs/seed-" .. seed .. ".json"))
      got[seed] = cjson.decode(f:read("a")).threads
      f:close()
    end
    return got
  end

  it("gives each run cores / jobs threads", function()
    assert.are.same({ 2, 2 }, sweep_threads("j2", "--jobs 2"))
    assert.are.same({ 1, 1 }, sweep_threads("j4", "--jobs 4"))
    assert.are.same({ 4, 4 }, sweep_threads("j1", "--jobs 1"))
  end)

  it("leaves a given --threads alone", function()
    assert.are.same({ 3, 3 }, sweep_threads("t3", "--jobs 2 --threads 3"))
  end)

  -- (issue 12: a printed command says its threads; before, it left them to the machine)
  it("writes cores / jobs threads into the commands it prints, explicitly", function()
    local function printed(name, extra)
      local out = dir .. "/" .. name
      local so, err, code = run(CLEAN .. "OMP_NUM_THREADS=4 " .. sh_quote(BIN)
        .. " scripts/sweep.lua --grid seed=1 " .. extra .. " " .. TINY .. " --print-commands --out "
        .. sh_quote(out))
      assert.are.equal(0, code, err)
      local f = assert(io.open(out .. "/runs/seed-1.cfg.json"))
      local cfg = cjson.decode(f:read("a"))
      f:close()
      return tonumber(so:match(" %-%-threads (%d+) %-%-quiet\n$")), cfg.threads
    end
    assert.are.same({ 2, 2 }, { printed("printed-j2", "--jobs 2") })
    assert.are.same({ 4, 4 }, { printed("printed-j1", "--jobs 1") })
    assert.are.same({ 3, 3 }, { printed("printed-t3", "--jobs 2 --threads 3") })
  end)

  teardown(function() h.remove_tree(dir) end)
end)

-- The portable build (make PORTABLE=1, build-portable/; core/sys/build.h): -march=x86-64-v3 and
-- OpenBLAS's Haswell kernels on every CPU, whatever the environment asks, so that a run gives the
-- same bits on every x86-64-v3 machine. tests/portable/run.lua trains two short runs (rope,
-- roper) and prints every loss in hexadecimal and a hash of the final weights' bits; the text
-- must equal tests/fixtures/portable/run.txt, made on another machine (an Emerald Rapids Xeon,
-- AVX-512; `make test` builds build-portable/roper). tests/portable/block.lua does the same for
-- the transformer block over many configs (forward, training steps, decoding):
-- tests/fixtures/portable/block.txt. Pending on a CPU below x86-64-v3.
local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local sh_quote, run, read = h.sh_quote, h.run, h.read

local root = dir_of .. "../../"
local BIN = root .. "build-portable/roper"
local FIXTURE = root .. "tests/fixtures/portable/run.txt"
local SCRIPT = root .. "tests/portable/run.lua"
local BLOCK_FIXTURE = root .. "tests/fixtures/portable/block.txt"
local BLOCK_SCRIPT = root .. "tests/portable/block.lua"

-- every variable roper or the tests set, removed first
local CLEAN = "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u ROPER_OMP_WAIT_POLICY "
  .. "-u OPENBLAS_CORETYPE -u ROPER_BLAS_DETECTED -u ROPER_BLAS_REPLACED -u ROPER_KEEP_CORETYPE "
  .. "-u OMP_NUM_THREADS "

-- the portable build needs x86-64-v3 (h.x86_64_v3: whether this CPU has it, by the build's own
-- check when it is built, and its flags)
local v3, flags = h.x86_64_v3(BIN)

-- the first line where two texts differ, for the failure message
local function first_difference(a, b)
  local la, lb = {}, {}
  for l in (a .. "\n"):gmatch("(.-)\n") do la[#la + 1] = l end
  for l in (b .. "\n"):gmatch("(.-)\n") do lb[#lb + 1] = l end
  for i = 1, math.max(#la, #lb) do
    if la[i] ~= lb[i] then
      return ("line %d: expected %q, got %q"):format(i, la[i] or "<none>", lb[i] or "<none>")
    end
  end
  return "no difference"
end

describe("the portable build", function()
  if not v3 then
    pending("this CPU is below x86-64-v3 (" .. flags .. "): the portable build cannot run here")
    return
  end

  local function fingerprint(vars, script)
    local out, err, code = run(CLEAN .. (vars or "") .. " " .. sh_quote(BIN) .. " "
      .. sh_quote(script or SCRIPT))
    assert.are.equal(0, code, err)
    return out
  end

  it("reproduces the committed run bit for bit", function()
    local want = assert(read(FIXTURE))
    local got = fingerprint()
    assert.is_true(got == want, first_difference(want, got))
  end)

  it("reproduces the block's forward, training and decoding bit for bit", function()
    local want = assert(read(BLOCK_FIXTURE))
    local got = fingerprint(nil, BLOCK_SCRIPT)
    assert.is_true(got == want, first_difference(want, got))
  end)

  it("runs the Haswell kernels whatever OPENBLAS_CORETYPE and ROPER_KEEP_CORETYPE say", function()
    local want = assert(read(FIXTURE))
    for _, vars in ipairs { "OPENBLAS_CORETYPE=SkylakeX", "OPENBLAS_CORETYPE=Prescott",
      "ROPER_KEEP_CORETYPE=1 OPENBLAS_CORETYPE=Zen" } do
      local got = fingerprint(vars)
      assert.is_true(got == want, vars .. ": " .. first_difference(want, got))
    end
    local out, err, code = run(CLEAN .. "OPENBLAS_CORETYPE=SkylakeX " .. sh_quote(BIN)
      .. " -e " .. sh_quote("print(rp.blas.core())"))
    assert.are.equal(0, code, err)
    assert.are.equal("Haswell\tset by roper: the portable build runs OpenBLAS's Haswell kernels "
      .. "on every CPU (its results are the same on every x86-64-v3 machine), in place of "
      .. "OPENBLAS_CORETYPE=SkylakeX from the environment\n", out)
  end)

  it("says what it is: rp.build_info(), roper -v and the provenance of runs", function()
    local out, err, code = run(CLEAN .. sh_quote(BIN) .. " -e " .. sh_quote(
      "local b = rp.build_info() print(b.build, b.target) "
      .. "package.path = " .. ("%q"):format(root .. "scripts/lib/?.lua;") .. " .. package.path "
      .. "print(require('provenance').collect(rp).build)"))
    assert.are.equal(0, code, err)
    assert.are.equal("portable\tx86-64-v3\nportable (-march=x86-64-v3)\n", out)
    out, err, code = run(CLEAN .. sh_quote(BIN) .. " -v")
    assert.are.equal(0, code, err)
    assert.truthy(out:find("\n  build: portable (-march=x86-64-v3)\n", 1, true), out)
    assert.truthy(out:find("OpenBLAS core Haswell,", 1, true), out)
  end)
end)

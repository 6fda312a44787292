-- Subnormal floats in the kernels (core/sys/fpmode.h): a float32 result below 2^-126 is zero
-- inside roper's kernels (the processor's flush-to-zero and denormals-are-zero modes), while Lua's
-- own numbers keep IEEE's gradual underflow before and after a kernel runs. The references are
-- exp() in double and IEEE arithmetic on Lua's numbers.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local rp = require "roper"

-- one query (D 1, q = 1) over two keys with scores 0 and -80 (scale 1, every key seen): weights
-- 1 / (1 + e^-80) and e^-80 / (1 + e^-80); out = the second weight times v of the second key
local function two_keys(v2)
  local q = rp.tensor({1}):view{1, 1, 1, 1}
  local k = rp.tensor({0, -80}):view{1, 2, 1, 1}
  local v = rp.tensor({0, v2}):view{1, 2, 1, 1}
  return rp.attention(q, k, v, {causal = false, scale = 1}):totable()[1][1][1][1]
end

describe("subnormal floats", function()
  -- fpmode.c sets the mode on x86-64 and aarch64 (the processors roper is built for here)
  local pipe = io.popen("uname -m")
  local arch = pipe:read("l")
  pipe:close()
  local flush = arch == "x86_64" or arch == "aarch64"

  it("are zero in the attention's output: e^-80 * 1e-5 (1.8e-40) gives 0", function()
    local got = two_keys(1e-5)
    if flush then
      assert.are.equal(0, got)
    else
      assert.is_true(got > 0)
    end
  end)

  it("leave the normal range as it was: e^-80 * 1 (1.8e-35) is computed", function()
    local want = math.exp(-80) / (1 + math.exp(-80))
    local got = two_keys(1)
    assert.is_true(math.abs(got - want) <= 2e-7 * want, ("%.9g vs %.9g"):format(got, want))
  end)

  it("stay in Lua's own numbers before and after a kernel ran", function()
    local tiny = 2 ^ -1070
    assert.is_true(tiny / 2 > 0)
    two_keys(1e-5)
    local m = rp.model{vocab = 8, d_model = 8, heads = 2, layers = 1, d_ff = 16, seq_len = 4,
                       pe = "roper"}
    m:loss({{1, 2, 3, 4}}, {{2, 3, 4, 5}})
    assert.are.equal(2 ^ -1071, tiny / 2)
    assert.is_true(2 ^ -1074 > 0)
    assert.are.equal(0, 2 ^ -1074 / 2) -- below the smallest double: IEEE rounds to 0 here too
  end)
end)

-- Bad input raises a Lua error that names the problem (never a crash). Table-driven: each case is
-- { description, function, expected }, where expected is the exact message (checked with
-- assert.has_error, which drops the "file:line: " prefix) or, as { pattern = "..." }, a Lua
-- pattern the message (without that prefix) must match.

local rp = require "roper"

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"

local function M23() return rp.tensor { { 1, 2, 3 }, { 4, 5, 6 } } end
local function qkv(Tq, S, D, Dv)
  return rp.zeros { 1, Tq, 2, D }, rp.zeros { 1, S, 2, D }, rp.zeros { 1, S, 2, Dv or D }
end

-- Messages are those of Lua's standard form. For a method call (t:name(x)) Lua counts x as
-- argument #1; for an operator (a + b) the metamethod's arguments are #1 and #2; for t[i] the key
-- is #2 of 'index'; a bad self reads "calling 'name' on bad self (...)".
local cases = {
  -- wrong types
  { "rp.tensor of a string", function() return rp.tensor("abc") end,
    "bad argument #1 to 'tensor' (number, table or tensor expected, got string \"abc\")" },
  { "rp.tensor of a table holding a string", function() return rp.tensor { 1, "x", 3 } end,
    "bad argument #1 to 'tensor' (expected a number at [2], got string \"x\")" },
  { "add with a string", function() return M23():add("x") end,
    "bad argument #1 to 'add' (tensor or number expected, got string \"x\")" },
  { "+ with a string", function() return M23() + "x" end,
    "bad argument #2 to 'add' (tensor or number expected, got string \"x\")" },
  { "full with a string value", function() return rp.full({ 2 }, "x") end,
    "bad argument #2 to 'full' (value must be a number, got string \"x\")" },
  { "matmul with a string", function() return rp.matmul("a", M23()) end,
    "bad argument #1 to 'matmul' (roper.Tensor expected, got string)" },
  { "rope.rotate of a string", function() return rp.rope.rotate("x") end,
    "bad argument #1 to 'rotate' (roper.Tensor expected, got string)" },
  { "attention with a number for k",
    function() local q = rp.zeros { 1, 2, 1, 4 } return rp.attention(q, 3, q) end,
    "bad argument #2 to 'attention' (roper.Tensor expected, got number)" },
  { "rp.rng with a non-integer seed", function() return rp.rng(1.5) end,
    "bad argument #1 to 'rng' (seed must be an integer, got 1.5)" },
  { "t[1.5]", function() return rp.ones { 3 }[1.5] end,
    "bad argument #2 to 'index' (index must be an integer, got 1.5)" },
  { "causal = 1 instead of a boolean",
    function() local q, k, v = qkv(2, 2, 4) return rp.attention(q, k, v, { causal = 1 }) end,
    "bad argument #4 to 'attention' (option 'causal' must be a boolean, got 1)" },

  -- shape mismatches name both shapes
  { "add of [2 x 3] and [4]", function() return M23():add(rp.ones { 4 }) end,
    "bad argument #1 to 'add' (shapes [2 x 3] and [4] do not broadcast)" },
  { "+ of [2 x 3] and [2 x 2]", function() return M23() + rp.ones { 2, 2 } end,
    "bad argument #2 to 'add' (shapes [2 x 3] and [2 x 2] do not broadcast)" },
  { "matmul of [2 x 3] and [4 x 5]", function() return rp.matmul(M23(), rp.ones { 4, 5 }) end,
    "bad argument #2 to 'matmul' (shapes [2 x 3] and [4 x 5] do not fit for matmul (inner sizes 3 and 4))" },
  { "batched matmul with batch dims 2 and 3",
    function() return rp.matmul(rp.ones { 2, 2, 3 }, rp.ones { 3, 3, 2 }) end,
    "bad argument #2 to 'matmul' (batch dims of [2 x 2 x 3] and [3 x 3 x 2] do not broadcast)" },
  { "copy of [4] into [2 x 3]", function() return M23():copy(rp.ones { 4 }) end,
    "bad argument #1 to 'copy' (cannot broadcast [4] to [2 x 3])" },
  { "maxdiff of [2 x 3] and [3 x 2]", function() return M23():maxdiff(M23():t()) end,
    "bad argument #1 to 'maxdiff' (shapes [2 x 3] and [3 x 2] differ)" },
  { "attention with k of another head size",
    function() local q, _, v = qkv(3, 3, 4) return rp.attention(q, rp.zeros { 1, 3, 2, 6 }, v) end,
    "bad argument #2 to 'attention' (expected k as [1 x 3 x 2 x 4], got [1 x 3 x 2 x 6])" },
  { "attention with v of another length",
    function() local q, k = qkv(3, 3, 4) return rp.attention(q, k, rp.zeros { 1, 5, 2, 4 }) end,
    "bad argument #3 to 'attention' (expected v as [1 x 3 x 2 x 4], got [1 x 5 x 2 x 4])" },
  { "attention with a 3-D q",
    function() local _, k, v = qkv(3, 3, 4) return rp.attention(rp.zeros { 3, 2, 4 }, k, v) end,
    "bad argument #1 to 'attention' (expected q as [B x T x H x D], got [3 x 2 x 4])" },

  -- dims and indices out of range
  { "size(5) of a 2-D tensor", function() return M23():size(5) end,
    "bad argument #1 to 'size' (dim 5 out of range for [2 x 3])" },
  { "select on dim 3 of a 2-D tensor", function() return M23():select(3, 1) end,
    "bad argument #1 to 'select' (dim 3 out of range for [2 x 3])" },
  { "select index 3 of a size-2 dim", function() return M23():select(1, 3) end,
    "bad argument #2 to 'select' (index 3 out of range for dim 1 of [2 x 3])" },
  { "narrow past the end", function() return M23():narrow(2, 3, 2) end,
    "bad argument #3 to 'narrow' (length 2 at start 3 out of range for dim 2 of [2 x 3])" },
  { "t[3] of a [2 x 3] tensor", function() return M23()[3] end,
    "bad argument #2 to 'index' (index 3 out of range for dim 1 of [2 x 3])" },
  { "t[0]", function() return M23()[0] end,
    "bad argument #2 to 'index' (index 0 out of range for dim 1 of [2 x 3]; dims and indices are 1-based (1 is the first, -1 the last))" },
  { "t[-3] of a [2 x 3] tensor", function() return M23()[-3] end,
    "bad argument #2 to 'index' (index -3 out of range for dim 1 of [2 x 3])" },
  { "get(3, 1) of a [2 x 3] tensor", function() return M23():get(3, 1) end,
    "bad argument #1 to 'get' (index 3 out of range for dim 1 of [2 x 3])" },
  { "get with one index on a 2-D tensor", function() return M23():get(1) end,
    "bad argument #1 to 'get' (get needs 2 indices for [2 x 3], got 1)" },
  { "transpose(1, 3) of a 2-D tensor", function() return M23():transpose(1, 3) end,
    "bad argument #2 to 'transpose' (dim 3 out of range for [2 x 3])" },
  { "sum over dim 3 of a 2-D tensor", function() return M23():sum(3) end,
    "bad argument #1 to 'sum' (dim 3 out of range for [2 x 3])" },
  { "softmax over dim 0", function() return M23():softmax(0) end,
    "bad argument #1 to 'softmax' (dim 0 out of range for [2 x 3]; dims and indices are 1-based (1 is the first, -1 the last))" },
  { "t[{1, 4}] slice index out of range", function() return M23()[{ 1, 4 }] end,
    "bad argument #2 to 'index' (index 4 out of range for dim 2 of [2 x 3])" },
  -- a 0 where Lua counts from 1 (a PyTorch or NumPy habit) says so, wherever it is given
  { "t[{0}]", function() return M23()[{ 0 }] end,
    "bad argument #2 to 'index' (index 0 out of range for dim 1 of [2 x 3]; dims and indices are 1-based (1 is the first, -1 the last))" },
  { "t[{1, {0}}]", function() return M23()[{ 1, { 0 } }] end,
    "bad argument #2 to 'index' (index 0 out of range for dim 2 of [2 x 3]; dims and indices are 1-based (1 is the first, -1 the last))" },
  { "t[{{0, 1}}]", function() return M23()[{ { 0, 1 } }] end,
    "bad argument #2 to 'index' (range {0, 1} out of range for dim 1 of [2 x 3]; dims and indices are 1-based (1 is the first, -1 the last))" },
  { "t:sub(0, 1)", function() return M23():sub(0, 1) end,
    "bad argument #1 to 'sub' (range 0..1 out of range for dim 1 of [2 x 3]; dims and indices are 1-based (1 is the first, -1 the last))" },
  { "t:narrow(1, 0, 1)", function() return M23():narrow(1, 0, 1) end,
    "bad argument #2 to 'narrow' (start 0 out of range for dim 1 of [2 x 3]; dims and indices are 1-based (1 is the first, -1 the last))" },
  { "t:get(0, 1)", function() return M23():get(0, 1) end,
    "bad argument #1 to 'get' (index 0 out of range for dim 1 of [2 x 3]; dims and indices are 1-based (1 is the first, -1 the last))" },
  { "t:sum(0)", function() return M23():sum(0) end,
    "bad argument #1 to 'sum' (dim 0 out of range for [2 x 3]; dims and indices are 1-based (1 is the first, -1 the last))" },
  { "t:permute(0, 1)", function() return M23():permute(0, 1) end,
    "bad argument #1 to 'permute' (dim 0 out of range for [2 x 3]; dims and indices are 1-based (1 is the first, -1 the last))" },
  { "rotate with dim = 0", function() return rp.rope.rotate(rp.zeros { 4, 6 }, { dim = 0 }) end,
    "bad argument #2 to 'rotate' (option 'dim': dim 0 out of range for [4 x 6]; dims and indices are 1-based (1 is the first, -1 the last))" },
  -- a method called with '.' (x.sum() as in PyTorch) says to use ':'; a function that is also a
  -- method of the module (rp.matmul) does not
  { "x.sum()", function() local x = M23() return x.sum() end,
    "bad argument #1 to 'sum' (roper.Tensor expected, got no value; call methods with ':', as in x:sum())" },
  { "x.sum(2)", function() local x = M23() return x.sum(2) end,
    "bad argument #1 to 'sum' (roper.Tensor expected, got number; call methods with ':', as in x:sum())" },
  { "m.forward({0, 1})", function()
      local m = rp.model { vocab = 3, d_model = 8, heads = 2, layers = 1, d_ff = 8, seq_len = 4, max_batch = 1 }
      return m.forward({ 0, 1 })
    end,
    "bad argument #1 to 'forward' (roper.Model expected, got table; call methods with ':', as in x:forward())" },
  { "rp.matmul() without arguments", function() return rp.matmul() end,
    "bad argument #1 to 'matmul' (roper.Tensor expected, got no value)" },
  -- an argument after the last one a function reads is refused, not dropped
  { "rp.zeros({2}, 3)", function() return rp.zeros({ 2 }, 3) end,
    "bad argument #2 to 'zeros' (unexpected argument after the shape table (3))" },
  { "g:randn({2}, 'x')", function() return rp.rng(1):randn({ 2 }, "x") end,
    "bad argument #2 to 'randn' (unexpected argument after the shape table (string \"x\"))" },
  { "t:view({2}, 1)", function() return rp.zeros(2):view({ 2 }, 1) end,
    "bad argument #2 to 'view' (unexpected argument after the shape table (1))" },
  -- t:dot and t:diag
  { "dot of a matrix", function() return M23():dot(M23()) end,
    "calling 'dot' on bad self (dot takes 1-D tensors, got [2 x 3] (rp.matmul multiplies matrices))" },
  { "dot of vectors of two lengths", function() return rp.ones { 3 }:dot(rp.ones { 2 }) end,
    "bad argument #1 to 'dot' (dot needs two 1-D tensors of one length, got [3] and [2])" },
  { "diag of a 3-D tensor", function() return rp.zeros { 2, 2, 2 }:diag() end,
    "calling 'diag' on bad self (diag takes a 1-D or 2-D tensor, got [2 x 2 x 2])" },
  { "diag with a non-integer k", function() return M23():diag(0.5) end,
    "bad argument #1 to 'diag' (k must be an integer, got 0.5)" },
  { "diag of a vector too far off the diagonal", function() return rp.ones { 2 }:diag(2 ^ 40) end,
    "bad argument #1 to 'diag' (diag of [2] with k = 1099511627776 gives too large a matrix)" },

  -- sizes
  { "negative size", function() return rp.zeros { 2, -1 } end,
    "bad argument #1 to 'zeros' (size 2 must be >= 0, got -1)" },
  { "non-integer size", function() return rp.zeros { 2, 1.5 } end,
    "bad argument #1 to 'zeros' (size 2 must be an integer, got 1.5)" },
  { "nine dims", function() return rp.zeros { 1, 1, 1, 1, 1, 1, 1, 1, 1 } end,
    "bad argument #1 to 'zeros' (shape has 9 dims, at most 8 allowed)" },
  -- an empty shape is held to the limit of its sizes other than 0 (a 0 once lifted it in the
  -- broadcast and matmul checks, and rp.load made such tensors with overflowed strides)
  { "empty shape over the limit", function() return rp.zeros { 0, 2 ^ 32, 2 ^ 32 } end,
    "bad argument #1 to 'zeros' (shape [0 x 4294967296 x 4294967296] has too many elements "
      .. "(more than 2^40))" },
  { "empty broadcast over the limit",
    function() return rp.zeros { 0, 2 ^ 21, 1 } + rp.zeros { 1, 2 ^ 20 } end,
    "bad argument #2 to 'add' (shapes [0 x 2097152 x 1] and [1 x 1048576] broadcast to "
      .. "[0 x 2097152 x 1048576]: too many elements)" },
  { "empty matmul over the limit",
    function() return rp.matmul(rp.zeros { 0, 2 ^ 21, 1 }, rp.zeros { 1, 2 ^ 20 }) end,
    "bad argument #2 to 'matmul' (matmul of [0 x 2097152 x 1] and [1 x 1048576] gives too large "
      .. "a result)" },
  { "ragged nested table", function() return rp.tensor { { 1, 2 }, { 3 } } end,
    "bad argument #1 to 'tensor' (ragged nested table: [2] has 1 entries, expected 2)" },
  { "eye(-1)", function() return rp.eye(-1) end,
    "bad argument #1 to 'eye' (n must be between 0 and 2^20, got -1)" },
  { "range with step 0", function() return rp.range(1, 5, 0) end,
    "bad argument #3 to 'range' (step must be nonzero)" },
  { "linspace with n = -1", function() return rp.linspace(0, 1, -1) end,
    "bad argument #3 to 'linspace' (n must be between 0 and 2^40, got -1)" },
  { "randint with lo > hi", function() return rp.randint(5, 1, { 3 }) end,
    "bad argument #2 to 'randint' (hi must be >= lo, got lo = 5, hi = 1)" },
  { "g:int with lo > hi", function() return rp.rng(1):int(5, 1) end,
    "bad argument #2 to 'int' (hi must be >= lo, got lo = 5, hi = 1)" },
  -- float32 tensors hold every integer up to 2^24: beyond, a drawn integer would be rounded
  { "randint with hi past 2^24", function() return rp.randint(0, 2 ^ 24 + 1, { 3 }) end,
    "bad argument #2 to 'randint' (hi must be between -2^24 and 2^24 (a float32 holds every "
      .. "integer up to 2^24), got 16777217)" },
  { "randint with lo below -2^24", function() return rp.randint(-2 ^ 24 - 1, 0, { 3 }) end,
    "bad argument #1 to 'randint' (lo must be between -2^24 and 2^24 (a float32 holds every "
      .. "integer up to 2^24), got -16777217)" },
  { "g:randint with hi past 2^24", function() return rp.rng(1):randint(0, 2 ^ 25 - 1, { 3 }) end,
    "bad argument #2 to 'randint' (hi must be between -2^24 and 2^24 (a float32 holds every "
      .. "integer up to 2^24), got 33554431)" },
  { "g:int with hi past 2^53", function() return rp.rng(1):int(0, 2 ^ 53 + 2) end,
    "bad argument #2 to 'int' (hi must be between -2^53 and 2^53, got 9007199254740994)" },

  -- views
  { "view of a non-contiguous tensor", function() return M23():t():view { 6 } end,
    "calling 'view' on bad self (view needs a contiguous tensor, got [3 x 2] with strides [1 x 3] "
      .. "(use reshape or contiguous))" },
  { "view with another element count", function() return M23():view { 4, 2 } end,
    "bad argument #1 to 'view' (cannot fit [2 x 3] (6 elements) into shape [4 x 2] (8 elements))" },
  { "view with two -1", function() return rp.zeros { 2, 3, 4 }:view { -1, -1 } end,
    "bad argument #1 to 'view' (only one size may be -1)" },
  { "permute with a repeated dim", function() return M23():permute(1, 1) end,
    "bad argument #2 to 'permute' (dim 1 repeated in permute)" },
  { "permute with too few dims", function() return rp.zeros { 2, 3, 4 }:permute(2, 1) end,
    "bad argument #1 to 'permute' (permute needs 3 dims for [2 x 3 x 4], got 2)" },
  { "item() of a 2-element tensor", function() return rp.ones { 2 }:item() end,
    "calling 'item' on bad self (item() needs a tensor of one element, got [2])" },

  -- rope and attention options
  { "odd d_rot", function() return rp.rope.rotate(rp.zeros { 4, 6 }, { d_rot = 3 }) end,
    "bad argument #2 to 'rotate' (d_rot must be even, got 3)" },
  { "fraction giving an odd d_rot", function() return rp.rope.rotate(rp.zeros { 4, 6 }, { fraction = 0.5 }) end,
    "bad argument #2 to 'rotate' (d_rot must be even, got 3 (from fraction 0.5 of D = 6))" },
  { "fraction giving d_rot 0", function() return rp.rope.rotate(rp.zeros { 4, 6 }, { fraction = 0.1 }) end,
    "bad argument #2 to 'rotate' (d_rot must be at least 2, got 0 (from fraction 0.1 of D = 6))" },
  { "d_rot larger than D", function() return rp.rope.rotate(rp.zeros { 4, 6 }, { d_rot = 8 }) end,
    "bad argument #2 to 'rotate' (d_rot must be between 2 and D, got 8 (D = 6))" },
  { "unknown option name", function() return rp.rope.rotate(rp.zeros { 4, 6 }, { fractoin = 0.5 }) end,
    "bad argument #2 to 'rotate' (unknown option 'fractoin' (known: base, pairing, sign, fraction, d_rot, "
      .. "dim, offset, positions, scale, xpos_side, scaling, scaling_factor, orig_len, yarn_alpha, "
      .. "yarn_beta, yarn_ramp, low_freq_factor, high_freq_factor, attention_factor, xpos, "
      .. "xpos_scale_base, rope_scaling, rope_theta, freq, angles, axes, sections, mix))" },
  { "unknown pairing", function() return rp.rope.rotate(rp.zeros { 4, 6 }, { pairing = "zigzag" }) end,
    "bad argument #2 to 'rotate' (option 'pairing' must be one of \"half\", \"interleaved\", got string \"zigzag\")" },
  { "sign 0", function() return rp.rope.rotate(rp.zeros { 4, 6 }, { sign = 0 }) end,
    "bad argument #2 to 'rotate' (option 'sign' must be 1 or -1, got 0)" },
  { "sign 2", function() return rp.rope.rotate(rp.zeros { 4, 6 }, { sign = 2 }) end,
    "bad argument #2 to 'rotate' (option 'sign' must be 1 or -1, got 2)" },
  { "positions of the wrong length",
    function() return rp.rope.rotate(rp.zeros { 4, 6 }, { positions = { 0, 1 } }) end,
    "bad argument #2 to 'rotate' (option 'positions' has 2 entries, expected 4 (the size of dim 1 of [4 x 6]))" },
  { "rotate dim out of range", function() return rp.rope.rotate(rp.zeros { 4, 6 }, { dim = 3 }) end,
    "bad argument #2 to 'rotate' (option 'dim': dim 3 out of range for [4 x 6])" },
  { "theta with an odd d_rot", function() return rp.rope.theta(5) end,
    "bad argument #1 to 'theta' (d_rot must be even, got 5)" },
  { "unknown pe", function() local q, k, v = qkv(2, 2, 4) return rp.attention(q, k, v, { pe = "alibi2" }) end,
    "bad argument #4 to 'attention' (option 'pe' must be one of \"" .. table.concat(h.pe_names(), "\", \"")
      .. "\", got string \"alibi2\")" },
  { "attention with an odd d_rot from fraction_qk",
    function() local q, k, v = qkv(2, 2, 6) return rp.attention(q, k, v, { pe = "rope", fraction_qk = 0.5 }) end,
    "bad argument #4 to 'attention' (d_rot must be even, got 3 (from fraction_qk 0.5 of D = 6))" },
  { "attention with a negative q_offset",
    function() local q, k, v = qkv(2, 2, 4) return rp.attention(q, k, v, { q_offset = -1 }) end,
    "bad argument #4 to 'attention' (option 'q_offset' must be between 0 and 2^53, got -1)" },
  { "attention whose offsets run past 2^53",
    function() local q, k, v = qkv(2, 2, 4) return rp.attention(q, k, v, { pos_offset = 2^53 - 1, q_offset = 1 }) end,
    "bad argument #4 to 'attention' (positions run from pos_offset + q_offset = 9007199254740992 to "
      .. "9007199254740993, past 2^53)" },
  { "rotate whose offset runs past 2^53",
    function() return rp.rope.rotate(rp.zeros { 3, 4 }, { offset = 2^53 - 1 }) end,
    "bad argument #2 to 'rotate' (positions run from offset = 9007199254740991 to 9007199254740993, past 2^53)" },
  { "sinusoidal whose offset runs past 2^53",
    function() return rp.rope.sinusoidal(3, 4, { offset = 2^53 - 1 }) end,
    "bad argument #3 to 'sinusoidal' (positions run from offset = 9007199254740991 to 9007199254740993, past 2^53)" },
  { "linear attention whose q_offset runs past 2^53",
    function() local q, k, v = qkv(2, 2, 4) return rp.linear_attention(q, k, v, { q_offset = 2^53 }) end,
    "bad argument #4 to 'linear_attention' (positions run from q_offset = 9007199254740992 to "
      .. "9007199254740993, past 2^53)" },
  { "attention with an unknown pairing",
    function() local q, k, v = qkv(2, 2, 4) return rp.attention(q, k, v, { pe = "rope", pairing = "zigzag" }) end,
    "bad argument #4 to 'attention' (option 'pairing' must be one of \"half\", \"interleaved\", got string \"zigzag\")" },
}

describe("errors", function()
  it("has at least 30 cases", function() assert.is_true(#cases >= 30) end)

  for _, c in ipairs(cases) do
    local name, fn, expected = c[1], c[2], c[3]
    it(name, function()
      if type(expected) == "string" then
        assert.has_error(fn, expected)
      else
        local ok, err = pcall(fn)
        assert.is_false(ok, "no error raised")
        assert.equal("string", type(err), "error value is not a string")
        assert.matches(expected.pattern, (err:gsub("^.-:%d+: ", "", 1)))
      end
    end)
  end

  it("the module is still usable after errors", function()
    for _, c in ipairs(cases) do pcall(c[2]) end
    collectgarbage()
    assert.equal(6, rp.ones { 2, 3 }:sum())
  end)

  -- The option readers' messages as rp.option_messages() exports them (bindings/args.c's
  -- table, which the PyTorch companion fills too): each template, filled in here by hand, is
  -- word for word what the reader raises for a call that breaks it.
  it("the option readers raise rp.option_messages()'s templates, filled in", function()
    local o = rp.option_messages()
    local marks = {}
    for _, m in ipairs { "key", "got", "names", "help", "type", "field", "what", "index", "n",
      "row", "max", "p", "i", "rows", "half", "A", "dims", "shape", "forms", "noun", "lists",
      "matrix", "number" } do marks[m] = true end
    local n = 0
    for name, t in pairs(o.messages) do -- every mark is a documented one
      n = n + 1
      for m in t:gmatch("{(%w+)}") do assert.is_true(marks[m], name .. ": {" .. m .. "}") end
    end
    assert.equal(47, n)
    assert.same({ max_axes = 3, max_pos = 2 ^ 53 // 1, max_samples = 2 ^ 24 // 1 }, o.bounds)
    assert.same({ "longrope", "su" }, o.hf_unsupported)
    assert.same({ dims = 2, shape = "[axes x pairs]", forms = " of lists", noun = "frequencies" },
      o.tables.mix)
    local function say(name, v)
      return (o.messages[name]:gsub("{(%w+)}", function(k) return v[k] and tostring(v[k]) end))
    end
    local grid = { { 0, 0 }, { 0, 1 }, { 1, 0 }, { 1, 1 } }
    local cases2 = {
      { { d_model = "x" }, "integer", { key = "d_model", got = 'string "x"' } },
      { { dropout = true }, "number", { key = "dropout", got = "boolean" } },
      { { learn_freq = 1 }, "boolean", { key = "learn_freq", got = "1" } },
      { { norm = "mid" }, "enum", { key = "norm", names = '"pre", "post"', got = 'string "mid"' } },
      { { rotate = "qq" }, "rotate", { key = "rotate", got = 'string "qq"' } },
      { { vocab = false }, "integer", { key = "vocab", got = "boolean" } },
      { { vocab = "nil" }, "required", nil },
      { { bogus = 1 }, "unknown", nil },
      { { rope_theta = 2, base = 3 }, "base_exclude", {} },
      { { rope_theta = 0 }, "positive", { key = "rope_theta", got = "0.0" } },
      { { rope_scaling = 2 }, "hf_table", { got = "2" } },
      { { rope_scaling = { rope_type = "linear", factor = 2 }, scaling = "pi" }, "hf_exclude",
        { key = "scaling" } },
      { { rope_scaling = { rope_type = "linear", type = "yarn" } }, "hf_differ", {} },
      { { rope_scaling = { rope_type = 3 } }, "hf_type_string", { got = "3" } },
      { { rope_scaling = { rope_type = "su" } }, "hf_unsupported", { type = "su" } },
      { { rope_scaling = { rope_type = "linear", beta_fast = 2 } }, "hf_nothing",
        { field = "beta_fast", type = "linear" } },
      { { rope_scaling = { rope_type = "linear", factor = "2" } }, "hf_number",
        { field = "factor", got = 'string "2"' } },
      { { rope_scaling = { rope_type = "yarn", factor = 2, truncate = 1 } }, "hf_boolean",
        { field = "truncate", got = "1" } },
      { { rope_scaling = { rope_type = "llama3", factor = 2, low_freq_factor = 1,
        high_freq_factor = 4, original_max_position_embeddings = 0 } }, "hf_integer",
        { field = "original_max_position_embeddings", max = "2147483647", got = "0.0" } },
      { { rope_scaling = { rope_type = "llama3", factor = 2 } }, "hf_needs",
        { type = "llama3", names = "original_max_position_embeddings" } },
      { { rope_scaling = { rope_type = "linear", factor = -2 } }, "hf_range",
        { what = "'factor' must be a finite number > 0, got -2" } },
      { { rope_scaling = { rope_type = "yarn", factor = 2, original_max_position_embeddings = 8,
        attention_factor = 0 } }, "hf_zero", {} },
      { { rope_scaling = { rope_type = "yarn", factor = 4, original_max_position_embeddings = 8,
        mscale = 1, mscale_all_dim = -7.213475204444817 } }, "hf_mscale", { got = "inf" } },
      { { freq = { 1, 2 }, angles = { { 1 } } }, "freq_both", {} },
      { { freq = true }, "table_kind", { key = "freq", forms = o.tables.freq.forms,
        got = "boolean" } },
      { { freq = {} }, "table_empty", { key = "freq" } },
      { { freq = rp.zeros { 2, 2 } }, "table_tensor", { key = "freq", dims = 1, shape = "[n]",
        got = "[2 x 2]" } },
      { { angles = { 1 } }, "table_first", { key = "angles", noun = "angles", got = "1" } },
      { { angles = { { 1, 2 }, { 1 } } }, "table_row", { key = "angles", row = 2, n = 2,
        noun = "angles", got = "table" } },
      { { freq = { 1, math.huge } }, "finite_number",
        { what = say("entry", { key = "freq", index = "[2]" }), got = "inf" } },
      { { angles = function() return "a" end }, "finite_number",
        { what = say("angles_value", { p = 0, i = 0 }), got = 'string "a"' } },
      { { positions = grid, axes = "mixed", mix = { { 1, 2 }, { 1, 2 } } }, "mix_size",
        { rows = 2, n = 2, A = 2, half = 8 } },
      { { positions = "x" }, "pos_kind", { what = "option 'positions'",
        lists = o.messages.pos_lists, matrix = o.messages.pos_matrix, number = "",
        got = 'string "x"' } },
      { { positions = { { 1, 2, 3, 4 } } }, "pos_axes", { what = "option 'positions'", n = 4,
        max = 3 } },
      { { positions = { { 1, 2 }, { 3 } } }, "pos_row", { what = "option 'positions'", row = 2,
        n = 2, got = "table" } },
      { { positions = { { 1, 2 }, { 3, 0.5 } } }, "pos_integer", { what = "option 'positions'",
        index = "[2][2]", got = "0.5" } },
      { { sections = 4 }, "sections", { max = 3, got = "4" } },
      { { sections = { 1, -1 } }, "sections_entry", { row = 2, got = "-1" } },
    }
    for _, c in ipairs(cases2) do
      local cfg = { vocab = 16, d_model = 32, heads = 2, seq_len = 4, pe = "rope" }
      for k, v in pairs(c[1]) do cfg[k] = v end
      if cfg.vocab == "nil" then cfg.vocab = nil end
      local want
      if c[2] == "required" then
        local k = rp.model_keys()[1]
        want = say("required", { key = k.name, help = k.help })
      elseif c[2] == "unknown" then
        local known = {}
        for _, k in ipairs(rp.model_keys()) do known[#known + 1] = k.name end
        for _, k in ipairs { "freq", "angles", "positions", "axes", "sections", "mix",
          "rope_scaling", "rope_theta" } do known[#known + 1] = k end
        want = say("unknown", { key = "bogus", names = table.concat(known, ", ") })
      else
        want = say(c[2], c[3])
      end
      assert.has_error(function() rp.model(cfg) end, "bad argument #1 to 'model' (" .. want .. ")")
    end
  end)
end)

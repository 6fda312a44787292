-- Tensors: constructors, shape queries, indexing and slicing, views, arithmetic, reductions,
-- softmax, matmul, printing, lifetime and random generators. References are plain Lua.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"
local rp = require "roper"
local naive = h.naive

local function M23() return rp.tensor { { 1, 2, 3 }, { 4, 5, 6 } } end

describe("constructors", function()
  it("rp.tensor from a nested table keeps shape and values", function()
    local t = M23()
    assert.same({ 2, 3 }, t:shape())
    assert.same({ { 1, 2, 3 }, { 4, 5, 6 } }, t:totable())
    local t3 = rp.tensor { { { 1, 2 }, { 3, 4 } }, { { 5, 6 }, { 7, 8 } }, { { 9, 10 }, { 11, 12 } } }
    assert.same({ 3, 2, 2 }, t3:shape())
    assert.equal(11, t3:get(3, 2, 1))
  end)

  it("rp.tensor from a flat table, a number and a tensor (copied)", function()
    local v = rp.tensor { 1.5, -2, 3 }
    assert.same({ 3 }, v:shape())
    assert.same({ 1.5, -2, 3 }, v:totable())
    local s = rp.tensor(3.5)
    assert.same({ 1 }, s:shape())
    assert.equal(3.5, s:item())
    local c = rp.tensor(v)
    c:set(1, 100)
    assert.equal(1.5, v:get(1))
    assert.equal(100, c:get(1))
  end)

  it("stores float32: 0.1 is rounded to the nearest float", function()
    local x = rp.tensor { 0.1 }:get(1)
    assert.are_not.equal(0.1, x)
    assert.equal(string.unpack("f", string.pack("f", 0.1)), x)
  end)

  it("zeros, ones and full take a table or numbers", function()
    assert.same({ { 0, 0, 0 }, { 0, 0, 0 } }, rp.zeros { 2, 3 }:totable())
    assert.same({ { 0, 0, 0 }, { 0, 0, 0 } }, rp.zeros(2, 3):totable())
    assert.same({ { 1, 1 }, { 1, 1 } }, rp.ones { 2, 2 }:totable())
    assert.same({ 1, 1, 1 }, rp.ones(3):totable())
    assert.same({ { -7.5, -7.5 } }, rp.full({ 1, 2 }, -7.5):totable())
    assert.same({ 2, 0, 4 }, rp.zeros { 2, 0, 4 }:shape())
    assert.equal(0, rp.zeros { 2, 0, 4 }:numel())
  end)

  it("range includes the end point and takes a step", function()
    assert.same({ 1, 2, 3, 4, 5 }, rp.range(1, 5):totable())
    assert.same({ 5, 3, 1 }, rp.range(5, 1, -2):totable())
    assert.same({ 0, 0.25, 0.5, 0.75, 1 }, rp.range(0, 1, 0.25):totable())
    assert.same({ 2, 4 }, rp.range(2, 5, 2):totable())
    -- the count's tolerance keeps 0.3 in; a last point past b as a float32 is left out
    assert.equal(4, rp.range(0, 0.3, 0.1):numel())
    assert.same({ -1 }, rp.range(-1, -1e-10):totable())
    assert.same({ 1 }, rp.range(1, 1e-12, -1):totable())
    -- integers exact up to 2^24; past it, refused (values would repeat or leave a..b)
    assert.same({ -2 ^ 24, -2 ^ 24 + 1 }, rp.range(-2 ^ 24, -2 ^ 24 + 1):totable())
    assert.has_error(function() return rp.range(2 ^ 24, 2 ^ 24 + 4) end,
      "bad argument #2 to 'range' (a range of integers must stay between -2^24 and 2^24 (a float32 "
        .. "holds every integer up to 2^24), got the last value 16777220)")
    assert.has_error(function() return rp.range(2 ^ 24 + 1, 2 ^ 24 + 3, 2) end,
      "bad argument #1 to 'range' (a range of integers must stay between -2^24 and 2^24 (a float32 "
        .. "holds every integer up to 2^24), got a = 16777217)")
  end)

  it("linspace gives n evenly spaced values with both ends", function()
    h.approx(rp.linspace(0, 1, 5), { 0, 0.25, 0.5, 0.75, 1 }, 0)
    h.approx(rp.linspace(-3, 3, 7), { -3, -2, -1, 0, 1, 2, 3 }, 1e-6)
    assert.equal(11, rp.linspace(2, 12, 11):numel())
    -- b - a beyond a double: each end weighted instead (float32 holds the ends as -inf, inf)
    assert.same({ -math.huge, 0, math.huge }, rp.linspace(-1e308, 1e308, 3):totable())
  end)

  it("eye is the identity", function()
    assert.same({ { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 } }, rp.eye(3):totable())
  end)

  it("rand is uniform in [0, 1) and seeded through an rng", function()
    local a = rp.rand({ 50, 40 }, rp.rng(7))
    local b = rp.rand({ 50, 40 }, rp.rng(7))
    local c = rp.rand({ 50, 40 }, rp.rng(8))
    assert.equal(0, a:maxdiff(b))
    assert.is_true(a:maxdiff(c) > 0.5)
    assert.is_true(a:min() >= 0 and a:max() < 1)
    assert.near(0.5, a:mean(), 0.03)     -- 2000 draws: sd of the mean is 0.0065
    assert.is_true(a:min() < 0.01 and a:max() > 0.99)
  end)

  it("randn is standard normal and seeded", function()
    local a = rp.randn({ 10000 }, rp.rng(3))
    assert.equal(0, a:maxdiff(rp.randn({ 10000 }, rp.rng(3))))
    assert.is_true(a:maxdiff(rp.randn({ 10000 }, rp.rng(4))) > 1)
    assert.near(0, a:mean(), 0.05)
    local var = (a * a):mean() - a:mean() ^ 2
    assert.near(1, math.sqrt(var), 0.05)
  end)

  it("randint's bounds reach 2^24 and its values are exact there; g:int's reach 2^53", function()
    local top = rp.randint(2 ^ 24 - 1, 2 ^ 24, { 200 }, rp.rng(3))
    local low = rp.randint(-2 ^ 24, -2 ^ 24 + 1, { 200 }, rp.rng(3))
    local seen = {}
    for i = 1, 200 do
      local v, w = top[i], low[i]
      assert.is_true(v == 2 ^ 24 - 1 or v == 2 ^ 24, tostring(v))
      assert.is_true(w == -2 ^ 24 or w == -2 ^ 24 + 1, tostring(w))
      seen[v], seen[w] = true, true
    end
    assert.is_true(seen[2 ^ 24 - 1] and seen[2 ^ 24] and seen[-2 ^ 24] and seen[-2 ^ 24 + 1])
    local g = rp.rng(4)
    for _ = 1, 20 do
      local x = g:int(2 ^ 53 - 1, 2 ^ 53)
      assert.is_true(x == 2 ^ 53 - 1 or x == 2 ^ 53)
    end
  end)

  it("randint gives integers lo..hi inclusive, each of them, seeded", function()
    local a = rp.randint(-2, 3, { 2000 }, rp.rng(11))
    assert.equal(0, a:maxdiff(rp.randint(-2, 3, { 2000 }, rp.rng(11))))
    assert.is_true(a:maxdiff(rp.randint(-2, 3, { 2000 }, rp.rng(12))) > 0)
    local seen = {}
    for _, x in ipairs(a:totable()) do
      assert.equal(math.floor(x), x)
      assert.is_true(x >= -2 and x <= 3)
      seen[x] = true
    end
    for v = -2, 3 do assert.is_true(seen[v], "value " .. v .. " never drawn") end
  end)

  it("the default generator is reseeded by rp.seed", function()
    rp.seed(5)
    local a = rp.randn { 6 }
    local a2 = rp.rand { 3 }
    rp.seed(5)
    assert.equal(0, a:maxdiff(rp.randn { 6 }))
    assert.equal(0, a2:maxdiff(rp.rand { 3 }))
    rp.seed(6)
    assert.is_true(a:maxdiff(rp.randn { 6 }) > 0)
  end)
end)

describe("shape queries", function()
  it("shape, size, dim, numel, # and strides", function()
    local t = rp.zeros { 2, 3, 4 }
    assert.same({ 2, 3, 4 }, t:shape())
    assert.same({ 2, 3, 4 }, t:size())
    assert.equal(3, t:size(2))
    assert.equal(4, t:size(3))
    assert.equal(3, t:dim())
    assert.equal(24, t:numel())
    assert.equal(2, #t)
    assert.same({ 12, 4, 1 }, t:stride())
    assert.equal(4, t:stride(2))
    assert.is_true(t:is_contiguous())
    assert.is_false(t:transpose(1, 3):is_contiguous())
    assert.same({ 1, 4, 12 }, t:transpose(1, 3):stride())
  end)

  it("shape() returns a fresh table", function()
    local t = rp.zeros { 2, 3 }
    local s = t:shape()
    s[1] = 99
    assert.same({ 2, 3 }, t:shape())
  end)
end)

describe("indexing", function()
  it("is 1-based, with negative indices counting from the end", function()
    local t = M23()
    assert.is_true(rp.is_tensor(t[2]))
    assert.same({ 4, 5, 6 }, t[2]:totable())
    assert.equal(6, t[2][3])
    assert.equal(1, t[1][1])
    assert.same({ 4, 5, 6 }, t[-1]:totable())
    assert.equal(6, t[-1][-1])
    assert.equal(4, t[-1][-3])
    local v = rp.tensor { 10, 20, 30 }
    assert.equal(10, v[1])
    assert.equal(30, v[-1])
    assert.equal(20, v[-2])
  end)

  it("get and set address one element", function()
    local t = M23()
    assert.equal(5, t:get(2, 2))
    assert.equal(t, t:set(1, 3, 42))  -- set returns t
    assert.equal(42, t:get(1, 3))
    assert.same({ { 1, 2, 42 }, { 4, 5, 6 } }, t:totable())
    assert.equal(7, rp.tensor { 7 }:item())
    assert.equal(9, rp.full({ 1, 1, 1 }, 9):item())
  end)

  it("t[{...}] slices torch-style", function()
    local t = rp.range(1, 12):view { 3, 4 }
    assert.same({ 6, 7 }, t[{ 2, { 2, 3 } }]:totable())
    assert.same({ { 3 }, { 7 } }, t[{ { 1, 2 }, { 3 } }]:totable())
    assert.same({ 2, 6, 10 }, t[{ {}, 2 }]:totable())
    assert.same({ 5, 6, 7, 8 }, t[{ 2 }]:totable())
    assert.same({ { 9, 10, 11, 12 } }, t[{ { 3 } }]:totable())
    assert.same({ { 7, 8 }, { 11, 12 } }, t[{ { 2, 3 }, { 3, 4 } }]:totable())
    assert.same({ 3, 4 }, t[{}]:shape())
  end)

  it("assignment through t[i] and t[{...}] writes into the original", function()
    local t = rp.range(1, 12):view { 3, 4 }
    t[{ {}, 2 }] = 0
    assert.same({ { 1, 0, 3, 4 }, { 5, 0, 7, 8 }, { 9, 0, 11, 12 } }, t:totable())
    t[1] = rp.tensor { -1, -2, -3, -4 }
    assert.same({ -1, -2, -3, -4 }, t[1]:totable())
    t[{ { 2, 3 }, { 3, 4 } }] = rp.tensor { 100, 200 } -- broadcast over the rows
    assert.same({ { -1, -2, -3, -4 }, { 5, 0, 100, 200 }, { 9, 0, 100, 200 } }, t:totable())
    t[3] = 7
    assert.same({ 7, 7, 7, 7 }, t[3]:totable())
    -- assignment into a slice of a view reaches the original too
    local row = t[2]
    row[{ { 1, 2 } }] = -5
    assert.same({ -5, -5, 100, 200 }, t[2]:totable())
    local col = t:t()[3]          -- column 3 of t, strided
    col[{ { 2, 3 } }] = rp.tensor { 1, 2 }
    assert.same({ -3, 1, 2 }, t[{ {}, 3 }]:totable())
    local v = rp.zeros { 3 }
    v[2] = 5
    v[-1] = 6
    assert.same({ 0, 5, 6 }, v:totable())
  end)
end)

describe("views", function()
  it("narrow, select and sub share storage with the original", function()
    local t = rp.range(1, 12):view { 3, 4 }
    local n = t:narrow(2, 2, 2)
    assert.same({ { 2, 3 }, { 6, 7 }, { 10, 11 } }, n:totable())
    n:fill(0)
    assert.same({ { 1, 0, 0, 4 }, { 5, 0, 0, 8 }, { 9, 0, 0, 12 } }, t:totable())
    local s = t:select(1, 3)
    assert.same({ 9, 0, 0, 12 }, s:totable())
    s:set(4, -12)
    assert.equal(-12, t:get(3, 4))
    local c = t:select(2, 1)
    assert.same({ 1, 5, 9 }, c:totable())
    local u = t:sub(2, 3, 1, 2)
    assert.same({ { 5, 0 }, { 9, 0 } }, u:totable())
    u:zero()
    assert.same({ { 1, 0, 0, 4 }, { 0, 0, 0, 8 }, { 0, 0, 0, -12 } }, t:totable())
    assert.same({ { 8 }, { -12 } }, t:sub(-2, -1, -1, -1):totable())
  end)

  it("transpose, t and permute are views with swapped strides", function()
    local t = rp.range(1, 24):view { 2, 3, 4 }
    local tt = t:transpose(1, 3)
    assert.same({ 4, 3, 2 }, tt:shape())
    local p = t:permute(3, 1, 2)
    assert.same({ 4, 2, 3 }, p:shape())
    for i = 1, 2 do
      for j = 1, 3 do
        for k = 1, 4 do
          assert.equal(t:get(i, j, k), tt:get(k, j, i))
          assert.equal(t:get(i, j, k), p:get(k, i, j))
        end
      end
    end
    p:set(4, 2, 3, -1)
    assert.equal(-1, t:get(2, 3, 4))
    local m = M23()
    assert.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, m:t():totable())
    m:t():set(3, 1, 30)
    assert.equal(30, m:get(1, 3))
  end)

  it("view and reshape keep the data in row-major order; -1 is inferred", function()
    local t = rp.range(1, 6)
    local v = t:view { 2, 3 }
    assert.same({ { 1, 2, 3 }, { 4, 5, 6 } }, v:totable())
    v:set(2, 1, 40)
    assert.equal(40, t:get(4))
    assert.same({ 3, 2 }, t:view { -1, 2 }:shape())
    assert.same({ 1, 6 }, t:view(1, -1):shape())
    -- reshape of a non-contiguous tensor copies, in the order of the transposed view
    local r = M23():t():reshape { 6 }
    assert.same({ 1, 4, 2, 5, 3, 6 }, r:totable())
    assert.same({ { 1, 4, 2 }, { 5, 3, 6 } }, M23():t():reshape { 2, -1 }:totable())
  end)

  it("contiguous and clone copy a strided view into row-major order", function()
    local m = M23()
    local c = m:t():contiguous()
    assert.is_true(c:is_contiguous())
    assert.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, c:totable())
    assert.same({ 2, 1 }, c:stride())
    local k = m:clone()
    k:fill(0)
    assert.same({ { 1, 2, 3 }, { 4, 5, 6 } }, m:totable())
    assert.is_true(m:clone():is_contiguous())
  end)

  it("copy broadcasts its source into the target and returns it", function()
    local t = rp.zeros { 2, 3 }
    local r = t:copy(rp.tensor { 1, 2, 3 })
    assert.equal(t, r)
    assert.same({ { 1, 2, 3 }, { 1, 2, 3 } }, t:totable())
    local m = M23()
    m:copy(m:t():t():clone():mul(2))
    assert.same({ { 2, 4, 6 }, { 8, 10, 12 } }, m:totable())
  end)

  it("totable and rp.tensor round-trip a random 4-D tensor exactly", function()
    local x = rp.randn({ 2, 3, 4, 5 }, rp.rng(1))
    local y = rp.tensor(x:totable())
    assert.same(x:shape(), y:shape())
    assert.equal(0, x:maxdiff(y))
    assert.equal(0, rp.maxdiff(x, y))
    y:set(2, 3, 4, 5, x:get(2, 3, 4, 5) + 0.5)
    assert.near(0.5, rp.maxdiff(x, y), 1e-6)
  end)

  it("views stay valid after the parent is collected", function()
    local row, col
    do
      local parent = rp.range(1, 6):view { 2, 3 }
      row = parent[2]
      col = parent:t():select(1, 3)
    end
    collectgarbage()
    collectgarbage()
    local junk = {}
    for i = 1, 50 do junk[i] = rp.full({ 6 }, -i) end -- reuse freed memory, if any
    assert.same({ 4, 5, 6 }, row:totable())
    assert.same({ 3, 6 }, col:totable())
    row:set(1, 0)
    assert.same({ 0, 5, 6 }, row:totable())
  end)
end)

describe("arithmetic", function()
  local g = rp.rng(21)
  local A = g:randn { 2, 3 }
  local Bv = g:rand { 3 }:add(0.5)      -- positive, for division and powers
  local C = g:randn { 2, 1 }
  local P = g:rand { 2, 3 }:add(0.1)
  local a, b, c, p = A:totable(), Bv:totable(), C:totable(), P:totable()
  local add = function(x, y) return x + y end
  local sub = function(x, y) return x - y end
  local mul = function(x, y) return x * y end
  local div = function(x, y) return x / y end
  local pow = function(x, y) return x ^ y end

  it("operators broadcast like numpy", function()
    h.approx(A + Bv, naive.broadcast(add, a, b), 1e-6, "A + b")
    h.approx(A - C, naive.broadcast(sub, a, c), 1e-6, "A - c")
    h.approx(C - A, naive.broadcast(sub, c, a), 1e-6, "c - A")
    h.approx(A * Bv, naive.broadcast(mul, a, b), 1e-6, "A * b")
    h.approx(A / Bv, naive.broadcast(div, a, b), 1e-5, "A / b")
    h.approx(P ^ Bv, naive.broadcast(pow, p, b), 1e-6, "P ^ b")
    h.approx(C + Bv, naive.broadcast(add, c, b), 1e-6, "[2x1] + [3]")
    assert.same({ 2, 3 }, (C + Bv):shape())
    h.approx(-A, naive.map(function(x) return -x end, a), 0, "-A")
  end)

  it("numbers on either side", function()
    h.approx(A + 2, naive.broadcast(add, a, 2), 1e-6)
    h.approx(2 - A, naive.broadcast(sub, 2, a), 1e-6)
    h.approx(3 * A, naive.broadcast(mul, 3, a), 1e-6)
    h.approx(1 / P, naive.broadcast(div, 1, p), 1e-5)
    h.approx(P ^ 2, naive.broadcast(pow, p, 2), 1e-6)
    h.approx(2 ^ A, naive.broadcast(pow, 2, a), 1e-5)
  end)

  it("methods add, mul, div, pow return new tensors", function()
    local A0 = A:clone()
    h.approx(A:add(Bv), naive.broadcast(add, a, b), 1e-6)
    h.approx(A:mul(C), naive.broadcast(mul, a, c), 1e-6)
    h.approx(A:div(4), naive.broadcast(div, a, 4), 1e-6)
    h.approx(P:pow(Bv), naive.broadcast(pow, p, b), 1e-6)
    assert.equal(0, A:maxdiff(A0))
  end)

  it("elementwise functions match math.*", function()
    local sig = function(x) return 1 / (1 + math.exp(-x)) end
    local tanh = function(x) return (math.exp(x) - math.exp(-x)) / (math.exp(x) + math.exp(-x)) end
    h.approx(A:exp(), naive.map(math.exp, a), 1e-5, "exp")
    h.approx(P:log(), naive.map(math.log, p), 1e-5, "log")
    h.approx(A:abs(), naive.map(math.abs, a), 0, "abs")
    h.approx(P:sqrt(), naive.map(math.sqrt, p), 1e-6, "sqrt")
    h.approx(A:tanh(), naive.map(tanh, a), 1e-6, "tanh")
    h.approx(A:relu(), naive.map(function(x) return math.max(x, 0) end, a), 0, "relu")
    local r = rp.tensor { 0 / 0, -1, 2 }:relu() -- NaN stays NaN, as in the model's ReLU
    assert.is_true(r[1] ~= r[1] and r[2] == 0 and r[3] == 2)
    h.approx(A:sin(), naive.map(math.sin, a), 1e-6, "sin")
    h.approx(A:cos(), naive.map(math.cos, a), 1e-6, "cos")
    h.approx(A:sigmoid(), naive.map(sig, a), 1e-6, "sigmoid")
    h.approx(A:neg(), naive.map(function(x) return -x end, a), 0, "neg")
  end)
end)

describe("reductions", function()
  local t = rp.tensor { { 1, -2, 3 }, { 4, 5, -6 } }

  it("without a dim give a Lua number over all elements", function()
    assert.equal(5, t:sum())
    assert.near(5 / 6, t:mean(), 1e-7)
    assert.equal(5, t:max())
    assert.equal(-6, t:min())
    assert.near(math.sqrt(1 + 4 + 9 + 16 + 25 + 36), t:norm(), 1e-5)
    assert.equal("number", type(t:sum()))
  end)

  it("with a dim give a tensor, the dim removed unless keepdim", function()
    assert.same({ 5, 3, -3 }, t:sum(1):totable())
    assert.same({ 2, 3 }, t:sum(2):totable())
    assert.same({ { 2 }, { 3 } }, t:sum(2, true):totable())
    assert.same({ 1, 3 }, t:sum(1, true):shape())
    h.approx(t:mean(1), { 2.5, 1.5, -1.5 }, 1e-7)
    assert.same({ 4, 5, 3 }, t:max(1):totable())
    assert.same({ -2, -6 }, t:min(2):totable())
    assert.same({ 3, 2 }, t:argmax(2):totable())
    assert.same({ { 2, 2, 1 } }, t:argmax(1, true):totable())
  end)

  it("sum of a strided view and of a larger random tensor vs Lua", function()
    assert.same({ 5, 3, -3 }, t:t():sum(2):totable())
    local x = rp.randn({ 7, 9 }, rp.rng(2))
    local s = 0
    for _, row in ipairs(x:totable()) do for _, e in ipairs(row) do s = s + e end end
    assert.near(s, x:sum(), 1e-5)
  end)
end)

describe("softmax", function()
  it("matches the plain-Lua softmax along either dim", function()
    local x = rp.randn({ 4, 5 }, rp.rng(9)):mul(3)
    local xt = x:totable()
    h.approx(x:softmax(2), naive.softmax_rows(xt), 1e-6, "dim 2")
    h.approx(x:softmax(1), naive.transpose(naive.softmax_rows(naive.transpose(xt))), 1e-6, "dim 1")
    h.approx(x:softmax(2):sum(2), { 1, 1, 1, 1 }, 1e-6, "rows sum to 1")
  end)

  it("is stable for large inputs", function()
    local s = rp.tensor { 1000, 1000, -1000 }:softmax(1)
    h.approx(s, { 0.5, 0.5, 0 }, 1e-7)
  end)
end)

describe("matmul", function()
  local g = rp.rng(17)

  it("2-D vs naive loops", function()
    local a, b = g:randn { 3, 4 }, g:randn { 4, 5 }
    local c = rp.matmul(a, b)
    assert.same({ 3, 5 }, c:shape())
    h.approx(c, naive.matmul(a:totable(), b:totable()), 1e-5)
    h.approx(a:matmul(b), c, 0)
  end)

  it("transposed (strided) inputs", function()
    local a, b = g:randn { 4, 3 }, g:randn { 5, 4 }
    local c = rp.matmul(a:t(), b:t())
    h.approx(c, naive.matmul(naive.transpose(a:totable()), naive.transpose(b:totable())), 1e-5)
    local x = g:randn { 6, 6 }:narrow(2, 2, 4) -- rows with a gap: stride 6, 4 columns
    local y = g:randn { 4, 2 }
    h.approx(rp.matmul(x, y), naive.matmul(x:totable(), y:totable()), 1e-5)
  end)

  it("batched, with broadcast batch dims", function()
    local a, b = g:randn { 2, 3, 4 }, g:randn { 2, 4, 5 }
    local c = rp.matmul(a, b)
    assert.same({ 2, 3, 5 }, c:shape())
    local at, bt = a:totable(), b:totable()
    for i = 1, 2 do h.approx(c[i], naive.matmul(at[i], bt[i]), 1e-5, "batch " .. i) end
    local w = g:randn { 4, 5 }
    local d = rp.matmul(a, w)
    assert.same({ 2, 3, 5 }, d:shape())
    for i = 1, 2 do h.approx(d[i], naive.matmul(at[i], w:totable()), 1e-5, "broadcast " .. i) end
    local e = rp.matmul(g:randn { 3, 1, 2, 4 }, g:randn { 2, 4, 3 })
    assert.same({ 3, 2, 2, 3 }, e:shape())
  end)

  it("1-D operands as in numpy", function()
    local a, u = g:randn { 3, 4 }, g:randn { 4 }
    local av = rp.matmul(a, u)
    assert.same({ 3 }, av:shape())
    local ut = u:totable()
    local col = {}
    for i = 1, 4 do col[i] = { ut[i] } end
    local ref = naive.matmul(a:totable(), col)
    h.approx(av, { ref[1][1], ref[2][1], ref[3][1] }, 1e-5)
    local ua = rp.matmul(u, a:t())
    assert.same({ 3 }, ua:shape())
    h.approx(ua, av, 1e-5)
    assert.near(naive.dot(ut, ut), rp.matmul(u, u):item(), 1e-5)
  end)
end)

describe("tostring", function()
  it("prints the values and the shape on the last line", function()
    local s = tostring(M23())
    local lines = {}
    for line in s:gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.equal("[2 x 3]", lines[#lines])
    assert.equal(3, #lines)
    local nums = {}
    for i = 1, 2 do for n in lines[i]:gmatch("%-?[%d.]+") do nums[#nums + 1] = tonumber(n) end end
    assert.same({ 1, 2, 3, 4, 5, 6 }, nums)
  end)

  it("prints 2-D slices of a 4-D tensor with torch7 headers", function()
    local s = tostring(rp.range(1, 16):view { 2, 2, 2, 2 })
    assert.truthy(s:find("(1,1,.,.) =", 1, true))
    assert.truthy(s:find("(2,2,.,.) =", 1, true))
    assert.equal("[2 x 2 x 2 x 2]", s:match("([^\n]+)\n*$"))
    assert.equal("[5]", tostring(rp.zeros { 5 }):match("([^\n]+)\n*$"))
  end)

  it("prints a 1-D tensor as a row, wrapped at 80 columns, cut after 20 and before the last 20", function()
    assert.equal(" 1  2  3  4  5\n[5]", tostring(rp.range(1, 5)))
    local lines = {}
    for line in tostring(rp.range(1, 50)):gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.equal("[50]", table.remove(lines))
    local words = {}
    for _, line in ipairs(lines) do
      assert.is_true(#line <= 80, line)
      for w in line:gmatch("%S+") do words[#words + 1] = w end
    end
    local want = {}
    for i = 1, 20 do want[#want + 1] = tostring(i) end
    want[#want + 1] = "..."
    for i = 31, 50 do want[#want + 1] = tostring(i) end
    assert.same(want, words)
    assert.equal(3, #lines) -- 20 cells of 3 columns and a space fill a line; 41 cells
    -- 40 values are shown whole
    assert.is_nil(tostring(rp.range(1, 40)):find("...", 1, true))
  end)

  it("abbreviates to the first and last 10 rows and 5 columns", function()
    -- row r holds the value r in every column
    local t = rp.range(1, 100):view { 100, 1 }:add(rp.zeros { 1, 100 })
    local lines = {}
    for line in tostring(t):gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.equal(22, #lines)
    assert.equal("[100 x 100]", lines[22])
    assert.equal("...", lines[11]:match("^%s*(.-)%s*$"))
    local function words(line)
      local w = {}
      for x in line:gmatch("%S+") do w[#w + 1] = x end
      return w
    end
    assert.same({ "1", "1", "1", "1", "1", "...", "1", "1", "1", "1", "1" }, words(lines[1]))
    assert.same({ "10", "10", "10", "10", "10", "...", "10", "10", "10", "10", "10" }, words(lines[10]))
    assert.equal("91", words(lines[12])[1])
    assert.equal("100", words(lines[21])[11])
  end)

  it("formats values: integers, 4 decimals, a scale line, %.4e for wide ranges", function()
    local function body(t) return (tostring(t):gsub("\n%[[^\n]*%]\n*$", "")) end
    assert.equal(" 1.5000  2.2500", body(rp.tensor { 1.5, 2.25 }))
    assert.equal("1e-03 *\n 1.0000  2.0000", body(rp.tensor { 1e-3, 2e-3 }))
    assert.equal(" 1.0000e-05  1.0000e+00", body(rp.tensor { 1e-5, 1 }))
    -- a nonzero value that 4 decimals would show as 0.0000: beside a 0, or just past 4 orders
    assert.equal(" 0.0000e+00  1.0000e-06  1.0000e+00", body(rp.tensor { 0, 1e-6, 1 }))
    assert.equal(" 0.0000e+00 -3.0000e-07  2.5000e+02", body(rp.tensor { 0, -3e-7, 250 }))
    assert.equal(" 4.0000e-05  5.0000e-01", body(rp.tensor { 4e-5, 0.5 }))
    assert.equal(" 0.0000  0.5000  1.0000", body(rp.tensor { 0, 0.5, 1 }))
    assert.equal("1e-03 *\n 0.0000  1.0000  2.0000", body(rp.tensor { 0, 1e-3, 2e-3 }))
    assert.equal(" 0 -3  7", body(rp.tensor { 0, -3, 7 }))
    assert.equal(" 1.5000\n 2.2500", body(rp.tensor { { 1.5 }, { 2.25 } })) -- a column stays one
    assert.equal("[2 x 0]", tostring(rp.zeros { 2, 0 }):match("^%s*(.-)%s*$"))
  end)
end)

describe("t:dot and t:diag", function()
  it("dot is the sum of products of two vectors, strided views too, in double", function()
    local a, b = rp.randn({ 50 }, rp.rng(1)), rp.randn({ 5, 10 }, rp.rng(2)):t():contiguous():view(50)
    assert.near(naive.dot(a:totable(), b:totable()), a:dot(b), 1e-12)
    local m = rp.randn({ 6, 4 }, rp.rng(3))
    local col = m:select(2, 3) -- stride 4
    local want = 0
    for i = 1, 6 do want = want + m:get(i, 3) * m:get(i, 1) end
    assert.near(want, col:dot(m:select(2, 1)), 1e-12)
    assert.equal(0, rp.zeros { 0 }:dot(rp.zeros { 0 }))
    assert.equal(32, rp.tensor { 1, 2, 3 }:dot(rp.tensor { 4, 5, 6 }))
  end)

  it("diag of a matrix is a view of its k-th diagonal", function()
    local t = rp.range(1, 12):view(3, 4)
    assert.same({ 1, 6, 11 }, t:diag():totable())
    assert.same({ 2, 7, 12 }, t:diag(1):totable())
    assert.same({ 4 }, t:diag(3):totable())
    assert.same({ 5, 10 }, t:diag(-1):totable())
    assert.same({ 9 }, t:diag(-2):totable())
    assert.same({ 0 }, t:diag(4):shape())
    assert.same({ 0 }, t:diag(-3):shape())
    assert.same({ 1, 6, 11 }, t:t():diag():totable()) -- of a transposed view
    t:diag():fill(0)                                  -- writes through
    assert.same({ { 0, 2, 3, 4 }, { 5, 0, 7, 8 }, { 9, 10, 0, 12 } }, t:totable())
  end)

  it("diag of a vector is a new matrix with the vector on its k-th diagonal", function()
    assert.same({ { 1, 0 }, { 0, 2 } }, rp.tensor { 1, 2 }:diag():totable())
    assert.same({ { 0, 1, 0 }, { 0, 0, 2 }, { 0, 0, 0 } }, rp.tensor { 1, 2 }:diag(1):totable())
    assert.same({ { 0, 0, 0 }, { 1, 0, 0 }, { 0, 2, 0 } }, rp.tensor { 1, 2 }:diag(-1):totable())
    local v = rp.randn({ 5 }, rp.rng(4))
    assert.equal(0, v:diag():diag():maxdiff(v))        -- the round trip
    assert.equal(0, rp.ones { 4 }:diag():maxdiff(rp.eye(4)))
    assert.same({ 0, 0 }, rp.zeros { 0 }:diag():shape())
  end)
end)

describe("random generators", function()
  it("the same seed gives the same stream, a different seed another", function()
    local g1, g2, g3 = rp.rng(123), rp.rng(123), rp.rng(124)
    local same, differ = true, false
    for _ = 1, 20 do
      local u1, u2, u3 = g1:uniform(), g2:uniform(), g3:uniform()
      same = same and u1 == u2
      differ = differ or u1 ~= u3
      assert.is_true(u1 >= 0 and u1 < 1)
    end
    assert.is_true(same)
    assert.is_true(differ)
    assert.equal(rp.rng(5):normal(), rp.rng(5):normal())
  end)

  it("g:seed restarts the stream; tensor draws match rp.* with the same rng", function()
    local g = rp.rng(1)
    local first = { g:uniform(), g:normal(), g:int(1, 100) }
    assert.equal(g, g:seed(1))        -- seed returns g
    assert.same(first, { g:uniform(), g:normal(), g:int(1, 100) })
    assert.equal(0, rp.rng(2):randn { 3, 4 }:maxdiff(rp.randn({ 3, 4 }, rp.rng(2))))
    assert.equal(0, rp.rng(2):rand { 5 }:maxdiff(rp.rand({ 5 }, rp.rng(2))))
    assert.equal(0, rp.rng(2):randint(0, 9, { 5 }):maxdiff(rp.randint(0, 9, { 5 }, rp.rng(2))))
  end)

  it("a generator prints its seed and its jumps, not an address", function()
    local g = rp.rng(42)
    assert.equal("roper.Rng (seed 42)", tostring(g))
    g:uniform()
    assert.equal("roper.Rng (seed 42)", tostring(g)) -- the seed it was seeded with
    assert.equal("roper.Rng (seed 42, jumped 1 time)", tostring(g:jump()))
    assert.equal("roper.Rng (seed 42, jumped 4 times)", tostring(g:jump(3)))
    assert.equal("roper.Rng (seed -7)", tostring(g:seed(-7)))
    assert.equal("roper.Rng (seed 0)", tostring(rp.rng()))
    assert.equal("{g = roper.Rng (seed 3)}", rp.inspect({ g = rp.rng(3) }))
  end)

  it("g:int is inclusive and hits every value", function()
    local g = rp.rng(77)
    local seen = {}
    for _ = 1, 400 do
      local x = g:int(3, 7)
      assert.equal(math.tointeger(x), x)
      assert.is_true(x >= 3 and x <= 7)
      seen[x] = true
    end
    for v = 3, 7 do assert.is_true(seen[v]) end
  end)
end)

describe("the test helpers themselves", function()
  it("approx fails on a mismatch, with the max diff in the message", function()
    local ok, err = pcall(h.approx, rp.tensor { 1, 2, 3 }, { 1, 2.5, 3 }, 1e-3, "demo")
    assert.is_false(ok)
    assert.matches("demo: max diff 0%.5 > tol 0%.001", tostring(type(err) == "table" and err.message or err))
    assert.is_false((pcall(h.approx, { 1, 2 }, { 1, 2, 3 }, 1)))
    assert.is_false((pcall(h.approx, 1, 0 / 0, 1)))
    assert.equal(0.5, h.approx({ { 1, 2 } }, { { 1.5, 2 } }, 0.5))
  end)

  it("naive.rotate is a rotation by pos * theta", function()
    local x = { 1, 0, 0, 0 }
    h.approx(naive.rotate(x, 1), { math.cos(1), 0, math.sin(1), 0 }, 1e-15)
    h.approx(naive.rotate(x, 1, { pairing = "interleaved" }), { math.cos(1), math.sin(1), 0, 0 }, 1e-15)
    h.approx(naive.rotate({ 0, 1, 0, 0 }, 3, { sign = -1 }), { 0, math.cos(0.03), 0, -math.sin(0.03) }, 1e-15)
  end)
end)

-- Lua code that runs while a binding works: an option table whose __index releases the call's
-- own arguments, and a finalizer (__gc) that fires at an allocation inside the call and does the
-- same. Each case must end in a Lua error that names the released object (or a normal result
-- when the object is no longer needed), never in a crash or a read of freed memory (the suite
-- also runs under ASan: `make test SANITIZE=1`). The rule the bindings follow is in
-- bindings/args.h; tests/fuzz tries the same on every function.

local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local rp = require "roper"

local function close(x) getmetatable(x).__close(x) end

local function tiny_model()
  return rp.model { vocab = 5, d_model = 8, heads = 2, layers = 1, d_ff = 16, seq_len = 8,
    max_batch = 2 }
end

-- An options table whose every missing-key lookup releases x (and whose known keys read nil).
local function closing_opts(x)
  return setmetatable({}, { __index = function() close(x) end })
end

-- Runs call() with a finalizer armed to release x at the first allocation the call makes: a full
-- collection first (the collector then pauses), an object with __gc left as garbage, and the
-- collector set to finish a whole cycle, finalizers included, at every allocation. Returns
-- pcall's results and whether the finalizer ran.
local function with_finalizer(x, call)
  local fired = false
  -- pause 1 (0 would mean "unchanged"): a new cycle starts as soon as the last one ends;
  -- stepmul 1000 and a step size of 2^40 bytes: a step runs a whole cycle, however large the
  -- heap (with the default 8 KiB steps a call that allocates little, task:problem say, did not
  -- finish a cycle once the busted process held the heap of the whole suite). The full
  -- collection applies them (the next allocation starts the next cycle).
  collectgarbage("incremental", 1, 1000, 40)
  collectgarbage()
  setmetatable({}, { __gc = function() fired = true; close(x) end })
  local ok, err = pcall(call)
  local fired_in_call = fired
  collectgarbage("incremental", 200, 100, 13)
  collectgarbage()
  return ok, err, fired_in_call
end

describe("an option table whose __index releases an argument", function()
  local cases = {
    { "m:generate", function()
        local m = tiny_model()
        return m:generate({ 0, 1 }, 3, closing_opts(m))
      end, "calling 'generate' on bad self (attempt to use a released model)" },
    { "m:generate_batch", function()
        local m = tiny_model()
        return m:generate_batch({ { 0, 1 }, { 2 } }, 3, closing_opts(m))
      end, "calling 'generate_batch' on bad self (attempt to use a released model)" },
    { "rp.optim.adam", function()
        local m = tiny_model()
        return rp.optim.adam(m, closing_opts(m))
      end, "bad argument #1 to 'adam' (attempt to use a released model)" },
    { "rp.optim.adamw", function()
        local m = tiny_model()
        return rp.optim.adamw(m, closing_opts(m))
      end, "bad argument #1 to 'adamw' (attempt to use a released model)" },
    { "m:train_step", function()
        local m = tiny_model()
        local opt = rp.optim.adam(m)
        return m:train_step({ 0, 1, 2 }, { 1, 2, 3 }, nil, opt, closing_opts(m))
      end, "calling 'train_step' on bad self (attempt to use a released model)" },
    { "m:train_step releasing the optimiser", function()
        local m = tiny_model()
        local opt = rp.optim.adam(m)
        return m:train_step({ 0, 1, 2 }, { 1, 2, 3 }, nil, opt, closing_opts(opt))
      end, "bad argument #4 to 'train_step' (attempt to use a released optimiser)" },
    { "m:save", function()
        local m = tiny_model()
        return m:save(h.tmpname(), nil, closing_opts(m))
      end, "calling 'save' on bad self (attempt to use a released model)" },
    { "opt:step", function()
        local m = tiny_model()
        local opt = rp.optim.adam(m)
        return opt:step(closing_opts(opt))
      end, "calling 'step' on bad self (attempt to use a released optimiser)" },
    { "rp.rope.rotate", function()
        local x = rp.randn { 2, 4 }
        return rp.rope.rotate(x, closing_opts(x))
      end, "bad argument #1 to 'rotate' (attempt to use a released tensor)" },
    { "rp.attention releasing v", function()
        local q = rp.randn { 1, 3, 2, 4 }
        local v = rp.randn { 1, 3, 2, 4 }
        return rp.attention(q, q, v, closing_opts(v))
      end, "bad argument #3 to 'attention' (attempt to use a released tensor)" },
    { "rp.linear_attention releasing q", function()
        local q = rp.randn { 1, 3, 2, 4 }
        return rp.linear_attention(q, q:clone(), q:clone(), closing_opts(q))
      end, "bad argument #1 to 'linear_attention' (attempt to use a released tensor)" },
    { "rp.eval.accuracy", function()
        local m = rp.model { vocab = 20, d_model = 8, heads = 2, layers = 1, d_ff = 16,
          seq_len = 64, max_batch = 2 }
        local task = rp.tasks.addition { max_digits = 1, seq_len = 64 }
        -- rp.eval copies the options with next(): the __index never runs
        local acc = rp.eval.accuracy(m, task, closing_opts(m))
        error(("finished: %s, model %s"):format(type(acc), m:num_params()))
      end, "finished: number, model 956" },
  }
  for _, c in ipairs(cases) do
    it(c[1], function()
      local ok, err = pcall(c[2])
      assert.is_false(ok)
      assert.are.equal(c[3], tostring(err):gsub("^[^ ]-:%d+: ", ""))
    end)
  end
end)

describe("a finalizer that releases an argument during the call", function()
  -- Each call allocates its results before it uses its arguments; the finalizer fires at such an
  -- allocation (or at an earlier one), so the call must notice the release.
  local cases = {
    { "t:add", function() local t = rp.randn { 4, 4 }; return t, function() return t:add(1) end end },
    { "t + u", function()
        local t = rp.randn { 4, 4 }
        return t, function() return t + rp.ones { 4, 4 } end
      end },
    { "t:transpose", function()
        local t = rp.randn { 3, 5 }; return t, function() return t:transpose(1, 2) end
      end },
    { "t:sum(1)", function() local t = rp.randn { 3, 5 }; return t, function() return t:sum(1) end end },
    { "t:totable", function() local t = rp.randn { 6, 7 }; return t, function() return t:totable() end end },
    { "t:shape", function() local t = rp.randn { 6, 7 }; return t, function() return t:shape() end end },
    { "t[{2, {1, 3}}]", function()
        local t = rp.randn { 4, 4 }; return t, function() return t[{ 2, { 1, 3 } }] end
      end },
    { "rp.matmul", function()
        local a = rp.randn { 8, 8 }; return a, function() return rp.matmul(a, rp.ones { 8, 8 }) end
      end },
    { "rp.attention", function()
        local q = rp.randn { 1, 4, 2, 8 }
        return q, function() return rp.attention(q, q:clone(), q:clone(), { pe = "roper" }) end
      end },
    { "rp.rope.rotate", function()
        local x = rp.randn { 4, 8 }; return x, function() return rp.rope.rotate(x) end
      end },
    { "rp.rope.angles with a tensor of positions", function()
        local p = rp.tensor { 0, 1, 2 }; return p, function() return rp.rope.angles(p, 4) end
      end },
    { "task:decode of a tensor", function()
        local ids = rp.tensor { 1, 2, 3 }
        local task = rp.tasks.substring_index {}
        return ids, function() return task:decode(ids) end
      end },
    { "m:forward", function()
        local m = tiny_model(); return m, function() return m:forward { 0, 1, 2 } end
      end },
    { "m:activations", function()
        local m = tiny_model(); return m, function() return m:activations { 0, 1, 2 } end
      end },
    { "m:attention", function()
        local m = tiny_model(); return m, function() return m:attention(1, { 0, 1, 2 }) end
      end },
    { "m:params", function() local m = tiny_model(); return m, function() return m:params() end end },
    { "m:config", function() local m = tiny_model(); return m, function() return m:config() end end },
    { "m:generate", function()
        local m = tiny_model(); return m, function() return m:generate({ 0 }, 4) end
      end },
    { "m:generate_batch", function()
        local m = tiny_model()
        return m, function() return m:generate_batch({ { 0 }, rp.tensor { 1, 2 } }, 4) end
      end },
    { "m:generate_batch releasing a prompt tensor", function()
        local m, p = tiny_model(), rp.tensor { 1, 2, 3 }
        return p, function() return m:generate_batch({ { 0 }, p }, 4) end
      end },
    { "rp.optim.adam", function()
        local m = tiny_model(); return m, function() return rp.optim.adam(m) end
      end },
    { "task:vocab", function()
        local task = rp.tasks.addition {}; return task, function() return task:vocab() end
      end },
    { "task:batch", function()
        local task = rp.tasks.addition {}; return task, function() return task:batch(2) end
      end },
    { "task:problem", function()
        local task = rp.tasks.addition {}; return task, function() return task:problem() end
      end },
    { "tostring(task)", function()
        local task = rp.tasks.addition {}; return task, function() return tostring(task) end
      end },
  }
  for _, c in ipairs(cases) do
    it(c[1], function()
      local x, call = c[2]()
      local ok, err, fired = with_finalizer(x, call)
      assert.is_true(fired, "the finalizer did not run during the call")
      -- released before or after its last use: an error naming the released object, or a result
      if not ok then
        assert.matches("attempt to use a released %a+", tostring(err))
      end
    end)
  end
end)

-- Interop with NumPy and PyTorch (docs/interop.md): t:save and rp.load for .npy files,
-- m:save_safetensors, m:load_safetensors and rp.load for safetensors files; round trips, the files
-- the real libraries made (tests/fixtures/interop), every error; and, when Debian's
-- /usr/bin/python3 has numpy (and torch), the live round trips through them
-- (tests/reference/make_interop.py, the model through the PyTorch companion python/roper_torch),
-- pending with the reason otherwise (make test installs python3-numpy and python3-torch).

local rp = require "roper"
local cjson = require "cjson"

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"

local FIX = os.getenv("ROPER_INTEROP_FIXTURES") or "tests/fixtures/interop"
local PY = os.getenv("ROPER_PYTHON") or "/usr/bin/python3" -- another for the pending path
local SCRIPT = "tests/reference/make_interop.py"

local CFG = { vocab = 11, d_model = 16, heads = 2, layers = 2, d_ff = 24, seq_len = 8,
              max_batch = 2, pe = "roper", seed = 4 }
local function model(extra)
  local c = {}
  for k, v in pairs(CFG) do c[k] = v end
  for k, v in pairs(extra or {}) do c[k] = v end
  return rp.model(c)
end

-- values(n) of make_interop.py (without the special values): float64, rounded by the caller.
local function value(k) return ((k * 7919) % 1009 - 504) / 7.0 + k * 1e-3 end
local function f32(x) return string.unpack("<f", string.pack("<f", x)) end

-- Largest difference between every parameter of two models (0 when bit for bit, NaN aside).
local function param_diff(a, b)
  local pa, pb, d = a:params(), b:params(), 0
  assert.equal(#pa, #pb)
  for i, e in ipairs(pa) do
    assert.equal(e.name, pb[i].name)
    d = math.max(d, rp.maxdiff(e.tensor, pb[i].tensor))
  end
  return d
end

local function python_has(modules)
  local f = io.open(PY, "r")
  if not f then return false, PY .. " is missing" end
  f:close()
  local _, err, code = h.run(PY .. " -c " .. h.sh_quote("import " .. modules))
  if code ~= 0 then
    return false, PY .. " cannot import " .. modules .. " (" .. (err:match("[^\n]*Error[^\n]*") or
      "exit " .. code) .. "): apt-get install python3-numpy python3-torch"
  end
  return true
end

describe("tensors as .npy files", function()
  local d
  setup(function() d = h.tmpdir() end)
  teardown(function() h.remove_tree(d) end)

  it("round-trip every shape kind and strided views bit for bit", function()
    local g = rp.rng(3)
    local cases = {
      { "0-dim", rp.zeros {}:fill(2.5) },
      { "[0]", rp.zeros { 0 } },
      { "[0 x 3]", rp.zeros { 0, 3 } },
      { "[5]", g:randn { 5 } },
      { "[2 x 3]", g:randn { 2, 3 } },
      { "8 dims", g:randn { 1, 2, 1, 3, 1, 2, 1, 2 } },
      { "transposed", g:randn { 3, 4 }:t() },
      { "narrowed", g:randn { 4, 6 }:narrow(2, 2, 3) },
      { "selected", g:randn { 3, 4, 2 }:select(2, 2) },
      { "specials", rp.tensor { 0 / 0, math.huge, -math.huge, -0.0, 1e-45, 3.4e38 } },
    }
    for _, c in ipairs(cases) do
      local p = d .. "/t.npy"
      assert.is_true(c[2]:save(p), c[1])
      local u = assert(rp.load(p))
      assert.is_true(rp.is_tensor(u), c[1])
      assert.same(c[2]:shape(), u:shape(), c[1])
      assert.is_true(u:is_contiguous())
      if c[1] == "specials" then
        local a = u:totable()
        assert.is_true(a[1] ~= a[1])
        assert.same({ math.huge, -math.huge }, { a[2], a[3] })
        assert.equal("-0.0", tostring(a[4]))
        assert.equal(f32(1e-45), a[5])
      else
        assert.equal(0, rp.maxdiff(c[2], u), c[1])
      end
    end
  end)

  it("writes the header NumPy 1.24 writes", function()
    local p = d .. "/h.npy"
    assert.is_true(rp.zeros { 2, 3 }:save(p))
    local b = h.read(p)
    assert.equal(128 + 24, #b)
    assert.equal("\147NUMPY\1\0\118\0{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
      b:sub(1, 69))
    assert.equal(("\32"):rep(127 - 69) .. "\n", b:sub(70, 128))
  end)

  it("reads the files NumPy wrote, float64 rounded to float32", function()
    local t = assert(rp.load(FIX .. "/np_f32_7.npy"))
    assert.same({ 7 }, t:shape())
    for k = 0, 6 do assert.equal(f32(value(k)), t[k + 1]) end
    local s = assert(rp.load(FIX .. "/np_f32_scalar.npy"))
    assert.same({}, s:shape())
    assert.equal(f32(value(12)), s:item())
    assert.same({ 0, 3 }, assert(rp.load(FIX .. "/np_f32_empty.npy")):shape())
    assert.same({ 1, 2, 1, 3, 1, 2, 1, 2 }, assert(rp.load(FIX .. "/np_f32_8d.npy")):shape())
    local v3 = assert(rp.load(FIX .. "/np_f64_v3.npy"))
    for k = 0, 2 do assert.equal(f32(value(k)), v3[k + 1]) end
    local f64 = assert(rp.load(FIX .. "/np_f64_4x5.npy")):view(20):totable()
    assert.equal("-0.0", tostring(f64[1]))
    assert.same({ math.huge, -math.huge }, { f64[2], f64[3] })
    assert.is_true(f64[4] ~= f64[4])
    assert.equal(math.huge, f64[6])    -- 3.4028236e38 overflows float32
    assert.equal(0, f64[7])            -- 1e-46 underflows
    assert.equal(2 ^ -148, f64[8])     -- 1.5 * 2^-149: a tie, to even
    assert.equal(1, f64[9])            -- 1 + 2^-24: a tie, to even
    assert.equal(1 + 2 ^ -22, f64[10]) -- 1 + 3 * 2^-24: a tie, to even
    for k = 12, 19 do assert.equal(f32(value(k)), f64[k + 1]) end
  end)

  it("reads big-endian files NumPy wrote", function()
    for _, name in ipairs { "np_f32_big", "np_f64_big" } do
      local t = assert(rp.load(FIX .. "/" .. name .. ".npy"))
      assert.same({ 4 }, t:shape())
      for k = 0, 3 do assert.equal(f32(value(k)), t[k + 1], name) end
    end
  end)

  it("refuses what it does not read with nil and 'path: reason'", function()
    local reads = "(only float32, float64 and integers: f4, f8, i1, i2, i4, i8, u1, u2, u4, u8 in "
      .. "either byte order)"
    local refused = {
      np_f32_fortran = "Fortran-order arrays are not supported (save np.ascontiguousarray(a))",
      np_f16 = "dtype '<f2' is not supported " .. reads,
      np_bool = "dtype '|b1' is not supported " .. reads,
      np_object = "object arrays ('|O') are not supported " .. reads,
      np_structured = "structured arrays are not supported " .. reads,
      np_i64_2p24p1 = "integer 16777217 at index (1, 1) is beyond float32's exact range "
        .. "(|x| <= 2^24 = 16777216)",
    }
    for name, msg in pairs(refused) do
      local p = FIX .. "/" .. name .. ".npy"
      local r, err = rp.load(p)
      assert.is_nil(r)
      assert.equal(p .. ": " .. msg, err)
    end
    local p = d .. "/cut.npy"
    assert.is_true(rp.zeros { 2, 3 }:save(p))
    h.write(p, h.read(p):sub(1, 140))
    local r, err = rp.load(p)
    assert.is_nil(r)
    assert.equal(p .. ": truncated (the data of shape (2, 3) '<f4' needs 24 bytes, the file has 12)",
      err)
  end)

  it("t:save returns nil and 'path: reason' for a file it cannot write", function()
    local ok, err = rp.zeros(2):save(d .. "/no/such/x.npy")
    assert.is_nil(ok)
    assert.equal(d .. "/no/such/x.npy: No such file or directory", err)
    ok, err = rp.zeros(2):save(d)
    assert.is_nil(ok)
    assert.equal(d .. ": not a regular file (a folder)", err)
  end)

  it("raises for misuse", function()
    local t = rp.zeros(2)
    assert.has_error(function() t:save(42) end,
      "bad argument #1 to 'save' (path must be a string, got 42)")
    assert.has_error(function() t:save("") end, "bad argument #1 to 'save' (path must not be empty)")
    assert.has_error(function() t:save("a\0b") end,
      "bad argument #1 to 'save' (path contains a NUL byte)")
    assert.has_error(function() rp.Tensor.save(5, "x") end,
      "bad argument #1 to 'save' (roper.Tensor expected, got number; call methods with ':', as in "
        .. "x:save())")
    getmetatable(t).__close(t)
    assert.has_error(function() t:save(d .. "/x.npy") end,
      "calling 'save' on bad self (attempt to use a released tensor)")
  end)
end)

describe("saves to long names and through links (core/io/fileio.h)", function()
  local d
  setup(function() d = h.tmpdir() end)
  teardown(function() h.remove_tree(d) end)

  -- The stem of a name in its temporary files, by fileio.h's rule written here: the name itself
  -- up to 240 bytes; else its first 223 bytes (222 when byte 224 continues a UTF-8 character),
  -- '~' and the FNV-1a 64 hash of the whole name in hex (Lua's integers wrap as the hash does).
  local function stem(name)
    if #name <= 240 then return name end
    local hash = 0xcbf29ce484222325
    for i = 1, #name do hash = (hash ~ name:byte(i)) * 0x100000001b3 end
    local cut = 223
    while cut > 0 and name:byte(cut + 1) & 0xC0 == 0x80 do cut = cut - 1 end
    return name:sub(1, cut) .. ("~%016x"):format(hash)
  end

  -- a name of 255 bytes (NAME_MAX) ending in ext: "nnn...n" .. ext
  local function long(ext) return d .. "/" .. ("n"):rep(255 - #ext) .. ext end

  it("t:save, m:save and m:save_safetensors write to a name of 255 bytes, with O_TMPFILE and "
    .. "without (ROPER_NO_TMPFILE=1)", function()
    local code = ([[
      local d = %q
      local t, m = rp.tensor{1, 2, 3}, rp.model{vocab = 11, d_model = 16, heads = 2, layers = 1,
        d_ff = 24, seq_len = 8, max_batch = 2, seed = 4}
      print(t:save(d .. "/" .. ("n"):rep(251) .. ".npy"))
      print(m:save(d .. "/" .. ("n"):rep(250) .. ".ckpt"))
      print(m:save_safetensors(d .. "/" .. ("n"):rep(243) .. ".safetensors"))]]):format(d)
    for _, env in ipairs { "", "ROPER_NO_TMPFILE=1 " } do
      local out, err, rc = h.run(env .. h.sh_quote(h.BIN) .. " -e " .. h.sh_quote(code))
      assert.equal(0, rc, err)
      assert.equal("true\ntrue\ntrue\n", out, env)
      assert.same({ 1, 2, 3 }, assert(rp.load(long(".npy"))):totable())
      local want = rp.model { vocab = 11, d_model = 16, heads = 2, layers = 1, d_ff = 24,
        seq_len = 8, max_batch = 2, seed = 4 }
      for _, ext in ipairs { ".ckpt", ".safetensors" } do
        assert.equal(0, param_diff(want, assert(rp.load(long(ext)))), env .. ext)
      end
      local names = { ("n"):rep(250) .. ".ckpt", ("n"):rep(251) .. ".npy",
        ("n"):rep(243) .. ".safetensors" }
      table.sort(names)
      assert.same(names, h.ls(d)) -- no temporary file left
      for _, ext in ipairs { ".ckpt", ".npy", ".safetensors" } do os.remove(long(ext)) end
    end
  end)

  it("a save removes a killed save's temporary file of a 255-byte name (its stem, .tmp.<pid>)",
    function()
      local p = io.popen("sh -c 'echo $$'") -- a process that is gone: a shell that has exited
      local dead = math.tointeger(tonumber(p:read("l")))
      p:close()
      for _, name in ipairs { ("n"):rep(251) .. ".npy", ("\xc3\xa9"):rep(125) .. "x.npy",
        ("s"):rep(236) .. ".npy" } do
        local stale = ("%s/%s.tmp.%d"):format(d, stem(name), dead)
        local live = ("%s/%s.tmp.1"):format(d, stem(name)) -- pid 1 always exists
        h.write(stale, "half")
        h.write(live, "a live process's")
        assert.is_true(rp.tensor{7}:save(d .. "/" .. name))
        assert.is_nil(h.read(stale), name)
        assert.equal("a live process's", h.read(live))
        os.remove(live)
        os.remove(d .. "/" .. name)
      end
      assert.same({}, h.ls(d))
    end)

  it("a link in a loop is refused (stat's reason), a link to nothing is replaced", function()
    local a, b = d .. "/loop_a", d .. "/loop_b"
    assert(os.execute("ln -s loop_b " .. h.sh_quote(a) .. " && ln -s loop_a " .. h.sh_quote(b)))
    local m = model()
    local want = { nil, a .. ": Too many levels of symbolic links" }
    assert.same(want, { rp.tensor{1}:save(a) })
    assert.same(want, { m:save(a) })
    assert.same(want, { m:save_safetensors(a) })
    local kind = io.popen("stat -c %F " .. h.sh_quote(a)):read("a")
    assert.equal("symbolic link\n", kind)
    os.remove(a)
    os.remove(b)
    assert(os.execute("ln -s nowhere " .. h.sh_quote(a)))
    assert.is_true(m:save(a))
    assert.equal(0, param_diff(m, assert(rp.load(a))))
    os.remove(a)
  end)
end)

describe("token ids as integer .npy files", function()
  local d
  setup(function() d = h.tmpdir() end)
  teardown(function() h.remove_tree(d) end)

  -- IDS of make_interop.py: the integer fixtures hold those their type holds
  local IDS = { 0, 1, 2, -1, 127, -128, 255, 32767, -32768, 65535, 2 ^ 24, -2 ^ 24 }

  it("reads the integer files NumPy wrote exactly, in both byte orders, as float32", function()
    local kinds = { np_i64 = true, np_i64_be = true, np_i32 = true, np_i32_be = true,
                    np_i16 = { -32768, 32767 }, np_i8 = { -128, 127 }, np_u64 = { 0, 2 ^ 63 },
                    np_u32 = { 0, 2 ^ 32 - 1 }, np_u16 = { 0, 65535 }, np_u8 = { 0, 255 } }
    for name, range in pairs(kinds) do
      local want = {}
      for _, v in ipairs(IDS) do
        if range == true or (v >= range[1] and v <= range[2]) then want[#want + 1] = v end
      end
      local t = assert(rp.load(FIX .. "/" .. name .. ".npy"))
      assert.same(#want == 12 and { 3, 4 } or { #want }, t:shape(), name)
      assert.same(want, t:contiguous():view(-1):totable(), name)
    end
  end)

  it("feed m:forward, m:loss, m:generate and task:decode as the float ids do", function()
    local m = assert(rp.load(FIX .. "/torch_roper.safetensors"))
    local tok = assert(rp.load(FIX .. "/torch_roper_tokens_i64.npy"))
    local tok32 = assert(rp.load(FIX .. "/torch_roper_tokens.npy"))
    assert.same(tok32:totable(), tok:totable())
    local logits = m:forward(tok)
    assert.equal(0, rp.maxdiff(m:forward(tok32), logits))
    assert.is_true(rp.maxdiff(logits, rp.load(FIX .. "/torch_roper_logits.npy")) < 1e-5)
    -- targets with -1 (not scored) from an int32 file written by t:save
    local tg = tok:clone()
    tg[{ 1, 1 }] = -1
    assert.is_true(tg:save(d .. "/targets.npy", { dtype = "int32" }))
    local tg_back = assert(rp.load(d .. "/targets.npy"))
    assert.equal(m:loss(tok32, tg), m:loss(tok, tg_back))
    local prompt = tok:select(1, 1):narrow(1, 1, 3)
    assert.same(m:generate(prompt:totable(), 4), m:generate(prompt, 4))
    local task = rp.tasks.addition {}
    local ids = task:encode("12+3")
    assert.is_true(rp.tensor(ids):save(d .. "/ids.npy", { dtype = "int64" }))
    assert.equal("12+3", task:decode(assert(rp.load(d .. "/ids.npy"))))
  end)

  it("t:save writes int32 and int64 files as np.save does, read back exactly", function()
    local t = rp.tensor { { 0, -1, 2 ^ 24 }, { -2 ^ 24, 65535, 7 } }
    for dtype, descr in pairs { int64 = "<i8", int32 = "<i4" } do
      local p = d .. "/" .. dtype .. ".npy"
      assert.is_true(t:t():save(p, { dtype = dtype }))
      local b = h.read(p)
      local size = dtype == "int64" and 8 or 4
      assert.equal(128 + 6 * size, #b)
      assert.equal("{'descr': '" .. descr .. "', 'fortran_order': False, 'shape': (3, 2), }",
        b:sub(11, 69))
      assert.equal(-1, string.unpack(dtype == "int64" and "<i8" or "<i4", b, 129 + 2 * size))
      assert.same(t:t():totable(), assert(rp.load(p)):totable())
    end
    assert.is_true(t:save(d .. "/f.npy", { dtype = "float32" }))
    assert.equal("'<f4'", h.read(d .. "/f.npy"):sub(21, 25))
  end)

  it("t:save refuses an element the integer type cannot hold, naming it", function()
    local p = d .. "/bad.npy"
    local cases = {
      { rp.tensor { { 1, 2, 1.5 }, { 3, 4, 5 } }, "int64",
        "t:save: element [1][3] is 1.5, not an integer (dtype int64)" },
      { rp.tensor { 1, 3e9 }, "int32",
        "t:save: element [2] is 3000000000, outside int32 (-2147483648..2147483647)" },
      { rp.tensor { 1, 1e19 }, "int64", "t:save: element [2] is 9999999980506447872, outside "
        .. "int64 (-9223372036854775808..9223372036854775807)" },
      { rp.tensor { 0 / 0 }, "int32", "t:save: element [1] is nan, not an integer (dtype int32)" },
      { rp.tensor { 1, -math.huge }, "int64",
        "t:save: element [2] is -inf, not an integer (dtype int64)" },
      { rp.zeros {}:fill(0.5), "int64", "t:save: the element is 0.5, not an integer (dtype int64)" },
    }
    for _, c in ipairs(cases) do
      assert.has_error(function() c[1]:save(p, { dtype = c[2] }) end, c[3])
      assert.is_nil(io.open(p, "r"), "nothing written: " .. c[3])
    end
    local t = rp.zeros(2)
    assert.has_error(function() t:save(p, { dtype = "int16" }) end, "bad argument #2 to 'save' "
      .. "(option 'dtype' must be one of \"float32\", \"int32\", \"int64\", got string \"int16\")")
    assert.has_error(function() t:save(p, { dtyp = "int64" }) end,
      "bad argument #2 to 'save' (unknown option 'dtyp' (known: dtype))")
    assert.has_error(function() t:save(p, 5) end,
      "bad argument #2 to 'save' (options table expected, got 5)")
    -- the options are read before the tensor is used: a __index that frees it
    local opts = setmetatable({}, { __index = function(_, k)
      if k == "dtype" then t:free() return "int64" end
    end })
    assert.has_error(function() t:save(p, opts) end,
      "calling 'save' on bad self (attempt to use a released tensor)")
  end)
end)

describe("rp.load picks the reader by the first bytes", function()
  local d
  setup(function() d = h.tmpdir() end)
  teardown(function() h.remove_tree(d) end)

  it("checkpoint, .npy, safetensors, or a message naming all three", function()
    local m = model()
    assert.is_true(m:save(d .. "/a.ck"))
    assert.is_true(m:save_safetensors(d .. "/a.st"))
    assert.is_true(rp.ones(3):save(d .. "/a.np"))
    assert.equal("roper.Model", getmetatable(rp.load(d .. "/a.ck")).__name)
    assert.equal("roper.Model", getmetatable(rp.load(d .. "/a.st")).__name)
    assert.is_true(rp.is_tensor(rp.load(d .. "/a.np")))
    h.write(d .. "/g", "GIF89a, not a tensor")
    assert.same({ nil, d .. "/g: not a roper checkpoint, .npy or safetensors file" },
      { rp.load(d .. "/g") })
    h.write(d .. "/e", "")
    assert.same({ nil, d .. "/e: empty file (not a roper checkpoint, .npy or safetensors file)" },
      { rp.load(d .. "/e") })
    h.write(d .. "/n", "\147NUM")
    assert.same({ nil, d .. "/n: truncated (4 bytes, shorter than the 10-byte .npy preamble)" },
      { rp.load(d .. "/n") })
    h.write(d .. "/r", "RP")
    assert.same({ nil, d .. "/r: truncated (2 bytes, shorter than the 16-byte header)" },
      { rp.load(d .. "/r") })
  end)

  it("a checkpoint whose size makes its byte 8 a '{' is a checkpoint (RPCK first)", function()
    -- byte 8 of a checkpoint is the low byte of its size: this model with its optimiser makes
    -- 82,299 bytes (0x1417B), so bytes 0..8 also pass the safetensors test (a length >= 2, '{')
    local m = rp.model { vocab = 7, d_model = 16, heads = 2, layers = 2, d_ff = 64, seq_len = 16,
      pe = "rope", tie_embeddings = true }
    local opt = rp.optim.adam(m)
    local p = d .. "/brace.ckpt"
    assert.is_true(m:save(p, opt))
    assert.equal("{", h.read(p):sub(9, 9))
    local back, bopt = rp.load(p)
    assert.equal("roper.Model", getmetatable(back).__name, tostring(bopt))
    assert.equal(0, param_diff(m, back))
    assert.equal("roper.Optim", getmetatable(bopt).__name)
    assert.equal("roper.Model", getmetatable(rp.load(p, { max_batch = 4 })).__name)
    -- a max_batch past the schema's range is the caller's, not the file's (raised, not nil)
    assert.has_error(function() rp.load(p, { max_batch = 2^31 }) end, "bad argument #2 to "
      .. "'load' (option 'max_batch' must be in 1..2147483647, got 2147483648)")
    -- and m:load_safetensors names what such a file is, not a "truncated" safetensors file
    assert.same({ nil, p .. ": not a safetensors file (a roper checkpoint; rp.load reads it)" },
      { m:load_safetensors(p) })
    assert.is_true(rp.ones(3):save(d .. "/o.npy"))
    assert.same({ nil, d .. "/o.npy: not a safetensors file (a .npy file; rp.load reads it)" },
      { m:load_safetensors(d .. "/o.npy") })
  end)
end)

describe("model weights as safetensors", function()
  local d
  setup(function() d = h.tmpdir() end)
  teardown(function() h.remove_tree(d) end)

  it("writes every parameter under its m:params() name, F32, back to back, with the config",
    function()
      local m = model { pe = "learned", norm = "post", activation = "gelu", dropout = 0.125 }
      local p = d .. "/m.safetensors"
      assert.is_true(m:save_safetensors(p))
      local hd, _, n, size = h.st_parts(p)
      assert.equal(0, n % 8)
      local meta = hd.__metadata__
      assert.equal("pt", meta.format)
      assert.equal("1", meta["roper.version"])
      local cfg = cjson.decode(meta["roper.config"])
      local want = m:config()
      for k, v in pairs(want) do assert.equal(v, cfg[k], k) end
      -- the JSON holds keys that do nothing for a learned model (base, pairing, ...) at their
      -- defaults: rp.model takes it as it is, for the same model
      assert.same(want, rp.model(cfg):config())
      local off = 0
      for _, e in ipairs(m:params()) do
        local info = hd[e.name]
        assert.is_not_nil(info, e.name)
        assert.equal("F32", info.dtype)
        assert.same(e.tensor:shape(), info.shape)
        assert.same({ off, off + 4 * e.tensor:numel() }, info.data_offsets)
        off = off + 4 * e.tensor:numel()
      end
      assert.equal(8 + n + off, size)
      local back = assert(rp.load(p))
      assert.same(m:config(), back:config())
      assert.equal(0, param_diff(m, back))
    end)

  it("loads weights into a model of the same architecture, and only into one", function()
    local m = model()
    local p = d .. "/w.safetensors"
    assert.is_true(m:save_safetensors(p))
    local other = model { seed = 99, max_batch = 1, dropout = 0.5, seq_len = 6 }
    assert.is_true(param_diff(m, other) > 0)
    assert.is_true(other:load_safetensors(p))
    assert.equal(0, param_diff(m, other))
    local x = { { 1, 2, 3, 4, 5 } }
    assert.equal(0, rp.maxdiff(m:forward(x), other:forward(x)))

    local wrong = model { pe = "rope", seed = 5 }
    local before = wrong:params()[1].tensor:clone()
    local ok, err = wrong:load_safetensors(p)
    assert.is_nil(ok)
    assert.equal(p .. ": the file's roper.config has pe \"roper\", the model \"rope\"", err)
    assert.equal(0, rp.maxdiff(before, wrong:params()[1].tensor))
    ok, err = model { d_model = 8 }:load_safetensors(p)
    assert.is_nil(ok)
    assert.equal(p .. ": the file's roper.config has d_model 16, the model 8", err)
  end)

  it("reads the state dicts PyTorch wrote: logits as the reference model's", function()
    local m = assert(rp.load(FIX .. "/torch_roper.safetensors"))
    local tok = assert(rp.load(FIX .. "/torch_roper_tokens.npy"))
    local ref = assert(rp.load(FIX .. "/torch_roper_logits.npy"))
    assert.is_true(rp.maxdiff(m:forward(tok), ref) < 1e-5)
    local plain = FIX .. "/torch_roper_plain.safetensors"
    local r, err = rp.load(plain)
    assert.is_nil(r)
    assert.equal(plain .. ": no roper.config in the metadata (not written by roper: build the "
      .. "model from its config, then load the weights into it)", err)
    local m2 = rp.model(m:config())
    assert.is_true(m2:load_safetensors(plain))
    assert.equal(0, param_diff(m, m2))
    assert.is_true(m2:load_safetensors(FIX .. "/torch_roper_f64.safetensors"))
    assert.equal(0, param_diff(m, m2))
    local lp = assert(rp.load(FIX .. "/torch_learned_post.safetensors"))
    assert.equal("learned", lp:config().pe)
    assert.is_true(rp.maxdiff(lp:forward(rp.load(FIX .. "/torch_learned_post_tokens.npy")),
      rp.load(FIX .. "/torch_learned_post_logits.npy")) < 1e-5)
  end)

  it("refuses damaged files with nil and 'path: reason'", function()
    local m = model()
    local p = d .. "/d.safetensors"
    assert.is_true(m:save_safetensors(p))
    local b = h.read(p)
    h.write(p, b:sub(1, #b - 4))
    local r, err = rp.load(p)
    assert.is_nil(r)
    assert.truthy(err:find("^" .. p:gsub("%p", "%%%0") .. ": truncated %(tensor \"head.bias\" "
      .. "ends at byte %d+ of the data, the file has %d+ data bytes%)$"), err)
    h.write(p, b .. "xyz")
    assert.same({ nil, p .. ": 3 bytes after the last tensor (trailing data)" }, { rp.load(p) })
    h.write(p, string.pack("<I8", 1e9) .. b:sub(9))
    assert.same({ nil, p .. ": truncated (the header length says 1000000000 bytes, " .. (#b - 8)
      .. " follow it)" }, { rp.load(p) })
    assert.same({ nil, d .. "/missing: No such file or directory" },
      { m:load_safetensors(d .. "/missing") })
  end)

  it("F64 weights: rounded to float32; a finite value beyond float32's range is refused, named; "
    .. "NaN and infinities kept as F32's are", function()
    local m = model()
    local p, p32 = d .. "/f64.safetensors", d .. "/f32.safetensors"
    assert.is_true(m:save_safetensors(p32))
    -- the file again with every tensor F64 (its float32 values widened), then changes[name][i]
    local function f64_file(changes)
      local header, data = h.st_parts(p32)
      h.st_write(p, header, h.st_f64(header, data, true, changes))
    end
    f64_file({})
    assert.equal(0, param_diff(m, assert(rp.load(p))))
    -- beyond float32's range (3.4028235677973366e38 and up round to inf): refused, the model
    -- given to m:load_safetensors left as it was
    for _, c in ipairs {
      { "head.bias", 3, 1e39, '"head.bias" element [3] is 1e+39' },
      { "embed.weight", 16 + 3, -3.5e38, '"embed.weight" element [2][3] is -3.5e+38' },
      { "head.bias", 1, 3.4028235677973366e38, '"head.bias" element [1] is 3.40282357e+38' },
    } do
      f64_file({ [c[1]] = { [c[2]] = c[3] } })
      local want = { nil, p .. ": tensor " .. c[4] .. ", beyond float32's range" }
      assert.same(want, { rp.load(p) })
      local m2 = model()
      assert.same(want, { m2:load_safetensors(p) })
      assert.equal(0, param_diff(model(), m2))
    end
    -- the largest value that rounds to float32's largest, NaN and the infinities load
    f64_file({ ["head.bias"] = { 3.4028235677973362e38, 0 / 0, math.huge, -math.huge } })
    local b = assert(rp.load(p)):params()["head.bias"]
    assert.equal(string.unpack("<f", "\xff\xff\x7f\x7f"), b:get(1))
    assert.is_true(b:get(2) ~= b:get(2))
    assert.same({ math.huge, -math.huge }, { b:get(3), b:get(4) })
  end)

  it("refuses non-finite weights unless allowed, and raises for misuse", function()
    local m = model()
    local p = d .. "/n.safetensors"
    m:params()["head.bias"]:set(1, 0 / 0)
    assert.has_error(function() m:save_safetensors(p) end,
      "m:save_safetensors: parameter 'head.bias' holds nan or inf (the model diverged); pass "
      .. "{allow_nonfinite = true} to save it anyway")
    assert.is_true(m:save_safetensors(p, { allow_nonfinite = true }))
    local back = assert(rp.load(p))
    assert.is_true(back:params()["head.bias"]:get(1) ~= back:params()["head.bias"]:get(1))
    assert.has_error(function() m:save_safetensors(p, { allow = true }) end,
      "bad argument #2 to 'save_safetensors' (unknown option 'allow' (known: allow_nonfinite))")
    assert.has_error(function() m:save_safetensors(42) end,
      "bad argument #1 to 'save_safetensors' (path must be a string, got 42)")
    assert.has_error(function() m:load_safetensors() end,
      "bad argument #1 to 'load_safetensors' (path must be a string, got no value)")
    -- it takes no options: an extra argument is refused, not taken for understood, and the
    -- model is left as it was
    local before = m:params()["head.bias"]:get(2)
    assert.has_error(function() m:load_safetensors(p, { strict = false }) end,
      "bad argument #2 to 'load_safetensors' (unexpected argument after the path (table))")
    assert.has_error(function() m:load_safetensors(p, nil) end,
      "bad argument #2 to 'load_safetensors' (unexpected argument after the path (nil))")
    assert.has_error(function() rp.Model.load_safetensors(m, p, 7) end,
      "bad argument #3 to 'load_safetensors' (unexpected argument after the path (7))")
    assert.equal(before, m:params()["head.bias"]:get(2))
    assert.has_error(function() rp.Model.load_safetensors(rp.zeros(1), p) end,
      "bad argument #1 to 'load_safetensors' (roper.Model expected, got roper.Tensor; call methods "
        .. "with ':', as in x:load_safetensors())")
    getmetatable(m).__close(m)
    assert.has_error(function() m:save_safetensors(p) end,
      "calling 'save_safetensors' on bad self (attempt to use a released model)")
    assert.same({ nil, d .. "/no/x: No such file or directory" },
      { model():save_safetensors(d .. "/no/x") })
  end)
end)

describe("live round trips through NumPy and PyTorch (" .. PY .. ")", function()
  local d
  setup(function() d = h.tmpdir() end)
  teardown(function() h.remove_tree(d) end)

  it("tensor -> .npy -> NumPy -> .npy -> roper", function()
    local ok, why = python_has("numpy")
    if not ok then
      pending(why)
      return
    end
    local t = rp.randn({ 3, 5, 7 }, rp.rng(11)):transpose(1, 3) -- a strided view
    t[{ 1, 1, 1 }] = 0 / 0
    t[{ 1, 1, 2 }] = -math.huge
    local src, o32, o64 = d .. "/roper.npy", d .. "/np32.npy", d .. "/np64.npy"
    assert.is_true(t:save(src))
    local out, err, code = h.run(PY .. " " .. SCRIPT .. " npy " .. h.sh_quote(src) .. " "
      .. h.sh_quote(o32) .. " " .. h.sh_quote(o64))
    assert.equal(0, code, err)
    local back32, back64 = assert(rp.load(o32)), assert(rp.load(o64))
    for _, x in ipairs { back32, back64 } do
      assert.is_true(x[{ 1, 1, 1 }] ~= x[{ 1, 1, 1 }])
      assert.equal(-math.huge, x[{ 1, 1, 2 }])
    end
    local a, b32, b64 = t:clone(), back32:clone(), back64:clone()
    for _, x in ipairs { a, b32, b64 } do x[{ 1, 1, { 1, 2 } }] = 0 end -- NaN, -inf checked above
    local d32, d64 = rp.maxdiff(a, b32), rp.maxdiff(a, b64)
    assert.equal(0, d32)
    assert.equal(0, d64)
    io.write(("\n  %s\n  roper -> NumPy -> roper: max difference %g (float32), %g (via float64)\n")
      :format(out:gsub("\n$", ""), d32, d64))
  end)

  -- Token ids: roper's int64 and int32 files through np.load (dtype and values checked there),
  -- written back by np.save in both byte orders and as uint8 / int16, read by roper exactly; an id
  -- of 2^24 + 1 NumPy writes is refused naming its index and value.
  it("token ids -> int64 / int32 .npy -> NumPy -> every integer dtype -> roper", function()
    local ok, why = python_has("numpy")
    if not ok then
      pending(why)
      return
    end
    local ids = rp.tensor { { 3, 0, -1, 2 ^ 24 }, { -2 ^ 24, 65535, 7, 1 } }
    assert.is_true(ids:save(d .. "/ids64.npy", { dtype = "int64" }))
    assert.is_true(ids:save(d .. "/ids32.npy", { dtype = "int32" }))
    local script = [==[
import sys, numpy as np
d = sys.argv[1]
want = [[3, 0, -1, 2 ** 24], [-2 ** 24, 65535, 7, 1]]
for name, dt in [("ids64", "<i8"), ("ids32", "<i4")]:
    a = np.load(d + "/" + name + ".npy")
    assert a.dtype == np.dtype(dt) and a.tolist() == want, (name, a.dtype, a.tolist())
    for out in ["<i8", ">i8", "<i4", ">i4"]:
        np.save("%s/%s_%s.npy" % (d, name, out[1:] + ("le" if out[0] == "<" else "be")), a.astype(out))
small = np.array([3, 0, 255, 7], dtype=np.uint8)
np.save(d + "/u8.npy", small)
np.save(d + "/i16.npy", np.array([-32768, -1, 32767], dtype=">i2"))
over = np.load(d + "/ids64.npy")
over[1, 2] = 2 ** 24 + 1
np.save(d + "/over.npy", over)
print("numpy %s read roper's int64 and int32 ids (%s) and wrote them back as <i8 >i8 <i4 >i4" % (np.__version__, a.shape))
]==]
    local out, err, code = h.run(PY .. " -c " .. h.sh_quote(script) .. " " .. h.sh_quote(d))
    assert.equal(0, code, err)
    local want = ids:totable()
    local n = 0
    for _, src in ipairs { "ids64", "ids32" } do
      for _, kind in ipairs { "i8le", "i8be", "i4le", "i4be" } do
        assert.same(want, assert(rp.load(d .. "/" .. src .. "_" .. kind .. ".npy")):totable())
        n = n + 1
      end
    end
    assert.same({ 3, 0, 255, 7 }, assert(rp.load(d .. "/u8.npy")):totable())
    assert.same({ -32768, -1, 32767 }, assert(rp.load(d .. "/i16.npy")):totable())
    assert.same({ nil, d .. "/over.npy: integer 16777217 at index (1, 2) is beyond float32's exact "
      .. "range (|x| <= 2^24 = 16777216)" }, { rp.load(d .. "/over.npy") })
    io.write(("\n  %s\n  roper -> NumPy -> roper: %d integer files read back exactly\n")
      :format(out:gsub("\n$", ""), n + 2))
  end)

  -- The .npy header grammar (docs/interop.md): every header roper reads, NumPy reads too, with
  -- the same shape; the headers of the first list both read, of the second both refuse; the
  -- third are what NumPy 1.24 reads and roper refuses (Python takes them, NumPy never writes
  -- them; a negative size NumPy reads as 0; trailing data it ignores).
  it("NumPy reads every .npy header roper reads (the header grammar, no more)", function()
    local ok, why = python_has("numpy")
    if not ok then
      pending(why)
      return
    end
    local D = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
    local function sub(s, from, to) return (s:gsub(from, to)) end
    local function with_shape(s) return sub(D, "%(2, 3%)", s) end
    -- { version, header, data bytes (default 24: the 2 x 3 floats of D) }
    local both = {
      { 1, D .. "   \n" }, { 2, D .. "\n" }, { 3, D .. "\n" },
      { 1, "{\"shape\": (2, 3), \"descr\": \"<f4\", \"fortran_order\": False}\n" },
      { 1, "{ 'descr' : '<f4' ,\n\t'fortran_order' : False ,\r\n 'shape' : ( 2 ,\f3 , ) , }" },
      { 1, with_shape("(1_0, 3)"), 120 }, { 1, with_shape("(00, 3)"), 0 },
      { 1, with_shape("(0_0, 3)"), 0 }, { 1, with_shape("(2L, 3L)") },
      { 2, with_shape("(2L, 3L)") },
      { 1, D .. "\t\f \r\n" }, { 1, D }, { 1, with_shape("()"), 4 }, { 1, with_shape("(6,)") },
      { 1, with_shape("(0, 0, 7)"), 0 }, { 1, with_shape("(0, 1048576, 1048576)"), 0 },
    }
    local refused = {
      { 1, sub(D, "'descr'", "'descr\0'") }, { 1, sub(D, "'<f4'", "'<f4\0junk'") },
      { 1, sub(D, "'shape'", "'shape\0xyz'") }, { 1, with_shape("(02, 3)") },
      { 1, with_shape("(2_, 3)") }, { 1, with_shape("(2__0, 3)") }, { 3, D .. "\n  " },
      { 3, with_shape("(2L, 3L)") }, { 3, sub(D, "'<f4'", "'<f4\255'") },
      { 1, sub(D, "'<f4'", "'<f4\n'") }, { 1, sub(D, "False", "Falsey") },
      { 1, with_shape("(0, 4294967296, 4294967296)"), 0 }, { 1, sub(D, "'descr'", "'descr2'") },
      { 1, sub(D, "'shape': %(2, 3%), ", "") }, { 1, D, 20 },
    }
    local stricter = {
      { 1, "\t" .. D }, { 1, " " .. D }, { 1, with_shape("(0x2, 3)") },
      { 1, with_shape("(+2, 3)") }, { 1, with_shape("((2, 3))") },
      { 1, sub(D, "'descr'", "u'descr'") },
      { 1, D .. " # note" }, { 1, D .. "\n\n" }, { 1, D .. "\n  " },
      { 1, sub(D, "'<f4'", "'<\\x66\\x34'") }, { 1, with_shape("(2 L, 3)") },
      { 1, sub(D, "{", "{'descr': '<i8', ") }, { 1, with_shape("(-2, 3)"), 0 }, { 1, D, 28 },
    }
    local files, expect = {}, {}
    local function add(list, verdict)
      for _, c in ipairs(list) do
        local name = ("h%02d.npy"):format(#files + 1)
        local major, text = c[1], c[2]
        local pre = major == 1 and string.pack("<I2", #text) or string.pack("<I4", #text)
        h.write(d .. "/" .. name, "\147NUMPY" .. string.char(major, 0) .. pre .. text
          .. ("\0"):rep(c[3] or 24))
        files[#files + 1] = name
        expect[name] = { verdict = verdict, text = text, major = major }
      end
    end
    add(both, "both")
    add(refused, "refused")
    add(stricter, "stricter")
    local paths = {}
    for i, f in ipairs(files) do paths[i] = h.sh_quote(d .. "/" .. f) end
    local out, err, code = h.run(PY .. " " .. SCRIPT .. " headers " .. table.concat(paths, " "))
    assert.equal(0, code, err)
    local numpy = {}
    for name, verdict, shape in out:gmatch("([^\t\n]+)\t([^\t\n]+)\t([^\n]*)") do
      numpy[name] = { ok = verdict == "ok", shape = shape }
    end
    local problems = {}
    for _, name in ipairs(files) do
      local e, np = expect[name], numpy[name]
      local t = rp.load(d .. "/" .. name)
      local mine = t and "(" .. table.concat(t:shape(), ", ") .. (t:dim() == 1 and ",)" or ")")
      local np_ok = np and np.ok
      local what = ("%s (version %d.0, %q)"):format(name, e.major, e.text)
      if t and not (np_ok and np.shape == mine) then
        problems[#problems + 1] = what .. ": roper reads " .. mine .. ", NumPy "
          .. (np and np.shape or "?")
      elseif e.verdict == "both" and not (t and np_ok) then
        problems[#problems + 1] = what .. ": not read by both"
      elseif e.verdict == "refused" and np_ok then
        problems[#problems + 1] = what .. ": NumPy reads it"
      elseif e.verdict == "stricter" and t then
        problems[#problems + 1] = what .. ": roper reads it"
      end
    end
    assert.same({}, problems)
  end)

  it("model -> safetensors -> PyTorch state dict (load_state_dict) -> safetensors -> roper",
    function()
      local ok, why = python_has("numpy, torch")
      if not ok then
        pending(why)
        return
      end
      local m = model { pairing = "interleaved", base = 500, fraction_qk = 0.5, seed = 8 }
      local tokens = rp.tensor { { 1, 5, 2, 9, 0, 3, 3, 7 }, { 10, 4, 6, 8, 2, 1, 0, 5 } }
      local src, tok, lg = d .. "/roper.safetensors", d .. "/tokens.npy", d .. "/roper_logits.npy"
      local back, tlg = d .. "/torch.safetensors", d .. "/torch_logits.npy"
      assert.is_true(m:save_safetensors(src))
      assert.is_true(tokens:save(tok))
      local logits = m:forward(tokens)
      assert.is_true(logits:save(lg))
      local out, err, code = h.run(PY .. " " .. SCRIPT .. " model " .. table.concat({
        h.sh_quote(src), h.sh_quote(tok), h.sh_quote(lg), h.sh_quote(back), h.sh_quote(tlg) }, " "))
      assert.equal(0, code, err)
      local torch_logits = assert(rp.load(tlg))
      local dl = rp.maxdiff(logits, torch_logits)
      assert.is_true(dl < 1e-5, "logits differ by " .. dl)
      local m2 = assert(rp.load(back))
      assert.same(m:config(), m2:config())
      local dp = param_diff(m, m2)
      assert.equal(0, dp)
      io.write(("\n  %s\n  roper -> PyTorch -> roper: parameters max difference %g, logits "
        .. "roper vs torch float32 max difference %.3g\n"):format(out:gsub("\n$", ""), dp, dl))
    end)
end)

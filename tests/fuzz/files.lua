-- The file fuzzer (issue 29): forged .npy, safetensors, checkpoint and SentencePiece .model
-- files, each loaded (and a model used) in a child process of the roper binary by the machinery of the API fuzz test (tests/fuzz/driver.lua
-- runs the cases of a kind "file:npy" as it runs a function's; tests/fuzz/child.lua asks this
-- module for them). tests/lua/fuzz_files_spec.lua runs it.
--
--   local files = require "files"
--   files.prepare(rp, dir, fixtures)  -- the base checkpoints the forgeries start from, into dir
--                                     -- (with the version 1 files of the fixtures folder)
--   files.kinds()                     -- { "file:checkpoint", "file:npy", "file:safetensors",
--                                     --   "file:tokenizer" }
--   files.count(rp, ctx, kind)        -- the cases of a kind
--   local desc, call = files.case(rp, ctx, kind, i)
--       -- case i: a description, and a function that writes the file, loads it and returns nil
--       -- when all is well or "<class>: <problem>" (class raw or config)
--
-- The cases of a kind: a systematic list first (each base checkpoint as it is, then every field of
-- a checkpoint of each version, the first tensor's included, set to each edge value of its type:
-- 0, -1, NaN, inf, huge, enums out of range; every key of a safetensors roper.config at edge
-- values; the issue's .npy headers), then FUZZ_FILES_CASES random forgeries (default 200) drawn
-- from math.random seeded with (FUZZ_FILES_SEED, i) (default seed 29), so case i is the same in
-- every process. A checkpoint keeps a valid checksum and declared size (recomputed as
-- core/io/checkpoint.c computes them), so the forged fields reach the parser's checks.
--
-- Every load goes through rp.load (safetensors also through m:load_safetensors into a fresh
-- model). Problems: raw, a raised error where a file error belongs (nil, "path: reason"), a
-- message without the path, a refused m:load_safetensors that changed the model, a loaded tensor
-- that is not what its shape says, a raw Lua error while the loaded model or optimiser runs;
-- config, a loaded model whose config rp.model refuses (rp.model(m:config()) raises).
local M = {}

local cases = require "cases"
local h = require "helpers" -- tests/lua/helpers.lua (child.lua and the spec put it on the path)

local SEED = math.tointeger(tonumber(os.getenv("FUZZ_FILES_SEED") or "")) or 29
local RANDOM = math.tointeger(tonumber(os.getenv("FUZZ_FILES_CASES") or "")) or 200

local function close(x)
  local mt = getmetatable(x)
  if type(mt) == "table" and type(mt.__close) == "function" then pcall(mt.__close, x) end
end

local function pick(t) return t[math.random(#t)] end

local write = h.write
local function read(path) return assert(h.read(path)) end

-- s with bytes [at, at + n) replaced by rep (at 1-based)
local function splice(s, at, n, rep) return s:sub(1, at - 1) .. rep .. s:sub(at + n) end

-- A few random byte-level changes anywhere in s (flip, insert, delete).
local function damage(s)
  for _ = 1, math.random(3) do
    if #s == 0 then return s end
    local at, how = math.random(#s), math.random(3)
    if how == 1 then s = splice(s, at, 1, string.char(s:byte(at) ~ (1 << math.random(0, 7))))
    elseif how == 2 then s = splice(s, at, 0, pick { "\0", "\255", "'", "\"", "{", "}", ",", " " })
    else s = splice(s, at, 1, "") end
  end
  return s
end

-- ---------------------------------------------------------------- checks shared by the kinds

-- The verdict on a load: pcall's results of rp.load (or m:load_safetensors). nil when the call
-- behaved (returned a value, or nil and "path: reason"), else the problem.
local function file_error_problem(path, what, ok, v, msg)
  if not ok then return ("raw: %s raised instead of returning nil, message: %s"):format(what,
      tostring(v)) end
  if v == nil or v == false then
    if type(msg) ~= "string" or msg:sub(1, #path + 2) ~= path .. ": " then
      return ("raw: %s refused the file with a message that does not start with the path: %s")
        :format(what, tostring(msg))
    end
  end
  return nil
end

-- Writes bytes to path and loads it with rp.load: the problem of the call (file_error_problem)
-- or nil, then rp.load's results.
local function load_file(rp, path, bytes)
  write(path, bytes)
  local ok, v, msg = pcall(rp.load, path)
  return file_error_problem(path, "rp.load", ok, v, msg), v, msg
end

-- A raw error in an error message (cases.raw_error: "attempt to index", '?', ...), or nil.
local function raw_call(what, ok, err)
  if ok then return nil end
  local why = cases.raw_error(err)
  return why and ("raw: %s: %s: %s"):format(what, why, tostring(err)) or nil
end

-- Runs a loaded model (and optimiser) a little: a forward, two training steps with the optimiser
-- (a forged step once overflowed step + 1 here), its learning rate; then closes them and builds
-- rp.model(m:config()), which must accept the config of every model a file gave.
local function exercise(rp, m, o)
  local cfg = m:config()
  local p = raw_call("m:forward", pcall(m.forward, m, { 0 }))
  if p then return p end
  if o then
    for _ = 1, 2 do
      p = raw_call("m:train_step", pcall(m.train_step, m, { 0 }, { 0 }, nil, o,
        { nonfinite = "skip" }))
      if p then return p end
    end
    p = raw_call("opt:lr", pcall(o.lr, o)) or raw_call("opt:steps", pcall(o.steps, o))
    if p then return p end
    close(o)
  end
  close(m)
  collectgarbage()
  local ok, err = pcall(rp.model, cfg)
  if ok then
    close(err)
  elseif not tostring(err):find("memory", 1, true) then -- an allocation, not the config
    return "config: accepted a config rp.model refuses: " .. tostring(err)
  end
  return nil
end

-- ---------------------------------------------------------------- .npy

local function npy_bytes(major, header, data)
  local len = major == 1 and string.pack("<I2", #header % 65536) or string.pack("<I4", #header)
  return "\147NUMPY" .. string.char(major, 0) .. len .. header .. data
end

-- dict padded as NumPy pads it: spaces and a newline to a multiple of 64 bytes
local function npy_pad(major, dict)
  local total = (major == 1 and 10 or 12) + #dict + 1
  return dict .. (" "):rep((64 - total % 64) % 64) .. "\n"
end

local function tuple(sizes)
  if #sizes == 1 then return "(" .. sizes[1] .. ",)" end
  return "(" .. table.concat(sizes, ", ") .. ")"
end

-- Sizes as the header's text: the shapes of the clean files (their data written), and sizes that
-- overflow or that Python's grammar refuses or NumPy never writes.
local NPY_GOOD_SHAPES = { {}, { "3" }, { "2", "3" }, { "0" }, { "0", "3" }, { "3", "0", "5" },
  { "1", "1", "1", "4" }, { "2", "1", "2" }, { "1048576", "0" }, { "0", "1048576", "1048576" } }
local NPY_BAD_SHAPES = {
  { "0", "4294967296", "4294967296" }, { "4611686018427387904", "4" }, { "1099511627776", "2" },
  { "1048576", "1048577" }, { "1048576", "1048576", "0", "2" }, { "2147483648" },
  { "1", "1", "1", "1", "1", "1", "1", "1", "1" }, { "9223372036854775807" },
  { "9223372036854775808" }, { "99999999999999999999" }, { "18446744073709551615", "0" },
  { "02", "3" }, { "00", "3" }, { "1_0", "3" }, { "1__0" }, { "0x2" }, { "-1", "3" }, { "+2", "3" },
  { "2L", "3L" }, { "2 L" }, { "2.0", "3" }, { "1e3" }, { "True" }, { "(2, 3)" }, { "''" },
}
local NPY_BAD_DESCRS = { "'>f2'", "'|i4'", "'|O'", "'<f2'", "'<f4\0junk'", "'<f4 '", "u'<f4'",
  "b'<f4'", "'<\\x66\\x34'", "'<f4\n'", "[('a', '<f4')]", "'\255'", "'\195\169'", "''", "None",
  "4", "'<f4'L" }
local NPY_BAD_ORDERS = { "True", "0", "Falsey", "None", "false", "'False'", "False L" }
local NPY_BAD_KEYS = { "'descr\0'", "'descr '", "u'descr'", "'shape\0xyz'", "'fortran_order\0'",
  "'Shape'", "descr" }

-- Known element count of sizes, or nil (a size that is not a plain decimal).
local function npy_numel(sizes)
  local n = 1
  for _, s in ipairs(sizes) do
    local v = s:match("^%d+$") and math.tointeger(tonumber(s))
    if not v then return nil end
    n = n * v
  end
  return n
end

-- The k-th value of a clean file (written as a double in '<f8', a float32 in '<f4').
local function npy_value(k) return ((k * 7919) % 1009 - 504) / 7.0 end

-- One random .npy file: description, bytes, and for a clean one (no change) the values it holds
-- (a list of floats) and its shape. A clean file is NumPy's layout in any of the forms NumPy
-- reads (version, quotes, key order, spacing, trailing comma, padding); three in four get one
-- change: a key, descr, fortran_order, shape, spacing or tail Python or roper refuses, a lying
-- length, a data size off, a cut, damaged bytes.
local function npy_random()
  local major = pick { 1, 1, 2, 3 }
  local sizes = pick(NPY_GOOD_SHAPES)
  local f8 = math.random(3) == 1
  local q = pick { "'", '"' }
  local entries = {
    { q .. "descr" .. q, q .. (f8 and "<f8" or "<f4") .. q },
    { q .. "fortran_order" .. q, "False" },
    { q .. "shape" .. q, "" },
  }
  local change = math.random(4) > 1 and math.random(12) or 0
  local what = "clean"
  if change == 1 then
    entries[math.random(3)][1] = pick(NPY_BAD_KEYS)
    what = "a key " .. entries[1][1]:sub(1, 10)
  elseif change == 2 then
    entries[1][2] = pick(NPY_BAD_DESCRS)
    what = "descr " .. entries[1][2]:sub(1, 12)
  elseif change == 3 then
    entries[2][2] = pick(NPY_BAD_ORDERS)
    what = "fortran_order " .. entries[2][2]
  elseif change == 4 then
    sizes = pick(NPY_BAD_SHAPES)
    what = "shape " .. tuple(sizes)
  end
  entries[3][2] = tuple(sizes)
  if change == 5 then
    local r = math.random(3)
    if r == 1 then table.remove(entries, math.random(3))
    elseif r == 2 then entries[4] = entries[math.random(3)]
    else entries[4] = { "'extra'", "1" } end
    what = ("keys changed (%d)"):format(r)
  end
  for i = #entries, 2, -1 do -- any key order
    local j = math.random(i)
    entries[i], entries[j] = entries[j], entries[i]
  end
  local sep = pick { " ", " ", "", "  ", "\t", "\n ", "\f", "\r\n" }
  if change == 6 then
    sep = pick { "\v", "\0", "\\\n", " # c\n", "\r" }
    what = ("spacing %q"):format(sep)
  end
  local parts = {}
  for i, e in ipairs(entries) do parts[i] = e[1] .. ":" .. sep .. e[2] end
  local dict = "{" .. table.concat(parts, "," .. sep) .. (math.random(2) == 1 and ", " or "") .. "}"
  local header = npy_pad(major, dict)
  if change == 7 then
    local r = math.random(2)
    if r == 1 then header = pick { "\t", " ", "\n", "\f" } .. header
    else header = dict .. pick { "\n  ", "\n\n", " # c\n", "x", "\0", "\r\r" } end
    what = ("around the dict (%d)"):format(r)
  end
  local item = f8 and 8 or 4
  local numel = npy_numel(sizes)
  local nbytes = numel and numel <= 4096 and numel * item or math.random(0, 8)
  if change == 8 then
    nbytes = math.max(0, nbytes + pick { -8, -4, -1, 1, 4, 100 })
    what = ("%d data bytes"):format(nbytes)
  end
  local data, values = {}, {}
  for k = 1, nbytes // item do
    values[k] = npy_value(k)
    data[k] = string.pack(f8 and "<d" or "<f", values[k])
    values[k] = string.unpack("<f", string.pack("<f", values[k])) -- float32, as rp.load rounds
  end
  local bytes = npy_bytes(major, header, table.concat(data) .. ("\1"):rep(nbytes % item))
  if change == 9 then -- a lying header length
    local len = pick { 0, 1, #header - 1, #header + 1, 65535, 65536, 0xFFFFFFFF }
    if major == 1 then len = len % 65536 end
    bytes = splice(bytes, 9, major == 1 and 2 or 4, string.pack(major == 1 and "<I2" or "<I4", len))
    what = ("header length %d"):format(len)
  elseif change == 10 then
    local cut = math.random(0, #bytes - 1)
    bytes = bytes:sub(1, cut)
    what = ("cut at %d"):format(cut)
  elseif change == 11 then
    bytes = damage(bytes)
    what = "bytes damaged"
  elseif change == 12 then
    major = pick { 0, 4, 255 }
    bytes = splice(bytes, 7, 1, string.char(major))
    what = ("version %d.0"):format(major)
  end
  return ("version %d.0, shape %s: %s"):format(major, tuple(sizes), what), bytes,
    change == 0 and { values = values, shape = sizes } or nil
end

-- The .npy cases of the issue and the grammar's edges, each made once: NumPy refuses every one
-- (rp.load must too).
local function npy_named()
  local D = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
  local data = ("\0"):rep(24)
  local list = {
    { "the shape (0, 2^32, 2^32) with no data",
      npy_bytes(1, npy_pad(1, (D:gsub("%(2, 3%)", "(0, 4294967296, 4294967296)"))), "") },
    { "key 'descr\\x00'", npy_bytes(1, npy_pad(1, (D:gsub("'descr'", "'descr\0'"))), data) },
    { "descr '<f4\\x00junk'", npy_bytes(1, npy_pad(1, (D:gsub("'<f4'", "'<f4\0junk'"))), data) },
    { "key 'shape\\x00xyz'", npy_bytes(1, npy_pad(1, (D:gsub("'shape'", "'shape\0xyz'"))), data) },
    { "(02, 3)", npy_bytes(1, npy_pad(1, (D:gsub("%(2, 3%)", "(02, 3)"))), data) },
    { "a leading tab", npy_bytes(1, npy_pad(1, "\t" .. D), data) },
    { "a header length past the file", npy_bytes(2, npy_pad(2, D), data):sub(1, 12) .. "{" },
    { "an empty header", npy_bytes(1, "", "") },
  }
  return list
end

local function check_tensor(t, path)
  local shape, numel, span, empty = t:shape(), 1, 1, false
  for _, n in ipairs(shape) do
    numel = numel * n
    if n == 0 then empty = true else span = span * n end
  end
  if t:numel() ~= numel then
    return ("raw: a tensor of shape %s holds %d elements"):format(tuple(shape), t:numel())
  end
  if span > 2 ^ 40 then
    return ("raw: rp.load made a tensor of shape %s (beyond 2^40 without its 0 sizes)")
      :format(tuple(shape))
  end
  local size = #read(path)
  if numel > size then -- at least a byte per element ('|u1')
    return ("raw: a tensor of %d elements from a file of %d bytes"):format(numel, size)
  end
  local stride, want = t:stride(), 1
  for d = #shape, 1, -1 do
    if stride[d] ~= want then
      return ("raw: a loaded tensor of shape %s has strides %s"):format(tuple(shape),
        tuple(stride))
    end
    want = want * (shape[d] > 0 and shape[d] or 1)
  end
  if not empty then t:sum() end -- every element readable (ASan would see one that is not)
  return nil
end

local function npy_case(rp, ctx, i, named)
  local desc, bytes, clean
  if i <= #named then desc, bytes = named[i][1], named[i][2]
  else desc, bytes, clean = npy_random() end
  local must_refuse = i <= #named
  return desc, function()
    local path = ctx.dir .. "/fuzz.npy"
    local p, t, msg = load_file(rp, path, bytes)
    if p then return p end
    if not t then
      return clean and "raw: a file in NumPy's own layout was refused: " .. tostring(msg) or nil
    end
    if not rp.is_tensor(t) then return "raw: rp.load of a .npy file gave " .. type(t) end
    if must_refuse then return "raw: rp.load read a file NumPy refuses: " .. tuple(t:shape()) end
    p = check_tensor(t, path)
    if not p and clean then -- the shape and the values written, bit for bit
      if tuple(t:shape()) ~= tuple(clean.shape) then
        p = ("raw: read shape %s, written %s"):format(tuple(t:shape()), tuple(clean.shape))
      end
      local flat = t:numel() > 0 and t:contiguous():view(-1):totable() or {}
      for k = 1, #clean.values do
        if not p and flat[k] ~= clean.values[k] then
          p = ("raw: value %d read as %s, written %s"):format(k, tostring(flat[k]),
            tostring(clean.values[k]))
        end
      end
    end
    close(t)
    return p
  end
end

-- ---------------------------------------------------------------- JSON pieces

local function json_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    if c == '"' or c == "\\" then return "\\" .. c end
    return ("\\u%04x"):format(c:byte())
  end) .. '"'
end

-- The JSON text of a decoded value (cjson's), integers without a fraction.
local function json_value(v)
  if type(v) == "string" then return json_string(v) end
  if type(v) == "number" then
    local k = math.tointeger(v)
    return k and ("%d"):format(k) or ("%.17g"):format(v)
  end
  if type(v) == "boolean" then return tostring(v) end
  if type(v) == "table" then
    local parts = {}
    for i, x in ipairs(v) do parts[i] = json_value(x) end
    return "[" .. table.concat(parts, ",") .. "]"
  end
  return "null"
end

-- members: list of { key text (quoted), value text }
local function json_object(members)
  local parts = {}
  for i, m in ipairs(members) do parts[i] = m[1] .. ":" .. m[2] end
  return "{" .. table.concat(parts, ",") .. "}"
end

local JSON_EDGES = { "0", "-1", "1", "2", "2147483647", "2147483648", "9007199254740993",
  "9223372036854775807", "-9223372036854775808", "18446744073709551615",
  "18446744073709551616", "1e300", "1e999", "-0", "0.5", "1e-320", "01", "1.", "\"x\"", "\"\"",
  "true", "null", "[]", "{}", "NaN", "-Infinity" }

-- Arrays nested depth deep.
local function deep(depth) return ("["):rep(depth) .. ("]"):rep(depth) end

-- ---------------------------------------------------------------- safetensors

-- The parts of a base file (the fuzz folder's model.safetensors, rp.model of ctx.model(); with
-- pos, pos.safetensors: the same config with 2-D positions, axes mixed and a mix matrix, whose
-- metadata names the tensors roper.positions and roper.mix):
-- { meta = members, cfg = members, entries = { {name =, members =} }, data = bytes }
local st_base_cache = {}
local function st_base(ctx, pos)
  local path = pos and ctx.dir .. "/pos.safetensors" or ctx.safetensors
  if st_base_cache[path] then return st_base_cache[path] end
  local cjson = require "cjson"
  local b = read(path)
  local n = string.unpack("<I8", b)
  local h = cjson.decode(b:sub(9, 8 + n))
  local base = { meta = {}, cfg = {}, entries = {}, data = b:sub(9 + n) }
  local cfg = cjson.decode(h.__metadata__["roper.config"])
  local keys = {}
  for k in pairs(cfg) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do base.cfg[#base.cfg + 1] = { json_string(k), json_value(cfg[k]) } end
  base.meta = { { '"format"', '"pt"' }, { '"roper.version"', '"1"' } }
  local more = {} -- the rest of the metadata (the positions' keys), in name order
  for k, v in pairs(h.__metadata__) do
    if k ~= "format" and k ~= "roper.version" and k ~= "roper.config" then more[#more + 1] = k end
  end
  table.sort(more)
  for _, k in ipairs(more) do base.meta[#base.meta + 1] = { json_string(k), json_string(h.__metadata__[k]) } end
  local names = {}
  for k, e in pairs(h) do
    if k ~= "__metadata__" then names[#names + 1] = { k, e.data_offsets[1] } end
  end
  table.sort(names, function(x, y) return x[2] < y[2] end)
  for _, nm in ipairs(names) do
    local e = h[nm[1]]
    base.entries[#base.entries + 1] = { name = json_string(nm[1]), members = {
      { '"dtype"', json_value(e.dtype) }, { '"shape"', json_value(e.shape) },
      { '"data_offsets"', json_value(e.data_offsets) } } }
  end
  st_base_cache[path] = base
  return base
end

local function copy_members(ms)
  local c = {}
  for i, m in ipairs(ms) do c[i] = { m[1], m[2] } end
  return c
end

-- The file of parts p (the same shape as st_base's), and its header text.
local function st_bytes(p, hlen_override)
  local meta = copy_members(p.meta)
  if p.cfg then meta[#meta + 1] = { '"roper.config"', json_string(json_object(p.cfg)) } end
  local members = { { '"__metadata__"', json_object(meta) } }
  if p.meta_raw then members[1][2] = p.meta_raw end
  for _, e in ipairs(p.entries) do
    members[#members + 1] = { e.name, e.raw or json_object(e.members) }
  end
  local header = json_object(members)
  if p.header_damage then header = damage(header) end
  return string.pack("<I8", hlen_override or #header) .. header .. p.data
end

local ST_DTYPES = { '"F32"', '"F64"', '"F16"', '"BF16"', '"I64"', '"BOOL"', '"F8_E4M3"', '"F33"',
  '""', "5", "null", '"f32"' }
local ST_SHAPES = { "[]", "[0]", "[2,3]", "[0,4294967296,4294967296]", "[4611686018427387904,4]",
  "[1048576,1048577]", "[1099511627776]", "[1,1,1,1,1,1,1,1,1]", "[-1]", "[1.5]", '["1"]',
  "[18446744073709551616]", "{}", "[9223372036854775807,0]", "[0,0]" }
local ST_NAMES = { '"\255\254"', '"embed.weight\\u0000x"', '"\\u0000"', '""',
  json_string(("w"):rep(5000)), '"__metadata__"', '"\\ud800"', '"embed.weight "' }

-- The config keys rp.model knows with a value of another kind, for roper.config.
local CFG_STRINGS = { '"none"', '"rope"', '"roper"', '"shaw"', '"alibi"', '"nope"', '"pre"',
  '"post"', '"gelu"', '"linear"', '"before"', '"interleaved"', '"yarn"', '"qkvo"', '"x"' }

-- The member of entry e under key (a quoted key), or nil once a mutation removed it.
local function member(e, key)
  for _, m in ipairs(e.members) do
    if m[1] == key then return m end
  end
  return nil
end

-- Values for the metadata keys of the positions (p.meta past its first two members).
local ST_EXTRA_VALUES = { '"roper.mix"', '"roper.positions"', '"embed.weight"', '"head.bias"',
  '"nope"', '""', '"mixed"', '"axial"', '"sections"', '"roper.sections"' }
-- 8-byte words for the positions' data (int64 positions, float64 mix entries alike).
local ST_WORDS = { 0, -1, 1 << 53, (1 << 53) + 1, 1 << 62, math.mininteger, math.maxinteger,
  0x7ff0000000000000, 0x7ff8000000000000, 0xfff0000000000000 }

-- One random change of the parts; returns a description.
local function st_mutate(p, ne)
  local what = math.random(p.extras and 14 or 12)
  local e = p.entries[math.random(ne)]
  local o = p.entries[math.random(ne)]
  local ename, off, ooff = e.name, member(e, '"data_offsets"'), member(o, '"data_offsets"')
  local b0, b1 = (off and off[2] or ""):match("^%[(%d+),(%d+)%]$")
  if (what == 2 and not b0) or (what == 3 and not (off and ooff)) then what = 10 end
  if what == 1 then
    local key = pick { '"dtype"', '"shape"', '"data_offsets"' }
    local v = key == '"dtype"' and pick(ST_DTYPES) or key == '"shape"' and pick(ST_SHAPES)
      or pick { "[0,0]", "[24,0]", "[0]", "[0,1,2]", '["0",4]', "[18446744073709551608,"
        .. "18446744073709551612]", "[0,18446744073709551616]", "[-4,0]", "[4,8]", "null" }
    local m = member(e, key)
    if m then m[2] = v else e.members[#e.members + 1] = { key, v } end
    return ("tensor %s: %s = %s"):format(ename, key, v)
  elseif what == 2 then -- offsets shifted: overlaps, gaps, out of range
    local d = pick { -8, -4, -1, 1, 4, 8, 1 << 32, 1 << 62 }
    local b = { math.tointeger(tonumber(b0)), math.tointeger(tonumber(b1)) }
    local k = math.random(2)
    b[k] = b[k] + d
    off[2] = ("[%d,%d]"):format(b[1], b[2])
    return ("tensor %s: data_offsets %s"):format(ename, off[2])
  elseif what == 3 then -- another tensor's offsets (overlap)
    off[2] = ooff[2]
    return ("tensor %s: the offsets of %s"):format(ename, o.name)
  elseif what == 4 then
    local r = math.random(3)
    if r == 1 or #e.members == 0 then table.insert(e.members, { '"x"', "1" })
    elseif r == 2 then table.remove(e.members, math.random(#e.members))
    else table.insert(e.members, e.members[math.random(#e.members)]) end
    return ("tensor %s: keys changed (%d)"):format(ename, r)
  elseif what == 5 then
    e.name = math.random(2) == 1 and pick(ST_NAMES) or o.name
    return "a tensor renamed " .. e.name:sub(1, 30)
  elseif what == 6 and p.cfg and #p.cfg > 0 then
    local c = p.cfg[math.random(#p.cfg)]
    c[2] = math.random(3) == 1 and pick(CFG_STRINGS) or pick(JSON_EDGES)
    return ("roper.config %s = %s"):format(c[1], c[2])
  elseif what == 7 and p.cfg and #p.cfg > 0 then
    local r = math.random(3)
    if r == 1 then table.remove(p.cfg, math.random(#p.cfg))
    elseif r == 2 then p.cfg[#p.cfg + 1] = { pick { '"pee"', '"rotate"', '"fraction_q"',
        '"scaling"', '"rel_clip"', '"learn_freq"', '"tie_embeddings"' }, pick(JSON_EDGES) }
    else p.cfg[#p.cfg + 1] = p.cfg[math.random(#p.cfg)] end
    return ("roper.config: keys changed (%d)"):format(r)
  elseif what == 8 then
    local r = math.random(4)
    if r == 1 then p.cfg = nil
    elseif r == 2 then p.meta[2][2] = pick { '"2"', '""', "1", "null" }
    elseif r == 3 then p.meta[#p.meta + 1] = { '"n"', pick { "5", "[]", "{}", "null" } }
    else p.meta_raw = pick { "5", "[]", deep(20), '{"a":' .. deep(17) .. "}" } end
    return ("metadata changed (%d)"):format(r)
  elseif what == 9 then
    local depth = pick { 15, 16, 17, 100, 100000 }
    e.raw = math.random(2) == 1 and deep(depth) or
      ('{"dtype":"F32","shape":%s,"data_offsets":[0,4]}'):format(deep(depth))
    return ("tensor %s: arrays nested %d deep"):format(ename, depth)
  elseif what == 10 then
    p.header_damage = true
    return "header bytes damaged"
  elseif what == 11 then
    local r = math.random(3)
    if r == 1 then p.data = p.data:sub(1, math.random(0, #p.data))
    elseif r == 2 then p.data = p.data .. ("\0"):rep(math.random(8))
    else p.data = damage(p.data) end
    return ("data changed (%d)"):format(r)
  elseif what == 13 then -- the metadata of the positions: a key renamed, dropped or added
    local r = math.random(3)
    local k = 2 + math.random(#p.meta - 2)
    if r == 1 then p.meta[k][2] = pick(ST_EXTRA_VALUES)
    elseif r == 2 then table.remove(p.meta, k)
    else p.meta[#p.meta + 1] = { pick { '"roper.sections"', '"roper.freq"', '"roper.angles"',
        '"roper.axes"' }, pick(ST_EXTRA_VALUES) } end
    return ("the positions' metadata changed (%d)"):format(r)
  elseif what == 14 then -- a word of the positions or the mix (they end the data)
    local at = #p.data - 8 * math.random(p.extras) + 1
    local v = pick(ST_WORDS)
    p.data = splice(p.data, at, 8, string.pack("<i8", v))
    return ("the positions' data: word %d = %d"):format((#p.data - at + 1) // 8, v)
  else
    p.entries[#p.entries + 1] = { name = o.name, members = copy_members(o.members) }
    return "a tensor twice: " .. o.name
  end
end

-- A copy of the parts of a base (pos: the one with positions; p.extras the words of its
-- positions and mix at the end of the data).
local function st_parts(ctx, pos)
  local b = st_base(ctx, pos)
  local p = { meta = copy_members(b.meta), cfg = copy_members(b.cfg), entries = {}, data = b.data,
    extras = pos and (8 * 2 + 2 * 2) or nil }
  for i, e in ipairs(b.entries) do
    p.entries[i] = { name = e.name, members = copy_members(e.members) }
  end
  return p
end

local function st_random(ctx)
  local p = st_parts(ctx, math.random(3) == 1)
  local ne = #p.entries
  local descs = {}
  for k = 1, math.random(3) do descs[k] = st_mutate(p, ne) end
  local hlen
  if math.random(12) == 1 then
    hlen = pick { 0, 1, 2, 7, 100000001, 1 << 40, -1, math.mininteger }
    descs[#descs + 1] = ("header length %d"):format(hlen)
  end
  return table.concat(descs, "; "), st_bytes(p, hlen)
end

-- Every key of roper.config set to each of a few edge values.
local CFG_EDGES = { "0", "-1", "2147483648", "9223372036854775807", "18446744073709551616",
  "1e300", "1e999", "-0", "0.5", "\"x\"", "null", "[]" }
local function st_named(ctx)
  local list = { { "the base file", function() return st_bytes(st_parts(ctx)) end, true },
    { "the base file with positions", function() return st_bytes(st_parts(ctx, true)) end, true } }
  -- the positions' metadata: each key dropped and set to each value; each of their words
  for k = 3, #st_base(ctx, true).meta do
    list[#list + 1] = { "", function()
      local p = st_parts(ctx, true)
      local key = table.remove(p.meta, k)[1]
      return st_bytes(p), "the positions' metadata without " .. key
    end }
    for _, v in ipairs(ST_EXTRA_VALUES) do
      list[#list + 1] = { "", function()
        local p = st_parts(ctx, true)
        p.meta[k][2] = v
        return st_bytes(p), ("the positions' metadata %s = %s"):format(p.meta[k][1], v)
      end }
    end
  end
  for w = 1, 8 * 2 + 2 * 2 do
    for _, v in ipairs(ST_WORDS) do
      list[#list + 1] = { "", function()
        local p = st_parts(ctx, true)
        local at = #p.data - 8 * w + 1
        p.data = splice(p.data, at, 8, string.pack("<i8", v))
        return st_bytes(p), ("the positions' data: word -%d = %d"):format(w, v)
      end }
    end
  end
  for ci = 1, #st_base(ctx).cfg do
    for _, v in ipairs(CFG_EDGES) do
      list[#list + 1] = { "", function()
        local p = st_parts(ctx)
        p.cfg[ci][2] = v
        return st_bytes(p), ("roper.config %s = %s"):format(p.cfg[ci][1], v)
      end }
    end
  end
  return list
end

-- Copies of the model's parameters (to compare after a refused load).
local function snapshot(m)
  local s = {}
  for i, p in ipairs(m:params()) do s[i] = p.tensor:clone() end
  return s
end

local function st_case(rp, ctx, i, named)
  local desc, make, must_load
  if i <= #named then
    desc, make, must_load = named[i][1], named[i][2], named[i][3]
  else
    local d, bytes = st_random(ctx)
    desc, make = d, function() return bytes end
  end
  local bytes, d2 = make()
  desc = d2 or desc
  return desc, function()
    local path = ctx.dir .. "/fuzz.safetensors"
    local p, m, msg = load_file(rp, path, bytes)
    if p then return p end
    if must_load and not m then return "raw: the base file was refused: " .. tostring(msg) end
    if m then
      p = exercise(rp, m, nil)
      if p then return p end
    end
    local into = ctx.model()
    local before = snapshot(into)
    local ok2, res, msg2 = pcall(into.load_safetensors, into, path)
    p = file_error_problem(path, "m:load_safetensors", ok2, res, msg2)
    if p then return p end
    if not res then
      for k, q in ipairs(into:params()) do
        if rp.maxdiff(before[k], q.tensor) ~= 0 then -- NaN too
          return ("raw: a refused m:load_safetensors changed parameter %s (%s)"):format(q.name,
            tostring(msg2))
        end
      end
    end
    close(into)
    return nil
  end
end

-- ---------------------------------------------------------------- checkpoints

local SIZES = { i32 = 4, u32 = 4, i64 = 8, u64 = 8, f64 = 8 }
local FMT = { i32 = "<i4", u32 = "<I4", i64 = "<i8", u64 = "<i8", f64 = "<d" }

-- The fields of checkpoint b (a valid file of versions 1 to 7, docs/checkpoint.md):
-- { {name =, at = 1-based, ty =} } in file order, and the version.
local function ck_fields(b)
  local F, at = {}, 5
  local function f(name, ty)
    F[#F + 1] = { name = name, at = at, ty = ty }
    local v = string.unpack(FMT[ty], b, at)
    at = at + SIZES[ty]
    return v
  end
  local version = f("version", "u32")
  f("size", "u64")
  for _, k in ipairs { "vocab", "d_model", "heads", "layers", "d_ff", "seq_len", "max_batch" } do
    f(k, "i64")
  end
  for _, k in ipairs { "norm", "act", "pe", "pairing" } do f(k, "i32") end
  for _, k in ipairs { "dropout", "fraction_qk", "fraction_v", "rope_base" } do f(k, "f64") end
  f("seed", "u64")
  if version >= 2 then
    f("rotate", "i32")
    f("reserved", "i32")
    for _, k in ipairs { "fraction_q", "fraction_k", "fraction_o" } do f(k, "f64") end
    for _, k in ipairs { "rel_clip", "rel_buckets", "rel_max_distance" } do f(k, "i64") end
  end
  if version >= 3 then
    f("scaling", "i32")
    f("freq_kind", "i32")
    f("scaling_factor", "f64")
    f("orig_len", "i64")
    for _, k in ipairs { "yarn_alpha", "yarn_beta", "xpos", "xpos_scale_base" } do f(k, "f64") end
    local rows, n = f("freq_rows", "i64"), f("freq_n", "i64")
    if rows * n > 0 then f("freq_table[1]", "f64") end
    at = at + 8 * (rows * n - (rows * n > 0 and 1 or 0))
  end
  if version >= 4 then
    f("yarn_ramp", "i32")
    for _, k in ipairs { "low_freq_factor", "high_freq_factor", "attention_factor" } do
      f(k, "f64")
    end
  end
  if version >= 5 then
    f("learn_freq", "i32")
    if version >= 6 then f("tie_embeddings", "i32") end
    local axes = f("axes", "i32")
    f("map", "i32")
    for a = 1, 3 do f(("sections[%d]"):format(a), "i64") end
    local n_mix, rows = f("n_mix", "i64"), f("pos_rows", "i64")
    at = at + 8 * math.max(axes, 1) * (n_mix + rows) -- the mix matrix, the positions
  end
  local flags = f("flags", "u32")
  local nt = f("ntensors", "u32")
  f("total", "u64")
  for t = 1, nt do
    local len = f(("tensor %d name length"):format(t), "u32")
    at = at + len
    local ndim = f(("tensor %d ndim"):format(t), "u32")
    local numel = 1
    for d = 1, ndim do numel = numel * f(("tensor %d size %d"):format(t, d), "i64") end
    at = at + 4 * numel
  end
  for k = 0, 3 do f(("rng s%d"):format(k), "u64") end
  f("rng spare", "f64")
  f("rng has_spare", "i32")
  if flags & 1 ~= 0 and version >= 7 then -- the optimiser's config: one entry per row
    for _ = 1, f("opt entries", "u32") do
      local len = f("opt name length", "u32")
      local name = "opt " .. b:sub(at, at + len - 1)
      F[#F].name = name .. " name length"
      at = at + len
      local enc = f(name .. " encoding", "u32")
      f(name, enc == 0 and "f64" or "i64")
    end
  elseif flags & 1 ~= 0 then -- versions 1 to 6: the fields at fixed places
    for _, k in ipairs { "lr", "beta1", "beta2", "eps", "weight_decay" } do f(k, "f64") end
    f("decoupled", "i32")
    f("schedule", "i32")
    f("clip", "f64")
    f("warmup", "i64")
    f("total_steps", "i64")
    f("min_lr", "f64")
    f("opt d_model", "f64")
  end
  if flags & 1 ~= 0 then
    f("step", "i64")
    at = at + 8 * f("n", "i64") -- the moments m and v: n floats each
  end
  -- the checksum is what is left: else a field above is misplaced
  assert(at == #b - 7, ("ck_fields: the fields end at byte %d of %d"):format(at - 1, #b - 8))
  return F, version
end

-- The edge values of each type: EDGES for the random forgeries, SYSTEMATIC (fewer) for the
-- systematic ones: zero, negative, NaN, infinities, huge, just past 2^31, enums out of range.
local SYSTEMATIC = {
  i64 = { 0, -1, 2147483648, math.maxinteger, math.mininteger },
  i32 = { -1, 0, 2, 11, 2147483647 },
  u32 = { 0, 8, 4294967295 },
  u64 = { 0, -1 },
  f64 = { -0.0, -1.0, 1e300, -math.huge, 0 / 0 },
}
local EDGES = {
  i64 = { 0, -1, 1, 3, 2147483647, 2147483648, (1 << 40) + 1, (1 << 53) + 1, math.maxinteger,
    math.mininteger },
  i32 = { -1, 0, 1, 2, 3, 4, 5, 11, 12, 2147483647, -2147483648 },
  u32 = { 0, 1, 7, 8, 2147483648, 4294967295 },
  u64 = { 0, 1, -1, math.mininteger },
  f64 = { 0.0, -0.0, -1.0, 0.5, 1.0, 2.0, 1e-310, 1e300, -1e300, math.huge, -math.huge, 0 / 0 },
}

-- FNV-1a 64 of s (core/io/checkpoint.c: offset basis 0xcbf29ce484222325, prime 0x100000001b3,
-- modulo 2^64: Lua's integers wrap as the C code's uint64_t does).
local function fnv1a(s)
  local h = 0xcbf29ce484222325
  for i = 1, #s, 4096 do
    local bytes = { s:byte(i, math.min(i + 4095, #s)) }
    for k = 1, #bytes do h = (h ~ bytes[k]) * 0x100000001b3 end
  end
  return h
end

-- b with its declared size and checksum made right again.
local function reseal(b)
  b = splice(b, 9, 8, string.pack("<I8", #b))
  b = b:sub(1, #b - 8)
  return b .. string.pack("<i8", fnv1a(b))
end

local function set_field(b, f, v) return splice(b, f.at, SIZES[f.ty], string.pack(FMT[f.ty], v)) end

local function fmt_value(v)
  if math.type(v) == "float" then return ("%.17g"):format(v) end
  return tostring(v)
end

-- The base checkpoints prepare writes (and the committed version 1 fixtures it copies). A file
-- with an optimiser is version 7 (its config by row, after every model block); the fixtures
-- with one hold it as versions 1 to 6 did.
local CK_BASES = { "ck_v1.ckpt", "ck_v7_opt.ckpt", "ck_v2_shaw.ckpt", "ck_v7_shaw_opt.ckpt",
  "ck_v2_t5.ckpt", "ck_v3_freq.ckpt", "ck_v3_angles.ckpt", "ck_v7_angles_opt.ckpt",
  "ck_v3_yarn_xpos.ckpt", "ck_v4_yarn_dims.ckpt", "ck_v5_learn_freq.ckpt",
  "ck_v7_learn_freq_opt.ckpt", "ck_v6_tied.ckpt", "ck_v7_tied_opt.ckpt", "ck_linear_before.ckpt",
  "fixture_rope.rpck",
  "fixture_roper_adam.rpck", "fixture_learned_post_gelu.rpck", "fixture_rope_linear_before.rpck" }
-- The bases whose every field gets every edge value: one of versions 1 (with the optimiser
-- fields of versions 1 to 6), 2, 3 and 6 (which holds versions 4's and 5's fields too), and 7
-- with an optimiser (every model block, a frequency table, the optimiser's config by row).
local CK_SYSTEMATIC = { "fixture_roper_adam.rpck", "ck_v2_shaw.ckpt", "ck_v3_angles.ckpt",
  "ck_v6_tied.ckpt", "ck_v7_angles_opt.ckpt" }

-- The base SentencePiece model (spm_base.model): trained by Python's sentencepiece with its
-- defaults on the fortunes package's text (tests/reference/spm_reference.py; make test installs
-- both), or nil and why.
local function prepare_spm(dir)
  local input = dir .. "/spm_input.txt"
  local text = assert(h.read("/usr/share/games/fortunes/fortunes"), "the fortunes package")
  write(input, text:sub(1, 300000))
  local _, err, code = h.run(h.sh_quote(h.PY) .. " tests/reference/spm_reference.py train "
    .. h.sh_quote(input) .. " " .. h.sh_quote(dir .. "/spm_base") .. " unigram 500")
  assert(code == 0, "training the base SentencePiece model: " .. tostring(err))
end

function M.prepare(rp, dir, fixtures)
  prepare_spm(dir)
  local function T(...) return rp.randn({ ... }, rp.rng(5)) end
  local base = { vocab = 5, d_model = 8, heads = 2, layers = 1, d_ff = 8, seq_len = 8,
    max_batch = 2, seed = 3 }
  local function save(name, extra, with_opt)
    local c = {}
    for k, v in pairs(base) do c[k] = v end
    for k, v in pairs(extra) do c[k] = v end
    local m = rp.model(c)
    local o = with_opt and rp.optim.adam(m, { schedule = "cosine", warmup = 1, total_steps = 10 })
    if o then m:train_step({ 0, 1, 2 }, { 1, 2, 3 }, nil, o) end
    assert(m:save(dir .. "/" .. name, o))
  end
  save("ck_v1.ckpt", { pe = "rope" })
  save("ck_v7_opt.ckpt", { pe = "roper", dropout = 0.1 }, true)
  save("ck_v2_shaw.ckpt", { pe = "shaw", rel_clip = 4 })
  save("ck_v7_shaw_opt.ckpt", { pe = "shaw", rel_clip = 4 }, true)
  save("ck_v2_t5.ckpt", { pe = "t5", rel_buckets = 8, rel_max_distance = 16 })
  save("ck_v3_freq.ckpt", { pe = "rope", freq = T(2) })
  save("ck_v3_angles.ckpt", { pe = "roper", angles = T(8, 2) })
  save("ck_v7_angles_opt.ckpt", { pe = "roper", angles = T(8, 2) }, true)
  save("ck_v3_yarn_xpos.ckpt", { pe = "rope", scaling = "yarn", scaling_factor = 2,
    orig_len = 4, xpos = 0.4 })
  save("ck_v4_yarn_dims.ckpt", { pe = "rope", scaling = "yarn", scaling_factor = 2, orig_len = 4,
    yarn_ramp = "dims" })
  save("ck_v5_learn_freq.ckpt", { pe = "rope", learn_freq = true })
  save("ck_v7_learn_freq_opt.ckpt", { pe = "rope", learn_freq = true }, true)
  save("ck_v6_tied.ckpt", { pe = "rope", learn_freq = true, tie_embeddings = true })
  save("ck_v7_tied_opt.ckpt", { pe = "rope", learn_freq = true, tie_embeddings = true }, true)
  save("ck_linear_before.ckpt", { pe = "roper", attention = "linear", linear_rope = "before" })
  -- the safetensors base with positions: 8 (row, column) cells, axes mixed, W [2 x 2]
  local c = {}
  for k, v in pairs(base) do c[k] = v end
  c.max_batch, c.seed = nil, nil
  c.positions = { { 0, 0 }, { 0, 1 }, { 0, 2 }, { 0, 3 }, { 1, 0 }, { 1, 1 }, { 1, 2 }, { 1, 3 } }
  c.axes, c.mix = "mixed", { { 0.5, -0.25 }, { 1.5, 0.125 } }
  assert(rp.model(c):save_safetensors(dir .. "/pos.safetensors"))
  for _, f in ipairs { "rope", "roper_adam", "learned_post_gelu", "rope_linear_before" } do
    write(dir .. "/fixture_" .. f .. ".rpck", read(fixtures .. "/" .. f .. ".rpck"))
  end
end

local ck_cache = {}
local function ck_base(ctx, name)
  if not ck_cache[name] then
    local b = read(ctx.dir .. "/" .. name)
    local fields, version = ck_fields(b)
    ck_cache[name] = { bytes = b, fields = fields, version = version }
  end
  return ck_cache[name]
end

-- The systematic cases: every field of each systematic base (after the magic, the version and
-- size included; of the tensors only the first's) to each SYSTEMATIC value of its type, the
-- optimiser step to 2^63-1 (the issue's) and 2^53 (the largest a checkpoint may hold).
local function ck_named(ctx)
  local list = {}
  for _, name in ipairs(CK_BASES) do list[#list + 1] = { name = name } end -- each as it is
  for _, name in ipairs(CK_SYSTEMATIC) do
    local base = ck_base(ctx, name)
    for _, f in ipairs(base.fields) do
      if not f.name:match("^tensor [^1]") and not f.name:match("^tensor 1%d") then
        local values = SYSTEMATIC[f.ty]
        if f.name == "step" then values = { math.maxinteger, 1 << 53, (1 << 53) + 1 } end
        for _, v in ipairs(values) do list[#list + 1] = { name = name, field = f, value = v } end
      end
    end
  end
  return list
end

local function ck_random(ctx)
  local name = pick(CK_BASES)
  local base = ck_base(ctx, name)
  local b, descs = base.bytes, {}
  local how = math.random(4)
  if how <= 2 then -- one to three fields to edge values (or a random bit pattern)
    for _ = 1, math.random(3) do
      local f = pick(base.fields)
      local v = math.random(5) == 1 and string.unpack(FMT[f.ty], string.pack("<i8",
        math.random(0))) or pick(EDGES[f.ty])
      b = set_field(b, f, v)
      descs[#descs + 1] = ("%s = %s"):format(f.name, fmt_value(v))
    end
  elseif how == 3 then -- bytes of the body changed
    local body = damage(b:sub(17, #b - 8))
    b = b:sub(1, 16) .. body .. b:sub(#b - 7)
    descs[1] = "body bytes damaged"
  else -- cut or grown at a random point
    local at = math.random(17, #b - 8)
    if math.random(2) == 1 then
      local n = math.random(1, math.min(64, #b - 8 - at))
      b = splice(b, at, n, "")
      descs[1] = ("%d bytes cut at %d"):format(n, at - 1)
    else
      local n = math.random(1, 64)
      b = splice(b, at, 0, ("\7"):rep(n))
      descs[1] = ("%d bytes inserted at %d"):format(n, at - 1)
    end
  end
  b = reseal(b)
  if math.random(20) == 1 then
    b = b:sub(1, math.random(0, #b))
    descs[#descs + 1] = "then cut"
  end
  return ("%s (version %d): %s"):format(name, base.version, table.concat(descs, ", ")), b
end

local function ck_case(rp, ctx, i, named)
  local desc, bytes
  local must_load = false
  if i <= #named and not named[i].field then
    local base = ck_base(ctx, named[i].name)
    desc, bytes, must_load = ("%s (version %d) as it is"):format(named[i].name, base.version),
      base.bytes, true
  elseif i <= #named then
    local c = named[i]
    local base = ck_base(ctx, c.name)
    desc = ("%s (version %d): %s = %s"):format(c.name, base.version, c.field.name,
      fmt_value(c.value))
    bytes = reseal(set_field(base.bytes, c.field, c.value))
    if c.field.name == "size" then bytes = set_field(bytes, c.field, c.value) end
  else
    desc, bytes = ck_random(ctx)
  end
  return desc, function()
    local p, m, o = load_file(rp, ctx.dir .. "/fuzz.ckpt", bytes)
    if p then return p end
    if not m then return must_load and "raw: the base file was refused: " .. tostring(o) or nil end
    return exercise(rp, m, o)
  end
end

-- ---------------------------------------------------------------- SentencePiece models

-- The base: a unigram model of 500 pieces trained by Python's sentencepiece with its defaults
-- (the nmt_nfkc normalization, whose precompiled character map, a double-array trie of some
-- 60,000 units and its replacement strings, the library trusts), written by M.prepare; the tree
-- of it (tests/fuzz/spm.lua) that each case edits. Loaded models encode and decode these texts,
-- whose characters walk the trie (full width, ligatures, combining marks, NUL).
local spm = require "spm"
local SPM_TEXTS = { "Hello world", "Ｆｕｌｌ ＷＩＤＴＨ ① ﬁ", "e\204\129 x\0y \u{10FFFD}",
  "  two  spaces\t\r\n", "日本語 한국어 Ελληνικά", ("z"):rep(300) }
local spm_cache

local function spm_base(ctx)
  if not spm_cache then
    local b = read(ctx.dir .. "/spm_base.model")
    spm_cache = { bytes = b }
  end
  return spm_cache
end

local function copy_tree(t)
  local c = {}
  for i, f in ipairs(t) do
    c[i] = {}
    for k, v in pairs(f) do c[i][k] = v end
    if f.fields then c[i].fields = copy_tree(f.fields) end
  end
  return c
end

-- The normalizer spec's character map field of a tree (its NormalizerSpec field 2), or nil.
local function charsmap_field(t)
  local ns = spm.field(t, 3)
  return ns and ns.fields and spm.field(ns.fields, 2)
end

-- The pieces (field 1) of a tree, in order.
local function pieces_of(t)
  local list = {}
  for _, f in ipairs(t) do if f.num == 1 then list[#list + 1] = f end end
  return list
end

local U32 = { 0, 1, 2, 3, 0xFF, 0x100, 0x3FF, 0x400, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
  0x000FFC00, 0xFFFFFC00, 0x00000200, 0x80000061 }

-- Named forgeries: each a description and a function(tree) that changes the tree (or returns the
-- bytes to write instead).
local function spm_named(ctx)
  local list = { { "as it is", function() end } }
  local function add(desc, fn) list[#list + 1] = { desc, fn } end
  -- the character map's size word: 0 .. the whole map and past it
  for _, d in ipairs { "0", "1", "3", "tb - 4", "tb + 4", "n - 8", "n - 4", "n - 3", "n - 1", "n",
    "n + 4", "2^32 - 1" } do
    add("character map size word = " .. d, function(t)
      local f = charsmap_field(t)
      local m = spm.charsmap(f.s)
      local n, tb = #f.s, m.trie_bytes
      local v = ({ ["0"] = 0, ["1"] = 1, ["3"] = 3, ["tb - 4"] = tb - 4, ["tb + 4"] = tb + 4,
        ["n - 8"] = n - 8, ["n - 4"] = n - 4, ["n - 3"] = n - 3, ["n - 1"] = n - 1, ["n"] = n,
        ["n + 4"] = n + 4, ["2^32 - 1"] = 0xFFFFFFFF })[d]
      f.s = string.pack("<I4", v) .. f.s:sub(5)
    end)
  end
  -- the trie's root and first units, the last one, to edge patterns (the issue's SIGSEGV: four
  -- bytes of the root)
  for _, k in ipairs { 1, 2, 3, 257, "last" } do
    for _, u in ipairs(U32) do
      add(("character map unit %s = 0x%08x"):format(k, u), function(t)
        local f = charsmap_field(t)
        local m = spm.charsmap(f.s)
        m.units[k == "last" and #m.units or k] = u
        f.s = spm.charsmap_bytes(m)
      end)
    end
  end
  -- the replacement strings without their last NUL, empty, cut
  add("character map strings without their last NUL", function(t)
    local f = charsmap_field(t)
    local m = spm.charsmap(f.s)
    m.strings = m.strings:sub(1, -2) .. "x"
    f.s = spm.charsmap_bytes(m)
  end)
  add("character map strings empty", function(t)
    local f = charsmap_field(t)
    local m = spm.charsmap(f.s)
    m.strings = ""
    f.s = spm.charsmap_bytes(m)
  end)
  add("character map cut to its size word", function(t)
    local f = charsmap_field(t)
    f.s = f.s:sub(1, 4)
  end)
  add("character map empty", function(t) charsmap_field(t).s = "" end)
  add("character map as the denormalizer's too", function(t)
    local ns = spm.field(t, 3)
    local d = copy_tree({ ns })[1]
    d.num = 5
    t[#t + 1] = d
  end)
  -- pieces: long (the issue's 120 KB overflowed the stack), empty, with NUL, odd types
  for _, c in ipairs { { "piece 10 of 120 KB", 10, ("q"):rep(120000) },
    { "piece 10 of 4097 bytes", 10, ("q"):rep(4097) }, { "piece 10 empty", 10, "" },
    { "piece 10 with a NUL", 10, "a\0b" }, { "piece 300 = piece 301", 300, nil } } do
    add(c[1], function(t)
      local ps = pieces_of(t)
      local f = spm.field(ps[c[2]].fields, 1)
      f.s = c[3] or spm.field(ps[c[2] + 1].fields, 1).s
    end)
  end
  for _, ty in ipairs { 0, 2, 3, 6, 7, 1 << 40 } do
    add("piece 10 of type " .. ty, function(t)
      local ps = pieces_of(t)
      local f = spm.field(ps[10].fields, 3)
      if f then f.v = ty else table.insert(ps[10].fields, { num = 3, wt = 0, v = ty }) end
    end)
  end
  add("a piece of the wrong wire type", function(t)
    local ps = pieces_of(t)
    spm.field(ps[10].fields, 1).wt = 5
  end)
  -- the trainer spec's numbers
  for _, c in ipairs { { 40, "unk_id" }, { 41, "bos_id" }, { 42, "eos_id" }, { 43, "pad_id" },
    { 4, "vocab_size" }, { 3, "model_type" } } do
    for _, v in ipairs { -2, -1, 0, 499, 500, 1 << 31, 1 << 40 } do
      add(("trainer spec %s = %d"):format(c[2], v), function(t)
        local tr = spm.field(t, 2).fields
        local f = spm.field(tr, c[1])
        if f then f.v = v else tr[#tr + 1] = { num = c[1], wt = 0, v = v } end
      end)
    end
  end
  return list
end

local function spm_random(ctx, t)
  local how = math.random(5)
  local f = charsmap_field(t)
  if how == 1 then -- units of the trie to random values
    local m = spm.charsmap(f.s)
    local k = {}
    for _ = 1, math.random(4) do
      local i = math.random(#m.units)
      m.units[i] = math.random(0, 0xFFFFFFFF)
      k[#k + 1] = i
    end
    f.s = spm.charsmap_bytes(m)
    return "character map units " .. table.concat(k, ", ") .. " random"
  elseif how == 2 then -- bit flips in the character map
    f.s = damage(f.s)
    return "character map bytes damaged"
  elseif how == 3 then -- a piece damaged
    local ps = pieces_of(t)
    local i = math.random(#ps)
    local pf = spm.field(ps[i].fields, 1)
    pf.s = damage(pf.s)
    return ("piece %d damaged"):format(i - 1)
  elseif how == 4 then -- the trainer spec damaged (its framing kept by the tree)
    local tr = spm.field(t, 2)
    tr.fields = nil
    tr.s = damage(tr.s)
    return "trainer spec bytes damaged"
  end
  return nil -- the whole file damaged below
end

local function spm_case(rp, ctx, i, named)
  local base = spm_base(ctx)
  local desc, bytes
  if i <= #named then
    local t = spm.parse(base.bytes)
    desc = named[i][1]
    named[i][2](t)
    bytes = spm.encode(t)
  else
    local t = spm.parse(base.bytes)
    desc = spm_random(ctx, t)
    bytes = spm.encode(t)
    if not desc then
      bytes = damage(bytes)
      desc = "file bytes damaged"
    end
    if math.random(10) == 1 then
      bytes = bytes:sub(1, math.random(0, #bytes))
      desc = desc .. ", then cut"
    end
  end
  return "spm_base.model: " .. desc, function()
    local path = ctx.dir .. "/fuzz.model"
    write(path, bytes)
    local ok, tok, msg = pcall(rp.tokenizer.load, path)
    local p = file_error_problem(path, "rp.tokenizer.load", ok, tok, msg)
    if p then return p end
    if not tok then
      return i == 1 and "raw: the base model was refused: " .. tostring(msg) or nil
    end
    for _, text in ipairs(SPM_TEXTS) do
      local eok, ids = pcall(tok.encode, tok, text)
      p = raw_call("tok:encode", eok, ids)
      if p then return p end
      if eok then
        p = raw_call("tok:decode", pcall(tok.decode, tok, ids))
        if p then return p end
      end
    end
    close(tok)
    return nil
  end
end

-- ---------------------------------------------------------------- the kinds

local KINDS = { ["file:checkpoint"] = { named = ck_named, case = ck_case },
  ["file:npy"] = { named = npy_named, case = npy_case },
  ["file:safetensors"] = { named = st_named, case = st_case },
  ["file:tokenizer"] = { named = spm_named, case = spm_case } }

function M.kinds() return { "file:checkpoint", "file:npy", "file:safetensors", "file:tokenizer" } end

function M.is_kind(name) return KINDS[name] ~= nil end

local named_cache = {}
local function named_of(ctx, kind)
  if not named_cache[kind] then named_cache[kind] = KINDS[kind].named(ctx) end
  return named_cache[kind]
end

function M.count(rp, ctx, kind)
  return #named_of(ctx, kind) + RANDOM
end

function M.case(rp, ctx, kind, i)
  math.randomseed(SEED, i)
  return KINDS[kind].case(rp, ctx, i, named_of(ctx, kind))
end

return M

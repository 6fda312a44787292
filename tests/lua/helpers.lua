-- Shared helpers of the busted specs: approximate comparison with a max-diff message, and `naive`,
-- plain-Lua double-precision references that never call the roper module's kernels.
--
-- Use from a spec file:
--   local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
--   package.path = dir .. "?.lua;" .. package.path
--   local h = require "helpers"

local rp = require "roper"
local luassert = require "luassert"

local M = {}

---------------------------------------------------------------------------------------------------
-- Nested tables and tensors

-- The names of the modes of core's mode table (rp.pe_modes) whose row passes keep (a function of
-- the row, or a field name that must be true, or "not relative", or a config key its relative
-- terms read, "rel_clip"; nil: every mode), in the table's order. The specs loop over these, so
-- a new mode enters every loop of its kind; what a spec expects of a mode (naive.attention
-- below) stays written out, and fails until the new mode's formula is there.
function M.pe_names(keep)
  local names = {}
  for _, row in ipairs(rp.pe_modes()) do
    local reads = false
    for _, key in ipairs(row.rel_keys) do reads = reads or key == keep end
    local ok = keep == nil or (keep == "not relative" and not row.relative) or reads
      or (type(keep) == "string" and keep ~= "not relative" and row[keep] == true)
      or (type(keep) == "function" and keep(row))
    if ok then names[#names + 1] = row.name end
  end
  return names
end

-- M.pe_names(keep) as messages list them: "rope, roper or roper_legacy".
function M.pe_list(keep)
  local names = M.pe_names(keep)
  if #names < 2 then return names[1] or "" end
  return table.concat(names, ", ", 1, #names - 1) .. " or " .. names[#names]
end

-- A tensor, nested table or number -> (flat list of numbers, shape list).
function M.flatten(x)
  if rp.is_tensor(x) then x = x:totable() end
  if type(x) == "number" then return { x }, {} end
  local out, shape = {}, {}
  local function walk(t, depth)
    if type(t) == "number" then
      out[#out + 1] = t
      return
    end
    shape[depth] = math.max(shape[depth] or 0, #t)
    for _, e in ipairs(t) do walk(e, depth + 1) end
  end
  walk(x, 1)
  return out, shape
end

-- Max |a - b| (NaN when an element is NaN on either side); error when the sizes differ.
function M.maxdiff(a, b)
  local fa, sa = M.flatten(a)
  local fb, sb = M.flatten(b)
  if #fa ~= #fb then
    error(string.format("sizes differ: %d elements [%s] vs %d elements [%s]", #fa,
                        table.concat(sa, " x "), #fb, table.concat(sb, " x ")), 2)
  end
  local m, at = 0, 0
  for i = 1, #fa do
    local e = math.abs(fa[i] - fb[i])
    if e ~= e then return e, i end
    if e > m then m, at = e, i end
  end
  return m, at
end

function M.maxabs(a)
  local m = 0
  for _, x in ipairs((M.flatten(a))) do m = math.max(m, math.abs(x)) end
  return m
end

-- approx(a, b, tol[, label]): a, b tensors, nested tables or numbers. Fails (a busted failure, not
-- an error) when any element differs by more than tol, or when the element counts differ, with a
-- message that gives the max diff and the first index where it occurs. Returns the max diff.
function M.approx(a, b, tol, label)
  tol = tol or 1e-5
  local fa, sa = M.flatten(a)
  local fb, sb = M.flatten(b)
  local prefix = label and (label .. ": ") or ""
  luassert(#fa == #fb, string.format("%selement counts differ: %d [%s] vs %d [%s]", prefix, #fa,
                                     table.concat(sa, " x "), #fb, table.concat(sb, " x ")))
  local d, at = M.maxdiff(fa, fb)
  luassert(d <= tol, string.format("%smax diff %.6g > tol %.3g at flat index %d (%.9g vs %.9g)",
                                   prefix, d, tol, at, fa[at] or 0 / 0, fb[at] or 0 / 0))
  return d
end

-- Shape of a tensor as a Lua list (for assert.same).
function M.shape(t) return t:shape() end

---------------------------------------------------------------------------------------------------
-- Files and processes (for the specs that run scripts and the REPL binary)

-- The REPL binary of the build under test (tests/run sets ROPER_BIN) and the Python the specs run.
M.BIN = os.getenv("ROPER_BIN") or "build/roper"
M.PY = os.getenv("ROPER_PYTHON") or "/usr/bin/python3"

-- s as one word for sh.
function M.sh_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- The environment (a prefix of a shell command) for a plain lua5.4 that loads the module built in
-- build_abs: under SANITIZE=1 the sanitizer runtimes first (as tests/run preloads them for
-- busted) and tests/run's san_preload.so when it is there (it drops LD_PRELOAD for the
-- programs lua5.4 starts); "" otherwise.
function M.lua_env(build_abs)
  if os.getenv("SANITIZE") ~= "1" then return "" end
  local function lib(name)
    local p = io.popen("cc -print-file-name=" .. name)
    local path = p:read("l")
    p:close()
    return path
  end
  local preload = lib("libasan.so") .. ":" .. lib("libubsan.so")
  local extra = build_abs .. "/san_preload.so"
  if require("lfs").attributes(extra, "mode") == "file" then preload = preload .. ":" .. extra end
  return "LD_PRELOAD=" .. M.sh_quote(preload) .. " "
end

-- The lines of s (each ended by a newline; a last line without one is left out).
function M.lines(s)
  local t = {}
  for l in s:gmatch("([^\n]*)\n") do t[#t + 1] = l end
  return t
end

-- The bytes of a file, or nil when it cannot be read.
function M.read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- Whether this CPU runs x86-64-v3 code (the portable build: AVX, AVX2, BMI1, BMI2, F16C, FMA,
-- LZCNT (abm), MOVBE, XSAVE), and the flags line of /proc/cpuinfo ("" if none): yes when those
-- flags say so (a portable build that refuses such a CPU then fails its tests), or when the
-- portable build at bin runs here (a hypervisor may leave a flag out of /proc/cpuinfo, abm,
-- that cpuid shows: the build's own check, rp_build_cpu_ok, reads cpuid).
function M.x86_64_v3(bin)
  local flags = (M.read("/proc/cpuinfo") or ""):match("\nflags%s*:([^\n]*)") or ""
  local listed = true
  for _, f in ipairs { "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave" } do
    listed = listed and (" " .. flags .. " "):find(" " .. f .. " ", 1, true) ~= nil
  end
  if listed then return true, flags end
  local built = bin and io.open(bin, "rb")
  if not built then return false, flags end
  built:close()
  local _, _, code = M.run(M.sh_quote(bin) .. " -e ''")
  return code == 0, flags
end

function M.write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

-- A safetensors file's parts: its header decoded with lua-cjson (a reader independent of
-- roper's), the data after it, the header's length and the file's size.
function M.st_parts(path)
  local b = assert(M.read(path))
  local n = string.unpack("<I8", b)
  return require("cjson").decode(b:sub(9, 8 + n)), b:sub(9 + n), n, #b
end

-- Writes a safetensors file of the header (a table, encoded with lua-cjson) and the data.
function M.st_write(path, header, data)
  local json = require("cjson").encode(header)
  M.write(path, string.pack("<I8", #json) .. json .. data)
end

-- The data of an F32 safetensors file (header and data as st_parts gives them) with the tensors
-- that widen names (a set of names; true: every tensor) stored as F64: their float32 values
-- widened, changes[name][i] (when given) in place of value i. The header is changed in place
-- (those tensors' dtype, every tensor's offsets: the data stays in its order).
function M.st_f64(header, data, widen, changes)
  local order, out, at = {}, {}, 0
  for k in pairs(header) do if k ~= "__metadata__" then order[#order + 1] = k end end
  table.sort(order, function(a, b) return header[a].data_offsets[1] < header[b].data_offsets[1] end)
  for _, k in ipairs(order) do
    local e = header[k]
    local bytes = data:sub(e.data_offsets[1] + 1, e.data_offsets[2])
    if widen == true or widen[k] then
      local vals, new = {}, (changes or {})[k] or {}
      for i = 1, #bytes // 4 do vals[i] = new[i] or string.unpack("<f", bytes, 4 * i - 3) end
      bytes, e.dtype = string.pack("<" .. ("d"):rep(#vals), table.unpack(vals)), "F64"
    end
    e.data_offsets = { at, at + #bytes }
    out[#out + 1], at = bytes, at + #bytes
  end
  return table.concat(out)
end

-- The data blocks of a gnuplot data file (blocks apart by two blank lines, gnuplot's index
-- order; "#" lines skipped): a list of blocks, each a list of rows of numbers.
function M.gnuplot_blocks(text)
  local blocks = {}
  for block in (text .. "\n\n"):gmatch("(.-)\n\n\n+") do
    local rows = {}
    for l in block:gmatch("[^\n]+") do
      if not l:match("^#") then
        local row = {}
        for v in l:gmatch("%S+") do row[#row + 1] = tonumber(v) end
        rows[#rows + 1] = row
      end
    end
    blocks[#blocks + 1] = rows
  end
  return blocks
end

-- Temporary paths. M.tmpdir() gives a fresh folder, M.tmpname() a fresh path that holds an empty
-- file (os.tmpname's); each is noted, and whatever was noted is removed when this module is
-- collected: when busted lets go of a spec file's modules, or at the latest when the spec's Lua
-- state closes (busted ends with os.exit(code, true), which runs the finalizers). So a spec that
-- fails midway leaves nothing in /tmp either. A caller may remove its own earlier (M.remove_tree).
local made = {}

function M.remove_tree(path) os.execute("rm -rf " .. M.sh_quote(path)) end

M.made_paths = setmetatable({}, { __gc = function()
  for i = 1, #made, 50 do
    local batch = {}
    for j = i, math.min(i + 49, #made) do batch[#batch + 1] = M.sh_quote(made[j]) end
    os.execute("rm -rf " .. table.concat(batch, " "))
  end
end })

function M.tmpname()
  local p = os.tmpname()
  made[#made + 1] = p
  return p
end

function M.tmpdir()
  local d = M.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p " .. M.sh_quote(d)))
  return d
end

-- A JSON file's decoded value (fails when the file is missing).
-- One busted test per case { options, message }: fn(options) raises an error holding prefix
-- (nil: any) and message, both as plain text. `it` is busted's (passed in: this file is not a
-- spec).
function M.refusals(it, fn, prefix, cases)
  for _, c in ipairs(cases) do
    it("refuses: " .. c[2]:sub(1, 60), function()
      local ok, err = pcall(fn, c[1])
      assert(not ok, "no error for: " .. c[2])
      if prefix then assert(err:find(prefix, 1, true), err) end
      assert(err:find(c[2], 1, true), err)
    end)
  end
end

-- A new table: a's fields, then b's over them (either may be nil).
function M.merged(a, b)
  local o = {}
  for k, v in pairs(a or {}) do o[k] = v end
  for k, v in pairs(b or {}) do o[k] = v end
  return o
end

function M.read_json(path)
  local s = M.read(path)
  luassert.is_string(s, "missing " .. path)
  return require("cjson").decode(s)
end

-- The names in a folder, sorted.
function M.ls(dir)
  local t = {}
  for name in require("lfs").dir(dir) do
    if name ~= "." and name ~= ".." then t[#t + 1] = name end
  end
  table.sort(t)
  return t
end

-- Polls cond() every 50 ms for up to `seconds`; returns its last value.
function M.wait_for(cond, seconds)
  for _ = 1, seconds * 20 do
    if cond() then return true end
    os.execute("sleep 0.05")
  end
  return cond()
end

-- The current folder (an absolute path).
function M.pwd()
  local p = assert(io.popen("pwd -P"))
  local d = p:read("l")
  p:close()
  return d
end

-- The cores a script shares among its runs (what `nproc` says, as proc.ncores).
function M.nproc()
  local p = assert(io.popen("nproc"))
  local n = math.tointeger(tonumber(p:read("l")))
  p:close()
  return n
end

-- Runs a shell command with stdout and stderr captured apart; returns out, err and the exit code
-- (0 on success, 128 + n when killed by signal n).
function M.run(cmd)
  local errfile = os.tmpname()
  local p = assert(io.popen(cmd .. " 2>" .. M.sh_quote(errfile), "r"))
  local out = p:read("a")
  local ok, how, code = p:close()
  local err = M.read(errfile) or ""
  os.remove(errfile)
  if how ~= "exit" then code = 128 + (code or 0) end
  return out, err, ok and 0 or code
end

-- A server of tests/py_fork.py under python (an interpreter's path) that has imported modules (a
-- list of names) once, for a spec that runs many Python scripts importing them (torch costs ~2 s
-- of CPU an import). Returns { run = a command prefix: `run .. " SCRIPT ARGS"` is as
-- `python SCRIPT ARGS`, each run in a fork of the server; close = a function that ends the
-- server }, or nil and the server's stderr when it did not start (a module that does not
-- import). A server not closed ends with the spec's Lua state (its pipe closes).
function M.py_fork(python, modules)
  local dir = M.tmpdir()
  local sock, errfile = dir .. "/py.sock", dir .. "/serve.err"
  local script = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "../py_fork.py"
  local words = {}
  for i, m in ipairs(modules) do words[i] = M.sh_quote(m) end
  local p = assert(io.popen("exec " .. python .. " " .. M.sh_quote(script) .. " serve "
    .. M.sh_quote(sock) .. " " .. table.concat(words, " ") .. " 2>" .. M.sh_quote(errfile), "r"))
  if p:read("l") ~= "ready" then
    p:close()
    return nil, M.read(errfile) or ""
  end
  return {
    run = python .. " " .. M.sh_quote(script) .. " run " .. M.sh_quote(sock),
    close = function() p:close() end,
  }
end

-- Makes DIR a git repository whose one commit holds all its files (a stand-in checkout); returns
-- that commit's short hash.
function M.git_commit_all(dir)
  -- (env -u: a GIT_DIR or GIT_WORK_TREE set around the tests, as in a git hook, would point
  -- git at another repository)
  local git = "cd " .. M.sh_quote(dir) .. " && env -u GIT_DIR -u GIT_WORK_TREE -u GIT_INDEX_FILE "
    .. "git -c user.name=t -c user.email=t@t "
  local _, err, code = M.run(git .. "init -q . && " .. git .. "add -A && " .. git
    .. "commit -q -m c")
  assert(code == 0, err)
  return (assert(M.run(git .. "rev-parse --short HEAD"):match("%x+")))
end

-- Runs a shell command with stdout and stderr captured together; returns that text, whether it
-- exited with 0, and its exit code (or the signal's number, as io.popen's close gives it).
function M.run_merged(cmd)
  local p = assert(io.popen(cmd .. " 2>&1", "r"))
  local out = p:read("a")
  local ok, _, code = p:close()
  return out, ok == true, code
end

---------------------------------------------------------------------------------------------------
-- naive: plain-Lua references in doubles

local naive = {}
M.naive = naive

-- Matrix product of two nested 2-D tables.
function naive.matmul(A, B)
  local n, k, m = #A, #B, #B[1]
  assert(#A[1] == k, "naive.matmul: inner sizes differ")
  local C = {}
  for i = 1, n do
    C[i] = {}
    for j = 1, m do
      local s = 0
      for l = 1, k do s = s + A[i][l] * B[l][j] end
      C[i][j] = s
    end
  end
  return C
end

function naive.transpose(A)
  local T = {}
  for j = 1, #A[1] do
    T[j] = {}
    for i = 1, #A do T[j][i] = A[i][j] end
  end
  return T
end

-- Softmax of a flat list (max-subtracted); -math.huge entries give exactly 0.
function naive.softmax(row)
  local mx = -math.huge
  for _, x in ipairs(row) do mx = math.max(mx, x) end
  local out, z = {}, 0
  for i, x in ipairs(row) do
    out[i] = math.exp(x - mx)
    z = z + out[i]
  end
  for i = 1, #out do out[i] = out[i] / z end
  return out
end

-- Softmax of every row of a nested 2-D table (along the last dim).
function naive.softmax_rows(A)
  local out = {}
  for i, row in ipairs(A) do out[i] = naive.softmax(row) end
  return out
end

function naive.dot(a, b)
  local s = 0
  for i = 1, #a do s = s + a[i] * b[i] end
  return s
end

-- theta_i = base^(-2i/d_rot), i = 0 .. d_rot/2-1 (Lua list, 1-based).
function naive.theta(d_rot, base)
  base = base or 10000
  local th = {}
  for i = 0, d_rot // 2 - 1 do th[i + 1] = base ^ (-2 * i / d_rot) end
  return th
end

-- The frequencies of a scheme f (the frequency options of rp.rope.angles as a table: scaling,
-- scaling_factor, orig_len, yarn_alpha, yarn_beta, freq (a list)), written from the papers:
-- PI (Chen et al. 2023) theta / s; NTK-aware base' = base s^(d/(d-2)); YaRN (Peng et al. 2023)
-- h(theta) = (1 - gamma(r)) theta / s + gamma(r) theta with r = L theta / (2 pi).
function naive.freq_theta(d_rot, base, f)
  f = f or {}
  local s = f.scaling_factor or 1
  local b = base or 10000
  if f.scaling == "ntk" and d_rot > 2 then b = b * s ^ (d_rot / (d_rot - 2)) end
  local th = {}
  for i = 0, d_rot // 2 - 1 do
    local t = f.freq and f.freq[i + 1] or b ^ (-2 * i / d_rot)
    if f.freq and f.scaling == "ntk" and d_rot > 2 then t = t * s ^ (-2 * i / (d_rot - 2)) end
    if f.scaling == "pi" then t = t / s end
    if f.scaling == "yarn" then
      local alpha, beta = f.yarn_alpha or 1, f.yarn_beta or 32
      local r = f.orig_len * math.abs(t) / (2 * math.pi)
      local g = r < alpha and 0 or r > beta and 1 or (r - alpha) / (beta - alpha)
      t = (1 - g) * t / s + g * t
    end
    th[i + 1] = t
  end
  return th
end

-- The 1-based feature indices (a, b) of rotation pair i (1-based) for a pairing.
function naive.pair(i, d_rot, pairing)
  if pairing == "interleaved" then return 2 * i - 1, 2 * i end
  return i, i + d_rot // 2
end

-- Rotation of a vector x (Lua list of D numbers) to position pos:
-- pair i of the first d_rot features is multiplied by the 2x2 matrix R(sign * scale * pos * theta_i);
-- features beyond d_rot are copied. opts: d_rot (default #x), base, pairing, sign, scale, and a
-- frequency scheme freq (naive.freq_theta's table; angles: a function (p, i) with 0-based i;
-- xpos, xpos_scale_base: pair i also scaled by zeta_i^(side * pos / scale_base),
-- zeta_i = (2i/d_rot + gamma) / (1 + gamma), side = opts.side or 1).
function naive.rotate(x, pos, opts)
  opts = opts or {}
  local d_rot = opts.d_rot or #x
  local f = opts.freq or {}
  local th = naive.freq_theta(d_rot, opts.base, f)
  local sign, scale = opts.sign or 1, opts.scale or 1
  local y = {}
  for j = 1, #x do y[j] = x[j] end
  for i = 1, d_rot // 2 do
    local a, b = naive.pair(i, d_rot, opts.pairing)
    local ang = sign * scale * (f.angles and f.angles(pos, i - 1) or pos * th[i])
    local m = 1
    if (f.xpos or 0) > 0 then
      local zeta = (2 * (i - 1) / d_rot + f.xpos) / (1 + f.xpos)
      m = zeta ^ ((opts.side or 1) * pos / (f.xpos_scale_base or 512))
    end
    local c, s = m * math.cos(ang), m * math.sin(ang)
    y[a] = c * x[a] - s * x[b]
    y[b] = s * x[a] + c * x[b]
  end
  return y
end

-- Sinusoidal (Vaswani) table [T][d]: [t][2i+1] = sin(p / base^(2i/d)), [t][2i+2] = cos(...),
-- p = offset + t - 1.
function naive.sinusoidal(T, d, base, offset)
  base, offset = base or 10000, offset or 0
  local out = {}
  for t = 1, T do
    local p = offset + t - 1
    out[t] = {}
    for i = 0, d // 2 - 1 do
      local ang = p / base ^ (2 * i / d)
      out[t][2 * i + 1] = math.sin(ang)
      out[t][2 * i + 2] = math.cos(ang)
    end
  end
  return out
end

-- Multi-head attention in doubles. q [B][T][H][D], k [B][S][H][D], v [B][S][H][Dv] (nested tables).
-- opts: pe, causal (default true), scale (1/sqrt(D)), base, pairing, d_rot_qk (D), d_rot_v (Dv),
-- q_offset (S - T). Returns out [B][T][H][Dv] and att [B][H][T][S].
function naive.attention(q, k, v, opts)
  opts = opts or {}
  local B, T, S, H = #q, #q[1], #k[1], #q[1][1]
  local D, Dv = #q[1][1][1], #v[1][1][1]
  local pe = opts.pe or "none"
  local causal = opts.causal ~= false
  local scale = opts.scale or 1 / math.sqrt(D)
  local q_offset = opts.q_offset or (S - T)
  local p0 = opts.pos_offset or 0
  -- the placements: rotate (letters of qkvo) or the mode's own; widths from the fractions
  local rotary = pe == "rope" or pe == "roper" or pe == "roper_legacy"
  local places = opts.rotate or (pe == "rope" and "qk" or rotary and "qkvo" or "")
  local function has(c) return rotary and places:find(c, 1, true) ~= nil end
  local function width(own, shared, W, direct)
    if direct then return direct end
    return math.floor((opts[own] or opts[shared] or 1) * W)
  end
  -- opts.freq: the frequency scheme (naive.rotate); q and o on the xPos query side, k and v on
  -- the key side; YaRN's temperature (0.1 ln s + 1)^2 on the scores
  local f = opts.freq
  local function r(d_rot, scl, sign, side)
    return { d_rot = d_rot, base = opts.base, pairing = opts.pairing, scale = scl, sign = sign,
      freq = f, side = side }
  end
  local rq = r(width("fraction_q", "fraction_qk", D, opts.d_rot_q or opts.d_rot_qk), 1, 1, 1)
  local rk = r(width("fraction_k", "fraction_qk", D, opts.d_rot_k or opts.d_rot_qk), 1, 1, -1)
  local rvv = r(width("fraction_v", "fraction_v", Dv, opts.d_rot_v), pe == "roper_legacy" and 2 or 1,
    1, -1)
  local ro = r(width("fraction_o", "fraction_v", Dv, opts.d_rot_o or opts.d_rot_v), 1, -1, 1)
  if f and f.scaling == "yarn" and f.scaling_factor > 1 then
    scale = scale * (0.1 * math.log(f.scaling_factor) + 1) ^ 2
  end
  local out, att = {}, {}
  for b = 1, B do
    out[b], att[b] = {}, {}
    for t = 1, T do
      out[b][t] = {}
    end
    for h = 1, H do
      att[b][h] = {}
      for t = 1, T do
        local n = q_offset + t - 1
        local qv = q[b][t][h]
        if has("q") then qv = naive.rotate(qv, p0 + n, rq) end
        local row = {}
        for s = 1, S do
          local i = s - 1
          if causal and i > n then
            row[s] = -math.huge
          else
            local kv = k[b][s][h]
            if has("k") then kv = naive.rotate(kv, p0 + i, rk) end
            row[s] = naive.dot(qv, kv) * scale
          end
        end
        local a = naive.softmax(row)
        att[b][h][t] = a
        local o = {}
        for j = 1, Dv do o[j] = 0 end
        for s = 1, S do
          local vv = v[b][s][h]
          if has("v") then vv = naive.rotate(vv, p0 + s - 1, rvv) end
          for j = 1, Dv do o[j] = o[j] + a[s] * vv[j] end
        end
        if has("o") then o = naive.rotate(o, p0 + n, ro) end
        out[b][t][h] = o
      end
    end
  end
  return out, att
end

-- Elementwise op on two nested tables with numpy broadcasting (numbers allowed on either side).
function naive.broadcast(op, a, b)
  local fa, sa = M.flatten(a)
  local fb, sb = M.flatten(b)
  local nd = math.max(#sa, #sb)
  local shape = {}
  for i = 1, nd do
    local x = sa[#sa - nd + i] or 1
    local y = sb[#sb - nd + i] or 1
    assert(x == y or x == 1 or y == 1, "naive.broadcast: shapes do not broadcast")
    shape[i] = math.max(x, y)
  end
  local function strides(s)
    local st, acc = {}, 1
    for i = nd, 1, -1 do
      local size = s[#s - nd + i] or 1
      st[i] = size == 1 and 0 or acc
      acc = acc * size
    end
    return st
  end
  local st_a, st_b = strides(sa), strides(sb)
  local function build(depth, oa, ob)
    if depth > nd then return op(fa[oa + 1], fb[ob + 1]) end
    local t = {}
    for i = 1, shape[depth] do
      t[i] = build(depth + 1, oa + (i - 1) * st_a[depth], ob + (i - 1) * st_b[depth])
    end
    return t
  end
  return build(1, 0, 0)
end

-- Elementwise map over a nested table.
function naive.map(f, a)
  if type(a) == "number" then return f(a) end
  local t = {}
  for i, e in ipairs(a) do t[i] = naive.map(f, e) end
  return t
end

return M

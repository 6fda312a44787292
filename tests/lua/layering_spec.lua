-- The layering of the C code (docs/architecture.md): repl -> bindings -> tasks -> core, one way
-- (the REPL program on top of the module, the module on top of the C library; the scripts use the
-- module from Lua), and inside core its floors, one way: io (files: fileio, json, npy,
-- safetensors, checkpoints) -> model (the transformer) -> config (the configuration's facts: the
-- model config and its schema, the rules between keys, the planners) -> nn (rope, the positional
-- modes, attention, the layers, the optimiser) -> tensor (storage, tensors, rng, ops, the vector tiles)
-- -> sys (status codes, checked sizes, the build, memory, threads, the data-parallel layer,
-- BLAS); core/rp.h, the umbrella header, sits above core's floors, and text/ (the tokenizer: C over
-- a C++ unit that calls SentencePiece) above core, below tasks. Read off the sources
-- (#include lines) and off the built objects (nm: which object uses a symbol another one
-- defines), so a call that goes back up, or two files that call each other, fails here and not in
-- a review. Below them, the same for the module's Lua side (bindings/lua/): its requires.
local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local lfs = require "lfs"

local BUILD = os.getenv("BUILD") or "build"
local FOLDERS = { "core/sys", "core/tensor", "core/nn", "core/config", "core/model", "core/io",
  "core", "text", "tasks", "bindings", "repl" }
local RANK = {}
for i, dir in ipairs(FOLDERS) do RANK[dir] = i end

local function is_dir(path) return lfs.attributes(path, "mode") == "directory" end

-- The C files (extension "c" or "[ch]"; the pattern "c" also finds C++ sources, ".cc") of every
-- folder that exists, as "core/nn/attention.c".
local function files_of(pattern)
  local list = {}
  for _, dir in ipairs(FOLDERS) do
    if is_dir(dir) then
      for f in lfs.dir(dir) do
        if f:match("%." .. pattern .. "$") or (pattern ~= "h" and f:match("%.cc$")) then
          list[#list + 1] = dir .. "/" .. f
        end
      end
    end
  end
  table.sort(list)
  return list
end

-- "core/model/model_forward" for every C source.
local function sources()
  local list = {}
  for _, f in ipairs(files_of("c")) do list[#list + 1] = f:gsub("%.cc?$", "") end
  return list
end

local function read_lines(path)
  local lines = {}
  for l in io.lines(path) do lines[#lines + 1] = l end
  return lines
end

-- The folder of a file ("core/nn" for core/nn/attention.c).
local function folder_of(path) return path:match("^(.*)/[^/]+$") end

-- The header `name` resolves to, searching as the compiler does with the Makefile's -I flags (the
-- includer's own folder first, then core and each of its floors, tasks, bindings), then repl (no
-- -I flag names it: a module file that named its header would not compile, and is reported here
-- by name): its path, or nil for a system header. Sources include a header by its name alone, so
-- no two headers may share one (checked below).
local SEARCH = { "core", "core/sys", "core/tensor", "core/nn", "core/config", "core/model",
  "core/io", "text", "tasks", "bindings", "repl" }
local function header_path(includer_dir, name)
  for _, dir in ipairs({ includer_dir, table.unpack(SEARCH) }) do
    local path = dir .. "/" .. name
    if lfs.attributes(path, "mode") == "file" then return path end
  end
  return nil
end

-- Units -> { [unit] = { defined = set, undefined = set } } of their objects' global symbols (nm
-- -P -A: "path: name type ..."), every unit not read before read by one nm run: each object once
-- a spec run (the objects do not change while it runs; nm started for each of them, three times
-- over, took most of this file's time).
local symbol_cache = {}
local function symbols_of(units)
  local paths, unit_at = {}, {}
  for _, unit in ipairs(units) do
    if not symbol_cache[unit] then
      local path = BUILD .. "/obj/" .. unit .. ".o"
      assert(lfs.attributes(path, "mode") == "file", path .. " is not built")
      paths[#paths + 1] = h.sh_quote(path)
      unit_at[path] = unit
      symbol_cache[unit] = { defined = {}, undefined = {} }
    end
  end
  if #paths > 0 then
    local p = assert(io.popen("nm -P -A " .. table.concat(paths, " ")))
    for line in p:lines() do
      local path, name, kind = line:match("^(.-): (%S+) (%a)")
      local s = path and unit_at[path] and symbol_cache[unit_at[path]]
      if s then
        if kind == "U" then s.undefined[name] = true
        elseif kind:match("[TDBRC]") then s.defined[name] = true end
      end
    end
    assert(p:close())
  end
  return symbol_cache
end

-- Object file -> { defined = set, undefined = set } of global symbols.
local function symbols(unit) return symbols_of({ unit })[unit] end

-- unit -> set of units whose symbols it uses.
local function call_graph(units)
  local all, syms, owner = symbols_of(units), {}, {}
  for _, u in ipairs(units) do
    syms[u] = all[u]
    for s in pairs(syms[u].defined) do owner[s] = u end
  end
  local g = {}
  for _, u in ipairs(units) do
    g[u] = {}
    for s in pairs(syms[u].undefined) do
      local o = owner[s]
      if o and o ~= u then g[u][o] = g[u][o] or s end
    end
  end
  return g, syms
end

-- A cycle of graph g (node -> set of nodes) as "a -> b -> a", or nil.
local function find_cycle(g)
  local state, stack = {}, {}
  local function visit(n)
    state[n] = 1
    stack[#stack + 1] = n
    local next_nodes = {}
    for m in pairs(g[n] or {}) do next_nodes[#next_nodes + 1] = m end
    table.sort(next_nodes)
    for _, m in ipairs(next_nodes) do
      if state[m] == 1 then
        local from
        for i, x in ipairs(stack) do if x == m then from = i end end
        return table.concat({ table.unpack(stack, from) }, " -> ") .. " -> " .. m
      elseif not state[m] then
        local c = visit(m)
        if c then return c end
      end
    end
    stack[#stack] = nil
    state[n] = 2
  end
  local nodes = {}
  for n in pairs(g) do nodes[#nodes + 1] = n end
  table.sort(nodes)
  for _, n in ipairs(nodes) do
    if not state[n] then
      local c = visit(n)
      if c then return c end
    end
  end
  return nil
end

-- The units linked together in this build: text/tokenizer_none is the NO_SENTENCEPIECE=1 build's
-- unit in place of text/tokenizer and text/tokenizer_spm (it defines the same functions and is not
-- built here); its includes are checked with every file's.
local function linked_units()
  local list = {}
  for _, u in ipairs(sources()) do
    if u ~= "text/tokenizer_none" then list[#list + 1] = u end
  end
  return list
end

describe("layering", function()
  local units = linked_units()

  it("finds the sources", function()
    assert.is_true(#units >= 40, "only " .. #units .. " C files found")
  end)

  it("includes only headers of its own layer or below, and no header includes back", function()
    local bad, header_graph = {}, {}
    for _, path in ipairs(files_of("[ch]")) do
      local dir = folder_of(path)
      for _, l in ipairs(read_lines(path)) do
        local name = l:match('^%s*#%s*include%s+"([^"]+)"')
        local hpath = name and header_path(dir, name)
        if hpath then
          local hdir = folder_of(hpath)
          if RANK[hdir] > RANK[dir] then bad[#bad + 1] = path .. " includes " .. hpath end
          if path:match("%.h$") then
            header_graph[path] = header_graph[path] or {}
            header_graph[path][hpath] = true
          end
        end
        if RANK[dir] < RANK.bindings and (l:match('#%s*include%s*[<"]lua')
            or l:match('#%s*include%s*[<"]lauxlib')) then
          bad[#bad + 1] = path .. " includes a Lua header"
        end
      end
    end
    assert.are.same({}, bad)
    assert.is_nil(find_cycle(header_graph))
  end)

  it("gives every header a name of its own (sources include headers by name)", function()
    local seen, twice = {}, {}
    for _, path in ipairs(files_of("h")) do
      local name = path:match("[^/]+$")
      if seen[name] then twice[#twice + 1] = seen[name] .. " and " .. path end
      seen[name] = path
    end
    assert.are.same({}, twice)
  end)

  it("calls only into its own layer or below (no Lua in core and tasks)", function()
    local g, syms = call_graph(units)
    local bad = {}
    for _, u in ipairs(units) do
      local dir = folder_of(u)
      for o, sym in pairs(g[u]) do
        if RANK[folder_of(o)] > RANK[dir] then bad[#bad + 1] = u .. " uses " .. sym .. " of " .. o end
      end
      if RANK[dir] < RANK.bindings then
        for s in pairs(syms[u].undefined) do
          if s:match("^lua[L_]") then bad[#bad + 1] = u .. " uses " .. s end
        end
      end
    end
    table.sort(bad)
    assert.are.same({}, bad)
  end)

  it("has no two files that call each other, directly or around a circle", function()
    local g = call_graph(units)
    assert.is_nil(find_cycle(g))
  end)

  it("builds the module without the REPL: roper.so defines none of repl/'s symbols", function()
    local repl = {}
    for _, u in ipairs(units) do
      if u:match("^repl/") then
        for s in pairs(symbols(u).defined) do repl[s] = u end
      end
    end
    assert.is_not_nil(next(repl), "repl/ defines no symbol")
    local path = BUILD .. "/roper.so"
    assert(lfs.attributes(path, "mode") == "file", path .. " is not built")
    local p = assert(io.popen("nm -P " .. path))
    local bad = {}
    for line in p:lines() do
      local name, kind = line:match("^(%S+) (%a)")
      if name and kind:match("[TDBRC]") and repl[name] then
        bad[#bad + 1] = name .. " of " .. repl[name]
      end
    end
    p:close()
    table.sort(bad)
    assert.are.same({}, bad)
  end)

  -- Inside bindings/, the floors are read off the calls (nm): a file that calls another sits
  -- above it, and roper.c, which registers every module, above them all. A header belongs to the
  -- files that define what it declares; no file includes a header of a file above it
  -- (registration counts: a module declares its lrp_open_* in modules.h, never in roper.c's
  -- roper.h).
  it("keeps the binding floor: no file of bindings/ includes a header of a file that calls it", function()
    local g, syms = call_graph(units)
    local function reaches(a, b) -- a calls b, directly or through others
      local seen, todo = { [a] = true }, { a }
      while #todo > 0 do
        for o in pairs(g[table.remove(todo)]) do
          if o == b then return true end
          if not seen[o] then seen[o], todo[#todo + 1] = true, o end
        end
      end
      return false
    end
    local owners = {}
    for _, path in ipairs(files_of("h")) do
      if folder_of(path) == "bindings" then
        local o = {}
        local f = assert(io.open(path))
        local text = f:read("a")
        f:close()
        for id in text:gmatch("([%a_][%w_]*)%s*[%(%[]") do
          for _, u in ipairs(units) do
            if folder_of(u) == "bindings" and syms[u].defined[id] then o[u] = true end
          end
        end
        owners[path] = o
      end
    end
    local bad = {}
    for _, u in ipairs(units) do
      if folder_of(u) == "bindings" then
        for _, l in ipairs(read_lines(u .. ".c")) do
          local name = l:match('^%s*#%s*include%s+"([^"]+)"')
          local hpath = name and header_path("bindings", name)
          if hpath and owners[hpath] then
            for o in pairs(owners[hpath]) do
              if o ~= u and reaches(o, u) then
                bad[#bad + 1] = u .. ".c includes " .. name .. ", a header of " .. o
                  .. ", which calls it"
              end
            end
          end
        end
      end
    end
    table.sort(bad)
    assert.are.same({}, bad)
    -- roper.c registers every module: it sits above them, so none of them may include roper.h
    assert.is_true(reaches("bindings/roper", "bindings/tensor")
      and reaches("bindings/roper", "bindings/tables"))
  end)

  -- A guard against monoliths only, well above any whole unit: the seams between concerns
  -- decide the files.
  it("keeps every C file within 2000 lines", function()
    local long = {}
    for _, path in ipairs(files_of("[ch]")) do
      local n = #read_lines(path)
      if n > 2000 then long[#long + 1] = path .. ": " .. n .. " lines" end
    end
    assert.are.same({}, long)
  end)

  it("finds a circle and a layer violation when there is one (the checks can fail)", function()
    assert.are.equal("a -> b -> c -> a", find_cycle({ a = { b = true }, b = { c = true }, c = { a = true } }))
    assert.is_nil(find_cycle({ a = { b = true }, b = { c = true }, c = {} }))
    assert.are.equal("bindings/args.h", header_path("core/nn", "args.h"))
    assert.are.equal("core/tensor/tensor.h", header_path("tasks", "tensor.h"))
    assert.are.equal("core/nn/attention.h", header_path("core/model", "attention.h"))
    assert.is_nil(header_path("core/nn", "stdio.h"))
    -- a module file naming the REPL's header would be caught (no -I flag names repl/)
    assert.are.equal("repl/repl.h", header_path("bindings", "repl.h"))
    assert.is_true(RANK.repl > RANK.bindings)
    -- the tokenizer's C++ unit is a source like the C ones, and text/ sits between core and tasks
    local found = {}
    for _, u in ipairs(sources()) do found[u] = true end
    assert.is_true(found["text/tokenizer_spm"] and found["text/tokenizer"])
    assert.are.equal("text/tokenizer.h", header_path("bindings", "tokenizer.h"))
    assert.is_true(RANK.core < RANK.text and RANK.text < RANK.tasks)
  end)
end)

-- The module's Lua side (bindings/lua/init.lua): named modules that require what they use, through
-- the module's own require (bindings/roper.c), and share only their return values.
local LUA_DIR = "bindings/lua"
-- the names the loader has besides the files: the module table, C's private table and the two
-- modules the build generates (Makefile: HELP_DATA, BUILD_INFO)
local LUA_GIVEN = { ["roper"] = true, ["roper.internals"] = true, ["roper.help_data"] = true,
  ["roper.build_stamp"] = true }

-- { [module name] = path } for every file below bindings/lua/ (embed.lua's naming rule).
local function lua_modules()
  local mods = {}
  local function walk(dir, prefix)
    for f in lfs.dir(dir) do
      local path = dir .. "/" .. f
      if f ~= "." and f ~= ".." and is_dir(path) then
        walk(path, prefix .. f .. ".")
      elseif f:match("%.lua$") then
        mods[prefix .. f:gsub("%.lua$", "")] = path
      end
    end
  end
  walk(LUA_DIR, "roper.")
  return mods
end

-- The names a file requires, from its code lines (comments left out).
local function requires_of(path)
  local names = {}
  for _, l in ipairs(read_lines(path)) do
    local code = l:gsub("%-%-.*$", "")
    for name in code:gmatch("require%s*%(?%s*[\"']([%w_.]+)[\"']") do names[#names + 1] = name end
  end
  return names
end

-- The requires graph of mods ({name = path}), and the names required that are no module.
local function lua_graph(mods)
  local g, unknown = {}, {}
  for name, path in pairs(mods) do
    g[name] = {}
    for _, r in ipairs(requires_of(path)) do
      if mods[r] then g[name][r] = true
      elseif not LUA_GIVEN[r] then unknown[#unknown + 1] = path .. ": " .. r end
    end
  end
  table.sort(unknown)
  return g, unknown
end

describe("the Lua modules", function()
  local mods = lua_modules()

  it("are found, each named by its path", function()
    assert.are.equal("bindings/lua/init.lua", mods["roper.init"])
    assert.are.equal("bindings/lua/experiment/keys.lua", mods["roper.experiment.keys"])
  end)

  it("require only modules that exist, no two each other around a circle, all from init", function()
    local g, unknown = lua_graph(mods)
    assert.are.same({}, unknown)
    assert.is_nil(find_cycle(g))
    local seen, todo = { ["roper.init"] = true }, { "roper.init" }
    while #todo > 0 do
      for m in pairs(g[table.remove(todo)]) do
        if not seen[m] then seen[m], todo[#todo + 1] = true, m end
      end
    end
    local unreached = {}
    for name in pairs(mods) do if not seen[name] then unreached[#unreached + 1] = name end end
    table.sort(unreached)
    assert.are.same({}, unreached)
  end)

  it("share what they export by returning it, never through C's private table", function()
    local writes = {}
    for _, path in pairs(mods) do
      for i, l in ipairs(read_lines(path)) do
        local code = l:gsub("%-%-.*$", "")
        if code:match("internals%.[%w_]+%s*=[^=]") or code:match("function%s+internals[.:]")
            or code:match("internals%s*%[[^]]*%]%s*=[^=]") then
          writes[#writes + 1] = path .. ":" .. i
        end
      end
    end
    table.sort(writes)
    assert.are.same({}, writes)
  end)

  it("load only among themselves: a user's module of the same name is neither used nor given "
    .. "ours, and roper.internals stays private", function()
    local script = [[
      package.cpath = os.getenv("BUILD_ABS") .. "/?.so;" .. package.cpath
      package.preload["roper.print"] = function() return "the user's" end
      package.preload["roper.args"] = function() error("the user's roper.args ran") end
      local rp = require "roper"
      assert(tostring(rp.zeros{2}):find("[2]", 1, true), "roper's own printing")
      assert(require "roper.print" == "the user's")
      assert(package.loaded["roper.internals"] == nil and package.loaded["roper.init"] == nil)
      local ok, err = pcall(require, "roper.internals")
      assert(not ok and err:find("module 'roper.internals' not found", 1, true), err)
      print("ok")
    ]]
    local build_abs = BUILD:sub(1, 1) == "/" and BUILD or lfs.currentdir() .. "/" .. BUILD
    local out, err, code = h.run("BUILD_ABS=" .. h.sh_quote(build_abs) .. " "
      .. h.lua_env(build_abs) .. "lua5.4 -e " .. h.sh_quote(script))
    assert.are.equal(0, code, err)
    assert.are.equal("ok\n", out)
  end)

  it("get their names from embed.lua's rule, which refuses two files of one name", function()
    local dir = h.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. h.sh_quote(dir .. "/lua/a") .. " "
      .. h.sh_quote(dir .. "/x/lua/a")))
    for _, f in ipairs { "/lua/a/b.lua", "/x/lua/a/b.lua", "/lua/c.lua" } do
      assert(io.open(dir .. f, "w")):close()
    end
    local function embed(a, b)
      return h.run("lua5.4 bindings/embed.lua " .. h.sh_quote(dir .. a) .. " "
        .. h.sh_quote(dir .. b))
    end
    local out, err, code = embed("/lua/a/b.lua", "/lua/c.lua")
    assert.are.equal(0, code, err)
    assert.truthy(out:find('{"roper.a.b", "a/b.lua", ', 1, true), out)
    assert.truthy(out:find('{"roper.c", "c.lua", ', 1, true), out)
    out, err, code = embed("/lua/a/b.lua", "/x/lua/a/b.lua")
    assert.are_not.equal(0, code)
    assert.truthy(err:find("two files for module roper.a.b", 1, true), err)
    os.execute("rm -r " .. h.sh_quote(dir))
  end)
end)

-- The layering of the C code (docs/architecture.md): repl -> bindings -> tasks -> core, one way
-- (the REPL program on top of the module, the module on top of the C library; the scripts use the
-- module from Lua). Read off the sources (#include lines) and off the built objects (nm: which
-- object uses a symbol another one defines), so a call that goes back up, or two files of a folder
-- that call each other, fails here and not in a review.
local lfs = require "lfs"

local BUILD = os.getenv("BUILD") or "build"
local FOLDERS = { "core", "tasks", "bindings", "repl" }
local RANK = { core = 1, tasks = 2, bindings = 3, repl = 4 }
-- the layers that may include Lua's headers and call its API
local LUA_LAYERS = { bindings = true, repl = true }

-- "core/model_forward" for every C source of the four folders.
local function sources()
  local list = {}
  for _, dir in ipairs(FOLDERS) do
    for f in lfs.dir(dir) do
      if f:match("%.c$") then list[#list + 1] = dir .. "/" .. f:gsub("%.c$", "") end
    end
  end
  table.sort(list)
  return list
end

local function read_lines(path)
  local lines = {}
  for l in io.lines(path) do lines[#lines + 1] = l end
  return lines
end

-- The folder whose header `name` is, searching as the Makefile's -I flags do (the includer's own
-- folder first, then core, tasks, bindings), then repl (no -I flag names it: a module file that
-- named its header would not compile, and is reported here by name); nil for a system header.
local function header_folder(includer_dir, name)
  for _, dir in ipairs({ includer_dir, "core", "tasks", "bindings", "repl" }) do
    if lfs.attributes(dir .. "/" .. name, "mode") == "file" then return dir end
  end
  return nil
end

-- Object file -> { defined = set, undefined = set } of global symbols (nm -P: name type ...).
local function symbols(unit)
  local path = BUILD .. "/obj/" .. unit .. ".o"
  assert(lfs.attributes(path, "mode") == "file", path .. " is not built")
  local p = assert(io.popen("nm -P " .. path))
  local def, undef = {}, {}
  for line in p:lines() do
    local name, kind = line:match("^(%S+) (%a)")
    if name then
      if kind == "U" then undef[name] = true
      elseif kind:match("[TDBRC]") then def[name] = true end
    end
  end
  p:close()
  return { defined = def, undefined = undef }
end

-- unit -> set of units whose symbols it uses.
local function call_graph(units)
  local syms, owner = {}, {}
  for _, u in ipairs(units) do
    syms[u] = symbols(u)
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

describe("layering", function()
  local units = sources()

  it("finds the sources", function()
    assert.is_true(#units >= 40, "only " .. #units .. " C files found")
  end)

  it("includes only headers of its own layer or below, and no header includes back", function()
    local bad, header_graph = {}, {}
    local files = {}
    for _, dir in ipairs(FOLDERS) do
      for f in lfs.dir(dir) do
        if f:match("%.[ch]$") then files[#files + 1] = dir .. "/" .. f end
      end
    end
    for _, path in ipairs(files) do
      local dir = path:match("^(%a+)/")
      for _, l in ipairs(read_lines(path)) do
        local name = l:match('^%s*#%s*include%s+"([^"]+)"')
        if name then
          local hdir = header_folder(dir, name)
          if hdir and RANK[hdir] > RANK[dir] then
            bad[#bad + 1] = path .. " includes " .. hdir .. "/" .. name
          end
          if hdir and path:match("%.h$") then
            header_graph[path] = header_graph[path] or {}
            header_graph[path][hdir .. "/" .. name] = true
          end
        end
        if not LUA_LAYERS[dir] and (l:match('#%s*include%s*[<"]lua') or l:match('#%s*include%s*[<"]lauxlib')) then
          bad[#bad + 1] = path .. " includes a Lua header"
        end
      end
    end
    assert.are.same({}, bad)
    assert.is_nil(find_cycle(header_graph))
  end)

  it("calls only into its own layer or below (no Lua in core and tasks, no REPL in the module)",
    function()
    local g, syms = call_graph(units)
    local bad = {}
    for _, u in ipairs(units) do
      local dir = u:match("^(%a+)/")
      for o, sym in pairs(g[u]) do
        local odir = o:match("^(%a+)/")
        if RANK[odir] > RANK[dir] then bad[#bad + 1] = u .. " uses " .. sym .. " of " .. o end
      end
      if not LUA_LAYERS[dir] then
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

  -- A guard against monoliths only, well above any whole unit (attention.c, the kernels with
  -- their relative terms, is the longest): the seams between concerns decide the files.
  it("keeps every C file of core/, tasks/, bindings/ and repl/ within 2000 lines", function()
    local long = {}
    for _, dir in ipairs(FOLDERS) do
      for f in lfs.dir(dir) do
        if f:match("%.[ch]$") then
          local n = #read_lines(dir .. "/" .. f)
          if n > 2000 then long[#long + 1] = dir .. "/" .. f .. ": " .. n .. " lines" end
        end
      end
    end
    assert.are.same({}, long)
  end)

  it("finds a circle and a layer violation when there is one (the checks can fail)", function()
    assert.are.equal("a -> b -> c -> a", find_cycle({ a = { b = true }, b = { c = true }, c = { a = true } }))
    assert.is_nil(find_cycle({ a = { b = true }, b = { c = true }, c = {} }))
    assert.are.equal("bindings", header_folder("core", "args.h"))
    assert.are.equal("repl", header_folder("bindings", "repl.h")) -- a module file would be caught
    assert.is_true(RANK[header_folder("bindings", "repl.h")] > RANK.bindings)
  end)
end)

-- The cells of a notebook from its markdown source: lua5.4 notebooks/cells.lua FILE.md prints a
-- JSON list of {"cell_type": "markdown" | "code", "source": text} (notebooks/make.py builds the
-- .ipynb from it). Text between ```lua blocks becomes markdown cells; a ```lua block becomes
-- code cells split as the REPL reads it: chunk by chunk (a line, or the lines of a statement
-- that spans several), a cell ending after each chunk that is an expression, so that every value
-- the REPL prints for the block is shown under its cell (the kernel shows a cell's last-line
-- expression). A chunk that does not compile is an error naming its line.
local cjson = require "cjson"

local path = assert(arg[1], "usage: lua5.4 notebooks/cells.lua FILE.md")
local f = assert(io.open(path, "rb"))
local text = f:read("a")
f:close()

local cells = {}
local function add(kind, lines)
  local s = table.concat(lines, "\n"):gsub("^\n+", ""):gsub("\n+$", "")
  if s ~= "" then cells[#cells + 1] = { cell_type = kind, source = s } end
end

local function is_expression(chunk) return load("return " .. chunk .. ";", "=cell") ~= nil end

-- A ```lua block (its lines; `first` the line number of its first line) as code cells.
local function code_cells(lines, first)
  local cur, chunk, at = {}, nil, nil
  for i, line in ipairs(lines) do
    if chunk == nil and line:match("^%s*$") then
      if #cur > 0 then cur[#cur + 1] = line end
    elseif chunk == nil and is_expression(line) then
      cur[#cur + 1] = line
      add("code", cur)
      cur = {}
    else
      chunk, at = chunk and (chunk .. "\n" .. line) or line, at or first + i - 1
      local fn, err = load(chunk, "=cell")
      if fn then
        cur[#cur + 1] = chunk
        chunk, at = nil, nil
      elseif not err:match("<eof>$") then
        error(("%s:%d: %s"):format(path, at, err), 0)
      end
    end
  end
  if chunk then error(("%s:%d: unfinished chunk"):format(path, at), 0) end
  add("code", cur)
end

local md, block, n = {}, nil, 0
for line in (text .. "\n"):gmatch("([^\n]*)\n") do
  n = n + 1
  if block then
    if line == "```" then
      code_cells(block, block.first)
      block = nil
    else
      block[#block + 1] = line
    end
  elseif line == "```lua" then
    add("markdown", md)
    md = {}
    block = { first = n + 1 }
  else
    md[#md + 1] = line
  end
end
if block then error(path .. ": a ```lua block is not closed", 0) end
add("markdown", md)
io.write(cjson.encode(cells), "\n")

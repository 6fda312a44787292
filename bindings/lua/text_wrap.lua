-- roper.text_wrap: wrapping words into lines, for rp.help's texts. Pure Lua that reads nothing
-- it is given: bindings/gen_help.lua loads this file too (with dofile, at build time), so the
-- help data and rp.help's own lines (the overview, the search) wrap the same way.
local M = {}

-- M.wrap(text, width[, rest_width]) -> { line, ... }: the words of text (runs of non-blank
-- characters; blanks between them become one space) in lines of at most width columns, the lines
-- after the first of at most rest_width (default width). A word longer than its line stands
-- alone on one. Empty text gives one empty line.
function M.wrap(text, width, rest_width)
  local lines, line = {}, nil
  for word in text:gmatch("%S+") do
    if line and #line + 1 + #word <= (#lines == 0 and width or rest_width or width) then
      line = line .. " " .. word
    else
      if line then lines[#lines + 1] = line end
      line = word
    end
  end
  lines[#lines + 1] = line or ""
  return lines
end

-- M.add(out, text, width, first, rest): text's words (M.wrap) appended to the list out as lines
-- of at most width columns, the first starting with first, the others with rest.
function M.add(out, text, width, first, rest)
  for i, l in ipairs(M.wrap(text, width - #first, width - #rest)) do
    out[#out + 1] = (i == 1 and first or rest) .. l
  end
end

return M

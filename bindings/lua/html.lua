-- rp.tohtml: a tensor as an HTML table, the rich form of a value in a notebook (the Jupyter
-- kernel shows it beside the text the REPL prints; docs/notebooks.md). The same cells as the text
-- (roper.print's layout: the same format, common scale, cuts with "..." and 2-D slices), one
-- table per slice, under a line with the shape.
--
--
-- roper.html: adds rp.tohtml.
local require = ...
local rp = require "roper"
local internals = require "roper.internals"
local print_ = require "roper.print"
local is_live, layout, shape_str = internals.is_live, print_.layout, print_.shape_str

local STYLE = 'style="font-family:monospace;text-align:right;border-collapse:collapse"'

-- The text of a cell as HTML (numbers, "nan", "inf", "...": only & < > could need escaping).
local function esc(s) return (s:gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;")) end

local function html(v)
  local sz = v:shape()
  local shape = esc(shape_str(sz))
  local out = { '<div class="roper-tensor">' }
  local function add(s) out[#out + 1] = s end
  if v:numel() == 0 then
    add("<div>tensor " .. shape .. " (no values)</div></div>")
    return table.concat(out, "\n")
  end
  local blocks, scale = layout(v, sz)
  add("<div>tensor " .. shape .. (scale and (", values x " .. esc(("%.0e"):format(scale))) or "")
    .. "</div>")
  for _, b in ipairs(blocks) do
    if not b then
      add("<div>(...)</div>")
    else
      if b.header then add("<div>" .. esc(b.header) .. "</div>") end
      add("<table " .. STYLE .. ">")
      for i, r in ipairs(b.rows) do
        local cells = {}
        for j, c in ipairs(b.cols) do
          cells[j] = "<td>" .. ((r and c) and esc(b.vals[i][j]) or "&hellip;") .. "</td>"
        end
        add("<tr>" .. table.concat(cells) .. "</tr>")
      end
      add("</table>")
    end
  end
  add("</div>")
  return table.concat(out, "\n")
end

-- A tensor: a <div> with the shape (and the common scale) and a table per 2-D slice; a released
-- tensor (also one released while it is read: a finalizer may run at any allocation) or any
-- other value: nil.
function rp.tohtml(v)
  if not rp.is_tensor(v) or not is_live(v) then return nil end
  local ok, s = pcall(html, v)
  if ok then return s end
  if not is_live(v) then return nil end
  error(s, 0)
end

-- Holm over the rows of docs/results.md's scale-trend table: reads the interaction.md files that
-- results/report_v3.sh wrote (in the table's order), takes from each section ("## <endpoint>")
-- the change of roper - rope from one size to the other and its Welch p (as printed: 3
-- significant digits), and prints one Markdown table with the raw and the Holm-adjusted p over
-- every row (one family: "does the difference change with size?" asked of every task and
-- endpoint). Run from a checkout after `make`:
--   build/roper results/holm_v3.lua results/v3-index/interaction.md ...
package.path = "scripts/?.lua;" .. package.path
local stats = require "lib.stats"
local tables = require "lib.tables"

local rows, ps = {}, {}
for _, path in ipairs(arg) do
  local task, title
  for line in io.lines(path) do
    local head = line:match("^# ([^:]+):")
    if head and not task then task = head:gsub(" %b()$", "") end -- without its parenthesis
    title = line:match("^## (.+)$") or title
    -- the interaction table's row (the pair tables' rows hold no "(pairs)"):
    -- | roper - rope | <0.1M> (n) | <0.6M> (n) | change | 95% CI | Welch df | p |
    local c1, c2, rest = line:match("^| roper %- rope | ([^|]-%(%d+%)) | ([^|]-%(%d+%)) | (.*) |$")
    if c1 then
      local c = {}
      for cell in (rest .. " |"):gmatch("(.-) |%s*") do c[#c + 1] = cell end
      local p = assert(tonumber(c[4]), ("%s, %s: p %s"):format(path, title, c[4]))
      rows[#rows + 1] = { task .. ", " .. title:gsub(" %b()$", ""):lower(), c1, c2, c[1], c[2],
                          p }
      ps[#ps + 1] = p
    end
  end
end
local holm = stats.holm(ps)
local body = {}
for i, r in ipairs(rows) do
  body[i] = { r[1], r[2], r[3], r[4], r[5], tables.num(r[6], "%.3g"), tables.num(holm[i], "%.3g") }
end
io.write(("Holm over the %d rows (every task and endpoint of the scale trend: one family)\n\n")
  :format(#rows))
io.write(tables.markdown({ "task, endpoint", "0.1M", "0.6M", "change", "95% CI", "Welch p",
  "Holm" }, body))

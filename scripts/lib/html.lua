-- The report of compare.lua and sweep.lua as one HTML page, report.html in the output folder:
-- self-contained (no network, no script, no style sheet or font from elsewhere: the CSS is in the
-- page and the plots' SVG inline), so it opens from the folder, a copy of it or a mail. While the
-- runs go it is rewritten as each run ends and reloads itself every few seconds
-- (<meta http-equiv="refresh">); the final page has no reload.
--
--   html.escape(s) -> s with & < > " escaped
--   html.markdown(md) -> HTML for the markdown the scripts write (tables.markdown): "# " headings,
--     pipe tables (the first row the header; cells that are numbers right-aligned), paragraphs
--     with `code`, **bold** and [links](href); a paragraph that starts with "Warning" is marked as a warning;
--     after a paragraph that names SVG files in backquotes (`.../loss.svg`), each of them inline
--     (html.svg), with a link to the PNG beside it
--   html.svg(path, prefix) -> the SVG of a file to put inside a page (its XML prolog dropped, its
--     ids prefixed so that several plots of gnuplot share a page), or nil
--   html.runs(items) -> a <details> per run: items = { {title =, result =, files = {
--     {label, href}, ...}}, ... }: the result's metric and losses, timing, its provenance and
--     its config: the keys that do something for the run (rp.experiment.applies, the rule that
--     refuses an option that does nothing), then the others folded away in a <details> with why
--     each does nothing
--   html.page{title =, status =, refresh =, body =} -> the document (the status line under the
--     body's first heading); refresh: seconds between reloads, nil for a finished report
--   html.files(run_json, folder) -> the files of a run that are there ({label, href}: its JSON,
--     loss curve CSV, log and model), the hrefs relative to folder (where report.html is)
--   html.live{title =, command =, total =, runs = {{id =, title =, result =, files =}, ...}[,
--     stopped = reason]} -> the page of a comparison or sweep whose runs are still going: the
--     runs finished so far (a table and their details), reloading every html.REFRESH seconds;
--     with stopped (a signal stopped the runs) it says so and no longer reloads
local rp = require "roper"
local fileio = require "lib.fileio"
local tables = require "lib.tables"

local html = {}

local ESC = { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;" }
function html.escape(s)
  return (tostring(s):gsub('[&<>"]', ESC))
end

-- A line of text: escaped, `code` and **bold** marked up, [text](href) a link only when href is
-- http(s) or a path, in printable ASCII (no other scheme: a javascript: href in a user's text
-- stays text, and so does one behind a control byte, which a browser would drop).
local function inline(s)
  s = html.escape(s)
  s = s:gsub("`([^`]*)`", "<code>%1</code>")
  s = s:gsub("%*%*(.-)%*%*", "<strong>%1</strong>")
  s = s:gsub("%[([^%]]+)%]%(([^)%s]+)%)", function(text, href)
    local ok = href:match("^https?://[%w%p]+$")
      or (href:match("^[%w./_-][%w%p]*$") and not href:find(":", 1, true))
    if not ok then return nil end
    return '<a href="' .. href .. '">' .. text .. "</a>"
  end)
  return s
end

local function is_number(cell)
  return cell:match("^[+-]?%d[%d.,]*[eE]?[+-]?%d*%%?$") ~= nil
    or cell:match("^[+-]?%d[%d.]*[eE][+-]?%d+ ") ~= nil -- "0.03 (sampled)"
    or cell:match("^[+-]?%d[%d.]*[eE]?[+-]?%d* †$") ~= nil
end

-- The cells of a table line; a cell's own "|" is written "\|" (tables.markdown).
local function cells(line)
  local row = {}
  for c in (line:gsub("^|%s?", ""):gsub("%s?|$", "") .. " | "):gmatch("(.-) | ") do
    row[#row + 1] = c:gsub("\\|", "|")
  end
  return row
end

local function table_html(lines)
  local out = { '<div class="scroll"><table>' }
  local head = cells(lines[1])
  local th = {}
  for _, c in ipairs(head) do th[#th + 1] = "<th>" .. inline(c) .. "</th>" end
  out[#out + 1] = "<thead><tr>" .. table.concat(th) .. "</tr></thead><tbody>"
  for i = 3, #lines do
    local td = {}
    for _, c in ipairs(cells(lines[i])) do
      td[#td + 1] = (is_number(c) and '<td class="num">' or "<td>") .. inline(c) .. "</td>"
    end
    out[#out + 1] = "<tr>" .. table.concat(td) .. "</tr>"
  end
  out[#out + 1] = "</tbody></table></div>"
  return table.concat(out, "\n")
end

function html.svg(path, prefix)
  local text = fileio.read(path)
  if not text or not text:find("<svg", 1, true) then return nil end
  text = text:gsub("^.-(<svg)", "%1")
  local ids = {}
  for id in text:gmatch("id=['\"]([%w_:.-]+)['\"]") do ids[id] = true end
  -- every reference to an id of this file (#id, as xlink:href and url() write it), then every id
  text = text:gsub("#([%w_:.-]+)(['\")])", function(id, q)
    if ids[id] then return "#" .. prefix .. id .. q end
  end)
  text = text:gsub("id=(['\"])([%w_:.-]+)(['\"])", function(q1, id, q2)
    return "id=" .. q1 .. prefix .. id .. q2
  end)
  return text
end

local figures = 0
local function figures_of(paragraph)
  local out = {}
  for path in paragraph:gmatch("`([^`]+%.svg)`") do
    figures = figures + 1
    local svg = html.svg(path, ("f%d-"):format(figures))
    if svg then
      local png = path:gsub("%.svg$", ".png")
      local name = (fileio.exists(png) and png or path):match("[^/]+$")
      out[#out + 1] = ('<figure>%s<figcaption><a href="%s">%s</a></figcaption></figure>'):format(
        svg, html.escape(name), html.escape(name))
    end
  end
  return table.concat(out, "\n")
end

function html.markdown(md)
  local out = {}
  for block in (md .. "\n\n"):gmatch("(.-)\n%s*\n") do
    local lines = {}
    for l in block:gmatch("[^\n]+") do lines[#lines + 1] = l end
    if #lines == 0 then
      -- nothing
    elseif lines[1]:match("^#+ ") then
      local level = #lines[1]:match("^(#+)")
      out[#out + 1] = ("<h%d>%s</h%d>"):format(level, inline(lines[1]:gsub("^#+ ", "")), level)
    elseif lines[1]:match("^|") and #lines >= 2 and lines[2]:match("^|[-|]+|$") then
      out[#out + 1] = table_html(lines)
    else
      local text = table.concat(lines, " ")
      local class = text:match("^Warning") and ' class="warning"' or ""
      out[#out + 1] = ("<p%s>%s</p>"):format(class, inline(text))
      local f = figures_of(text)
      if f ~= "" then out[#out + 1] = f end
    end
  end
  return table.concat(out, "\n")
end

-- key / value rows of a table (keys sorted), values as JSON writes them
-- (notes: {key = text} shown in a third column)
local function fields(t, keys, notes)
  if keys == nil then
    keys = {}
    for k in pairs(t or {}) do keys[#keys + 1] = k end
    table.sort(keys)
  end
  local rows = {}
  for _, k in ipairs(keys) do
    local v = (t or {})[k]
    if v ~= nil and type(v) ~= "table" then
      rows[#rows + 1] = ("<tr><th>%s</th><td>%s</td>%s</tr>"):format(html.escape(k),
        html.escape(type(v) == "number" and tables.num(v, math.type(v) == "float"
          and v ~= math.floor(v) and "%.6g" or nil) or tostring(v)),
        notes and ("<td>%s</td>"):format(html.escape(notes[k] or "")) or "")
    end
  end
  return #rows > 0 and ('<table class="fields">' .. table.concat(rows) .. "</table>") or ""
end

-- A run's config: the keys that do something for it (rp.experiment.applies on the whole
-- config), then the others in a folded <details> with the reason each does nothing. A key the
-- rule does not know (a config of another version) counts as doing something.
local function config_fields(cfg)
  if type(cfg) ~= "table" then return "" end
  local keys, used, unused, why = {}, {}, {}, {}
  for k, v in pairs(cfg) do
    if type(v) ~= "table" then keys[#keys + 1] = k end
  end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local ok, applies, reason = pcall(rp.experiment.applies, k, cfg)
    if ok and applies == false then
      unused[#unused + 1], why[k] = k, "does nothing " .. tostring(reason)
    else
      used[#used + 1] = k
    end
  end
  local out = fields(cfg, used)
  if #unused > 0 then
    out = out .. ('<details class="unused"><summary>%d more key%s that do nothing for this run'
      .. "</summary>%s</details>"):format(#unused, #unused == 1 and "" or "s",
      fields(cfg, unused, why))
  end
  return out
end

function html.runs(items)
  local out = {}
  for _, it in ipairs(items) do
    local r = it.result or {}
    local links = {}
    for _, f in ipairs(it.files or {}) do
      links[#links + 1] = ('<a href="%s">%s</a>'):format(html.escape(f[2]), html.escape(f[1]))
    end
    out[#out + 1] = table.concat {
      '<details class="run"><summary>', html.escape(it.title or it.id), "</summary>",
      #links > 0 and ("<p>Files: " .. table.concat(links, ", ") .. "</p>") or "",
      '<div class="cols"><div><h4>Result</h4>',
      fields(r, { "metric", "value", "correct", "correct_greedy", "eval_loss", "final_train_loss",
        "diverged", "exploded", "exploded_at", "params", "seconds_train", "seconds_eval",
        "tokens_per_s", "cpu_seconds_train", "cpu_seconds", "resumed_at", "threads" }),
      "</div><div><h4>Provenance</h4>", fields(r.provenance),
      "</div><div><h4>Config</h4>", config_fields(r.config), "</div></div></details>",
    }
  end
  return table.concat(out, "\n")
end

local CSS = [[
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  margin: 1.5em auto; max-width: 1180px; padding: 0 1em; color: #1d2125; background: #fff; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #dde; }
code { font: 0.92em ui-monospace, "DejaVu Sans Mono", monospace; background: #f3f4f6;
  padding: 0 0.25em; border-radius: 3px; overflow-wrap: anywhere; }
.status { padding: 0.5em 0.8em; border-radius: 4px; background: #eef6ee; }
.status.live { background: #fff6dd; }
.scroll { overflow-x: auto; margin: 0.6em 0 1em; }
table { border-collapse: collapse; font-size: 0.92em; }
th, td { border: 1px solid #d6d9de; padding: 0.2em 0.55em; text-align: left; }
thead th { background: #eef0f3; }
tbody tr:nth-child(even) { background: #f8f9fb; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
p.warning { background: #fdecea; border-left: 4px solid #d62728; padding: 0.4em 0.7em; }
figure { margin: 0.8em 0 1.4em; }
figure svg { width: 100%; height: auto; max-width: 960px; display: block; }
figcaption { font-size: 0.85em; color: #555; }
details.run { border: 1px solid #d6d9de; border-radius: 4px; margin: 0.3em 0;
  padding: 0.2em 0.6em; }
details.run summary { cursor: pointer; }
.cols { display: flex; flex-wrap: wrap; gap: 1.2em; }
.cols h4 { margin: 0.5em 0 0.2em; }
table.fields th { background: none; font-weight: normal; color: #555; }
details.unused summary { cursor: pointer; color: #555; font-size: 0.92em; }
]]

function html.page(t)
  local body = t.body
  if t.status then
    local status = ('<p class="status%s">%s</p>'):format(t.refresh and " live" or "",
      html.escape(t.status))
    local n
    body, n = body:gsub("(</h1>)", "%1\n" .. status:gsub("%%", "%%%%"), 1)
    if n == 0 then body = status .. "\n" .. body end
  end
  return table.concat({
    "<!DOCTYPE html>",
    '<html lang="en"><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    t.refresh and ('<meta http-equiv="refresh" content="%d">'):format(t.refresh) or "",
    "<title>" .. html.escape(t.title) .. "</title>",
    "<style>" .. CSS .. "</style></head><body>",
    body,
    "</body></html>",
    "" }, "\n")
end

function html.files(run_json, folder)
  local base = run_json:gsub("%.json$", "")
  local out = {}
  for _, f in ipairs { { "result", ".json" }, { "loss curve", ".csv" }, { "log", ".log" },
    { "model", ".ckpt" } } do
    local path = base .. f[2]
    if fileio.exists(path) then
      local rel = path:sub(1, #folder + 1) == folder .. "/" and path:sub(#folder + 2) or path
      out[#out + 1] = { f[1], rel }
    end
  end
  return out
end

html.REFRESH = 10

function html.live(t)
  local rows = {}
  for _, r in ipairs(t.runs) do
    local res = r.result
    rows[#rows + 1] = { r.id, res.metric or "-", res.diverged and "diverged"
      or tables.num(res.value, res.metric == "loss" and "%.4f" or nil),
      tables.num(res.eval_loss, "%.4f"), tables.num(res.final_train_loss, "%.4f"),
      ("%.0f"):format(res.seconds_train or 0) }
  end
  local md = { "# " .. t.title, "", "Command: `" .. t.command .. "`", "" }
  if #rows > 0 then
    md[#md + 1] = "Runs finished so far:\n"
    md[#md + 1] = tables.markdown({ "run", "metric", "value", "eval loss", "final train loss",
      "train s" }, rows)
  end
  local now = os.date("!%Y-%m-%d %H:%M:%S")
  return html.page {
    title = t.title .. (t.stopped and " (stopped)" or " (running)"),
    refresh = not t.stopped and html.REFRESH or nil,
    status = t.stopped and ("Stopped (%s): %d of %d runs finished (%s UTC). The same command "
      .. "goes on from here."):format(t.stopped, #t.runs, t.total, now)
      or ("Running: %d of %d runs finished (%s UTC). This page reloads every %d s until the "
      .. "runs end; then it holds the full report."):format(#t.runs, t.total, now, html.REFRESH),
    body = html.markdown(table.concat(md, "\n")) .. "\n" .. html.runs(t.runs),
  }
end

return html

-- report.html of compare.lua and sweep.lua (scripts/lib/html.lua) in a real browser: Debian's
-- chromium-headless-shell (or chromium), which `make test` installs. A tiny comparison (2 methods x
-- 3 seeds, --jump-loss for the jump tables and their plot) and a tiny sweep write their reports;
-- then the page must
--   - be self-contained: no script, style sheet, font or image from elsewhere, every link a file
--     of the output folder;
--   - load without a console message, and hold in its tables (as the browser parsed them, from
--     --dump-dom) the numbers of summary.json and of every run's JSON;
--   - be drawn: a screenshot of the right size whose pixels are not blank and carry the plot
--     colours of both methods (the browser itself decodes the screenshot on a canvas);
--   - while runs go, list the runs finished so far and reload itself; once a signal stopped the
--     runs, or they ended, it does not.
-- The browser runs as the brief of this sandbox needs: --headless --no-sandbox --disable-gpu,
-- no network use (--disable-background-networking and the rest) and a fresh empty profile.

local cjson = require "cjson"
local lfs = require "lfs"

local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local BIN = h.BIN
local sh_quote, read, write, run, tmpdir = h.sh_quote, h.read, h.write, h.run, h.tmpdir

local function find_browser()
  for _, name in ipairs { "chromium-headless-shell", "chromium" } do
    local out = run("command -v " .. name)
    if out:match("^/") then return (out:gsub("%s+$", "")) end
  end
end
local BROWSER = find_browser()

-- Runs the browser on a file with extra arguments; returns stdout, stderr (its log, where console
-- messages appear as "CONSOLE"), exit code.
local function browser(args, file)
  local profile = tmpdir()
  local so, se, code = run(("timeout 120 %s --headless --no-sandbox --disable-gpu --disable-quic "
    .. "--no-first-run --disable-background-networking --disable-component-update --disable-sync "
    .. "--disable-dev-shm-usage --user-data-dir=%s --enable-logging=stderr --v=0 %s %s")
    :format(sh_quote(BROWSER), sh_quote(profile), args, sh_quote("file://" .. file)))
  h.remove_tree(profile)
  return so, se, code
end

-- The console messages in a browser log.
local function console(log)
  local t = {}
  for l in log:gmatch("[^\n]+") do
    if l:find("CONSOLE", 1, true) then t[#t + 1] = l end
  end
  return t
end

local ENT = { amp = "&", lt = "<", gt = ">", quot = '"', nbsp = " ", ["#39"] = "'" }
local function text_of(s)
  return (s:gsub("<[^>]*>", ""):gsub("&(#?%w+);", function(e) return ENT[e] end)
    :gsub("%s+", " "):gsub("^ ", ""):gsub(" $", ""))
end

-- The tables of an HTML text: each a list of rows, a row a list of cell texts (header first).
local function tables(doc)
  local out = {}
  for t in doc:gmatch("<table[^>]*>(.-)</table>") do
    local rows = {}
    for tr in t:gmatch("<tr[^>]*>(.-)</tr>") do
      local row = {}
      for cell in tr:gmatch("<t[hd][^>]*>(.-)</t[hd]>") do row[#row + 1] = text_of(cell) end
      rows[#rows + 1] = row
    end
    out[#out + 1] = rows
  end
  return out
end

local function table_with(doc, header)
  for _, t in ipairs(tables(doc)) do
    if t[1] and table.concat(t[1], " | "):sub(1, #header) == header then return t end
  end
  error("no table with the header " .. header)
end

-- cell holds v as printed (to its last digit), or "-" for nil.
local function holds(cell, v, what)
  if v == nil then
    assert.are.equal("-", cell, what)
    return
  end
  local mant, exp = cell:match("^([+-]?[%d.]+)[eE]([+-]?%d+)$")
  mant, exp = mant or cell:match("^([+-]?[%d.]+)$"), tonumber(exp or 0)
  assert.is_not_nil(mant, what .. ": not a number: " .. cell)
  local decimals = #(mant:match("%.(%d+)$") or "")
  local tol = 0.5 * 10 ^ (exp - decimals) * (1 + 1e-9)
  assert.is_true(math.abs(tonumber(cell) - v) <= tol,
    ("%s: %s does not print %.10g"):format(what, cell, v))
end

-- A PNG's width and height (its IHDR chunk).
local function png_size(data)
  assert.are.equal("\137PNG\r\n\26\n", data:sub(1, 8))
  local w, ht = string.unpack(">I4I4", data, 17)
  return w, ht
end

local function base64(data)
  local abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
  local out = {}
  for i = 1, #data, 3 do
    local a, b, c = data:byte(i, i + 2)
    local n = a * 65536 + (b or 0) * 256 + (c or 0)
    local s = {}
    for k = 1, 4 do
      local j = (n >> (6 * (4 - k))) & 63
      s[k] = abc:sub(j + 1, j + 1)
    end
    if not b then s[3] = "=" end
    if not c then s[4] = "=" end
    out[#out + 1] = table.concat(s)
  end
  return table.concat(out)
end

-- What the browser sees in a PNG: width, height, pixels not white, distinct colours (4 bits a
-- channel), and the pixels near each of the given colours.
local function pixels(png, dir, colours)
  local page = dir .. "/pixels.html"
  local want = {}
  for i, c in ipairs(colours) do
    want[i] = ("[%d,%d,%d]"):format(tonumber(c:sub(2, 3), 16), tonumber(c:sub(4, 5), 16),
      tonumber(c:sub(6, 7), 16))
  end
  write(page, table.concat {
    '<!DOCTYPE html><html><head><meta charset="utf-8"></head><body><pre id="out">none</pre>',
    '<img id="shot" src="data:image/png;base64,', base64(png), '"><script>',
    "window.onload = function () {",
    "  var im = document.getElementById('shot'), c = document.createElement('canvas');",
    "  c.width = im.naturalWidth; c.height = im.naturalHeight;",
    "  var g = c.getContext('2d'); g.drawImage(im, 0, 0);",
    "  var d = g.getImageData(0, 0, c.width, c.height).data, white = 0, seen = {}, n = 0;",
    "  var want = [", table.concat(want, ","), "], near = want.map(function () { return 0; });",
    "  for (var k = 0; k < d.length; k += 4) {",
    "    if (d[k] > 250 && d[k + 1] > 250 && d[k + 2] > 250) white++;",
    "    var key = (d[k] >> 4) * 256 + (d[k + 1] >> 4) * 16 + (d[k + 2] >> 4);",
    "    if (!seen[key]) { seen[key] = 1; n++; }",
    "    for (var w = 0; w < want.length; w++)",
    "      if (Math.abs(d[k] - want[w][0]) + Math.abs(d[k + 1] - want[w][1])",
    "          + Math.abs(d[k + 2] - want[w][2]) < 40) near[w]++;",
    "  }",
    "  document.getElementById('out').textContent = [c.width, c.height, d.length / 4 - white, n]",
    "    .concat(near).join(' ');",
    "};</script></body></html>" })
  local so, se, code = browser("--dump-dom", page)
  assert.are.equal(0, code, se)
  local stats = so:match('<pre id="out">([%d ]+)</pre>')
  assert.is_not_nil(stats, "the page did not measure the screenshot:\n" .. so:sub(1, 500))
  local t = {}
  for v in stats:gmatch("%d+") do t[#t + 1] = tonumber(v) end
  return t
end

local TINY = "--d-model 16 --heads 2 --layers 1 --seq-len 32 --batch 4 --problems 4 "
  .. "--valid-batches 1 --quiet"

describe("scripts/lib/html.lua's markdown: user text stays text", function()
  it("a link only to http(s) or a path; a cell's '|' and line breaks stay in its cell", function()
    package.path = "scripts/?.lua;" .. package.path
    local html = require "lib.html"
    local tables = require "lib.tables"
    local page = html.markdown("[docs](https://example.org/a) [x](javascript:alert`1`) "
      .. "[y](JavaScript:alert(1)) [r](runs/a.json) [z](\1javascript:alert(2))")
    assert.truthy(page:find('<a href="https://example.org/a">docs</a>', 1, true), page)
    assert.truthy(page:find('<a href="runs/a.json">r</a>', 1, true), page)
    assert.is_nil(page:lower():find('href="javascript', 1, true), page)
    assert.is_nil(page:find('href="\1', 1, true), page) -- (a browser drops the byte)
    local md = tables.markdown({ "method", "value" }, { { "roper:path=a | <b>x.txt", "1.5" } })
    assert.are.equal("| method | value |\n|---|---|\n| roper:path=a \\| <b>x.txt | 1.5 |\n", md)
    local t = html.markdown(md)
    assert.truthy(t:find("<td>roper:path=a | &lt;b&gt;x.txt</td>", 1, true), t)
    assert.truthy(t:find('<td class="num">1.5</td>', 1, true), t)
    -- a line break in a cell (a label's newline) is a space: the row stays one line
    assert.are.equal("| method | value |\n|---|---|\n| a b  c | 2 |\n",
      tables.markdown({ "method", "value" }, { { "a\nb\r\nc", "2" } }))
  end)
end)

describe("report.html in a browser", function()
  local dir, cmp, sw
  setup(function()
    dir = tmpdir()
    cmp, sw = dir .. "/cmp", dir .. "/sw"
  end)
  teardown(function() h.remove_tree(dir) end)

  local function need_browser()
    if not BROWSER then
      pending("no chromium-headless-shell or chromium (make test installs it)")
      return false
    end
    return true
  end

  local compared = false
  local function compare()
    if compared then return end
    local so, se, code = run(("%s scripts/compare.lua --seeds 3 --steps 24 --jobs 2 "
      .. "--jump-loss 3.6 %s --out %s"):format(sh_quote(BIN), TINY, sh_quote(cmp)))
    assert.are.equal(0, code, so .. se)
    compared = true
  end

  it("the console check sees a page's console message", function()
    if not need_browser() then return end
    local page = dir .. "/planted.html"
    write(page, '<!DOCTYPE html><html><head><meta charset="utf-8"></head><body><p>x</p>'
      .. '<script>console.error("planted message")</script></body></html>')
    local _, se, code = browser("--dump-dom", page)
    assert.are.equal(0, code, se)
    local msgs = console(se)
    assert.are.equal(1, #msgs, se)
    assert.truthy(msgs[1]:find("planted message", 1, true), msgs[1])
  end)

  it("compare.lua's report is self-contained: no script, nothing from elsewhere", function()
    compare()
    local doc = assert(read(cmp .. "/report.html"))
    assert.truthy(doc:find("^<!DOCTYPE html>"))
    assert.is_nil(doc:find("<script", 1, true))
    assert.is_nil(doc:find("<link", 1, true))
    assert.is_nil(doc:find("<img", 1, true))
    assert.is_nil(doc:find("@import", 1, true))
    assert.is_nil(doc:find("http-equiv=\"refresh\"", 1, true), "the final page reloads")
    -- "http" only as the SVG name spaces; every link a file of the folder (or the section of
    -- docs/results.md that holds the committed study of the same task)
    for url in doc:gmatch("https?://[^\"'%s<]*") do
      assert.truthy(url == "http://www.w3.org/2000/svg"
        or url == "http://www.w3.org/1999/xlink", url)
    end
    local links = 0
    for href in doc:gmatch('href="([^"]*)"') do
      links = links + 1
      assert.is_nil(href:find("^/"), href)
      assert.is_nil(href:find(":", 1, true), href)
      assert.is_not_nil(lfs.attributes(cmp .. "/" .. href:gsub("#[%w_-]+$", "")), href)
    end
    assert.is_true(links >= 6 * 3 + 2, links) -- each run's result, curve and log; the PNGs
    -- the plots are inline, their ids distinct
    local ids = {}
    for id in doc:gmatch("<[^>]- id=['\"]([^'\"]+)['\"]") do
      assert.is_nil(ids[id], "id given twice: " .. id)
      ids[id] = true
    end
    assert.are.equal(2, select(2, doc:gsub("<figure>", "")))
  end)

  it("compare.lua's report loads without a console message and holds summary.json's numbers",
    function()
    if not need_browser() then return end
    compare()
    local dom, se, code = browser("--dump-dom", cmp .. "/report.html")
    assert.are.equal(0, code, se)
    assert.are.same({}, console(se))
    local sj = h.read_json(cmp .. "/summary.json")
    -- the methods table
    -- counts say of how many problems (--problems 4)
    local t = table_with(dom, "method | runs | drop worst, mean (of 4) | mean (of 4) | median (of 4) "
      .. "| min (of 4) | max (of 4) | std | greedy mean (of 4)")
    assert.are.equal(3, #t, cjson.encode(t))
    for i, m in ipairs(sj.methods) do
      local row, s = t[i + 1], m.summary
      assert.are.equal(m.label, row[1])
      assert.are.equal(("%d"):format(s.n), row[2])
      for j, k in ipairs { "protocol", "mean", "median", "min", "max", "std" } do
        holds(row[2 + j], s[k], m.label .. " " .. k)
      end
    end
    -- every pair: mean difference, its t interval, the paired t p
    local p = table_with(dom, "difference | pairs | mean diff | 95% t CI")
    assert.are.equal(#sj.differences.rows + 1, #p)
    for i, r in ipairs(sj.differences.rows) do
      local row = p[i + 1]
      assert.are.equal(r.b .. " - " .. r.a, row[1])
      assert.are.equal(("%d"):format(r.pairs), row[2])
      holds(row[3], r.mean_diff, "mean diff")
      local lo, hi = row[4]:match("^%[(%S+), (%S+)%]$")
      holds(lo, r.t_lo, "t_lo")
      holds(hi, r.t_hi, "t_hi")
    end
    -- the page opens with the reading of this run, then the committed study of the same task,
    -- linked to its section of docs/results.md (its configuration is not this tiny one's)
    local d = sj.differences.rows[1]
    assert.truthy(dom:find(("<h2>What this run shows</h2>\n<p><strong>roper - rope: %+.1f correct of "
      .. "4</strong>"):format(d.mean_diff), 1, true), dom)
    assert.truthy(dom:find('docs/results.md#substring-by-index-', 1, true), dom)
    assert.truthy(dom:find("the same task with another configuration: d_model 64 (this run 16)",
      1, true), dom)
    -- the warnings of the statistics: 3 pairs cannot reach 0.05 with the sign-flip test, 3 runs
    -- a method not with the permutation test (each said once); no bootstrap interval from 3
    -- pairs, and no Holm columns for one comparison
    local _, sign_warnings = dom:gsub('<p class="warning">Warning: with 3 pairs the exact '
      .. "sign%-flip test", "")
    assert.are.equal(1, sign_warnings, dom)
    assert.truthy(dom:find('<p class="warning">Warning: with 3 runs a method the exact permutation '
      .. "test cannot give p below 2 / C(6, 3) = 0.1, so it cannot reach 0.05 whatever the data "
      .. "(marked †); 4 runs a method are the fewest that can.</p>", 1, true), dom)
    local t_perm = table_with(dom, "difference | mean diff | Welch t | Welch p | permutation p")
    assert.truthy(t_perm[2][5]:find(" †$"), t_perm[2][5])
    assert.are.same({ "difference", "pairs", "mean diff", "95% t CI", "95% bootstrap CI", "d_z",
      "paired t p", "sign-flip p" }, p[1])
    assert.are.equal("under 10 pairs", p[2][5])
    assert.truthy(dom:find("<p>No bootstrap interval below 10 pairs: n pairs have only C(2n - 1, "
      .. "n) distinct resamples (10 for 3 pairs),", 1, true), dom)
    -- every run, against its own JSON
    local e = table_with(dom, "method | seed | correct (of 4) | greedy (of 4) | eval loss | "
      .. "final train loss")
    assert.are.equal(7, #e)
    local k = 1
    for _, m in ipairs { "rope", "roper" } do
      for s = 1, 3 do
        k = k + 1
        local res = h.read_json(("%s/runs/%s-s%d.json"):format(cmp, m, s))
        assert.are.same({ m, tostring(s), ("%d"):format(res.value),
          ("%d"):format(res.correct_greedy) }, { e[k][1], e[k][2], e[k][3], e[k][4] })
        holds(e[k][5], res.eval_loss, "eval loss")
        holds(e[k][6], res.final_train_loss, "final train loss")
      end
    end
    -- each run's details: its provenance and config as the run's JSON says
    local res = h.read_json(cmp .. "/runs/roper-s2.json")
    local details = dom:match('<details class="run"><summary>roper, seed 2: (.-)</div></div>'
      .. "</details>")
    assert.is_not_nil(details, "no details of roper s2")
    assert.truthy(details:find("<th>commit</th><td>" .. res.provenance.commit .. "</td>", 1,
      true), details)
    assert.truthy(details:find("<th>host</th><td>" .. res.provenance.host .. "</td>", 1, true))
    assert.truthy(details:find("<th>pe</th><td>roper</td>", 1, true), details)
    assert.truthy(details:find('href="runs/roper-s2.json"', 1, true), details)
    -- the config: the keys that do something for this run (a substring_index run of pe roper),
    -- the others folded away with why (rp.experiment.applies: the rule that refuses them as
    -- options); every key of the run's config in one of the two, once
    local config = details:match("<h4>Config</h4>(.-)$")
    assert.is_not_nil(config, details)
    local shown, folded = config:match('^(<table class="fields">.-</table>)<details class="unused">'
      .. "<summary>(.-)</details>$")
    assert.is_not_nil(shown, config)
    for _, k in ipairs { "task", "str_len", "pe", "fraction_v", "lr", "seed", "problems" } do
      assert.truthy(shown:find("<th>" .. k .. "</th>", 1, true), k .. ": " .. shown)
    end
    local unused = 0
    for k, v in pairs(res.config) do
      local in_shown = shown:find("<th>" .. k .. "</th>", 1, true) ~= nil
      local in_folded = folded:find("<th>" .. k .. "</th>", 1, true) ~= nil
      assert.is_true(in_shown ~= in_folded, k)
      if in_folded then unused = unused + 1 end
    end
    assert.truthy(folded:find(("^%d more keys that do nothing for this run</summary>"):format(
      unused)), folded)
    assert.truthy(folded:find("<tr><th>corpus</th><td>data/linux-doc</td><td>does nothing for "
      .. "task substring_index: it applies to task lm</td></tr>", 1, true), folded)
    assert.truthy(folded:find("<tr><th>max_digits</th><td>8</td><td>does nothing for task "
      .. "substring_index: it applies to task addition</td></tr>", 1, true), folded)
    assert.truthy(folded:find("<tr><th>rel_clip</th><td>16</td><td>does nothing for pe roper: it "
      .. "applies to pe shaw or deberta</td></tr>", 1, true), folded)
    for _, k in ipairs { "path", "substr_len", "max_offset", "scaling_factor" } do
      assert.truthy(folded:find("<th>" .. k .. "</th>", 1, true), k)
    end
    assert.is_true(unused >= 30, unused)
  end)

  it("compare.lua's report is drawn: a screenshot with both methods' plot colours", function()
    if not need_browser() then return end
    compare()
    local shot = dir .. "/shot.png"
    local _, se, code = browser(("--hide-scrollbars --window-size=1200,2000 --screenshot=%s")
      :format(sh_quote(shot)), cmp .. "/report.html")
    assert.are.equal(0, code, se)
    assert.are.same({}, console(se))
    local png = assert(read(shot))
    assert.are.same({ 1200, 2000 }, { png_size(png) })
    -- rope's blue and roper's red (scripts/lib/plot.lua), as the browser drew the inline SVGs
    local t = pixels(png, dir, { "#1f77b4", "#d62728" })
    assert.are.same({ 1200, 2000 }, { t[1], t[2] })
    assert.is_true(t[3] > 1200 * 2000 // 50, "almost blank: " .. t[3] .. " pixels not white")
    assert.is_true(t[4] >= 30, "only " .. t[4] .. " colours")
    assert.is_true(t[5] > 500, "rope's blue: " .. t[5] .. " pixels")
    assert.is_true(t[6] > 500, "roper's red: " .. t[6] .. " pixels")
  end)

  it("a blank page fails the screenshot check", function()
    if not need_browser() then return end
    local page = dir .. "/blank.html"
    write(page, '<!DOCTYPE html><html><head><meta charset="utf-8"></head><body></body></html>')
    local shot = dir .. "/blank.png"
    local _, se, code = browser(("--hide-scrollbars --window-size=400,300 --screenshot=%s")
      :format(sh_quote(shot)), page)
    assert.are.equal(0, code, se)
    local t = pixels(assert(read(shot)), dir, { "#1f77b4" })
    assert.are.same({ 400, 300, 0, 1, 0 }, t)
  end)

  it("while the runs go, the page lists the runs finished so far and reloads itself; stopped, "
    .. "it says so and stops reloading", function()
    if not need_browser() then return end
    local out = dir .. "/live"
    -- one run of a few steps, then one of a million (stopped once the page is seen)
    local p = io.popen(("%s scripts/compare.lua --methods rope:steps=4 none:steps=1000000 "
      .. "--seeds 1 --jobs 1 %s --out %s > /dev/null 2>&1 & echo $!"):format(sh_quote(BIN), TINY,
      sh_quote(out)))
    local pid = math.tointeger(tonumber(p:read("l")))
    p:close()
    local page = out .. "/report.html"
    local seen = h.wait_for(function()
      return (read(page) or ""):find("Running: 1 of 2 runs finished", 1, true) ~= nil
    end, 120)
    local doc = read(page) or ""
    local dom, se, code = browser("--dump-dom", page)
    os.execute("kill -TERM " .. pid)
    h.wait_for(function()
      local stat = read("/proc/" .. pid .. "/stat")
      return stat == nil or stat:match("%) Z") ~= nil
    end, 20)
    assert.is_true(seen, "no page of the runs going:\n" .. doc)
    assert.truthy(doc:find('<meta http-equiv="refresh" content="10">', 1, true), doc)
    assert.are.equal(0, code, se)
    assert.are.same({}, console(se))
    local t = table_with(dom, "run | metric | value | eval loss")
    assert.are.equal(2, #t)
    local res = h.read_json(out .. "/runs/rope_steps=4-s1.json")
    assert.are.equal("rope:steps=4 s1", t[2][1])
    holds(t[2][4], res.eval_loss, "eval loss")
    -- SIGTERM stopped it: the page says so and reloads no more
    local stopped = read(page) or ""
    assert.truthy(stopped:find("Stopped (interrupted by SIGTERM): 1 of 2 runs finished", 1, true),
      stopped)
    assert.is_nil(stopped:find("http-equiv", 1, true), stopped)
  end)

  it("compare.lua's report of the lm task: the splits, lengths and positions tables and the "
    .. "validation curve", function()
    local rp = require "roper"
    local ids, lmc = dir .. "/ids", dir .. "/lmcmp"
    assert(lfs.mkdir(ids))
    local g = rp.rng(3)
    local sizes = { train = 600, valid = 100, test = 80 }
    for _, split in ipairs { "train", "valid", "test" } do
      local t = {}
      for i = 1, sizes[split] do t[i] = g:int(0, 19) end
      assert(rp.tensor(t):save(ids .. "/" .. split .. ".npy", { dtype = "int32" }))
    end
    write(ids .. "/ids.txt", "roper-ids 1\nvocab_size 20\ntrain 600 2400\nvalid 100 250\n"
      .. "test 80 200\n")
    local cmd = ("%s scripts/compare.lua --task lm --corpus %s --seq-len 16 --d-model 16 "
      .. "--layers 1 --heads 2 --steps 4 --log-every 1 --batch 2 --quiet --methods rope roper "
      .. "--seeds 2 --eval-lengths 24 --out %s"):format(sh_quote(BIN), sh_quote(ids),
      sh_quote(lmc))
    local so, se, code = run(cmd)
    assert.are.equal(0, code, so .. se)
    -- no validation curve yet: no figure of it
    local doc = assert(read(lmc .. "/report.html"))
    assert.is_nil(doc:find("valid.png", 1, true))
    -- the runs' CSVs with the column valid_loss (as valid_every writes it, empty on some rows);
    -- compare.lua finds the runs finished and writes the report again
    for _, m in ipairs { "rope", "roper" } do
      for seed = 1, 2 do
        local path = ("%s/runs/%s-s%d.csv"):format(lmc, m, seed)
        local lines = {}
        for l in assert(read(path)):gmatch("[^\n]+") do
          local i = #lines + 1
          lines[i] = l .. "," .. (i == 1 and "valid_loss" or i % 2 == 1 and tostring(3 + i / 10)
            or "")
        end
        write(path, table.concat(lines, "\n") .. "\n")
      end
    end
    so, se, code = run(cmd)
    assert.are.equal(0, code, so .. se)
    doc = assert(read(lmc .. "/report.html"))
    if BROWSER then
      local dom, bse, bcode = browser("--dump-dom", lmc .. "/report.html")
      assert.are.equal(0, bcode, bse)
      assert.are.same({}, console(bse))
      doc = dom
    end
    local res = {}
    for _, m in ipairs { "rope", "roper" } do
      res[m] = { h.read_json(("%s/runs/%s-s1.json"):format(lmc, m)),
        h.read_json(("%s/runs/%s-s2.json"):format(lmc, m)) }
    end
    local function mean2(m, f) return (f(res[m][1]) + f(res[m][2])) / 2 end
    local t = table_with(doc, "method | valid loss | valid perplexity | valid bits/byte | "
      .. "test loss | test perplexity | test bits/byte")
    assert.are.equal(3, #t)
    for i, m in ipairs { "rope", "roper" } do
      assert.are.equal(m, t[i + 1][1])
      for j, split in ipairs { "valid", "test" } do
        for k, key in ipairs { "loss", "perplexity", "bits_per_byte" } do
          holds(t[i + 1][1 + 3 * (j - 1) + k], mean2(m, function(r) return r.lm[split][key] end),
            m .. " " .. split .. " " .. key)
        end
      end
    end
    local l = table_with(doc, "method | scaling | 16 (training) | 24")
    assert.are.equal(3, #l)
    for i, m in ipairs { "rope", "roper" } do
      assert.are.same({ m, "none" }, { l[i + 1][1], l[i + 1][2] })
      holds(l[i + 1][3], mean2(m, function(r) return r.lm.valid.loss end), m .. " at 16")
      holds(l[i + 1][4], mean2(m, function(r) return r.by_length[1].loss end), m .. " at 24")
    end
    local p = table_with(doc, "method | runs | 1-2 | 3-4")
    assert.are.equal(9 + 1, #p[1])
    for i, m in ipairs { "rope", "roper" } do
      holds(p[i + 1][10], mean2(m, function(r)
        return (r.lm.by_position[15] + r.lm.by_position[16]) / 2
      end), m .. " at 15-16")
    end
    -- the figures: the training loss, the lengths and the validation loss
    assert.truthy(doc:find('<figcaption><a href="valid.png">valid.png</a></figcaption>', 1,
      true), doc)
    assert.are.equal(3, select(2, doc:gsub("<figure>", "")))
    local dat = assert(read(lmc .. "/valid.dat"))
    assert.truthy(dat:find("# rope, mean of the 2 runs", 1, true), dat)
  end)

  it("sweep.lua's report loads without a console message and holds summary.json's numbers",
    function()
    if not need_browser() then return end
    local so, se, code = run(("%s scripts/sweep.lua --grid pe=rope,none --grid seed=1,2 "
      .. "--steps 8 --jobs 2 %s --out %s"):format(sh_quote(BIN), TINY, sh_quote(sw)))
    assert.are.equal(0, code, so .. se)
    local doc = assert(read(sw .. "/report.html"))
    assert.is_nil(doc:find("<script", 1, true))
    assert.are.equal(1, select(2, doc:gsub("<figure>", "")))
    local dom, se2, code2 = browser("--dump-dom", sw .. "/report.html")
    assert.are.equal(0, code2, se2)
    assert.are.same({}, console(se2))
    local sj = h.read_json(sw .. "/summary.json")
    local t = table_with(dom, "pe | runs | drop worst, mean | mean | std | min | max")
    assert.are.equal(#sj.groups + 1, #t)
    for i, g in ipairs(sj.groups) do
      assert.are.equal(g.point[1], t[i + 1][1])
      assert.are.equal(("%d"):format(g.summary.n), t[i + 1][2])
      for j, k in ipairs { "protocol", "mean", "std", "min", "max" } do
        holds(t[i + 1][2 + j], g.summary[k], g.point[1] .. " " .. k)
      end
    end
    assert.truthy(dom:find('<details class="run"><summary>pe=none seed=2: ', 1, true))
  end)
end)

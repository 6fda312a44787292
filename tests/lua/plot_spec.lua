-- Pictures (issue 31): rp.plot, rp.scatter, rp.heatmap, rp.hist and rp.gnuplot through gnuplot.
-- The text pictures against golden files (tests/fixtures/plot/, made by gnuplot 5.4 patchlevel 4,
-- Debian 12's gnuplot-nox; ROPER_PLOT_GOLDEN=write rewrites them) and against what the data say
-- (where the marks are); PNG and SVG files of the size asked for; where a picture goes (a file,
-- $ROPER_PLOT_DIR, the terminal as text or sixel); files written whole, user text never reaching
-- gnuplot or the shell as commands; bad input refused with messages naming the function.

local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local rp = require "roper"

local BIN = h.BIN
local GOLDEN = "tests/fixtures/plot/"

local dir
setup(function() dir = h.tmpdir() end)
teardown(function() h.remove_tree(dir) end)

-- The text picture fn(out) writes (opts.out = a .txt file), checked against the golden file.
local function golden(name, fn)
  local path = dir .. "/" .. name
  assert.are.equal(path, fn(path))
  local text = assert(h.read(path))
  if os.getenv("ROPER_PLOT_GOLDEN") == "write" then h.write(GOLDEN .. name, text) end
  assert.are.equal(assert(h.read(GOLDEN .. name), "missing " .. GOLDEN .. name), text)
  return text
end

local lines = h.lines

-- width and height of a PNG file, from its IHDR chunk
local function png_size(path)
  local s = assert(h.read(path))
  assert.are.equal("\137PNG\r\n\26\n", s:sub(1, 8))
  assert.are.equal("IHDR", s:sub(13, 16))
  local w, ht = (">I4I4"):unpack(s, 17)
  return w, ht
end

describe("text pictures", function()
  it("rp.plot draws lines: the golden picture, and a rising series rises", function()
    local y = {}
    for i = 1, 30 do y[i] = i end
    local text = golden("lines.txt", function(out)
      return rp.plot(y, { title = "a line", xlabel = "x", ylabel = "y", size = { 50, 16 }, out = out })
    end)
    -- the marks of y = x: each column's '*' is no lower than the column before
    local rows = {}
    for r, l in ipairs(lines(text)) do
      local inside = l:match("|(.*)|")
      if inside then
        for c = 1, #inside do
          if inside:sub(c, c) == "*" then rows[c] = math.min(rows[c] or r, r) end
        end
      end
    end
    local last, n = math.huge, 0
    for c = 1, 100 do
      if rows[c] then
        assert.is_true(rows[c] <= last, "column " .. c)
        last, n = rows[c], n + 1
      end
    end
    assert.is_true(n >= 30, n .. " columns with marks")
    assert.truthy(text:find("a line", 1, true))
  end)

  it("rp.plot of several series over x, with their labels in the key", function()
    local x, a, b = {}, {}, {}
    for i = 1, 20 do x[i], a[i], b[i] = i / 2, math.sin(i / 3), math.cos(i / 3) end
    local text = golden("series.txt", function(out)
      return rp.plot(x, { a, rp.tensor(b) }, { labels = { "sin", "cos" }, size = { 60, 18 },
        out = out })
    end)
    assert.truthy(text:find("sin %*+"), text)
    assert.truthy(text:find("cos #+"), text)
  end)

  it("rp.scatter marks each series with its letter", function()
    local text = golden("scatter.txt", function(out)
      return rp.scatter({ 1, 2, 3 }, { { 1, 4, 9 }, { 3, 2, 1 } }, { labels = { "up", "down" },
        size = { 40, 14 }, out = out })
    end)
    local _, a = text:gsub("A", "")
    local _, b = text:gsub("B", "")
    assert.are.same({ 4, 4 }, { a, b }) -- three points and the key's sample each
  end)

  it("no two series share a mark: 52 letters for points, 7 marks for lines, more refused",
    function()
    local MARKS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    local function many(n)
      local y, names = {}, {}
      for i = 1, n do y[i], names[i] = { i, i + 1 }, ("s%d"):format(i) end
      return y, names
    end
    local out = dir .. "/marks.txt"
    local y, names = many(52)
    assert.are.equal(out, rp.scatter(y, { labels = names, size = { 120, 60 }, out = out }))
    local text = assert(h.read(out))
    for i = 1, 52 do -- the key names series i with its own letter
      assert.truthy(text:find(("s%d +%s"):format(i, MARKS:sub(i, i))), i .. ":\n" .. text)
    end
    y, names = many(7)
    assert.are.equal(out, rp.plot(y, { labels = names, size = { 120, 30 }, out = out }))
    text = assert(h.read(out))
    for i, m in ipairs { "*", "#", "$", "%", "@", "&", "=" } do
      assert.truthy(text:find(("s%d %s%s"):format(i, m:gsub("%p", "%%%0"), m:gsub("%p", "%%%0"))),
        i .. ":\n" .. text)
    end
    assert.has_error(function() rp.scatter((many(53)), { out = out }) end, "bad argument #1 to "
      .. "'rp.scatter' (y has 53 series, more than the 52 marks of a text picture (A-Z, a-z): draw "
      .. "them to a .png or .svg file)")
    assert.has_error(function() rp.plot({ 1, 2 }, (many(8)), { out = out }) end,
      "bad argument #2 to 'rp.plot' (y has 8 series, more than the 7 marks of a text picture "
      .. "(*#$%@&=): draw them to a .png or .svg file)")
    -- in colour they are drawn
    assert.are.equal(dir .. "/marks.svg", rp.plot((many(8)), { out = dir .. "/marks.svg" }))
  end)

  it("rp.heatmap: one shade per cell, row 1 at the top, the shades named below", function()
    local m = rp.eye(4)
    m:set(2, 1, 0.5)
    local text = golden("heatmap.txt", function(out)
      return rp.heatmap(m, { title = "eye", xlabel = "key", ylabel = "query", out = out })
    end)
    -- the cells: row i of the matrix on the line labelled i, column j at the (2j)-th column
    local cells = {}
    for _, l in ipairs(lines(text)) do
      local i, inside = l:match("(%d) |(.*)|$")
      if i then
        cells[tonumber(i)] = {}
        for j = 1, 4 do cells[tonumber(i)][j] = inside:sub(2 * j, 2 * j) end
      end
    end
    assert.are.same({ { "@", " ", " ", " " }, { "+", "@", " ", " " }, { " ", " ", "@", " " },
      { " ", " ", " ", "@" } }, cells)
    assert.are.equal('shades " .:-=+*#%@" from 0 to 1', lines(text)[#lines(text)])
  end)

  it("rp.heatmap averages blocks of a matrix larger than the picture, and says so", function()
    local out = dir .. "/big.txt"
    assert.are.equal(out, rp.heatmap(rp.eye(100), { size = { 60, 20 }, out = out }))
    local text = assert(h.read(out))
    for _, l in ipairs(lines(text)) do assert.is_true(#l <= 60, l) end
    assert.is_true(#lines(text) <= 21, text)
    local br, bc = text:match("each the mean of (%d+) x (%d+)\n$")
    assert.are.same({ "7", "5" }, { br, bc }, text) -- 100 rows in 15 lines, 100 columns in 20 cells
    for _, l in ipairs(lines(text)) do -- only shades inside the frame
      local inside = l:match("|(.*)|")
      if inside then assert.is_nil(inside:find("[^ .:%-=+*#%%@]"), l) end
    end
  end)

  it("a long y label stands at the left edge, apart from the tic labels", function()
    -- gnuplot's own y label runs into the tic labels (count1.5) or is dropped when long
    for _, draw in ipairs { function(out) return rp.plot({ 1, 2, 3 }, { ylabel = "a long y label",
        size = { 80, 10 }, out = out }) end,
      function(out) return rp.heatmap(rp.eye(5), { ylabel = "a long y label", out = out }) end } do
      local out = dir .. "/ylabel.txt"
      assert.are.equal(out, draw(out))
      local text = assert(h.read(out))
      assert.truthy(text:find("\na long y label +[%d.]* *|"), text)
    end
  end)

  it("a heatmap keeps a title and an x label wider than its cells", function()
    local out = dir .. "/wide.txt"
    assert.are.equal(out, rp.heatmap(rp.eye(2), { title = "a title wider than two cells",
      xlabel = "an x label as wide", out = out }))
    local l = lines(assert(h.read(out)))
    assert.are.equal("a title wider than two cells", l[1]) -- gnuplot dropped it
    assert.truthy(l[#l - 1]:find("^ *an x label as wide$"), l[#l - 1])
  end)

  it("a y label, title or x label too long for the width: the plot area kept, every word shown, "
    .. "no line wider", function()
    local W = 80
    local ylabel = "training loss of the roper model on substring_index (nats per token)"
    local title = "loss of rope and roper on substring_index, 10 seeds each, d_model 64, 2 layers, "
      .. "4 heads, a title wider than the picture"
    local xlabel = "the values of the q, k and v weights of layer 1 after 2000 steps of training "
      .. "on addition"
    local long = ("y"):rep(5000)
    local function words(s) return (s:gsub("%s+", " ")) end
    -- the widest span between the frame's corners (+---+), in characters
    local function area(text)
      local widest = 0
      for _, l in ipairs(lines(text)) do
        local a, b = l:find("%+[-+]+%+")
        if a then widest = math.max(widest, b - a - 1) end
      end
      return widest
    end
    local cases = {
      { "plot", function(o) return rp.plot({ 1, 2, 3 }, o) end },
      { "scatter", function(o) return rp.scatter({ 1, 2, 3 }, { 3, 1, 2 }, o) end },
      { "hist", function(o) return rp.hist({ 1, 2, 2, 3 }, o) end },
      { "heatmap", function(o) return rp.heatmap(rp.eye(8), o) end },
    }
    -- (two-byte characters: gnuplot gives each byte a cell, so a title of 45 fits 80 columns
    -- as characters but not as bytes, and the y label's margin is its bytes')
    local e = { ylabel = ("é"):rep(12), title = ("é"):rep(45),
      xlabel = ("é"):rep(25) .. " " .. ("è"):rep(25) }
    for _, c in ipairs(cases) do
      for _, o in ipairs { { ylabel = ylabel, title = title, xlabel = xlabel },
        { ylabel = long, title = long },
        { ylabel = e.ylabel, title = e.title, xlabel = e.xlabel } } do
        local out = dir .. "/long-" .. c[1] .. ".txt"
        o.size, o.out = { W, 24 }, out
        assert.are.equal(out, c[2](o))
        local text = assert(h.read(out))
        for _, l in ipairs(lines(text)) do assert.is_true(utf8.len(l) <= W, c[1] .. ": " .. l) end
        -- at least 2 columns a cell for the heatmap's 8, at least a third of the width for the
        -- others (the y label's margin takes at most half)
        assert.is_true(area(text) >= (c[1] == "heatmap" and 16 or W // 3), c[1] .. ":\n" .. text)
        local all = words(text)
        for _, key in ipairs { "title", "xlabel", "ylabel" } do
          if o[key] ~= long then
            assert.truthy(o[key] == nil or all:find(o[key], 1, true),
              c[1] .. " " .. key .. ":\n" .. text)
          end
        end
        if c[1] == "heatmap" and o.ylabel == e.ylabel then -- each row's number and frame
          for r = 1, 8 do
            assert.truthy(text:find(" " .. r .. " |", 1, true), r .. ":\n" .. text)
          end
        end
        if o.ylabel == long then
          local _, ys = text:gsub("y", "")
          assert.is_true(ys >= 2 * 5000, c[1] .. ": " .. ys) -- the title and the y label, whole
        end
      end
    end
    -- the heatmap's shades line wrapped too (long bounds, blocks averaged)
    local m = {}
    for i = 1, 300 do
      m[i] = {}
      for j = 1, 300 do m[i][j] = -1.23456789e-05 * (1 + (i * j) % 7 / 1e6) end
    end
    local hm = dir .. "/shades.txt"
    assert.are.equal(hm, rp.heatmap(m, { size = { W, 24 }, out = hm }))
    local ht = assert(h.read(hm))
    for _, l in ipairs(lines(ht)) do assert.is_true(utf8.len(l) <= W, l) end
    assert.truthy(words(ht):find("each the mean of 15 x 9", 1, true), ht)
    -- a y label whose margin fits half the width stays beside the axis, in the picture's height
    local out, plain = dir .. "/short.txt", dir .. "/plain.txt"
    assert.are.equal(out, rp.plot({ 1, 2, 3 }, { ylabel = ("y"):rep(29), size = { W, 12 },
      out = out }))
    assert.are.equal(plain, rp.plot({ 1, 2, 3 }, { size = { W, 12 }, out = plain }))
    assert.are.equal(#lines(assert(h.read(plain))), #lines(assert(h.read(out))))
    assert.truthy(assert(h.read(out)):find("\n" .. ("y"):rep(29) .. " +[%d.]* *[|+]"))
  end)

  it("control characters of a title or label drawn outside gnuplot are spaces, as gnuplot's are",
    function()
    -- the heatmap's title and x label, and a title too wide for gnuplot, are lines of roper's
    local out = dir .. "/esc.txt"
    for _, draw in ipairs {
      function() return rp.heatmap({ { 1, 2 }, { 3, 4 } }, { title = "t\27[31mred\tx",
        xlabel = "x\27[0m\127", ylabel = "y\27]0;pwned\7", out = out }) end,
      function() return rp.plot({ 1, 2 }, { title = ("w"):rep(90) .. "\27[31mred\u{9B}1m",
        xlabel = ("x"):rep(90) .. "\27[0m", size = { 80, 20 }, out = out }) end } do
      assert.are.equal(out, draw())
      local text = assert(h.read(out))
      assert.is_nil(text:find("[\0-\9\11-\31\127]"), text)
      assert.is_nil(text:find("\u{9B}", 1, true), text)
      assert.truthy(text:find(" [31mred", 1, true), text)
    end
  end)

  it("rp.hist counts into bins", function()
    local text = golden("hist.txt", function(out)
      return rp.hist({ 1, 2, 2, 3, 3, 3 }, { bins = 3, size = { 40, 12 }, out = out })
    end)
    assert.truthy(text:find("count", 1, true))
    -- one value past 2^52 (0.5 does not widen it), a span past float64's largest: drawn
    for _, v in ipairs { { 1e16, 1e16 }, { 3e15, 3e15 }, { 1e308, -1e308 },
      { 1.7976931348623157e308 }, { -1.7976931348623157e308 } } do
      local out = dir .. "/hist-far.txt"
      assert.are.equal(out, rp.hist(v, { bins = 4, size = { 40, 12 }, out = out }))
      assert.truthy(assert(h.read(out)):find("count", 1, true))
    end
  end)

  it("rp.gnuplot runs any commands", function()
    golden("gnuplot.txt", function(out)
      return rp.gnuplot({ "set xrange [0:6.3]", "unset key", "plot sin(x)" },
        { size = { 40, 12 }, out = out })
    end)
  end)
end)

describe("files", function()
  it("PNG and SVG of the size asked for, 800 x 500 by default", function()
    local m = rp.randn({ 6, 6 }, rp.rng(1)):softmax(2)
    local cases = {
      { "plot.png", function(out) return rp.plot({ 1, 3, 2 }, { out = out }) end, 800, 500 },
      { "scatter.png", function(out) return rp.scatter({ 1, 3, 2 }, { out = out, size = { 320, 200 } }) end, 320, 200 },
      { "heatmap.png", function(out) return rp.heatmap(m, { out = out, size = { 400, 400 } }) end, 400, 400 },
      { "hist.png", function(out) return rp.hist(rp.randn({ 100 }, rp.rng(2)), { out = out, size = { 640, 480 } }) end, 640, 480 },
      { "g.png", function(out) return rp.gnuplot("plot x", { out = out, size = { 100, 80 } }) end, 100, 80 },
    }
    for _, c in ipairs(cases) do
      local out = dir .. "/" .. c[1]
      assert.are.equal(out, c[2](out))
      assert.are.same({ c[3], c[4] }, { png_size(out) }, c[1])
    end
    local svg = dir .. "/p.svg"
    assert.are.equal(svg, rp.plot({ 1, 2 }, { out = svg, size = { 300, 200 } }))
    local text = assert(h.read(svg))
    assert.truthy(text:find('<svg%s[^>]*viewBox="0 0 300 200"'), text:sub(1, 400))
  end)

  it("replace a file whole and leave nothing else in the folder", function()
    local sub = dir .. "/whole"
    os.execute("mkdir " .. h.sh_quote(sub))
    local out = sub .. "/p.png"
    h.write(out, "old")
    assert.are.equal(out, rp.plot({ 1, 2 }, { out = out, size = { 200, 100 } }))
    assert.are.same({ 200, 100 }, { png_size(out) })
    assert.are.same({ "p.png" }, h.ls(sub))
  end)

  -- An error raised while gnuplot's files exist (a debug hook's: an interrupt, the API fuzz test's
  -- time budget) left them in /tmp: they go however the render ends.
  it("leave no temporary file when an error stops the render", function()
    local tmpname, execute = os.tmpname, os.execute
    local bases = {}
    os.tmpname = function()
      local b = tmpname()
      bases[#bases + 1] = b
      return b
    end
    os.execute = function(cmd)
      execute(cmd)
      error("stopped after gnuplot")
    end
    local ok, err = pcall(rp.plot, { 1, 2 }, { out = dir .. "/stopped.txt", size = { 40, 12 } })
    os.tmpname, os.execute = tmpname, execute
    assert.is_false(ok)
    assert.truthy(tostring(err):find("stopped after gnuplot", 1, true), err)
    assert.are.equal(1, #bases)
    for _, suffix in ipairs { "", ".gp", ".out", ".log" } do
      assert.is_nil(io.open(bases[1] .. suffix), bases[1] .. suffix)
    end
    assert.is_nil(io.open(dir .. "/stopped.txt"))
  end)

  -- The same for a hook's error at each instruction after gnuplot ran, the removal's included (a
  -- gnuplot stand-in writes the picture): a closing function in Lua, which the hook could stop,
  -- left the files when the error came in it.
  it("leave no temporary file when a hook's error comes at any count after gnuplot", function()
    local tmpname, execute = os.tmpname, os.execute
    local base, stopped, finished = nil, 0, 0
    os.tmpname = function()
      base = tmpname()
      return base
    end
    local n
    os.execute = function()
      h.write(base .. ".out", "a picture\n")
      debug.sethook(function()
        debug.sethook()
        -- (only in the module's pictures: a count reached after rp.plot returned stops nothing)
        if debug.getinfo(2, "S").source:find("plot%.lua$") then error("stopped by a hook", 2) end
      end, "", n)
      return true, "exit", 0
    end
    local out = dir .. "/hooked.txt"
    for k = 1, 400 do
      n = k
      local ok, err = pcall(rp.plot, { 1, 2 }, { out = out, size = { 40, 12 } })
      debug.sethook()
      if ok then
        finished = finished + 1
        assert.are.equal(out, err)
      else
        stopped = stopped + 1
        assert.truthy(tostring(err):find("stopped by a hook", 1, true), err)
      end
      for _, suffix in ipairs { "", ".gp", ".out", ".log" } do
        if io.open(base .. suffix) then
          os.tmpname, os.execute = tmpname, execute
          error(("the hook's error after %d instructions left %s"):format(k, base .. suffix))
        end
      end
    end
    os.tmpname, os.execute = tmpname, execute
    -- the hook came inside the render for the first counts and after its end for the last
    assert.is_true(stopped > 5 and finished > 5,
      ("%d stopped, %d finished"):format(stopped, finished))
  end)

  it("a folder, a FIFO or a missing folder give nil and a message", function()
    os.execute("mkdir " .. h.sh_quote(dir .. "/d.png") .. " && mkfifo " .. h.sh_quote(dir .. "/f.png"))
    assert.are.same({ nil, "rp.plot: " .. dir .. "/d.png: not a regular file (a folder)" },
      { rp.plot({ 1 }, { out = dir .. "/d.png" }) })
    -- (a hang here is the failure: writing would wait for a reader)
    assert.are.same({ nil, "rp.heatmap: " .. dir .. "/f.png: not a regular file (a FIFO)" },
      { rp.heatmap({ { 1 } }, { out = dir .. "/f.png" }) })
    local ok, err = rp.hist({ 1 }, { out = dir .. "/missing/h.png" })
    assert.is_nil(ok)
    assert.truthy(err:find("^rp.hist: " .. dir:gsub("%p", "%%%0") .. "/missing/h.png: "), err)
  end)

  it("user text stays text: quotes, backslashes, newlines, gnuplot and shell syntax", function()
    local out, marker = dir .. "/t.txt", dir .. "/pwned"
    local title = 'a"b\\c `touch ' .. marker .. '` $(touch ' .. marker .. ')"; system("touch ' .. marker .. '") #'
    assert.are.equal(out, rp.plot({ 1, 2 }, { title = title, size = { 120, 12 }, out = out }))
    assert.is_nil(h.read(marker))
    assert.truthy(assert(h.read(out)):find(title, 1, true))
    assert.are.equal(out, rp.plot({ 1, 2 }, { title = "two\nlines", size = { 40, 12 }, out = out }))
    assert.truthy(assert(h.read(out)):find("two\n +lines\n"), h.read(out))
    local odd = dir .. "/it's a \"plot\" $(x).txt"
    assert.are.equal(odd, rp.plot({ 1, 2 }, { size = { 40, 12 }, out = odd }))
    assert.truthy(h.read(odd))
  end)

  it("a label with bytes that are not UTF-8: U+FFFD in their place, an SVG that is text",
    function()
      local svg = dir .. "/bad.svg"
      assert.are.equal(svg, rp.plot({ 1, 2, 3 }, { ylabel = "\xff\xfe bad", title = "ok\xc3",
        out = svg }))
      local text = assert(h.read(svg))
      assert.is_not_nil(utf8.len(text), "the SVG is UTF-8")
      assert.truthy(text:find("\u{FFFD}\u{FFFD} bad", 1, true))
      assert.truthy(text:find("ok\u{FFFD}", 1, true))
    end)

  it("a line of more points than 8 a column: drawn through each group's first, last, lowest "
    .. "and highest", function()
    -- 200,000 values in [0, 1) and one of 50: the SVG's path has a point (an L) for each kept
    -- point, at most 4 for each of 2 x 800 groups, and the spike still sets the y axis
    local t = rp.rand({ 200000 }, rp.rng(3))
    t:set(123457, 50)
    local svg = dir .. "/long.svg"
    assert.are.equal(svg, rp.plot(t, { out = svg }))
    local text = assert(h.read(svg))
    local ls = select(2, text:gsub("L", ""))
    assert.is_true(ls >= 2 * 800 and ls <= 4 * 2 * 800 + 100, ls)
    assert.truthy(text:find("<text> 50</text>", 1, true))
    -- an evenly spaced x given: thinned as well
    local even = {}
    for j = 1, 200000 do even[j] = 0.5 + 0.25 * (j - 1) end
    assert.are.equal(svg, rp.plot(even, t, { out = svg }))
    assert.is_true(select(2, assert(h.read(svg)):gsub("L", "")) <= 4 * 2 * 800 + 100)
    -- every point drawn where groups of points are not groups of columns: x out of order, x not
    -- evenly spaced, a log x axis, an xrange
    local n = 8000
    local y = t:narrow(1, 1, n)
    local shuffled, uneven, line = {}, {}, {}
    for j = 1, n do
      shuffled[j], uneven[j], line[j] = (j * 7919) % n, j < n / 2 and j * 1e-3 or j, j
    end
    for _, c in ipairs { { shuffled, {} }, { uneven, {} }, { line, { logx = true } },
      { line, { xrange = { 1, 2000 } } } } do
      c[2].out = svg
      assert.are.equal(svg, rp.plot(c[1], y, c[2]))
      assert.is_true(select(2, assert(h.read(svg)):gsub("L", "")) >= n / 4 - 1)
    end
  end)

  it("x, y, opts: an empty y is refused as such, not taken for the options", function()
    for _, f in ipairs { "plot", "scatter" } do
      assert.has_error(function() rp[f]({ 10, 20, 30 }, {}, { out = dir .. "/e.png" }) end,
        "bad argument #2 to 'rp." .. f .. "' (y is empty)")
    end
    assert.is_nil(h.read(dir .. "/e.png"))
  end)
end)

describe("the scripts' pictures (scripts/lib/plot.lua) through rp.gnuplot", function()
  it("loss curves as PNG and SVG of 960 x 600, a label with backquotes staying text", function()
    package.path = "scripts/?.lua;" .. package.path
    local plot = require "lib.plot"
    local marker = dir .. "/pwned-by-label"
    local curve = { { step = 1, tokens = 100, loss = 2 }, { step = 2, tokens = 200, loss = 1 } }
    local files = assert(plot.loss_curves({ { label = "`touch " .. marker .. "`",
      results = { { curve = curve } } } }, dir .. "/loss"))
    assert.are.same({ dir .. "/loss.png", dir .. "/loss.svg", dir .. "/loss.gp", dir .. "/loss.dat" },
      files)
    assert.are.same({ 960, 600 }, { png_size(dir .. "/loss.png") })
    assert.truthy(assert(h.read(dir .. "/loss.svg")):find("`touch", 1, true))
    assert.is_nil(h.read(marker)) -- gnuplot would run `...` in a double-quoted string
    assert.are.equal('"a\\`b\\"c\\\\"', plot.gp_string('a`b"c\\'))
    -- a text's newline as \n (a literal backslash-n stays two characters), bytes not UTF-8 as
    -- U+FFFD; a path keeps its bytes
    assert.are.equal('"a\\nb \\\\n \u{FFFD}"', plot.gp_string('a\nb \\n \xff'))
    assert.are.equal('"a\\nb\xff"', plot.gp_path('a\nb\xff'))
  end)

  it("quote their text with rp.gnuplot_string: a compare whose method label has a newline and a "
    .. "byte that is not UTF-8 draws loss.svg as XML", function()
    -- the label is the method, here with a path (a corpus file) holding both
    local corpus = dir .. "/a\nb\xff.txt"
    h.write(corpus, assert(h.read("/usr/share/games/fortunes/cookie")))
    local out = dir .. "/cmp"
    local _, se, code = h.run(("%s scripts/compare.lua --task text --methods %s --seeds 1 "
      .. "--steps 2 --d-model 16 --heads 2 --layers 1 --seq-len 32 --batch 4 --valid-batches 1 "
      .. "--quiet --out %s"):format(h.sh_quote(BIN), h.sh_quote("rope:path=" .. corpus),
      h.sh_quote(out)))
    assert.are.equal(0, code, se)
    local svg = assert(h.read(out .. "/loss.svg"))
    local _, perr, pcode = h.run(("%s -c %s %s"):format(h.PY,
      h.sh_quote("import sys, xml.dom.minidom as m; m.parse(sys.argv[1])"),
      h.sh_quote(out .. "/loss.svg")))
    assert.are.equal(0, pcode, perr)
    -- the key's line of the label: its newline a line break, its byte U+FFFD
    assert.truthy(svg:find("<text>b\u{FFFD}.txt: each run (1)</text>", 1, true), svg)
  end)

  it("rp.gnuplot_string: a text or a path as a gnuplot string", function()
    assert.are.equal('"a\\`b\\"c\\\\ \\n"', rp.gnuplot_string('a`b"c\\ \n'))
    -- a text: control characters (tab, ESC, DEL, C1's CSI) as spaces, a byte not UTF-8 as U+FFFD
    assert.are.equal('"a b c d e \u{FFFD} \u{A0}"',
      rp.gnuplot_string("a\tb\27c\127d\u{9B}e \xff \u{A0}", "text"))
    -- a path: every byte but the newline kept
    assert.are.equal('"a\tb\27\\n\xff"', rp.gnuplot_string("a\tb\27\n\xff", "path"))
    assert.are.equal('"2.5"', rp.gnuplot_string(2.5))
    assert.has_error(function() rp.gnuplot_string(nil) end,
      "bad argument #1 to 'rp.gnuplot_string' (expected a string, got nil)")
    assert.has_error(function() rp.gnuplot_string("x", "text", {}) end,
      "bad argument #3 to 'rp.gnuplot_string' (unexpected argument after kind (table))")
    assert.has_error(function() rp.gnuplot_string("a\0b", "path") end,
      "bad argument #1 to 'rp.gnuplot_string' (a path cannot hold a NUL byte)")
    assert.are.equal('"a b"', rp.gnuplot_string("a\0b")) -- (text: a control character)
    assert.has_error(function() rp.gnuplot_string("x", "file") end,
      "bad argument #2 to 'rp.gnuplot_string' (kind must be \"text\" or \"path\", got string "
        .. "\"file\")")
  end)

  it("loss curves' data: each run headed by its seed, an integer as read back from JSON", function()
    package.path = "scripts/?.lua;" .. package.path
    local plot = require "lib.plot"
    local curve = { { step = 1, tokens = 100, loss = 2 }, { step = 2, tokens = 200, loss = 1 } }
    local runs = { { config = { seed = 1.0 }, curve = curve }, { config = { seed = 2 }, curve = curve },
      { curve = curve } }
    assert(plot.loss_curves({ { label = "rope", results = runs } }, dir .. "/seeds"))
    local heads = {}
    for l in assert(h.read(dir .. "/seeds.dat")):gmatch("[^\n]+") do
      if l:find("^# rope, run") then heads[#heads + 1] = l end
    end
    assert.are.same({ "# rope, run 1 (seed 1): tokens  loss", "# rope, run 2 (seed 2): tokens  loss",
      "# rope, run 3 (seed ?): tokens  loss" }, heads)
  end)
end)

describe("where a picture goes", function()
  local function roper(env, code)
    return h.run(env .. " " .. h.sh_quote(BIN) .. " -e " .. h.sh_quote(code))
  end

  it("the terminal: the text picture on stdout, nothing returned", function()
    local file = dir .. "/same.txt"
    rp.plot({ 3, 1, 2 }, { size = { 40, 12 }, out = file })
    local so, se, code = roper("env -u ROPER_PLOT_DIR -u ROPER_PLOT_TERMINAL",
      "print(select('#', rp.plot({3, 1, 2}, {size = {40, 12}})))")
    assert.are.equal(0, code, se)
    assert.are.equal(assert(h.read(file)) .. "0\n", so)
    -- the width follows COLUMNS
    so = roper("env -u ROPER_PLOT_DIR COLUMNS=50", "rp.plot({3, 1, 2})")
    local widest = 0
    for _, l in ipairs(lines(so)) do widest = math.max(widest, #l) end
    assert.is_true(widest > 40 and widest <= 50, so)
  end)

  it("sixel graphics with terminal = 'sixel' or ROPER_PLOT_TERMINAL=sixel", function()
    for _, c in ipairs { { "", "rp.heatmap(rp.eye(3), {terminal = 'sixel'})" },
      { "ROPER_PLOT_TERMINAL=sixel", "rp.hist({1, 2, 2})" } } do
      local so, se, code = roper("env -u ROPER_PLOT_DIR " .. c[1], c[2])
      assert.are.equal(0, code, se)
      assert.are.equal("\27Pq", so:sub(1, 3))
      assert.truthy(so:find("\27\\%s*$"), so:sub(-20))
    end
    local _, se, code = roper("env -u ROPER_PLOT_DIR ROPER_PLOT_TERMINAL=kitty", "rp.plot({1})")
    assert.are.equal(1, code)
    assert.truthy(se:find('rp.plot: ROPER_PLOT_TERMINAL must be "text" or "sixel", got "kitty"', 1,
      true), se)
  end)

  it("ROPER_PLOT_DIR: PNG files plot-1.png, plot-2.png, ... whose paths come back", function()
    local pics = dir .. "/pics"
    os.execute("mkdir " .. h.sh_quote(pics))
    local so, se, code = roper("ROPER_PLOT_DIR=" .. h.sh_quote(pics),
      "print(rp.plot({1, 2})) print(rp.heatmap(rp.eye(3))) print(rp.plot({1}, {out = '"
      .. pics .. "/mine.svg'})) print(rp.hist({1, 2}, {size = {300, 200}}))")
    assert.are.equal(0, code, se)
    assert.are.equal(("%s/plot-1.png\n%s/plot-2.png\n%s/mine.svg\n%s/plot-3.png\n"):format(pics,
      pics, pics, pics), so)
    assert.are.same({ "mine.svg", "plot-1.png", "plot-2.png", "plot-3.png" }, h.ls(pics))
    assert.are.same({ 800, 500 }, { png_size(pics .. "/plot-2.png") })
    assert.are.same({ 300, 200 }, { png_size(pics .. "/plot-3.png") })
  end)

  it("gnuplot missing or failing gives nil and gnuplot's message", function()
    assert.are.same({ nil, "rp.gnuplot: gnuplot failed: line 2 of the commands: undefined variable: y" },
      { rp.gnuplot({ "unset key", "plot y" }, { out = dir .. "/x.txt" }) })
    local so, se, code = roper("env PATH=/nonexistent", "print(rp.plot({1, 2}))")
    assert.are.equal(0, code, se)
    assert.are.equal("nil\trp.plot: gnuplot is not installed (Debian: apt-get install gnuplot-nox)\n", so)
  end)
end)

describe("an interrupted picture", function()
  it("a Ctrl-C while gnuplot draws raises 'interrupted' (the script stops), not gnuplot's exit "
    .. "status", function()
    -- gnuplot sends SIGINT to its process group, as a Ctrl-C at the terminal does: roper (in a
    -- group of its own), the shell that runs gnuplot, and gnuplot; the next line never runs
    local so, se, code = h.run("setsid -w " .. h.sh_quote(BIN) .. " -e " .. h.sh_quote(
      "rp.gnuplot({'system \"kill -INT 0\"', 'plot x'}, {out = '" .. dir .. "/int.txt'}) "
      .. "print('went on')"))
    assert.are.equal(1, code, se)
    assert.are.equal("", so)
    assert.truthy(se:find("rp.gnuplot: interrupted (Ctrl-C while gnuplot drew)", 1, true), se)
    assert.is_nil(h.read(dir .. "/int.txt"))
    -- a signal to gnuplot alone (its shell's parent is gnuplot)
    assert.are.same({ nil, "rp.gnuplot: gnuplot was stopped by signal 9" },
      { rp.gnuplot({ 'system "kill -KILL $PPID"', "plot x" }, { out = dir .. "/int.txt" }) })
    assert.is_nil(h.read(dir .. "/int.txt"))
  end)
end)

describe("bad input", function()
  local function refuses(fn, msg)
    local ok, err = pcall(fn)
    assert.is_false(ok, "no error for: " .. msg)
    assert.are.equal(msg, err)
  end
  local cases = {
    { function() return rp.plot() end,
      "bad argument #1 to 'rp.plot' (y must be a 1-D tensor, a list of numbers or a list of them, got nil)" },
    { function() return rp.plot({}) end, "bad argument #1 to 'rp.plot' (y is empty)" },
    { function() return rp.plot({ 1, 0 / 0 }) end,
      "bad argument #1 to 'rp.plot' (y[2] is nan; values must be finite)" },
    { function() return rp.plot({ { 1 }, { 2, "x" } }) end,
      "bad argument #1 to 'rp.plot' (y[2][2] must be a number, got string \"x\")" },
    { function() return rp.plot(rp.zeros { 2, 3 }) end,
      "bad argument #1 to 'rp.plot' (y must be a 1-D tensor or a list of numbers, got a tensor [2 x 3])" },
    { function() return rp.plot({ 1, 2 }, { 1, 2, 3 }) end,
      "bad argument #2 to 'rp.plot' (y has 3 values, x has 2)" },
    { function() return rp.plot({ 1, 2 }, { titel = "x" }) end,
      "bad argument #2 to 'rp.plot' (unknown option 'titel' (known: title, xlabel, ylabel, out, "
        .. "terminal, size, labels, logx, logy, xrange, yrange))" },
    { function() return rp.plot({ 1, 2 }, { title = 3 }) end,
      "bad argument #2 to 'rp.plot' (option 'title' must be a string, got 3)" },
    { function() return rp.plot({ 1, 2 }, { labels = { "a", "b" } }) end,
      "bad argument #2 to 'rp.plot' (option 'labels' must be a list of 1 string (one per series), got 2 entries)" },
    { function() return rp.plot({ 1, -2 }, { logy = true }) end,
      "bad argument #1 to 'rp.plot' (option 'logy': every y must be > 0 on a log scale, got -2 at y[2])" },
    { function() return rp.scatter({ 0, 1 }, { 1, 2 }, { logx = true }) end,
      "bad argument #1 to 'rp.scatter' (option 'logx': every x must be > 0 on a log scale, got 0 at x[1])" },
    { function() return rp.plot({ 1, 2 }, { yrange = { 2, 1 } }) end,
      "bad argument #2 to 'rp.plot' (option 'yrange' must be {lo, hi} with finite lo < hi, got {2, 1})" },
    { function() return rp.plot({ 1, 2 }, { out = "x.jpg" }) end,
      "bad argument #2 to 'rp.plot' (option 'out' must be a file name ending in .png, .svg or .txt, got string \"x.jpg\")" },
    { function() return rp.plot({ 1, 2 }, { out = "x.png", terminal = "text" }) end,
      "bad argument #2 to 'rp.plot' (options 'out' and 'terminal' exclude each other (a file or the terminal))" },
    { function() return rp.plot({ 1, 2 }, { terminal = "kitty" }) end,
      "bad argument #2 to 'rp.plot' (option 'terminal' must be one of \"text\", \"sixel\", got string \"kitty\")" },
    { function() return rp.plot({ 1, 2 }, { size = { 5, 5 } }) end,
      "bad argument #2 to 'rp.plot' (option 'size' must be {width, height}, integers in 10..1000 (characters), got {5, 5})" },
    { function() return rp.plot({ 1, 2 }, { out = "p.png", size = { 20, 20 } }) end,
      "bad argument #2 to 'rp.plot' (option 'size' must be {width, height}, integers in 64..10000 (pixels), got {20, 20})" },
    { function() return rp.heatmap(rp.zeros { 1, 2, 3, 3 }) end,
      "bad argument #1 to 'rp.heatmap' (expected a 2-D tensor or a list of rows, got a tensor [1 x 2 x 3 x 3] "
        .. "(select one matrix: att[{1, 1}]))" },
    { function() return rp.heatmap({ { 1, 2 }, { 3 } }) end,
      "bad argument #1 to 'rp.heatmap' (row 2 has 1 values, row 1 has 2)" },
    { function() return rp.heatmap(rp.full({ 2, 2 }, math.huge)) end,
      "bad argument #1 to 'rp.heatmap' (the value at [1, 1] is inf; values must be finite)" },
    -- a list of rows names a value as the tensor form does
    { function() return rp.heatmap({ { 1, 0 / 0 } }) end,
      "bad argument #1 to 'rp.heatmap' (the value at [1, 2] is nan; values must be finite)" },
    { function() return rp.heatmap({ { 1, 2 }, { 3, "x" } }) end,
      "bad argument #1 to 'rp.heatmap' (the value at [2, 2] must be a number, got string \"x\")" },
    { function() return rp.heatmap(rp.zeros { 0, 3 }) end, "bad argument #1 to 'rp.heatmap' (the matrix is empty)" },
    { function() local t = rp.ones { 2, 2 }; getmetatable(t).__close(t) return rp.heatmap(t) end,
      "bad argument #1 to 'rp.heatmap' (attempt to use a released tensor)" },
    { function() return rp.hist({ 1 }, { bins = 0 }) end,
      "bad argument #2 to 'rp.hist' (option 'bins' must be in 1..10000, got 0)" },
    { function() return rp.hist("x") end,
      "bad argument #1 to 'rp.hist' (values must be a 1-D tensor or a list of numbers, got string \"x\")" },
    { function() return rp.gnuplot(3) end,
      "bad argument #1 to 'rp.gnuplot' (commands must be a string or a list of strings, got 3)" },
    { function() return rp.gnuplot({ "plot x", false }) end,
      "bad argument #1 to 'rp.gnuplot' (commands[2] must be a string, got boolean)" },
    { function() return rp.gnuplot("plot x", { font_size = 100 }) end,
      "bad argument #2 to 'rp.gnuplot' (option 'font_size' must be in 4..72, got 100)" },
  }
  for _, c in ipairs(cases) do
    it(c[2]:match("%((.*)%)$"):sub(1, 70), function() refuses(c[1], c[2]) end)
  end

  it("a tensor of any shape is a histogram's values, as the list of its values", function()
    local t = rp.randn({ 2, 3, 4 }, rp.rng(5))
    local a, b = dir .. "/h4.txt", dir .. "/h1.txt"
    assert.are.equal(a, rp.hist(t:transpose(1, 3), { bins = 4, size = { 40, 12 }, out = a }))
    assert.are.equal(b, rp.hist(t:transpose(1, 3):contiguous():view(24):totable(),
      { bins = 4, size = { 40, 12 }, out = b }))
    assert.are.equal(h.read(b), h.read(a))
  end)
end)

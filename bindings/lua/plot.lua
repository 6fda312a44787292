-- Pictures through gnuplot (Debian's gnuplot-nox): rp.plot (lines), rp.scatter (points),
-- rp.heatmap (a matrix: attention weights, scores), rp.hist (a histogram) and rp.gnuplot (any
-- gnuplot commands; the others are built on it, and scripts/lib/plot.lua draws the scripts' PNG
-- and SVG files through it, quoting their text with rp.gnuplot_string). docs/lua_api.md
-- ("Plots") has the options.
--
-- Where a picture goes: a file when opts.out names one (.png, .svg, or .txt for the text
-- picture); else a file plot-<n>.png in the folder $ROPER_PLOT_DIR when that is set (n counts
-- the pictures of the process from 1); else the terminal, as text (gnuplot's dumb terminal) or as
-- sixel graphics (opts.terminal or $ROPER_PLOT_TERMINAL = "sixel").
--
-- How: the commands go to gnuplot in a temporary script file, the data inline in it as data
-- blocks (numbers written by Lua, never text of the user's); titles and labels are gnuplot
-- strings with every backslash, double quote and backquote escaped (gp_text, which
-- rp.gnuplot_string offers to rp.gnuplot's callers, the scripts among them). The one shell
-- command is gnuplot with its -e settings (the terminal, its size and a temporary output path:
-- no user text) and the script's path, each quoted. gnuplot writes to the temporary output; the
-- picture is then read and written to opts.out atomically (internals.write_file: core's
-- rp_file_write_atomic), or to stdout. gnuplot runs with -d (no ~/.gnuplot), so the pictures do
-- not depend on the user's settings. A failing gnuplot or an unwritable file gives nil and
-- "fname: message"; a Ctrl-C while it draws raises.
--
-- roper.plot: adds rp.plot, rp.scatter, rp.heatmap, rp.hist, rp.gnuplot and rp.gnuplot_string;
-- exports nothing.
local require = ...
local rp = require "roper"
local internals = require "roper.internals"
local args = require "roper.args"
require "roper.print" -- rp.inspect

local argerror, describe, user_level = args.argerror, args.describe, args.user_level
local check_opts, opt_int, opt_enum = args.check_opts, args.opt_int, args.opt_enum
local is_live, read_file, write_file = internals.is_live, internals.read_file, internals.write_file
local remove_files = internals.remove_files
local path_kind = internals.path_kind

local MAX_VALUES = 10000000       -- numbers in one picture
local MAX_OUTPUT = 256 * 2 ^ 20   -- bytes of one picture
local TEXT_SIZE = { 80, 24 }      -- columns and lines of a text picture ($COLUMNS sets the width)
local PIXEL_SIZE = { 800, 500 }   -- of a PNG, SVG or sixel picture
local TERMINALS = { "text", "sixel" }
local SHADES = " .:-=+*#%@"       -- a text heatmap's cells, from the lowest value to the highest
-- the marks of a text picture's series, one each, and so at most as many series: gnuplot's dumb
-- terminal draws line type i with the i-th of LINE_MARKS (type 8 again with the first); the
-- points of rp.scatter are POINT_MARKS', given to gnuplot (its own point types are A-Z only)
local LINE_MARKS = "*#$%@&="
local POINT_MARKS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

-- ---------------------------------------------------------------- reading the arguments

-- t:method(...) for argument arg of fname: a tensor released meanwhile (a finalizer may run at
-- any allocation) raises fname's argument error, not the method's.
local function call(fname, arg, t, method, ...)
  local r = table.pack(pcall(t[method], t, ...))
  if not r[1] then argerror(fname, arg, args.inner(r[2])) end
  return table.unpack(r, 2, r.n)
end

local function finite(x) return x == x and x ~= math.huge and x ~= -math.huge end
local function show(x) return x ~= x and "nan" or tostring(x) end

-- The argument error for a value x that is not finite, `name` naming it ("y[2]", "the value at
-- [1, 2]").
local function not_finite(fname, arg, name, x)
  argerror(fname, arg, ("%s is %s; values must be finite"):format(name, show(x)))
end

-- The value at row i, column j of a matrix, as messages name it.
local function cell(i, j) return ("the value at [%d, %d]"):format(i, j) end

-- The numbers of a 1-D tensor or a Lua list (raw reads: no metamethod runs), each finite, at
-- least one; `what` names them in errors ("y", "y[2]"), and name(i) the i-th of them (default
-- what[i]).
local function numbers(fname, arg, v, what, name)
  name = name or function(i) return ("%s[%d]"):format(what, i) end
  local list
  if rp.is_tensor(v) then
    if not is_live(v) then argerror(fname, arg, what .. ": attempt to use a released tensor") end
    local sz = call(fname, arg, v, "shape")
    if #sz ~= 1 then
      argerror(fname, arg, ("%s must be a 1-D tensor or a list of numbers, got a tensor [%s]")
        :format(what, table.concat(sz, " x ")))
    end
    if sz[1] > MAX_VALUES then
      argerror(fname, arg, ("%s has %d values, at most %d"):format(what, sz[1], MAX_VALUES))
    end
    list = call(fname, arg, v, "totable")
  elseif type(v) == "table" then
    list = {}
    local n = rawlen(v)
    if n > MAX_VALUES then
      argerror(fname, arg, ("%s has %d values, at most %d"):format(what, n, MAX_VALUES))
    end
    for i = 1, n do
      local x = rawget(v, i)
      if type(x) ~= "number" then
        argerror(fname, arg, ("%s must be a number, got %s"):format(name(i), describe(x)))
      end
      list[i] = x
    end
  else
    argerror(fname, arg, ("%s must be a 1-D tensor or a list of numbers, got %s"):format(what,
      describe(v)))
  end
  if #list == 0 then argerror(fname, arg, what .. " is empty") end
  for i, x in ipairs(list) do
    if not finite(x) then not_finite(fname, arg, name(i), x) end
  end
  return list
end

-- y of rp.plot and rp.scatter: one series (a 1-D tensor or a list of numbers) or a list of them.
local function series_of(fname, arg, y)
  if rp.is_tensor(y) or (type(y) == "table" and type(rawget(y, 1)) == "number") then
    return { numbers(fname, arg, y, "y") }
  end
  if type(y) ~= "table" then
    argerror(fname, arg, "y must be a 1-D tensor, a list of numbers or a list of them, got "
      .. describe(y))
  end
  local n = rawlen(y)
  if n == 0 then argerror(fname, arg, "y is empty") end
  local list, total = {}, 0
  for i = 1, n do
    list[i] = numbers(fname, arg, rawget(y, i), ("y[%d]"):format(i))
    total = total + #list[i]
    if total > MAX_VALUES then argerror(fname, arg, ("y has more than %d values"):format(MAX_VALUES)) end
  end
  return list
end

-- A matrix: a 2-D tensor or a list of rows (lists of numbers of one length); a list of rows.
local function matrix_of(fname, arg, m)
  local rows
  if rp.is_tensor(m) then
    if not is_live(m) then argerror(fname, arg, "attempt to use a released tensor") end
    local sz = call(fname, arg, m, "shape")
    if #sz ~= 2 then
      argerror(fname, arg, ("expected a 2-D tensor or a list of rows, got a tensor [%s]%s"):format(
        table.concat(sz, " x "), #sz > 2 and " (select one matrix: att[{1, 1}])" or ""))
    end
    if sz[1] * sz[2] > MAX_VALUES then
      argerror(fname, arg, ("[%d x %d] has more than %d values"):format(sz[1], sz[2], MAX_VALUES))
    end
    if sz[1] == 0 or sz[2] == 0 then argerror(fname, arg, "the matrix is empty") end
    rows = call(fname, arg, m, "totable")
  elseif type(m) == "table" then
    local n = rawlen(m)
    if n == 0 then argerror(fname, arg, "the matrix is empty") end
    rows = {}
    for i = 1, n do
      local r = rawget(m, i)
      if type(r) ~= "table" or rp.is_tensor(r) then
        argerror(fname, arg, ("row %d must be a list of numbers, got %s"):format(i, describe(r)))
      end
      rows[i] = numbers(fname, arg, r, ("row %d"):format(i), function(j) return cell(i, j) end)
      if #rows[i] ~= #rows[1] then
        argerror(fname, arg, ("row %d has %d values, row 1 has %d"):format(i, #rows[i], #rows[1]))
      end
      if i * #rows[1] > MAX_VALUES then
        argerror(fname, arg, ("the matrix has more than %d values"):format(MAX_VALUES))
      end
    end
    return rows
  else
    argerror(fname, arg, "expected a 2-D tensor or a list of rows, got " .. describe(m))
  end
  for i, r in ipairs(rows) do
    for j, x in ipairs(r) do
      if not finite(x) then not_finite(fname, arg, cell(i, j), x) end
    end
  end
  return rows
end

-- o[key]: nil or a value of Lua type kind ("string", "boolean").
local function opt_typed(fname, arg, o, key, kind)
  local v = o[key]
  if v ~= nil and type(v) ~= kind then
    argerror(fname, arg, ("option '%s' must be a %s, got %s"):format(key, kind, describe(v)))
  end
  return v
end
local function opt_string(fname, arg, o, key) return opt_typed(fname, arg, o, key, "string") end
local function opt_boolean(fname, arg, o, key)
  return opt_typed(fname, arg, o, key, "boolean") == true
end

-- {lo, hi}: two finite numbers, lo < hi.
local function opt_range(fname, arg, o, key)
  local v = o[key]
  if v == nil then return nil end
  local lo, hi = type(v) == "table" and rawget(v, 1), type(v) == "table" and rawget(v, 2)
  if type(v) ~= "table" or rawlen(v) ~= 2 or type(lo) ~= "number" or type(hi) ~= "number"
      or not finite(lo) or not finite(hi) or not (lo < hi) then
    argerror(fname, arg, ("option '%s' must be {lo, hi} with finite lo < hi, got %s"):format(key,
      type(v) == "table" and rp.inspect(v, { depth = 1, items = 4 }) or describe(v)))
  end
  return { lo, hi }
end

-- opts.out: a path ending in .png, .svg or .txt; gives the path and the picture's kind.
local OUT_KINDS = { png = "png", svg = "svg", txt = "text" }
local function opt_out(fname, arg, o)
  local out = opt_string(fname, arg, o, "out")
  if out == nil then return nil end
  local kind = OUT_KINDS[(out:match("%.(%w+)$") or ""):lower()]
  if not kind or out:find("\0", 1, true) then
    argerror(fname, arg, ("option 'out' must be a file name ending in .png, .svg or .txt, got %s")
      :format(describe(out)))
  end
  return out, kind
end

-- Where the picture goes and how large it is: {kind =, out =, size = {w, h}}.
local pictures = 0 -- written to $ROPER_PLOT_DIR by this process
local function target(fname, arg, o)
  local out, kind = opt_out(fname, arg, o)
  local terminal = opt_enum(fname, arg, o, "terminal", TERMINALS, nil)
  if out and terminal then
    argerror(fname, arg, "options 'out' and 'terminal' exclude each other (a file or the terminal)")
  end
  local dir = not out and not terminal and os.getenv("ROPER_PLOT_DIR")
  if dir and dir ~= "" then kind = "png" end
  if not out and kind ~= "png" then
    if not terminal then
      terminal = os.getenv("ROPER_PLOT_TERMINAL")
      if terminal == nil or terminal == "" then terminal = "text" end
      if terminal ~= "text" and terminal ~= "sixel" then
        error(('%s: ROPER_PLOT_TERMINAL must be "text" or "sixel", got "%s"'):format(fname,
          terminal), user_level())
      end
    end
    kind = terminal
  end
  local size = o.size
  local lo, hi = kind == "text" and 10 or 64, kind == "text" and 1000 or 10000
  if size ~= nil then
    local w, h = type(size) == "table" and rawget(size, 1), type(size) == "table" and rawget(size, 2)
    if type(size) ~= "table" or rawlen(size) ~= 2 or math.type(w) ~= "integer"
        or math.type(h) ~= "integer" or w < lo or w > hi or h < lo or h > hi then
      argerror(fname, arg, ("option 'size' must be {width, height}, integers in %d..%d (%s), got %s")
        :format(lo, hi, kind == "text" and "characters" or "pixels",
          type(size) == "table" and rp.inspect(size, { depth = 1, items = 4 }) or describe(size)))
    end
    size = { w, h }
  elseif kind == "text" then
    local cols = math.tointeger(tonumber(os.getenv("COLUMNS") or ""))
    size = { cols and cols >= 20 and cols <= 1000 and cols or TEXT_SIZE[1], TEXT_SIZE[2] }
  else
    size = { PIXEL_SIZE[1], PIXEL_SIZE[2] }
  end
  if not out and kind == "png" then -- the next picture of $ROPER_PLOT_DIR
    pictures = pictures + 1
    out = ("%s/plot-%d.png"):format(dir:gsub("/+$", ""), pictures)
  end
  return { kind = kind, out = out, size = size, explicit_size = o.size ~= nil }
end

-- ---------------------------------------------------------------- gnuplot

-- s as UTF-8: each byte of s that is not part of a UTF-8 character replaced by U+FFFD (an SVG
-- holding such a byte is not XML; a browser shows an error in the picture's place).
local function utf8_text(s)
  if utf8.len(s) then return s end
  local out, i = {}, 1
  while i <= #s do
    local n, bad = utf8.len(s, i)
    if n then out[#out + 1] = s:sub(i) break end
    out[#out + 1] = s:sub(i, bad - 1) .. "\u{FFFD}"
    i = bad + 1
  end
  return table.concat(out)
end

-- A text of the picture (a title, a label, a series' name) as it is drawn: utf8_text of it, with
-- every control character but the newline (C0, DEL and C1: ESC, CSI, a tab) a space, so that a
-- text picture writes none of them to the terminal.
local function plain_text(s)
  return (utf8_text(tostring(s)):gsub("[\0-\9\11-\31\127]", " "):gsub("\xC2[\x80-\x9F]", " "))
end

-- s as a gnuplot string: double-quoted, with backslashes, double quotes and backquotes escaped (in
-- a double-quoted string of a script gnuplot runs `command` through the shell) and a newline as
-- \n (gnuplot reads it back as one); its other bytes kept (a path).
local function gp_string(s)
  return '"' .. tostring(s):gsub('[\\"`]', "\\%0"):gsub("\n", "\\n") .. '"'
end

-- A text of the picture as a gnuplot string: gp_string of plain_text.
local function gp_text(s) return gp_string(plain_text(s)) end

function rp.gnuplot_string(s, kind, ...)
  local fname = "rp.gnuplot_string"
  if type(s) ~= "string" and type(s) ~= "number" then
    argerror(fname, 1, "expected a string, got " .. describe(s))
  end
  if kind ~= nil and kind ~= "text" and kind ~= "path" then
    argerror(fname, 2, ('kind must be "text" or "path", got %s'):format(describe(kind)))
  end
  args.check_end(fname, 3, "kind", ...)
  -- (gnuplot ends a string at a NUL byte, and no path holds one)
  if kind == "path" and tostring(s):find("\0", 1, true) then
    argerror(fname, 1, "a path cannot hold a NUL byte")
  end
  return kind == "path" and gp_string(s) or gp_text(s)
end

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function num(x) return ("%.9g"):format(x) end

-- A data block `$name << EOD ... EOD` of rows (lists of numbers or words), in lines.
local function datablock(lines, name, rows)
  lines[#lines + 1] = "$" .. name .. " << EOD"
  for _, r in ipairs(rows) do
    local cells = {}
    for i, x in ipairs(r) do cells[i] = type(x) == "number" and num(x) or x end
    lines[#lines + 1] = table.concat(cells, " ")
  end
  lines[#lines + 1] = "EOD"
end

-- gnuplot's terminal for each kind: width, height, font size (points)
local TERMINAL_SPEC = {
  text = "dumb size %d,%d noenhanced",
  sixel = "sixelgd size %d,%d truecolor noenhanced font ',%d'",
  png = "pngcairo size %d,%d noenhanced font ',%d'",
  svg = "svg size %d,%d dynamic noenhanced font ',%d'",
}
local FONT_SIZE = 11

-- the line colours of the PNG, SVG and sixel pictures (as scripts/lib/plot.lua's)
local COLOURS = { "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
  "#7f7f7f" }

-- A text picture as printed: no form feed, no trailing blanks, one final newline.
local function tidy_text(s)
  s = s:gsub("^\f", ""):gsub("[ \t]+\n", "\n"):gsub("[ \t]+$", ""):gsub("\n+$", "")
  return s .. "\n"
end

-- Runs gnuplot on the commands (a list of lines) for the target t; `header` and `footer` are text
-- added above and under a text picture. Returns the path written, nothing (the terminal), or nil
-- and a message.
local function render(fname, t, commands, footer, header)
  if t.out then
    local kind, err = path_kind(t.out)
    if kind == nil then return nil, fname .. ": " .. err end
    if kind and kind ~= "a regular file" then
      return nil, ("%s: %s: not a regular file (%s)"):format(fname, t.out, kind)
    end
  end
  local ok_tmp, base = pcall(os.tmpname)
  if not ok_tmp then return nil, fname .. ": cannot make a temporary file: " .. tostring(base) end
  -- the files are removed however render ends: by a return, or by an error raised while it runs
  -- (a debug hook's, such as an interrupt or a time budget); the closing function is C's, which
  -- no hook interrupts
  local files <close> = setmetatable({ base }, { __close = remove_files })
  local script, result, log = base .. ".gp", base .. ".out", base .. ".log"
  files[2], files[3], files[4] = script, result, log
  local okw, werr = write_file(script, table.concat(commands, "\n") .. "\n")
  if not okw then return nil, fname .. ": " .. werr end
  local settings = ("set terminal " .. TERMINAL_SPEC[t.kind]):format(t.size[1], t.size[2],
    t.font_size or FONT_SIZE) .. "; set output " .. gp_string(result)
  local ran, how, code = os.execute(("gnuplot -d -e %s %s > %s 2>&1 < /dev/null"):format(
    sh_quote(settings), sh_quote(script), sh_quote(log)))
  local logtext = read_file(log, 2 ^ 20) or ""
  local bytes, rerr
  if ran then bytes, rerr = read_file(result, MAX_OUTPUT) end
  if not ran then
    -- a Ctrl-C reaches the shell and gnuplot (roper waits with SIGINT ignored): the shell ends
    -- by SIGINT (2), and the call raises, as Lua's interrupt does (a script stops there, the
    -- REPL goes back to its prompt); a signal that reaches gnuplot alone ends the shell with
    -- 128 + its number
    local signal = how == "signal" and code or code > 128 and code < 192 and code - 128
    if signal == 2 then error(fname .. ": interrupted (Ctrl-C while gnuplot drew)", 0) end
    if signal then return nil, ("%s: gnuplot was stopped by signal %d"):format(fname, signal) end
    if code == 127 then
      return nil, fname .. ": gnuplot is not installed (Debian: apt-get install gnuplot-nox)"
    end
    -- gnuplot names the script by its path: say "line N of the commands" instead
    logtext = logtext:gsub('"' .. script:gsub("%p", "%%%0") .. '"%s*line (%d+)', "line %1 of the commands")
      :gsub("^%s+", ""):gsub("%s+$", "")
    return nil, ("%s: gnuplot failed: %s"):format(fname, logtext ~= "" and logtext
      or ("exit status " .. tostring(code)))
  end
  if not bytes then return nil, fname .. ": gnuplot wrote no picture: " .. tostring(rerr) end
  if t.kind == "text" then bytes = (header or "") .. tidy_text(bytes) .. (footer or "") end
  if t.out then
    local okf, ferr = write_file(t.out, bytes)
    if not okf then return nil, fname .. ": " .. ferr end
    return t.out
  end
  io.stdout:write(bytes)
  io.stdout:flush()
end

-- ---------------------------------------------------------------- the plots

local COMMON = { "title", "xlabel", "ylabel", "out", "terminal", "size" }
local function known(...)
  local list = {}
  for _, k in ipairs(COMMON) do list[#list + 1] = k end
  for _, k in ipairs { ... } do list[#list + 1] = k end
  return list
end

-- ---------------------------------------------------------------- titles and labels

-- The lines of a text (plain_text: its newlines split it) and the width of the widest in bytes
-- (gnuplot's dumb terminal gives each byte a cell).
local function text_lines(s)
  local list, bytes = {}, 0
  for l in (plain_text(s) .. "\n"):gmatch("(.-)\n") do
    list[#list + 1] = l
    bytes = math.max(bytes, #l)
  end
  return list, bytes
end

-- The lines of a text at most `width` characters wide: each of its lines as it is when it fits,
-- else broken at spaces, a word wider than the width cut.
local function wrap(s, width)
  local out = {}
  for _, line in ipairs((text_lines(s))) do
    if utf8.len(line) <= width then
      out[#out + 1] = line
    else
      local cur, n = nil, 0 -- the line being filled and its width
      for word in line:gmatch("%S+") do
        local w = utf8.len(word)
        while w > width do
          if cur then out[#out + 1], cur, n = cur, nil, 0 end
          local cut = utf8.offset(word, width + 1)
          out[#out + 1], word, w = word:sub(1, cut - 1), word:sub(cut), w - width
        end
        if w > 0 then
          if cur and n + 1 + w <= width then
            cur, n = cur .. " " .. word, n + 1 + w
          else
            if cur then out[#out + 1] = cur end
            cur, n = word, w
          end
        end
      end
      if cur then out[#out + 1] = cur end
    end
  end
  return out
end

-- A line centred at column `centre` (0-based) of a picture `width` characters wide, as far as
-- the picture leaves room (a line as wide as the picture starts at its left edge).
local function centred(line, centre, width)
  local n = utf8.len(line)
  return (" "):rep(math.max(0, math.min(centre - n // 2, width - n))) .. line
end

-- The title and axis labels of opts, checked: strings or nil.
local function check_labels(fname, arg, o)
  for _, key in ipairs { "title", "xlabel", "ylabel" } do opt_string(fname, arg, o, key) end
end

-- The title and axis labels of a PNG, SVG or sixel picture as commands.
local function labels(o, lines)
  for _, key in ipairs { "title", "xlabel", "ylabel" } do
    if o[key] then lines[#lines + 1] = ("set %s %s"):format(key, gp_text(o[key])) end
  end
end

-- The y label of a text picture `width` characters wide. gnuplot centres it at a fixed column,
-- where a long one runs into the tic labels or is dropped: it is a label at the left edge,
-- halfway up, in a left margin of margin(w) characters (w: its widest line's bytes), when that
-- margin is at most half the width (the rest is the picture's). Gives the margin, or nil and
-- the y label as lines of their own (for above the picture) when it would take more.
local function text_ylabel(o, width, lines, margin)
  if not o.ylabel then return nil, {} end
  local _, w = text_lines(o.ylabel)
  if margin(w) > width // 2 then return nil, wrap(o.ylabel, width) end
  lines[#lines + 1] = ("set label 100 %s at screen 0, graph 0.5 left"):format(gp_text(o.ylabel))
  return margin(w), {}
end

-- The title and axis labels of a text picture t (rp.plot, rp.scatter, rp.hist) as commands: the
-- y label as text_ylabel puts it, in a margin for tic labels of up to 8 characters too; a title
-- and an x label whose every line fits the width through gnuplot (which drops a wider title and
-- cuts a wider x label). Otherwise they are lines of their own, wrapped to the width: the title
-- centred above the picture, then the y label, and the x label centred below it; the picture
-- is as many lines shorter (down to 10). Gives the text above and below the picture.
local function text_labels(o, t, lines)
  local width = t.size[1]
  local above, below = {}, {}
  -- o[key] through gnuplot when its every line fits, else its lines centred into `to`
  local function place(key, to)
    if not o[key] then return end
    local _, w = text_lines(o[key]) -- (bytes, as gnuplot counts them)
    if w <= width then
      lines[#lines + 1] = ("set %s %s"):format(key, gp_text(o[key]))
      return
    end
    for _, l in ipairs(wrap(o[key], width)) do to[#to + 1] = centred(l, width // 2, width) end
  end
  place("title", above)
  local margin, ylines = text_ylabel(o, width, lines, function(w) return w + 11 end)
  if margin then lines[#lines + 1] = ("set lmargin %d"):format(margin) end
  for _, l in ipairs(ylines) do above[#above + 1] = l end
  place("xlabel", below)
  t.size = { width, math.max(10, t.size[2] - #above - #below) }
  local function text(list) return #list > 0 and table.concat(list, "\n") .. "\n" or nil end
  return text(above), text(below)
end

-- Every value of the lists (x, or the series of y) must be > 0 on a log scale.
local function check_log(fname, arg, key, lists, what)
  for i, l in ipairs(lists) do
    for j, x in ipairs(l) do
      if x <= 0 then
        argerror(fname, arg, ("option '%s': every %s must be > 0 on a log scale, got %s at %s[%d]")
          :format(key, what, num(x), #lists > 1 and ("%s[%d]"):format(what, i) or what, j))
      end
    end
  end
end

-- The points of a line that the picture can show, when it has more than 8 a column: the first,
-- last, lowest and highest of each of 2 x width groups of consecutive points, in order (every
-- rise and fall that width can draw stays; gnuplot's PNG takes minutes over 10^5 noisy points).
-- Only where groups of points are groups of columns: x evenly spaced and rising (1, 2, ..., n
-- when not given; within 1e-9 of the span), on a linear x axis drawn whole (no logx, no xrange).
-- nil (every point) otherwise, or for a shorter line.
local function thin(xs, ys, width)
  local n, groups = #ys, 2 * width
  if n <= 4 * groups then return nil end
  if xs then
    local step, tol = (xs[n] - xs[1]) / (n - 1), 1e-9 * math.abs(xs[n] - xs[1])
    if not (step > 0) then return nil end
    for j = 2, n do
      if not (math.abs(xs[j] - (xs[1] + (j - 1) * step)) <= tol) then return nil end
    end
  end
  local keep = {}
  for g = 0, groups - 1 do
    local lo, hi = g * n // groups + 1, (g + 1) * n // groups
    local imin, imax = lo, lo
    for j = lo + 1, hi do
      if ys[j] < ys[imin] then imin = j end
      if ys[j] > ys[imax] then imax = j end
    end
    local idx = { lo, imin, imax, hi }
    table.sort(idx)
    for k, j in ipairs(idx) do
      if k == 1 or j ~= idx[k - 1] then keep[#keep + 1] = j end
    end
  end
  return keep
end

-- rp.plot and rp.scatter: series over x.
local function xy_plot(fname, style, ...)
  local a, b, c = ...
  local xarg, yarg, oarg, x, y, opts
  -- x, y[, opts]: b is y when a third argument follows it (an empty y is then refused as such,
  -- not taken for the options)
  if c ~= nil or rp.is_tensor(b) or (type(b) == "table" and rawget(b, 1) ~= nil) then
    xarg, yarg, oarg, x, y, opts = 1, 2, 3, a, b, c
  else
    yarg, oarg, y, opts = 1, 2, a, b
  end
  local series = series_of(fname, yarg, y)
  local o = check_opts(fname, oarg, opts, known("labels", "logx", "logy", "xrange", "yrange"))
  local xs
  if xarg then
    xs = numbers(fname, xarg, x, "x")
    for i, s in ipairs(series) do
      if #s ~= #xs then
        argerror(fname, yarg, ("%s has %d values, x has %d"):format(#series > 1 and ("y[%d]"):format(i)
          or "y", #s, #xs))
      end
    end
  end
  local names
  if o.labels ~= nil then
    local l = o.labels
    if type(l) ~= "table" or rawlen(l) ~= #series then
      argerror(fname, oarg, ("option 'labels' must be a list of %d string%s (one per series), got %s")
        :format(#series, #series == 1 and "" or "s", type(l) == "table" and ("%d entries"):format(rawlen(l))
          or describe(l)))
    end
    names = {}
    for i = 1, #series do
      names[i] = rawget(l, i)
      if type(names[i]) ~= "string" then
        argerror(fname, oarg, ("option 'labels': entry %d must be a string, got %s"):format(i,
          describe(names[i])))
      end
    end
  end
  local logx, logy = opt_boolean(fname, oarg, o, "logx"), opt_boolean(fname, oarg, o, "logy")
  local xrange, yrange = opt_range(fname, oarg, o, "xrange"), opt_range(fname, oarg, o, "yrange")
  local t = target(fname, oarg, o)
  local marks = style == "lines" and LINE_MARKS or POINT_MARKS
  if t.kind == "text" and #series > #marks then
    argerror(fname, yarg, ("y has %d series, more than the %d marks of a text picture (%s): draw "
      .. "them to a .png or .svg file"):format(#series, #marks,
        style == "lines" and marks or "A-Z, a-z"))
  end
  if logx and xs then check_log(fname, xarg, "logx", { xs }, "x") end
  if logy then check_log(fname, yarg, "logy", series, "y") end
  if logx and xrange and xrange[1] <= 0 then
    argerror(fname, oarg, "option 'xrange' must be > 0 with logx")
  end
  if logy and yrange and yrange[1] <= 0 then
    argerror(fname, oarg, "option 'yrange' must be > 0 with logy")
  end

  local lines = {}
  for i, s in ipairs(series) do
    local rows = {}
    local keep = style == "lines" and not logx and not xrange and thin(xs, s, t.size[1])
    if keep then
      for k, j in ipairs(keep) do rows[k] = { xs and xs[j] or j, s[j] } end
    else
      for j, v in ipairs(s) do rows[j] = { xs and xs[j] or j, v } end
    end
    datablock(lines, "s" .. i, rows)
  end
  check_labels(fname, oarg, o)
  local header, footer
  if t.kind == "text" then header, footer = text_labels(o, t, lines) else labels(o, lines) end
  if t.kind ~= "text" then
    lines[#lines + 1] = "set grid"
    for i, c in ipairs(COLOURS) do lines[#lines + 1] = ("set linetype %d lc rgb '%s'"):format(i, c) end
  end
  if logx then lines[#lines + 1] = "set logscale x" end
  if logy then lines[#lines + 1] = "set logscale y" end
  if xrange then lines[#lines + 1] = ("set xrange [%s:%s]"):format(num(xrange[1]), num(xrange[2])) end
  if yrange then lines[#lines + 1] = ("set yrange [%s:%s]"):format(num(yrange[1]), num(yrange[2])) end
  -- the key: in a text picture below it, where no line crosses it
  lines[#lines + 1] = not names and "unset key" or t.kind == "text" and "set key below" or
    "set key top right"
  -- points on the border would hide under it: a margin of 5% around them
  if style == "points" then lines[#lines + 1] = "set offsets graph 0.05, graph 0.05, graph 0.05, graph 0.05" end
  local plots = {}
  for i = 1, #series do
    local with
    if style == "lines" then
      with = t.kind == "text" and "lines" or "lines lw 2"
    else -- points: letters A, B, ... in text, filled circles in colour otherwise
      with = t.kind == "text" and ("points pt '%s'"):format(marks:sub(i, i)) or "points pt 7 ps 0.8"
    end
    plots[i] = ("$s%d using 1:2 with %s %s"):format(i, with,
      names and ("title " .. gp_text(names[i])) or "notitle")
  end
  lines[#lines + 1] = "plot " .. table.concat(plots, ", ")
  return render(fname, t, lines, footer, header)
end

function rp.plot(...) return xy_plot("rp.plot", "lines", ...) end
function rp.scatter(...) return xy_plot("rp.scatter", "points", ...) end

-- The smallest of 1, 2, 5, 10, 20, 50, ... that is >= x.
local function nice_step(x)
  local step = 1
  while step < x do
    local d = tostring(step):sub(1, 1)
    step = d == "2" and step * 5 // 2 or step * 2
  end
  return step
end

-- A text heatmap: one character per cell (a shade of SHADES), two columns wide, one line high;
-- a matrix larger than the picture (at most t.size) is averaged over blocks of br x bc cells.
-- Each block sits at its centre in the matrix's 1-based indices; the picture is exactly as large
-- as its blocks need, and its title and x label are lines of their own above and below it,
-- wrapped to t.size's width (gnuplot would drop a title wider than the cells); the y label as
-- text_ylabel puts it, beside the row numbers or else under the title. Adds the commands to
-- lines; returns the text above and below the picture.
local function text_heatmap(rows, lo, hi, t, o, lines)
  local nr, nc = #rows, #rows[1]
  local full = t.size[1]
  local margin, ylines = text_ylabel(o, full, lines,
    function(w) return w + 2 + #tostring(nr) + 3 end)
  local lm = margin or #tostring(nr) + 3
  local rm, tm, bm = 2, 0, 1
  local titles = o.title and wrap(o.title, full) or {}
  local xlines = o.xlabel and wrap(o.xlabel, full) or {}
  -- the title and a blank line, the y label's lines
  local above = (#titles > 0 and #titles + 1 or 0) + #ylines
  local below = #xlines + 1 -- the x label, the shades
  local max_cols = math.max(1, (t.size[1] - lm - rm - 3) // 2)
  -- (the lines of the picture down to 10, as text_labels leaves them)
  local max_rows = math.max(10 - tm - bm - 2, t.size[2] - tm - bm - 2 - above - below)
  local br, bc = math.ceil(nr / max_rows), math.ceil(nc / max_cols)
  local nbr, nbc = math.ceil(nr / br), math.ceil(nc / bc)
  local cells = {}
  for bi = 1, nbr do
    for bj = 1, nbc do
      local sum, n = 0, 0
      for i = (bi - 1) * br + 1, math.min(bi * br, nr) do
        for j = (bj - 1) * bc + 1, math.min(bj * bc, nc) do sum, n = sum + rows[i][j], n + 1 end
      end
      local level = hi > lo and math.floor((sum / n - lo) / (hi - lo) * #SHADES) or #SHADES - 1
      level = math.max(0, math.min(#SHADES - 1, level))
      cells[#cells + 1] = { (bj - 0.5) * bc + 0.5, (bi - 0.5) * br + 0.5,
        '"' .. SHADES:sub(level + 1, level + 1) .. '"' }
    end
  end
  -- one block a unit more on each side than the blocks: 2 columns and 1 line per block
  local width = lm + rm + 2 * (nbc + 1) + 1
  t.size = { width, tm + bm + nbr + 2 }
  local xstep = nice_step(math.max((#tostring(nc) + 1) * bc / 2, nc / 12))
  local ystep = nice_step(math.max(br, nr / 12))
  for _, l in ipairs {
    ("set xrange [%s:%s]"):format(num(0.5 - bc / 2), num(nbc * bc + 0.5 + bc / 2)),
    ("set yrange [%s:%s]"):format(num(nbr * br + 0.5 + br / 2), num(0.5 - br / 2)),
    ("set lmargin %d"):format(lm), ("set rmargin %d"):format(rm), ("set tmargin %d"):format(tm),
    ("set bmargin %d"):format(bm), "set tics scale 0",
    -- (a step past the last row or column: a tic at 1 only)
    ("set xtics %d, %d, %d out nomirror"):format((xstep == 1 or xstep > nc) and 1 or xstep,
      xstep, nc),
    ("set ytics %d, %d, %d out nomirror"):format((ystep == 1 or ystep > nr) and 1 or ystep,
      ystep, nr),
  } do
    lines[#lines + 1] = l
  end
  datablock(lines, "m", cells)
  lines[#lines + 1] = "plot $m using 1:2:3 with labels"
  -- the title centred over the picture, the x label under the cells
  local header, footer = {}, {}
  for _, l in ipairs(titles) do header[#header + 1] = centred(l, width // 2, full) .. "\n" end
  if #titles > 0 then header[#header + 1] = "\n" end
  for _, l in ipairs(ylines) do header[#header + 1] = l .. "\n" end
  for _, l in ipairs(xlines) do footer[#footer + 1] = centred(l, lm + nbc + 1, full) .. "\n" end
  local shades = ("shades \"%s\" from %s to %s%s"):format(SHADES, num(lo), num(hi),
    (br > 1 or bc > 1) and (", each the mean of %d x %d"):format(br, bc) or "")
  for _, l in ipairs(wrap(shades, full)) do footer[#footer + 1] = l .. "\n" end
  return table.concat(header), table.concat(footer)
end

function rp.heatmap(m, opts)
  local fname = "rp.heatmap"
  local rows = matrix_of(fname, 1, m)
  local o = check_opts(fname, 2, opts, known("range"))
  local range = opt_range(fname, 2, o, "range")
  local t = target(fname, 2, o)
  local nr, nc = #rows, #rows[1]
  local lo, hi = math.huge, -math.huge
  for _, r in ipairs(rows) do
    for _, x in ipairs(r) do lo, hi = math.min(lo, x), math.max(hi, x) end
  end
  if range then lo, hi = range[1], range[2] end
  local lines, header, footer = {}, nil, nil
  lines[#lines + 1] = "unset key"
  check_labels(fname, 2, o)
  if t.kind == "text" then
    header, footer = text_heatmap(rows, lo, hi, t, o, lines)
  else
    labels(o, lines)
    lines[#lines + 1] = ("set xrange [0.5:%s]"):format(num(nc + 0.5))
    lines[#lines + 1] = ("set yrange [%s:0.5]"):format(num(nr + 0.5)) -- row 1 at the top
    datablock(lines, "m", rows)
    lines[#lines + 1] = "set palette defined (0 '#440154', 1 '#3b528b', 2 '#21918c', 3 '#5ec962', "
      .. "4 '#fde725')"
    if hi > lo then lines[#lines + 1] = ("set cbrange [%s:%s]"):format(num(lo), num(hi)) end
    lines[#lines + 1] = "set tics out nomirror"
    lines[#lines + 1] = "plot $m matrix using ($1 + 1):($2 + 1):3 with image"
  end
  return render(fname, t, lines, footer, header)
end

function rp.hist(values, opts)
  local fname = "rp.hist"
  local list
  if rp.is_tensor(values) and is_live(values) and #call(fname, 1, values, "shape") ~= 1 then
    local n = call(fname, 1, values, "numel")
    if n > MAX_VALUES then argerror(fname, 1, ("%d values, at most %d"):format(n, MAX_VALUES)) end
    local flat = call(fname, 1, call(fname, 1, values, "contiguous"), "view", n)
    list = numbers(fname, 1, flat, "values")
  else
    list = numbers(fname, 1, values, "values")
  end
  local o = check_opts(fname, 2, opts, known("bins", "range"))
  local bins = opt_int(fname, 2, o, "bins", math.max(5, math.min(50, math.ceil(math.sqrt(#list)))),
    1, 10000)
  local range = opt_range(fname, 2, o, "range")
  local t = target(fname, 2, o)
  local lo, hi = math.huge, -math.huge
  for _, x in ipairs(list) do lo, hi = math.min(lo, x), math.max(hi, x) end
  if range then
    lo, hi = range[1], range[2]
  elseif lo == hi then -- one value: a range about it (past 2^52, 0.5 would not widen it)
    local d = math.max(0.5, math.abs(lo) * 2^-20)
    lo, hi = lo - d, hi + d
    -- (at float64's largest the range lies on the side that does not overflow)
    if hi == math.huge then lo, hi = lo - d, list[1] end
    if lo == -math.huge then lo, hi = list[1], hi + d end
  end
  -- (hi - lo, x - lo overflow for values near float64's largest: then each over bins first)
  local width = (hi - lo) / bins
  if width == math.huge then width = hi / bins - lo / bins end
  local counts = {}
  for i = 1, bins do counts[i] = 0 end
  for _, x in ipairs(list) do
    if x >= lo and x <= hi then
      local q = (x - lo) / width
      if q == math.huge then q = x / width - lo / width end
      local i = math.max(1, math.min(bins, math.floor(q) + 1))
      counts[i] = counts[i] + 1
    end
  end
  local rows = {}
  for i = 1, bins do rows[i] = { lo + (i - 0.5) * width, counts[i] } end
  local lines = {}
  datablock(lines, "h", rows)
  check_labels(fname, 2, o)
  if o.ylabel == nil then o.ylabel = "count" end
  local header, footer
  if t.kind == "text" then header, footer = text_labels(o, t, lines) else labels(o, lines) end
  lines[#lines + 1] = "unset key"
  lines[#lines + 1] = ("set xrange [%s:%s]"):format(num(lo), num(hi))
  local most = 0
  for i = 1, bins do most = math.max(most, counts[i]) end
  lines[#lines + 1] = ("set yrange [0:%s]"):format(num(math.max(1, most) * 1.15)) -- the top bar in sight
  lines[#lines + 1] = ("set boxwidth %s absolute"):format(num(width))
  lines[#lines + 1] = t.kind == "text" and "set style fill empty"
    or "set style fill solid 0.6 border -1"
  lines[#lines + 1] = "plot $h using 1:2 with boxes"
  return render(fname, t, lines, footer, header)
end

function rp.gnuplot(commands, opts)
  local fname = "rp.gnuplot"
  local lines
  if type(commands) == "string" then
    lines = { commands }
  elseif type(commands) == "table" then
    lines = {}
    for i = 1, rawlen(commands) do
      local l = rawget(commands, i)
      if type(l) ~= "string" then
        argerror(fname, 1, ("commands[%d] must be a string, got %s"):format(i, describe(l)))
      end
      lines[i] = l
    end
  else
    argerror(fname, 1, "commands must be a string or a list of strings, got " .. describe(commands))
  end
  local o = check_opts(fname, 2, opts, { "out", "terminal", "size", "font_size" })
  local t = target(fname, 2, o)
  t.font_size = opt_int(fname, 2, o, "font_size", FONT_SIZE, 4, 72)
  return render(fname, t, lines)
end

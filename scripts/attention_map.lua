-- Attention maps of a saved model: loads a checkpoint (train.lua --save, compare.lua / sweep.lua
-- --keep-models), runs its input through the model and draws the attention weights as gnuplot
-- heatmaps, one panel per layer and head: row t of a panel is query t's weights over the keys
-- (columns), both axes labelled with the input's characters (up to 64 tokens, each at least 9
-- pixels; beyond, with positions), the colour bar with "attention weight". The picture is at most
-- --width pixels wide (1280: it reads at its own size on a common screen); the panels go in rows
-- that fit it, a layer's heads side by side when they all fit, and the picture grows taller. The
-- title is short: the checkpoint, the task and, for one whole problem, its answer; the input is
-- written under the panels, for addition with how to read it.
--
--   build/roper scripts/attention_map.lua runs/add.ckpt                  -- a problem of its task
--   build/roper scripts/attention_map.lua runs/add.ckpt --input '?d=12+34; 2e0+4e0+0e0==6e0' --layers 2
--   build/roper scripts/attention_map.lua model.ckpt --config run.json --out docs/attention
--
-- The task (its vocabulary, its data) comes from the run's JSON beside the checkpoint or from
-- --config (scripts/lib/saved.lua). Without --input the input is the first problem of a fresh
-- row of the task's data (addition, substring_index: question, worked answer and terminator as
-- in training), or the beginning of such a row (other tasks), drawn with --seed. Writes
-- <out>.png and <out>.svg (default <out>: the checkpoint's name with -attention), the gnuplot
-- script <out>.gp and the weights <out>.dat (one T x T matrix per panel, gnuplot's index order:
-- layer by layer, head by head), so the picture can be restyled.
--
-- Errors are one line: exit 2 for a bad option, checkpoint or run JSON, 1 when gnuplot fails.
-- lib/ beside this file, wherever it runs from: roper, lua5.4 or an installed roper-<name>
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local rp = require "roper"
local cli = require "lib.cli"
local fileio = require "lib.fileio"
local saved = require "lib.saved"

local gp_string, gp_path = require("lib.plot").gp_string, require("lib.plot").gp_path

-- A character as an axis label: blanks and control characters made visible, and "%" doubled
-- (gnuplot reads a tic label as a format).
local SHOW = { [" "] = "␣", ["\n"] = "↵", ["\t"] = "⇥", ["\r"] = "␍", ["%"] = "%%" }
local function label(ch)
  if SHOW[ch] then return SHOW[ch] end
  if ch:match("^%c$") then return ("\\x%02x"):format(ch:byte()) end
  return ch
end

-- The answer of a whole problem of a task with problems (task:problem works: addition,
-- substring_index, grid_offset): the text after the last "=" up to the terminator that ends it;
-- nil for another task, or an input that is not one whole problem.
local function problem_answer(task, text)
  if not pcall(task.problem, task, rp.rng(1)) then return nil end
  local answer, term = text:match("=([^=]+)([#\n])$")
  if not answer or text:sub(1, -2):find(term, 1, true) then return nil end -- several problems
  return answer
end

-- A list "1,3" of integers in 1..n (all of 1..n when s is nil), or a usage problem naming what.
local function index_list(s, n, what)
  local out = {}
  if s == nil then
    for i = 1, n do out[i] = i end
    return out
  end
  local seen = {}
  for part in s:gmatch("[^,]+") do
    local i = math.tointeger(tonumber(part))
    if not i or i < 1 or i > n then
      cli.usage(("%s %s: each must be an integer in 1..%d"):format(what, s, n))
    end
    if seen[i] then cli.usage(("%s %s: %d is given twice"):format(what, s, i)) end
    seen[i] = true
    out[#out + 1] = i
  end
  if #out == 0 then cli.usage(what .. " must list at least one") end
  return out
end

-- --help opens with these (each runs as written from the repository's folder; tests/lua/
-- help_examples_spec.lua runs them)
local EXAMPLES = {
  { "every layer and head on a problem of the task: runs/add-attention.png (and .svg)",
    "build/roper scripts/attention_map.lua runs/add.ckpt" },
  { "layer 2 only, on another problem, into runs/add-l2.png",
    "build/roper scripts/attention_map.lua runs/add.ckpt --layers 2 --seed 3 " .. "--out runs/add-l2" },
  { "heads 1 and 3 on your own input",
    "build/roper scripts/attention_map.lua runs/add.ckpt --heads 1,3 --input " .. "'?d=12+34;'" },
}

cli.main("attention_map.lua", function()
  local parser = cli.parser("build/roper scripts/attention_map.lua",
    "Draw a saved model's attention weights for an input: one gnuplot heatmap per layer and "
    .. "head (PNG and SVG).", EXAMPLES)
  parser:argument("checkpoint", "The checkpoint (.ckpt).")
  parser:option("--config", "The run's result JSON or config (default: the .json beside the "
    .. "checkpoint).")
    :argname("<file.json>")
  parser:option("--input", "The text to run through the model (default: a problem of the task, "
    .. "or the beginning of a row of its data).")
    :argname("<text>")
  parser:option("--seed", "Seed of the default input.", "1"):convert(math.tointeger)
    :argname("<n>")
  parser:option("--layers", "Only these layers, e.g. 1,3 (default: all).")
    :argname("<list>")
  parser:option("--heads", "Only these heads, e.g. 2,4 (default: all).")
    :argname("<list>")
  parser:option("--width", "The picture's width in pixels at most: the panels go in rows that "
    .. "fit it, the picture growing taller (a larger width, e.g. 3840, puts more panels in a row).",
    "1280"):convert(math.tointeger)
    :argname("<px>")
  parser:option("--out", "Output prefix: writes <out>.png, .svg, .gp and .dat (default: the "
    .. "checkpoint's name with -attention).")
    :argname("<prefix>")
  cli.allow_unused(parser)
  local args = parser:parse()

  if not args.seed then cli.usage("--seed must be an integer") end
  if not args.width or args.width < 400 or args.width > 20000 then
    cli.usage("--width must be an integer in 400..20000")
  end
  if args.input and cli.given("seed") then
    cli.refuse(args, "--seed " .. args.seed, "with --input: it draws the default input")
  end
  local m, task, cfg = saved.open(rp, args.checkpoint, args.config)
  local mc = m:config()
  local layers = index_list(args.layers, mc.layers, "--layers")
  local heads = index_list(args.heads, mc.heads, "--heads")
  local out = args.out or (args.checkpoint:gsub("%.ckpt$", "") .. "-attention")
  for _, ext in ipairs { ".png", ".svg", ".gp", ".dat" } do
    fileio.check_output(out .. ext, "--out")
  end

  -- the input
  local ids
  if args.input then
    if args.input == "" then cli.usage("--input must not be empty") end
    local ok, r = pcall(task.encode, task, args.input)
    if not ok then cli.usage("--input: " .. cli.inner(r)) end
    ids = r
    if #ids > mc.seq_len then
      cli.usage(("--input has %d characters, more than the model's seq_len %d"):format(#ids,
        mc.seq_len))
    end
  else
    local split = (cfg.task == "text" and select(2, task:split_sizes()) > task:config().seq_len)
      and "valid" or "train"
    local row = task:batch(1, rp.rng(args.seed), split)[1]:totable()
    local len = math.min(#row, mc.seq_len, 48)
    if cfg.task == "addition" or cfg.task == "substring_index" then
      local term = task:encode((cfg.task == "addition" and cfg.format == "labml") and "\n" or "#")[1]
      len = math.min(#row, mc.seq_len)
      for i, id in ipairs(row) do
        if id == term then len = math.min(i, len); break end
      end
    end
    ids = table.move(row, 1, len, 1, {})
    for i, id in ipairs(ids) do ids[i] = math.tointeger(id) end
  end
  local T = #ids
  local chars = {}
  for i, id in ipairs(ids) do chars[i] = task:decode { id } end
  local text = table.concat(chars)
  -- how to read an addition problem (docs/tasks.md), under the panels and in the output
  local reading
  if cfg.task == "addition" then
    local labml = cfg.format == "labml"
    reading = ("How to read it: ?%s=A+B; asks for A+B; then one step per digit place k, units "
      .. "first%s: aek+bek+cek==sek adds digit a of A, digit b of B and the carry c into s (s of "
      .. "10 or more carries 1 to the next place); %s==S is the sum and %s ends the problem.")
      :format(labml and "x" or "d", labml and "" or ' (joined by "and")', labml and "x" or "d",
      labml and "a newline (↵ in the picture)" or "#")
  end

  -- the weights: one T x T matrix per (layer, head)
  local dat, panels = {}, {}
  local lo, hi = math.huge, -math.huge
  for _, l in ipairs(layers) do
    local att = m:attention(l, { ids }) -- [1 x H x T x T]
    for _, h in ipairs(heads) do
      local w = att[1][h]:totable()
      dat[#dat + 1] = ("# layer %d, head %d: row = query, column = key"):format(l, h)
      for t = 1, T do
        local row = w[t]
        for s = 1, T do
          lo, hi = math.min(lo, row[s]), math.max(hi, row[s])
          row[s] = ("%.5g"):format(row[s])
        end
        dat[#dat + 1] = table.concat(row, " ")
      end
      dat[#dat + 1] = "\n" -- two blank lines end a gnuplot data block (index)
      panels[#panels + 1] = { layer = l, head = h }
    end
  end
  local ok, err = fileio.write(out .. ".dat", table.concat(dat, "\n") .. "\n")
  if not ok then error(err, 0) end

  -- the gnuplot script: the same multiplot drawn for PNG and for SVG, at most --width pixels wide
  -- (default 1280, a common screen: the picture is meant to be read at its own size). Up to
  -- LABELLED tokens every token's character labels both axes, each token at least MIN_CELL
  -- pixels so that the characters read; beyond, the axes count positions (gnuplot's own ticks)
  -- and a panel is at least MIN_PANEL pixels. The panels go in rows: a layer's heads side by side
  -- when they all fit the width, else as many as fit (a divisor of the heads, so that a row never
  -- mixes two layers), the rows going down: the picture grows taller, never narrower than it reads.
  local LABELLED, MIN_CELL, MIN_PANEL, MAX_CELL = 64, 9, 320, 28
  local labelled = T <= LABELLED
  local nl, nh = #layers, #heads
  -- margins and gaps in pixels: left (y ticks and label), right, top (the title, the colour box
  -- across the top right with its ticks, the panel titles), between panels (the next panel's y
  -- ticks and label; the x ticks and label and the next panel's title)
  -- (positions, beyond LABELLED tokens, take more room than a character)
  local ML, MR, MT, GX, GY = labelled and 50 or 76, 20, 76, labelled and 50 or 80, 88
  local function panel(cols) return (args.width - ML - MR - (cols - 1) * GX) // cols end
  local need = labelled and math.max(MIN_PANEL // 2, MIN_CELL * T) or MIN_PANEL
  local function fits(cols) return panel(cols) >= need end
  local cols = 1
  for c = nh, 1, -1 do
    if nh % c == 0 and fits(c) then cols = c; break end
  end
  if not fits(cols) then
    cli.usage(("--width %d is too narrow for %d tokens: one panel needs %d pixels and its "
      .. "margins %d"):format(args.width, T, need, ML + MR))
  end
  local rows = nl * nh // cols
  -- a panel: the width's share, no bigger than MAX_CELL pixels a token
  local P = math.min(panel(cols), labelled and math.max(MIN_PANEL // 2, MAX_CELL * T)
    or math.max(MIN_PANEL, 6 * T))
  local cell = P / T
  local FONT = labelled and math.max(8, math.min(12, math.floor(cell * 0.85))) or 9
  local linear = mc.attention == "linear"
  local name = args.checkpoint:match("([^/]*)$")
  -- the title: the checkpoint, the task and, for a whole problem, its answer (the text after the
  -- last "=" before the terminator); the input itself goes under the panels, wrapped, and for
  -- addition how to read it
  local answer = problem_answer(task, text)
  local title = ("%s: %s, %s"):format(name, cfg.task, answer and ("answer " .. answer)
    or ("%d tokens"):format(T))
  local W = ML + cols * P + (cols - 1) * GX + MR
  local CHAR = 8 -- pixels a character of the text under the panels (font 11), wide enough
  local per_line = math.max(20, (W - ML - 20) // CHAR - 7) -- characters a line ("input: ")
  local lines, shown = {}, text:gsub("\n", "↵")
  local n = utf8.len(shown) or #shown
  local at = 1
  while at <= n do
    local stop = math.min(n, at + per_line - 1)
    lines[#lines + 1] = shown:sub(utf8.offset(shown, at), (utf8.offset(shown, stop + 1) or #shown + 1) - 1)
    at = stop + 1
  end
  if #lines > 6 then lines = { table.unpack(lines, 1, 6) }; lines[6] = lines[6] .. " ..." end
  -- how to read an addition problem, wrapped at spaces
  local key = {}
  if reading then
    local line = ""
    for word in reading:gmatch("%S+") do
      if line ~= "" and utf8.len(line) + 1 + utf8.len(word) > per_line + 7 then
        key[#key + 1], line = line, word
      else
        line = line == "" and word or (line .. " " .. word)
      end
    end
    key[#key + 1] = line
  end
  local LINE = 18 -- pixels a line of the text under the panels
  local MB = 56 + LINE * (#lines + #key + 1)
  local H = MT + rows * P + (rows - 1) * GY + MB
  local tics_x, tics_y
  if labelled then
    local tics = {}
    for i = 1, T do tics[i] = ("%s %d"):format(gp_string(label(chars[i])), i - 1) end
    tics = table.concat(tics, ", ")
    tics_x = ("set xtics (%s) font ',%d' scale 0"):format(tics, FONT)
    tics_y = ("set ytics (%s) font ',%d' scale 0"):format(tics, FONT)
  else
    tics_x = ("set xtics font ',%d' out nomirror"):format(FONT)
    tics_y = ("set ytics font ',%d' out nomirror"):format(FONT)
  end
  -- the input's lines, then the reading's, as one gnuplot string ("\n" between them)
  local escaped = {}
  for i, l in ipairs(lines) do escaped[i] = gp_string(l):sub(2, -2) end
  local text_label = ('"input: %s'):format(table.concat(escaped, "\\n       "))
  for _, l in ipairs(key) do text_label = text_label .. "\\n" .. gp_string(l):sub(2, -2) end
  text_label = text_label .. '"'
  -- the commands of the picture; drawn to <out>.png and <out>.svg by rp.gnuplot (the module's one
  -- way to run gnuplot, each file written atomically), and kept in <out>.gp to draw them again
  local body = {
    "set termoption noenhanced",
    "unset key",
    "set palette defined (0 '#ffffff', 0.15 '#deebf7', 0.4 '#9ecae1', 0.7 '#3182bd', 1 '#08306b')",
    linear and "set cbrange [*:*]" or "set cbrange [0:1]",
    ("set xrange [-0.5:%g]"):format(T - 0.5),
    ("set yrange [%g:-0.5]"):format(T - 0.5),
    "set size ratio -1",
    tics_x,
    tics_y,
    ("set xlabel %s font ',10' offset 0,%s"):format(labelled and "'key'" or "'key position'",
      labelled and "0.3" or "0"),
    ("set ylabel %s font ',10' offset %s,0"):format(labelled and "'query'" or "'query position'",
      labelled and "0" or "0"),
    "set cbtics 0.2 font ',9' offset 0,0.4",
    "unset colorbox",
    ("set multiplot layout %d,%d margins %.4f,%.4f,%.4f,%.4f spacing %.4f,%.4f title %s font ',13'"):format(
      rows, cols, ML / W, 1 - MR / W, MB / H, 1 - MT / H, GX / W, GY / H, gp_string(title)),
  }
  for k, p in ipairs(panels) do
    if k == #panels then
      -- the colour box across the top right, its label left of it; the text under the panels
      local CB = math.min(240, W // 4)
      body[#body + 1] = ("set colorbox horizontal user origin screen %.4f, screen %.4f size "
        .. "screen %.4f, screen %.4f"):format((W - MR - CB) / W, 1 - 24 / H, CB / W, 10 / H)
      body[#body + 1] = ("set label 2 %s at screen %.4f, screen %.4f right font ',10'"):format(
        gp_string("attention weight"), (W - MR - CB - 8) / W, 1 - 19 / H)
      body[#body + 1] = ("set label 1 %s at screen %.4f, screen %.4f left font ',11'"):format(
        text_label, ML / W, (LINE * (#lines + #key - 0.5)) / H)
    end
    body[#body + 1] = ("set title 'layer %d, head %d' font ',11'"):format(p.layer, p.head)
    body[#body + 1] = ("plot %s index %d matrix with image"):format(gp_path(out .. ".dat"), k - 1)
  end
  body[#body + 1] = "unset multiplot"
  local gp = out .. ".gp"
  local script = {
    "# Generated by scripts/attention_map.lua; rerun with: gnuplot " .. gp,
    ("# Attention weights of %s (pe %s%s) for %d tokens, one panel per layer and head, %d a row"):format(
      args.checkpoint, mc.pe, linear and ", linear attention" or "", T, cols),
    "# (layer by layer); in a panel, row t is query t's weights over the keys (columns).",
    "do for [fmt in \"png svg\"] {",
    "  if (fmt eq \"png\") {",
    ("    set terminal pngcairo size %d,%d font ',9'"):format(W, H),
    ("    set output %s"):format(gp_path(out .. ".png")),
    "  } else {",
    ("    set terminal svg size %d,%d dynamic font ',9'"):format(W, H),
    ("    set output %s"):format(gp_path(out .. ".svg")),
    "  }",
  }
  for _, l in ipairs(body) do script[#script + 1] = "  " .. l end
  script[#script + 1] = "  set output"
  script[#script + 1] = "}"
  ok, err = fileio.write(gp, table.concat(script, "\n") .. "\n")
  if not ok then error(err, 0) end
  for _, ext in ipairs { ".png", ".svg" } do
    ok, err = rp.gnuplot(body, { out = out .. ext, size = { W, H }, font_size = 9 })
    if not ok then error(err, 0) end
  end
  io.write(("attention_map: %d layer%s x %d head%s, %d tokens (weights %.3g .. %.3g): %s\n"):format(
    nl, nl == 1 and "" or "s", nh, nh == 1 and "" or "s", T, lo, hi, text:gsub("\n", "\\n")))
  if reading then io.write("attention_map: ", reading, "\n") end
  io.write(("attention_map: wrote %s.png, %s.svg (%s.gp, %s.dat)\n"):format(out, out, out, out))
end)

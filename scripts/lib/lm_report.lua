-- The language-modelling tables and curves of a comparison of the lm task (compare.lua with
-- --task lm; docs/language_model.md), from its run files: what pairs_report.lua --lm prints
-- beside its tables, and what compare.lua's summary and report page show.
--
--   lm_report.valid_curve(csv_path) -> { {step =, tokens =, loss =}, ... } | nil[, message]: the
--     validation curve of a run, the rows of its loss-curve CSV (tables.curve_csv) with a
--     number in the column valid_loss (the experiment key valid_every writes it; empty on the
--     other rows); nil without the column or any value in it, nil and a message when the file
--     cannot be read
--   lm_report.curve_groups(groups, which) -> plot.loss_curves' groups: which "train" (each run's
--     curve: the training loss) or "valid" (each run's valid_curve, set by the caller from
--     valid_curve); nil when no run has a point of that curve
--   lm_report.plot(groups, prefix, which, opts) -> files | nil, message: plot.loss_curves of
--     curve_groups (each run thin, the mean over the runs thick and dashed), against tokens;
--     opts.title
--   lm_report.splits_markdown(groups) -> text | nil: each method's mean over its runs of the
--     validation and test loss, perplexity and bits per byte (res.lm, rp.eval.lm); nil when no
--     run has res.lm
--   lm_report.lengths_markdown(groups) -> text | nil: the mean loss per method x context
--     extension (rows) x evaluation length (columns), the training length first (res.by_length;
--     at the training length, where by_length has no entry, the validation loss of res.lm: the
--     same model, every extension at factor 1 changes nothing); nil without by_length
--   lm_report.POSITION_BINS: the default number of bins of the by-position table (8)
--   lm_report.positions_markdown(groups, bins) -> text | nil: the mean loss per method over
--     `bins` equal bins of the window's positions (res.lm.by_position, the validation split;
--     each bin's positions averaged, then the runs); nil without by_position
--
-- groups: compare.lua's { {label =, runs = { {seed =, res = <result>[, valid_curve =]}, ...}},
-- ... }. Pure Lua but for the plots (gnuplot through lib.plot).
local tables = require "lib.tables"
local stats = require "lib.stats"
local plot = require "lib.plot"
local lengths = require "lib.lengths"
local fileio = require "lib.fileio"

local lm_report = { POSITION_BINS = 8 }

local mean = stats.mean -- (nil for an empty list)

local function num(v, f) return v and tables.num(v, f or "%.4f") or "-" end

function lm_report.valid_curve(csv_path)
  local text, err = fileio.read(csv_path)
  if not text then return nil, err end
  local lines = {}
  for l in text:gmatch("[^\r\n]+") do lines[#lines + 1] = l end
  local cols = {}
  local i = 0
  for name in ((lines[1] or "") .. ","):gmatch("([^,]*),") do
    i = i + 1
    cols[name] = i
  end
  if not (cols.valid_loss and cols.step and cols.tokens) then return nil end
  local out = {}
  for k = 2, #lines do
    local cells, j = {}, 0
    for cell in (lines[k] .. ","):gmatch("([^,]*),") do
      j = j + 1
      cells[j] = cell
    end
    local v = tonumber(cells[cols.valid_loss])
    if v then
      out[#out + 1] = { step = tonumber(cells[cols.step]), tokens = tonumber(cells[cols.tokens]),
        loss = v }
    end
  end
  return #out > 0 and out or nil
end

function lm_report.curve_groups(groups, which)
  local out, any = {}, false
  for gi, g in ipairs(groups) do
    local pg = { label = g.label, results = {} }
    for _, r in ipairs(g.runs) do
      local curve
      if which == "valid" then curve = r.valid_curve else curve = r.res.curve end
      if curve and #curve > 0 then
        any = true
        pg.results[#pg.results + 1] = { curve = curve, config = r.res.config }
      end
    end
    out[gi] = pg
  end
  return any and out or nil
end

function lm_report.plot(groups, prefix, which, opts)
  local pg = lm_report.curve_groups(groups, which)
  if not pg then return nil, ("no %s curves to plot"):format(which == "valid" and "validation"
    or "training") end
  return plot.loss_curves(pg, prefix, { title = opts and opts.title, x = "tokens",
    ylabel = which == "valid" and "validation loss (nats per token)"
      or "training loss (nats per token)" })
end

function lm_report.splits_markdown(groups)
  local rows, any = {}, false
  for _, g in ipairs(groups) do
    local cols = {}
    for _, split in ipairs { "valid", "test" } do
      for _, key in ipairs { "loss", "perplexity", "bits_per_byte" } do
        local list = {}
        for _, r in ipairs(g.runs) do
          local lm = r.res.lm
          if lm and lm[split] and type(lm[split][key]) == "number" then
            list[#list + 1] = lm[split][key]
            any = true
          end
        end
        cols[#cols + 1] = num(mean(list), key == "perplexity" and "%.2f" or "%.4f")
      end
    end
    rows[#rows + 1] = { g.label, table.unpack(cols) }
  end
  if not any then return nil end
  return "Language modelling, the mean over each method's runs (rp.eval.lm: every token "
    .. "of a split scored once; bits per byte = nats / ln 2 / the split's UTF-8 bytes):\n\n"
    .. tables.markdown({ "method", "valid loss", "valid perplexity", "valid bits/byte",
      "test loss", "test perplexity", "test bits/byte" }, rows)
end

function lm_report.lengths_markdown(groups)
  local s = lengths.summarise(groups, "loss")
  if not s then return nil end
  -- the training length: the runs' seq_len (the first run's; a comparison has one)
  local T
  for _, g in ipairs(groups) do
    for _, r in ipairs(g.runs) do T = T or (r.res.config and r.res.config.seq_len) end
  end
  local at, Ls, seenL, keys, seenK = {}, {}, {}, {}, {}
  for _, row in ipairs(s.rows) do
    local k = row.method .. "\0" .. row.scaling
    if not seenK[k] then
      seenK[k] = true
      keys[#keys + 1] = { method = row.method, scaling = row.scaling, key = k }
    end
    if not seenL[row.length] and row.length ~= T then
      seenL[row.length] = true
      Ls[#Ls + 1] = row.length
    end
    at[k .. "\0" .. row.length] = row
  end
  table.sort(Ls)
  -- at the training length without a by_length entry: each method's mean validation loss
  local valid, from_valid = {}, false
  for _, g in ipairs(groups) do
    local list = {}
    for _, r in ipairs(g.runs) do
      local v = r.res.lm and r.res.lm.valid and r.res.lm.valid.loss
      if type(v) == "number" then list[#list + 1] = v end
    end
    valid[g.label] = mean(list)
  end
  local headers = { "method", "scaling", ("%s (training)"):format(tables.num(T)) }
  for _, L in ipairs(Ls) do headers[#headers + 1] = tables.num(L) end
  local body = {}
  for _, k in ipairs(keys) do
    local row = at[k.key .. "\0" .. tostring(T)]
    local first = row and row.mean
    if not row then
      first = valid[k.method]
      from_valid = from_valid or first ~= nil
    end
    local cells = { k.method, k.scaling, num(first) }
    for _, L in ipairs(Ls) do
      local e = at[k.key .. "\0" .. L]
      cells[#cells + 1] = e and num(e.mean) or "-"
    end
    body[#body + 1] = cells
  end
  return ("Loss by evaluation length (nats per token, the mean over each method's runs; "
    .. "rp.eval.lengths: random windows of the validation split at each length, with each "
    .. "context extension%s):\n\n"):format(from_valid and ("; at the training length %s the "
    .. "validation loss over the whole split, the same for every extension (each is at factor 1 "
    .. "there)"):format(tables.num(T)) or "")
    .. tables.markdown(headers, body)
end

function lm_report.positions_markdown(groups, bins)
  local T
  for _, g in ipairs(groups) do
    for _, r in ipairs(g.runs) do
      local bp = r.res.lm and r.res.lm.by_position
      if type(bp) == "table" and #bp > 0 then T = math.max(T or 0, #bp) end
    end
  end
  if not T then return nil end
  bins = math.max(1, math.min(bins, T))
  local edges = {}
  for k = 0, bins do edges[k] = (k * T) // bins end
  local headers = { "method", "runs" }
  for k = 1, bins do
    headers[#headers + 1] = edges[k - 1] + 1 == edges[k] and tables.num(edges[k])
      or ("%d-%d"):format(edges[k - 1] + 1, edges[k])
  end
  local body = {}
  for _, g in ipairs(groups) do
    local per_bin, runs = {}, 0
    for k = 1, bins do per_bin[k] = {} end
    for _, r in ipairs(g.runs) do
      local bp = r.res.lm and r.res.lm.by_position
      if type(bp) == "table" and #bp > 0 then
        runs = runs + 1
        for k = 1, bins do
          local vals = {}
          for j = edges[k - 1] + 1, edges[k] do
            if type(bp[j]) == "number" then vals[#vals + 1] = bp[j] end
          end
          local m = mean(vals)
          if m then per_bin[k][#per_bin[k] + 1] = m end
        end
      end
    end
    local cells = { g.label, tostring(runs) }
    for k = 1, bins do cells[#cells + 1] = num(mean(per_bin[k])) end
    body[#body + 1] = cells
  end
  return ("Loss by position in the window (nats per token, the validation split; position 1 "
    .. "predicts from one token of context, position %d from %d): each bin's positions "
    .. "averaged, then the runs:\n\n"):format(T, T)
    .. tables.markdown(headers, body)
end

return lm_report

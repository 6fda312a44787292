-- The convergence check of docs/results.md "Language modelling at 20 tokens per parameter"
-- ("The plan"), run by run: the last 10% of training lowers the validation loss by less than half
-- the margin. For every run of every folder named (<dir>/runs/<run>.csv, the curve with its
-- valid_loss column, written with valid_every = steps / 10), the validation loss at 90% of the
-- steps and at the end (the same 4 batches of 16 windows of the validation split at both points,
-- eval_seed), their difference, and the verdict; a run without both points is "no curve".
--
--   build-portable/roper results/lm2_convergence.lua [--margin 0.01] results/lm2-s [...]
local margin, dirs = 0.01, {}
local i = 1
while arg[i] do
  if arg[i] == "--margin" then
    margin = assert(tonumber(arg[i + 1]), "--margin needs a number")
    i = i + 2
  else
    dirs[#dirs + 1] = arg[i]
    i = i + 1
  end
end
assert(#dirs > 0, "usage: lm2_convergence.lua [--margin m] <folder> ...")

-- The (step, valid_loss) points of a run's CSV, in step order.
local function valid_points(path)
  local f = io.open(path)
  if not f then return nil end
  local header, pts, col_step, col_valid = f:read("l"), {}, nil, nil
  local k = 0
  for name in (header .. ","):gmatch("([^,]*),") do
    k = k + 1
    if name == "step" then col_step = k end
    if name == "valid_loss" then col_valid = k end
  end
  for line in f:lines() do
    local cells, j = {}, 0
    for c in (line .. ","):gmatch("([^,]*),") do
      j = j + 1
      cells[j] = c
    end
    local v = col_valid and tonumber(cells[col_valid])
    if v then pts[#pts + 1] = { step = tonumber(cells[col_step]), loss = v } end
  end
  f:close()
  return pts
end

local half = margin / 2
print(("| run | steps | valid loss at 90%% | at 100%% | last 10%% lowered it by | "
  .. "converged (< %g) |"):format(half))
print("|---|---|---|---|---|---|")
local total, bad = 0, 0
for _, dir in ipairs(dirs) do
  local names = {}
  local p = io.popen(("ls %s/runs/*.csv 2>/dev/null"):format(dir))
  for line in p:lines() do
    if not line:match("%.lengths%.csv$") then names[#names + 1] = line end
  end
  p:close()
  table.sort(names)
  for _, path in ipairs(names) do
    local run = dir:match("([^/]+)/?$") .. "/" .. path:match("([^/]+)%.csv$")
    local pts = valid_points(path)
    total = total + 1
    local n = pts and #pts or 0
    if n < 2 then
      print(("| %s | | | | | no curve |"):format(run))
      bad = bad + 1
    else
      local last, prev = pts[n], nil
      for _, q in ipairs(pts) do
        if q.step * 10 == last.step * 9 then prev = q end
      end
      if not prev then
        print(("| %s | %d | | %.4f | | no point at 90%% |"):format(run, last.step, last.loss))
        bad = bad + 1
        goto next
      end
      local drop = prev.loss - last.loss
      local ok = drop < half
      if not ok then bad = bad + 1 end
      print(("| %s | %d | %.4f (step %d) | %.4f | %+.4f | %s |"):format(run, last.step,
        prev.loss, prev.step, last.loss, drop, ok and "yes" or "**no**"))
    end
    ::next::
  end
end
print(("\n%d runs, %d not converged by this rule (margin %g: half %g)"):format(total, bad,
  margin, half))

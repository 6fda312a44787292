--[[
pe_identity_2d.lua: RoPE's and RoPER's relative property with 2-D positions, shown with numbers.

    build/roper scripts/pe_identity_2d.lua [--seed N] [--d N] [--rows N] [--cols N]

One query sits at the cell P = (rows / 2, cols / 3) of a grid of rows x cols cells (12 x 12 by
default) and attends over keys and values at every cell of the grid, with random contents. The
attention is computed here from rotated tensors (rp.attention takes 1-D positions only): the
scores s_j = <R(P) q, R(Q_j) k_j> / sqrt(d), the weights a = softmax(s) and the output
sum_j a_j v_j, where RoPER rotates each value by its key's cell, v_j -> R(Q_j) v_j, and the
output back by the query's cell (rp.rope.rotate with sign -1). The experiment shifts every cell
by a vector, (+5, +9) and (+300, -2) (negative columns: vector positions may have either sign),
and prints how far the attention weights (w) and the output (o) move. A scheme whose numbers
depend on the offsets Q_j - P alone moves by float rounding only; one that sees where the cells
are moves by far more.

What each row expects (the score's and the output's word), derived by hand. Write L_i(P) for
the angle of rotation pair i at the cell P. Pair by pair,
(R(L_i(P)) q) . (R(L_i(Q)) k) = q . R(L_i(Q) - L_i(P)) k, so the score is relative when
L_i(Q) - L_i(P) = L_i(Q - P), that is when every L_i is linear in the position:

  axial      L_i(P) = p_a theta_j: pair i belongs to one axis a's block (Su's 2-D RoPE, EVA-02);
  sections   L_i(P) = p_a theta_i: the 1-D frequencies, pair i turned by the axis whose section
             holds it (Qwen2-VL's M-RoPE; here the first half of the pairs turn by the row);
  mixed      L_i(P) = <W_i, P> = r W[1][i] + c W[2][i] (RoPE-Mixed), for any matrix W: here one
             head's matrix drawn by rp.rope.mixed as RoPE-Mixed's init_random_2d_freqs draws it
             (naver-ai/rope-vit: magnitudes 10^(-4m/d), rope-vit's base 10, along a random
             direction phi and along phi + pi/2).

All three are linear, in both pairings (the pairing only says which two features form pair i),
so RoPE's and RoPER's scores are relative. The outputs:

  RoPE       sum_j a_j v_j: the weights are relative and the values are not rotated (each value
             travels with its cell), so the output is relative too;
  RoPER      R(-L(P)) sum_j a_j R(L(Q_j)) v_j = sum_j a_j R(L(Q_j - P)) v_j: relative, each value
             turned by its offset vector.

Not a counterexample: 1-D rope on the flattened index f = r cols + c. Its angle f theta_i is
linear in (r, c) (mixed with W = (cols theta, theta)), so every vector shift keeps its scores and
outputs. What it loses is the offset itself: it sees dr cols + dc only, so the offsets (1, -1)
and (0, cols - 1) look the same to it, while the axial scheme tells them apart (the last two
checks).

Counterexamples, expected to be "absolute":

  an angle table of the flattened index (a learned-style per-position table: random angles
             A[f][i], rp.rope.rotate's `angles`) is a real absolute dependence: the score turns
             by A[f(Q)] - A[f(P)], which a table that is not linear in f does not make a function
             of Q - P. Its weights move, so both outputs do too;
  RoPER with the output not rotated back: sum_j a_j R(L(Q_j)) v_j = R(L(P)) (the relative
             output), which turns with the query's cell: a negative control for the output;
  RoPER with the output rotated back by the query's cell read the wrong way round, (c, r): the
             output is R(L(P) - L(c, r)) (the relative output), which moves under any shift
             (dr, dc) with dr ~= dc (a diagonal shift would hide it).

Every row starts with PASS or FAIL (the classification against what the row expects); the script
ends with "pe identity 2d: N passed, N failed" and exits with status 1 if any check failed.
]]

package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local rp = require "roper"

local cli = require "lib.cli"
local checks = require "lib.checks"

local opts
-- --help opens with these (each runs as written from the repository's folder; tests/lua/
-- help_examples_spec.lua runs them)
local EXAMPLES = {
  { "which 2-D rotary schemes depend on the offset vector alone",
    "build/roper scripts/pe_identity_2d.lua" },
  { "a 6 x 8 grid, head size 32",
    "build/roper scripts/pe_identity_2d.lua --rows 6 --cols 8 --d 32" },
  { "other random contents",
    "build/roper scripts/pe_identity_2d.lua --seed 3" },
}

cli.main("pe_identity_2d.lua", function()
  local parser = cli.parser("build/roper scripts/pe_identity_2d.lua",
    "Shows which 2-D rotary schemes keep scores and outputs functions of the offset vector.", EXAMPLES)
  parser:option("--seed", "Seed of the random contents.", "1"):convert(math.tointeger)
    :argname("<n>")
  parser:option("--d", "Head size: features per head (a multiple of 4, 4..256).", "16")
    :convert(math.tointeger):argname("<n>")
  parser:option("--rows", "Rows of the grid (2..64).", "12"):convert(math.tointeger)
    :argname("<n>")
  parser:option("--cols", "Columns of the grid (2..64).", "12"):convert(math.tointeger)
    :argname("<n>")
  opts = parser:parse()
  if opts.d < 4 or opts.d > 256 or opts.d % 4 ~= 0 then
    cli.usage("--d must be a multiple of 4 in 4..256, got " .. opts.d)
  end
  -- (rows x cols keys and queries: at most 4,096, an attention of 16 M weights)
  for _, k in ipairs { "rows", "cols" } do
    if opts[k] < 2 or opts[k] > 64 then
      cli.usage(("--%s must be in 2..64, got %d"):format(k, opts[k]))
    end
  end
end)

local D, ROWS, COLS = opts.d, opts.rows, opts.cols
local HALF = D // 2
local P = { ROWS // 2, COLS // 3 }               -- the query's cell (row, column), 0-based
local SHIFTS = { { 5, 9 }, { 300, -2 } }
local g = rp.rng(opts.seed)

-- The keys' cells, row by row.
local CELLS = {}
for r = 0, ROWS - 1 do
  for c = 0, COLS - 1 do CELLS[#CELLS + 1] = { r, c } end
end
local N = #CELLS

-- Contents: q [1 x D], k and v [N x D].
local q0 = g:randn { 1, D }
local k0 = g:randn { N, D }
local v0 = g:randn { N, D }

-- RoPE-Mixed's frequencies of one head (rp.rope.mixed: init_random_2d_freqs of naver-ai/rope-vit
-- with its base 10), the direction phi drawn from the script's generator.
local MIX = rp.rope.mixed(D, { base = 10, rng = g })

-- The flattened index of a cell, and a learned-style angle table over it: random angles for
-- every index the cells reach (the shifts keep it >= 0; a table starts at position 0).
local function flat(cell) return cell[1] * COLS + cell[2] end
local FLAT_MAX = 0
for _, s in ipairs(SHIFTS) do
  FLAT_MAX = math.max(FLAT_MAX, flat { ROWS - 1 + s[1], COLS - 1 + s[2] })
end
local TABLE = g:randn { FLAT_MAX + 1, HALF } * 2

-- The cells shifted by s.
local function shifted(cells, s)
  local out = {}
  for i, cell in ipairs(cells) do out[i] = { cell[1] + s[1], cell[2] + s[2] } end
  return out
end

-- x [n x D] rotated by scheme's rotation at the n cells (sign -1: backwards).
local function turn(scheme, x, cells, sign)
  local o = { sign = sign, positions = cells }
  if scheme.flat then
    o.positions = {}
    for i, cell in ipairs(cells) do o.positions[i] = flat(cell) end
  end
  for key, val in pairs(scheme.opts) do o[key] = val end
  return rp.rope.rotate(x, o)
end

-- The attention of the query at the cell p over the keys at cells: the weights [N] and the
-- output [D].
local function attend(scheme, p, cells)
  local q = turn(scheme, q0, { p })
  local k = turn(scheme, k0, cells)
  local v = scheme.v and turn(scheme, v0, cells) or v0
  local a = k:matmul(q:view(D)):div(math.sqrt(D)):softmax(1)
  local out = a:matmul(v):view(1, D)
  if scheme.o then out = turn(scheme, out, { scheme.o(p) }, -1) end
  return a, out:view(D)
end

-- How far the weights (w) and the output (o) move under each shift.
local function measure(scheme)
  local w0, o0 = attend(scheme, P, CELLS)
  local r = {}
  for i, s in ipairs(SHIFTS) do
    local w, o = attend(scheme, shifted({ P }, s)[1], shifted(CELLS, s))
    r[i] = { w = rp.maxdiff(w0, w), o = rp.maxdiff(o0, o) }   -- NaN when any entry is NaN
  end
  return r
end

-- Invariance holds to float32 rounding (the cos/sin tables are rounded from double angles);
-- a dependence on the cells shows far above.
local SAME, DIFFERENT = 1e-5, 1e-3
local ABS, REL = "absolute", "relative"

-- relative when every shift leaves the part within SAME, absolute when every shift moves it
-- beyond DIFFERENT (a NaN is neither)
local function classify(r, part)
  local same, diff = true, true
  for _, x in ipairs(r) do
    same = same and x[part] <= SAME
    diff = diff and x[part] > DIFFERENT
  end
  return same and REL or diff and ABS or "unclear"
end

---------------------------------------------------------------------------------------------------
-- The schemes and what their formulas say (the header's argument).

local function back(p) return p end                   -- RoPER: the output back by the query's cell
local function swapped(p) return { p[2], p[1] } end   -- the query's cell read as (c, r)

local schemes = {}
local function add(name, o, score, output, extra)
  local s = { name = name, opts = o, score = score, output = output }
  for key, val in pairs(extra or {}) do s[key] = val end
  schemes[#schemes + 1] = s
  return s
end
local AXES = {
  { "axial", { axes = "axial" } },
  { "sections", { axes = "sections", sections = { HALF // 2, HALF - HALF // 2 } } },
  { "mixed", { axes = "mixed", mix = MIX } },
}
for _, ax in ipairs(AXES) do
  for _, pairing in ipairs { "half", "interleaved" } do
    local o = { pairing = pairing }
    for key, val in pairs(ax[2]) do o[key] = val end
    add(("rope %s %s"):format(ax[1], pairing), o, REL, REL)
    add(("roper %s %s"):format(ax[1], pairing), o, REL, REL, { v = true, o = back })
  end
end
local flat_rope = add("rope 1-D, flat index", {}, REL, REL, { flat = true })
add("rope flat angle table", { angles = TABLE }, ABS, ABS, { flat = true })
add("roper flat angle table", { angles = TABLE }, ABS, ABS, { flat = true, v = true, o = back })
add("roper axial, o not back", {}, REL, ABS, { v = true })
add("roper axial, o back (c, r)", {}, REL, ABS, { v = true, o = swapped })

---------------------------------------------------------------------------------------------------

local function label(s) return ("(%d,%d)"):format(s[1], s[2]) end
print(("One query at cell (%d, %d) over the %d x %d grid's cells (d = %d, seed %d). The"):format(
  P[1], P[2], ROWS, COLS, D, opts.seed))
print("columns: how far the attention weights (w) and the output (o) move when every cell is")
print(("shifted by %s and by %s (relative: <= %g, absolute: > %g), then what"):format(
  label(SHIFTS[1]), label(SHIFTS[2]), SAME, DIFFERENT))
print("the score and the output depend on: the offsets Q - P alone (relative) or the cells.")
print()
local report = checks.new()
local width = 0
for _, s in ipairs(schemes) do width = math.max(width, #s.name) end
local fmt = "%-" .. width .. "s %-10s %-10s %-10s %-10s %-9s %s"
local h1, h2 = label(SHIFTS[1]), label(SHIFTS[2])
report:line(fmt:format("scheme", "w " .. h1, "o " .. h1, "w " .. h2, "o " .. h2, "score",
  "output"))
for _, s in ipairs(schemes) do
  local r = measure(s)
  local cs, co = classify(r, "w"), classify(r, "o")
  local ok = cs == s.score and co == s.output
  local function e(x) return ("%.1e"):format(x) end
  report:verdict(ok, fmt:format(s.name, e(r[1].w), e(r[1].o), e(r[2].w), e(r[2].o), cs, co),
    not ok and ("expected %s / %s"):format(s.score, s.output) or nil)
end

-- The flattened index sees dr * cols + dc only: a key at the offset (1, -1) and one at
-- (0, cols - 1), the same contents, get the same score from it; the axial scheme tells them
-- apart.
print()
print(("What the flattened index loses: one key at the offsets (1, -1) and (0, %d) from the")
  :format(COLS - 1))
print("query, the same contents: the difference of its two scores")
local function score(scheme, offset)
  local q = turn(scheme, q0, { P })
  local k = turn(scheme, k0:narrow(1, 1, 1), { { P[1] + offset[1], P[2] + offset[2] } })
  return q:view(D):dot(k:view(D)) / math.sqrt(D)
end
local function alias(scheme)
  return math.abs(score(scheme, { 1, -1 }) - score(scheme, { 0, COLS - 1 }))
end
report:close(flat_rope.name .. ": the two offsets look the same", alias(flat_rope), SAME)
report:apart(schemes[1].name .. ": they differ", alias(schemes[1]), DIFFERENT)
os.exit(report:summary("pe identity 2d"))

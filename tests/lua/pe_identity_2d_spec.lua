-- scripts/pe_identity_2d.lua (issue 35, the relative property with 2-D positions): its rows,
-- its summary and exit status, its options; and, independently of the script, a 2-D axial RoPE
-- score computed in float64 loops from the formula (Su's 2-D RoPE: pair j of axis a's block
-- turns by p_a theta_j) before and after a vector shift, against rp.rope.rotate's.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"
local rp = require "roper"

local BIN = h.BIN
local SCRIPT = h.sh_quote(BIN) .. " scripts/pe_identity_2d.lua"

-- The table's rows by scheme name: { verdict, the four measurements, score, output }.
local function rows(out)
  local t = {}
  for line in out:gmatch("[^\n]+") do
    local verdict, name, rest = line:match("^  (%u%u%u%u)  (%S.-) +(%d%.%de[-+]%d%d .*)$")
    if verdict then
      local words = {}
      for w in rest:gmatch("%S+") do words[#words + 1] = w end
      t[name] = { verdict = verdict, w1 = tonumber(words[1]), o1 = tonumber(words[2]),
        w2 = tonumber(words[3]), o2 = tonumber(words[4]), score = words[5], output = words[6] }
    end
  end
  return t
end

describe("scripts/pe_identity_2d.lua", function()
  local out, err, code = h.run(SCRIPT)

  it("passes every check, prints the summary last and exits 0", function()
    assert.are.equal(0, code, out .. err)
    local n_pass = out:match("\npe identity 2d: (%d+) passed, 0 failed\n$")
    assert.truthy(n_pass, out)
    local verdicts = 0
    for _, line in ipairs(h.lines(out)) do
      assert.is_true(#line <= 100, ("%d columns: %s"):format(#line, line))
      if line:find("%f[%w]PASS%f[%W]") or line:find("%f[%w]FAIL%f[%W]") then
        assert.truthy(line:find("^  PASS  %S"), line)
        verdicts = verdicts + 1
      end
    end
    assert.are.equal(tonumber(n_pass), verdicts)
    assert.are.equal(19, verdicts, out)
  end)

  it("finds RoPE and RoPER relative under every map and pairing, within float rounding", function()
    local t = rows(out)
    local n = 0
    for _, pe in ipairs { "rope", "roper" } do
      for _, axes in ipairs { "axial", "sections", "mixed" } do
        for _, pairing in ipairs { "half", "interleaved" } do
          local r = t[("%s %s %s"):format(pe, axes, pairing)]
          assert.truthy(r, pe .. " " .. axes .. " " .. pairing .. ":\n" .. out)
          assert.are.same({ "PASS", "relative", "relative" }, { r.verdict, r.score, r.output })
          for _, x in ipairs { r.w1, r.o1, r.w2, r.o2 } do
            assert.is_true(x <= 1e-6, tostring(x))
          end
          n = n + 1
        end
      end
    end
    assert.are.equal(12, n)
    local flat = t["rope 1-D, flat index"]
    assert.are.same({ "PASS", "relative", "relative" }, { flat.verdict, flat.score, flat.output })
  end)

  it("finds the counterexamples absolute, each by a clear margin", function()
    local t = rows(out)
    local expect = {
      ["rope flat angle table"] = { "absolute", "absolute" },
      ["roper flat angle table"] = { "absolute", "absolute" },
      ["roper axial, o not back"] = { "relative", "absolute" },
      ["roper axial, o back (c, r)"] = { "relative", "absolute" },
    }
    for name, e in pairs(expect) do
      local r = t[name]
      assert.truthy(r, name .. ":\n" .. out)
      assert.are.same({ "PASS", e[1], e[2] }, { r.verdict, r.score, r.output }, name)
      assert.is_true(math.min(r.o1, r.o2) > 1e-2, name)
    end
    assert.truthy(out:find("\n  PASS  rope 1-D, flat index: the two offsets look the same\n"
      .. "        max error 0.00e+00, tolerance 1.00e-05\n", 1, true), out)
    local diff = out:match("\n  PASS  rope axial half: they differ\n        difference (%S+),")
    assert.is_true(tonumber(diff) > 1e-2, out)
  end)

  it("takes --seed, --d, --rows and --cols", function()
    local o2, e2, c2 = h.run(SCRIPT .. " --seed 7 --d 8 --rows 5 --cols 9")
    assert.are.equal(0, c2, o2 .. e2)
    assert.truthy(o2:find("One query at cell (2, 3) over the 5 x 9 grid's cells (d = 8, seed 7).",
      1, true), o2)
    assert.truthy(o2:find("offsets (1, -1) and (0, 8)", 1, true), o2)
    assert.truthy(o2:find("\npe identity 2d: 19 passed, 0 failed\n$"), o2)
    -- other contents, other numbers
    local name = "rope flat angle table"
    assert.are_not.equal(rows(o2)[name].o1, rows(out)[name].o1)
  end)

  it("rejects a bad --d or grid with exit status 2", function()
    for _, c in ipairs {
      { "--d 6", "pe_identity_2d.lua: --d must be a multiple of 4 in 4..256, got 6\n" },
      { "--d 0", "pe_identity_2d.lua: --d must be a multiple of 4 in 4..256, got 0\n" },
      { "--d 400000000",
        "pe_identity_2d.lua: --d must be a multiple of 4 in 4..256, got 400000000\n" },
      { "--rows 1", "pe_identity_2d.lua: --rows must be in 2..64, got 1\n" },
      { "--cols 1", "pe_identity_2d.lua: --cols must be in 2..64, got 1\n" },
      { "--rows 100000", "pe_identity_2d.lua: --rows must be in 2..64, got 100000\n" },
    } do
      local o, e, st = h.run(SCRIPT .. " " .. c[1])
      assert.are.equal(2, st, c[1])
      assert.are.equal("", o, c[1])
      assert.are.equal(c[2], e, c[1])
    end
  end)
end)

describe("2-D axial RoPE's score from the formula, in float64", function()
  local D, HALF = 16, 8

  -- The angle of pair i (1-based) at the cell (r, c): the first HALF/2 pairs are the 1-D RoPE of
  -- width HALF of the row, the others of the column; sign -1 turns the other way.
  local function angle(i, cell, sign)
    local n = HALF // 2
    local axis, j = (i - 1) // n + 1, (i - 1) % n
    return (sign or 1) * cell[axis] * 10000 ^ (-2 * j / (2 * n))
  end

  -- x (a list of D) rotated pair by pair at the cell.
  local function rotate(x, cell, pairing, sign)
    local y = { table.unpack(x) }
    for i = 1, HALF do
      local a, b = h.naive.pair(i, D, pairing)
      local c, s = math.cos(angle(i, cell, sign)), math.sin(angle(i, cell, sign))
      y[a], y[b] = c * x[a] - s * x[b], s * x[a] + c * x[b]
    end
    return y
  end

  -- The score <R(P) q, R(Q) k> / sqrt(D): the reference's (float64, optionally with the key
  -- turned the wrong way) and rp.rope.rotate's (float32).
  local function ref_score(q, k, P, Q, pairing, sign)
    return h.naive.dot(rotate(q, P, pairing), rotate(k, Q, pairing, sign)) / math.sqrt(D)
  end
  local function rp_score(q, k, P, Q, pairing)
    local qr = rp.rope.rotate(rp.tensor(q), { positions = { P }, pairing = pairing })
    local kr = rp.rope.rotate(rp.tensor(k), { positions = { Q }, pairing = pairing })
    return qr:dot(kr) / math.sqrt(D)
  end

  local g = rp.rng(5)
  local q, k = g:randn { D }:totable(), g:randn { D }:totable()
  local P, Q = { 6, 4 }, { 2, 9 }
  local SHIFT = { 300, -2 }
  local P2, Q2 = { P[1] + SHIFT[1], P[2] + SHIFT[2] }, { Q[1] + SHIFT[1], Q[2] + SHIFT[2] }

  for _, pairing in ipairs { "half", "interleaved" } do
    it(pairing .. " pairing: the shift keeps the score, and rp.rope.rotate gives it", function()
      local before, after = ref_score(q, k, P, Q, pairing), ref_score(q, k, P2, Q2, pairing)
      assert.is_true(math.abs(before) > 1e-2, tostring(before))
      assert.is_true(math.abs(after - before) < 1e-12, ("%.17g %.17g"):format(before, after))
      assert.is_true(math.abs(rp_score(q, k, P, Q, pairing) - before) < 1e-5)
      assert.is_true(math.abs(rp_score(q, k, P2, Q2, pairing) - before) < 1e-5)
    end)

    it(pairing .. " pairing: a rotation the wrong way fails both checks", function()
      -- the key turned by -L(Q): the score turns by L(P) + L(Q), which the shift moves, and it
      -- is not rp.rope.rotate's score: a kernel with that sign error fails the test above
      local before, after = ref_score(q, k, P, Q, pairing, -1), ref_score(q, k, P2, Q2, pairing, -1)
      assert.is_true(math.abs(after - before) > 1e-2, ("%.3g %.3g"):format(before, after))
      assert.is_true(math.abs(rp_score(q, k, P, Q, pairing) - before) > 1e-2)
    end)
  end

  it("the axes read the wrong way round, (c, r), give another score", function()
    local swapped = ref_score(q, k, { P[2], P[1] }, { Q[2], Q[1] }, "half")
    assert.is_true(math.abs(rp_score(q, k, P, Q, "half") - swapped) > 1e-2)
  end)
end)

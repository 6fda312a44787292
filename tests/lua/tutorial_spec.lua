-- docs/tutorial.md runs (issue 31): its ```lua blocks, in order, piped into one roper process as
-- a student types them into the REPL, with ROPER_PLOT_DIR set to a temporary folder (the
-- tutorial explains it), so its pictures become PNG files there. After some blocks the spec adds
-- lines of its own that check what the text says about the numbers just printed. Errors name the
-- line of the piped input (stdin:N), which tells the block or check that failed.

local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"

local BIN = h.BIN
local DOC = "docs/tutorial.md"

-- The ```lua blocks of the tutorial: { code =, line = the line of the fence in DOC }; and the
-- other fences (```sh), which are shown, not run.
local function blocks(text)
  local list, others, n, cur = {}, {}, 0, nil
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if cur then
      if line == "```" then
        list[#list + 1] = cur
        cur = nil
      else
        cur.code[#cur.code + 1] = line
      end
    elseif line == "```lua" then
      cur = { code = {}, line = n }
    elseif line:match("^```%S") then
      others[#others + 1] = line
    end
  end
  return list, others
end

-- What the text says, checked right after the block that contains `after`: each check is one
-- line of Lua that raises when the claim does not hold.
local CHECKS = {
  { after = "r = rp.rope.rotate(x, {positions = 1})", name = "pair (x1, x3) turned by 1 radian",
    code = "assert(math.abs(r[1] - math.cos(1)) < 1e-6 and math.abs(r[3] - math.sin(1)) < 1e-6 and r[2] == 0 and r[4] == 0)" },
  { after = "back = rp.rope.rotate", name = "turning back gives x again",
    code = "assert(rp.maxdiff(back, x) < 1e-6 and math.abs(r:norm() - 1) < 1e-6)" },
  { after = "S = Q:matmul(K:t())", name = "every diagonal of the RoPE scores holds one value",
    code = "for j = 1 - T, T - 1 do local dg = S:diag(j) assert(dg:max() - dg:min() < 1e-4 * S:abs():max(), j) end" },
  { after = "A = (rp.zeros{T, d} + q + P)", name = "the sinusoidal scores are not constant along a diagonal",
    code = "assert(A:diag(2):max() - A:diag(2):min() > 1)" },
  { after = "decay[r + 1] = total / #th", name = "the bound: 32.5 at 0, about 10 at 100, about 6 at 500",
    code = "assert(math.abs(decay[1] - 32.5) < 1e-9 and math.abs(decay[101] - 10) < 0.5 and math.abs(decay[501] - 6) < 0.5)" },
  { after = "function moved(opts)", name = "rope and roper do not move under the shift, rotate v does",
    code = "assert(moved{pe = 'rope'} < 1e-5 and moved{pe = 'roper'} < 1e-5 and moved{pe = 'rope', rotate = 'v'} > 0.1)" },
  { after = "q0 = rp.zeros", name = "with equal weights a swap moves roper's output only",
    code = "assert(rp.maxdiff(rp.attention(q0, k, v, {pe = 'rope', causal = false}), rp.attention(q0, k, v2, {pe = 'rope', causal = false})) < 1e-5 and rp.maxdiff(rp.attention(q0, k, v, {pe = 'roper', causal = false}), rp.attention(q0, k, v2, {pe = 'roper', causal = false})) > 0.01)" },
  { after = "printed, corrected = 0, 0", name = "the corrected second component is roper's output, the printed one is not",
    code = "local o = out[{1, n, 1, 2}] assert(math.abs(corrected - o) < 1e-5 and math.abs(printed - o) > 0.01)" },
  { after = "after, before", name = "linear attention: rotated after phi the shift moves nothing, before phi it does",
    code = "assert(after < 1e-5 and before > 1e-3 and den:min() > 0)" },
  { after = "m:generate({0, 1}, 6)", name = "the model learns 0 1 2 0 1 2 ...",
    code = "assert(losses[60] < losses[1] / 100 and table.concat(m:generate({0, 1}, 6), ' ') == '2 0 1 2 0 1')" },
  { after = "att = m:attention(2, {x})", name = "the attention map is [1 x 2 x 16 x 16], rows summing to 1",
    code = "assert(table.concat(att:shape(), ' ') == '1 2 16 16' and rp.maxdiff(att:sum(4), rp.ones{1, 2, 16}) < 1e-5)" },
}

local PLOTS = { "plot", "scatter", "heatmap", "hist", "gnuplot" }

describe("docs/tutorial.md", function()
  local text = assert(h.read(DOC))
  local list, others = blocks(text)
  local dir = h.tmpdir()
  local pics = dir .. "/pics"
  os.execute("mkdir " .. h.sh_quote(pics))

  -- the piped input, and what each of its lines is: a line of block k, or check c
  local input, what, pictures = {}, {}, 0
  local placed = {}
  for k, b in ipairs(list) do
    for i, l in ipairs(b.code) do
      input[#input + 1] = l
      what[#input] = { block = k, doc_line = b.line + i }
      for _, name in ipairs(PLOTS) do
        local _, count = l:gsub("rp%." .. name .. "%(", "")
        pictures = pictures + count
      end
    end
    local all = table.concat(b.code, "\n")
    for c, chk in ipairs(CHECKS) do
      if not placed[c] and all:find(chk.after, 1, true) then
        placed[c] = true
        input[#input + 1] = chk.code
        what[#input] = { check = c }
      end
    end
  end
  local infile = dir .. "/input.lua"
  h.write(infile, table.concat(input, "\n") .. "\n")
  local out, err, code = h.run(("env ROPER_PLOT_DIR=%s COLUMNS=80 %s < %s"):format(h.sh_quote(pics),
    h.sh_quote(BIN), h.sh_quote(infile)))

  -- the input lines where an error was reported (stdin:N at the start of a message line)
  local failed = {}
  for n, msg in err:gmatch("stdin:(%d+): ([^\n]*)") do
    local at = tonumber(n)
    if not failed[at] then failed[at] = msg end
  end
  local function errors_of(pred)
    local t = {}
    for at, msg in pairs(failed) do
      if what[at] and pred(what[at]) then t[#t + 1] = ("input line %d: %s"):format(at, msg) end
    end
    return t
  end

  teardown(function() h.remove_tree(dir) end)

  it("has lua blocks to run, and only shell commands besides", function()
    assert.is_true(#list >= 10, #list .. " blocks")
    for _, fence in ipairs(others) do assert.are.equal("```sh", fence) end
  end)

  for k, b in ipairs(list) do
    it(("block %d (%s:%d) runs without an error"):format(k, DOC, b.line), function()
      assert.are.same({}, errors_of(function(w) return w.block == k end), err)
    end)
  end

  for c, chk in ipairs(CHECKS) do
    it("says true: " .. chk.name, function()
      assert.is_true(placed[c] == true, "no block contains: " .. chk.after)
      assert.are.same({}, errors_of(function(w) return w.check == c end), err)
    end)
  end

  it("ends with exit status 0 and nothing on stderr", function()
    assert.are.equal("", err)
    assert.are.equal(0, code)
  end)

  it("draws each of its pictures into ROPER_PLOT_DIR as an 800 x 500 PNG, and prints its path", function()
    assert.is_true(pictures >= 5, pictures .. " pictures")
    local names = {}
    for i = 1, pictures do
      names[i] = ("plot-%d.png"):format(i)
      local png = assert(h.read(pics .. "/" .. names[i]), names[i])
      assert.are.equal("\137PNG\r\n\26\n", png:sub(1, 8))
      local w, ht = (">I4I4"):unpack(png, 17)
      assert.are.same({ 800, 500 }, { w, ht }, names[i])
      assert.truthy(out:find("\n" .. pics .. "/" .. names[i] .. "\n", 1, true), out)
    end
    table.sort(names)
    assert.are.same(names, h.ls(pics))
  end)
end)

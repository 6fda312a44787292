-- results/lm2_convergence.lua, the language-model study's convergence rule: a run converged when
-- its validation curve's point at 90% of the steps minus its last point is below half the margin;
-- a run without two points, or without a point at 90%, is reported as not converged. Checked on
-- made-up curves whose drops sit on both sides of the limit.
local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
-- the script, quoted for the shell
local SCRIPT = h.sh_quote(dir_of .. "../../results/lm2_convergence.lua")
local q = h.sh_quote

-- a CSV with the validation loss at the given {step, loss} points (training rows between them)
local function curve(points)
  local t = { "step,tokens,loss,lr,valid_loss" }
  for _, p in ipairs(points) do
    t[#t + 1] = ("%d,%d,5.0,0.001,"):format(p[1] - 1, (p[1] - 1) * 4096)
    t[#t + 1] = ("%d,%d,5.0,0.001,%s"):format(p[1], p[1] * 4096, p[2])
  end
  return table.concat(t, "\n") .. "\n"
end

describe("results/lm2_convergence.lua", function()
  it("applies the rule at half the margin and reports runs without a curve", function()
    local root = h.tmpdir()
    local runs = root .. "/lm2-x/runs"
    assert(os.execute("mkdir -p " .. q(runs)))
    h.write(runs .. "/a-s1.csv", curve { { 720, 3.0049 }, { 800, 3.0000 } }) -- 0.0049: yes
    h.write(runs .. "/a-s2.csv", curve { { 720, 3.0051 }, { 800, 3.0000 } }) -- 0.0051: no
    h.write(runs .. "/a-s3.csv", curve { { 720, 2.9900 }, { 800, 3.0000 } }) -- rose: yes
    h.write(runs .. "/a-s4.csv", curve { { 800, 3.0000 } })                  -- one point
    h.write(runs .. "/a-s5.csv", curve { { 700, 3.1 }, { 800, 3.0000 } })    -- none at 90%
    h.write(runs .. "/a-s1.lengths.csv", "not a curve\n")                    -- left out
    local out, err, code = h.run(q(h.BIN) .. " " .. SCRIPT .. " --margin 0.01 " .. q(root
      .. "/lm2-x"))
    assert.are.equal(0, code, err)
    assert.are.same({
      "| run | steps | valid loss at 90% | at 100% | last 10% lowered it by | converged (< 0.005)"
        .. " |",
      "|---|---|---|---|---|---|",
      "| lm2-x/a-s1 | 800 | 3.0049 (step 720) | 3.0000 | +0.0049 | yes |",
      "| lm2-x/a-s2 | 800 | 3.0051 (step 720) | 3.0000 | +0.0051 | **no** |",
      "| lm2-x/a-s3 | 800 | 2.9900 (step 720) | 3.0000 | -0.0100 | yes |",
      "| lm2-x/a-s4 | | | | | no curve |",
      "| lm2-x/a-s5 | 800 | | 3.0000 | | no point at 90% |",
      "",
      "5 runs, 3 not converged by this rule (margin 0.01: half 0.005)",
    }, h.lines(out))
    -- a wider margin moves the limit: 0.0051 passes at margin 0.02
    local out2, err2, code2 = h.run(q(h.BIN) .. " " .. SCRIPT .. " --margin 0.02 "
      .. q(root .. "/lm2-x"))
    assert.are.equal(0, code2, err2)
    assert.truthy(out2:find("| lm2-x/a-s2 | 800 | 3.0051 (step 720) | 3.0000 | +0.0051 | yes |",
      1, true), out2)
    assert.truthy(out2:find("5 runs, 2 not converged by this rule (margin 0.02: half 0.01)", 1,
      true), out2)
    h.remove_tree(root)
  end)
end)

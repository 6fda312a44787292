-- The tutorial notebook in a browser (docs/notebooks.md): tests/kernel/browser_test.py starts the
-- notebook server on 127.0.0.1 with the roper kernel and opens notebooks/tutorial.ipynb as
-- committed, with its outputs, in headless Chromium, as make notebook opens it for a reader: no
-- dialog over it (Jupyter's "Notebook validation failed" covered the page while the committed
-- files were not valid nbformat 4, issue 61), the committed pictures shown. Then it clears the
-- outputs, runs every cell, checks the page (all cells ran, no error, one inline picture per plot
-- call, tensors as HTML tables, the first picture in view) and takes a screenshot
-- (docs/notebook.png is one: browser_test.py ROPER --screenshot docs/notebook.png).
-- Needs jupyter-notebook and chromium-headless-shell (make test installs them).

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local h = require "helpers"

local BIN, PY = h.BIN, h.PY
local CHECKS = { "kernel_connected", "no_dialog", "committed_outputs_shown",
  "outputs_cleared_before", "all_cells_ran", "no_errors", "plots_inline", "tensors_as_tables",
  "plot_in_view", "screenshot" }

describe("the tutorial notebook in headless Chromium", function()
  local out, err, tmp
  setup(function()
    tmp = h.tmpdir()
    out, err = h.run("timeout -k 10 600 " .. h.sh_quote(PY) .. " tests/kernel/browser_test.py "
      .. h.sh_quote(BIN) .. " --screenshot " .. h.sh_quote(tmp .. "/shot.png") .. " < /dev/null")
  end)
  teardown(function() h.remove_tree(tmp) end)

  for _, name in ipairs(CHECKS) do
    it(name, function()
      assert.is_truthy(out:match("ok " .. name .. "\n"), "output:\n" .. out .. "\nstderr:\n"
        .. err:sub(-4000))
    end)
  end

  it("the screenshot is a PNG of the page", function()
    local png = h.read(tmp .. "/shot.png") or ""
    assert.are.equal("\137PNG\r\n\26\n", png:sub(1, 8))
    local w, hgt = string.unpack(">I4>I4", png, 17)
    assert.are.same({ 1200, 1000 }, { w, hgt })
  end)
end)

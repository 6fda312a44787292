-- The file fuzzer (issue 29): forged .npy, safetensors and checkpoint files (tests/fuzz/files.lua)
-- loaded by rp.load, safetensors files by m:load_safetensors into a fresh model, and SentencePiece
-- .model files (a Python-trained model's pieces, trainer spec and normalizer tables forged) by
-- rp.tokenizer.load and then used to encode and decode, in child
-- processes of the roper binary (tests/fuzz/driver.lua, tests/fuzz/child.lua: the machinery of
-- the API fuzz test). One test per kind; it fails on a death (a signal), a hang (the child's time
-- limit), a sanitizer report (under make test SANITIZE=1) or a raw finding: a raised error where
-- a file error belongs, a message without the path, a refused load that changed the model it
-- loaded into, a loaded tensor that does not hold its shape, a raw Lua error while the loaded
-- model or optimiser runs. Checkpoints keep a valid checksum and size (recomputed), so that the
-- forged fields reach the parser's own checks.
--
-- Seeded: the same cases every run. FUZZ_FILES_CASES=<n> sets the random forgeries of each kind
-- (default 200, on top of the systematic ones: every field of a checkpoint of each version, and
-- every key of a safetensors roper.config, at each edge value of its type); FUZZ_FILES_SEED=<n>
-- another seed. A longer run by hand:
--
--   FUZZ_FILES_CASES=20000 BUSTED_ARGS=--filter=files make test
--
-- CONFIG_CHECK: whether "accepted a config rp.model refuses" (a file's config that loads although
-- rp.model(m:config()) raises) fails the test; the findings are printed either way.

local dir_of = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*/[^/]*$") or "."
package.path = dir_of .. "/fuzz/?.lua;" .. dir_of .. "/lua/?.lua;" .. package.path
local driver = require "driver"
local files = require "files"
local rp = require "roper"

local BIN = require("helpers").BIN
local CONFIG_CHECK = true

describe("file fuzz", function()
  local dir = driver.prepare(BIN)
  files.prepare(rp, dir, dir_of .. "/fixtures/checkpoints")
  local ctx = { dir = dir, safetensors = dir .. "/model.safetensors" }
  function ctx.model()
    return rp.model { vocab = 5, d_model = 8, heads = 2, layers = 1, d_ff = 8, seq_len = 8,
      max_batch = 2 }
  end
  local total = { kinds = 0, cases = 0, children = 0, seconds = 0, deaths = 0, hangs = 0,
    sanitizer = 0, raw = 0, harness = 0, config = {}, each = {} }

  it("writes a base checkpoint of every version", function()
    local versions = {}
    for f in require("lfs").dir(dir) do
      if f:match("%.ckpt$") or f:match("%.rpck$") then
        local h = assert(io.open(dir .. "/" .. f, "rb")):read(8)
        versions[string.unpack("<I4", h, 5)] = true
      end
    end
    assert.same({ true, true, true, true, true, true, true }, versions)
  end)

  for _, kind in ipairs(files.kinds()) do
    local n = files.count(rp, ctx, kind)
    it(("%s survives %d forged files"):format(kind, n), function()
      local r = driver.run(BIN, dir, { name = kind, cases = n })
      total.kinds = total.kinds + 1
      total.cases = total.cases + r.cases
      total.children = total.children + r.children
      total.seconds = total.seconds + r.seconds
      total.each[#total.each + 1] = ("%s %d cases %.1f s"):format(kind, r.cases, r.seconds)
      local problems = {}
      for _, k in ipairs { "deaths", "hangs", "sanitizer", "raw", "harness" } do
        total[k] = total[k] + #r[k]
        for _, p in ipairs(r[k]) do problems[#problems + 1] = k .. ": " .. p end
      end
      for _, p in ipairs(r.config) do
        total.config[#total.config + 1] = kind .. " " .. p
        if CONFIG_CHECK then problems[#problems + 1] = "config: " .. p end
      end
      assert.are.equal(0, #problems, kind .. ":\n" .. table.concat(problems, "\n"))
    end)
  end

  teardown(function()
    print(("\nfile fuzz: %d cases over %d kinds in %d child processes, %.0f s: %d deaths, %d "
      .. "hangs, %d sanitizer reports, %d raw findings, %d harness errors; %d configs rp.model "
      .. "refuses%s"):format(total.cases, total.kinds, total.children, total.seconds,
      total.deaths, total.hangs, total.sanitizer, total.raw, total.harness, #total.config,
      CONFIG_CHECK and "" or " (reported, not failed: CONFIG_CHECK is off)"))
    print("file fuzz: " .. table.concat(total.each, ", "))
    for i = 1, math.min(#total.config, 40) do print("  " .. total.config[i]) end
    if #total.config > 40 then print(("  ... and %d more"):format(#total.config - 40)) end
    driver.cleanup(dir)
  end)
end)

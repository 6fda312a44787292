-- The repository stands alone: no tracked file (code, comments, tests, docs, the committed
-- results) points at notes or copies that live outside it (notes of the research, a folder
-- shared beside the checkout, copies of the seeds) or at a path of one machine (its work folder,
-- root's home). Such a pointer leaves the reader with
-- a fact whose source they cannot open; the fact belongs in the file with its public source (the
-- RoPER write-up, labml's repository and file, the paper), or "measured here".
--
-- results/ is checked too: its summaries print the command and config of every run (paths
-- included), and docs/results.md sends readers there, so a machine path in them is the same
-- leak. The scripts write the paths they were given, relative ones stay relative.
--
-- The patterns are built from pieces so that this file does not match them itself.

local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"

-- What must not appear (extended regular expressions, case-insensitive).
local PATTERNS = {
  "re" .. "search/",                 -- a note in the folder of the research
  "re" .. "search note",             -- "the ... notes" of it
  "labml" .. "_roper",               -- the note on labml's code
  "sha" .. "red/",                   -- the folder beside the checkout
  "seed" .. "s/",                    -- the seed copies
  "/wo" .. "rk/",                    -- this machine's work folder
  "/ro" .. "ot/",                    -- root's home
  "DES" .. "IGN\\.md",               -- a design note that is not in the repository
  "tool" .. "chain\\.md",
}

-- The lines of the files tracked in the git checkout `root` that match a pattern, as
-- "path:line:text", or nil and a message when root is not a git checkout.
local function pointers(root)
  local args = {}
  for _, p in ipairs(PATTERNS) do args[#args + 1] = "-e " .. h.sh_quote(p) end
  local out, err, code = h.run(("git -C %s grep -n -I -i -E %s"):format(h.sh_quote(root),
    table.concat(args, " ")))
  if code == 0 then return out end
  if code == 1 and out == "" and err == "" then return "" end -- git grep: nothing matched
  return nil, ("git grep: exit %d: %s"):format(code, err)
end

describe("the repository stands alone", function()
  it("no tracked file points at notes outside it or at a machine path", function()
    local _, _, code = h.run("git rev-parse --is-inside-work-tree")
    if code ~= 0 then
      pending("not a git checkout")
      return
    end
    local found, err = pointers(".")
    assert.is_not_nil(found, err)
    assert.are.equal("", found, "pointers outside the repository (state the fact and its "
      .. "public source instead):\n" .. found)
  end)

  it("finds such a pointer in a tracked file, in code, docs and results alike", function()
    local root = h.tmpdir()
    local files = {
      ["core/x.c"] = "/* measured on the Xeon of the " .. "re" .. "search notes */\n",
      ["docs/x.md"] = "as in ../" .. "sha" .. "red/" .. "re" .. "search/notes.md\n",
      ["results/r/summary.md"] = "Command: `roper scripts/compare.lua --out /wo" .. "rk/r`\n",
      ["README.md"] = "A clean line.\n",
    }
    for path, text in pairs(files) do
      assert(os.execute("mkdir -p " .. h.sh_quote(root .. "/" .. (path:match("^(.*)/") or "."))))
      h.write(root .. "/" .. path, text)
    end
    -- an untracked file is not the repository's
    h.write(root .. "/notes.txt", "see " .. "re" .. "search/x.md\n")
    local _, err, code = h.run(("git -C %s init -q && git -C %s add core docs results README.md")
      :format(h.sh_quote(root), h.sh_quote(root)))
    assert.are.equal(0, code, err)
    local found = assert(pointers(root))
    h.remove_tree(root)
    local lines = {}
    for l in found:gmatch("[^\n]+") do lines[#lines + 1] = l:match("^([^:]+:%d+):") end
    table.sort(lines)
    assert.are.same({ "core/x.c:1", "docs/x.md:1", "results/r/summary.md:1" }, lines)
  end)
end)

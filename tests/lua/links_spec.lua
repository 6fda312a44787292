-- Every relative link of the README and of docs/*.md resolves: the file it names exists, and
-- its #anchor is a heading of that file (as GitHub spells a heading's anchor). Moving a section
-- from the README to docs/ (or renaming a heading) must not leave a link behind it.

local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"

-- GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens; a repeated
-- heading gets -1, -2, ... (bytes of UTF-8 letters are kept).
local function anchors(text)
  local set, seen, fence = {}, {}, false
  for line in text:gmatch("([^\n]*)\n?") do
    if line:match("^```") then
      fence = not fence
    elseif not fence then
      local title = line:match("^#+%s+(.-)%s*$")
      if title then
        local a = title:lower():gsub("[^%w%- _\128-\255]", ""):gsub(" ", "-")
        local n = seen[a] or 0
        seen[a] = n + 1
        set[n == 0 and a or (a .. "-" .. n)] = true
      end
    end
  end
  return set
end

-- The broken links of the markdown file `path` (relative to the checkout `root`), as
-- "path: target: reason" lines.
local function broken(root, path)
  local text = assert(h.read(root .. "/" .. path))
  local dir = path:match("^(.*)/") or ""
  local prose = text:gsub("\n```.-\n```", "\n"):gsub("`[^`\n]*`", "")
  local out = {}
  for target in prose:gmatch("%]%(([^)%s]+)%)") do
    if not target:match("^%a[%w+.-]*:") then -- not http:, https:, mailto:
      local file, anchor = target:match("^([^#]*)#?(.*)$")
      local rel = file == "" and path or (dir == "" and file or dir .. "/" .. file)
      local parts = {}
      for p in rel:gmatch("[^/]+") do
        if p == ".." then parts[#parts] = nil elseif p ~= "." then parts[#parts + 1] = p end
      end
      rel = table.concat(parts, "/")
      local f = io.open(root .. "/" .. rel)
      if f then f:close() end
      if not f then
        out[#out + 1] = path .. ": " .. target .. ": no such file"
      elseif anchor ~= "" and rel:match("%.md$") and not anchors(h.read(root .. "/" .. rel))[anchor] then
        out[#out + 1] = path .. ": " .. target .. ": no such heading"
      end
    end
  end
  return out
end

describe("links", function()
  it("of the README and docs/*.md name files and headings that exist", function()
    local files = { "README.md" }
    local list = assert(h.run("git ls-files 'docs/*.md'"))
    for f in list:gmatch("[^\n]+") do files[#files + 1] = f end
    assert.is_true(#files > 5, list)
    local bad = {}
    for _, f in ipairs(files) do
      for _, b in ipairs(broken(".", f)) do bad[#bad + 1] = b end
    end
    assert.are.same({}, bad)
  end)

  it("that do not resolve are found", function()
    local d = h.tmpdir()
    assert(os.execute("mkdir -p " .. h.sh_quote(d .. "/docs")))
    h.write(d .. "/docs/a.md", "# A page\n\n## Two words: here\n\n```\n# not a heading\n```\n")
    h.write(d .. "/README.md", table.concat({
      "[ok](docs/a.md) [ok](docs/a.md#a-page) [ok](docs/a.md#two-words-here)",
      "[web](https://example.org/x#y) `[code](nowhere.md)` [self](#top)",
      "[gone](docs/b.md) [no heading](docs/a.md#three) [fenced](docs/a.md#not-a-heading)",
      "# Top", "" }, "\n"))
    assert.are.same({
      "README.md: docs/b.md: no such file",
      "README.md: docs/a.md#three: no such heading",
      "README.md: docs/a.md#not-a-heading: no such heading",
    }, broken(d, "README.md"))
    h.write(d .. "/docs/c.md", "[up](../README.md#top) [up](../README.md#bottom)\n")
    assert.are.same({ "docs/c.md: ../README.md#bottom: no such heading" }, broken(d, "docs/c.md"))
    h.remove_tree(d)
  end)
end)

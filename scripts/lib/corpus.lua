-- A text corpus for language modelling, prepared reproducibly (docs/language_model.md): its
-- documents (the files of a folder, gzip or plain, or the lines of a JSON-lines file), cleaned,
-- split by document into train / valid / test by a hash of the document's name, written as three
-- UTF-8 files and a manifest (every document, its split and bytes; each split's bytes and
-- SHA-256). The default corpus is the Linux kernel's documentation as Debian's linux-doc-6.1
-- package ships it.
--
--   corpus.prepare{out =, input = | jsonl =, field =, clean =, max_bytes =, exclude =}
--     -> manifest | nil, message
--   corpus.documents(opts) -> { {name =, text =}, ... }, bytes read, documents empty after
--                             cleaning, paths skipped as repeats | nil, message (read and
--                             checked; a folder's links are followed, each real file and folder
--                             read once)
--   corpus.clean_rst(text) -> text         the cleaning of reStructuredText (below)
--   corpus.split_of(name) -> "train" | "valid" | "test" (corpus.fnv1a32(name) % 100)
--   (each split's SHA-256 in the manifest: rp.lm.sha256, the checksum of the ids cache's keys)
--
-- Errors name the file and the fault ("a.txt: invalid UTF-8 at byte 17 (not a text file?)") and
-- nothing is written half: the split files and the manifest go to temporary names; only when all
-- are written is the manifest of an earlier corpus in the folder removed and the files renamed,
-- the manifest last. A folder without a manifest holds no corpus.
--
-- Libraries (Debian packages): lfs (folders), lua-cjson (JSON lines); gzip and sha256sum.
local lfs = require "lfs"
local cjson = require "cjson"
local rp = require "roper"
local fileio = require "lib.fileio"
local json = require "lib.json"
local proc = require "lib.proc"

local corpus = {}

-- The default corpus: the Documentation folder of Debian's linux-doc-6.1 (the kernel 6.1's
-- reStructuredText sources, each file gzip-compressed), without the translations (Chinese,
-- Japanese, Korean, Italian: the corpus is English prose), its .rst files only.
corpus.DEFAULT_PACKAGE = "linux-doc-6.1"
corpus.DEFAULT_INPUT = "/usr/share/doc/linux-doc-6.1/Documentation"
corpus.DEFAULT_EXCLUDE = { "translations" }
corpus.DEFAULT_SUFFIX = ".rst.gz"
-- What Debian's copyright file of the package says of these files (its "Files: *" paragraph;
-- no paragraph names Documentation/), and where each file's own SPDX line is counted.
corpus.DEFAULT_LICENCE = "GPL-2 (debian/copyright of linux-doc-6.1: \"Files: *\", Linus "
  .. "Torvalds and many others); each document's own SPDX-License-Identifier is counted in the "
  .. "manifest (licences)"

-- The manifest's format.
corpus.FORMAT = "roper-corpus 1"
corpus.SPLITS = { "train", "valid", "test" }

-- FNV-1a, 32 bits, of a string (Fowler, Noll and Vo's hash: offset basis 2166136261, prime
-- 16777619).
function corpus.fnv1a32(s)
  local h = 2166136261
  for i = 1, #s do
    h = ((h ~ s:byte(i)) * 16777619) & 0xffffffff
  end
  return h
end

-- The split of a document: FNV-1a (32 bits) of its name (the path inside the input folder, or
-- "<file>:<line>" for JSON lines), modulo 100: 0..89 train, 90..94 valid, 95..99 test.
function corpus.split_of(name)
  local r = corpus.fnv1a32(name) % 100
  return r < 90 and "train" or r < 95 and "valid" or "test"
end

-- ---------------------------------------------------------------- cleaning

-- A section adornment of reStructuredText: one punctuation character repeated, 3 or more.
local function adornment(line)
  local c = line:sub(1, 1)
  return #line >= 3 and c:match("[=%-~^*#\"'+`:._]") ~= nil and line == c:rep(#line)
end

-- The cleaning of a reStructuredText document, line by line; only markup that is not prose goes:
--  * explicit markup lines (starting with ".. ": directives, comments, link targets,
--    substitutions, the SPDX line) are dropped with the directive's option lines after them
--    (indented ":name: value"); the indented body of a comment, a toctree (a list of file names)
--    or a kernel-doc/include directive goes too, the body of any other directive (a note's prose,
--    a code block's code) stays;
--  * section adornments (a line of one repeated punctuation character) are dropped, the title
--    stays;
--  * then as for every document: CR LF becomes LF, trailing spaces and tabs go, runs of blank
--    lines become one, and the text ends with one newline.
local DROP_BODY = { toctree = true, ["kernel-doc"] = true, include = true, literalinclude = true,
  ["kernel-include"] = true, ["kernel-feat"] = true, ["kernel-abi"] = true, only = true,
  ["raw"] = true, image = true, figure = true }

function corpus.clean_rst(text)
  local out = {}
  local skip_body, in_options = false, false
  for line in (text:gsub("\r\n", "\n") .. "\n"):gmatch("(.-)\n") do
    local indented = line:match("^[ \t]") ~= nil
    local keep = true
    if line:match("^%.%.%s") or line == ".." then
      local name = line:match("^%.%.%s+([%w_-]+)::")
      -- a comment (no "name::") or a directive whose body is not prose: drop the body too
      skip_body = name == nil or DROP_BODY[name] == true
      in_options, keep = true, false
    elseif indented and skip_body then
      keep = false
    elseif indented and in_options and line:match("^%s+:[%w_ -]+:") then
      keep = false
    elseif adornment(line) then
      keep, skip_body, in_options = false, false, false
    elseif line:match("%S") then
      skip_body, in_options = false, false
    else
      in_options = false
    end
    if keep then out[#out + 1] = line end
  end
  return corpus.normalise(table.concat(out, "\n"))
end

-- The cleaning every document gets: CR LF -> LF, trailing spaces and tabs removed, runs of blank
-- lines made one, no blank lines at either end, one newline at the end ("" stays "").
function corpus.normalise(text)
  text = text:gsub("\r\n", "\n"):gsub("[ \t]+\n", "\n"):gsub("[ \t]+$", "")
  text = text:gsub("\n\n\n+", "\n\n"):gsub("^\n+", ""):gsub("\n+$", "")
  return text == "" and "" or text .. "\n"
end

-- ---------------------------------------------------------------- reading

local Fail = {}
local function fail(msg) error(setmetatable({ msg = msg }, Fail), 0) end

-- The position of the first byte of text that is not UTF-8 (0-based, as the text task says it),
-- or nil: Lua's utf8.len (strict: no surrogates, nothing above U+10FFFF, no overlong forms).
local function bad_utf8(text)
  local n, at = utf8.len(text)
  if n then return nil end
  return at - 1
end

local function check_utf8(name, text)
  local at = bad_utf8(text)
  if at then fail(("%s: invalid UTF-8 at byte %d (not a text file?)"):format(name, at)) end
end

local function mib(n) return ("%.1f MiB"):format(n / 2^20) end

-- The relative paths of the regular files under root whose names end in suffix (every file when
-- suffix is nil or ""), the folders of exclude (relative paths) left out, sorted byte-wise, and
-- the count of paths left out as repeats. Links are followed, but each real folder and file (by
-- device and inode) is read once, at the first path that reaches it in the sorted walk: a link
-- to a folder above it ends there instead of walking forever, and a text reached by two names
-- does not land in two splits.
local function list_files(root, suffix, exclude)
  local skip = {}
  for _, e in ipairs(exclude or {}) do skip[e] = true end
  local files, seen, repeats = {}, {}, 0
  local function first_visit(attr)
    local id = ("%d:%d"):format(attr.dev, attr.ino)
    if seen[id] then
      repeats = repeats + 1
      return false
    end
    seen[id] = true
    return true
  end
  local function walk(rel, attr)
    if not first_visit(attr) then return end
    local dir = rel == "" and root or (root .. "/" .. rel)
    local names = {}
    for name in lfs.dir(dir) do
      if name ~= "." and name ~= ".." then names[#names + 1] = name end
    end
    table.sort(names)
    for _, name in ipairs(names) do
      local r = rel == "" and name or (rel .. "/" .. name)
      local a = lfs.attributes(root .. "/" .. r)
      if a and a.mode == "directory" then
        if not skip[r] then walk(r, a) end
      elseif a and a.mode == "file" and (suffix == nil or suffix == "" or name:sub(-#suffix) == suffix)
        and first_visit(a) then
        files[#files + 1] = r
      end
    end
  end
  walk("", lfs.attributes(root))
  table.sort(files)
  return files, repeats
end

-- The text of a file (gzip-compressed when its name ends in .gz: gzip -dc), or false when it
-- holds more than budget bytes.
local function read_text(path, display, budget)
  if path:sub(-3) == ".gz" then
    local p = io.popen("gzip -dc " .. proc.quote(path) .. " 2>/dev/null")
    -- read in pieces up to budget + 1 bytes (one read of budget + 1 would allocate that much
    -- first, whatever the file holds)
    local parts, n, over = {}, 0, false
    while p do
      local piece = p:read(math.min(1 << 20, budget + 1 - n))
      if not piece then break end
      parts[#parts + 1], n = piece, n + #piece
      if n > budget then over = true break end
    end
    local ok = p and p:close()
    if over then return false end
    if not ok then fail(display .. ": not a gzip file that gzip -dc can read") end
    return table.concat(parts)
  end
  local size = lfs.attributes(path, "size") or 0
  if size > budget then return false end
  local text, err = rp.read_file(path)
  if not text then fail(err) end
  return text
end

-- The SPDX-License-Identifier a document names in its first lines, or nil.
local function spdx(text)
  return text:sub(1, 400):match("SPDX%-License%-Identifier:%s*([^\n]-)%s*\n")
end

-- The documents of a corpus, read and checked: {name, text (cleaned), bytes_in (as read)}.
-- opts: input (a folder: its regular files, recursively, sorted; or one text file) or jsonl (a
-- file of JSON objects, one a line, the text in opts.field, default "text"); suffix (only files
-- whose names end so), exclude (sub-folders left out), clean ("rst" or "none": what
-- corpus.clean_rst or only corpus.normalise does), max_bytes (the text read, in all).
local function read_documents(opts)
  local max = opts.max_bytes
  local total, docs, dropped, repeats = 0, {}, 0, 0
  local clean = opts.clean == "rst" and corpus.clean_rst or corpus.normalise
  local function add(name, text)
    check_utf8(name, text)
    local cleaned = clean(text)
    if cleaned ~= "" then
      docs[#docs + 1] = { name = name, text = cleaned, bytes_in = #text, spdx = spdx(text) }
    else
      dropped = dropped + 1
    end
  end
  if opts.jsonl then
    local path = opts.jsonl
    local mode = lfs.attributes(path, "mode")
    if mode ~= "file" then
      fail(("%s: %s"):format(path, mode and "not a regular file" or "no such file"))
    end
    local size = lfs.attributes(path, "size")
    if size > max then
      fail(("%s: %s is more than the limit of %s (max_bytes)"):format(path, mib(size), mib(max)))
    end
    local text = read_text(path, path, max)
    if not text then
      fail(("%s: more than the limit of %s (max_bytes)"):format(path, mib(max)))
    end
    check_utf8(path, text)
    local field, ln = opts.field or "text", 0
    for line in (text .. (text:sub(-1) == "\n" and "" or "\n")):gmatch("(.-)\n") do
      ln = ln + 1
      if line:match("%S") then
        local ok, v = pcall(cjson.decode, line)
        if not ok then
          fail(("%s:%d: not JSON (%s)"):format(path, ln, tostring(v):gsub("^.-: ", "")))
        end
        if type(v) ~= "table" or type(v[field]) ~= "string" then
          fail(("%s:%d: no string field '%s'"):format(path, ln, field))
        end
        add(("%s:%d"):format(path:match("[^/]*$"), ln), v[field])
      end
    end
    total = #text
  else
    local root = opts.input
    local mode = lfs.attributes(root, "mode")
    if mode == nil then fail(root .. ": no such file or folder") end
    local files
    if mode == "directory" then
      files, repeats = list_files(root, opts.suffix, opts.exclude)
      if #files == 0 then
        fail(("%s: no %s in this folder"):format(root, (opts.suffix or "") ~= ""
          and ("files ending in " .. opts.suffix) or "regular files"))
      end
    elseif mode == "file" then
      files, root = { root:match("[^/]*$") }, root:match("^(.*)/[^/]*$") or "."
    else
      fail(root .. ": not a regular file or folder")
    end
    for _, rel in ipairs(files) do
      local path = root .. "/" .. rel
      local text = read_text(path, rel, max - total)
      total = total + (text and #text or 0)
      if not text then
        fail(("%s: its files hold more than the limit of %s (max_bytes), passed at %s")
          :format(opts.input, mib(max), rel))
      end
      add(mode == "file" and rel or rel:gsub("%.gz$", ""), text)
    end
  end
  if #docs == 0 then
    fail(("%s: empty (no text to train on)"):format(opts.jsonl or opts.input))
  end
  return docs, total, dropped, repeats
end

function corpus.documents(opts)
  local ok, docs, total, dropped, repeats = pcall(read_documents, opts)
  if ok then return docs, total, dropped, repeats end
  if getmetatable(docs) == Fail then return nil, docs.msg end
  error(docs, 0)
end

-- ---------------------------------------------------------------- writing

local function prepare(opts)
  local out = opts.out
  local ok, err = fileio.mkdir(out)
  if not ok then fail(err) end
  local docs, total_in, dropped, repeats = read_documents(opts)
  -- every split gets its documents in name order, each document's text ending in a newline and
  -- the next one after a blank line
  local parts, files, licences = {}, {}, {}
  for _, s in ipairs(corpus.SPLITS) do parts[s], files[s] = {}, {} end
  for _, d in ipairs(docs) do
    local s = corpus.split_of(d.name)
    parts[s][#parts[s] + 1] = d.text
    files[s][#files[s] + 1] = { name = d.name, bytes = #d.text }
  end
  for _, s in ipairs(corpus.SPLITS) do
    if #parts[s] == 0 then
      fail(("%s: its %d document%s leave the %s split empty (the split is by a hash of each "
        .. "document's name, about 90/5/5: use more documents)"):format(opts.jsonl or opts.input,
        #docs, #docs == 1 and "" or "s", s))
    end
  end
  if opts.clean == "rst" then
    -- the licences the documents name, from the originals (the SPDX line is cleaned away)
    for _, d in ipairs(docs) do
      local l = d.spdx or "none"
      licences[l] = (licences[l] or 0) + 1
    end
  end
  local manifest_path = out .. "/manifest.json"
  local manifest = { format = corpus.FORMAT, splits = {}, documents = #docs,
    empty_after_cleaning = dropped,
    bytes_read = total_in, cleaning = opts.clean, split_rule = "FNV-1a 32 of the document's "
      .. "name mod 100: 0..89 train, 90..94 valid, 95..99 test" }
  local written = {}
  for _, s in ipairs(corpus.SPLITS) do
    local text = table.concat(parts[s], "\n")
    local tmp = ("%s/%s.txt.part"):format(out, s)
    ok, err = rp.write_file(tmp, text)
    if not ok then fail(err) end
    written[#written + 1] = tmp
    local sum, serr = rp.lm.sha256(tmp)
    if not sum then fail(serr) end
    manifest.splits[s] = { file = s .. ".txt", bytes = #text, documents = #parts[s],
      sha256 = sum, files = files[s] }
  end
  if next(licences) then manifest.licences = licences end
  -- only when some were (the manifest of a corpus without repeats stays as it was: its SHA-256
  -- names the ids cache)
  if repeats > 0 then manifest.repeated_paths_skipped = repeats end
  for k, v in pairs(opts.source or {}) do manifest[k] = v end
  -- everything new is on disk before anything old is replaced (a full disk fails here and
  -- leaves the earlier corpus whole); then the earlier corpus stops being one (its manifest
  -- goes), the splits are renamed, and the new manifest, renamed last, makes the folder a corpus
  local manifest_part = manifest_path .. ".part"
  ok, err = rp.write_file(manifest_part, json.encode(manifest))
  if not ok then fail(err) end
  os.remove(manifest_path)
  for _, s in ipairs(corpus.SPLITS) do
    ok, err = os.rename(("%s/%s.txt.part"):format(out, s), ("%s/%s.txt"):format(out, s))
    if not ok then fail(err) end
  end
  ok, err = os.rename(manifest_part, manifest_path)
  if not ok then fail(err) end
  return manifest
end

-- corpus.prepare(opts) -> manifest | nil, message: reads, cleans and splits the corpus of opts
-- (as corpus.documents) and writes out/train.txt, valid.txt, test.txt and out/manifest.json
-- (opts.source: fields copied into the manifest, such as the package and its licence).
function corpus.prepare(opts)
  local ok, res = pcall(prepare, opts)
  if ok then return res end
  for _, s in ipairs(corpus.SPLITS) do os.remove(("%s/%s.txt.part"):format(opts.out, s)) end
  os.remove(opts.out .. "/manifest.json.part")
  if getmetatable(res) == Fail then return nil, res.msg end
  error(res, 0)
end

return corpus

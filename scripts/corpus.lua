-- Prepares a text corpus for language modelling (docs/language_model.md): reads its documents,
-- cleans them, splits them by document into train / valid / test (about 90/5/5, by a hash of each
-- document's name) and writes <out>/train.txt, valid.txt, test.txt and manifest.json (every
-- document with its split and bytes; each split's bytes and SHA-256).
--
--   build/roper scripts/corpus.lua                      # the default: the Linux kernel's documentation
--                                                 # (Debian's linux-doc-6.1; make corpus)
--   build/roper scripts/corpus.lua --input my_texts/ --out data/mine       # a folder of text files
--   build/roper scripts/corpus.lua --jsonl pages.jsonl --field text --out data/pages
--
-- Errors are one line naming the file and the fault (exit 2 for a bad option, 1 for a corpus that
-- cannot be used); nothing is written half.
-- lib/ beside this file, wherever it runs from: roper, lua5.4 or an installed roper-<name>
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local rp = require "roper"
local cli = require "lib.cli"
local corpus = require "lib.corpus"
local fileio = require "lib.fileio"

-- the text task's limit of a corpus (rp.experiment's max_bytes key) is this one's too
local function default_max_bytes()
  for _, k in ipairs(rp.experiment.keys()) do
    if k.name == "max_bytes" then return k.default end
  end
end

-- --help opens with these (each runs as written from the repository's folder; tests/lua/
-- help_examples_spec.lua runs them). The default corpus (no --input) needs Debian's linux-doc-6.1:
-- `make corpus` installs it and runs this script.
local EXAMPLES = {
  { "any folder of text files, here the stored runs of a comparison (JSON and CSV), not cleaned",
    "build/roper scripts/corpus.lua --input results/v2-index/runs --clean none --out data/runs" },
  { "the same with a smaller size limit (a corpus above it is refused, nothing written)",
    "build/roper scripts/corpus.lua --input results/v3-index/runs --clean none --max-bytes 2000000 "
      .. "--out data/runs-small" },
  { "another folder; then train a language model on it: train.lua --task lm --corpus data/grid",
    "build/roper scripts/corpus.lua --input results/grid2d/runs --clean none --out data/grid" },
}

cli.main("corpus.lua", function()
  local parser = cli.parser("build/roper scripts/corpus.lua",
    "Prepare a text corpus for language modelling: clean, split by document, checksum. Without "
      .. "--input: the Linux kernel's documentation (make corpus installs linux-doc-6.1 first).",
    EXAMPLES)
  parser:option("--out", "The folder to write (train.txt, valid.txt, test.txt, manifest.json).",
    "data/linux-doc"):argname("<folder>")
  parser:option("--input", "A folder of text files (gzip too; every file below it, sorted) or "
    .. "one file (default: the Documentation folder of Debian's " .. corpus.DEFAULT_PACKAGE
    .. ", its .rst files without translations/).")
    :argname("<folder>")
  parser:option("--jsonl", "A JSON-lines file: one object a line, its text in --field.")
    :argname("<file>")
  parser:option("--field", "The text field of --jsonl.", "text"):argname("<name>")
  parser:option("--clean", "rst: drop reStructuredText markup lines (the default corpus's); "
    .. "none: only line ends, trailing spaces and blank runs (default: rst for the default "
    .. "corpus, none otherwise).")
    :choices { "rst", "none" }
  parser:option("--max-bytes", "The most text read, in bytes.", tostring(default_max_bytes()))
    :convert(math.tointeger):argname("<n>")
  local args = parser:parse()
  if not args.max_bytes or args.max_bytes < 1 or args.max_bytes > 1 << 40 then
    cli.usage("--max-bytes must be an integer in 1..2^40")
  end
  if args.input and args.jsonl then cli.usage("give --input or --jsonl, not both") end

  local opts = { out = args.out, max_bytes = args.max_bytes, field = args.field }
  if args.jsonl then
    opts.jsonl, opts.clean = args.jsonl, args.clean or "none"
  elseif args.input then
    opts.input, opts.clean = args.input, args.clean or "none"
  else
    local input = corpus.DEFAULT_INPUT
    if not io.open(input .. "/index.rst.gz") then
      cli.usage(("%s: missing (install Debian's %s: make corpus does)"):format(input,
        corpus.DEFAULT_PACKAGE))
    end
    local p = io.popen("dpkg-query -W -f='${Version}' " .. corpus.DEFAULT_PACKAGE .. " 2>/dev/null")
    local version = p and p:read("a") or ""
    if p then p:close() end
    opts.input, opts.clean = input, args.clean or "rst"
    opts.suffix, opts.exclude = corpus.DEFAULT_SUFFIX, corpus.DEFAULT_EXCLUDE
    opts.source = { source = ("Debian package %s %s, %s/*%s without %s/"):format(
      corpus.DEFAULT_PACKAGE, version, input, corpus.DEFAULT_SUFFIX,
      table.concat(corpus.DEFAULT_EXCLUDE, "/, ")), licence = corpus.DEFAULT_LICENCE }
  end
  -- (after the input's checks, so that a refused input makes no folder; before any reading)
  fileio.check_folder(args.out, "--out")
  local m, err = corpus.prepare(opts)
  if not m then error(err, 0) end
  for _, s in ipairs(corpus.SPLITS) do
    local sp = m.splits[s]
    io.write(("%-5s %5d documents %11d bytes  sha256 %s\n"):format(s, sp.documents, sp.bytes,
      sp.sha256))
  end
  io.stderr:write(("corpus.lua: wrote %s/manifest.json and the three splits\n"):format(args.out))
end)

-- rp.build_info(): what this build of the module is, for the provenance of runs
-- (docs/experiments.md, "What a run records").
--   rp.build_info() -> { version = rp._VERSION, commit = "<git describe --always --dirty>",
--                        build = "native" | "portable" | "sanitize", target = "native" |
--                        "x86-64-v3" | "x86-64", tokenizer = true | false } (core/sys/build.h:
--                        the portable build gives the same bits on every x86-64-v3 CPU;
--                        tokenizer: built with SentencePiece, text/tokenizer.h)
-- The commit is stamped at build time by bindings/gen_build_info.lua (the module
-- roper.build_stamp, generated in the build folder): "unknown" when the module was built outside
-- a git checkout.
--
-- roper.build_info: adds rp.build_info; exports nothing.
local require = ...
local rp = require "roper"
local internals = require "roper.internals"

local stamp = require "roper.build_stamp"
local commit = type(stamp.commit) == "string" and stamp.commit or "unknown"

function rp.build_info()
  return { version = rp._VERSION, commit = commit, build = internals.build_kind,
    target = internals.build_target, tokenizer = internals.tokenizer }
end

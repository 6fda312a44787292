-- roper.init: the Lua side of the module, in one place. luaopen_roper (bindings/roper.c) requires
-- it once the C functions are in rp, and it requires every other module of bindings/lua/ (each
-- requires what it uses first, so its line here is the latest it loads at). A module's head says
-- what it adds to rp and what it exports.
--
-- Every module is a chunk that bindings/embed.lua compiles into roper.so under a name:
-- bindings/lua/<path>.lua is roper.<path with / as .>, and the build generates roper.help_data
-- (bindings/gen_help.lua: docs/lua_api.md's texts) and roper.build_stamp
-- (bindings/gen_build_info.lua: the source commit). A chunk gets the module's own require as its
-- argument, which finds these modules only (never on package.path nor in package.loaded: a
-- user's module of the same name is neither used nor shadowed, and none of these reaches user
-- code), and two more:
--   roper            the module table rp, which modules add their public functions to
--   roper.internals  the private table that C fills (the metatables, core's config schema and
--                    mode table, the file helpers: bindings/roper.c lists it); no module writes
--                    to it: what a module shares is its return value
-- A module starts with a require line for each module it uses and returns its exports (a table
-- of functions for the other modules; nothing when it only adds to rp).
local require = ...

require "roper.print"
require "roper.build_info"
require "roper.help"
require "roper.eval"
require "roper.rope_mixed"
require "roper.derive"
require "roper.experiment.keys"
require "roper.experiment.check"
require "roper.experiment.state"
require "roper.experiment.run"
require "roper.experiment.better"
require "roper.plot"

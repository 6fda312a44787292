-- roper.init: the Lua side of the module, in one place. luaopen_roper (bindings/roper.c) requires
-- it once the C functions are in rp, and it requires every other module of bindings/lua/ (each
-- requires what it uses first, so its line here is the latest it loads at). A module's head says
-- what it adds to rp and what it exports.
--
-- A module is named by its path (bindings/lua/experiment/keys.lua is roper.experiment.keys; the
-- build generates roper.help_data and roper.build_stamp: bindings/embed.lua), starts with a
-- require line for each module it uses and returns its exports (a table of functions for the
-- other modules; nothing when it only adds to rp). Its chunk gets the module's own require as its
-- argument (bindings/roper.c, l_require: it finds only these modules, "roper", the module table,
-- and "roper.internals", the private table that C fills and no module writes to).
local require = ...

require "roper.print"
require "roper.html"
require "roper.build_info"
require "roper.help"
require "roper.eval"
require "roper.rope_mixed"
require "roper.derive"
require "roper.lm"
require "roper.experiment.keys"
require "roper.experiment.check"
require "roper.experiment.state"
require "roper.experiment.run"
require "roper.experiment.better"
require "roper.plot"

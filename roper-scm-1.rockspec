-- LuaRocks: `luarocks make` in this folder builds with the Makefile and installs into a rocks
-- tree the Lua module (roper.so), the roper REPL, a roper-<name> command per script with the
-- scripts, and the man page (make install-lua install-bin; the C library is for make install).
-- The build is the project's: Debian 12 with the packages of the Makefile's PACKAGES list
-- (`make deps` installs what is missing).
rockspec_format = "3.0"
package = "roper"
version = "scm-1"
source = {
   url = ".", -- built from a checkout with `luarocks make`; no published source archive
}
description = {
   summary = "A C11 + Lua 5.4 workbench for rotary positional embeddings (RoPE, RoPER)",
   detailed = [[
      Float32 tensors (OpenBLAS), multi-head attention with selectable positional encodings
      (none, sinusoidal, learned, RoPE, RoPER), a small transformer that trains on the CPU,
      optimisers, checkpoints, task generators, a REPL, and scripts that train and compare
      methods over many seeds.
   ]],
   license = "MIT",
}
dependencies = {
   "lua >= 5.4, < 5.5",
   -- for the scripts (the module needs none of them)
   "argparse",
   "lua-cjson",
   "penlight",
   "luafilesystem",
   "luv",
}
external_dependencies = {
   OPENBLAS = { library = "openblas" },
   READLINE = { library = "readline" },
}
build = {
   type = "make",
   -- the Makefile's own flags (strict warnings, -Icore, OpenMP): LuaRocks' CFLAGS not passed
   build_target = "all",
   install_target = "install-lua install-bin",
   install_variables = {
      PREFIX = "$(PREFIX)",
      BINDIR = "$(BINDIR)",
      LUA_CMODDIR = "$(LIBDIR)",
   },
}

-- make install into a temporary DESTDIR, then used from outside the tree as a user would: lua5.4
-- requires the installed module, the installed REPL and script commands run, a C program builds
-- with pkg-config against the installed library and runs, roper(1) renders; make uninstall then
-- leaves only what was there before. And every script runs with a plain lua5.4 from another
-- folder (its lib/ found beside it).
--
-- The install copies the build that is being tested (BUILD, SANITIZE as tests/run sets them) and
-- builds nothing when it is up to date. Under SANITIZE=1 the installed programs carry the
-- sanitizers: lua5.4 gets the runtimes preloaded (as tests/run does for busted) and the C
-- program is linked with -fsanitize.
local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local lfs = require "lfs"
local cjson = require "cjson"
local sh_quote, run = h.sh_quote, h.run

local ROOT = lfs.currentdir()
local BUILD = os.getenv("BUILD") or "build"
local BUILD_ABS = BUILD:sub(1, 1) == "/" and BUILD or ROOT .. "/" .. BUILD
local SANITIZE = os.getenv("SANITIZE") or ""
local sanitized = SANITIZE == "1"

-- Environment for a plain lua5.4 that loads this build's module: the sanitizer runtimes first.
local function lua_env() return h.lua_env(BUILD_ABS) end

-- make in the tree, apart from the make that runs the tests (its jobserver is not ours)
local function make(args)
  return run("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory -C "
    .. sh_quote(ROOT) .. " BUILD=" .. sh_quote(BUILD) .. " SANITIZE=" .. sh_quote(SANITIZE)
    .. " " .. args)
end

-- the variables roper sets for itself, removed, so its re-execution is exercised
local CLEAN = "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u ROPER_OMP_WAIT_POLICY "
  .. "-u OPENBLAS_CORETYPE -u ROPER_BLAS_DETECTED -u ROPER_BLAS_REPLACED -u ROPER_KEEP_CORETYPE "
  .. "-u LUA_PATH -u LUA_CPATH "

local TINY = "--steps 1 --d-model 16 --heads 2 --layers 1 --seq-len 32 --batch 2 --problems 1 "
  .. "--valid-batches 1 --quiet"

-- Every path under root, relative, sorted ("" -> nothing).
local function tree(root)
  local out = {}
  local function walk(rel)
    for name in lfs.dir(root .. rel) do
      if name ~= "." and name ~= ".." then
        local r = rel .. "/" .. name
        out[#out + 1] = r
        if lfs.symlinkattributes(root .. r, "mode") == "directory" then walk(r) end
      end
    end
  end
  walk("")
  table.sort(out)
  return out
end

describe("make install into a DESTDIR", function()
  local D = h.tmpdir()      -- DESTDIR
  local P = D .. "/usr/local" -- the installed prefix, as seen from here
  local W = h.tmpdir()      -- a working folder outside the tree
  local in_w = "cd " .. sh_quote(W) .. " && "
  local installed, install_err

  lazy_setup(function()
    -- something that was there before: make uninstall must leave it
    assert(os.execute("mkdir -p " .. sh_quote(P .. "/bin") .. " && touch "
      .. sh_quote(P .. "/bin/other-tool")))
    local out, err, code = make("install DESTDIR=" .. sh_quote(D) .. " PREFIX=/usr/local")
    installed = code == 0
    install_err = ("exit %d\n%s%s"):format(code, out, err)
  end)

  lazy_teardown(function()
    h.remove_tree(D)
    h.remove_tree(W)
  end)

  it("puts every part where lua5.4, the shell, the C compiler and man look", function()
    assert.is_true(installed, install_err)
    local want = {
      "/bin/roper", "/bin/roper-train", "/bin/roper-compare", "/bin/roper-sweep",
      "/bin/roper-rotation-identity", "/bin/roper-linear-identity",
      "/share/roper/scripts/train.lua", "/share/roper/scripts/lib/cli.lua",
      "/lib/lua/5.4/roper.so",
      "/lib/libroper.a", "/lib/libroper.so.0", "/lib/libroper.so",
      "/include/roper/rp.h", "/include/roper/tensor.h", "/include/roper/task.h",
      "/include/roper/tokenizer.h",
      "/lib/pkgconfig/roper.pc", "/share/man/man1/roper.1", "/share/doc/roper/LICENSE",
      "/lib/roper/roper_mpi.so",
    }
    for _, f in ipairs(want) do
      assert.is_truthy(lfs.attributes(P .. f), f .. " not installed")
    end
    -- one command per script, every script and library of the tree
    for f in lfs.dir("scripts") do
      local name = f:match("^(.+)%.lua$")
      if name then
        assert.is_truthy(lfs.attributes(P .. "/bin/roper-" .. name:gsub("_", "-")), f)
        assert.are.equal(h.read("scripts/" .. f), h.read(P .. "/share/roper/scripts/" .. f))
      end
    end
    for f in lfs.dir("scripts/lib") do
      if f:match("%.lua$") then
        assert.are.equal(h.read("scripts/lib/" .. f), h.read(P .. "/share/roper/scripts/lib/" .. f))
      end
    end
    -- the shared library: soname and links
    assert.are.equal("libroper.so.0", lfs.symlinkattributes(P .. "/lib/libroper.so", "target"))
    local out, err, code = run("readelf -d " .. sh_quote(P .. "/lib/libroper.so.0"))
    assert.are.equal(0, code, err)
    assert.is_truthy(out:find("(SONAME)", 1, true) and out:find("[libroper.so.0]", 1, true), out)
    -- no private header
    assert.is_nil(lfs.attributes(P .. "/include/roper/model_impl.h"))
    assert.is_nil(lfs.attributes(P .. "/include/roper/simd.h"))
    assert.is_nil(lfs.attributes(P .. "/include/roper/tokenizer_spm.h"))
  end)

  it("puts the PyTorch companion where Debian's python3 imports it: roper_torch.RoPER works",
    function()
      assert.is_true(installed, install_err)
      local PY = "/usr/bin/python3"
      local ver, err, code = run(PY .. " -c "
        .. sh_quote('import sys; print("%d.%d" % sys.version_info[:2])'))
      assert.are.equal(0, code, err)
      -- the folder of PREFIX /usr/local that python3's site.py reads (the path without DESTDIR)
      local final = "/usr/local/lib/python" .. ver:gsub("\n$", "") .. "/dist-packages"
      local sites = run(PY .. [[ -c 'import site; print("\n".join(site.getsitepackages()))']])
      assert.truthy(("\n" .. sites):find("\n" .. final .. "\n", 1, true), sites)
      for f in lfs.dir("python/roper_torch") do
        if f:match("%.py$") or f:match("%.json$") then
          assert.are.equal(h.read("python/roper_torch/" .. f),
            h.read(D .. final .. "/roper_torch/" .. f), f)
        end
      end
      -- the installed copy imports from another folder (DESTDIR standing for /), Python writing
      -- its bytecode beside it as on a user's machine (make uninstall removes it: below)
      local out
      out, err, code = run(in_w .. "env -u PYTHONDONTWRITEBYTECODE PYTHONPATH="
        .. sh_quote(D .. final) .. " " .. PY .. " -c "
        .. sh_quote("import roper_torch; print(roper_torch.__file__); "
          .. "print(roper_torch.RoPER(dim=8).rotate_values(__import__('torch').ones(1, 1, 3, 8))"
          .. ".shape)"))
      if code ~= 0 and err:find("No module named 'torch'", 1, true) then
        return pending(PY .. " has no torch (apt-get install python3-torch; make test does)")
      end
      assert.are.equal(0, code, err)
      assert.are.equal(D .. final .. "/roper_torch/__init__.py\ntorch.Size([1, 1, 3, 8])\n", out)
      -- beside it, the path of the installed C library, whose core checks the companion's
      -- configs (roper_torch/core.py); here DESTDIR stands for /, so ROPER_LIB points at it
      assert.are.equal("/usr/local/lib/libroper.so.0\n",
        h.read(D .. final .. "/roper_torch/library.txt"))
      out, err, code = run(in_w .. "env -u PYTHONDONTWRITEBYTECODE ROPER_LIB="
        .. sh_quote(P .. "/lib/libroper.so.0") .. " PYTHONPATH=" .. sh_quote(D .. final) .. " "
        .. PY .. " -c " .. sh_quote("import roper_torch.core as c; print(c.LIB); "
          .. "import roper_torch as r\ntry: r.config(vocab=5, d_model=16, heads=3)\n"
          .. "except ValueError as e: print(e)"))
      assert.are.equal(0, code, err)
      assert.are.equal("True\nd_model 16 is not divisible by heads 3\n", out)
    end)

  it("registers the Jupyter kernel where Jupyter looks, naming the installed roper", function()
    assert.is_true(installed, install_err)
    local spec = cjson.decode(h.read(P .. "/share/jupyter/kernels/roper/kernel.json"))
    assert.are.same({ "/usr/bin/python3", "-m", "roper_kernel", "-f", "{connection_file}" }, spec.argv)
    assert.are.equal("roper (Lua 5.4)", spec.display_name)
    assert.are.equal("lua", spec.language)
    assert.are.equal("/usr/local/bin/roper", spec.env.ROPER_BIN)
    -- the companion's folder (PYDIR: where Debian's python3 reads PREFIX /usr/local's packages)
    local ver, err, code = run("/usr/bin/python3 -c "
      .. sh_quote('import sys; print("%d.%d" % sys.version_info[:2])'))
    assert.are.equal(0, code, err)
    local final = "/usr/local/lib/python" .. ver:gsub("\n$", "") .. "/dist-packages"
    assert.are.equal(final, spec.env.PYTHONPATH)
    for f in lfs.dir("python/roper_kernel") do
      if f:match("%.py$") then
        assert.are.equal(h.read("python/roper_kernel/" .. f),
          h.read(D .. final .. "/roper_kernel/" .. f), f)
      end
    end
  end)

  it("lua5.4 requires the installed module from another folder", function()
    assert.is_true(installed, install_err)
    local out, err, code = run(in_w .. CLEAN .. "LUA_CPATH=" .. sh_quote(P .. "/lib/lua/5.4/?.so;;")
      .. " " .. lua_env() .. "lua5.4 -e " .. sh_quote('local rp = require "roper" '
        .. 'print(package.searchpath("roper", package.cpath), rp.ones{2}:sum(), rp.mpi.plugin())'))
    assert.are.equal(0, code, err)
    -- the MPI plugin is found from the module's folder
    assert.are.equal(P .. "/lib/lua/5.4/roper.so\t2.0\t" .. P .. "/lib/roper/roper_mpi.so\n", out)
  end)

  it("the installed REPL runs from another folder and sets its environment itself", function()
    assert.is_true(installed, install_err)
    local out, err, code = run(in_w .. CLEAN .. sh_quote(P .. "/bin/roper")
      .. " -e 'print(rp.ones{2}) print(rp.mpi.plugin())'")
    assert.are.equal(0, code, err)
    assert.are.equal(" 1  1\n[2]\n" .. P .. "/lib/roper/roper_mpi.so\n", out)
    -- the policy is set by re-executing /proc/self/exe: the installed binary
    out, err, code = run(in_w .. CLEAN .. sh_quote(P .. "/bin/roper") .. " -v")
    assert.are.equal(0, code, err)
    assert.is_truthy(out:find("^roper %S+ ") and out:find("OpenMP wait policy: passive (set by roper)",
      1, true), out)
  end)

  it("runs a script command from any folder, also through a symlink, and roper scripts/NAME.lua",
    function()
      assert.is_true(installed, install_err)
      local path = "PATH=" .. sh_quote(P .. "/bin") .. ":\"$PATH\" "
      local out, err, code = run(in_w .. CLEAN .. path .. "roper-train " .. TINY
        .. " --out train.json")
      assert.are.equal(0, code, err .. out)
      local res = cjson.decode(h.read(W .. "/train.json") or "null")
      assert.are.equal(1, res and res.config.steps)
      -- a link to the command elsewhere finds the installed script and binary
      assert(os.execute("ln -s " .. sh_quote(P .. "/bin/roper-sweep") .. " " .. sh_quote(W .. "/sweep")))
      out, err, code = run(in_w .. CLEAN .. "./sweep --help")
      assert.are.equal(0, code, err)
      -- the help is the clone's, and says what the installed command is
      assert.is_truthy(out:find("^Usage: build/roper scripts/sweep.lua"), out)
      assert.is_truthy(out:find("after make install, roper-sweep is the same as", 1, true), out)
      -- the commands the docs print: roper scripts/NAME.lua takes the installed script
      out, err, code = run(in_w .. CLEAN .. path .. "roper scripts/train.lua --help")
      assert.are.equal(0, code, err)
      assert.is_truthy(out:find("^Usage: build/roper scripts/train.lua"), out)
      out, err, code = run(in_w .. CLEAN .. path .. "roper scripts/no_such_script.lua")
      assert.are.equal(1, code)
      assert.is_truthy(err:find("cannot open scripts/no_such_script.lua", 1, true), err)
    end)

  it("roper-compare starts its runs with the installed train.lua and roper", function()
    assert.is_true(installed, install_err)
    local out, err, code = run(in_w .. CLEAN .. sh_quote(P .. "/bin/roper-compare")
      .. " --methods rope --seeds 1 " .. TINY .. " --out cmp")
    assert.are.equal(0, code, err .. out)
    local res = cjson.decode(h.read(W .. "/cmp/runs/rope-s1.json") or "null")
    assert.are.equal("rope", res and res.config.pe)
  end)

  it("builds and runs a C program with pkg-config --cflags --libs roper", function()
    assert.is_true(installed, install_err)
    h.write(W .. "/prog.c", [[
#include <stdio.h>
#include <string.h>

#include <roper/rp.h>
#include <roper/task.h>
#include <roper/tokenizer.h>

/* the tokenizer (C++ inside, SentencePiece): a small BPE model trained, encode and decode */
static int tokenizer(void) {
    FILE *f = fopen("corpus.txt", "w");
    if (f == NULL) return 0;
    for (int i = 0; i < 40; i++) fputs("the quick brown fox jumps over the lazy dog\n", f);
    fclose(f);
    const char *inputs[] = {"corpus.txt"};
    rp_tok_train_cfg c = rp_tok_train_cfg_default();
    c.inputs = inputs;
    c.n_inputs = 1;
    c.vocab_size = 300;
    c.type = RP_TOK_BPE;
    c.threads = 1;
    rp_tok *t = NULL;
    if (rp_tok_train(&c, "tok.model", &t) != RP_OK) return 0;
    int32_t ids[64];
    int64_t n = 0;
    char out[64];
    size_t len = 0;
    int ok = rp_tok_encode(t, "the fox \xF0\x9F\x98\x80", 12, ids, 64, &n) == RP_OK &&
             rp_tok_decode(t, ids, n, out, sizeof out, &len) == RP_OK && len == 12 &&
             memcmp(out, "the fox \xF0\x9F\x98\x80", 12) == 0;
    rp_tok_free(t);
    return ok;
}

int main(void) {
    rp_tensor a, b, c;
    int64_t sa[2] = {2, 3}, sb[2] = {3, 2};
    if (rp_tensor_new(&a, 2, sa) != RP_OK || rp_tensor_new(&b, 2, sb) != RP_OK) return 1;
    rp_tensor_fill(&a, 1.0f);
    rp_tensor_fill(&b, 2.0f);
    if (rp_matmul(&c, &a, &b, 0) != RP_OK) return 1;
    const float *p = rp_tensor_data(&c);
    printf("roper %s: %g %g %g %g\n", RP_VERSION, (double)p[0], (double)p[1], (double)p[2],
           (double)p[3]);
    rp_tensor_release(&a);
    rp_tensor_release(&b);
    rp_tensor_release(&c);
    rp_task_cfg cfg = rp_task_cfg_default(RP_TASK_SUBSTR_INDEX);
    rp_task *t = rp_task_new(&cfg);
    rp_rng rng;
    char q[256], ans[256], cont[300];
    if (t == NULL) return 1;
    rp_rng_seed(&rng, 1);
    if (rp_task_problem(t, &rng, 0, q, sizeof q, ans, sizeof ans) != RP_OK) return 1;
    snprintf(cont, sizeof cont, "%s#", ans);
    printf("task check %d\n", rp_task_check(t, q, cont));
    rp_task_free(t);
    printf("tokenizer %d\n", tokenizer());
    return 0;
}
]])
    -- pkg-config finds the installed roper.pc; --define-prefix takes the prefix from where the
    -- file is (DESTDIR/usr/local), as for a copy of the tree moved elsewhere
    local pc = "PKG_CONFIG_PATH=" .. sh_quote(P .. "/lib/pkgconfig") .. " pkg-config --define-prefix "
    local flags, err, code = run(pc .. "--cflags --libs roper")
    assert.are.equal(0, code, err)
    assert.is_truthy(flags:find("-I" .. P .. "/include", 1, true), flags)
    assert.is_truthy(flags:find("-L" .. P .. "/lib -lroper", 1, true), flags)
    local san = sanitized and "-fsanitize=address,undefined " or ""
    local out
    out, err, code = run(in_w .. "cc -std=c11 -Wall -Wextra -Wpedantic -Werror " .. san
      .. "prog.c -o prog $(" .. pc .. "--cflags --libs roper)")
    assert.are.equal(0, code, err .. out)
    out, err, code = run(in_w .. "LD_LIBRARY_PATH=" .. sh_quote(P .. "/lib") .. " ./prog")
    assert.are.equal(0, code, err)
    assert.is_truthy(out:match("^roper [%d.]+: 6 6 6 6\ntask check 1\ntokenizer 1\n$"), out)
    -- it ran with the installed shared library
    out = run(in_w .. "LD_LIBRARY_PATH=" .. sh_quote(P .. "/lib") .. " ldd ./prog")
    assert.is_truthy(out:find("libroper.so.0 => " .. P .. "/lib/libroper.so.0", 1, true), out)
    -- statically: libroper.a with the private flags of roper.pc (OpenMP, OpenBLAS, SentencePiece,
    -- the C++ runtime, libm)
    local static_libs = run(pc .. "--static --libs roper")
    static_libs = static_libs:gsub("%-L%S+/usr/local/lib%s", ""):gsub("%-lroper%s", ""):gsub("%s+$", "")
    out, err, code = run(in_w .. "cc -std=c11 " .. san .. "prog.c -o prog-static $(" .. pc
      .. "--cflags roper) " .. sh_quote(P .. "/lib/libroper.a") .. " " .. static_libs
      .. " && ./prog-static")
    assert.are.equal(0, code, err .. out)
    assert.is_truthy(out:find(": 6 6 6 6\ntask check 1\ntokenizer 1\n", 1, true), out)
  end)

  it("installs headers that each compile on their own", function()
    assert.is_true(installed, install_err)
    local n = 0
    for f in lfs.dir(P .. "/include/roper") do
      if f:match("%.h$") then
        h.write(W .. "/one.c", "#include <roper/" .. f .. ">\nint main(void) { return 0; }\n")
        local out, err, code = run(in_w .. "cc -std=c11 -Wall -Wextra -Wpedantic -Werror -c one.c "
          .. "-o one.o -I" .. sh_quote(P .. "/include"))
        assert.are.equal(0, code, f .. ":\n" .. err .. out)
        n = n + 1
      end
    end
    assert.is_true(n >= 10, n .. " headers")
  end)

  local groff = os.execute("command -v groff >/dev/null 2>&1") == true
  local git = groff and it or pending
  git("installs roper(1), which groff renders without a warning (needs groff)", function()
    assert.is_true(installed, install_err)
    local page = sh_quote(P .. "/share/man/man1/roper.1")
    local out, err, code = run("groff -man -Tutf8 -ww -z " .. page)
    assert.are.equal(0, code, err)
    assert.are.equal("", err)
    out, err, code = run("groff -man -Tascii -P-c -P-b -P-u " .. page)
    assert.are.equal(0, code, err)
    for _, section in ipairs { "NAME", "SYNOPSIS", "OPTIONS", "SCRIPTS", "ENVIRONMENT", "FILES",
      "SEE ALSO" } do
      assert.is_truthy(out:find("\n" .. section .. "\n", 1, true), section .. " missing:\n" .. out)
    end
    -- the installed paths, not the template's names
    assert.is_truthy(out:find("/usr/local/share/roper/scripts", 1, true), out)
    assert.is_nil(out:find("@", 1, true), out)
  end)

  it("make uninstall removes what make install wrote, also after a second install, and only that",
    function()
      assert.is_true(installed, install_err)
      local out, err, code = make("install DESTDIR=" .. sh_quote(D) .. " PREFIX=/usr/local")
      assert.are.equal(0, code, err .. out)
      -- the bytecode of the installed Python modules, at every optimisation level, as importing
      -- them writes it (Debian's py3clean removes it with a package); and someone else's beside
      -- it, whose name begins as one of ours does, which stays
      local PY = "/usr/bin/python3"
      local info = assert(run(PY .. " -c " .. sh_quote('import sys; print("%d.%d" % '
        .. 'sys.version_info[:2]); print(sys.implementation.cache_tag)')))
      local ver, tag = info:match("^(%S+)\n(%S+)\n$")
      local site = "/usr/local/lib/python" .. ver .. "/dist-packages"
      out, err, code = run("env -u PYTHONDONTWRITEBYTECODE " .. PY
        .. " -m compileall -q -o 0 -o 1 -o 2 " .. sh_quote(D .. site .. "/roper_torch") .. " "
        .. sh_quote(D .. site .. "/roper_kernel"))
      assert.are.equal(0, code, err .. out)
      local torch_cache = site .. "/roper_torch/__pycache__"
      for _, f in ipairs { "/roper_torch/__pycache__/__init__." .. tag .. ".pyc",
        "/roper_torch/__pycache__/model." .. tag .. ".opt-2.pyc",
        "/roper_kernel/__pycache__/kernel." .. tag .. ".opt-1.pyc" } do
        assert.are.equal("file", lfs.attributes(D .. site .. f, "mode"), f)
      end
      -- the companion's pointer to the C library (written by make install, not in the tree)
      assert.are.equal("file", lfs.attributes(D .. site .. "/roper_torch/library.txt", "mode"))
      local other = torch_cache .. "/model_extra." .. tag .. ".pyc"
      h.write(D .. other, "not ours")
      out, err, code = make("uninstall DESTDIR=" .. sh_quote(D) .. " PREFIX=/usr/local")
      assert.are.equal(0, code, err .. out)
      local parents = {}
      local p = other
      repeat
        p = p:match("^(.*)/[^/]+$")
        if p ~= "/usr/local" and p ~= "/usr" then parents[#parents + 1] = p end
      until p == "/usr/local"
      local want = { "/usr", "/usr/local", "/usr/local/bin", "/usr/local/bin/other-tool", other }
      for _, q in ipairs(parents) do want[#want + 1] = q end
      table.sort(want)
      assert.are.same(want, tree(D))
      local ours = "removed " .. torch_cache .. "/__init__." .. tag .. ".pyc\n"
      assert.is_truthy(out:find(ours, 1, true), out)
      assert.is_nil(out:find("removed " .. torch_cache .. "/\n", 1, true), out)
      os.remove(D .. other)
      for _, q in ipairs(parents) do assert(lfs.rmdir(D .. q)) end
      assert.are.same({ "/usr", "/usr/local", "/usr/local/bin", "/usr/local/bin/other-tool" },
        tree(D))
      -- a second uninstall has nothing left to do
      out, err, code = make("uninstall DESTDIR=" .. sh_quote(D) .. " PREFIX=/usr/local")
      assert.are.equal(0, code, err .. out)
      assert.is_truthy(out:find("nothing to uninstall", 1, true), out)
    end)
end)

-- The installed kernel at work: make install-bin into a PREFIX (no DESTDIR, so the kernelspec's
-- paths are real), then jupyter_client starts the kernel from that PREFIX's share/jupyter, from
-- another folder, and runs a cell. Needs Debian's jupyter-client (make test installs it).
describe("the installed Jupyter kernel", function()
  it("starts from PREFIX/share/jupyter and runs a cell with the installed roper", function()
    local top = h.tmpdir()
    local P = top .. "/prefix"
    local out, err, code = make("install-bin PREFIX=" .. sh_quote(P))
    assert.are.equal(0, code, err .. out)
    local py = [[
import jupyter_client
km, kc = jupyter_client.manager.start_new_kernel(kernel_name="roper", startup_timeout=60)
try:
    msg_id = kc.execute("rp.ones{2}:sum(), os.getenv('ROPER_BIN')")
    while True:
        m = kc.get_iopub_msg(timeout=60)
        if m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "execute_result":
            print(m["content"]["data"]["text/plain"])
            break
finally:
    kc.stop_channels()
    km.shutdown_kernel()
]]
    h.write(top .. "/run.py", py)
    -- The kernel's own temporary folder (its pictures) goes under top/tmp, which a shutdown as a
    -- notebook asks for leaves empty.
    assert(lfs.mkdir(top .. "/tmp"))
    out, err, code = run("cd " .. sh_quote(top) .. " && JUPYTER_PATH=" .. sh_quote(P .. "/share/jupyter")
      .. " JUPYTER_RUNTIME_DIR=" .. sh_quote(top .. "/runtime") .. " TMPDIR=" .. sh_quote(top .. "/tmp")
      .. " timeout -k 5 120 /usr/bin/python3 run.py < /dev/null")
    assert.are.equal(0, code, err .. out)
    assert.are.equal("2.0\n" .. P .. "/bin/roper\n", out)
    assert.are.same({}, tree(top .. "/tmp"))
    out, err, code = make("uninstall PREFIX=" .. sh_quote(P))
    assert.are.equal(0, code, err .. out)
    h.remove_tree(top)
  end)
end)

-- DESTDIR is usually a fresh staging folder: make install failed at its first mkdir when the
-- folder did not exist yet (issue 29).
describe("make install into a DESTDIR that does not exist yet", function()
  it("creates it with its parents; make uninstall leaves it empty", function()
    local top = h.tmpdir()
    local D = top .. "/stage/root"
    local out, err, code = make("install-lua DESTDIR=" .. sh_quote(D) .. " PREFIX=/usr/local")
    assert.are.equal(0, code, err .. out)
    local files = {}
    for _, p in ipairs(tree(D)) do
      if lfs.attributes(D .. p, "mode") == "file" then files[#files + 1] = p end
    end
    assert.are.same({ "/usr/local/lib/lua/5.4/roper.so", "/usr/local/lib/roper/roper_mpi.so",
      "/usr/local/share/doc/roper/LICENSE", "/usr/local/share/roper/install-manifest.txt" }, files)
    out, err, code = make("uninstall DESTDIR=" .. sh_quote(D) .. " PREFIX=/usr/local")
    assert.are.equal(0, code, err .. out)
    assert.are.same({}, tree(D))
    h.remove_tree(top)
  end)
end)

-- Every script of scripts/ (the README: each prints its options with --help), so a new one that
-- requires lib/ without the two lines at its top that find it fails here.
describe("the scripts under a plain lua5.4", function()
  it("each finds its lib/ from another folder (--help)", function()
    local W = h.tmpdir()
    local n = 0
    for f in lfs.dir("scripts") do
      if f:match("%.lua$") then
        local out, err, code = run("cd " .. sh_quote(W) .. " && " .. CLEAN .. "LUA_CPATH="
          .. sh_quote(BUILD_ABS .. "/?.so;;") .. " " .. lua_env() .. "lua5.4 "
          .. sh_quote(ROOT .. "/scripts/" .. f) .. " --help")
        assert.are.equal(0, code, f .. ": " .. err)
        assert.is_truthy(#out > 0, f .. ": no help text")
        n = n + 1
      end
    end
    h.remove_tree(W)
    assert.is_true(n >= 5, n .. " scripts")
  end)
end)

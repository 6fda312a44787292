# roper: `make test` and `make run` set up everything on a fresh Debian 12 machine (as root).
#
#   make            build the library, the Lua module build/roper.so and the REPL build/roper
#   make test       install what is missing (and python3-numpy and python3-torch for the live
#                   NumPy and PyTorch round trips and the PyTorch companion's tests,
#                   chromium-headless-shell to open report.html in a browser), build, run the C
#                   tests and the busted specs
#   make run        install what is missing, build, run the main job: RoPE vs RoPER on substring
#                   by prefix, 3 seeds each (about 5 minutes of 2 cores): tables, plots and
#                   report.html (open it in a browser) in results/run/, which opens with what the
#                   run shows and the committed study of the same question beside it. Substring
#                   by prefix because its difference shows in 3 seeds (roper's loss was lower on
#                   all 10 seeds of the study, docs/results.md); substring by index, the
#                   write-up's biggest gap, is learned in a jump by some seeds and not by others,
#                   so 3 seeds of it cannot tell the methods apart (RUN_ARGS="--task
#                   substring_index --seeds 3 --jump-loss 1.5" runs it; see compare.lua --help-all)
#   make bench      sgemm GFLOPS, OpenBLAS core, attention timings (forward + backward's share
#                   of the sgemm peak) and GELU timings, training steps (ms,
#                   share of the sgemm peak, peak RSS, the S step beside a busy process; L8, L32:
#                   a language model's step at 8k and 32k pieces, the output layer's share), decoding
#                   of the S model on 1 and N threads (rp.eval.accuracy problems/s, m:generate and
#                   m:generate_batch tokens/s: tests/bench/bench_decode.lua), and the S and P
#                   steps on 1 process x N threads against N ranks x 1 thread (MPI)
#   make bench-torch   the S training step in roper and in PyTorch (the companion's model,
#                   python/roper_torch) in one run, and the ratio, after the companion's cos/sin
#                   tables at 131,072 positions (installs Debian's python3-torch when missing;
#                   not part of make test/run)
#   make corpus    the default corpus for language modelling (docs/language_model.md): installs
#                   Debian's linux-doc-6.1 when missing (never plain make), cleans and splits the
#                   kernel's documentation into $(CORPUS_OUT) with a manifest of checksums
#   make test SANITIZE=1   the same suite under ASan + UBSan (separate build dir)
#   make check-build   the compiler matrix: every C file with -Werror for GCC at four -march
#                   targets (x86-64-v2, x86-64-v3, Intel's AVX-512 servers, AMD) and clang;
#                   bench's attention line for each target this CPU runs (CI runs it)
#   make test-aarch64  the aarch64 build (build-aarch64/: Debian's cross compiler and arm64
#                   packages, installed when missing; never part of make, make test or make run)
#                   and its C tests and a REPL smoke test under qemu-user: tests/cross/aarch64
#   WERROR=1        warnings as errors (check-build and CI; a user's build never stops on one)
#   MARCH=<cpu>     the default build's -march (native); MARCH=x86-64-v3 builds for any AVX2 CPU.
#                   A build folder records its compiler and flags ($(BUILD)/flags): make with
#                   other ones (MARCH, OPT, CC, NO_OMP, ...) compiles it again
#   make install    the REPL, the scripts, the PyTorch companion, the Lua module, the C library
#                   (static and shared) with its headers and roper.pc, the man page; PREFIX
#                   (/usr/local) and DESTDIR as usual; make uninstall removes exactly what it
#                   installed and the bytecode Python wrote for its modules (see "install" below)
#   PORTABLE=1      the portable build in build-portable/: -march=x86-64-v3 and OpenBLAS's Haswell
#                   kernels on every CPU, so a run gives the same bits on every such machine
#                   (slower on AVX-512 CPUs; docs/experiments.md "Runs that reproduce anywhere")
#   NO_OMP=1        build without OpenMP
#   NO_SENTENCEPIECE=1  build without SentencePiece (no libsentencepiece, no libstdc++): the
#                   tokenizer is text/tokenizer_none.c, whose rp.tokenizer.train and load return nil
#                   and "roper was built without SentencePiece (NO_SENTENCEPIECE=1)"; for a
#                   machine without the library's package (make test-aarch64 sets it)

SHELL := /bin/bash

# The CPU the default build targets (-march=$(MARCH)); the portable and sanitizer builds keep theirs.
MARCH ?= native

# Debian packages the project needs (installed by `make deps` only when missing).
PACKAGES := gcc make pkg-config lua5.4 liblua5.4-dev libopenblas-dev lua-busted libreadline-dev \
            gnuplot-nox lua-argparse lua-cjson lua-penlight lua-filesystem lua-system lua-luv fortunes lua-dkjson \
            parallel openmpi-bin libopenmpi-dev g++ $(if $(filter 1,$(NO_SENTENCEPIECE)),,libsentencepiece-dev)

ifeq ($(SANITIZE),1)
  BUILD := build-san
  SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
  OPT := -O1
else ifeq ($(PORTABLE),1)
  # the portable build (core/sys/build.h): the same bits on every x86-64-v3 CPU
  BUILD := build-portable
  SANFLAGS :=
  OPT := -O2 -march=x86-64-v3 -DRP_PORTABLE=1
else
  BUILD := build
  SANFLAGS :=
  OPT := -O2 -march=$(MARCH) $(if $(filter-out native,$(MARCH)),-DRP_MARCH='"$(MARCH)"')
endif

ifeq ($(NO_OMP),1)
  OMPFLAGS :=
else
  OMPFLAGS := -fopenmp
endif

# core's floors, lowest first (tests/lua/layering_spec.lua checks that each includes and calls only
# its own and lower ones): sys (status, checked sizes, build, memory, threads, dist, BLAS), tensor,
# nn (rope, positional modes, attention, layers, optimiser), model, io (files). Sources include a
# header by its name; every floor is on the include path.
CORE_DIRS := core/sys core/tensor core/nn core/config core/model core/io
# The tokenizer (text/: SentencePiece behind a C interface, text/tokenizer.h) sits on core: its C
# part (tokenizer.c) uses core's files and status; tokenizer_spm.cc, C++, is the only code that
# calls the library (libsentencepiece, C++). It is part of the C library. tokenizer_options.c (the
# options and their checks) is in every build; NO_SENTENCEPIECE=1 builds tokenizer_none.c (the same
# interface, every call that needs the library refused) in place of tokenizer.c and the C++ unit,
# and links neither libsentencepiece nor libstdc++.
TEXT_DIR := text
TOK_NONE_SRC := $(TEXT_DIR)/tokenizer_none.c
ifeq ($(NO_SENTENCEPIECE),1)
  TEXT_SRC := $(TEXT_DIR)/tokenizer_options.c $(TOK_NONE_SRC)
  TEXT_CXX_SRC :=
else
  TEXT_SRC := $(filter-out $(TOK_NONE_SRC),$(wildcard $(TEXT_DIR)/*.c))
  TEXT_CXX_SRC := $(wildcard $(TEXT_DIR)/*.cc)
endif
# Warnings are on in every build and kept at zero, but a warning never stops a user's build (a
# new compiler or -march may add one): WERROR=1 makes them errors, for the checks (make
# check-build, CI's compiler matrix).
WARN := -Wall -Wextra -Wpedantic -Wshadow -Wdouble-promotion -Wstrict-prototypes \
        -Wmissing-prototypes -Wformat=2 -Wundef -Wvla -Wno-unused-parameter
ifeq ($(WERROR),1)
  WARN += -Werror
endif
LUA_CFLAGS = $(shell pkg-config --cflags lua5.4 2>/dev/null)
BLAS_CFLAGS = $(shell pkg-config --cflags openblas 2>/dev/null)
# Debug information (-g) in every build; the compiler matrix (tests/check_build), which keeps no
# binary to debug, passes DEBUG_FLAGS=-g0 (a sixth less compile time; -g changes neither the code
# GCC makes nor its warnings).
DEBUG_FLAGS := -g
CFLAGS := -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE $(OPT) $(DEBUG_FLAGS) -fPIC $(WARN) \
          $(OMPFLAGS) $(SANFLAGS) -Icore $(addprefix -I,$(CORE_DIRS)) -I$(TEXT_DIR) -Itasks
# The C++ unit (text/*.cc) is compiled by the same driver as the C files (gcc and clang choose C++
# by the extension), with the C warnings that apply to C++; linked with libstdc++.
CXXWARN := -Wall -Wextra -Wpedantic -Wshadow -Wdouble-promotion -Wformat=2 -Wundef -Wvla \
           -Wno-unused-parameter $(if $(filter 1,$(WERROR)),-Werror)
CXXFLAGS := -std=c++17 $(OPT) $(DEBUG_FLAGS) -fPIC $(CXXWARN) $(SANFLAGS) -I$(TEXT_DIR)
ifeq ($(NO_SENTENCEPIECE),1)
  SPM_LIBS :=
else
  SPM_LIBS = $(or $(shell pkg-config --libs sentencepiece 2>/dev/null),-lsentencepiece -lsentencepiece_train) -lstdc++
endif
LDLIBS = $(SPM_LIBS) -lopenblas -lm
LDFLAGS := $(OMPFLAGS) $(SANFLAGS)
# Each compile also writes the project's headers its target includes, as make rules (-MMD; -MP: a
# deleted header breaks no build), to the target's name with .d in place of .o (or added); the
# build includes them (DEP_TARGETS below), so editing a header rebuilds only what includes it.
DEPFLAGS = -MMD -MP -MF $(basename $@).d

CORE_SRC := $(wildcard $(addsuffix /*.c,$(CORE_DIRS))) $(TEXT_SRC) $(wildcard tasks/*.c)
CORE_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(CORE_SRC)) $(patsubst %.cc,$(BUILD)/obj/%.o,$(TEXT_CXX_SRC))
BIND_SRC := $(wildcard bindings/*.c)
BIND_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(BIND_SRC)) $(BUILD)/obj/roper_lua.o
LUA_SRC := $(sort $(shell find bindings/lua -name '*.lua'))
CTEST_SRC := $(wildcard tests/c/test_*.c)
CTEST_BIN := $(patsubst tests/c/%.c,$(BUILD)/tests/%,$(CTEST_SRC))

# The version (also the C library's) is RP_VERSION of core/rp.h; the shared library's soname is
# libroper.so.$(SOVERSION).
VERSION := $(shell sed -n 's/^\#define RP_VERSION "\(.*\)"/\1/p' core/rp.h)
SOVERSION := 0

LIB := $(BUILD)/libroper.a
SHLIB := $(BUILD)/libroper.so.$(VERSION)
MODULE := $(BUILD)/roper.so
REPL := $(BUILD)/roper
# A program started with the environment its roper process should have (OpenBLAS's kernels, the
# OpenMP wait policy), as this variant's roper answers (tests/with_blas_env asks $(BUILD)/roper)
WITH_BLAS_ENV := BUILD=$(BUILD) tests/with_blas_env
BENCH := $(BUILD)/bench
BENCH_TRAIN := $(BUILD)/bench_train
# The MPI plugin (mpi/roper_mpi.c): opened by core/sys/dist.c only when mpirun or srun started the
# process, so nothing else links libmpi.
MPI_PLUGIN := $(BUILD)/roper_mpi.so
MPI_CFLAGS = $(patsubst -I%,-isystem %,$(shell pkg-config --cflags ompi-c 2>/dev/null))
MPI_LIBS = $(shell pkg-config --libs ompi-c 2>/dev/null)

.PHONY: all deps test test-c test-lua test-cluster run corpus bench bench-torch clean portable check-build \
        check-objs install install-lua install-bin install-lib uninstall test-aarch64 notebooks notebook
.DELETE_ON_ERROR:

all: $(LIB) $(SHLIB) $(MODULE) $(REPL) $(MPI_PLUGIN) $(CTEST_BIN) $(BENCH) $(BENCH_TRAIN)

# Installs only the packages that are missing; does nothing (and needs no network) otherwise. One
# dpkg-query for them all (every make runs this: one each took seconds); a name, or name:arch,
# counts as installed when one of its architectures' lines says so.
deps:
	@installed=" $$(dpkg-query -W -f='$${Package} $${Package}:$${Architecture} $${Status}\n' \
	  $(PACKAGES) 2>/dev/null | awk '/ ok installed$$/ { printf "%s %s ", $$1, $$2 }')"; \
	missing=""; for p in $(PACKAGES); do \
	  case "$$installed" in *" $$p "*) ;; *) missing="$$missing $$p" ;; esac; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing </dev/null; \
	fi

# The build folder records the compiler and the flags its files are made with in $(BUILD)/flags
# (one line each, below), checked on every make and rewritten only when it changes; every object
# and program compiled here depends on it. So a change of MARCH, OPT, CC, NO_OMP,
# NO_SENTENCEPIECE, WERROR or DEBUG_FLAGS compiles the folder again, and `make
# MARCH=sapphirerapids` then `make` no longer links objects made for another CPU (PORTABLE=1 and
# SANITIZE=1 build in folders of their own; given one folder with BUILD=, they too compile it
# again: tests/lua/build_flags_spec.lua). A folder built before the record existed is compiled
# again once. The text is written by make itself ($(file)), so quotes need no escaping.
BUILD_FLAGS := $(BUILD)/flags
define BUILD_FLAGS_TEXT
CC $(CC)
CFLAGS $(CFLAGS)
CXXFLAGS $(CXXFLAGS)
LUA_CFLAGS $(LUA_CFLAGS)
BLAS_CFLAGS $(BLAS_CFLAGS)
MPI_CFLAGS $(MPI_CFLAGS)
LDFLAGS $(LDFLAGS)
LDLIBS $(LDLIBS)
NO_SENTENCEPIECE $(NO_SENTENCEPIECE)
endef
$(BUILD_FLAGS): FORCE | deps
	@$(shell mkdir -p $(dir $@))$(file >$@.new,$(BUILD_FLAGS_TEXT))
	@if cmp -s $@.new $@; then rm -f $@.new; else \
	  if [ -e $@ ]; then \
	    echo "$@: the compiler or its flags changed, so $(BUILD) is compiled again"; fi; \
	  mv -f $@.new $@; fi

$(BUILD)/obj/%.o: %.c $(BUILD_FLAGS) | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) $(LUA_CFLAGS) $(BLAS_CFLAGS) -Ibindings -c $< -o $@

$(BUILD)/obj/%.o: %.cc $(BUILD_FLAGS) | deps
	@mkdir -p $(dir $@)
	$(CC) $(CXXFLAGS) $(DEPFLAGS) -c $< -o $@

$(LIB): $(CORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The shared C library: the objects of libroper.a, linked with what they use (-z defs: nothing
# left for the program to provide).
$(SHLIB): $(CORE_OBJ)
	$(CC) -shared $(LDFLAGS) -Wl,-soname,libroper.so.$(SOVERSION) -Wl,-z,defs -o $@ $^ $(LDLIBS)

# The help texts of rp.help come from docs/lua_api.md: bindings/gen_help.lua turns it into a Lua
# module (roper.help_data, which bindings/lua/help.lua requires), generated here and never in the
# tree; it wraps the texts with bindings/lua/text_wrap.lua.
HELP_DATA := $(BUILD)/gen/lua/help_data.lua
$(HELP_DATA): bindings/gen_help.lua bindings/lua/text_wrap.lua docs/lua_api.md | deps
	@mkdir -p $(dir $@)
	lua5.4 bindings/gen_help.lua docs/lua_api.md > $@

# The source commit of rp.build_info(): `git describe --always --dirty` at build time ("unknown"
# outside a git checkout), as a Lua module (roper.build_stamp, which bindings/lua/build_info.lua
# requires). Checked on every make (FORCE), rewritten only when it changes.
BUILD_INFO := $(BUILD)/gen/lua/build_stamp.lua
$(BUILD_INFO): bindings/gen_build_info.lua FORCE | deps
	@mkdir -p $(dir $@)
	@lua5.4 bindings/gen_build_info.lua $@
FORCE:

# The Lua modules are compiled into the module (bindings/embed.lua writes C arrays; a file's
# module name comes from its path below the last folder named lua).
$(BUILD)/roper_lua.c: bindings/embed.lua $(LUA_SRC) $(HELP_DATA) $(BUILD_INFO) | deps
	@mkdir -p $(dir $@)
	lua5.4 bindings/embed.lua $(LUA_SRC) $(HELP_DATA) $(BUILD_INFO) > $@

$(BUILD)/obj/roper_lua.o: $(BUILD)/roper_lua.c $(BUILD_FLAGS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) $(LUA_CFLAGS) -Ibindings -c $< -o $@

# The module links no liblua: lua5.4 exports the API itself. -z nodelete keeps it (and libgomp)
# mapped when lua_close unloads it, so OpenMP worker threads never run in unmapped code at exit.
$(MODULE): $(BIND_OBJ) $(LIB)
	$(CC) -shared $(LDFLAGS) -Wl,-z,nodelete -o $@ $(BIND_OBJ) $(LIB) $(LDLIBS)

$(MPI_PLUGIN): mpi/roper_mpi.c $(BUILD_FLAGS) | deps
	$(CC) $(CFLAGS) $(DEPFLAGS) $(MPI_CFLAGS) -shared -o $@ $< $(LDFLAGS) $(MPI_LIBS)

# The REPL program (repl/): the module's objects linked with liblua and readline. It includes
# the module's headers (-Ibindings); the module never includes repl/'s.
REPL_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard repl/*.c))
$(REPL): $(REPL_OBJ) $(BIND_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ -llua5.4 -lreadline $(LDLIBS)

$(BUILD)/tests/%: tests/c/%.c $(LIB) $(BUILD_FLAGS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) $(BLAS_CFLAGS) -Itests/c $< -o $@ $(LDFLAGS) $(LIB) $(LDLIBS)

$(BENCH) $(BENCH_TRAIN): $(BUILD)/%: tests/bench/%.c tests/bench/bench_common.c $(LIB) \
                          $(BUILD_FLAGS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) $(BLAS_CFLAGS) $< -o $@ $(LDFLAGS) $(LIB) $(LDLIBS)

# python3-numpy (small) lets interop_spec's live NumPy round trip run; python3-torch (large: ~1 GB
# with its libraries) its PyTorch round trip and torch_companion_spec, which compares the PyTorch
# companion (python/roper_torch) with roper in every run, so neither is left pending.
# python3-sentencepiece and sentencepiece (the spm_* tools) are the references of tokenizer_spec:
# the same ids for the same .model in Python, in spm_encode and here.
# chromium-headless-shell (Debian's browser without its window, ~200 MB with its libraries) lets
# html_report_spec load report.html, read its tables and take a screenshot.
# The Jupyter kernel's packages (docs/notebooks.md): kernel_spec drives it through jupyter_client,
# notebooks_spec executes notebooks/ with nbclient and opens the notebook server in
# chromium-headless-shell; make notebook runs the server. Not needed by plain make.
JUPYTER_PACKAGES := python3-ipykernel jupyter-client python3-nbclient jupyter-nbconvert jupyter-notebook
test: deps all portable
	@$(MAKE) --no-print-directory deps PACKAGES="python3-numpy python3-torch chromium-headless-shell python3-sentencepiece sentencepiece $(JUPYTER_PACKAGES)"
	@BUILD=$(BUILD) SANITIZE=$(SANITIZE) tests/run

# The portable REPL (make PORTABLE=1: -march=x86-64-v3, OpenBLAS's Haswell kernels on every CPU;
# core/sys/build.h), for portable_spec's check that it reproduces a committed run bit for bit.
portable:
	@$(MAKE) --no-print-directory PORTABLE=1 SANITIZE= build-portable/roper

# The compiler matrix (tests/check_build, which says which targets and why; CI runs it): every C
# file of core/, text/ (and its C++ unit), tasks/, bindings/, repl/ and mpi/ compiled with -Werror
# for GCC at x86-64-v2, x86-64-v3 and the Intel and AMD -march names that users' servers get, and
# for Debian's clang at native, each in build-check/<cc>-<march>/; the attention line of the bench
# for every target this CPU runs.
check-build: deps
	@$(MAKE) --no-print-directory deps PACKAGES="clang libomp-dev"
	@tests/check_build

# Compile only: check-build's unit (make CC=... BUILD=... OPT=... WERROR=1 check-objs).
# The tokenizer of NO_SENTENCEPIECE=1 builds is compiled in every build's check too.
check-objs: $(CORE_OBJ) $(patsubst %.c,$(BUILD)/obj/%.o,$(TOK_NONE_SRC)) $(BIND_OBJ) $(REPL_OBJ) \
            $(BUILD)/obj/mpi/roper_mpi.o

$(BUILD)/obj/mpi/roper_mpi.o: mpi/roper_mpi.c $(BUILD_FLAGS) | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) $(MPI_CFLAGS) -c $< -o $@

# Every target compiled with DEPFLAGS and the .d file the compiler wrote for it (none before its
# first build). One without its .d (built by a Makefile that wrote none) is built again once.
DEP_TARGETS := $(CORE_OBJ) $(patsubst %.c,$(BUILD)/obj/%.o,$(TOK_NONE_SRC)) $(BIND_OBJ) \
               $(REPL_OBJ) $(MPI_PLUGIN) $(BUILD)/obj/mpi/roper_mpi.o $(CTEST_BIN) $(BENCH) \
               $(BENCH_TRAIN)
-include $(addsuffix .d,$(basename $(DEP_TARGETS)))
$(foreach t,$(DEP_TARGETS),$(if $(wildcard $(basename $(t)).d),,$(t))): FORCE

# The aarch64 build (tests/cross/aarch64; CI runs it): the library, the Lua module, the REPL and the
# C tests cross-compiled with Debian's gcc-aarch64-linux-gnu against its arm64 packages (multiarch)
# in build-aarch64/ at -O2 (generic armv8-a) with -Werror, then the C tests and smoke tests of the
# REPL under qemu-user. Installs what is missing (the arm64 architecture and packages, the cross
# compiler, qemu-user), as `deps` does: only when dpkg-query says it is not there.
test-aarch64:
	@tests/cross/aarch64

# compare.lua --slurm on a one-node Slurm that tests/cluster/run installs (Debian's slurmctld,
# slurmd, slurm-client, munge), starts in a private folder, uses and stops again.
test-cluster: deps all
	@ROPER_BIN=$(REPL) $(WITH_BLAS_ENV) tests/cluster/run

RUN_ARGS ?= --task substring_prefix --seeds 3
run: deps all
	@$(WITH_BLAS_ENV) $(REPL) scripts/compare.lua --out results/run $(RUN_ARGS)

# The default corpus (scripts/corpus.lua; docs/language_model.md): the Linux kernel's documentation
# as Debian's linux-doc-6.1 ships it, installed here only when the corpus is asked for.
CORPUS_OUT ?= data/linux-doc
corpus: deps all
	@$(MAKE) --no-print-directory deps PACKAGES=linux-doc-6.1
	@$(REPL) scripts/corpus.lua --out $(CORPUS_OUT)

# BENCH_MODELS="S M" limits the training part (P takes minutes; S M P L8 L32 and the language-model
# study's sizes LM2s LM2m LM2l, on 1 thread as the study runs them: `make bench PORTABLE=1
# BENCH_MODELS="LM2s LM2m LM2l"` times the study's own build); the data-parallel part
# (tests/bench/mpi_bench: 1 process x N threads against N ranks x 1 thread) runs S and P of them.
bench: deps all
	@$(WITH_BLAS_ENV) $(BENCH)
	@echo
	@$(WITH_BLAS_ENV) $(BENCH_TRAIN) $(BENCH_MODELS)
	@echo
	@OMP_NUM_THREADS=1 $(WITH_BLAS_ENV) $(REPL) tests/bench/bench_decode.lua
	@if [ "$$(nproc)" -gt 1 ]; then $(WITH_BLAS_ENV) $(REPL) tests/bench/bench_decode.lua; fi
	@echo
	@ROPER_BIN=$(abspath $(REPL)) $(WITH_BLAS_ENV) tests/bench/mpi_bench $(or $(BENCH_MODELS),S M P)

# The S step in roper (bench_train) and in PyTorch (tests/reference/bench_torch.py: the companion's
# RoperTransformer, python/roper_torch, on Debian's /usr/bin/python3 and python3-torch, installed
# here through `deps` when missing) on the same threads and OpenBLAS kernels (both under
# tests/with_blas_env), then roper's time / PyTorch's.
BENCH_TORCH_OUT := $(BUILD)/bench-torch
bench-torch: deps all
	@$(MAKE) --no-print-directory deps PACKAGES=python3-torch
	@set -o pipefail; threads=$${OMP_NUM_THREADS:-$$(nproc)}; \
	$(WITH_BLAS_ENV) $(BENCH_TRAIN) S | tee $(BENCH_TORCH_OUT).roper.txt && echo && \
	OMP_NUM_THREADS=$$threads OPENBLAS_NUM_THREADS=$$threads \
	  $(WITH_BLAS_ENV) /usr/bin/python3 tests/reference/bench_torch.py S \
	  | tee $(BENCH_TORCH_OUT).torch.txt && echo && \
	awk -v threads=$$threads ' \
	  $$1 == "S" && $$6 == "ms/step" { if (FNR == NR) r[$$2] = $$5; else t[$$2] = $$5 } \
	  END { printf "S step, roper / PyTorch (%d threads):\n", threads; bad = 0; \
	        for (i = 1; i <= 2; i++) { pe = i == 1 ? "rope" : "roper"; \
	          if (!(pe in r) || !(pe in t) || t[pe] <= 0) { print "  " pe ": missing"; bad = 1; continue } \
	          printf "  %-6s roper %9.1f ms  PyTorch %9.1f ms  ratio %.3f (roper %.2fx as fast)\n", \
	                 pe, r[pe], t[pe], r[pe] / t[pe], t[pe] / r[pe] } \
	        exit bad }' $(BENCH_TORCH_OUT).roper.txt $(BENCH_TORCH_OUT).torch.txt

# ---- install ----------------------------------------------------------------------------------
# make install [PREFIX=/usr/local] [DESTDIR=<staging root, created when missing>]; make uninstall
# the same way.
#
#   install-bin   $(BINDIR)/roper                the REPL (built as build/roper)
#                 $(BINDIR)/roper-<name>         runs scripts/<name>.lua (_ becomes -), one for
#                                                every script: packaging/roper-script.in
#                 $(SCRIPTDIR)/                  scripts/*.lua and scripts/lib/*.lua
#                 $(PYDIR)/roper_torch/          python/roper_torch/*.py and schema.json, the
#                                                PyTorch companion (docs/interop.md), where
#                                                Debian's python3 imports it (below), and
#                                                library.txt: the path of libroper.so.0
#                                                (install-lib), whose core checks its configs
#                 $(PYDIR)/roper_kernel/         python/roper_kernel/*.py, the Jupyter kernel
#                 $(JUPYTERDIR)/kernels/roper/kernel.json  its kernelspec (what `jupyter kernelspec
#                                                install --prefix PREFIX` writes; written by
#                                                python/roper_kernel/spec.py: runs $(BINDIR)/roper)
#                 $(MANDIR)/man1/roper.1         packaging/roper.1.in
#   install-lua   $(LUA_CMODDIR)/roper.so        the Lua module: require "roper" in lua5.4
#   each          $(LIBDIR)/roper/roper_mpi.so   the MPI plugin (loaded only under mpirun)
#   install-lib   $(LIBDIR)/libroper.a, libroper.so.$(VERSION), .so.$(SOVERSION), .so
#                 $(INCLUDEDIR)/roper/*.h        #include <roper/rp.h>, <roper/task.h>,
#                                                <roper/tokenizer.h>
#                 $(PKGCONFIGDIR)/roper.pc       pkg-config --cflags --libs roper
#   each          $(DOCDIR)/LICENSE
#
# Every folder can be set on its own. Lua's own folder for C modules, PREFIX/lib/lua/5.4, is on
# lua5.4's package.cpath for both /usr/local and /usr (pkg-config's INSTALL_CMOD of lua5.4 is
# Debian's multiarch folder, which lua5.4 searches under /usr only). The installs build only what
# they copy, from $(BUILD) (SANITIZE=1: build-san). packaging/install.sh copies, and records what
# it wrote and the folders it made in $(MANIFEST); make uninstall removes exactly those, and the
# bytecode that Python wrote for the installed .py files (__pycache__/NAME.*.pyc beside them, as
# Debian's py3clean removes a package's: importing the companion or the kernel writes it).
PREFIX = /usr/local
BINDIR = $(PREFIX)/bin
LIBDIR = $(PREFIX)/lib
INCLUDEDIR = $(PREFIX)/include
DATADIR = $(PREFIX)/share
MANDIR = $(DATADIR)/man
DOCDIR = $(DATADIR)/doc/roper
PKGCONFIGDIR = $(LIBDIR)/pkgconfig
LUA_CMODDIR = $(LIBDIR)/lua/5.4
SCRIPTDIR = $(DATADIR)/roper/scripts
# The companion's folder is one that Debian's /usr/bin/python3 reads (its site.py: Debian's own
# packages in /usr/lib/python3/dist-packages, local ones in /usr/local/lib/python3.X/dist-packages,
# X its minor version): the first for PREFIX=/usr, else $(PREFIX)/lib/python3.X/dist-packages
# (read for /usr/local; under another PREFIX the user puts it on PYTHONPATH).
PYTHON3 = /usr/bin/python3
PY_VERSION = $(shell $(PYTHON3) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
PYDIR_VERSIONED = $(PREFIX)/lib/python$(or $(PY_VERSION),3)/dist-packages
PYDIR = $(if $(filter /usr,$(PREFIX)),$(PREFIX)/lib/python3/dist-packages,$(PYDIR_VERSIONED))
JUPYTERDIR = $(DATADIR)/jupyter
MANIFEST = $(DATADIR)/roper/install-manifest.txt

# The headers a C user needs: all of core/ and tasks/ but the insides of the implementation.
PRIVATE_HEADERS := $(wildcard core/*/*_impl.h tasks/*_impl.h) $(TEXT_DIR)/tokenizer_spm.h \
                   core/tensor/simd.h core/tensor/tile.h core/sys/parallel.h
PUBLIC_HEADERS := $(filter-out $(PRIVATE_HEADERS),$(wildcard core/*.h core/*/*.h $(TEXT_DIR)/*.h tasks/*.h))
SCRIPTS := $(wildcard scripts/*.lua)
SCRIPT_LIBS := $(wildcard scripts/lib/*.lua)
PYTHON_PKG := $(wildcard python/roper_torch/*.py python/roper_torch/*.json)
KERNEL_PKG := $(wildcard python/roper_kernel/*.py)

# Lines of packaging/install.sh's list: $(call inst_file,MODE,SOURCE,PATH), $(call inst_link,TARGET,PATH)
inst_file = printf 'file\t%s\t%s\t%s\n' "$(1)" "$(2)" "$(3)";
inst_link = printf 'link\t%s\t%s\n' "$(1)" "$(2)";
INSTALL_RUN = packaging/install.sh install '$(DESTDIR)' '$(MANIFEST)'
# The generated files are written to a temporary folder ($$tmp), never into the build.
TMP_BEGIN = tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT &&
# @NAME@ -> installed path, for the templates in packaging/
SUBST = sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@BINDIR@|$(BINDIR)|g' \
            -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
            -e 's|@PKGCONFIGDIR@|$(PKGCONFIGDIR)|g' -e 's|@LUA_CMODDIR@|$(LUA_CMODDIR)|g' \
            -e 's|@SCRIPTDIR@|$(SCRIPTDIR)|g' -e 's|@DOCDIR@|$(DOCDIR)|g' -e 's|@JUPYTERDIR@|$(JUPYTERDIR)|g'
# the C library's private link flags (static linking): OpenMP's runtime, the C++ runtime (the
# tokenizer's unit) and libm; sentencepiece and openblas come through Requires.private (neither
# sentencepiece nor libstdc++ in a NO_SENTENCEPIECE=1 build)
PC_LIBS_PRIVATE := $(if $(OMPFLAGS),-lgomp )$(if $(TEXT_CXX_SRC),-lstdc++ )-lm
PC_REQUIRES_PRIVATE := openblas$(if $(TEXT_CXX_SRC), sentencepiece)
# ldconfig after a real install as root, so the shared library is found at once
LDCONFIG = if [ -z '$(DESTDIR)' ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi

install: install-bin install-lua install-lib

install-bin: $(REPL) $(MPI_PLUGIN)
	@echo "installing the REPL, the scripts, the PyTorch companion, the Jupyter kernel and the man page"
	@$(TMP_BEGIN) \
	rel=$$(realpath -m -s --relative-to='$(BINDIR)' '$(SCRIPTDIR)') && \
	for f in $(notdir $(SCRIPTS)); do \
	  name=roper-$$(basename $$f .lua | tr _ -); \
	  $(SUBST) -e "s|@NAME@|$$name|g" -e "s|@SCRIPT@|$$f|g" -e "s|@BIN_TO_SCRIPTS@|$$rel|g" \
	    packaging/roper-script.in > "$$tmp/$$name" || exit 1; \
	done && \
	$(SUBST) packaging/roper.1.in > "$$tmp/roper.1" && \
	printf '%s\n' '$(LIBDIR)/libroper.so.$(SOVERSION)' > "$$tmp/library.txt" && \
	PYTHONPATH=python /usr/bin/python3 -m roper_kernel.spec "$$tmp/kernel" --bin '$(BINDIR)/roper' \
	  --pythonpath '$(PYDIR)' && \
	{ $(call inst_file,755,$(REPL),$(BINDIR)/roper) \
	  for f in $(notdir $(SCRIPTS)); do \
	    name=roper-$$(basename $$f .lua | tr _ -); \
	    $(call inst_file,755,$$tmp/$$name,$(BINDIR)/$$name) \
	  done; \
	  $(foreach f,$(SCRIPTS),$(call inst_file,644,$(f),$(SCRIPTDIR)/$(notdir $(f)))) \
	  $(foreach f,$(SCRIPT_LIBS),$(call inst_file,644,$(f),$(SCRIPTDIR)/lib/$(notdir $(f)))) \
	  $(foreach f,$(PYTHON_PKG),$(call inst_file,644,$(f),$(PYDIR)/roper_torch/$(notdir $(f)))) \
	  $(call inst_file,644,$$tmp/library.txt,$(PYDIR)/roper_torch/library.txt) \
	  $(foreach f,$(KERNEL_PKG),$(call inst_file,644,$(f),$(PYDIR)/roper_kernel/$(notdir $(f)))) \
	  $(call inst_file,644,$$tmp/kernel/kernel.json,$(JUPYTERDIR)/kernels/roper/kernel.json) \
	  $(call inst_file,644,$$tmp/roper.1,$(MANDIR)/man1/roper.1) \
	  $(call inst_file,644,$(MPI_PLUGIN),$(LIBDIR)/roper/roper_mpi.so) \
	  $(call inst_file,644,LICENSE,$(DOCDIR)/LICENSE) \
	} | $(INSTALL_RUN)

install-lua: $(MODULE) $(MPI_PLUGIN)
	@echo "installing the Lua module"
	@{ $(call inst_file,644,$(MODULE),$(LUA_CMODDIR)/roper.so) \
	   $(call inst_file,644,$(MPI_PLUGIN),$(LIBDIR)/roper/roper_mpi.so) \
	   $(call inst_file,644,LICENSE,$(DOCDIR)/LICENSE) \
	 } | $(INSTALL_RUN)

install-lib: $(LIB) $(SHLIB) $(MPI_PLUGIN)
	@echo "installing the C library"
	@$(TMP_BEGIN) \
	$(SUBST) -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBS_PRIVATE@|$(PC_LIBS_PRIVATE)|g' \
	  -e 's|@REQUIRES_PRIVATE@|$(PC_REQUIRES_PRIVATE)|g' \
	  -e 's|^libdir=$(PREFIX)/|libdir=$${prefix}/|' \
	  -e 's|^includedir=$(PREFIX)/|includedir=$${prefix}/|' packaging/roper.pc.in > "$$tmp/roper.pc" && \
	{ $(call inst_file,644,$(LIB),$(LIBDIR)/libroper.a) \
	  $(call inst_file,644,$(SHLIB),$(LIBDIR)/libroper.so.$(VERSION)) \
	  $(call inst_link,libroper.so.$(VERSION),$(LIBDIR)/libroper.so.$(SOVERSION)) \
	  $(call inst_link,libroper.so.$(SOVERSION),$(LIBDIR)/libroper.so) \
	  $(foreach h,$(PUBLIC_HEADERS),$(call inst_file,644,$(h),$(INCLUDEDIR)/roper/$(notdir $(h)))) \
	  $(call inst_file,644,$$tmp/roper.pc,$(PKGCONFIGDIR)/roper.pc) \
	  $(call inst_file,644,$(MPI_PLUGIN),$(LIBDIR)/roper/roper_mpi.so) \
	  $(call inst_file,644,LICENSE,$(DOCDIR)/LICENSE) \
	} | $(INSTALL_RUN)
	@$(LDCONFIG)

# ---- notebooks (docs/notebooks.md) --------------------------------------------------------------
# make notebooks: notebooks/*.ipynb made anew from their sources and executed on the roper kernel
# (notebooks/make.py; commit them with their outputs). make notebook: the notebook server on
# localhost (NOTEBOOK_PORT, default 8888) with this build's kernel and notebooks/tutorial.ipynb
# open; it prints the address (with its token) to open in a browser. Ctrl-C stops it.
NOTEBOOK_PORT ?= 8888
KERNEL_SPEC_DIR := $(BUILD)/jupyter/kernels/roper

$(KERNEL_SPEC_DIR)/kernel.json: python/roper_kernel/spec.py
	@PYTHONPATH=python /usr/bin/python3 -m roper_kernel.spec $(KERNEL_SPEC_DIR) \
	  --bin '$(abspath $(REPL))' --pythonpath '$(abspath python)'

notebooks: deps all
	@$(MAKE) --no-print-directory deps PACKAGES="$(JUPYTER_PACKAGES)"
	/usr/bin/python3 notebooks/make.py --bin $(REPL)

notebook: deps all
	@$(MAKE) --no-print-directory deps PACKAGES="$(JUPYTER_PACKAGES)"
	@$(MAKE) --no-print-directory $(KERNEL_SPEC_DIR)/kernel.json
	JUPYTER_PATH='$(abspath $(BUILD)/jupyter)' /usr/bin/python3 -m notebook --no-browser \
	  --ip=127.0.0.1 --port=$(NOTEBOOK_PORT) --notebook-dir=notebooks \
	  --NotebookApp.default_url=/notebooks/tutorial.ipynb $$([ "$$(id -u)" = 0 ] && echo --allow-root)

uninstall:
	@packaging/install.sh uninstall '$(DESTDIR)' '$(MANIFEST)'
	@$(LDCONFIG)

clean:
	rm -rf build build-san build-portable build-check build-aarch64

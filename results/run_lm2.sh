#!/usr/bin/env bash
# The runs of docs/results.md "Language modelling at 20 tokens per parameter" (issue 63):
# is RoPER non-inferior to RoPE as a language model trained to its compute-optimal length? rope,
# roper and none (NoPE, the floor, at the smallest size), paired by seed, at three sizes on the
# default corpus (make corpus: the Linux kernel's documentation) with its default unigram
# tokenizer of 2,048 pieces and tied input and output embeddings (tie_embeddings), seq_len 256,
# batch 16 (4,096 tokens a step), each run trained to at least 20 tokens per parameter (all
# parameters, the embedding included). Every step is a compare.lua command of the PORTABLE build
# (make PORTABLE=1: the same bits on every x86-64-v3 machine, so a run resumed or repeated
# elsewhere gives the same numbers), each run on 1 thread (--threads 1: the bits depend on it).
# Run again, compare.lua finds the finished runs and trains only the rest, and a run cut short
# goes on from its last checkpoint, so this script resumes after an interruption. From a
# checkout, after `make PORTABLE=1` and `make corpus`:
#   nice -n 19 results/run_lm2.sh [step ...]
# steps (run only when named, in the order given):
#   pilot     the learning-rate sweep at the small size (peak rates 1e-3, 3e-3, 1e-2, 3e-2, 1e-1;
#             rope and roper, seeds 1-2, NoPE seeds 1-2 at 3e-3; the whole training length,
#             without the length evaluation): results/lm2-pilot-lr<rate>/
#   first     seeds 1-2 (1 where the plan has one seed) of every size's methods: the margin's
#             check against the gains between the sizes, before the rest
#   small     the small size (143,872 parameters): results/lm2-s/
#   medium    the medium size (433,152 parameters): results/lm2-m/
#   large     the large size (1,454,080 parameters), at its own rate LR_LARGE (the amendment of
#             2026-11-28): results/lm2-l/
#             (each size's folder, methods, seeds and steps: its row of results/lm2_plan.tsv)
#   long      secondary, run only when named: the small size trained to the corpus's 4 repeats
#             (7,500 steps, 214 tokens per parameter), rope and roper, seeds 1-10:
#             results/lm2-s-long/
#   medium-lr secondary, run only when named (decided 2026-11-29, after the medium size's table and
#             before the large size's): the medium size at the large size's rate LR_LARGE, rope
#             and roper, seeds 1-8: results/lm2-m-lr3e-3/
# JOBS (default 2): runs at once per compare.lua command. The pilot: PILOT_SEEDS (default "1 2":
# the seed counts, in turn) and PILOT_JOBS (default 3: runs at once per rate); on a machine with
# 16 free cores PILOT_SEEDS=3 PILOT_JOBS=9 runs all 21 runs of three seeds at once.
# Each step writes its folder (summary.md, summary.json, runs/*.json and .csv: every run file
# records its provenance, the commit, build, kernels and CPU among it). The non-inferiority
# table with the language-modelling tables and curves of each folder:
#   build-portable/roper scripts/pairs_report.lua results/lm2-s results/lm2-m results/lm2-l \
#     --lm --noninferiority roper/rope --margin 0.01
# and the convergence check of every run: build-portable/roper results/lm2_convergence.lua
# --margin 0.01 results/lm2-*/.
# The script refuses to start when the portable build is not of a commit, or when, in a git
# checkout, the checkout's sources (BUILD_SOURCES of results/build_check.sh, untracked files among
# them) differ from the build's commit's, so that the commit each run file names is the code that
# made it.
set -euo pipefail
. "$(dirname "$0")/own_group.sh"  # nice takes effect beside other sessions' work
cd "$(dirname "$0")/.."
R0=build-portable/roper
[ -x $R0 ] || { echo "run_lm2.sh: make PORTABLE=1 first" >&2; exit 2; }
. results/build_check.sh
built=$(build_check $R0 "make PORTABLE=1") || { echo "run_lm2.sh: $built" >&2; exit 2; }
[ -f data/linux-doc/manifest.json ] || { echo "run_lm2.sh: make corpus first" >&2; exit 2; }
# the plan (results/lm2_plan.tsv, its one home: each size's folder, methods, seeds, training
# steps and CPU budget), read whole before anything runs; plan SIZE COLUMN: one of its cells
. results/lm2_plan.sh
lm2_plan_load results/lm2_plan.tsv ||
  { echo "run_lm2.sh: cannot read the plan: $PLAN_ERROR" >&2; exit 2; }
for size in small medium large; do
  [ -n "${PLAN_FOLDER[$size]:-}" ] ||
    { echo "run_lm2.sh: results/lm2_plan.tsv has no size $size" >&2; exit 2; }
done
plan() {
  case $2 in
    folder) echo "${PLAN_FOLDER[$1]}" ;; methods) echo "${PLAN_METHODS[$1]//,/ }" ;;
    seeds) echo "${PLAN_SEEDS[$1]}" ;; steps) echo "${PLAN_STEPS[$1]}" ;;
  esac
}
# every finished run file of the steps' folders (the plan's, long's and medium-lr's) must be the
# build's commit's: compare.lua takes a finished run as done, so a checkout whose tracked results
# hold another commit's runs would mix commits in one table (the study was pinned again once:
# docs/results.md)
for d in "${PLAN_FOLDER[@]/#/results/}" "${LM2_SECONDARY[@]/#/results/}"; do
  for f in "$d"/runs/*.json; do
    case "$f" in *.cfg.json|*.run.json) continue ;; esac
    [ -f "$f" ] || continue
    c=$(grep -o '"commit":"[^"]*"' "$f" | head -1 | cut -d'"' -f4 || true)
    # (abbreviated hashes: one a prefix of the other is the same commit)
    if [ -z "$c" ] || { [ "${built#"$c"}" = "$built" ] && [ "${c#"$built"}" = "$c" ]; }; then
      echo "run_lm2.sh: $f is a run of ${c:-an unknown commit}, not of the build's $built:" \
        "move that folder's runs aside first" >&2
      exit 2
    fi
  done
done
JOBS=${JOBS:-2}
R="$R0 scripts/compare.lua --jobs $JOBS --threads 1 --quiet --task lm"
# the corpus, its 2,048-piece tokenizer (trained on the training split when missing), the
# windows; tied embeddings at every size
LM="--corpus data/linux-doc --tokenizer '' --vocab-size 2048 --seq-len 256 --batch 16"
LM="$LM --tie-embeddings"
# the main steps (all but the pilot) train on the training split's ids encoded in pieces of 64 KiB
# cut at line ends (rp.lm.ids's chunk_bytes): 7,759,677 training ids, a segmentation of higher
# log probability under the tokenizer than the one-call encoding the pilot used (7,882,212 ids;
# docs/results.md, "Token ids", decided 2026-11-28 before the first main run). The folder
# rp.lm.ids writes is the corpus, as it is; the tokenizer is the corpus's default one
ids_corpus() {
  $R0 -e '
    local tok = assert(rp.lm.tokenizer("data/linux-doc", 2048))
    local folder = assert(rp.lm.ids("data/linux-doc", tok, { chunk_bytes = 65536 }))
    print(folder)'
}
# the study's token ids (rp.lm.ids names the folder by the SHA-256 of the corpus's manifest and
# of the tokenizer, 16 hex digits each): the corpus of `make corpus` from linux-doc-6.1 6.1.192-2
# and its 2,048-piece tokenizer
STUDY_IDS=08cfe037dbd55829-fa49dcadab1113f5-p65536
STUDY_MANIFEST=08cfe037dbd5582928b623b1206fe3fa1f3214353f8ffed088d76e7f4d0d029e
# Debian's linux-doc-6.1 6.1.192-3 (2026-11-28) holds the same documentation: `make corpus` writes
# the same three split files (the same SHA-256 in the manifest) and a manifest that differs only
# in the package revision its "source" names, so the ids folder would be named otherwise and
# compare.lua would take every finished run for one of another config. Where the manifest with
# that revision read as 6.1.192-2 is the study's byte for byte (its whole SHA-256), it is written
# so (under a temporary name, then renamed), and the script says so; any other manifest is left
# as it is (and the check after ids_corpus refuses it)
study_manifest() {
  local m=data/linux-doc/manifest.json
  [ "$(sha256sum < "$m" | cut -d' ' -f1)" = "$STUDY_MANIFEST" ] && return 0
  sed -E 's/(Debian package linux-doc-6\.1 6\.1\.192-)[0-9]+,/\12,/' "$m" > "$m.study"
  if [ "$(sha256sum < "$m.study" | cut -d' ' -f1)" = "$STUDY_MANIFEST" ]; then
    mv "$m.study" "$m"
    echo "run_lm2.sh: $m: the study's manifest written (the same splits; the package revision" \
      "read as 6.1.192-2)" >&2
  else
    rm -f "$m.study"
  fi
}
# besides the endpoint (the whole validation split, and the test split): the validation curve at
# every tenth of the run over the same 4 batches of 16 windows (eval_seed; the convergence check
# compares its last two points), the lengths beyond training with every context extension
EV="--valid-batches 4 --eval-lengths 256,512,1024,2048"
EV="$EV --eval-scaling none,pi,ntk,yarn,dynamic,llama3"
# the sizes: depth 6, heads of 16 dimensions, d_ff 4 d_model; steps of 4,096 tokens, at least
# 20 tokens per parameter, the plan's (each a multiple of 100: the validation curve every tenth)
# size_args SIZE [STEPS]: its model, training length (the plan's unless STEPS) and checkpoints
size_args() {
  local steps=${2:-$(plan "$1" steps)}
  case "$1" in
    small)  echo "--d-model 32 --heads 2 --layers 6 --d-ff 128" ;;  # 143,872 parameters
    medium) echo "--d-model 64 --heads 4 --layers 6 --d-ff 256" ;;  # 433,152
    large)  echo "--d-model 128 --heads 8 --layers 6 --d-ff 512" ;; # 1,454,080
  esac
  echo "--steps $steps --valid-every $((steps / 10))"
  case "$1" in
    small) echo "--checkpoint-every 200" ;; medium) echo "--checkpoint-every 220" ;;
    large) echo "--checkpoint-every 355" ;;
  esac
}
# (at the plan's steps: 3.28M, 9.01M and 29.08M tokens, 22.8, 20.8 and 20.0 per parameter; the
# large size sees the training split 3.75 times)
# the learning rates: the pilot's (docs/results.md); cosine to a tenth of the peak, 100 warmup
# steps, Adam, clip 1
lr_args() { echo "--lr $1 --min-lr $(awk "BEGIN { print $1 / 10 }")"; }
# the peak rate of the main steps: the pilot's (the plan's rule, docs/results.md), written here
# before the first main run (a results-only change); empty until then, and the main steps refuse
LR=1e-2   # the pilot's (both methods' best of 1e-3 .. 1e-1 over seeds 1-2; docs/results.md)
# roper's own rate where the pilot's best rate for roper differs from rope's (empty: LR); roper
# then runs as the method roper:lr=<rate>:min_lr=<rate/10>, named so in the tables
LR_ROPER=""
# the large size's own rate (docs/results.md, "Amendment: the large size's rate", 2026-11-28: at
# 1e-2 the first step's large rope runs ended 0.386 above the medium size's loss); every method
LR_LARGE=3e-3
if [ -z "$LR_ROPER" ] || [ "$LR_ROPER" = "$LR" ]; then
  ROPER=roper
else
  ROPER="roper:lr=$LR_ROPER:min_lr=$(awk "BEGIN { print $LR_ROPER / 10 }")"
fi
# methods SIZE [roper's name]: the size's methods (the plan's), roper named as given (ROPER at
# the small and medium sizes; the large size runs every method at LR_LARGE)
methods() {
  local out=() m
  for m in $(plan "$1" methods); do
    [ "$m" = roper ] && m=${2:-$ROPER}
    out+=("$m")
  done
  echo "${out[*]}"
}
# size_methods SIZE, size_lr SIZE: the methods and rate arguments of a size's runs
size_methods() { if [ "$1" = large ]; then methods large roper; else methods "$1"; fi; }
size_lr() { if [ "$1" = large ]; then lr_args "$LR_LARGE"; else lr_args "$LR"; fi; }
# seed_steps SIZE: the seed counts of a size's step, two more at a time up to the plan's (an odd
# count last)
seed_steps() {
  local n
  n=$(plan "$1" seeds) && seq 2 2 "$n" || return
  if [ $((n % 2)) = 1 ]; then echo "$n"; fi
}
# the trained models: not kept (KEEP=--keep-models keeps them beside the run files). Until
# 2026-11-28 22:51 UTC they were, on the machine that ran them (never committed); compare.lua
# trains a finished run again when a kept model is missing, so on a fresh machine every finished
# run would have been trained again
KEEP=${KEEP-}
STEPS="pilot first small medium large long medium-lr"   # (the steps named above)
steps=("$@")
if [ ${#steps[@]} -eq 0 ]; then
  echo "run_lm2.sh: name the steps ($STEPS)" >&2
  exit 2
fi
for step in "${steps[@]}"; do
  if [ "$step" != pilot ] && [ -z "$LR" ]; then
    echo "run_lm2.sh: step $step needs the pilot's rate: set LR in this script first" >&2
    exit 2
  fi
  if [ "$step" != pilot ] && [ -z "${LMP:-}" ]; then
    study_manifest
    IDS=$(ids_corpus)
    if [ "${IDS##*/}" != "$STUDY_IDS" ]; then
      echo "run_lm2.sh: the token ids are $IDS, not the study's $STUDY_IDS: the corpus or the" \
        "tokenizer differs from the study's (docs/results.md, \"A fresh machine\")" >&2
      exit 2
    fi
    LMP="--corpus $IDS --vocab-size 2048 --seq-len 256 --batch 16 --tie-embeddings"
  fi
  case "$step" in
    # peak rates at the small size, each its own folder (pairs_report --pairs reads them
    # together), all at once (each run at nice 19 takes only what the machine leaves); seed 1 of
    # every rate first, then seed 2, so that a pilot cut short still holds a whole sweep; NoPE at
    # 3e-3. 3e-2 was added after seed 1 of the first three put the best rate of both methods at
    # the top one, 1e-2, and 1e-1 (the rule's next rate up) when 3e-2's training loss ran ahead
    # of 1e-2's, before either had finished (docs/results.md)
    pilot) for n in ${PILOT_SEEDS:-1 2}; do
             pids=()
             for lr in 1e-3 3e-3 1e-2 3e-2 1e-1; do
               ms="rope roper"
               [ "$lr" = 3e-3 ] && ms="rope roper none"
               eval ${R/--jobs $JOBS/--jobs ${PILOT_JOBS:-3}} --methods $ms --seeds $n $LM \
                 --valid-batches 4 $(size_args small 800) $(lr_args $lr) \
                 --out results/lm2-pilot-lr$lr &
               pids+=($!)
             done
             for p in "${pids[@]}"; do wait "$p"; done
           done ;;
    # seeds added a few at a time, so an interrupted step still leaves a balanced, paired
    # comparison
    first) for size in small medium large; do
             n=$(plan $size seeds)
             eval $R --methods $(size_methods $size) --seeds $((n < 2 ? n : 2)) $LMP $EV \
               $(size_args $size) $(size_lr $size) $KEEP --out results/$(plan $size folder)
           done ;;
    small | medium | large)
           ns=$(seed_steps $step)   # (an assignment: seed_steps' status is seen by set -e)
           for n in $ns; do
             eval $R --methods $(size_methods $step) --seeds $n $LMP $EV $(size_args $step) \
               $(size_lr $step) $KEEP --out results/$(plan $step folder)
           done ;;
    # the small size near the end of its learning: 3.96 epochs, the validation curve every 750
    # steps; the same rate and evaluation as the small step
    long) for n in 2 4 6 8 10; do
            eval $R --methods rope $ROPER --seeds $n $LMP $EV $(size_args small 7500) \
              $(lr_args $LR) $KEEP --out results/${LM2_SECONDARY[long]}
          done ;;
    # whether the medium size's roper - rope depends on its rate: the medium step's settings at
    # the large size's rate instead of the pilot's
    medium-lr) for n in 2 4 6 8; do
                 eval $R --methods rope roper --seeds $n $LMP $EV $(size_args medium) \
                   $(lr_args $LR_LARGE) $KEEP --out results/${LM2_SECONDARY[medium-lr]}
               done ;;
    *) echo "run_lm2.sh: unknown step $step ($STEPS)" >&2; exit 2 ;;
  esac
done

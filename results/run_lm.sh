#!/usr/bin/env bash
# The runs of docs/results.md "Language modelling on real text (plan)": is RoPER non-inferior to
# RoPE as a language model? rope, roper and none (NoPE, the floor), paired by seed, at two sizes
# on the default corpus (make corpus: the Linux kernel's documentation) with its default unigram
# tokenizer of 8,000 pieces, seq_len 256. Every step is a compare.lua command of the PORTABLE build
# (make PORTABLE=1: the same bits on every x86-64-v3 machine, so a run resumed or repeated
# elsewhere gives the same numbers), each run on 1 thread (--threads 1: the bits depend on it).
# Run again, compare.lua finds the finished runs and trains only the rest, and a run cut short
# goes on from its last checkpoint (every 250 steps), so this script resumes after an
# interruption. Run it from a checkout, after `make PORTABLE=1` and `make corpus`:
#   nice -n 19 results/run_lm.sh [step ...]     steps: small large more zoo (default: small large
#                                               more, in order; zoo only when named)
# Each step writes results/lm-<size>/ (summary.md, summary.json, runs/*.json and .csv: every run
# file records its provenance, the commit and build among it). The non-inferiority table, with
# --lm also the language-modelling tables and the training and validation curves of each folder:
#   build-portable/roper scripts/pairs_report.lua results/lm-2m results/lm-8m --lm \
#     --noninferiority roper/rope none/rope --margin 0.02
# The script refuses to start when tracked files outside results/ differ from the commit, so
# that the commit each run file names is the code that made it.
set -euo pipefail
. "$(dirname "$0")/own_group.sh"  # nice takes effect beside other sessions' work
cd "$(dirname "$0")/.."
if ! git diff --quiet HEAD -- . ':!results'; then
  echo "run_lm.sh: the checkout differs from its commit outside results/: commit first" >&2
  exit 2
fi
[ -x build-portable/roper ] || { echo "run_lm.sh: make PORTABLE=1 first" >&2; exit 2; }
[ -f data/linux-doc/manifest.json ] || { echo "run_lm.sh: make corpus first" >&2; exit 2; }
R="build-portable/roper scripts/compare.lua --jobs 2 --threads 1 --quiet --task lm"
LM="--corpus data/linux-doc --tokenizer '' --vocab-size 8000 --seq-len 256 --batch 16"
# besides the endpoint: the validation curve (every 100 steps, over the same 4 batches of 16
# windows, eval_seed), the lengths beyond training with every context extension (over 4 batches
# of 16 windows at each length), and the trained models (runs/*.ckpt, not committed: for
# sampling and for evaluating them again)
LM="$LM --valid-every 100 --valid-batches 4 --eval-lengths 256,512,1024,2048"
LM="$LM --eval-scaling none,pi,ntk,yarn,dynamic,llama3 --keep-models"
CK="--checkpoint-every 250"
M2="--d-model 128 --heads 4 --layers 4 --d-ff 512"
M8="--d-model 256 --heads 8 --layers 6 --d-ff 1024"
SMALL="$LM $M2 --steps 1000 $CK"   # the small size's settings (small, more, zoo)
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(small large more)
for step in "${steps[@]}"; do
  case "$step" in
    # seeds added a few at a time, so an interrupted step still leaves a balanced, paired
    # comparison. small: 2.8M parameters, 1,000 steps (4.1M tokens), seeds 1-5
    small) for n in 2 4 5; do
             eval $R --methods rope roper none --seeds $n $SMALL --out results/lm-2m
           done ;;
    # large: 8.8M parameters, 500 steps (2.0M tokens: about the small run's CPU time), seeds 1-3
    large) for n in 2 3; do
             eval $R --methods rope roper none --seeds $n $LM $M8 --steps 500 $CK \
               --out results/lm-8m
           done ;;
    # the plan's extension, run when the first seeds leave the question open: small to 10 seeds,
    # large to 5
    more) for n in 6 8 10; do
            eval $R --methods rope roper none --seeds $n $SMALL --out results/lm-2m
          done
          eval $R --methods rope roper none --seeds 5 $LM $M8 --steps 500 $CK --out results/lm-8m ;;
    # zoo (issue 47 item 5, run only when named): the zoo's contenders at the small size, xPos
    # (rope:xpos=0.4, the gamma of docs/results.md's length studies) and ALiBi, seeds 1-5, the
    # small step's settings, beside rope, roper and none in results/lm-2m-zoo. The finished
    # runs of rope, roper and none of seeds 1-5 are copied from results/lm-2m first (compare.lua
    # finds a run whose JSON holds the same config and does not train it again), so only the 10
    # new runs train. Without --keep-models: a finished run whose model is missing is run again
    # with it, and the models of results/lm-2m are not committed, so on a machine that did not
    # train them the copied runs would all train again. The zoo is compared on its run files.
    zoo) mkdir -p results/lm-2m-zoo/runs
         for m in rope roper none; do
           for s in 1 2 3 4 5; do
             for ext in json csv log lengths.csv; do
               f=results/lm-2m/runs/$m-s$s.$ext
               if [ -e "$f" ]; then cp -n "$f" results/lm-2m-zoo/runs/; fi
             done
           done
         done
         for n in 2 4 5; do
           eval $R --methods rope roper none rope:xpos=0.4 alibi --seeds $n \
             "${SMALL/ --keep-models/}" --out results/lm-2m-zoo
         done ;;
    *) echo "run_lm.sh: unknown step $step (small large more zoo)" >&2; exit 2 ;;
  esac
done

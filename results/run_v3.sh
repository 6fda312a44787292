#!/usr/bin/env bash
# The runs of docs/results.md "Results v3" (does the answer change with scale?). Every step is a
# compare.lua command of the PORTABLE build (make PORTABLE=1: the same bits on every x86-64-v3
# machine, so a run resumed or repeated on another machine gives the same numbers); run again, it
# finds the finished runs and trains only the rest, so this script resumes after an interruption.
# Run it from a checkout, after `make PORTABLE=1`:
#   nice -n 19 results/run_v3.sh [step ...]      steps: pilot index addition writeup finetune
#                                                  (default: all, in that order)
# Each step writes results/v3-<name>/ (summary.md, summary.json, plots, runs/*.json and .csv).
#
# The 0.6M model is the one of the prefix runs (results/v2-prefix): d_model 128, 4 heads,
# 3 layers, d_ff 512; the 0.1M one is compare.lua's default (d_model 64, 2 layers, d_ff 256).
set -euo pipefail
. "$(dirname "$0")/own_group.sh"  # nice takes effect beside other sessions' work
cd "$(dirname "$0")/.."
R="build-portable/roper scripts/compare.lua --jobs 2 --quiet"
# the steps still to run save each run every 250 steps (<out>/runs/<run>.part.ckpt), so a run cut
# by the end of a session goes on from there when the step is run again (flagged "resumed at")
CK="--checkpoint-every 250"
M06="--d-model 128 --heads 4 --layers 3 --d-ff 512"
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(pilot index addition writeup finetune)
for step in "${steps[@]}"; do
  case "$step" in
    # the pilot: 2 seeds (101, 102: apart from the main runs' 1..n) of each task at 0.6M with the
    # 0.1M recipes of results v2 (3-digit addition: 2,000 steps; substring by index: 6,000 steps),
    # and the write-up's addition format (operands up to 8 digits: a problem is about 200
    # characters, so seq_len 256) at both sizes, to fix the main runs' plan
    pilot)
      $R --task addition --max-digits 3 --methods rope roper --seeds 2 --first-seed 101 $M06 \
        --out results/v3-pilot-addition
      $R --task addition --methods rope roper --seeds 2 --first-seed 101 --seq-len 256 \
        --steps 4000 --out results/v3-pilot-writeup-0.1m
      $R --methods rope roper --seeds 2 --first-seed 101 $M06 --steps 6000 --log-every 50 \
        --jump-loss 1.5 --out results/v3-pilot-index
      $R --task addition --methods rope roper --seeds 2 --first-seed 101 --seq-len 256 \
        --steps 4000 $M06 $CK --out results/v3-pilot-writeup-0.6m
      ;;
    # the plan fixed after the pilot (docs/results.md, "Results v3"): the 0.1M recipes at 0.6M,
    # rope and roper, seeds 1..10, added two at a time so that an interrupted step still leaves a
    # balanced, paired comparison
    # substring by index: 6,000 steps, the jump analysis at 1.5 (and pairs_report's thresholds)
    index) for n in 2 4 6 8 10; do
             $R --methods rope roper --seeds $n $M06 --steps 6000 --log-every 50 --jump-loss 1.5 \
               --out results/v3-index
           done ;;
    # 3-digit addition: 2,000 steps
    addition) for n in 2 4 6 8 10; do
                $R --task addition --max-digits 3 --methods rope roper --seeds $n $M06 $CK \
                  --out results/v3-addition
              done ;;
    # the write-up's addition format (operands up to 8 digits, seq_len 256, 4,000 steps) at 0.1M
    # and at 0.6M
    writeup) for n in 2 4 6 8 10; do
               $R --task addition --methods rope roper --seeds $n --seq-len 256 --steps 4000 \
                 $CK --out results/v3-writeup-0.1m
               $R --task addition --methods rope roper --seeds $n --seq-len 256 --steps 4000 \
                 $M06 $CK --out results/v3-writeup-0.6m
             done ;;
    # context extension with fine-tuning (issue 34, item 2): substring by prefix at 0.1M, the
    # zero-shot length runs' recipe (results/len-substring_prefix: seq_len 128, 2,000 steps),
    # rope and roper, seeds 1-5, their models kept; then each fine-tuned from its own model for
    # 300 steps at seq_len 512 (batch 16, Adam 3e-4 cosine to 3e-5, 30 warmup steps) with no
    # scaling and with PI, NTK and YaRN at factor 4 (orig_len 128), evaluated at 512: beside the
    # zero-shot losses at 512 of results.md's length section. The base models (.ckpt) are not
    # committed; this command (from a checkout, after `make PORTABLE=1`) makes them again:
    #   build-portable/roper scripts/compare.lua --jobs 2 --quiet --threads 1 \
    #     --task substring_prefix --methods rope roper --seeds 5 --keep-models \
    #     --checkpoint-every 250 --out results/v3-ft-base
    # It is the base step's command with the runs' thread count, 1, written out (the base step
    # leaves it to compare.lua, which gives each of --jobs 2 runs half the cores: 1 thread on the
    # 2-core machine that made them, more elsewhere, and 2 threads give other bits). A kept-model
    # run whose model is missing is run again over its run file, so nothing needs deleting first;
    # the re-made runs' .csv files must then equal the committed ones (git diff: every curve
    # point), and tests/lua/ft_base_spec.lua checks that the current portable build gives the
    # committed bits: this command's configs, and rope and roper seed 1 trained to its first
    # checkpoint (step 250 of 2,000), every curve point to the last bit
    finetune)
      $R --task substring_prefix --methods rope roper --seeds 5 --keep-models $CK \
        --out results/v3-ft-base
      # (dynamic NTK with factor 1: its base grows with the position to NTK x4 at 512 by itself)
      for sc in none pi ntk yarn dynamic llama3; do
        f=4; [ "$sc" = dynamic ] && f=1
        extra=(); [ "$sc" = none ] || extra=(--scaling "$sc" --scaling-factor $f --orig-len 128)
        # orig_len does nothing for pi and ntk (the scripts refuse it now); kept, with
        # --allow-unused, so that the configs stay those of the committed runs
        case "$sc" in pi|ntk) extra+=(--allow-unused) ;; esac
        $R --task substring_prefix --methods rope roper --seeds 5 \
          --init 'results/v3-ft-base/runs/{pe}-s{seed}.ckpt' --seq-len 512 --steps 300 \
          --lr 3e-4 --min-lr 3e-5 --warmup 30 "${extra[@]}" $CK --out "results/v3-ft-$sc"
      done ;;
    *) echo "run_v3.sh: unknown step $step (pilot index addition writeup finetune)" >&2; exit 2 ;;
  esac
done

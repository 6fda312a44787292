#!/usr/bin/env bash
# The runs of docs/results.md "Results v2" (issue 16), in order of cost. Every step is a
# compare.lua command: run again, it finds the finished runs and trains only the rest, so this
# script resumes after an interruption (a session's end). Run it from the checkout, after make:
#   nice -n 19 results/run_v2.sh [step ...]     steps: index addition lr prefix (default: all)
# Each step writes results/v2-<name>/ (summary.md, summary.json, plots, runs/*.json and .csv).
set -euo pipefail
. "$(dirname "$0")/own_group.sh"  # nice takes effect beside other sessions' work
cd "$(dirname "$0")/.."
R="build/roper scripts/compare.lua --jobs 2 --quiet"
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(index addition lr prefix)
for step in "${steps[@]}"; do
  case "$step" in
    # substring by index at the CPU scale, 6,000 steps (3x the v1 runs: most seeds jump; the
    # pilot, results/v2-index-pilot, chose it), a jump at training loss 1.5 (after a jump the
    # loss settles at 1.33-1.47, before it at 1.84-1.87; a slow drift to 1.58 with 1 correct
    # answer is no jump)
    # (seeds added four at a time, so an interrupted step still leaves a balanced summary)
    index) for n in 4 8 12 16 20; do
             $R --methods rope roper "roper_legacy@$(( n < 10 ? n : 10 ))" --seeds $n --steps 6000 \
               --log-every 50 \
               --jump-loss 1.5 --out results/v2-index
           done ;;
    # addition with 3-digit operands, 30 seeds (80% power for +15.5 correct at sd 21.5)
    addition) for n in 10 20 30; do
                $R --task addition --max-digits 3 --methods rope roper --seeds $n \
                  --out results/v2-addition
              done ;;
    # the learning-rate check: 3 rates x 3 methods x 5 seeds on each task at the CPU scale
    # (lr 1e-3 is the rate of the index and addition steps: their seeds 1..5 are copied, and
    # compare.lua takes them as done, since their configs are the same. The v1 runs of the same
    # configs are not: made before the speed work, they differ in the last bits, and so do
    # their trajectories: docs/results.md, "Results v2")
    lr) for lr in 3e-4 1e-3 3e-3; do
          if [ "$lr" = 1e-3 ]; then
            for t in index addition; do
              mkdir -p results/v2-lr-$t-$lr/runs
              for m in rope roper roper_legacy; do for s in 1 2 3 4 5; do for ext in json csv; do
                f=results/v2-$t/runs/$m-s$s.$ext
                if [ -e "$f" ] && [ ! -e results/v2-lr-$t-$lr/runs/$m-s$s.$ext ]; then
                  cp "$f" results/v2-lr-$t-$lr/runs/
                fi
              done; done; done
            done
          fi
          $R --methods rope roper roper_legacy --seeds 5 --lr $lr --steps 6000 --log-every 50 \
             --jump-loss 1.5 --out results/v2-lr-index-$lr
          $R --task addition --max-digits 3 --methods rope roper roper_legacy --seeds 5 --lr $lr \
             --out results/v2-lr-addition-$lr
          $R --task substring_prefix --methods rope roper roper_legacy --seeds 5 --lr $lr \
             --out results/v2-lr-prefix-$lr
        done ;;
    # the write-up's substring-by-prefix configuration (labml's copy_repeat: 0.6M parameters,
    # 4,096 steps of 16 x 512, labml's Adam at 2.5e-4 without schedule, clip 1): ~70 min a run,
    # so each run keeps a checkpoint every 256 steps and a stopped one goes on from it (seeds
    # added two at a time, about 4 hours each, so every session leaves a balanced comparison)
    prefix) for n in 2 4 6 8 10; do
              $R --task substring_prefix --methods rope roper roper_legacy --seeds $n \
                --d-model 128 --heads 4 --layers 3 --d-ff 512 --seq-len 512 --batch 16 \
                --steps 4096 --lr 2.5e-4 --schedule constant --clip 1 --checkpoint-every 256 \
                --out results/v2-prefix
            done ;;
    *) echo "run_v2.sh: unknown step $step (index addition lr prefix)" >&2; exit 2 ;;
  esac
done

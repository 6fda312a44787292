#!/usr/bin/env bash
# The 0.1M side of docs/results.md's scale trend made again where only the size differs from the
# 0.6M side (issue 46): the same portable build (-march=x86-64-v3, OpenBLAS's Haswell kernels)
# at the same commit as the 0.6M runs of results/v3-index (0c8be7b) and results/v3-addition
# (5b3681a), the recipe of their 0.1M runs in results/v2-index and results/v2-addition (compare.lua's
# default 0.1M model), rope and roper, seeds 1-10, paired by seed. Run from a checkout of any later
# commit:
#   nice -n 19 results/run_v3_trend.sh [step ...]      steps: index addition (default: both)
# Each step makes (once) a git worktree of its commit in build-trend/<commit>/, builds it with
# `make PORTABLE=1` and runs its compare.lua there, writing into this checkout's
# results/v3-index-0.1m or results/v3-addition-0.1m (a link to it in the worktree's results/, so
# that the summaries name the folder as results/<name>, as every other comparison's do). Run again, compare.lua finds the finished
# runs and trains only the rest (the addition runs also resume from their checkpoints every 250
# steps; the index commit's runs start again), so the script resumes after an interruption.
set -euo pipefail
. "$(dirname "$0")/own_group.sh"  # nice takes effect beside other sessions' work
cd "$(dirname "$0")/.."
root=$(pwd)
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(index addition)

# checkout COMMIT NAME: the folder of a built portable checkout of COMMIT whose results/NAME is
# this checkout's results/NAME
checkout() {
    local dir="$root/build-trend/$1"
    if [ ! -d "$dir" ]; then
        git -C "$root" worktree add --detach "$dir" "$1" >&2
    fi
    make -C "$dir" -s PORTABLE=1 build-portable/roper >&2
    mkdir -p "$root/results/$2"
    [ -L "$dir/results/$2" ] || ln -s "$root/results/$2" "$dir/results/$2"
    echo "$dir"
}

for step in "${steps[@]}"; do
    case "$step" in
    # substring by index at 0.1M: results/v2-index's recipe (6,000 steps, the jump at 1.5)
    index)
        dir=$(checkout 0c8be7b v3-index-0.1m)
        (cd "$dir" && for n in 2 4 6 8 10; do
            build-portable/roper scripts/compare.lua --jobs 2 --threads 1 --quiet --methods rope roper \
                --seeds $n --steps 6000 --log-every 50 --jump-loss 1.5 \
                --out results/v3-index-0.1m
        done) ;;
    # 3-digit addition at 0.1M: results/v2-addition's recipe (2,000 steps)
    addition)
        dir=$(checkout 5b3681a v3-addition-0.1m)
        (cd "$dir" && for n in 2 4 6 8 10; do
            build-portable/roper scripts/compare.lua --jobs 2 --threads 1 --quiet --task addition \
                --max-digits 3 --methods rope roper --seeds $n --checkpoint-every 250 \
                --out results/v3-addition-0.1m
        done) ;;
    *) echo "run_v3_trend.sh: unknown step $step (index addition)" >&2; exit 2 ;;
    esac
done

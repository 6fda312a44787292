#!/usr/bin/env bash
# The runs of docs/results.md "2-D positions: the grid task" (issue 35: vector positions and
# learned frequencies). Every step is a compare.lua command of the PORTABLE build (make
# PORTABLE=1: the same bits on every x86-64-v3 machine); run again, it finds the finished runs
# and trains only the rest, so this script resumes after an interruption. From a checkout, after
# `make PORTABLE=1`:
#   nice -n 19 results/run_grid2d.sh [step ...]      steps: pilot main confirm (default: main)
# The task: grid_offset on a 3 x 4 grid of 4 letters, offsets up to 2 (a problem is 20 tokens:
# 12 cells, one query row of 8), chosen by the pilot (results/grid2d-pilot); the model is
# compare.lua's default 0.1M one (d_model 64, 4 heads of d_k 16, 2 layers), 4,000 steps.
set -euo pipefail
. "$(dirname "$0")/own_group.sh"  # nice takes effect beside other sessions' work
cd "$(dirname "$0")/.."
R="build-portable/roper scripts/compare.lua --jobs 2 --quiet"
TASK="--task grid_offset --rows 3 --cols 4 --max-offset 2 --alphabet 4"
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(main)
for step in "${steps[@]}"; do
  case "$step" in
    # the pilot (train.lua, seed 1, one run each): 1-D rope on the flattened index against 2-D
    # axial roper, 4,000 steps, on the default 6 x 8 grid of 8 letters (neither above chance: 23
    # and 24 of 128), on a 4 x 4 grid of 8 letters (30, 32) and on the 3 x 4 grid of 4 letters
    # (55, 101). The archived pilot ran on the native build (docs/results.md)
    pilot)
      mkdir -p results/grid2d-pilot
      for g in "6x8:--rows 6 --cols 8" "4x4:--rows 4 --cols 4 --max-offset 2" \
               "3x4:--rows 3 --cols 4 --max-offset 2 --alphabet 4"; do
        for m in "rope index" "roper grid"; do
          set -- $m
          build-portable/roper scripts/train.lua --task grid_offset ${g#*:} --pe $1 \
            --positions $2 --steps 4000 --threads 1 --quiet \
            --out "results/grid2d-pilot/${g%%:*}-$1-$2.json"
        done
      done ;;
    # the comparison, 5 seeds paired: none; rope and roper on the flattened index and on the
    # grid's (row, column) with axial pairs; RoPE-Mixed; each rotary one also with learned
    # frequencies (learn_freq; RoPE-Mixed learned as its paper learns it, though with one matrix
    # for every head and layer, and with its matrix fixed)
    main)
      $R $TASK --steps 4000 --seeds 5 --out results/grid2d \
        --methods none rope rope:learn_freq=true roper \
          rope:positions=grid rope:positions=grid:learn_freq=true \
          roper:positions=grid roper:positions=grid:learn_freq=true \
          rope:positions=grid:axes=mixed rope:positions=grid:axes=mixed:learn_freq=true ;;
    # the confirmatory runs of the second question (does RoPER help in 2-D?), planned after the
    # main runs and before any of these (docs/results.md "The confirmatory runs"): 2-D axial
    # rope and roper only, 20 fresh seeds (101-120, apart from the main runs' 1-5), the main
    # runs' recipe; added ten seeds at a time, each resumable from its checkpoints
    confirm)
      for n in 10 20; do
        $R $TASK --steps 4000 --seeds $n --first-seed 101 --checkpoint-every 1000 \
          --out results/grid2d-confirm --methods rope:positions=grid roper:positions=grid
      done ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done

#!/usr/bin/env bash
# The scale-trend tables of docs/results.md "Results v3" (<folder>/interaction.md), recomputed from
# the committed run files: roper - rope at 0.1M and at 0.6M for each task and endpoint, the change
# and Welch's test over the two sizes' per-seed differences (scripts/pairs_report.lua
# --interaction), and Holm over all of the table's rows (results/v3-scale-trend.md, by
# results/holm_v3.lua). Run from a checkout after `make` (any build: it only reads the run files):
#   results/report_v3.sh                the table of 2026-11-25: the 0.1M index and addition
#                                       sides are the v2 runs (another machine, build and commit)
#   results/report_v3.sh --same-build   the 0.1M sides of results/run_v3_trend.sh (the portable
#                                       build at the 0.6M runs' commits: only the size differs);
#                                       writes results/v3-index-0.1m/interaction.md,
#                                       results/v3-addition-0.1m/interaction.md and
#                                       results/v3-scale-trend-same-build.md
# The writeup step's file is written once both of its folders hold runs.
set -euo pipefail
cd "$(dirname "$0")/.."
R=build/roper
# section <title> <pairs_report arguments...>: a heading, the command and its output
section() {
  local title=$1
  shift
  printf '## %s\n\nCommand: `roper scripts/pairs_report.lua %s`\n\n' "$title" "$*"
  $R scripts/pairs_report.lua "$@"
  echo
}
if [ "${1:-}" = --same-build ]; then
  I=(results/v3-index-0.1m results/v3-index --interaction roper/rope)
  I_TITLE="# Substring by index: roper - rope at 0.1M (results/v3-index-0.1m, seeds 1-10) and at 0.6M (results/v3-index, seeds 1-10), both in the portable build at 0c8be7b"
  I_OUT=results/v3-index-0.1m/interaction.md
  A=(results/v3-addition-0.1m results/v3-addition --interaction roper/rope)
  A_TITLE="# 3-digit addition: roper - rope at 0.1M (results/v3-addition-0.1m, seeds 1-10) and at 0.6M (results/v3-addition, seeds 1-10), both in the portable build at 5b3681a"
  A_OUT=results/v3-addition-0.1m/interaction.md
  TREND=results/v3-scale-trend-same-build.md
elif [ $# -eq 0 ]; then
  I=(results/v2-index results/v3-index --interaction roper/rope --skip-seeds results/v2-index=1-4)
  I_TITLE="# Substring by index: roper - rope at 0.1M (results/v2-index, seeds 5-20: the pilot seeds 1-4 left out) and at 0.6M (results/v3-index, seeds 1-10)"
  I_OUT=results/v3-index/interaction.md
  A=(results/v2-addition results/v3-addition --interaction roper/rope)
  A_TITLE="# 3-digit addition: roper - rope at 0.1M (results/v2-addition, seeds 1-30) and at 0.6M (results/v3-addition, seeds 1-10)"
  A_OUT=results/v3-addition/interaction.md
  TREND=results/v3-scale-trend.md
else
  echo "usage: results/report_v3.sh [--same-build]" >&2
  exit 2
fi
{
  echo "$I_TITLE"
  echo
  section "Correct answers of 128" "${I[@]}"
  section "Mean training loss over the curve (every curve point: no threshold)" "${I[@]}" \
    --metric mean_train_loss
} > "$I_OUT"
{
  echo "$A_TITLE"
  echo
  section "Correct answers of 128" "${A[@]}"
  section "Final training loss (the mean of the last 5 curve points)" "${A[@]}" \
    --metric final_train_loss
} > "$A_OUT"
if ls results/v3-writeup-0.1m/runs/*.json results/v3-writeup-0.6m/runs/*.json >/dev/null 2>&1
then
  {
    echo "# The write-up's addition (operands up to 8 digits): roper - rope at 0.1M" \
         "(results/v3-writeup-0.1m) and at 0.6M (results/v3-writeup-0.6m)"
    echo
    W=(results/v3-writeup-0.1m results/v3-writeup-0.6m --interaction roper/rope)
    section "Correct answers of 128" "${W[@]}"
    section "Final training loss (the mean of the last 5 curve points)" "${W[@]}" \
      --metric final_train_loss
    section "Evaluation loss" "${W[@]}" --metric eval_loss
  } > results/v3-writeup-0.6m/interaction.md
fi
files=("$I_OUT" "$A_OUT")
[ -f results/v3-writeup-0.6m/interaction.md ] && files+=(results/v3-writeup-0.6m/interaction.md)
{
  echo "# The scale trend: does roper - rope change from 0.1M to 0.6M?"
  echo
  echo "Command: \`build/roper results/holm_v3.lua ${files[*]}\`"
  echo
  $R results/holm_v3.lua "${files[@]}"
} > "$TREND"

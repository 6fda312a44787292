#!/usr/bin/env bash
# Draws the language-model study's tables (docs/results.md, "Language modelling at 20 tokens per
# parameter", "The test") from the run files of this checkout, each size only once its runs are
# whole: the plan draws no table of roper against rope before a size's seeds are all in.
#
# usage: results/lm2_tables.sh WHAT ...
#   WHAT  a size, small, medium or large (the sizes of results/lm2_plan.tsv): its tables; trend:
#         the gap against size over all the sizes
#   ROPER (environment) the interpreter that draws them, build/roper unless set (a path from the
#         checkout's root); a build of a commit (rp.build_info().commit without "dirty"), named in
#         each file's first line; in a git checkout, whose scripts and sources must be that
#         commit's
#
# For each size: results/<folder>/tables.md, the whole output of
#   pairs_report.lua <folder> --lm --noninferiority roper/rope [none/rope] --margin 0.01
#     --gap-curve roper/rope
# (none/rope where the size's methods hold none; --lm and --gap-curve also draw the folder's curves,
# lm_*.png and .svg), and results/<folder>/convergence.md, the output of lm2_convergence.lua
# --margin 0.01 <folder>. For trend: results/lm2-trend.md, the output of pairs_report.lua over the
# three folders with --noninferiority, --trend roper/rope and --extrapolate 2e8 (the plan's command;
# --lm draws every folder's curves again). Each file opens with an HTML comment naming its command,
# the build's commit and the date drawn (UTC), and is written to a temporary name and renamed. A
# size not whole (trend: any size) is refused with one line (exit status 2) before anything is
# drawn, naming the runs finished of the plan's (its methods times its seeds:
# runs/<method>-s<seed>.json); so is a build that is not of a commit, a checkout whose scripts or
# sources are not the build's commit's, a plan it cannot read and an unknown WHAT. Prints one line
# per file written.
set -euo pipefail
cd "$(dirname "$0")/.."

MARGIN=0.01       # the plan's margin, nats of validation loss (docs/results.md, "Margin")
EXTRAPOLATE=2e8   # the write-up's language model's parameters: the trend's extrapolation
ROPER=${ROPER:-build/roper}
die() { echo "lm2_tables.sh: $*" >&2; exit 2; }

# the plan's sizes: each one's folder, methods and seeds
. results/lm2_plan.sh
lm2_plan_load results/lm2_plan.tsv || die "cannot read the plan: $PLAN_ERROR"

[ $# -gt 0 ] || die "usage: results/lm2_tables.sh WHAT ... (a size: ${PLAN_SIZES[*]}; or trend)"
for what in "$@"; do
  [ "$what" = trend ] || [ -n "${PLAN_FOLDER[$what]:-}" ] ||
    die "unknown $what (a size: ${PLAN_SIZES[*]}; or trend)"
done

draw=() trend=0
for what in "$@"; do
  if [ "$what" = trend ]; then
    trend=1 need=("${PLAN_SIZES[@]}") who="trend: "
  else
    draw+=("$what") need=("$what") who=
  fi
  for size in "${need[@]}"; do
    read -r n of <<< "$(lm2_plan_tally results "$size")"
    [ "$n" -eq "$of" ] || die "${who}the $size size (results/${PLAN_FOLDER[$size]}) has $n of its" \
      "$of runs: the plan draws no table before a size is whole"
  done
done

[ -x "$ROPER" ] || die "$ROPER: no such interpreter (make, or set ROPER)"
# what draws the tables (the build and the scripts it runs) must be the build's commit's, so that
# each file's first line names the code that drew it
. results/build_check.sh
again="build again here (make, or make PORTABLE=1 for build-portable/roper)"
commit=$(build_check "$ROPER" "$again" results/lm2_convergence.lua) || die "$commit"
stamp="the build of $commit, drawn $(date -u +%Y-%m-%d)"

# write FILE COMMAND...: the command's output under its comment line, through a temporary name
# (removed when the command fails or the script is stopped)
TMP=
trap 'rm -f "$TMP"' EXIT
write() {
  local file=$1
  shift
  TMP=$(mktemp "$(dirname "$file")/.tables.XXXXXX")
  { echo "<!-- $* ($stamp) -->"; echo; "$@"; } > "$TMP" ||
    die "$* failed (nothing written to $file)"
  chmod 644 "$TMP"
  mv -f "$TMP" "$file"
  TMP=
  echo "wrote $file"
}

for size in "${draw[@]}"; do
  d=results/${PLAN_FOLDER[$size]}
  pairs=(roper/rope)
  case ",${PLAN_METHODS[$size]}," in *,none,*) pairs+=(none/rope) ;; esac
  write "$d/tables.md" "$ROPER" scripts/pairs_report.lua "$d" --lm --noninferiority \
    "${pairs[@]}" --margin "$MARGIN" --gap-curve roper/rope
  write "$d/convergence.md" "$ROPER" results/lm2_convergence.lua --margin "$MARGIN" "$d"
done

if [ "$trend" = 1 ]; then
  folders=()
  for size in "${PLAN_SIZES[@]}"; do folders+=("results/${PLAN_FOLDER[$size]}"); done
  write results/lm2-trend.md "$ROPER" scripts/pairs_report.lua "${folders[@]}" --lm \
    --noninferiority roper/rope none/rope --margin "$MARGIN" --trend roper/rope \
    --extrapolate "$EXTRAPOLATE"
fi

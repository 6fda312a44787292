#!/usr/bin/env bash
# Draws the language-model study's tables (docs/results.md, "Language modelling at 20 tokens per
# parameter", "The test") from the run files of this checkout, each size only once its runs are
# whole: the plan draws no table of roper against rope before a size's seeds are all in.
#
# usage: results/lm2_tables.sh WHAT ...
#   WHAT  a size, small, medium or large (the sizes of results/lm2_plan.tsv): its tables; trend:
#         the gap against size over all the sizes
#   ROPER (environment) the interpreter that draws them, build/roper unless set; a build of a
#         commit (rp.build_info().commit without "dirty"), named in each file's first line
#
# For each size: results/<folder>/tables.md, the whole output of
#   pairs_report.lua <folder> --lm --noninferiority roper/rope [none/rope] --margin 0.01
#     --gap-curve roper/rope
# (none/rope where the size's methods hold none; --lm and --gap-curve also draw the folder's curves,
# lm_*.png and .svg), and results/<folder>/convergence.md, the output of lm2_convergence.lua
# --margin 0.01 <folder>. For trend: results/lm2-trend.md, the output of pairs_report.lua over the
# three folders with --noninferiority, --trend roper/rope and --extrapolate 2e8 (the plan's command;
# --lm draws every folder's curves again). Each file opens with an HTML comment naming its command
# and the build's commit and date, and is written to a temporary name and renamed. A size not whole
# (trend: any size) is refused with one line (exit status 2) before anything is drawn, naming the
# runs finished of the plan's (its methods times its seeds: runs/<method>-s<seed>.json); so is a
# build that is not of a commit, a plan it cannot read and an unknown WHAT. Prints one line per file
# written.
set -euo pipefail
cd "$(dirname "$0")/.."

MARGIN=0.01       # the plan's margin, nats of validation loss (docs/results.md, "Margin")
EXTRAPOLATE=2e8   # the write-up's language model's parameters: the trend's extrapolation
ROPER=${ROPER:-build/roper}
die() { echo "lm2_tables.sh: $*" >&2; exit 2; }

# the plan's sizes: each one's folder, methods and seeds
. results/lm2_plan.sh
rows=$(lm2_plan_rows results/lm2_plan.tsv) ||
  die "cannot read the plan results/lm2_plan.tsv (each size's folder, methods, seeds and steps)"
declare -A FOLDER=() METHODS=() SEEDS=()
sizes=()
while read -r size folder methods seeds _; do
  FOLDER[$size]=$folder METHODS[$size]=$methods SEEDS[$size]=$seeds
  sizes+=("$size")
done <<< "$rows"

[ $# -gt 0 ] || die "usage: results/lm2_tables.sh WHAT ... (a size: ${sizes[*]}; or trend)"
for what in "$@"; do
  [ "$what" = trend ] || [ -n "${FOLDER[$what]:-}" ] ||
    die "unknown $what (a size: ${sizes[*]}; or trend)"
done

# finished SIZE: how many of the plan's runs of the size have their run file
finished() {
  local n=0 m s
  for m in ${METHODS[$1]//,/ }; do
    for ((s = 1; s <= SEEDS[$1]; s++)); do
      [ -f "results/${FOLDER[$1]}/runs/$m-s$s.json" ] && n=$((n + 1))
    done
  done
  echo "$n"
}
planned() { echo $(($(wc -w <<< "${METHODS[$1]//,/ }") * SEEDS[$1])); }

draw=() trend=0
for what in "$@"; do
  if [ "$what" = trend ]; then
    trend=1 need=("${sizes[@]}")
  else
    draw+=("$what") need=("$what")
  fi
  for size in "${need[@]}"; do
    [ "$(finished "$size")" -eq "$(planned "$size")" ] ||
      die "the $size size (results/${FOLDER[$size]}) has $(finished "$size") of its" \
        "$(planned "$size") runs: the plan draws no table before a size is whole"
  done
done

[ -x "$ROPER" ] || die "$ROPER: no such interpreter (make, or set ROPER)"
commit=$("$ROPER" -e 'print(rp.build_info().commit)') || die "$ROPER does not run"
case "$commit" in
  *dirty* | unknown | "")
    die "$ROPER is a build of '$commit', not of a commit: commit, then make" ;;
esac
stamp="the build of $commit, $(date -u +%Y-%m-%d)"

# write FILE COMMAND...: the command's output under its comment line, through a temporary name
write() {
  local file=$1 tmp
  shift
  tmp=$(mktemp "$(dirname "$file")/.tables.XXXXXX")
  if ! { echo "<!-- $* ($stamp) -->"; echo; "$@"; } > "$tmp"; then
    rm -f "$tmp"
    die "$* failed (nothing written to $file)"
  fi
  chmod 644 "$tmp"
  mv -f "$tmp" "$file"
  echo "wrote $file"
}

for size in "${draw[@]}"; do
  d=results/${FOLDER[$size]}
  pairs=(roper/rope)
  case ",${METHODS[$size]}," in *,none,*) pairs+=(none/rope) ;; esac
  write "$d/tables.md" "$ROPER" scripts/pairs_report.lua "$d" --lm --noninferiority \
    "${pairs[@]}" --margin "$MARGIN" --gap-curve roper/rope
  write "$d/convergence.md" "$ROPER" results/lm2_convergence.lua --margin "$MARGIN" "$d"
done

if [ "$trend" = 1 ]; then
  folders=()
  for size in "${sizes[@]}"; do folders+=("results/${FOLDER[$size]}"); done
  write results/lm2-trend.md "$ROPER" scripts/pairs_report.lua "${folders[@]}" --lm \
    --noninferiority roper/rope none/rope --margin "$MARGIN" --trend roper/rope \
    --extrapolate "$EXTRAPOLATE"
fi

#!/usr/bin/env bash
# Collects the language-model study's finished runs from the pinned commit's worktree into this
# checkout, to be committed (docs/results.md, "Language modelling at 20 tokens per parameter",
# "Reproducing and running it").
#
# usage: results/lm2_collect.sh WORKTREE [LOG]
#   WORKTREE  the checkout the runner (results/run_lm2.sh) works in
#   LOG       the CPU monitor's log (results/lm2_cpu_monitor.py LOG); its new lines are appended
#             to results/lm2-cpu.tsv
#
# For each size's folder in WORKTREE (results/lm2-s, lm2-m and lm2-l: this checkout's
# results/lm2_plan.tsv, the plan's one home, names them with their methods and seeds): a finished
# run's files (runs/<run>.json, .csv, .lengths.csv; not the runner's .cfg.json, the checkpoints'
# .run.json or anything .part.) are copied when this checkout lacks them or holds other bytes; the
# folder's summary and plots (summary.*, summary_lengths.csv, *.dat, *.gp, *.png, *.svg) only when
# the folder is whole (the plan's runs, each of its methods at seeds 1 to its seeds, all finished,
# other run files not counted: compare.lua rewrites its summary after every pair, with roper - rope
# first, and the plan draws no table before a size is whole) and its summary.csv has at least as
# many lines as this checkout's (a summary.json that differs only in the date it was drawn is not
# copied); a folder held back gets one line saying so. Of the secondary steps' folders
# (results/lm2_plan.sh's LM2_SECONDARY: long's and medium-lr's), the finished run files
# the same way, never a summary or plot; no other folder. Of LOG, the lines of the study's runs
# (run file results/lm2-*) not yet in results/lm2-cpu.tsv are appended. Prints one line per file
# copied, per folder held back and per log line appended; exit status 0, or 2 with a message on
# bad arguments or a plan it cannot read. Files are written to a temporary name and renamed.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd -P)
usage="usage: results/lm2_collect.sh WORKTREE [LOG]"
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "lm2_collect.sh: $usage" >&2
    exit 2
fi
if ! work=$(cd "$1" 2>/dev/null && pwd -P) || [ ! -f "$work/results/run_lm2.sh" ]; then
    echo "lm2_collect.sh: $1 is not a checkout with results/run_lm2.sh" >&2
    exit 2
fi
if [ "$work" = "$here" ]; then
    echo "lm2_collect.sh: $1 is this checkout; name the runner's worktree" >&2
    exit 2
fi
log=${2:-}
if [ -n "$log" ] && [ ! -r "$log" ]; then
    echo "lm2_collect.sh: cannot read the log $log" >&2
    exit 2
fi

# put SRC at DST through a temporary name in DST's folder
put() {
    local tmp
    tmp=$(mktemp "$(dirname "$2")/.collect.XXXXXX")
    cp "$1" "$tmp"
    chmod 644 "$tmp"
    mv -f "$tmp" "$2"
}

lines() { if [ -f "$1" ]; then wc -l < "$1"; else echo 0; fi; }

# same SRC DST: DST holds SRC's bytes, or for a summary.json the same bytes but for the date the
# summary was drawn (compare.lua draws a folder's summary again, with a new date and nothing else
# new, each time the runner passes a whole size)
undated() { sed 's/"date":"[^"]*"/"date":""/g' "$1"; }
same() {
    case "${1##*/}" in
        summary.json) [ -f "$2" ] && cmp -s <(undated "$1") <(undated "$2") ;;
        *) cmp -s "$1" "$2" ;;
    esac
}

# each size's folder with its methods and seeds (the plan's)
. "$here/results/lm2_plan.sh"
lm2_plan_load "$here/results/lm2_plan.tsv" || {
    echo "lm2_collect.sh: cannot read the plan: $PLAN_ERROR" >&2
    exit 2
}

# copy_runs FOLDER: the finished run files of results/FOLDER/runs that this checkout lacks or
# holds other bytes of
copy_runs() {
    local src=$work/results/$1 dst=$here/results/$1 f
    mkdir -p "$dst/runs"
    for f in "$src"/runs/*.json "$src"/runs/*.csv; do
        [ -f "$f" ] || continue
        case "${f##*/}" in *.cfg.json | *.run.json | *.part.*) continue ;; esac
        if ! cmp -s "$f" "$dst/runs/${f##*/}"; then
            put "$f" "$dst/runs/${f##*/}"
            echo "collected results/$1/runs/${f##*/}"
        fi
    done
}

# every finished run file: of the plan's sizes' folders and of the secondary steps' (long and
# medium-lr: LM2_SECONDARY)
for d in "${PLAN_FOLDER[@]}" "${LM2_SECONDARY[@]}"; do
    if [ -d "$work/results/$d/runs" ]; then copy_runs "$d"; fi
done

# a size's summary and plots, only when it is whole (a secondary step's: never)
for size in "${PLAN_SIZES[@]}"; do
    d=${PLAN_FOLDER[$size]}
    src=$work/results/$d
    dst=$here/results/$d
    [ -d "$src/runs" ] || continue
    # whole: every run of the plan (each of its methods, seeds 1 to its seeds) has its run file
    read -r finished planned <<< "$(lm2_plan_tally "$work/results" "$size")"
    if [ "$finished" -lt "$planned" ]; then
        [ -f "$src/summary.csv" ] && echo "held back results/$d's summary and plots:" \
            "$finished of $planned runs finished"
    elif [ -f "$src/summary.csv" ] &&
         [ "$(lines "$src/summary.csv")" -ge "$(lines "$dst/summary.csv")" ]; then
        for f in "$src"/summary.* "$src"/summary_lengths.csv "$src"/*.dat "$src"/*.gp \
                 "$src"/*.png "$src"/*.svg; do
            [ -f "$f" ] || continue
            if ! same "$f" "$dst/${f##*/}"; then
                put "$f" "$dst/${f##*/}"
                echo "collected results/$d/${f##*/}"
            fi
        done
    fi
done

if [ -n "$log" ]; then
    tsv=$here/results/lm2-cpu.tsv
    [ -f "$tsv" ] || printf 'run\tcpu_seconds\tlast_step\tended_utc\tpid\n' > "$tsv"
    tmp=$(mktemp "$here/results/.collect.XXXXXX")
    cp "$tsv" "$tmp"
    added=0
    while IFS= read -r line || [ -n "$line" ]; do
        case "$line" in results/lm2-*) ;; *) continue ;; esac
        if ! grep -qxF -- "$line" "$tmp"; then
            printf '%s\n' "$line" >> "$tmp"
            echo "logged $line"
            added=1
        fi
    done < "$log"
    if [ "$added" = 1 ]; then
        chmod 644 "$tmp"
        mv -f "$tmp" "$tsv"
    else
        rm -f "$tmp"
    fi
fi

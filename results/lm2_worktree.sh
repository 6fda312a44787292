#!/usr/bin/env bash
# Makes the language-model study's worktree on a machine that has none (a fresh one), as
# docs/results.md's "How to run it" says, and prints the two commands that start the CPU monitor
# and the runner there.
#
# usage: results/lm2_worktree.sh FOLDER
#   FOLDER  where the worktree goes (it must not exist: a worktree that exists is resumed by
#           starting its runner again, not made anew)
#
# The pinned commit is the one commit that this checkout's committed run files of the plan's
# folders (results/lm2_plan.tsv, read by results/lm2_plan.sh) record (provenance.commit); more than
# one, or none, is refused. In FOLDER: `git worktree add --detach`, then `make PORTABLE=1` and
# `make corpus` (the build first: it records `git describe --dirty`, and the runner refuses a
# dirty build), then this checkout's study files (the runner, its helpers and the plan) and the
# plan's and the secondary steps' folders (results/lm2_plan.sh's LM2_SECONDARY) that this checkout
# holds are copied in, so that compare.lua trains only the runs not yet finished; a failed build or
# corpus removes the worktree again (after make's own output). FOLDER may be relative to where the
# script is started. LM2_DRY=1 prints the commands of the worktree, the build and the corpus
# instead of running them (and copies nothing). Exit status 0, or 2 with one line saying why.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd -P)
if [ $# -ne 1 ] || [ -z "$1" ]; then
    echo "lm2_worktree.sh: usage: results/lm2_worktree.sh FOLDER" >&2
    exit 2
fi
# FOLDER as an absolute path (git -C and make -C below would read a relative one against
# different folders)
case "$1" in /*) set -- "$1" ;; *) set -- "$PWD/$1" ;; esac
if [ -e "$1" ]; then
    echo "lm2_worktree.sh: $1 exists: start its runner again there (docs/results.md, \"How to" \
        "run it\"), or name a new folder" >&2
    exit 2
fi
. "$here/results/lm2_plan.sh"
lm2_plan_load "$here/results/lm2_plan.tsv" ||
    { echo "lm2_worktree.sh: cannot read the plan: $PLAN_ERROR" >&2; exit 2; }

# the commits the plan's finished run files record (a run file is runs/<method>-s<seed>.json;
# the runner's .cfg.json and the checkpoints' .run.json are not run files)
commits=$(
    for d in "${PLAN_FOLDER[@]}"; do
        for f in "$here/results/$d"/runs/*.json; do
            case "$f" in *.cfg.json | *.run.json) continue ;; esac
            [ -f "$f" ] || continue
            grep -o '"commit":"[^"]*"' "$f" | head -1 | cut -d'"' -f4
        done
    done | sort -u
)
n=$(printf '%s' "$commits" | grep -c . || true)
if [ "$n" = 0 ]; then
    echo "lm2_worktree.sh: no run file of the plan's folders records a commit: no pinned commit" \
        "to make the worktree of" >&2
    exit 2
elif [ "$n" != 1 ]; then
    echo "lm2_worktree.sh: the plan's run files record $n commits (${commits//$'\n'/, })," \
        "not one:" \
        "no pinned commit to make the worktree of" >&2
    exit 2
fi
pin=$commits

run() {
    if [ -n "${LM2_DRY:-}" ]; then
        echo "$*"
    else
        "$@"
    fi
}
run git -C "$here" worktree add --detach "$1" "$pin" ||
    { echo "lm2_worktree.sh: git worktree add failed" >&2; exit 2; }
# a failed build or corpus takes the half-made worktree away again (so that the next try makes it
# anew instead of finding a worktree without the study's files)
for target in PORTABLE=1 corpus; do
    if ! run make -C "$1" "$target"; then
        git -C "$here" worktree remove --force "$1" 2>/dev/null || rm -rf "$1"
        git -C "$here" worktree prune
        echo "lm2_worktree.sh: make $target failed in $1 (above); the worktree is removed" >&2
        exit 2
    fi
done
if [ -z "${LM2_DRY:-}" ]; then
    work=$(cd "$1" && pwd -P)
    for f in run_lm2.sh own_group.sh build_check.sh lm2_plan.tsv lm2_plan.sh; do
        cp "$here/results/$f" "$work/results/$f.tmp.$$"
        mv "$work/results/$f.tmp.$$" "$work/results/$f"
    done
    for d in "${PLAN_FOLDER[@]}" "${LM2_SECONDARY[@]}"; do
        [ -d "$here/results/$d" ] || continue
        rm -rf "$work/results/$d" "$work/results/$d.tmp.$$"
        cp -r "$here/results/$d" "$work/results/$d.tmp.$$"
        mv "$work/results/$d.tmp.$$" "$work/results/$d"
    done
else
    work=$1
fi
echo "lm2_worktree.sh: the worktree of $pin is $work; start the CPU monitor, then the runner," \
    "there:"
echo "  cd $work && setsid nohup nice -n 5 python3 $here/results/lm2_cpu_monitor.py CPU_LOG" \
    ">> MONITOR_OUT 2>&1 < /dev/null &"
echo "  cd $work && setsid nohup nice -n 19 results/run_lm2.sh STEPS >> RUNNER_LOG 2>&1" \
    "< /dev/null &"

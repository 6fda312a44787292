# shellcheck shell=bash
# Sourced by the language-model study's scripts (results/run_lm2.sh, lm2_collect.sh and
# lm2_tables.sh): reads the study's plan, results/lm2_plan.tsv, in one place (lm2_cpu_monitor.py
# --summary reads it in Python by the same rules).
#
# lm2_plan_rows FILE: prints one line per size, "size folder methods seeds steps" (the methods
# joined by commas), in the file's order, and returns 0; or prints the reason instead (one line:
# the file, the line and what is wrong) and returns non-zero. Lines starting with # and empty lines
# are skipped; the first other line names the tab-separated columns, among them size, folder,
# methods (separated by spaces), seeds, steps and run_cpu_seconds. Each size, folder and method is
# a name: a letter or digit, then letters, digits and . _ : = - only; seeds and steps are counts
# > 0, run_cpu_seconds a number > 0; a size and a folder appear once, and no size is "trend"
# (lm2_tables.sh's word for the trend over the sizes).
lm2_plan_rows() {
  [ -f "$1" ] && [ -r "$1" ] || { echo "$1: cannot read it"; return 2; }
  awk -F'\t' -v file="$1" '
    function bad(why) { printf "%s: line %d: %s\n", file, FNR, why; failed = 1; exit 1 }
    function name(col, v) {
      if (v !~ /^[A-Za-z0-9][A-Za-z0-9._:=-]*$/) bad(col " \"" v "\" is not a name")
    }
    { sub(/\r$/, "") }
    /^#/ || NF == 0 { next }
    !head {
      for (i = 1; i <= NF; i++) at[$i] = i
      head = 1
      split("size folder methods seeds steps run_cpu_seconds", need, " ")
      for (k = 1; k <= 6; k++) if (!(need[k] in at)) bad("no column " need[k])
      next
    }
    {
      name("size", $at["size"]); name("folder", $at["folder"])
      if ($at["size"] == "trend") bad("the size trend (the word for the trend over the sizes)")
      if ($at["size"] in seen) bad("the size " $at["size"] " again")
      if ($at["folder"] in used) bad("the folder " $at["folder"] " again")
      seen[$at["size"]] = 1
      used[$at["folder"]] = 1
      n = split($at["methods"], m, " ")
      if (n == 0) bad("no methods")
      methods = ""
      for (i = 1; i <= n; i++) { name("method", m[i]); methods = methods (i > 1 ? "," : "") m[i] }
      if ($at["seeds"] !~ /^[1-9][0-9]*$/) bad("seeds \"" $at["seeds"] "\" is not a count > 0")
      if ($at["steps"] !~ /^[1-9][0-9]*$/) bad("steps \"" $at["steps"] "\" is not a count > 0")
      if ($at["run_cpu_seconds"] !~ /^[0-9]+(\.[0-9]+)?$/ || $at["run_cpu_seconds"] + 0 <= 0)
        bad("run_cpu_seconds \"" $at["run_cpu_seconds"] "\" is not a number > 0")
      out = out $at["size"] " " $at["folder"] " " methods " " $at["seeds"] " " $at["steps"] "\n"
    }
    END {
      if (failed) exit 1
      if (out == "") { printf "%s: no size\n", file; exit 1 }
      printf "%s", out
    }' "$1"
}

# the secondary steps' folders under results/, by step (run_lm2.sh's long and medium-lr): outside
# the plan's tables; the runner writes them, and its commit guard and the collector cover them
# shellcheck disable=SC2034  # (the callers')
declare -gA LM2_SECONDARY=([long]=lm2-s-long [medium-lr]=lm2-m-lr3e-3)

# lm2_plan_load FILE: reads the plan into PLAN_SIZES (the sizes, in the file's order) and, by size,
# PLAN_FOLDER, PLAN_METHODS (joined by commas), PLAN_SEEDS and PLAN_STEPS, and returns 0; or
# returns non-zero with lm2_plan_rows' reason in PLAN_ERROR
# shellcheck disable=SC2034  # (the globals are the callers')
lm2_plan_load() {
  local rows size folder methods seeds steps
  PLAN_SIZES=() PLAN_ERROR=
  declare -gA PLAN_FOLDER=() PLAN_METHODS=() PLAN_SEEDS=() PLAN_STEPS=()
  rows=$(lm2_plan_rows "$1") || { PLAN_ERROR=$rows; return 1; }
  while read -r size folder methods seeds steps; do
    PLAN_SIZES+=("$size")
    PLAN_FOLDER[$size]=$folder PLAN_METHODS[$size]=$methods PLAN_SEEDS[$size]=$seeds
    PLAN_STEPS[$size]=$steps
  done <<< "$rows"
}

# lm2_plan_tally RESULTS SIZE (after lm2_plan_load): prints "FINISHED PLANNED" for the size: how
# many of the plan's runs of it (each of its methods at seeds 1 to its seeds) have their run file
# in RESULTS/<its folder>/runs (<method>-s<seed>.json; a run file of another method or seed does
# not count), and how many runs the plan has of it
lm2_plan_tally() {
  local n=0 of=0 m s
  for m in ${PLAN_METHODS[$2]//,/ }; do
    for ((s = 1; s <= ${PLAN_SEEDS[$2]}; s++)); do
      of=$((of + 1))
      if [ -f "$1/${PLAN_FOLDER[$2]}/runs/$m-s$s.json" ]; then n=$((n + 1)); fi
    done
  done
  echo "$n $of"
}

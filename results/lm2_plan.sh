# shellcheck shell=bash
# Sourced by the language-model study's scripts (results/run_lm2.sh, lm2_collect.sh and
# lm2_tables.sh): reads the study's plan, results/lm2_plan.tsv, in one place.
#
# lm2_plan_rows FILE: prints one line per size, "size folder methods seeds steps" (the methods
# joined by commas), in the file's order; prints nothing and returns non-zero when FILE cannot be read,
# has no size, or a row lacks one of these (seeds and steps: counts > 0). Lines starting with #
# are comments; the first other line names the tab-separated columns.
lm2_plan_rows() {
  awk -F'\t' '
    /^#/ { next }
    !head {
      for (i = 1; i <= NF; i++) at[$i] = i
      head = 1
      if (!("size" in at && "folder" in at && "methods" in at && "seeds" in at && "steps" in at))
        exit bad = 1
      next
    }
    {
      n = split($at["methods"], m, " ")
      if ($at["size"] == "" || $at["folder"] == "" || n == 0 || $at["seeds"] !~ /^[1-9][0-9]*$/ ||
          $at["steps"] !~ /^[1-9][0-9]*$/)
        exit bad = 1
      methods = m[1]
      for (i = 2; i <= n; i++) methods = methods "," m[i]
      out = out $at["size"] " " $at["folder"] " " methods " " $at["seeds"] " " $at["steps"] "\n"
    }
    END { if (bad || out == "") exit 1; printf "%s", out }' "$1" 2>/dev/null
}

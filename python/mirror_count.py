"""Counts the PyTorch companion's functions that mirror roper's C code: those whose
docstring names a C function (rp_* or lrp_*), a .c file, pe_widths or read_cfg. Each such
docstring opens with its group:

  (numerics)  computes numbers as roper computes them (frequencies, tables, rotations,
              positions' angles, sinusoids): the independent reference, kept by design (it is
              tested against roper's logits, which is its value);
  (restated)  restates a rule or a format of roper's (reading and checking configs and
              options, messages, what a file holds, parameter counts, JSON reading): what
              should shrink as roper exports its tables to schema.json;
  (checks)    tests the conditions of a rule that core holds as code (in core's order, over
              the companion's own values), while every message, name and bound it uses comes
              from schema.json (core's templates and rows): a reworded message or a moved bound
              reaches it through schema.json, a new or changed condition needs an edit here;
  (interprets) runs rows that roper exports to schema.json (a loop over core's rows and
              their messages, as core's own loop runs them) and holds no rule of its own: it
              names the C function whose rows it runs, but a new or changed rule reaches it
              through schema.json, not by an edit here.

Prints one line per function (file:line group name lines), then each group's total, functions and
lines (a nested function's lines are counted once, within its parent's when both are counted).
Exits 1 when a function that names C has no group.

  python3 python/mirror_count.py [folder]     (default: python/roper_torch)"""

import ast
import os
import re
import sys

NAMES = re.compile(r"\bl?rp_\w+|\w\.c\b|\bpe_widths\b|\bread_cfg\b")
GROUPS = ("numerics", "restated", "checks", "interprets")
GROUP = re.compile(r"\((%s)\)\s" % "|".join(GROUPS))


def mirrors(path):
    """(name, group, first line, last line) of every function of the file at path that names
    C; group None when its docstring does not open with one."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node) or ""
            if NAMES.search(doc):
                g = GROUP.match(doc)
                yield node.name, g and g.group(1), node.lineno, node.end_lineno


def main(folder):
    count = {g: 0 for g in GROUPS + (None,)}
    covered = {g: set() for g in GROUPS + (None,)}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".py"):
            continue
        path = os.path.join(folder, name)
        for fn, g, lo, hi in sorted(mirrors(path), key=lambda m: m[2]):
            print("%s:%d %s %s %d" % (path, lo, g or "UNMARKED", fn, hi - lo + 1))
            count[g] += 1
            covered[g].update((path, n) for n in range(lo, hi + 1))
    for g in GROUPS:
        print("%s: %d functions, %d lines" % (g, count[g], len(covered[g])))
    print("mirrors: %d functions, %d lines" % (sum(count.values()),
                                                 len(set().union(*covered.values()))))
    if count[None]:
        print("unmarked: %d functions (open their docstrings with (numerics), (restated), "
              "(checks) or (interprets))" % count[None])
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  os.path.join(os.path.dirname(__file__), "roper_torch")))

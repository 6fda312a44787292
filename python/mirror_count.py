"""Counts the PyTorch companion's functions that restate a rule of roper's C code by hand: those
whose docstring names a C function (rp_* or lrp_*), a .c file, pe_widths or read_cfg. Prints one
line per function (file:line name lines) and the total, functions and lines (a nested function's
lines are counted once, within its parent's when both are counted).

  python3 python/mirror_count.py [folder]     (default: python/roper_torch)"""

import ast
import os
import re
import sys

NAMES = re.compile(r"\bl?rp_\w+|\w\.c\b|\bpe_widths\b|\bread_cfg\b")


def mirrors(path):
    """(name, first line, last line) of every function of the file at path that names C."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node) or ""
            if NAMES.search(doc):
                yield node.name, node.lineno, node.end_lineno


def main(folder):
    count, lines = 0, 0
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".py"):
            continue
        path = os.path.join(folder, name)
        spans = sorted(mirrors(path), key=lambda m: m[1])
        covered = set()
        for fn, lo, hi in spans:
            print("%s:%d %s %d" % (path, lo, fn, hi - lo + 1))
            covered.update(range(lo, hi + 1))
        count += len(spans)
        lines += len(covered)
    print("mirrors: %d functions, %d lines" % (count, lines))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__),
                                                            "roper_torch"))

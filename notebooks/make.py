"""The notebooks of notebooks/, made from their markdown sources and executed on the roper kernel.

  /usr/bin/python3 notebooks/make.py [--bin build/roper] [NAME ...]   writes notebooks/NAME.ipynb
  /usr/bin/python3 notebooks/make.py --check [--bin ...] [NAME ...]   writes nothing; exit 1 when
                                                                       one is not current
Each notebook is made from one markdown file (SOURCES): its ```lua blocks become code cells
(notebooks/cells.lua splits them as the REPL reads them), the rest markdown cells; then nbclient
runs it on the roper kernel (python/roper_kernel, running --bin), and the notebook is written with
its outputs (pictures inline as PNG), so a reader sees them without running it. Any cell that
fails stops it with the error (nbclient's CellExecutionError); a notebook that is not valid
nbformat 4 (nbformat.validate) is never written.

--check makes and runs each notebook the same way and compares it with the committed file, which
must be valid nbformat 4 (nbformat.validate): the cells' sources exactly, and the outputs cell by
cell: their kinds and MIME types, and their text with the numbers taken out (the values depend on
the CPU's BLAS kernels and threads in the last digits; a picture's bytes on gnuplot's fonts); for
the training notebook (BY_KIND) by kind only. It prints one line per notebook: "current NAME
(S s)" or "stale NAME: why".
"""
import argparse
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

import nbformat  # noqa: E402
from nbclient import NotebookClient  # noqa: E402

from roper_kernel import spec  # noqa: E402

# name -> its markdown source (relative to the repository)
SOURCES = {
    "tutorial": "docs/tutorial.md",
    "roper_identity": "notebooks/roper_identity.md",
    "training": "notebooks/training.md",
}
# notebooks whose outputs --check compares by kind only: what a model answers after 600 steps
# depends on the CPU's rounding (other BLAS kernels, other threads), not only its last digits
BY_KIND = {"training"}
CELL_TIMEOUT = 300  # seconds for one cell
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|\b(?:-?nan|-?inf)\b")


def make(name, roper):
    """The notebook of `name`, made from its source and executed."""
    src = SOURCES[name]
    cells = json.loads(subprocess.run(["lua5.4", os.path.join(ROOT, "notebooks/cells.lua"),
                                       os.path.join(ROOT, src)], check=True, capture_output=True,
                                      text=True).stdout)
    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"name": spec.NAME, "display_name": spec.DISPLAY_NAME, "language": "lua"},
        "language_info": {"name": "lua", "version": "5.4", "mimetype": "text/x-lua",
                          "file_extension": ".lua", "codemirror_mode": "lua",
                          "pygments_lexer": "lua"},
    }
    nb.cells.append(nbformat.v4.new_markdown_cell(
        "*Made from [%s](%s) by `make notebooks` (notebooks/make.py): edit that file, not this "
        "notebook.*" % (src, os.path.relpath(os.path.join(ROOT, src), os.path.join(ROOT, "notebooks")))))
    for c in cells:
        if c["cell_type"] == "markdown":
            nb.cells.append(nbformat.v4.new_markdown_cell(c["source"]))
        else:
            nb.cells.append(nbformat.v4.new_code_cell(c["source"]))
    for i, c in enumerate(nb.cells):  # ids that stay the same from one make to the next
        c["id"] = "%s-%d" % (name, i)
    client = NotebookClient(nb, kernel_name=spec.NAME, timeout=CELL_TIMEOUT,
                            resources={"metadata": {"path": ROOT}})
    client.execute()
    for c in nb.cells:  # nbclient's timings out, so that a notebook made again is the same
        if c.cell_type == "code":
            c.metadata = {}
    # nbformat 4 requires "metadata" on every execute_result and display_data output, empty or
    # not (without it Jupyter, nbconvert and nbformat.validate refuse the file)
    nbformat.validate(nb)
    return nb


def shape_of(nb, by_kind=False):
    """What --check compares: per cell, its source and its outputs with the numbers taken out
    (by_kind: the outputs' kinds and MIME types only)."""
    out = []
    for c in nb.cells:
        outs = []
        for o in c.get("outputs", []):
            if o["output_type"] == "stream":
                outs.append(("stream", o["name"], NUMBER.sub("#", o["text"])))
            elif o["output_type"] == "error":
                outs.append(("error", o["ename"], NUMBER.sub("#", o["evalue"])))
            else:
                data = o.get("data", {})
                outs.append((o["output_type"], sorted(data),
                             NUMBER.sub("#", data.get("text/plain", "")) if "image/png" not in data else ""))
        if by_kind:
            outs = [o[:2] for o in outs]
        out.append((c.cell_type, c.source, outs))
    return out


def kernel_env(roper, tmp):
    kdir = os.path.join(tmp, "kernels", spec.NAME)
    spec.main([kdir, "--bin", roper, "--pythonpath", os.path.join(ROOT, "python")])
    os.environ["JUPYTER_PATH"] = tmp
    os.environ["JUPYTER_RUNTIME_DIR"] = os.path.join(tmp, "runtime")
    os.environ.setdefault("COLUMNS", "100")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/roper"))
    ap.add_argument("--check", action="store_true")
    ap.add_argument("names", nargs="*", choices=[[]] + sorted(SOURCES), default=[])
    a = ap.parse_args(argv)
    names = a.names or sorted(SOURCES)
    tmp = tempfile.mkdtemp(prefix="roper-notebooks-")
    stale = 0
    try:
        kernel_env(os.path.abspath(a.bin), tmp)
        for name in names:
            t0 = time.monotonic()
            nb = make(name, os.path.abspath(a.bin))
            took = time.monotonic() - t0
            path = os.path.join(ROOT, "notebooks", name + ".ipynb")
            if not a.check:
                tmp_path = path + ".tmp"
                nbformat.write(nb, tmp_path)
                os.replace(tmp_path, path)
                print("wrote notebooks/%s.ipynb (%.1f s)" % (name, took))
                continue
            try:
                old = nbformat.read(path, as_version=4)
            except (OSError, ValueError) as e:
                print("stale %s: cannot read %s: %s" % (name, path, e))
                stale += 1
                continue
            try:
                nbformat.validate(old)
            except nbformat.ValidationError as e:
                print("stale %s: not valid nbformat 4: %s (make notebooks writes it anew)"
                      % (name, str(e).split("\n")[0]))
                stale += 1
                continue
            new_s, old_s = shape_of(nb, name in BY_KIND), shape_of(old, name in BY_KIND)
            why = None
            if len(new_s) != len(old_s):
                why = "%d cells, the committed notebook has %d" % (len(new_s), len(old_s))
            else:
                for i, (n, o) in enumerate(zip(new_s, old_s)):
                    if n != o:
                        why = "cell %d differs: made %r, committed %r" % (i, n, o)
                        break
            if why:
                stale += 1
                print("stale %s: %s (make notebooks writes it anew)" % (name, why[:3000]))
            else:
                print("current %s (%.1f s)" % (name, took))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())

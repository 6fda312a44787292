"""The kernelspec of roper's kernel: python3 -m roper_kernel.spec DIR --bin ROPER --pythonpath PY
writes DIR/kernel.json (DIR made when missing), the file `jupyter kernelspec install` would copy
into share/jupyter/kernels/roper. The kernel runs ROPER --kernel (its $ROPER_BIN) and finds this
package on PY. Needs no Jupyter package: make install runs it on any machine."""
import argparse
import json
import os
import sys

NAME = "roper"
DISPLAY_NAME = "roper (Lua 5.4)"


def kernel_json(roper_bin, pythonpath):
    return {
        "argv": [sys.executable or "/usr/bin/python3", "-m", "roper_kernel", "-f", "{connection_file}"],
        "display_name": DISPLAY_NAME,
        "language": "lua",
        "interrupt_mode": "signal",
        # (the last: no note from ipykernel's debugger about frozen modules on every start)
        "env": {"ROPER_BIN": roper_bin, "PYTHONPATH": pythonpath,
                "PYDEVD_DISABLE_FILE_VALIDATION": "1"},
    }


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m roper_kernel.spec", description=__doc__)
    ap.add_argument("dir", help="folder to write kernel.json into")
    ap.add_argument("--bin", required=True, help="the roper program the kernel runs")
    ap.add_argument("--pythonpath", required=True, help="the folder that holds roper_kernel/")
    a = ap.parse_args(argv)
    os.makedirs(a.dir, exist_ok=True)
    path = os.path.join(a.dir, "kernel.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(kernel_json(a.bin, a.pythonpath), f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


if __name__ == "__main__":
    main()

"""The tutorial notebook run in a real browser: tests/lua/notebook_browser_spec.lua runs
/usr/bin/python3 tests/kernel/browser_test.py ROPER_BIN [--screenshot FILE] [--opened FILE].

It starts the notebook server (jupyter-notebook) on 127.0.0.1 with the roper kernel and a byte
for byte copy of notebooks/tutorial.ipynb as committed, with its outputs, and opens the
notebook's page in headless Chromium (chromium-headless-shell, driven through the DevTools
protocol over a websocket to 127.0.0.1), as `make notebook` opens it for a reader. It checks
that the page opens without a dialog (Jupyter shows "Notebook validation failed" over a notebook
that is not valid nbformat 4) and shows the committed outputs (one picture per rp.plot/rp.heatmap
of the tutorial), then takes the screenshot of the page as opened (--opened FILE). Then it clears
the outputs (Cell > All Output > Clear), runs every cell (Cell > Run All:
Jupyter.notebook.execute_all_cells), waits until all have run, and checks the page: every code
cell has run, none shows an error, and the pictures are inline (img elements of PNG outputs, one
per plot call). Then it scrolls to the first picture and takes a screenshot (FILE;
docs/notebook.png is one). Prints "ok NAME" or "FAIL NAME: why" per check. Every wait has a
timeout; the processes it starts are ended at the end.
"""
import asyncio
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import nbformat  # noqa: E402
from tornado.websocket import websocket_connect  # noqa: E402

from roper_kernel import spec  # noqa: E402

T = 60  # seconds for the server, the browser and the kernel to start
RUN_TIMEOUT = 300  # seconds for the whole notebook to run
BROWSERS = ("chromium-headless-shell", "chromium")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, timeout, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError("%s ended (status %d)" % (proc.args[0], proc.returncode))
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return r.read()
        except OSError:
            time.sleep(0.3)
    raise TimeoutError("no answer from %s in %d s" % (url, timeout))


class Page:
    """One browser tab through the DevTools protocol."""

    def __init__(self, ws):
        self.ws = ws
        self.n = 0

    async def call(self, method, **params):
        self.n += 1
        my = self.n
        await self.ws.write_message(json.dumps({"id": my, "method": method, "params": params}))
        while True:
            msg = await asyncio.wait_for(self.ws.read_message(), timeout=T)
            if msg is None:
                raise ConnectionError("the browser closed the connection")
            m = json.loads(msg)
            if m.get("id") == my:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m["result"]

    async def js(self, expr):
        r = await self.call("Runtime.evaluate", expression=expr, returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError("%s: %s" % (expr, r["exceptionDetails"].get("text")))
        return r["result"].get("value")

    async def wait_js(self, expr, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if await self.js(expr):
                    return
            except RuntimeError:
                pass
            await asyncio.sleep(0.5)
        raise TimeoutError("not true after %d s: %s" % (timeout, expr))


CODE_CELLS = "Jupyter.notebook.get_cells().filter(c => c.cell_type === 'code')"
# the pictures shown on the page (loaded PNG outputs)
PICTURES = ("Array.from(document.querySelectorAll('.output_png img'))"
            ".filter(i => i.complete && i.naturalWidth > 100).length")


async def screenshot(p, path):
    """The page's screenshot written to path; None or why it is not a picture."""
    import base64
    data = await p.call("Page.captureScreenshot", format="png")
    png = base64.b64decode(data["data"])
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(png)
    os.replace(tmp, path)
    return None if png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20000 else \
        "not a picture (%d bytes)" % len(png)


async def drive(url, devtools, shot, opened_shot, results):
    targets = json.loads(wait_http(devtools + "/json/list", T))
    page_ws = [t for t in targets if t["type"] == "page"][0]["webSocketDebuggerUrl"]
    ws = await websocket_connect(page_ws, max_message_size=256 << 20)
    p = Page(ws)
    await p.call("Page.enable")
    await p.call("Emulation.setDeviceMetricsOverride", width=1200, height=1000,
                 deviceScaleFactor=1, mobile=False)
    await p.call("Page.navigate", url=url)
    await p.wait_js("typeof Jupyter !== 'undefined' && Jupyter.notebook && Jupyter.notebook.kernel"
                    " && Jupyter.notebook.kernel.is_connected() && Jupyter.notebook.kernel.info_reply"
                    " && Jupyter.notebook.kernel.info_reply.implementation === 'roper'", T)
    results.append(("kernel_connected", None))
    # the notebook as committed: no dialog over it (the dialog is made while the notebook loads,
    # before the kernel connects), its outputs shown
    await p.wait_js("Jupyter.notebook._fully_loaded === true", T)
    await asyncio.sleep(1.0)
    dialogs = await p.js("Array.from(document.querySelectorAll('.modal')).map(m => "
                         "(m.querySelector('.modal-title') || m).textContent.trim() + ': ' + "
                         "(m.querySelector('.modal-body') || m).textContent.trim().slice(0, 300))")
    results.append(("no_dialog", None if dialogs == [] else "a dialog: %s" % " | ".join(dialogs)))
    plots = sum(len(re.findall(r"rp\.(?:plot|heatmap)\(", c.source))
                for c in nbformat.read(os.path.join(ROOT, "notebooks/tutorial.ipynb"), 4).cells
                if c.cell_type == "code")
    await p.js("window.scrollTo(0, 0), true")
    shown = 0
    deadline = time.monotonic() + T
    while time.monotonic() < deadline:  # the committed pictures, decoded
        shown = await p.js(PICTURES)
        if shown >= plots:
            break
        await asyncio.sleep(0.5)
    results.append(("committed_outputs_shown", None if shown == plots and plots > 0
                    else "%d pictures on the page, %d plot calls" % (shown, plots)))
    if opened_shot:
        results.append(("screenshot_opened", await screenshot(p, opened_shot)))
    # then run as a reader reruns it: Cell > All Output > Clear, Cell > Run All
    await p.js("Jupyter.notebook.clear_all_output(), true")
    n = await p.js(CODE_CELLS + ".length")
    ran0 = await p.js(CODE_CELLS + ".filter(c => c.input_prompt_number !== undefined && "
                      "c.input_prompt_number !== null).length")
    left = await p.js("document.querySelectorAll('.output_area').length")
    results.append(("outputs_cleared_before", None if ran0 == 0 and left == 0
                    else "%d cells had run, %d outputs left" % (ran0, left)))
    await p.js("Jupyter.notebook.execute_all_cells(), true")
    await p.wait_js(CODE_CELLS + ".every(c => typeof c.input_prompt_number === 'number')"
                    " && Jupyter.notebook.kernel_busy === false", RUN_TIMEOUT)
    results.append(("all_cells_ran", None if n > 20 else "only %d code cells" % n))
    errors = await p.js("document.querySelectorAll('.output_error, .output_stderr').length")
    results.append(("no_errors", None if errors == 0 else "%d error outputs" % errors))
    pics = await p.js(PICTURES)
    results.append(("plots_inline", None if pics == plots and plots > 0
                    else "%d pictures on the page, %d plot calls" % (pics, plots)))
    html_tables = await p.js("document.querySelectorAll('.output_html .roper-tensor table').length")
    results.append(("tensors_as_tables", None if html_tables > 0 else "no tensor table"))
    # the first picture with the code cell above it, in the viewport
    await p.js("(() => { const img = document.querySelector('.output_png img');"
               " const cell = img.closest('.cell'); const prev = cell.previousElementSibling;"
               " (prev || cell).scrollIntoView(); return true; })()")
    await asyncio.sleep(1.0)
    visible = await p.js("(() => { const r = document.querySelector('.output_png img')"
                         ".getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight"
                         " && r.height > 100; })()")
    results.append(("plot_in_view", None if visible else "the picture is not in the viewport"))
    if shot:
        results.append(("screenshot", await screenshot(p, shot)))
    ws.close()


def stop(proc):
    if proc and proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def main():
    roper = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build/roper"))
    shot = opened_shot = None
    if "--screenshot" in sys.argv:
        shot = os.path.abspath(sys.argv[sys.argv.index("--screenshot") + 1])
    if "--opened" in sys.argv:
        opened_shot = os.path.abspath(sys.argv[sys.argv.index("--opened") + 1])
    browser = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if browser is None:
        print("FAIL browser: no chromium-headless-shell or chromium (make test installs it)")
        return 1
    tmp = tempfile.mkdtemp(prefix="roper-browser-test-")
    server = chrome = None
    results = []
    try:
        spec.main([os.path.join(tmp, "jupyter", "kernels", spec.NAME), "--bin", roper,
                   "--pythonpath", os.path.join(ROOT, "python")])
        nbdir = os.path.join(tmp, "nb")
        os.makedirs(nbdir)
        # the committed file as it is (never read and written again by nbformat, which could
        # mend or mask what a reader's Jupyter would see)
        shutil.copyfile(os.path.join(ROOT, "notebooks/tutorial.ipynb"),
                        os.path.join(nbdir, "tutorial.ipynb"))
        env = dict(os.environ, JUPYTER_PATH=os.path.join(tmp, "jupyter"),
                   JUPYTER_CONFIG_DIR=os.path.join(tmp, "config"),
                   JUPYTER_DATA_DIR=os.path.join(tmp, "data"),
                   JUPYTER_RUNTIME_DIR=os.path.join(tmp, "runtime"), HOME=tmp)
        port, token = free_port(), secrets.token_hex(16)
        server = subprocess.Popen(
            ["/usr/bin/python3", "-m", "notebook", "--no-browser", "--ip=127.0.0.1",
             "--port=%d" % port, "--port-retries=0", "--notebook-dir=" + nbdir,
             "--NotebookApp.token=" + token, "--NotebookApp.open_browser=False"]
            + (["--allow-root"] if os.geteuid() == 0 else []),
            env=env, stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "server.log"), "wb"),
            stdin=subprocess.DEVNULL, start_new_session=True)
        base = "http://127.0.0.1:%d" % port
        wait_http("%s/api/status?token=%s" % (base, token), T, server)
        dport = free_port()
        chrome = subprocess.Popen(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--disable-dev-shm-usage", "--remote-debugging-address=127.0.0.1",
             "--remote-debugging-port=%d" % dport, "--user-data-dir=" + os.path.join(tmp, "profile"),
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "browser.log"), "wb"),
            stdin=subprocess.DEVNULL, start_new_session=True)
        url = "%s/notebooks/tutorial.ipynb?token=%s" % (base, token)
        asyncio.run(asyncio.wait_for(drive(url, "http://127.0.0.1:%d" % dport, shot, opened_shot,
                                           results), RUN_TIMEOUT + 5 * T))
    except Exception as e:  # the checks not reached fail with this
        results.append(("run", "%s: %s" % (type(e).__name__, e)))
        for log in ("server.log", "browser.log"):
            try:
                with open(os.path.join(tmp, log), errors="replace") as f:
                    sys.stderr.write("--- %s\n%s\n" % (log, f.read()[-3000:]))
            except OSError:
                pass
    finally:
        stop(chrome)
        stop(server)
        shutil.rmtree(tmp, ignore_errors=True)
    failed = 0
    for name, why in results:
        if why is None:
            print("ok", name)
        else:
            failed += 1
            print("FAIL %s: %s" % (name, why))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""roper's Jupyter kernel driven through jupyter_client, as a notebook front end drives it: run by
tests/lua/kernel_spec.lua (/usr/bin/python3 tests/kernel/kernel_test.py ROPER_BIN), which checks
one line per case: "ok NAME" or "FAIL NAME: why". Every wait has a timeout; the whole run is
bounded by the spec's timeout too.

The references: the REPL itself (build/roper -e prints a value as the REPL does; rp.help's text),
the exact byte counts of what a cell prints, PNG's signature, and /proc for the processes.
"""
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

from roper_kernel import kernel as rk  # noqa: E402
from roper_kernel import spec  # noqa: E402

import jupyter_client  # noqa: E402

ROPER = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build/roper"))
T = 30  # seconds: the longest any one reply may take


def repl(expr):
    """What the REPL prints for expr (roper -e prints an expression's values as the REPL does)."""
    out = subprocess.run([ROPER, "-e", expr], capture_output=True, text=True, timeout=T)
    return out.stdout


class Session:
    def __init__(self, kernel_name="roper"):
        self.km = jupyter_client.KernelManager(kernel_name=kernel_name)
        self.km.start_kernel()
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=T)

    def run(self, code, timeout=T, after_send=None):
        """Executes code; returns (reply content, [(msg_type, content)] of its iopub messages)."""
        msg_id = self.kc.execute(code)
        if after_send:
            after_send()
        return self.collect(msg_id, timeout)

    def collect(self, msg_id, timeout=T):
        out = []
        deadline = time.monotonic() + timeout
        while True:
            m = self.kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
            if m["parent_header"].get("msg_id") != msg_id:
                continue
            if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                break
            if m["msg_type"] in ("stream", "execute_result", "display_data", "error"):
                out.append((m["msg_type"], m["content"]))
        while True:
            r = self.kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
            if r["parent_header"].get("msg_id") == msg_id:
                return r["content"], out

    def plot_dir(self):
        """The kernel's folder for pictures ($ROPER_PLOT_DIR), asked of its roper."""
        rep, out = self.run('os.getenv("ROPER_PLOT_DIR")')
        return text_of(out)[0]

    def close(self):
        """Shuts the kernel down as a notebook's "Shut down" does (a shutdown request; killed only
        when it does not end within jupyter_client's wait)."""
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=False)


def text_of(out, kind="execute_result", mime="text/plain"):
    return [c["data"][mime] for t, c in out if t == kind and mime in c["data"]]


def stream(out, name="stdout"):
    return "".join(c["text"] for t, c in out if t == "stream" and c["name"] == name)


def check(cond, why):
    if not cond:
        raise AssertionError(why)


def roper_pid(s):
    """The pid of the kernel's roper process, asked of roper itself."""
    rep, out = s.run('io.open("/proc/self/stat"):read("n")')
    return int(text_of(out)[0])


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


CASES = []


def case(fn):
    CASES.append(fn)
    return fn


@case
def kernel_info(s):
    c = s.kc.kernel_info(reply=True, timeout=T)["content"]
    li = c["language_info"]
    check(c["status"] == "ok" and c["implementation"] == "roper", c)
    check(c["implementation_version"] == repl("rp.build_info().version").strip(), c)
    check(li["name"] == "lua" and li["file_extension"] == ".lua" and li["mimetype"] == "text/x-lua", li)
    check(li["codemirror_mode"] == "lua" and li["pygments_lexer"] == "lua", li)
    ks = jupyter_client.kernelspec.KernelSpecManager().get_kernel_spec("roper")
    check(ks.display_name == "roper (Lua 5.4)" and ks.language == "lua", ks.to_dict())


@case
def session_keeps_values(s):
    rep, out = s.run("x = 41")
    check(rep["status"] == "ok" and out == [], (rep, out))
    rep, out = s.run("x + 1")
    check(text_of(out) == ["42"], out)
    check(rep["execution_count"] == [c for t, c in out][0]["execution_count"], (rep, out))


@case
def prints_as_the_repl(s):
    for expr in ("rp.eye(2)", "{a = 1, {2, 3}}", "rp.randn({3, 4}, rp.rng(7))", "1, 'two', nil"):
        rep, out = s.run(expr)
        check(text_of(out) == [repl(expr).rstrip("\n")], (expr, text_of(out), repl(expr)))
    rep, out = s.run('print("hi", 2) io.write("no newline") io.stderr:write("to stderr\\n")')
    check(stream(out) == "hi\t2\nno newline" and stream(out, "stderr") == "to stderr\n", out)


@case
def stdin_reads_nothing(s):
    rep, out = s.run('io.read("l"), io.read("a")')  # not the kernel's requests, and no hang
    check(text_of(out) == ['nil\n'], out)  # nil, then "" (strings print bare)
    rep, out = s.run("x")
    check(text_of(out) == ["41"], (rep, out))


@case
def last_line_value(s):
    rep, out = s.run("local acc = 0\nfor i = 1, 4 do acc = acc + i end\nacc, acc * 2")
    check(text_of(out) == ["10\n20"], out)
    rep, out = s.run("z = 2\nrp.maxdiff(rp.ones{2}, rp.ones{2} * z)")  # a call: its value shown
    check(text_of(out) == ["1.0"], out)
    rep, out = s.run("for i = 1, 3 do\nz = i\nend")  # not "return end": the loop runs on
    check(rep["status"] == "ok" and text_of(out) == [], out)
    rep, out = s.run("z")
    check(text_of(out) == ["3"], out)


@case
def tensor_html(s):
    rep, out = s.run("rp.tensor{{1, 2, 3}, {4, 5, 6}}")
    html = text_of(out, mime="text/html")
    check(len(html) == 1, out)
    check("tensor [2 x 3]" in html[0] and "<td>1</td><td>2</td><td>3</td>" in html[0], html)
    check(text_of(out) == [repl("rp.tensor{{1, 2, 3}, {4, 5, 6}}").rstrip("\n")], out)
    rep, out = s.run("3")
    check(text_of(out, mime="text/html") == [], out)


@case
def syntax_error(s):
    rep, out = s.run("x = = 1")
    check(rep["status"] == "error" and rep["ename"] == "syntax error", rep)
    check(rep["evalue"] == "cell:1: unexpected symbol near '='", rep)
    errs = [c for t, c in out if t == "error"]
    check(len(errs) == 1 and errs[0]["evalue"] == rep["evalue"], out)
    rep, out = s.run("x")
    check(text_of(out) == ["41"], (rep, out))


@case
def runtime_error(s):
    rep, out = s.run('local function f() error("boom") end\nf()')
    check(rep["status"] == "error" and rep["ename"] == "error" and rep["evalue"] == "cell:1: boom", rep)
    tb = rep["traceback"]
    check(tb[0] == "cell:1: boom" and tb[1] == "stack traceback:", tb)
    check("\tcell:1: in function <cell:1>" in tb, tb)  # f, called in a tail call as in the REPL
    rep, out = s.run("local t = nil\nlocal y = t.x + 1")
    check(rep["evalue"] == "cell:2: attempt to index a nil value (local 't')", rep)
    check(rep["traceback"][1:] == ["stack traceback:", "\tcell:2: in main chunk", "\t[C]: in ?"],
          rep["traceback"])
    rep, out = s.run('rp.zeros("a")')
    check(rep["evalue"] == "cell:1: bad argument #1 to 'zeros' (shape expected (a table of sizes, "
          "or sizes as numbers), got string \"a\")", rep)
    rep, out = s.run("x")
    check(text_of(out) == ["41"], (rep, out))


@case
def megabytes_of_print(s):
    n, line = 200000, "x" * 20
    rep, out = s.run('for i = 1, %d do print(("x"):rep(20)) end' % n, timeout=60)
    shown = stream(out)
    check(rep["status"] == "ok", rep)
    check(len(shown) == rk.MAX_OUTPUT and shown.startswith(line + "\n"), len(shown))
    dropped = n * (len(line) + 1) - rk.MAX_OUTPUT
    check(stream(out, "stderr") == "\n[output cut: %d more bytes not shown, at most %d a cell]\n"
          % (dropped, rk.MAX_OUTPUT), stream(out, "stderr"))
    rep, out = s.run("x")
    check(text_of(out) == ["41"], (rep, out))


@case
def plot_inline(s):
    rep, out = s.run("rp.plot({1, 4, 9}, {title = 'squares'})")
    pics = [c for t, c in out if t == "display_data"]
    check(rep["status"] == "ok" and len(pics) == 1, out)
    png = base64.b64decode(pics[0]["data"]["image/png"])
    check(png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000, png[:16])
    check("text/plain" in pics[0]["data"], pics[0])
    check(text_of(out) == [], out)  # not the path of the file it went through
    rep, out = s.run("n = 3\nrp.heatmap(rp.eye(4))\nrp.hist({1, 2, 2, 3})\nn")
    check(len([1 for t, c in out if t == "display_data"]) == 2 and text_of(out) == ["3"], out)


@case
def plot_bad_data(s):
    rep, out = s.run("rp.plot({1, 0/0})")
    check(rep["status"] == "error" and rep["evalue"] ==
          "bad argument #1 to 'rp.plot' (y[2] is nan; values must be finite)", rep)
    check([t for t, c in out if t == "display_data"] == [], out)
    rep, out = s.run("x")
    check(text_of(out) == ["41"], (rep, out))


# the kernels of tests/kernel/paused_kernel.py: where each waits for the client's next request
PAUSES = {"after_error_reply": "roper-paused-after-error", "cell_start": "roper-paused-at-start"}


@case
def request_after_an_error(s):
    """A cell sent once the client has a failed cell's reply runs, however late the kernel is to
    take its next step (here it waits until that cell has arrived): ipykernel's stop_on_error
    drops only the cells sent before."""
    p = Session(PAUSES["after_error_reply"])
    try:
        p.run("y = 5")
        for bad in ("error('no')", "x = = 1", "rp.plot({1, 0/0})"):
            msg_id = p.kc.execute(bad)
            while True:  # its reply, and then at once the next cell (not waiting for "idle")
                r = p.kc.get_shell_msg(timeout=T)
                if r["parent_header"].get("msg_id") == msg_id:
                    break
            check(r["content"]["status"] == "error", (bad, r["content"]))
            rep, out = p.run("y")
            check(rep["status"] == "ok" and text_of(out) == ["5"], (bad, rep, out))
    finally:
        p.close()


@case
def request_before_an_error(s):
    """A cell sent before the cell before it failed is dropped, as Jupyter's "Run all" expects
    (stop_on_error): the kernel here waits at the start of each cell until the next has arrived."""
    p = Session(PAUSES["cell_start"])
    try:
        first = p.kc.execute("y = 5 error('no')")
        second = p.kc.execute("y = 6")
        rep, out = p.collect(first)
        check(rep["status"] == "error" and rep["evalue"] == "cell:1: no", rep)
        rep, out = p.collect(second)
        check(rep["status"] == "aborted" and out == [], (rep, out))
    finally:
        p.close()


@case
def help_query(s):
    rep, out = s.run("?rp.ones")
    want = repl("print(rp.help(rp.ones))")
    check(rep["status"] == "ok" and stream(out) == want, (stream(out), want))


@case
def complete(s):
    c = s.kc.complete("rp.ro", 5, reply=True, timeout=T)["content"]
    check(c["status"] == "ok" and c["matches"] == ["rp.rope"] and c["cursor_start"] == 0
          and c["cursor_end"] == 5, c)
    code = 'y = "é" .. rp.zer'
    c = s.kc.complete(code, len(code), reply=True, timeout=T)["content"]
    check(c["matches"] == ["rp.zeros"] and c["cursor_start"] == code.index("rp.zer"), c)
    c = s.kc.complete("t = rp.eye(2); t:nar", 20, reply=True, timeout=T)["content"]
    check(c["matches"] == [] and c["cursor_start"] == 15, c)  # t is not set yet: nothing
    s.run("t = rp.eye(2)")
    c = s.kc.complete("t:nar", 5, reply=True, timeout=T)["content"]
    check(c["matches"] == ["t:narrow"], c)
    c = s.kc.complete("whi", 3, reply=True, timeout=T)["content"]
    check(c["matches"] == ["while"], c)


@case
def inspect(s):
    c = s.kc.inspect("y = rp.ones{2}", 7, reply=True, timeout=T)["content"]
    want = repl("print(rp.help(rp.ones))").rstrip("\n")
    check(c["status"] == "ok" and c["found"] and c["data"]["text/plain"] == want, c)
    c = s.kc.inspect("t:narrow(1, 1, 1)", 4, reply=True, timeout=T)["content"]
    check(c["found"] and c["data"]["text/plain"].startswith("t:narrow("), c)
    c = s.kc.inspect("   ", 1, reply=True, timeout=T)["content"]
    check(c["status"] == "ok" and not c["found"], c)


@case
def is_complete(s):
    for code, want in (("for i = 1, 2 do", "incomplete"), ("x = 1", "complete"),
                       ("x = )", "invalid"), ("?rp.ones", "complete"),
                       ("local a = 1\na", "complete"), ('s = "unfinished', "incomplete"),
                       ("x = 1 +", "incomplete"), ("end", "invalid")):
        msg_id = s.kc.is_complete(code)
        r = s.kc.get_shell_msg(timeout=T)
        check(r["parent_header"]["msg_id"] == msg_id and r["content"]["status"] == want,
              (code, r["content"]))
    check(r["content"].get("indent") is None, r["content"])  # the last one: invalid


@case
def interrupt_loop(s):
    t0 = time.monotonic()
    rep, out = s.run("while true do end", after_send=lambda: (time.sleep(0.5), s.km.interrupt_kernel()))
    check(rep["status"] == "error" and rep["ename"] == "interrupted", rep)
    check(rep["evalue"].endswith("interrupted!"), rep)
    check(time.monotonic() - t0 < 10, "took %.1f s" % (time.monotonic() - t0))
    rep, out = s.run("x")
    check(text_of(out) == ["41"], (rep, out))


@case
def interrupt_blas(s):
    s.run("big = rp.randn{1200, 1200}")
    rep, out = s.run("for i = 1, 1000 do done = rp.matmul(big, big) end",
                     after_send=lambda: (time.sleep(1.0), s.km.interrupt_kernel()))
    check(rep["status"] == "error" and rep["ename"] == "interrupted", rep)
    rep, out = s.run("x, rp.is_tensor(done)")
    check(text_of(out) == ["41\ntrue"], out)


@case
def interrupt_shell(s):
    """The interrupt reaches the program the cell runs (roper's whole process group), as a
    terminal's Ctrl-C does: sleep ends at once and os.execute says how."""
    t0 = time.monotonic()
    rep, out = s.run('os.execute("sleep 30")',
                     after_send=lambda: (time.sleep(1.0), s.km.interrupt_kernel()))
    check(rep["status"] == "ok", rep)
    check(text_of(out) == ["nil\nsignal\n2"], out)
    check(time.monotonic() - t0 < 20, "took %.1f s" % (time.monotonic() - t0))
    rep, out = s.run("x")
    check(text_of(out) == ["41"], (rep, out))


@case
def oversized_cell(s):
    """A cell over 64 MiB gets one refusal, and the session goes on (it used to deadlock)."""
    rep, out = s.run("y = 1 --" + "a" * (64 << 20))
    check(rep["status"] == "error", rep)
    check("is refused (at most 64 MiB; skipped)" in rep["evalue"], rep)
    rep, out = s.run("x, y")
    check(text_of(out) == ["41\nnil"], (rep, out))


@case
def roper_killed_mid_cell(s):
    pid = roper_pid(s)
    rep, out = s.run('os.execute("kill -KILL %d") while true do end' % pid)
    check(rep["status"] == "error" and rep["ename"] == "roper died", rep)
    check(rep["evalue"] == "roper was killed by signal 9 (SIGKILL) during the cell; a new roper "
          "session started (its variables are gone)", rep)
    check(not alive(pid), pid)
    rep, out = s.run("x, 1 + 1")
    check(text_of(out) == ["nil\n2"], out)
    check(roper_pid(s) != pid, "same process")
    s.run("x = 41")


@case
def restart(s):
    """Jupyter's restart in the middle of an endless cell: a fresh session, the old roper gone."""
    old_pid = roper_pid(s)
    old_plots = s.plot_dir()
    s.kc.execute("while true do end")
    time.sleep(0.5)
    s.km.restart_kernel(now=True)
    shutil.rmtree(old_plots, ignore_errors=True)  # a kernel killed cannot remove its own
    s.kc.wait_for_ready(timeout=T)
    rep, out = s.run("x, rp.ones{2}:sum()")
    check(text_of(out) == ["nil\n2.0"], out)
    for _ in range(50):
        if not alive(old_pid):
            break
        time.sleep(0.1)
    check(not alive(old_pid), "the old roper %d lives on" % old_pid)
    s.run("x = 41")


@case
def kernel_killed(s):
    """The kernel process itself killed (SIGKILL): its roper goes too (ROPER_PARENT_PID), and
    jupyter_client's restart brings a working kernel."""
    pid = roper_pid(s)
    old_plots = s.plot_dir()
    os.kill(s.km.provisioner.process.pid, signal.SIGKILL)
    shutil.rmtree(old_plots, ignore_errors=True)  # a kernel killed cannot remove its own
    for _ in range(50):
        if not alive(pid):
            break
        time.sleep(0.1)
    check(not alive(pid), "roper %d outlived its kernel" % pid)
    for _ in range(50):
        if not s.km.is_alive():
            break
        time.sleep(0.1)
    check(not s.km.is_alive(), "the kernel lives on")
    s.km.restart_kernel(now=True)
    s.kc.wait_for_ready(timeout=T)
    rep, out = s.run("1 + 1")
    check(text_of(out) == ["2"], out)
    s.run("x = 41")


@case
def shutdown_removes_plots(s):
    """Jupyter's shutdown ends roper and removes the kernel's folder for pictures."""
    plots, pid = s.plot_dir(), roper_pid(s)
    check(os.path.isdir(plots), "no folder %s" % plots)
    s.close()
    check(not os.path.exists(plots), "%s is left behind" % plots)
    for _ in range(50):
        if not alive(pid):
            break
        time.sleep(0.1)
    check(not alive(pid), "roper %d outlived its kernel's shutdown" % pid)
    s.__init__()  # a fresh kernel for any case after this one
    s.run("x = 41")


@case
def parent_gone_removes_plots(s):
    """A kernel whose parent dies is ended by its parent poller with os._exit (no atexit handler
    runs): its folder for pictures is removed first."""
    tmp = tempfile.mkdtemp(prefix="roper-kernel-orphan-")
    pid = None
    try:
        env = dict(os.environ, TMPDIR=tmp, ROPER_BIN=ROPER,
                   PYTHONPATH=os.path.join(ROOT, "python"))
        # the parent: a shell that starts the kernel, prints its pid and waits for a line
        parent = subprocess.Popen(
            ["sh", "-c", 'JPY_PARENT_PID=$$ "$0" -m roper_kernel -f "$1" </dev/null >/dev/null '
             '2>&1 & echo $!; read line', sys.executable, os.path.join(tmp, "conn.json")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
        pid = int(parent.stdout.readline())
        folders = []
        for _ in range(T * 10):
            folders = [f for f in os.listdir(tmp) if f.startswith("roper-kernel-")]
            if folders:
                break
            time.sleep(0.1)
        check(len(folders) == 1, "the kernel made no folder for pictures: %s" % os.listdir(tmp))
        parent.stdin.write("\n")
        parent.stdin.close()
        parent.wait(timeout=T)
        for _ in range(T * 10):
            if not alive(pid):
                break
            time.sleep(0.1)
        check(not alive(pid), "the kernel %d outlived its parent" % pid)
        check(os.listdir(tmp) == ["conn.json"] or os.listdir(tmp) == [],
              "left behind: %s" % os.listdir(tmp))
    finally:
        if pid is not None and alive(pid):  # a kernel that failed to end
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    tmp = tempfile.mkdtemp(prefix="roper-kernel-test-")
    kdir = os.path.join(tmp, "kernels", "roper")
    spec.main([kdir, "--bin", ROPER, "--pythonpath", os.path.join(ROOT, "python")])
    os.environ["JUPYTER_PATH"] = tmp
    os.environ["JUPYTER_RUNTIME_DIR"] = os.path.join(tmp, "runtime")
    only = sys.argv[2:]
    for mode in PAUSES:  # tests/kernel/paused_kernel.py, a kernelspec for each of its pauses
        ks = spec.kernel_json(ROPER, os.path.join(ROOT, "python"))
        ks["argv"][1:3] = [os.path.join(ROOT, "tests", "kernel", "paused_kernel.py")]
        ks["env"]["ROPER_TEST_PAUSE"] = mode
        os.makedirs(os.path.join(tmp, "kernels", PAUSES[mode]))
        with open(os.path.join(tmp, "kernels", PAUSES[mode], "kernel.json"), "w") as f:
            json.dump(ks, f)
    s = Session()
    failed = 0
    try:
        for fn in CASES:
            if only and fn.__name__ not in only:
                continue
            try:
                fn(s)
                print("ok", fn.__name__, flush=True)
            except Exception as e:  # one case's failure does not stop the others
                failed += 1
                why = "".join(traceback.format_exception_only(type(e), e)).strip()[:2000]
                print("FAIL %s: %s" % (fn.__name__, why.replace("\n", " ")), flush=True)
                try:  # a fresh kernel for the next case
                    s.close()
                except Exception:
                    pass
                s = Session()
                s.run("x = 41")
    finally:
        try:
            s.close()
        except Exception:
            pass
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""roper's Jupyter kernel: ipykernel's wrapper-kernel pattern around `roper --kernel`.

One roper process per kernel keeps the notebook's Lua session. Each request goes to its stdin as
"<verb> <bytes>[ <cursor>]\\n<text>" and its reply comes back as one JSON line on a pipe of its own
(repl/repl_kernel.c has the protocol); what a cell prints comes on roper's stdout and stderr and
is streamed to the notebook as it comes, at most MAX_OUTPUT bytes a cell (the rest is counted and
dropped). rp.plot and the other pictures go to a temporary folder ($ROPER_PLOT_DIR) and are shown
as PNG display_data after the cell. Values are shown as the REPL prints them (text/plain), a tensor
also as an HTML table (rp.tohtml).

Interrupt: Jupyter sends SIGINT to the kernel; the kernel sends it on to roper (in a session of its
own, so it gets one), where it stops the cell at the next Lua instruction, as Ctrl-C in the REPL.
If roper ends during a cell (killed, or a third interrupt while it is stuck in C code) the cell
fails with that message and a new roper process (a fresh session) is started for the next cell.
"""
import asyncio
import atexit
import base64
import codecs
import functools
import html
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time

from ipykernel.kernelapp import IPKernelApp
from ipykernel.kernelbase import Kernel
from ipykernel.parentpoller import ParentPollerUnix

MAX_OUTPUT = 1 << 20  # bytes of stdout and stderr shown per cell
READ_SIZE = 1 << 16
STREAM_INTERVAL = 0.05  # seconds between stream messages while output comes
PLOT_NAME = re.compile(r"^plot-(\d+)\.png$")  # what rp.plot writes to $ROPER_PLOT_DIR


def _roper_bin():
    return os.environ.get("ROPER_BIN") or shutil.which("roper") or "roper"


class RoperDied(Exception):
    pass


# The picture folders of the roper processes this kernel runs: each is removed when its process is
# closed, and any left when the kernel's process ends (atexit, and the parent poller below, since
# ipykernel's ends the process with os._exit, which runs no atexit handler).
_plot_dirs = set()


def _remove_plot_dirs():
    for d in list(_plot_dirs):
        shutil.rmtree(d, ignore_errors=True)
        _plot_dirs.discard(d)


atexit.register(_remove_plot_dirs)


class ParentPoller(threading.Thread):
    """ipykernel's ParentPollerUnix (the kernel ends when the process that started it is gone),
    which removes the picture folders before it ends the process with os._exit(1). It watches for
    the parent's pid to change, not only for it to become 1, so a parent that leaves its
    children to a subreaper counts too."""

    def __init__(self):
        super().__init__(daemon=True)
        self.parent = os.getppid()

    def run(self):
        while os.getppid() == self.parent:
            time.sleep(1.0)
        _remove_plot_dirs()
        os._exit(1)


class RoperKernelApp(IPKernelApp):
    """IPKernelApp with the ParentPoller above in place of ipykernel's own (Unix)."""

    def init_poller(self):
        super().init_poller()
        if isinstance(self.poller, ParentPollerUnix):
            self.poller = ParentPoller()


class Roper:
    """The roper --kernel process: requests, replies, and its output while it works."""

    def __init__(self):
        self.plot_dir = tempfile.mkdtemp(prefix="roper-kernel-")
        _plot_dirs.add(self.plot_dir)
        r, w = os.pipe()
        env = dict(os.environ)
        env.update(ROPER_KERNEL_FD=str(w), ROPER_PLOT_DIR=self.plot_dir,
                   ROPER_PARENT_PID=str(os.getpid()))
        env.pop("ROPER_PLOT_TERMINAL", None)
        self.proc = subprocess.Popen(
            [_roper_bin(), "--kernel"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, pass_fds=(w,), env=env, start_new_session=True)
        os.close(w)
        self.reply_fd = r
        for fd in (r, self.proc.stdout.fileno(), self.proc.stderr.fileno()):
            os.set_blocking(fd, False)
        self.sel = selectors.DefaultSelector()
        self.sel.register(r, selectors.EVENT_READ, "reply")
        self.sel.register(self.proc.stdout, selectors.EVENT_READ, "stdout")
        self.sel.register(self.proc.stderr, selectors.EVENT_READ, "stderr")
        self.reply_buf = b""

    def how_it_ended(self):
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        if code < 0:
            try:
                return "roper was killed by signal %d (%s)" % (-code, signal.Signals(-code).name)
            except ValueError:
                return "roper was killed by signal %d" % -code
        return "roper exited with status %d" % code

    def request(self, verb, text, cursor=None, on_output=None):
        """Sends a request and returns its reply (a dict). on_output(name, bytes) gets what roper
        prints meanwhile. Raises RoperDied when roper ends first."""
        data = text.encode("utf-8", "surrogatepass")
        head = "%s %d%s\n" % (verb, len(data), "" if cursor is None else " %d" % cursor)
        try:
            self.proc.stdin.write(head.encode() + data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise RoperDied(self.how_it_ended())
        while True:
            events = self.sel.select(timeout=1.0)
            for key, _ in events:
                fd = key.fileobj if isinstance(key.fileobj, int) else key.fileobj.fileno()
                try:
                    chunk = os.read(fd, READ_SIZE)
                except BlockingIOError:
                    continue
                if key.data == "reply":
                    if not chunk:
                        self._drain(on_output)
                        raise RoperDied(self.how_it_ended())
                    self.reply_buf += chunk
                    if b"\n" in self.reply_buf:
                        line, self.reply_buf = self.reply_buf.split(b"\n", 1)
                        self._drain(on_output)  # everything printed came before the reply
                        return json.loads(line.decode("utf-8", "replace"))
                elif chunk and on_output:
                    on_output(key.data, chunk)
            if not events and self.proc.poll() is not None:
                self._drain(on_output)
                raise RoperDied(self.how_it_ended())

    def _drain(self, on_output):
        for f, name in ((self.proc.stdout, "stdout"), (self.proc.stderr, "stderr")):
            while True:
                try:
                    chunk = os.read(f.fileno(), READ_SIZE)
                except (BlockingIOError, OSError):
                    break
                if not chunk:
                    break
                if on_output:
                    on_output(name, chunk)

    def interrupt(self):
        # roper leads a process group of its own (start_new_session): the interrupt goes to the
        # whole group, as a terminal's Ctrl-C goes to its foreground group, so a program the cell
        # runs (os.execute, io.popen) ends too instead of running on while roper waits for it
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGINT)
            except ProcessLookupError:
                pass

    def new_plots(self):
        """The pictures written since the last call, in order: (path, bytes) each; removed."""
        found = []
        for name in os.listdir(self.plot_dir):
            m = PLOT_NAME.match(name)
            if m:
                found.append((int(m.group(1)), os.path.join(self.plot_dir, name)))
        out = []
        for _, path in sorted(found):
            with open(path, "rb") as f:
                out.append((path, f.read()))
            os.remove(path)
        return out

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.sel.close()
        os.close(self.reply_fd)
        for f in (self.proc.stdout, self.proc.stderr):
            f.close()
        shutil.rmtree(self.plot_dir, ignore_errors=True)
        _plot_dirs.discard(self.plot_dir)


class CellOutput:
    """A cell's stdout and stderr as stream messages: decoded as UTF-8 (bad bytes replaced), sent
    in batches, at most MAX_OUTPUT bytes; send(name, text) sends one stream message."""

    def __init__(self, send):
        self.send = send
        self.dec = {n: codecs.getincrementaldecoder("utf-8")("replace") for n in ("stdout", "stderr")}
        self.pending = {"stdout": "", "stderr": ""}
        self.shown = 0
        self.dropped = 0
        self.last = 0.0

    def add(self, name, chunk):
        room = MAX_OUTPUT - self.shown
        if room <= 0:
            self.dropped += len(chunk)
            return
        if len(chunk) > room:
            self.dropped += len(chunk) - room
            chunk = chunk[:room]
        self.shown += len(chunk)
        self.pending[name] += self.dec[name].decode(chunk)
        if time.monotonic() - self.last >= STREAM_INTERVAL:
            self.flush()

    def flush(self, final=False):
        for name in ("stdout", "stderr"):
            if final:
                self.pending[name] += self.dec[name].decode(b"", final=True)
            if self.pending[name]:
                self.send(name, self.pending[name])
                self.pending[name] = ""
        self.last = time.monotonic()
        if final and self.dropped:
            self.send("stderr", "\n[output cut: %d more bytes not shown, at most %d a cell]\n"
                      % (self.dropped, MAX_OUTPUT))


class RoperKernel(Kernel):
    implementation = "roper"
    implementation_version = "?"  # roper's version, asked of roper at start
    language = "lua"
    language_version = "5.4"
    language_info = {
        "name": "lua",
        "version": "5.4",
        "mimetype": "text/x-lua",
        "file_extension": ".lua",
        "codemirror_mode": "lua",
        "pygments_lexer": "lua",
    }
    banner = ("roper: Lua 5.4 with the roper module as rp. help() lists the topics, ?name is help "
              "on name, Tab completes, Shift-Tab shows help.")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.roper = Roper()
        try:
            reply = self.roper.request("execute", "rp.build_info().version")
            self.implementation_version = reply["results"][0]["text"]
        except (RoperDied, KeyError, IndexError):
            pass

    # -------------------------------------------------------------------------------- helpers

    def _stream(self, name, text):
        self.send_response(self.iopub_socket, "stream", {"name": name, "text": text})

    def _restart_roper(self):
        try:
            self.roper.close()
        except Exception:  # a dead process: nothing to close cleanly
            pass
        self.roper = Roper()

    def _error(self, ename, evalue, traceback, silent):
        if not silent:
            self.send_response(self.iopub_socket, "error", {
                "ename": ename, "evalue": evalue, "traceback": traceback})
            self._abort_waiting()
        return {"status": "error", "execution_count": self.execution_count, "ename": ename,
                "evalue": evalue, "traceback": traceback}

    # A failed cell and the cells after it. Jupyter's stop_on_error (the default of an execute
    # request) drops the execute requests that were waiting when a cell failed ("aborted" replies),
    # as "Run all" wants. ipykernel (6.17, Debian 12's) takes the waiting requests only once the
    # failed cell's reply has gone out, and lets new ones in again only on a later turn of its
    # event loop (Kernel._abort_queues): a cell the client sent as soon as it had the error reply
    # was dropped too whenever it arrived before that turn, as on a loaded machine. Here the
    # requests waiting are taken, and the end of the abort queued behind them, before the reply is
    # sent; ipykernel's own abort after the reply is then skipped. Where ipykernel has none of
    # these parts (another version), its own abort runs unchanged.
    _aborted_early = False

    def _abort_waiting(self):
        content = self.get_parent("shell").get("content", {}) if hasattr(self, "get_parent") else {}
        if not content.get("stop_on_error", True) or not all(
                hasattr(self, a) for a in ("shell_stream", "schedule_dispatch", "_aborting")):
            return
        self._aborting = True  # the execute requests queued from now on get "aborted"
        self.shell_stream.flush()  # those already received join the queue now

        async def stop_aborting():
            self._aborting = False

        stop = functools.partial(self.schedule_dispatch, stop_aborting)
        if self.stop_on_error_timeout:  # configured: requests arriving meanwhile dropped too
            asyncio.get_event_loop().call_later(self.stop_on_error_timeout, stop)
        else:
            stop()  # behind the requests received: one sent after the reply is never dropped
        self._aborted_early = True

    def _abort_queues(self):
        if self._aborted_early:  # done before the reply
            self._aborted_early = False
            return None
        return super()._abort_queues()

    # -------------------------------------------------------------------------------- messages

    def do_execute(self, code, silent, store_history=True, user_expressions=None,
                   allow_stdin=False):
        out = CellOutput(self._stream if not silent else (lambda n, t: None))
        # Jupyter's interrupt (SIGINT to this process) goes on to roper, for the whole cell
        roper = self.roper
        saved = signal.signal(signal.SIGINT, lambda signum, frame: roper.interrupt())
        try:
            reply = roper.request("execute", code, on_output=out.add)
        except RoperDied as e:
            reply = e
        finally:
            signal.signal(signal.SIGINT, saved)
        if isinstance(reply, RoperDied):
            e = reply
            out.flush(final=True)
            self._restart_roper()
            msg = "%s during the cell; a new roper session started (its variables are gone)" % e
            return self._error("roper died", msg, [msg], silent)
        out.flush(final=True)
        shown = set()
        for path, data in self.roper.new_plots():
            shown.add(path)
            if not silent:
                self.send_response(self.iopub_socket, "display_data", {
                    "data": {"image/png": base64.b64encode(data).decode("ascii"),
                             "text/plain": "<picture %s>" % os.path.basename(path)},
                    "metadata": {}})
        if reply.get("status") == "error":
            kind = reply.get("kind", "error")
            ename = {"syntax": "syntax error", "interrupted": "interrupted"}.get(kind, "error")
            return self._error(ename, reply.get("message", ""),
                               reply.get("traceback", reply.get("message", "")).split("\n"), silent)
        results = [r for r in reply.get("results", []) if r.get("text") not in shown]
        if results and not silent:
            data = {"text/plain": "\n".join(r["text"] for r in results)}
            if any("html" in r for r in results):
                data["text/html"] = "\n".join(
                    r.get("html") or "<pre>%s</pre>" % html.escape(r["text"]) for r in results)
            self.send_response(self.iopub_socket, "execute_result", {
                "execution_count": self.execution_count, "data": data, "metadata": {}})
        return {"status": "ok", "execution_count": self.execution_count, "payload": [],
                "user_expressions": {}}

    def _ask(self, verb, text, cursor=None):
        try:
            return self.roper.request(verb, text, cursor)
        except RoperDied:
            self._restart_roper()
            return None

    def do_complete(self, code, cursor_pos):
        before = code[:cursor_pos]
        reply = self._ask("complete", before) or {"start": len(before.encode()), "matches": []}
        start = len(before.encode("utf-8", "surrogatepass")[:reply["start"]].decode("utf-8", "replace"))
        return {"status": "ok", "matches": reply.get("matches", []), "cursor_start": start,
                "cursor_end": cursor_pos, "metadata": {}}

    def do_inspect(self, code, cursor_pos, detail_level=0, omit_sections=()):
        at = len(code[:cursor_pos].encode("utf-8", "surrogatepass"))
        reply = self._ask("inspect", code, at) or {}
        if not reply.get("found"):
            return {"status": "ok", "found": False, "data": {}, "metadata": {}}
        return {"status": "ok", "found": True, "data": {"text/plain": reply["text"]},
                "metadata": {}}

    def do_is_complete(self, code):
        reply = self._ask("is_complete", code) or {"status": "unknown"}
        if reply["status"] == "incomplete":
            return {"status": "incomplete", "indent": "  "}
        return {"status": reply["status"]}

    def do_shutdown(self, restart):
        self.roper.close()
        return {"status": "ok", "restart": restart}

#!/usr/bin/python3
"""Runs Python scripts in forks of one process that has imported their heavy modules (torch,
numpy) once: importing torch costs ~2 s of CPU, more than most of the specs' Python calls do.

    py_fork.py serve SOCKET MODULE...
        Imports the modules, listens on the Unix socket SOCKET, prints "ready" on stdout and
        serves one request at a time, each in a child forked for it (so what a script changes,
        its imports and torch's settings included, ends with it). Ends when its stdout's reader
        goes (the spec closes its io.popen handle or ends) and removes SOCKET. Started as
        io.popen("exec python3 tests/py_fork.py serve ...", "r"): a failed import ends it before
        "ready", with the traceback on its stderr.

    py_fork.py run SOCKET SCRIPT [ARG...]
        As `python3 SCRIPT ARG...` run here: the child takes this process's stdin, stdout and
        stderr, environment and working directory, sys.argv and sys.path[0] as the interpreter
        sets them; this process exits with the script's status (128 + the signal's number when
        a signal ended it). The environment applies from the script's first statement: os.environ
        and what reads it later (ROPER_LIB, for one) see it; what Python reads only when it
        starts (PYTHONPATH, PYTHONHASHSEED) is the server's, except PYTHONDONTWRITEBYTECODE.
        No server at SOCKET: exits 125 with a message.
"""

import atexit
import importlib
import json
import os
import select
import socket
import sys
import traceback


def child(conn, listener, request, fds):
    """In the forked child: the client's descriptors as 0, 1, 2, its environment and directory,
    then the script as __main__; never returns."""
    listener.close()
    conn.close()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    code = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
        sys.argv = list(request["argv"])
        sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
        sys.stdin = open(0, "r", closefd=False)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        import runpy
        runpy.run_path(sys.argv[0], run_name="__main__")
        code = 0
    except SystemExit as e:
        # as the interpreter reads it: None 0, an integer itself, anything else printed, 1
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code & 0xff
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: B902 (the interpreter's own handling of what the script raises)
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def serve(path, modules):
    for m in modules:
        importlib.import_module(m)
    if os.path.exists(path):
        os.remove(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)
    try:
        print("ready", flush=True)
        poller = select.poll()
        poller.register(listener, select.POLLIN)
        poller.register(sys.stdout, 0)  # POLLERR: the reader closed the pipe
        while True:
            events = dict(poller.poll())
            if sys.stdout.fileno() in events:
                return
            if listener.fileno() not in events:
                continue
            conn, _ = listener.accept()
            with conn:
                msg, fds, _, _ = socket.recv_fds(conn, 1, 3)
                data = [msg]
                while True:
                    part = conn.recv(65536)
                    if not part:
                        break
                    data.append(part)
                if len(fds) != 3:
                    for fd in fds:
                        os.close(fd)
                    conn.sendall(b"125 py_fork.py: a request without its 3 descriptors\n")
                    continue
                request = json.loads(b"".join(data)[1:])
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    child(conn, listener, request, fds)
                for fd in fds:
                    os.close(fd)
                _, status = os.waitpid(pid, 0)
                code = (os.WEXITSTATUS(status) if os.WIFEXITED(status)
                        else 128 + os.WTERMSIG(status))
                conn.sendall(b"%d\n" % code)
    finally:
        listener.close()
        if os.path.exists(path):
            os.remove(path)


def run(path, argv):
    request = {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError as e:
        sys.stderr.write("py_fork.py: no server at %s (%s)\n" % (path, e.strerror))
        return 125
    with conn:
        socket.send_fds(conn, [b"R" + json.dumps(request).encode()], [0, 1, 2])
        conn.shutdown(socket.SHUT_WR)
        reply = b""
        while True:
            part = conn.recv(4096)
            if not part:
                break
            reply += part
    code, _, why = reply.decode().partition(" ")
    if not code.strip().isdigit():
        sys.stderr.write("py_fork.py: the server ended before %s did\n" % argv[0])
        return 125
    if why:
        sys.stderr.write(why)
    return int(code)


def main():
    a = sys.argv[1:]
    if len(a) >= 2 and a[0] == "serve":
        serve(a[1], a[2:])
        return 0
    if len(a) >= 3 and a[0] == "run":
        return run(a[1], a[2:])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())

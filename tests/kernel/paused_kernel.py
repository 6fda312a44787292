"""roper's Jupyter kernel with one pause added, for tests/kernel/kernel_test.py: it puts the
client's next request on a chosen side of a failed cell, an order a loaded machine gives only by
chance. $ROPER_TEST_PAUSE says where the kernel waits until the client's next shell request has
arrived (it polls the shell socket, at most 30 s, and reads nothing):

  after_error_reply  after the kernel has sent a failed cell's execute_reply: the client knew the
                     error when it sent the next cell, which must run (case request_after_an_error)
  cell_start         before each cell runs: the next cell was sent before the error was known, and
                     Jupyter's stop_on_error drops it (case request_before_an_error)

Run as the kernel: python3 paused_kernel.py -f CONNECTION_FILE (PYTHONPATH holding roper_kernel).
"""
import functools
import os
import runpy

import zmq
from jupyter_client.session import Session

from roper_kernel.kernel import RoperKernel

PAUSE_MS = 30000  # the longest wait for the next request
MODE = os.environ.get("ROPER_TEST_PAUSE")


def wait_for_request(stream):
    getattr(stream, "socket", stream).poll(PAUSE_MS, zmq.POLLIN)


if MODE == "after_error_reply":
    _send = Session.send

    def send(self, stream, msg_or_type, content=None, *args, **kwargs):
        msg = _send(self, stream, msg_or_type, content, *args, **kwargs)
        if msg_or_type == "execute_reply" and (content or {}).get("status") == "error":
            if hasattr(stream, "flush"):  # a ZMQStream queues what it sends: out it goes, now
                stream.flush(zmq.POLLOUT)
            wait_for_request(stream)
        return msg

    Session.send = send
elif MODE == "cell_start":
    _do_execute = RoperKernel.do_execute

    @functools.wraps(_do_execute)  # its signature: ipykernel passes cell_id only when it has one
    def do_execute(self, *args, **kwargs):
        wait_for_request(self.shell_stream)
        return _do_execute(self, *args, **kwargs)

    RoperKernel.do_execute = do_execute
else:
    raise SystemExit("paused_kernel.py: ROPER_TEST_PAUSE must be after_error_reply or cell_start")

if __name__ == "__main__":
    runpy.run_module("roper_kernel", run_name="__main__")

"""The server's side of the worker's control socket, on a socket pair: what the worker said
before it ended is read, whatever the server had sent it that it never read."""

from __future__ import annotations

import json
import os
import socket

from slm_rerank.warm_process import worker


def pair() -> tuple[worker.Worker, socket.socket]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    return worker.Worker(os.getpid(), ours), theirs


def test_a_worker_that_ended_with_a_message_unread_is_still_heard_to_have_taken_the_command(
        ) -> None:
    w, theirs = pair()
    theirs.send(json.dumps({"deadline": 1234.5}).encode())  # it took the command...
    w.ctl.send(b"{}")  # ...the server said something more (a connection handed, a verdict)
    theirs.close()  # and the command ended the worker (os._exit) before it read that

    assert w.message()  # Linux says "reset" first; what the worker said is still there
    assert (w.acked, w.deadline) == (True, 1234.5)
    assert not w.message()  # and then its end


def test_a_worker_that_ended_with_nothing_unread_is_heard_as_before() -> None:
    w, theirs = pair()
    theirs.send(json.dumps({"deadline": 99.0}).encode())
    theirs.close()

    assert w.message() and w.acked
    assert not w.message()


def test_a_worker_that_ended_saying_nothing_is_heard_to_have_ended() -> None:
    w, theirs = pair()
    w.ctl.send(b"{}")
    theirs.close()

    assert not w.message()
    assert not w.acked

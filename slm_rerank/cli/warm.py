"""`slm-rerank warm status` and `warm stop`: the warm process that --fast searches and the
prompt hook reuse (``slm_rerank.warm_process``)."""

from __future__ import annotations

import os
import time
from typing import Any

import click

from slm_rerank.cli.terminal import emit, fail

#: how long a status or stop request may take, connecting included
ASK_SECONDS = 2.0

every_one = click.option("--all", "every", is_flag=True,
                         help="Every warm process of this user's, whatever its environment.")


@click.group()
def warm() -> None:
    """The warm process that --fast searches and the prompt hook reuse.

    The first --fast search or hook run starts it in the background; later ones hand their
    work to it over a socket only this user can open, and run in their own process when it
    cannot answer. It stops after warm_process_idle seconds without a request (300). One
    runs per environment (the interpreter, the slm-rerank version and the SLM_*, XDG_*,
    PATH, HOME, locale and git variables). Turn it off with warm_process = false in the
    user config or SLM_RERANK_WARM_PROCESS=0; a repository's .slm-rerank.toml cannot
    turn it on.
    """


def _sockets(every: bool) -> list[str]:
    from slm_rerank.warm_process.client import socket_folder, socket_path

    if not every:
        return [socket_path(os.environ)]
    folder = socket_folder(os.environ)
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".sock"))
    except OSError:
        return []
    return [os.path.join(folder, name) for name in names]


def _ask(path: str, kind: str) -> dict[str, Any] | str:
    """The warm process's reply to ``kind``, or why there is none."""
    from slm_rerank.warm_process import client, wire

    deadline = time.monotonic() + ASK_SECONDS
    try:
        sock = client.connect(path, deadline)
    except FileNotFoundError:
        return "not running"
    except ConnectionRefusedError:
        return "not running (a stale socket)"
    except client.Refused as exc:
        return f"not used: {exc}"
    except OSError as exc:
        return f"cannot connect ({exc.strerror or exc})"
    try:
        with sock:
            wire.send_json(sock, {"format": wire.FORMAT, "kind": kind}, deadline)
            wire.send_frame(sock, b"", deadline)
            return wire.receive_json(sock, deadline)
    except wire.WireError as exc:
        return f"no answer ({exc})"


@warm.command("status")
@every_one
def status(every: bool) -> None:
    """Say whether a warm process runs for this environment: its pid and requests served."""
    lines = []
    for path in _sockets(every) or ["(no socket)"]:
        reply = _ask(path, "status") if path != "(no socket)" else "not running"
        if isinstance(reply, str):
            lines.append(f"{path}: {reply}")
        else:
            since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(reply.get("since", 0)))
            worker = (f"its worker pid {reply['worker']} has run "
                      f"{reply.get('worker_commands')} commands ({reply.get('workers')} workers "
                      "started), " if reply.get("worker") else "")
            lines.append(f"{path}: pid {reply.get('pid')}, running since {since}, {worker}"
                         f"{reply.get('served')} connections so far")
            keeps = reply.get("worker_keeps")
            if isinstance(keeps, dict):
                lines += [f"  its worker keeps {name}: {what}"
                          for name, what in sorted(keeps.items())]
    emit("\n".join(lines) + "\n")


@warm.command("stop")
@every_one
def stop(every: bool) -> None:
    """Stop the warm process of this environment (the next --fast search starts one again,
    unless warm_process is off)."""
    stopped = 0
    for path in _sockets(every):
        reply = _ask(path, "stop")
        if isinstance(reply, dict) and reply.get("reason") == "stopping":
            stopped += 1
            emit(f"stopped the warm process {reply.get('pid')} ({path})\n")
        elif not every and isinstance(reply, str) and not reply.startswith("not running"):
            fail(f"{path}: {reply}")
    if not stopped:
        emit("no warm process was running\n")


__all__ = ["warm"]

"""`slm-rerank serve-api`: the rerank HTTP endpoint's command line, start-up and shutdown.

The server itself is ``slm_rerank.servers.rerank_api`` (no click there).
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import click

from slm_rerank.cli.model_flags import model_options
from slm_rerank.cli.terminal import fail, warn
from slm_rerank.overrides import overrides
from slm_rerank.servers.api_key import read_api_key
from slm_rerank.servers.rerank_api import (
    ApiOptions,
    RerankApiService,
    make_server,
    parse_size,
)


def _size(ctx: click.Context, param: click.Parameter, value: str) -> int:
    try:
        return parse_size(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


@click.command("serve-api")
@click.option("--bind", default="127.0.0.1", show_default=True, metavar="ADDRESS",
              help="Address to listen on; anything but loopback lets the network in "
                   "(then set an API key).")
@click.option("--port", type=click.IntRange(1, 65535), default=8090, show_default=True)
@model_options(only=("base_url", "host", "model", "scorer", "timeout", "cache"))
@click.option("--api-key-env", metavar="VAR",
              help="Require 'Authorization: Bearer KEY', KEY read from this variable.")
@click.option("--api-key-file", type=click.Path(path_type=Path), metavar="PATH",
              help="Require 'Authorization: Bearer KEY', KEY read from this file.")
@click.option("--max-documents", type=click.IntRange(min=1), default=1000,
              show_default=True, help="Most documents one request may send.")
@click.option("--max-bytes", default="5MB", show_default=True, callback=_size,
              help="Largest request body (bytes; K and M suffixes).")
@click.option("--parallel", type=click.IntRange(min=1), default=1, show_default=True,
              help="Requests judged at once (the others wait for a turn).")
@click.option("--max-connections", type=click.IntRange(min=1), default=64,
              show_default=True,
              help="Open connections served at once; more are answered 503.")
@click.option("--no-partial", is_flag=True,
              help="Answer 503 instead of a marked partial ranking when the model "
                   "server fails part-way.")
def serve_api(bind: str, port: int, api_key_env: str | None, api_key_file: Path | None,
              max_documents: int, max_bytes: int, parallel: int, max_connections: int,
              no_partial: bool, **flags: Any) -> None:
    """Serve POST /v1/rerank (Cohere/Jina shapes) backed by the model server."""
    from slm_rerank.errors import SlmRerankError
    from slm_rerank.host import Host
    from slm_rerank.llama.ports import is_loopback
    from slm_rerank.model import progress
    from slm_rerank.model.stage import locate

    progress.QUIET = True  # one request's bar would land in the middle of the access log
    try:
        key = read_api_key(api_key_env, api_key_file)
        plugins = Host.from_environment(start=Path.cwd(), flags=overrides(**flags))
        plugins.validate()
        scorers = plugins.registry.scorers()
        if plugins.settings.scorer not in scorers:
            fail(f"scorer {plugins.settings.scorer!r} is not installed (installed: "
                 f"{', '.join(sorted(scorers)) or 'none'}); pip install slm-rerank-yesno")
    except SlmRerankError as exc:
        fail(str(exc))
        return
    options = ApiOptions(bind, port, key, max_documents, max_bytes, parallel, no_partial,
                         max_connections=max_connections)
    if not is_loopback(bind) and key is None:
        warn(f"binding {bind} without an API key: anyone who can reach it can use the "
             "model server; set --api-key-env or --api-key-file")
    service = RerankApiService(plugins, options)
    try:
        server = make_server(service)
    except OSError as exc:
        service.close()
        fail(f"cannot listen on {bind}:{port} ({exc.strerror or exc}); pick another "
             "--port or --bind")
        return
    try:
        found = locate(plugins, plugins.settings)
    except SlmRerankError as exc:
        found = None
        warn(f"the model server is not usable: {exc}")
    if found is not None and found.endpoint is not None:
        warn(f"model server {found.endpoint.base_url} ({found.endpoint.model_id})")
    elif found is not None:
        warn(f"no model server yet ({found.degraded}); requests get 503 until one "
             "answers")
    where = f"[{bind}]" if ":" in bind else bind
    warn(f"rerank API on http://{where}:{server.server_address[1]}/v1/rerank "
         f"(scorer {plugins.settings.scorer}"
         f"{', API key required' if key else ''}); Ctrl-C stops it")
    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # leave serve_forever; the finally below cleans up

    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        service.close()

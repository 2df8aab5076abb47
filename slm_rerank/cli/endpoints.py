"""`slm-rerank endpoints`: which model servers answer, with which model and profile."""

from __future__ import annotations

import json
from typing import Any

import click

from slm_rerank.cli.model_flags import model_options
from slm_rerank.cli.terminal import emit, fail, text_or_json, visible
from slm_rerank.overrides import overrides


@click.command()
@model_options(only=("host", "base_url"))
@text_or_json
def endpoints(format_name: str, **flags: Any) -> None:
    """List the model servers that answer, and why each other port does not."""
    from slm_rerank.errors import ConfigError, SlmRerankError
    from slm_rerank.host import Host
    from slm_rerank.model import discovery
    from slm_rerank.model.profiles import choose_profile, weight_text

    try:
        given = overrides(**flags)
        host = Host.from_environment(flags={"host": given.get("host")})
        settings = host.settings
        # every -e given, else base_url from the environment or the config
        one = given.get("base_url", settings.base_url)
        urls = given.get("endpoints") or ([one] if one else [])
        scan_host = settings.host or discovery.DEFAULT_HOST
        import asyncio  # not at the top: every command's start-up imports this module

        from slm_rerank.cache_folder import cache_path

        # the managed server may listen off the scanned ports (serve --port 8235)
        managed = None if urls else discovery.managed_url(cache_path(settings), scan_host)
        probes = asyncio.run(_probe(discovery, urls, scan_host, managed))
        profiles = host.registry.profiles()
        rows = []
        for p in probes:
            choice, reason = None, p.reason
            if p.endpoint is not None:
                # One server whose model id two profiles claim equally must not hide
                # the others: its row says so.
                try:
                    choice = choose_profile(profiles, model_id=p.endpoint.model_id,
                                            requested=settings.model)
                except ConfigError as exc:
                    reason = str(exc)
            rows.append({
                "url": p.url, "kind": p.endpoint.kind if p.endpoint else None,
                "model_id": p.endpoint.model_id if p.endpoint else None,
                "slots": p.endpoint.slots if p.endpoint else None,
                "profile": choice.profile.name if choice else None,
                "reason": reason,
                "judge_weight": choice.profile.judge_weight if choice else None,
                "weight_measured": choice.profile.weight_measured if choice else None,
            })
    except SlmRerankError as exc:
        fail(str(exc))
        return
    if format_name == "json":
        emit(json.dumps(rows, indent=2) + "\n")
        return
    lines = []
    for row in rows:
        if row["kind"]:
            profile = (f"{row['profile']} ({weight_text(profiles[row['profile']])})"
                       if row["profile"] else f"none ({row['reason']})")
            lines.append(f"{row['url']}  {row['kind']}  {row['model_id']}  "
                         f"profile {profile}  {row['slots']} slots"
                         + ("  (managed: slm-rerank serve status)"
                            if row["url"] == managed else ""))
        else:
            lines.append(f"{row['url']}  -  {row['reason']}")
    if not any(row["kind"] for row in rows):
        lines.append("no model server answers; start the bundled one (slm-rerank serve "
                     "--help) or your own and pass -e URL, or use --fast")
    # a model id and a reason are the server's words: one line each, nothing raw
    emit("".join(visible(line) + "\n" for line in lines))



async def _probe(discovery: Any, urls: list[str], host: str, managed: str | None
                 ) -> list[Any]:
    from slm_rerank.model.client import ModelClient

    async with ModelClient(timeout=5.0) as client:
        if urls:
            checked = [discovery.check_base_url(url, "-e") for url in urls]
            return await discovery.probe_all(client, checked, timeout=5.0)
        return await discovery.scan(host, also=[managed] if managed else [])



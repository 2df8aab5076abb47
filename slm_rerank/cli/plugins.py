"""`slm-rerank plugins`: what is installed, and what each plugin registers."""

from __future__ import annotations

import json
from typing import Any

import click

from slm_rerank.cli.terminal import emit, fail, text_or_json, visible
from slm_rerank.errors import ConfigError, RegistrationError
from slm_rerank.host import Host
from slm_rerank.model.profiles import weight_text


@click.group(invoke_without_command=True)
@click.option("--all", "show_all", is_flag=True,
              help="Include the built-ins: the plugins a bare install of slm-rerank brings.")
@text_or_json
@click.pass_context
def plugins(ctx: click.Context, show_all: bool, format_name: str) -> None:
    """List installed plugins: distribution, version, hooks and what each registers.

    Without --all, the plugins installed beside the host: a model family installed with
    `pip install slm-rerank slm-rerank-gemma` is listed, the sources, formats, judge and
    generic profile slm-rerank itself depends on are not.
    """
    if ctx.invoked_subcommand is not None:
        return  # `plugins SUBCOMMAND`: the subcommand does the work
    try:
        host = Host.from_environment()
    except ConfigError as exc:
        fail(str(exc))
        return
    try:
        names = host.registry.names_by_plugin()
        profiles = host.registry.profiles()
    except RegistrationError as exc:
        fail(str(exc))
        return
    rows: list[dict[str, Any]] = []  # one JSON object a plugin
    for info in sorted(host.infos.values(), key=lambda i: i.name):
        if info.builtin and not show_all:
            continue
        rows.append({
            "name": info.name, "distribution": info.distribution, "version": info.version,
            "builtin": info.builtin, "hooks": info.hooks,
            "registers": names.get(info.name, {}), "error": info.error,
            # a weight nobody measured must say so where a user picks a model
            "judge_weights": {
                name: {"judge_weight": profiles[name].judge_weight,
                       "weight_measured": profiles[name].weight_measured}
                for name in names.get(info.name, {}).get("register_model_profiles", [])
                if name in profiles},
        })
    if format_name == "json":
        emit(json.dumps(rows, indent=2) + "\n")
        return
    lines = [] if rows else ["no plugins installed beyond the built-ins slm-rerank depends "
                             "on (see --all)"]
    for row in rows:
        status = f"  FAILED: {visible(row['error'])}" if row["error"] else ""
        lines.append(f"{row['name']}  {row['distribution']} {row['version']}{status}")
        for hook, registered in row["registers"].items():
            lines.append(f"    {hook}: {', '.join(registered)}")
        for name in row["judge_weights"]:
            lines.append(f"      {name}: {visible(weight_text(profiles[name]))}")
    emit("".join(line + "\n" for line in lines))

"""`slm-rerank config show` and `config set`: the settings, where each came from, changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from slm_rerank.cli.terminal import emit, fail, text_or_json, visible
from slm_rerank.config import (
    KEYS,
    ConfigError,
    Settings,
    describe,
    load_settings,
    parse_text,
    repo_config_path,
    repo_root,
    user_config_path,
    write_setting,
)
from slm_rerank.errors import SlmRerankError
from slm_rerank.host import CHOICE_KEYS, Host


@click.group()
def config() -> None:
    """Show or change settings."""


@config.command("show")
@text_or_json
def config_show(format_name: str) -> None:
    """Print every effective setting with where its value came from."""
    try:
        settings = load_settings()
    except ConfigError as exc:
        fail(str(exc))
        return
    values = {key: getattr(settings, key) for key in KEYS}
    if values["api_key"]:
        values["api_key"] = "(set, not shown)"  # a secret does not belong on a screen
    refused = settings.repo_refusals  # a repository's value ignored or lowered, and why
    if format_name == "json":
        doc = {k: {"value": v, "origin": settings.origins[k], "help": describe(k),
                   **({"refused": refused[k]} if k in refused else {})}
               for k, v in values.items()}
        emit(json.dumps(doc, indent=2) + "\n")
        return
    width = max(len(k) for k in KEYS)
    emit("".join(f"{key:<{width}} = {json.dumps(value):<24} # {visible(settings.origins[key])}"
                 f"{'; ' + visible(refused[key]) if key in refused else ''}\n"
                 for key, value in values.items()))


@config.command("set", context_settings={"ignore_unknown_options": True})
@click.argument("key")
@click.argument("value")
@click.option("--repo", "to_repo", is_flag=True,
              help="Write the repository's .slm-rerank.toml instead of the user config.")
def config_set(key: str, value: str, to_repo: bool) -> None:
    """Set KEY to VALUE in the user config (or, with --repo, the repository's file)."""
    if key not in KEYS:
        raise click.BadParameter(f"unknown key '{key}' (known keys: {', '.join(KEYS)})",
                                 param_hint="KEY")
    if to_repo:
        here = Path.cwd()
        path = repo_config_path(here) or (repo_root(here) or here) / ".slm-rerank.toml"
    else:
        path = user_config_path()
    try:
        where = f"config set {key}"
        if key in CHOICE_KEYS:
            # checked against the installed plugins, as it will be when it is read
            Host(load_settings()).check_choice(key, parse_text(key, value, where), where)
        elif key in ("base_url", "endpoints", "plugins"):
            _check_as_read(key, parse_text(key, value, where), where)
        stored = write_setting(path, key, value, repo=to_repo)
    except SlmRerankError as exc:
        fail(str(exc))
        return
    emit(f"{key} = {json.dumps(stored)}  # written to {path}\n")
    if to_repo:
        # read back as a search here will: a value above the user's for a key a repository
        # may only lower is ignored, and that is worth hearing now, not at every search
        try:
            load_settings(start=path.parent)  # warns (once) of what it ignores
        except SlmRerankError:
            pass  # another layer is broken: a search will say so itself


def _check_as_read(key: str, value: Any, where: str) -> None:
    """Raise the ConfigError a search would raise on reading ``value`` for ``key``.

    Server URLs are checked only when the model stage reads them (a --fast search must not
    import the HTTP stack) and [plugins.NAME] options only against the registry, so without
    this a bad URL or option was written and every later search failed on it.
    """
    if key == "plugins":
        settings = Settings(plugins=value)
        settings.origins = {f"plugins.{name}.{option}": where
                            for name, table in value.items() for option in table}
        try:
            disabled = load_settings().disabled_plugins
        except ConfigError:
            disabled = []  # the file being repaired may be the broken one
        settings.disabled_plugins = disabled
        for name in value:
            Host(settings).options_for(name)
        return
    from slm_rerank.model import discovery
    from slm_rerank.model.endpoints import pinned_urls

    if key == "base_url":
        if value:
            discovery.check_base_url(value, where)
    elif isinstance(value, dict):
        for name, url in value.items():
            discovery.check_base_url(url, f"{where}: [endpoints] {name}")
    else:
        settings = Settings(endpoints=value)
        settings.origins = {"endpoints": where}
        pinned_urls(settings)

"""Flag help and setting help are built from the constants and settings they describe, so
changing a constant (the cascade's lead, its first round, a default, a server kind)
changes the text a user reads with it."""

from __future__ import annotations

import json
from pathlib import Path

from search_fixtures import cli

from slm_rerank.config_keys import (
    CASCADE_FIRST,
    CLEAR_YES,
    DECISIVE_LEAD,
    SCAN_HOST,
    SCAN_PORTS,
    Settings,
)
from slm_rerank.registrations import SERVER_KINDS


def flat(text: str) -> str:
    """``text`` with click's line wrapping undone."""
    return " ".join(text.split())


def test_search_help_states_the_cascade_constants_defaults_and_server_kinds(
        tmp_path: Path) -> None:
    run = cli("search", "--help", cwd=tmp_path)

    assert run.returncode == 0, run.stderr
    shown = flat(run.stdout)
    assert f"first file scores {DECISIVE_LEAD:g} times the next" in shown
    assert f"else the first {CASCADE_FIRST} passages" in shown
    assert f"P(relevant) >= {CLEAR_YES:g}" in shown
    assert f"--api [{'|'.join(SERVER_KINDS)}]" in shown
    assert f"(default {Settings().rerank_top})" in shown
    assert f"the scorer setting, {Settings().scorer})" in shown
    ports = f"{SCAN_PORTS[0]}-{SCAN_PORTS[-1]}"
    assert f"a scan of --host on ports {ports}." in shown
    assert f"Host to scan for a model server (default {SCAN_HOST})." in shown


def test_an_api_choice_outside_the_server_kinds_is_a_usage_error_listing_them(
        tmp_path: Path) -> None:
    run = cli("--fast", "--api", "vllm", "-q", "x", cwd=tmp_path)

    assert run.returncode == 2
    assert all(kind in run.stderr for kind in SERVER_KINDS)


def test_config_show_gives_the_cascade_setting_the_same_constants(tmp_path: Path) -> None:
    doc = json.loads(cli("config", "show", "--format", "json", cwd=tmp_path).stdout)

    told = doc["cascade"]["help"]
    assert f"{DECISIVE_LEAD:g} times the next" in told
    assert f"the first {CASCADE_FIRST} passages" in told
    assert told.endswith("(--cascade)")
    assert f"on ports {SCAN_PORTS[0]}-{SCAN_PORTS[-1]}" in doc["base_url"]["help"]
    assert f"unset: {SCAN_HOST}." in doc["host"]["help"]


def test_serve_help_names_the_ports_queries_scan(tmp_path: Path) -> None:
    shown = flat(cli("serve", "--help", cwd=tmp_path).stdout)

    assert f"Port ({SCAN_PORTS[0]}-{SCAN_PORTS[-1]} are scanned by queries)." in shown

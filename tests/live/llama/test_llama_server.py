"""The real llama-server fixtures work, and the recorded wire payloads match the live server."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from llamaserver import BINARY_ENV, GGUF_ENV, LlamaServerError, find_installed, http_json

TESTS = Path(__file__).resolve().parents[2]
WIRE = TESTS / "fixtures" / "wire"
RECORDED = sorted(path for path in WIRE.glob("llamacpp-*.json")
                  if json.loads(path.read_text()).get("recorded_with", {}).get("recorded_by")
                  == "tests/model/record_wire.py")
# Only catchable while a server starts; its shape is checked by the recorder, not replayed.
NOT_REPLAYED = {"llamacpp-health-loading.json"}


def shape(value: object) -> object:
    """The keys of a JSON value, nested; lists by their first element; scalars vanish."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return None


def replayed_exchanges() -> list[tuple[str, int, dict[str, object]]]:
    return [(path.name, index, exchange) for path in RECORDED if path.name not in NOT_REPLAYED
            for index, exchange in enumerate(json.loads(path.read_text())["exchanges"])]


def test_the_server_is_healthy_and_reports_the_gguf_as_its_model(llama_server) -> None:
    status, body = http_json(llama_server.url("/health"))

    assert (status, body) == (200, {"status": "ok"})
    assert llama_server.model_id == llama_server.gguf.name


def test_the_server_has_four_slots_of_2048_tokens(llama_server) -> None:
    status, props = http_json(llama_server.url("/props"))

    assert status == 200
    assert props["total_slots"] == llama_server.slots == 4
    assert props["default_generation_settings"]["n_ctx"] == llama_server.ctx_per_slot == 2048


def test_completion_returns_the_top_logprobs_of_the_next_token(llama_server) -> None:
    status, body = http_json(llama_server.url("/completion"), {
        "prompt": "Is water wet? Answer yes or no.\nAnswer:", "n_predict": 1, "n_probs": 5,
        "temperature": 0})

    assert status == 200
    [probs] = body["completion_probabilities"]
    assert len(probs["top_logprobs"]) == 5
    assert all(entry["logprob"] <= 0 and entry["token"] for entry in probs["top_logprobs"])


def test_the_wire_fixtures_were_recorded_from_this_server() -> None:
    names = {path.name for path in RECORDED}

    assert {"llamacpp-completion.json", "llamacpp-completion-array.json",
            "llamacpp-v1-completions.json", "llamacpp-v1-chat-completions.json",
            "llamacpp-tokenize.json", "llamacpp-health.json", "llamacpp-v1-models.json",
            "llamacpp-props.json"} <= names


def test_the_wire_fixtures_hold_every_request_the_recorder_sends(
        llama_server, monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = TESTS / "model" / "record_wire.py"
    spec = importlib.util.spec_from_file_location("record_wire", recorder)
    assert spec is not None and spec.loader is not None
    record_wire = importlib.util.module_from_spec(spec)
    # dataclasses look their module up in sys.modules
    monkeypatch.setitem(sys.modules, "record_wire", record_wire)
    spec.loader.exec_module(record_wire)
    recorded = {(path.name, json.dumps(exchange["request"], sort_keys=True))
                for path in RECORDED for exchange in json.loads(path.read_text())["exchanges"]}

    for request in record_wire.requests(llama_server.model_id):
        assert (f"{request.fixture}.json", json.dumps(request.body, sort_keys=True)) in recorded, (
            f"{request.fixture}.json lacks {request.body}: run tests/model/record_wire.py")


@pytest.mark.parametrize(("fixture", "index", "exchange"), replayed_exchanges(),
                         ids=lambda value: value if isinstance(value, str) else None)
def test_the_live_server_answers_with_the_recorded_keys(llama_server, fixture: str, index: int,
                                                        exchange: dict[str, object]) -> None:
    status, body = http_json(llama_server.url(str(exchange["path"])), exchange["request"])

    assert status == exchange["status"]
    assert shape(body) == shape(exchange["response"]), (
        f"{fixture} exchange {index} no longer matches the live server: re-record with "
        "tests/model/record_wire.py and check the parsers")


def test_a_disposable_server_can_be_killed_mid_run(
        llama_server_factory: Callable[..., object]) -> None:
    server = llama_server_factory()
    assert http_json(server.url("/health"))[0] == 200

    server.kill()

    with pytest.raises(OSError):
        http_json(server.url("/health"), timeout=2)


def test_a_missing_binary_fails_the_test_with_a_make_install_hint(
        llama_server_factory: Callable[..., object], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    monkeypatch.setenv(BINARY_ENV, str(tmp_path / "no-such-llama-server"))

    # pytest.fail, not pytest.skip: CI must not go green without the server.
    with pytest.raises(pytest.fail.Exception, match="make install"):
        llama_server_factory()


def test_without_a_manifest_or_variables_the_error_says_to_run_make_install(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(BINARY_ENV, raising=False)
    monkeypatch.delenv(GGUF_ENV, raising=False)

    with pytest.raises(LlamaServerError, match="llama-server.json is missing.*make install"):
        find_installed(prefix=tmp_path)

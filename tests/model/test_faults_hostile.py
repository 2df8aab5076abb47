"""Hostile servers, caches and flags: each fault is an error naming its source, never a verdict.

Fakes answer with the recorded llama.cpp payloads (tests/fixtures/wire) changed in exactly
the one way under test.
"""

from __future__ import annotations

import asyncio
import copy
import gzip
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result
from pytest_httpserver import HTTPServer

from slm_rerank.cli.commands import cli
from slm_rerank.errors import ConfigError, ContractError, TransientError
from slm_rerank.model import client as client_module
from slm_rerank.model import discovery
from slm_rerank.model.client import ModelClient, NextToken
from slm_rerank.model.score_cache import ScoreCache, ScoreKey
from slm_rerank.registrations import Endpoint

WIRE = Path(__file__).resolve().parent.parent / "fixtures" / "wire"


def recorded(name: str, index: int = 0) -> Any:
    exchanges = json.loads((WIRE / name).read_text(encoding="utf-8"))["exchanges"]
    return copy.deepcopy(exchanges[index]["response"])


def next_token(endpoint: Endpoint, prompts: list[str]) -> list[NextToken]:
    async def main() -> list[NextToken]:
        async with ModelClient(timeout=5.0) as client:
            return await client.next_token(endpoint, prompts)
    return asyncio.run(main())


def llama_cpp(httpserver: HTTPServer) -> Endpoint:
    return Endpoint(httpserver.url_for("/").rstrip("/"), "llama.cpp")


def first_candidates(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return answer["completion_probabilities"][0]["top_logprobs"]


# --- numbers that are not log probabilities -------------------------------------------------


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "2.5"])
def test_a_logprob_that_is_nan_infinite_or_above_zero_is_a_contract_error(
        httpserver: HTTPServer, bad: str):
    answer = recorded("llamacpp-completion.json")
    first_candidates(answer)[0]["logprob"] = "__BAD__"
    # NaN and Infinity are not JSON, but Python's json (and so httpx) reads them.
    body = json.dumps(answer).replace('"__BAD__"', bad)
    httpserver.expect_request("/completion", method="POST").respond_with_data(
        body, content_type="application/json")

    with pytest.raises(ContractError, match="log probability") as caught:
        next_token(llama_cpp(httpserver), ["q"])
    assert httpserver.url_for("/completion") in str(caught.value)


@pytest.mark.parametrize("bad", [-0.5, 2.0])
def test_a_probability_outside_zero_to_one_is_a_contract_error(httpserver: HTTPServer,
                                                               bad: float):
    answer = recorded("llamacpp-completion-post-sampling.json")
    position = answer["completion_probabilities"][0]
    key = next(k for k in ("top_probs", "probs", "top_logprobs") if k in position)
    position[key][0]["prob"] = bad
    httpserver.expect_request("/completion", method="POST").respond_with_json(answer)

    with pytest.raises(ContractError, match=r"probability outside \[0, 1\]"):
        next_token(llama_cpp(httpserver), ["q"])


def test_a_logprob_of_minus_infinity_is_a_zero_probability_not_an_error(
        httpserver: HTTPServer):
    answer = recorded("llamacpp-completion.json")
    first_candidates(answer)[-1]["logprob"] = "__BAD__"
    body = json.dumps(answer).replace('"__BAD__"', "-Infinity")
    httpserver.expect_request("/completion", method="POST").respond_with_data(
        body, content_type="application/json")

    (got,) = next_token(llama_cpp(httpserver), ["q"])

    assert got.top[-1].logprob == float("-inf")


# --- array answers that cannot be matched to their prompts ----------------------------------


@pytest.mark.parametrize("indices", [[0, 0], [7, 8], [1, 2]])
def test_array_results_numbered_other_than_zero_to_n_are_a_contract_error(
        httpserver: HTTPServer, indices: list[int]):
    answers = recorded("llamacpp-completion-array.json")
    assert isinstance(answers, list) and len(answers) == 2
    for item, index in zip(answers, indices, strict=True):
        item["index"] = index
    httpserver.expect_request("/completion", method="POST").respond_with_json(answers)

    with pytest.raises(ContractError, match="cannot be matched to the prompts"):
        next_token(llama_cpp(httpserver), ["a", "b"])


# --- hosts to scan and servers that cannot be reached ---------------------------------------


def run_cli(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize("host", ["x" * 300, "127.0.0.1:8099", "http://127.0.0.1", "a b", " "])
def test_endpoints_with_a_host_that_is_no_host_is_a_usage_error_naming_it(
        isolated_home: Path, host: str):
    result = run_cli("endpoints", "--host", host)

    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "--host" in result.output and "not a" in result.output


def test_a_search_with_a_host_that_is_no_host_is_a_usage_error(isolated_home: Path,
                                                                repo: Path):
    result = run_cli("-q", "retry", "--root", str(repo), "--host", "127.0.0.1:8099")

    assert result.exit_code == 2, result.output
    assert "--host" in result.output


def test_a_host_from_the_environment_that_is_no_host_is_an_error_naming_the_variable(
        isolated_home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SLM_HOST", "http://gpu-box:8033")

    result = run_cli("-q", "retry", "--root", str(repo))

    assert result.exit_code == 1, result.output
    assert "SLM_HOST" in result.output and "http://gpu-box:8033" in result.output


def test_a_bracketed_ipv6_host_is_scanned_as_the_address():
    assert discovery.check_host("[::1]") == "::1"


def test_a_host_name_that_does_not_resolve_is_reported_unreachable_not_refused():
    async def main() -> Any:
        async with httpx.AsyncClient() as http:
            return await discovery.probe(http, "http://no-such-host.invalid:8033")

    found = asyncio.run(main())

    assert found.endpoint is None
    assert found.reason is not None and found.reason.startswith("unreachable")


# --- flags that are numbers in name only ----------------------------------------------------


@pytest.mark.parametrize(("flag", "value"), [("--threshold", "nan"), ("--timeout", "nan"),
                                             ("--timeout", "inf")])
def test_a_non_finite_threshold_or_timeout_is_a_usage_error(isolated_home: Path, repo: Path,
                                                            flag: str, value: str):
    result = run_cli("-q", "retry", "--root", str(repo), flag, value)

    assert result.exit_code == 2, result.output
    assert flag in result.output and "finite" in result.output


# --- endpoints with a server no single profile claims ---------------------------------------


def test_endpoints_lists_a_server_two_profiles_claim_equally_with_the_reason(
        isolated_home: Path, httpserver: HTTPServer):
    models = recorded("llamacpp-v1-models.json")
    models["data"][0]["id"] = "lfm2-rwkv"  # lfm claims "lfm2", rwkv "rwkv": a tie
    httpserver.expect_request("/v1/models").respond_with_json(models)
    httpserver.expect_request("/props").respond_with_json(recorded("llamacpp-props.json"))
    url = httpserver.url_for("/").rstrip("/")

    result = run_cli("endpoints", "-e", url, "--format", "json")

    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)
    assert (row["kind"], row["model_id"], row["profile"]) == ("llama.cpp", "lfm2-rwkv", None)
    assert "claimed equally" in row["reason"]


def test_endpoints_text_shows_a_servers_control_characters_escaped(
        isolated_home: Path, httpserver: HTTPServer):
    # A model id is the server's to choose: it must not drive the terminal or forge a row.
    models = recorded("llamacpp-v1-models.json")
    models["data"][0]["id"] = "qwen\x1b[2J\n127.0.0.1:8033  llama.cpp  forged"
    httpserver.expect_request("/v1/models").respond_with_json(models)
    httpserver.expect_request("/props").respond_with_json(recorded("llamacpp-props.json"))
    url = httpserver.url_for("/").rstrip("/")

    result = run_cli("endpoints", "-e", url)

    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output
    assert result.output.count("\n") == 1 and "forged" in result.output
    assert json.loads(run_cli("endpoints", "-e", url, "--format", "json").output)[0][
        "model_id"] == models["data"][0]["id"]


# --- a score cache that is broken, read-only or not a file ----------------------------------


def cache_key(content: str = "c1") -> ScoreKey:
    return ScoreKey("qwen3", "qwen", "v1", "yesno", "retry loop", content)


def corrupt_pages(folder: Path) -> None:
    """A cache whose header is intact but whose table pages are garbage."""
    cache = ScoreCache(folder)
    cache.put_many([(cache_key(f"c{i}"), 0.5, 0.0) for i in range(5000)])
    cache._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    cache.close()
    path = folder / "scores.sqlite3"
    size = path.stat().st_size
    with path.open("r+b") as f:
        for offset in range(4096 * 3, size, 4096 * 5):
            f.seek(offset)
            f.write(b"\xa5" * 4096)


@pytest.mark.parametrize("operation", ["get", "put", "stats", "clear"])
def test_a_cache_with_corrupt_pages_is_an_error_naming_the_file(tmp_path: Path,
                                                                operation: str):
    corrupt_pages(tmp_path)
    cache = ScoreCache(tmp_path)
    actions = {"get": lambda: cache.get_many([cache_key(f"c{i}") for i in range(5000)]),
               "put": lambda: cache.put_many([(cache_key(f"d{i}"), 0.5, 0.0)
                                              for i in range(5000)]),
               "stats": cache.stats, "clear": cache.clear}

    with pytest.raises(ConfigError, match="scores.sqlite3") as caught:
        actions[operation]()
    assert "cache clear" in str(caught.value)


@pytest.mark.parametrize("damage", ["header", "pages"])
def test_cache_clear_deletes_a_cache_it_cannot_read_as_its_error_advises(
        isolated_home: Path, damage: str):
    if damage == "header":
        isolated_home.mkdir(parents=True)
        (isolated_home / "scores.sqlite3").write_bytes(b"not a database" * 100)
    else:
        corrupt_pages(isolated_home)

    result = run_cli("cache", "clear")

    assert result.exit_code == 0, result.output
    assert "deleted the unusable score cache" in result.output
    assert ScoreCache(isolated_home).stats().entries == 0


def test_clearing_a_read_only_cache_says_it_is_read_only(tmp_path: Path):
    cache = ScoreCache(tmp_path)
    cache.put_many([(cache_key(), 0.5, 0.0)])
    cache._db.execute("PRAGMA query_only=ON")  # what a file without write permission gives

    cache.put_many([(cache_key("c2"), 0.5, 0.0)])  # skipped: it only costs speed
    with pytest.raises(ConfigError, match="read-only"):
        cache.clear()


def test_cache_stats_where_the_cache_folder_is_a_file_is_a_one_line_error(
        isolated_home: Path):
    isolated_home.parent.mkdir(parents=True)
    isolated_home.write_text("not a folder")

    result = run_cli("cache", "stats")

    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit), result.exception
    assert str(isolated_home) in result.output


def test_a_cache_file_that_is_a_folder_says_so(tmp_path: Path):
    (tmp_path / "scores.sqlite3").mkdir()

    with pytest.raises(ConfigError, match="is a folder"):
        ScoreCache(tmp_path)


def test_an_answer_larger_than_the_cap_is_a_contract_error_not_a_memory_hog(
        httpserver: HTTPServer, monkeypatch: pytest.MonkeyPatch) -> None:
    httpserver.expect_request("/completion").respond_with_data(
        b"[" + b" " * 2_000_000 + b"]", content_type="application/json")
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "llama.cpp", "m", 1)

    async def ask() -> None:
        async with client_module.ModelClient(timeout=10) as c:
            await c.next_token(endpoint, ["q"], top_k=2)

    monkeypatch.setattr(client_module, "MAX_ANSWER_BYTES", 1_000_000)
    with pytest.raises(ContractError, match="sent more than 1 MB"):
        asyncio.run(ask())


def test_a_gzip_answer_is_read_once(httpserver: HTTPServer) -> None:
    answer = {"content": " yes", "completion_probabilities": [{"id": 1, "token": " yes",
              "logprob": -0.1, "top_logprobs": [{"id": 1, "token": " yes", "logprob": -0.1},
                                                {"id": 2, "token": " no", "logprob": -2.5}]}]}
    httpserver.expect_request("/completion").respond_with_data(
        gzip.compress(json.dumps(answer).encode()), content_type="application/json",
        headers={"Content-Encoding": "gzip"})
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "llama.cpp", "m", 1)

    async def ask() -> list[NextToken]:
        async with ModelClient(timeout=10) as c:
            return await c.next_token(endpoint, ["q"], top_k=2)

    (token,) = asyncio.run(ask())
    assert [t.token for t in token.top] == [" yes", " no"]


def test_a_pinned_url_that_answers_but_is_no_model_server_is_an_error_not_degraded(
        httpserver: HTTPServer, repo: Path) -> None:
    httpserver.expect_request("/v1/models").respond_with_data("no such page", status=404)
    httpserver.expect_request("/props").respond_with_data("no such page", status=404)
    httpserver.expect_request("/api/version").respond_with_data("no such page", status=404)
    url = httpserver.url_for("/").rstrip("/")

    result = run_cli("-q", "retry", "--root", str(repo), "-e", url)

    assert result.exit_code == 1
    assert f"{url} (from flag: --base-url) is not a usable model server: not a model " \
           "server (GET /v1/models: 404)" in result.stderr


def test_credentials_in_a_url_are_refused_and_the_api_key_is_never_shown(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run_cli("-q", "retry", "--root", str(repo), "-e", "http://bob:s3cret@gpu:8080")
    assert result.exit_code == 2  # bad command-line input
    assert "carries credentials" in result.stderr and "s3cret" not in result.stderr

    monkeypatch.setenv("SLM_API_KEY", "s3cret")
    shown = run_cli("config", "show")
    assert "api_key" in shown.output and "s3cret" not in shown.output


def test_a_verdict_bounded_from_the_top_k_is_flagged_in_the_json_report(
        httpserver: HTTPServer, repo: Path) -> None:
    # the recorded Gemma answer, with every "no" taken out of the top-K
    answer = recorded("llamacpp-completion.json")
    position = answer["completion_probabilities"][0]
    position["top_logprobs"] = [c for c in position["top_logprobs"]
                                if c["token"].strip().lower() != "no"]
    props = recorded("llamacpp-props.json")
    props["total_slots"] = 1
    httpserver.expect_request("/v1/models").respond_with_json(recorded("llamacpp-v1-models.json"))
    httpserver.expect_request("/props").respond_with_json(props)
    httpserver.expect_request("/api/version").respond_with_data("", status=404)
    httpserver.expect_request("/tokenize").respond_with_data("", status=404)
    httpserver.expect_request("/completion").respond_with_json(answer)
    url = httpserver.url_for("/").rstrip("/")

    result = run_cli("-q", "retry", "--root", str(repo), "-e", url, "--rerank-top", "1",
                     "--threshold", "0", "--no-cache", "--format", "json")

    assert result.exit_code == 0, result.stderr
    top = json.loads(result.stdout)["results"][0]
    assert top["model_score"] is not None and top["bounded"] == "no"


def test_a_malformed_url_in_the_environment_names_the_variable(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLM_ENDPOINT", "localhost:8033")
    result = run_cli("-q", "retry", "--root", str(repo))
    assert result.exit_code == 1
    assert "env: SLM_ENDPOINT: model server URL 'localhost:8033'" in result.stderr


# --- answers that are not answers: redirects, error text that spans lines -----------------


def fake_llama_server(httpserver: HTTPServer) -> str:
    """A llama-server as its probe answers are recorded; /completion is the test's."""
    httpserver.expect_request("/v1/models").respond_with_json(recorded("llamacpp-v1-models.json"))
    httpserver.expect_request("/props").respond_with_json(recorded("llamacpp-props.json"))
    httpserver.expect_request("/api/version").respond_with_data("", status=404)
    httpserver.expect_request("/tokenize").respond_with_data("", status=404)
    return httpserver.url_for("/").rstrip("/")


def test_a_redirect_is_an_error_naming_its_location_not_a_verdict(
        httpserver: HTTPServer) -> None:
    # the body is a well-formed verdict: only the status says it is not the answer
    httpserver.expect_request("/completion", method="POST").respond_with_json(
        recorded("llamacpp-completion.json"), status=302,
        headers={"Location": "http://elsewhere.example/completion"})

    with pytest.raises(ContractError) as caught:
        next_token(llama_cpp(httpserver), ["q"])

    message = str(caught.value)
    assert "HTTP 302" in message and "http://elsewhere.example/completion" in message
    assert "not followed" in message and httpserver.url_for("/completion") in message


def test_a_search_whose_server_redirects_fails_and_caches_nothing(
        httpserver: HTTPServer, repo: Path, isolated_home: Path) -> None:
    url = fake_llama_server(httpserver)
    httpserver.expect_request("/completion", method="POST").respond_with_json(
        recorded("llamacpp-completion.json"), status=307,
        headers={"Location": "http://elsewhere.example/completion"})

    result = run_cli("-q", "retry", "--root", str(repo), "-e", url, "--rerank-top", "2")

    assert result.exit_code == 1
    assert "HTTP 307" in result.stderr and "not followed" in result.stderr
    store = ScoreCache(isolated_home)
    try:
        assert store.stats().entries == 0
    finally:
        store.close()


def test_a_servers_error_text_with_newlines_and_escapes_stays_one_escaped_line(
        httpserver: HTTPServer) -> None:
    forged = "bad prompt\nslm-rerank: all 16 chunks judged relevant\x1b]0;owned\x07"
    httpserver.expect_request("/completion", method="POST").respond_with_json(
        {"error": {"code": 400, "message": forged}}, status=400)

    with pytest.raises(ContractError) as caught:
        next_token(llama_cpp(httpserver), ["q"])

    message = str(caught.value)
    assert "\n" not in message and "\x1b" not in message and "\x07" not in message
    assert "bad prompt slm-rerank: all 16 chunks judged relevant\\x1b]0;owned\\x07" in message


def test_a_servers_plain_text_error_is_quoted_on_one_line_too(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/completion", method="POST").respond_with_data(
        "Traceback (most recent call last):\r\n  File \"x\"\x1b[2J\n", status=500)

    with pytest.raises(TransientError) as caught:
        next_token(llama_cpp(httpserver), ["q"])

    message = str(caught.value)
    assert "\n" not in message and "\r" not in message and "\x1b" not in message
    assert 'Traceback (most recent call last): File "x"\\x1b[2J' in message


def test_a_server_message_is_cut_to_a_few_hundred_characters(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/completion", method="POST").respond_with_json(
        {"error": "x" * 100_000}, status=400)

    with pytest.raises(ContractError) as caught:
        next_token(llama_cpp(httpserver), ["q"])

    assert len(str(caught.value)) < 600


def test_endpoints_probes_every_e_given_not_only_the_last(isolated_home: Path,
                                                          httpserver: HTTPServer):
    httpserver.expect_request("/v1/models").respond_with_json(recorded("llamacpp-v1-models.json"))
    httpserver.expect_request("/props").respond_with_json(recorded("llamacpp-props.json"))
    good = httpserver.url_for("/").rstrip("/")

    result = run_cli("endpoints", "-e", "http://127.0.0.1:9", "-e", good, "--format", "json")

    assert result.exit_code == 0, result.output
    assert [(row["url"], row["kind"]) for row in json.loads(result.output)] == [
        ("http://127.0.0.1:9", None), (good, "llama.cpp")]


@pytest.mark.parametrize("host", ["gpu\x07box", "gpu\x1bbox", "gpu\x7fbox", "gpu\u200bbox"])
def test_a_host_with_a_control_or_invisible_character_is_a_usage_error(isolated_home: Path,
                                                                       host: str):
    result = run_cli("endpoints", "--host", host)

    assert result.exit_code == 2, result.output
    assert "--host" in result.output and "not a host name" in result.output
    assert "\x07" not in result.output and "\x1b" not in result.output

"""What a careless RAG developer or a hostile client sends to the documents API and to
`slm-rerank serve-api`, and what each must get back: a ranking that says what it changed,
or an error that says what to fix; never a traceback, a hang or a silent guess."""

from __future__ import annotations

import dataclasses
import json
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
import slm_rerank_openai

import slm_rerank
from slm_rerank.config import Settings
from slm_rerank.errors import ConfigError
from slm_rerank.host import Host
from slm_rerank.registrations import DocumentScore, Scorer, ScoreRequest
from slm_rerank.servers.api_key import read_api_key


class LengthJudge:
    """P(relevant) from a document's length (longer is better), without a server; it
    records the texts it was asked about."""

    seen: list[str] = []

    @staticmethod
    @slm_rerank.hookimpl
    def register_scorers(register: Callable[[Scorer], None]) -> None:
        async def score(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
            LengthJudge.seen.extend([request.query, *(d.text for d in request.documents)])
            for i, document in enumerate(request.documents):
                yield DocumentScore(i, min(len(document.text) / 100, 1.0))

        register(Scorer("length", "longer is better", score, needs_endpoint=False))


def length_host() -> Host:
    settings = dataclasses.replace(Settings(), scorer="length", score_cache=False)
    return Host.with_plugins(settings, LengthJudge, slm_rerank_openai)


# --- the documents API ---------------------------------------------------------------

def test_lone_surrogates_in_documents_or_query_are_judged_as_replacement_characters() -> None:
    LengthJudge.seen = []
    # json.loads('"\\ud800"') makes such strings: what a JSON body or a bad decode hands over
    docs = ["ab\ud800cd", "plain", "\ud83d\ude00 a pair split in a str"]

    result = slm_rerank.rerank_documents("key\udfff", docs, host=length_host())

    assert len(result) == 3 and all(r.score is not None for r in result)
    assert {id(r.document) for r in result} == {id(d) for d in docs}  # the caller's own
    assert "ab\ufffdcd" in LengthJudge.seen and "key\ufffd" in LengthJudge.seen
    assert "\U0001f600 a pair split in a str" in LengthJudge.seen
    assert any(w.startswith("2 of 3 documents held UTF-16 surrogates") for w in
               result.warnings), result.warnings
    assert any(w.startswith("the query held UTF-16 surrogates") for w in result.warnings)


def test_a_document_cut_to_fit_the_prompt_is_a_warning_of_the_result() -> None:
    result = slm_rerank.rerank_documents("q", ["x" * 10_000_000, "short"], host=length_host())

    assert len(result) == 2
    assert any(w.startswith("1 of 2 documents were cut to their first") for w in
               result.warnings), result.warnings


def test_top_n_true_is_refused_not_read_as_one() -> None:
    with pytest.raises(ValueError, match="top_n must be a positive integer, not True"):
        slm_rerank.rerank_documents("q", ["a", "b"], top_n=True, host=length_host())


def test_metadata_that_is_not_a_mapping_does_not_hide_the_document() -> None:
    docs = [{"text": "a", "metadata": ["tag"]}, {"text": "bb", "metadata": None},
            {"text": "ccc", "metadata": {"id": "m-3"}}]

    result = slm_rerank.rerank_documents("q", docs, host=length_host())

    assert sorted(r.id for r in result) == ["0", "1", "m-3"]


def test_a_generator_of_documents_is_refused_with_what_to_pass() -> None:
    with pytest.raises(TypeError, match=r"not generator; pass list\(documents\)"):
        slm_rerank.rerank_documents("q", (d for d in ["a"]), host=length_host())


def test_an_upstream_score_of_any_real_number_type_is_kept_and_nan_is_none() -> None:
    from fractions import Fraction  # a numbers.Real that is no float, as numpy's float32

    docs = [{"text": "a", "score": Fraction(9, 10)}, {"text": "bb", "score": float("nan")},
            {"text": "ccc", "score": True}]

    result = slm_rerank.rerank_documents("q", docs, host=length_host())

    assert {r.index: r.upstream_score for r in result} == {0: 0.9, 1: None, 2: None}


# --- serve-api (in-process, the length judge) ----------------------------------------

@pytest.fixture
def api(in_process_api: Callable[..., tuple[str, int]]) -> Callable[..., tuple[str, int]]:
    """serve-api in this process with the length judge; ``start(**options)`` -> (url, port)."""
    return lambda **options: in_process_api(length_host(), **options)


def rerank_bytes(body: bytes) -> bytes:
    return (b"POST /v1/rerank HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)) + body


def trickle(port: int, head: bytes, tail: bytes, pause: float) -> tuple[int, bytes]:
    """Send ``head`` at once and ``tail`` one byte per ``pause`` s, as slowloris does;
    how many bytes of ``tail`` went out before the server answered or hung up, and the
    answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head)
        for sent, byte in enumerate(tail):
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                return sent, b""
            # the server answered (or closed) without waiting for the rest
            sock.setblocking(False)
            try:
                answer = sock.recv(4096)
                sock.setblocking(True)
                return sent, answer
            except BlockingIOError:
                sock.setblocking(True)
            time.sleep(pause)
        return len(tail), sock.recv(4096)


def test_a_request_trickled_a_byte_at_a_time_is_cut_off_not_served_for_ever(
        api: Callable[..., tuple[str, int]]) -> None:
    _, port = api(request_seconds=1.0)
    request = rerank_bytes(json.dumps({"query": "q", "documents": ["a" * 40]}).encode())
    head, body = request.split(b"\r\n\r\n", 1)

    sent_headers, _ = trickle(port, b"", head, pause=0.1)  # 120 bytes: 12 s if let be
    sent_body, answer = trickle(port, head + b"\r\n\r\n", body, pause=0.1)

    assert sent_headers < len(head)  # the server hung up part-way through the headers
    assert sent_body < len(body)
    assert answer.startswith(b"HTTP/1.1 408") and b"was not received in time" in answer


def test_a_kept_alive_connection_may_idle_between_requests_longer_than_a_request_may_take(
        api: Callable[..., tuple[str, int]]) -> None:
    url, _ = api(request_seconds=0.5)

    with httpx.Client(timeout=10) as client:
        first = client.post(url + "/v1/rerank", json={"query": "q", "documents": ["a"]})
        time.sleep(1.0)
        second = client.post(url + "/v1/rerank", json={"query": "q", "documents": ["b"]})

    assert (first.status_code, second.status_code) == (200, 200), second.text


def test_a_deeply_nested_body_is_a_400_not_an_internal_error(
        api: Callable[..., tuple[str, int]]) -> None:
    url, _ = api()

    response = httpx.post(url + "/v1/rerank", content=b'{"query": "q", "documents": ['
                          + b"[" * 100_000 + b"]" * 100_000 + b"]}",
                          headers={"Content-Type": "application/json"})

    assert response.status_code == 400, response.text
    assert "nests arrays or objects too deeply" in response.json()["message"]


def test_lone_surrogates_in_a_request_are_judged_not_a_500(
        api: Callable[..., tuple[str, int]]) -> None:
    url, _ = api()

    response = httpx.post(url + "/v1/rerank", content=b'{"query": "q\\ud800", "documents": '
                          b'["a\\udfffb", "c"], "return_documents": true}',
                          headers={"Content-Type": "application/json"})

    assert response.status_code == 200, response.text
    body = response.json()
    assert sorted(r["index"] for r in body["results"]) == [0, 1]
    assert any("surrogates" in w for w in body["meta"]["warnings"])


def test_a_document_cut_to_fit_the_prompt_is_named_in_the_answers_warnings(
        api: Callable[..., tuple[str, int]]) -> None:
    url, _ = api()

    response = httpx.post(url + "/v1/rerank", json={"query": "q",
                                                    "documents": ["x" * 1_000_000, "y"]})

    assert response.status_code == 200, response.text
    assert any(w.startswith("1 of 2 documents were cut to their first")
               for w in response.json()["meta"]["warnings"])


def test_an_api_key_no_client_could_send_is_refused_at_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "key").write_text("clé-secrète\n", encoding="utf-8")
    monkeypatch.setenv("RERANK_KEY", "two\nlines")

    with pytest.raises(ConfigError, match="--api-key-file .*non-ASCII"):
        read_api_key(None, tmp_path / "key")
    with pytest.raises(ConfigError, match="--api-key-env RERANK_KEY: .*printable ASCII"):
        read_api_key("RERANK_KEY", None)


def test_connections_beyond_max_connections_are_answered_503_and_closed(
        api: Callable[..., tuple[str, int]]) -> None:
    url, port = api(max_connections=2)
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
    try:
        time.sleep(0.3)  # both are being served (their threads wait for a request line)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as third:
            third.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = third.recv(65536)
    finally:
        for conn in idle:
            conn.close()

    assert answer.startswith(b"HTTP/1.1 503")
    assert b"too many open connections (max_connections = 2)" in answer
    # once the idle ones are gone, the server answers again
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as again:
            again.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            if again.recv(65536).startswith(b"HTTP/1.1 200"):
                break
        time.sleep(0.2)
    else:
        raise AssertionError(f"{url} did not answer /health once the idle connections closed")

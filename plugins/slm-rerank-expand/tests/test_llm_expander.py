"""The ``llm`` query expander: contract, how answers are read, the cache, and failures.

The fake server answers with payloads recorded from a real llama-server
(slm_rerank.testing.recordings, WIRE.md's shapes), with the generated text replaced.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import slm_rerank_expand
from pytest_httpserver import HTTPServer
from slm_rerank_expand import PROMPT_VERSION, WEIGHT, expand, parse
from slm_rerank_expand.cache import FILE_NAME, MAX_AGE_SECONDS, ExpansionCache, cache_key

from slm_rerank.errors import ContractError, TransientError
from slm_rerank.registrations import Endpoint, ExpandRequest, WeightedTerm
from slm_rerank.testing import QueryExpanderContract
from slm_rerank.testing.recordings import WIRE

MODEL = "gemma-3-270m-q4_k_m.gguf"


def native_answer(text: str) -> dict[str, Any]:
    """llama.cpp's /completion answer, as recorded, generating ``text``."""
    recorded = json.loads((WIRE / "llamacpp-completion.json").read_text(encoding="utf-8"))
    body = copy.deepcopy(recorded["exchanges"][0]["response"])
    body["content"] = text
    return body


def openai_answer(text: str) -> dict[str, Any]:
    """/v1/completions' answer, as recorded from llama-server, generating ``text``."""
    recorded = json.loads((WIRE / "llamacpp-v1-completions.json").read_text(encoding="utf-8"))
    body = copy.deepcopy(recorded["exchanges"][0]["response"])
    body["choices"][0]["text"] = text
    return body


def serving(httpserver: HTTPServer, text: str, kind: str = "llama.cpp") -> Endpoint:
    if kind == "llama.cpp":
        httpserver.expect_request("/completion", method="POST").respond_with_json(
            native_answer(text))
    else:
        httpserver.expect_request("/v1/completions", method="POST").respond_with_json(
            openai_answer(text))
    return Endpoint(httpserver.url_for("/").rstrip("/"), kind, model_id=MODEL)


def asking(endpoint: Endpoint | None, query: str = "where is the user logged out",
           cache_dir: Path | None = None, seconds: float = 5.0) -> ExpandRequest:
    return ExpandRequest(query=query, endpoint=endpoint, deadline=time.monotonic() + seconds,
                         cache_dir=cache_dir)


class TestLlmExpander(QueryExpanderContract):
    plugin = slm_rerank_expand
    distribution = "slm-rerank-expand"
    names = {"llm"}

    @pytest.fixture(autouse=True)
    def _server(self, httpserver: HTTPServer) -> Iterator[None]:
        self.endpoint = serving(httpserver, " backoff_delay, retry_count, jitter")
        yield

    def expand_request(self, query: str) -> ExpandRequest:
        return asking(self.endpoint, query)

    def test_the_fake_server_is_asked(self) -> None:
        extra = expand(self.expand_request("where are retries configured"))
        assert extra == [WeightedTerm("backoff_delay", WEIGHT), WeightedTerm("retry_count", WEIGHT),
                         WeightedTerm("jitter", WEIGHT)]


# --- reading the answer ------------------------------------------------------------------


def test_words_are_read_from_a_comma_or_line_separated_list() -> None:
    assert parse(" logoff_view, deauth_session\nLogoutView; token", "where is the user logged out"
                 ) == ["logoff_view", "deauth_session", "logoutview", "token"]


def test_stop_words_generic_words_and_words_of_the_query_are_dropped() -> None:
    answer = " the, function, code, users, logged, logging, logoff_view"
    assert parse(answer, "where is the user logged out") == ["logoff_view"]


def test_numbers_over_long_tokens_and_repeats_are_dropped() -> None:
    answer = " 404, 3.14, x" + "y" * 40 + ", logoff_view, Logoff_View, session_session"
    assert parse(answer, "where is the user logged out") == ["logoff_view"]


def test_versions_and_numbered_names_are_dropped() -> None:
    answer = " python-3.8, python-3, sqrt_4, v1.2, utf8, int64"
    assert parse(answer, "encoding of text") == ["utf8", "int64"]


def test_words_copied_from_the_worked_examples_are_dropped() -> None:
    # With a long query the bundled model repeats the examples' answers word for word.
    answer = " backoff, attempts, max_retries, login, signin, session, revoke, glossary_entry"
    assert parse(answer, "glossary duplicate term with a different case") == [
        "login", "signin", "glossary_entry"]


def test_one_word_of_a_worked_example_is_kept() -> None:
    assert parse(" signout, logoff", "where is the user logged out") == ["signout", "logoff"]


def test_an_identifier_made_only_of_query_words_is_dropped() -> None:
    assert parse(" user_logout, logged_user, session_id", "where is the user logged out"
                 ) == ["user_logout", "session_id"]


def test_a_short_phrase_gives_its_words_and_a_sentence_is_dropped() -> None:
    answer = " exponential backoff, The code probably handles this in the session module"
    assert parse(answer, "where are retries configured") == ["exponential", "backoff"]


def test_prose_instead_of_a_list_is_a_contract_error() -> None:
    with pytest.raises(ContractError, match="prose"):
        parse(" You can find the logout handler in the views of the application.",
              "where is the user logged out")


def test_an_empty_answer_is_a_contract_error() -> None:
    with pytest.raises(ContractError):
        parse("   ", "where is the user logged out")


def test_max_terms_caps_the_words_searched(httpserver: HTTPServer) -> None:
    endpoint = serving(httpserver, " logoff_view, deauth, session, token, logoff")
    request = ExpandRequest(query="where is the user logged out", endpoint=endpoint,
                            deadline=time.monotonic() + 5, options={"max_terms": 2})
    assert [t.term for t in expand(request)] == ["logoff_view", "deauth"]


def test_an_openai_completions_server_is_asked_the_same(httpserver: HTTPServer) -> None:
    endpoint = serving(httpserver, " logoff_view, deauth", kind="openai-completions")
    assert [t.term for t in expand(asking(endpoint))] == ["logoff_view", "deauth"]


# --- failures ----------------------------------------------------------------------------


def test_without_a_model_server_there_are_no_terms() -> None:
    assert expand(asking(None)) == []


def test_a_server_that_is_down_is_a_transient_error() -> None:
    endpoint = Endpoint("http://127.0.0.1:9", "llama.cpp", model_id=MODEL)
    with pytest.raises(TransientError):
        expand(asking(endpoint))


def test_a_spent_deadline_asks_nothing(httpserver: HTTPServer) -> None:
    endpoint = serving(httpserver, " logoff_view")
    with pytest.raises(TransientError, match="no time"):
        expand(asking(endpoint, seconds=-1))
    assert not httpserver.log


def test_a_server_error_is_a_transient_error(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/completion").respond_with_json(
        {"error": {"code": 500, "message": "boom"}}, status=500)
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), "llama.cpp", model_id=MODEL)
    with pytest.raises(TransientError):
        expand(asking(endpoint))


# --- the cache ---------------------------------------------------------------------------


def test_an_answer_is_cached_and_a_second_query_asks_nothing(httpserver: HTTPServer,
                                                             tmp_path: Path) -> None:
    endpoint = serving(httpserver, " logoff_view, deauth")
    first = expand(asking(endpoint, cache_dir=tmp_path))
    again = expand(asking(endpoint, "Where is the  USER logged out", cache_dir=tmp_path))
    assert again == first and len(httpserver.log) == 1
    assert (tmp_path / FILE_NAME).is_file()


def test_an_entry_older_than_30_days_is_a_miss(tmp_path: Path) -> None:
    key = cache_key(MODEL, PROMPT_VERSION, "q")
    ExpansionCache(tmp_path, now=1000.0).put(key, ["logoff_view"])
    assert ExpansionCache(tmp_path, now=1000.0 + MAX_AGE_SECONDS - 1).get(key) == ["logoff_view"]
    assert ExpansionCache(tmp_path, now=1000.0 + MAX_AGE_SECONDS + 1).get(key) is None


def test_another_model_or_prompt_version_is_another_entry(tmp_path: Path) -> None:
    cache = ExpansionCache(tmp_path)
    cache.put(cache_key(MODEL, PROMPT_VERSION, "q"), ["logoff_view"])
    assert cache.get(cache_key("other.gguf", PROMPT_VERSION, "q")) is None
    assert cache.get(cache_key(MODEL, "older-prompt", "q")) is None


def test_a_corrupt_cache_file_is_a_miss_and_is_rewritten(httpserver: HTTPServer,
                                                          tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_text("{not json", encoding="utf-8")
    endpoint = serving(httpserver, " logoff_view")
    assert [t.term for t in expand(asking(endpoint, cache_dir=tmp_path))] == ["logoff_view"]
    assert json.loads((tmp_path / FILE_NAME).read_text(encoding="utf-8"))["entries"]


def test_a_failure_is_not_cached(httpserver: HTTPServer, tmp_path: Path) -> None:
    endpoint = serving(httpserver, " This is a sentence about logging out of the app.")
    with pytest.raises(ContractError):
        expand(asking(endpoint, cache_dir=tmp_path))
    assert not (tmp_path / FILE_NAME).exists()

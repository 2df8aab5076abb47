"""Asking for findings: the prompt each kind of model and endpoint gets, an answer read
strictly (malformed objects are counted, never repaired into findings), and a deadline that
holds against a server that trickles its answer."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from click.testing import CliRunner
from pytest_httpserver import HTTPServer
from review_fakes import recorded
from slm_rerank_review.cli import make_group
from slm_rerank_review.generation import (
    FINDINGS_GRAMMAR,
    GRAMMAR_CLAIM_CHARS,
    INSTRUCTION,
    MAX_PER_CHUNK,
    ShownChunk,
    chat_messages,
    completion_prompt,
    generate,
    parse_answer,
)

from slm_rerank.plugin_kit import ModelClient
from slm_rerank.registrations import Endpoint
from slm_rerank.testing import SAMPLE_BASE_PROFILE, SAMPLE_CHAT_PROFILE
from slm_rerank.testing.servers import misbehaving_server

CHUNK = ShownChunk("src/a.py", 3, 4, "def f(x):\n    return {x}", "f")


def test_a_base_model_gets_the_one_shot_layout_with_the_chunk_and_its_place() -> None:
    prompt = completion_prompt(SAMPLE_BASE_PROFILE, "find {bugs}", CHUNK)

    assert prompt.endswith("Query: find {bugs}\nDocument:\nFile: src/a.py:3-4 (f)\n"
                           "def f(x):\n    return {x}\nFindings:\n")
    assert '{"claim": "`get` reads' in prompt  # the worked example


def test_an_instruction_tuned_model_gets_its_own_template() -> None:
    prompt = completion_prompt(SAMPLE_CHAT_PROFILE, "find bugs", CHUNK)

    expected = SAMPLE_CHAT_PROFILE.completion.split("{instruction}")[0]
    assert prompt.startswith(expected) and "File: src/a.py:3-4 (f)" in prompt
    assert INSTRUCTION in prompt


def test_a_chat_endpoint_gets_one_real_user_message(httpserver: HTTPServer) -> None:
    reply = recorded("llamacpp-v1-chat-completions.json")
    reply["choices"][0]["message"]["content"] = '{"claim": "c", "evidence": "e"}'
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_json(reply)
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), kind="openai-chat",
                        model_id="m")

    async def ask() -> str:
        async with ModelClient(timeout=10) as client:
            return await generate(client, endpoint, SAMPLE_CHAT_PROFILE, "q", CHUNK,
                                  time.monotonic() + 10)

    answer = asyncio.run(ask())

    assert answer == '{"claim": "c", "evidence": "e"}'
    sent = json.loads(httpserver.log[0][0].get_data())
    assert sent["messages"] == chat_messages("q", CHUNK) and sent["model"] == "m"
    assert [m["role"] for m in sent["messages"]] == ["user"] and sent["max_tokens"] > 1


def _sent_to_completion(httpserver: HTTPServer, kind: str, path: str, reply: str,
                        profile: object) -> dict[str, object]:
    answer = recorded(reply)
    httpserver.expect_request(path, method="POST").respond_with_json(answer)
    endpoint = Endpoint(httpserver.url_for("/").rstrip("/"), kind=kind, model_id="m")

    async def ask() -> str:
        async with ModelClient(timeout=10) as client:
            return await generate(client, endpoint, profile, "q", CHUNK,  # type: ignore[arg-type]
                                  time.monotonic() + 10)

    asyncio.run(ask())
    return json.loads(httpserver.log[0][0].get_data())


def test_a_base_model_on_llama_cpp_answers_within_the_findings_grammar(
        httpserver: HTTPServer) -> None:
    sent = _sent_to_completion(httpserver, "llama.cpp", "/completion",
                               "llamacpp-completion.json", SAMPLE_BASE_PROFILE)

    assert sent["grammar"] == FINDINGS_GRAMMAR
    assert sent["prompt"] == completion_prompt(SAMPLE_BASE_PROFILE, "q", CHUNK)


def test_within_the_grammar_no_stop_string_can_cut_a_finding_short(
        httpserver: HTTPServer) -> None:
    # llama.cpp matches a stop string anywhere in the text: "END" would end a finding that
    # quotes O_APPEND or BACKEND mid-string. The grammar ends the answer itself, and lets
    # the one-shot layout's END line follow the last finding.
    sent = _sent_to_completion(httpserver, "llama.cpp", "/completion",
                               "llamacpp-completion.json", SAMPLE_BASE_PROFILE)
    finding = json.dumps({"claim": "`open` lacks O_APPEND, so the BACKEND log is cut",
                          "evidence": "fd = os.open(path, os.O_WRONLY)",
                          "identifiers": ["open"], "severity": "error"})

    assert sent["grammar"] == FINDINGS_GRAMMAR
    assert not [stop for stop in sent["stop"] if stop in finding]  # type: ignore[union-attr]
    assert r'"\nEND"?' in FINDINGS_GRAMMAR.splitlines()[0]
    proposal = parse_answer(finding + "\nEND", CHUNK)
    assert len(proposal.candidates) == 1 and proposal.malformed == 0
    assert "O_APPEND" in proposal.candidates[0].claim


def test_an_instruction_tuned_model_and_other_servers_get_no_grammar(
        httpserver: HTTPServer) -> None:
    instructed = _sent_to_completion(httpserver, "llama.cpp", "/completion",
                                     "llamacpp-completion.json", SAMPLE_CHAT_PROFILE)
    httpserver.clear_log()
    elsewhere = _sent_to_completion(httpserver, "openai-completions", "/v1/completions",
                                    "llamacpp-v1-completions.json", SAMPLE_BASE_PROFILE)

    assert "grammar" not in instructed and "prompt" in instructed
    assert "grammar" not in elsewhere and "prompt" in elsewhere


def test_every_line_the_grammar_allows_is_read_as_a_finding_of_the_chunk_shown() -> None:
    # the grammar's finding line, written out at its bounds: the reader takes each whole
    claim, evidence = "c" * GRAMMAR_CLAIM_CHARS, "return {x}\n" + "e" * 380
    line = json.dumps({"claim": claim, "evidence": evidence,
                       "identifiers": ["f", "x.y", "$el"], "severity": "note"})
    answer = "\n".join([line] * MAX_PER_CHUNK)

    proposal = parse_answer(answer, CHUNK)

    assert len(proposal.candidates) == MAX_PER_CHUNK and proposal.malformed == 0
    first = proposal.candidates[0]
    assert first.evidence == evidence and "\\n" in line  # JSON's escape, as the grammar allows
    assert first.identifiers == ("f", "x.y", "$el") and first.severity == "note"
    assert (first.path, first.start_line) == ("src/a.py", 3)
    assert f"finding){{0,{MAX_PER_CHUNK - 1}}}" in FINDINGS_GRAMMAR
    assert f"char{{1,{GRAMMAR_CLAIM_CHARS}}}" in FINDINGS_GRAMMAR


def test_each_object_of_an_answer_cites_the_chunk_shown_not_a_place_the_model_wrote() -> None:
    answer = json.dumps({"claim": "x", "evidence": "return {x}", "path": "/etc/passwd",
                         "line": 1})

    [candidate] = parse_answer(answer, CHUNK).candidates

    assert (candidate.path, candidate.start_line, candidate.end_line) == ("src/a.py", 3, 4)


def test_objects_in_a_fence_a_list_or_pretty_printed_are_read() -> None:
    answer = ('```json\n[{"claim": "a", "evidence": ["l1", "l2"], "severity": "HIGH"},\n'
              ' {\n  "claim": "b",\n  "evidence": "l3",\n  "identifiers": "f"\n }]\n```')

    proposal = parse_answer(answer, CHUNK)

    assert [(c.claim, c.evidence, c.severity, c.identifiers)
            for c in proposal.candidates] == [("a", "l1\nl2", "error", ()),
                                              ("b", "l3", "warning", ("f",))]
    assert proposal.malformed == 0


def test_what_is_not_a_finding_is_counted_and_left_out() -> None:
    answer = "\n".join([
        "Here is my review.",
        '{"claim": "cut off by the token lim',
        '{"claim": "", "evidence": "x"}',
        '{"claim": ["a"], "evidence": "x"}',
        '{"claim": "ok", "evidence": 5}',
        '{"claim": "ok", "evidence": "x", "identifiers": {"a": 1}}',
        '{"claim": "' + "x" * 700 + '", "evidence": "y"}',
        "[" * 3000 + "]" * 3000,
        '{"note": "no claim"}',
    ])

    proposal = parse_answer(answer, CHUNK)

    assert proposal.candidates == () and proposal.malformed == 7


def test_none_is_no_finding_and_no_fault() -> None:
    proposal = parse_answer("NONE\nEND", CHUNK)

    assert proposal.candidates == () and proposal.none_said and proposal.malformed == 0


def test_at_most_a_few_findings_are_kept_per_chunk() -> None:
    answer = "\n".join(json.dumps({"claim": f"c{i}", "evidence": "e"}) for i in range(50))

    assert len(parse_answer(answer, CHUNK).candidates) == MAX_PER_CHUNK


def test_an_answer_of_megabytes_is_read_only_to_its_bound() -> None:
    answer = json.dumps({"claim": "c", "evidence": "e"}) + "{" * 5_000_000

    proposal = parse_answer(answer, CHUNK)

    assert len(proposal.candidates) == 1


def test_a_server_that_trickles_its_answer_ends_the_review_within_its_deadline(
        project: Path) -> None:
    probes = {path: json.dumps(recorded(name)).encode() for path, name in (
        ("/v1/models", "llamacpp-v1-models.json"), ("/props", "llamacpp-props.json"))}
    with misbehaving_server("trickle", interval=0.2, answers=probes) as server:
        started = time.monotonic()
        result = CliRunner().invoke(make_group(), [
            str(project / "src"), "--root", str(project), "--fast", "-e", server.url,
            "--timeout", "4", "--json", "-q", "retry backoff delay"], catch_exceptions=False)
        took = time.monotonic() - started

    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["findings"] == [] and out["degraded"]
    assert took < 4 * 5


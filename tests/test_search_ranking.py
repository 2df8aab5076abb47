"""Recall and tier-1 order of `run_search`: path and body evidence, tokens, stems, ties."""

from __future__ import annotations

from pathlib import Path

from search_fixtures import make_repo, result_paths, search

from slm_rerank.config import Settings
from slm_rerank.lexical.gather import MAX_PATH_ARGS


def mentions(word: str, times: int) -> str:
    return "".join(f"def case_{i}():\n    {word}({word}_{i})\n" for i in range(times))


# --- recall: a ranked union of path and body matches ---------------------------------------


def test_a_file_named_after_the_query_outranks_a_dozen_tests_that_repeat_the_word(
        tmp_path: Path) -> None:
    files = {f"tests/test_client_{i}.py": mentions("retry", 10) for i in range(12)}
    files["pkg/retry.py"] = "def backoff(attempt):\n    return 2 ** attempt\n"
    root = make_repo(tmp_path / "repo", files)

    report = search(root, "retry")

    assert result_paths(report)[0] == "pkg/retry.py"
    assert report.results[0].matched_terms == ["retry"]


def test_a_file_named_after_the_query_is_reached_past_many_files_that_mention_it(
        tmp_path: Path) -> None:
    # More body matches than files sliced per query, and none of them tests: the path match
    # must not be gated behind the body matches.
    files = {f"pkg/mod_{i:03}.py": mentions("retry", 3) for i in range(130)}
    files["pkg/net/retry.py"] = "def backoff(attempt):\n    return 2 ** attempt\n"
    root = make_repo(tmp_path / "repo", files)

    report = search(root, "retry", top_k=5)

    assert "pkg/net/retry.py" in result_paths(report)


def test_a_body_match_is_found_when_no_path_mentions_the_term(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {
        "pkg/engine.py": "def run():\n    frobnicate(1)\n",
        "pkg/other.py": "def idle():\n    pass\n",
    })

    report = search(root, "frobnicate")

    assert result_paths(report) == ["pkg/engine.py"]
    assert report.results[0].matched_terms == ["frobnicate"]


# --- path terms match whole tokens ---------------------------------------------------------


def test_a_path_term_does_not_match_a_longer_directory_name(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"shared/x.py": "x = 1\n", "pkg/share.py": "y = 2\n"})

    assert result_paths(search(root, "share")) == ["pkg/share.py"]


def test_a_path_term_does_not_match_inside_a_longer_file_name(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"src/replay.py": "x = 1\n", "src/layout.py": "y = 2\n",
                                         "src/lay.py": "z = 3\n"})

    assert result_paths(search(root, "lay")) == ["src/lay.py"]


def test_camel_case_and_snake_case_path_tokens_are_split(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {
        "src/HttpClient.java": "class A {}\n",
        "src/http_client.py": "z = 3\n",
        "src/clientele.py": "w = 4\n",
    })

    assert result_paths(search(root, "client")) == ["src/HttpClient.java", "src/http_client.py"]


def test_a_directory_match_counts_less_than_a_file_name_match(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"retry/core.py": "x = 1\n", "pkg/retry.py": "y = 2\n"})

    assert result_paths(search(root, "retry")) == ["pkg/retry.py", "retry/core.py"]


# --- stems beside roots --------------------------------------------------------------------


def test_a_noun_in_the_query_finds_the_verb_in_a_body(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {
        "app/schema.py": "def apply(db):\n    migrate(db, version=2)\n",
        "app/other.py": "def idle():\n    pass\n",
    })

    report = search(root, "migration")

    assert result_paths(report) == ["app/schema.py"]
    assert report.results[0].symbol == "apply"


def test_a_plural_in_the_query_finds_the_singular(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"lib/kinds.py": "class Kind:\n    pass\n",
                                         "lib/other.py": "x = 1\n"})

    assert result_paths(search(root, "classes")) == ["lib/kinds.py"]


def test_a_symbol_the_chunk_declares_picks_the_best_chunk_of_a_file(tmp_path: Path) -> None:
    padding = "".join(f"def filler_{i}():\n    return {i}\n\n\n" for i in range(5))
    root = make_repo(tmp_path / "repo", {
        "pkg/net.py": f"{padding}def backoff(n):\n    return 2 ** n\n\n\n{padding}",
    })

    (best,) = search(root, "backoff").results

    assert best.symbol == "backoff"
    assert (best.start_line, best.end_line) == (21, 22)


# --- tests and docs below implementations --------------------------------------------------

TREE = {
    "src/parser.py": "class Parser:\n    def parse(self, text):\n        return text\n",
    "tests/test_parser.py": "from src.parser import Parser\n\n\ndef test_parser():\n"
                            "    assert Parser().parse('parser') == 'parser'\n",
    "docs/parser.md": "# Parser\n\nThe parser parses: Parser.parse reads text with the parser.\n",
}


def test_tests_and_docs_rank_below_the_implementation(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", TREE)

    first, *rest = result_paths(search(root, "parser"))
    assert first == "src/parser.py"
    assert sorted(rest) == ["docs/parser.md", "tests/test_parser.py"]


def test_a_query_about_tests_ranks_tests_first(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", TREE)

    assert result_paths(search(root, "tests for the parser"))[0] == "tests/test_parser.py"


def test_a_query_about_docs_ranks_docs_first(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", TREE)

    assert result_paths(search(root, "docs for the parser"))[0] == "docs/parser.md"


# --- deterministic order -------------------------------------------------------------------


def test_equal_scores_are_ordered_by_path(tmp_path: Path) -> None:
    names = ["zeta", "alpha", "mid", "beta", "omega"]
    root = make_repo(tmp_path / "repo",
                     {f"pkg/{n}.py": "def run():\n    widget(1)\n" for n in names})

    report = search(root, "widget")

    assert len({c.score for c in report.results}) == 1
    assert result_paths(report) == sorted(f"pkg/{n}.py" for n in names)


def test_the_same_query_gives_the_same_output_twice(tmp_path: Path) -> None:
    files = {f"pkg/m{i}.py": mentions("retry", i % 4 + 1) for i in range(30)}
    files.update({f"tests/test_m{i}.py": mentions("retry", 2) for i in range(10)})
    root = make_repo(tmp_path / "repo", files)

    first = search(root, "retry policy", top_k=40, chunks=True)
    second = search(root, "retry policy", top_k=40, chunks=True)

    assert first.to_dict()["results"] == second.to_dict()["results"]
    scores = [c.score for c in first.results]
    assert scores == sorted(scores, reverse=True)


# --- result shape --------------------------------------------------------------------------


def test_by_default_a_file_is_represented_by_its_best_chunk_and_chunks_lists_several(
        tmp_path: Path) -> None:
    body = "".join(f"def retry_{i}():\n    return retry({i})\n\n\n" for i in range(4))
    root = make_repo(tmp_path / "repo", {"pkg/policy.py": body, "pkg/other.py": "x = 1\n"})

    files = search(root, "retry")
    chunks = search(root, "retry", chunks=True)

    assert result_paths(files) == ["pkg/policy.py"]
    assert result_paths(chunks) == ["pkg/policy.py"] * 4
    assert files.results[0] == chunks.results[0]
    assert len({(c.start_line, c.end_line) for c in chunks.results}) == 4


def test_many_explicit_paths_keep_the_body_evidence_of_files_under_a_directory(
        tmp_path: Path) -> None:
    files = {f"one/f{i}.py": "x = 1\n" for i in range(MAX_PATH_ARGS + 5)}
    files["two/engine.py"] = "def run():\n    frobnicate()\n"
    files["three/engine.py"] = "def run():\n    frobnicate()\n"
    root = make_repo(tmp_path / "repo", files)
    paths = [str(root / "two")] + [str(root / "one" / f"f{i}.py") for i in range(MAX_PATH_ARGS + 5)]

    report = search(root, "frobnicate", paths=paths)

    assert result_paths(report) == ["two/engine.py"]


def test_a_file_name_that_many_paths_share_counts_less_than_a_rare_one(tmp_path: Path) -> None:
    query = "index.rst is rendered but the typehints are lost"
    code = {"src/typehints.py": "def record_typehints(app):\n    return app\n",
            "src/other.py": "def unrelated():\n    pass\n"}
    page = "Title\n=====\n\n.. toctree::\n"
    one = make_repo(tmp_path / "one", {**code, "pages/index.rst": page})
    many = make_repo(tmp_path / "many",
                     {**code, **{f"pages/p{i}/index.rst": page for i in range(12)}})

    # the lexical stage's path evidence, as the fixed factors order it (the learned ranker
    # weighs it with the rest: a doc page loses to source the query's words match)
    fixed = Settings(learned_order=False)
    assert result_paths(search(one, query, settings=fixed))[0] == "pages/index.rst"
    assert result_paths(search(many, query, settings=fixed))[0] == "src/typehints.py"


def test_a_file_named_once_in_the_repository_keeps_its_full_weight(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {f"pkg/mod{i}.py": f"X{i} = {i}\n" for i in range(12)}
    files["pkg/loader.py"] = "def load():\n    pass\n"
    files["pkg/records.py"] = "# the loader reads records\nLOADER = None\n"
    root = make_repo(tmp_path / "repo", files)

    report = search(root, 'File "pkg/loader.py", line 2, in load records')

    assert result_paths(report)[0] == "pkg/loader.py"


def test_a_changelog_ranks_below_other_docs_that_mention_the_same_words(tmp_path: Path) -> None:
    line = "retry backoff jitter for the http client\n"
    root = make_repo(tmp_path / "repo", {
        "CHANGES.rst": line * 3,
        "docs/http.rst": line,
        "src/colour.py": "RED = 1\n",
    })

    assert result_paths(search(root, "retry backoff jitter")) == ["docs/http.rst", "CHANGES.rst"]


def test_a_cjk_query_does_not_match_every_non_ascii_file_name(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"docs/数据.md": "无关的内容\n",
                                         "src/retry.py": "# 重试 策略\ndef retry():\n    pass\n"})
    assert result_paths(search(root, "重试"))[0] == "src/retry.py"


def test_k_above_fifty_is_honoured_not_silently_capped(tmp_path: Path) -> None:
    files = {f"pkg/mod{i:02d}.py": f"def handler{i}():\n    return 'retry'\n" for i in range(70)}
    root = make_repo(tmp_path / "repo", files)
    assert len(search(root, "retry", top_k=60).results) == 60
    assert len(search(root, "retry", top_k=80).results) == 70

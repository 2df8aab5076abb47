"""The learned ranker's features on generated repositories with known answers, the fit on
groups whose answer one feature gives away, and the order a model puts files in."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest

from slm_rerank.calibration.learning import Group, extract, fit
from slm_rerank.host import Host
from slm_rerank.lexical.chunking import Chunk
from slm_rerank.lexical.features import (
    FEATURES,
    Candidate,
    comment_share,
    digit_words,
    partner_name,
)
from slm_rerank.lexical.file_scores import file_bm25, score_files
from slm_rerank.lexical.history import read_history
from slm_rerank.lexical.ranker import RankerModel, place, reorder
from slm_rerank.lexical.scores import ScoredChunk, TermStats
from slm_rerank.lexical.terms import extract as extract_terms
from slm_rerank.registrations import SourceHits
from slm_rerank.testing.helpers import make_repo

APP = '''class Flask:
    """The app object. An app finds its templates in the templates folder next to the
    app's module; the app loads templates through a loader. Templates, templates.
    The app app app. More about the app and its templates here.
    Even more about the app, its loader, its templates and its folders.
    And the app's templates once more.
    """

    def run(self):
        return 1
'''
TEMPLATING = '''def render_template(name):
    loader = find_template(name)
    return loader.render()


def find_template(name):
    return open(name)
'''


@pytest.fixture(scope="module")
def host() -> Host:
    return Host.from_environment(start=Path("/"))


def values_by_path(tree: Path, query: str, host: Host, history: object = None
                   ) -> dict[str, dict[str, float]]:
    found = extract(query, tree, host, history=history)  # type: ignore[arg-type]
    return {p: dict(zip(FEATURES, v, strict=True)) for p, v in zip(found.paths, found.values,
                                                                    strict=True)}


def test_each_file_gets_the_features_its_evidence_gives(tmp_path: Path, host: Host) -> None:
    tree = make_repo(tmp_path / "repo", {
        "src/app.py": APP,
        "src/templating.py": TEMPLATING,
        "tests/test_templating.py": "def test_render_template():\n    assert True\n",
        "docs/templates.md": "# Templates\n\nThe app finds templates.\n",
    })
    got = values_by_path(tree, "how does the app find_template look up templates", host)
    assert set(got) == {"src/app.py", "src/templating.py", "tests/test_templating.py",
                        "docs/templates.md"}
    templating, app = got["src/templating.py"], got["src/app.py"]
    # "templates" shares its stem with templating.py's name; a symbol of the query is
    # defined in it
    assert templating["name_stem"] > 0 and app["name_stem"] == 0
    assert templating["name_token"] == templating["names_file"] == 0
    assert templating["declares"] > 0
    # app.py's best chunk is its class docstring: mostly comment text
    assert app["chunk_comment"] > 0.5
    assert templating["chunk_comment"] == 0
    # kinds
    assert got["tests/test_templating.py"]["kind_test"] == 1.0
    assert got["docs/templates.md"]["kind_doc"] == 1.0
    assert templating["kind_test"] == templating["kind_doc"] == 0.0
    assert got["tests/test_templating.py"]["test_like"] == 1.0
    assert templating["test_like"] == templating["vendored"] == 0.0
    # the lexical order's first file has share 1 and rank 0
    first = max(got.values(), key=lambda v: v["lexical"])
    assert first["lexical"] == 1.0 and first["lexical_rank"] == 0.0
    # no history was read: its features are 0
    assert all(v[name] == 0.0 for v in got.values() for name in ("changes", "recent",
                                                                 "together"))


def commit_to(tree: Path, message: str, *names: str, line: str | None = None) -> None:
    """Append ``line`` (the message by default) as a comment to each of ``names`` and commit
    them with ``message``."""
    for name in names:
        with open(tree / name, "a", encoding="utf-8") as handle:
            handle.write(f"# {message if line is None else line}\n")
    subprocess.run(["git", "-C", str(tree), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-qm", message], check=True)


def test_history_features_count_changes_and_changes_with_the_named_file(
        tmp_path: Path, host: Host) -> None:
    tree = make_repo(tmp_path / "repo", {"core.py": "def parse_value():\n    pass\n",
                                         "helper.py": "def parse_helper():\n    pass\n",
                                         "other.py": "def parse_other():\n    pass\n"})

    commit_to(tree, "start", "core.py", "helper.py", "other.py")
    commit_to(tree, "core and helper", "core.py", "helper.py")
    commit_to(tree, "core and helper again", "core.py", "helper.py")
    commit_to(tree, "other alone", "other.py")
    notes: list[str] = []
    history = read_history(tree, cache_dir=None, notes=notes)
    assert history is not None, notes
    got = values_by_path(tree, "parse in core.py", host, history)
    # helper.py changed with core.py (named by the query) in 3 commits, other.py in 1
    assert got["helper.py"]["together"] == pytest.approx(math.log1p(3))
    assert got["other.py"]["together"] == pytest.approx(math.log1p(1))
    assert got["core.py"]["changes"] == pytest.approx(math.log1p(3))
    # other.py changed in the newest commit, core.py one commit before it
    assert got["other.py"]["recent"] == 1.0
    assert got["core.py"]["recent"] == 0.5


def test_the_messages_feature_tells_apart_siblings_by_what_their_commits_said(
        tmp_path: Path, host: Host) -> None:
    """Two sibling files the query's words match alike; the commits that changed one of
    them said the query's words."""
    body = "def render(value):\n    return value\n"
    tree = make_repo(tmp_path / "repo", {"pkg/table.py": body, "pkg/grid.py": body})

    # the files' own lines say none of the query's words: only the messages do
    commit_to(tree, "Start", "pkg/table.py", "pkg/grid.py", line="edited")
    commit_to(tree, "Fix wrapping of long cells", "pkg/table.py", line="edited")
    commit_to(tree, "Cells wrap at the column width", "pkg/table.py", line="edited")
    commit_to(tree, "Tidy up", "pkg/grid.py", line="edited")
    notes: list[str] = []
    history = read_history(tree, cache_dir=None, notes=notes)
    assert history is not None, notes

    got = values_by_path(tree, "render wraps long cells wrongly", host, history)

    assert got["pkg/table.py"]["messages"] == 1.0  # the file they say most of
    assert got["pkg/grid.py"]["messages"] == 0.0
    # the lexical evidence alone cannot tell them apart
    assert got["pkg/table.py"]["mentions"] == got["pkg/grid.py"]["mentions"]
    # without a history, nothing is said
    bare = values_by_path(tree, "render wraps long cells wrongly", host, None)
    assert {v["messages"] for v in bare.values()} == {0.0}


def test_comment_share_counts_comment_lines_and_docstrings() -> None:
    text = 'def f():\n    """Doc\n    more doc\n    """\n    # note\n    return 1\n'
    assert comment_share(text, 1, 6) == pytest.approx(4 / 6)
    assert comment_share("x = 1\ny = 2\n", 1, 2) == 0.0
    assert comment_share("// a\n// b\n", 1, 2) == 1.0


def test_the_fit_learns_the_feature_that_gives_the_answer_away() -> None:
    """Gold files have a high ``declares`` and a low ``lexical``: a fit must learn to
    put ``declares`` first, against the lexical order."""
    lexical, declares = FEATURES_INDEX["lexical"], FEATURES_INDEX["declares"]
    groups = []
    for g in range(30):
        rows, gold = [], []
        for c in range(6):
            v = [0.0] * len(FEATURES)
            v[lexical] = 1.0 - c / 10
            v[declares] = 1.0 if c == (g % 5) + 1 else 0.0
            rows.append(tuple(v))
            gold.append(c == (g % 5) + 1)
        groups.append(Group(rows, gold))
    model = fit(groups, name="t", features=["lexical", "declares"])
    assert model.weights[1] > 0 and model.weights[1] > model.weights[0]
    for group in groups:
        best = max(range(len(group.values)), key=lambda i: model.score(group.values[i]))
        assert group.gold[best]
    # deterministic: the same groups give the same model
    assert fit(groups, name="t", features=["lexical", "declares"]) == model


FEATURES_INDEX = {name: i for i, name in enumerate(FEATURES)}


def chunk(path: str, start: int, score: float) -> ScoredChunk:
    return ScoredChunk(path, Chunk(start, start + 9), score, [])


def test_the_model_orders_files_and_a_files_chunks_keep_their_order() -> None:
    from slm_rerank.lexical.features import Candidate

    model = RankerModel("m", ("declares",), (0.0,), (1.0,), (2.0,))
    vector = [0.0] * len(FEATURES)
    low, high = list(vector), list(vector)
    high[FEATURES_INDEX["declares"]] = 1.0
    found = [Candidate("a.py", 0, tuple(low)), Candidate("b.py", 1, tuple(high))]
    placed = place(model, found)
    assert [p.path for p in placed] == ["b.py", "a.py"]
    assert sum(p.share for p in placed) == pytest.approx(1.0)
    # measured from the average candidate: b.py declares, a.py does not
    assert placed[0].why == (("declares", 1.0),)
    assert placed[1].why == (("declares", -1.0),)
    chunks = [chunk("a.py", 1, 9.0), chunk("b.py", 1, 5.0), chunk("a.py", 20, 4.0),
              chunk("b.py", 20, 2.5)]
    out = reorder(chunks, placed)
    assert [(c.path, c.chunk.start_line) for c in out] == [
        ("b.py", 1), ("b.py", 20), ("a.py", 1), ("a.py", 20)]
    # a file's chunks share its score in proportion to their lexical scores
    assert out[1].score == pytest.approx(out[0].score / 2)
    # the caller's lexical scores are left as they were
    assert chunks[0].score == 9.0


def test_reorder_keeps_every_field_of_a_chunk_but_its_score() -> None:
    import dataclasses

    # every field set to a value of its own, so one the copy forgets shows
    item = ScoredChunk("a.py", Chunk(3, 9, "A.f", ("f",)), 4.0, ["f", "a"], declares=1.5,
                       enclosing=0.5, mentions=0.25)
    assert all(getattr(item, f.name) != f.default for f in dataclasses.fields(ScoredChunk))
    placed = place(RankerModel("m", ("declares",), (0.0,), (1.0,), (2.0,)),
                   [Candidate("a.py", 0, tuple([0.0] * len(FEATURES)))])

    (out,) = reorder([item], placed)

    assert out == dataclasses.replace(item, score=out.score)
    assert out.score == pytest.approx(1.0)  # the only file: all of the share


def test_the_search_says_which_order_it_used(tmp_path: Path, host: Host) -> None:
    from slm_rerank.pipeline import SearchRequest, run_search

    tree = make_repo(tmp_path / "repo", {"src/app.py": APP, "src/templating.py": TEMPLATING})
    fixed = host.with_overrides("test", learned_order=False)
    report = run_search(SearchRequest("find_template", tree.resolve()), fixed)
    assert any(n.startswith("order: fixed") for n in report.notes)
    learned = run_search(SearchRequest("find_template", tree.resolve()), host)
    assert any(n.startswith("order: learned ranker") for n in learned.notes)
    assert learned.results[0].path == report.results[0].path == "src/templating.py"


def _small_definitions(count: int) -> str:
    return "".join(f"func step{i}() {{\n\tretryBackoff()\n}}\n\n" for i in range(count))


def test_whole_file_bm25_adds_up_a_file_made_of_many_small_definitions(
        tmp_path: Path, host: Host) -> None:
    # many.go says "retryBackoff" thirty times, once in each small function; one.go says it
    # twice in one function. No single chunk of many.go holds more than one mention.
    tree = make_repo(tmp_path / "repo", {
        "many.go": "package p\n\n" + _small_definitions(30),
        "one.go": "package p\n\nfunc once() {\n\tretryBackoff()\n\tretryBackoff()\n}\n",
        "none.go": "package p\n\nfunc other() {}\n",
    })
    got = values_by_path(tree, "retryBackoff waits too long", host)
    many, one = got["many.go"], got["one.go"]
    assert many["file_bm25"] == 1.0 and many["file_bm25_rank"] == 0.0
    assert 0.0 < one["file_bm25"] < 1.0
    assert one["file_bm25_rank"] == pytest.approx(math.log1p(1))


def test_file_bm25_saturates_with_counts_and_falls_with_length() -> None:
    rarity = {"retry": 2.0}
    three = file_bm25({"retry": 3}, rarity, 1.0)
    assert three == pytest.approx(2.0 * 3 * 2.5 / (3 + 1.5))
    assert file_bm25({"retry": 30}, rarity, 1.0) < 2.0 * 2.5  # bounded by idf * (k1 + 1)
    assert file_bm25({"retry": 3}, rarity, 4.0) < three  # a longer file, the same count
    # a literal that is not a body term of the query counts nothing
    assert file_bm25({"retry": 3, "other": 9}, rarity, 1.0) == three


@pytest.mark.parametrize(("path", "words"), [
    ("pkg/parser_v2.go", {"v2"}),
    ("src/NewParserV2.java", {"v2"}),
    ("lib/utf8.rs", {"utf8"}),
    ("http2/server.go", set()),  # a folder's words are the directory feature's
    ("parser.go", set()),
    ("2024_notes.py", set()),
])
def test_digit_words_are_the_words_of_a_file_name_with_letters_and_digits(
        path: str, words: set[str]) -> None:
    assert digit_words(path) == words


def test_a_query_naming_the_v2_of_a_file_marks_that_file(tmp_path: Path, host: Host) -> None:
    body = "package p\n\nfunc Parse(token string) string {\n\treturn token\n}\n"
    tree = make_repo(tmp_path / "repo", {"parser.go": body, "parser_v2.go": body})
    got = values_by_path(tree, "NewParserV2 drops the last token of Parse", host)
    assert got["parser_v2.go"]["digit_name"] == 1.0
    assert got["parser.go"]["digit_name"] == 0.0
    plain = values_by_path(tree, "the parser drops the last token of Parse", host)
    assert plain["parser_v2.go"]["digit_name"] == plain["parser.go"]["digit_name"] == 0.0


def test_benchmark_and_test_modules_in_a_java_src_tree_are_test_like(
        tmp_path: Path, host: Host) -> None:
    body = "class X {\n  void parseHeader() {}\n}\n"
    tree = make_repo(tmp_path / "repo", {
        "src/main/java/com/x/Headers.java": body,
        "src/jmh/java/com/x/Headers.java": body,
        "src/test/java/com/x/HeadersTest.java": body,
        "src/main/java/com/x/HeadersBenchmark.java": body,
    })
    got = values_by_path(tree, "parseHeader drops folded lines", host)
    assert got["src/main/java/com/x/Headers.java"]["test_like"] == 0.0
    for path in ("src/jmh/java/com/x/Headers.java", "src/test/java/com/x/HeadersTest.java",
                 "src/main/java/com/x/HeadersBenchmark.java"):
        assert got[path]["test_like"] == 1.0, path


def test_stubs_bundles_and_vendored_copies_are_marked_and_the_source_is_not(
        tmp_path: Path, host: Host) -> None:
    py = "def parse_header(line):\n    return line\n"
    js = "function parseHeader(line) {\n  return line\n}\n"
    tree = make_repo(tmp_path / "repo", {
        "src/attr/validators.py": py,
        "src/attr/validators.pyi": "def parse_header(line: str) -> str: ...\n",
        "src/pkg/_vendor/packaging/version.py": py,
        "index.d.ts": "export function parseHeader(line: string): string;\n",
        "source/index.js": js,
        "dist/index.js": js,
        "extras/catch_amalgamated.cpp": "int parse_header(int line) { return line; }\n",
        "single_include/json.hpp": "int parse_header(int line) { return line; }\n",
    })
    got = values_by_path(tree, "parse_header parseHeader drops folded lines", host)
    for path, stub, bundle, vendored in [
            ("src/attr/validators.py", 0, 0, 0), ("source/index.js", 0, 0, 0),
            ("src/attr/validators.pyi", 1, 0, 0), ("index.d.ts", 1, 0, 0),
            ("dist/index.js", 0, 1, 0), ("extras/catch_amalgamated.cpp", 0, 1, 0),
            ("single_include/json.hpp", 0, 1, 0),
            ("src/pkg/_vendor/packaging/version.py", 0, 0, 1)]:
        assert (got[path]["stub"], got[path]["bundle"], got[path]["vendored"]) == (
            stub, bundle, vendored), path


def test_the_search_sums_the_whole_file_bm25_file_bm25_defines() -> None:
    terms = extract_terms("retryBackoff waits for the timeout of the retry")
    first, second = terms.literals()[:2]
    counts = {"a.go": {first: 3, second: 1}, "b.go": {second: 4}}
    hits = SourceHits(files=["a.go", "b.go", "c.go"], body_counts=counts)
    stats = TermStats.from_hits(terms, hits)
    evidence = {e.path: e for e in score_files(terms, hits, stats, {"a.go": 100, "b.go": 300})}
    for path, ratio in (("a.go", 0.5), ("b.go", 1.5)):
        assert evidence[path].parts["file_bm25"] == pytest.approx(
            file_bm25(counts[path], stats.rarity, ratio))
    assert evidence["a.go"].parts["file_bm25"] > 0 and "c.go" not in evidence


@pytest.mark.parametrize(("path", "is_test", "name"), [
    ("tests/test_parser.py", True, "parser"),
    ("pkg/parser_test.go", True, "parser"),
    ("src/test/java/org/x/ParserTest.java", True, "parser"),
    ("src/test/java/org/x/ParserTests.java", True, "parser"),
    ("test/parser.test.js", True, "parser"),
    ("test/parser.spec.ts", True, "parser"),
    ("src/test/java/org/x/TestParser.java", True, "parser"),
    ("tests/test_latest.py", True, "latest"),  # a test mark inside a word stays
    ("tests/test_contest.py", True, "contest"),
    ("pkg/latest_test.go", True, "latest"),
    ("tests/parser.rs", True, "parser"),
    ("src/parser.py", False, "parser"),
    ("src/Parser.java", False, "parser"),
    ("src/test_parser.py", False, "test_parser"),  # a source file keeps its whole name
    ("tests/conftest.py", True, ""),  # too generic to name one source file
    ("src/__init__.py", False, ""),
    ("tests/test_io.py", True, ""),  # too short
])
def test_a_test_file_and_the_source_file_it_tests_share_a_partner_name(
        path: str, is_test: bool, name: str) -> None:
    assert partner_name(path, is_test) == name


PARSER = '''def parse_header(line):
    """Read one header line of the record."""
    return line.split(":")
'''
LEXER = '''def lex_header(line):
    """Split one header line of the record into tokens."""
    return line.split(":")
'''
TEST_PARSER = '''from src.parser import parse_header


def test_folded_header_line_keeps_its_continuation():
    record = "Subject: folded header line\\n continuation of the folded header line"
    assert parse_header(record) == ["Subject", " folded header line"]
'''


def test_the_test_file_that_matches_the_query_points_at_the_source_file_it_tests(
        tmp_path: Path, host: Host) -> None:
    tree = make_repo(tmp_path / "repo", {
        "src/parser.py": PARSER,
        "src/lexer.py": LEXER,
        "tests/test_parser.py": TEST_PARSER,
    })
    got = values_by_path(tree, "folded header line loses its continuation line", host)
    assert got["src/parser.py"]["test_partner_top"] == 1.0
    assert got["src/parser.py"]["test_partner"] == pytest.approx(
        got["tests/test_parser.py"]["lexical"])
    assert got["src/parser.py"]["test_partner"] > 0
    # the sibling no test file is named for, and the test file itself, get nothing
    for path in ("src/lexer.py", "tests/test_parser.py"):
        assert got[path]["test_partner"] == 0.0
        assert got[path]["test_partner_top"] == 0.0

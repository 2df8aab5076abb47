"""Query text to weighted terms: stemming beside the root, stop words, strong code terms."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from search_fixtures import linear_growth, make_repo, result_paths, search

from slm_rerank.lexical.terms import (
    _FILE,
    MAX_TERM_CHARS,
    extract,
    file_names,
    light,
    split_identifier,
)

BUG_REPORT = """\
Saving a document crashes with a ValueError

When the cache is full, saving sometimes fails and the program stops working:

Traceback (most recent call last):
  File "app/store/writer.py", line 12, in flush_pending
    self._write(batch)
ValueError: buffer overflow

I think the parse_header helper in config.loader is involved.
"""



def weights(query: str) -> dict[str, float]:
    return {t.root: t.weight for t in extract(query).terms}


def test_stop_words_are_dropped() -> None:
    terms = extract("where are the retries for this client")

    assert [t.root for t in terms.terms] == ["retries", "client"]


def test_a_query_of_only_stop_words_has_no_terms() -> None:
    assert extract("what is the and of it").terms == []
    assert extract("   ").terms == []


def test_a_stemmed_term_keeps_its_root_beside_the_stem() -> None:
    (term,) = extract("migration").terms

    assert term.root == "migration"
    assert term.stem == "migrat"
    # The body search uses the stem, so both the noun and the verb are found.
    assert "def migrate(apps):".startswith("def " + term.literal)
    assert term.literal in "migration"


def test_a_plural_is_searched_by_its_singular() -> None:
    (term,) = extract("classes").terms

    assert (term.root, term.light, term.literal) == ("classes", "class", "class")


def test_light_strips_plurals_only() -> None:
    assert light("classes") == "class"
    assert light("migrations") == "migration"
    assert light("policies") == "policy"
    assert light("shared") == "shared"
    assert light("status") == "status"


def test_identifiers_split_on_camel_case_snake_case_and_dots() -> None:
    assert split_identifier("HttpClient") == ["http", "client"]
    assert split_identifier("http_client") == ["http", "client"]
    assert split_identifier("XMLParser.parse_v2") == ["xml", "parser", "parse", "v", "2"]


def test_a_traceback_frame_function_outranks_every_prose_word() -> None:
    w = weights(BUG_REPORT)

    prose = [w[word] for word in ("saving", "crashes", "cache", "document", "program")]
    assert w["flush_pending"] > max(prose)


def test_identifiers_file_names_and_dotted_paths_are_strong_terms() -> None:
    terms = {t.root: t for t in extract(BUG_REPORT).terms}

    for word in ("flush_pending", "parse_header", "writer", "config", "loader", "valueerror"):
        assert terms[word].strong, word
    for word in ("saving", "cache", "document"):
        assert not terms[word].strong, word
    assert terms["parse_header"].weight > terms["cache"].weight
    assert terms["loader"].weight > terms["document"].weight


def test_file_names_and_traceback_files_are_kept_as_paths() -> None:
    terms = extract('see utils/retry.py and File "pkg/core.py", line 3, in run')

    assert terms.paths == ["pkg/core.py", "utils/retry.py"]
    assert {"retry", "core", "run"} <= {t.root for t in terms.terms}


def test_a_query_about_tests_or_docs_is_recognised_from_its_first_line() -> None:
    assert extract("tests for the retry policy").about_tests
    assert extract("typo in the README").about_docs
    assert not extract("retry policy backoff").about_tests
    assert not extract("retry policy backoff").about_docs


@pytest.mark.parametrize(("query", "tests", "docs"), [
    ("tests for the retry policy", True, False),
    ("where are the unit tests of the parser", True, False),
    ("add a test for the retry policy", True, False),
    ("retry backoff tests", True, False),
    ("test retry backoff", True, False),
    ("what tests cover the retry policy", True, False),
    ("retry backoff test cases", True, False),
    ("testcases for the retry policy", True, False),
    ("pytest fixtures for the database", True, False),
    ("conftest for the database", True, False),
    ("typo in the README", False, True),
    ("docs for the parser", False, True),
    # reports that name tests or docs ask for the code at fault
    ("unittest.TestCase.tearDown executed on skipped tests when running --pdb", False, False),
    ("docstring default arg is broken", False, False),
    ("Render error when combining multiple input parameters in docstring", False, False),
    ("the headline shown of the test report drops a bracket", False, False),
    # a sentence that ends in "test" is no keyword query
    ("caplog fixture doesn't restore log level after test", False, False),
    ("what happens when the tests run twice", False, False),
    ("fixture 'tmp_path' not found when the test is a method", False, False),
])
def test_a_query_asks_for_tests_or_docs_only_when_its_first_line_asks_for_them(
        query: str, tests: bool, docs: bool) -> None:
    terms = extract(query + "\n\nand the tests for it, see the docs")
    assert (terms.asks_tests, terms.asks_docs) == (tests, docs)


def test_the_term_cap_keeps_the_strongest_terms() -> None:
    prose = " ".join(f"word{chr(97 + i)}{chr(97 + j)}" for i in range(8) for j in range(8))
    terms = extract(f"{prose} flush_pending()", max_terms=5)

    assert len(terms.terms) == 5
    assert terms.terms[0].root == "flush_pending"


def test_code_words_that_people_ask_about_are_not_stop_words() -> None:
    roots = {t.root for t in extract("where are imports resolved when None is returned").terms}
    assert {"imports", "none", "returned"} <= roots
    assert [t.root for t in extract("hello").terms] == ["hello"]


# --- ASCII queries: the terms they always gave ------------------------------------------

#: Long ASCII queries and the terms ``extract`` gave for them before words in other scripts
#: were read (computed with that code, pasted here): reading CJK, Cyrillic or emoji must
#: not move a single ASCII term, weight or literal.
ASCII_QUERIES = [
    # a bug report with a traceback, dotted names, backticks and file names
    'Saving crashes with `ValueError` in FlushPending\n\nTraceback (most recent call last):\n'
    '  File "app/store/writer.py", line 12, in flush_pending\n    self._write(batch)\n'
    'ValueError: buffer overflow\n\nI think parse_header in config.loader (see utils/retry.py '
    'and docs/setup.md) calls HTTPClient.get_v2() twice; migrations and policies are involved.',
    # prose, plurals and stems, with a stray digit and punctuation
    "Where are the retries configured? The configuration of exponential backoffs, "
    "jitter & timeouts (v2.3.1) is duplicated across 3 modules -- classes, migrations, "
    "running handlers; it's confusing!",
    # tests and docs words on the first line, camelCase and SCREAMING_CASE
    "tests for the README typo: getUserById returns None when MAX_RETRY_COUNT is 0\n"
    "XMLParser.parse_v2 and __init__ should be documented in CHANGELOG.rst",
]
ASCII_TERMS_BEFORE = [
    (
        [
         ('valueerror', 4.772589, True, 'valueerror'),
         ('flush_pending', 4.505526, True, 'flush_pending'),
         ('retry', 4.197225, True, 'retry'), ('setup', 4.197225, True, 'setup'),
         ('write', 4.197225, True, 'write'), ('get_v2', 3.832581, True, 'get_v2'),
         ('httpclient', 3.386294, True, 'httpclient'), ('config', 3.386294, True, 'config'),
         ('loader', 3.386294, True, 'loader'), ('writer', 3.386294, True, 'writer'),
         ('flushpending', 2.81093, True, 'flushpending'),
         ('parse_header', 2.81093, True, 'parse_header'),
         ('migrations', 1.0, False, 'migrat'), ('involved', 1.0, False, 'involv'),
         ('overflow', 1.0, False, 'overflow'), ('policies', 1.0, False, 'poli'),
         ('crashes', 1.0, False, 'crash'), ('pending', 1.0, False, 'pend'),
         ('buffer', 1.0, False, 'buff'), ('saving', 1.0, False, 'saving'),
         ('batch', 1.0, False, 'batch'), ('calls', 1.0, False, 'call'),
         ('error', 1.0, False, 'error'), ('flush', 1.0, False, 'flush'),
         ('twice', 1.0, False, 'twic'), ('utils', 1.0, False, 'util'),
         ('value', 1.0, False, 'valu'), ('docs', 1.0, False, 'docs'),
         ('header', 0.306853, False, 'head'), ('parse', 0.306853, False, 'pars'),
        ],
        ['app/store/writer.py', 'utils/retry.py', 'docs/setup.md'], False, False,
    ),
    (
        [
         ('v2', 2.81093, True, 'v2'), ('configuration', 1.0, False, 'configurat'),
         ('exponential', 1.0, False, 'exponential'), ('configured', 1.0, False, 'configur'),
         ('duplicated', 1.0, False, 'duplicat'), ('migrations', 1.0, False, 'migrat'),
         ('confusing', 1.0, False, 'confus'), ('backoffs', 1.0, False, 'backoff'),
         ('handlers', 1.0, False, 'handl'), ('timeouts', 1.0, False, 'timeout'),
         ('classes', 1.0, False, 'class'), ('modules', 1.0, False, 'modul'),
         ('retries', 1.0, False, 'retries'), ('running', 1.0, False, 'runn'),
         ('across', 1.0, False, 'acros'), ('jitter', 1.0, False, 'jitt'),
        ],
        [], False, False,
    ),
    (
        [
         ('changelog', 4.197225, True, 'changelog'), ('parse_v2', 3.832581, True, 'parse_v2'),
         ('xmlparser', 3.386294, True, 'xmlparser'),
         ('max_retry_count', 2.81093, True, 'max_retry_count'),
         ('getuserbyid', 2.81093, True, 'getuserbyid'),
         ('documented', 1.0, False, 'document'), ('returns', 1.0, False, 'return'),
         ('readme', 1.0, False, 'readm'), ('tests', 1.0, False, 'test'),
         ('init', 1.0, False, 'init'), ('none', 1.0, False, 'none'),
         ('typo', 1.0, False, 'typo'), ('rst', 1.0, False, 'rst'),
         ('count', 0.306853, False, 'count'), ('parse', 0.306853, False, 'pars'),
         ('retry', 0.306853, False, 'retry'), ('user', 0.306853, False, 'user'),
         ('max', 0.306853, False, 'max'),
        ],
        ['CHANGELOG.rst'], True, True,
    ),
]


@pytest.mark.parametrize("query, expected",
                         list(zip(ASCII_QUERIES, ASCII_TERMS_BEFORE, strict=True)))
def test_an_ascii_query_gives_exactly_the_terms_it_gave_before_other_scripts_were_read(
        query: str, expected: tuple[list[tuple[str, float, bool, str]], list[str], bool, bool]
) -> None:
    terms = extract(query)

    got = [(t.root, round(t.weight, 6), t.strong, t.literal) for t in terms.terms]
    assert (got, terms.paths, terms.about_tests, terms.about_docs) == expected


# --- words in other scripts -------------------------------------------------------------


def test_a_chinese_word_is_a_term_searched_in_file_bodies() -> None:
    terms = extract("重试")

    assert terms.literals() == ["重试"]


def test_a_single_cjk_character_is_searched_in_file_bodies() -> None:
    assert extract("锁").literals() == ["锁"]


def test_a_long_cjk_run_gives_the_run_and_its_bigrams_at_lower_weight() -> None:
    w = weights("重试逻辑在哪里")

    assert set(w) == {"重试逻辑在哪里", "重试", "试逻", "逻辑", "辑在", "在哪", "哪里"}
    assert w["重试逻辑在哪里"] > w["重试"]


def test_japanese_and_korean_runs_are_terms() -> None:
    assert {"リトライ処理", "処理"} <= set(weights("リトライ処理"))
    assert {"재시도", "로직"} <= set(weights("재시도 로직"))


def test_cjk_mixed_with_latin_words_keeps_both() -> None:
    roots = {t.root for t in extract("where is the retry重试 backoff").terms}

    assert roots == {"retry", "重试", "backoff"}


def test_accented_cyrillic_and_greek_words_are_whole_terms() -> None:
    roots = {t.root for t in extract("Café configuración повторов επανάληψη").terms}

    assert roots == {"café", "configuración", "повторов", "επανάληψη"}


def test_an_accented_word_is_not_cut_into_ascii_fragments() -> None:
    roots = {t.root for t in extract("naïve résumé").terms}

    assert roots == {"naïve", "résumé"}


def test_a_decomposed_accent_is_read_like_a_composed_one() -> None:
    decomposed = "cafe\u0301"

    assert [t.root for t in extract(decomposed).terms] == ["café"]


def test_emoji_are_kept_as_terms_below_the_words_typed() -> None:
    w = weights("the ✅ and 👍🏽 and ❤️ in retry")

    assert set(w) == {"retry", "✅", "👍🏽", "❤"}  # the variation selector of ❤️ is dropped
    assert w["✅"] < w["retry"]


def test_other_symbols_are_dropped_like_punctuation() -> None:
    assert extract("→ © ±").terms == []


def test_a_query_in_chinese_finds_the_file_that_holds_its_words(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {
        "docs/重试.md": "# 重试\n\n失败后的重试逻辑在 client.py 中。\n",
        "docs/other.md": "# 其他\n\n无关的内容。\n",
    })

    report = search(root, "重试逻辑在哪里")

    assert result_paths(report)[0] == "docs/重试.md"


@pytest.mark.parametrize(("query", "present", "absent"), [
    ("expand 3⋅sin(x) and 2⋅cos(x)", {"sin", "cos", "expand"}, {"3⋅sin", "2⋅cos"}),
    ("run\u00a0pytest on l’écran", {"pytest", "écran"}, {"run\u00a0pytest", "l’écran"}),
    ("❯ pytest -x fails", {"pytest", "fails"}, {"❯"}),
    ("the 🐛 in retry", {"🐛", "retry"}, set()),
])
def test_symbols_and_prompt_characters_separate_words_like_punctuation(
        query: str, present: set[str], absent: set[str]) -> None:
    roots = {t.root for t in extract(query).terms}
    assert present <= roots, roots
    assert not absent & roots, roots


# --- long queries: time linear in the query -----------------------------------------------

#: Shapes of text that made term extraction quadratic (each regex tried from every
#: character rescanned the rest of the run): a long word, a pasted hex dump, punctuation
#: between letters (paths, dotted names), identifiers glued together, and a long ASCII run
#: in a query that also holds a non-ASCII word.
LONG_SHAPES = {
    "one word": "a",
    "hex dump": "deadbeef0123456789abcdef",
    "dots": "a.",
    "slashes": "a/",
    "dashes": "x-",
    "file names": "x.py-",
    "folders and files": "src/a.py.d/",
    "CamelCase": "FooBarBaz",
    "snake_case": "foo_bar_",
    "capitals": "A",
    "accent then a run": "a",
}


def _query_of(shape: str, chars: int) -> str:
    unit = LONG_SHAPES[shape]
    text = (unit * (chars // len(unit) + 1))[:chars]
    return "é " + text if shape == "accent then a run" else text


@pytest.mark.parametrize("shape", list(LONG_SHAPES))
def test_term_extraction_time_grows_linearly_with_the_query(shape: str) -> None:
    small, large = _query_of(shape, 4000), _query_of(shape, 32000)

    ratio = linear_growth(extract, small, large)

    assert ratio < 20, f"{shape}: 8x the characters took {ratio:.0f}x the time"


def test_file_names_are_what_the_file_name_pattern_finds_from_every_position() -> None:
    # The pattern, too slow on long text, still defines which file names a query holds.
    pieces = ["a", "b1", "_", "-", ".", "/", "//", " ", "é", "py", "pyx", "c", "cpp", "md",
              ".py", ".txt", "x", "(", '"', "File ", "中文"]
    rng = random.Random(15)
    for _ in range(20000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 16)))

        assert file_names(text) == _FILE.findall(text), text


@pytest.mark.parametrize(("text", "names"), [
    ("see utils/retry.py and pkg/core.py", ["utils/retry.py", "pkg/core.py"]),
    ("foo.bar.py", ["bar.py"]),
    ("a.b/c.py.d/e.md", ["a.b/c.py.d/e.md"]),
    ("a.py-b.py", ["a.py", "-b.py"]),
    ("x//y.py", ["y.py"]),
    ("/abs/path/mod.pyx:3", ["abs/path/mod.pyx"]),
    ("a.pyc b.py", ["b.py"]),
])
def test_file_names_in_a_query(text: str, names: list[str]) -> None:
    assert file_names(text) == names


def test_a_word_longer_than_a_file_name_is_not_a_search_term() -> None:
    # a hex dump or base64 blob: each term is one rg/git argument, refused beyond 128 KiB
    blob = "deadbeef" * 40_000
    glued = "FooBar" * 100

    terms = extract(f"retry {blob} {glued}")

    assert "retry" in {t.root for t in terms.terms}
    assert all(len(t.root) <= MAX_TERM_CHARS for t in terms.terms)
    assert {"foo", "bar"} <= {t.root for t in terms.terms}  # the parts of a long name stay

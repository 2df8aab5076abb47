"""Query text to weighted terms: stemming beside the root, stop words, strong code terms."""

from __future__ import annotations

from slm_rerank.terms import extract, light, split_identifier

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


def test_the_term_cap_keeps_the_strongest_terms() -> None:
    prose = " ".join(f"word{chr(97 + i)}{chr(97 + j)}" for i in range(8) for j in range(8))
    terms = extract(f"{prose} flush_pending()", max_terms=5)

    assert len(terms.terms) == 5
    assert terms.terms[0].root == "flush_pending"


def test_code_words_that_people_ask_about_are_not_stop_words() -> None:
    roots = {t.root for t in extract("where are imports resolved when None is returned").terms}
    assert {"imports", "none", "returned"} <= roots
    assert [t.root for t in extract("hello").terms] == ["hello"]

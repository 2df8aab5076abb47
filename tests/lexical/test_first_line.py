"""The query's first line searched alone (``lexical/first_line.py``) and the features the
learned ranker reads of it, on generated repositories with known answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from search_fixtures import result_paths, search

from slm_rerank.calibration.learning import extract
from slm_rerank.config import Settings
from slm_rerank.host import Host
from slm_rerank.lexical import ordering, rank
from slm_rerank.lexical.features import FEATURES
from slm_rerank.lexical.ranker import Chosen, RankerModel
from slm_rerank.lexical.terms import FIRST_LINE_CHARS, first_line
from slm_rerank.pipeline import query_terms
from slm_rerank.testing.helpers import make_repo

#: a module whose body says the issue's body words over and over
SESSION = '''class Session:
    """A session sends requests over a pool of connections. The session keeps the pool,
    the adapter, the retries and the timeout of each connection; every request goes
    through the pool, the adapter and the retries. Connection, pool, adapter, retries.
    """

    def send(self, request):
        return self.adapter.send(request, timeout=self.timeout, retries=self.retries)
'''
#: the module the issue's first line names
COOKIES = '''def merge_cookies(jar, cookies):
    """Merge cookies into the cookie jar; a cookie with an expired date is dropped."""
    for cookie in cookies:
        jar.set_cookie(cookie)
    return jar
'''
ISSUE = """Expired cookie jar keeps merged cookies

Using a session with a pool of connections, an adapter and retries, every request over
the pool keeps the connection's retries and the adapter's timeout; the session's pool,
adapter, connection and retries all look right, yet the response is wrong.
"""


@pytest.fixture(scope="module")
def host() -> Host:
    return Host.from_environment(start=Path("/"))


def named(tree: Path, query: str, host: Host) -> dict[str, dict[str, float]]:
    found = extract(query, tree, host)
    return {p: dict(zip(FEATURES, v, strict=True)) for p, v in zip(found.paths, found.values,
                                                                    strict=True)}


@pytest.mark.parametrize(("query", "line"), [
    ("one line only", None),
    ("  one line, spaces around  \n\n  ", None),
    ("Title\nbody", "Title"),
    ("\n\n  Title after blank lines  \nbody\nmore", "Title after blank lines"),
    ("Title, CRLF\r\nbody\r\n", "Title, CRLF"),
    ("Title, CR\rbody", "Title, CR"),  # a line ends where str.splitlines ends it
    ("Title\u2028body", "Title"),
    ("x" * (FIRST_LINE_CHARS + 500) + "\nbody", "x" * FIRST_LINE_CHARS),
])
def test_the_first_line_is_taken_only_when_more_text_follows_it(query: str,
                                                                 line: str | None) -> None:
    assert first_line(query) == line


def test_the_first_line_alone_ranks_the_file_it_names_first(tmp_path: Path, host: Host
                                                            ) -> None:
    tree = make_repo(tmp_path / "repo", {"src/session.py": SESSION, "src/cookies.py": COOKIES})
    got = named(tree, ISSUE, host)
    # the whole issue's words favour the session module ...
    assert got["src/session.py"]["lexical"] == 1.0
    assert got["src/cookies.py"]["lexical"] < 1.0
    # ... its first line alone the cookies module, which the features say
    assert got["src/cookies.py"]["first_line_top"] == 1.0
    assert got["src/cookies.py"]["first_line"] == 1.0
    assert got["src/session.py"]["first_line_top"] == 0.0
    assert got["src/session.py"]["first_line"] < 1.0


def test_a_one_line_query_is_its_own_first_line(tmp_path: Path, host: Host) -> None:
    tree = make_repo(tmp_path / "repo", {"src/session.py": SESSION, "src/cookies.py": COOKIES})
    got = named(tree, "expired cookie jar keeps merged cookies", host)
    for values in got.values():
        assert values["first_line"] == values["lexical"]
    assert [p for p, v in got.items() if v["first_line_top"]] == ["src/cookies.py"]


def test_a_first_line_with_no_searchable_word_gives_nothing(tmp_path: Path, host: Host
                                                             ) -> None:
    tree = make_repo(tmp_path / "repo", {"src/session.py": SESSION, "src/cookies.py": COOKIES})
    got = named(tree, "!!! ???\n" + ISSUE, host)
    assert got  # the body still finds the files
    assert all(v["first_line"] == 0.0 and v["first_line_top"] == 0.0 for v in got.values())


def test_the_first_line_reads_no_file_the_whole_query_did_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The view ranks only the files the whole query chunked: a file whose body only the
    first line's words match is never read for it."""
    # 60 identifiers: the whole query keeps its 40 strongest, and the first line's plain
    # word "expired" is not among them
    words = [f"alpha_{n}_beta" for n in range(60)]
    tree = make_repo(tmp_path / "repo", {
        "src/noise.py": "\n".join(f"{w} = 1" for w in words) + "\n",
        "src/expiry.py": "def check(entry):\n    return entry.expired\n",
    })
    query = "expired entries\n" + " ".join(words)
    assert "expir" not in query_terms(query).literals()
    read: list[str] = []
    real = rank.read_candidate

    def spy(root: Path, rel: str, limit: int) -> object:
        read.append(rel)
        return real(root, rel, limit)

    monkeypatch.setattr(rank, "read_candidate", spy)
    model = RankerModel("first-line-test", ("lexical", "first_line"), (0.0, 0.0), (1.0, 1.0),
                        (1.0, 3.0))
    monkeypatch.setattr(ordering, "choose_model",
                        lambda root, cache: Chosen(model, "order: learned ranker"))
    learned = search(tree, query)
    with_view = sorted(read)
    read.clear()
    fixed = search(tree, query, settings=Settings(learned_order=False))

    assert with_view == sorted(read) == ["src/noise.py"]
    assert result_paths(learned) == result_paths(fixed) == ["src/noise.py"]


def test_a_search_orders_by_the_first_line_when_its_model_weighs_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every caller's search goes through ``ordering.learn_order``: a model that weighs the
    first line alone puts the file it names first, and says why."""
    tree = make_repo(tmp_path / "repo", {"src/session.py": SESSION, "src/cookies.py": COOKIES})
    names = ("lexical", "first_line_top")
    model = RankerModel("first-line-test", names, (0.0, 0.0), (1.0, 1.0), (1.0, 3.0))
    chosen = Chosen(model, "order: learned ranker 'first-line-test'")
    monkeypatch.setattr(ordering, "choose_model", lambda root, cache: chosen)

    fixed = search(tree, ISSUE, settings=Settings(learned_order=False))
    learned = search(tree, ISSUE)
    one_line = search(tree, "session pool adapter retries connection")

    assert result_paths(fixed)[0] == "src/session.py"
    assert result_paths(learned)[0] == "src/cookies.py"
    why = learned.results[0].why
    assert why is not None and why[0].says == "first for the query's first line alone"
    # a one-line query is its own first line: the lexical order's first stays first
    assert result_paths(one_line)[0] == "src/session.py"


def test_files_tied_first_are_all_first(tmp_path: Path, host: Host) -> None:
    """Tied files share a rank: none of them is first by its path alone."""
    body = "def fetch_client():\n    return 1\n"
    tree = make_repo(tmp_path / "repo", {"src/a_client.py": body, "src/b_client.py": body,
                                         "tests/test_a_client.py": body,
                                         "tests/test_b_client.py": body})
    for query in ("fetch client", "fetch client\nthe client fetches nothing"):
        got = named(tree, query, host)
        assert got["src/a_client.py"]["lexical"] == got["src/b_client.py"]["lexical"]
        for path in ("src/a_client.py", "src/b_client.py"):
            assert got[path]["first_line_top"] == 1.0, (query, path)
            assert got[path]["test_partner_top"] == 1.0, (query, path)

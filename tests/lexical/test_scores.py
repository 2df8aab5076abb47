"""The lexical scores, computed with less work per file and chunk, are the same numbers:
counts per chunk from one scan of the file, a path's kind from one split."""

from __future__ import annotations

import gc
import math
import random
import tracemalloc
from pathlib import Path

import pytest

from slm_rerank.lexical import chunking, file_scores, filetypes
from slm_rerank.lexical.chunk_cache import ChunkCache
from slm_rerank.lexical.chunk_counts import LoweredText, counts_per_chunk
from slm_rerank.lexical.chunking import Chunk, split_lines
from slm_rerank.lexical.file_scores import score_files
from slm_rerank.lexical.filetypes import (
    is_changelog_path,
    is_doc_path,
    is_source_path,
    is_test_path,
    path_kind,
)
from slm_rerank.lexical.rank import lexical_order
from slm_rerank.lexical.ranker import by_score_first
from slm_rerank.lexical.scores import ScoredChunk, TermStats
from slm_rerank.lexical.terms import extract
from slm_rerank.registrations import SourceHits

WORDS = ["retry", "aba", "abab", "ab", "x", "réessai", "重试", "🔁", "That", "thathat", " "]
BREAKS = ["\n", "\r\n", "\r", "\x85", "\u2028", "\x0c", "\x1e"]


def random_text(rng: random.Random) -> str:
    return "".join(rng.choice(WORDS) + (rng.choice(BREAKS) if rng.random() < 0.3 else "")
                   for _ in range(rng.randrange(0, 200)))


@pytest.mark.parametrize("seed", range(40))
def test_counts_per_chunk_are_what_str_count_finds_in_each_chunks_slice(seed: int) -> None:
    rng = random.Random(seed)
    lowered = LoweredText.of(random_text(rng))
    lines = lowered.line_count
    last = len(lowered.offsets) - 1
    bounds = []
    for _ in range(30):  # overlapping, nested, empty and out-of-range chunks alike
        start = rng.randrange(1, lines + 3)
        bounds.append((start, rng.randrange(start, lines + 4)))
    starts = [lowered.offsets[min(s - 1, last)] for s, _ in bounds]
    ends = [lowered.offsets[min(e, last)] for _, e in bounds]
    for literal in ["retry", "aba", "abab", "thathat", "that", "réessai", "重试", "🔁", "zzz",
                    "y\nr", "y\r\nr", "aba\x85"]:
        expected = [lowered.text[s:e].count(literal) for s, e in zip(starts, ends, strict=True)]
        assert counts_per_chunk(literal, lowered.text, starts, ends) == expected, literal


def test_the_lowered_texts_line_count_is_the_texts() -> None:
    for text in ["", "a", "a\n", "a\r\nb\rc\x85d\u2028e", "İstanbul\nΣΑΣ\n"]:
        assert LoweredText.of(text).line_count == len(split_lines(text))


@pytest.mark.parametrize("path", [
    "src/app.py", "tests/test_app.py", "src/app_test.go", "docs/index.rst", "CHANGES.rst",
    "docs/changelog.md", "requirements-dev.txt", "CMakeLists.txt", "static/jquery-3.5.1.js",
    "setup.cfg", "examples/demo.py", "pkg/conftest.py", "README", "Makefile",
    # a folder's kind is worked out once per folder (issue 30): folders and names mixed
    "docs/requirements.txt", "doc/CMakeLists.txt", "Tests/Docs/x.py", "examples/tests/x.md",
    "a/b/Spec/c.rb", "docs/src/x.py", "docs/CHANGES.txt", "test/.hidden", ".github/x.yml",
    "docs/jquery-3.5.1.js", "Documentation/api/x.c", "testing", "doc/test_x.py", "x/y.z/w",
])
def test_a_paths_kind_is_the_first_test_that_holds(path: str) -> None:
    expected = ("test" if is_test_path(path) else "changelog" if is_changelog_path(path)
                else "doc" if is_doc_path(path) else "source" if is_source_path(path)
                else "other")
    assert path_kind(path) == expected


def test_a_paths_kind_is_remembered_by_name_and_folder_not_by_path() -> None:
    # a pure function of the path string: asked again (the next query of a warm process),
    # the same answer from memory, kept by name and by folder, so that a tree of many
    # folders holding the same names keeps an entry a name, not one a path (issue 30), and
    # the memory is bounded
    filetypes._name_kind.cache_clear()
    filetypes._folder_kinds.cache_clear()
    paths = [f"copy{i}/{sub}/{name}" for i in range(40) for sub in ("src", "tests", "docs")
             for name in ("app.py", "test_app.py", "x.md", "requirements.txt")]
    first = [path_kind(p) for p in paths]
    assert first[:12] == ["source", "test", "doc", "other", "test", "test", "test", "test",
                          "doc", "test", "doc", "other"]
    assert [path_kind(p) for p in paths] == first
    names, folders = filetypes._name_kind.cache_info(), filetypes._folder_kinds.cache_info()
    assert (names.currsize, names.misses) == (4, 4)  # a tests folder decides alone
    assert folders.currsize == 120
    assert names.maxsize is not None and names.maxsize <= 1 << 16
    assert folders.maxsize is not None and folders.maxsize <= 1 << 16


def test_path_evidence_is_remembered_by_name_and_folder_not_by_path() -> None:
    # what the query's terms are matched against in a path: its name's key and tokens
    # (by name) and its folders' tokens (by folder); ten copies of sympy kept every path
    # and its parts from query to query when they were remembered by path (issue 30)
    file_scores._name_parts.cache_clear()
    paths = [f"copy{i}/pkg/{name}" for i in range(30) for name in ("app.py", "cli.py")]
    hits = SourceHits(files=paths, body_counts={})
    terms = extract("app")
    evidence = score_files(terms, hits, TermStats.from_hits(terms, hits))
    assert sorted(e.path for e in evidence) == sorted(p for p in paths if p.endswith("app.py"))
    assert all(e.path_terms == ["app"] for e in evidence)
    assert file_scores._name_parts.cache_info().currsize == 2


def test_what_a_process_keeps_of_a_folder_is_a_few_hundred_bytes() -> None:
    # a folder's tokens as a tuple, and its kinds as one of four tuples kept once (about
    # 400 bytes a folder here, with the caches' own entries): a frozenset and a new pair
    # took 840 (4,200 folders for ten copies of sympy, kept from query to query; issue 30)
    paths = [f"pkg{i}/sub_module{i % 7}/tests/check_{i % 13}.py" for i in range(4000)]
    for cache in (file_scores._folder_tokens, file_scores._name_parts, filetypes._folder_kinds,
                  filetypes._name_kind):
        cache.cache_clear()
    tokens_of_parts = [file_scores._tokens(part) for p in paths for part in p.split("/")]
    gc.collect()
    tracemalloc.start()
    try:
        for path in paths:
            folder, _, _name = path.rpartition("/")
            assert {"test", "sub", "module"} <= set(file_scores._folder_tokens(folder))
            assert path_kind(path) == "test"
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert tokens_of_parts and kept / len(paths) < 600, f"{kept / len(paths):.0f} B a folder"


def test_the_slice_cache_checks_an_entry_against_the_line_count_it_is_given(
        tmp_path: Path) -> None:
    # rank() hands over the count it worked out already; an entry reaching past it is a
    # miss, sliced again and rewritten, as when the cache counts the lines itself.
    cache = ChunkCache(tmp_path / "chunks")
    data = b"def f():\n    return 1\n"
    key = chunking.content_key("m.py", data)
    cache.put(key, [Chunk(1, 9, "f", ("f",))])

    chunks = cache.slice("m.py", data, data.decode(), LoweredText.of(data.decode()).line_count)

    assert chunks == [Chunk(1, 2, "f", ("f",))]
    assert cache.get(key) == chunks


def test_a_folders_words_count_for_every_file_under_it_however_deep() -> None:
    """The folder tokens are worked out once per folder (issue 30): every file under a
    folder named like a term gets the directory bonus, at any depth, and only those."""
    from slm_rerank.lexical.file_scores import score_files
    from slm_rerank.lexical.scores import DIRECTORY, TermStats
    from slm_rerank.lexical.terms import extract
    from slm_rerank.registrations import SourceHits

    terms = extract("parser")
    files = ["src/parser/a.py", "src/parser/b.py", "src/parser/deep/c.py",
             "src/lexer/a.py", "src/lexer/parser_x/d.py", "parser/e.py", "src/a.py"]
    hits = SourceHits(files=files)
    found = {e.path: e.parts for e in score_files(terms, hits, TermStats.from_hits(terms, hits))}
    assert set(found) == {"src/parser/a.py", "src/parser/b.py", "src/parser/deep/c.py",
                          "src/lexer/parser_x/d.py", "parser/e.py"}
    assert all(set(parts) == {"directory"} for parts in found.values())
    assert DIRECTORY > 0


def scored_files(seed: int) -> list[list[ScoredChunk]]:
    """Files of chunks whose scores tie often (as a file's chunks that mention nothing do),
    some with chunks sharing a start line, in chunk order as ``score_chunks`` gives them."""
    rng = random.Random(seed)
    paths = rng.sample([f"pkg/m{i}.py" for i in range(40)], rng.randint(1, 12))
    files = []
    for path in paths:
        lines = sorted(rng.randint(1, 30) for _ in range(rng.randint(0, 8)))
        files.append([ScoredChunk(path, Chunk(line, line + 3), rng.choice([0.0, 1.5, 2.0, 3.25]),
                                  [str(i)]) for i, line in enumerate(lines)])
    return files


@pytest.mark.parametrize("seed", range(40))
def test_the_lexical_order_is_by_score_then_path_then_line_ties_as_they_come(seed: int) -> None:
    files = scored_files(seed)
    expected = [c for items in files for c in items]
    expected.sort(key=lambda s: (-s.score, s.path, s.chunk.start_line))

    assert lexical_order(files) == expected
    assert [id(c) for c in lexical_order(files)] == [id(c) for c in expected]


def test_the_lexical_order_with_a_nan_score_is_the_order_it_always_was() -> None:
    files = scored_files(3) + [[ScoredChunk("a.py", Chunk(1, 2), math.nan, [])]]
    expected = [c for items in files for c in items]
    expected.sort(key=lambda s: (-s.score, s.path, s.chunk.start_line))

    assert [id(c) for c in lexical_order(files)] == [id(c) for c in expected]


@pytest.mark.parametrize("seed", range(20))
def test_by_score_first_keeps_ties_in_order(seed: int) -> None:
    items = [c for items in scored_files(seed) for c in items]
    rng = random.Random(seed)
    rng.shuffle(items)
    if seed % 5 == 0 and items:
        items[0].score = math.nan
    expected = sorted(items, key=lambda c: -c.score)

    by_score_first(items)

    assert [id(c) for c in items] == [id(c) for c in expected]


def test_a_files_evidence_is_small_until_its_parts_are_asked_for() -> None:
    # a long query on a large tree has evidence in most of its files, and the few it
    # chunks are asked where their scores came from: each file's sums are held as what
    # they are made of until then (ten copies of sympy: 9 MiB a query as dicts, issue 30),
    # and then are the sums the file's scores were made of
    import tracemalloc

    terms = extract("retry the connection backoff")
    files = [f"pkg{i % 50}/mod{i % 400}.py" for i in range(20_000)]
    hits = SourceHits(files=files, body_counts={
        f: {"retry": 1 + i % 7, "backoff": 3} for i, f in enumerate(files)},
        sizes={f: 1000 + i for i, f in enumerate(files)})
    stats = TermStats.from_hits(terms, hits)
    sizes = dict(hits.sizes)
    score_files(terms, hits, stats, sizes)  # the names' and folders' parts remembered
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        evidence = score_files(terms, hits, stats, sizes)
        held = tracemalloc.get_traced_memory()[0] - before
        masses = [e.file_bm25 for e in evidence]  # the learned ranker asks every file's
        asked = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(evidence) == len(files)
    assert held < 400 * len(files)  # 620 bytes a file as dicts
    assert asked - held < 50 * len(files)  # and its mass alone makes no dict
    average = sum(sizes.values()) / len(sizes)
    for e in evidence[:3] + evidence[-3:]:
        ratio = sizes[e.path] / average
        assert e.parts["body"] == e.body_score > 0
        assert e.parts["file_bm25"] == pytest.approx(
            file_scores.file_bm25(hits.body_counts[e.path], stats.rarity, ratio))
        assert e.parts["file_bm25"] == e.file_bm25 == masses[evidence.index(e)] > 0
        assert set(e.matched) == {"retry", "backoff"} and e.path_terms == []
        assert sum(e.matched.values()) == pytest.approx(e.body_score)

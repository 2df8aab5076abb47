"""Reading what `rg -o --null` and `git grep -o -z` print, and counting term matches from
it cheaply and exactly (outputs recorded from rg 14.1.0 and git 2.39.5)."""

from __future__ import annotations

import os
import subprocess
import tracemalloc
from collections.abc import Collection
from pathlib import Path

import pytest
import slm_rerank_ripgrep

from slm_rerank.lexical.matches import (
    GroupedCounts,
    count_grouped_terms,
    count_terms,
    match_records,
    split_file_list,
    stderr_excerpt,
)
from slm_rerank.registrations import SourceQuery


def test_a_path_holding_a_newline_or_a_carriage_return_is_one_record() -> None:
    output = b"a\nb.py\0retry\nc\rd.py\0retry\nc\rd.py\0Retry\nok.py\0retry\n"
    assert list(match_records(output)) == [
        (b"a\nb.py", b"retry"), (b"c\rd.py", b"retry"), (b"c\rd.py", b"Retry"),
        (b"ok.py", b"retry"),
    ]
    assert count_terms(output, ["retry"]) == {
        "a\nb.py": {"retry": 1}, "c\rd.py": {"retry": 2}, "ok.py": {"retry": 1},
    }


def test_a_path_ending_in_a_carriage_return_keeps_it() -> None:
    assert count_terms(b"x\r\0retry\n", ["retry"]) == {"x\r": {"retry": 1}}


def test_a_matched_text_counts_for_every_term_it_contains() -> None:
    output = b"src/a.py\0Classes\nsrc/a.py\0class\n./src/b.py\0class\n"
    assert count_terms(output, ["class", "classes"]) == {
        "src/a.py": {"classes": 1, "class": 2}, "src/b.py": {"class": 1},
    }


def test_ripgreps_binary_file_notices_are_not_read_as_paths() -> None:
    # rg prints these to stdout, without a NUL: the first for a binary file given by name,
    # the second when it meets a NUL byte after printing a match.
    output = (b'blob.bin: binary file matches (found "\\0" byte around offset 0)\n'
              b"late.txt\0retry\n"
              b'late.txt: WARNING: stopped searching binary file after match '
              b'(found "\\0" byte around offset 300013)\n'
              b"a\nb.py\0retry\n"
              b'other.bin: binary file matches (found "\\0" byte around offset 7)\n')
    assert count_terms(output, ["retry"]) == {"late.txt": {"retry": 1}, "a\nb.py": {"retry": 1}}


def test_an_output_without_records_counts_nothing() -> None:
    assert count_terms(b"", ["retry"]) == {}
    assert count_terms(b'x: binary file matches (found "\\0" byte around offset 0)\n',
                       ["retry"]) == {}


def test_a_file_list_keeps_newlines_and_drops_the_dot_slash() -> None:
    assert split_file_list(b"./a\nb.py\0c\rd.py\0src/e.py\0") == ["a\nb.py", "c\rd.py", "src/e.py"]


def test_a_tools_stderr_is_cut_to_one_line_of_a_few_messages() -> None:
    stderr = b"".join(b"rg: f%d.py: Permission denied (os error 13)\n" % i for i in range(20))
    excerpt = stderr_excerpt(stderr + b"x" * 1000 + b"\n")
    assert "\n" not in excerpt
    assert excerpt.startswith("rg: f0.py: Permission denied (os error 13) | rg: f1.py")
    assert excerpt.endswith("… and 9 more lines")
    assert stderr_excerpt(b"") == "(nothing on stderr)"


# --- counting: rg's grouped output (--heading), and the ripgrep source on odd names ---------

# Recorded from rg 14.1.0 (`rg -o -i -F --null --with-filename --heading --binary -e retries
# -e retry`), once in its parallel order and once with `--sort path`, over a tree whose file
# names hold newlines, a carriage return and a byte that is not UTF-8, with a binary file
# and a file whose NUL byte comes after many matches.


NOTICE_LATE = b'./late.txt: binary file matches (found "\\0" byte around offset 300000)\n'


NOTICE_BIN = b'./lib/cache.bin: binary file matches (found "\\0" byte around offset 10)\n'


WARNING_LATE = (b'./late.txt: WARNING: stopped searching binary file after match '
                b'(found "\\0" byte around offset 300000)\n')


PARALLEL = (b"./two\n\nlines.py\0Retry\nretry\n\n"
            b"./c\rr.py\0RETRY\n\n"
            + NOTICE_BIN + b"\n"
            + b"./bad\xffname.py\0retries\n\n"
            + b"./late.txt\0" + b"retry\n" * 3 + NOTICE_LATE)


SORTED = (b"./bad\xffname.py\0retries\n\n"
          b"./c\rr.py\0RETRY\n\n"
          b"./late.txt\0" + b"retry\n" * 3 + NOTICE_LATE + NOTICE_BIN + b"\n"
          b"./two\n\nlines.py\0Retry\nretry\n")


EXPECTED = {
    "two\n\nlines.py": {"retry": 2},
    "c\rr.py": {"retry": 1},
    "bad\udcffname.py": {"retries": 1},
    "late.txt": {"retry": 3},
}


@pytest.mark.parametrize("output", [PARALLEL, SORTED], ids=["parallel", "sorted"])
def test_grouped_output_counts_each_files_matches_whatever_its_name_holds(output: bytes
                                                                          ) -> None:
    assert count_grouped_terms(output, ["retry", "retries"]) == EXPECTED


def test_grouped_output_skips_notices_before_the_first_path_and_warnings_among_matches(
        ) -> None:
    output = (NOTICE_BIN + b"\n" + b"./late.txt\0retry\nRetry\n" + WARNING_LATE + b"\n"
              + b"./a.py\0retry\n")
    assert count_grouped_terms(output, ["retry"]) == {"late.txt": {"retry": 2},
                                                      "a.py": {"retry": 1}}


def test_a_notice_line_does_not_count_for_a_term_it_happens_to_contain() -> None:
    output = b"./a.py\0binary\n" + NOTICE_BIN.replace(b"./lib/cache.bin", b"./binary.bin")
    assert count_grouped_terms(output, ["binary"]) == {"a.py": {"binary": 1}}


def test_grouped_output_without_matches_counts_nothing() -> None:
    assert count_grouped_terms(b"", ["retry"]) == {}
    assert count_grouped_terms(NOTICE_BIN, ["retry"]) == {}


#: the names rg listed for the outputs above, as it prints them
LISTED = {b"./two\n\nlines.py", b"./c\rr.py", b"./lib/cache.bin", b"./bad\xffname.py",
          b"./late.txt"}


def _fed(output: bytes, cuts: list[int], names: Collection[bytes]
         ) -> tuple[dict[str, dict[str, int]], dict[str, str], int]:
    """``GroupedCounts`` fed ``output`` cut at ``cuts``: the counts, the notices the
    ripgrep source finds in its pieces, the bytes fed."""
    notices: dict[str, str] = {}
    counts = GroupedCounts(["retry", "retries"], names, lambda piece, first:
                           slm_rerank_ripgrep.binary_in(piece, first, names, notices))
    for start, end in zip([0, *cuts], [*cuts, len(output)], strict=True):
        counts.feed(output[start:end])
    return counts.close(), notices, counts.fed


@pytest.mark.parametrize("output", [
    PARALLEL, SORTED,
    NOTICE_BIN + b"\n" + b"./late.txt\0retry\nRetry\n" + WARNING_LATE + b"\n./c\rr.py\0retry\n",
], ids=["parallel", "sorted", "notice-first"])
def test_grouped_output_fed_in_parts_counts_and_finds_notices_as_given_whole(output: bytes
                                                                             ) -> None:
    whole = count_grouped_terms(output, ["retry", "retries"], LISTED)
    notices = slm_rerank_ripgrep.binary(output, LISTED)
    assert whole and notices  # something to find, or the comparisons below prove nothing
    cuts = [[at] for at in range(len(output) + 1)] + [list(range(1, len(output)))]
    for cut in cuts:  # cut once at each byte, and at every byte
        assert _fed(output, cut, LISTED) == (whole, notices, len(output)), cut


def test_a_notice_in_a_piece_after_a_nul_is_not_read_from_the_pieces_start() -> None:
    # The text after a NUL is a match, not the start of a line: read whole, the line that
    # holds the notice starts before the NUL and so names no file; piece by piece the same.
    output = b'./a.py\0x.bin: binary file matches (found "\\0" byte around offset 1)\n'
    names = {b"./a.py", b"x.bin"}
    assert slm_rerank_ripgrep.binary(output, names) == {}
    for cut in range(len(output) + 1):
        assert _fed(output, [cut], names)[1] == {}


def test_grouped_output_of_megabytes_is_counted_a_file_at_a_time() -> None:
    # rg's matches for common words in a large tree: 4 MB here; their pieces all at once
    # took as much again, on top of the output itself
    output = b"".join(f"src/m{n}.py".encode() + b"\0" + b"sin\ncos\n" * 250 + b"\n"
                      for n in range(2000))
    tracemalloc.start()
    try:
        counts = count_grouped_terms(output, ["sin", "cos"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(output) > 4_000_000 and len(counts) == 2000
    assert counts["src/m1999.py"] == {"sin": 250, "cos": 250}
    assert peak < 1 << 20, f"{peak >> 10} KiB to count {len(output) >> 10} KiB"


def test_record_output_gives_the_same_counts_with_or_without_a_path_holding_a_newline(
        ) -> None:
    # One record a line is counted line by line; a path with a newline in it breaks that,
    # and the records are then read one by one: the counts must not depend on which.
    plain = b"src/a.py\0Retry\nsrc/a.py\0retry\n" + WARNING_LATE + b"./b.py\0retries\n"
    odd = plain + b"two\n\nlines.py\0RETRY\n"
    assert count_terms(plain, ["retry", "retries"]) == {
        "src/a.py": {"retry": 2}, "b.py": {"retries": 1}}
    assert count_terms(odd, ["retry", "retries"]) == {
        "src/a.py": {"retry": 2}, "b.py": {"retries": 1},
        "two\n\nlines.py": {"retry": 1}}


def test_the_ripgrep_source_counts_a_tree_with_odd_names_and_binary_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLM_RERANK_RG", raising=False)
    root = tmp_path / "repo"
    files = {
        b"two\n\nlines.py": b"Retry retry\n",
        b"bad\xffname.py": b"retries\n",
        b"c\rr.py": b"RETRY\n",
        b"none.py": b"nothing\n",
        b"lib/cache.bin": b"retry = 1\n\0\0\0 compiled\n",
        # rg meets the NUL byte only after it printed the matches before it
        b"late.txt": b"retry\n" * 50_000 + b"\0retry\n",
    }
    for name, data in files.items():
        path = root / os.fsdecode(name)  # surrogateescape: a name need not be UTF-8
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    subprocess.run(["git", "init", "-q", str(root)], check=True)

    for explain in (False, True):
        hits = slm_rerank_ripgrep.search(SourceQuery(root=root.resolve(),
                                                     terms=["retry", "retries"],
                                                     explain=explain))
        late = hits.body_counts.pop("late.txt")
        assert hits.body_counts == {"two\n\nlines.py": {"retry": 2}, "c\rr.py": {"retry": 1},
                                    "bad\udcffname.py": {"retries": 1}}
        assert 0 < late["retry"] <= 50_001
        if explain:
            assert hits.skipped == {"lib/cache.bin": "binary (NUL byte)",
                                    "late.txt": "binary (NUL byte)"}

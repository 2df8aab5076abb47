"""Reading what `rg -o --null` and `git grep -o -z` print (outputs recorded from rg 14.1.0
and git 2.39.5)."""

from __future__ import annotations

from slm_rerank.lexical.matches import count_terms, match_records, split_file_list, stderr_excerpt


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

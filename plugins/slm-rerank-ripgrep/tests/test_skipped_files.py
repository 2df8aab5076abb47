"""Files rg meets but does not search are reported in SourceHits.skipped, with why (-v)."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest
import slm_rerank_ripgrep

from slm_rerank.registrations import SourceQuery

#: What rg 14.1.0 printed on stderr, run as an unprivileged user over a tree holding an
#: unreadable file (bad.py) and an unreadable folder (sub), as `rg -o ... -e retry`.
RG_UNREADABLE_STDERR = (b"rg: bad.py: Permission denied (os error 13)\n"
                        b"rg: ./sub: Permission denied (os error 13)\n")
BINARY = b"retry = 1\n\0\0\0 compiled\n"


@pytest.fixture(autouse=True)
def real_rg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLM_RERANK_RG", raising=False)


def tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root.resolve()


def test_files_and_folders_rg_could_not_read_are_skipped_with_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tree(tmp_path / "repo", {"ok.py": b"retry\n", "bad.py": b"retry\n"})
    fake = tmp_path / "fake-rg"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --files ]; then printf "bad.py\\0ok.py\\0"; '
        "echo 'rg: ./sub: Permission denied (os error 13)' >&2; exit 2; fi\n"
        "printf 'ok.py\\0retry\\n'\n"
        f"printf '{RG_UNREADABLE_STDERR.decode()}' >&2\nexit 2\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("SLM_RERANK_RG", str(fake))

    hits = slm_rerank_ripgrep.search(SourceQuery(root=root, terms=["retry"]))

    assert hits.body_counts == {"ok.py": {"retry": 1}}
    assert hits.skipped == {"bad.py": "unreadable (Permission denied)",
                            "sub": "unreadable (Permission denied)"}


def test_a_binary_file_in_a_folder_that_matches_is_reported_when_explaining(
        tmp_path: Path) -> None:
    root = tree(tmp_path / "repo", {"ok.py": b"retry\n", "lib/cache.bin": BINARY})

    quiet = slm_rerank_ripgrep.search(SourceQuery(root=root, terms=["retry"]))
    explained = slm_rerank_ripgrep.search(SourceQuery(root=root, terms=["retry"],
                                                      explain=True))

    assert quiet.body_counts == explained.body_counts == {"ok.py": {"retry": 1}}
    assert explained.skipped == {"lib/cache.bin": "binary (NUL byte)"}


def test_a_binary_file_given_by_name_is_reported(tmp_path: Path) -> None:
    root = tree(tmp_path / "repo", {"ok.py": b"retry\n", "cache.bin": BINARY})

    hits = slm_rerank_ripgrep.search(SourceQuery(root=root, terms=["retry"],
                                                 paths=[root / "cache.bin", root / "ok.py"]))

    assert hits.body_counts == {"ok.py": {"retry": 1}}
    assert hits.skipped == {"cache.bin": "binary (NUL byte)"}


def test_a_file_over_max_filesize_is_reported_when_explaining(tmp_path: Path) -> None:
    root = tree(tmp_path / "repo", {"ok.py": b"retry\n", "big.log": b"retry\n" * 100})

    hits = slm_rerank_ripgrep.search(SourceQuery(root=root, terms=["retry"], max_filesize=100,
                                                 explain=True))

    assert "big.log" in hits.files and "big.log" not in hits.body_counts
    assert hits.skipped == {"big.log": "huge (600 bytes > max_file_bytes 100)"}


def test_binary_notices_between_match_records_are_read_as_skips() -> None:
    output = (b"a.py\0retry\n"
              b'lib/x.bin: binary file matches (found "\\0" byte around offset 10)\n'
              b"b.py\0retry\n"
              b'y.bin: binary file matches (found "\\0" byte around offset 0)\n')

    assert slm_rerank_ripgrep.binary(output) == {"lib/x.bin": "binary (NUL byte)",
                                                 "y.bin": "binary (NUL byte)"}


def test_a_binary_file_whose_name_holds_a_newline_hides_no_other_file(tmp_path: Path) -> None:
    # rg prints the notice as "NAME: binary file matches (...)"; with a newline in NAME the
    # notice spans two lines, and the file after it was read as part of that name.
    root = tree(tmp_path / "repo", {"bin\n.py": BINARY, "a.py": b"retry one\n",
                                    "src/csi\x9b31m.py": b"retry two\n"})

    hits = slm_rerank_ripgrep.search(SourceQuery(root=root, terms=["retry"], explain=True))

    assert hits.body_counts == {"a.py": {"retry": 1}, "src/csi\x9b31m.py": {"retry": 1}}
    assert hits.skipped == {"bin\n.py": "binary (NUL byte)"}


def test_a_name_holding_a_notices_words_is_still_read_as_its_own_name(tmp_path: Path) -> None:
    forged = 'x (found "\\0" byte around offset 1)\n\na.py'
    root = tree(tmp_path / "repo", {forged: b"retry\n", "a.py": b"nothing here\n"})

    for explain in (False, True):
        hits = slm_rerank_ripgrep.search(SourceQuery(root=root, terms=["retry"],
                                                     explain=explain))

        assert hits.body_counts == {forged: {"retry": 1}}
        assert hits.skipped == {}

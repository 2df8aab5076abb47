"""Files git meets but does not search are reported in SourceHits.skipped, with why (-v)."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest
import slm_rerank_git

from slm_rerank.registrations import SourceQuery

#: What git 2.39 printed on stderr, run as an unprivileged user over a tree holding an
#: unreadable file (bad.py) and an unreadable folder (sub): `git ls-files` the first line,
#: `git grep` both.
LS_FILES_STDERR = "warning: could not open directory 'sub/': Permission denied\n"
GREP_STDERR = LS_FILES_STDERR + "error: failed to stat 'bad.py': Permission denied\n"
BINARY = b"retry = 1\n\0\0\0 compiled\n"


def tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root.resolve()


def test_files_and_folders_git_could_not_read_are_skipped_with_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tree(tmp_path / "repo", {"ok.py": b"retry\n", "bad.py": b"retry\n"})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        f"  *ls-files*) printf 'bad.py\\0ok.py\\0'; printf \"{LS_FILES_STDERR}\" >&2 ;;\n"
        f"  *grep*) printf 'ok.py\\0retry\\n'; printf \"{GREP_STDERR}\" >&2 ;;\n"
        "esac\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(bin_dir))

    hits = slm_rerank_git.search(SourceQuery(root=root, terms=["retry"]))

    assert hits.body_counts == {"ok.py": {"retry": 1}}
    assert hits.skipped == {"bad.py": "unreadable (Permission denied)",
                            "sub": "unreadable (Permission denied)"}


def test_a_binary_file_that_matches_is_reported_when_explaining(tmp_path: Path) -> None:
    root = tree(tmp_path / "repo", {"ok.py": b"retry\n", "lib/cache.bin": BINARY})

    quiet = slm_rerank_git.search(SourceQuery(root=root, terms=["retry"]))
    explained = slm_rerank_git.search(SourceQuery(root=root, terms=["retry"], explain=True))

    assert quiet.body_counts == explained.body_counts == {"ok.py": {"retry": 1}}
    assert quiet.skipped == {}
    assert explained.skipped == {"lib/cache.bin": "binary (NUL byte)"}


def test_a_file_over_max_filesize_is_reported(tmp_path: Path) -> None:
    root = tree(tmp_path / "repo", {"ok.py": b"retry\n", "big.log": b"retry\n" * 100})

    hits = slm_rerank_git.search(SourceQuery(root=root, terms=["retry"], max_filesize=100))

    assert "big.log" in hits.files and "big.log" not in hits.body_counts
    assert hits.skipped == {"big.log": "huge (600 bytes > max_file_bytes 100)"}

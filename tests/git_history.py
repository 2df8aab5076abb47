"""Generated git histories with known answers (the calibration tests)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_SYSTEM": os.devnull}


#: a gpg stand-in that signs anything: a history of signed commits without a key
FAKE_SIGNER = """#!/bin/sh
cat > /dev/null
echo '[GNUPG:] SIG_CREATED D 1 8 00 0 0' >&2
printf -- '-----BEGIN PGP SIGNATURE-----\\n\\niQ==\\n-----END PGP SIGNATURE-----\\n'
"""


class History:
    """A git repository whose commits the test writes one by one."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str | bytes, check: bool = True) -> str:
        done = subprocess.run(["git", "-C", str(self.root), *args], check=check,
                              capture_output=True, env={**os.environ, **GIT_ENV})
        return done.stdout.decode("utf-8", "replace").strip()

    def commit(self, message: str, files: dict[str | bytes, str | None]) -> str:
        """Write (text) or delete (None) ``files`` and commit them; the new commit's id."""
        for name, text in files.items():
            path = self.root / os.fsdecode(name)
            if text is None:
                path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")

    def commits(self, batch: list[tuple[str, dict[str, str]]]) -> None:
        """Commit each (message, files) of ``batch`` in order with one ``git fast-import``
        (a long history in one process, not three per commit), then check the tip out."""
        stream = bytearray()
        for n, (message, files) in enumerate(batch):
            text = message.encode()
            stream += (f"commit refs/heads/main\ncommitter t <t@example.org> "
                       f"{1_700_000_000 + n} +0000\ndata {len(text)}\n").encode() + text + b"\n"
            if n == 0 and self.git("rev-parse", "--verify", "--quiet", "HEAD^{commit}",
                                   check=False):
                stream += b"from refs/heads/main^0\n"
            for name, content in files.items():
                data = content.encode()
                stream += f"M 100644 inline {name}\ndata {len(data)}\n".encode() + data + b"\n"
        subprocess.run(["git", "-C", str(self.root), "fast-import", "--quiet"],
                       input=bytes(stream), check=True, capture_output=True,
                       env={**os.environ, **GIT_ENV})
        self.git("reset", "-q", "--hard", "main")


def signing_history(tmp_path: Path) -> History:
    """An empty repository at ``tmp_path / "repo"`` that signs each commit (with
    ``FAKE_SIGNER``, written to ``tmp_path / "signer"``)."""
    signer = tmp_path / "signer"
    signer.write_text(FAKE_SIGNER)
    signer.chmod(0o755)
    repo = History(tmp_path / "repo")
    repo.git("config", "commit.gpgSign", "true")
    repo.git("config", "gpg.program", str(signer))
    return repo


def git_stepping_in(monkeypatch: pytest.MonkeyPatch, bin_dir: Path, when: str, then: str
                    ) -> None:
    """Put first on PATH a ``git`` (in ``bin_dir``) that runs the shell commands ``then``
    when one of its arguments is ``when``, and is the real git otherwise; ``then`` runs the
    real git as ``"$REAL" "$@"``."""
    real = shutil.which("git")
    assert real is not None
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "git"
    script.write_text("#!/bin/sh\n"
                      f'REAL="{real}"\n'
                      f'for a in "$@"; do [ "$a" = {when} ] && {{ {then}; }}; done\n'
                      'exec "$REAL" "$@"\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

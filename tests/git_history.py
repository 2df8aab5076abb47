"""Generated git histories with known answers (the calibration tests)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_SYSTEM": os.devnull}


class History:
    """A git repository whose commits the test writes one by one."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str | bytes) -> str:
        done = subprocess.run(["git", "-C", str(self.root), *args], check=True,
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

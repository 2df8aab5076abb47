"""``--diff [REV]``: the lines changed since REV (default: the uncommitted work), by file.

git runs through the host's bounded runner (``plugin_kit.git_output``: a total deadline, a
cap on what it prints, its own process group). The repository is untrusted, so nothing it
configures may start a process: the runner turns off its filters, fsmonitor, hooks, pager,
textconv and external diff drivers; the prefixes are given (a repository's
``diff.noprefix`` would change them) and colour is off.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from slm_rerank.errors import ConfigError
from slm_rerank.plugin_kit import GitError, git_output
from slm_rerank.report import display_path

#: seconds each git call may take, within the review's own deadline
GIT_SECONDS = 20.0
#: bytes a diff may print: a review reads a pull request, not a vendored tree
MAX_DIFF_BYTES = 32_000_000
#: the options that keep a repository's configuration from changing git's output (what
#: would start a process the runner turns off)
SAFE = ["-c", "core.quotepath=on", "-c", "color.ui=false"]
_HUNK = re.compile(rb"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


@dataclass
class Changes:
    """The changed lines of each file (paths relative to the root, POSIX), new side."""

    #: what was compared, for a person: "uncommitted work" or "changes since REV"
    described: str
    lines: dict[str, set[int]] = field(default_factory=dict)
    #: files git does not track yet: every line of them is new
    new_files: set[str] = field(default_factory=set)

    def touches(self, path: str, start_line: int, end_line: int) -> bool:
        """Whether ``path`` (as the search cites it: a byte that is not UTF-8 escaped,
        ``display_path``) has a changed line in ``start_line``..``end_line``."""
        escaped = "\\x" in path  # only then can the search's name differ from git's
        if path in self.new_files or (escaped and path in self._shown_new):
            return True
        changed = self.lines.get(path) or (self._shown_lines.get(path) if escaped else None)
        return bool(changed) and any(start_line <= n <= end_line for n in changed)

    @property
    def _shown_lines(self) -> dict[str, set[int]]:
        return {display_path(p): lines for p, lines in self.lines.items()}

    @property
    def _shown_new(self) -> set[str]:
        return {display_path(p) for p in self.new_files}

    @property
    def paths(self) -> list[str]:
        """Every changed file, sorted."""
        return sorted({*self.lines, *self.new_files})


def changed_lines(root: Path, rev: str | None, timeout: float = GIT_SECONDS) -> Changes:
    """The lines ``git diff`` (against ``rev``, else HEAD) adds or changes under ``root``,
    and every line of a file git does not track yet when ``rev`` is None (uncommitted work).

    Raises ConfigError naming the command when git fails (not a repository, an unknown
    revision) or runs past its bounds.
    """
    if rev is not None and (not rev or rev.startswith("-")):
        raise ConfigError(f"--diff {rev!r}: a revision must not be empty or start with '-'")
    against = rev if rev is not None else "HEAD"
    # --text: a repository's attributes (`*.py -diff`, a diff driver's `binary`) must not
    # turn a change into "Binary files differ", a change with no line to review
    args = [*SAFE, "diff", "--no-color", "--unified=0", "--text",
            "--relative", "--src-prefix=a/", "--dst-prefix=b/", against, "--"]
    try:
        patch = git_output(root, args, timeout=timeout, max_bytes=MAX_DIFF_BYTES)
        untracked = b"" if rev is not None else git_output(
            root, [*SAFE, "ls-files", "--others", "--exclude-standard", "-z"],
            timeout=timeout, max_bytes=MAX_DIFF_BYTES)
    except GitError as exc:
        raise ConfigError(f"--diff: {str(exc).split('; try a smaller', 1)[0]}; run the review "
                          "in a git work tree, with a revision it has") from None
    changes = Changes("uncommitted work" if rev is None else f"changes since {rev}",
                      parse_patch(patch))
    # not read here: an untracked name may be a link to a FIFO; the review reads it bounded
    changes.new_files = {os.fsdecode(raw) for raw in untracked.split(b"\0") if raw}
    return changes


def parse_patch(patch: bytes) -> dict[str, set[int]]:
    """The new-side line numbers each file's hunks add or change (``--unified=0`` output)."""
    found: dict[str, set[int]] = {}
    current: set[int] | None = None
    for line in patch.split(b"\n"):
        if line.startswith(b"+++ "):
            name = line[4:]
            path = _unquote(name)
            if path is None or not path.startswith("b/"):
                current = None  # /dev/null: the file was deleted
                continue
            current = found.setdefault(path[2:], set())
        elif line.startswith(b"@@") and current is not None:
            match = _HUNK.match(line)
            if match:
                start = int(match.group(1))
                count = int(match.group(2)) if match.group(2) is not None else 1
                current.update(range(start, start + count))
    return {path: lines for path, lines in found.items() if lines}


_ESCAPES = {b"a": 7, b"b": 8, b"t": 9, b"n": 10, b"v": 11, b"f": 12, b"r": 13, b'"': 34,
            b"\\": 92}


def _unquote(name: bytes) -> str | None:
    """A path as git prints it: C-quoted (``"b/\\303\\251.py"``) when it holds special
    bytes; None for a name that is neither quoted properly nor plain."""
    if not name.startswith(b'"'):
        return os.fsdecode(name.rstrip(b"\t"))
    if not name.endswith(b'"') or len(name) < 2:
        return None
    body, out, i = name[1:-1], bytearray(), 0
    while i < len(body):
        byte = body[i:i + 1]
        if byte != b"\\":
            out += byte
            i += 1
            continue
        code = body[i + 1:i + 2]
        if code in _ESCAPES:
            out.append(_ESCAPES[code])
            i += 2
        elif re.fullmatch(rb"[0-7]{3}", body[i + 1:i + 4]):
            out.append(int(body[i + 1:i + 4], 8) & 0xFF)
            i += 4
        else:
            return None
    return os.fsdecode(bytes(out))


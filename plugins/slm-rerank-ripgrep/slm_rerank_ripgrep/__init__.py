"""Candidate source: ripgrep."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path

import slm_rerank
from slm_rerank.errors import SourceError
from slm_rerank.plugin_kit import (
    GroupedCounts,
    listed_path,
    order_for_search,
    size_reason,
    split_file_list,
    start_tool,
    stderr_excerpt,
    stream_output,
    when_idle,
)
from slm_rerank.registrations import CandidateSource, SourceHits, SourceQuery
from slm_rerank_ripgrep import listing, word_index

#: What rg prints on stderr, exiting 2, when it searched all it could: a file or folder it
#: could not read ("rg: <path>: <reason> (os error 13)"), or that it searched no file at
#: all (an empty tree, or every file filtered out). Its fatal errors (a bad glob, a regex
#: too large, a bad flag) carry no OS error code.
_NOT_FATAL = re.compile(
    rb"\(os error \d+\)\s*$|^rg: No files were searched|^Running with --debug")
#: One such line about a file or folder: ``rg: ./sub/a.py: Permission denied (os error 13)``.
_UNREADABLE = re.compile(rb"^rg: (.+): ([^:]+?) \(os error \d+\)\s*$")
#: The notice rg prints on stdout instead of the matches of a file holding a NUL byte, after
#: the file's path on the same line. It starts with a literal, so that re finds it with a
#: fast scan: a pattern anchored at each line start was tried at every byte of the output.
_BINARY = re.compile(rb': binary file matches \(found "\\0" byte around offset \d+\)(?=\n)')


def find_rg() -> str | None:
    """`SLM_RERANK_RG`, else the rg installed beside this Python, else rg on PATH."""
    override = os.environ.get("SLM_RERANK_RG")
    if override:
        return override if os.access(override, os.X_OK) else None
    beside = Path(sys.executable).parent / "rg"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("rg")


def unavailable(root: Path) -> str | None:
    if find_rg() is None:
        return "rg not found (install the 'ripgrep' package or set SLM_RERANK_RG)"
    return None


def searchable_paths(paths: Sequence[Path]) -> list[Path]:
    """The explicit paths rg may be given: regular files and directories.

    rg reads any file it is given by name, so a FIFO with no writer, or a device such as
    /dev/zero, would hang the search; inside a folder it walks, rg skips them itself. A
    path that vanished is dropped too: it holds nothing to find.
    """
    kept = []
    for path in paths:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue
        if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
            kept.append(path)
    return kept


def _scope_args(root: Path, paths: Sequence[Path], globs: Sequence[str]) -> list[str]:
    args: list[str] = []
    for glob in globs:
        args += ["-g", glob]
    args.append("--")
    args += [os.path.relpath(p, root) for p in paths]
    return args


def _start(argv: list[str], root: Path) -> subprocess.Popen[bytes]:
    # stdin is /dev/null (start_tool): given no paths, rg reads a piped stdin instead of the
    # tree. start_tool records the process, for a caller abandoning the search to kill.
    try:
        return start_tool(argv, cwd=root)
    except OSError as exc:
        raise SourceError(f"candidate source 'ripgrep' could not run {argv[0]} in {root}: "
                          f"{exc.strerror or exc}; check that the folder exists and that "
                          "rg (or SLM_RERANK_RG) is an executable") from exc


def _check(what: str, proc: subprocess.Popen[bytes], err: bytes, searched: bool,
           root: Path) -> None:
    """Raise SourceError when rg failed, as opposed to meeting files it could not read.

    rg exits 1 when nothing matched (or there was nothing to list), and 2 both for a fatal
    error and after searching all it could; ``searched`` says which the output shows.
    """
    code = proc.returncode
    if code in (0, 1) or (code == 2 and searched):
        return
    status = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
    raise SourceError(f"candidate source 'ripgrep' failed: `{what}` {status} in {root}: "
                      f"{stderr_excerpt(err)}. Fix what rg reports, or choose another source "
                      "(sources = [\"git\"] in .slm-rerank.toml).")


def _only_unreadable(err: bytes) -> bool:
    """True when every stderr line is about a path rg could not read, or no file searched."""
    return all(_NOT_FATAL.search(line) for line in err.splitlines() if line.strip())


def _relative(path: bytes) -> str:
    name = os.fsdecode(path)
    return name[2:] if name.startswith("./") else name


def unreadable(err: bytes) -> dict[str, str]:
    """path -> why, for each file or folder rg reported it could not read."""
    found = {}
    for line in err.splitlines():
        match = _UNREADABLE.match(line)
        if match:
            found[_relative(match.group(1))] = \
                f"unreadable ({match.group(2).decode('utf-8', 'replace')})"
    return found


def binary(output: bytes, names: Collection[bytes] = ()) -> dict[str, str]:
    """path -> why, for each file whose matches rg replaced by a binary-file notice.

    ``names``: the paths rg listed, which tell where a name holding a newline starts.
    """
    found: dict[str, str] = {}
    for at, piece in enumerate(output.split(b"\0")):
        binary_in(piece, at == 0, names, found)
    return found


def binary_in(piece: bytes, first: bool, names: Collection[bytes],
              found: dict[str, str]) -> None:
    """``binary`` of one piece of rg's output between two NULs (a notice holds none), into
    ``found``; ``first``: the piece that starts the output, else a NUL comes before it."""
    for match in _BINARY.finditer(piece):
        # The path is the rest of the line; a NUL in it would make it a match record.
        name = listed_path(piece, match.start(), names, starts_line=first)
        if name is None:
            line = piece.rfind(b"\n", 0, match.start())
            if line < 0 and not first:
                continue  # the line began before the NUL: a match record's
            name = piece[line + 1:match.start()]
        if name:
            found[_relative(name)] = "binary (NUL byte)"


class _Listed(Collection[bytes]):
    """The names ``rg --files --null`` printed, as a set made only when first looked in: a
    name is in doubt only where one holds a newline or a notice comes before it, and the
    set takes 2.5 MB on a tree of 20,000 files."""

    def __init__(self, output: bytes) -> None:
        self.output = output
        self._names: set[bytes] | None = None

    def _set(self) -> set[bytes]:
        if self._names is None:
            self._names = set(self.output.split(b"\0"))
        return self._names

    def __contains__(self, name: object) -> bool:
        return name in self._set()

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._set())

    def __len__(self) -> int:
        return len(self._set())

    def __bool__(self) -> bool:
        return bool(self.output)


def oversized(root: Path, files: Sequence[str], limit: int) -> dict[str, str]:
    """path -> why, for each listed file over ``limit`` bytes, which rg lists but never searches.

    One stat per file: a few ms per thousand files when cached, tens when not, as much as
    the listing itself; so only done when the caller asks to have every skip explained.
    """
    base = os.fsencode(root)
    found = {}
    for rel in files:
        try:
            reason = size_reason(os.stat(os.path.join(base, os.fsencode(rel))).st_size, limit)
        except OSError:
            continue
        if reason:
            found[rel] = reason
    return found


def search(query: SourceQuery) -> SourceHits:
    rg = find_rg()
    if rg is None:
        raise SourceError(f"candidate source 'ripgrep': {unavailable(query.root)}")
    paths = searchable_paths(query.paths)
    if query.paths and not paths:
        return SourceHits()  # no paths at all would mean the whole root
    scope = _scope_args(query.root, paths, query.globs)
    terms = order_for_search(query.terms)
    # The word index (a warm process's worker only) answers for a whole tree, as rg walks it
    # to list it: not for named paths, nor where -v asks what rg drops silently, nor where
    # a config file ($RIPGREP_CONFIG_PATH) may give rg flags that change what it finds.
    whole_tree = (not query.paths and not query.explain
                  and not os.environ.get("RIPGREP_CONFIG_PATH"))
    # The index is one thread's at a time: held by another (a query, a build's window in
    # the MCP server's or the API's idle-work thread), rg answers as without it.
    lock = word_index.LOCK
    if whole_tree and terms and word_index.indexed(query.root) and lock.acquire(blocking=False):
        try:
            hits, files_out, found = _from_index(rg, scope, terms, query)
        finally:
            lock.release()
        if found is not None:
            hits.body_counts = found.body_counts
            hits.sizes = found.sizes
            hits.skipped.update(found.skipped)
            tree = word_index.tree_of(query.root)
            if tree is not None and tree.unfinished:  # its pieces or their file, once
                _index_when_idle(query.root, hits.files)  # this command is answered
            return hits
        # declined (a file it does not model, too many changed files): rg answers, and the
        # index catches up once this command is answered
        alone = _start_matching(rg, scope, terms, query)
        _found_by_rg(hits, alone, files_out, terms, query.root)
        _index_when_idle(query.root, hits.files)
        return hits
    # Listing and matching run side by side: two processes, one wait. Huge files are listed
    # (so a file named after the query can be reported as skipped) but never searched.
    listing = _start([rg, "--files", "--null", *scope], query.root)
    matching: subprocess.Popen[bytes] | None = None
    if terms:
        try:
            matching = _start_matching(rg, scope, terms, query)
        except SourceError:
            listing.kill()
            listing.communicate()
            raise
    # The listing is read to its end first; meanwhile rg -o may block on a full pipe, which
    # only delays it: the two processes do not wait on each other.
    files_out, files_err = listing.communicate()
    try:
        hits = _listing_hits(listing, files_out, files_err, query)
    except BaseException:
        if matching is not None:
            matching.kill()
            matching.communicate()
        raise
    if matching is not None:  # its output counted as it is read
        _found_by_rg(hits, matching, files_out, terms, query.root)
    if whole_tree and terms:
        _index_when_idle(query.root, hits.files)
    return hits


def _from_index(rg: str, scope: list[str], terms: list[str], query: SourceQuery
                ) -> tuple[SourceHits, bytes, word_index.Answer | None]:
    """The listing, and the index's answer for it (None: rg must match); ``LOCK`` held.

    The listing is the one the last query ran when nothing rg's walk depends on changed
    since (``listing.py``), else rg's, run now."""
    tree = word_index.tree_of(query.root)
    key = listing.key_of(rg, scope)
    kept = tree.listing if tree is not None else None
    if tree is not None and kept is not None:
        if kept.key == key and listing.unchanged(kept):
            hits = SourceHits(files=list(kept.files))
            answer = _answer(query, terms, hits)
            return hits, kept.output() if answer is None else b"", answer
        tree.listing = None
    began = word_index.now_ns()
    lister = _start([rg, "--files", "--null", *scope], query.root)
    # while rg lists the tree, the index checks its files and counts the terms, and the
    # folders rg walks are stamped
    prepared: word_index.Prepared | None = None
    stamps = None
    try:
        prepared = word_index.prepare(query.root, terms, query.max_filesize)
        if tree is not None and not tree.unfollowable and began >= tree.walk_after:
            stamps = listing.shape(tree.root)
            tree.unfollowable = stamps is None
    except Exception as exc:  # noqa: BLE001 - rg answers; `warm status` says why
        word_index.refuse(query.root, exc)
    finally:
        files_out, files_err = lister.communicate()
    hits = _listing_hits(lister, files_out, files_err, query)
    found = _finished(query, prepared, hits)
    if (stamps is not None and tree is not None and tree is word_index.tree_of(query.root)
            and len(hits.files) <= word_index.MAX_FILES
            and listing.keepable(hits.files, files_err)):
        racy = word_index.RACY_SECONDS * 1_000_000_000
        newest = listing.newest(stamps)
        if newest < began - racy:
            tree.listing = listing.Listing.kept(key, tree.shared(hits.files), stamps, began)
        else:  # a walk before then would find the same stamp too recent: none till then
            tree.walk_after = newest + racy
    return hits, files_out, found


def _answer(query: SourceQuery, terms: list[str], hits: SourceHits
            ) -> word_index.Answer | None:
    prepared = None
    try:
        prepared = word_index.prepare(query.root, terms, query.max_filesize)
    except Exception as exc:  # noqa: BLE001 - as in _from_index
        word_index.refuse(query.root, exc)
    return _finished(query, prepared, hits)


def _finished(query: SourceQuery, prepared: word_index.Prepared | None, hits: SourceHits
              ) -> word_index.Answer | None:
    if prepared is None:
        return None
    try:
        return prepared.finish(hits.files)
    except Exception as exc:  # noqa: BLE001 - rg answers; `warm status` says why
        word_index.refuse(query.root, exc)
        return None


def _start_matching(rg: str, scope: list[str], terms: list[str],
                    query: SourceQuery) -> subprocess.Popen[bytes]:
    patterns = [arg for term in terms for arg in ("-e", term)]
    # A folder's binary files are dropped silently unless --binary asks rg to say that
    # one matched (it then searches them to the end: extra work only -v pays for).
    binary_notices = ["--binary"] if query.explain else []
    return _start(
        # --heading prints each file's path once, not once per match: a fifth of
        # the output, for the same search (matches.count_grouped_terms).
        [rg, "-o", "-i", "-F", "--null", "--no-line-number", "--with-filename",
         "--heading", "--color=never", f"--max-filesize={query.max_filesize}",
         *binary_notices, *patterns, *scope],
        query.root,
    )


def _listing_hits(listing: subprocess.Popen[bytes], files_out: bytes, files_err: bytes,
                  query: SourceQuery) -> SourceHits:
    # A listing that printed nothing and exited 2 could list nothing: that is a failure.
    _check("rg --files", listing, files_err, bool(files_out), query.root)
    hits = SourceHits(files=split_file_list(files_out), skipped=unreadable(files_err))
    if query.explain:
        hits.skipped.update(oversized(query.root, hits.files, query.max_filesize))
    return hits


def _found_by_rg(hits: SourceHits, matching: subprocess.Popen[bytes], files_out: bytes,
                 terms: list[str], root: Path) -> None:
    """What ``matching`` (rg -o) prints counted as it is read: 3.9 MB for three common words
    in a tree of 20,000 files, which was read whole and joined from the pipe's pieces."""
    listed = _Listed(files_out)
    notices: dict[str, str] = {}
    counts = GroupedCounts(terms, listed, lambda piece, first: binary_in(
        piece, first, listed, notices))
    match_err = stream_output(matching, counts.feed)
    found = counts.close()
    # The match pass prints nothing when no readable file matched; stderr then says so.
    _check("rg -o", matching, match_err, counts.fed > 0 or _only_unreadable(match_err), root)
    hits.body_counts = found
    hits.skipped.update(unreadable(match_err))
    hits.skipped.update(notices)


def _index_when_idle(root: Path, files: list[str]) -> None:
    """Have a long-lived process index this tree once the search is answered (idle work:
    the warm process's worker, the MCP server, the Python API called again)."""
    if word_index.wanted(root):
        when_idle(word_index.Build(root, files), "ripgrep's word index")


@slm_rerank.hookimpl
def register_candidate_sources(register: Callable[[CandidateSource], None]) -> None:
    register(CandidateSource(
        name="ripgrep",
        description="rg: respects .gitignore, reaches untracked files",
        unavailable=unavailable,
        search=search,
        priority=10,
    ))

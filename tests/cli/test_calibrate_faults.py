"""`slm-rerank calibrate` when the run is stopped, the cache disk fills, the output is a
pipe, or one historic tree cannot be laid out: each in a real process on a real repository."""

from __future__ import annotations

import os
import pty
import resource
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from git_history import History
from oracle_judge import seed_cases
from search_fixtures import CLI, cli, isolate

#: a file the parent tree of every case holds, large beside the room the tests leave
BIG = 400_000


def _started(repo: Path, trees: Path, **options: object) -> subprocess.Popen[bytes]:
    """``calibrate --fast`` in ``repo``, once it has laid out its first tree."""
    process = subprocess.Popen([str(CLI), "calibrate", "--fast"], cwd=repo,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, **options)  # type: ignore[call-overload]
    deadline = time.monotonic() + 60
    while not (trees.is_dir() and any(trees.iterdir())):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"no tree laid out: {process.communicate()[1]!r}")
        time.sleep(0.01)
    return process


# --- signals ------------------------------------------------------------------------------


@pytest.mark.parametrize("stop", [signal.SIGHUP, signal.SIGQUIT], ids=["SIGHUP", "SIGQUIT"])
def test_a_run_stopped_with_sighup_or_sigquit_removes_the_tree_it_was_searching(
        stop: signal.Signals, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = isolate(monkeypatch, tmp_path)
    repo = History(tmp_path / "repo")
    seed_cases(repo, 25)
    trees = cache / "calibrate"
    process = _started(repo.root, trees)
    try:
        process.send_signal(stop)  # the terminal closed / Ctrl-\
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait()

    assert process.returncode == 128 + stop, stderr
    assert b"Traceback" not in stderr
    assert list(trees.iterdir()) == []


def test_a_run_started_with_sighup_ignored_outlives_its_terminal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = isolate(monkeypatch, tmp_path)
    repo = History(tmp_path / "repo")
    seed_cases(repo, 6)
    # what nohup does before it runs the command
    process = _started(repo.root, cache / "calibrate",
                       preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    try:
        process.send_signal(signal.SIGHUP)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait()

    assert process.returncode == 0, stderr
    assert list((cache / "calibrate").iterdir()) == []


# --- a full cache disk --------------------------------------------------------------------


def _big_repo(root: Path) -> History:
    """Three cases, each searched in a tree holding an incompressible ``BIG`` bytes."""
    repo = History(root)
    (root / "assets").mkdir()
    (root / "assets" / "blob.bin").write_bytes(os.urandom(BIG))
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "add the assets")
    seed_cases(repo, 3)
    return repo


def _one_line_naming_the_cache(stderr: str, trees: Path, reason: str) -> None:
    assert "Traceback" not in stderr
    [line] = stderr.splitlines()
    assert line.startswith(f"slm-rerank: error: cache folder {trees} cannot hold the tree of ")
    assert f"({reason}); free space there, or set cache_dir or SLM_RERANK_CACHE_DIR" in line


def test_a_cache_over_the_file_size_limit_is_one_line_naming_the_folder_and_leaves_no_tree(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = isolate(monkeypatch, tmp_path)
    repo = _big_repo(tmp_path / "repo")
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)

    def limited() -> None:  # no file the process writes may grow past half the asset
        resource.setrlimit(resource.RLIMIT_FSIZE, (BIG // 2, hard))

    done = subprocess.run([str(CLI), "calibrate", "--fast"], cwd=repo.root,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          preexec_fn=limited, timeout=120)

    assert done.returncode == 1
    _one_line_naming_the_cache(done.stderr, cache / "calibrate", "File too large")
    assert list((cache / "calibrate").iterdir()) == []


def _can_mount_tmpfs(point: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "mount", "-t", "tmpfs", "-o", "size=64k",
                            "tmpfs", str(point)], capture_output=True)
    return probe.returncode == 0


@pytest.mark.parametrize("room", [BIG // 2, BIG * 3 // 2],
                         ids=["the tar does not fit", "the tar fits, its files do not"])
def test_a_full_cache_disk_is_one_line_naming_the_folder_and_leaves_no_tree(
        room: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    if not _can_mount_tmpfs(disk):
        pytest.skip("no unprivileged user and mount namespaces here (unshare -rm)")
    isolate(monkeypatch, tmp_path)
    cache = disk / "cache"
    monkeypatch.setenv("SLM_RERANK_CACHE_DIR", str(cache))
    repo = _big_repo(tmp_path / "repo")
    left = tmp_path / "left.txt"
    # a small disk of its own: mounted in a namespace of this run alone, gone with it
    script = (f"mount -t tmpfs -o size={room} tmpfs {shlex.quote(str(disk))} && "
              f"{shlex.quote(str(CLI))} calibrate --fast; code=$?; "
              f"ls -A {shlex.quote(str(cache / 'calibrate'))} > {shlex.quote(str(left))}; "
              "exit $code")

    done = subprocess.run(["unshare", "-rm", "sh", "-c", script], cwd=repo.root,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120)

    assert done.returncode == 1, done.stderr
    _one_line_naming_the_cache(done.stderr, cache / "calibrate", "No space left on device")
    assert left.read_text() == ""


# --- progress off a terminal --------------------------------------------------------------


def _calibrate_every(seconds: float) -> list[str]:
    """``calibrate --fast`` in a real process whose progress interval is ``seconds``."""
    return [sys.executable, "-c",
            "import sys\n"
            "from slm_rerank.cli import calibrate\n"
            f"calibrate.LOG_EVERY = {seconds!r}\n"
            "from slm_rerank.cli.commands import cli\n"
            "cli.main(['calibrate', '--fast'], prog_name='slm-rerank')\n"]


def test_a_piped_run_says_where_it_is_on_stderr_at_intervals(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch, tmp_path)
    repo = History(tmp_path / "repo")
    seed_cases(repo, 3)

    done = subprocess.run(_calibrate_every(0.0), cwd=repo.root, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines == ["slm-rerank: calibrate: 1 of 4 commits mined, 1 cases found",
                     "slm-rerank: calibrate: 2 of 4 commits mined, 2 cases found",
                     "slm-rerank: calibrate: 3 of 4 commits mined, 3 cases found",
                     "slm-rerank: calibrate: 4 of 4 commits mined, 3 cases found",
                     "slm-rerank: calibrate: 1 of 3 cases measured",
                     "slm-rerank: calibrate: 2 of 3 cases measured",
                     "slm-rerank: calibrate: 3 of 3 cases measured"]
    assert "| lexical | 3 |" in done.stdout


def test_a_piped_run_whose_stderr_reader_is_gone_still_prints_its_measurement(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = isolate(monkeypatch, tmp_path)
    repo = History(tmp_path / "repo")
    seed_cases(repo, 3)
    read, write = os.pipe()
    os.close(read)  # `calibrate 2>&1 | head -1` after its line: a progress line gets EPIPE
    try:
        done = subprocess.run(_calibrate_every(0.0), cwd=repo.root, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=write, text=True, timeout=120)
    finally:
        os.close(write)

    assert done.returncode == 0
    assert "| lexical | 3 |" in done.stdout
    assert list((cache / "calibrate").iterdir()) == []


def test_a_short_piped_run_prints_no_progress(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch, tmp_path)
    repo = History(tmp_path / "repo")
    seed_cases(repo, 3)

    run = cli("calibrate", "--fast", cwd=repo.root, timeout=120)

    assert run.returncode == 0 and run.stderr == ""


def test_on_a_terminal_the_run_keeps_its_bar_and_prints_no_progress_lines(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch, tmp_path)
    repo = History(tmp_path / "repo")
    seed_cases(repo, 3)
    terminal, side = pty.openpty()
    try:
        process = subprocess.Popen(_calibrate_every(0.0), cwd=repo.root,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=side)
        os.close(side)
        shown = b""
        while True:  # read the terminal until the process closes it
            ready, _, _ = select.select([terminal], [], [], 60)
            assert ready, "the run hung"
            try:
                chunk = os.read(terminal, 1 << 16)
            except OSError:  # EIO: no writer is left
                break
            if not chunk:
                break
            shown += chunk
        stdout, _ = process.communicate(timeout=60)
    finally:
        os.close(terminal)

    assert process.returncode == 0
    assert b"\rslm-rerank: measuring [" in shown and b"3/3" in shown
    assert b"cases measured" not in shown and b"commits mined" not in shown
    assert b"| lexical | 3 |" in stdout


# --- a historic tree that cannot be laid out ----------------------------------------------


def _tree_with(repo: History, parent: str, entries: list[str]) -> str:
    """``parent``'s tree plus ``entries`` (``git ls-tree`` lines), made without a checkout:
    git refuses to write such paths into an index or a working tree."""
    lines = [line for line in repo.git("ls-tree", f"{parent}^{{tree}}").splitlines()
             if line.split("\t", 1)[1] not in {e.split("\t", 1)[1] for e in entries}]
    made = subprocess.run(["git", "-C", str(repo.root), "mktree"], check=True,
                          input="\n".join(lines + entries) + "\n", capture_output=True,
                          text=True)
    return made.stdout.strip()


def _commit(repo: History, tree: str, parent: str, message: str) -> str:
    commit = repo.git("commit-tree", tree, "-p", parent, "-m", message)
    repo.git("update-ref", "refs/heads/main", commit)
    return commit


def _blob(repo: History, text: str) -> str:
    made = subprocess.run(["git", "-C", str(repo.root), "hash-object", "-w", "--stdin"],
                          check=True, input=text, capture_output=True, text=True)
    return made.stdout.strip()


def _case_on_a_bad_tree(repo: History, word: str, bad: list[str]) -> None:
    """A commit adding ``bad`` entries and ``{word}.py``, a fix of ``{word}.py`` on top
    (a case whose tree is the bad one), and a commit removing the bad entries."""
    head = repo.git("rev-parse", "HEAD")
    before = _blob(repo, "def run():\n    pass\n")
    after = _blob(repo, "def run():\n    return 1\n")
    broken = _commit(repo, _tree_with(repo, head, [*bad, f"100644 blob {before}\t{word}.py"]),
                     head, f"add the {word} module")
    fixed = _commit(repo, _tree_with(repo, broken, [f"100644 blob {after}\t{word}.py"]),
                    broken, f"{word} zorblax widget must frobnicate")
    clean = [line for line in repo.git("ls-tree", f"{fixed}^{{tree}}").splitlines()
             if line not in bad]
    made = subprocess.run(["git", "-C", str(repo.root), "mktree"], check=True,
                          input="\n".join(clean) + "\n", capture_output=True, text=True)
    _commit(repo, made.stdout.strip(), fixed, "cleanup")  # no case: too short a subject


def _repo_with_bad_trees(root: Path) -> History:
    repo = History(root)
    seed_cases(repo, 3)
    blob = _blob(repo, "gitdir: /elsewhere\n")
    dot_git = subprocess.run(["git", "-C", str(root), "mktree"], check=True,
                             input=f"100644 blob {blob}\t.git\n", capture_output=True,
                             text=True).stdout.strip()
    _case_on_a_bad_tree(repo, "nested", [f"040000 tree {dot_git}\tsub"])
    _case_on_a_bad_tree(repo, "lengthy", [f"100644 blob {blob}\t{'n' * 300}.py"])
    repo.git("reset", "-q", "--hard", "main")
    return repo


def test_a_historic_tree_that_cannot_be_laid_out_costs_its_case_not_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = isolate(monkeypatch, tmp_path)
    repo = _repo_with_bad_trees(tmp_path / "repo")

    run = cli("calibrate", "--fast", "--format", "json", cwd=repo.root, timeout=120)

    assert run.returncode == 0, run.stderr
    document = run.json()
    assert document["cases"] == 3
    assert document["left_out"] == {"tree could not be laid out": 2}
    warnings = run.stderr.splitlines()
    assert len(warnings) == 2 and all(line.startswith(
        "slm-rerank: tree could not be laid out, left out: ") for line in warnings)
    assert "invalid path 'sub/.git'" in run.stderr and "File name too long" in run.stderr
    assert list((cache / "calibrate").iterdir()) == []

    text = cli("calibrate", "--fast", cwd=repo.root, timeout=120)

    assert text.returncode == 0
    assert "left out: 2 (tree could not be laid out)" in text.stdout
    assert "| lexical | 3 |" in text.stdout

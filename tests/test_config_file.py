"""Writers of the user config (config_file.py): `config set` and `calibrate --write` at the
same time both keep their changes, and a lock held too long is a one-line error."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slm_rerank import config_file
from slm_rerank.config import ConfigError, read_toml, write_setting

#: Updates each writer makes; two unlocked writers lost about half of theirs.
UPDATES = 150

WRITER = """
import sys
from pathlib import Path
from slm_rerank.calibration.weights import write_judge_weight
from slm_rerank.config import write_setting

path, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
print("ready", flush=True)
sys.stdin.readline()  # both start together
for i in range(count):
    write_judge_weight(path, f"{name}-{i}", 0.5)
    if name == "set":  # as `config set` does, a key of the config itself
        write_setting(path, "top_k", str(i + 1))
"""


def test_two_writers_at_once_keep_every_update(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('format = "json"\n')
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), name, str(UPDATES)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
               for name in ("calibrate", "set")]
    for writer in writers:
        assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
    for writer in writers:
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.flush()
    for writer in writers:
        assert writer.wait(timeout=120) == 0

    data = read_toml(path)
    weights = data["judge_weights"]
    lost = [f"{name}-{i}" for name in ("calibrate", "set") for i in range(UPDATES)
            if f"{name}-{i}" not in weights]
    assert lost == [], f"{len(lost)} of {2 * UPDATES} updates lost"
    assert data["top_k"] == UPDATES and data["format"] == "json"
    # the lock is the folder's own: no lock file is left beside the config
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml"]


def test_a_lock_held_too_long_is_one_line_naming_the_file_and_nothing_is_written(
        tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("top_k = 3\n")
    held = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(ConfigError) as raised, config_file.locked(path, seconds=0.3):
            pass
    finally:
        os.close(held)

    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: another process has been changing it for over 0.3 s")
    assert f"it holds a lock on {tmp_path}" in message
    assert path.read_text() == "top_k = 3\n"


def test_a_symlinked_config_is_changed_where_it_points_and_keeps_its_mode(
        tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "config.toml"
    real.parent.mkdir()
    real.write_text("top_k = 3\n")
    real.chmod(0o640)
    link = tmp_path / "config.toml"
    link.symlink_to(real)

    write_setting(link, "top_k", "9")

    assert link.is_symlink()
    assert read_toml(real)["top_k"] == 9
    assert real.stat().st_mode & 0o777 == 0o640

"""The installed plugins' entry points, listed once and kept between starts.

Listing the entry points reads every installed distribution's metadata (``importlib.metadata``
and the email parser it brings: a sixth of a search's start-up). The command line, a process
per query, keeps the listing in the user's cache folder, under a key made of what is
installed: the interpreter, and each folder of ``sys.path`` that holds ``*.dist-info``,
``*.egg-info``, ``*.egg-link`` or ``*.pth`` entries (or is an egg, with an ``EGG-INFO``
folder), in its order, with their names and times (and each ``entry_points.txt``'s).
Installing, upgrading or removing a distribution changes the key, and the next start reads
the metadata again. The warm process keeps it in memory as well, and its server reads the
same file as the command line does. A cache file that cannot be read, is not this module's,
or was written for another key is ignored and written anew.

The cache folder is the user's (``cache_dir``, ``SLM_RERANK_CACHE_DIR``), never a
repository's; the API and tests read the metadata each time (``cache_listing``).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slm_rerank import digests
from slm_rerank.safefile import open_regular, read_at_most, replace_file

ENTRY_POINT_GROUP = "slm_rerank"
#: Written in every cache file; a file without it (or with another) is not read.
FORMAT = "slm-rerank entry points 1"
#: Folder entries whose names or times say a distribution was installed or removed.
_METADATA_SUFFIXES = (".dist-info", ".egg-info", ".egg-link", ".pth")
#: ``module:attr.attr [extras]``, as an entry point's value is written.
_VALUE = re.compile(r"(?P<module>[\w.]+)\s*(?::\s*(?P<attr>[\w.]+)\s*)?(?:\[.*\]\s*)?$")

#: A cache file larger than this is not read (a few hundred plugins fit in a tenth of it).
MAX_BYTES = 1 << 20

#: Whether ``listed`` may keep the listing in a cache folder: the command line turns it on.
_cached = False
#: the last listing ``listed`` gave while ``_cached`` is on, under its key: a long-lived
#: process (the warm server, its worker) reads it once while nothing is installed or
#: removed, whichever cache folder it is then asked for
_last: tuple[str, list[Listed]] | None = None


def cache_listing(on: bool = True) -> None:
    """Let ``listed`` keep the listing between starts (the command line's ``main``)."""
    global _cached
    _cached = on


@dataclass(frozen=True)
class Listed:
    """One entry point of the group, with what ``PluginInfo`` needs of its distribution."""

    name: str
    value: str
    distribution: str | None
    version: str | None
    #: the distribution comes with a bare install of the host (``host_requirements``)
    builtin: bool
    #: the ``importlib.metadata`` entry point it was read from (None: read from the cache)
    entry_point: Any = field(default=None, compare=False, repr=False)

    def load(self) -> Any:
        """The object the entry point names, imported as ``EntryPoint.load`` does."""
        if self.entry_point is not None:
            return self.entry_point.load()
        found = _VALUE.match(self.value)
        if found is None:
            raise ValueError(f"entry point '{self.name}' has a malformed value {self.value!r}")
        target: Any = importlib.import_module(found.group("module"))
        attrs = found.group("attr")
        for attr in attrs.split(".") if attrs else ():
            target = getattr(target, attr)
        return target


def _from_metadata(bundled: frozenset[str]) -> list[Listed]:
    """The group's entry points as ``importlib.metadata`` reads them, in its order."""
    from importlib.metadata import entry_points

    out = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else None
        out.append(Listed(
            name=ep.name, value=getattr(ep, "value", ""), distribution=dist,
            version=ep.dist.version if ep.dist is not None else None,
            builtin=dist is not None and re.sub(r"[-_.]+", "-", dist).lower() in bundled,
            entry_point=ep))
    return out


def _stamp(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def installed_key() -> str:
    """A digest of what decides the listing: the interpreter, and the folders of
    ``sys.path`` that hold metadata, in their order, with the names and modification times
    of it. A folder with none (the command line's script folder, the warm server's ``/``,
    the folder ``python -c`` starts in) adds no entry point and is left out, so those
    processes share one key and one listing."""
    parts: list[Any] = [FORMAT, sys.executable, sys.version]
    for entry in sys.path:
        folder = entry or "."
        try:
            with os.scandir(folder) as found:
                # an unzipped egg on sys.path is a distribution by its EGG-INFO folder
                names = sorted((e.name, e.path) for e in found
                               if e.name.endswith(_METADATA_SUFFIXES)
                               or e.name.lower() == "egg-info")
        except NotADirectoryError:  # a zip or an egg: its own time says it changed
            parts.append((entry, _stamp(folder)))
            continue
        except OSError:
            continue  # none to read: once there is, its names change the key
        if names:
            parts.append((entry, [(name, _stamp(path),
                                   _stamp(os.path.join(path, "entry_points.txt")))
                                  for name, path in names]))
    return digests.sha256(repr(parts).encode("utf-8", "surrogateescape")).hexdigest()


def _cache_file(folder: Path) -> Path:
    """One file per interpreter: two virtual environments do not take turns, and starting
    in another folder (``python -c`` puts it on ``sys.path``) adds no file."""
    where = digests.sha256(sys.executable.encode("utf-8", "surrogateescape"))
    return folder / "plugins" / f"entry-points-{where.hexdigest()[:16]}.json"


def _read(path: Path, key: str) -> list[Listed] | None:
    """The listing a cache file holds for ``key``; None when it is missing, unreadable, not
    this module's, or for another key."""
    try:
        fd = open_regular(path, os.O_RDONLY)  # never a symlink's target, never a FIFO
        try:
            raw = read_at_most(fd, MAX_BYTES + 1)
        finally:
            os.close(fd)
        if len(raw) > MAX_BYTES:
            return None
        data = json.loads(raw)
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != key:
            return None
        found = [Listed(row["name"], row["value"], row["distribution"], row["version"],
                        row["builtin"]) for row in data["entry_points"]]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    for row in found:
        if not (isinstance(row.name, str) and isinstance(row.value, str)
                and isinstance(row.distribution, str | None)
                and isinstance(row.version, str | None) and isinstance(row.builtin, bool)):
            return None
    return found


def _write(path: Path, key: str, found: list[Listed]) -> None:
    """Replace the cache file at once (a reader sees the old file or the new one; a symlink
    or FIFO at its name is replaced, not followed); a folder that cannot be written only
    costs the next start the metadata read."""
    rows = [{"name": row.name, "value": row.value, "distribution": row.distribution,
             "version": row.version, "builtin": row.builtin} for row in found]
    data = {"format": FORMAT, "key": key, "entry_points": rows}
    with contextlib.suppress(OSError):
        replace_file(path, json.dumps(data))


def listed(bundled: Callable[[], frozenset[str]], cache_folder: Path | None = None) -> list[Listed]:
    """The group's entry points: from ``cache_folder`` when ``cache_listing`` is on and the
    cache there was written for what is installed now, else from the metadata (and then
    kept there); kept in the process too, so asked again while the same is installed, it
    reads neither. ``bundled`` is a callable giving ``host_requirements()``, asked only
    when the metadata is read."""
    global _last
    if not _cached or cache_folder is None:
        return _from_metadata(bundled())
    key = installed_key()
    if _last is not None and _last[0] == key:
        return list(_last[1])
    path = _cache_file(cache_folder)
    found = _read(path, key)
    if found is None:
        found = _from_metadata(bundled())
        _write(path, key, found)
    _last = (key, found)
    return list(found)

"""What a long-lived process keeps between searches: the ``Host`` of a configuration.

The MCP server and a script calling ``slm_rerank.search`` in a loop ask for the same
settings and plugins on every call; reading the config files and every distribution's
entry points again each time cost a warm call most of its time (issue 30). A ``HostCache``
keeps a host while what it was built from is unchanged: the user's config file and the
repository's ``.slm-rerank.toml`` (path, size, modification and change times, inode), and
the environment variables the settings read. A repository's file is untrusted and may
change between two calls: the next call then reads it again, as a new process would.

The plugins loaded (what is installed) are kept for the process's life, as the MCP server
always kept them: a host rebuilt for a changed file reuses the plugin manager of one built
before when both disable the same plugins under the same ``$SLM_RERANK_LOAD_PLUGINS``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from slm_rerank.config import Settings, repo_config_path, user_config_path
from slm_rerank.config_keys import REMOVED_ENV
from slm_rerank.host import Host
from slm_rerank.plugins import LOAD_PLUGINS_ENV

#: hosts kept per cache: a server answering for a few roots, each config changed now and then
MAX_HOSTS = 8

#: a file's identity and version: (inode, size, mtime ns, ctime ns); None: absent
FileStamp = tuple[int, int, int, int] | None


def _stamp(path: Path | None) -> FileStamp:
    if path is None:
        return None
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _environment_names() -> tuple[str, ...]:
    names = [name for f in fields(Settings) for name in f.metadata.get("env", ())]
    return (*names, *REMOVED_ENV)


@dataclass(frozen=True)
class ConfigStamp:
    """What the settings for a folder are read from, as it is now."""

    user: str
    user_file: FileStamp
    repo: str | None
    repo_file: FileStamp
    environment: tuple[str | None, ...]
    #: ``$SLM_RERANK_LOAD_PLUGINS``: which installed plugins are loaded
    plugins: str | None

    @classmethod
    def of(cls, start: Path) -> ConfigStamp:
        user = user_config_path()
        repo = repo_config_path(start)
        return cls(str(user), _stamp(user), None if repo is None else str(repo), _stamp(repo),
                   tuple(os.environ.get(name) for name in _environment_names()),
                   os.environ.get(LOAD_PLUGINS_ENV))


@dataclass
class HostCache:
    """Validated hosts by the config they were read from and the caller's ``flags``.

    ``prepare`` is called once on each host built (the MCP server gives it its model
    session). Thread-safe; a host it returns is shared: a caller sets its own values
    through ``with_overrides``, which copies.
    """

    prepare: Callable[[Host], None] | None = None
    _hosts: dict[tuple[ConfigStamp, str], Host] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def host_for(self, start: Path, flags: dict[str, Any] | None = None) -> Host:
        """The host for ``start``: the kept one while its config files are unchanged, else
        one read again (a ``ConfigError`` from a file that became unusable is raised)."""
        stamp = ConfigStamp.of(start)
        key = (stamp, repr(sorted((flags or {}).items())))
        with self._lock:
            host = self._hosts.get(key)
            if host is not None:
                return host
            loaded = [(k[0].plugins, h) for k, h in self._hosts.items()]
        host = Host.from_environment(start=start, flags=flags)
        donor = next((h for plugins, h in reversed(loaded) if plugins == stamp.plugins
                      and h.pm is not None
                      and h.settings.disabled_plugins == host.settings.disabled_plugins), None)
        if donor is not None:
            host.pm, host.infos = donor.pm, donor.infos
        host.registry  # noqa: B018 - load the plugins now, so per-call copies share them
        host.validate()
        if self.prepare is not None:
            self.prepare(host)
        with self._lock:
            self._hosts[key] = host
            while len(self._hosts) > MAX_HOSTS:
                del self._hosts[next(iter(self._hosts))]
        return host


#: the Python API's hosts, for ``slm_rerank.search`` called without one
API_HOSTS = HostCache()

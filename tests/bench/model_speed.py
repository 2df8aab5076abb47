#!/usr/bin/env python3
"""The model stage's speed against the model server it talks to, side by side in one run.

    python tests/bench/model_speed.py [--endpoint URL] [--chunks 32] [--reps 3]
        [--root DIR] [--query TEXT] [--parts overhead,prefix,latency]

Without --endpoint it starts the bundled llama-server (contrib/llama-server: the binary and
GGUF ``make install`` brings) on a free loopback port with ``--parallel 2`` and stops it at
the end; with --endpoint it measures whatever server answers there (a GPU box, vLLM), so a
stronger judge can be timed the same way.

Three measurements, each interleaved (A, B, B, A, A, B, ...) so that machine noise and a
drifting load hit every system alike, reported as medians and ratios:

1. overhead: the same N chunks (the lexical head of a real query over --root, sliced and
   cut by slm-rerank) judged by
     - ``stage``: ``slm_rerank.model.stage.judge`` as the CLI calls it once per process
       (asyncio.run, server probe, answer-word tokenize, score cache off);
     - ``scorer``: the yesno scorer through ``scoring.collect`` on a reused ModelClient with
       the answer-word ids known (a long-lived process: MCP server, Python API);
     - ``raw``: the exact same prompts sent straight to the server with httpx, batched the
       same way (arrays of ``slots`` prompts, one batch at a time, same n_probs).
   Each run appends its own nonce to the query, so no run finds its query in the server's
   prompt cache from an earlier run; the instruction and examples before the query are
   reused by every run alike, as they are in real use.
2. prefix reuse (llama.cpp only): the share of prompt tokens the server took from its
   cache over one scorer run, sum(timings.cache_n) / sum(cache_n + prompt_n); and the
   query-first layout (the profile's: instruction + query before the chunk) against a
   chunk-first layout (the same prompt with the chunk moved to the front), interleaved.
3. latency: the CLI on --root, head of 16, wall time and its JSON ``timings``: score cache
   off (``--no-cache``), score cache warm (a second run of the same query), ``--fast``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from slm_rerank.host import Host
from slm_rerank.model import discovery
from slm_rerank.model.client import ModelClient
from slm_rerank.model.passages import Passage
from slm_rerank.model.passages import head_passages as passages
from slm_rerank.model.profiles import choose_profile
from slm_rerank.model.scoring import collect
from slm_rerank.model.stage import judge
from slm_rerank.pipeline import SearchRequest, gather, head, query_terms, rank
from slm_rerank.registrations import Endpoint, ModelProfile, ScoreRequest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
QUERY = "where does the model client read the top logprobs of a llama.cpp completion answer"
TOP_K = 20  # the yesno scorer's default top_k: n_probs in every request
# Recent llama-server builds keep earlier prompts in a host-memory cache (--cache-ram,
# 8 GiB by default), so a prompt sent before is served from it: every run carries a nonce
# of this invocation, so no run reuses another run's prompts, also on a long-lived server.
SESSION = os.urandom(3).hex()


# --- setting up ---------------------------------------------------------------------------


def start_bundled(slots: int, ctx_per_slot: int) -> Any:
    sys.path.insert(0, str(REPO / "contrib" / "llama-server"))
    import llamaserver

    installed = llamaserver.find_installed()
    return llamaserver.start(installed, slots=slots, ctx_size=slots * ctx_per_slot,
                             wait=120.0)


def find_endpoint(url: str) -> Endpoint:
    async def ask() -> Endpoint:
        async with httpx.AsyncClient() as http:
            found = await discovery.probe(http, discovery.check_base_url(url), timeout=10.0)
        if found.endpoint is None:
            raise SystemExit(f"{url}: not a usable model server ({found.reason})")
        return found.endpoint
    return asyncio.run(ask())


def head_passages(host: Host, root: Path, query: str, count: int) -> list[Passage]:
    """The first ``count`` chunks of the file-diverse lexical head, as the model reads them."""
    terms = query_terms(query)
    request = SearchRequest(query=query, root=root, fast=True)
    notes: list[str] = []
    ranked = rank(request, host, gather(request, host, terms, notes), notes)
    return passages(ranked, head(ranked, count), terms, host.settings.prompt_chars)


def chunk_first(profile: ModelProfile) -> ModelProfile:
    """The profile's prompt with the chunk moved to the very front (no shared prefix)."""
    template = profile.completion.replace("{document}", "(the document above)")
    return dataclasses.replace(profile, completion="Document:\n{document}\n\n" + template)


# --- the systems --------------------------------------------------------------------------


@dataclass
class RunStats:
    """What the server said about one run's requests (only the raw path can read it)."""

    cache_n: int = 0
    prompt_n: int = 0
    prompt_ms: float = 0.0
    requests: int = 0
    answers: int = 0


def batches(items: Sequence[str], size: int) -> list[list[str]]:
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


async def raw_run(endpoint: Endpoint, prompts: Sequence[str], stats: RunStats,
                  timeout: float) -> None:
    """The prompts in arrays of ``slots``, one array at a time: what a hand-written client sends."""
    base = endpoint.base_url.rstrip("/")
    async with httpx.AsyncClient(timeout=timeout) as http:
        for batch in batches(prompts, max(1, endpoint.slots)):
            if endpoint.kind == "llama.cpp":
                body: dict[str, Any] = {"prompt": batch, "n_predict": 1, "n_probs": TOP_K,
                                        "temperature": 0, "cache_prompt": True}
                response = await http.post(base + "/completion", json=body)
            else:
                body = {"prompt": batch, "max_tokens": 1, "logprobs": TOP_K,
                        "temperature": 0}
                if endpoint.model_id:
                    body["model"] = endpoint.model_id
                response = await http.post(base + "/v1/completions", json=body)
            response.raise_for_status()
            answer = response.json()
            stats.requests += 1
            for item in answer if isinstance(answer, list) else [answer]:
                stats.answers += 1
                timings = item.get("timings") or {}
                stats.cache_n += int(timings.get("cache_n", 0))
                stats.prompt_n += int(timings.get("prompt_n", 0))
                stats.prompt_ms += float(timings.get("prompt_ms", 0.0))
    if stats.answers != len(prompts):
        raise SystemExit(f"{base}: {stats.answers} answers for {len(prompts)} prompts")


def scorer_request(host: Host, query: str, docs: list[Any], profile: ModelProfile,
                   endpoint: Endpoint, client: ModelClient) -> ScoreRequest:
    return ScoreRequest(query=query, documents=docs, profile=profile, endpoint=endpoint,
                        deadline=None, options=host.options_for("yesno"), client=client)


async def scorer_run(host: Host, query: str, docs: list[Any], profile: ModelProfile,
                     endpoint: Endpoint, http: httpx.AsyncClient | None = None,
                     timeout: float = 600.0) -> int:
    scorer = host.registry.scorers()["yesno"]
    async with ModelClient(timeout=timeout, http=http) as client:
        outcome = await collect(scorer, scorer_request(host, query, docs, profile, endpoint,
                                                       client))
    if outcome.stopped:
        raise SystemExit(f"scorer run stopped: {outcome.stopped}")
    return len(outcome.scores)


class Recorder(httpx.AsyncBaseTransport):
    """Passes requests on and keeps every JSON body sent and answered, for checking."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.exchanges: list[tuple[str, Any, Any]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        body = await response.aread()
        sent = json.loads(request.content) if request.content else None
        self.exchanges.append((request.url.path, sent, json.loads(body) if body else None))
        return httpx.Response(response.status_code, headers=response.headers, content=body,
                              request=request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def check_same_prompts(host: Host, query: str, docs: list[Any], profile: ModelProfile,
                       endpoint: Endpoint) -> tuple[RunStats, int]:
    """One recorded scorer run: its prompts must be the raw path's, batch for batch.

    Returns the server's cache figures over that run and the number of other requests
    (tokenize) it made.
    """
    recorder = Recorder()

    async def run() -> None:
        async with httpx.AsyncClient(transport=recorder, timeout=600.0) as http:
            await scorer_run(host, query, docs, profile, endpoint, http=http)
    asyncio.run(run())
    path = "/completion" if endpoint.kind == "llama.cpp" else "/v1/completions"
    sent = [body["prompt"] for p, body, _ in recorder.exchanges if p == path]
    sent = [s if isinstance(s, list) else [s] for s in sent]
    expected = batches([profile.render_completion(query, d.text) for d in docs],
                       max(1, endpoint.slots))
    if sent != expected:
        raise SystemExit("the scorer sent other prompts or batches than the raw path: "
                         "the overhead comparison would be unfair")
    stats = RunStats()
    for p, _, answer in recorder.exchanges:
        if p != path:
            continue
        stats.requests += 1
        for item in answer if isinstance(answer, list) else [answer]:
            timings = item.get("timings") or {}
            stats.answers += 1
            stats.cache_n += int(timings.get("cache_n", 0))
            stats.prompt_n += int(timings.get("prompt_n", 0))
            stats.prompt_ms += float(timings.get("prompt_ms", 0.0))
    return stats, len(recorder.exchanges) - stats.requests


class HttpClock:
    """Time spent waiting on the server, from every httpx transport in this process.

    ``busy`` counts the time at least one request is in flight (the probe's three GETs
    overlap); ``scoring`` the time of the scoring requests alone. Wall time minus ``busy``
    is what the client itself costs: event loop, plugins, prompts, parsing.
    """

    def __init__(self) -> None:
        self.busy = self.scoring = 0.0
        self.requests = 0
        self._inflight = 0
        self._since = 0.0
        self._original = httpx.AsyncHTTPTransport.handle_async_request

    def __enter__(self) -> HttpClock:
        clock, original = self, self._original

        async def handle(transport: Any, request: httpx.Request) -> httpx.Response:
            clock.requests += 1
            if clock._inflight == 0:
                clock._since = time.perf_counter()
            clock._inflight += 1
            started = time.perf_counter()
            try:
                response = await original(transport, request)
                await response.aread()  # the answer's body is server time too
                return response
            finally:
                now = time.perf_counter()
                if request.url.path in ("/completion", "/v1/completions"):
                    clock.scoring += now - started
                clock._inflight -= 1
                if clock._inflight == 0:
                    clock.busy += now - clock._since

        httpx.AsyncHTTPTransport.handle_async_request = handle  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc_info: object) -> None:
        httpx.AsyncHTTPTransport.handle_async_request = self._original  # type: ignore[method-assign]


@dataclass
class Timed:
    wall: float
    busy: float
    scoring: float
    requests: int


def timed(call: Callable[[], object]) -> Timed:
    with HttpClock() as clock:
        started = time.perf_counter()
        call()
        wall = time.perf_counter() - started
    return Timed(wall, clock.busy, clock.scoring, clock.requests)


# --- the measurements ---------------------------------------------------------------------


@dataclass
class Series:
    runs: dict[str, list[Timed]] = field(default_factory=dict)
    stats: dict[str, list[RunStats]] = field(default_factory=dict)

    def add(self, name: str, run: Timed, stats: RunStats | None = None) -> Timed:
        self.runs.setdefault(name, []).append(run)
        if stats is not None:
            self.stats.setdefault(name, []).append(stats)
        print(f"  {name}: {run.wall:.2f} s", file=sys.stderr)
        return run

    def seconds(self, name: str) -> list[float]:
        return [r.wall for r in self.runs[name]]

    def median(self, name: str) -> float:
        return statistics.median(self.seconds(name))


def overhead(host: Host, endpoint: Endpoint, profile: ModelProfile, ps: list[Passage],
             query: str, reps: int, systems: Sequence[str], out: list[str]) -> None:
    import slm_rerank_yesno

    docs = [p.document(i) for i, p in enumerate(ps)]
    settings = dataclasses.replace(host.settings, base_url=endpoint.base_url,
                                   score_cache=False, timeout=600.0, model=profile.name)
    series = Series()
    for rep in range(reps):
        # A B, B A, A B, ...: a load that drifts during the run favours neither side.
        for system in (systems if rep % 2 == 0 else list(reversed(systems))):
            q = f"{query} (run {SESSION}-{rep}-{system})"
            if system == "stage":
                slm_rerank_yesno.ANSWER_IDS.clear()  # a CLI process asks for them every query

                def call(q: str = q) -> None:
                    judgement = judge(q, ps, host, settings, None)
                    if judgement.degraded or len(judgement.scores) != len(ps):
                        raise SystemExit(f"stage run degraded: {judgement.degraded}")
                series.add(system, timed(call))
            elif system == "scorer":
                series.add(system, timed(lambda q=q: asyncio.run(
                    scorer_run(host, q, docs, profile, endpoint))))
            else:
                stats = RunStats()
                prompts = [profile.render_completion(q, d.text) for d in docs]
                series.add(system, timed(lambda p=prompts, s=stats: asyncio.run(
                    raw_run(endpoint, p, s, 600.0))), stats)
    raw = series.median("raw")
    out.append(f"\n### Overhead: {len(ps)} chunks, {reps} interleaved runs per system\n")
    out.append("| system | median s | min s | max s | chunks/s | throughput / raw | "
               "requests | waiting on the server, s | the rest (client), ms |")
    out.append("|:--|--:|--:|--:|--:|--:|--:|--:|--:|")
    for name in systems:
        runs = series.runs[name]
        med = series.median(name)
        values = series.seconds(name)
        rest = statistics.median((r.wall - r.busy) * 1000 for r in runs)
        out.append(f"| {name} | {med:.2f} | {min(values):.2f} | {max(values):.2f} | "
                   f"{len(ps) / med:.3f} | {raw / med:.3f} | "
                   f"{statistics.median(r.requests for r in runs):.0f} | "
                   f"{statistics.median(r.busy for r in runs):.2f} | {rest:.1f} |")
    for name in systems:
        if name == "raw":
            continue
        paired = [r / s for r, s in zip(series.seconds("raw"), series.seconds(name),
                                        strict=True)]
        other = statistics.median((r.busy - r.scoring) * 1000 for r in series.runs[name])
        out.append(f"\n{name}: per-repetition throughput ratio {name}/raw "
                   f"{', '.join(f'{x:.3f}' for x in paired)} (median "
                   f"{statistics.median(paired):.3f}); requests other than scoring "
                   f"(probe, tokenize) waited {other:.1f} ms per run")
    raw_stats = series.stats["raw"]
    if endpoint.kind == "llama.cpp":
        tokens = statistics.median(s.prompt_n for s in raw_stats)
        out.append(f"\nraw runs: median {tokens:.0f} prompt tokens computed and "
                   f"{statistics.median(s.cache_n for s in raw_stats):.0f} taken from the "
                   f"cache per run: about {tokens / raw:.0f} computed tokens/s of wall time")


def prefix(host: Host, endpoint: Endpoint, profile: ModelProfile, ps: list[Passage],
           query: str, reps: int, out: list[str]) -> None:
    docs = [p.document(i) for i, p in enumerate(ps)]
    recorded, other = check_same_prompts(host, f"{query} (run {SESSION}-check)", docs,
                                         profile, endpoint)
    out.append(f"\n### Prefix reuse: {len(ps)} chunks, {reps} interleaved runs per layout\n")
    out.append(f"One scorer run (recorded; its prompts were checked equal to the raw path's, "
               f"batch for batch; {other} other requests: answer-word tokenize): "
               f"{recorded.requests} /completion requests, "
               f"{recorded.cache_n} prompt tokens from the cache and {recorded.prompt_n} "
               f"computed: **{recorded.cache_n / max(1, recorded.cache_n + recorded.prompt_n):.1%} "
               "served from the cache**.\n")
    layouts = {"query-first (profile)": profile, "chunk-first": chunk_first(profile)}
    series = Series()
    for rep in range(reps):
        order = list(layouts.items())
        for name, layout in (order if rep % 2 == 0 else list(reversed(order))):
            stats = RunStats()
            # The nonce opens every prompt: the chunk-first layout would otherwise find its
            # chunks, which open its prompts, cached from the previous repetition.
            nonce = f"[run {SESSION}-{rep}-{name.split()[0]}]\n"
            prompts = [nonce + layout.render_completion(query, d.text) for d in docs]
            series.add(name, timed(lambda p=prompts, s=stats: asyncio.run(
                raw_run(endpoint, p, s, 600.0))), stats)
    first = series.median("query-first (profile)")
    out.append("| layout | median s | tokens/run | from cache | computed | cache share | "
               "speed-up of query-first |")
    out.append("|:--|--:|--:|--:|--:|--:|--:|")
    for name in layouts:
        stats = series.stats[name]
        cached = statistics.median(s.cache_n for s in stats)
        computed = statistics.median(s.prompt_n for s in stats)
        share = cached / max(1, cached + computed)
        out.append(f"| {name} | {series.median(name):.2f} | {cached + computed:.0f} | "
                   f"{cached:.0f} | {computed:.0f} | {share:.1%} | "
                   f"{series.median(name) / first:.2f}x |")
    paired = [c / q for q, c in zip(series.seconds("query-first (profile)"),
                                    series.seconds("chunk-first"), strict=True)]
    out.append(f"\nper-repetition speed-up: {', '.join(f'{x:.2f}x' for x in paired)}")


def latency(endpoint: Endpoint, root: Path, query: str, reps: int, top: int,
            out: list[str]) -> None:
    cache_dir = tempfile.mkdtemp(prefix="slm-rerank-speed-cache-")
    env = {**os.environ, "SLM_RERANK_CACHE_DIR": cache_dir}
    base = [str(BIN / "slm-rerank"), "-q", query, "--root", str(root), "--format", "json",
            "--rerank-top", str(top)]
    commands = {
        "rerank, score cache off (`--no-cache`)": base + ["-e", endpoint.base_url,
                                                          "--no-cache"],
        "rerank, score cache warm": base + ["-e", endpoint.base_url],
        "`--fast`": base + ["--fast"],
    }

    def run(argv: list[str]) -> tuple[float, dict[str, Any]]:
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
        wall = (time.perf_counter() - started) * 1000
        report = json.loads(done.stdout)
        if report.get("degraded"):
            raise SystemExit(f"{argv}: degraded: {report['degraded']}")
        return wall, report

    # Warm-up: the chunk cache, and the score cache for the warm variant.
    run(commands["rerank, score cache warm"])
    walls: dict[str, list[float]] = {name: [] for name in commands}
    splits: dict[str, list[dict[str, float]]] = {name: [] for name in commands}
    for rep in range(reps):
        order = list(commands.items())
        for name, argv in (order if rep % 2 == 0 else list(reversed(order))):
            wall, report = run(argv)
            walls[name].append(wall)
            splits[name].append(report["timings"])
            print(f"  latency rep {rep} {name}: {wall:.0f} ms", file=sys.stderr)
    out.append(f"\n### Latency: head of {top} on {root.name}, {reps} interleaved runs each\n")
    out.append("| command | wall ms | sources_ms | rank_ms | model_ms | total_ms |")
    out.append("|:--|--:|--:|--:|--:|--:|")
    for name in commands:
        def med(key: str, name: str = name) -> str:
            values = [t[key] for t in splits[name] if key in t]
            return f"{statistics.median(values):.0f}" if values else "–"
        out.append(f"| {name} | {statistics.median(walls[name]):.0f} | {med('sources_ms')} | "
                   f"{med('rank_ms')} | {med('model_ms')} | {med('total_ms')} |")
    out.append(f"\n(each process starts afresh; score cache in a fresh folder {cache_dir})")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--endpoint", help="model server URL; default: start the bundled "
                    "llama-server")
    ap.add_argument("--slots", type=int, default=2, help="--parallel of the started server")
    ap.add_argument("--ctx-per-slot", type=int, default=2048)
    ap.add_argument("--root", type=Path, default=REPO, help="tree to take chunks from and "
                    "to search in the latency runs (default: this repository)")
    ap.add_argument("--query", default=QUERY)
    ap.add_argument("--chunks", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--latency-reps", type=int, help="repetitions of the CLI runs (default "
                    "--reps)")
    ap.add_argument("--rerank-top", type=int, default=16, help="head size of the CLI runs")
    ap.add_argument("--model", help="model profile (default: the one claiming the model id)")
    ap.add_argument("--parts", default="overhead,prefix,latency")
    ap.add_argument("--systems", default="stage,raw", help="overhead systems, interleaved in "
                    "this order: stage, scorer, raw (raw must be one)")
    args = ap.parse_args()
    parts = set(args.parts.split(","))

    server = None
    url = args.endpoint
    if url is None:
        server = start_bundled(args.slots, args.ctx_per_slot)
        url = server.base_url
    try:
        endpoint = find_endpoint(url)
        host = Host.from_environment(start=args.root)
        choice = choose_profile(host.registry.profiles(), model_id=endpoint.model_id,
                                requested=args.model)
        if choice is None:
            raise SystemExit("no model profile installed")
        profile = choice.profile
        ps = head_passages(host, args.root.resolve(), args.query, args.chunks)
        out = [f"endpoint {endpoint.base_url} ({endpoint.kind}, model {endpoint.model_id}, "
               f"{endpoint.slots} slots); profile {profile.name}; {len(ps)} chunks from "
               f"{len({p.path for p in ps})} files of {args.root.resolve().name}, "
               f"{sum(len(p.code) for p in ps) / max(1, len(ps)):.0f} characters each on "
               f"average; query {args.query!r}",
               f"{platform.machine()}, {os.cpu_count()} cores, Python "
               f"{platform.python_version()}; at start: {load()}"]
        started = time.perf_counter()
        if "overhead" in parts:
            overhead(host, endpoint, profile, ps, args.query, args.reps,
                     args.systems.split(","), out)
        if "prefix" in parts and endpoint.kind == "llama.cpp":
            prefix(host, endpoint, profile, ps, args.query, args.reps, out)
        if "latency" in parts:
            latency(endpoint, args.root.resolve(), args.query,
                    args.latency_reps or args.reps, args.rerank_top, out)
        out.append(f"\nrun took {time.perf_counter() - started:.0f} s; at the end: {load()}")
        print("\n".join(out))
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

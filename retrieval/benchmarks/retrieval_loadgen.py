"""Closed-loop HTTP load generator for /retrieve: `concurrency` aiohttp clients in one process, JSON report on stdout.

Run several of these processes side by side (bench_retrieval_gpu.py does) so the client side is not one
core's worth of Python. Each client sends one request, waits for the answer, sends the next. Only
requests that complete inside the measuring window [start_at + warmup, start_at + warmup + duration]
count (latencies: those also sent inside it); the report carries their latencies, the status counts
and the CPU seconds this process used in that window. Needs aiohttp only (uvloop when present).

`--start-at stdin`: the process prints `ready` once its imports and request bodies are done and reads the start
time from its stdin, so a driver can set one window for all its processes after the slowest has started (on a
loaded machine a fixed lead can pass before a process is up, and it would measure nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

import aiohttp
from retrieval_gpu_fixtures import make_queries


@dataclass
class Tally:
    window: tuple[float, float]
    latencies_ms: list[float] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)
    queries: int = 0
    bad_bodies: int = 0


def _cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def _client(
    session: aiohttp.ClientSession,
    url: str,
    bodies: list[bytes],
    per_request: int,
    tally: Tally,
    stop_at: float,
    seed: int,
) -> None:
    rng = random.Random(seed)
    headers = {"content-type": "application/json"}
    while (t0 := time.perf_counter()) < stop_at:
        body = rng.choice(bodies)
        try:
            async with session.post(url, data=body, headers=headers) as resp:
                payload = await resp.read()
                status = resp.status
        except aiohttp.ClientError as err:
            status, payload = f"client_error:{type(err).__name__}", b""
        t1 = time.perf_counter()
        if tally.window[0] <= t1 <= tally.window[1]:
            tally.statuses[str(status)] += 1
            if status == 200:
                if t0 >= tally.window[0]:  # a request sent during warm-up may include connection set-up
                    tally.latencies_ms.append((t1 - t0) * 1000)
                tally.queries += per_request
                if not payload[:16].replace(b" ", b"").startswith(b'{"result":[['):  # any JSON spacing
                    tally.bad_bodies += 1


async def run(
    url: str,
    concurrency: int,
    duration: float,
    warmup: float,
    start_at: float | None,
    seed: int,
    topk: int,
    per_request: int,
) -> dict:
    """start_at: epoch seconds, 0 now, None: said by the driver on stdin once this process is ready."""
    queries = make_queries(2048, seed=seed)
    rng = random.Random(seed)
    bodies = [
        json.dumps({"queries": rng.sample(queries, per_request), "topk": topk, "return_scores": False}).encode()
        for _ in range(1024)
    ]
    if start_at is None:
        print("ready", flush=True)
        line = sys.stdin.readline()
        try:
            start_at = float(line)
        except ValueError:
            raise SystemExit(f"retrieval_loadgen: expected the start time (epoch seconds) on stdin: {line!r}") from None
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        delay = start_at - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        # The window is absolute (start_at + warmup on the wall clock): a process that starts late still measures
        # the same seconds as the others and as the server's CPU counters.
        begin = (start_at if start_at > 0 else time.time()) + warmup - time.time() + time.perf_counter()
        tally = Tally(window=(begin, begin + duration))
        cpu_at_window = None

        async def _mark_window() -> None:
            nonlocal cpu_at_window
            await asyncio.sleep(max(0.0, begin - time.perf_counter()))
            cpu_at_window = _cpu_seconds()

        marker = asyncio.create_task(_mark_window())
        await asyncio.gather(
            *(
                _client(session, url, bodies, per_request, tally, tally.window[1], seed * 100_003 + i)
                for i in range(concurrency)
            )
        )
        await marker
        cpu = _cpu_seconds() - (cpu_at_window or 0.0)
    return {
        "concurrency": concurrency,
        "duration_s": duration,
        "queries": tally.queries,
        "statuses": dict(tally.statuses),
        "bad_bodies": tally.bad_bodies,
        "latencies_ms": tally.latencies_ms,
        "cpu_s": cpu,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--url", required=True, help="e.g. http://127.0.0.1:8123/retrieve")
    p.add_argument("--concurrency", type=int, required=True, help="clients in this process")
    p.add_argument("--duration", type=float, default=10.0, help="measured seconds")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds of load before measuring")
    p.add_argument(
        "--start-at",
        default="0",
        help="epoch seconds to start at (aligns processes); 0: now; stdin: print ready, then read it from stdin",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--topk", type=int, default=3)
    p.add_argument("--queries-per-request", type=int, default=1)
    args = p.parse_args(argv)
    if args.concurrency < 1 or args.duration <= 0 or args.warmup < 0 or args.queries_per_request < 1:
        p.error("concurrency and queries-per-request must be >= 1, duration > 0 and warmup >= 0")
    try:
        start_at = None if args.start_at == "stdin" else float(args.start_at)
    except ValueError:
        p.error(f"--start-at {args.start_at!r}: give epoch seconds, 0 (now) or stdin")
    try:
        from uvloop import run as run_loop
    except ImportError:
        run_loop = asyncio.run
    report = run_loop(
        run(
            args.url,
            args.concurrency,
            args.duration,
            args.warmup,
            start_at,
            args.seed,
            args.topk,
            args.queries_per_request,
        )
    )
    json.dump(report, sys.stdout)


if __name__ == "__main__":
    main()

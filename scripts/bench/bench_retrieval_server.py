"""Benchmark: the MR-Search retrieval server vs a Search-R1-style server, 256 concurrent single-query clients.

Same machine, encoder (bundled all-MiniLM-L6-v2, e5 prefixes), FAISS Flat index and corpus (the embedded
world) for both. The baseline serves the way Search-R1's retrieval_server.py does: a synchronous FastAPI
endpoint (run in Starlette's thread pool) that encodes and searches each request on its own. The load
generator runs in its own process (aiohttp) and reports the CPU it used itself. Also measured: bare
batched encode+search throughput in one process, and the server's fraction of it.

Both servers run with the same OMP_WAIT_POLICY (by default OpenMP's own, as both servers run unless the user sets
it; --omp-wait-policy PASSIVE measures a machine shared with busy processes, where sleeping idle threads leave the
cores to HTTP), so the ratio measures cross-request batching, not that knob. Bare is measured in fresh processes
with that policy and with OpenMP's default, and the best figure per batch size counts, so the ceiling is never
lowered by the knob. The encoder (bf16 matrix products on CPUs with native bf16, length-sorted sub-batches) is the
same everywhere.

    python scripts/bench/bench_retrieval_server.py [--duration 20] [--clients 256]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

HERE = Path(__file__).resolve()
BARE_SIZES = (1, 32, 128, 256)


class QueryRequest(BaseModel):
    """Search-R1's request model, verbatim."""

    queries: list[str]
    topk: int | None = None
    return_scores: bool = False


# ---------------------------------------------------------------- baseline server (Search-R1 style)
def serve_baseline(index_dir: str, corpus: str, port: int, torch_threads: int) -> None:
    import torch
    import uvicorn
    from fastapi import FastAPI

    from mr_search_retrieval.config import EncoderConfig
    from mr_search_retrieval.corpus import CorpusStore
    from mr_search_retrieval.encoders import HFEncoder
    from mr_search_retrieval.indexes.faiss_index import FaissIndex

    if torch_threads > 0:  # 0: torch's default, as Search-R1's server runs
        torch.set_num_threads(torch_threads)
    encoder, index = HFEncoder(EncoderConfig(device="cpu")), FaissIndex.load(Path(index_dir), "cpu")
    store = CorpusStore(corpus)
    app = FastAPI()

    @app.post("/retrieve")
    def retrieve(request: QueryRequest):  # sync: Starlette runs it in its thread pool, one request per call
        emb = encoder.encode_queries(request.queries)
        scores, ids = index.search(emb, request.topk or 3)
        return {
            "result": [
                [{"document": store.get(int(i)), "score": float(s)} for s, i in zip(srow, irow, strict=True)]
                for srow, irow in zip(scores, ids, strict=True)
            ]
        }

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


# ---------------------------------------------------------------- load generator (its own process)
async def _load(url: str, clients: int, warmup: float, duration: float, queries: list[str]) -> dict:
    import aiohttp

    latencies: list[float] = []
    answered = [0]  # every 200, warm-up and tail included: the count the server's CPU time is divided by
    errors: dict[str, int] = {}
    t0 = time.perf_counter()
    start, end = t0 + warmup, t0 + warmup + duration
    cpu0: list[float] = []

    async def client(session: aiohttp.ClientSession, c: int) -> None:
        n = c
        while (now := time.perf_counter()) < end:
            payload = {"queries": [queries[n % len(queries)]], "topk": 3, "return_scores": True}
            n += clients
            try:
                async with session.post(url, json=payload) as r:
                    await r.read()
                    ok = r.status == 200
                    answered[0] += ok
                    if not ok:
                        errors[str(r.status)] = errors.get(str(r.status), 0) + 1
            except Exception as err:
                ok = False
                errors[type(err).__name__] = errors.get(type(err).__name__, 0) + 1
            done = time.perf_counter()
            if ok and now >= start and done <= end:
                latencies.append(done - now)

    async def cpu_mark() -> None:
        await asyncio.sleep(max(0.0, start - time.perf_counter()))
        ru = resource.getrusage(resource.RUSAGE_SELF)
        cpu0.append(ru.ru_utime + ru.ru_stime)

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
        await asyncio.gather(cpu_mark(), *(client(session, c) for c in range(clients)))
    ru = resource.getrusage(resource.RUSAGE_SELF)
    lat = sorted(latencies)
    pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] if lat else float("nan")  # noqa: E731
    return {
        "qps": len(lat) / duration,
        "p50_s": pct(0.50),
        "p99_s": pct(0.99),
        "requests": len(lat),
        "answered_total": answered[0],
        "errors": errors,
        "loadgen_cpu_cores": (ru.ru_utime + ru.ru_stime - cpu0[0]) / duration,
    }


def run_loadgen(url: str, clients: int, warmup: float, duration: float, questions: str) -> None:
    queries = [json.loads(line)["question"] for line in Path(questions).read_text().splitlines() if line.strip()]
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    print(json.dumps(asyncio.run(_load(url, clients, warmup, duration, queries))))


# ---------------------------------------------------------------- orchestration
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(url: str, proc: subprocess.Popen, timeout: float = 300) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"{url} not ready after {timeout}s")


def _server_env(policy: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    if policy != "default":
        env["OMP_WAIT_POLICY"] = policy
    return env


def _measure(
    cmd: list[str], health: str, url: str, args: argparse.Namespace, questions: Path, metrics: str | None = None
) -> dict:
    log = tempfile.NamedTemporaryFile("w+", prefix="bench_retrieval_", suffix=".log", delete=False)  # noqa: SIM115
    env = _server_env(args.omp_wait_policy)
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        _wait_ready(health, server)
        ru0, server_cpu0 = _children_cpu(), _process_cpu(server.pid)
        loadgen = [sys.executable, str(HERE), "--loadgen", url, "--clients", str(args.clients)]
        loadgen += ["--warmup", str(args.warmup), "--duration", str(args.duration), "--questions", str(questions)]
        out = subprocess.run(
            loadgen,
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(out.stdout.strip().splitlines()[-1])
        result["loadgen_cpu_s_total"] = round(_children_cpu() - ru0, 2)
        # CPU seconds per answered query: robust to a shared machine, unlike q/s.
        result["server_cpu_ms_per_query"] = (
            1000 * (_process_cpu(server.pid) - server_cpu0) / max(1, result["answered_total"])
        )
        if metrics:
            result["server_metrics"] = _scrape(metrics)
        return result
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        print(f"  (server log: {log.name})")


def _process_cpu(pid: int) -> float:
    """user + system CPU seconds of a running process and its child processes (--http-workers), Linux /proc."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if stat.parent.name == str(pid) or int(fields[1]) == pid:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _scrape(url: str) -> dict:
    import urllib.request

    text = urllib.request.urlopen(url, timeout=5).read().decode()
    values = dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
    batches = float(values.get("mr_search_retrieval_batch_size_count", 0))
    return {
        "batches": batches,
        "mean_batch_size": float(values.get("mr_search_retrieval_batch_size_sum", 0)) / max(batches, 1.0),
        "mean_batch_seconds": float(values.get("mr_search_retrieval_batch_seconds_sum", 0)) / max(batches, 1.0),
    }


def _bare_throughput(
    index_dir: Path, questions: Path, batch_sizes: list[int], threads: int
) -> dict[int, tuple[float, float]]:
    """Encode + search in one process, no HTTP: the ceiling the server is measured against."""
    import torch

    from mr_search_retrieval.config import EncoderConfig
    from mr_search_retrieval.encoders import HFEncoder
    from mr_search_retrieval.indexes.faiss_index import FaissIndex
    from mr_search_retrieval.retriever import DenseSearcher

    if threads > 0:
        torch.set_num_threads(threads)
    searcher = DenseSearcher(HFEncoder(EncoderConfig(device="cpu")), FaissIndex.load(index_dir, "cpu"))
    queries = [json.loads(line)["question"] for line in questions.read_text().splitlines() if line.strip()]
    out = {}
    for bs in batch_sizes:
        batch = [queries[i % len(queries)] for i in range(bs)]
        searcher.search(batch, 3)
        n, t0, cpu0 = 0, time.perf_counter(), time.process_time()
        while time.perf_counter() - t0 < 2.0:
            searcher.search(batch, 3)
            n += bs
        out[bs] = (n / (time.perf_counter() - t0), 1000 * (time.process_time() - cpu0) / n)  # q/s, CPU ms/query
    return out


def _bare_best(index_dir: Path, questions: Path, threads: int, policy: str) -> dict[int, tuple[float, float]]:
    """Bare throughput with our thread setting and torch's default, and with the servers' OpenMP wait policy and
    OpenMP's default, each in a fresh process; the best per size counts (the ceiling is never lowered)."""
    runs = []
    for t in sorted({threads, 0}):
        for pol in sorted({policy, "default"}):
            cmd = [sys.executable, str(HERE), "--bare", str(index_dir), str(questions), "--torch-threads", str(t)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=_server_env(pol))
            runs.append({int(k): tuple(v) for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()})
    return {b: max((r[b] for r in runs), key=lambda v: v[0]) for b in BARE_SIZES}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, default=256)
    p.add_argument("--warmup", type=float, default=4.0)
    p.add_argument("--duration", type=float, default=20.0, help="measured seconds per server")
    p.add_argument("--max-batch-size", type=int, default=128)
    p.add_argument("--max-wait-ms", type=float, default=2.0)
    # Ours: one intra-op thread leaves the second core to HTTP and the load generator. The baseline keeps
    # torch's default (0), as Search-R1's server does; bare is measured with both and the best counts.
    p.add_argument("--torch-threads", type=int, default=0, help="ours: 0 = torch's default, as the server runs")
    p.add_argument("--baseline-torch-threads", type=int, default=0)
    p.add_argument("--http-workers", type=int, default=0, help="ours: 0 one process; N HTTP fronts + a search worker")
    # Both servers get the same policy, so the ratio measures batching, not this knob.
    p.add_argument(
        "--omp-wait-policy",
        default="default",
        choices=("PASSIVE", "ACTIVE", "default"),
        help="OMP_WAIT_POLICY of both servers (default: unset); bare runs with it and with OpenMP's default",
    )
    p.add_argument("--loadgen", default=None, help=argparse.SUPPRESS)
    p.add_argument("--serve-baseline", nargs=3, metavar=("INDEX_DIR", "CORPUS", "PORT"), help=argparse.SUPPRESS)
    p.add_argument("--questions", default=None, help=argparse.SUPPRESS)
    p.add_argument("--bare", nargs=2, metavar=("INDEX_DIR", "QUESTIONS"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.loadgen:
        return run_loadgen(args.loadgen, args.clients, args.warmup, args.duration, args.questions)
    if args.bare:
        bare = _bare_throughput(Path(args.bare[0]), Path(args.bare[1]), BARE_SIZES, args.torch_threads)
        print(json.dumps(bare))
        return None
    if args.serve_baseline:
        index_dir, corpus, port = args.serve_baseline
        return serve_baseline(index_dir, corpus, int(port), args.torch_threads)  # set from --baseline-torch-threads

    os.environ.setdefault("MR_SEARCH_CACHE", str(HERE.parents[2] / ".cache"))
    from mr_search_retrieval.default_index import ensure_index
    from mr_search_retrieval.embedded.world import ensure_world

    world = ensure_world()
    corpus, questions = Path(world.corpus), Path(world.test)
    index_dir = ensure_index(corpus, "dense", "faiss", "Flat")
    threads = str(args.torch_threads)
    print(
        f"corpus {corpus} ({sum(1 for _ in corpus.open())} passages), FAISS Flat, all-MiniLM-L6-v2, "
        f"{os.cpu_count()} CPU cores, {args.clients} clients x single-query requests, {args.duration:.0f}s each, "
        f"torch threads: ours {threads}, baseline {args.baseline_torch_threads or 'default'}, "
        f"ours --http-workers {args.http_workers}, OMP_WAIT_POLICY of both servers {args.omp_wait_policy}, "
        f"load average at the start {os.getloadavg()}"
    )
    bare_before = _bare_best(index_dir, questions, args.torch_threads, args.omp_wait_policy)

    port = _free_port()
    baseline_cmd = [sys.executable, str(HERE), "--serve-baseline", str(index_dir), str(corpus), str(port)]
    base = _measure(
        [*baseline_cmd, "--torch-threads", str(args.baseline_torch_threads)],
        f"http://127.0.0.1:{port}/docs",
        f"http://127.0.0.1:{port}/retrieve",
        args,
        questions,
    )
    port = _free_port()
    ours_cmd = [sys.executable, "-m", "mr_search_retrieval.server", "--index-dir", str(index_dir)]
    ours_cmd += ["--corpus", str(corpus), "--port", str(port), "--device", "cpu", "--index-device", "cpu"]
    ours_cmd += ["--log-level", "warning", "--torch-threads", threads, "--max-batch-size", str(args.max_batch_size)]
    ours_cmd += ["--max-wait-ms", str(args.max_wait_ms), "--http-workers", str(args.http_workers)]
    ours = _measure(
        ours_cmd,
        f"http://127.0.0.1:{port}/health",
        f"http://127.0.0.1:{port}/retrieve",
        args,
        questions,
        metrics=f"http://127.0.0.1:{port}/metrics",
    )
    bare_after = _bare_best(index_dir, questions, args.torch_threads, args.omp_wait_policy)
    # The machine may be shared: the ceiling is the better of the two bare runs (the conservative choice).
    bare = {b: max(bare_before[b][0], bare_after[b][0]) for b in BARE_SIZES}
    bare_cpu = {b: min(bare_before[b][1], bare_after[b][1]) for b in BARE_SIZES}
    mean_batch = ours.get("server_metrics", {}).get("mean_batch_size", 0.0)
    near = min(BARE_SIZES, key=lambda b: abs(b - mean_batch))

    def row(name: str, r: dict) -> str:
        return (
            f"  {name:<22} {r['qps']:8.1f} q/s   p50 {r['p50_s'] * 1000:8.1f} ms   p99 {r['p99_s'] * 1000:8.1f} ms   "
            f"errors {r['errors'] or 0}   server CPU {r['server_cpu_ms_per_query']:.1f} ms/query   "
            f"load generator CPU {r['loadgen_cpu_cores']:.2f} cores ({r['loadgen_cpu_s_total']:.1f} s)"
        )

    print(row("baseline (Search-R1)", base))
    print(row("mr-search server", ours))
    print(f"  server batches: {ours.get('server_metrics')}")
    print(
        "  bare batched encode+search (best of before/after): "
        + ", ".join(f"batch {b}: {bare[b]:.0f} q/s ({bare_cpu[b]:.1f} CPU ms/query)" for b in BARE_SIZES)
    )
    print(f"  load average (1/5/15 min) at the end: {os.getloadavg()}")
    best = max(BARE_SIZES, key=lambda b: bare[b])
    print(f"RATIO q/s ours/baseline: {ours['qps'] / base['qps']:.1f}x (goal >= 10x)")
    print(f"RATIO p99 baseline/ours: {base['p99_s'] / ours['p99_s']:.1f}x (goal >= 5x)")
    print(
        f"FRACTION of bare batched throughput: {ours['qps'] / bare[best]:.0%} of the best bare batch ({best}); "
        f"{ours['qps'] / bare[near]:.0%} of bare at batch {near}, nearest the server's mean (goal >= 80%)"
    )
    # On a shared machine wall-clock rates follow the neighbours' load; CPU per query does not.
    print(
        f"CPU-TIME RATIO per query baseline/ours: "
        f"{base['server_cpu_ms_per_query'] / ours['server_cpu_ms_per_query']:.1f}x; "
        f"bare/ours at batch {near}: {bare_cpu[near] / ours['server_cpu_ms_per_query']:.0%}"
    )


if __name__ == "__main__":
    main()

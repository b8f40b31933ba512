"""Retrieval at wiki-18 scale on one GPU: the service's exact torch index over 21,015,324 x 768 fp16, served over HTTP.

Measures, in one run on one card: encoder throughput for the index build (passages/s at 256 tokens),
bare search throughput per method (TorchExactIndex.search_tensor: the service's default, which is the
exact two-stage search with the fused Triton block-max kernel on a GPU; the chunked grouped top-k; the
plain chunked top-k) and that two-stage finds what plain finds, the batch pipeline (encode + search),
and the real service (`create_app` + uvicorn on 127.0.0.1) under closed-loop aiohttp clients in separate
processes: queries/s, p50/p99 latency per concurrency and max_batch_size, GPU memory and the CPU used by
server and load generator. An HTTP-only run (a searcher that does no GPU work) gives the service's own
ceiling. The multi-process mode (`--http-workers N`: one search-worker process owning encoder + index, fed by N
HTTP front processes over the streamed protocol) is served last.
On CUDA the service's query encoder replays CUDA graphs captured at startup (graph_encoder.py); the run
times it against the eager forward and checks that both give the same top-k (`--worker-encoders` serves both).
Random vectors and random encoder weights: speed, not quality.

Without a CUDA device it prints "skipped: no GPU" and exits 0, unless --device cpu (a tiny smoke run).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "retrieval"))

logger = logging.getLogger("bench_retrieval_gpu")

WIKI18_PASSAGES = 21_015_324


def _numbers(text: str, cast: type, minimum: float, example: str, noun: str) -> list:
    try:
        values = [cast(v) for v in text.split(",") if v.strip()]
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected comma-separated {noun} like {example}, got {text!r}") from err
    if not values or min(values) < minimum:
        raise argparse.ArgumentTypeError(f"expected {noun} >= {minimum}, got {text!r}")
    return values


def _ints(text: str) -> list[int]:
    return _numbers(text, int, 1, "256,1024", "integers")


def _pairs(text: str) -> list[tuple[int, int]]:
    pairs = []
    for part in (p for p in text.split(",") if p.strip()):
        c, _, q = part.partition("x")
        if not (c.strip().isdigit() and q.strip().isdigit() and int(c) > 0 and int(q) > 0):
            raise argparse.ArgumentTypeError(
                f"expected CxQ items like 64x16 (clients x queries per request), got {text!r}"
            )
        pairs.append((int(c), int(q)))
    return pairs


def _encoder_modes(text: str) -> list[str]:
    modes = [v.strip() for v in text.split(",") if v.strip()]
    if not modes or any(m not in ("graphs", "eager") for m in modes):
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of 'graphs' and 'eager', got {text!r}")
    return modes


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"), help="cpu: smoke run without a GPU")
    p.add_argument("--num-passages", type=int, default=WIKI18_PASSAGES, help="index rows = corpus lines")
    p.add_argument("--passage-words", type=int, default=80, help="words per synthetic passage (~740-byte lines)")
    p.add_argument("--encoder-layers", type=int, default=12)
    p.add_argument("--encoder-hidden", type=int, default=768, help="also the index dimension")
    p.add_argument("--encoder-heads", type=int, default=12)
    p.add_argument("--encoder-intermediate", type=int, default=3072)
    p.add_argument("--encode-batches", type=_ints, default=[256, 512, 1024], help="passage batches to time")
    p.add_argument("--encode-tokens", type=int, default=256, help="tokens per passage for the build throughput")
    p.add_argument("--search-batches", type=_ints, default=[256, 1024], help="query batches for bare search")
    p.add_argument("--concurrency", type=_ints, default=[32, 256, 1024], help="concurrent HTTP clients")
    p.add_argument("--max-batch-sizes", type=_ints, default=[128, 256, 1024], help="service max_batch_size values")
    p.add_argument(
        "--batched",
        type=_pairs,
        default=[(64, 16)],
        help="CxQ points: C clients sending Q queries per request (service at the largest max_batch_size)",
    )
    p.add_argument(
        "--switch-interval-ms",
        type=float,
        default=1.0,
        help="also serve with sys.setswitchinterval at this value (GIL hand-over; 0 skips; Python's default is 5)",
    )
    p.add_argument(
        "--chunk-rows", type=_ints, default=[1 << 18, 1 << 22], help="other chunk sizes to time the service index at"
    )
    p.add_argument(
        "--profile-loop", action="store_true", help="extra rows with cProfile in the server's event-loop thread"
    )
    p.add_argument(
        "--what-if", action="store_true", help="extra rows: the service with its corpus line spans in RAM (not mmap)"
    )
    p.add_argument(
        "--http-workers",
        type=_ints,
        default=[4, 8],
        help="multi-process service rows: HTTP front processes per run (one search worker each; 0 skips)",
    )
    p.add_argument(
        "--worker-encoders",
        type=_encoder_modes,
        default=["graphs"],
        help="multi-process rows: the search worker's query encoder, 'graphs' (CUDA-graph replay, the service's "
        "default on CUDA) and/or 'eager' (each value: one run)",
    )
    p.add_argument(
        "--compare-compile",
        action="store_true",
        help="also time torch.compile(mode='reduce-overhead') of the encoder forward at one bucket vs the graph replay",
    )
    p.add_argument(
        "--front-lanes",
        type=_ints,
        default=[8],
        help="multi-process rows: micro-batches in flight per front (each: a run)",
    )
    p.add_argument(
        "--worker-tile", type=int, default=128, help="multi-process rows: cut merged batches back to multiples (0: off)"
    )
    p.add_argument("--worker-gather-ms", type=float, default=3.0, help="search worker: wait for the other fronts")
    p.add_argument("--worker-torch-threads", type=int, default=0, help="search worker intra-op threads (0: torch's)")
    p.add_argument(
        "--worker-profile", action="store_true", help="sample the search worker's batch-thread stacks (perturbs it)"
    )
    p.add_argument(
        "--multiproc-only",
        action="store_true",
        help="only the multi-process service rows (no encoder, bare search or in-process rows; no result check)",
    )
    p.add_argument("--no-multiproc", action="store_true", help="skip the multi-process service rows")
    p.add_argument(
        "--multiproc-concurrency", type=_ints, default=[32, 256, 1024], help="clients for the multi-process rows"
    )
    p.add_argument("--multiproc-max-batch-size", type=int, default=128, help="max_batch_size of each front")
    p.add_argument("--max-wait-ms", type=float, default=2.0)
    p.add_argument("--topk", type=int, default=3)
    p.add_argument("--duration", type=float, default=10.0, help="measured seconds per load point")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds of load before measuring")
    p.add_argument("--client-procs", type=int, default=8, help="load generator processes (clients split evenly)")
    p.add_argument("--work-dir", type=Path, default=None, help="corpus + encoder dir (default: $MR_SEARCH_CACHE/...)")
    p.add_argument("--json", type=Path, default=None, help="results file (default: $OUT/bench_retrieval_gpu.json)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    import torch

    if args.device != "cpu" and not torch.cuda.is_available():
        print("bench_retrieval_gpu: skipped: no GPU (CUDA is not available); --device cpu runs a small smoke test")
        return 0
    if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available()):
        args.device = "cuda"
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as err:
        sys.exit(f"bench_retrieval_gpu: the service needs fastapi and uvicorn ({err}); install the retrieval extra")
    from retrieval_gpu_bench_run import run_all  # heavy imports only past the skip

    results = run_all(args)
    out = args.json or (Path(os.environ["OUT"]) / "bench_retrieval_gpu.json" if os.environ.get("OUT") else None)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=2) + "\n")
        print(f"results written to {out}")
    return 0


def describe_machine(device: str) -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
        "device": device,
    }
    info["card"] = torch.cuda.get_device_name(0) if device == "cuda" else f"cpu ({platform.processor() or 'x86'})"
    return info


if __name__ == "__main__":
    t_start = time.time()
    code = main()
    logger.info("bench_retrieval_gpu finished in %.0fs", time.time() - t_start)
    sys.exit(code)

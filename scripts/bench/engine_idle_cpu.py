"""What an idle SGLang server costs the host's CPU, without and with `sleep_on_idle`, in one run.

    python scripts/bench/engine_idle_cpu.py --model <policy folder> [--idle-s 10] [--requests 20] [--port 30001]

Starts SGLang's server on the model twice (eager, triton attention, 0.1 of the card): once with SGLang's default,
whose scheduler loop polls its sockets without blocking while it has no batch, once with `--sleep-on-idle`, which
blocks in a socket poll until a message comes. For each: the CPU seconds of the server's whole process tree over
`--idle-s` seconds of idleness (as a % of one core, per process), then the median latency of `--requests`
sequential 16-token greedy requests. Prints both, the idle CPU ratio (default / sleep) and the latency ratio
(sleep / default; the flag must not slow a request). Why it matters: verl holds the engine idle during every
update and weight sync, and runs that share a host (the lab's runs side by side) each keep one engine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from sglang_server import EAGER_FLAGS, post_generate, require_model, sglang_server, tree_cpu_percent


def _generate_s(port: int, requests: int) -> list[float]:
    body = {"text": "a b c", "sampling_params": {"max_new_tokens": 16, "temperature": 0}}
    return [post_generate(port, body, timeout_s=60)[0] for _ in range(requests)]


def measure(model: Path, port: int, idle_s: float, requests: int, extra: Iterable[str]) -> dict:
    with sglang_server(model, port, [*EAGER_FLAGS, *extra]) as (pid, up_s):
        _generate_s(port, 2)  # the first requests compile kernels
        time.sleep(2)
        per_process = tree_cpu_percent(pid, idle_s)
        latency = _generate_s(port, requests)
    return {
        "flags": list(extra),
        "up_s": round(up_s, 1),
        "idle_cpu_percent": round(sum(per_process.values()), 1),
        "per_process": per_process,
        "generate_median_s": round(statistics.median(latency), 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="a Hugging Face folder SGLang can serve")
    parser.add_argument("--idle-s", type=float, default=10.0)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--port", type=int, default=30001)
    args = parser.parse_args(argv)
    require_model(parser, args.model)
    default = measure(args.model, args.port, args.idle_s, args.requests, [])
    sleeping = measure(args.model, args.port, args.idle_s, args.requests, ["--sleep-on-idle"])
    for run in (default, sleeping):
        print(json.dumps(run))
    idle_ratio = default["idle_cpu_percent"] / max(sleeping["idle_cpu_percent"], 0.1)
    latency_ratio = sleeping["generate_median_s"] / default["generate_median_s"]
    print(
        f"idle CPU: {default['idle_cpu_percent']:.1f}% of a core by default, {sleeping['idle_cpu_percent']:.1f}% "
        f"with --sleep-on-idle ({idle_ratio:.1f}x less); 16-token request median {default['generate_median_s']:.4f} "
        f"s against {sleeping['generate_median_s']:.4f} s (ratio {latency_ratio:.2f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: what the meta-episode loop costs on top of the rollout engine.

One engine (vLLM, SGLang or the project's transformers rollout) is started in this process; the agent loops run in
``--loop-workers`` worker processes (default 8), as verl runs them: its ``AgentLoopWorker`` processes
(``actor_rollout_ref.rollout.agent.num_workers``, 8 by default) call the rollout server, a process of its own
(``loop_workers.py``; every engine call, the replays' too, crosses the same socket). ``--loop-workers 0`` runs the
loops in the engine's process instead, on the event loop that also runs the engine's front end (vLLM's output
handling): sessions 2-5 measured that way, which charged the loop for the front end's work at thousands of short
turns a second. Each round:

1. **loop**: ``--questions`` rows x ``--n`` samples run as MR-Search meta-episodes (K attempts, searches on
   the retrieval service at ``--retriever-url``, reflections) through ``MRSearchAgentLoop``, all at once;
   every engine call is recorded (its prompt ids and how many tokens it sampled).
2. **raw**: the same engine replays exactly those calls with no agent loop: each meta-episode's calls in
   order, each with the recorded prompt ids and ``max_tokens`` = the recorded length (``ignore_eos``, no
   stop strings, so it samples as many tokens), all meta-episodes at once. No tokenization, no parsing, no
   retrieval: what is left is the engine's own work on the same prompts and output lengths.
3. **raw + pauses** (attribution, not the goal): the same replay, but each call waits first as long as the loop
   took between the meta-episode's previous answer and this call (searches, parsing, tokenization). If it is as
   slow as the loop, the loop's cost is that time between calls; if it is as fast as raw, the cost is on the
   engine's side of the calls (stop strings: the engine stops a request only after its front end saw the tag).

4. **loop, stop strings only** (attribution): the loop again with the tags sent as stop strings, as
   ``mr_search.episode.stop_token_ids=false`` sends them (by default one-token tags go as stop token ids only, which
   the engine's core matches itself). Its ratio is against the same raw replay.

5. **raw + stops** (attribution, engines whose stop strings wait for ``min_tokens``: vLLM): the plain replay with
   the loop's stop strings, which cannot fire before the recorded length (``min_tokens`` = ``max_tokens``), so the
   engine decodes and checks them as it does for the loop but samples the same tokens.

Searches, per loop phase: how many a meta-episode made (the loop's own count) and how long each took as the service
saw it (the mean of its ``/metrics`` latency histogram between before and after the phase; with ``--http-workers``
each read sees one front, a sample), against the time a meta-episode spent on searches and env tokens as the loop
saw it: if the loop's time per search is far above the service's, the searches wait in the loop's process (its
event loop), not in the service.

The ratio (loop tokens/s over raw tokens/s) is what the loop, its tokenization and the retrieval calls cost
(goal: >= 0.9). Prefix caching is off by default so both phases prefill the same tokens (``--prefix-caching``
turns it on, with the cache reset between phases). ``--report a.json b.json ...`` prints the engines of
earlier runs side by side (same model and GPU: the command that made them says so).

Usage:
    python scripts/bench/bench_engine_loop.py --engine vllm --model DIR --data train.parquet \
        --retriever-url http://127.0.0.1:8000/retrieve [--questions 64 --n 5 --attempts 3 --rounds 2] \
        [--loop-workers 8] [--json OUT]
    python scripts/bench/bench_engine_loop.py --report vllm.json sglang.json hf.json
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import platform
import statistics
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_adapters import ENGINES, Engine, make_engine
from engine_phases import (  # noqa: F401 (re-exported for the tests)
    Call,
    InProcessRunner,
    Phase,
    RecordingServer,
    loop_phase,
    raw_phase,
    replay_params,
)
from loop_workers import LoopSpec, WorkerPool

logger = logging.getLogger("bench_engine_loop")
SearchStats = Callable[[], Awaitable["tuple[float, int] | None"]]
LATENCY_METRIC = "mr_search_retrieval_request_latency_seconds"


def parse_latency(metrics_text: str) -> tuple[float, int] | None:
    """(seconds summed, requests) of the service's request-latency histogram in its Prometheus text, or None."""
    values = {}
    for line in metrics_text.splitlines():
        name, _, value = line.partition(" ")
        if name in (f"{LATENCY_METRIC}_sum", f"{LATENCY_METRIC}_count"):
            values[name] = float(value)
    if len(values) != 2:
        return None
    return values[f"{LATENCY_METRIC}_sum"], int(values[f"{LATENCY_METRIC}_count"])


def service_stats(retrieve_url: str) -> SearchStats:
    """Reads the latency histogram from the service's ``/metrics`` (None where it has none or does not answer)."""
    metrics_url = retrieve_url.rsplit("/", 1)[0] + "/metrics"

    async def read() -> tuple[float, int] | None:
        import aiohttp

        try:
            async with aiohttp.ClientSession() as session, session.get(metrics_url) as response:
                return parse_latency(await response.text()) if response.status == 200 else None
        except aiohttp.ClientError:
            return None

    return read


async def no_stats() -> None:
    return None


def service_mean(before: tuple[float, int] | None, after: tuple[float, int] | None) -> float:
    """Mean seconds a request took in the service between two reads of its histogram (0.0 without both). With
    ``--http-workers`` each read sees one front's counters: a sample of the service, whose mean still holds."""
    if before is None or after is None or after[1] <= before[1]:
        return 0.0
    return (after[0] - before[0]) / (after[1] - before[1])


def search_line(phase: Phase, meta_episodes: int) -> str:
    """Searches a meta-episode made, the service's time for each, and the loop's time per search (with env tokens)."""
    if not phase.searches:
        return ""
    per_episode = phase.searches / meta_episodes
    return (
        f"; searches: {per_episode:.1f} a meta-episode, {phase.service_s * 1e3:.1f} ms each in the service, "
        f"{phase.tools_s / per_episode * 1e3:.1f} ms each in the loop (with env tokens)"
    )


async def measure(
    engine: Engine,
    runner: InProcessRunner | WorkerPool,
    rows: Sequence[Mapping[str, Any]],
    *,
    n: int,
    rounds: int,
    stats: SearchStats = no_stats,
) -> dict[str, Any]:
    """The rounds of phases 1-5 with ``runner`` playing and replaying the meta-episodes on ``engine``."""

    async def timed_loop(strings_only: bool) -> Phase:
        before = await stats()
        phase = await runner.loop(rows, n, strings_only=strings_only)
        phase.service_s = service_mean(before, await stats())
        return phase

    await runner.loop(rows[: max(runner.workers, len(rows) // 8)], 1)  # warm-up (kernels, graphs, sockets)
    results = []
    for r in range(rounds):
        await engine.reset_prefix_cache()
        loop = await timed_loop(False)
        await engine.reset_prefix_cache()
        raw = await runner.raw()
        await engine.reset_prefix_cache()
        paused = await runner.raw(pauses=True)
        await engine.reset_prefix_cache()
        strings = await timed_loop(True)
        stopped = None
        if engine.stops_wait_for_min_tokens:
            await engine.reset_prefix_cache()
            stopped = await runner.raw(stops=True)
        for phase in (raw, paused, *([stopped] if stopped else [])):
            if phase.tokens != loop.tokens:
                raise RuntimeError(f"a replay sampled {phase.tokens} tokens, the loop {loop.tokens}: not the same work")
        ratio = loop.tokens_per_s / raw.tokens_per_s
        pause_s = statistics.fmean(runner.pause_sums())
        ratio_stops = loop.tokens_per_s / stopped.tokens_per_s if stopped else None
        results.append(
            {
                "loop": dataclasses.asdict(loop),
                "raw": dataclasses.asdict(raw),
                "raw_paused": dataclasses.asdict(paused),
                "ratio": ratio,
                "ratio_paused": loop.tokens_per_s / paused.tokens_per_s,
                "pause_s_per_meta_episode": pause_s,
                "loop_strings_only": dataclasses.asdict(strings),
                "ratio_strings_only": strings.tokens_per_s / raw.tokens_per_s,
                "raw_stops": dataclasses.asdict(stopped) if stopped else None,
                "ratio_stops": ratio_stops,
            }
        )
        print(
            f"round {r + 1}: loop {loop.tokens:,} tokens in {loop.seconds:.2f} s = {loop.tokens_per_s:,.0f} tokens/s "
            f"({loop.calls} engine calls, {loop.episodes} meta-episodes; a meta-episode waited {loop.generate_s:.2f} s "
            f"on "
            f"the engine, {loop.tools_s:.2f} s on searches and env tokens); raw replay {raw.seconds:.2f} s = "
            f"{raw.tokens_per_s:,.0f} tokens/s; RATIO loop/raw {ratio:.3f}; raw with the loop's pauses between "
            f"calls ({pause_s:.2f} s a meta-episode) {paused.seconds:.2f} s, "
            f"loop/that {results[-1]['ratio_paused']:.3f}{search_line(loop, loop.episodes)}; "
            f"loop with stop strings only {strings.tokens:,} tokens in "
            f"{strings.seconds:.2f} s, RATIO strings-only/raw {results[-1]['ratio_strings_only']:.3f}"
            + (
                f"; raw with the loop's stop strings {stopped.seconds:.2f} s, loop/that {ratio_stops:.3f}"
                if stopped
                else ""
            ),
            flush=True,
        )
    return {
        "engine": engine.name,
        "rounds": results,
        "ratio_median": statistics.median(r["ratio"] for r in results),
        "ratio_paused_median": statistics.median(r["ratio_paused"] for r in results),
        "ratio_strings_only_median": statistics.median(r["ratio_strings_only"] for r in results),
        "loop_tokens_per_s_median": statistics.median(r["loop"]["tokens"] / r["loop"]["seconds"] for r in results),
        "raw_tokens_per_s_median": statistics.median(r["raw"]["tokens"] / r["raw"]["seconds"] for r in results),
    }


def load_rows(path: str, questions: int) -> list[dict[str, Any]]:
    import pandas as pd

    frame = pd.read_parquet(path)
    if len(frame) < questions:
        raise SystemExit(f"{path} has {len(frame)} rows; --questions {questions} needs at least that many")
    return frame.head(questions).to_dict("records")


def report(paths: Sequence[str]) -> int:
    runs = [json.loads(Path(p).read_text()) for p in paths]
    base = runs[0]
    print(f"model {base['model']}, {base['setting']}; ratios against {base['engine']} (the first file)")
    print("| engine | loop tokens/s | raw tokens/s | loop/raw | loop tokens/s vs first |")
    print("|---|---|---|---|---|")
    for run in runs:
        if run["setting"] != base["setting"] or run["model"] != base["model"]:
            raise SystemExit(f"{run['engine']}: another model or setting than {base['engine']}: not comparable")
        ratio = run["loop_tokens_per_s_median"] / base["loop_tokens_per_s_median"]
        print(
            f"| {run['engine']} | {run['loop_tokens_per_s_median']:,.0f} | {run['raw_tokens_per_s_median']:,.0f} "
            f"| {run['ratio_median']:.3f} | RATIO {ratio:.2f}x |"
        )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=ENGINES)
    parser.add_argument("--model", help="model folder with its tokenizer")
    parser.add_argument("--data", help="parquet rows of the project's format (prepare_data.py)")
    parser.add_argument("--retriever-url", default="http://127.0.0.1:8000/retrieve")
    parser.add_argument("--questions", type=int, default=64)
    parser.add_argument("--n", type=int, default=5, help="meta-episodes per question (the paper's group size)")
    parser.add_argument("--attempts", type=int, default=3)
    parser.add_argument("--response-length", type=int, default=2048, help="tokens of a whole meta-episode")
    parser.add_argument("--max-new-tokens-per-turn", type=int, default=1024, help="the paper's 1,024; embedded: 48")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--memory", type=float, default=0.5, help="share of GPU memory the engine may take")
    parser.add_argument("--prefix-caching", action="store_true")
    parser.add_argument("--eager", action="store_true", help="no CUDA graphs")
    parser.add_argument(
        "--loop-workers",
        type=int,
        default=8,
        help="agent-loop worker processes, as verl's actor_rollout_ref.rollout.agent.num_workers (default 8, the paper "
        "preset's); 0: the loop in the engine's own process",
    )
    parser.add_argument("--json", help="write the figures here (for --report)")
    parser.add_argument("--report", nargs="+", metavar="JSON")
    args = parser.parse_args()
    if args.report:
        return report(args.report)
    if not (args.engine and args.model and args.data):
        parser.error("--engine, --model and --data are needed (or --report)")
    if args.loop_workers < 0:
        parser.error(f"--loop-workers {args.loop_workers}: use 0 (the engine's process) or a number of processes")
    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("verl.utils.tokenizer.continuous_token_wiring").setLevel(logging.ERROR)  # once per loop object
    from transformers import AutoTokenizer

    from mr_search.agent.retrieval_client import RetrievalClient, RetrieverConfig
    from mr_search.eval.runner import EvalConfig, InlineExecutor, agent_loop_factory

    args.model = str(Path(args.model).resolve())  # verl asserts on a trailing "/"
    rows = load_rows(args.data, args.questions)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    config = EvalConfig(
        attempts=args.attempts,
        response_length=args.response_length,
        max_new_tokens_per_turn=args.max_new_tokens_per_turn,
        concurrency=len(rows) * args.n,
    )
    setting = (
        f"{args.questions} questions x n {args.n}, K {args.attempts}, {args.response_length} response tokens "
        f"({args.max_new_tokens_per_turn} a turn), "
        f"prefix caching {'on' if args.prefix_caching else 'off'}, {'eager' if args.eager else 'CUDA graphs'}, "
        + (
            f"{args.loop_workers} agent-loop worker processes"
            if args.loop_workers
            else "the loop in the engine process"
        )
    )
    engine = make_engine(
        args.engine,
        args.model,
        memory=args.memory,
        max_model_len=config.prompt_length + config.response_length,
        prefix_caching=args.prefix_caching,
        eager=args.eager,
    )

    async def run() -> dict[str, Any]:
        retriever = RetrievalClient(RetrieverConfig(url=args.retriever_url))
        if args.loop_workers:
            runner: InProcessRunner | WorkerPool = WorkerPool(
                engine, LoopSpec(args.model, args.retriever_url, config), args.loop_workers
            )
            await runner.start()
        else:
            # The loop and verl's prompt building share one fast tokenizer: keep its calls on one thread (runner.py).
            asyncio.get_running_loop().set_default_executor(InlineExecutor())
            runner = InProcessRunner(engine, lambda server: agent_loop_factory(tokenizer, server, retriever, config))
        try:
            return await measure(
                engine, runner, rows, n=args.n, rounds=args.rounds, stats=service_stats(args.retriever_url)
            )
        finally:
            await runner.close()
            await retriever.close()

    print(f"machine: {platform.node()}, {_device()}; engine {args.engine}; {setting}", flush=True)
    try:
        result = asyncio.run(run())
    finally:
        engine.shutdown()
    result.update(model=str(args.model), setting=setting, device=_device())
    print(
        f"RATIO {args.engine} loop/raw tokens/s (median of {args.rounds}): {result['ratio_median']:.3f} (goal >= 0.9); "
        f"loop {result['loop_tokens_per_s_median']:,.0f} tokens/s, raw {result['raw_tokens_per_s_median']:,.0f}; "
        f"with the tags as stop strings only: {result['ratio_strings_only_median']:.3f}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


def _device() -> str:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU ({platform.processor() or 'cpu'})"


if __name__ == "__main__":
    sys.exit(main())

"""The engine benchmark replays the loop's own engine calls: same prompts, same output lengths, same order."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from mr_search import prompts
from mr_search.agent.retrieval_client import SearchOutcome

BENCH = Path(__file__).resolve().parents[2] / "scripts" / "bench"


def _bench() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("mr_search_bench_engine_loop", BENCH / "bench_engine_loop.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


class InstantRetriever:
    def __init__(self) -> None:
        self.queries: list[str] = []

    async def search(self, query: str, topk: int) -> SearchOutcome:
        self.queries.append(query)
        docs = [{"document": {"id": str(i), "contents": f'"Doc {i}"\nParis is the capital.'}} for i in range(topk)]
        return SearchOutcome(documents=docs)


class SpyEngine:
    """Wraps an engine and records what reached it, so the test can compare the two phases."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.name = engine.name
        self.stops_wait_for_min_tokens = engine.stops_wait_for_min_tokens
        self.seen: list[tuple[str, list[int], dict[str, Any], int]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any]):
        output = await self.engine.generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params)
        self.seen.append((request_id, list(prompt_ids), dict(sampling_params), len(output.token_ids)))
        return output

    async def reset_prefix_cache(self) -> None:
        await self.engine.reset_prefix_cache()


@pytest.fixture(scope="module")
def tiny_policy_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from mr_search_embedded.tiny_model import ensure_tiny_model

    return ensure_tiny_model(tmp_path_factory.mktemp("bench_tiny_model"))


ROWS = [
    {
        "prompt": [{"role": "user", "content": prompts.question_prompt(f"What is the capital of country {i}?")}],
        "reward_model": {"ground_truth": {"target": ["Paris"]}},
        "data_source": "embedded",
    }
    for i in range(3)
]


def test_raw_phase_replays_the_loop_calls_with_the_same_prompts_and_lengths(tiny_policy_dir: Path) -> None:
    bench = _bench()
    from engine_adapters import make_engine
    from transformers import AutoTokenizer

    from mr_search.eval.runner import EvalConfig, agent_loop_factory

    tokenizer = AutoTokenizer.from_pretrained(tiny_policy_dir)
    config = EvalConfig(attempts=2, response_length=256, max_new_tokens_per_turn=24)
    engine = SpyEngine(
        make_engine("hf", str(tiny_policy_dir), memory=0.5, max_model_len=1280, prefix_caching=False, eager=True)
    )
    retriever = InstantRetriever()

    async def stats() -> tuple[float, int]:  # the service's latency histogram: 2 ms a search
        return 0.002 * len(retriever.queries), len(retriever.queries)

    runner = bench.InProcessRunner(engine, lambda server: agent_loop_factory(tokenizer, server, retriever, config))
    result = asyncio.run(bench.measure(engine, runner, ROWS, n=2, rounds=1, stats=stats))
    (round_,) = result["rounds"]
    # Searches are the loop's own count; the service's histogram gives their mean time (2 ms here).
    assert round_["loop"]["searches"] + round_["loop_strings_only"]["searches"] <= len(retriever.queries)
    assert round_["loop"]["service_s"] == (pytest.approx(0.002) if round_["loop"]["searches"] else 0.0)
    assert round_["loop"]["tokens"] == round_["raw"]["tokens"] > 0
    assert round_["ratio"] == pytest.approx(
        (round_["loop"]["tokens"] / round_["loop"]["seconds"]) / (round_["raw"]["tokens"] / round_["raw"]["seconds"])
    )
    loop_calls = [s for s in engine.seen if not s[0].startswith(("raw-", "paused-"))]
    # The tiny policy's tags are one token each: the loop sends them as stop ids only, except in the strings phase.
    strings_only = [s for s in loop_calls if "stop_token_ids" not in s[2]]
    assert len(strings_only) == round_["loop_strings_only"]["calls"] > 0
    assert all(params["stop"] == ["</search>", "</answer>"] for _, _, params, _ in strings_only)
    assert round_["ratio_strings_only"] == pytest.approx(
        (round_["loop_strings_only"]["tokens"] / round_["loop_strings_only"]["seconds"])
        / (round_["raw"]["tokens"] / round_["raw"]["seconds"])
    )
    measured = [s for s in loop_calls if "stop_token_ids" in s[2]][-round_["loop"]["calls"] :]  # after the warm-up
    assert all(len(params["stop_token_ids"]) == 2 and "stop" not in params for _, _, params, _ in measured)
    # Every sampling call of the loop is replayed once per replay: same prompt ids, max_tokens = what it sampled.
    expected = sorted((tuple(p), n) for _, p, _, n in measured if n > 0)
    for prefix in ("raw-", "paused-"):
        replay = [s for s in engine.seen if s[0].startswith(prefix)]
        assert sorted((tuple(p), params["max_tokens"]) for _, p, params, _ in replay) == expected
        assert all(params["ignore_eos"] and "stop" not in params for _, _, params, _ in replay)
    assert round_["raw_paused"]["tokens"] == round_["loop"]["tokens"]
    # The paused replay waits what the loop waited between calls: at least the mean meta-episode's pauses.
    assert 0 < round_["pause_s_per_meta_episode"] <= round_["raw_paused"]["seconds"]
    # The loop ran real meta-episodes: 3 questions x n 2, at least one turn per attempt.
    assert len({rid for rid, *_ in measured}) == 6
    assert len(measured) >= 6 * config.attempts


def test_report_prints_each_engine_against_the_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench()
    common = {"model": "m", "setting": "s", "rounds": []}
    paths = []
    for name, loop, raw in (("vllm", 1000.0, 1050.0), ("hf", 250.0, 260.0)):
        path = tmp_path / f"{name}.json"
        path.write_text(
            json.dumps(
                {
                    **common,
                    "engine": name,
                    "loop_tokens_per_s_median": loop,
                    "raw_tokens_per_s_median": raw,
                    "ratio_median": loop / raw,
                }
            )
        )
        paths.append(str(path))
    assert bench.report(paths) == 0
    out = capsys.readouterr().out
    assert "| hf | 250 | 260 | 0.962 | RATIO 0.25x |" in out
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**json.loads(Path(paths[1]).read_text()), "setting": "another"}))
    with pytest.raises(SystemExit, match="not comparable"):
        bench.report([paths[0], str(other)])


class LengthEngine:
    """Samples exactly max_tokens tokens, as vLLM does when min_tokens holds the stop strings off."""

    name = "length"
    stops_wait_for_min_tokens = True

    def __init__(self) -> None:
        self.params: list[dict[str, Any]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any]):
        from verl.workers.rollout.replica import TokenOutput

        self.params.append(dict(sampling_params))
        return TokenOutput(token_ids=[7] * sampling_params["max_tokens"], log_probs=None, stop_reason="completed")


def test_the_stop_string_replay_holds_the_loops_stops_off_until_the_recorded_length() -> None:
    bench = _bench()
    assert "stop" not in bench.replay_params(17, stops=False)
    engine = LengthEngine()
    chains = {"a": [bench.Call([1, 2], 3, 0.0), bench.Call([1, 2, 3], 0, 0.0)], "b": [bench.Call([4], 2, 0.0)]}
    phase = asyncio.run(bench.raw_phase(engine, chains, stops=True))
    assert phase.tokens == 5 and phase.calls == 3
    # Each sampling call carries the loop's stop strings, held off until exactly the recorded length.
    assert sorted(p["max_tokens"] for p in engine.params) == [2, 3]
    assert all(p["min_tokens"] == p["max_tokens"] and p["ignore_eos"] for p in engine.params)
    assert all(set(p["stop"]) == {"</search>", "</answer>"} for p in engine.params)


def test_the_service_latency_is_read_from_its_prometheus_text() -> None:
    from mr_search_retrieval.metrics import Metrics

    bench = _bench()
    metrics = Metrics()
    metrics.observe_request(200, 1, 0.004)
    metrics.observe_request(200, 1, 0.006)
    assert bench.parse_latency(metrics.render()) == (pytest.approx(0.010), 2)
    assert bench.parse_latency("some_other_metric 3\n") is None


def test_a_loop_phase_counts_its_searches_and_the_line_sets_them_against_the_services_time() -> None:
    bench = _bench()
    from mr_search.contract import SEARCH_RECORD

    class Episode:  # a meta-episode that ran 10 searches and spent 0.3 s on searches and env tokens
        async def play(self, sampling: dict, **_: Any) -> Any:
            from types import SimpleNamespace

            return SimpleNamespace(
                metrics=SimpleNamespace(generate_sequences=0.1, tool_calls=0.3),
                extra_fields={SEARCH_RECORD: {"run": 10}},
            )

    server = bench.RecordingServer(engine=None)
    phase = asyncio.run(bench.loop_phase(Episode, ROWS[:2], 5, server))
    assert (phase.searches, phase.episodes) == (100, 10)
    # The service's latency sum and count before and after the phase: 0.5 s over 100 requests.
    phase.service_s = bench.service_mean((1.0, 50), (1.5, 150))
    # 10 meta-episodes: 10 searches each, 5 ms in the service, 30 ms each as the loop saw it
    assert bench.search_line(phase, 10) == (
        "; searches: 10.0 a meta-episode, 5.0 ms each in the service, 30.0 ms each in the loop (with env tokens)"
    )
    assert bench.search_line(bench.Phase(1.0, 1, 1), 10) == ""  # no searches: nothing said


def test_phases_of_several_processes_combine_into_one() -> None:
    bench = _bench()
    from engine_phases import Phase, combine

    a = Phase(2.0, 100, 10, generate_s=1.0, tools_s=0.5, searches=4, started=10.0, episodes=2)
    b = Phase(3.0, 50, 5, generate_s=4.0, tools_s=2.0, searches=2, started=10.5, episodes=1)
    idle = Phase(0.0, 0, 0)  # a worker that got no rows
    whole = combine([a, b, idle])
    assert (whole.seconds, whole.tokens, whole.calls, whole.searches, whole.episodes) == (3.5, 150, 15, 6, 3)
    assert whole.generate_s == pytest.approx(2.0) and whole.tools_s == pytest.approx(1.0)
    with pytest.raises(ValueError, match="no share"):
        combine([idle])
    assert bench.service_mean((1.0, 10), (1.5, 20)) == pytest.approx(0.05)
    assert bench.service_mean(None, (1.5, 20)) == 0.0 and bench.service_mean((1.0, 10), (1.0, 10)) == 0.0


class ScriptedEngine:
    """Answers every call with ``[5] * max_tokens`` (the loop's tokens are what the tiny tokenizer decodes)."""

    name = "scripted"
    stops_wait_for_min_tokens = False

    def __init__(self) -> None:
        self.requests: list[str] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any]):
        from verl.workers.rollout.replica import TokenOutput

        self.requests.append(request_id)
        if not prompt_ids:
            raise ValueError("no prompt")
        return TokenOutput(token_ids=[5] * sampling_params["max_tokens"], log_probs=None, stop_reason="completed")

    async def reset_prefix_cache(self) -> None:
        return None


def test_the_engine_host_answers_calls_over_its_socket_and_passes_errors_back(tmp_path: Path) -> None:
    _bench()
    from engine_host import EngineHost, RemoteEngine

    async def run() -> None:
        engine = ScriptedEngine()
        host = EngineHost(engine, str(tmp_path / "engine.sock"))
        await host.start()
        remote = await RemoteEngine.connect(host.path)
        params = {"max_tokens": 3}
        outputs = await asyncio.gather(
            *(remote.generate(f"r{i}", prompt_ids=[1, 2], sampling_params=params) for i in range(5))
        )
        assert [o.token_ids for o in outputs] == [[5, 5, 5]] * 5 and sorted(engine.requests) == [
            f"r{i}" for i in range(5)
        ]
        with pytest.raises(RuntimeError, match="engine process: ValueError: no prompt"):
            await remote.generate("bad", prompt_ids=[], sampling_params=params)
        assert host.peers == [__import__("os").getpid()]
        await remote.close()
        await host.close()
        assert not (tmp_path / "engine.sock").exists()

    asyncio.run(run())


def test_agent_loops_in_worker_processes_play_and_replay_through_the_engine_process(tiny_policy_dir: Path) -> None:
    """The layout verl runs: meta-episodes in spawned worker processes, every engine call (the replays' too) answered
    by the engine of this process."""
    import os

    bench = _bench()
    from engine_adapters import make_engine

    from mr_search.eval.runner import EvalConfig

    config = EvalConfig(attempts=2, response_length=256, max_new_tokens_per_turn=24)
    engine = SpyEngine(
        make_engine("hf", str(tiny_policy_dir), memory=0.5, max_model_len=1280, prefix_caching=False, eager=True)
    )
    # The untrained tiny policy does not search: no service needs to answer this address.
    spec = bench.LoopSpec(str(tiny_policy_dir), "http://127.0.0.1:9/retrieve", config)

    async def run() -> tuple[dict[str, Any], list[int]]:
        pool = bench.WorkerPool(engine, spec, workers=2)
        await pool.start()
        try:
            return await bench.measure(engine, pool, ROWS, n=2, rounds=1), pool.pids
        finally:
            await pool.close()

    result, pids = asyncio.run(run())
    (round_,) = result["rounds"]
    assert len(set(pids)) == 2 and os.getpid() not in pids
    # 3 rows over 2 workers (2 + 1), n 2: 6 meta-episodes; each replay sampled what the loop did.
    assert round_["loop"]["episodes"] == round_["raw"]["episodes"] == round_["raw_paused"]["episodes"] == 6
    assert round_["loop"]["tokens"] == round_["raw"]["tokens"] == round_["raw_paused"]["tokens"] > 0
    measured = [s for s in engine.seen if not s[0].startswith(("raw-", "paused-")) and "stop_token_ids" in s[2]]
    expected = sorted((tuple(p), n) for _, p, _, n in measured[-round_["loop"]["calls"] :] if n > 0)
    replay = [s for s in engine.seen if s[0].startswith("raw-")]
    assert sorted((tuple(p), params["max_tokens"]) for _, p, params, _ in replay) == expected
    assert 0 < round_["pause_s_per_meta_episode"] <= round_["raw_paused"]["seconds"]


def test_a_worker_that_cannot_start_fails_the_pool_with_its_error(tmp_path: Path) -> None:
    bench = _bench()
    from mr_search.eval.runner import EvalConfig

    spec = bench.LoopSpec(str(tmp_path / "no-model"), "http://127.0.0.1:9/retrieve", EvalConfig())

    async def run() -> None:
        pool = bench.WorkerPool(ScriptedEngine(), spec, workers=1)
        try:
            await pool.start()
        finally:
            await pool.close()

    with pytest.raises(RuntimeError, match="an agent-loop worker failed"):
        asyncio.run(run())
    with pytest.raises(ValueError, match="at least one worker"):
        bench.WorkerPool(ScriptedEngine(), spec, workers=0)


def test_a_worker_that_dies_mid_run_fails_the_phase_instead_of_hanging(tiny_policy_dir: Path) -> None:
    bench = _bench()
    from mr_search.eval.runner import EvalConfig

    spec = bench.LoopSpec(str(tiny_policy_dir), "http://127.0.0.1:9/retrieve", EvalConfig())

    async def run() -> None:
        pool = bench.WorkerPool(ScriptedEngine(), spec, workers=1)
        await pool.start()
        try:
            pool._processes[0].kill()
            await asyncio.get_running_loop().run_in_executor(None, pool._processes[0].join, 30)
            await pool.loop(ROWS, 1)
        finally:
            await pool.close()

    with pytest.raises(RuntimeError, match="exited without answering"):
        asyncio.run(run())

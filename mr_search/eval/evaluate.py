"""One evaluation: models x test parquet -> trajectories (JSONL + HTML), results.md/json, em_by_attempt.png."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import multiprocessing
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from mr_search.eval.checkpoint import resolve_model_dir
from mr_search.eval.metrics import summarize
from mr_search.eval.question_cap import QuestionCap, recorded
from mr_search.eval.records import write_jsonl
from mr_search.eval.report import write_report
from mr_search.eval.runner import EvalConfig, agent_loop_factory, run_episodes, select_rows

logger = logging.getLogger(__name__)

TRAJECTORIES_JSONL: Final = "trajectories.jsonl"
TRAJECTORIES_HTML: Final = "trajectories.html"


@dataclass(frozen=True)
class ModelSpec:
    """A model to evaluate and its row label in the table."""

    label: str
    path: Path

    @classmethod
    def parse(cls, text: str) -> ModelSpec:
        """``label=path`` or ``path`` (label: the folder name)."""
        label, sep, path = text.partition("=")
        if not sep:
            label, path = Path(text).name or "model", text
        if not label.strip() or not path.strip():
            raise ValueError(f"model {text!r}: expected PATH or LABEL=PATH")
        return cls(label.strip(), Path(path))


def load_rows(test_parquet: Path, max_questions: int | QuestionCap | None) -> list[dict[str, Any]]:
    import pandas as pd

    if not Path(test_parquet).is_file():
        raise FileNotFoundError(f"{test_parquet}: no such test parquet (make one with scripts/prepare_data.py)")
    frame = pd.read_parquet(test_parquet)
    missing = {"data_source", "prompt", "reward_model"} - set(frame.columns)
    if missing:
        raise ValueError(
            f"{test_parquet}: missing column(s) {sorted(missing)}; expected the RL layout of scripts/prepare_data.py"
        )
    return select_rows(frame.to_dict("records"), max_questions)


async def _evaluate_model(
    spec: ModelSpec, rows: Sequence[Mapping[str, Any]], config: EvalConfig, retrieval_client: Any, progress: bool
) -> list[dict[str, Any]]:
    from transformers import AutoTokenizer

    from mr_search.cpu.hf_generate import LocalServerManager

    model_dir = resolve_model_dir(spec.path)
    # The loop and the generator get separate tokenizer objects: a fast tokenizer is not thread-safe.
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    server = LocalServerManager.from_pretrained(
        model_dir, max_batch_size=config.concurrency, default_max_new_tokens=config.max_new_tokens_per_turn
    )
    labelled = replace(config, method=spec.label)  # not asdict: it would turn a QuestionCap into a dict
    try:
        make_loop = agent_loop_factory(tokenizer, server, retrieval_client, labelled)
        return await run_episodes(rows, make_loop, tokenizer, labelled, progress=progress)
    finally:
        server.close()


async def _run_models(
    models: Sequence[ModelSpec],
    rows: Sequence[Mapping[str, Any]],
    config: EvalConfig,
    retriever_url: str,
    retrieval_client: Any,
    progress: bool,
) -> list[dict[str, Any]]:
    """The models one after the other, through ``retrieval_client`` or a client of the service at ``retriever_url``."""
    from mr_search.agent.retrieval_client import RetrievalClient, RetrieverConfig

    client = retrieval_client or RetrievalClient(RetrieverConfig(url=retriever_url))
    try:
        records: list[dict[str, Any]] = []
        for spec in models:
            records += await _evaluate_model(spec, rows, config, client, progress)
        return records
    finally:
        if retrieval_client is None:
            await client.close()


def _evaluate_in_process(
    spec: ModelSpec, rows: Sequence[Mapping[str, Any]], config: EvalConfig, retriever_url: str
) -> list[dict[str, Any]]:
    """One model's evaluation in a worker process of its own, with its own client of the retrieval service."""
    import torch

    torch.set_num_threads(1)  # one core a model: the workers share the machine
    return asyncio.run(_run_models([spec], rows, config, retriever_url, None, False))


def _in_workers(
    models: Sequence[ModelSpec], rows: Sequence[Mapping[str, Any]], config: EvalConfig, retriever_url: str, workers: int
) -> list[dict[str, Any]]:
    """Every model in a process of its own (``workers`` at once); records in the models' order, as sequentially."""
    context = multiprocessing.get_context("spawn")  # no forked torch or arrow thread pools
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = [pool.submit(_evaluate_in_process, spec, rows, config, retriever_url) for spec in models]
        return [record for future in futures for record in future.result()]


def evaluate(
    models: Sequence[ModelSpec],
    test_parquet: Path,
    out_dir: Path,
    *,
    retriever_url: str,
    config: EvalConfig | None = None,
    retrieval_client: Any = None,
    progress: bool = True,
    workers: int = 1,
) -> dict[str, Path]:
    """Evaluates each model greedily with K_eval = ``config.attempts``; returns the written files by name.

    ``workers`` > 1 evaluates the models in that many processes at once, each model on one thread against the
    service at ``retriever_url``; greedy decoding makes the records the same as one after the other.
    """
    from mr_search.runlog.viewer.build import build_viewer

    if not models:
        raise ValueError("evaluate: no model given")
    if workers < 1:
        raise ValueError(f"evaluate: workers={workers}; give 1 (one model after the other) or more")
    if workers > 1 and retrieval_client is not None:
        raise ValueError("evaluate: workers > 1 reach the service at retriever_url; an in-process client cannot")
    config = config or EvalConfig()
    rows = load_rows(test_parquet, config.max_questions)
    out_dir = Path(out_dir)
    started = time.perf_counter()
    workers = min(workers, len(models))  # a worker a model at most
    if workers > 1:
        records = _in_workers(models, rows, config, retriever_url, workers)
    else:
        records = asyncio.run(_run_models(models, rows, config, retriever_url, retrieval_client, progress))
    trajectories = write_jsonl(records, out_dir / TRAJECTORIES_JSONL)
    meta = {
        "models": ", ".join(f"{m.label}={m.path}" for m in models),
        "test data": str(test_parquet),
        "questions": len(rows),
        "max questions per source": recorded(config.max_questions),
        "K_eval": config.attempts,
        "max turns per attempt": config.max_turns_per_attempt,
        "max new tokens per turn": config.max_new_tokens_per_turn,
        "max information tokens": config.max_information_tokens,
        "response length": config.response_length,
        "outcome feedback": config.outcome_feedback,
        "reflection restates question": config.reflection_restates_question,
        "decoding": "greedy",
        "retriever": retriever_url,
        "workers": workers,
        "wall time (s)": round(time.perf_counter() - started, 1),
    }
    paths = write_report(summarize(records, attempts=config.attempts), out_dir, meta)
    paths["trajectories.jsonl"] = trajectories
    paths["trajectories.html"] = build_viewer(records, out_dir / TRAJECTORIES_HTML)
    logger.info("evaluation written to %s", out_dir)
    return paths

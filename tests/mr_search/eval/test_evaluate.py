"""End to end on the embedded default: a real tiny model through the agent loop -> every report file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from mr_search import prompts
from mr_search.agent.retrieval_client import SearchOutcome
from mr_search.eval.__main__ import main
from mr_search.eval.checkpoint import resolve_model_dir
from mr_search.eval.evaluate import ModelSpec, evaluate
from mr_search.eval.runner import EvalConfig
from mr_search_embedded.data import ensure_embedded_parquet
from mr_search_embedded.tiny_model import TinyModelConfig, ensure_tiny_model


class CorpusRetriever:
    """Word-overlap search over the embedded corpus (stands in for the service in-process)."""

    def __init__(self, corpus: Path) -> None:
        self.docs = [json.loads(line) for line in corpus.read_text().splitlines()]
        self.queries: list[str] = []

    async def search(self, query: str, topk: int) -> SearchOutcome:
        self.queries.append(query)
        words = set(query.lower().split())
        ranked = sorted(self.docs, key=lambda d: -len(words & set(d["contents"].lower().split())))
        return SearchOutcome(documents=[{"document": d, "score": 1.0} for d in ranked[:topk]])


@pytest.fixture(autouse=True)
def one_torch_thread() -> Any:
    """The tiny model gains nothing from more threads; on a busy machine spinning threads cost 10x+."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    cache = tmp_path_factory.mktemp("cache")
    return cache, ensure_embedded_parquet(cache)[1]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory, embedded: tuple[Path, Path]) -> Path:
    cache, _ = embedded
    texts = [
        prompts.QUESTION_TEMPLATE,
        prompts.REFLECTION_PROMPT,
        prompts.INVALID_ACTION_MESSAGE,
        "<think> a </think> <search> q </search> <answer> a </answer>",
        "<information> Doc 1(Title: t) </information>",
    ]
    texts += (cache / "world" / "corpus.jsonl").read_text().splitlines()[:300]
    return ensure_tiny_model(tmp_path_factory.mktemp("tiny"), texts=texts, config=TinyModelConfig(vocab_size=600))


def _evaluate(cache: Path, test: Path, out: Path, config: EvalConfig, model: ModelSpec) -> dict[str, Path]:
    """``evaluate`` of one model over the embedded world's corpus, searched in process (no service)."""
    return evaluate(
        [model],
        test,
        out,
        retriever_url="http://127.0.0.1:9/retrieve",
        config=config,
        retrieval_client=CorpusRetriever(cache / "world" / "corpus.jsonl"),
        progress=False,
    )


def test_evaluation_writes_table_json_plot_and_viewer(
    embedded: tuple[Path, Path], tiny_model: Path, tmp_path: Path
) -> None:
    cache, test = embedded
    config = EvalConfig(attempts=2, max_questions=2, max_new_tokens_per_turn=12, response_length=768)
    paths = _evaluate(cache, test, tmp_path, config, ModelSpec("untrained", tiny_model))

    records = [json.loads(line) for line in paths["trajectories.jsonl"].read_text().splitlines()]
    assert len(records) == 4 and {r["data_source"] for r in records} == {"embedded_1hop", "embedded_2hop"}
    frame = pd.read_parquet(test)
    assert records[0]["question"] == frame.iloc[0]["extra_info"]["question"]
    for record in records:
        assert 1 <= len(record["attempts"]) <= 2
        assert record["attempts"][0]["turns"][0]["role"] == "assistant"  # the model's first turn
    results = json.loads(paths["results.json"].read_text())
    rows = results["methods"]["untrained"]["attempts"]
    assert [r["attempt"] for r in rows] == [1, 2] and results["meta"]["K_eval"] == 2
    assert results["meta"]["outcome feedback"] is False, "the meta says whether reflections were told the outcome"
    assert results["meta"]["max turns per attempt"] == 3, (
        "and how many turns an attempt had (the comparison's arms differ)"
    )
    assert set(rows[0]["em"]) == {"embedded_1hop", "embedded_2hop", "average"}
    md = paths["results.md"].read_text()
    assert "| method | attempt | embedded_1hop | embedded_2hop | Avg |" in md and "| untrained | 2 |" in md
    assert paths["em_by_attempt.png"].read_bytes()[:4] == b"\x89PNG"
    assert records[0]["uid"] in paths["trajectories.html"].read_text()


def test_greedy_evaluation_is_reproducible(embedded: tuple[Path, Path], tiny_model: Path, tmp_path: Path) -> None:
    cache, test = embedded
    config = EvalConfig(attempts=2, max_questions=1, max_new_tokens_per_turn=12, response_length=512)
    outs = []
    for name in ("a", "b"):
        paths = _evaluate(cache, test, tmp_path / name, config, ModelSpec("m", tiny_model))
        outs.append(paths["trajectories.jsonl"].read_text())
    assert outs[0] == outs[1]


def test_cli_reports_bad_inputs(tmp_path: Path, capsys: Any) -> None:
    assert main(["--model", str(tmp_path / "nope"), "--data", str(tmp_path / "t.parquet"), "--out", str(tmp_path)]) == 2
    assert "no such test parquet" in capsys.readouterr().err


def test_checkpoint_resolution(tmp_path: Path, tiny_model: Path) -> None:
    assert resolve_model_dir(tiny_model) == tiny_model
    run = tmp_path / "run" / "checkpoints"
    for step in (2, 10):
        hf = run / f"global_step_{step}" / "actor" / "huggingface"
        hf.mkdir(parents=True)
        (hf / "config.json").write_text("{}")
    (run / "global_step_10" / "actor" / "huggingface" / "model.safetensors").write_bytes(b"x")
    assert resolve_model_dir(tmp_path / "run") == run / "global_step_10" / "actor" / "huggingface"
    # No HF weights in the latest step: its FSDP shards are merged with verl's merger.
    (run / "global_step_12" / "actor").mkdir(parents=True)
    (run / "global_step_12" / "actor" / "model_world_size_1_rank_0.pt").write_bytes(b"x")
    merged: list[tuple[Path, Path]] = []

    def merge(actor: Path, target: Path) -> None:
        merged.append((actor, target))
        target.mkdir()
        (target / "config.json").write_text("{}")
        (target / "model.safetensors").write_bytes(b"x")

    assert resolve_model_dir(tmp_path / "run", merge=merge) == run / "global_step_12" / "actor" / "huggingface_merged"
    assert merged == [(run / "global_step_12" / "actor", run / "global_step_12" / "actor" / "huggingface_merged")]
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="neither a Hugging Face model folder"):
        resolve_model_dir(tmp_path / "empty")


def test_evaluation_takes_counts_per_source(embedded: tuple[Path, Path], tiny_model: Path, tmp_path: Path) -> None:
    from mr_search.eval.question_cap import QuestionCap

    cache, test = embedded
    config = EvalConfig(
        attempts=1, max_questions=QuestionCap(1, {"embedded_2hop": 2}), max_new_tokens_per_turn=12, response_length=256
    )
    paths = _evaluate(cache, test, tmp_path, config, ModelSpec("m", tiny_model))
    records = [json.loads(line) for line in paths["trajectories.jsonl"].read_text().splitlines()]
    assert sorted(r["data_source"] for r in records) == ["embedded_1hop", "embedded_2hop", "embedded_2hop"]
    assert json.loads(paths["results.json"].read_text())["meta"]["max questions per source"] == "1,embedded_2hop=2"


@pytest.mark.slow
def test_models_in_worker_processes_give_the_records_of_one_after_the_other(
    embedded: tuple[Path, Path], tiny_model: Path, tmp_path: Path, retrieval_service: Any
) -> None:
    """Two models in two spawned workers against the real embedded service: the same records, in the same order."""
    cache, test = embedded
    url = retrieval_service(cache / "world" / "corpus.jsonl")
    config = EvalConfig(attempts=2, max_questions=2, max_new_tokens_per_turn=12, response_length=512)
    models = [ModelSpec("first", tiny_model), ModelSpec("second", tiny_model)]
    texts = {}
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        paths = evaluate(models, test, out, retriever_url=url, config=config, progress=False, workers=workers)
        texts[workers] = paths["trajectories.jsonl"].read_text()
        assert json.loads(paths["results.json"].read_text())["meta"]["workers"] == workers
    records = [json.loads(line) for line in texts[2].splitlines()]
    assert [r["method"] for r in records] == ["first"] * 4 + ["second"] * 4, "the models' order, as one after the other"
    assert texts[1] == texts[2]


def test_workers_are_refused_with_an_in_process_client_and_below_one(
    embedded: tuple[Path, Path], tmp_path: Path
) -> None:
    _, test = embedded
    models = [ModelSpec("a", tmp_path), ModelSpec("b", tmp_path)]
    with pytest.raises(ValueError, match="an in-process client cannot"):
        evaluate(models, test, tmp_path / "o", retriever_url="", retrieval_client=object(), workers=2)
    with pytest.raises(ValueError, match="workers=0"):
        evaluate(models, test, tmp_path / "o", retriever_url="", workers=0)

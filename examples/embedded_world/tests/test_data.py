"""The embedded world as verl parquet: three splits, RL layout, prompts, golds, caching."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from mr_search.data.rows import make_row
from mr_search.prompts import question_prompt
from mr_search_embedded.data import EmbeddedParquet, ensure_embedded_parquet


@pytest.fixture(scope="module")
def parquet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, EmbeddedParquet]:
    cache = tmp_path_factory.mktemp("cache")
    return cache, ensure_embedded_parquet(cache)


def test_three_splits_each_with_its_split_hops_and_relation(parquet: tuple[Path, EmbeddedParquet]) -> None:
    cache, paths = parquet
    assert paths._fields == ("train", "dev", "test")
    for split, path in zip(paths._fields, paths, strict=True):
        assert path.name == f"{split}.parquet"
        frame = pd.read_parquet(path)
        world = [json.loads(line) for line in (cache / "world" / f"{split}.jsonl").read_text().splitlines()]
        assert len(frame) == len(world)
        infos = list(frame["extra_info"])
        assert {info["split"] for info in infos} == {split}
        assert [info["hops"] for info in infos] == [q["hops"] for q in world]
        assert [info["relation"] for info in infos] == [q["relation"] for q in world]
        assert {info["hops"] for info in infos} == {1, 2}
    assert [len(pd.read_parquet(p)) for p in paths] == [2960, 350, 350]


def test_rows_follow_the_rl_layout(parquet: tuple[Path, EmbeddedParquet]) -> None:
    cache, (train, _, test) = parquet
    world_test = [json.loads(line) for line in (cache / "world" / "test.jsonl").read_text().splitlines()]
    frame = pd.read_parquet(test)
    assert list(frame.columns) == ["data_source", "prompt", "ability", "reward_model", "extra_info", "agent_name"]
    assert len(frame) == len(world_test)
    row, source = frame.iloc[3], world_test[3]
    assert row["data_source"] == source["data_source"]
    assert list(row["prompt"]) == [{"role": "user", "content": question_prompt(source["question"])}]
    assert row["ability"] == "fact-reasoning" and row["agent_name"] == "mr_search"
    assert row["reward_model"]["style"] == "rule"
    assert list(row["reward_model"]["ground_truth"]["target"]) == source["golden_answers"]
    info = row["extra_info"]
    assert info["split"] == "test" and info["index"] == 3 and info["question"] == source["question"]
    assert list(info["gold_doc_ids"]) == source["gold_doc_ids"]
    assert set(frame["data_source"]) == {"embedded_1hop", "embedded_2hop"}
    assert len(pd.read_parquet(train)) > len(frame)


def test_second_call_reuses_the_cache(parquet: tuple[Path, EmbeddedParquet]) -> None:
    cache, paths = parquet
    stamps = [p.stat().st_mtime_ns for p in paths]
    assert ensure_embedded_parquet(cache) == paths
    assert [p.stat().st_mtime_ns for p in paths] == stamps


def test_a_changed_world_rewrites_the_parquet(tmp_path: Path) -> None:
    train = ensure_embedded_parquet(tmp_path).train
    stamp = tmp_path / "data" / "embedded" / "stamp.json"
    stamp.write_text(json.dumps({"format": 0}))
    before = train.stat().st_mtime_ns
    ensure_embedded_parquet(tmp_path)
    assert train.stat().st_mtime_ns != before
    assert json.loads(stamp.read_text())["format"] != 0


def test_make_row_rejects_a_question_without_answers() -> None:
    with pytest.raises(ValueError, match="no non-empty golden answer"):
        make_row(question="Who?", golden_answers=["  "], data_source="nq", index=0, split="train")


def test_two_concurrent_callers_write_the_parquet_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call_together
) -> None:
    """Two runs side by side on a cold cache: one writes the files (under the lock), the other reads them."""
    import time

    from mr_search_embedded import data

    real_write = data.write_parquet
    writes: list[Path] = []

    def slow_write(rows, path):
        writes.append(Path(path))
        time.sleep(0.3)  # long enough that the second caller arrives mid-build
        return real_write(rows, path)

    monkeypatch.setattr(data, "write_parquet", slow_write)
    results = call_together(lambda: ensure_embedded_parquet(tmp_path), timeout=120)
    assert [p.name for p in writes] == ["train.parquet", "dev.parquet", "test.parquet"], "written once, by one caller"
    assert len(set(results)) == 1 and all(len(pd.read_parquet(p)) for p in results[0])


def test_every_prompt_fits_both_presets_so_the_overlong_filter_drops_none(
    parquet: tuple[Path, EmbeddedParquet], monkeypatch: pytest.MonkeyPatch
) -> None:
    """verl's data.filter_overlong_prompts would keep every embedded question: with the tiny policy's tokenizer each
    prompt is shorter than the embedded preset's max_prompt_length and the paper preset's. So the embedded preset
    leaves the filter off (a tokenizing pass saved at every launch), and a paper-preset run on these questions (the
    filter on) drops none: the documented commands need no data.filter_overlong_prompts=False (docs/gpu.md)."""
    import yaml
    from transformers import AutoTokenizer

    from mr_search_embedded.tiny_model import ensure_tiny_model

    cache, paths = parquet
    monkeypatch.setenv("MR_SEARCH_CACHE", str(cache))
    monkeypatch.delenv("MR_SEARCH_WORLD", raising=False)
    tokenizer = AutoTokenizer.from_pretrained(ensure_tiny_model())
    configs = Path(__file__).resolve().parents[3] / "configs"
    limits = [
        yaml.safe_load((configs / name).read_text())["data"]["max_prompt_length"]
        for name in ("mr_search_embedded.yaml", "recipe/paper.yaml")
    ]
    for path in paths:
        for messages in pd.read_parquet(path)["prompt"]:
            text = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
            length = len(tokenizer(text, add_special_tokens=False)["input_ids"])  # as verl's filter counts
            assert length <= min(limits), f"{path.name}: a prompt of {length} tokens; limits {limits}"

"""The threehop world: enough three-hop questions in every split, a chain of three articles each naming only the next
one, its own cache folder, parquet rows with ``hops`` 3."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from mr_search_embedded.world.threehop import THREE_HOP_RELATIONS, build_threehop_world
from mr_search_embedded.world.variant import variant_cache_dir
from mr_search_embedded.world.world import WorldRows, ensure_world


@pytest.fixture(scope="module")
def world() -> WorldRows:
    return build_threehop_world(0)


def test_every_split_holds_enough_questions_of_each_kind(world: WorldRows) -> None:
    hops = {split: Counter(r["hops"] for r in getattr(world, split)) for split in ("train", "dev", "test")}
    assert hops["test"][3] >= 200 and hops["test"][1] >= 100 and hops["test"][2] >= 100
    assert hops["dev"][3] >= 100 and hops["dev"][1] >= 100 and hops["dev"][2] >= 100
    assert hops["train"][3] >= 500, "RL trains on three-hop questions too"
    relations = Counter(r["relation"] for r in world.test if r["hops"] == 3)
    assert set(relations) == set(THREE_HOP_RELATIONS)


def test_a_three_hop_chain_names_only_the_next_article(world: WorldRows) -> None:
    corpus = world.corpus
    three = [r for r in world.train + world.dev + world.test if r["hops"] == 3]
    for row in three:
        assert row["data_source"] == "embedded_3hop" and row["relation"] in THREE_HOP_RELATIONS
        company, founder, city = (corpus[int(i)] for i in row["gold_doc_ids"])
        answer = row["golden_answers"][0]
        assert company["title"] in row["question"] and founder["title"] not in row["question"]
        assert founder["title"] in company["text"] and city["title"] not in company["text"], row
        assert city["title"] in founder["text"] and answer not in founder["text"], row
        assert answer in city["text"] and answer not in company["text"], row


def test_the_variant_has_its_own_cache_and_parquet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mr_search_embedded.data import ensure_embedded_parquet

    monkeypatch.setenv("MR_SEARCH_CACHE", str(tmp_path))
    monkeypatch.setenv("MR_SEARCH_WORLD", "threehop")
    assert variant_cache_dir() == tmp_path / "worlds" / "threehop-v1"
    paths = ensure_world()
    meta = json.loads(paths.meta.read_text())
    assert meta["variant"] == "threehop" and meta["config"]["n_companies"] == 700
    assert meta["hops"]["test"]["3"] >= 200
    parquet = ensure_embedded_parquet()
    assert parquet.test.parent == tmp_path / "worlds" / "threehop-v1" / "data" / "embedded"
    infos = list(pd.read_parquet(parquet.test)["extra_info"])
    assert {i["split"] for i in infos} == {"test"} and {i["hops"] for i in infos} == {1, 2, 3}
    assert {i["relation"] for i in infos if i["hops"] == 3} == set(THREE_HOP_RELATIONS)
    assert not (tmp_path / "world").exists(), "the default world's folder is not touched"


def test_every_prompt_fits_the_embedded_preset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The three-hop questions are the longest: with the threehop world's tokenizer each prompt still fits the
    embedded preset's max_prompt_length, so verl's overlong filter drops none."""
    import yaml
    from transformers import AutoTokenizer

    from mr_search_embedded.data import ensure_embedded_parquet
    from mr_search_embedded.tiny_model import ensure_tiny_model

    monkeypatch.setenv("MR_SEARCH_CACHE", str(tmp_path))
    monkeypatch.setenv("MR_SEARCH_WORLD", "threehop")
    tokenizer = AutoTokenizer.from_pretrained(ensure_tiny_model())
    config = Path(__file__).resolve().parents[4] / "configs" / "mr_search_embedded.yaml"
    limit = yaml.safe_load(config.read_text())["data"]["max_prompt_length"]
    frame = pd.read_parquet(ensure_embedded_parquet().test)
    longest = max(frame.itertuples(), key=lambda row: len(row.extra_info["question"]))
    text = tokenizer.apply_chat_template(list(longest.prompt), add_generation_prompt=True, tokenize=False)
    assert longest.extra_info["hops"] == 3
    assert len(tokenizer(text, add_special_tokens=False)["input_ids"]) <= limit

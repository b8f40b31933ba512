"""A hand-made mini world (passages + 1-hop and 2-hop questions) and a tiny policy built on it, for fast tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mr_search_embedded.world.splits import HeldOut
from mr_search_embedded.world.world import WorldPaths

PASSAGES = [
    ("Aldo Venn", "Aldo Venn was a baker born in Kumholt."),
    ("Alda Venn", "Alda Venn was a singer born in Ristead."),
    ("Kumholt", "Kumholt is a city in Tenaria."),
    ("Ristead", "Ristead is a city in Vodikica."),
    ("Trade in Kumholt", "Merchants from Vodikica sell wool and salt in Kumholt."),
    ("Brepos Sol", "Brepos Sol was a farmer born in Ristead."),
    ("Ziniix", "Ziniix is a company founded by Brepos Sol. Its headquarters are in Kumholt."),
    ("Tenaria", "Tenaria is a country. Its capital is Kumholt."),
    ("Alda Street", "Alda Street is a road in Ristead."),
]
QUESTIONS = [
    ("Where was Aldo Venn born?", "Kumholt", ["0"], "birthplace"),
    ("Where was Alda Venn born?", "Ristead", ["1"], "birthplace"),
    ("Where was Brepos Sol born?", "Ristead", ["5"], "birthplace"),
    ("What was the profession of Aldo Venn?", "baker", ["0"], "profession"),
    ("What was the profession of Alda Venn?", "singer", ["1"], "profession"),
    ("In which country was Aldo Venn born?", "Tenaria", ["0", "2"], "birth_country"),
    ("In which country was Alda Venn born?", "Vodikica", ["1", "3"], "birth_country"),
    ("Who founded Ziniix?", "Brepos Sol", ["6"], "founder"),
]


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


@pytest.fixture(scope="session")
def mini_world(tmp_path_factory) -> WorldPaths:
    root = tmp_path_factory.mktemp("world")
    paths = WorldPaths.under(root)
    _write(
        paths.corpus,
        [
            {"id": str(i), "contents": f'"{title}"\n{text}', "title": title, "text": text}
            for i, (title, text) in enumerate(PASSAGES)
        ],
    )
    _write(
        paths.train,
        [
            {
                "id": f"q{i}",
                "question": q,
                "golden_answers": [a],
                "gold_doc_ids": docs,
                "hops": len(docs),
                "data_source": f"embedded_{len(docs)}hop",
                "relation": relation,
            }
            for i, (q, a, docs, relation) in enumerate(QUESTIONS)
        ],
    )
    _write(paths.dev, [])
    _write(paths.test, [])
    paths.held_out.write_text(HeldOut((), ()).to_json())
    paths.meta.write_text("{}")
    return paths


@pytest.fixture(scope="session")
def mini_corpus(mini_world) -> list[dict]:
    return [json.loads(line) for line in mini_world.corpus.read_text().splitlines()]


@pytest.fixture(scope="session")
def mini_questions(mini_world) -> list[dict]:
    return [json.loads(line) for line in mini_world.train.read_text().splitlines()]


@pytest.fixture(scope="session")
def tiny_policy(tmp_path_factory, mini_world) -> Path:
    """A small random Qwen2 whose tokenizer learnt the prompts and the mini world (seconds to build)."""
    from mr_search import prompts
    from mr_search_embedded.tiny_model import TinyModelConfig, build_model, build_tokenizer

    out = tmp_path_factory.mktemp("tiny")
    texts = [
        prompts.QUESTION_TEMPLATE,
        prompts.REFLECTION_PROMPT,
        *(t for _, t in PASSAGES),
        *(q for q, *_ in QUESTIONS),
    ]
    tokenizer = build_tokenizer(texts, out, vocab_size=600)
    build_model(
        out,
        tokenizer,
        TinyModelConfig(
            vocab_size=600, hidden_size=32, intermediate_size=64, num_attention_heads=2, num_key_value_heads=1
        ),
    )
    return out


@pytest.fixture(scope="session")
def index(mini_corpus):
    from mr_search_embedded.warmstart.lookup import LexicalIndex

    return LexicalIndex(mini_corpus)


@pytest.fixture(scope="session")
def tokenizer(tiny_policy):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_policy)


@pytest.fixture(scope="module")
def small_namesake():
    """The namesake world with 24 groups: the warm start's lexical index of it (held-out passages hidden) and its
    training questions."""
    from mr_search_embedded.warmstart.inputs import training_index
    from mr_search_embedded.world.namesake import NamesakeConfig, build_namesake_world

    world = build_namesake_world(0, NamesakeConfig(groups=24))
    return training_index(world.corpus, world.held_out), world.train

"""The evaluation runner drives the project's real agent loop (scripted generator, fake retriever)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from verl.workers.rollout.replica import TokenOutput

from mr_search import prompts
from mr_search.agent.retrieval_client import SearchOutcome
from mr_search.data.rows import make_row
from mr_search.eval.runner import GREEDY, EvalConfig, agent_loop_factory, run_episodes, select_rows
from mr_search_embedded.tiny_model import build_tokenizer


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    texts = [
        prompts.question_prompt("Where was Aldo Venn born?"),
        prompts.REFLECTION_PROMPT,
        "Aldo Venn Brimholt Kumholt Doc Title born city",
        "<search> q </search> <answer> a </answer>",
    ] * 3
    return build_tokenizer(texts, tmp_path_factory.mktemp("tok"), vocab_size=600)


class ScriptedServer:
    """Answers per question: the n-th call for a prompt gets the n-th scripted turn of its question."""

    def __init__(self, tokenizer: Any, scripts: dict[str, list[str]]) -> None:
        self.tokenizer, self.scripts = tokenizer, scripts
        self.params: list[dict[str, Any]] = []
        self.calls: dict[str, int] = {}

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any):
        self.params.append(dict(sampling_params))
        context = self.tokenizer.decode(prompt_ids)
        question = next(q for q in self.scripts if q in context)
        n = self.calls.get(question, 0)
        self.calls[question] = n + 1
        text = self.scripts[question][n] if n < len(self.scripts[question]) else "<answer>none</answer>"
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return TokenOutput(token_ids=ids, log_probs=None, stop_reason="completed", extra_fields={"global_steps": 0})


class Retriever:
    def __init__(self) -> None:
        self.queries: list[str] = []

    async def search(self, query: str, topk: int) -> SearchOutcome:
        self.queries.append(query)
        doc = {"id": "0", "contents": f'"Aldo Venn"\nAldo Venn was born in Brimholt ({query}).'}
        return SearchOutcome(documents=[{"document": doc, "score": 1.0}] * topk)


def _rows() -> list[dict[str, Any]]:
    rows = []
    for i, (q, gold, source) in enumerate(
        [
            ("Where was Aldo Venn born?", "Brimholt", "embedded_1hop"),
            ("Where was Aldo Wenn born?", "Kumholt", "embedded_1hop"),
            ("In which country was Aldo Venn born?", "Tenaria", "embedded_2hop"),
        ]
    ):
        rows.append(
            make_row(
                question=q, golden_answers=[gold], data_source=source, index=i, split="test", extra={"id": f"t{i}"}
            )
        )
    return rows


def test_meta_episodes_become_records_with_the_loops_scores(tokenizer: Any) -> None:
    scripts = {
        "Where was Aldo Venn born?": [
            "<search> Aldo Venn </search>",
            "<answer> Kumholt </answer>",
            "Wrong city, check again. <search> Aldo Venn born </search>",
            "<answer> Brimholt </answer>",
        ],
        "Where was Aldo Wenn born?": ["<answer> Kumholt </answer>", "<answer> Kumholt </answer>"],
        "In which country was Aldo Venn born?": ["no idea", "<answer> Brimholt </answer>"],
    }
    server, retriever = ScriptedServer(tokenizer, scripts), Retriever()
    config = EvalConfig(attempts=2, max_new_tokens_per_turn=64, response_length=2048, method="tiny")
    make_loop = agent_loop_factory(tokenizer, server, retriever, config)
    records = asyncio.run(run_episodes(_rows(), make_loop, tokenizer, config, progress=False))

    first = records[0]
    assert (first["uid"], first["method"], first["data_source"]) == ("t0", "tiny", "embedded_1hop")
    assert [a["answer"] for a in first["attempts"]] == ["Kumholt", "Brimholt"]
    assert [a["em"] for a in first["attempts"]] == [0.0, 1.0]
    assert [a["reward"] for a in first["attempts"]] == [0.0, 1.0]
    second_turns = first["attempts"][1]["turns"]
    assert second_turns[0]["role"] == "user" and prompts.REFLECTION_PROMPT in second_turns[0]["content"]
    reflection = "Wrong city, check again. <search> Aldo Venn born </search>"
    assert second_turns[1] == {"role": "assistant", "content": reflection}
    assert second_turns[2]["role"] == "tool" and 'Doc 1(Title: "Aldo Venn")' in second_turns[2]["content"]
    assert retriever.queries == ["Aldo Venn", "Aldo Venn born"]
    assert [a["em"] for a in records[1]["attempts"]] == [1.0, 1.0]
    third = records[2]["attempts"][0]
    assert third["turns"][1]["role"] == "user" and "Invalid action" in third["turns"][1]["content"]
    assert all(p["temperature"] == GREEDY["temperature"] for p in server.params), "evaluation must decode greedily"


def test_select_rows_caps_each_data_source() -> None:
    rows = _rows()
    assert [r["extra_info"]["id"] for r in select_rows(rows, 1)] == ["t0", "t2"]
    assert len(select_rows(rows, None)) == 3


def test_eval_config_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="attempts"):
        EvalConfig(attempts=0)
    with pytest.raises(ValueError, match="max_questions"):
        EvalConfig(max_questions=0)
    assert EvalConfig(attempts=6).episode()["attempts"] == 6
    with pytest.raises(ValueError, match="outcome_feedback"):
        EvalConfig(outcome_feedback="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reflection_restates_question"):
        EvalConfig(reflection_restates_question=1)  # type: ignore[arg-type]


def test_reflection_turns_restate_the_question_when_asked(tokenizer: Any) -> None:
    scripts = {"Where was Aldo Venn born?": ["<answer> Brimholt </answer>"] * 3}
    for restates in (True, False):
        config = EvalConfig(
            attempts=3, max_new_tokens_per_turn=32, response_length=1024, reflection_restates_question=restates
        )
        assert config.episode()["reflection_restates_question"] is restates
        make_loop = agent_loop_factory(tokenizer, ScriptedServer(tokenizer, scripts), Retriever(), config)
        (record,) = asyncio.run(run_episodes(_rows()[:1], make_loop, tokenizer, config, progress=False))
        said = [a["turns"][0]["content"] for a in record["attempts"][1:]]
        assert len(said) == 2
        assert all(("Question: Where was Aldo Venn born?" in s) is restates for s in said)


def test_outcome_feedback_tells_each_reflection_whether_the_answer_was_right(tokenizer: Any) -> None:
    scripts = {"Where was Aldo Venn born?": ["<answer> Kumholt </answer>", *["<answer> Brimholt </answer>"] * 2]}
    config = EvalConfig(attempts=3, max_new_tokens_per_turn=32, response_length=1024, outcome_feedback=True)
    make_loop = agent_loop_factory(tokenizer, ScriptedServer(tokenizer, scripts), Retriever(), config)
    (record,) = asyncio.run(run_episodes(_rows()[:1], make_loop, tokenizer, config, progress=False))
    assert [a["em"] for a in record["attempts"]] == [0.0, 1.0, 1.0]
    said = [a["turns"][0]["content"] for a in record["attempts"][1:]]
    assert prompts.FEEDBACK_WRONG.strip() in said[0] and prompts.FEEDBACK_RIGHT.strip() in said[1]
    plain = EvalConfig(attempts=3, max_new_tokens_per_turn=32, response_length=1024)
    make_loop = agent_loop_factory(tokenizer, ScriptedServer(tokenizer, scripts), Retriever(), plain)
    (record,) = asyncio.run(run_episodes(_rows()[:1], make_loop, tokenizer, plain, progress=False))
    assert not any("answer was" in a["turns"][0]["content"] for a in record["attempts"][1:]), "paper: not told"


def test_records_round_trip_to_the_report(tokenizer: Any, tmp_path: Path) -> None:
    from mr_search.eval.metrics import summarize

    scripts = {
        q: ["<answer> Brimholt </answer>"] * 3
        for q in ("Where was Aldo Venn born?", "Where was Aldo Wenn born?", "In which country was Aldo Venn born?")
    }
    config = EvalConfig(attempts=3, max_new_tokens_per_turn=32, response_length=1024)
    make_loop = agent_loop_factory(tokenizer, ScriptedServer(tokenizer, scripts), Retriever(), config)
    records = asyncio.run(run_episodes(_rows(), make_loop, tokenizer, config, progress=False))
    rows = summarize(records)["methods"]["mr_search"]["attempts"]
    assert [r["em"]["embedded_1hop"] for r in rows] == [50.0, 50.0, 50.0]
    assert [r["em"]["embedded_2hop"] for r in rows] == [0.0, 0.0, 0.0]

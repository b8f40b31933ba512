"""Synthetic meta-episode transcripts over the embedded world: what the warm-started policy imitates.

Each transcript is one question answered in K attempts, written the way the MR-Search agent should act:
think, search the asked-about entity (then the bridge entity for two hops), read passages, answer; after the
reflection turn, either keep a supported answer or search again. Some leading attempts search vaguely (the whole
question) and answer wrong (a same-type answer of another question, or the bridge entity of a two-hop question),
so the policy sees mistakes followed by corrections.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mr_search.prompts import format_passages
from mr_search.warmstart.lookup import LexicalIndex

Role = Literal["model", "information"]

THINK_SEARCH = "I need to search for this."
THINK_BRIDGE = "I found {bridge}. I need to search for it."
THINK_ANSWER = "I found the answer."
THINK_RETRY = "My previous answer may be wrong. I will search again."
THINK_KEEP = "My previous answer is supported by the passages."


@dataclass(frozen=True)
class Turn:
    """One piece of an attempt: text the model writes, or passages the environment returns."""

    role: Role
    text: str


@dataclass(frozen=True)
class Transcript:
    """A question and its K attempts (reflection turns sit between attempts, added when rendered)."""

    question: str
    golden_answers: tuple[str, ...]
    attempts: tuple[tuple[Turn, ...], ...]
    correct: tuple[bool, ...]


@dataclass(frozen=True)
class TranscriptConfig:
    """How transcripts are drawn.

    Attributes:
        attempts: attempts per transcript (K).
        topk: passages per search (paper: 3).
        p_wrong: chance that each attempt before the first right one is wrong (at most K - 1 are wrong).
        seed: the random seed; the same seed and world give the same transcripts.
    """

    attempts: int = 3
    topk: int = 3
    p_wrong: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"TranscriptConfig.attempts={self.attempts}: use at least 1")
        if self.topk < 1:
            raise ValueError(f"TranscriptConfig.topk={self.topk}: use at least 1")
        if not 0.0 <= self.p_wrong < 1.0:
            raise ValueError(f"TranscriptConfig.p_wrong={self.p_wrong}: use a probability in [0, 1)")


def search_turn(think: str, query: str) -> str:
    return f"<think> {think} </think>\n<search> {query} </search>"


def answer_turn(think: str, answer: str) -> str:
    return f"<think> {think} </think>\n<answer> {answer} </answer>"


class TranscriptBuilder:
    """Builds transcripts for question rows (``question``, ``golden_answers``, ``gold_doc_ids``, ``relation``)."""

    def __init__(self, index: LexicalIndex, questions: Sequence[Mapping[str, Any]], config: TranscriptConfig) -> None:
        self.index = index
        self.config = config
        self._answers_by_relation: dict[str, list[str]] = defaultdict(list)
        for row in questions:
            self._answers_by_relation[str(row.get("relation", ""))].append(str(row["golden_answers"][0]))

    def _information(self, query: str, gold_id: str | None) -> Turn:
        docs = list(self.index.search(query, self.config.topk))
        if gold_id is not None and all(str(d["id"]) != gold_id for d in docs):
            docs = [*docs[: self.config.topk - 1], self.index.doc(gold_id)]
        return Turn("information", format_passages(docs))

    def _wrong_answer(self, rng: random.Random, row: Mapping[str, Any]) -> str:
        golds = {str(a).lower() for a in row["golden_answers"]}
        pool = [a for a in self._answers_by_relation[str(row.get("relation", ""))] if a.lower() not in golds]
        return rng.choice(pool) if pool else "unknown"

    def _right_attempt(self, row: Mapping[str, Any], retry: bool) -> tuple[Turn, ...]:
        gold_ids = [str(d) for d in row["gold_doc_ids"]]
        answer = str(row["golden_answers"][0])
        subject = str(self.index.doc(gold_ids[0])["title"])  # the asked-about entity: a precise query
        turns = [
            Turn("model", search_turn(THINK_RETRY if retry else THINK_SEARCH, subject)),
            self._information(subject, gold_ids[0]),
        ]
        if len(gold_ids) > 1:  # two hops: the bridge entity named in the first passage is searched next
            bridge = str(self.index.doc(gold_ids[1])["title"])
            turns += [
                Turn("model", search_turn(THINK_BRIDGE.format(bridge=bridge), bridge)),
                self._information(bridge, gold_ids[1]),
            ]
        turns.append(Turn("model", answer_turn(THINK_ANSWER, answer)))
        return tuple(turns)

    def _wrong_attempt(self, rng: random.Random, row: Mapping[str, Any], retry: bool) -> tuple[Turn, ...]:
        # A vaguer query (the whole question), then a plausible wrong answer.
        gold_ids = [str(d) for d in row["gold_doc_ids"]]
        query = str(row["question"]).rstrip("?")
        if len(gold_ids) > 1 and rng.random() < 0.5:  # the classic two-hop slip: answering the bridge entity
            wrong = str(self.index.doc(gold_ids[1])["title"])
        else:
            wrong = self._wrong_answer(rng, row)
        return (
            Turn("model", search_turn(THINK_RETRY if retry else THINK_SEARCH, query)),
            self._information(query, None),
            Turn("model", answer_turn(THINK_ANSWER, wrong)),
        )

    def build(self, row: Mapping[str, Any], rng: random.Random) -> Transcript:
        """One transcript for ``row``; ``rng`` decides how many leading attempts are wrong."""
        wrong = 0
        while wrong < self.config.attempts - 1 and rng.random() < self.config.p_wrong:
            wrong += 1
        answer = str(row["golden_answers"][0])
        attempts: list[tuple[Turn, ...]] = []
        for index in range(self.config.attempts):
            if index < wrong:
                attempts.append(self._wrong_attempt(rng, row, retry=index > 0))
            elif index == wrong:
                attempts.append(self._right_attempt(row, retry=index > 0))
            else:
                attempts.append((Turn("model", answer_turn(THINK_KEEP, answer)),))
        return Transcript(
            question=str(row["question"]),
            golden_answers=tuple(str(a) for a in row["golden_answers"]),
            attempts=tuple(attempts),
            correct=tuple(index >= wrong for index in range(self.config.attempts)),
        )


def build_transcripts(
    questions: Sequence[Mapping[str, Any]], index: LexicalIndex, count: int, config: TranscriptConfig
) -> list[Transcript]:
    """``count`` transcripts over a seeded sample of ``questions`` (deterministic for a seed)."""
    if not questions:
        raise ValueError("build_transcripts: no questions given; pass the embedded world's training questions")
    rng = random.Random(config.seed)
    builder = TranscriptBuilder(index, questions, config)
    rows = [questions[rng.randrange(len(questions))] for _ in range(count)]
    return [builder.build(row, rng) for row in rows]

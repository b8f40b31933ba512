"""Synthetic meta-episode transcripts over the embedded world: what the warm-started policy imitates.

Each transcript is one question answered in K attempts, written the way the MR-Search agent should act, in a
form a 2-layer policy can learn: every query is a verbatim span (the asked-about entity's name, copied from
the question; the bridge entity's name, copied from a passage; on a retry, the question itself) and every
answer is a verbatim span of a passage shown in the context. Some first attempts slip in a grounded way: a
two-hop question answered with the bridge entity (no second search), or a one-hop question answered with the
same-kind name that a twin's or distractor's passage among the results shows. The next attempt then goes on
(searches the bridge entity) or searches again with the whole question; after a right attempt, later attempts
keep the answer. Answers never come from nowhere: a policy that imitates these has to read.
"""

from __future__ import annotations

import random
import re
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
THINK_RETRY_BRIDGE = "My previous answer may be wrong. I found {bridge}. I need to search for it."


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
        p_wrong: chance that the first attempt slips (when K > 1 and the passages offer a grounded slip);
            the attempts after it are right.
        seed: the random seed; the same seed and world give the same transcripts.
    """

    attempts: int = 3
    topk: int = 3
    p_wrong: float = 0.35
    seed: int = 0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"TranscriptConfig.attempts={self.attempts}: use at least 1")
        if self.topk < 1:
            raise ValueError(f"TranscriptConfig.topk={self.topk}: use at least 1")
        if not 0.0 <= self.p_wrong < 1.0:
            raise ValueError(f"TranscriptConfig.p_wrong={self.p_wrong}: use a probability in [0, 1)")


@dataclass(frozen=True)
class Attempt:
    """A wrong attempt and the kind of slip it shows (``bridge``: stopped at the first hop; ``misread``)."""

    kind: Literal["bridge", "misread"]
    turns: tuple[Turn, ...]


def question_query(row: Mapping[str, Any]) -> str:
    """The question itself as a query (its words verbatim, without the question mark)."""
    return str(row["question"]).strip().rstrip("?").strip()


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

    def _confuser(self, row: Mapping[str, Any], information: str) -> str | None:
        """A same-kind answer of another question that the passages show (a twin's or a distractor's)."""
        golds = {str(a).lower() for a in row["golden_answers"]}
        for candidate in self._answers_by_relation[str(row.get("relation", ""))]:
            if candidate.lower() not in golds and re.search(rf"\b{re.escape(candidate)}\b", information):
                return candidate
        return None

    def _right_attempt(self, row: Mapping[str, Any], retry: Attempt | None) -> tuple[Turn, ...]:
        gold_ids = [str(d) for d in row["gold_doc_ids"]]
        answer = str(row["golden_answers"][0])
        subject = str(self.index.doc(gold_ids[0])["title"])  # the asked-about entity, verbatim in the question
        bridge = str(self.index.doc(gold_ids[1])["title"]) if len(gold_ids) > 1 else None
        turns: list[Turn] = []
        if retry is not None and retry.kind == "bridge" and bridge is not None:
            # The previous attempt stopped at the bridge entity: go on from its passages with the second hop.
            turns.append(Turn("model", search_turn(THINK_RETRY_BRIDGE.format(bridge=bridge), bridge)))
            turns.append(self._information(bridge, gold_ids[1]))
        else:
            # The first try searches the entity's name; a retry after a misread searches the whole question.
            query = subject if retry is None else question_query(row)
            turns.append(Turn("model", search_turn(THINK_SEARCH if retry is None else THINK_RETRY, query)))
            turns.append(self._information(query, gold_ids[0]))
            if bridge is not None:  # two hops: the bridge entity named in the first passage is searched next
                turns.append(Turn("model", search_turn(THINK_BRIDGE.format(bridge=bridge), bridge)))
                turns.append(self._information(bridge, gold_ids[1]))
        turns.append(Turn("model", answer_turn(THINK_ANSWER, answer)))
        return tuple(turns)

    def _wrong_attempt(self, row: Mapping[str, Any], retry: Attempt | None) -> Attempt | None:
        """A grounded slip (the answer is read from the passages), or None when the passages offer none.

        Two hops: the bridge entity given as the answer, without the second search. One hop: the
        same-kind answer that a twin's or distractor's passage among the results shows.
        """
        gold_ids = [str(d) for d in row["gold_doc_ids"]]
        subject = str(self.index.doc(gold_ids[0])["title"])
        think = THINK_SEARCH if retry is None else THINK_RETRY
        search = Turn("model", search_turn(think, subject))
        information = self._information(subject, gold_ids[0])
        if len(gold_ids) > 1:
            wrong: str | None = str(self.index.doc(gold_ids[1])["title"])
            kind = "bridge"
        else:
            wrong = self._confuser(row, information.text)
            kind = "misread"
        if wrong is None:
            return None
        return Attempt(kind, (search, information, Turn("model", answer_turn(THINK_ANSWER, wrong))))

    def build(self, row: Mapping[str, Any], rng: random.Random) -> Transcript:
        """One transcript for ``row``; ``rng`` decides how many leading attempts are wrong."""
        answer = str(row["golden_answers"][0])
        attempts: list[tuple[Turn, ...]] = []
        correct: list[bool] = []
        previous: Attempt | None = None
        while len(attempts) < self.config.attempts:
            if correct and correct[-1]:
                attempts.append((Turn("model", answer_turn(THINK_KEEP, answer)),))
                correct.append(True)
                continue
            slip = None
            if not attempts and self.config.attempts > 1 and rng.random() < self.config.p_wrong:
                slip = self._wrong_attempt(row, previous)
            if slip is not None:
                attempts.append(slip.turns)
                correct.append(False)
                previous = slip
                continue
            attempts.append(self._right_attempt(row, previous))
            correct.append(True)
        return Transcript(
            question=str(row["question"]),
            golden_answers=tuple(str(a) for a in row["golden_answers"]),
            attempts=tuple(attempts),
            correct=tuple(correct),
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

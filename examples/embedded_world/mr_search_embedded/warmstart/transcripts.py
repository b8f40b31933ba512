"""Synthetic meta-episode transcripts over the embedded world: what the warm-started policy imitates.

Each transcript is one question answered in K attempts, written the way the MR-Search agent should act, in a
form a 2-layer policy can learn: every trained query is a verbatim span (the asked-about entity's name, copied
from the question, on a first try or a retry; the bridge entity's name, copied from a passage) and every
trained answer is a verbatim span of a passage shown in the context. Some first attempts slip: a two-hop
question answered with the bridge entity (no second search), a one-hop question answered with the same-kind
name that a twin's or distractor's passage among the results shows, or (``partial``) a search for only the
first word of the entity's name that misses its passage, answered with a same-kind name the passages do not
show. Whenever an attempt is wrong the next one SEARCHES again: the bridge entity after a two-hop slip, the
entity's full name after a partial query, the entity's name again after a misread (and reads its own passage
this time). After a right attempt, the next one keeps the answer or (``p_verify``) checks it the same way (it
cannot know it was right): a policy that imitates these searches again after its first attempt more often than
it keeps. The slipped turns are context only (``Turn.trained`` False: no loss), so the policy learns to react to
a wrong attempt without learning to make one; answers it is trained to give never come from nowhere.

In the ``namesake`` world (``MR_SEARCH_WORLD=namesake``) a namesake question's first attempt may slip the hasty way:
it searches the asked-about name and answers the birthplace that name's article gives, the well-known namesake's;
the next attempt goes on with the name that article says to search instead (as after a two-hop slip: the second
gold passage's title). With ``namesake_copy`` (the namesake world's warm start from recipe v3 of that world on) the
thought after the name's article first repeats the sentence of it that names the question's own profession ("The
sailor Aldo Venn is better known as Drelo Kam. I need to search for it."; for a control question "The painter Aldo
Venn was born in Kumholt. I found the answer."): which namesake the question means is then decided by copying one
word of the question, and the alias (or the city) by copying from a line the policy has just written.

With ``namesake_presence`` (the namesake world's version 4, recipe 6) N's passages are about one namesake only and the
decision is whether the question's profession word occurs in them: the thought after them copies that word and says
whether it is there ("The sailor is not in the passages. I need to search for sailor Aldo Venn." then that search;
for a control question "The painter is in the passages. I found the answer."), and a retry after the hasty slip starts
"My previous answer may be wrong. The sailor is not in the passages. ...".

With ``outcome_feedback`` (MAGE-style, off in the paper) the reflection turn says whether the previous answer was
right, so after a right attempt the next one always keeps it, and the thought after each reflection repeats what
it was told ("My previous answer was incorrect. ..."): a policy that imitates these retries only when told it was
wrong.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mr_search.prompts import format_passages
from mr_search_embedded.warmstart.lookup import LexicalIndex

Role = Literal["model", "information"]
NAMESAKE_RELATION = "namesake_birthplace"  # mr_search_embedded.world.namesake.RETRY_RELATION (not imported:
# the retrieval package is optional)

THINK_SEARCH = "I need to search for this."
THINK_BRIDGE = "I found {bridge}. I need to search for it."
THINK_ANSWER = "I found the answer."
THINK_RETRY = "My previous answer may be wrong. I will search again."
THINK_KEEP = "My previous answer is supported by the passages."
THINK_RETRY_BRIDGE = "My previous answer may be wrong. I found {bridge}. I need to search for it."
# Every retry's thought starts as THINK_RETRY does and the kept answer's does not, from the first word after "My
# previous answer": a policy that cannot tell whether it was wrong then searches again when most retries do.
THINK_RETRY_UNSUPPORTED = "My previous answer may be wrong: it is not in the passages. I will search for the full name."
# With outcome feedback the thought repeats what the reflection turn said ("Your previous answer was incorrect."):
# the word that decides between retrying and keeping is then a copy of an earlier one (an induction pattern a
# 2-layer policy learns), not a judgement the policy cannot make. Without it, the built policy ignored the
# feedback (searched again after 0% of its wrong greedy answers, 10% sampled).
MAY_BE_WRONG = "My previous answer may be wrong"
TOLD_WRONG = "My previous answer was incorrect"
THINK_KEEP_TOLD = "My previous answer was correct."
NAMESAKE_CONTROL_RELATION = "namesake_control"  # mr_search_embedded.world.namesake.CONTROL_RELATION
# Version 4's presence check (``namesake_presence``): the question's profession word copied, then the decision.
THINK_ABSENT = "The {profession} is not in the passages. I need to search for {profession} {name}."
THINK_PRESENT = "The {profession} is in the passages. I found the answer."
# Recipe 9's check of an answer read from B's article (``presence_check_reformulated``): the search that found it again,
# no second presence decision on a context that already holds B's article.
THINK_CHECK_REFORMULATED = "My previous answer may be wrong. I need to search for {profession} {name}."
# Recipe 11's retry (``retry_question``): the whole question, which the agent's dense index ranks right (the answer's
# passage first for 96-100% of training questions of every source; the name: 89% one-hop, 0-11% namesake), so the
# retry needs no decision, only a copy of the line after "Question:". The thought is short: with the question after it
# the turn stays within the embedded config's 48 new tokens a turn (39 at most; "... I will search for the question."
# made 53).
THINK_RETRY_QUESTION = "My previous answer may be wrong."


@dataclass(frozen=True)
class Turn:
    """One piece of an attempt: text the model writes, or passages the environment returns.

    ``trained`` False marks a model turn that is context only (a slip the policy reacts to, not one it learns).
    """

    role: Role
    text: str
    trained: bool = True


@dataclass(frozen=True)
class ScriptedTranscript:
    """A question and its K attempts (reflection turns sit between attempts, added when rendered; with
    ``outcome_feedback`` each says whether the attempt before it was right; with ``reflection_question`` each ends
    with the question's line)."""

    question: str
    golden_answers: tuple[str, ...]
    attempts: tuple[tuple[Turn, ...], ...]
    correct: tuple[bool, ...]
    outcome_feedback: bool = False
    reflection_question: bool = False


@dataclass(frozen=True)
class TranscriptConfig:
    """How transcripts are drawn.

    Attributes:
        attempts: attempts per transcript (K).
        topk: passages per search (paper: 3).
        p_wrong: chance that the first attempt slips (when K > 1); the attempts after it are right, and the
            one right after it searches again.
        p_verify: chance that an attempt after a right one searches again (the entity's name) and answers again,
            instead of keeping the answer without a search (0 in effect with ``outcome_feedback``).
        p_partial: share of the slips that search only the first word of the entity's name and answer what
            the passages do not show (the rest stop at the bridge entity or misread a twin's passage).
        seed: the random seed; the same seed and world give the same transcripts.
        outcome_feedback: the reflection turns say whether the previous answer was right (``mr_search.episode.
            outcome_feedback``; paper: off); an attempt told it was right keeps its answer.
        namesake_copy: in a namesake question (or its control), the thought after the name's article first repeats
            the sentence of it that names the question's profession (``namesake_sentence``), then searches the
            alias (or answers); off: "I found <alias>. ..." / "I found the answer." as before.
        namesake_presence: the namesake world's version 4: after the search for N the thought says whether the
            question's profession word is in the passages (``THINK_ABSENT`` then a search for "<profession> N", or
            ``THINK_PRESENT`` then the answer); excludes ``namesake_copy``.
        p_verify_found: ``p_verify`` for an attempt that follows a found answer: one right after a retry that fixed a
            wrong answer, or (with ``namesake_presence``) any right attempt of a namesake question, whose passages
            held B's article (None: ``p_verify``, as before recipe 7). Lower, the next attempt keeps a fixed answer
            more often than it checks it again (a check searches N again and can break the fix).
        presence_gold_shuffled: with ``namesake_presence``, a gold passage a namesake or control question's search
            misses (B's article after "<profession> N": the lexical index never ranks it in the top 3) takes a place
            among the ``topk`` drawn from the query instead of the last (recipe 8; before it, B's article was always
            passage 3 in training while the agent's dense index ranks it first for 91% of the training groups).
        presence_check_reformulated: with ``namesake_presence``, the check of a namesake question's right answer (read
            from B's article after "<profession> N") searches "<profession> N" again (``THINK_CHECK_REFORMULATED``)
            instead of searching N and deciding again, and comes with chance ``p_verify`` (not ``p_verify_found``):
            it no longer breaks the answer (recipe 9; recipe 8's checks searched N, then said "is in the passages"
            on a context that still held B's article). Checks of other questions' answers are as before.
        retry_question: every attempt after the first that searches (a retry after a wrong answer, a check of a
            right one) searches the whole question (``THINK_RETRY_QUESTION``) and shows the passage that answers it
            (a namesake question: B's article; else the first hop's) first, as the agent's dense index ranks it; a
            two-hop retry then searches the bridge entity (recipe 11). Off: retries search the entity's name.
        reflection_question: the reflection turns end with the question's line, as the agent loop's do with
            ``mr_search.episode.reflection_restates_question`` (recipe 12; paper: off): the retry copies the question
            from just before it.
        p_rename: share of the transcripts of questions other than the namesake world's namesake and control ones
            whose asked-about entity is renamed with a freshly drawn name no word of which is in the corpus
            (``rename.Renamer``, recipe 14; drawn apart from the rest: the other transcripts stay as they were).
    """

    attempts: int = 3
    topk: int = 3
    p_wrong: float = 0.6
    p_verify: float = 0.5
    p_partial: float = 0.5
    seed: int = 0
    outcome_feedback: bool = False
    namesake_copy: bool = False
    namesake_presence: bool = False
    p_verify_found: float | None = None
    presence_gold_shuffled: bool = False
    presence_check_reformulated: bool = False
    retry_question: bool = False
    reflection_question: bool = False
    p_rename: float = 0.0

    def __post_init__(self) -> None:
        if self.namesake_copy and self.namesake_presence:
            raise ValueError(
                "TranscriptConfig: namesake_copy (world versions 2-3) and namesake_presence (version 4) exclude each "
                "other; set one"
            )
        if self.presence_check_reformulated and not self.namesake_presence:
            raise ValueError(
                "TranscriptConfig: presence_check_reformulated is for the namesake world's version 4; set "
                "namesake_presence too"
            )
        if self.attempts < 1:
            raise ValueError(f"TranscriptConfig.attempts={self.attempts}: use at least 1")
        if self.topk < 1:
            raise ValueError(f"TranscriptConfig.topk={self.topk}: use at least 1")
        if not 0.0 <= self.p_wrong < 1.0:
            raise ValueError(f"TranscriptConfig.p_wrong={self.p_wrong}: use a probability in [0, 1)")
        if not 0.0 <= self.p_verify <= 1.0:
            raise ValueError(f"TranscriptConfig.p_verify={self.p_verify}: use a probability in [0, 1]")
        if self.p_verify_found is not None and not 0.0 <= self.p_verify_found <= 1.0:
            raise ValueError(
                f"TranscriptConfig.p_verify_found={self.p_verify_found}: use a probability in [0, 1] (None: p_verify)"
            )
        if not 0.0 <= self.p_partial <= 1.0:
            raise ValueError(f"TranscriptConfig.p_partial={self.p_partial}: use a probability in [0, 1]")
        if not 0.0 <= self.p_rename <= 1.0:
            raise ValueError(f"TranscriptConfig.p_rename={self.p_rename}: use a probability in [0, 1]")


@dataclass(frozen=True)
class Attempt:
    """A wrong attempt and the kind of slip it shows (``bridge``: stopped at the first hop; ``misread``: a twin's
    or distractor's value; ``partial``: searched part of the name, answered what the passages do not show)."""

    kind: Literal["bridge", "misread", "partial", "verify", "namesake"]
    turns: tuple[Turn, ...]


_VERIFY = Attempt("verify", ())  # a right attempt, checked by the next one


def search_turn(think: str, query: str) -> str:
    return f"<think> {think} </think>\n<search> {query} </search>"


def answer_turn(think: str, answer: str) -> str:
    return f"<think> {think} </think>\n<answer> {answer} </answer>"


def namesake_sentence(question: str, subject: str, text: str) -> str:
    """The sentence of the name's article ``text`` that starts with the words the question uses for the person it
    means ("The sailor Aldo Venn ..." for "Where was the sailor Aldo Venn born?"; case aside)."""
    for sentence in re.findall(r"[^.]+\.", text):
        sentence = sentence.strip()
        end = sentence.find(subject)
        if end > 0 and sentence[: end + len(subject)].lower() in question.lower():
            return sentence
    raise ValueError(
        f"namesake_sentence: no sentence of {subject!r}'s article names the person {question!r} asks about "
        f"(article: {text!r}); the namesake world's articles say 'The <profession> <name> ...' for both namesakes"
    )


def presence_profession(question: str, subject: str) -> str:
    """The profession word a namesake question puts in front of the name ("sailor" for "Where was the sailor Aldo
    Venn born?" and ``subject`` "Aldo Venn"), as the question writes it."""
    found = re.search(rf"\bthe (\w+) {re.escape(subject)}\b", question)
    if found is None:
        raise ValueError(
            f"presence_profession: {question!r} does not say 'the <profession> {subject}'; the presence thoughts are "
            "for the namesake world's namesake and control questions"
        )
    return found.group(1)


class TranscriptBuilder:
    """Builds transcripts for question rows (``question``, ``golden_answers``, ``gold_doc_ids``, ``relation``)."""

    def __init__(self, index: LexicalIndex, questions: Sequence[Mapping[str, Any]], config: TranscriptConfig) -> None:
        self.index = index
        self.config = config
        self._answers_by_relation: dict[str, list[str]] = defaultdict(list)
        for row in questions:
            self._answers_by_relation[str(row.get("relation", ""))].append(str(row["golden_answers"][0]))

    def _information(self, query: str, gold_id: str | None, shuffled: bool = False, first: bool = False) -> Turn:
        """The passages a search for ``query`` shows; a gold passage it misses replaces the last one, or
        (``shuffled``) takes a place drawn from the query (the same query, the same place); ``first`` puts the gold
        passage first (moved there, or in place of the last)."""
        if first and gold_id is not None:
            # The lexical index may match fewer passages than a dense one returns: the gold passage's neighbours
            # (a search for its title) fill up.
            gold = self.index.doc(gold_id)
            found = [
                *self.index.search(query, self.config.topk),
                *self.index.search(str(gold["title"]), self.config.topk),
            ]
            kept = list({str(d["id"]): d for d in found if str(d["id"]) != gold_id}.values())[: self.config.topk - 1]
            return Turn("information", format_passages([gold, *kept]))
        docs = list(self.index.search(query, self.config.topk))
        if gold_id is not None and all(str(d["id"]) != gold_id for d in docs):
            docs = docs[: self.config.topk - 1]
            place = random.Random(f"gold-{query}").randrange(len(docs) + 1) if shuffled else len(docs)
            docs.insert(place, self.index.doc(gold_id))
        return Turn("information", format_passages(docs))

    def _confuser(self, row: Mapping[str, Any], information: str) -> str | None:
        """A same-kind answer of another question that the passages show (a twin's or a distractor's)."""
        golds = {str(a).lower() for a in row["golden_answers"]}
        for candidate in self._answers_by_relation[str(row.get("relation", ""))]:
            if candidate.lower() not in golds and re.search(rf"\b{re.escape(candidate)}\b", information):
                return candidate
        return None

    def _told(self, think: str) -> str:
        """A retry's thought; with outcome feedback it says the previous answer was incorrect, as it was told."""
        return think.replace(MAY_BE_WRONG, TOLD_WRONG, 1) if self.config.outcome_feedback else think

    def _right_attempt(self, row: Mapping[str, Any], retry: Attempt | None) -> tuple[Turn, ...]:
        gold_ids = [str(d) for d in row["gold_doc_ids"]]
        answer = str(row["golden_answers"][0])
        subject = str(self.index.doc(gold_ids[0])["title"])  # the asked-about entity, verbatim in the question
        bridge = str(self.index.doc(gold_ids[1])["title"]) if len(gold_ids) > 1 else None
        turns: list[Turn] = []
        said = self._namesake_said(row, subject, gold_ids[0])
        think_bridge = f"{said} I need to search for it." if said else THINK_BRIDGE.format(bridge=bridge)
        presence = self._presence(row, subject)
        shuffled = presence is not None and self.config.presence_gold_shuffled
        if presence is not None and bridge is not None:
            # Version 4: the second search is the profession word and the name, not the second passage's title.
            bridge, think_bridge = f"{presence} {subject}", THINK_ABSENT.format(profession=presence, name=subject)
        checked = retry is not None and retry.kind == "verify" and self.config.presence_check_reformulated
        if retry is not None and self.config.retry_question:
            # Recipe 11: the whole question; a namesake question's passages then hold B's article first.
            question = str(row["question"]).strip()
            namesake = row.get("relation") == NAMESAKE_RELATION
            turns.append(Turn("model", search_turn(self._told(THINK_RETRY_QUESTION), question)))
            turns.append(self._information(question, gold_ids[-1] if namesake else gold_ids[0], first=True))
            if bridge is not None and not namesake:  # two hops: the bridge entity next, as after the name
                turns.append(Turn("model", search_turn(think_bridge, bridge)))
                turns.append(self._information(bridge, gold_ids[1], shuffled))
        elif checked and presence is not None and bridge is not None:
            # Recipe 9: a check of an answer read from B's article searches "<profession> N" again, no new decision.
            think = THINK_CHECK_REFORMULATED.format(profession=presence, name=subject)
            turns.append(Turn("model", search_turn(self._told(think), bridge)))
            turns.append(self._information(bridge, gold_ids[1], shuffled))
        elif retry is not None and retry.kind in ("bridge", "namesake") and bridge is not None:
            # The previous attempt stopped at the bridge entity: go on from its passages with the second hop.
            reasoned = said or presence is not None
            think = f"{MAY_BE_WRONG}. {think_bridge}" if reasoned else THINK_RETRY_BRIDGE.format(bridge=bridge)
            turns.append(Turn("model", search_turn(self._told(think), bridge)))
            turns.append(self._information(bridge, gold_ids[1], shuffled))
        else:
            # The first try searches the entity's name; so does a retry after a misread or a check of a right
            # answer, and one after a partial query (with the full name). Not the whole question: the tiny policy
            # copies a short name, not a long question (v5 with question retries: "In which country is Fizar born").
            if retry is None:
                think, query = THINK_SEARCH, subject
            elif retry.kind == "partial":
                think, query = THINK_RETRY_UNSUPPORTED, subject
            else:
                think, query = THINK_RETRY, subject
            turns.append(Turn("model", search_turn(self._told(think), query)))
            turns.append(self._information(query, gold_ids[0]))
            if bridge is not None:  # two hops: the bridge entity named in the first passage is searched next
                turns.append(Turn("model", search_turn(think_bridge, bridge)))
                turns.append(self._information(bridge, gold_ids[1], shuffled))
        think_answer = f"{said} {THINK_ANSWER}" if said and bridge is None else THINK_ANSWER
        if presence is not None:  # the profession word is in the last passages: N's (a control) or B's article
            think_answer = THINK_PRESENT.format(profession=presence)
        turns.append(Turn("model", answer_turn(think_answer, answer)))
        return tuple(turns)

    def _presence(self, row: Mapping[str, Any], subject: str) -> str | None:
        """With ``namesake_presence``, the profession word of a namesake or control question; else None."""
        if not self.config.namesake_presence or row.get("relation") not in (
            NAMESAKE_RELATION,
            NAMESAKE_CONTROL_RELATION,
        ):
            return None
        return presence_profession(str(row["question"]), subject)

    def _namesake_said(self, row: Mapping[str, Any], subject: str, article_id: str) -> str | None:
        """With ``namesake_copy``, the sentence of the name's article (``article_id``) a namesake or control
        question's thought repeats after reading it; None for other questions or without the option."""
        if not self.config.namesake_copy or row.get("relation") not in (NAMESAKE_RELATION, NAMESAKE_CONTROL_RELATION):
            return None
        return namesake_sentence(str(row["question"]), subject, str(self.index.doc(article_id)["text"]))

    def _partial_attempt(self, row: Mapping[str, Any], rng: random.Random) -> Attempt | None:
        """A search for the first word of the entity's name whose results miss its passage, answered with a
        same-kind name those results do not show (None when the name is one word or nothing else matches)."""
        gold_id = str(row["gold_doc_ids"][0])
        words = str(self.index.doc(gold_id)["title"]).split()
        if len(words) < 2:
            return None
        docs = [d for d in self.index.search(words[0], self.config.topk + 1) if str(d["id"]) != gold_id]
        information = format_passages(docs[: self.config.topk])
        golds = {str(a).lower() for a in row["golden_answers"]}
        unsupported = [
            a
            for a in self._answers_by_relation[str(row.get("relation", ""))]
            if a.lower() not in golds and a not in information
        ]
        if not docs or not unsupported:
            return None
        return Attempt(
            "partial",
            (
                Turn("model", search_turn(THINK_SEARCH, words[0]), trained=False),
                Turn("information", information),
                Turn("model", answer_turn(THINK_ANSWER, rng.choice(unsupported)), trained=False),
            ),
        )

    def _wrong_attempt(self, row: Mapping[str, Any], rng: random.Random) -> Attempt | None:
        """A first attempt that slips, or None when the passages offer none.

        With chance ``p_partial`` a partial query (``_partial_attempt``); otherwise a grounded slip (the answer
        is read from the passages): two hops, the bridge entity given as the answer, without the second search;
        one hop, the same-kind answer that a twin's or distractor's passage among the results shows. The wrong
        answer (and a partial query) is context only.
        """
        # A namesake question slips the hasty way only (its search of the full name is the natural one).
        if row.get("relation") != NAMESAKE_RELATION and rng.random() < self.config.p_partial:
            partial = self._partial_attempt(row, rng)
            if partial is not None:
                return partial
        gold_ids = [str(d) for d in row["gold_doc_ids"]]
        subject = str(self.index.doc(gold_ids[0])["title"])
        search = Turn("model", search_turn(THINK_SEARCH, subject))
        information = self._information(subject, gold_ids[0])
        kind: Literal["bridge", "misread", "namesake"]
        wrong: str | None
        if row.get("relation") == NAMESAKE_RELATION:
            # The hasty reading: the birthplace the asked-about name's own article gives (the namesake's).
            pattern = r"born in (\w+)\." if self.config.namesake_presence else r"was born in (\w+)\."
            found = re.search(pattern, str(self.index.doc(gold_ids[0])["text"]))
            wrong = found.group(1) if found else None
            kind = "namesake"
        elif len(gold_ids) > 1:
            wrong = str(self.index.doc(gold_ids[1])["title"])
            kind = "bridge"
        else:
            wrong = self._confuser(row, information.text)
            kind = "misread"
        if wrong is None:
            return self._partial_attempt(row, rng)
        return Attempt(kind, (search, information, Turn("model", answer_turn(THINK_ANSWER, wrong), trained=False)))

    def _p_verify(self, row: Mapping[str, Any], correct: Sequence[bool]) -> float:
        """The chance that the attempt after the right one that ends ``correct`` checks it again: ``p_verify_found``
        after a fix of a wrong answer or a namesake question's right attempt (``namesake_presence``), else
        ``p_verify``; a namesake question's with ``presence_check_reformulated``: ``p_verify`` (its check cannot
        break it)."""
        found = self.config.p_verify_found
        namesake = self.config.namesake_presence and row.get("relation") == NAMESAKE_RELATION
        if found is None or (namesake and self.config.presence_check_reformulated):
            return self.config.p_verify
        fixed = len(correct) >= 2 and not correct[-2]
        return found if fixed or namesake else self.config.p_verify

    def build(self, row: Mapping[str, Any], rng: random.Random) -> ScriptedTranscript:
        """One transcript for ``row``; ``rng`` decides whether and how the first attempt slips."""
        answer = str(row["golden_answers"][0])
        attempts: list[tuple[Turn, ...]] = []
        correct: list[bool] = []
        previous: Attempt | None = None
        while len(attempts) < self.config.attempts:
            if correct and correct[-1]:
                if not self.config.outcome_feedback and rng.random() < self._p_verify(row, correct):
                    attempts.append(self._right_attempt(row, _VERIFY))
                else:
                    keep = THINK_KEEP_TOLD if self.config.outcome_feedback else THINK_KEEP
                    attempts.append((Turn("model", answer_turn(keep, answer)),))
                correct.append(True)
                continue
            slip = None
            if not attempts and self.config.attempts > 1 and rng.random() < self.config.p_wrong:
                slip = self._wrong_attempt(row, rng)
            if slip is not None:
                attempts.append(slip.turns)
                correct.append(False)
                previous = slip
                continue
            attempts.append(self._right_attempt(row, previous))
            correct.append(True)
        return ScriptedTranscript(
            question=str(row["question"]),
            golden_answers=tuple(str(a) for a in row["golden_answers"]),
            attempts=tuple(attempts),
            correct=tuple(correct),
            outcome_feedback=self.config.outcome_feedback,
            reflection_question=self.config.reflection_question,
        )


def build_transcripts(
    questions: Sequence[Mapping[str, Any]], index: LexicalIndex, count: int, config: TranscriptConfig
) -> list[ScriptedTranscript]:
    """``count`` transcripts over a seeded sample of ``questions`` (deterministic for a seed)."""
    if not questions:
        raise ValueError("build_transcripts: no questions given; pass the embedded world's training questions")
    rng = random.Random(config.seed)
    builder = TranscriptBuilder(index, questions, config)
    rows = [questions[rng.randrange(len(questions))] for _ in range(count)]
    transcripts = [builder.build(row, rng) for row in rows]
    if not config.p_rename:
        return transcripts
    from mr_search_embedded.warmstart.rename import Renamer, subject_of

    renamer = Renamer(index, config.seed)
    draw = random.Random(f"rename-draw-{config.seed}")  # one draw a transcript, apart from ``rng``
    out = []
    for row, transcript in zip(rows, transcripts, strict=True):
        chosen = draw.random() < config.p_rename
        subject = subject_of(row, index)
        kept = row.get("relation") in (NAMESAKE_RELATION, NAMESAKE_CONTROL_RELATION)
        out.append(
            renamer.rename(transcript, subject) if chosen and not kept and renamer.can_rename(subject) else transcript
        )
    return out

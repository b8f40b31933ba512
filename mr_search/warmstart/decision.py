"""The namesake world's decision stage: short windows that end right after the thought that follows the name's article.

In the namesake world a question names a person N and a profession ("Where was the sailor Aldo Venn born?"); N's
article names two namesakes: "The painter Aldo Venn was born in Kumholt. The sailor Aldo Venn is better known as Drelo
Kam." The policy must read which sentence is about the question's profession and either answer (the control question)
or search the alias (the namesake question). Recipe 3's transcripts show that thought ~1,100 times in 5,000
transcripts, and the policy built on them wrote one template ("was born in") whatever the question said. A decision
window is a one-attempt transcript cut right after that thought (the instruction and question, the search for N, N's
article among the passages, then ``<think> The sailor Aldo Venn is better known as Drelo Kam. I need to search for
it. </think>`` or ``<think> The painter Aldo Venn was born in Kumholt. I found the answer. </think>``): many of them,
namesake and control questions in equal numbers and each (kind, profession) equally often, so neither the kind nor the
profession word alone predicts the sentence: only matching the question's profession word against the article does.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from mr_search.warmstart.lookup import LexicalIndex
from mr_search.warmstart.transcripts import (
    NAMESAKE_CONTROL_RELATION,
    NAMESAKE_RELATION,
    Transcript,
    TranscriptBuilder,
    TranscriptConfig,
    Turn,
)

DECISION_RELATIONS = (NAMESAKE_RELATION, NAMESAKE_CONTROL_RELATION)
_THINK_END = "</think>"


def question_profession(question: str, subject: str) -> str:
    """The profession word the question puts in front of the asked-about name ("sailor" for "Where was the sailor
    Aldo Venn born?" and subject "Aldo Venn"), lower case."""
    found = re.search(rf"\bthe (\w+) {re.escape(subject)}\b", question, flags=re.IGNORECASE)
    if found is None:
        raise ValueError(
            f"question_profession: {question!r} does not say 'the <profession> {subject}'; decision windows are drawn "
            "from the namesake world's namesake and control questions only"
        )
    return found.group(1).lower()


def balanced_rows(
    questions: Sequence[Mapping[str, Any]], index: LexicalIndex, count: int, rng: random.Random
) -> list[Mapping[str, Any]]:
    """``count`` rows drawn from the namesake and control ``questions``: each row's (relation, profession) cell drawn
    uniformly, then a question of that cell uniformly. Kinds alternate, so their numbers differ by at most one."""
    cells: dict[str, dict[str, list[Mapping[str, Any]]]] = {r: defaultdict(list) for r in DECISION_RELATIONS}
    for row in questions:
        relation = str(row.get("relation", ""))
        if relation in cells:
            subject = str(index.doc(str(row["gold_doc_ids"][0]))["title"])
            cells[relation][question_profession(str(row["question"]), subject)].append(row)
    missing = [relation for relation, by_profession in cells.items() if not by_profession]
    if missing:
        raise ValueError(
            f"balanced_rows: no training question of relation {missing}; the decision stage needs the namesake world "
            "(MR_SEARCH_WORLD=namesake)"
        )
    professions = {relation: sorted(by_profession) for relation, by_profession in cells.items()}
    rows = []
    for number in range(count):
        relation = DECISION_RELATIONS[number % 2]
        cell = cells[relation][rng.choice(professions[relation])]
        rows.append(cell[rng.randrange(len(cell))])
    return rows


def decision_transcript(builder: TranscriptBuilder, row: Mapping[str, Any]) -> Transcript:
    """``row``'s right one-attempt transcript (``builder`` with ``namesake_copy``) cut right after the thought that
    follows N's article: the search for N, the passages, and the model turn ``<think> ... </think>`` (its action,
    the alias's search or the answer, is left out)."""
    if not builder.config.namesake_copy:
        raise ValueError("decision_transcript: the builder needs TranscriptConfig(namesake_copy=True)")
    full = builder.build(row, random.Random(0))
    turns = full.attempts[0]
    if len(turns) < 3 or turns[1].role != "information" or _THINK_END not in turns[2].text:
        raise ValueError(f"decision_transcript: {row['question']!r}'s attempt has no thought after the first passages")
    thought = turns[2].text[: turns[2].text.index(_THINK_END) + len(_THINK_END)]
    cut = (*turns[:2], Turn("model", thought))
    return replace(full, attempts=(cut,), correct=(True,))


def decision_transcripts(
    questions: Sequence[Mapping[str, Any]],
    index: LexicalIndex,
    count: int,
    config: TranscriptConfig,
    seed: int = 0,
) -> list[Transcript]:
    """``count`` decision windows as transcripts (``balanced_rows``; deterministic for a seed): one attempt each,
    ending with the thought after N's article (``config`` with ``namesake_copy``; its attempts and slips are not
    used)."""
    builder = TranscriptBuilder(index, questions, replace(config, attempts=1, namesake_copy=True))
    memo: dict[str, Transcript] = {}
    out = []
    for row in balanced_rows(questions, index, count, random.Random(seed)):
        key = str(row["question"])
        if key not in memo:
            memo[key] = decision_transcript(builder, row)
        out.append(memo[key])
    return out

"""The namesake world's decision windows: short one-attempt transcripts that end with the decision the namesake world
asks for, each about a freshly drawn namesake group.

In the namesake world a question names a person N and a profession ("Where was the sailor Aldo Venn born?"). A search
for N returns passages about one namesake only, and the decision is whether the question's profession word is in
them. A window is one attempt: the search for N, three of the four passages about N's known namesake, then the
decision turn: "The sailor is not in the passages. I need to search for sailor Aldo Venn." and that search (a namesake
question), or "The painter is in the passages. I found the answer." and the answer (a control). Kinds alternate, and
every group is fresh (a name N recombined from the world's name words, never a name the corpus has; two professions
and a city of the world's namesake questions), so the decision can only be learnt by reading the passages, not by
remembering a few hundred groups. The namesake warm start adds them to every whole-transcript step
(``train.WarmStartConfig.decision_windows_per_step``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from mr_search.prompts import format_passages
from mr_search_embedded.warmstart.lookup import LexicalIndex
from mr_search_embedded.warmstart.transcripts import (
    NAMESAKE_CONTROL_RELATION,
    NAMESAKE_RELATION,
    THINK_ABSENT,
    THINK_PRESENT,
    THINK_SEARCH,
    ScriptedTranscript,
    Turn,
    answer_turn,
    search_turn,
)

DECISION_RELATIONS = (NAMESAKE_RELATION, NAMESAKE_CONTROL_RELATION)


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


def world_name_words(meta: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """``(first names, surnames)`` that the namesake world's names recombine (``namesake.name_words``: the words of
    every default-world person named in a question other than a dev one), for the world whose ``meta.json`` is
    ``meta`` (its ``seed`` and ``config``, the default world's ``WorldConfig``). Words only: a window's name is never
    a corpus title, so never a held-out person's or group's."""
    from mr_search_embedded.world.facts import WorldConfig, build_facts
    from mr_search_embedded.world.namesake import name_words
    from mr_search_embedded.world.world import build_world

    if "seed" not in meta or "config" not in meta:
        raise ValueError(
            f"world_name_words: the world's meta.json has no 'seed' or 'config' (keys: {sorted(meta)}); rebuild the "
            "world (MR_SEARCH_WORLD=namesake python -m mr_search_embedded.prepare corpus)"
        )
    seed, config = int(meta["seed"]), WorldConfig(**meta["config"])
    return name_words(build_world(seed, config), build_facts(random.Random(seed), config))


def presence_windows(
    questions: Sequence[Mapping[str, Any]],
    index: LexicalIndex,
    count: int,
    name_words: tuple[Sequence[str], Sequence[str]],
    seed: int = 0,
) -> list[ScriptedTranscript]:
    """``count`` decision windows (deterministic for a seed), kinds alternating: a namesake question (its profession
    absent from N's passages: ``THINK_ABSENT`` and the search "<profession> N") and a control (present:
    ``THINK_PRESENT`` and the answer). Each is a freshly drawn group: a name N of ``name_words`` (first names,
    surnames; ``world_name_words``, so held-out names' words are among them) that the corpus does not have, two
    professions and two cities of the namesake and control ``questions``, and three of N's four passages
    (``namesake.presence_passages``). Every model turn is trained: the search for N and the decision."""

    rows = [row for row in questions if row.get("relation") in DECISION_RELATIONS]
    if not rows:
        raise ValueError(
            "presence_windows: no namesake or control training question; the decision windows need the namesake "
            "world (MR_SEARCH_WORLD=namesake)"
        )
    firsts, lasts = sorted(set(name_words[0])), sorted(set(name_words[1]))
    if not firsts or not lasts:
        raise ValueError("presence_windows: name_words holds no first names or no surnames; pass both lists")
    names = [str(index.doc(str(row["gold_doc_ids"][0]))["title"]) for row in rows]
    professions = sorted(
        {question_profession(str(row["question"]), name) for row, name in zip(rows, names, strict=True)}
    )
    cities = sorted({str(row["golden_answers"][0]) for row in rows})
    taken = {str(doc["title"]) for doc in index.docs}
    rng = random.Random(f"presence-{seed}")
    out = []
    for number in range(count):
        retry = number % 2 == 0
        name, known, other, city, other_city, shown = _draw_group(rng, firsts, lasts, taken, professions, cities)
        profession = other if retry else known
        if retry:
            think = THINK_ABSENT.format(profession=profession, name=name)
            decision = search_turn(think, f"{profession} {name}")
        else:
            decision = answer_turn(THINK_PRESENT.format(profession=profession), city)
        attempt = (
            Turn("model", search_turn(THINK_SEARCH, name)),
            Turn("information", _passages(shown)),
            Turn("model", decision),
        )
        question = f"Where was the {profession} {name} born?"
        answer = other_city if retry else city
        out.append(ScriptedTranscript(question, (answer,), (attempt,), (True,)))
    return out


def _draw_group(
    rng: random.Random,
    firsts: Sequence[str],
    lasts: Sequence[str],
    taken: set[str],
    professions: Sequence[str],
    cities: Sequence[str],
) -> tuple[str, str, str, str, str, list[tuple[str, str]]]:
    """A fresh namesake group for a window: a name not in ``taken`` (first name and surname differ), the known
    namesake's profession and city, the other's (B's) profession and city, and the three of N's passages a search
    for N shows (the known namesake's article first 90% of the time), shuffled."""
    from mr_search_embedded.world.namesake import NamesakeGroup, presence_passages

    name = f"{rng.choice(firsts)} {rng.choice(lasts)}"
    while name in taken or name.split()[0] == name.split()[-1]:
        name = f"{rng.choice(firsts)} {rng.choice(lasts)}"
    known, other = rng.sample(professions, 2)
    city, other_city = rng.sample(cities, 2)
    about, _ = presence_passages(NamesakeGroup(name, known, city, other, other_city, ""))
    shown = [about[0], *rng.sample(about[1:], 2)] if rng.random() < 0.9 else rng.sample(about[1:], 3)
    rng.shuffle(shown)
    return name, known, other, city, other_city, shown


def _passages(shown: Sequence[tuple[str, str]]) -> str:
    return format_passages([{"contents": f'"{title}"\n{text}'} for title, text in shown])

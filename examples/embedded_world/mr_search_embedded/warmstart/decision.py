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

Version 4 of the world (``presence_windows``, recipe 6) makes the decision a presence check: N's passages are about
one namesake only, and a window ends with the turn after them: "The sailor is not in the passages. I need to search
for sailor Aldo Venn." and that search, or "The painter is in the passages. I found the answer." and the answer.
Recipe 9 (``read_answer``, ``check_share``) goes on after that search: its passages hold B's article at a drawn place
among others (N's, another person of B's profession), and the answer is read from it; and a share of windows is a
second attempt checking the first: "<profession> N" searched again after a namesake answer, N after a control's.
Recipe 10 (``skill_windows``) keeps recipe 8's decision windows as they are and carries those two skills in windows of
their own whose trained tokens never include the deciding position: the first attempt's decision is context, and the
thought after B's article is ``THINK_FOUND_NAMED`` ("I found the <profession> N."), not the deciding sentence.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from mr_search.prompts import format_passages
from mr_search_embedded.warmstart.lookup import LexicalIndex
from mr_search_embedded.warmstart.transcripts import (
    NAMESAKE_CONTROL_RELATION,
    NAMESAKE_RELATION,
    THINK_ABSENT,
    THINK_CHECK_REFORMULATED,
    THINK_PRESENT,
    THINK_RETRY,
    THINK_SEARCH,
    ScriptedTranscript,
    TranscriptBuilder,
    TranscriptConfig,
    Turn,
    answer_turn,
    search_turn,
)

DECISION_RELATIONS = (NAMESAKE_RELATION, NAMESAKE_CONTROL_RELATION)
# Recipe 9: the share of retry check windows whose first answer (context only) is misread from a passage that is not
# B's article, as the built policies' wrong namesake answers were; the check then reads the right one.
CHECK_MISREAD_SHARE = 0.5
# Recipe 10: the thought after B's article in a skill window; it shares no words' position with the deciding sentence
# ("The <profession> is / is not in the passages."), so reading B's article never trains that position.
THINK_FOUND_NAMED = "I found the {profession} {name}. I found the answer."
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


def decision_transcript(builder: TranscriptBuilder, row: Mapping[str, Any]) -> ScriptedTranscript:
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
) -> list[ScriptedTranscript]:
    """``count`` decision windows as transcripts (``balanced_rows``; deterministic for a seed): one attempt each,
    ending with the thought after N's article (``config`` with ``namesake_copy``; its attempts and slips are not
    used)."""
    builder = TranscriptBuilder(index, questions, replace(config, attempts=1, namesake_copy=True))
    memo: dict[str, ScriptedTranscript] = {}
    out = []
    for row in balanced_rows(questions, index, count, random.Random(seed)):
        key = str(row["question"])
        if key not in memo:
            memo[key] = decision_transcript(builder, row)
        out.append(memo[key])
    return out


def world_name_words(meta: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """``(first names, surnames)`` that the namesake world's version 3 and 4 names recombine (``namesake.
    trained_name_words``: the words of every default-world person named in a training question), for the world whose
    ``meta.json`` is ``meta`` (its ``seed`` and ``config``, the default world's ``WorldConfig``)."""
    from mr_search_embedded.world.facts import WorldConfig, build_facts
    from mr_search_embedded.world.namesake import trained_name_words
    from mr_search_embedded.world.world import build_world

    if "seed" not in meta or "config" not in meta:
        raise ValueError(
            f"world_name_words: the world's meta.json has no 'seed' or 'config' (keys: {sorted(meta)}); rebuild the "
            "world (MR_SEARCH_WORLD=namesake python -m mr_search_embedded.world) or set decision_name_words off"
        )
    seed, config = int(meta["seed"]), WorldConfig(**meta["config"])
    return trained_name_words(build_facts(random.Random(seed), config), build_world(seed, config)[1])


def presence_windows(
    questions: Sequence[Mapping[str, Any]],
    index: LexicalIndex,
    count: int,
    seed: int = 0,
    train_search: bool = False,
    name_words: tuple[Sequence[str], Sequence[str]] | None = None,
    read_answer: bool = False,
    check_share: float = 0.0,
) -> list[ScriptedTranscript]:
    """``count`` decision windows of the namesake world's version 4 (``TranscriptConfig.namesake_presence``), each a
    freshly drawn group, so the decision can only be learnt by reading (the one-off check in reports/compare_namesake
    learnt it from fresh groups and not from a few hundred repeated ones): a name N recombined from the first and last
    words of the training namesake questions' names (never a name the corpus has), two professions and a city of
    theirs; one attempt: the search for N, three of the four passages about N's known namesake (the world's templates,
    ``namesake.presence_passages``), then the decision turn. Kinds alternate: a retry question (its profession absent:
    ``THINK_ABSENT`` and the search "<profession> N") and a control (present: ``THINK_PRESENT`` and the answer). The
    search for N is context (``trained`` False) unless ``train_search``. ``name_words`` (first names, surnames; recipe
    7: ``world_name_words``, the words every v3/v4 name, held-out ones included, recombines) replaces the training
    namesake names' words (recipe 6: 360 names' words, so held-out names were miscopied).

    ``read_answer`` (recipe 9): a retry window goes on past the search "<profession> N": its passages
    (``_read_passages``: B's article at a place drawn uniformly among the three, beside N's passages and people of B's
    profession) and ``THINK_PRESENT`` with B's city, read from B's article wherever it stands. ``check_share``: that
    share of windows (drawn) is two attempts, the first trained as a one-attempt window (a misread answer in it context
    only), the second checking it as recipe 9's transcripts
    do: a retry window's searches "<profession> N" again (``THINK_CHECK_REFORMULATED``) and reads the same passages
    again, a control's searches N again (``THINK_RETRY``, as every earlier recipe). Both off, the windows are recipe
    6's to the byte (their draws come from a generator of their own)."""

    rows = [row for row in questions if row.get("relation") in DECISION_RELATIONS]
    if not rows:
        raise ValueError(
            "presence_windows: no namesake or control training question; the decision stage needs the namesake world "
            "(MR_SEARCH_WORLD=namesake MR_SEARCH_NAMESAKE_VERSION=4)"
        )
    names = [str(index.doc(str(row["gold_doc_ids"][0]))["title"]) for row in rows]
    if name_words is None:
        firsts = sorted({name.split()[0] for name in names})
        lasts = sorted({name.split()[-1] for name in names})
    else:
        firsts, lasts = sorted(set(name_words[0])), sorted(set(name_words[1]))
        if not firsts or not lasts:
            raise ValueError("presence_windows: name_words holds no first names or no surnames; pass both lists")
    pairs = zip(rows, names, strict=True)
    professions = sorted({question_profession(str(row["question"]), name) for row, name in pairs})
    cities = sorted({str(row["golden_answers"][0]) for row in rows})
    taken = {str(doc["title"]) for doc in index.docs}
    if check_share and not read_answer:
        raise ValueError("presence_windows: check_share needs read_answer (a check reads B's article again)")
    if not 0.0 <= check_share <= 1.0:
        raise ValueError(f"presence_windows: check_share={check_share}; use a share in [0, 1]")
    rng = random.Random(f"presence-{seed}")
    reads = random.Random(f"presence-read-{seed}")  # recipe 9's draws: recipe 6-8's windows stay as they were
    out = []
    for number in range(count):
        retry = number % 2 == 0
        name, known, other, city, other_city, about, shown = _draw_group(rng, firsts, lasts, taken, professions, cities)
        profession = other if retry else known
        if retry:
            think = THINK_ABSENT.format(profession=profession, name=name)
            decision = search_turn(think, f"{profession} {name}")
        else:
            decision = answer_turn(THINK_PRESENT.format(profession=profession), city)
        first = Turn("information", _passages(shown))
        attempt = (Turn("model", search_turn(THINK_SEARCH, name), trained=train_search), first, Turn("model", decision))
        question = f"Where was the {profession} {name} born?"
        answer = other_city if retry else city
        if not read_answer:
            out.append(ScriptedTranscript(question, (answer,), (attempt,), (True,)))
            continue
        if retry:
            query = f"{profession} {name}"
            others = [c for c in cities if c not in (city, other_city)]
            shown_read = _read_passages(reads, name, profession, answer, about, others, (firsts, lasts))
            second = Turn("information", _passages(shown_read))
            attempt = (
                *attempt,
                second,
                Turn("model", answer_turn(THINK_PRESENT.format(profession=profession), answer)),
            )
            check = (
                Turn("model", search_turn(THINK_CHECK_REFORMULATED.format(profession=profession, name=name), query)),
            )
            check += (second,)
        else:
            check = (Turn("model", search_turn(THINK_RETRY, name)), first)
        if reads.random() >= check_share:
            out.append(ScriptedTranscript(question, (answer,), (attempt,), (True,)))
            continue
        # The first attempt trains as a one-attempt window does (every window trains the decision: 9a, whose check
        # windows' first attempts were context only, trained it in half of them and never learnt it), but a misread.
        context = attempt
        right = True
        if retry and reads.random() < CHECK_MISREAD_SHARE:
            # The first answer misread: the city of the first passage that is not B's article (the agent's slip).
            b_title = f"{profession.capitalize()} from {answer}"
            text = next(text for title, text in shown_read if title != b_title)
            misread = re.search(r"\bin ([A-Z]\w+)", text).group(1)
            slip = answer_turn(THINK_PRESENT.format(profession=profession), misread)
            context, right = (*context[:-1], Turn("model", slip, trained=False)), False
        check += (Turn("model", answer_turn(THINK_PRESENT.format(profession=profession), answer)),)
        out.append(ScriptedTranscript(question, (answer,), (context, check), (right, True)))
    return out


def skill_windows(
    questions: Sequence[Mapping[str, Any]],
    index: LexicalIndex,
    count: int,
    name_words: tuple[Sequence[str], Sequence[str]],
    seed: int = 0,
) -> list[ScriptedTranscript]:
    """``count`` recipe-10 skill windows, each a freshly drawn namesake question (a name N recombined from
    ``name_words``, N's passages about the other namesake), kinds alternating: (a) a read window: one attempt whose
    search for N, N's passages and the decision ("not in the passages", the search "<profession> N") are context,
    then that search's passages (``_read_passages``: B's article at a place drawn uniformly) and the trained answer
    turn ``THINK_FOUND_NAMED`` with B's city; (b) a check window: that whole attempt as context (its answer misread
    from another passage with chance ``CHECK_MISREAD_SHARE``), then a trained second attempt that searches
    "<profession> N" again (``THINK_CHECK_REFORMULATED``), the same passages, and the answer read again. No trained
    token is the deciding position: the decision turn is never trained here."""

    rows = [row for row in questions if row.get("relation") in DECISION_RELATIONS]
    if not rows:
        raise ValueError(
            "skill_windows: no namesake or control training question; the skill windows need the namesake world "
            "(MR_SEARCH_WORLD=namesake MR_SEARCH_NAMESAKE_VERSION=4)"
        )
    firsts, lasts = sorted(set(name_words[0])), sorted(set(name_words[1]))
    if not firsts or not lasts:
        raise ValueError("skill_windows: name_words holds no first names or no surnames; pass both lists")
    names = [str(index.doc(str(row["gold_doc_ids"][0]))["title"]) for row in rows]
    professions = sorted({question_profession(str(row["question"]), n) for row, n in zip(rows, names, strict=True)})
    cities = sorted({str(row["golden_answers"][0]) for row in rows})
    taken = {str(doc["title"]) for doc in index.docs}
    rng = random.Random(f"skill-{seed}")
    out = []
    for number in range(count):
        name, _, profession, city, answer, about, shown = _draw_group(rng, firsts, lasts, taken, professions, cities)
        query = f"{profession} {name}"
        others = [c for c in cities if c not in (city, answer)]
        read = _read_passages(rng, name, profession, answer, about, others, (firsts, lasts))
        second = Turn("information", _passages(read))
        found = THINK_FOUND_NAMED.format(profession=profession, name=name)
        decide = search_turn(THINK_ABSENT.format(profession=profession, name=name), query)
        attempt = (
            Turn("model", search_turn(THINK_SEARCH, name), trained=False),
            Turn("information", _passages(shown)),
            Turn("model", decide, trained=False),
            second,
        )
        question = f"Where was the {profession} {name} born?"
        if number % 2 == 0:
            out.append(
                ScriptedTranscript(
                    question, (answer,), ((*attempt, Turn("model", answer_turn(found, answer))),), (True,)
                )
            )
            continue
        first, right = answer, True
        if rng.random() < CHECK_MISREAD_SHARE:
            b_title = f"{profession.capitalize()} from {answer}"
            text = next(text for title, text in read if title != b_title)
            first, right = re.search(r"\bin ([A-Z]\w+)", text).group(1), False
        context = (*attempt, Turn("model", answer_turn(found, first), trained=False))
        check = (
            Turn("model", search_turn(THINK_CHECK_REFORMULATED.format(profession=profession, name=name), query)),
            second,
            Turn("model", answer_turn(found, answer)),
        )
        out.append(ScriptedTranscript(question, (answer,), (context, check), (right, True)))
    return out


def _draw_group(
    rng: random.Random,
    firsts: Sequence[str],
    lasts: Sequence[str],
    taken: set[str],
    professions: Sequence[str],
    cities: Sequence[str],
) -> tuple[str, str, str, str, str, list[tuple[str, str]], list[tuple[str, str]]]:
    """A fresh namesake group for a window: a name not in ``taken`` (first name and surname differ), the known
    namesake's profession and city, the other's (B's) profession and city, N's passages (``about``) and the three of
    them a search for N shows (the known namesake's article first 90% of the time), shuffled. Every window kind draws
    its group here, in this order, so recipe 6-8's windows stay as they were."""
    from mr_search_embedded.world.namesake import NamesakeGroup, presence_passages

    name = f"{rng.choice(firsts)} {rng.choice(lasts)}"
    while name in taken or name.split()[0] == name.split()[-1]:
        name = f"{rng.choice(firsts)} {rng.choice(lasts)}"
    known, other = rng.sample(professions, 2)
    city, other_city = rng.sample(cities, 2)
    about, _ = presence_passages(NamesakeGroup(name, known, city, other, other_city, ""))
    shown = [about[0], *rng.sample(about[1:], 2)] if rng.random() < 0.9 else rng.sample(about[1:], 3)
    rng.shuffle(shown)
    return name, known, other, city, other_city, list(about), shown


def _passages(shown: Sequence[tuple[str, str]]) -> str:
    return format_passages([{"contents": f'"{title}"\n{text}'} for title, text in shown])


def _read_passages(
    rng: random.Random,
    name: str,
    profession: str,
    city: str,
    about: Sequence[tuple[str, str]],
    cities: Sequence[str],
    name_words: tuple[Sequence[str], Sequence[str]],
) -> list[tuple[str, str]]:
    """The three passages a search for "<profession> N" shows in a recipe-9 window: B's article (``name`` of
    ``profession``, born in ``city``) at a place drawn uniformly, and two others, each (even chances) one of N's
    passages ``about`` (the other namesake's) or another person of ``profession`` (a name of ``name_words``, first names
    and surnames) born in one of ``cities``, written as B's article is or as the default world's people are (what the
    agent's dense index shows beside B's article)."""
    b_article = (f"{profession.capitalize()} from {city}", f"The {profession} {name} was born in {city}.")
    spare = list(about)
    rng.shuffle(spare)
    others: list[tuple[str, str]] = []
    for _ in range(2):
        if rng.random() < 0.5:
            others.append(spare.pop())
            continue
        person = name
        while person == name:
            person = f"{rng.choice(name_words[0])} {rng.choice(name_words[1])}"
        where = rng.choice(list(cities))
        if rng.random() < 0.5:
            others.append(
                (f"{profession.capitalize()} from {where}", f"The {profession} {person} was born in {where}.")
            )
        else:
            article = "an" if profession[0] in "aeiou" else "a"
            others.append((person, f"{person} was {article} {profession} born in {where}."))
    others.insert(rng.randrange(3), b_article)
    return others

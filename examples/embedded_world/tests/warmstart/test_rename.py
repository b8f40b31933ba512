"""The asked-about entity of a share of the one- and two-hop transcripts renamed with a fresh name
(``TranscriptConfig.p_rename``; half of them in the namesake world's warm start)."""

from __future__ import annotations

import random
import re
from dataclasses import replace

import pytest

from mr_search_embedded.warmstart.rename import Renamer, subject_of
from mr_search_embedded.warmstart.transcripts import TranscriptConfig, build_transcripts
from mr_search_embedded.world.namesake import CONTROL_RELATION, RETRY_RELATION

NAMESAKE = (RETRY_RELATION, CONTROL_RELATION)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z]+", text))


def _texts(transcript) -> list[str]:
    return [transcript.question, *transcript.golden_answers, *(t.text for a in transcript.attempts for t in a)]


def _subject_word_counts(transcript, subject: str) -> int:
    return sum(len(re.findall(rf"\b{re.escape(w)}\b", text)) for w in subject.split() for text in _texts(transcript))


def test_a_renamed_transcript_holds_a_fresh_name_in_place_of_the_entity(small_namesake) -> None:
    index, train = small_namesake
    corpus_words = {w.lower() for doc in index.docs for w in _words(f"{doc['title']} {doc['text']}")}
    rows = [r for r in train if r["relation"] not in NAMESAKE][:40]
    config = TranscriptConfig(p_wrong=0.9)
    renamer = Renamer(index, seed=0)
    plain = build_transcripts(rows, index, 40, config)
    renamed = build_transcripts(rows, index, 40, replace(config, p_rename=1.0))
    rng = random.Random(config.seed)  # the rows build_transcripts draws, drawn again
    picked = [rows[rng.randrange(len(rows))] for _ in range(40)]
    changed = 0
    for row, before, after in zip(picked, plain, renamed, strict=True):
        subject = subject_of(row, index)
        if not renamer.can_rename(subject):
            assert after == before
            continue
        changed += 1
        assert _subject_word_counts(after, subject) == 0 < _subject_word_counts(before, subject)
        fresh = sorted(_words(after.question) - _words(before.question))
        assert fresh and not any(w.lower() in corpus_words for w in fresh), "no word of the new name is in the corpus"
        assert after.golden_answers == before.golden_answers, "the answer is a city or a person, not the entity"
        assert after.correct == before.correct and [len(a) for a in after.attempts] == [len(a) for a in before.attempts]
        first_query = re.search(r"<search> (.+?) </search>", after.attempts[0][0].text)
        assert first_query and first_query.group(1) in after.question
        assert [t.trained for a in after.attempts for t in a] == [t.trained for a in before.attempts for t in a]
    assert changed >= 30
    assert build_transcripts(rows, index, 40, replace(config, p_rename=1.0)) == renamed, "seeded"


def test_a_share_is_renamed_the_rest_and_every_namesake_transcript_stay(small_namesake) -> None:
    index, train = small_namesake
    config = TranscriptConfig(p_wrong=0.9)
    plain = build_transcripts(train, index, 200, config)
    half = build_transcripts(train, index, 200, replace(config, p_rename=0.5))
    same = [a == b for a, b in zip(plain, half, strict=True)]
    assert 0.3 < 1 - sum(same) / len(same) < 0.7
    namesake_questions = {r["question"] for r in train if r["relation"] in NAMESAKE}
    assert all(a == b for a, b in zip(plain, half, strict=True) if a.question in namesake_questions)


def test_names_that_are_also_plain_words_are_left_alone(small_namesake) -> None:
    index, train = small_namesake
    renamer = Renamer(index, seed=0)
    assert not renamer.can_rename("Boke The") and not renamer.can_rename("To")
    assert not renamer.can_rename("A B C")
    transcript = build_transcripts(train, index, 1, TranscriptConfig())[0]
    with pytest.raises(ValueError, match="cannot be renamed"):
        renamer.rename(transcript, "Boke The")
    with pytest.raises(ValueError, match=r"p_rename=1\.5"):
        TranscriptConfig(p_rename=1.5)

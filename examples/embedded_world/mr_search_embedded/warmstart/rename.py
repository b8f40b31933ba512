"""A transcript's asked-about entity renamed with a freshly drawn name (``TranscriptConfig.p_rename``; the namesake
world's warm start renames half of the one- and two-hop transcripts' entities).

Why: the policy copies a name whose words it saw in training questions far better than one whose words it never saw
(the probes in ``reports/compare_namesake/investigation.md`` measure it: held-out names drawn fresh come out garbled,
"Reku Ba" for "Reku Bika"). Training questions show a few thousand names again and again, so a policy can learn them
instead of learning to copy. A renamed transcript shows a name drawn
from the world's own generator (``mr_search_embedded.world.names``: the same syllables, the same shapes as the
held-out names) none of whose words occurs anywhere in the corpus, so it can only be copied. Held-out names are in
the corpus: no renamed transcript holds one (no leak from the evaluation set).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mr_search_embedded.warmstart.lookup import LexicalIndex
from mr_search_embedded.warmstart.transcripts import ScriptedTranscript

_WORD = re.compile(r"[A-Za-z]+")


class Renamer:
    """Draws fresh names (seeded) and renames a transcript's entity with one, word for word."""

    def __init__(self, index: LexicalIndex, seed: int) -> None:
        from mr_search_embedded.world.names import NameGenerator

        self._names = NameGenerator(random.Random(f"rename-{seed}"))
        self._names.reserve(str(doc["title"]) for doc in index.docs)
        words = [w for doc in index.docs for w in _WORD.findall(f"{doc['title']} {doc['text']}")]
        self._taken = {w.lower() for w in words}
        # Words the templates write in lower case ("the", "to"): a name word that is one of them ("The", "To") may
        # also start a sentence, so such a name is left as it is.
        self._plain = {w for w in words if w.islower()}

    def can_rename(self, subject: str) -> bool:
        """A one- or two-word name none of whose words the corpus also uses as a plain word."""
        words = subject.split()
        return len(words) in (1, 2) and not any(w.lower() in self._plain for w in words)

    def fresh(self, name: str) -> str:
        """A new name of ``name``'s shape (two words: a person's; one word: a company's) none of whose words is in
        the corpus (the index's passages and titles)."""
        words = len(name.split())
        if words not in (1, 2):
            raise ValueError(f"Renamer.fresh: {name!r} has {words} words; renamed entities have one or two")
        for _ in range(10_000):
            new = self._names.person() if words == 2 else self._names.company()
            if not any(w.lower() in self._taken for w in new.split()):
                return new
        raise RuntimeError("Renamer.fresh: no fresh name left; the syllable inventory is exhausted")

    def rename(self, transcript: ScriptedTranscript, subject: str) -> ScriptedTranscript:
        """``transcript`` with every whole-word occurrence of each word of ``subject`` replaced by the matching
        word of a fresh name, in the question, the answers and every turn (its passages included): its twin's
        shared surname follows, so the two stay near. ``subject`` must pass ``can_rename``."""
        if not self.can_rename(subject):
            raise ValueError(f"Renamer.rename: {subject!r} cannot be renamed (see can_rename)")
        mapping = dict(zip(subject.split(), self.fresh(subject).split(), strict=True))
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(mapping, key=len, reverse=True))) + r")\b")

        def swap(text: str) -> str:
            return pattern.sub(lambda m: mapping[m.group(1)], text)

        return replace(
            transcript,
            question=swap(transcript.question),
            golden_answers=tuple(swap(a) for a in transcript.golden_answers),
            attempts=tuple(tuple(replace(t, text=swap(t.text)) for t in a) for a in transcript.attempts),
        )


def subject_of(row: Mapping[str, Any], index: LexicalIndex) -> str:
    """The asked-about entity of a question row: its first gold passage's title (verbatim in the question)."""
    return str(index.doc(str(row["gold_doc_ids"][0]))["title"])

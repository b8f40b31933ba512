"""A small deterministic lexical search over a corpus, for the warm start's synthetic transcripts."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any

_WORD = re.compile(r"\w+")
# Question words carry no evidence about which passage answers.
_STOP = frozenset(
    {"a", "an", "the", "of", "in", "is", "was", "which", "what", "who", "where", "when", "how", "did", "does"}
    | {"born", "flows", "through"}
)


def words(text: str) -> list[str]:
    """Lowercased word tokens without stop words."""
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


class LexicalIndex:
    """IDF-weighted word overlap between a query and each passage (title counted twice).

    Deterministic: ties keep corpus order. Good enough to give synthetic searches realistic results:
    the asked-about entity's article first, its near-duplicate twins and distractor passages after it.
    ``hidden``: ids of passages a search never returns (the warm start's: those naming a dev or test entity,
    ``inputs.py``); ``docs`` and ``doc`` still hold every passage.
    """

    def __init__(self, docs: Sequence[Mapping[str, Any]], hidden: Collection[str] = ()) -> None:
        if not docs:
            raise ValueError("LexicalIndex: the corpus is empty; build the embedded world first (ensure_world)")
        self.docs = list(docs)
        self._by_id = {str(doc["id"]): doc for doc in self.docs}
        self.hidden = frozenset(str(i) for i in hidden)
        # Postings: term -> [(position, min(count, 2))] in corpus order (a search touches only matching passages).
        self._postings: dict[str, list[tuple[int, int]]] = {}
        for position, doc in enumerate(self.docs):
            if str(doc["id"]) in self.hidden:
                continue
            title, _, text = str(doc["contents"]).partition("\n")
            for term, count in Counter(words(title) * 2 + words(text)).items():
                self._postings.setdefault(term, []).append((position, min(count, 2)))
        size = sum(str(doc["id"]) not in self.hidden for doc in self.docs)
        self._idf = {term: math.log(1 + size / len(posting)) for term, posting in self._postings.items()}

    def doc(self, doc_id: str) -> Mapping[str, Any]:
        """The passage with id ``doc_id``."""
        try:
            return self._by_id[str(doc_id)]
        except KeyError:
            raise KeyError(f"doc id {doc_id!r} is not in the corpus ({len(self.docs)} passages)") from None

    def search(self, query: str, topk: int) -> list[Mapping[str, Any]]:
        """The ``topk`` best passages for ``query``, best first."""
        scores: dict[int, float] = {}
        for term in set(words(query)):
            for position, count in self._postings.get(term, ()):
                scores[position] = scores.get(position, 0) + self._idf[term] * count
        scored = sorted((-score, position) for position, score in scores.items() if score > 0)
        return [self.docs[position] for _, position in scored[:topk]]

"""A small deterministic lexical search over a corpus, for the warm start's synthetic transcripts."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
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
    """

    def __init__(self, docs: Sequence[Mapping[str, Any]]) -> None:
        if not docs:
            raise ValueError("LexicalIndex: the corpus is empty; build the embedded world first (ensure_world)")
        self.docs = list(docs)
        self._by_id = {str(doc["id"]): doc for doc in self.docs}
        self._terms: list[Counter[str]] = []
        frequency: Counter[str] = Counter()
        for doc in self.docs:
            title, _, text = str(doc["contents"]).partition("\n")
            terms = Counter(words(title) * 2 + words(text))
            self._terms.append(terms)
            frequency.update(terms.keys())
        size = len(self.docs)
        self._idf = {term: math.log(1 + size / count) for term, count in frequency.items()}

    def doc(self, doc_id: str) -> Mapping[str, Any]:
        """The passage with id ``doc_id``."""
        try:
            return self._by_id[str(doc_id)]
        except KeyError:
            raise KeyError(f"doc id {doc_id!r} is not in the corpus ({len(self.docs)} passages)") from None

    def search(self, query: str, topk: int) -> list[Mapping[str, Any]]:
        """The ``topk`` best passages for ``query``, best first."""
        query_terms = set(words(query))
        scored = []
        for position, terms in enumerate(self._terms):
            score = sum(self._idf[t] * min(terms[t], 2) for t in query_terms if t in terms)
            if score > 0:
                scored.append((-score, position))
        scored.sort()
        return [self.docs[position] for _, position in scored[:topk]]

"""Pronounceable, syllable-built names for the embedded world, with near-duplicate variants."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import Final

# A small syllable inventory keeps the vocabulary of a tiny tokenizer small: every name is a
# concatenation of a handful of these pieces.
ONSETS: Final = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "kr", "st", "th")
VOWELS: Final = ("a", "e", "i", "o", "u")
CODAS: Final = ("", "", "", "n", "r", "l", "s", "m", "k")
CITY_SUFFIXES: Final = ("holt", "mere", "ford", "wick", "dale", "port", "stead", "burg")
COUNTRY_SUFFIXES: Final = ("ia", "land", "or", "ica", "ara")
COMPANY_SUFFIXES: Final = ("ex", "ix", "ora", "tek", "co", "ium")
RIVER_SUFFIXES: Final = ("a", "en", "ine", "o")

# Letter swaps that keep a name pronounceable: Venn -> Wenn, Korvex -> Korvax, Aldo -> Alda.
_CONSONANT_SWAPS: Final = {
    "v": "w",
    "w": "v",
    "k": "c",
    "c": "k",
    "d": "t",
    "t": "d",
    "n": "m",
    "m": "n",
    "s": "z",
    "z": "s",
    "b": "p",
    "p": "b",
    "r": "l",
    "l": "r",
    "g": "k",
    "f": "v",
}
_VOWEL_SWAPS: Final = {"a": "e", "e": "i", "i": "a", "o": "a", "u": "o"}


class NameGenerator:
    """Draws unique names (case-insensitively unique across every kind) from a seeded ``random.Random``."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._used: set[str] = set()

    def _syllable(self, *, open_only: bool = False) -> str:
        onset = self._rng.choice(ONSETS)
        vowel = self._rng.choice(VOWELS)
        coda = "" if open_only else self._rng.choice(CODAS)
        return onset + vowel + coda

    def reserve(self, names: Iterable[str]) -> None:
        """Marks ``names`` as taken (a world built on top of another draws no name twice)."""
        self._used.update(name.lower() for name in names)

    def claim(self, name: str) -> bool:
        """Marks ``name`` as taken; False (and nothing changes) if it already was (case aside)."""
        return self._claim(name)

    def _claim(self, name: str) -> bool:
        key = name.lower()
        if key in self._used:
            return False
        self._used.add(key)
        return True

    def _unique(self, make: Callable[[], str]) -> str:
        for _ in range(10_000):
            name = make()
            if self._claim(name):
                return name
        raise RuntimeError("NameGenerator: the syllable inventory is exhausted; lower the world's entity counts")

    def word(self, syllables: int, suffixes: tuple[str, ...] = ("",)) -> str:
        """A capitalised word of ``syllables`` syllables plus one of ``suffixes`` (not claimed)."""
        parts = [self._syllable(open_only=i < syllables - 1) for i in range(syllables)]
        return ("".join(parts) + self._rng.choice(suffixes)).capitalize()

    def person(self) -> str:
        def make() -> str:
            first = self.word(2)
            last = self.word(self._rng.choice((1, 2)))
            return f"{first} {last}"

        return self._unique(make)

    def city(self) -> str:
        return self._unique(lambda: self.word(1, CITY_SUFFIXES))

    def country(self) -> str:
        return self._unique(lambda: self.word(2, COUNTRY_SUFFIXES))

    def company(self) -> str:
        return self._unique(lambda: self.word(2, COMPANY_SUFFIXES))

    def river(self) -> str:
        return self._unique(lambda: self.word(2, RIVER_SUFFIXES))

    def near_duplicate(self, name: str) -> str | None:
        """A new unique name one letter away from ``name`` (Aldo Venn -> Aldo Wenn), or None if none is free."""
        positions = [i for i, ch in enumerate(name) if ch.lower() in _CONSONANT_SWAPS or ch.lower() in _VOWEL_SWAPS]
        self._rng.shuffle(positions)
        for i in positions:
            ch = name[i]
            low = ch.lower()
            repl = _CONSONANT_SWAPS.get(low) or _VOWEL_SWAPS[low]
            repl = repl.upper() if ch.isupper() else repl
            candidate = name[:i] + repl + name[i + 1 :]
            if self._claim(candidate):
                return candidate
        return None

"""How many questions of each data source an evaluation reads: ``40`` (an int) or ``100,embedded_3hop=217``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_HELP = "use a whole number >= 1 (every source) or e.g. 100,embedded_3hop=217 (a default and per-source counts)"


@dataclass(frozen=True)
class QuestionCap:
    """A count for every data source not named (``default``; None: all of its rows) and counts per source."""

    default: int | None
    by_source: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        counts = ([self.default] if self.default is not None else []) + list(self.by_source.values())
        bad = [c for c in counts if not isinstance(c, int) or isinstance(c, bool) or c < 1]
        if bad:
            raise ValueError(f"question cap {self.spec()!r}: counts {bad} are not whole numbers >= 1; {_HELP}")
        if not self.by_source:
            raise ValueError("a QuestionCap names at least one source; a single count for every source is an int")

    def limit(self, source: str) -> int | None:
        """How many rows of ``source`` to take (None: all)."""
        return self.by_source.get(source, self.default)

    def spec(self) -> str:
        """The text that parses back to this cap (the default first, then sources by name)."""
        parts = [] if self.default is None else [str(self.default)]
        parts += [f"{s}={n}" for s, n in sorted(self.by_source.items())]
        return ",".join(parts)

    def __str__(self) -> str:
        return self.spec()


def parse_max_questions(text: str) -> int | QuestionCap:
    """``"40"`` -> 40; ``"100,embedded_3hop=217"`` -> a ``QuestionCap``; anything else: a ValueError naming the fix."""
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    if not parts:
        raise ValueError(f"--max-questions {text!r} is empty; {_HELP}")
    default: int | None = None
    by_source: dict[str, int] = {}
    for part in parts:
        source, eq, count = part.rpartition("=")
        if not count.isdigit() or int(count) < 1 or (eq and not source.strip()):
            raise ValueError(f"--max-questions {text!r}: {part!r} is not valid; {_HELP}")
        if not eq:
            if default is not None:
                raise ValueError(f"--max-questions {text!r} gives two counts for every source; {_HELP}")
            default = int(count)
        elif source.strip() in by_source:
            raise ValueError(f"--max-questions {text!r} names {source.strip()!r} twice; {_HELP}")
        else:
            by_source[source.strip()] = int(count)
    if not by_source:
        assert default is not None
        return default
    return QuestionCap(default, by_source)


def limit_of(cap: int | QuestionCap | None, source: str) -> int | None:
    """How many rows of ``source`` the cap takes (None: all)."""
    if cap is None or isinstance(cap, int):
        return cap
    return cap.limit(source)


def recorded(cap: int | QuestionCap | None) -> Any:
    """The cap as a results file records it: a plain number or None as itself, per-source counts as their text."""
    return cap.spec() if isinstance(cap, QuestionCap) else cap


def check_cap(cap: Any, where: str) -> None:
    """A ValueError unless ``cap`` is None, a whole number >= 1 or a QuestionCap."""
    if cap is None or isinstance(cap, QuestionCap):
        return
    if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
        raise ValueError(f"{where}={cap!r}: must be None, an integer >= 1 or a QuestionCap; {_HELP}")

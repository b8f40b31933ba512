"""Reading a model turn: where it ends (the first closing tag) and what it asks for (search, answer, neither)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

SEARCH_OPEN, SEARCH_CLOSE = "<search>", "</search>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
STOP_STRINGS = (SEARCH_CLOSE, ANSWER_CLOSE)


class ActionKind(enum.Enum):
    SEARCH = "search"
    ANSWER = "answer"
    INVALID = "invalid"


@dataclass(frozen=True)
class TurnAction:
    """What a model turn asks for. ``content`` is the query or the answer (stripped); '' when invalid."""

    kind: ActionKind
    content: str = ""


def first_close(text: str) -> tuple[int, str] | None:
    """Returns (end offset, tag) of the earliest ``</search>`` or ``</answer>`` in ``text``, else None."""
    best: tuple[int, str] | None = None
    for tag in STOP_STRINGS:
        index = text.find(tag)
        if index >= 0 and (best is None or index < best[0] - len(best[1])):
            best = (index + len(tag), tag)
    return best


def cut_after_close(token_ids: Sequence[int], decode: Callable[[Sequence[int]], str]) -> tuple[int | None, str]:
    """(leading tokens ending with the first closing tag, their text), else (None, text); never splits a token."""
    text = decode(token_ids)
    close = first_close(text)
    if close is None:
        return None, text
    if close[0] == len(text):
        return len(token_ids), text  # the usual case: the backend stopped right at the tag (one decode)
    low, high = 1, len(token_ids)
    while low < high:  # smallest prefix whose text holds a closing tag (monotone in the prefix length)
        middle = (low + high) // 2
        if first_close(decode(token_ids[:middle])) is None:
            low = middle + 1
        else:
            high = middle
    return low, decode(token_ids[:low])


def unclosed_tag(text: str) -> str | None:
    """The closing tag a turn still needs when it ends inside ``<search>`` or ``<answer>``, else None."""
    for opener, closer in ((SEARCH_OPEN, SEARCH_CLOSE), (ANSWER_OPEN, ANSWER_CLOSE)):
        start = text.rfind(opener)
        if start >= 0 and closer not in text[start:]:
            others = [text.rfind(other) for other in (SEARCH_OPEN, ANSWER_OPEN) if other != opener]
            if all(start > other for other in others):
                return closer
    return None


def parse_turn(text: str) -> TurnAction:
    """The action of one (already cut) model turn, decided by its first closing tag and the opener before it."""
    close = first_close(text)
    if close is None:
        return TurnAction(ActionKind.INVALID)
    end, tag = close
    body = text[: end - len(tag)]
    opener = SEARCH_OPEN if tag == SEARCH_CLOSE else ANSWER_OPEN
    start = body.rfind(opener)
    if start < 0:
        return TurnAction(ActionKind.INVALID)
    content = body[start + len(opener) :].strip()
    if tag == SEARCH_CLOSE:
        return TurnAction(ActionKind.SEARCH, content) if content else TurnAction(ActionKind.INVALID)
    return TurnAction(ActionKind.ANSWER, content)

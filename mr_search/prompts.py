"""The fixed texts of a meta-episode: the first user turn, the reflection turn, the corrective turn, passages."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

# Search-R1's tag protocol (docs/method.md#the-meta-episode); the example answer is no embedded question's answer.
QUESTION_TEMPLATE: Final = (
    "Answer the given question. Think step by step inside <think> and </think> every time you get new "
    "information. If you lack some knowledge, call the search engine with <search> query </search>; it "
    "returns the top passages between <information> and </information>. You may search several times. "
    "When no more knowledge is needed, give the final answer inside <answer> and </answer>, without "
    "explanation, for example <answer> Paris </answer>.\nQuestion: {question}\n"
)

# The between-attempts user turn (docs/method.md#reflection); correctness feedback (MAGE) only when asked.
REFLECTION_PROMPT: Final = (
    "Reflect on your previous attempt: check your reasoning, your searches and your answer. Then try "
    "again: search more if needed and give an improved final answer inside <answer> and </answer>."
)
FEEDBACK_WRONG: Final = "Your previous answer was incorrect. "
FEEDBACK_RIGHT: Final = "Your previous answer was correct. "

# The corrective turn after a model turn with neither a search nor an answer (docs/method.md#the-meta-episode).
INVALID_ACTION_MESSAGE: Final = (
    "Invalid action: put a query between <search> and </search> or an answer between <answer> and </answer>."
)

SEARCH_FAILED_MESSAGE: Final = "Search failed: the retrieval service did not answer. Try again or answer."


def question_prompt(question: str) -> str:
    """Returns the first user turn for ``question`` (the dataset rows hold it already formatted)."""
    return QUESTION_TEMPLATE.format(question=_question_text(question))


def _question_text(question: str) -> str:
    question = question.strip()
    if not question:
        raise ValueError("question_prompt: the question is empty; every dataset row needs a question text")
    return question if question.endswith("?") else question + "?"


def reflection_prompt(
    feedback: bool | None = None, template: str = REFLECTION_PROMPT, question: str | None = None
) -> str:
    """The reflection turn, optionally with the previous answer's correctness and the question's line."""
    text = template if feedback is None else (FEEDBACK_RIGHT if feedback else FEEDBACK_WRONG) + template
    if question is None:
        return text
    return f"{text}{QUESTION_LINE}{_question_text(question)}\n"


QUESTION_LINE: Final = "\nQuestion: "


def question_of_prompt(text: str) -> str:
    """The question of a first user turn (``question_prompt``'s ``Question: ...`` line, without it)."""
    if QUESTION_LINE not in text:
        raise ValueError(
            "the first user turn has no 'Question: ...' line; reflection_restates_question repeats that line, so "
            "build the prompts with mr_search.prompts.question_prompt (or turn the option off)"
        )
    return text.rsplit(QUESTION_LINE, 1)[1].strip()


def _split_contents(doc: Mapping[str, Any]) -> tuple[str, str]:
    contents = str(doc.get("contents", ""))
    title, _, text = contents.partition("\n")
    if not text and "title" in doc:
        return str(doc["title"]), contents
    return title, text


def format_passages(docs: Iterable[Mapping[str, Any]]) -> str:
    """Search-R1's layout of one query's ``/retrieve`` items: a ``Doc i(Title: t) text`` line per passage."""
    lines = []
    for index, item in enumerate(docs, start=1):
        doc = item.get("document", item) if isinstance(item, Mapping) else {}
        title, text = _split_contents(doc)
        lines.append(f"Doc {index}(Title: {title}) {text}")
    return "\n".join(lines) + "\n" if lines else ""

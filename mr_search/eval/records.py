"""Trajectory records: one meta-episode as a plain dict (the JSONL the evaluation dumps and the viewer reads)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from mr_search import prompts
from mr_search.reward import exact_match, extract_answer, gold_answers, token_f1

SCHEMA: Final = "mr_search.trajectory/1"
_SEARCH_RE: Final = re.compile(r"<search>(.*?)</search>", re.DOTALL)
_INFO_RE: Final = re.compile(r"<information>(.*?)(?:</information>|$)", re.DOTALL)
_QUESTION_RE: Final = re.compile(r"Question:\s*(.*?)\s*$", re.DOTALL)


def make_attempt(
    index: int,
    turns: Sequence[Mapping[str, str]],
    golds: Sequence[str],
    advantage: float | None = None,
    scored: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """An attempt entry; without ``scored`` its last ``<answer>`` is scored here, with reward = EM."""
    if scored is None:
        answer = extract_answer("".join(t["content"] for t in turns if t["role"] == "assistant"))
        em = exact_match(answer, golds)
        scored = {"answer": answer, "reward": em, "em": em, "f1": token_f1(answer, golds) if answer else 0.0}
    return {
        "index": index,
        "turns": [{"role": str(t["role"]), "content": str(t["content"])} for t in turns],
        "answer": scored["answer"],
        "reward": float(scored["reward"]),
        "em": float(scored["em"]),
        "f1": float(scored["f1"]),
        "advantage": advantage,
    }


def make_record(
    *,
    method: str,
    uid: str,
    data_source: str,
    question: str,
    golden_answers: Sequence[str],
    attempts: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "method": method,
        "uid": uid,
        "data_source": data_source,
        "question": question,
        "golden_answers": list(golden_answers),
        "attempts": [dict(a) for a in attempts],
    }


def searches(attempt: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The attempt's searches in order: ``{"query", "information"}`` (information '' when none followed)."""
    out: list[dict[str, Any]] = []
    for turn in attempt["turns"]:
        if turn["role"] == "assistant":
            out += [{"query": q.strip(), "information": ""} for q in _SEARCH_RE.findall(turn["content"])]
        elif out and not out[-1]["information"]:
            found = _INFO_RE.findall(turn["content"])
            if found:
                out[-1]["information"] = found[0].strip()
    return out


def reflection(attempt: Mapping[str, Any]) -> str:
    """What the model wrote at the start of a later attempt before its first action (its reflection)."""
    if attempt["index"] == 0:
        return ""
    for turn in attempt["turns"]:
        if turn["role"] == "assistant":
            text = turn["content"]
            cut = min((i for i in (text.find("<search>"), text.find("<answer>")) if i >= 0), default=len(text))
            return text[:cut].strip()
    return ""


def improved_after_reflection(record: Mapping[str, Any]) -> bool:
    """True when a later attempt is correct after a wrong first attempt."""
    ems = [a["em"] for a in record["attempts"]]
    return bool(ems) and ems[0] < 1.0 and any(e >= 1.0 for e in ems[1:])


def write_jsonl(records: Iterable[Mapping[str, Any]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Reads trajectory records; lines of a verl rollout dump are converted with ``from_verl_dump``."""
    with Path(path).open(encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({err.msg})") from err
            if raw.get("schema") == SCHEMA:
                yield raw
            elif "output" in raw and "gts" in raw:
                yield from_verl_dump(raw, uid=f"{Path(path).stem}-{lineno}")
            else:
                raise ValueError(
                    f"{path}:{lineno}: neither a trajectory record (schema {SCHEMA!r}) nor a verl rollout dump line "
                    "(keys input/output/gts)"
                )


def from_verl_dump(raw: Mapping[str, Any], *, uid: str, method: str = "verl_dump") -> dict[str, Any]:
    """One line of verl's rollout dump, cut into attempts at the reflection turn (environment text inline)."""
    golds = gold_answers(raw["gts"]) if raw.get("gts") is not None else []
    pieces = str(raw["output"]).split(prompts.REFLECTION_PROMPT)
    advantages = raw.get("mr_attempt_advantages") or [None] * len(pieces)
    attempts = []
    for index, piece in enumerate(pieces):
        # Without special tokens the chat markers leave their role names: "...user\n<reflection>\nassistant\n...".
        if index + 1 < len(pieces):
            piece = re.sub(r"\s*user\s*$", "", piece)
        turns = [{"role": "user", "content": prompts.REFLECTION_PROMPT}] if index else []
        if index:
            piece = re.sub(r"^\s*assistant\s*", "", piece)
        for part in re.split(r"(<information>.*?</information>)", piece, flags=re.DOTALL):
            if part.strip():
                turns.append({"role": "tool" if part.startswith("<information>") else "assistant", "content": part})
        advantage = advantages[index] if index < len(advantages) else None
        scored = None
        if f"em_at_{index + 1}" in raw:  # the agent loop's own per-attempt scores (reward_extra_info columns)
            answer = extract_answer("".join(t["content"] for t in turns if t["role"] == "assistant"))
            em, f1 = float(raw[f"em_at_{index + 1}"]), float(raw.get(f"f1_at_{index + 1}", 0.0))
            scored = {"answer": answer, "reward": em, "em": em, "f1": f1}
        attempts.append(make_attempt(index, turns, golds, None if advantage is None else float(advantage), scored))
    question = _QUESTION_RE.search(str(raw.get("input", "")))
    return make_record(
        method=method,
        uid=uid,
        data_source=str(raw.get("data_source", "unknown")),
        question=question.group(1).splitlines()[0] if question else str(raw.get("input", ""))[-200:],
        golden_answers=golds,
        attempts=attempts,
    )

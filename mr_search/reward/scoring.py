"""Answer extraction and answer scoring: normalisation, exact match, substring match, token F1."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

# verl ships Search-R1's SQuAD-style normaliser, exactly docs/method.md#reward: reused instead of copied.
from verl.utils.reward_score.search_r1_like_qa_em import normalize_answer as _verl_normalize_answer

_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_INFORMATION_RE = re.compile(r"<information>.*?(?:</information>|$)", re.DOTALL)


def normalize_answer(text: str) -> str:
    """Normalises an answer for comparison (docs/method.md#reward): lowercase, no ASCII punctuation, no a/an/the."""
    return _verl_normalize_answer(text)


def extract_answer(text: str) -> str | None:
    """The LAST complete ``<answer>…</answer>`` of ``text`` (stripped), else None; ``<information>`` is skipped."""
    text = _INFORMATION_RE.sub(" ", text)
    matches = _ANSWER_RE.findall(text)
    if not matches:
        return None
    # "<answer>a<answer>b</answer>": the answer is what follows the last opener.
    return matches[-1].rsplit("<answer>", 1)[-1].strip()


def gold_answers(ground_truth: Any) -> list[str]:
    """A row's ground truth as gold strings: ``{"target": [...]}``, a string, or any iterable (parquet's arrays)."""
    if isinstance(ground_truth, Mapping):
        if "target" not in ground_truth:
            raise ValueError(
                f"ground truth {dict(ground_truth)!r} has no 'target' key: expected "
                "reward_model.ground_truth = {'target': [gold answers]}"
            )
        ground_truth = ground_truth["target"]
    if isinstance(ground_truth, str):
        return [ground_truth]
    if isinstance(ground_truth, Iterable):
        golds = [str(item) for item in ground_truth]
        return golds
    raise TypeError(f"ground truth of type {type(ground_truth).__name__} is neither a string nor a list of strings")


def exact_match(prediction: str | None, golds: Iterable[str]) -> float:
    """1.0 when the normalised prediction equals a normalised gold answer, else 0.0 (None -> 0.0)."""
    if prediction is None:
        return 0.0
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(gold) for gold in golds))


def substring_match(prediction: str | None, golds: Iterable[str]) -> float:
    """1.0 when a normalised gold answer occurs inside the normalised prediction, else 0.0."""
    if prediction is None:
        return 0.0
    pred = normalize_answer(prediction)
    return float(any((gold_norm := normalize_answer(gold)) and gold_norm in pred for gold in golds))


def _f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    common = Counter(pred_tokens) & Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str | None, golds: Iterable[str]) -> float:
    """Best SQuAD-style token F1 against any gold; a yes/no/noanswer gold only matches exactly (HotpotQA's rule)."""
    if prediction is None:
        return 0.0
    pred = normalize_answer(prediction)
    best = 0.0
    for gold in golds:
        gold_norm = normalize_answer(gold)
        special = {"yes", "no", "noanswer"}
        if (pred in special or gold_norm in special) and pred != gold_norm:
            continue
        if pred == gold_norm:
            return 1.0
        best = max(best, _f1(pred.split(), gold_norm.split()))
    return best


METRICS = {"em": exact_match, "f1": token_f1, "subem": substring_match}

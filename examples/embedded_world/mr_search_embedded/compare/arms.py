"""The comparison's arms: what each trains (attempts, turns per attempt, attempt discount) and how it is evaluated.

Every arm starts from the same warm start, trains at the same batch with the ``mr_search`` estimator (leave-one-out,
no std) and is matched to MR-Search's model-written tokens. ``mr_search`` is the reference; ``k1`` is the baseline of
the final-answer test (docs: examples/embedded_world/README.md, "The comparison harness").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final

MR: Final = "mr_search"
K1: Final = "k1"
K1_ALL_TURNS: Final = "k1_all_turns"
NO_CREDIT: Final = "mr_search_no_credit"
ARM_NAMES: Final = (MR, K1, K1_ALL_TURNS, NO_CREDIT)
WARM: Final = "warm_start"  # not an arm: the policy every arm starts from, evaluated as the reference shape
FINAL_RULES: Final = ("last", "best")


@dataclass(frozen=True)
class Arm:
    """One arm of the comparison.

    Attributes:
        name: one of ``ARM_NAMES``.
        label: how tables and plots name it.
        attempts: K in training (``mr_search.episode.attempts``).
        turns: model turns per attempt, in training and evaluation (``mr_search.episode.max_turns_per_attempt``).
        gamma: ``mr_search.advantage.gamma``; None where it plays no part (K = 1: no later attempt to credit).
        eval_attempts: K_eval of its final evaluation.
        final: its final-answer figure: ``last`` = EM at its last attempt; ``best`` = its best EM@k over
            k <= eval_attempts (a K = 1 policy was not trained to use a second attempt: it gets its best one).
        first_steps: ``"reference"`` (MR-Search's STEPS) or ``"baseline"`` (BASELINE_STEPS): the steps its first
            launch trains before the token match tops it up.
        what: one line for the plan.
    """

    name: str
    label: str
    attempts: int
    turns: int
    gamma: float | None
    eval_attempts: int
    final: str
    first_steps: str
    what: str

    @property
    def shape(self) -> str:
        """The evaluation's shape, ``<attempts>x<turns>``: arms of one shape are evaluated together."""
        return f"{self.eval_attempts}x{self.turns}"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "shape": self.shape}


def parse_arms(text: str) -> tuple[str, ...]:
    """The ``ARMS`` knob (names separated by commas or spaces) in canonical order; ``mr_search`` and ``k1`` are
    required: the final-answer test compares them."""
    names = [n for n in re.split(r"[,\s]+", text.strip()) if n]
    unknown = [n for n in names if n not in ARM_NAMES]
    if unknown:
        raise ValueError(f"ARMS: {', '.join(unknown)} not valid; use some of {', '.join(ARM_NAMES)}")
    missing = [n for n in (MR, K1) if n not in names]
    if missing:
        raise ValueError(f"ARMS={text!r} lacks {' and '.join(missing)}: the final-answer test compares {MR} with {K1}")
    return tuple(n for n in ARM_NAMES if n in names)


def build_arms(names: Sequence[str], attempts: int, turns: int) -> list[Arm]:
    """The arms named, for MR-Search's K = ``attempts`` and ``turns`` model turns per attempt."""
    if attempts < 2:
        raise ValueError(f"attempts={attempts}: MR-Search needs K >= 2 (the baseline is K = 1)")
    if turns < 1:
        raise ValueError(f"turns={turns}: give at least one model turn per attempt")
    k, t = attempts, turns
    every = {
        MR: Arm(MR, f"MR-Search K={k}", k, t, 1.0, k, "last", "reference", f"K = {k} attempts of {t} turns, gamma = 1"),
        K1: Arm(
            K1,
            f"K=1, {t} turns",
            1,
            t,
            None,
            k,
            "best",
            "baseline",
            f"K = 1 with the same {t} turns per attempt (Search-R1)",
        ),
        K1_ALL_TURNS: Arm(
            K1_ALL_TURNS,
            f"K=1, {k * t} turns",
            1,
            k * t,
            None,
            1,
            "best",
            "baseline",
            f"K = 1 with the meta-episode's whole turn budget: {k} x {t} = {k * t} turns in one attempt",
        ),
        NO_CREDIT: Arm(
            NO_CREDIT,
            f"MR-Search K={k}, gamma=0",
            k,
            t,
            0.0,
            k,
            "last",
            "reference",
            "MR-Search with gamma = 0: attempt s gets only its own leave-one-out reward r~_s, no later attempt's",
        ),
    }
    return [every[name] for name in parse_arms(" ".join(names))]

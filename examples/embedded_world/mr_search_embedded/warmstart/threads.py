"""Picks torch's thread count for a loop of training steps by timing them, as the machine's load changes.

On a 2-core machine, two OpenMP threads make the warm start's steps about twice as fast when the cores are free,
and 3-10x slower than one thread when another process keeps a core busy (each thread waits for the other at
every operation while it is descheduled). Neither choice is safe ahead of time, so ``ThreadTuner`` measures:
it runs on its current count, tries each other count for a few steps once per period, and keeps the fastest
(seconds per unit of work, e.g. per token of the batch, so long and short batches compare).
"""

from __future__ import annotations

import logging
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

logger = logging.getLogger(__name__)


def available_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class TunerConfig:
    """How often and how long other thread counts are tried.

    Attributes:
        candidates: thread counts to choose from (the first is also the starting count).
        period: steps between trials.
        trial: steps each other count runs per trial (the first step after a switch is not timed).
        recent: the current count's cost is the median of its last this many timed steps.
    """

    candidates: tuple[int, ...]
    period: int = 100
    trial: int = 3
    recent: int = 20

    def __post_init__(self) -> None:
        if not self.candidates or any(c < 1 for c in self.candidates):
            raise ValueError(f"TunerConfig.candidates={self.candidates}: give thread counts >= 1, e.g. (2, 1)")
        if self.trial < 2:
            raise ValueError(f"TunerConfig.trial={self.trial}: use at least 2 (a switch's first step is not timed)")
        if self.period <= self.trial * (len(self.candidates) - 1):
            raise ValueError(f"TunerConfig.period={self.period}: use more steps than the trials take per period")
        if self.recent < 1:
            raise ValueError(f"TunerConfig.recent={self.recent}: use at least 1")


class ThreadTuner:
    """Call ``start(step)`` before a step and ``finish(work)`` after it; the tuner sets the thread count."""

    def __init__(
        self,
        config: TunerConfig,
        set_threads: Callable[[int], None],
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.config = config
        self._set_threads = set_threads
        self._clock = clock
        self.current = config.candidates[0]
        self._costs: dict[int, list[float]] = {c: [] for c in config.candidates}
        self._running: int | None = None
        self._started = 0.0
        self._timed = False
        self.steps_per_count: dict[int, int] = dict.fromkeys(config.candidates, 0)

    def _schedule(self, step: int) -> int:
        # Trials start at step ``first`` (after a few timed steps of the current count), then every period.
        others = [c for c in self.config.candidates if c != self.current]
        first = 1 + self.config.trial
        slot = (step - first) % self.config.period
        if step >= first and slot < self.config.trial * len(others):
            return others[slot // self.config.trial]
        return self.current

    def start(self, step: int) -> None:
        threads = self._schedule(step)
        if threads != self._running:
            self._set_threads(threads)
        self._timed = threads == self._running  # the first step after a switch pays the switch: not timed
        self._running = threads
        self.steps_per_count[threads] += 1
        self._started = self._clock()

    def finish(self, work: float) -> None:
        if self._running is None:
            raise RuntimeError("ThreadTuner.finish: call start(step) before each step")
        elapsed = self._clock() - self._started
        if not self._timed or work <= 0:
            return
        costs = self._costs[self._running]
        if self._running != self.current:
            # A trial: its cost is its own latest steps only; once they are in, compare.
            costs.append(elapsed / work)
            del costs[: -(self.config.trial - 1)]
            if len(costs) >= self.config.trial - 1:
                self._decide()
            return
        costs.append(elapsed / work)
        del costs[: -self.config.recent]

    def forget(self) -> None:
        """Drops every measured cost (the work changed its cost per unit, e.g. a new kind of batch); the current
        count stays until the others are measured against it afresh."""
        for costs in self._costs.values():
            costs.clear()

    def _decide(self) -> None:
        measured = {c: statistics.median(v) for c, v in self._costs.items() if v}
        best = min(measured, key=measured.__getitem__)
        if best != self.current and self.current in measured:
            logger.info(
                "threads: %d -> %d (%.3g vs %.3g s per unit of work)",
                self.current,
                best,
                measured[self.current],
                measured[best],
            )
            self.current = best
            self._costs[best] = []  # the current count's cost is measured afresh from here


def default_candidates(cores: int | None = None) -> Sequence[int]:
    """All free cores first, then 1 (one core: just 1)."""
    cores = available_cores() if cores is None else cores
    return (cores, 1) if cores > 1 else (1,)

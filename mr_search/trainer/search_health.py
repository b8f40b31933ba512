"""Stops a run whose services fail: a step's share of failed searches over a limit, or a hung rollout engine."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mr_search.agent.retrieval_client import RetrieverConfig
from mr_search.contract import GENERATION_TIMEOUTS, SEARCH_RECORD
from mr_search.trainer.metrics import trajectory_fields


@dataclass(frozen=True)
class SearchFailures:
    """A step's searches: how many ran, how many still failed after the client's retries, the last error."""

    run: int
    failed: int
    last_error: str | None

    @property
    def rate(self) -> float:
        return self.failed / self.run if self.run else 0.0


def search_failures(extra_fields: Sequence[Any], uids: Sequence[Any]) -> SearchFailures:
    """Sums the agent loop's per-trajectory search records of a step (verl's padding rows left out)."""
    run = failed = 0
    last_error: str | None = None
    for fields in trajectory_fields(extra_fields, uids):
        record = fields.get(SEARCH_RECORD)
        if not isinstance(record, dict):
            continue
        run += int(record.get("run", 0))
        failed += int(record.get("failed", 0))
        last_error = record.get("last_error") or last_error
    return SearchFailures(run=run, failed=failed, last_error=last_error)


def check_search_failures(failures: SearchFailures, config: RetrieverConfig) -> None:
    """RuntimeError naming the service when more than ``max_failure_rate`` of the step's searches failed."""
    if failures.failed and failures.rate > config.max_failure_rate:
        raise RuntimeError(
            f"{failures.failed} of {failures.run} searches of this training step failed after "
            f"{config.max_retries} retries ({failures.rate:.0%} > mr_search.retriever.max_failure_rate="
            f"{config.max_failure_rate}); the retrieval service at {config.url} looks down. Last error: "
            f"{failures.last_error}. Start it (bash retrieval_launch.sh) or fix mr_search.retriever.url, then resume "
            "the run (RUN_DIR=<run> bash train_grpo_step.sh)."
        )


def check_generation_timeouts(extra_fields: Sequence[Any], uids: Sequence[Any], timeout_s: float) -> None:
    """RuntimeError when a model turn of this step waited past ``timeout_s`` for the rollout engine."""
    hung = sum(int(fields.get(GENERATION_TIMEOUTS, 0) or 0) for fields in trajectory_fields(extra_fields, uids))
    if hung:
        raise RuntimeError(
            f"generation hung: {hung} model turn(s) of this training step got nothing from the rollout engine for "
            f"{timeout_s:.0f} s (mr_search.episode.generate_timeout_s). The engine is stuck or overloaded: see its "
            "lines in train.log, then run the same command again to resume from the last checkpoint."
        )

"""Bounded calls into the rollout engines (weight sync, memory release): verl waits for them without a limit, and a dead
vLLM engine core would leave it waiting for ever.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

T = TypeVar("T")

logger = logging.getLogger(__name__)

TIMEOUT_KEY: Final = "mr_search.trainer.weight_sync_timeout_s"
POLL_S: Final = 2.0  # how often a waiting call looks at the engine servers
PING_S: Final = 1.0  # how long one look waits for the pings; a server that has not answered by then is not judged


class EngineCallFailed(RuntimeError):
    """A call into the rollout engines failed, found an engine dead, or did not finish in time."""


@dataclass(frozen=True)
class LastCheckpoint:
    """The newest checkpoint of a run (verl's ``latest_checkpointed_iteration.txt``), or none."""

    step: int | None
    folder: Path

    @classmethod
    def of(cls, checkpoints: Path) -> LastCheckpoint:
        marker = checkpoints / "latest_checkpointed_iteration.txt"
        try:
            return cls(int(marker.read_text().strip()), checkpoints)
        except (OSError, ValueError):
            return cls(None, checkpoints)

    def resume_line(self) -> str:
        if self.step is None:
            return f"No checkpoint is saved in {self.folder} yet (trainer.save_freq): the same command starts over."
        return (
            f"The last checkpoint is step {self.step} ({self.folder / f'global_step_{self.step}'}): "
            "the same command resumes from it (trainer.resume_mode=auto)."
        )


def dead_servers(servers: Sequence[tuple[int, Any]], wait_s: float = PING_S) -> list[str]:
    """One line per engine server Ray reports dead; one silent past ``wait_s`` is busy or hung, not dead."""
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError

    if not servers:
        return []
    pings = {server.__ray_ready__.remote(): replica for replica, server in servers}
    answered, _ = ray.wait(list(pings), num_returns=len(pings), timeout=wait_s)
    dead = []
    for ref in answered:
        try:
            ray.get(ref, timeout=0)
        except RayActorError as error:
            dead.append(f"the engine server of replica {pings[ref]} is dead ({describe(error)})")
        except GetTimeoutError:
            pass
    return dead


def replica_servers(replicas: Sequence[Any]) -> list[tuple[int, Any]]:
    """The Ray actor handles of verl's rollout replicas' servers, with the replica's index."""
    return [(index, server) for index, replica in enumerate(replicas) for server in getattr(replica, "servers", [])]


_ANSI: Final = re.compile(r"\x1b\[[0-9;]*m")


def describe(error: BaseException) -> str:
    """``Type: first line`` of the root error: Ray's task errors unwrapped to their cause, terminal colours dropped."""
    for _ in range(8):
        cause = getattr(error, "cause", None)
        if not isinstance(cause, BaseException) or cause is error:
            break
        error = cause
    text = _ANSI.sub("", str(error)).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__


def run_bounded(
    call: Callable[[], T],
    *,
    what: str,
    timeout_s: float,
    probe: Callable[[], list[str]],
    resume_line: Callable[[], str],
    poll_s: float = POLL_S,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``call()`` in a helper thread, with a time limit and the engine servers watched; raises ``EngineCallFailed``."""
    future: Future[T] = Future()

    def target() -> None:
        try:
            future.set_result(call())
        except BaseException as error:  # handed to the waiting thread, which raises it
            future.set_exception(error)

    def look() -> list[str]:
        try:
            return probe()
        except Exception:  # a look that fails says nothing about the engine; the call's own end or limit decides
            logger.warning("could not ask the engine servers whether they are alive", exc_info=True)
            return []

    threading.Thread(target=target, name=f"engine call: {what}", daemon=True).start()
    deadline = clock() + timeout_s
    while True:
        try:
            return future.result(timeout=max(0.0, min(poll_s, deadline - clock())))
        except FutureTimeout:
            pass
        except Exception as error:
            found = "".join(f"; {line}" for line in look())
            raise EngineCallFailed(
                f"rollout engine lost in {what}: it raised {describe(error)}{found}. {resume_line()}"
            ) from error
        dead = look()
        if dead:
            raise EngineCallFailed(f"rollout engine lost in {what}: {'; '.join(dead)}. {resume_line()}")
        if clock() >= deadline:
            raise EngineCallFailed(
                f"rollout engine lost in {what}: it did not finish within {timeout_s:g} s ({TIMEOUT_KEY}) and Ray "
                "reported no engine server dead: a process under a server (vLLM's engine core, SGLang's scheduler) "
                f"may have died, or the engine hung; the engine's own lines above say which. {resume_line()}"
            )

"""The registered MR-Search trainer: the method's step plus the run's operations (lazy: verl's V1 stack)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mr_search.ops.engine_guard import LastCheckpoint, dead_servers, replica_servers, run_bounded
from mr_search.ops.resume_check import resume_and_continue
from mr_search.ops.startup import check_training_options, replay_poll_seconds, resume_steps, weight_sync_timeout_seconds
from mr_search.trainer.attempt_trainer import AttemptTrainer
from mr_search.trainer.validation import validation_speed

logger = logging.getLogger(__name__)


class TrainerOps:
    """Operations over a verl V1 trainer (a mixin placed before it): checks, engine guards, resume, timing."""

    config: Any

    def __init__(self, config: Any) -> None:
        check_training_options(config)  # before any worker starts
        super().__init__(config)

    def fit(self, agent_loop_manager: Any) -> None:
        """verl's training loop, then (``mr_search.trainer.resume_steps`` > 0) the in-launch resume and more steps."""
        super().fit(agent_loop_manager)
        steps = resume_steps(self.config)
        if steps and not self.config.trainer.get("val_only", False):
            resume_and_continue(self, lambda: super(TrainerOps, self).fit(agent_loop_manager), steps)

    def on_init_end(self) -> None:
        """verl's first weight sync (after a checkpoint load), bounded (``mr_search.ops.engine_guard``)."""
        self.engine_call("the first weight sync", super().on_init_end)

    def on_sample_end(self) -> None:
        """verl's release of the engines' memory after generation, bounded."""
        what = f"the engines' memory release after step {self.global_steps}'s generation"
        self.engine_call(what, super().on_sample_end)

    def on_step_end(self) -> None:
        """verl's weight sync after the update (and the step's checkpoint), bounded."""
        self.engine_call(f"the weight sync after step {self.global_steps}", super().on_step_end)

    def engine_call(self, what: str, call: Callable[[], None]) -> None:
        """``call()`` bounded, with the engine servers watched: a dead or hung engine ends the run."""
        checkpoints = Path(self.config.trainer.default_local_dir)
        run_bounded(
            call,
            what=what,
            timeout_s=weight_sync_timeout_seconds(self.config),
            probe=lambda: dead_servers(replica_servers(getattr(self.checkpoint_manager, "replicas", []))),
            resume_line=lambda: LastCheckpoint.of(checkpoints).resume_line(),
        )

    def _build_replay_buffer(self) -> Any:
        """verl's replay buffer at ``replay_poll_s`` (verl's 2 s rounds every generation up to 2 s)."""
        buffer = super()._build_replay_buffer()
        if hasattr(buffer, "poll_interval"):  # verl's built-in buffers; a custom sampler keeps its own
            buffer.poll_interval = replay_poll_seconds(self.config)
        return buffer

    def _validate(self) -> dict[str, float]:
        """verl's validation pass, timed (``val-speed/*`` says how many meta-episodes it ran and how fast)."""
        started = time.perf_counter()
        metrics = super()._validate()
        meta_episodes = len(self.val_dataset) * int(self.config.actor_rollout_ref.rollout.val_kwargs.n)
        speed = validation_speed(meta_episodes, time.perf_counter() - started)
        logger.warning(
            "validation: %d meta-episodes in %.1f s = %.2f meta-episodes/s",
            meta_episodes,
            speed["val-speed/seconds"],
            speed["val-speed/meta_episodes_per_s"],
        )
        return {**metrics, **speed}


class MRSearchTrainer(TrainerOps, AttemptTrainer):
    """The trainer ``trainer.v1.trainer_mode=mr_search`` selects: ``AttemptTrainer``'s method under ``TrainerOps``."""

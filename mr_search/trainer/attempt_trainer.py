"""verl V1 sync trainer whose advantage step hands the rollout's per-attempt columns to the mr_search estimator.

Imported lazily (``mr_search.trainer.register``): it pulls in verl's whole V1 trainer stack.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import numpy as np
import torch
from tensordict import TensorDict
from verl.protocol import DataProto
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.ray_trainer import apply_kl_penalty
from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_add_to_batch
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.workers.utils.padding import response_to_nested

from mr_search.advantage import ESTIMATOR_NAME, AdvantageConfig, credited_attempts, per_attempt_advantages
from mr_search.advantage import register as register_estimator
from mr_search.advantage.episodes import episode_rows
from mr_search.agent.config import EpisodeConfig
from mr_search.agent.retrieval_client import RetrieverConfig
from mr_search.config_checks import subtree
from mr_search.contract import COLUMNS
from mr_search.ops.engine_guard import LastCheckpoint, dead_servers, replica_servers, run_bounded
from mr_search.ops.resume_check import resume_and_continue
from mr_search.ops.startup import (
    check_training_options,
    replay_poll_seconds,
    resume_steps,
    weight_sync_timeout_seconds,
)
from mr_search.trainer.columns import AttemptBatch, attempt_batch_from_columns, attempt_token_sums
from mr_search.trainer.metrics import attempt_statistics, episode_statistics
from mr_search.trainer.search_health import check_generation_timeouts, check_search_failures, search_failures
from mr_search.trainer.validation import AttemptsOnRows, validation_speed

logger = logging.getLogger(__name__)

# verl's PPOTrainer._compute_advantage fetches these; ours adds the contract columns.
_VERL_FIELDS: Final = (
    "uid",
    "response_mask",
    "rm_scores",
    "rollout_log_probs",
    "old_log_probs",
    "ref_log_prob",
    "values",
)


class MRSearchTrainer(PPOTrainerSync):
    """verl's synchronous PPO trainer with the attempt-level advantage step
    (docs/method.md#the-attempt-level-advantage).

    Selected with ``trainer.v1.trainer_mode=mr_search``. With ``algorithm.adv_estimator=mr_search`` the advantage
    step fetches the per-attempt columns of ``mr_search.contract`` from TransferQueue, aligns them with the padded
    batch (pad ids -1, verl's synthetic rows cut to their length, grouping by uid) and hands them to the
    registered estimator; verl's KL-in-reward, rollout-correction and write-back steps are kept as verl has them
    (``tests/mr_search/trainer`` fails if verl's version of this method changes). Any other estimator runs
    verl's own step unchanged.

    verl switches to its replay-buffer async path for any ``trainer_mode`` other than "sync", so this trainer
    reports "sync" (and reads ``trainer.v1.sync`` options) whatever name selected it.
    """

    # TransferQueue client; a class attribute so that tests hand in an in-memory fake.
    transfer_queue: Any = None

    @property
    def trainer_mode(self) -> str:
        return "sync"

    @trainer_mode.setter
    def trainer_mode(self, value: str) -> None:
        self.selected_trainer_mode = value  # verl assigns config.trainer.v1.trainer_mode; the mode stays "sync"

    def __init__(self, config: Any) -> None:
        check_training_options(config)  # before any worker starts
        super().__init__(config)
        self.advantage_config = advantage_config_of(config)
        self.retriever_config = retriever_config_of(config)
        self.episode_config = episode_config_of(config)
        register_estimator()  # normally done by the plugin on `import verl`; a no-op then

    def fit(self, agent_loop_manager: Any) -> None:
        """verl's training loop; with ``mr_search.trainer.resume_steps`` > 0 it then resumes from the run's own last
        checkpoint in this launch and trains that many more steps (``mr_search.ops.resume_check``)."""
        super().fit(agent_loop_manager)
        steps = resume_steps(self.config)
        if steps and not self.config.trainer.get("val_only", False):
            resume_and_continue(self, lambda: super(MRSearchTrainer, self).fit(agent_loop_manager), steps)

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
        """``call()`` under ``mr_search.trainer.weight_sync_timeout_s`` with the engine servers watched: a dead or hung
        engine ends the run with the cause and the checkpoint to resume from, not a wait without end."""
        checkpoints = Path(self.config.trainer.default_local_dir)
        run_bounded(
            call,
            what=what,
            timeout_s=weight_sync_timeout_seconds(self.config),
            probe=lambda: dead_servers(replica_servers(getattr(self.checkpoint_manager, "replicas", []))),
            resume_line=lambda: LastCheckpoint.of(checkpoints).resume_line(),
        )

    def _build_replay_buffer(self) -> Any:
        """verl's replay buffer, polling every ``mr_search.trainer.replay_poll_s`` for a finished batch (verl: 2 s,
        which rounds every generation phase up to a multiple of 2 s)."""
        buffer = super()._build_replay_buffer()
        if hasattr(buffer, "poll_interval"):  # verl's built-in buffers; a custom sampler keeps its own
            buffer.poll_interval = replay_poll_seconds(self.config)
        return buffer

    def _validate(self) -> dict[str, float]:
        """verl's validation pass, timed (``val-speed/*`` says how many meta-episodes it ran and how fast), at
        ``mr_search.episode.val_attempts`` attempts when that is given."""
        started = time.perf_counter()
        val_attempts = episode_config_of(self.config).val_attempts
        loader = self.val_dataloader
        if val_attempts is not None:
            self.val_dataloader = AttemptsOnRows(loader, val_attempts)
        try:
            metrics = super()._validate()
        finally:
            self.val_dataloader = loader
        meta_episodes = len(self.val_dataset) * int(self.config.actor_rollout_ref.rollout.val_kwargs.n)
        speed = validation_speed(meta_episodes, time.perf_counter() - started)
        logger.warning(
            "validation: %d meta-episodes in %.1f s = %.2f meta-episodes/s",
            meta_episodes,
            speed["val-speed/seconds"],
            speed["val-speed/meta_episodes_per_s"],
        )
        return {**metrics, **speed}

    def _tq(self) -> Any:
        if self.transfer_queue is None:
            import transfer_queue

            return transfer_queue
        return self.transfer_queue

    def _compute_advantage(self, batch: Any, metrics: dict) -> Any:
        """Advantage step: verl's, with the per-attempt columns handed to the mr_search estimator."""
        metrics.update(self._episode_metrics(batch))
        if self.config.algorithm.adv_estimator != ESTIMATOR_NAME:
            return super()._compute_advantage(batch, metrics)
        tq = self._tq()
        fields = [*_VERL_FIELDS, *COLUMNS]
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
        present_fields = set(data.keys())
        columns = {name: data.pop(name) for name in COLUMNS if name in present_fields}

        response_mask = data["response_mask"]
        data = DataProto(batch=data.to_padded_tensor())
        data.batch["token_level_scores"] = data.batch["rm_scores"]
        data.non_tensor_batch["uid"] = np.array(data.batch.pop("uid").tolist(), dtype=object)
        attempts = attempt_batch_from_columns(
            columns,
            response_lengths=response_mask.offsets().diff(),
            uids=data.non_tensor_batch["uid"],
            width=data.batch["response_mask"].shape[1],
        )

        # 1. apply kl penalty to rewards (verl's step)
        if self.config.algorithm.use_kl_in_reward:
            data, kl_metrics = apply_kl_penalty(
                data, kl_ctrl=self.kl_ctrl_in_reward, kl_penalty=self.config.algorithm.kl_penalty
            )
            metrics.update(kl_metrics)
        else:
            data.batch["token_level_rewards"] = data.batch["token_level_scores"]

        # 2. rollout correction (verl's step)
        rollout_corr_config = self.config.algorithm.get("rollout_correction", None)
        bypass_recomputing_logprobs = rollout_corr_config and rollout_corr_config.get("bypass_mode", False)
        rollout_correction = (
            rollout_corr_config is not None and "rollout_log_probs" in data.batch and not bypass_recomputing_logprobs
        )
        if rollout_correction:
            data, is_metrics = compute_rollout_correction_and_add_to_batch(data, rollout_corr_config)
            metrics.update(is_metrics)

        # 3. attempt-level advantages
        advantages = self._attempt_advantages(data, attempts, metrics)
        data.batch["advantages"] = advantages
        data.batch["returns"] = advantages

        # 4. write nested advantages and returns back to TransferQueue (verl's step)
        fields = ["advantages", "returns"]
        if self.config.algorithm.use_kl_in_reward:
            fields.append("token_level_rewards")
        if rollout_correction:
            fields.append("response_mask")
            if "rollout_is_weights" in data.batch:
                fields.append("rollout_is_weights")
        output = {field: response_to_nested(data.batch[field], response_mask) for field in fields}
        return tq.kv_batch_put(
            keys=batch.keys, partition_id=batch.partition_id, fields=TensorDict(output, batch_size=len(batch))
        )

    def _episode_metrics(self, batch: Any) -> dict[str, float]:
        """The agent loop's per-trajectory scalars, averaged over the step (any estimator, K = 1 included)."""
        data = self._tq().kv_batch_get(
            keys=batch.keys, partition_id=batch.partition_id, select_fields=["uid", "extra_fields"]
        )
        if "extra_fields" not in set(data.keys()):
            return {}
        extra_fields, uids = data.get("extra_fields").tolist(), data.get("uid").tolist()
        check_search_failures(search_failures(extra_fields, uids), self.retriever_config)
        check_generation_timeouts(extra_fields, uids, self.episode_config.generate_timeout_s)
        return episode_statistics(extra_fields, uids)

    def _attempt_advantages(self, data: DataProto, attempts: AttemptBatch, metrics: dict) -> torch.Tensor:
        """Per-attempt advantages, computed once: spread over the tokens by the registered estimator, and logged."""
        token_rewards = data.batch["token_level_rewards"]
        response_mask = data.batch["response_mask"]
        uids = data.non_tensor_batch["uid"]
        rewards = attempts.rewards.to(token_rewards.dtype)
        if self.config.algorithm.use_kl_in_reward:
            # The KL penalty verl put on each token counts towards the reward of the token's attempt.
            penalty = (token_rewards - data.batch["token_level_scores"]) * response_mask
            rewards = rewards + attempt_token_sums(penalty, attempts.attempt_ids, rewards.shape[1])
        with torch.no_grad():
            per_attempt = per_attempt_advantages(
                rewards, attempts.status, uids, self.advantage_config, attempts.episode_ids
            )
        estimator = core_algos.get_adv_estimator_fn(ESTIMATOR_NAME)
        advantages, _ = estimator(
            token_level_rewards=token_rewards,
            response_mask=response_mask,
            index=uids,
            config=self.advantage_config,
            attempt_ids=attempts.attempt_ids,
            attempt_rewards=rewards,
            attempt_status=attempts.status,
            episode_ids=attempts.episode_ids,
            per_attempt=per_attempt,
        )
        credited, present = credited_attempts(rewards, attempts.status, self.advantage_config.truncated)
        # Per-attempt statistics over one row per meta-episode; token statistics over every row.
        first = episode_rows(uids, attempts.episode_ids, len(uids)).first
        metrics.update(
            attempt_statistics(
                per_attempt,
                credited,
                present,
                advantages,
                attempts.attempt_ids,
                response_mask,
                attempts.is_padding,
                episode_rows=first,
            )
        )
        return advantages


def advantage_config_of(config: Any) -> AdvantageConfig:
    """Reads ``mr_search.advantage`` from the training config (absent -> the paper defaults)."""
    return AdvantageConfig.from_config(subtree(config, "advantage"))


def retriever_config_of(config: Any) -> RetrieverConfig:
    """Reads ``mr_search.retriever`` from the training config (absent -> the defaults)."""
    return RetrieverConfig.from_config(subtree(config, "retriever"))


def episode_config_of(config: Any) -> EpisodeConfig:
    """Reads ``mr_search.episode`` from the training config (absent -> the defaults)."""
    return EpisodeConfig.from_config(subtree(config, "episode"))

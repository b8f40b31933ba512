"""verl V1 sync trainer whose advantage step computes the attempt-level advantage from the rollout's columns."""

from __future__ import annotations

import logging
from typing import Any, Final

import numpy as np
import torch
from tensordict import TensorDict
from verl.protocol import DataProto
from verl.trainer.ppo.ray_trainer import apply_kl_penalty
from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_add_to_batch
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.workers.utils.padding import response_to_nested

from mr_search.advantage import (
    ESTIMATOR_NAME,
    AdvantageConfig,
    credited_attempts,
    per_attempt_advantages,
    spread_to_tokens,
)
from mr_search.advantage import register as register_estimator
from mr_search.advantage.episodes import episode_rows
from mr_search.agent.config import EpisodeConfig
from mr_search.agent.retrieval_client import RetrieverConfig
from mr_search.config_checks import subtree
from mr_search.contract import COLUMNS
from mr_search.trainer.columns import AttemptBatch, attempt_batch_from_columns, attempt_token_sums
from mr_search.trainer.metrics import attempt_statistics, episode_statistics
from mr_search.trainer.search_health import check_generation_timeouts, check_search_failures, search_failures
from mr_search.trainer.validation import AttemptsOnRows

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


class AttemptTrainer(PPOTrainerSync):
    """verl's sync PPO trainer with the attempt-level advantage step; always "sync" (else verl goes async)."""

    # TransferQueue client; a class attribute so that tests hand in an in-memory fake.
    transfer_queue: Any = None

    @property
    def trainer_mode(self) -> str:
        return "sync"

    @trainer_mode.setter
    def trainer_mode(self, value: str) -> None:
        self.selected_trainer_mode = value  # verl assigns config.trainer.v1.trainer_mode; the mode stays "sync"

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.advantage_config = advantage_config_of(config)
        self.retriever_config = retriever_config_of(config)
        self.episode_config = episode_config_of(config)
        register_estimator()  # normally done by the plugin on `import verl`; a no-op then

    def _validate(self) -> dict[str, float]:
        """verl's validation pass at ``mr_search.episode.val_attempts`` attempts when that is given."""
        val_attempts = episode_config_of(self.config).val_attempts
        loader = self.val_dataloader
        if val_attempts is not None:
            self.val_dataloader = AttemptsOnRows(loader, val_attempts)
        try:
            return super()._validate()
        finally:
            self.val_dataloader = loader

    def _tq(self) -> Any:
        if self.transfer_queue is None:
            import transfer_queue

            return transfer_queue
        return self.transfer_queue

    def _compute_advantage(self, batch: Any, metrics: dict) -> Any:
        """Advantage step: verl's, with the attempt-level advantage of the per-attempt columns in step 3."""
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
        """Per-attempt advantages, computed once: spread over the tokens and logged."""
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
            advantages = spread_to_tokens(per_attempt.to(token_rewards.dtype), attempts.attempt_ids, response_mask)
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

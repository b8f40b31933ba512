"""The MR-Search trainer's advantage step, driven with hand-built TransferQueue rows as the agent loop writes them."""

from __future__ import annotations

import itertools
import sys

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from transfer_queue import KVBatchMeta
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.v1 import trainer_base

from mr_search.advantage import AdvantageConfig, attempt_advantages
from mr_search.advantage.core import attempt_advantages as formula
from mr_search.contract import ATTEMPT_IDS, ATTEMPT_REWARDS, ATTEMPT_STATUS, EPISODE_ID
from mr_search.trainer.attempt_trainer import (
    AttemptTrainer,
    advantage_config_of,
)

# (uid, per-token attempt ids, response mask, attempt rewards, attempt status: 1 complete, 2 truncated)
TRAJECTORIES = {
    "a1": ("A", [0, 0, 0, 1, 1], [1, 1, 0, 1, 1], [0.0, 1.0], [1, 1]),
    "a2": ("A", [0, 0, 1, 1], [1, 0, 1, 1], [0.0, 0.0], [1, 1]),
    "b1": ("B", [0, 1, 1, 1, 1, 1], [1, 0, 1, 1, 0, 1], [1.0, 1.0], [1, 1]),
    "b2": ("B", [0, 0, 1], [1, 1, 1], [0.0, 0.0], [1, 1]),
    "b3": ("B", [0, 0], [1, 1], [1.0, 0.0], [1, 2]),  # cut short: its second attempt never started
}
# docs/method.md#the-attempt-level-advantage by hand (gamma = 1, leave-one-out): group A is the worked example;
# group B's attempt 1 rewards (1, 0, 1) give (0.5, -1, 0.5), its attempt 2 (b1, b2 only) gives (1, -1).
_PER_TOKEN = ("response_mask", "rm_scores", "old_log_probs", "ref_log_prob", ATTEMPT_IDS)
EXPECTED = {"a1": [1.0, 1.0], "a2": [-1.0, -1.0], "b1": [1.5, 1.0], "b2": [-2.0, -1.0], "b3": [0.5, 0.0]}

# The step's metrics on the ``batch`` fixture as the trainer logged them when it computed the attempt advantages twice
# (once in the estimator, once for the metrics), recorded at 4cc009f: computing them once must not change a value.
RECORDED_METRICS = {
    "plain": {
        "mr_search/attempt_1/adv_max": 1.5,
        "mr_search/attempt_1/adv_mean": 0.0,
        "mr_search/attempt_1/adv_min": -2.0,
        "mr_search/attempt_1/adv_nonzero_frac": 1.0,
        "mr_search/attempt_1/adv_std": 1.3038404810405297,
        "mr_search/attempt_1/present_frac": 1.0,
        "mr_search/attempt_1/reward_mean": 0.4,
        "mr_search/attempt_1/trained_tokens": 8.0,
        "mr_search/attempt_2/adv_max": 1.0,
        "mr_search/attempt_2/adv_mean": 0.0,
        "mr_search/attempt_2/adv_min": -1.0,
        "mr_search/attempt_2/adv_nonzero_frac": 1.0,
        "mr_search/attempt_2/adv_std": 1.0,
        "mr_search/attempt_2/present_frac": 0.8,
        "mr_search/attempt_2/reward_mean": 0.5,
        "mr_search/attempt_2/trained_tokens": 8.0,
        "mr_search/num_attempts": 2.0,
        "mr_search/model_tokens": 16.0,
        "mr_search/token_adv_abs_mean": 1.09375,
        "mr_search/token_adv_mean": 0.09375,
    },
    "kl": {
        "actor/reward_kl_penalty": 0.16666670143604279,
        "actor/reward_kl_penalty_coeff": 0.5,
        "mr_search/attempt_1/adv_max": 1.399999976158142,
        "mr_search/attempt_1/adv_mean": 1.1920928955078126e-08,
        "mr_search/attempt_1/adv_min": -1.8499999046325684,
        "mr_search/attempt_1/adv_nonzero_frac": 1.0,
        "mr_search/attempt_1/adv_std": 1.2004165513540528,
        "mr_search/attempt_1/present_frac": 1.0,
        "mr_search/attempt_1/reward_mean": 0.23999996185302735,
        "mr_search/attempt_1/trained_tokens": 8.0,
        "mr_search/attempt_2/adv_max": 1.0,
        "mr_search/attempt_2/adv_mean": 0.0,
        "mr_search/attempt_2/adv_min": -1.0,
        "mr_search/attempt_2/adv_nonzero_frac": 1.0,
        "mr_search/attempt_2/adv_std": 0.9055384927506,
        "mr_search/attempt_2/present_frac": 0.8,
        "mr_search/attempt_2/reward_mean": 0.2999999523162842,
        "mr_search/attempt_2/trained_tokens": 8.0,
        "mr_search/num_attempts": 2.0,
        "mr_search/model_tokens": 16.0,
        "mr_search/token_adv_abs_mean": 0.9937499687075615,
        "mr_search/token_adv_mean": 0.06875000149011612,
    },
}


def _row(name: str) -> dict:
    uid, ids, mask, rewards, status = TRAJECTORIES[name]
    scores = torch.zeros(len(ids))
    scores[-1] = rewards[-1]  # verl's reward manager puts a trajectory score on the last token
    return {
        "uid": uid,
        "response_mask": torch.tensor(mask, dtype=torch.int64),
        "rm_scores": scores,
        "old_log_probs": torch.full((len(ids),), -1.0),
        "ref_log_prob": torch.full((len(ids),), -1.2),
        ATTEMPT_IDS: torch.tensor(ids, dtype=torch.int64),
        ATTEMPT_REWARDS: torch.tensor(rewards, dtype=torch.float32),
        ATTEMPT_STATUS: torch.tensor(status, dtype=torch.int64),
    }


def _padding_row(template: dict) -> dict:
    """verl's synthetic row (padding_utils.py): every field of the template, a 1-token response with mask 0."""
    row = {key: value.clone() if isinstance(value, torch.Tensor) else value for key, value in template.items()}
    row.update(uid="pad0123abc", response_mask=torch.zeros(1, dtype=torch.int64), rm_scores=torch.zeros(1))
    row.update(old_log_probs=torch.zeros(1), ref_log_prob=torch.zeros(1))
    return row


@pytest.fixture
def batch(fake_tq) -> KVBatchMeta:
    # Rows in the order verl's batch balancing left them, verl's padding row among them.
    order = ["b1", "a1", "pad", "b3", "a2", "b2"]
    rows = {name: _row(name) for name in TRAJECTORIES}
    rows["pad"] = _padding_row(rows["b1"])
    fake_tq.put_rows({f"key-{name}": rows[name] for name in order})
    return KVBatchMeta(partition_id="train", keys=[f"key-{name}" for name in order], tags=[{} for _ in order])


def _written(fake_tq, name: str, field: str) -> list[float]:
    return fake_tq.rows[f"key-{name}"][field].tolist()


def test_each_token_gets_its_attempts_advantage_grouped_by_uid(fake_tq, advantage_trainer, batch: KVBatchMeta) -> None:
    metrics: dict = {}
    advantage_trainer()._compute_advantage(batch, metrics)
    for name, (_, ids, mask, _, _) in TRAJECTORIES.items():
        want = [EXPECTED[name][s] * m for s, m in zip(ids, mask, strict=True)]
        assert _written(fake_tq, name, "advantages") == pytest.approx(want), name
        assert _written(fake_tq, name, "returns") == pytest.approx(want), name
    # verl's padding row: one token, advantage 0, and it did not join any group.
    assert _written(fake_tq, "pad", "advantages") == [0.0]
    assert metrics["mr_search/attempt_1/adv_mean"] == pytest.approx(0.0, abs=1e-6)
    assert metrics["mr_search/attempt_1/adv_max"] == pytest.approx(1.5)
    assert metrics["mr_search/attempt_2/present_frac"] == pytest.approx(4 / 5)
    assert metrics["mr_search/attempt_2/reward_mean"] == pytest.approx(0.5)
    assert metrics["mr_search/attempt_1/trained_tokens"] == 8.0


def test_zero_rewards_everywhere_give_zero_advantages(fake_tq, advantage_trainer, batch: KVBatchMeta) -> None:
    for row in fake_tq.rows.values():
        row[ATTEMPT_REWARDS] = torch.zeros_like(row[ATTEMPT_REWARDS])
    advantage_trainer()._compute_advantage(batch, {})
    assert all(torch.count_nonzero(row["advantages"]) == 0 for row in fake_tq.rows.values())


def test_kl_in_reward_counts_towards_each_attempts_reward(fake_tq, advantage_trainer, batch: KVBatchMeta) -> None:
    trainer = advantage_trainer(use_kl_in_reward=True)
    trainer.kl_ctrl_in_reward = core_algos.FixedKLController(kl_coef=0.5)
    metrics: dict = {}
    trainer._compute_advantage(batch, metrics)
    assert metrics["actor/reward_kl_penalty_coeff"] == 0.5
    names = list(TRAJECTORIES)
    # KL = old - ref = 0.2 on every trained token, penalty 0.5 * 0.2 = 0.1 per trained token of the attempt.
    rewards, present = [], []
    for name in names:
        _, ids, mask, attempt_rewards, attempt_status = TRAJECTORIES[name]
        trained = [sum(m for s2, m in zip(ids, mask, strict=True) if s2 == s) for s in range(2)]
        rewards.append([r - 0.1 * n for r, n in zip(attempt_rewards, trained, strict=True)])
        present.append([code == 1 for code in attempt_status])  # the truncated attempt is absent (default)
        assert _written(fake_tq, name, "token_level_rewards")[0] == pytest.approx(-0.1 * mask[0])
    want = attempt_advantages(
        torch.tensor(rewards, dtype=torch.float64),
        torch.tensor(present, dtype=torch.bool),
        [TRAJECTORIES[n][0] for n in names],
    )
    for i, name in enumerate(names):
        _, ids, mask, _, _ = TRAJECTORIES[name]
        expected = [float(want[i, s]) * m for s, m in zip(ids, mask, strict=True)]
        assert _written(fake_tq, name, "advantages") == pytest.approx(expected, abs=1e-6), name


def test_options_of_the_config_subtree_are_used(fake_tq, advantage_trainer, batch: KVBatchMeta) -> None:
    trainer = advantage_trainer()
    trainer.advantage_config = AdvantageConfig(gamma=0.0)
    trainer._compute_advantage(batch, {})
    # gamma = 0: a1's first attempt (reward 0 like a2's) gets no credit from its right second attempt.
    assert _written(fake_tq, "a1", "advantages") == [0.0, 0.0, 0.0, 1.0, 1.0]


def test_missing_attempt_columns_fail_with_a_clear_message(fake_tq, advantage_trainer, batch: KVBatchMeta) -> None:
    for row in fake_tq.rows.values():
        del row[ATTEMPT_IDS]
    with pytest.raises(ValueError, match="agent loop"):
        advantage_trainer()._compute_advantage(batch, {})


def test_reports_sync_mode_whatever_name_selected_it() -> None:
    trainer = AttemptTrainer.__new__(AttemptTrainer)
    trainer.trainer_mode = "mr_search"  # what verl's __init__ assigns from trainer.v1.trainer_mode
    assert trainer.trainer_mode == "sync"
    assert trainer.selected_trainer_mode == "mr_search"


def test_advantage_config_is_read_from_the_mr_search_subtree() -> None:
    config = OmegaConf.create({"mr_search": {"advantage": {"gamma": 0.5, "baseline": "grpo"}}})
    assert advantage_config_of(config) == AdvantageConfig(gamma=0.5, baseline="grpo")
    assert advantage_config_of(OmegaConf.create({"algorithm": {}})) == AdvantageConfig()
    with pytest.raises(ValueError, match="valid keys"):
        advantage_config_of(OmegaConf.create({"mr_search": {"advantage": {"discount": 1.0}}}))


def test_one_attempt_each_gives_exactly_verls_own_leave_one_out_step(
    fake_tq, advantage_trainer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With one attempt per trajectory the attempt-level advantage is the trajectory's leave-one-out advantage, which
    # is verl's own rloo estimator: our advantage step (the columns, the alignment, the spread, verl's KL-in-reward and
    # write-back kept as verl has them) must write what verl's own step writes, field for field.
    def one_attempt(name: str) -> dict:
        row = _row(name)
        reward = float(TRAJECTORIES[name][3][0])
        row[ATTEMPT_IDS] = torch.zeros_like(row[ATTEMPT_IDS])
        row[ATTEMPT_REWARDS] = torch.tensor([reward], dtype=torch.float32)
        row[ATTEMPT_STATUS] = torch.tensor([1], dtype=torch.int64)
        row["rm_scores"] = torch.zeros_like(row["rm_scores"])
        row["rm_scores"][-1] = reward
        return row

    written = {}
    for estimator in ("mr_search", "rloo"):
        queue = type(fake_tq)()
        queue.put_rows({f"key-{name}": one_attempt(name) for name in TRAJECTORIES})
        keys = [f"key-{name}" for name in TRAJECTORIES]
        meta = KVBatchMeta(partition_id="train", keys=keys, tags=[{} for _ in keys])
        trainer = advantage_trainer(queue, adv_estimator=estimator, use_kl_in_reward=True, gamma=1.0, lam=1.0)
        trainer.config.actor_rollout_ref = {"rollout": {"n": 2}}
        monkeypatch.setattr(trainer_base, "tq", queue)  # verl's own step reads the module's TransferQueue client
        trainer.kl_ctrl_in_reward = core_algos.FixedKLController(kl_coef=0.5)
        trainer._compute_advantage(meta, {})
        fields = ("advantages", "returns")
        written[estimator] = {key: {f: row[f].tolist() for f in fields} for key, row in queue.rows.items()}
    for key, fields in written["rloo"].items():
        for field, values in fields.items():
            assert written["mr_search"][key][field] == pytest.approx(values, abs=1e-6), (key, field)
    assert any(any(v != 0 for v in row["advantages"]) for row in written["rloo"].values()), "a non-trivial batch"


def test_uids_arrive_as_an_object_array(
    fake_tq, advantage_trainer, batch: KVBatchMeta, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mr_search.trainer.attempt_trainer as attempt_trainer

    seen = {}
    original = attempt_trainer.per_attempt_advantages

    def spy(rewards, status, index, options, episode_ids):
        seen.update(rewards=rewards, index=index, options=options)
        return original(rewards, status, index, options, episode_ids)

    monkeypatch.setattr(attempt_trainer, "per_attempt_advantages", spy)
    advantage_trainer()._compute_advantage(batch, {})
    assert isinstance(seen["index"], np.ndarray)
    assert list(seen["index"]) == ["B", "A", "pad0123abc", "B", "A", "B"]
    assert seen["rewards"].shape == (6, 2)
    assert seen["options"] == AdvantageConfig()


def test_agent_loop_scalars_are_logged_per_training_step(fake_tq, advantage_trainer, batch: KVBatchMeta) -> None:
    per_trajectory = {
        "a1": {"em_at_1": 0.0, "em_at_2": 1.0, "reflection_gain": 1.0, "search_failures": 2},
        "a2": {"em_at_1": 0.0, "em_at_2": 0.0, "reflection_gain": 0.0, "search_failures": 0},
        "b1": {"em_at_1": 1.0, "em_at_2": 1.0, "reflection_gain": 0.0, "search_failures": 0},
        "b2": {"em_at_1": 0.0, "em_at_2": 0.0, "reflection_gain": 0.0, "search_failures": 0},
        "b3": {"em_at_1": 1.0, "em_at_2": 0.0, "reflection_gain": -1.0, "search_failures": 0},
    }
    for name, scalars in per_trajectory.items():
        fake_tq.rows[f"key-{name}"]["extra_fields"] = {"reward_extra_info": scalars, "min_global_steps": 0}
    # verl's padding row copies the first sample's fields: it must not count twice.
    fake_tq.rows["key-pad"]["extra_fields"] = {"reward_extra_info": per_trajectory["b1"]}
    metrics: dict = {}
    advantage_trainer()._compute_advantage(batch, metrics)
    assert metrics["mr_search/em_at_1"] == pytest.approx(2 / 5)
    assert metrics["mr_search/em_at_2"] == pytest.approx(2 / 5)
    assert metrics["mr_search/reflection_gain"] == pytest.approx(0.0)
    assert metrics["mr_search/search_failures"] == pytest.approx(2 / 5)


def test_a_meta_episode_split_into_rows_gets_the_same_advantages_and_counts_once(fake_tq, advantage_trainer) -> None:
    """The short-context layout (one row per context the sampler saw) against the one-row layout above."""
    rows, keys = {}, []
    in_group = {"a1": 0, "a2": 1, "b1": 0, "b2": 1, "b3": 2}  # episode ids are unique within their uid group only
    for name in TRAJECTORIES:
        row = _row(name)
        row[EPISODE_ID] = torch.tensor([in_group[name]])
        length = len(row[ATTEMPT_IDS])
        cuts = [0, length // 2, length] if length >= 4 else [0, length]  # a1, a2, b1 split in two
        for part, (lo, hi) in enumerate(itertools.pairwise(cuts)):
            piece = {key: value[lo:hi] if key in _PER_TOKEN else value for key, value in row.items()}
            rows[f"key-{name}-{part}"] = piece
            keys.append(f"key-{name}-{part}")
    rows["key-pad"] = _padding_row(rows[keys[0]])
    keys.insert(3, "key-pad")
    fake_tq.put_rows(rows)
    metrics: dict = {}
    advantage_trainer()._compute_advantage(KVBatchMeta(partition_id="train", keys=keys, tags=[{}] * len(keys)), metrics)
    for name, (_, ids, mask, _, _) in TRAJECTORIES.items():
        written = [
            a for key in keys if key.startswith(f"key-{name}-") for a in fake_tq.rows[key]["advantages"].tolist()
        ]
        assert written == pytest.approx([EXPECTED[name][s] * m for s, m in zip(ids, mask, strict=True)]), name
    # Per-attempt statistics count meta-episodes, not rows: the same figures as the one-row layout.
    assert metrics["mr_search/attempt_2/present_frac"] == pytest.approx(4 / 5)
    assert metrics["mr_search/attempt_2/reward_mean"] == pytest.approx(0.5)
    assert metrics["mr_search/attempt_1/adv_max"] == pytest.approx(1.5)
    assert metrics["mr_search/attempt_1/trained_tokens"] == 8.0


def _step_metrics(trainer: AttemptTrainer, batch: KVBatchMeta, kl: bool) -> dict:
    if kl:
        trainer.kl_ctrl_in_reward = core_algos.FixedKLController(kl_coef=0.5)
    metrics: dict = {}
    trainer._compute_advantage(batch, metrics)
    return metrics


@pytest.mark.parametrize("kl", [False, True], ids=["plain", "kl"])
def test_attempt_advantages_are_computed_once_a_step(
    fake_tq, advantage_trainer, batch: KVBatchMeta, monkeypatch, kl: bool
) -> None:
    """One computation feeds both the tokens' advantages and the per-attempt metrics."""
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return formula(*args, **kwargs)

    # Every loaded mr_search module that holds the formula gets the counting wrapper, wherever a second call hides.
    for name, module in list(sys.modules.items()):
        if name.startswith("mr_search") and getattr(module, "attempt_advantages", None) is formula:
            monkeypatch.setattr(module, "attempt_advantages", counted)
    metrics = _step_metrics(advantage_trainer(use_kl_in_reward=kl), batch, kl)
    assert len(calls) == 1, f"the attempt advantages were computed {len(calls)} times in one step"
    assert metrics["mr_search/attempt_1/adv_max"] > 0


@pytest.mark.parametrize("kl", [False, True], ids=["plain", "kl"])
def test_step_metrics_are_the_recorded_ones(fake_tq, advantage_trainer, batch: KVBatchMeta, kl: bool) -> None:
    metrics = _step_metrics(advantage_trainer(use_kl_in_reward=kl), batch, kl)
    recorded = RECORDED_METRICS["kl" if kl else "plain"]
    assert sorted(metrics) == sorted(recorded)
    for key, value in recorded.items():
        assert metrics[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key

"""Start-up checks of the training options; a step with too many failed searches stops the run."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from omegaconf import OmegaConf

from mr_search.agent.retrieval_client import RetrieverConfig
from mr_search.config_checks import subtree
from mr_search.contract import SEARCH_RECORD, SEGMENT
from mr_search.ops.startup import check_training_options, largest_divisor_up_to, replay_poll_seconds
from mr_search.trainer.metrics import episode_statistics
from mr_search.trainer.search_health import SearchFailures, check_search_failures, search_failures


def test_one_subtree_helper_reads_the_mr_search_options_for_trainer_and_agent_loop() -> None:
    import mr_search.agent.loop as loop
    import mr_search.ops.startup as startup
    import mr_search.trainer.attempt_trainer as attempt_trainer

    assert loop.subtree is subtree and startup.subtree is subtree and attempt_trainer.subtree is subtree
    node = OmegaConf.create({"mr_search": {"episode": {"attempts": 2}, "reward": None}})
    OmegaConf.set_struct(node, True)
    assert subtree(node, "episode") == {"attempts": 2}
    assert subtree(node, "reward") is None
    assert subtree(node, "retriever") is None  # absent, even in struct mode
    assert subtree(OmegaConf.create({}), "episode") is None
    assert subtree({"mr_search": {"episode": {"attempts": 2}}}, "episode") == {"attempts": 2}
    assert subtree({"mr_search": None}, "episode") is None
    assert subtree(None, "episode") is None


@pytest.mark.parametrize("episode", [{"context": "previous_attempt"}, {"max_context_tokens": 4096}])
def test_short_context_options_are_accepted_for_training(episode: dict) -> None:
    # They train on-policy (one row per context the engine saw: tests/mr_search/agent/test_context_segments.py).
    check_training_options(OmegaConf.create({"mr_search": {"episode": episode}}))
    with pytest.raises(ValueError, match=r"\['full', 'previous_attempt'\]"):
        check_training_options(OmegaConf.create({"mr_search": {"episode": {"context": "last"}}}))


def test_the_paper_settings_pass_and_bad_values_fail_at_start_up() -> None:
    check_training_options(OmegaConf.create({"mr_search": {"episode": {"attempts": 3}}}))
    check_training_options(OmegaConf.create({}))
    with pytest.raises(ValueError, match=r"mr_search.episode.early_stop_when_correct='false'"):
        check_training_options(OmegaConf.create({"mr_search": {"episode": {"early_stop_when_correct": "false"}}}))
    with pytest.raises(ValueError, match=r"mr_search.reward.metric"):
        check_training_options({"mr_search": {"reward": {"metric": "acc"}}})


def _fields(run: int, failed: int, error: str | None) -> dict:
    return {SEARCH_RECORD: {"run": run, "failed": failed, "last_error": error}}


def test_a_step_over_the_failure_limit_stops_naming_the_url_and_the_last_error() -> None:
    config = RetrieverConfig(url="http://search-host:8000/retrieve", max_failure_rate=0.2)
    rows = [_fields(4, 0, None), _fields(3, 3, "ClientConnectorError: refused"), _fields(3, 0, None)]
    failures = search_failures(rows, ["u1", "u2", "u3"])
    assert (failures.run, failures.failed) == (10, 3)
    with pytest.raises(RuntimeError, match=r"3 of 10 searches.*http://search-host:8000/retrieve.*refused"):
        check_search_failures(failures, config)


def test_a_step_at_or_under_the_limit_goes_on_and_padding_rows_do_not_count() -> None:
    config = RetrieverConfig(max_failure_rate=0.2)
    rows = [_fields(8, 1, "HTTP 500"), _fields(2, 1, "HTTP 500"), _fields(5, 5, "copied")]
    failures = search_failures(rows, ["u1", "u2", "pad01"])  # verl's padding row copies a real row's fields
    assert (failures.run, failures.failed) == (10, 2)
    check_search_failures(failures, config)  # 20% is not over 20%
    check_search_failures(search_failures([_fields(1, 1, "x")], ["u"]), RetrieverConfig(max_failure_rate=1.0))


def test_a_step_with_a_hung_generation_stops_the_run_naming_the_hang() -> None:
    from mr_search.contract import GENERATION_TIMEOUTS
    from mr_search.trainer.search_health import check_generation_timeouts

    fields = [{GENERATION_TIMEOUTS: 0}, {GENERATION_TIMEOUTS: 1}, {}, {GENERATION_TIMEOUTS: 1}]
    with pytest.raises(RuntimeError, match=r"generation hung: 1 model turn\(s\).* for 600 s .*resume"):
        check_generation_timeouts(fields, ["a", "b", "c", "pad_1"], 600.0)
    check_generation_timeouts(fields[:1] + fields[2:3], ["a", "c"], 600.0)  # none hung: the step goes on


def test_a_meta_episode_trained_as_several_rows_is_read_once() -> None:
    # verl copies the last row's reward_extra_info to the other rows of the meta-episode; the records count once.
    info = {"reward_extra_info": {"em_at_1": 1.0}}
    rows = [
        {**info, **_fields(0, 0, None), SEGMENT: {"index": 0, "count": 2}},
        {**info, **_fields(4, 1, "timeout"), SEGMENT: {"index": 1, "count": 2}},
        {"reward_extra_info": {"em_at_1": 0.0}, **_fields(1, 0, None)},  # a one-row meta-episode
    ]
    uids = ["u1", "u1", "u2"]
    assert episode_statistics(rows, uids) == {"mr_search/em_at_1": 0.5}
    assert search_failures(rows, uids) == SearchFailures(run=5, failed=1, last_error="timeout")


def _sizes(
    gpus: int, mini: int = 4, batch: int = 4, n: int = 4, micro: int = 16, log_micro: int | None = 16, **actor: Any
) -> Any:
    return OmegaConf.create(
        {
            "trainer": {"n_gpus_per_node": gpus, "nnodes": 1},
            "data": {"train_batch_size": batch},
            "actor_rollout_ref": {
                "actor": {"ppo_mini_batch_size": mini, "ppo_micro_batch_size_per_gpu": micro, **actor},
                "rollout": {"n": n, "log_prob_micro_batch_size_per_gpu": log_micro},
                "ref": {"log_prob_micro_batch_size_per_gpu": None},
            },
        }
    )


def test_micro_batches_larger_than_a_gpus_share_are_set_to_the_share() -> None:
    # The embedded preset (4 questions x 4 rows a mini-batch and a step, micro-batches of 16) on 2 GPUs: each GPU
    # gets 8 rows; verl asserted "data size must be divisible by force_group_size * micro_batch_size_per_gpu" at the
    # first update.
    config = _sizes(gpus=2)
    check_training_options(config)
    assert config.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu == 8
    assert config.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu == 8
    assert config.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu is None
    one_gpu = _sizes(gpus=1)
    check_training_options(one_gpu)
    assert one_gpu.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu == 16  # already divides: untouched
    # make gpu-check's 8 questions a step: the log-prob passes get 16 rows a GPU, the update 8.
    gpu_check = _sizes(gpus=2, batch=8)
    check_training_options(gpu_check)
    assert gpu_check.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu == 8
    assert gpu_check.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu == 16


def test_the_paper_recipe_fits_as_it_is_on_8_gpus() -> None:
    # 32 questions x 5 a mini-batch -> 20 rows a GPU (micro 4); 64 x 5 a step -> 40 rows a GPU (log-prob micro 8).
    paper = _sizes(gpus=8, mini=32, batch=64, n=5, micro=4, log_micro=8)
    check_training_options(paper)
    assert paper.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu == 4
    assert paper.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu == 8


def test_micro_batches_that_do_not_divide_the_share_are_set_to_its_largest_divisor_below_them(caplog) -> None:
    # The paper preset (log-prob micro-batch 8) on 2 GPUs with 8 questions x 5: 20 rows a GPU (the first 2-GPU
    # launch of the paper preset stopped here before the fit); the update's mini-batch 8 x 5 / 2 = 20 rows
    # too, micro 4 divides it.
    paper = _sizes(gpus=2, mini=8, batch=8, n=5, micro=4, log_micro=8)
    with caplog.at_level(logging.WARNING, logger="mr_search.ops.startup"):
        check_training_options(paper)
    assert paper.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu == 5
    assert paper.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu == 4  # divides: untouched
    assert "log_prob_micro_batch_size_per_gpu=8 does not divide the 20 rows each GPU gets" in caplog.text
    assert "using 5" in caplog.text
    odd = _sizes(gpus=2, micro=3)  # 8 rows a GPU: 3 -> 2
    check_training_options(odd)
    assert odd.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu == 2
    assert [largest_divisor_up_to(n, b) for n, b in [(20, 8), (8, 3), (7, 4), (12, 12), (6, 100)]] == [5, 2, 1, 12, 6]


def test_bad_sizes_stop_the_start_up() -> None:
    with pytest.raises(ValueError, match=r"do not split over 3 data-parallel GPUs"):
        check_training_options(_sizes(gpus=3))
    with pytest.raises(ValueError, match=r"ppo_micro_batch_size_per_gpu=0 must be a whole number of rows >= 1"):
        check_training_options(_sizes(gpus=2, micro=0))
    check_training_options(_sizes(gpus=3, micro=3, use_dynamic_bsz=True))  # token-based micro-batches: no rule
    check_training_options(_sizes(gpus=4, ulysses_sequence_parallel_size=2))  # 2 data-parallel groups: share 8


def test_the_replay_buffer_polls_at_the_configured_interval() -> None:
    """verl's V1 replay buffer checks for a finished batch every 2 s; the project's configs poll every 0.05 s."""
    from pathlib import Path

    from hydra import compose, initialize_config_dir
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    from mr_search.ops.trainer import MRSearchTrainer

    configs = Path(__file__).resolve().parents[3] / "configs"
    with initialize_config_dir(config_dir=str(configs), version_base=None):
        config = compose(config_name="mr_search_embedded", overrides=["actor_rollout_ref.model.path=/tmp/tiny"])
    assert config.mr_search.trainer.replay_poll_s == 0.05
    trainer = MRSearchTrainer.__new__(MRSearchTrainer)  # building the buffer needs only the config
    trainer.config = config
    buffer = trainer._build_replay_buffer()
    assert type(buffer) is ReplayBuffer and buffer.poll_interval == 0.05
    config.mr_search.trainer.replay_poll_s = 1.5
    assert trainer._build_replay_buffer().poll_interval == 1.5
    # absent: verl's own interval; a bad value stops the start-up naming the key
    assert replay_poll_seconds(OmegaConf.create({"mr_search": {"episode": {}}})) == 2.0
    for bad in (0, -1, "fast", True):
        with pytest.raises(ValueError, match=r"mr_search.trainer.replay_poll_s"):
            check_training_options(OmegaConf.create({"mr_search": {"trainer": {"replay_poll_s": bad}}}))
    with pytest.raises(ValueError, match=r"unknown keys \['replay_poll'\]"):
        check_training_options(OmegaConf.create({"mr_search": {"trainer": {"replay_poll": 0.1}}}))

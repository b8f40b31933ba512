"""The project's Hydra configs compose over verl's, pass verl's own validation, and hold the paper's values."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

# docs/method.md#options (training recipe) and §1-§4 (episode, reward, advantage): config path -> the paper's value.
PAPER_VALUES: dict[str, object] = {
    "data.train_batch_size": 64,
    "actor_rollout_ref.rollout.n": 5,
    "actor_rollout_ref.actor.ppo_mini_batch_size": 32,
    "actor_rollout_ref.actor.ppo_epochs": 1,
    "actor_rollout_ref.actor.optim.lr": 1e-6,
    "actor_rollout_ref.actor.clip_ratio": 0.2,
    "actor_rollout_ref.actor.clip_ratio_low": 0.2,
    "actor_rollout_ref.actor.clip_ratio_high": 0.2,
    "actor_rollout_ref.actor.loss_agg_mode": "token-mean",
    "actor_rollout_ref.actor.use_kl_loss": False,
    "actor_rollout_ref.actor.kl_loss_coef": 0.0,
    "actor_rollout_ref.actor.entropy_coeff": 0,
    "actor_rollout_ref.actor.fsdp_config.param_offload": True,
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload": True,
    "actor_rollout_ref.rollout.name": "sglang",
    "actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
    "actor_rollout_ref.rollout.temperature": 1.0,
    "actor_rollout_ref.rollout.top_p": 0.95,
    "actor_rollout_ref.rollout.skip_tokenizer_init": False,
    "actor_rollout_ref.rollout.val_kwargs.do_sample": False,
    "actor_rollout_ref.rollout.val_kwargs.n": 1,
    "actor_rollout_ref.rollout.agent.default_agent_loop": "mr_search",
    "algorithm.adv_estimator": "mr_search",
    "algorithm.gamma": 1.0,
    "algorithm.use_kl_in_reward": False,
    "trainer.n_gpus_per_node": 8,
    "trainer.nnodes": 1,
    "trainer.total_training_steps": 300,
    "trainer.v1.trainer_mode": "mr_search",
    "mr_search.episode.attempts": 3,
    "mr_search.episode.max_turns_per_attempt": 3,
    "mr_search.episode.topk": 3,
    "mr_search.episode.max_new_tokens_per_turn": 1024,
    "mr_search.episode.max_information_tokens": 1024,
    "mr_search.reward.metric": "em",
    "mr_search.reward.format_score": 0.0,
    "mr_search.advantage.gamma": 1.0,
}


def _validate(config) -> None:
    """Runs the checks verl's main_ppo runs before it starts Ray, plus the typed configs it builds later."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    with pytest.warns(UserWarning, match="Disabled critic"):
        use_critic = need_critic(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=use_critic)
    omega_conf_to_dataclass(config.actor_rollout_ref.rollout)
    omega_conf_to_dataclass(config.algorithm)


@pytest.mark.parametrize(("key", "expected"), sorted(PAPER_VALUES.items()))
def test_paper_config_holds_the_paper_value(paper_config, key, expected):
    assert OmegaConf.select(paper_config, key, throw_on_missing=True) == expected, (
        f"{key} differs from the paper's recipe (docs/method.md#options)"
    )


def test_paper_config_passes_verl_validation(compose_config):
    config = compose_config("mr_search_paper")
    assert not need_reference_model(config), "KL coefficient 0 must not load a reference model"
    _validate(config)


def test_vllm_reports_the_raw_log_probs_the_trainer_computes(compose_config):
    """vLLM's log-probs are of the raw model output (not renormalised after top-p, verl's default), which is the
    trainer's distribution at temperature 1; they reach vLLM through verl's rollout config."""
    import importlib.util

    for name in ("mr_search_paper", "mr_search_embedded"):
        config = compose_config(name, ["actor_rollout_ref.model.path=/tmp/m"])
        rollout = config.actor_rollout_ref.rollout
        assert rollout.logprobs_mode == "raw_logprobs" and rollout.temperature == 1.0
    # verl's vLLM server hands the rollout config's value to the engine's arguments.
    # (read as text: importing it needs vllm)
    spec = importlib.util.find_spec("verl.workers.rollout.vllm_rollout")
    server = Path(spec.submodule_search_locations[0]) / "vllm_async_server.py"
    assert '"logprobs_mode": self.config.logprobs_mode' in server.read_text()


def need_reference_model(config) -> bool:
    from verl.trainer.ppo.utils import need_reference_policy

    return bool(need_reference_policy(config))


def test_embedded_config_composes_and_validates(compose_config):
    # The CPU backend's config group, as train_grpo_step.sh selects it (ROLLOUT_ENGINE=cpu).
    config = compose_config("mr_search_embedded", ["actor_rollout_ref.model.path=/tmp/tiny", "+engine=cpu"])
    _validate(config)
    assert config.trainer.n_gpus_per_node == 1
    assert config.data.train_batch_size * config.actor_rollout_ref.rollout.n <= 32, "embedded run must stay tiny"
    # Only sizes change: the algorithm is the paper's.
    assert config.algorithm.adv_estimator == "mr_search"
    assert config.mr_search.episode.attempts == 3
    assert config.actor_rollout_ref.rollout.top_p == 0.95


@pytest.mark.parametrize("name", ["mr_search_paper", "mr_search_embedded"])
def test_project_subtrees_pass_their_owners_typed_configs(compose_config, name):
    """Each ``mr_search.*`` subtree is accepted by the dataclass its owner builds from it (no unknown keys)."""
    from mr_search.advantage.config import AdvantageConfig
    from mr_search.agent.config import EpisodeConfig
    from mr_search.agent.retrieval_client import RetrieverConfig
    from mr_search.ops.startup import replay_poll_seconds
    from mr_search.reward.config import RewardConfig

    config = compose_config(name, ["actor_rollout_ref.model.path=/tmp/tiny"])
    subtrees = config.mr_search
    assert set(subtrees) == {"episode", "retriever", "reward", "advantage", "trainer"}
    assert replay_poll_seconds(config) == 0.05
    episode = EpisodeConfig.from_config(subtrees.episode)
    assert episode.attempts == 3
    assert RetrieverConfig.from_config(subtrees.retriever).url.endswith("/retrieve")
    assert RewardConfig.from_config(subtrees.reward).metric == "em"
    assert AdvantageConfig.from_config(subtrees.advantage).gamma == 1.0


KEY_LINE = re.compile(r"^\s*['\"]?[A-Za-z_][\w.@/-]*['\"]?\s*:")


ENTRY = ["mr_search_paper.yaml", "mr_search_embedded.yaml", "recipe/paper.yaml"]
ENGINE_GROUP = [f"engine/{engine}.yaml" for engine in ("sglang", "vllm", "hf", "cpu")]


@pytest.mark.parametrize("name", [*ENTRY, *ENGINE_GROUP])
def test_every_key_is_commented(config_dir: Path, name: str):
    """House style: a comment line right above every key, so each delta over verl says why."""
    lines = (config_dir / name).read_text().splitlines()
    previous = ""
    uncommented = []
    for number, line in enumerate(lines, start=1):
        if KEY_LINE.match(line) and not previous.lstrip().startswith("#") and line.strip() != "defaults:":
            uncommented.append(f"{name}:{number}: {line.strip()}")
        if line.strip():
            previous = line
    assert not uncommented, "keys without a comment above them:\n" + "\n".join(uncommented)


@pytest.mark.parametrize("engine", ["sglang", "vllm", "hf", "cpu"])
@pytest.mark.parametrize("name", ["mr_search_paper", "mr_search_embedded"])
def test_each_engine_group_composes_over_both_presets_and_validates(compose_config, name, engine):
    """``+engine=<engine>`` (train_grpo_step.sh's ROLLOUT_ENGINE) selects the engine's rollout over either preset;
    the preset's own sizes stay."""
    config = compose_config(name, ["actor_rollout_ref.model.path=/tmp/tiny", f"+engine={engine}"])
    _validate(config)
    rollout = config.actor_rollout_ref.rollout
    assert rollout.name == {"hf": "mr_hf", "cpu": "mr_hf"}.get(engine, engine)
    assert config.trainer.device == ("cpu" if engine == "cpu" else "cuda")
    preset = compose_config(name, ["actor_rollout_ref.model.path=/tmp/tiny"])
    assert config.data.train_batch_size == preset.data.train_batch_size

"""The resume inside one launch, through verl's own ``_load_checkpoint`` on a trainer whose worker group is a fake
that keeps its state in files as verl's FSDP checkpoints do; the checks read the record it writes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from torchdata.stateful_dataloader import StatefulDataLoader

from mr_search.ops.resume_check import (
    RECORD_NAME,
    actor_digests,
    continued_metrics_path,
    read_record,
    resume_and_continue,
    state_digest,
)
from mr_search.ops.run_checks import check_resume, check_resumed_state
from mr_search.ops.startup import check_training_options, resume_steps
from mr_search.ops.trainer import MRSearchTrainer


class FakeActor:
    """A worker group holding one weight tensor and one optimizer moment, saved and loaded as verl's shard files."""

    def __init__(self, loads: bool = True) -> None:
        self.weight = torch.zeros(4)
        self.moment = torch.zeros(4)
        self.loads = loads

    def train_step(self) -> None:
        self.weight += 1.0
        self.moment += 0.5

    def save_checkpoint(self, local_path, hdfs_path=None, global_step=0, max_ckpt_to_keep=None) -> None:
        Path(local_path).mkdir(parents=True, exist_ok=True)
        torch.save({"w": self.weight.clone()}, Path(local_path) / "model_world_size_1_rank_0.pt")
        torch.save({"state": {0: {"m": self.moment.clone()}}}, Path(local_path) / "optim_world_size_1_rank_0.pt")

    def load_checkpoint(self, local_path, hdfs_path=None, del_local_after_load=False) -> None:
        if self.loads:
            self.weight = torch.load(Path(local_path) / "model_world_size_1_rank_0.pt")["w"]
            self.moment = torch.load(Path(local_path) / "optim_world_size_1_rank_0.pt")["state"][0]["m"]


class FakeEngines:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def sleep_replicas(self) -> None:
        self.calls.append("sleep")

    def update_weights(self, step: int) -> None:
        self.calls.append(f"update@{step}")


def _trainer(tmp_path: Path, actor: FakeActor, steps: int = 2) -> MRSearchTrainer:
    """A trainer that has run verl's loop for ``steps`` steps of 4 questions, saving after each, as ``fit`` does."""
    trainer = MRSearchTrainer.__new__(MRSearchTrainer)  # no workers: the resume needs only what is set here
    trainer.config = OmegaConf.create(
        {
            "trainer": {
                "default_local_dir": str(tmp_path / "checkpoints"),
                "resume_mode": "auto",
                "resume_from_path": None,
                "del_local_ckpt_after_load": False,
                "save_freq": 1,
                "total_training_steps": steps,
                "max_actor_ckpt_to_keep": 2,
            },
            "mr_search": {"trainer": {"resume_steps": 1}},
        }
    )
    trainer.actor_rollout_wg, trainer.checkpoint_manager, trainer.use_critic = actor, FakeEngines(), False
    trainer.train_dataloader = StatefulDataLoader(list(range(40)), batch_size=4, shuffle=False)
    trainer.train_dataloader_it = iter(trainer.train_dataloader)
    for step in range(1, steps + 1):
        next(trainer.train_dataloader_it)
        actor.train_step()
        folder = tmp_path / "checkpoints" / f"global_step_{step}"
        actor.save_checkpoint(str(folder / "actor"))
        torch.save(trainer.train_dataloader.state_dict(), folder / "data.pt")
        (tmp_path / "checkpoints" / "latest_checkpointed_iteration.txt").write_text(str(step))
    trainer.global_steps = steps + 1  # verl's fit leaves the counter one past the last step
    trainer._init_dump_executor = lambda: None
    return trainer


def test_digests_follow_the_values_not_the_order_or_the_container() -> None:
    a = {"w": torch.arange(4, dtype=torch.bfloat16), "step": torch.tensor(3), "lr": 1e-4}
    assert state_digest(a) == state_digest(dict(reversed(list(a.items()))))
    assert state_digest(a) != state_digest({**a, "w": a["w"] + 1})
    assert state_digest(a) != state_digest({**a, "w": a["w"].float()}), "another dtype is another state"
    assert continued_metrics_path("/r/metrics/20261128-1.jsonl") == "/r/metrics/20261128-1.resumed.jsonl"
    assert sorted(["b.jsonl", "b.resumed.jsonl"]) == ["b.jsonl", "b.resumed.jsonl"], "read in order"
    assert continued_metrics_path(None) is None


def test_the_resume_loads_the_saved_state_and_the_check_passes(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "metrics" / "launch.jsonl"))
    actor = FakeActor()
    trainer = _trainer(tmp_path, actor)
    fitted = []

    def fit() -> None:  # verl's loop: the next step from where the resume left the counter and the dataloader
        batch = next(iter(trainer.train_dataloader)).tolist()
        fitted.append((trainer.global_steps, trainer.total_training_steps, batch))

    record = resume_and_continue(trainer, fit, 1)
    assert fitted == [(2, 3, [8, 9, 10, 11])], "the third batch after the resume: the dataloader is where step 2 was"
    assert (record.steps_after_rewind, record.steps_after_resume, record.continued_steps) == (1, 2, 1)
    assert record.rewound_state == record.checkpoint_state["N-1"] != record.checkpoint_state["N"]
    on_disk = actor_digests(tmp_path / "checkpoints" / "global_step_2" / "actor")
    assert record.resumed_state == record.checkpoint_state["N"] == on_disk
    assert (record.samples_after_rewind, record.samples_after_resume) == (4, 8)
    assert trainer.checkpoint_manager.calls == ["sleep", "update@2"], "the engine gets the resumed weights"
    assert trainer.config.trainer.resume_mode == "auto" and trainer.config.trainer.resume_from_path is None
    assert not (tmp_path / "checkpoints" / "resume_check_scratch").exists()
    assert os.environ["VERL_FILE_LOGGER_PATH"].endswith("launch.resumed.jsonl")
    assert read_record(tmp_path / "checkpoints") == record

    # The run folder as the checks read it: two metrics files (before and after the resume), the rollouts.
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "launch.jsonl").write_text('{"step": 1, "data": {}}\n{"step": 2, "data": {}}\n')
    (tmp_path / "metrics" / "launch.resumed.jsonl").write_text('{"step": 3, "data": {}}\n')
    (tmp_path / "rollouts").mkdir()
    for step, questions in {1: "ab", 2: "cd", 3: "ef"}.items():
        lines = [json.dumps({"input": q}) for q in questions for _ in range(4)]
        (tmp_path / "rollouts" / f"{step}.jsonl").write_text("\n".join(lines) + "\n")
    assert check_resume(tmp_path).passed
    state = check_resumed_state(tmp_path)
    assert state.passed, state.seen
    assert "2 questions, none of the earlier steps' 4" in state.seen

    # A dataloader that started over repeats step 1's questions.
    (tmp_path / "rollouts" / "3.jsonl").write_text(json.dumps({"input": "a"}) + "\n")
    assert "repeats 1 of the earlier steps' 4 questions" in check_resumed_state(tmp_path).seen


def test_a_run_not_set_to_auto_resumes_from_the_last_step_folder(tmp_path: Path) -> None:
    # verl's resume_path mode takes a global_step_N folder, not the checkpoint root.
    actor = FakeActor()
    trainer = _trainer(tmp_path, actor)
    trainer.config.trainer.resume_mode = "resume_path"
    trainer.config.trainer.resume_from_path = str(tmp_path / "checkpoints" / "global_step_2")
    record = resume_and_continue(trainer, lambda: None, 1)
    assert (record.steps_after_rewind, record.steps_after_resume) == (1, 2)
    assert record.resumed_state == record.checkpoint_state["N"] != record.rewound_state


def test_a_load_that_does_nothing_fails_the_check(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, FakeActor(loads=False))
    resume_and_continue(trainer, lambda: None, 1)
    (tmp_path / "metrics").mkdir()
    check = check_resumed_state(tmp_path)
    assert not check.passed
    assert "the actor after the rewind is not checkpoint 1" in check.seen


def test_the_record_is_needed_only_with_a_resume(tmp_path: Path) -> None:
    assert check_resumed_state(tmp_path) is None
    (tmp_path / "checkpoints").mkdir()
    assert read_record(tmp_path / "checkpoints") is None
    assert RECORD_NAME == "resume_check.json"


def test_the_resume_needs_the_two_last_checkpoints(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, FakeActor(), steps=1)
    with pytest.raises(RuntimeError, match=r"needs the last two checkpoints .* trainer.save_freq=1"):
        resume_and_continue(trainer, lambda: None, 1)


def test_resume_steps_is_checked_at_start_up() -> None:
    def config(**trainer) -> OmegaConf:
        base = {"save_freq": 1, "total_training_steps": 2, "max_actor_ckpt_to_keep": 2}
        return OmegaConf.create({"trainer": {**base, **trainer}, "mr_search": {"trainer": {"resume_steps": 1}}})

    assert resume_steps(config()) == 1
    assert resume_steps(OmegaConf.create({"mr_search": {"episode": {}}})) == 0, "absent: off"
    check_training_options(config(max_actor_ckpt_to_keep=None))
    for bad in ({"save_freq": 2}, {"total_training_steps": 1}, {"max_actor_ckpt_to_keep": 1}):
        with pytest.raises(ValueError, match=r"resume_steps=1 rewinds .* needs trainer.save_freq=1"):
            check_training_options(config(**bad))
    for bad in (-1, True, "1", 0.5):
        with pytest.raises(ValueError, match=r"mr_search.trainer.resume_steps=.* whole number"):
            check_training_options(OmegaConf.create({"mr_search": {"trainer": {"resume_steps": bad}}}))

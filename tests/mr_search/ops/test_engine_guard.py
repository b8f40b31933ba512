"""Bounded engine calls: a call that raises, finds a dead engine server, or runs past its time ends with the cause and
the checkpoint to resume from; a call that finishes returns its result. The trainer runs verl's weight syncs and
memory releases through it."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf
from ray.exceptions import ActorDiedError
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from mr_search.ops import engine_guard
from mr_search.ops.engine_guard import EngineCallFailed, LastCheckpoint, run_bounded
from mr_search.ops.startup import check_training_options, weight_sync_timeout_seconds
from mr_search.ops.trainer import MRSearchTrainer


def _bounded(call, *, timeout_s: float = 5.0, probe=lambda: [], poll_s: float = 0.02) -> Any:
    return run_bounded(
        call,
        what="the weight sync after step 2",
        timeout_s=timeout_s,
        probe=probe,
        resume_line=lambda: "RESUME.",
        poll_s=poll_s,
    )


def test_a_call_that_finishes_returns_its_result_and_runs_outside_the_caller_thread() -> None:
    assert _bounded(lambda: threading.current_thread().name) == "engine call: the weight sync after step 2"


def test_a_call_that_raises_ends_with_its_error_named_and_chained() -> None:
    def sync() -> None:
        raise ConnectionError("engine at 127.0.0.1:3000 refused\nsecond line")

    with pytest.raises(EngineCallFailed) as failed:
        _bounded(sync)
    assert str(failed.value) == (
        "rollout engine lost in the weight sync after step 2: it raised ConnectionError: engine at 127.0.0.1:3000 "
        "refused. RESUME."
    )
    assert isinstance(failed.value.__cause__, ConnectionError)


def test_a_failed_call_names_the_root_cause_and_the_dead_servers_found_after_it() -> None:
    """A worker's Ray error wraps the real one (``RayTaskError(ActorDiedError)``, coloured): the message unwraps it."""

    class TaskError(RuntimeError):
        def __init__(self, cause: BaseException) -> None:
            super().__init__("\x1b[36mray::WorkerDict.actor_rollout_update_weights()\x1b[39m (pid=1)")
            self.cause = cause

    def sync() -> None:
        raise TaskError(ActorDiedError())

    with pytest.raises(EngineCallFailed) as failed:
        _bounded(sync, probe=lambda: ["the engine server of replica 0 is dead (gone)"])
    message = str(failed.value)
    assert message.startswith("rollout engine lost in the weight sync after step 2: it raised ActorDiedError: ")
    assert message.endswith("; the engine server of replica 0 is dead (gone). RESUME.")
    assert "\x1b" not in message and "WorkerDict" not in message


def test_a_dead_server_ends_a_hung_call_at_the_next_look_not_at_the_time_limit() -> None:
    hung = threading.Event()
    looks = []

    def probe() -> list[str]:
        looks.append(time.monotonic())
        return ["the engine server of replica 0 is dead (killed)"] if len(looks) == 3 else []

    started = time.monotonic()
    with pytest.raises(
        EngineCallFailed,
        match=r"lost in the weight sync after step 2: the engine server of replica 0 "
        r"is dead \(killed\)\. RESUME\.$",
    ):
        _bounded(hung.wait, timeout_s=60, probe=probe)
    assert len(looks) == 3 and time.monotonic() - started < 5


def test_a_hung_call_with_live_servers_ends_at_the_time_limit_naming_the_knob() -> None:
    hung = threading.Event()
    started = time.monotonic()
    with pytest.raises(EngineCallFailed) as failed:
        _bounded(hung.wait, timeout_s=0.3)
    elapsed = time.monotonic() - started
    assert 0.3 <= elapsed < 3
    message = str(failed.value)
    assert "did not finish within 0.3 s (mr_search.trainer.weight_sync_timeout_s)" in message
    assert "Ray reported no engine server dead" in message and message.endswith("RESUME.")


def test_a_look_that_fails_does_not_end_a_healthy_call() -> None:
    def probe() -> list[str]:
        raise ConnectionError("Ray is gone")

    assert _bounded(lambda: time.sleep(0.1) or "done", probe=probe) == "done"


def test_a_call_slower_than_the_look_interval_is_waited_for() -> None:
    assert _bounded(lambda: time.sleep(0.2) or "done", timeout_s=5, poll_s=0.02) == "done"


def test_the_resume_line_names_the_last_checkpoint_or_says_there_is_none(tmp_path: Path) -> None:
    assert LastCheckpoint.of(tmp_path).resume_line() == (
        f"No checkpoint is saved in {tmp_path} yet (trainer.save_freq): the same command starts over."
    )
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("2\n")
    assert LastCheckpoint.of(tmp_path).resume_line() == (
        f"The last checkpoint is step 2 ({tmp_path / 'global_step_2'}): the same command resumes from it "
        "(trainer.resume_mode=auto)."
    )


class _Ref:
    def __init__(self, fate: BaseException | None) -> None:
        self.fate = fate


class _Server:
    def __init__(self, fate: BaseException | None, answers: bool = True) -> None:
        self.ref = _Ref(fate)
        self.answers = answers
        self.__ray_ready__ = self  # the ping's .remote()

    def remote(self) -> _Ref:
        return self.ref


def test_dead_servers_names_each_server_ray_reports_dead(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    servers = [
        (0, _Server(None)),
        (1, _Server(ActorDiedError())),
        (1, _Server(ActorDiedError(), answers=False)),  # no answer within the wait: busy or hung, not judged
    ]
    answering = [server.ref for _, server in servers if server.answers]

    def wait(refs: list[_Ref], num_returns: int, timeout: float) -> tuple[list, list]:
        assert num_returns == 3 and timeout == engine_guard.PING_S
        return answering, [r for r in refs if r not in answering]

    def get(ref: _Ref, timeout: float) -> None:
        if ref.fate is not None:
            raise ref.fate

    monkeypatch.setattr(ray, "wait", wait)
    monkeypatch.setattr(ray, "get", get)
    dead = engine_guard.dead_servers(servers)
    assert len(dead) == 1 and dead[0].startswith("the engine server of replica 1 is dead (")
    assert engine_guard.dead_servers([]) == []


def test_replica_servers_lists_every_server_with_its_replica() -> None:
    class Replica:
        def __init__(self, *servers: str) -> None:
            self.servers = list(servers)

    assert engine_guard.replica_servers([Replica("a"), Replica("b", "c")]) == [(0, "a"), (1, "b"), (1, "c")]


@pytest.mark.parametrize("value", [0, -1, "30", True, None])
def test_a_bad_time_limit_stops_at_start_up_naming_the_key(value: Any) -> None:
    config = OmegaConf.create({"mr_search": {"trainer": {"weight_sync_timeout_s": value}}})
    with pytest.raises(ValueError, match=r"mr_search.trainer.weight_sync_timeout_s=.* must be a number of seconds > 0"):
        check_training_options(config)


def test_the_time_limit_defaults_to_300_s() -> None:
    def config(trainer: dict | None) -> Any:
        return OmegaConf.create({"mr_search": {} if trainer is None else {"trainer": trainer}})

    assert weight_sync_timeout_seconds(config(None)) == weight_sync_timeout_seconds(config({})) == 300.0
    assert weight_sync_timeout_seconds(config({"weight_sync_timeout_s": 20})) == 20.0


@pytest.mark.parametrize(
    ("hook", "what"),
    [
        ("on_init_end", "the first weight sync"),
        ("on_sample_end", "the engines' memory release after step 2's generation"),
        ("on_step_end", "the weight sync after step 2"),
    ],
)
def test_the_trainer_bounds_verls_engine_calls(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, hook: str, what: str
) -> None:
    def verls_hook(self: PPOTrainerSync) -> None:
        raise ConnectionError("engine gone")

    monkeypatch.setattr(PPOTrainerSync, hook, verls_hook)
    trainer = object.__new__(MRSearchTrainer)
    trainer.config = OmegaConf.create(
        {"trainer": {"default_local_dir": str(tmp_path)}, "mr_search": {"trainer": {"weight_sync_timeout_s": 5}}}
    )
    trainer.global_steps = 2
    trainer.checkpoint_manager = type("Manager", (), {"replicas": []})()
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("2")
    with pytest.raises(EngineCallFailed) as failed:
        getattr(trainer, hook)()
    assert str(failed.value).startswith(f"rollout engine lost in {what}: it raised ConnectionError: engine gone. ")
    assert "The last checkpoint is step 2" in str(failed.value)

"""Fault injection (``MR_SEARCH_FAULT``): parsed strictly, fired once in rank 0's weight sync of the named step after
the first tensor, on the processes each action names (real processes here)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mr_search.ops import faults
from mr_search.ops.faults import Fault


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ("engine-kill@2", Fault("engine-kill", 2)),
        (" engine-stop@0 ", Fault("engine-stop", 0)),
        ("server-kill@13", Fault("server-kill", 13)),
    ],
)
def test_parse_reads_action_and_step(text: str, fault: Fault) -> None:
    assert faults.parse(text) == fault


@pytest.mark.parametrize("text", ["engine-kill", "engine-kill@", "kill@2", "engine-kill@-1", "engine-kill@two"])
def test_a_bad_value_names_the_valid_forms(text: str) -> None:
    with pytest.raises(
        ValueError,
        match=r"MR_SEARCH_FAULT=.* is not <action>@<step>: the actions are engine-kill, "
        r"engine-stop, server-kill",
    ):
        faults.parse(text)


def test_a_bad_value_stops_the_trainer_at_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    from omegaconf import OmegaConf

    from mr_search.ops.startup import check_training_options

    monkeypatch.setenv("MR_SEARCH_FAULT", "engine-kill")
    with pytest.raises(ValueError, match=r"MR_SEARCH_FAULT='engine-kill' is not <action>@<step>"):
        check_training_options(OmegaConf.create({"mr_search": {}}))


def test_from_env_is_off_when_unset_or_empty() -> None:
    assert faults.from_env({}) is None and faults.from_env({"MR_SEARCH_FAULT": " "}) is None
    assert faults.from_env({"MR_SEARCH_FAULT": "engine-kill@1"}) == Fault("engine-kill", 1)


def _children_state(pid: int) -> list[str]:
    return [Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] for child in faults.process_tree(pid)]


@pytest.fixture
def server() -> Iterator[subprocess.Popen]:
    """A stand-in engine server: a process with two child processes it does not reap."""
    code = "import subprocess, time; children = [subprocess.Popen(['sleep', '60']) for _ in range(2)]; time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code])
    for _ in range(100):
        if len(faults.process_tree(proc.pid)) == 2:
            break
        time.sleep(0.02)
    yield proc
    for pid in faults.process_tree(proc.pid):
        os.kill(pid, signal.SIGKILL)
    proc.kill()
    proc.wait()


def test_process_tree_lists_the_descendants(server: subprocess.Popen) -> None:
    tree = faults.process_tree(server.pid)
    assert len(tree) == 2 and server.pid not in tree
    assert faults.process_tree(tree[0]) == []


def test_process_name_reads_the_title_or_says_gone(server: subprocess.Popen) -> None:
    assert faults.process_name(faults.process_tree(server.pid)[0]) == "sleep"
    assert faults.process_name(2**22 + 7) == "?"


def test_targets_per_action() -> None:
    def tree(pid: int) -> list[int]:
        return {10: [11, 12], 20: []}[pid]

    assert faults.targets("engine-kill", 10, tree) == ([11, 12], signal.SIGKILL)
    assert faults.targets("engine-stop", 10, tree) == ([11, 12], signal.SIGSTOP)
    assert faults.targets("engine-kill", 20, tree) == ([20], signal.SIGKILL), "no children: the server holds the model"
    assert faults.targets("server-kill", 10, tree) == ([10], signal.SIGKILL)


class _Handle:
    """A Ray actor handle whose ``__ray_call__.remote(fn)`` runs ``fn`` in the server's place (its pid is given)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.__ray_call__ = self

    def remote(self, fn: Any) -> int:
        return self.pid


@pytest.mark.parametrize(("action", "state"), [("engine-stop", "T"), ("engine-kill", "Z")])
def test_strike_signals_the_servers_children(
    monkeypatch: pytest.MonkeyPatch, server: subprocess.Popen, action: str, state: str, capfd: pytest.CaptureFixture
) -> None:
    import ray

    monkeypatch.setattr(ray, "get", lambda pid, timeout: pid)
    adapter = type("Adapter", (), {"server_handle": _Handle(server.pid)})()
    children = faults.process_tree(server.pid)
    hit = faults.strike(adapter, Fault(action, 1))
    assert sorted(hit) == sorted(children)
    assert set(_children_state(server.pid)) == {state}, "stopped (T) or killed and not reaped (Z)"
    assert server.poll() is None, "the server itself is left alone"
    signal_name = "SIGSTOP" if action == "engine-stop" else "SIGKILL"
    named = ", ".join(f"{pid} sleep" for pid in hit)
    line = f"MR_SEARCH_FAULT={action}@1: sending {signal_name} to {named} (engine server pid {server.pid})"
    assert line in capfd.readouterr().err


def test_strike_without_a_server_handle_says_so() -> None:
    with pytest.raises(RuntimeError, match="holds no engine server handle"):
        faults.strike(object(), Fault("engine-kill", 1))


def test_firing_fires_once_after_the_first_item_sync_and_async() -> None:
    fired: list[int] = []
    seen: list[int] = []

    def fire() -> None:
        fired.append(len(seen))

    for item in faults.firing(iter([1, 2, 3]), fire):
        seen.append(item)
    assert seen == [1, 2, 3] and fired == [1]

    async def source():
        for item in (1, 2, 3):
            yield item

    async def drain() -> list[int]:
        return [item async for item in faults.firing(source(), lambda: fired.append(-1))]

    assert asyncio.run(drain()) == [1, 2, 3] and fired == [1, -1]


class _Adapter:
    async def update_weights(self, weights: Any, peft_config: Any = None, global_steps: int | None = None) -> list:
        return list(weights)


@pytest.mark.parametrize(("step", "rank", "fires"), [(2, 0, True), (1, 0, False), (2, 1, False)])
def test_patch_fires_in_rank_0_at_the_named_step_only(
    monkeypatch: pytest.MonkeyPatch, step: int, rank: int, fires: bool
) -> None:
    struck: list[Fault] = []
    monkeypatch.setattr(faults, "strike", lambda adapter, fault: struck.append(fault))
    cls = type("Adapter", (_Adapter,), {})
    faults.patch(cls, Fault("engine-kill", 2), rank=lambda: rank)
    faults.patch(cls, Fault("engine-kill", 2), rank=lambda: rank)  # a second install keeps one wrapper
    assert cls.update_weights.__wrapped__ is _Adapter.update_weights
    sent = asyncio.run(cls().update_weights(iter([("a", 1), ("b", 2)]), peft_config=None, global_steps=step))
    assert sent == [("a", 1), ("b", 2)]
    assert struck == ([Fault("engine-kill", 2)] if fires else [])

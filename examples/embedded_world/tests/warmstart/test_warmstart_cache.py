"""The warm start's cache: one build for two callers at once, and one key whatever arithmetic the CPU runs."""

from __future__ import annotations

import json
import time

import pytest

from mr_search_embedded.warmstart import train as train_module
from mr_search_embedded.warmstart.train import WarmStartConfig, ensure_warmstart

SMALL = WarmStartConfig(num_transcripts=8, window_steps=2, window_batch_size=4, steps=3, batch_size=4, warmup_steps=1)


@pytest.fixture
def passes(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Replaces the supervised pass by a slow no-op; records the ``bf16`` setting of each pass that ran."""
    ran: list[bool] = []

    def fake_pass(model, examples, config, pad_id, **kwargs):
        ran.append(config.bf16)
        time.sleep(0.5)  # long enough that a second caller arrives mid-build
        return [2.0, 1.0]

    monkeypatch.setattr(train_module, "supervised_pass", fake_pass)
    return ran


def _native_bf16(monkeypatch: pytest.MonkeyPatch, native: bool) -> None:
    from mr_search.cpu import precision

    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: native)


def test_two_concurrent_callers_build_once(tmp_path, tiny_policy, mini_world, passes, capfd, call_together) -> None:
    results = call_together(
        lambda: ensure_warmstart(base_model=tiny_policy, out_dir=tmp_path / "ws", config=SMALL, world=mini_world),
        timeout=120,
    )
    assert len(passes) == 1, "the second caller must wait for the first build, not start its own"
    assert results == [tmp_path / "ws"] * 2 and (tmp_path / "ws" / ".complete").is_file()
    err = capfd.readouterr().err
    # What is built and what it costs is said once, before the build; the caller that waits says so.
    assert err.count("building the tiny policy's warm start once") == 1
    assert "~2-9 min on 2 CPU cores" in err and f"then cached in {tmp_path / 'ws'}" in err
    assert "another process is building" in err


def test_a_warm_start_built_without_native_bf16_serves_a_host_with_it(
    tmp_path, tiny_policy, mini_world, passes, monkeypatch
) -> None:
    monkeypatch.setenv("MR_SEARCH_CACHE", str(tmp_path))
    monkeypatch.delenv("MR_SEARCH_WORLD", raising=False)
    _native_bf16(monkeypatch, False)
    built = ensure_warmstart(base_model=tiny_policy, config=SMALL, world=mini_world)
    assert passes == [False], "a CPU without native bf16 trains in float32"
    summary = json.loads((built / "warmstart.json").read_text())
    assert summary["arithmetic"] == "float32" and summary["settings"]["bf16"] is False
    _native_bf16(monkeypatch, True)
    assert ensure_warmstart(base_model=tiny_policy, config=SMALL, world=mini_world) == built
    assert passes == [False], "the other host reuses the build: the arithmetic is not in the key"


def test_a_host_with_native_bf16_trains_in_bf16_under_the_same_key(
    tmp_path, tiny_policy, mini_world, passes, monkeypatch
) -> None:
    monkeypatch.setenv("MR_SEARCH_CACHE", str(tmp_path / "a"))
    monkeypatch.delenv("MR_SEARCH_WORLD", raising=False)
    _native_bf16(monkeypatch, True)
    with_bf16 = ensure_warmstart(base_model=tiny_policy, config=SMALL, world=mini_world)
    assert passes == [True]
    assert json.loads((with_bf16 / "warmstart.json").read_text())["arithmetic"] == "bf16 autocast"
    monkeypatch.setenv("MR_SEARCH_CACHE", str(tmp_path / "b"))
    _native_bf16(monkeypatch, False)
    without = ensure_warmstart(base_model=tiny_policy, config=SMALL, world=mini_world)
    assert passes == [True, False] and without.name == with_bf16.name, "one key on both hosts"

"""$MR_SEARCH_WARMSTART_SCALE: the same recipe stopped earlier, keyed apart, read where the launchers get the policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from mr_search_embedded import prepare
from mr_search_embedded.warmstart import train
from mr_search_embedded.warmstart.scale import SCALE_ENV, scaled, warmstart_scale
from mr_search_embedded.warmstart.train import WarmStartConfig, warmstart_config


def test_every_stage_keeps_its_share_and_the_key_changes():
    full = warmstart_config(False, "default")
    short = scaled(full, 0.4)
    assert (short.window_steps, short.steps, short.warmup_steps) == (200, 80, 20)
    assert short.total_steps == 280
    assert short.key() != full.key(), "a scaled build must never stand in for the full one"
    assert scaled(full, 1.0) is full  # the full recipe keeps its key: its cache is untouched


def test_a_tiny_share_keeps_one_whole_transcript_step_and_a_valid_warm_up():
    short = scaled(WarmStartConfig(window_steps=0, steps=3, warmup_steps=3), 0.01)
    assert (short.window_steps, short.steps) == (0, 1)
    assert 0 <= short.warmup_steps <= short.total_steps


@pytest.mark.parametrize("raw, want", [(None, 1.0), ("", 1.0), ("0.4", 0.4), (" 1 ", 1.0)])
def test_the_env_value_is_a_share(monkeypatch, raw, want):
    if raw is None:
        monkeypatch.delenv(SCALE_ENV, raising=False)
    else:
        monkeypatch.setenv(SCALE_ENV, raw)
    assert warmstart_scale() == want


@pytest.mark.parametrize("raw", ["0", "1.5", "-0.2", "most", "nan"])
def test_a_bad_env_value_names_itself_and_the_valid_range(monkeypatch, raw):
    monkeypatch.setenv(SCALE_ENV, raw)
    with pytest.raises(ValueError, match=rf"{SCALE_ENV}=.*use a share of the warm start's steps in \(0, 1\]"):
        warmstart_scale()


def test_prepare_builds_the_policy_at_the_scale_asked(monkeypatch, tmp_path: Path):
    """The launchers' path (``prepare policy``) passes the scaled config to the build; nothing is trained here."""
    seen: list[WarmStartConfig] = []

    def fake_warmstart(base_model, config):
        seen.append(config)
        return tmp_path / config.key()

    monkeypatch.setattr(train, "ensure_warmstart", fake_warmstart)
    monkeypatch.setattr("mr_search_embedded.tiny_model.ensure_tiny_model", lambda config: tmp_path / "tiny")
    monkeypatch.delenv("MR_SEARCH_WORLD", raising=False)
    monkeypatch.setenv(SCALE_ENV, "0.4")
    assert prepare.policy() == tmp_path / scaled(warmstart_config(False, "default"), 0.4).key()
    monkeypatch.delenv(SCALE_ENV)
    prepare.policy()
    assert [c.total_steps for c in seen] == [280, 700]

"""Validation at another K (``mr_search.episode.val_attempts``): the trainer hands verl's validation pass a loader whose
rows carry that K (``contract.ROW_ATTEMPTS``), for that pass only; without the option the rows are verl's own."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from omegaconf import OmegaConf
from verl.trainer.ppo.v1.trainer_base import PPOTrainer

from mr_search.contract import ROW_ATTEMPTS
from mr_search.ops.trainer import MRSearchTrainer
from mr_search.trainer.validation import AttemptsOnRows

BATCHES = [{"raw_prompt": np.array([[{"role": "user", "content": q}] for q in "ab"], dtype=object)}]


class Loader(list):
    batch_size = 2


def test_attempts_on_rows_marks_every_row_and_keeps_the_loader() -> None:
    rows = AttemptsOnRows(Loader(BATCHES), 4)
    (batch,) = list(rows)
    assert list(batch[ROW_ATTEMPTS]) == [4, 4] and batch["raw_prompt"] is BATCHES[0]["raw_prompt"]
    assert ROW_ATTEMPTS not in BATCHES[0], "the loader's own batches are left as they were"
    assert len(rows) == 1 and rows.batch_size == 2
    with pytest.raises(ValueError, match="K must be >= 1"):
        AttemptsOnRows(Loader(BATCHES), 0)


def _trainer(val_attempts: int | None) -> MRSearchTrainer:
    trainer = object.__new__(MRSearchTrainer)
    trainer.config = OmegaConf.create(
        {
            "mr_search": {"episode": {"attempts": 1, "val_attempts": val_attempts}},
            "actor_rollout_ref": {"rollout": {"val_kwargs": {"n": 1}}},
        }
    )
    trainer.val_dataloader = Loader(BATCHES)
    trainer.val_dataset = ["a", "b"]
    return trainer


@pytest.mark.parametrize(("val_attempts", "seen"), [(4, [4, 4]), (None, None)])
def test_the_validation_pass_sees_the_rows_k_and_the_loader_comes_back(
    monkeypatch: pytest.MonkeyPatch, val_attempts: int | None, seen: list[int] | None
) -> None:
    batches: list[dict[str, Any]] = []

    def verls_validate(self: PPOTrainer) -> dict[str, float]:
        batches.extend(self.val_dataloader)
        return {"val-core/em": 1.0}

    monkeypatch.setattr(PPOTrainer, "_validate", verls_validate)
    trainer = _trainer(val_attempts)
    loader = trainer.val_dataloader
    metrics = trainer._validate()
    assert metrics["val-core/em"] == 1.0 and metrics["val-speed/meta_episodes"] == 2
    (batch,) = batches
    assert (list(batch[ROW_ATTEMPTS]) if ROW_ATTEMPTS in batch else None) == seen
    assert trainer.val_dataloader is loader


def test_the_loader_comes_back_when_the_pass_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(self: PPOTrainer) -> dict[str, float]:
        raise RuntimeError("engine died")

    monkeypatch.setattr(PPOTrainer, "_validate", failing)
    trainer = _trainer(3)
    loader = trainer.val_dataloader
    with pytest.raises(RuntimeError, match="engine died"):
        trainer._validate()
    assert trainer.val_dataloader is loader

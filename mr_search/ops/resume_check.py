"""A resume inside one launch: rewind to checkpoint N-1, resume N through verl's path, record the state's digests.

``mr_search.trainer.resume_steps`` turns it on (``scripts/gpu_check.sh``): a restart would pay the start-up again.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from mr_search.ops.engine_guard import LastCheckpoint

RECORD_NAME: Final = "resume_check.json"
SCRATCH_NAME: Final = "resume_check_scratch"
PARTS: Final = ("model", "optim")  # verl's FSDP checkpoint files: {part}_world_size_{w}_rank_{r}.pt


@dataclass(frozen=True)
class ResumeRecord:
    """What the resume inside one launch saw (``resume_check.json``)."""

    saved_step: int
    rewound_to: int
    steps_after_rewind: int
    steps_after_resume: int
    rewound_state: dict[str, str]  # part -> digest of the actor saved right after the rewind
    resumed_state: dict[str, str]  # part -> digest of the actor saved right after the resume
    checkpoint_state: dict[str, dict[str, str]]  # "N-1" / "N" -> part -> digest of that checkpoint on disk
    loader_at_end: str  # digest of the dataloader's state after step N (in memory)
    loader_after_rewind: str
    loader_after_resume: str
    samples_after_rewind: int
    samples_after_resume: int
    continued_steps: int


def _feed(digest: Any, value: Any) -> None:
    """Feeds a nested state (dicts, lists, tensors, DTensors, numbers) into ``digest``, key order independent."""
    import torch

    if isinstance(value, Mapping):
        for key in sorted(value, key=str):
            digest.update(f"<{key}>".encode())
            _feed(digest, value[key])
    elif isinstance(value, list | tuple):
        digest.update(b"[")
        for item in value:
            _feed(digest, item)
        digest.update(b"]")
    elif isinstance(value, torch.Tensor):
        local = value.to_local() if hasattr(value, "to_local") else value
        local = local.detach().cpu().contiguous()
        digest.update(f"{local.dtype}{tuple(local.shape)}".encode())
        digest.update(local.reshape(-1).view(torch.uint8).numpy().tobytes())
    else:
        digest.update(repr(value).encode())


def state_digest(value: Any) -> str:
    """A short digest of a nested state: equal states give equal digests."""
    digest = hashlib.sha256()
    _feed(digest, value)
    return digest.hexdigest()[:16]


def actor_digests(actor_dir: Path) -> dict[str, str]:
    """Digests of one saved actor's model and optimizer shards (all ranks); FileNotFoundError if a part has none."""
    import torch

    digests = {}
    for part in PARTS:
        shards = sorted(actor_dir.glob(f"{part}_world_size_*_rank_*.pt"))
        if not shards:
            raise FileNotFoundError(f"no {part} shard in {actor_dir}")
        digests[part] = state_digest([torch.load(s, map_location="cpu", weights_only=False) for s in shards])
    return digests


def _samples(loader_state: Mapping[str, Any]) -> int:
    """Samples the dataloader has handed out (torchdata's StatefulDataLoader state)."""
    inner = loader_state.get("_sampler_iter_state") or {}
    return int(inner.get("samples_yielded", -1)) if isinstance(inner, Mapping) else -1


def _load(trainer: Any, mode: str, path: str | None = None) -> int:
    """verl's resume path with ``trainer.resume_mode`` (and ``resume_from_path``) set for this one call."""
    from omegaconf import open_dict

    cfg = trainer.config.trainer
    before = (cfg.resume_mode, cfg.get("resume_from_path"))
    with open_dict(cfg):
        cfg.resume_mode, cfg.resume_from_path = mode, path
    try:
        trainer._load_checkpoint()
    finally:
        with open_dict(cfg):
            cfg.resume_mode, cfg.resume_from_path = before
    trainer.train_dataloader_it = None  # a new process has no iterator: the next batch comes from the loaded state
    return int(trainer.global_steps)


def _save_actor(trainer: Any, folder: Path) -> dict[str, str]:
    shutil.rmtree(folder, ignore_errors=True)
    trainer.actor_rollout_wg.save_checkpoint(str(folder / "actor"), None, int(trainer.global_steps), None)
    try:
        return actor_digests(folder / "actor")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def rewind_and_resume(trainer: Any) -> ResumeRecord:
    """Rewinds to checkpoint N-1, then resumes (N), on a trainer that has just finished ``fit``."""
    ckpt_dir = Path(trainer.config.trainer.default_local_dir)
    saved = LastCheckpoint.of(ckpt_dir).step or 0
    previous = ckpt_dir / f"global_step_{saved - 1}"
    if saved < 2 or not (previous / "actor").is_dir() or not (ckpt_dir / f"global_step_{saved}" / "actor").is_dir():
        raise RuntimeError(
            f"mr_search.trainer.resume_steps needs the last two checkpoints in {ckpt_dir} (found latest={saved}); "
            "train >= 2 steps with trainer.save_freq=1 and trainer.max_actor_ckpt_to_keep >= 2 (or null)"
        )
    at_end = copy.deepcopy(trainer.train_dataloader.state_dict())
    # as at start-up: the engine holds no weights while the actor loads (bounded, as every engine call of the trainer)
    trainer.engine_call("the engines' memory release before the resume", trainer.checkpoint_manager.sleep_replicas)

    rewound = _load(trainer, "resume_path", str(previous))
    loader_rewound = trainer.train_dataloader.state_dict()
    rewound_state = _save_actor(trainer, ckpt_dir / SCRATCH_NAME)
    mode = str(trainer.config.trainer.resume_mode)
    last = ckpt_dir / f"global_step_{saved}"
    resumed = _load(trainer, mode, None) if mode == "auto" else _load(trainer, "resume_path", str(last))
    loader_resumed = trainer.train_dataloader.state_dict()
    resumed_state = _save_actor(trainer, ckpt_dir / SCRATCH_NAME)
    # as verl's sync trainer does after a load
    trainer.engine_call(
        "the weight sync after the resume", lambda: trainer.checkpoint_manager.update_weights(trainer.global_steps)
    )

    return ResumeRecord(
        saved_step=saved,
        rewound_to=saved - 1,
        steps_after_rewind=rewound,
        steps_after_resume=resumed,
        rewound_state=rewound_state,
        resumed_state=resumed_state,
        checkpoint_state={"N-1": actor_digests(previous / "actor"), "N": actor_digests(last / "actor")},
        loader_at_end=state_digest(at_end),
        loader_after_rewind=state_digest(loader_rewound),
        loader_after_resume=state_digest(loader_resumed),
        samples_after_rewind=_samples(loader_rewound),
        samples_after_resume=_samples(loader_resumed),
        continued_steps=0,
    )


def write_record(record: ResumeRecord, ckpt_dir: Path) -> Path:
    path = ckpt_dir / RECORD_NAME
    path.write_text(json.dumps(asdict(record), indent=1) + "\n", encoding="utf-8")
    return path


def read_record(ckpt_dir: Path) -> ResumeRecord | None:
    """The record of a run that resumed inside its launch; None for any other run."""
    path = ckpt_dir / RECORD_NAME
    return ResumeRecord(**json.loads(path.read_text())) if path.exists() else None


def continued_metrics_path(path: str | None) -> str | None:
    """``<launch>.jsonl`` -> ``<launch>.resumed.jsonl``: verl's file logger truncates its own file."""
    if not path:
        return None
    stem, ext = os.path.splitext(path)
    return f"{stem}.resumed{ext or '.jsonl'}"


def resume_and_continue(trainer: Any, fit: Callable[[], None], steps: int) -> ResumeRecord:
    """Rewinds, resumes, writes the record, then trains ``steps`` more steps with ``fit`` (verl's own loop)."""
    record = rewind_and_resume(trainer)
    ckpt_dir = Path(trainer.config.trainer.default_local_dir)
    write_record(record, ckpt_dir)
    continued = continued_metrics_path(os.environ.get("VERL_FILE_LOGGER_PATH"))
    if continued:
        os.environ["VERL_FILE_LOGGER_PATH"] = continued
    trainer.total_training_steps = trainer.global_steps + steps
    trainer._init_dump_executor()  # fit shut it down at its last step
    fit()
    record = ResumeRecord(**{**asdict(record), "continued_steps": steps})
    write_record(record, ckpt_dir)
    return record

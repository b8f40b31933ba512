"""Finds the Hugging Face model directory to evaluate: a model folder, a verl checkpoint, or a run folder."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)

_STEP_RE = re.compile(r"global_step_(\d+)$")
Merger = Callable[[Path, Path], None]


def has_weights(path: Path) -> bool:
    """True for a folder with a model config and weights that ``from_pretrained`` can load."""
    if not (path / "config.json").is_file():
        return False
    return any(path.glob("*.safetensors")) or any(path.glob("pytorch_model*.bin"))


def latest_step(root: Path, max_depth: int = 5) -> Path | None:
    """The ``global_step_<N>`` folder with the largest N under ``root`` (None when there is none)."""
    best: tuple[int, str, Path] | None = None
    frontier = [(root, 0)]
    while frontier:
        folder, depth = frontier.pop()
        try:
            children = sorted(p for p in folder.iterdir() if p.is_dir())
        except OSError:
            continue
        for child in children:
            match = _STEP_RE.match(child.name)
            if match:
                key = (int(match.group(1)), str(child), child)
                best = key if best is None or key[:2] > best[:2] else best
            elif depth < max_depth and not child.name.startswith("."):
                frontier.append((child, depth + 1))
    return best[2] if best else None


def verl_merge(actor_dir: Path, target: Path) -> None:
    """Merges FSDP shards into a Hugging Face folder with verl's model merger (a subprocess)."""
    cmd = [
        sys.executable,
        "-m",
        "verl.model_merger",
        "merge",
        "--backend",
        "fsdp",
        "--local_dir",
        str(actor_dir),
        "--target_dir",
        str(target),
    ]
    logger.info("merging the FSDP checkpoint: %s", " ".join(cmd))
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"verl.model_merger failed on {actor_dir} (exit {done.returncode}):\n{done.stderr[-2000:]}")


def resolve_model_dir(path: Path | str, merge: Merger = verl_merge) -> Path:
    """Returns a folder that ``from_pretrained`` loads, for a model folder, a checkpoint or a run folder."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such model folder, verl checkpoint or run folder")
    if has_weights(path):
        return path
    step = path if _STEP_RE.match(path.name) else latest_step(path)
    if step is None:
        raise FileNotFoundError(
            f"{path}: neither a Hugging Face model folder (config.json + weights) nor a folder with verl "
            "checkpoints (global_step_<N>/actor)"
        )
    actor = step / "actor" if (step / "actor").is_dir() else step
    for candidate in (actor / "huggingface", actor / "huggingface_merged"):
        if has_weights(candidate):
            logger.info("evaluating %s", candidate)
            return candidate
    if not any(actor.glob("model_world_size_*_rank_*.pt")):
        raise FileNotFoundError(f"{actor}: no Hugging Face weights and no FSDP shards (model_world_size_*_rank_*.pt)")
    target = actor / "huggingface_merged"
    merge(actor, target)
    if not has_weights(target):
        raise RuntimeError(f"merging {actor} left no loadable model in {target}")
    return target

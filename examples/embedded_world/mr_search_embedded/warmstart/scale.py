"""A shorter warm start of the same recipe: ``$MR_SEARCH_WARMSTART_SCALE`` (a share of the recipe's steps).

The default warm start trains 700 steps (~2 min on 2 free cores with native bf16, ~4.5 min without). A test suite or
a smoke run needs a policy that writes the protocol and earns mixed rewards, not the default's accuracy: ``make test``
builds the default world's warm start at 0.3 of its steps. Every stage keeps its share (window steps, whole-transcript
steps, learning-rate warm-up), so the recipe is the same one stopped earlier; the steps are part of the cache key, so
a scaled build never stands in for the full one. Read by ``mr_search_embedded.prepare`` (the launchers' path to the
policy); 1 or unset: the recipe as it is.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Final

from mr_search_embedded.warmstart.train import WarmStartConfig

SCALE_ENV: Final = "MR_SEARCH_WARMSTART_SCALE"


def warmstart_scale() -> float:
    """``$MR_SEARCH_WARMSTART_SCALE`` as a share in (0, 1]; 1 when unset or empty. A bad value raises, naming it."""
    raw = os.environ.get(SCALE_ENV, "").strip()
    if not raw:
        return 1.0
    try:
        scale = float(raw)
    except ValueError:
        scale = float("nan")
    if not 0.0 < scale <= 1.0:
        raise ValueError(
            f"{SCALE_ENV}={raw!r}: use a share of the warm start's steps in (0, 1], e.g. 0.4 "
            f"(or unset it for the full recipe)"
        )
    return scale


def scaled(config: WarmStartConfig, scale: float) -> WarmStartConfig:
    """``config`` with its window steps, whole-transcript steps and warm-up steps times ``scale`` (rounded; at
    least one whole-transcript step); ``config`` itself at scale 1."""
    if not 0.0 < scale <= 1.0:
        raise ValueError(f"warm start scale {scale}: use a share in (0, 1]")
    if scale == 1.0:
        return config
    window_steps = round(config.window_steps * scale)
    steps = max(1, round(config.steps * scale))
    warmup_steps = min(round(config.warmup_steps * scale), window_steps + steps)
    return replace(config, window_steps=window_steps, steps=steps, warmup_steps=warmup_steps)

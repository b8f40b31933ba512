"""Which embedded world a process uses, and the cache folder that belongs to it.

The default world (``MR_SEARCH_WORLD`` unset or ``default``) lives under ``$MR_SEARCH_CACHE`` as it always has.
Each opt-in world (``MR_SEARCH_WORLD=namesake``, ``namesake.py``; ``MR_SEARCH_WORLD=threehop``, ``threehop.py``) gets
its own cache root under ``$MR_SEARCH_CACHE/worlds/``, so its world, parquet, indexes, tiny policy and warm starts
never replace the default's: every cached piece keyed by the cache root alone (the tiny policy, the index folders
named after the corpus file) stays apart.

The namesake world's folder is named after its generator's version, ``worlds/namesake-v4``
(``NAMESAKE_WORLD_VERSION``): a folder an earlier generator wrote (``worlds/namesake``, ``worlds/namesake-v3``) holds
another world and a tokenizer trained on it, and is never read. The threehop world's is ``worlds/threehop-v1``
(``THREEHOP_WORLD_VERSION``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

WORLD_ENV: Final = "MR_SEARCH_WORLD"
DEFAULT_VARIANT: Final = "default"
VARIANTS: Final = (DEFAULT_VARIANT, "namesake", "threehop")
# The namesake world generator's version (``namesake.py``): recorded in its meta.json (a cached world of another
# is rebuilt) and naming its cache folder. Bump it when the generator changes.
NAMESAKE_WORLD_VERSION: Final = 4
# The threehop world generator's version (``threehop.py``), as the namesake world's.
THREEHOP_WORLD_VERSION: Final = 1
# Each opt-in world's folder under <cache>/worlds.
VARIANT_FOLDERS: Final = {
    "namesake": f"namesake-v{NAMESAKE_WORLD_VERSION}",
    "threehop": f"threehop-v{THREEHOP_WORLD_VERSION}",
}


def world_variant() -> str:
    """The variant named by ``$MR_SEARCH_WORLD`` (``default`` when unset or empty); a bad name raises."""
    value = os.environ.get(WORLD_ENV, "").strip() or DEFAULT_VARIANT
    if value not in VARIANTS:
        raise ValueError(
            f"{WORLD_ENV}={value!r} is not a known embedded world; use one of {', '.join(VARIANTS)} "
            f"(or unset it for the default)"
        )
    return value


def base_cache_dir() -> Path:
    """``$MR_SEARCH_CACHE``, or ``~/.cache/mr_search`` when unset (the default world's cache root)."""
    return Path(os.environ.get("MR_SEARCH_CACHE") or Path.home() / ".cache" / "mr_search")


def variant_cache_dir(variant: str | None = None) -> Path:
    """The cache root of ``variant`` (default: ``world_variant()``): the base root for the default world, else
    ``<base>/worlds/<its folder>`` (``VARIANT_FOLDERS``)."""
    variant = world_variant() if variant is None else variant
    if variant not in VARIANTS:
        raise ValueError(f"unknown embedded world {variant!r}; use one of {', '.join(VARIANTS)}")
    base = base_cache_dir()
    if variant == DEFAULT_VARIANT:
        return base
    return base / "worlds" / VARIANT_FOLDERS[variant]

"""Which embedded world a process uses, and the cache folder that belongs to it.

The default world (``MR_SEARCH_WORLD`` unset or ``default``) lives under ``$MR_SEARCH_CACHE`` as it always has.
An opt-in variant (``MR_SEARCH_WORLD=namesake``, ``namesake.py``) gets its own cache root,
``$MR_SEARCH_CACHE/worlds/<variant>``, so its world, parquet, indexes, tiny policy and warm starts never replace
the default's: every cached piece keyed by the cache root alone (the tiny policy, the index folders named after the
corpus file) stays apart.

The namesake world has versions (``namesake.py``): ``$MR_SEARCH_NAMESAKE_VERSION`` picks one (unset: 2, the one every
namesake run before version 3 used). Version 2 keeps its cache root, ``worlds/namesake``; any other version gets its
own, ``worlds/namesake-v<version>``, so a version-3 or -4 build never replaces a version-2 world, index or warm start.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

WORLD_ENV: Final = "MR_SEARCH_WORLD"
DEFAULT_VARIANT: Final = "default"
VARIANTS: Final = (DEFAULT_VARIANT, "namesake")
NAMESAKE_VERSION_ENV: Final = "MR_SEARCH_NAMESAKE_VERSION"
# The namesake world's versions that can be built, and the one used when $MR_SEARCH_NAMESAKE_VERSION is unset.
# 3 is opt-in: its names are recombined from training people's words (namesake.py; reports/compare_namesake).
# 4 is opt-in: version 3's names, and the retry decided by whether the question's profession word is in the passages.
NAMESAKE_VERSIONS: Final = (2, 3, 4)
DEFAULT_NAMESAKE_VERSION: Final = 2


def world_variant() -> str:
    """The variant named by ``$MR_SEARCH_WORLD`` (``default`` when unset or empty); a bad name raises."""
    value = os.environ.get(WORLD_ENV, "").strip() or DEFAULT_VARIANT
    if value not in VARIANTS:
        raise ValueError(
            f"{WORLD_ENV}={value!r} is not a known embedded world; use one of {', '.join(VARIANTS)} "
            f"(or unset it for the default)"
        )
    return value


def namesake_version() -> int:
    """The namesake world's version named by ``$MR_SEARCH_NAMESAKE_VERSION`` (``DEFAULT_NAMESAKE_VERSION`` when unset
    or empty); anything else than one of ``NAMESAKE_VERSIONS`` raises."""
    value = os.environ.get(NAMESAKE_VERSION_ENV, "").strip()
    if not value:
        return DEFAULT_NAMESAKE_VERSION
    if value not in {str(v) for v in NAMESAKE_VERSIONS}:
        raise ValueError(
            f"{NAMESAKE_VERSION_ENV}={value!r} is not a namesake world version; use one of "
            f"{', '.join(map(str, NAMESAKE_VERSIONS))} (or unset it for {DEFAULT_NAMESAKE_VERSION})"
        )
    return int(value)


def base_cache_dir() -> Path:
    """``$MR_SEARCH_CACHE``, or ``~/.cache/mr_search`` when unset (the default world's cache root)."""
    return Path(os.environ.get("MR_SEARCH_CACHE") or Path.home() / ".cache" / "mr_search")


def variant_cache_dir(variant: str | None = None) -> Path:
    """The cache root of ``variant`` (default: ``world_variant()``): the base root for the default world, else
    ``<base>/worlds/<variant>``; for the namesake world at a version other than 2 (``namesake_version()``),
    ``<base>/worlds/namesake-v<version>``."""
    variant = world_variant() if variant is None else variant
    if variant not in VARIANTS:
        raise ValueError(f"unknown embedded world {variant!r}; use one of {', '.join(VARIANTS)}")
    base = base_cache_dir()
    if variant == DEFAULT_VARIANT:
        return base
    if variant == "namesake" and (version := namesake_version()) != 2:
        return base / "worlds" / f"namesake-v{version}"
    return base / "worlds" / variant

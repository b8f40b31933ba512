"""Fixtures for the config tests: compose the project's Hydra configs the way main_ppo does."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import OmegaConf

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"


@pytest.fixture(scope="session")
def config_dir() -> Path:
    return CONFIG_DIR


@pytest.fixture(scope="session")
def compose_config() -> Callable:
    """Returns ``compose(name, overrides=()) -> DictConfig`` over the project's configs/ folder."""
    from hydra import compose, initialize_config_dir

    def _compose(name: str, overrides: tuple[str, ...] | list[str] = ()):
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
            return compose(config_name=name, overrides=list(overrides))

    return _compose


@pytest.fixture(scope="session")
def paper_config(compose_config):
    """The paper recipe, composed once (read-only in tests)."""
    config = compose_config("mr_search_paper")
    OmegaConf.set_readonly(config, True)
    return config

"""The lab's tests: the repository's shared fixtures (tests/conftest.py) for this folder too.

``make test`` collects ``tests`` and this folder in one session, so the shared conftest's hooks (threads per xdist
worker, one worker per module fixture) apply here as well; its fixtures are per folder, so those the lab's tests use
are defined again from the same functions.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

_SHARED = Path(__file__).resolve().parents[3] / "tests" / "conftest.py"
_spec = importlib.util.spec_from_file_location("mr_search_shared_conftest", _SHARED)
assert _spec is not None and _spec.loader is not None, f"{_SHARED}: the repository's shared conftest is missing"
_shared = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_shared)


@pytest.fixture
def call_together() -> Callable[..., list[Any]]:
    """``call_together(call, times=2, timeout=120)``: ``call()`` in several threads at once; their results."""
    return _shared._call_together

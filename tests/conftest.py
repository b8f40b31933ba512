"""Fixtures shared by every test folder."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest


def _call_together(call: Callable[[], Any], times: int = 2, timeout: float = 120) -> list[Any]:
    """Runs ``call`` in ``times`` threads at once (two processes on one cold cache, as far as a file lock can tell)
    and returns the results in finishing order; an exception in any thread fails the test with it."""
    results: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(call())
        except BaseException as error:  # surfaced below
            errors.append(error)

    threads = [threading.Thread(target=run) for _ in range(times)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not errors, errors
    assert len(results) == times, f"{times - len(results)} of {times} calls did not finish in {timeout}s"
    return results


@pytest.fixture
def call_together() -> Callable[..., list[Any]]:
    """``call_together(call, times=2, timeout=120)``: ``call()`` in several threads at once; their results."""
    return _call_together

"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

from mr_search.cpu.precision import cpu_dtype


def _threads_per_worker() -> int | None:
    """Intra-op threads for each process of a pytest-xdist worker: the cores shared out between the workers. None
    outside xdist, or where the environment already chose (``OMP_NUM_THREADS``)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers < 1 or "OMP_NUM_THREADS" in os.environ:
        return None
    return max(1, len(os.sched_getaffinity(0)) // workers)


def pytest_configure(config: pytest.Config) -> None:
    """Under ``make test`` (two xdist workers, two cores) each worker and every process it starts (training scripts,
    Ray actors, services) computes with one thread: OpenMP threads that wait for a core the other worker holds spin
    and cost CPU. Measured on the 2-core machine, a tiny-policy forward and backward pass beside a process that kept
    one core busy: 6.2 CPU-seconds an iteration with 2 threads against 4.5 with 1 (wall 5.0 against 4.5 s). The
    end-to-end runs did not change with it (the 2-step embedded run beside the same busy core: 210.6 s against
    211.3 s): what it saves is the in-process torch work of the other tests."""
    threads = _threads_per_worker()
    if threads is not None:
        os.environ["OMP_NUM_THREADS"] = str(threads)
        os.environ.setdefault("MKL_NUM_THREADS", str(threads))
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(threads)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """What sets the suite's wall time on a CPU machine, printed under its results (``-q`` too): cores, the CPU
    engine's dtype (float32 steps are ~2.8x bf16's), and whether Python keeps the bytecode it compiles (without it
    every process compiles torch, transformers and verl again)."""
    bytecode = "off (PYTHONDONTWRITEBYTECODE is set)" if sys.dont_write_bytecode else "kept"
    terminalreporter.write_line(
        f"mr-search: {os.cpu_count()} CPUs, CPU engine dtype {cpu_dtype()}, bytecode {bytecode}"
    )


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


def _module_fixture_users(item: pytest.Item) -> bool:
    """Whether ``item`` uses a module-scoped fixture (directly or through another fixture)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs and defs[-1].scope == "module" for defs in info.name2fixturedefs.values())


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook turns xdist_group marks into scopes
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` each test is its own unit of work, so the tests of one module that share a
    module-scoped fixture (a model loaded, a service launched, an index built) could land on both workers and build it
    twice. Such tests get one ``xdist_group`` per module; a test that names a group of its own keeps it."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None and _module_fixture_users(item):
            item.add_marker(pytest.mark.xdist_group(f"module:{item.nodeid.split('::')[0]}"))


@pytest.fixture
def call_together() -> Callable[..., list[Any]]:
    """``call_together(call, times=2, timeout=120)``: ``call()`` in several threads at once; their results."""
    return _call_together

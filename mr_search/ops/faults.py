"""Fault injection for recovery checks: ``MR_SEARCH_FAULT=<action>@<step>`` makes the rollout engine fail in the middle
of the weight sync after training step ``<step>`` (``engine-kill``, ``engine-stop`` or ``server-kill``), so that the
run's ending, message and resume can be shown. Off unless the variable is set.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from mr_search.import_hooks import when_imported

logger = logging.getLogger(__name__)

FAULT_ENV: Final = "MR_SEARCH_FAULT"
ACTIONS: Final = ("engine-kill", "engine-stop", "server-kill")
# The in-worker rollout adapters whose update_weights carries a weight sync: module -> class.
ADAPTERS: Final = {
    "verl.workers.rollout.vllm_rollout.vllm_rollout": "ServerAdapter",
    "verl.workers.rollout.sglang_rollout.sglang_rollout": "ServerAdapter",
    "mr_search.cpu.adapter": "HFServerAdapter",
}
# Where each adapter keeps its Ray handle of the engine server (vLLM, SGLang, the CPU backend).
SERVER_ATTRIBUTES: Final = ("server_handle", "server_actor", "_server")
_PATCHED: Final = "_mr_search_fault"


@dataclass(frozen=True)
class Fault:
    action: str
    step: int


def parse(text: str) -> Fault:
    """``engine-kill@2`` -> ``Fault("engine-kill", 2)``; anything else raises ValueError naming the valid forms."""
    match = re.fullmatch(r"\s*([a-z-]+)@(\d+)\s*", text)
    if match is None or match.group(1) not in ACTIONS:
        raise ValueError(
            f"{FAULT_ENV}={text!r} is not <action>@<step>: the actions are {', '.join(ACTIONS)}, the step the one "
            "whose weight sync fails (0: the first sync, at start-up), e.g. engine-kill@2"
        )
    return Fault(match.group(1), int(match.group(2)))


def from_env(env: Mapping[str, str] = os.environ) -> Fault | None:
    """The fault ``MR_SEARCH_FAULT`` asks for, or None when it is unset or empty."""
    text = env.get(FAULT_ENV, "")
    return parse(text) if text.strip() else None


def process_tree(pid: int, proc: Path = Path("/proc")) -> list[int]:
    """``pid``'s descendants (children first), read from ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone since the listing
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state; the name may hold spaces
        children.setdefault(parent, []).append(int(entry.name))
    found, queue = [], list(children.get(pid, []))
    while queue:
        child = queue.pop(0)
        found.append(child)
        queue.extend(children.get(child, []))
    return found


def process_name(pid: int, proc: Path = Path("/proc")) -> str:
    """A process's name as ``ps`` shows it (Ray's and the engines' process titles), or ``?`` once it is gone."""
    try:
        return (proc / str(pid) / "comm").read_text().strip()
    except OSError:
        return "?"


def targets(action: str, server_pid: int, tree: Callable[[int], list[int]] = process_tree) -> tuple[list[int], int]:
    """The processes an action hits and the signal it sends them."""
    if action == "server-kill":
        return [server_pid], signal.SIGKILL
    under = tree(server_pid)
    return (under or [server_pid]), (signal.SIGSTOP if action == "engine-stop" else signal.SIGKILL)


def _own_pid(_actor: Any) -> int:
    return os.getpid()


def strike(adapter: Any, fault: Fault) -> list[int]:
    """Carries out ``fault`` on the engine server ``adapter`` talks to; returns the pids it signalled."""
    import ray

    server = next((getattr(adapter, name) for name in SERVER_ATTRIBUTES if getattr(adapter, name, None)), None)
    if server is None:
        raise RuntimeError(
            f"{FAULT_ENV}: {type(adapter).__name__} holds no engine server handle ({', '.join(SERVER_ATTRIBUTES)})"
        )
    server_pid = ray.get(server.__ray_call__.remote(_own_pid), timeout=60)
    pids, sig = targets(fault.action, server_pid)
    # Printed, not logged: in a vLLM run the worker's logged line never reached the console; its stderr does.
    hit = ", ".join(f"{pid} {process_name(pid)}" for pid in pids)
    name = signal.Signals(sig).name
    print(
        f"{time.strftime('%Y-%m-%d %H:%M:%S')} {FAULT_ENV}={fault.action}@{fault.step}: sending {name} to {hit} "
        f"(engine server pid {server_pid}) in the weight sync after step {fault.step}",
        file=sys.stderr,
        flush=True,
    )
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # already gone
            os.kill(pid, sig)
    time.sleep(0.5)  # let the signals land before the sender goes on
    return pids


def firing(weights: Any, fire: Callable[[], object]) -> Any:
    """``weights`` (a sync or async iterable of named tensors) that calls ``fire()`` once, after the first item."""
    if hasattr(weights, "__aiter__"):

        async def async_items() -> AsyncIterator[Any]:
            fired = False
            async for item in weights:
                yield item
                if not fired:
                    fired = True
                    fire()

        return async_items()

    def items() -> Iterator[Any]:
        iterator = iter(weights)
        for item in iterator:
            yield item
            fire()
            yield from iterator

    return items()


def patch(cls: type, fault: Fault, rank: Callable[[], int] = lambda: int(os.environ.get("RANK", "0"))) -> None:
    """Wraps ``cls.update_weights`` so that rank 0's sync after step ``fault.step`` fires the fault (idempotent)."""
    original = cls.update_weights
    if getattr(original, _PATCHED, None) is not None:
        return

    async def update_weights(self: Any, weights: Iterable[Any], *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("global_steps") == fault.step and rank() == 0:
            weights = firing(weights, lambda: strike(self, fault))
        return await original(self, weights, *args, **kwargs)

    setattr(update_weights, _PATCHED, fault)
    update_weights.__wrapped__ = original  # type: ignore[attr-defined]
    cls.update_weights = update_weights  # type: ignore[method-assign]


def install(fault: Fault) -> None:
    """Patches each rollout adapter as soon as its module is imported."""
    logger.warning("%s=%s@%d: fault injection is on in this process", FAULT_ENV, fault.action, fault.step)
    for module_name, class_name in ADAPTERS.items():

        def on_import(module: ModuleType, class_name: str = class_name) -> None:
            patch(getattr(module, class_name), fault)

        when_imported(module_name, on_import)


def register() -> None:
    """The plugin's hook: installs the fault ``MR_SEARCH_FAULT`` names (a bad value is logged; startup stops on it)."""
    try:
        fault = from_env()
    except ValueError:
        logger.exception("fault injection not installed")
        return
    if fault is not None:
        install(fault)

"""`import verl` registers the estimator at once and the trainer lazily, in a fresh process as Ray workers see it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mr_search.trainer import _AfterImport, _Loader

PROBE = """
import json, sys
import verl
from verl.trainer.ppo import core_algos
state = {
    "estimator": "mr_search" in core_algos.ADV_ESTIMATOR_REGISTRY,
    "trainer_imported_by_plugin": "mr_search.trainer.attempt_trainer" in sys.modules,
}
from verl.trainer.ppo.v1 import get_trainer_cls
trainer = get_trainer_cls("mr_search")
from mr_search import plugin
plugin._done = False
plugin.register()  # a retried plugin import must not raise "already registered"
state["trainer"] = trainer.__module__ + "." + trainer.__qualname__
state["sync_subclass"] = [c.__name__ for c in trainer.__mro__][1]
print(json.dumps(state))
"""


@pytest.mark.slow
def test_import_verl_registers_estimator_and_trainer() -> None:
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    state = json.loads(result.stdout.strip().splitlines()[-1])
    assert state == {
        "estimator": True,
        "trainer_imported_by_plugin": False,
        "trainer": "mr_search.trainer.attempt_trainer.MRSearchTrainer",
        "sync_subclass": "PPOTrainerSync",
    }


def test_after_import_hook_runs_its_callback_once_the_module_has_loaded(tmp_path, monkeypatch) -> None:
    package = tmp_path / "mr_probe_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("VALUE = 41\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[int] = []

    def callback() -> None:
        seen.append(sys.modules["mr_probe_pkg"].VALUE + 1)

    hook = _AfterImport("mr_probe_pkg", callback)
    sys.meta_path.insert(0, hook)
    try:
        import mr_probe_pkg  # noqa: F401

        assert seen == [42]
        assert hook not in sys.meta_path  # one-shot
        assert isinstance(sys.modules["mr_probe_pkg"].__loader__, _Loader)
    finally:
        if hook in sys.meta_path:
            sys.meta_path.remove(hook)
        sys.modules.pop("mr_probe_pkg", None)

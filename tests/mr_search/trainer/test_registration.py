"""`import verl` registers the estimator at once and the trainer lazily, in a fresh process as Ray workers see it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

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


def test_the_trainer_registers_through_the_plugins_one_post_import_mechanism(tmp_path, monkeypatch) -> None:
    import mr_search.trainer as trainer_package
    from mr_search import import_hooks

    package = tmp_path / "mr_probe_v1"
    package.mkdir()
    (package / "__init__.py").write_text("VALUE = 41\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(trainer_package, "_V1_PACKAGE", "mr_probe_v1")
    seen: list[int] = []
    monkeypatch.setattr(trainer_package, "register_now", lambda: seen.append(sys.modules["mr_probe_v1"].VALUE + 1))
    finders = list(sys.meta_path)
    try:
        trainer_package.register()
        assert seen == []
        assert [f for f in sys.meta_path if f not in finders] in ([], [import_hooks._finder])  # no finder of its own
        import mr_probe_v1  # noqa: F401

        assert seen == [42]  # registered once the package has loaded
    finally:
        import_hooks._pending.pop("mr_probe_v1", None)
        sys.modules.pop("mr_probe_v1", None)

"""`import verl` registers the estimator at once and the trainer lazily, in a fresh process as Ray workers see it."""

from __future__ import annotations

import sys

import pytest


@pytest.mark.slow
@pytest.mark.xdist_group("fresh_verl")
def test_import_verl_registers_estimator_and_trainer(fresh_verl: dict) -> None:
    keys = ("estimator", "trainer_imported_by_plugin", "trainer", "sync_subclass")
    state = {key: fresh_verl[key] for key in keys}
    assert state == {
        "estimator": True,
        "trainer_imported_by_plugin": False,
        "trainer": "mr_search.ops.trainer.MRSearchTrainer",
        "sync_subclass": "PPOTrainerSync",
    }


def test_the_trainer_registers_through_the_plugins_one_post_import_mechanism(tmp_path, monkeypatch) -> None:
    import mr_search.ops.trainer_registration as trainer_package
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

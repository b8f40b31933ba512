"""train_grpo_step.sh composes the same trainer command as before its rewrite, for every recorded case.

tests/e2e/fixtures/launcher_cases.json holds what the 405-line launcher (c5b2c7d) printed with DRY_RUN=1, and what it
handed a stand-in trainer in a launch, for the cases of tests/e2e/launcher_cases.py: PRESET embedded/paper/auto x
ROLLOUT_ENGINE default/sglang/vllm/hf/cpu with and without a GPU, knobs, Hydra overrides, bad knobs. The engine's fixed
overrides now come from its config group (``+engine=<engine>``, configs/engine/<engine>.yaml): expanded into the keys
that file sets, every key ends with its old value and the other overrides are the old ones in the old order; and
Hydra composes both commands into the same config. Keys an engine's group gained after the recording (``ADDED``) are
a difference allowed: the new command has them, the old one is compared with them set. So is Hydra's run folder
(``hydra.run.dir``, ``LAUNCHED``), given since the recording: one override, inside the run folder, nothing composed.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml


def _load_cases():
    spec = importlib.util.spec_from_file_location("launcher_cases", Path(__file__).parent / "launcher_cases.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("launcher_cases", module)
    spec.loader.exec_module(module)
    return module


_cases = _load_cases()
CASES, REPO, run_case = _cases.CASES, _cases.REPO, _cases.run_case
FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "launcher_cases.json").read_text())
ENGINE = "+engine="
# Engine keys added since the recording, each with the reason it was added.
ADDED = {
    # SGLang's idle scheduler spins a core otherwise (configs/engine/sglang.yaml)
    "sglang": {"actor_rollout_ref.rollout.engine_kwargs.sglang.sleep_on_idle": True},
}


# Given since the recording: Hydra's record of a launch in its run folder (mr_search/ops/launch.py).
LAUNCHED = "hydra.run.dir="


def _leaves(node: object, prefix: str = "") -> list[tuple[str, object]]:
    if isinstance(node, dict):
        return [pair for key, value in node.items() for pair in _leaves(value, f"{prefix}{key}.")]
    return [(prefix[:-1], node)]


def _engine_pairs(engine: str) -> list[tuple[str, object]]:
    """The keys the engine's group sets that the recorded launcher set too (``ADDED`` left out)."""
    pairs = _leaves(yaml.safe_load((REPO / "configs" / "engine" / f"{engine}.yaml").read_text()))
    return [pair for pair in pairs if pair[0] not in ADDED.get(engine, {})]


def _with_added(config: dict, argv: list[str]) -> dict:
    """``config`` (an old command's) with the ``ADDED`` keys of the engine the new command ``argv`` names."""
    for override in argv:
        if override.startswith(ENGINE):
            for key, value in ADDED.get(override[len(ENGINE) :], {}).items():
                node = config
                *parents, leaf = key.split(".")
                for part in parents:
                    node = node[part]
                node[leaf] = value
    return config


def _pair(override: str) -> tuple[str, object]:
    """(key, value) as Hydra reads ``[+[+]]key=value`` (the value's literal parsed: False == false)."""
    key, value = override.lstrip("+").split("=", 1)
    return key, yaml.safe_load(value) if value else value


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """(interpreter, module and config options), overrides."""
    head = argv.index("verl.trainer.main_ppo") + 3
    return argv[:head], argv[head:]


def _expanded(overrides: list[str]) -> list[tuple[str, object]]:
    pairs: list[tuple[str, object]] = []
    for override in overrides:
        pairs += _engine_pairs(override[len(ENGINE) :]) if override.startswith(ENGINE) else [_pair(override)]
    return pairs


def _assert_same_command(old: list[str], new: list[str]) -> None:
    old_head, old_overrides = _split(old)
    new_head, new_overrides = _split(new)
    launched = [override for override in new_overrides if override.startswith(LAUNCHED)]
    assert not any(override.startswith(LAUNCHED) for override in old_overrides)
    run_dir = next(o for o in new_overrides if o.startswith("trainer.default_local_dir=")).split("=", 1)[1]
    assert [override.split("=", 1)[1].rsplit("/", 1)[0] for override in launched] == [
        run_dir.removesuffix("/checkpoints") + "/hydra"
    ], launched
    new_overrides = [override for override in new_overrides if not override.startswith(LAUNCHED)]
    assert new_head == old_head
    engines = [override[len(ENGINE) :] for override in new_overrides if override.startswith(ENGINE)]
    assert len(engines) == 1, new_overrides
    # Every key ends with the value it had (the last override of a key wins), none more, none less.
    assert dict(_expanded(new_overrides)) == dict(_expanded(old_overrides))
    # The overrides beyond the engine's config group are the old ones, in the old order (a knob that replaces one of
    # the group's values, e.g. SGLANG_ATTENTION_BACKEND, stays where it was).
    rest = [_pair(override) for override in old_overrides]
    for pair in _engine_pairs(engines[0]):
        if pair in rest:
            rest.remove(pair)
    assert [_pair(override) for override in new_overrides if not override.startswith(ENGINE)] == rest


def _composed(argv: list[str], compose_command) -> dict:
    """The config ``argv`` composes into, its placeholders for paths, ports and time stamps filled in."""
    fill = {"<ROOT>": str(REPO), "<TMP>": "/tmp/launcher", "<PORT>": "1234", "<STAMP>": "20260101-000000-1"}
    for placeholder, value in fill.items():
        argv = [arg.replace(placeholder, value) for arg in argv]
    return compose_command(argv)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_launcher_composes_the_recorded_command(case, compose_command):
    old = FIXTURE["cases"][case.name]
    if case.knobs.get("CPU_DTYPE") == "auto":
        from mr_search.cpu.precision import cpu_dtype

        if cpu_dtype() != FIXTURE["cpu_dtype_auto"]:
            pytest.skip(f"recorded on a CPU whose CPU_DTYPE=auto is {FIXTURE['cpu_dtype_auto']}")
    new = run_case(case)
    assert new["returncode"] == old["returncode"], new["notes"]
    # Every line the script said before it says now (an error's message included); it may say more.
    assert not Counter(old["notes"]) - Counter(new["notes"]), new["notes"]
    for key in ("command", "trainer", "command_txt"):
        assert (key in new) == (key in old), key
        if key in old:
            _assert_same_command(old[key], new[key])
    if "command" in old:
        expected = _with_added(_composed(old["command"], compose_command), new["command"])
        assert _composed(new["command"], compose_command) == expected
    if "trainer" in old:
        assert new["trainer_env"] == old["trainer_env"]
        expected = _with_added(_composed(old["trainer"], compose_command), new["trainer"])
        assert _composed(new["trainer"], compose_command) == expected

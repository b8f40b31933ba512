"""scripts/gpu_check.sh before any training: a node that cannot run the GPU path gets the cause and the fix."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu_check.sh"


def _run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHON": sys.executable, "RUN_DIR": str(tmp_path / "run"), **env}
    return subprocess.run(["bash", str(SCRIPT)], env=full, capture_output=True, text=True, timeout=120)


def test_without_a_gpu_it_fails_before_training_with_cause_and_fix(tmp_path: Path) -> None:
    # This machine has no GPU (CI's has none either): nvidia-smi is missing or lists nothing.
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "nvidia-smi").write_text("#!/bin/sh\nexit 9\n")
    (fake_bin / "nvidia-smi").chmod(0o755)
    run = _run(tmp_path, PATH=f"{fake_bin}:{os.environ['PATH']}")
    assert run.returncode == 1
    assert "| preflight | FAIL | no usable GPU" in run.stdout
    assert "cause: no usable GPU" in run.stdout and "fix:" in run.stdout
    assert not (tmp_path / "run").exists(), "nothing is trained or written before the preflight passes"


def test_a_gpu_node_without_the_engine_is_told_what_to_install(tmp_path: Path) -> None:
    # A GPU that nvidia-smi lists and torch can use, but no vllm package: the fix names the requirements file.
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "nvidia-smi").write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 80GB HBM3'\n")
    (fake_bin / "nvidia-smi").chmod(0o755)
    fake_python = tmp_path / "python"
    # torch.cuda.is_available() answers True; every other question goes to the real interpreter.
    fake_python.write_text(
        f'#!/bin/sh\ncase "$2" in *torch.cuda.is_available*) exit 0 ;; esac\nexec "{sys.executable}" "$@"\n'
    )
    fake_python.chmod(0o755)
    run = _run(tmp_path, PATH=f"{fake_bin}:{os.environ['PATH']}", PYTHON=str(fake_python), ROLLOUT_ENGINE="vllm")
    assert run.returncode == 1
    assert "the vllm package is not installed" in run.stdout
    assert "requirements/gpu-vllm.txt" in run.stdout
    assert "or check the engine you have: ROLLOUT_ENGINE=sglang make gpu-check" in run.stdout


# ------------------------------------------------------------------------------------- the launches (dry runs)


def _dry_env(**env: str) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("RETRIEVER_", "RUN_DIR", "GPU_MEMORY"))}
    inherited.pop("ENFORCE_EAGER", None)
    return {**inherited, "PYTHON": sys.executable, "DRY_RUN": "1", **env}


def _launches(output: str) -> list[list[str]]:
    return [shlex.split(line) for line in output.splitlines() if "verl.trainer.main_ppo" in line]


def _value(command: list[str], key: str) -> str:
    values = [arg.split("=", 1)[1] for arg in command if arg.startswith(f"{key}=")]
    assert len(values) == 1, f"{key}: {values}"
    return values[0]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_check_is_one_launch_that_does_only_what_the_check_needs(tmp_path: Path, engine: str) -> None:
    """One launch (steps 1-2, then the resume inside it and step 3): a KV cache sized for the tiny policy, the engine
    without compile or CUDA graphs (verl hands enforce_eager to vLLM, and to SGLang as disable_cuda_graph; SGLang's
    piecewise graphs off too), SGLang without its memory saver for the tiny policy, one retrieval service on a free
    port. Nothing runs in a dry run, and no GPU is needed."""
    run = subprocess.run(
        ["bash", str(SCRIPT), "trainer.val_before_train=False"],
        env=_dry_env(ROLLOUT_ENGINE=engine, RUN_DIR=str(tmp_path / "run")),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (command,) = _launches(run.stdout)
    assert _value(command, "+engine") == engine  # configs/engine/<engine>.yaml
    assert _value(command, "actor_rollout_ref.rollout.gpu_memory_utilization") == "0.15"
    assert _value(command, "actor_rollout_ref.rollout.enforce_eager") == "True"
    assert _value(command, "trainer.default_local_dir") == str(tmp_path / "run" / "checkpoints")
    assert _value(command, "trainer.total_training_steps") == "2"
    assert _value(command, "++mr_search.trainer.resume_steps") == "1"
    assert _value(command, "actor_rollout_ref.actor.fsdp_config.use_torch_compile") == "False"
    assert command[-1] == "trainer.val_before_train=False"
    sglang = "++actor_rollout_ref.rollout.engine_kwargs.sglang"
    if engine == "sglang":
        assert _value(command, f"{sglang}.disable_piecewise_cuda_graph") == "True"
        assert _value(command, f"{sglang}.enable_memory_saver") == "False"
    else:
        assert not any(arg.startswith(sglang) for arg in command)
    url = _value(command, "mr_search.retriever.url")
    assert url.startswith("http://127.0.0.1:") and url != "http://127.0.0.1:8000/retrieve"
    assert not (tmp_path / "run").exists(), "a dry run creates nothing"


def test_resume_restart_is_a_second_launch_in_the_same_folder(tmp_path: Path) -> None:
    run = subprocess.run(
        ["bash", str(SCRIPT)],
        env=_dry_env(RESUME="restart", RUN_DIR=str(tmp_path / "run")),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    first, restart = _launches(run.stdout)
    assert [_value(c, "trainer.total_training_steps") for c in (first, restart)] == ["2", "3"]
    assert not any("resume_steps" in arg for arg in first + restart)
    assert _value(first, "mr_search.retriever.url") == _value(restart, "mr_search.retriever.url"), "one service"
    assert _value(first, "trainer.default_local_dir") == _value(restart, "trainer.default_local_dir")


@pytest.mark.parametrize(("env", "says"), [({"TOTAL_STEPS": "1"}, "TOTAL_STEPS >= 2"), ({"RESUME": "twice"}, "RESUME")])
def test_a_resume_that_cannot_be_shown_stops_naming_the_fix(tmp_path: Path, env: dict, says: str) -> None:
    run = _run(tmp_path, DRY_RUN="1", **env)
    assert run.returncode == 2 and says in run.stderr
    assert not _launches(run.stdout)


def test_the_checks_settings_can_be_overridden(tmp_path: Path) -> None:
    run = subprocess.run(
        ["bash", str(SCRIPT)],
        env=_dry_env(
            RUN_DIR=str(tmp_path / "run"),
            GPU_MEMORY_UTILIZATION="0.4",
            ENFORCE_EAGER="0",
            RETRIEVER_URL="http://10.0.0.5:8000",
            ACTOR_TORCH_COMPILE="1",
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    for command in _launches(run.stdout):
        assert _value(command, "actor_rollout_ref.rollout.gpu_memory_utilization") == "0.4"
        assert _value(command, "actor_rollout_ref.rollout.enforce_eager") == "False"
        assert _value(command, "mr_search.retriever.url") == "http://10.0.0.5:8000/retrieve", "a given URL, as is"
        assert not any("use_torch_compile" in arg for arg in command), "verl's default (compiled) is left as is"


def test_a_torch_compile_setting_that_is_not_0_or_1_stops_naming_both(tmp_path: Path) -> None:
    run = _run(tmp_path, DRY_RUN="1", ACTOR_TORCH_COMPILE="yes")
    assert run.returncode == 2
    assert "ACTOR_TORCH_COMPILE=yes is not valid; use 0" in run.stderr and "or 1" in run.stderr
    assert not _launches(run.stdout)


def test_the_checks_settings_are_verls_own_keys(tmp_path: Path, compose_command) -> None:
    """The printed command composes (as with Hydra's ``--cfg job``) into verl's config with the check's values."""
    run = subprocess.run(
        ["bash", str(SCRIPT)], env=_dry_env(RUN_DIR=str(tmp_path / "run")), capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout + run.stderr
    config = compose_command(_launches(run.stdout)[0])
    rollout, actor = config["actor_rollout_ref"]["rollout"], config["actor_rollout_ref"]["actor"]
    assert rollout["enforce_eager"] is True and rollout["gpu_memory_utilization"] == 0.15
    assert actor["fsdp_config"]["use_torch_compile"] is False, "the key verl's FSDP engine reads (entropy compile)"
    assert config["mr_search"]["trainer"]["resume_steps"] == 1


def test_two_checks_side_by_side_get_their_own_port_and_run_folder() -> None:
    """Two checks started at once on one host, one per GPU, with no RETRIEVER_URL and no RUN_DIR: no collision."""
    checks = [
        subprocess.Popen(
            ["bash", str(SCRIPT)],
            env=_dry_env(CUDA_VISIBLE_DEVICES=gpu),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for gpu in ("0", "1")
    ]
    outputs = [check.communicate(timeout=120) for check in checks]
    assert [check.returncode for check in checks] == [0, 0], outputs
    firsts = [_launches(out)[0] for out, _ in outputs]
    urls = {_value(command, "mr_search.retriever.url") for command in firsts}
    folders = {_value(command, "trainer.default_local_dir") for command in firsts}
    # Each check picks a free port of its own, not 8000; two dry runs hold none, so their picks may meet by chance (a
    # real start retries on a taken port: tests/scripts_lib/test_retrieval_lib.py). Run folders never meet ($$).
    assert all(re.fullmatch(r"http://127\.0\.0\.1:\d+/retrieve", url) for url in urls), urls
    assert "http://127.0.0.1:8000/retrieve" not in urls, urls
    assert len(folders) == 2, folders
    assert not any(Path(folder).parent.exists() for folder in folders), "a dry run creates no run folder"


def test_steps_is_total_steps_as_in_the_training_script(tmp_path: Path) -> None:
    # One name per knob across the scripts: STEPS (the old name) stops at once, naming TOTAL_STEPS.
    run = _run(tmp_path, STEPS="4")
    assert run.returncode == 2
    assert "use TOTAL_STEPS=4" in run.stderr
    assert not (tmp_path / "run").exists()
    # TOTAL_STEPS itself reaches the launch with the in-launch resume: the one-launch check's dry run.
    run = subprocess.run(
        ["bash", str(SCRIPT)],
        env=_dry_env(TOTAL_STEPS="4", RUN_DIR=str(tmp_path / "run")),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (command,) = _launches(run.stdout)
    assert _value(command, "trainer.total_training_steps") == "4"
    assert _value(command, "++mr_search.trainer.resume_steps") == "1"


@pytest.mark.parametrize(
    ("env", "warms"),
    [
        ({"ROLLOUT_ENGINE": "sglang"}, True),
        ({"ROLLOUT_ENGINE": "vllm"}, False),
        ({"ROLLOUT_ENGINE": "sglang", "ENGINE_WARM": "0"}, False),
    ],
)
def test_sglang_s_first_use_kernels_are_built_in_the_background(tmp_path: Path, env: dict, warms: bool) -> None:
    """With SGLang the check builds the engine's JIT kernels beside the launch (mr_search.ops.engine_warm); a dry run
    names the command and starts nothing."""
    run = subprocess.run(
        ["bash", str(SCRIPT)],
        env=_dry_env(RUN_DIR=str(tmp_path / "run"), MODEL_PATH="/models/tiny", **env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [line for line in run.stdout.splitlines() if "engine warm:" in line]
    if warms:
        (line,) = lines
        assert line.endswith("-m mr_search.ops.engine_warm --model /models/tiny")
    else:
        assert not lines
    assert not (tmp_path / "run").exists()


def test_the_default_engine_is_sglang(tmp_path: Path) -> None:
    """`make gpu-check` with nothing set checks SGLang: the paper's engine, the paper preset's default and the engine
    of the offline set (its wall time in docs/gpu.md is SGLang's)."""
    env = _dry_env(RUN_DIR=str(tmp_path / "run"))
    env.pop("ROLLOUT_ENGINE", None)
    run = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    (command,) = _launches(run.stdout)
    assert _value(command, "+engine") == "sglang"

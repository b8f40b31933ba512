"""train_grpo_step.sh end to end: knob handling (dry runs), and real MR-Search training on the embedded default."""

from __future__ import annotations

import contextlib
import http.server
import json
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]

# --------------------------------------------------------------------------------------------- knobs (dry runs)


def _dry(run_script, tmp_path, *overrides: str, **knobs: str) -> list[str]:
    run = run_script(tmp_path / "run", *overrides, DRY_RUN=1, **knobs)
    assert run.returncode == 0, run.output
    assert not (tmp_path / "run").exists(), "a dry run must not create the run folder"
    # The command is stdout's last line; notes go to stderr (run.output: stdout, then stderr).
    return shlex.split(next(line for line in run.output.splitlines() if "verl.trainer.main_ppo" in line))


def test_no_gpu_and_no_settings_select_the_embedded_cpu_run(run_script, tmp_path, compose_command):
    command = _dry(run_script, tmp_path)
    assert "--config-name=mr_search_embedded" in command
    assert "algorithm.adv_estimator=mr_search" in command
    # The CPU backend's settings come from its config group (configs/engine/cpu.yaml), its rollout name included.
    assert "+engine=cpu" in command
    config = compose_command(command)
    assert config["trainer"]["device"] == "cpu"
    assert config["actor_rollout_ref"]["rollout"]["name"] == "mr_hf"
    assert f"trainer.default_local_dir={tmp_path / 'run' / 'checkpoints'}" in command
    assert "trainer.resume_mode=auto" in command


def test_attempts_1_is_the_same_method_at_k1(run_script, tmp_path):
    command = _dry(run_script, tmp_path, ATTEMPTS="1")
    assert "algorithm.adv_estimator=mr_search" in command  # the same estimator: a comparison differs in K alone
    assert "mr_search.episode.attempts=1" in command
    grpo = _dry(run_script, tmp_path, ATTEMPTS="1", ADV_ESTIMATOR="grpo")  # Search-R1's own estimator, on request
    assert "algorithm.adv_estimator=grpo" in grpo


def test_val_attempts_sets_the_validation_k_only(run_script, tmp_path, compose_command):
    command = _dry(run_script, tmp_path, ATTEMPTS="1", VAL_ATTEMPTS="3")
    episode = compose_command(command)["mr_search"]["episode"]
    assert (episode["attempts"], episode["val_attempts"]) == (1, 3)
    bad = run_script(tmp_path / "run", DRY_RUN="1", VAL_ATTEMPTS="0")
    assert bad.returncode != 0 and "VAL_ATTEMPTS=0 is not valid" in bad.output


def test_gamma_sets_the_attempt_discount_only(run_script, tmp_path):
    """GAMMA is the attempt-level estimator's discount; verl's algorithm.gamma (GAE's discount) is left alone."""
    command = _dry(run_script, tmp_path, GAMMA="0")
    assert "mr_search.advantage.gamma=0" in command
    assert not any(arg.startswith("algorithm.gamma=") for arg in command)


def test_a_given_model_on_cpu_keeps_the_embedded_sizes(run_script, tmp_path):
    command = _dry(run_script, tmp_path, MODEL_PATH="/models/mine", TRAIN_FILE="/data/train.parquet")
    assert "--config-name=mr_search_embedded" in command
    assert "actor_rollout_ref.model.path=/models/mine" in command
    assert "data.train_files=/data/train.parquet" in command


def test_paper_preset_knobs_and_overrides_last(run_script, tmp_path, compose_command):
    command = _dry(
        run_script,
        tmp_path,
        "trainer.save_freq=7",
        PRESET="paper",
        MODEL_PATH="/models/qwen",
        GROUP_SIZE="8",
        NNODES="2",
    )
    assert "--config-name=mr_search_paper" in command
    assert not any(arg.startswith("trainer.rollout_data_dir=") for arg in command), "no dumps by default on GPUs"
    assert "+engine=sglang" in command
    assert compose_command(command)["actor_rollout_ref"]["rollout"]["name"] == "sglang"
    assert "actor_rollout_ref.model.path=/models/qwen" in command
    assert "actor_rollout_ref.rollout.n=8" in command
    assert "trainer.nnodes=2" in command and "++ray_kwargs.ray_init.address=auto" in command
    assert command[-1] == "trainer.save_freq=7"


def test_hf_engine_serves_the_cpu_backends_rollout_on_verls_gpu_platform(run_script, tmp_path, compose_command):
    """One GPU without SGLang: the mr_hf rollout, sdpa, no padding removal, and none of the CPU platform's settings."""
    command = _dry(run_script, tmp_path, PRESET="embedded", ROLLOUT_ENGINE="hf")
    assert "--config-name=mr_search_embedded" in command and "+engine=hf" in command
    assert not any(arg.startswith(("trainer.device=", "++ray_kwargs.ray_init.num_gpus=")) for arg in command)
    config = compose_command(command)
    assert config["actor_rollout_ref"]["model"]["override_config"]["attn_implementation"] == "sdpa"
    assert config["actor_rollout_ref"]["model"]["use_remove_padding"] is False
    assert "num_gpus" not in config["ray_kwargs"]["ray_init"]
    assert config["trainer"]["device"] == "cuda"  # verl's own platform: trainer and rollout on the GPU
    assert config["trainer"]["n_gpus_per_node"] == 1
    assert config["actor_rollout_ref"]["rollout"]["name"] == "mr_hf"
    assert config["actor_rollout_ref"]["rollout"]["tensor_model_parallel_size"] == 1


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
@pytest.mark.parametrize("preset", ["embedded", "paper"])
def test_engine_commands_pass_verls_validation(run_script, tmp_path, compose_command, engine, preset):
    """What a GPU node runs: verl's own async server for the engine; without flash_attn, sdpa and no padding removal;
    SGLang with the backends that ran here (verl's default, flashinfer, needs nvcc)."""
    command = _dry(
        run_script,
        tmp_path,
        PRESET=preset,
        ROLLOUT_ENGINE=engine,
        USE_REMOVE_PADDING="0",
        MODEL_PATH="/models/m",
        GPU_MEMORY_UTILIZATION="0.4",
    )
    assert f"+engine={engine}" in command
    assert "++actor_rollout_ref.model.override_config.attn_implementation=sdpa" in command
    # SGLANG_MEMORY_SAVER=auto with no GPU and no model read (a dry run): the saver on, verl's default.
    assert not any("free_cache_engine" in arg or "enable_memory_saver" in arg for arg in command)
    config = compose_command(command)
    rollout = config["actor_rollout_ref"]["rollout"]
    sglang = {
        "attention_backend": "triton",
        "sampling_backend": "pytorch",
        "grammar_backend": "none",
        "sleep_on_idle": True,
    }
    assert rollout["engine_kwargs"]["sglang"] == (sglang if engine == "sglang" else {})
    assert rollout["name"] == engine and rollout["gpu_memory_utilization"] == 0.4
    assert config["actor_rollout_ref"]["model"]["use_remove_padding"] is False
    assert config["trainer"]["device"] == "cuda"
    assert rollout["skip_tokenizer_init"] is False, "SGLang needs its tokenizer to stop at </search>"
    assert rollout["free_cache_engine"] is True


@pytest.mark.parametrize(
    ("knobs", "mini"),
    [
        ({"PRESET": "paper", "TRAIN_BATCH_SIZE": "16"}, "16"),  # the preset's 32 > 16: verl would stop at start-up
        ({"PRESET": "paper", "TRAIN_BATCH_SIZE": "64"}, None),  # the paper's own step: the preset's 32 stands
        ({"PRESET": "paper", "TRAIN_BATCH_SIZE": "16", "PPO_MINI_BATCH_SIZE": "8"}, "8"),  # a given one is kept
        ({"PRESET": "embedded", "TRAIN_BATCH_SIZE": "2"}, "2"),
    ],
)
def test_a_step_smaller_than_the_presets_mini_batch_is_one_update(run_script, tmp_path, knobs, mini):
    run = run_script(tmp_path / "run", DRY_RUN="1", **knobs)
    assert run.returncode == 0, run.output
    command = shlex.split(next(line for line in run.output.splitlines() if "verl.trainer.main_ppo" in line))
    minis = [arg.split("=", 1)[1] for arg in command if arg.startswith("actor_rollout_ref.actor.ppo_mini_batch_size=")]
    assert minis == ([mini] if mini else [])
    fitted = mini is not None and "PPO_MINI_BATCH_SIZE" not in knobs
    assert ("one update a step" in run.output) == fitted


def test_a_missing_engine_fails_before_ray_naming_the_package(run_script, tmp_path):
    run = run_script(
        tmp_path / "run",
        PRESET="embedded",
        ROLLOUT_ENGINE="vllm",
        MODEL_PATH="/m",
        TRAIN_FILE="/t",
        VAL_FILE="/v",
        timeout=60,
    )
    assert run.returncode != 0
    assert "needs the vllm package" in run.output and "requirements/gpu-vllm.txt" in run.output
    assert "ray" not in run.output.lower()


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"ROLLOUT_ENGINE": "trt"}, "use sglang, vllm, cpu or hf"),
        ({"ATTEMPTS": "two"}, "ATTEMPTS=two is not valid"),
        ({"PRESET": "huge"}, "use auto, embedded or paper"),
        ({"ROLLOUT_ENGINE": "vllm", "USE_REMOVE_PADDING": "maybe"}, "use auto, 1 or 0"),
        ({"NNODES": "two"}, "NNODES=two is not valid"),
        ({"NNODES": "0"}, "NNODES=0 is not valid"),
        ({"TRAIN_BATCH_SIZE": "16q"}, "TRAIN_BATCH_SIZE=16q is not valid"),
    ],
)
def test_bad_knobs_fail_with_the_valid_choices(run_script, tmp_path, knobs, message):
    run = run_script(tmp_path / "run", DRY_RUN="1", **knobs)
    assert run.returncode != 0
    assert message in run.output


def _retriever_url(command: list[str]) -> str:
    return next(arg for arg in command if arg.startswith("mr_search.retriever.url=")).split("=", 1)[1]


def test_a_service_it_starts_gets_a_free_port_and_a_given_url_is_used_as_is(run_script, tmp_path):
    """Two embedded runs side by side on one host must not meet on one port: without RETRIEVER_URL the service the
    script starts gets a port of its own (not 8000); a given URL is used as is; the paper preset starts nothing and
    keeps the documented http://127.0.0.1:8000. The pick is the kernel's, drawn at random, and a dry run holds no port,
    so two picks in a row may meet by chance (CI saw it once): three must not all meet. A port taken between the pick
    and the bind is retried: tests/scripts_lib/test_retrieval_lib.py."""
    urls = [_retriever_url(_dry(run_script, tmp_path / str(i), PRESET="embedded", RETRIEVER_URL="")) for i in range(3)]
    assert "http://127.0.0.1:8000/retrieve" not in urls, urls
    assert all(re.fullmatch(r"http://127\.0\.0\.1:\d+/retrieve", url) for url in urls), urls
    assert len(set(urls)) >= 2, urls
    given = _dry(run_script, tmp_path, PRESET="embedded", RETRIEVER_URL="http://10.1.2.3:9000/")
    assert _retriever_url(given) == "http://10.1.2.3:9000/retrieve"
    paper = _dry(run_script, tmp_path, PRESET="paper", MODEL_PATH="/m", RETRIEVER_URL="")
    assert _retriever_url(paper) == "http://127.0.0.1:8000/retrieve"


def test_enforce_eager_is_passed_to_the_engine_and_checked(run_script, tmp_path):
    command = _dry(run_script, tmp_path, PRESET="paper", MODEL_PATH="/m", ENFORCE_EAGER="1")
    assert "actor_rollout_ref.rollout.enforce_eager=True" in command
    unset = _dry(run_script, tmp_path, PRESET="paper", MODEL_PATH="/m")
    assert not any(arg.startswith("actor_rollout_ref.rollout.enforce_eager") for arg in unset), "empty: the config's"
    run = run_script(tmp_path / "run", DRY_RUN="1", ENFORCE_EAGER="yes")
    assert run.returncode != 0 and "ENFORCE_EAGER=yes is not valid" in run.output


@pytest.mark.parametrize(("saver", "off"), [("0", True), ("1", False), ("auto", False)])
def test_sglang_memory_saver_knob(run_script, tmp_path, saver, off):
    """0: the engine keeps its memory (nothing for verl to release); 1: verl's default; auto: decided at start-up
    (mr_search/ops/gpu_fit.py; a dry run reads no model, so on) and said on one line. The inputs it decides from:
    tests/mr_search/ops/test_launch.py."""
    run = run_script(tmp_path / "run", DRY_RUN="1", PRESET="paper", ROLLOUT_ENGINE="sglang", SGLANG_MEMORY_SAVER=saver)
    assert run.returncode == 0, run.output
    command = shlex.split(next(line for line in run.output.splitlines() if "verl.trainer.main_ppo" in line))
    assert ("actor_rollout_ref.rollout.free_cache_engine=False" in command) == off
    assert ("++actor_rollout_ref.rollout.engine_kwargs.sglang.enable_memory_saver=False" in command) == off
    assert ("SGLANG_MEMORY_SAVER=auto -> 1, " in run.output) == (saver == "auto")
    bad = run_script(tmp_path / "run", DRY_RUN="1", PRESET="paper", ROLLOUT_ENGINE="sglang", SGLANG_MEMORY_SAVER="2")
    assert bad.returncode != 0 and "use auto, 0 or 1" in bad.output


def test_entropy_coeff_sets_the_actors_entropy_bonus(run_script, tmp_path, compose_command):
    """ENTROPY_COEFF: a random-weight policy earns no reward, so only a bonus makes its updates move the weights."""
    assert not any(a.startswith("actor_rollout_ref.actor.entropy_coeff=") for a in _dry(run_script, tmp_path))
    command = _dry(run_script, tmp_path, PRESET="paper", ROLLOUT_ENGINE="sglang", ENTROPY_COEFF="0.001")
    assert "actor_rollout_ref.actor.entropy_coeff=0.001" in command
    config = compose_command(command)
    assert config["actor_rollout_ref"]["actor"]["entropy_coeff"] == 0.001


def test_the_command_composes_into_the_config_the_trainer_gets(run_script, tmp_path, script_env):
    """The printed command, with Hydra's ``--cfg job``, gives the config main_ppo would run with, from a folder
    outside the repository (the suite's one launch of main_ppo's command line: the other tests compose their commands,
    and the presets, in process)."""
    command = _dry(run_script, tmp_path, ATTEMPTS="1", GAMMA="0.5", TOTAL_STEPS="3")
    printed = subprocess.run(
        [*command, "--cfg", "job"], cwd=tmp_path, env=script_env, capture_output=True, text=True, timeout=180
    )
    assert printed.returncode == 0, printed.stderr[-3000:]
    config = yaml.safe_load(printed.stdout[printed.stdout.index("actor_rollout_ref:") :])
    assert config["mr_search"]["episode"]["attempts"] == 1
    assert config["mr_search"]["advantage"]["gamma"] == 0.5
    assert config["trainer"]["total_training_steps"] == 3
    assert config["trainer"]["device"] == "cpu"
    assert config["actor_rollout_ref"]["rollout"]["agent"]["default_agent_loop"] == "mr_search"
    assert config["trainer"]["v1"]["trainer_mode"] == "mr_search"


UPDATE_OOM = """Traceback (most recent call last):
  File "verl/workers/fsdp_workers.py", line 700, in update_actor
    metrics = self.actor.update_policy(data=data)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.28 GiB."""


def test_a_failed_training_names_its_cause_and_the_log(run_script, tmp_path, port_answers):
    """When the trainer fails, the script prints mr_search.ops.diagnosis's reading of the log (cause and fix) and the
    log's path, and exits non-zero. A stand-in for $PYTHON plays a trainer that runs out of memory in the update."""
    python = tmp_path / "python"
    python.write_text(
        "#!/usr/bin/env bash\n"
        f'[[ "$1 $2" == "-m verl.trainer.main_ppo" ]] && {{ cat {tmp_path / "oom.log"}; exit 3; }}\n'
        f'exec {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    (tmp_path / "oom.log").write_text(UPDATE_OOM + "\n")
    for name in ("train.parquet", "val.parquet"):
        (tmp_path / name).write_text("")
    with _health_server() as url:
        run = run_script(
            tmp_path / "run",
            PYTHON=str(python),
            PRESET="embedded",
            ROLLOUT_ENGINE="cpu",
            MODEL_PATH=str(tmp_path / "model"),
            TRAIN_FILE=str(tmp_path / "train.parquet"),
            VAL_FILE=str(tmp_path / "val.parquet"),
            RETRIEVER_URL=url,
            timeout=120,
        )
    assert run.returncode == 1, run.output[-3000:]
    assert "cause: out of GPU memory in the actor update" in run.output
    assert f"training failed (exit 3); log: {run.run_dir / 'train.log'}" in run.output
    assert "torch.OutOfMemoryError" in (run.run_dir / "train.log").read_text()


@contextlib.contextmanager
def _health_server() -> Iterator[str]:
    """A stand-in retrieval service: GET /health answers 200."""

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# ------------------------------------------------------------------------------ real training (slow, with Ray)


def _metric(step: dict[str, float], suffix: str) -> float:
    matches = [value for key, value in step.items() if key.endswith(suffix)]
    assert matches, f"no metric ending in {suffix!r}; logged: {sorted(step)}"
    return float(matches[0])


# `make test` trains these runs on the warm start at 0.3 of the default's steps (MR_SEARCH_WARMSTART_SCALE): on 50 dev
# questions, 4 samples each at temperature 1, it answered right 2.5% of the time at attempt 1 and 16% of the questions
# got unequal EM rewards at some attempt (at 0.4: 4% and 30%; the full warm start: 15.6% and 42%; `python -m
# mr_search_embedded.warmstart.probe --model <warm start> --samples 4 --questions 25`). The test run samples 6
# questions x 4 and adds Search-R1's format score (an answer that is well-formed but wrong earns 0.1; an attempt
# without one earns 0), so that some rewards differ within a group in every step with margin (an all-equal step has
# zero advantages): in a clean run at 0.3, 17-83% of the meta-episodes had a non-zero advantage at each attempt of
# steps 1-3 (at 0.4 and 8 questions: 12-75%). The advantages must be non-zero.
TEST_RUN = ("mr_search.reward.format_score=0.1",)
TEST_KNOBS = {"TRAIN_BATCH_SIZE": "6", "PPO_MINI_BATCH_SIZE": "6", "GROUP_SIZE": "4"}


@pytest.fixture(scope="module")
def embedded_run(run_script, tmp_path_factory, free_port):
    port = free_port()
    run_dir = tmp_path_factory.mktemp("e2e") / "run"
    url = f"http://127.0.0.1:{port}"
    run = run_script(run_dir, *TEST_RUN, RETRIEVER_URL=url, TOTAL_STEPS="2", timeout=900, **TEST_KNOBS)
    return run, port


@pytest.mark.slow
@pytest.mark.xdist_group("embedded_run")  # the three tests share the module's runs: one worker under pytest-xdist
def test_embedded_run_trains_mr_search_for_real(embedded_run, port_answers):
    run, port = embedded_run
    assert run.returncode == 0, run.output[-6000:]
    # Ray's worker processes may still print (progress bars) after the script's last lines: look for the line.
    assert f"Run folder: {run.run_dir}" in run.output, "the script names its run folder at the end"
    steps = run.steps()
    assert sorted(steps) == [1, 2]
    for step in steps.values():
        for k in (1, 2, 3):  # EM at every attempt, logged per step
            assert 0.0 <= _metric(step, f"attempt_{k}/reward_mean") <= 1.0
    # ... and shown per step with the reflection gain (EM@3 - EM@1) in the run's summary.
    summary = (run.run_dir / "summary.md").read_text()
    assert "| step | EM@1 | EM@2 | EM@3 | gain |" in summary and summary.count("\n| ") == 3
    # Rewards differ within groups, so advantages and gradients are real.
    assert any(_metric(s, "critic/advantages/max") > _metric(s, "critic/advantages/min") for s in steps.values())
    assert any(_metric(s, "actor/grad_norm") > 0 for s in steps.values())
    # Weights reach the rollout: after an update, the rollout's log-probs still match the trainer's.
    for step in steps.values():
        assert _metric(step, "rollout_corr/k3_kl") < 0.01
        assert _metric(step, "training/rollout_probs_diff_mean") < 0.01
    assert (run.run_dir / "checkpoints" / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    # Hydra's record of the launch lies in the run folder, named as its metrics file is.
    recorded = [path.parent.parent.name for path in (run.run_dir / "hydra").glob("*/.hydra/config.yaml")]
    assert recorded == [path.stem for path in (run.run_dir / "metrics").glob("*.jsonl")], recorded
    assert not port_answers(port), "the retrieval service the script started must be stopped"


# The short-context ablation (context=previous_attempt) rides on the restart: one launch serves both tests, since each
# launch costs about two minutes of verl's start-up on 2 cores. A restart must take any setting as given.
SHORT_CONTEXT = ("mr_search.episode.context=previous_attempt",)


@pytest.fixture(scope="module")
def restarted_run(embedded_run, run_script):
    """The embedded run continued from its last checkpoint for one more step (3), with the short context."""
    first, port = embedded_run
    assert first.returncode == 0, first.output[-6000:]
    url = f"http://127.0.0.1:{port}"
    return run_script(
        first.run_dir, *TEST_RUN, *SHORT_CONTEXT, RETRIEVER_URL=url, TOTAL_STEPS="3", timeout=900, **TEST_KNOBS
    )


def _newest_launch_steps(run) -> list[int]:
    newest = sorted((run.run_dir / "metrics").glob("*.jsonl"))[-1]
    return [json.loads(line)["step"] for line in newest.read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.xdist_group("embedded_run")
def test_restart_continues_from_the_last_checkpoint(restarted_run):
    run = restarted_run
    assert run.returncode == 0, run.output[-6000:]
    assert _newest_launch_steps(run) == [3], "only the missing step"
    assert sorted(run.steps()) == [1, 2, 3]
    assert (run.run_dir / "checkpoints" / "latest_checkpointed_iteration.txt").read_text().strip() == "3"


@pytest.mark.slow
def test_an_engine_that_dies_in_a_weight_sync_ends_the_run_at_once_naming_the_checkpoint(
    run_script, tmp_path, free_port, port_answers
):
    """MR_SEARCH_FAULT=engine-kill@1 kills the CPU engine's server in the weight sync after step 1, its checkpoint just
    saved: the run ends on the dead server within seconds, not at the sync's 600 s limit, with the cause, the call and
    the checkpoint the same command resumes from (a resume from a checkpoint: the restart test above; after a fault on
    vLLM and SGLang: docs/gpu.md#faults), and the retrieval service it started is stopped."""
    port = free_port()
    run = run_script(
        tmp_path / "fault",
        "mr_search.trainer.weight_sync_timeout_s=600",
        RETRIEVER_URL=f"http://127.0.0.1:{port}",
        MR_SEARCH_FAULT="engine-kill@1",
        TOTAL_STEPS="1",
        SAVE_FREQ="1",
        TRAIN_BATCH_SIZE="2",
        PPO_MINI_BATCH_SIZE="2",
        GROUP_SIZE="2",
        timeout=900,
    )
    ended = datetime.now()
    assert run.returncode != 0, run.output[-6000:]
    struck = re.search(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) MR_SEARCH_FAULT=engine-kill@1: sending SIGKILL", run.output)
    assert struck, run.output[-6000:]
    # Well inside the sync's 600 s limit: teardown and the diagnosis on a busy 2-core box may take minutes.
    assert (ended - datetime.fromisoformat(struck.group(1))).total_seconds() < 300, "ended on the dead server"
    checkpoint = run.run_dir / "checkpoints"
    assert (
        "rollout engine lost in the weight sync after step 1: it raised ActorDiedError: The actor died unexpectedly"
        in run.output
    )
    assert "; the engine server of replica 0 is dead (ActorDiedError: " in run.output
    assert re.search(r"sending SIGKILL to \d+ \S+ \(engine server pid \d+\)", run.output), "the process hit, named"
    resumes = f"The last checkpoint is step 1 ({checkpoint / 'global_step_1'}): the same command resumes from it"
    assert resumes in run.output
    assert "cause: the rollout engine died or hung in a call between generations" in run.output
    assert (checkpoint / "latest_checkpointed_iteration.txt").read_text().strip() == "1"
    assert not port_answers(port), "the retrieval service the script started must be stopped"


@pytest.mark.slow
def test_k1_baseline_runs_through_the_same_script_and_validates_at_another_k(
    run_script, tmp_path, free_port, port_answers
):
    """ATTEMPTS=1 trains the K = 1 baseline; VAL_ATTEMPTS=4 validates it before step 1 through the rollout engine
    (verl's validation pass: greedy, n = 1, every attempt scored) at K = 4, a K it was not trained with: EM at every
    attempt per data source, and the pass timed (what scripts/eval_engine.sh runs alone, with nothing trained)."""
    port = free_port()
    run = run_script(
        tmp_path / "k1",
        "trainer.val_before_train=True",
        "data.val_max_samples=4",
        RETRIEVER_URL=f"http://127.0.0.1:{port}",
        ATTEMPTS="1",
        VAL_ATTEMPTS="4",
        TOTAL_STEPS="1",
        timeout=900,
    )
    assert run.returncode == 0, run.output[-6000:]
    assert "algorithm.adv_estimator=mr_search" in (run.run_dir / "command.txt").read_text()
    steps = run.steps()
    assert sorted(steps) == [0, 1], "the validation pass before step 1 (logged at step 0), then step 1"
    summary = (run.run_dir / "summary.md").read_text()
    assert "| step | EM@1 | reward |" in summary, summary
    # One attempt per meta-episode, as the loop counts them (the rollout text cannot tell: the warm start trains on
    # environment text too, so the sampled policy may itself write a reflection prompt's words).
    assert steps[1]["mr_search/attempts_present"] == 1.0
    assert "mr_search/em_at_2" not in steps[1]
    rollouts = [json.loads(line) for line in (run.run_dir / "rollouts" / "1.jsonl").read_text().splitlines()]
    assert rollouts
    # The validation pass at K = 4: EM per attempt per data source, 4 questions x val n 1 meta-episodes, timed.
    validation = steps[0]
    em = {key: value for key, value in validation.items() if key.startswith("val-aux/") and "/em_at_" in key}
    assert {key.split("/em_at_")[1] for key in em} == {f"{k}/mean@1" for k in (1, 2, 3, 4)}
    assert all(0.0 <= value <= 1.0 for value in em.values())
    assert validation["val-speed/meta_episodes"] == 4
    assert validation["val-speed/meta_episodes_per_s"] == pytest.approx(4 / validation["val-speed/seconds"])
    assert "validation before step 1: 4 meta-episodes in" in summary
    assert not port_answers(port), "the retrieval service the script started must be stopped"


@pytest.mark.slow
@pytest.mark.xdist_group("embedded_run")
def test_the_short_context_ablation_trains_on_policy(restarted_run):
    """context=previous_attempt: each meta-episode is trained as one row per context the sampler saw, so the trainer's
    log-probs are the sampler's. On the project's 2-core machine (bf16) a fresh run gave rollout_corr/k3_kl 1.1e-5 and
    1.5e-5 at steps 1 and 2, the full-context run 8.1e-6 and 6.6e-6; scoring the whole meta-episode as one sequence
    instead (the off-policy layout once refused) gave 0.009 and 0.012 at the same settings: one step tells the two
    layouts apart, so one step is run (the restart's, step 3)."""
    run = restarted_run
    assert run.returncode == 0, run.output[-6000:]
    assert _newest_launch_steps(run) == [3]
    step = run.steps()[3]
    # verl stores a meta-episode's rows as {uid}_{session}_{row}: 6 questions x 4 meta-episodes, 2 rows each at K = 3
    # (attempts 1-2 saw the whole context, attempt 3 only the question and attempt 2).
    keys = [json.loads(line)["uid"] for line in (run.run_dir / "rollouts" / "3.jsonl").read_text().splitlines()]
    episodes = {key.rsplit("_", 1)[0] for key in keys}
    assert len(episodes) == 24 and len(keys) > len(episodes)
    assert _metric(step, "rollout_corr/k3_kl") < 1e-3
    assert _metric(step, "mr_search/attempt_1/present_frac") == 1.0  # per meta-episode, not per row
    assert _metric(step, "actor/grad_norm") > 0


def test_eval_engine_composes_a_validation_only_launch_at_k_eval(run_script, tmp_path, script_env, compose_command):
    """scripts/eval_engine.sh: train_grpo_step.sh at K = K_EVAL with verl's validation pass only (nothing trained),
    K_EVAL x TOKENS_PER_ATTEMPT of response budget and MAX_SAMPLES questions. The pass itself, through the engine at a
    K the policy was not trained with, runs for real in the K = 1 baseline's launch above (VAL_ATTEMPTS)."""
    env = {
        **script_env,
        "RUN_DIR": str(tmp_path / "eval"),
        "K_EVAL": "4",
        "TOKENS_PER_ATTEMPT": "342",
        "MAX_SAMPLES": "4",
        "DRY_RUN": "1",
    }
    script = REPO / "scripts" / "eval_engine.sh"
    run = subprocess.run(["bash", str(script)], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, (run.stdout + run.stderr)[-6000:]
    command = shlex.split(next(line for line in run.stdout.splitlines() if "verl.trainer.main_ppo" in line))
    config = compose_command(command)
    assert config["trainer"]["val_only"] is True and config["trainer"]["val_before_train"] is True
    assert config["mr_search"]["episode"]["attempts"] == 4
    assert config["data"]["max_response_length"] == 4 * 342 and config["data"]["val_max_samples"] == 4
    assert not (tmp_path / "eval").exists(), "a dry run makes no run folder"


def test_eval_engine_rejects_bad_knobs(tmp_path, script_env):
    script = REPO / "scripts" / "eval_engine.sh"
    for knobs, message in (({"K_EVAL": "0"}, "K_EVAL=0"), ({"MAX_SAMPLES": "few"}, "MAX_SAMPLES=few")):
        run = subprocess.run(["bash", str(script)], env={**script_env, **knobs}, capture_output=True, text=True)
        assert run.returncode == 2 and message in run.stderr


FP32 = "{param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}"
FP32_MIXED = f"++actor_rollout_ref.actor.fsdp_config.mixed_precision={FP32}"


@pytest.mark.parametrize(("dtype", "fp32"), [("float32", True), ("bfloat16", False)])
def test_cpu_dtype_sets_the_rollouts_and_the_updates_precision(run_script, tmp_path, dtype, fp32):
    """float32: the CPU engine's rollout and FSDP's compute both in float32 (no bf16 autocast); bfloat16: verl's own."""
    command = _dry(run_script, tmp_path, CPU_DTYPE=dtype)
    assert ("actor_rollout_ref.rollout.dtype=float32" in command) == fp32
    assert (FP32_MIXED in command) == fp32


def test_cpu_dtype_auto_follows_the_cpus_native_bf16(run_script, tmp_path, script_env):
    from mr_search.cpu.precision import cpu_has_native_bf16

    native = cpu_has_native_bf16()
    command = _dry(run_script, tmp_path)  # CPU_DTYPE unset: auto
    assert (FP32_MIXED in command) == (not native)
    bad = run_script(tmp_path / "bad", DRY_RUN="1", CPU_DTYPE="fp8")
    assert bad.returncode != 0 and "CPU_DTYPE=fp8 is not valid; use auto, bfloat16 or float32" in bad.output


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({}, "the paper preset needs TRAIN_FILE (verl parquet): make them with `python scripts/prepare_data.py"),
        ({"TRAIN_FILE": "/nowhere/train.parquet"}, "TRAIN_FILE=/nowhere/train.parquet does not exist; make it with"),
    ],
)
def test_the_paper_preset_names_the_data_it_needs_before_ray(run_script, tmp_path, files, message):
    run = run_script(tmp_path / "run", PRESET="paper", ROLLOUT_ENGINE="vllm", MODEL_PATH="/m", timeout=60, **files)
    assert run.returncode != 0
    assert message in run.output, run.output[-2000:]
    assert "ray" not in run.output.lower()

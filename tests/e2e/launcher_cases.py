"""train_grpo_step.sh launched in a controlled world: which trainer command it composes for a set of knob cases.

A case is a set of knobs and Hydra overrides with a faked host: GPU present or not (``_MR_SEARCH_HAS_GPU``, the answer
scripts/lib/gpu.sh's ``has_gpu`` caches, and a stand-in ``nvidia-smi``), which optional packages import (empty
stand-in packages on PYTHONPATH: sglang, vllm, flash_attn, flashinfer). A dry run (``DRY_RUN=1``) gives the printed
command; a launch (``launch=True``) runs the script to the end with a stand-in for ``$PYTHON`` that records the
trainer's argv and environment instead of training (a retrieval /health stand-in answers, the data files exist).
Paths, ports and time stamps are normalised, so a record compares across checkouts and days.

``python tests/e2e/launcher_cases.py OUT.json`` writes the records; tests/e2e/fixtures/launcher_cases.json holds the
ones of the launcher before its rewrite (train_grpo_step.sh of c5b2c7d, 405 lines), which
tests/e2e/test_launcher_equivalence.py compares the current script with.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "train_grpo_step.sh"

# Every knob of the script: none leaks in from the caller's environment.
KNOBS = [
    "PRESET",
    "DRY_RUN",
    "DUMP_ROLLOUTS",
    "TRAIN_FILE",
    "VAL_FILE",
    "MODEL_PATH",
    "RETRIEVER_URL",
    "START_RETRIEVER",
    "RETRIEVER_READY_TIMEOUT",
    "ATTEMPTS",
    "VAL_ATTEMPTS",
    "GAMMA",
    "GROUP_SIZE",
    "ADV_ESTIMATOR",
    "LR",
    "ENTROPY_COEFF",
    "TRAIN_BATCH_SIZE",
    "PPO_MINI_BATCH_SIZE",
    "TOTAL_STEPS",
    "MAX_TURNS",
    "ROLLOUT_ENGINE",
    "N_GPUS_PER_NODE",
    "NNODES",
    "ROLLOUT_TP",
    "GPU_MEMORY_UTILIZATION",
    "ENFORCE_EAGER",
    "USE_REMOVE_PADDING",
    "SGLANG_ATTENTION_BACKEND",
    "SGLANG_SAMPLING_BACKEND",
    "SGLANG_GRAMMAR_BACKEND",
    "SGLANG_MEMORY_SAVER",
    "CPU_DTYPE",
    "RUN_DIR",
    "SAVE_FREQ",
    "TEST_FREQ",
    "RAY_ADDRESS",
    "RETRIEVER_DEVICE",
    "TORCH_COMPILE_DISABLE",
    "TOKENIZERS_PARALLELISM",
    "VLLM_USE_FLASHINFER_SAMPLER",
    "VERL_PLATFORM",
    "RAY_prestart_worker_first_driver",
    "CUDA_VISIBLE_DEVICES",
    "_MR_SEARCH_HAS_GPU",
    "MR_SEARCH_FAULT",
]

# The trainer environment a launch record keeps (what the script sets for the trainer).
TRAINER_ENV = (
    "VERL_PLATFORM",
    "TORCH_COMPILE_DISABLE",
    "TOKENIZERS_PARALLELISM",
    "RAY_prestart_worker_first_driver",
    "VLLM_USE_FLASHINFER_SAMPLER",
    "VERL_FILE_LOGGER_PATH",
    "MR_SEARCH_CACHE",
)

FAKE_NVIDIA_SMI = """#!/usr/bin/env bash
case "$*" in
  -L) echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)'; echo 'GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1)' ;;
  *memory.total*) echo 81559; echo 81559 ;;
  *name*) echo 'NVIDIA H100 80GB HBM3'; echo 'NVIDIA H100 80GB HBM3' ;;
  *) exit 0 ;;
esac
"""
NO_NVIDIA_SMI = "#!/usr/bin/env bash\nexit 9\n"

# Stands in for $PYTHON in a launch: records the trainer's command and environment, skips the run summary.
FAKE_PYTHON = """#!/usr/bin/env bash
case "$1 ${{2:-}}" in
  "-m verl.trainer.main_ppo") printf '%s\\0' "$@" >"$FAKE_RECORD.argv"; env -0 >"$FAKE_RECORD.env"; exit 0 ;;
  "-m "*run_summary|"-m "*diagnosis) exit 0 ;;
esac
exec {python} "$@"
"""


@dataclass(frozen=True)
class Case:
    name: str
    knobs: dict[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    gpu: bool = False
    modules: tuple[str, ...] = ()  # stand-in packages that import
    launch: bool = False  # run to the end (a stand-in trainer) instead of DRY_RUN=1
    data: bool = True  # a launch: TRAIN_FILE and VAL_FILE exist and a retrieval /health answers


def _cases() -> list[Case]:
    cases: list[Case] = []
    for preset in ("embedded", "paper", "auto"):
        for engine in ("", "sglang", "vllm", "hf", "cpu"):
            for gpu in (False, True):
                knobs = {"PRESET": preset, "ROLLOUT_ENGINE": engine}
                cases.append(Case(f"{preset}-{engine or 'default'}-{'gpu' if gpu else 'nogpu'}", knobs, gpu=gpu))
    paper = {"PRESET": "paper"}
    cases += [
        Case("nothing-set-nogpu"),
        Case("nothing-set-gpu", gpu=True),
        Case("k1", {"ATTEMPTS": "1"}),
        Case("k1-grpo-val3", {"ATTEMPTS": "1", "ADV_ESTIMATOR": "grpo", "VAL_ATTEMPTS": "3", "GAMMA": "0"}),
        Case("k1-paper", {**paper, "ATTEMPTS": "1", "MODEL_PATH": "/models/qwen/"}, gpu=True),
        Case(
            "all-plain-knobs-embedded",
            {
                "MODEL_PATH": "/models/mine/",
                "TRAIN_FILE": "/data/train.parquet",
                "VAL_FILE": "/data/val.parquet",
                "MAX_TURNS": "2",
                "GROUP_SIZE": "3",
                "LR": "3e-6",
                "ENTROPY_COEFF": "0.001",
                "TOTAL_STEPS": "3",
                "SAVE_FREQ": "2",
                "TEST_FREQ": "5",
                "DUMP_ROLLOUTS": "0",
                "N_GPUS_PER_NODE": "1",
            },
        ),
        Case(
            "all-plain-knobs-paper",
            {
                **paper,
                "MODEL_PATH": "/models/qwen",
                "GROUP_SIZE": "8",
                "NNODES": "2",
                "ROLLOUT_TP": "2",
                "GPU_MEMORY_UTILIZATION": "0.4",
                "N_GPUS_PER_NODE": "4",
                "DUMP_ROLLOUTS": "1",
                "RAY_ADDRESS": "10.0.0.1:6379",
            },
            ("trainer.save_freq=7", "data.max_response_length=4000"),
            gpu=True,
        ),
        Case("overrides-last", {}, ("trainer.save_freq=7", "+mr_search.extra=1", "data.val_max_samples=4")),
        Case("mini-batch-paper-16", {**paper, "TRAIN_BATCH_SIZE": "16"}),
        Case("mini-batch-paper-64", {**paper, "TRAIN_BATCH_SIZE": "64"}),
        Case("mini-batch-paper-16-given-8", {**paper, "TRAIN_BATCH_SIZE": "16", "PPO_MINI_BATCH_SIZE": "8"}),
        Case("mini-batch-embedded-2", {"PRESET": "embedded", "TRAIN_BATCH_SIZE": "2"}),
        Case("eager-sglang", {**paper, "ENFORCE_EAGER": "1"}),
        Case("eager-0-vllm", {**paper, "ROLLOUT_ENGINE": "vllm", "ENFORCE_EAGER": "0"}),
        Case("padding-0-sglang", {**paper, "USE_REMOVE_PADDING": "0", "GPU_MEMORY_UTILIZATION": "0.4"}),
        Case("padding-0-vllm-embedded", {"PRESET": "embedded", "ROLLOUT_ENGINE": "vllm", "USE_REMOVE_PADDING": "0"}),
        Case("padding-1-vllm", {**paper, "ROLLOUT_ENGINE": "vllm", "USE_REMOVE_PADDING": "1"}),
        Case(
            "sglang-backends",
            {
                **paper,
                "SGLANG_ATTENTION_BACKEND": "flashinfer",
                "SGLANG_SAMPLING_BACKEND": "flashinfer",
                "SGLANG_GRAMMAR_BACKEND": "xgrammar",
            },
        ),
        Case("saver-0", {**paper, "SGLANG_MEMORY_SAVER": "0"}, gpu=True),
        Case("saver-1", {**paper, "SGLANG_MEMORY_SAVER": "1"}, gpu=True),
        Case(
            "saver-auto-inputs",
            {**paper, "GPU_MEMORY_UTILIZATION": "0.5", "N_GPUS_PER_NODE": "2", "NNODES": "2"},
            ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1", "data.max_response_length=4000"),
            gpu=True,
        ),
        Case("cpu-float32", {"CPU_DTYPE": "float32"}),
        Case("cpu-auto", {"CPU_DTYPE": "auto"}),
        Case("dumps-paper", {**paper, "DUMP_ROLLOUTS": "1"}),
        Case("retriever-given", {"RETRIEVER_URL": "http://10.1.2.3:9000/"}),
        Case("retriever-free-port", {"RETRIEVER_URL": ""}),
        Case("retriever-paper-8000", {**paper, "RETRIEVER_URL": ""}),
        Case("retriever-paper-start", {**paper, "START_RETRIEVER": "1"}),
        Case("retriever-embedded-no-start", {"START_RETRIEVER": "0"}),
        Case("run-dir-default", {"RUN_DIR": ""}),
        Case("run-dir-relative", {"RUN_DIR": "runs/mine/"}),
        Case("bad-engine", {"ROLLOUT_ENGINE": "trt"}),
        Case("bad-attempts", {"ATTEMPTS": "two"}),
        Case("bad-val-attempts", {"VAL_ATTEMPTS": "0"}),
        Case("bad-preset", {"PRESET": "huge"}),
        Case("bad-padding", {"ROLLOUT_ENGINE": "vllm", "USE_REMOVE_PADDING": "maybe"}),
        Case("bad-nnodes-word", {"NNODES": "two"}),
        Case("bad-nnodes-0", {"NNODES": "0"}),
        Case("bad-batch", {"TRAIN_BATCH_SIZE": "16q"}),
        Case("bad-eager", {"ENFORCE_EAGER": "yes"}),
        Case("bad-saver", {**paper, "SGLANG_MEMORY_SAVER": "2"}),
        Case("bad-cpu-dtype", {"CPU_DTYPE": "fp8"}),
        # Launches (a stand-in trainer): the checks and workarounds a dry run skips.
        Case("launch-paper-sglang-no-flash-attn", paper, gpu=True, modules=("sglang",), launch=True),
        Case(
            "launch-paper-sglang-flash-attn-8-gpus",
            {**paper, "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7", "SGLANG_MEMORY_SAVER": "0"},
            gpu=True,
            modules=("sglang", "flash_attn"),
            launch=True,
        ),
        Case(
            "launch-paper-vllm-no-flashinfer",
            {**paper, "ROLLOUT_ENGINE": "vllm", "CUDA_VISIBLE_DEVICES": "0"},
            gpu=True,
            modules=("vllm",),
            launch=True,
        ),
        Case(
            "launch-paper-vllm-all-kernels",
            {**paper, "ROLLOUT_ENGINE": "vllm", "N_GPUS_PER_NODE": "2"},
            gpu=True,
            modules=("vllm", "flashinfer", "flash_attn"),
            launch=True,
        ),
        Case("launch-paper-vllm-missing", {**paper, "ROLLOUT_ENGINE": "vllm"}, gpu=True, launch=True),
        Case("launch-paper-no-data", paper, gpu=True, modules=("sglang",), launch=True, data=False),
        Case(
            "launch-paper-val-only-no-train-file",
            {**paper, "TRAIN_FILE": ""},
            ("trainer.val_only=True",),
            gpu=True,
            modules=("sglang",),
            launch=True,
        ),
        Case("launch-embedded-hf", {"PRESET": "embedded"}, gpu=True, launch=True),
        Case("launch-embedded-hf-compile", {"PRESET": "embedded", "TORCH_COMPILE_DISABLE": "0"}, gpu=True, launch=True),
        Case("launch-embedded-cpu", {"PRESET": "embedded"}, launch=True),
        Case("launch-paper-silent-retriever", paper, gpu=True, modules=("sglang",), launch=True),
    ]
    return cases


CASES = _cases()


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def health_server() -> Iterator[str]:
    """A stand-in retrieval service that answers GET /health with 200, on a free port of 127.0.0.1."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _normalise(text: str, tmp: Path) -> str:
    text = text.replace(str(tmp), "<TMP>").replace(str(REPO), "<ROOT>").replace(sys.executable, "<PYTHON>")
    text = re.sub(r"\d{8}-\d{6}-\d+", "<STAMP>", text)
    text = re.sub(r"done in \d+s", "done in <N>s", text)
    return re.sub(r"127\.0\.0\.1:(?!8000\b)\d+", "127.0.0.1:<PORT>", text)


def run_case(case: Case, script: Path = SCRIPT) -> dict:
    """The record of one case: exit status, the trainer command (normalised argv), the script's own lines, and for a
    launch the trainer's environment."""
    with tempfile.TemporaryDirectory(prefix="launcher-") as name, contextlib.ExitStack() as stack:
        tmp = Path(name).resolve()
        bin_dir, stubs = tmp / "bin", tmp / "stubs"
        bin_dir.mkdir()
        stubs.mkdir()
        smi = bin_dir / "nvidia-smi"
        smi.write_text(FAKE_NVIDIA_SMI if case.gpu else NO_NVIDIA_SMI)
        smi.chmod(0o755)
        for module in case.modules:
            (stubs / module).mkdir()
            (stubs / module / "__init__.py").write_text("")
        env = {key: value for key, value in os.environ.items() if key not in KNOBS and key != "PYTHONPATH"}
        env["PATH"] = f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONPATH"] = str(stubs)
        env["PYTHON"] = sys.executable
        env["MR_SEARCH_CACHE"] = str(tmp / "cache")
        env["RUN_DIR"] = str(tmp / "run")
        env["CPU_DTYPE"] = "bfloat16"  # the host's own answer only where a case asks for auto
        env["_MR_SEARCH_HAS_GPU"] = "1" if case.gpu else "0"
        if case.launch:
            python = bin_dir / "python"
            python.write_text(FAKE_PYTHON.format(python=shlex.quote(sys.executable)))
            python.chmod(0o755)
            env["PYTHON"] = str(python)
            env["FAKE_RECORD"] = str(tmp / "trainer")
            env["MODEL_PATH"] = str(tmp / "model")
            if case.data:
                for split in ("train", "val"):
                    (tmp / f"{split}.parquet").write_text("")
                env["TRAIN_FILE"], env["VAL_FILE"] = str(tmp / "train.parquet"), str(tmp / "val.parquet")
                if "silent" in case.name:
                    env["RETRIEVER_URL"] = "http://127.0.0.1:9"  # the discard port: nothing answers
                else:
                    env["RETRIEVER_URL"] = stack.enter_context(health_server())
        else:
            env["DRY_RUN"] = "1"
        env.update(case.knobs)
        result = subprocess.run(
            ["bash", str(script), *case.args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
        )
        record: dict = {"returncode": result.returncode}
        lines = [line for line in result.stdout.splitlines() if "verl.trainer.main_ppo" in line]
        if lines:
            record["command"] = [_normalise(arg, tmp) for arg in shlex.split(lines[-1])]
        argv = tmp / "trainer.argv"
        if argv.exists():
            record["trainer"] = [_normalise(arg, tmp) for arg in argv.read_text().split("\0")[:-1]]
            seen = dict(item.split("=", 1) for item in (tmp / "trainer.env").read_text().split("\0") if "=" in item)
            record["trainer_env"] = {key: _normalise(seen[key], tmp) for key in TRAINER_ENV if key in seen}
            record["command_txt"] = shlex.split(_normalise((tmp / "run" / "command.txt").read_text(), tmp))
        own = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("train_grpo_step.sh:")]
        record["notes"] = [_normalise(line, tmp) for line in own]
        return record


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    from mr_search.cpu.precision import cpu_dtype

    records = {"cpu_dtype_auto": cpu_dtype(), "cases": {}}
    for case in CASES:
        records["cases"][case.name] = run_case(case)
        print(case.name, records["cases"][case.name]["returncode"], file=sys.stderr)
    out.write_text(json.dumps(records, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""train_grpo_step.sh's start-up decisions: preset, engine, knob checks and the trainer command, each change said.

``plan`` and ``command`` print shell code for the script; ``DRY_RUN=1`` reads no model; tests hand in a ``Host``.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from omegaconf import OmegaConf

NAME: Final = "train_grpo_step.sh"
ENGINES: Final = ("sglang", "vllm", "cpu", "hf")
CONFIGS: Final = {"embedded": "mr_search_embedded", "paper": "mr_search_paper"}
WHOLE: Final = re.compile(r"[1-9][0-9]*")
DATA_HELP: Final = "python scripts/prepare_data.py flashrag --root <FlashRAG folder> --out <dir>"
FP32: Final = "{param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}"
SGLANG_BACKENDS: Final = {
    "SGLANG_ATTENTION_BACKEND": "attention_backend",
    "SGLANG_SAMPLING_BACKEND": "sampling_backend",
    "SGLANG_GRAMMAR_BACKEND": "grammar_backend",
}
KNOB_OVERRIDES: Final = (  # knob -> key, added when the knob is not empty, in this order
    ("TRAIN_FILE", "data.train_files"),
    ("VAL_FILE", "data.val_files"),
    ("MODEL_PATH", "actor_rollout_ref.model.path"),
    ("ATTEMPTS", "mr_search.episode.attempts"),
    ("VAL_ATTEMPTS", "mr_search.episode.val_attempts"),
    ("MAX_TURNS", "mr_search.episode.max_turns_per_attempt"),
    ("GAMMA", "mr_search.advantage.gamma"),
    ("GROUP_SIZE", "actor_rollout_ref.rollout.n"),
    ("LR", "actor_rollout_ref.actor.optim.lr"),
    ("ENTROPY_COEFF", "actor_rollout_ref.actor.entropy_coeff"),
    ("TRAIN_BATCH_SIZE", "data.train_batch_size"),
    ("PPO_MINI_BATCH_SIZE", "actor_rollout_ref.actor.ppo_mini_batch_size"),
    ("TOTAL_STEPS", "trainer.total_training_steps"),
    ("N_GPUS_PER_NODE", "trainer.n_gpus_per_node"),
    ("ROLLOUT_TP", "actor_rollout_ref.rollout.tensor_model_parallel_size"),
    ("GPU_MEMORY_UTILIZATION", "actor_rollout_ref.rollout.gpu_memory_utilization"),
    ("ENFORCE_EAGER", "actor_rollout_ref.rollout.enforce_eager"),  # vLLM's, and SGLang's disable_cuda_graph
    ("SAVE_FREQ", "trainer.save_freq"),
    ("TEST_FREQ", "trainer.test_freq"),
)


class LaunchError(Exception):
    """A knob or a missing piece that stops the launch; the message says what to do."""


def _nvidia_smi(*args: str) -> str:
    try:
        out = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout if out.returncode == 0 else ""


@functools.cache
def _torch_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def usable_gpu(env: Mapping[str, str]) -> bool:
    """nvidia-smi lists a GPU and torch can use CUDA, unless ``_MR_SEARCH_HAS_GPU`` hands down the answer."""
    cached = env.get("_MR_SEARCH_HAS_GPU", "")
    if cached:
        return cached == "1"
    return bool(_nvidia_smi("-L")) and _torch_cuda()


def visible_gpus(env: Mapping[str, str]) -> int:
    """The GPUs this process may use: the entries of CUDA_VISIBLE_DEVICES when set, else nvidia-smi's list."""
    if "CUDA_VISIBLE_DEVICES" in env:
        ids = env["CUDA_VISIBLE_DEVICES"]
        return len(ids.removesuffix(",").split(",")) if ids else 0  # as bash's `IFS=, read -a` splits it
    return sum(line.startswith("GPU ") for line in _nvidia_smi("-L").splitlines())


def _saver_choice(
    model: str, gpus: int, utilization: float, card_mib: str, micro: int, tokens: int
) -> tuple[bool, str]:
    from mr_search.ops.gpu_fit import choose_for  # torch and transformers load only when a model is read

    choice = choose_for(model, gpus, utilization, card_mib, micro, tokens)
    return choice.on, choice.reason


def _cpu_dtype() -> str:
    from mr_search.cpu.precision import cpu_dtype

    return cpu_dtype()


@dataclass(frozen=True)
class Host:
    """What a launch asks of the machine."""

    has_gpu: Callable[[], bool]
    gpu_count: Callable[[], int]
    has_module: Callable[[str], bool]
    card_mib: Callable[[], str]  # one GPU's memory in MiB as nvidia-smi reports it; empty without one
    cpu_dtype: Callable[[], str]  # bfloat16 where the CPU computes it natively, else float32
    saver_choice: Callable[[str, int, float, str, int, int], tuple[bool, str]]  # mr_search.ops.gpu_fit's choice


def real_host(env: Mapping[str, str]) -> Host:
    """This machine, asked lazily (a GPU probe imports torch: only when a decision needs it)."""
    gpu = functools.cache(lambda: usable_gpu(env))
    return Host(
        has_gpu=gpu,
        gpu_count=lambda: visible_gpus(env),
        has_module=lambda name: importlib.util.find_spec(name) is not None,
        card_mib=lambda: next(
            iter(_nvidia_smi("--query-gpu=memory.total", "--format=csv,noheader,nounits").split()), ""
        ),
        cpu_dtype=_cpu_dtype,
        saver_choice=_saver_choice,
    )


def override_value(key: str, overrides: Sequence[str]) -> str | None:
    """The value the last of ``overrides`` gives ``key`` (``[+[+]]KEY=V``, quotes removed); ``~KEY`` or none: None."""
    value = None
    for arg in overrides:
        arg = arg.removeprefix("+").removeprefix("+")
        if arg.startswith(f"{key}="):
            value = arg[len(key) + 1 :]
        elif arg == f"~{key}" or arg.startswith(f"~{key}="):
            value = None
    if value is None:
        return None
    return value.removeprefix('"').removeprefix("'").removesuffix('"').removesuffix("'")


def preset_value(root: Path, config_name: str, key: str) -> str | None:
    """``key``'s value in the preset's entry config, else in the recipe both presets include."""
    for path in (root / "configs" / f"{config_name}.yaml", root / "configs" / "recipe" / "paper.yaml"):
        # omegaconf (verl's own config library; PyYAML is not in the offline sets), interpolations left unresolved
        node = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None:
            return str(node)
    return None


def _whole(knobs: Mapping[str, str], name: str, hint: str, required: bool = False) -> None:
    value = knobs.get(name, "")
    if (value or required) and not WHOLE.fullmatch(value):
        raise LaunchError(f"{name}={value} is not valid; {hint}")


def _choice(knobs: Mapping[str, str], name: str, valid: Sequence[str], hint: str) -> None:
    if knobs.get(name, "") not in valid:
        raise LaunchError(f"{name}={knobs.get(name, '')} is not valid; {hint}")


def plan(knobs: Mapping[str, str], args: Sequence[str], host: Host, root: Path, say: Callable[[str], None]) -> dict:
    """The knobs the launch runs with, as ``{name: value}``: the preset and its engine chosen, the checks passed."""
    dry = knobs.get("DRY_RUN") == "1"
    preset, engine = knobs.get("PRESET", "auto"), knobs.get("ROLLOUT_ENGINE", "")
    if preset == "auto":  # without a GPU only the embedded sizes can run
        preset = "paper" if host.has_gpu() else "embedded"
    if preset not in CONFIGS:
        raise LaunchError(f"PRESET={preset} is not valid; use auto, embedded or paper")
    if not engine:
        engine = ("hf" if host.has_gpu() else "cpu") if preset == "embedded" else "sglang"
    if engine not in ENGINES:
        raise LaunchError(f"ROLLOUT_ENGINE={engine} is not valid; use sglang, vllm, cpu or hf")
    # The paper preset's data are files a user prepares first: say which and how, before anything else starts.
    if preset == "paper" and not dry:
        needed = ("VAL_FILE",) if "trainer.val_only=True" in args else ("TRAIN_FILE", "VAL_FILE")
        for what in needed:
            file = knobs.get(what, "")
            if not file:
                raise LaunchError(
                    f"the paper preset needs {what} (verl parquet): make them with `{DATA_HELP}`, then "
                    "TRAIN_FILE=<dir>/train.parquet VAL_FILE=<dir>/val.parquet"
                )
            if not Path(file).is_file():
                raise LaunchError(
                    f"{what}={file} does not exist; make it with `{DATA_HELP}` "
                    "(train.parquet, val.parquet, test.parquet)"
                )
    if not dry and engine in ("sglang", "vllm") and not host.has_module(engine):
        # Before Ray starts: verl would otherwise fail inside a Ray actor, minutes later, with a long trace.
        raise LaunchError(
            f"ROLLOUT_ENGINE={engine} needs the {engine} package, which {knobs.get('PYTHON', 'python')} cannot import; "
            f"install it with requirements/gpu-{engine}.txt (docs/gpu.md), or use ROLLOUT_ENGINE=hf on one GPU"
        )
    decided = {"PRESET": preset, "ROLLOUT_ENGINE": engine, "CONFIG_NAME": CONFIGS[preset]}
    _whole(knobs, "TRAIN_BATCH_SIZE", "use a whole number of questions >= 1")
    step, mini = knobs.get("TRAIN_BATCH_SIZE", ""), knobs.get("PPO_MINI_BATCH_SIZE", "")
    if step and not mini:
        # verl stops at start-up on a PPO mini-batch larger than the step: a smaller step is then one update.
        preset_mini = preset_value(root, CONFIGS[preset], "actor_rollout_ref.actor.ppo_mini_batch_size") or ""
        if preset_mini.isdigit() and int(step) < int(preset_mini):
            decided["PPO_MINI_BATCH_SIZE"] = step
            say(
                f"PPO_MINI_BATCH_SIZE={step} (the {preset} preset's {preset_mini} is more than "
                f"TRAIN_BATCH_SIZE={step}: one update a step; set PPO_MINI_BATCH_SIZE to choose)"
            )
    eager = knobs.get("ENFORCE_EAGER", "")
    if eager not in ("", "0", "1"):
        raise LaunchError(f"ENFORCE_EAGER={eager} is not valid; use 1 (eager: no compile, no CUDA graphs) or 0")
    decided["ENFORCE_EAGER"] = {"1": "True", "0": "False"}.get(eager, "")
    _whole(knobs, "ATTEMPTS", "use a whole number >= 1 (1 = the Search-R1 baseline)")
    _whole(knobs, "VAL_ATTEMPTS", "use a whole number >= 1 (empty: the training K)")
    nnodes_hint = "use a whole number >= 1 (> 1 joins the Ray cluster started with ray start)"
    _whole(knobs, "NNODES", nnodes_hint, required=True)
    if engine in ("sglang", "vllm"):
        _choice(knobs, "USE_REMOVE_PADDING", ("auto", "1", "0"), "use auto, 1 or 0")
    if engine == "sglang":
        _choice(knobs, "SGLANG_MEMORY_SAVER", ("auto", "0", "1"), "use auto, 0 or 1")
    if engine == "cpu":
        _choice(knobs, "CPU_DTYPE", ("auto", "bfloat16", "float32"), "use auto, bfloat16 or float32")
    single = knobs.get("NNODES") == "1"
    if not knobs.get("N_GPUS_PER_NODE") and preset == "paper" and single and not dry and host.has_gpu():
        # The paper's 8 GPUs on a node that has fewer would stop in Ray ("Total available GPUs ... less than desired").
        gpus = host.gpu_count()
        decided["N_GPUS_PER_NODE"] = str(gpus)
        if gpus != 8:
            say(f"N_GPUS_PER_NODE={gpus} (the GPUs this node shows; the paper used 8)")
    return decided


def _sglang(knobs: Mapping[str, str], overrides: list[str], args: Sequence[str], host: Host, root: Path, say) -> None:
    kwargs = "++actor_rollout_ref.rollout.engine_kwargs.sglang"
    for knob, key in SGLANG_BACKENDS.items():  # empty: configs/engine/sglang.yaml's
        if knobs.get(knob):
            overrides.append(f"{kwargs}.{key}={knobs[knob]}")
    # Eager means no graphs: verl's disable_cuda_graph leaves SGLang 0.5.12's piecewise prefill graphs on.
    if knobs.get("ENFORCE_EAGER") == "True":
        overrides.append(f"{kwargs}.disable_piecewise_cuda_graph=True")
    saver = knobs.get("SGLANG_MEMORY_SAVER", "auto")
    if saver == "auto":
        # The policy's size, the engine's share and one card's memory decide (docs/gpu.md), each as the run will have
        # it: the last Hydra override (the command line's last), else the knob, else the preset's value.
        def fit(key: str, knob: str = "") -> str:
            value = override_value(key, [*overrides, *args])
            if value is None:
                value = knobs.get(knob, "") if knob else ""
                value = value or preset_value(root, knobs["CONFIG_NAME"], key) or ""
            return value

        gpus = int(knobs.get("NNODES", "1")) * int(fit("trainer.n_gpus_per_node", "N_GPUS_PER_NODE") or 1)
        utilization = float(fit("actor_rollout_ref.rollout.gpu_memory_utilization", "GPU_MEMORY_UTILIZATION") or 0.6)
        micro = int(fit("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu") or 0)
        tokens = int(fit("data.max_prompt_length") or 0) + int(fit("data.max_response_length") or 0)
        model = (
            "" if knobs.get("DRY_RUN") == "1" else fit("actor_rollout_ref.model.path", "MODEL_PATH")
        )  # a dry run reads none
        on, reason = host.saver_choice(model, gpus, utilization, host.card_mib(), micro, tokens)
        saver = "1" if on else "0"
        say(f"SGLANG_MEMORY_SAVER=auto -> {saver}, {reason}")
    if saver == "0":
        # The engine keeps its memory while FSDP trains; with nothing to release, verl must not ask for it.
        overrides += [f"{kwargs}.enable_memory_saver=False", "actor_rollout_ref.rollout.free_cache_engine=False"]


def _env_file(path: Path) -> dict[str, str]:
    lines = [line for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


def command(
    knobs: Mapping[str, str], args: Sequence[str], host: Host, root: Path, say: Callable[[str], None]
) -> tuple[list[str], dict[str, str]]:
    """The trainer's argv and the environment the engine needs beyond the caller's."""
    dry = knobs.get("DRY_RUN") == "1"
    engine, run_dir = knobs["ROLLOUT_ENGINE"], knobs["RUN_DIR"]
    overrides = [
        f"algorithm.adv_estimator={knobs.get('ADV_ESTIMATOR', 'mr_search')}",
        f"mr_search.retriever.url={knobs['RETRIEVER_URL'].removesuffix('/')}/retrieve",
        "trainer.project_name=mr_search",
        f"trainer.experiment_name={Path(run_dir).name}",
        f"trainer.default_local_dir={run_dir}/checkpoints",
        "trainer.resume_mode=auto",
        f"+engine={engine}",  # configs/engine/<engine>.yaml
    ]
    env: dict[str, str] = {}
    if engine == "hf":
        # No compile by default: for small models its start-up time outweighs what it saves.
        env["TORCH_COMPILE_DISABLE"] = knobs.get("TORCH_COMPILE_DISABLE") or "1"
        env["TOKENIZERS_PARALLELISM"] = knobs.get("TOKENIZERS_PARALLELISM") or "false"
    elif engine == "cpu":
        backend = root / "configs" / "cpu_backend.env"
        if not (backend.is_file() and (root / "configs" / "engine" / "cpu.yaml").is_file()):
            raise LaunchError(
                "ROLLOUT_ENGINE=cpu needs configs/cpu_backend.env and configs/engine/cpu.yaml (the CPU backend)"
            )
        env.update(_env_file(backend))  # in every process of the run, before verl is imported
        dtype = knobs.get("CPU_DTYPE", "auto")
        if dtype == "auto":
            dtype = host.cpu_dtype()
        if dtype == "float32":  # bfloat16: verl's own (bf16 rollout, bf16 autocast over fp32 parameters)
            overrides += [
                "actor_rollout_ref.rollout.dtype=float32",
                f"++actor_rollout_ref.actor.fsdp_config.mixed_precision={FP32}",
            ]
    else:
        padding = knobs.get("USE_REMOVE_PADDING", "auto")
        if padding == "auto":
            padding = "1" if dry or host.has_module("flash_attn") else "0"
            if padding == "0":
                say(
                    "flash_attn is not installed: training with sdpa attention and padding (slower on long "
                    "meta-episodes); pip install flash-attn --no-build-isolation for padding removal"
                )
        if padding == "0":
            overrides += [
                "++actor_rollout_ref.model.override_config.attn_implementation=sdpa",
                "actor_rollout_ref.model.use_remove_padding=False",
            ]
        if engine == "sglang":
            _sglang(knobs, overrides, args, host, root, say)
        elif not dry and not host.has_module("flashinfer"):
            # vLLM's FlashInfer top-k/top-p sampler needs the flashinfer package; its own sampler needs nothing.
            env["VLLM_USE_FLASHINFER_SAMPLER"] = knobs.get("VLLM_USE_FLASHINFER_SAMPLER") or "0"
    dumps = knobs.get("DUMP_ROLLOUTS") or ("1" if knobs["PRESET"] == "embedded" else "")
    if dumps == "1":
        overrides.append(f"trainer.rollout_data_dir={run_dir}/rollouts")
    overrides += [f"{key}={knobs[knob]}" for knob, key in KNOB_OVERRIDES if knobs.get(knob)]
    nnodes = int(knobs.get("NNODES", "1"))
    if nnodes > 1:  # every node has joined one Ray cluster (`ray start --head` / `ray start --address=...`)
        overrides += [f"trainer.nnodes={nnodes}", f"++ray_kwargs.ray_init.address={knobs.get('RAY_ADDRESS') or 'auto'}"]
    if knobs.get("LAUNCH") and not any(arg.startswith("hydra.run.dir=") for arg in args):
        # Hydra's record of the launch (the composed config, the overrides, main_ppo.log) in the run folder, one
        # folder a launch as metrics/ has, not outputs/<date>/<time> in whatever folder the script was started from.
        overrides.append(f"hydra.run.dir={run_dir}/hydra/{knobs['LAUNCH']}")
    config = [f"--config-path={root / 'configs'}", f"--config-name={knobs['CONFIG_NAME']}"]
    return [knobs.get("PYTHON", "python"), "-m", "verl.trainer.main_ppo", *config, *overrides, *args], env


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """``plan|command [OVERRIDES...]``: prints shell code for train_grpo_step.sh; 1 on a stopping problem."""
    what, *args = sys.argv[1:] if argv is None else argv
    knobs = os.environ if environ is None else environ
    root = Path(knobs.get("ROOT") or Path(__file__).resolve().parents[2])
    host = real_host(knobs)

    def say(line: str) -> None:
        print(f"{NAME}: {line}", file=sys.stderr)

    try:
        if what == "plan":
            decided = plan(knobs, args, host, root, say)
            print("\n".join(f"{name}={shlex.quote(value)}" for name, value in decided.items()))
        elif what == "command":
            cmd, env = command(knobs, args, host, root, say)
            print("\n".join(f"export {name}={shlex.quote(value)}" for name, value in env.items()))
            print(f"cmd=({' '.join(shlex.quote(arg) for arg in cmd)})")
        else:
            raise LaunchError(f"mr_search.ops.launch: {what!r} is not plan or command")
    except LaunchError as error:
        say(str(error))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

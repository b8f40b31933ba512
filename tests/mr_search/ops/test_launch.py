"""mr_search.ops.launch: the launcher's decisions on a faked machine (what it asks, what it decides, what it says)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mr_search.ops.launch import Host, LaunchError, command, override_value, plan, usable_gpu, visible_gpus

REPO = Path(__file__).resolve().parents[3]
RECIPE = yaml.safe_load((REPO / "configs" / "recipe" / "paper.yaml").read_text())


class FakeHost:
    """A machine with or without a GPU and a set of importable packages; records the saver question."""

    def __init__(self, gpu: bool = True, modules: tuple[str, ...] = (), card: str = "81559", saver_on: bool = True):
        self.gpu, self.modules, self.card, self.saver_on = gpu, modules, card, saver_on
        self.asked: list[tuple] = []
        self.gpu_asked = 0

    def host(self) -> Host:
        def has_gpu() -> bool:
            self.gpu_asked += 1
            return self.gpu

        def saver(*inputs) -> tuple[bool, str]:
            self.asked.append(inputs)
            return self.saver_on, "on: because" if self.saver_on else "off: because"

        return Host(
            has_gpu=has_gpu,
            gpu_count=lambda: 2,
            has_module=lambda name: name in self.modules,
            card_mib=lambda: self.card,
            cpu_dtype=lambda: "float32",
            saver_choice=saver,
        )


def _knobs(**knobs: str) -> dict[str, str]:
    base = {"PYTHON": "python", "NNODES": "1", "USE_REMOVE_PADDING": "auto", "SGLANG_MEMORY_SAVER": "auto"}
    return {**base, "CPU_DTYPE": "auto", "ADV_ESTIMATOR": "mr_search", **knobs}


def _planned(fake: FakeHost, args: tuple[str, ...] = (), **knobs: str) -> dict[str, str]:
    said: list[str] = []
    knobs = _knobs(**knobs)
    decided = plan(knobs, args, fake.host(), REPO, said.append)
    return {**knobs, **decided, "RUN_DIR": "/runs/r", "RETRIEVER_URL": "http://127.0.0.1:8000/"}


def _command(fake: FakeHost, args: tuple[str, ...] = (), **knobs: str) -> tuple[list[str], dict[str, str], list[str]]:
    said: list[str] = []
    cmd, env = command(_planned(fake, args, **knobs), args, fake.host(), REPO, said.append)
    return cmd, env, said


KEY = "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"


@pytest.mark.parametrize(
    ("args", "want"),
    [
        ([f"{KEY}=1"], "1"),
        ([f"+{KEY}=2"], "2"),
        ([f"++{KEY}=3"], "3"),
        ([f"{KEY}=4", "trainer.total_training_steps=9", f"++{KEY}=5"], "5"),  # the last one wins, as in Hydra
        ([f"{KEY}='6'"], "6"),
        ([f"{KEY}=4", f"~{KEY}"], None),  # deleted after it was set
        ([f"{KEY}_other=7", f"x.{KEY}=8", "trainer.n_gpus_per_node=2"], None),  # other keys, a longer key
        ([], None),
    ],
)
def test_the_last_override_of_the_key_gives_its_value(args: list[str], want: str | None) -> None:
    assert override_value(KEY, args) == want


def test_a_value_with_an_equals_sign_is_kept_whole() -> None:
    assert override_value("data.train_files", ["data.train_files=/d/a=b.parquet"]) == "/d/a=b.parquet"


@pytest.mark.parametrize(("gpu", "preset", "engine"), [(True, "paper", "sglang"), (False, "embedded", "cpu")])
def test_auto_is_the_paper_preset_with_a_gpu_and_the_embedded_cpu_run_without(gpu, preset, engine):
    decided = _planned(FakeHost(gpu=gpu), PRESET="auto", DRY_RUN="1")
    assert (decided["PRESET"], decided["ROLLOUT_ENGINE"]) == (preset, engine)
    assert decided["CONFIG_NAME"] == f"mr_search_{preset}"
    assert _planned(FakeHost(gpu=True), PRESET="embedded", DRY_RUN="1")["ROLLOUT_ENGINE"] == "hf"


def test_a_given_preset_and_engine_ask_nothing_of_the_gpu():
    """The GPU probe imports torch (seconds): asked only where a decision needs it."""
    fake = FakeHost()
    _command(fake, PRESET="embedded", ROLLOUT_ENGINE="cpu", DRY_RUN="1")
    assert fake.gpu_asked == 0


def test_the_saver_choice_sizes_the_update_from_what_the_run_uses():
    """SGLANG_MEMORY_SAVER=auto asks mr_search.ops.gpu_fit with each input as the run will have it: a command-line
    override (verl reads those last), else the knob, else the preset's value; the model only outside a dry run."""
    micro = "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"
    fake = FakeHost(modules=("sglang", "flash_attn"))
    paper = {"PRESET": "paper", "ROLLOUT_ENGINE": "sglang", "TRAIN_FILE": __file__, "VAL_FILE": __file__}
    _command(fake, (), **paper, DRY_RUN="1", MODEL_PATH="/m")
    _command(fake, (f"{micro}=1", "data.max_response_length=4000"), **paper, MODEL_PATH="/m", NNODES="2")
    _command(
        fake,
        ("actor_rollout_ref.rollout.gpu_memory_utilization=0.3",),
        **paper,
        GPU_MEMORY_UTILIZATION="0.5",
        N_GPUS_PER_NODE="4",
    )
    actor, data = RECIPE["actor_rollout_ref"]["actor"], RECIPE["data"]
    tokens = data["max_prompt_length"] + data["max_response_length"]
    gpus = RECIPE["trainer"]["n_gpus_per_node"]
    assert fake.asked[0] == ("", gpus, 0.6, "81559", actor["ppo_micro_batch_size_per_gpu"], tokens)
    # Two nodes of the preset's GPUs; the command line's micro-batch and response length.
    assert fake.asked[1] == ("/m", 2 * gpus, 0.6, "81559", 1, data["max_prompt_length"] + 4000)
    assert fake.asked[2][1:3] == (4, 0.3)


@pytest.mark.parametrize("on", [True, False])
def test_the_saver_decision_is_said_and_off_keeps_the_engines_memory(on):
    cmd, _, said = _command(FakeHost(saver_on=on), PRESET="paper", DRY_RUN="1")
    assert said == [f"SGLANG_MEMORY_SAVER=auto -> {int(on)}, {'on' if on else 'off'}: because"]
    assert ("actor_rollout_ref.rollout.free_cache_engine=False" in cmd) == (not on)
    assert ("++actor_rollout_ref.rollout.engine_kwargs.sglang.enable_memory_saver=False" in cmd) == (not on)


def test_without_flash_attn_the_update_uses_sdpa_and_says_so():
    data = {"TRAIN_FILE": __file__, "VAL_FILE": __file__, "SGLANG_MEMORY_SAVER": "1"}
    cmd, _, said = _command(FakeHost(modules=("sglang",)), PRESET="paper", **data)
    assert "actor_rollout_ref.model.use_remove_padding=False" in cmd
    assert any(line.startswith("flash_attn is not installed") for line in said)
    cmd, _, said = _command(FakeHost(modules=("sglang", "flash_attn")), PRESET="paper", **data)
    assert not any("use_remove_padding" in arg for arg in cmd) and not said[1:]


def test_without_flashinfer_vllm_samples_with_its_own_sampler():
    data = {"PRESET": "paper", "ROLLOUT_ENGINE": "vllm", "TRAIN_FILE": __file__, "VAL_FILE": __file__}
    _, env, _ = _command(FakeHost(modules=("vllm", "flash_attn")), **data)
    assert env == {"VLLM_USE_FLASHINFER_SAMPLER": "0"}
    _, env, _ = _command(FakeHost(modules=("vllm", "flash_attn", "flashinfer")), **data)
    assert env == {}


def test_a_missing_engine_package_stops_before_anything_starts():
    with pytest.raises(LaunchError, match=r"needs the vllm package.*requirements/gpu-vllm\.txt"):
        _planned(FakeHost(), PRESET="paper", ROLLOUT_ENGINE="vllm", TRAIN_FILE=__file__, VAL_FILE=__file__)


def test_the_cpu_engine_gets_its_environment_and_its_precision():
    cmd, env, _ = _command(FakeHost(gpu=False), PRESET="embedded", DRY_RUN="1")
    assert "+engine=cpu" in cmd and env["VERL_PLATFORM"] == "cpu"
    assert "actor_rollout_ref.rollout.dtype=float32" in cmd  # CPU_DTYPE=auto on a CPU without native bf16


def test_hydra_records_each_launch_in_the_run_folder_unless_told_otherwise():
    """Hydra's run folder (its composed config, overrides, main_ppo.log) is the run's hydra/<launch>, named as the
    launch's metrics file is, not outputs/<date>/<time> in the folder the script was started from."""
    cmd, _, _ = _command(FakeHost(gpu=False), PRESET="embedded", DRY_RUN="1", LAUNCH="20261207-233000-42")
    assert "hydra.run.dir=/runs/r/hydra/20261207-233000-42" in cmd
    given = ("hydra.run.dir=/elsewhere",)
    cmd, _, _ = _command(FakeHost(gpu=False), given, PRESET="embedded", DRY_RUN="1", LAUNCH="20261207-233000-42")
    assert [arg for arg in cmd if arg.startswith("hydra.run.dir=")] == ["hydra.run.dir=/elsewhere"]
    cmd, _, _ = _command(FakeHost(gpu=False), PRESET="embedded", DRY_RUN="1")
    assert not any(arg.startswith("hydra.run.dir=") for arg in cmd), "no launch named: Hydra's default"


def test_the_gpu_probe_takes_gpu_sh_s_cached_answer_and_counts_visible_devices():
    assert usable_gpu({"_MR_SEARCH_HAS_GPU": "1"}) and not usable_gpu({"_MR_SEARCH_HAS_GPU": "0"})
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "0,1,2"}) == 3
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == 0

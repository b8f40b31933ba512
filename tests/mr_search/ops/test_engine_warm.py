"""SGLang's first-use kernels built ahead: which modules a policy needs, built side by side, never fatal."""

from __future__ import annotations

import threading
import time

import pytest

from mr_search.ops.engine_warm import JitBuild, main, sglang_jit_builds, warm

TINY = {"model_type": "qwen2", "hidden_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2}
QWEN_7B = {"model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4}


def _by_kernel(builds: list[JitBuild]) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for build in builds:
        out.setdefault(build.kernel, []).append((build.builder, build.args))
    return out


def test_the_tiny_policy_takes_the_plain_rope_kernel_and_a_128_byte_kv_row() -> None:
    builds = _by_kernel(sglang_jit_builds(TINY))
    assert builds["activation"] == [("_jit_activation_module", ("bfloat16",))]
    assert builds["rope"] == [("_jit_rotary_embedding_module", ())], "head size 32: SGLang's plain RoPE kernel"
    assert builds["kvcache"] == [("_jit_kvcache_module", (2 * 32 * 2,))], "2 KV heads x 32 x bf16"
    clamp = "_jit_clamp_position_module"
    assert builds["clamp_position"] == [(clamp, ("int64",)), (clamp, ("int32",))]
    assert len(builds["resolve_future_token_ids"]) == 2


def test_a_7b_shape_takes_the_fused_rope_kernel() -> None:
    builds = _by_kernel(sglang_jit_builds(QWEN_7B, dtype="float16"))
    assert builds["rope"] == [("_jit_fused_rope_module", (True, 128, "float16"))]
    assert builds["kvcache"] == [("_jit_kvcache_module", (4 * 128 * 2,))]
    assert builds["activation"] == [("_jit_activation_module", ("float16",))]


def test_a_model_without_neox_rope_builds_no_rope_module_and_bad_input_names_the_fix() -> None:
    assert "rope" not in _by_kernel(sglang_jit_builds({**TINY, "model_type": "gptj"}))
    with pytest.raises(ValueError, match="--dtype bfloat16"):
        sglang_jit_builds(TINY, dtype="int8")
    with pytest.raises(ValueError, match="Hugging Face model folder"):
        sglang_jit_builds({"hidden_size": 128})


def test_builds_run_side_by_side_and_a_failure_is_only_reported() -> None:
    builds = sglang_jit_builds(TINY)
    started = threading.Barrier(len(builds), timeout=10)  # every build must be running at once to pass it

    def run(build: JitBuild):
        def call() -> None:
            started.wait()
            time.sleep(0.05)
            if build.kernel == "kvcache":
                raise RuntimeError("nvcc: not found")

        return call

    lines = warm(builds, run)
    assert len(lines) == len(builds)
    (failed,) = [line for line in lines if "not built" in line]
    assert "kvcache" in failed and "nvcc: not found" in failed and "the engine builds it" in failed
    assert sum("ready in" in line for line in lines) == len(builds) - 1


def test_main_without_a_cuda_device_builds_nothing_and_exits_0(tmp_path, capsys) -> None:
    import json

    (tmp_path / "config.json").write_text(json.dumps(TINY))
    assert main(["--model", str(tmp_path)]) == 0  # this machine has no GPU (nor sglang)
    assert "nothing" in capsys.readouterr().out
    assert main(["--model", str(tmp_path / "missing")]) == 2
    assert "pass --model" in capsys.readouterr().err

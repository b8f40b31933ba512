"""SGLANG_MEMORY_SAVER=auto: the saver is on exactly when the engine's share and the update do not fit one card."""

from __future__ import annotations

import pytest

from mr_search.gpu_fit import choose, main, model_size
from mr_search.shaped_model import count_parameters, shape_config

H100_MIB, H200_MIB = 81559, 143771
PAPER_TOKENS = 512 + 8192  # max prompt + response length of the paper preset


def test_the_tiny_policy_shares_a_card_and_the_7b_shape_does_not() -> None:
    tiny = choose(1_000_000, 1, 0.6, H100_MIB, vocab=2048, micro_batch=16, tokens=1280)
    assert not tiny.on and tiny.reason.startswith("off:")
    q7b = count_parameters("qwen2.5-7b")
    # The paper preset at the 7B shape on 3 H200s (2026-11-28): on, as it ran; and on one H200 (an earlier
    # run, where the saver off ran out of memory in the first update).
    for gpus in (3, 1):
        choice = choose(q7b, gpus, 0.6, H200_MIB, vocab=152064, micro_batch=4, tokens=PAPER_TOKENS)
        assert choice.on and "cannot share" in choice.reason and "7.62B" in choice.reason
    # The 0.5B shape with the real vocabulary and the embedded preset's micro-batch of 16 rows: its logits alone are
    # ~23 GiB, so on; with micro-batches of one row it shares an H100.
    q05b = count_parameters("qwen2.5-0.5b")
    assert choose(q05b, 1, 0.6, H100_MIB, vocab=151936, micro_batch=16, tokens=1280).on
    assert not choose(q05b, 1, 0.6, H100_MIB, vocab=151936, micro_batch=1, tokens=1280).on


@pytest.mark.parametrize(("parameters", "card"), [(None, H100_MIB), (10**9, None), (10**9, 0)])
def test_an_unknown_size_or_card_keeps_verls_default(parameters, card) -> None:
    choice = choose(parameters, 1, 0.6, card)
    assert choice.on and "verl's default" in choice.reason


def test_the_command_line_reads_the_models_config(tmp_path, capsys) -> None:
    shape_config("qwen2.5-7b").save_pretrained(tmp_path / "q7b")  # a config alone: counted on the meta device
    assert model_size(str(tmp_path / "q7b")) == (7_615_616_512, 152064)
    args = ["--model", str(tmp_path / "q7b"), "--gpus", "3", "--utilization", "0.6", "--card-mib", str(H200_MIB)]
    assert main([*args, "--micro-batch", "4", "--tokens", str(PAPER_TOKENS)]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == "1" and "cannot share" in captured.err
    assert main(["--model", str(tmp_path / "missing"), "--utilization", "0.6", "--card-mib", "81559"]) == 0
    assert capsys.readouterr().out.strip() == "1"

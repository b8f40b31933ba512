"""Real-width policies with random weights: the folder loads as a Qwen2 with the requested shape."""

from __future__ import annotations

import pytest

from mr_search.shaped_model import SHAPES, build_shaped_model
from mr_search_embedded.tiny_model import build_tokenizer


def test_builds_a_loadable_qwen2_of_the_shape(tmp_path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = build_tokenizer(["<search> a b c </search> hello world"] * 20, tmp_path / "tok", vocab_size=600)
    out = build_shaped_model("test", tmp_path / "tok", tmp_path / "model")
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.config.model_type == "qwen2"
    assert model.config.hidden_size == SHAPES["test"]["hidden_size"]
    assert model.config.vocab_size == len(tokenizer)
    assert AutoTokenizer.from_pretrained(out).eos_token == tokenizer.eos_token  # the chat tokenizer came along
    assert SHAPES["qwen2.5-7b"]["num_key_value_heads"] == 4 and SHAPES["qwen2.5-0.5b"]["hidden_size"] == 896


def test_unknown_shape_and_missing_tokenizer_are_errors(tmp_path) -> None:
    with pytest.raises(ValueError, match=r"qwen2\.5-0\.5b"):
        build_shaped_model("qwen9", tmp_path, tmp_path / "m")
    with pytest.raises(ValueError, match=r"no tokenizer\.json"):
        build_shaped_model("test", tmp_path, tmp_path / "m")

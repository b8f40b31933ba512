"""Real-width policies with random weights: Qwen2.5's published configurations, the real vocabulary size, a tokenizer
of exactly that many ids that decodes every one, and a folder transformers loads and generates from."""

from __future__ import annotations

import json

import pytest

from mr_search.ops.shaped_model import (
    COMMON,
    PAD_TOKEN_FORMAT,
    SHAPES,
    build_shaped_model,
    build_tokenizer,
    count_parameters,
    pad_tokenizer_json,
    shape_config,
)

# The published config.json values of the Qwen2.5 base models, and their parameter counts (the model cards: 0.49B,
# 1.54B, 3.09B, 7.61B).
PUBLISHED = {
    "qwen2.5-0.5b": (896, 4864, 24, 14, 2, True, 151936, 494_032_768),
    "qwen2.5-1.5b": (1536, 8960, 28, 12, 2, True, 151936, 1_543_714_304),
    "qwen2.5-3b": (2048, 11008, 36, 16, 2, True, 151936, 3_085_938_688),
    "qwen2.5-7b": (3584, 18944, 28, 28, 4, False, 152064, 7_615_616_512),
}


@pytest.mark.parametrize("shape", sorted(PUBLISHED))
def test_each_shape_is_the_published_configuration(shape: str) -> None:
    hidden, intermediate, layers, heads, kv_heads, tied, vocab, params = PUBLISHED[shape]
    config = shape_config(shape)
    assert (config.hidden_size, config.intermediate_size, config.num_hidden_layers) == (hidden, intermediate, layers)
    assert (config.num_attention_heads, config.num_key_value_heads) == (heads, kv_heads)
    assert config.tie_word_embeddings is tied and config.vocab_size == vocab
    assert config.max_position_embeddings == 32768 and config.rms_norm_eps == 1e-6
    theta = getattr(config, "rope_theta", None) or config.rope_parameters["rope_theta"]
    assert theta == COMMON["rope_theta"] == 1e6
    assert count_parameters(shape) == params  # on the meta device: nothing allocated


def test_unknown_shape_is_an_error(tmp_path) -> None:
    with pytest.raises(ValueError, match=r"qwen2\.5-0\.5b"):
        build_shaped_model("qwen9", tmp_path / "m")
    with pytest.raises(ValueError, match=r"no tokenizer\.json"):
        build_shaped_model("test", tmp_path / "m", tokenizer_dir=tmp_path / "none")


def test_the_protocol_tokenizer_is_padded_to_the_vocabulary_and_decodes_every_id(tmp_path) -> None:
    from transformers import AutoTokenizer

    out = build_tokenizer(tmp_path / "tok", 151936)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert len(tokenizer) == 151936
    assert tokenizer.decode([151935]) == PAD_TOKEN_FORMAT.format(151935)
    assert tokenizer.decode([0]) == "<|endoftext|>" and tokenizer.eos_token == "<|im_end|>"
    # Ordinary entries, not added tokens: 150k added tokens would make every load slow.
    data = json.loads((out / "tokenizer.json").read_text())
    assert len(data["added_tokens"]) == 3 and len(data["model"]["vocab"]) == 151936
    # The protocol's text round-trips, and a tag is several tokens (as in Qwen's tokenizer).
    text = "<think> a </think> <search> Paris </search>"
    ids = tokenizer(text)["input_ids"]
    assert tokenizer.decode(ids) == text
    assert len(tokenizer("</search>")["input_ids"]) > 1
    chat = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert chat == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_a_given_tokenizer_with_added_tokens_is_padded_after_them(tmp_path) -> None:
    from transformers import AutoTokenizer

    base = build_tokenizer(tmp_path / "base", 2000)
    tokenizer = AutoTokenizer.from_pretrained(base)
    tokenizer.add_tokens(["<search>", "</search>"])  # like the tiny policy's tag tokens: ids after the vocabulary
    tokenizer.save_pretrained(tmp_path / "tagged")
    data = json.loads((tmp_path / "tagged" / "tokenizer.json").read_text())
    del data["model"]["vocab"][PAD_TOKEN_FORMAT.format(1500)]  # a gap: refused
    with pytest.raises(ValueError, match="gaps"):
        pad_tokenizer_json(data, 3000)
    out = build_tokenizer(tmp_path / "padded", 3000, tokenizer_dir=tmp_path / "tagged")
    padded = AutoTokenizer.from_pretrained(out)
    assert len(padded) == 3000
    # The added tags move to the last ids (where the tokenizers library puts added tokens); the padding is between.
    assert padded.convert_tokens_to_ids(["<search>", "</search>"]) == [2998, 2999]
    assert padded.decode([2000]) == PAD_TOKEN_FORMAT.format(2000) and padded.decode([2999]) == "</search>"
    assert padded("a </search>")["input_ids"][-1] == 2999  # still one token, matched before the BPE
    with pytest.raises(ValueError, match="more than the model's vocabulary"):
        build_tokenizer(tmp_path / "small", 1000, tokenizer_dir=tmp_path / "tagged")


def test_the_test_shape_with_the_real_vocabulary_loads_and_generates(tmp_path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out, params = build_shaped_model("test", tmp_path / "model")
    model = AutoModelForCausalLM.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert model.config.model_type == "qwen2" and model.config.vocab_size == len(tokenizer) == 151936
    assert model.config.hidden_size == SHAPES["test"]["hidden_size"]
    assert params == sum(p.numel() for p in model.parameters())
    assert json.loads((out / "shaped_model.json").read_text())["parameters"] == params
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Question: who?"}], add_generation_prompt=True, return_tensors="pt"
    )
    prompt = prompt["input_ids"] if hasattr(prompt, "keys") else prompt
    with torch.no_grad():
        generated = model.generate(prompt, max_new_tokens=8, do_sample=True, pad_token_id=tokenizer.pad_token_id)
    new = generated[0, prompt.shape[1] :].tolist()
    assert 1 <= len(new) <= 8
    assert isinstance(tokenizer.decode(new), str)


def test_the_command_line_prints_the_parameter_count(tmp_path, capsys) -> None:
    from mr_search.ops.shaped_model import main

    assert main(["--shape", "test", "--out", str(tmp_path / "m")]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == str(tmp_path / "m")
    assert "parameters" in captured.err and "test" in captured.err


# The published config.json values of Qwen3-4B and Qwen3-8B and their parameter counts (the model cards: 4.0B, 8.2B).
PUBLISHED_QWEN3 = {
    "qwen3-4b": (2560, 9728, 36, 32, 8, True, 4_022_468_096),
    "qwen3-8b": (4096, 12288, 36, 32, 8, False, 8_190_735_360),
}


@pytest.mark.parametrize("shape", sorted(PUBLISHED_QWEN3))
def test_each_qwen3_shape_is_the_published_configuration(shape: str) -> None:
    hidden, intermediate, layers, heads, kv_heads, tied, params = PUBLISHED_QWEN3[shape]
    config = shape_config(shape)
    assert config.model_type == "qwen3" and config.head_dim == 128
    assert (config.hidden_size, config.intermediate_size, config.num_hidden_layers) == (hidden, intermediate, layers)
    assert (config.num_attention_heads, config.num_key_value_heads) == (heads, kv_heads)
    assert config.tie_word_embeddings is tied and config.vocab_size == 151936
    assert config.max_position_embeddings == 40960 and config.rms_norm_eps == 1e-6 and config.attention_bias is False
    theta = getattr(config, "rope_theta", None) or config.rope_parameters["rope_theta"]
    assert theta == 1e6
    assert count_parameters(shape) == params  # q/k norms included: Qwen3's architecture, not Qwen2's


def test_the_qwen3_test_shape_has_qwen3s_layout_and_template(tmp_path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out, _ = build_shaped_model("qwen3-test", tmp_path / "model")
    model = AutoModelForCausalLM.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert model.config.model_type == "qwen3" and type(model).__name__ == "Qwen3ForCausalLM"
    assert any("q_norm" in name for name, _ in model.named_parameters())
    assert len(tokenizer) == model.config.vocab_size == 151936
    assert tokenizer.convert_tokens_to_ids(["<|im_end|>", "<think>", "</think>"]) == [151645, 151667, 151668]
    assert tokenizer.decode([151935]) == PAD_TOKEN_FORMAT.format(151935)
    assert model.config.eos_token_id == tokenizer.eos_token_id == 151645
    chat = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True, enable_thinking=False
    )
    assert chat == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    with torch.no_grad():
        logits = model(torch.tensor([[151644, 151667, 151668]])).logits
    assert logits.shape == (1, 3, 151936)


def test_a_qwen3_download_keeps_its_added_ids_when_padded(tmp_path) -> None:
    from transformers import AutoTokenizer

    from mr_search.ops.qwen3_tokenizer import protocol_tokenizer

    # Qwen3's tokenizer.json as shipped: 151,643 vocabulary entries, the 26 added tokens only in added_tokens.
    source = protocol_tokenizer(tmp_path / "download")
    data = json.loads((source / "tokenizer.json").read_text())
    for token in data["added_tokens"]:
        del data["model"]["vocab"][token["content"]]
    (source / "tokenizer.json").write_text(json.dumps(data))
    out = build_tokenizer(tmp_path / "padded", 151936, tokenizer_dir=source, qwen3=True)
    padded = AutoTokenizer.from_pretrained(out)
    assert len(padded) == 151936
    assert padded.convert_tokens_to_ids(["<|endoftext|>", "<think>", "</think>"]) == [151643, 151667, 151668]
    assert padded.decode([151669]) == PAD_TOKEN_FORMAT.format(151669)

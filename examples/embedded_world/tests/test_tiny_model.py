"""The tiny local policy: deterministic, chat template with ChatML boundaries, tags as single tokens."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from mr_search import prompts
from mr_search_embedded.tiny_model import TinyModelConfig, ensure_tiny_model

TEXTS = [prompts.question_prompt("Where was Aldo Venn born?"), prompts.REFLECTION_PROMPT] * 20
SMALL = TinyModelConfig(vocab_size=600, hidden_size=32, intermediate_size=64, num_attention_heads=2)


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def test_build_is_deterministic(tmp_path: Path) -> None:
    a = ensure_tiny_model(tmp_path / "a", texts=TEXTS, config=SMALL)
    b = ensure_tiny_model(tmp_path / "b", texts=TEXTS, config=SMALL)
    assert _digest(a) == _digest(b)


def test_chat_template_and_tags(tmp_path: Path) -> None:
    folder = ensure_tiny_model(tmp_path / "m", texts=TEXTS, config=SMALL)
    tok = AutoTokenizer.from_pretrained(folder)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    for tag in ("<search>", "</search>", "</answer>"):
        assert len(tok.encode(tag, add_special_tokens=False)) == 1
    ids = tok.encode("<search> Aldo Venn </search>", add_special_tokens=False)
    assert tok.decode(ids) == "<search> Aldo Venn </search>"
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert model.config.vocab_size == len(tok)


def test_invalid_config_names_the_problem() -> None:
    with pytest.raises(ValueError, match="divisible"):
        TinyModelConfig(hidden_size=30, num_attention_heads=4)


def test_named_policy_shapes() -> None:
    from mr_search_embedded.tiny_model import POLICY_SHAPES, policy_shape

    assert policy_shape("tiny") == TinyModelConfig()
    small = policy_shape("small")
    assert small.num_hidden_layers == 2 * TinyModelConfig().num_hidden_layers
    assert small.intermediate_size == 2 * TinyModelConfig().intermediate_size
    with pytest.raises(ValueError, match="unknown tiny policy shape 'huge'; use one of tiny, small"):
        policy_shape("huge")
    assert set(POLICY_SHAPES) == {"tiny", "small"}
    # The cache keys of the built shapes (the warm starts' bases: the keys of their folders under tiny_model/).
    assert (policy_shape("tiny").key(), policy_shape("small").key()) == ("c937b4c35e84", "42fd57d854a0")


def test_an_opt_in_world_gets_its_own_cache_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from mr_search_embedded.tiny_model import cache_root

    monkeypatch.setenv("MR_SEARCH_CACHE", str(tmp_path))
    monkeypatch.delenv("MR_SEARCH_WORLD", raising=False)
    assert cache_root() == tmp_path
    monkeypatch.setenv("MR_SEARCH_WORLD", "namesake")
    assert cache_root() == tmp_path / "worlds" / "namesake-v4"


def test_two_concurrent_builds_build_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call_together) -> None:
    """Two runs side by side on a cold cache: the second waits on the first's lock and gets its folder."""
    import time

    from mr_search_embedded import tiny_model

    real_build = tiny_model.build_model
    builds: list[Path] = []

    def slow_build(out_dir, tokenizer, config):
        builds.append(Path(out_dir))
        time.sleep(0.5)  # long enough that the second caller arrives mid-build
        return real_build(out_dir, tokenizer, config)

    monkeypatch.setattr(tiny_model, "build_model", slow_build)
    results = call_together(lambda: ensure_tiny_model(tmp_path / "m", texts=TEXTS, config=SMALL), timeout=60)
    assert len(builds) == 1, "the second caller must wait for the first build, not start its own"
    assert results == [tmp_path / "m"] * 2 and (tmp_path / "m" / ".complete").is_file()
    assert AutoModelForCausalLM.from_pretrained(tmp_path / "m").config.hidden_size == SMALL.hidden_size

"""Whole-word name tokens (the namesake world's recipe 4): each name word is one token, nothing else changes, and the
default world's tokenizer, policy shapes and cache keys stay as they were."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, AutoTokenizer

from mr_search import prompts
from mr_search_embedded.name_tokens import add_whole_words, name_tokens_report, spaced_form
from mr_search_embedded.tiny_model import (
    TinyModelConfig,
    build_tokenizer,
    ensure_tiny_model,
    policy_shape,
    world_name_words,
)

TEXT = (
    "The painter Aldo Venn was born in Kumholt. The sailor Aldo Venn is better known as Drelo Kam. "
    "Drelo Kam was a sailor born in Tarport. Where was the sailor Vupas Zi born? Pekrul Zuk worked as a singer."
)
NAMES = ["Aldo Venn", "Drelo Kam", "Vupas Zi", "Sigel Tokul"]


def _trained(texts: list[str]) -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    from tokenizers import decoders

    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


def test_each_word_after_a_space_becomes_one_token_and_text_round_trips() -> None:
    plain = _trained([TEXT] * 5)
    words = [w for name in NAMES for w in name.split()]
    assert any(len(plain.encode(f" {w}").ids) > 1 for w in words), "the test needs words the plain BPE splits"
    extended, added = add_whole_words(plain, words)
    for word in words:
        assert len(extended.encode(f" {word}").ids) == 1, word
        assert extended.decode(extended.encode(f" {word}").ids) == f" {word}"
    before = plain.get_vocab_size()
    assert extended.get_vocab_size() == before + added
    assert added >= sum(spaced_form(w) not in plain.get_vocab() for w in dict.fromkeys(words))
    new = set(extended.get_vocab()) - set(plain.get_vocab())
    assert sorted(extended.token_to_id(t) for t in new) == list(range(before, before + added)), "ids follow the trained"
    assert all(plain.token_to_id(t) == extended.token_to_id(t) for t in plain.get_vocab()), "trained ids are kept"
    query = "<search> Vupas Zi </search>"
    assert extended.decode(extended.encode(query).ids) == query
    assert extended.decode(extended.encode(TEXT).ids) == TEXT
    assert len(extended.encode(TEXT).ids) < len(plain.encode(TEXT).ids)


def test_words_not_in_the_list_are_split_as_before() -> None:
    plain = _trained([TEXT] * 5)
    words = ["Vupas", "Zi", "Aldo", "Venn"]
    extended, _ = add_whole_words(plain, words)
    for text in ("born in Kumholt.", " Pekrul Zuk worked as a singer", " Tarport", " Drelo Kam", "Kumholt"):
        assert extended.encode(text).tokens == plain.encode(text).tokens, text
    # A name word at the start of a text or after a quote (no space) keeps its pieces: only " Venn" was added.
    assert extended.encode('"Aldo').tokens == plain.encode('"Aldo').tokens
    report = name_tokens_report(plain, extended, [TEXT], words)
    assert report["other_words_changed"] == 0 and report["words"] == len(plain.pre_tokenizer.pre_tokenize_str(TEXT))
    assert report["tokens_extended"] == report["tokens_plain"] - sum(
        len(plain.encode(f" {n}").ids) - 2 for n in ("Aldo Venn", "Aldo Venn", "Vupas Zi")
    )


def test_a_bad_word_or_a_late_call_is_refused_with_the_reason() -> None:
    plain = _trained([TEXT] * 5)
    with pytest.raises(ValueError, match="not one word"):
        add_whole_words(plain, ["Aldo Venn"])
    with pytest.raises(ValueError, match="not one word"):
        add_whole_words(plain, ["Kam."])
    plain.add_tokens(["<search>"])
    with pytest.raises(ValueError, match="call it before adding tokens"):
        add_whole_words(plain, ["Aldo"])


def test_build_tokenizer_keeps_tags_and_the_template_with_whole_words(tmp_path: Path) -> None:
    texts = [prompts.question_prompt("Where was Aldo Venn born?"), TEXT] * 10
    fast = build_tokenizer(texts, tmp_path, vocab_size=600, whole_words=["Vupas", "Zi", "Tokul"])
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    for tag in ("<search>", "</search>", "<answer>"):
        assert len(loaded.encode(tag, add_special_tokens=False)) == 1
    assert len(loaded.encode(" Vupas Zi", add_special_tokens=False)) == 2
    ids = loaded.encode("<search> Vupas Zi </search>", add_special_tokens=False)
    assert loaded.decode(ids) == "<search> Vupas Zi </search>"
    assert len(loaded) == len(fast)


def test_the_default_worlds_shapes_keep_their_cache_keys() -> None:
    # The keys the default world's cache (and the namesake world's recipes 1-3) were built under.
    assert TinyModelConfig().key() == "c937b4c35e84"
    assert policy_shape("small").key() == "42fd57d854a0"
    assert replace(policy_shape("small"), name_tokens=True).key() not in {"c937b4c35e84", "42fd57d854a0"}


def test_name_words_exist_only_in_the_namesake_world(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MR_SEARCH_CACHE", str(tmp_path))
    monkeypatch.delenv("MR_SEARCH_WORLD", raising=False)
    with pytest.raises(ValueError, match="name_tokens is an option of the namesake world, not of 'default'"):
        world_name_words()
    config = TinyModelConfig(vocab_size=600, hidden_size=32, intermediate_size=64, num_attention_heads=2)
    with pytest.raises(ValueError, match="MR_SEARCH_WORLD=namesake"):
        ensure_tiny_model(tmp_path / "m", texts=[TEXT], config=replace(config, name_tokens=True))
    assert not (tmp_path / "m" / ".complete").exists()


def test_a_namesake_policy_has_every_person_name_word_as_one_token(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from mr_search_embedded.world.namesake import namesake_person_names

    monkeypatch.setenv("MR_SEARCH_CACHE", str(tmp_path))
    monkeypatch.setenv("MR_SEARCH_WORLD", "namesake")
    monkeypatch.delenv("MR_SEARCH_NAMESAKE_VERSION", raising=False)  # version 2 (3 has 1,453 name words)
    names = namesake_person_names()
    words = world_name_words()
    assert words == list(dict.fromkeys(w for n in names for w in n.split())) and len(words) > 2000
    config = TinyModelConfig(
        vocab_size=600, hidden_size=32, intermediate_size=64, num_attention_heads=2, name_tokens=True
    )
    texts = [prompts.question_prompt(f"Where was the sailor {n} born?") for n in names[:50]]
    folder = ensure_tiny_model(tmp_path / "m", texts=texts, config=config)
    tok = AutoTokenizer.from_pretrained(folder)
    # The policy's tokenizer loads as Qwen2Tokenizer, rebuilt from the vocabulary and merges: the merges must do it.
    assert type(tok).__name__ == "Qwen2Tokenizer"
    assert [w for w in words if len(tok.encode(f" {w}", add_special_tokens=False)) != 1] == []
    assert all(len(tok.encode(f" {n}", add_special_tokens=False)) == 2 for n in names)
    assert AutoModelForCausalLM.from_pretrained(folder).config.vocab_size == len(tok)

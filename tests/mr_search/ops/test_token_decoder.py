"""The checks' decoder without transformers: the same text and special ids as AutoTokenizer, for the kind of
tokenizer the project's policies carry (a byte-level BPE with ChatML's special tokens) and a Qwen-style config."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from mr_search.ops.token_decoder import load_decoder, special_tokens

TEXTS = [
    "<|im_start|>user\nWho wrote the book?<|im_end|>\n<|im_start|>assistant\n<search>author of the book</search>",
    "<answer>Ada Lovelace</answer> — naïve café, 3.5 km; \u00e9t\u00e9 'quoted' words.",
] * 20


@pytest.fixture(scope="module")
def policy_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from mr_search.cpu.chatml_tokenizer import train_chatml_bpe

    folder = tmp_path_factory.mktemp("policy")
    train_chatml_bpe(TEXTS, vocab_size=400).save_pretrained(folder)
    return folder


def test_decode_and_special_ids_equal_transformers_without_importing_it(policy_tokenizer: Path) -> None:
    from transformers import AutoTokenizer

    reference = AutoTokenizer.from_pretrained(policy_tokenizer)
    ours = load_decoder(policy_tokenizer)
    assert ours.special_ids == frozenset(reference.all_special_ids)
    assert {reference.convert_ids_to_tokens(i) for i in ours.special_ids} >= {"<|im_end|>", "<|endoftext|>"}
    rng = random.Random(0)
    samples = [reference.encode(text) for text in TEXTS[:2]]
    samples += [[rng.randrange(len(reference)) for _ in range(rng.randrange(1, 40))] for _ in range(200)]
    for ids in samples:
        assert ours.decode(ids) == reference.decode(ids, skip_special_tokens=False)


def test_the_fast_path_imports_no_transformers(policy_tokenizer: Path) -> None:
    import subprocess

    code = (
        "import sys; from mr_search.ops.token_decoder import load_decoder; "
        f"d = load_decoder({str(policy_tokenizer)!r}); d.decode([1, 2]); "
        "assert 'transformers' not in sys.modules and 'torch' not in sys.modules, 'imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_config_that_asks_for_space_clean_up_goes_through_transformers(policy_tokenizer: Path, tmp_path) -> None:
    import shutil

    folder = tmp_path / "cleanup"
    shutil.copytree(policy_tokenizer, folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "clean_up_tokenization_spaces": True}))
    from transformers import AutoTokenizer

    reference = AutoTokenizer.from_pretrained(folder)
    ids = reference.encode("a , b . c")
    assert load_decoder(folder).decode(ids) == reference.decode(ids, skip_special_tokens=False)


def test_special_tokens_read_named_and_extra_tokens_once_in_order() -> None:
    config = {
        "eos_token": "<|im_end|>",
        "pad_token": {"content": "<|endoftext|>", "special": True},
        "bos_token": None,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
    }
    assert special_tokens(config) == ["<|im_end|>", "<|endoftext|>", "<|im_start|>"]

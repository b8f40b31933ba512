"""A policy's decoder and special ids read with ``tokenizers``: importing transformers took most of run_checks' time."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

# The special tokens transformers names in a tokenizer's config (all_special_ids: these, then the extra ones).
NAMED_SPECIAL: Final = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
EXTRA_SPECIAL: Final = ("extra_special_tokens", "additional_special_tokens")


@dataclass(frozen=True)
class TokenDecoder:
    decode: Callable[[Sequence[int]], str]
    special_ids: frozenset[int]


def _content(token: Any) -> str | None:
    if isinstance(token, dict):
        return token.get("content")
    return token if isinstance(token, str) else None


def special_tokens(config: dict[str, Any]) -> list[str]:
    """The special tokens a ``tokenizer_config.json`` names, in transformers' order, each once."""
    names = [_content(config.get(key)) for key in NAMED_SPECIAL]
    for key in EXTRA_SPECIAL:
        extra = config.get(key) or []
        names += [_content(token) for token in (extra.values() if isinstance(extra, dict) else extra)]
    return list(dict.fromkeys(name for name in names if name))


def load_decoder(path: str | Path) -> TokenDecoder:
    folder = Path(path)
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text()) if config_path.is_file() else {}
    # transformers' space clean-up after decoding (a config's choice) is transformers' own: that case goes there
    if (folder / "tokenizer.json").is_file() and not config.get("clean_up_tokenization_spaces"):
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        ids = (tokenizer.token_to_id(token) for token in special_tokens(config))
        return TokenDecoder(
            lambda ids: tokenizer.decode(list(ids), skip_special_tokens=False),
            frozenset(i for i in ids if i is not None),
        )
    from transformers import AutoTokenizer

    slow = AutoTokenizer.from_pretrained(str(path))
    return TokenDecoder(lambda ids: slow.decode(ids, skip_special_tokens=False), frozenset(slow.all_special_ids))

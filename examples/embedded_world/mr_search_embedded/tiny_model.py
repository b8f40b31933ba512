"""A tiny, deterministic, locally built policy (tokenizer + Qwen2) for the embedded default and tests."""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from mr_search import prompts

logger = logging.getLogger(__name__)

# Ordinary (non-special) single tokens for the protocol tags: they make the tiny model's job easier.
# Real tokenizers split tags into several pieces; the agent loop handles both.
TAG_TOKENS = tuple(f"<{slash}{tag}>" for tag in ("think", "search", "answer", "information") for slash in ("", "/"))


@dataclass(frozen=True)
class TinyModelConfig:
    """Shape of the tiny policy. Defaults train in minutes on 2 CPU cores."""

    vocab_size: int = 2048
    hidden_size: int = 128
    intermediate_size: int = 256
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 4096
    tag_tokens: bool = True
    seed: int = 0

    def key(self) -> str:
        """The cache key (``ensure_tiny_model``): a hash of the fields."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]

    def __post_init__(self) -> None:
        if self.vocab_size < 512:
            raise ValueError(f"TinyModelConfig.vocab_size={self.vocab_size}: use at least 512 (byte alphabet + merges)")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"TinyModelConfig: hidden_size={self.hidden_size} must be divisible by "
                f"num_attention_heads={self.num_attention_heads}"
            )
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"TinyModelConfig: num_attention_heads={self.num_attention_heads} must be divisible by "
                f"num_key_value_heads={self.num_key_value_heads}"
            )


# Named shapes of the tiny policy (``python -m mr_search_embedded.warmstart --policy NAME``). "tiny" is the
# embedded default's; "small" has twice the layers and feed-forward width (about 2x the compute a token), for worlds
# whose questions need more than copying one name (the namesake world: read whether the question's profession is in
# the passages, then search again with it).
POLICY_SHAPES: dict[str, TinyModelConfig] = {
    "tiny": TinyModelConfig(),
    "small": TinyModelConfig(num_hidden_layers=4, intermediate_size=512),
}


def policy_shape(name: str) -> TinyModelConfig:
    """The ``TinyModelConfig`` of a named shape (``POLICY_SHAPES``); an unknown name raises, listing the known ones."""
    try:
        return POLICY_SHAPES[name]
    except KeyError:
        raise ValueError(f"unknown tiny policy shape {name!r}; use one of {', '.join(POLICY_SHAPES)}") from None


def cache_root() -> Path:
    """The project's cache folder: $MR_SEARCH_CACHE, else ~/.cache/mr_search; ``<that>/worlds/<variant>`` when
    ``$MR_SEARCH_WORLD`` names an opt-in embedded world (its tokenizer, policy and warm starts stay apart)."""
    try:
        from mr_search_embedded.world.variant import variant_cache_dir
    except ImportError:  # the retrieval package is optional: then only the default world exists
        return Path(os.environ.get("MR_SEARCH_CACHE") or Path.home() / ".cache" / "mr_search")
    return variant_cache_dir()


def build_tokenizer(
    texts: Iterable[str],
    out_dir: Path | str,
    vocab_size: int = 2048,
    tag_tokens: bool = True,
):
    """Trains a byte-level BPE tokenizer on ``texts`` and saves it (with a ChatML chat template).

    Returns:
        The saved ``PreTrainedTokenizerFast``; eos is ``<|im_end|>``, pad is ``<|endoftext|>``.
    """
    from mr_search.cpu.chatml_tokenizer import CHAT_TEMPLATE, train_chatml_bpe

    fast = train_chatml_bpe(texts, vocab_size)
    if tag_tokens:
        fast.add_tokens(list(TAG_TOKENS))
    fast.chat_template = CHAT_TEMPLATE  # set again after add_tokens, as before (the saved files stay the same)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(out_dir)
    return fast


def build_model(out_dir: Path | str, tokenizer, config: TinyModelConfig = TinyModelConfig()):
    """Builds a randomly initialised Qwen2ForCausalLM sized for ``tokenizer`` and saves it to ``out_dir``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(config.seed)
    model_config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads,
        max_position_embeddings=config.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="float32",
    )
    model = Qwen2ForCausalLM(model_config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    out_dir = Path(out_dir)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return model


def default_texts() -> Iterator[str]:
    """Texts the tokenizer learns from: the protocol's own texts, then the embedded world if installed."""
    yield prompts.QUESTION_TEMPLATE
    yield prompts.reflection_prompt(True)
    yield prompts.reflection_prompt(False)
    yield prompts.INVALID_ACTION_MESSAGE
    yield prompts.SEARCH_FAILED_MESSAGE
    yield "<think> I need to search for this. </think> <search> query </search> <answer> answer </answer>"
    try:
        from mr_search_embedded.world.world import ensure_world
    except ImportError:  # the retrieval package is optional; prompts alone still give a working tokenizer
        logger.warning("mr_search_embedded.world is not importable: the tiny tokenizer learns the prompts only")
        return
    world = ensure_world()
    for path in (world.corpus, world.train):
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                row = json.loads(line)
                yield row.get("contents") or row.get("question", "")


def ensure_tiny_model(
    out_dir: Path | str | None = None,
    texts: Iterable[str] | None = None,
    config: TinyModelConfig = TinyModelConfig(),
) -> Path:
    """Builds the tiny policy once and returns its directory (cached; rebuilt when the config changes).

    The default location is ``$MR_SEARCH_CACHE/tiny_model/<config hash>``. The build is deterministic:
    the same texts and config give the same tokenizer and weights. Safe for several processes at once (two runs side
    by side on a cold cache): one builds while holding ``.<folder>.lock`` beside the folder, the others wait for it.
    """
    key = config.key()
    out = Path(out_dir) if out_dir is not None else cache_root() / "tiny_model" / key
    done = out / ".complete"
    if done.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():  # another process built it while this one waited
            return out
        logger.info("building the tiny policy in %s", out)
        tokenizer = build_tokenizer(
            texts if texts is not None else default_texts(), out, config.vocab_size, tag_tokens=config.tag_tokens
        )
        build_model(out, tokenizer, config)
        done.write_text(json.dumps(asdict(config), sort_keys=True))
    return out

"""Synthetic inputs of the GPU retrieval benchmark: a JSON-lines corpus of N passages and a BERT-base-shaped encoder.

The corpus is written with numpy as fixed-width lines (wiki-18-sized passages: a title line and
about 80 pseudo-words, ~740 bytes a line), so 21M passages take minutes, not hours; the service
reads it through its real `CorpusStore`. The encoder directory holds a random-weight `BertModel` and a WordPiece fast
tokenizer built locally with `tokenizers`, loaded by the service's real `HFEncoder`: no hub downloads.
"""

from __future__ import annotations

import itertools
import json
import logging
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

ID_WIDTH = 8  # zero-padded passage ids: enough for wiki-18's 21,015,324 passages
_BODIES = 64  # distinct passage bodies, cycled
_CHUNK = 1 << 20  # passages generated and written at a time
_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_ENGLISH = [
    "who",
    "what",
    "when",
    "where",
    "which",
    "how",
    "many",
    "founded",
    "was",
    "is",
    "the",
    "capital",
    "of",
    "film",
    "starred",
    "entity",
    "a",
    "an",
    "in",
    "on",
]


def word_list(n: int = 6000, seed: int = 0) -> list[str]:
    """Deterministic pseudo-words built from syllables; each one is a single token of the benchmark tokenizer."""
    onsets = [
        "b",
        "c",
        "d",
        "f",
        "g",
        "h",
        "j",
        "k",
        "l",
        "m",
        "n",
        "p",
        "r",
        "s",
        "t",
        "v",
        "w",
        "z",
        "br",
        "ch",
        "dr",
        "gr",
        "kl",
        "pr",
        "sh",
        "st",
        "th",
        "tr",
    ]
    vowels = ["a", "e", "i", "o", "u", "ai", "ea", "io", "ou"]
    codas = ["", "n", "r", "s", "l", "m", "x", "nd", "rt", "st"]
    syllables = [o + v + c for o, v, c in itertools.product(onsets, vowels, codas)]
    rng = random.Random(seed)
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(syllables) for _ in range(rng.choice((1, 2, 2)))))
    return sorted(words)


def make_queries(n: int, seed: int = 0, words: list[str] | None = None) -> list[str]:
    """Question-like strings of 6-14 words (about 10-20 tokens, like the agent's search queries)."""
    words = words or word_list()
    rng = random.Random(seed)
    stems = ("who founded", "when was", "where is", "what is the capital of", "which film starred", "how many")
    return [f"{rng.choice(stems)} {' '.join(rng.choices(words, k=rng.randint(4, 10)))}" for _ in range(n)]


# --- corpus -------------------------------------------------------------------------------------------


def _line_template(body: str) -> tuple[bytes, int, int]:
    """One JSON line with two id slots; returns it with the byte offsets of the slots."""
    placeholder = "#" * ID_WIDTH
    line = json.dumps({"id": placeholder, "contents": f'"Entity {placeholder}"\n{body}'}) + "\n"
    raw = line.encode()
    first = raw.index(placeholder.encode())
    second = raw.index(placeholder.encode(), first + ID_WIDTH)
    return raw, first, second


def corpus_path(work_dir: Path, num_passages: int, passage_words: int) -> Path:
    return work_dir / f"synthetic_corpus_{num_passages}x{passage_words}w.jsonl"


def write_corpus(path: Path, num_passages: int, passage_words: int = 80, seed: int = 0) -> Path:
    """Write `num_passages` lines {"id": "%08d", "contents": "\\"Entity %08d\\"\\n<words>"}; line i has id i.

    Reused when a complete file of that size already exists (its byte size is exact: fixed-width lines).
    """
    if num_passages <= 0 or num_passages >= 10**ID_WIDTH:
        raise ValueError(f"num_passages must be in 1..{10**ID_WIDTH - 1}, got {num_passages}")
    words = word_list(seed=seed)
    rng = random.Random(seed + 1)
    texts = [" ".join(rng.choices(words, k=passage_words)) for _ in range(_BODIES)]
    width = max(len(t) for t in texts)
    templates = [_line_template(t.ljust(width)) for t in texts]  # equal lengths: one fixed line width
    line_len, slot_a, slot_b = len(templates[0][0]), templates[0][1], templates[0][2]
    expected = line_len * num_passages
    if path.is_file() and path.stat().st_size == expected:
        logger.info("reusing corpus %s (%d passages)", path, num_passages)
        return path
    table = np.frombuffer(b"".join(t[0] for t in templates), dtype=np.uint8).reshape(_BODIES, line_len)
    block = np.tile(table, (_CHUNK // _BODIES, 1))  # chunks start at multiples of _BODIES: one block serves all
    powers = 10 ** np.arange(ID_WIDTH - 1, -1, -1, dtype=np.int64)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        for start in range(0, num_passages, _CHUNK):
            ids = np.arange(start, min(num_passages, start + _CHUNK), dtype=np.int64)
            lines = block[: ids.size]
            digits = (ids[:, None] // powers % 10 + ord("0")).astype(np.uint8)
            lines[:, slot_a : slot_a + ID_WIDTH] = digits
            lines[:, slot_b : slot_b + ID_WIDTH] = digits
            f.write(lines)  # C-contiguous: written straight from the buffer, no bytes copy
    tmp.replace(path)
    return path


# --- encoder --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EncoderShape:
    """BERT shape of the benchmark encoder; the defaults are BERT-base, the shape of e5-base-v2."""

    layers: int = 12
    hidden: int = 768
    heads: int = 12
    intermediate: int = 3072
    vocab_size: int = 30522
    max_positions: int = 512

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "heads", "intermediate", "vocab_size", "max_positions"):
            if getattr(self, name) <= 0:
                raise ValueError(f"encoder {name} must be > 0, got {getattr(self, name)}")
        if self.hidden % self.heads:
            raise ValueError(f"encoder hidden={self.hidden} must be a multiple of heads={self.heads}")
        if self.vocab_size < 8000:
            raise ValueError(f"encoder vocab_size={self.vocab_size} is too small: the word list needs 8000")

    def key(self) -> str:
        return f"bert-l{self.layers}-h{self.hidden}-a{self.heads}-i{self.intermediate}-v{self.vocab_size}"


def build_tokenizer(vocab_size: int, max_length: int = 512):
    """A BERT-style WordPiece fast tokenizer (lowercase, [CLS] ... [SEP]) over the benchmark's word list."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + list("0123456789.,?!'\"-:;()#")
    vocab_list = list(dict.fromkeys([*_SPECIALS, *letters, *(f"##{c}" for c in letters), *_ENGLISH, *word_list()]))
    vocab_list += [f"##tok{i}" for i in range(vocab_size - len(vocab_list))]
    vocab = {tok: i for i, tok in enumerate(vocab_list[:vocab_size])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tok.decoder = decoders.WordPiece()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=max_length,
    )


def ensure_encoder_dir(work_dir: Path, shape: EncoderShape, seed: int = 0) -> Path:
    """A Hugging Face model directory (config.json, fp16 safetensors, tokenizer) with random weights; cached."""
    import torch
    from transformers import BertConfig, BertModel

    out = work_dir / f"encoder-{shape.key()}"
    if (out / "config.json").is_file() and (out / "tokenizer.json").is_file():
        return out
    tmp = out.with_name(out.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    build_tokenizer(shape.vocab_size, shape.max_positions).save_pretrained(tmp)
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=shape.vocab_size,
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        intermediate_size=shape.intermediate,
        max_position_embeddings=shape.max_positions,
    )
    BertModel(config).half().save_pretrained(tmp)
    tmp.replace(out)
    return out

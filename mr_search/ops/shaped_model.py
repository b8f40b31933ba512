"""Qwen2.5- and Qwen3-shaped policies with random weights and the real vocabulary size: GPU memory and speed at real
width.

``python -m mr_search.ops.shaped_model --shape qwen2.5-7b --out <folder>`` (or ``qwen3-4b``, ``qwen3-8b``) writes a
Hugging Face folder (config, bf16 safetensors, tokenizer) that verl, SGLang and vLLM load like any Qwen2 / Qwen3
checkpoint. The configuration is the published one of the model (layers, widths, heads, rope, norm, embedding
tying, Qwen3's head_dim and q/k norms, and the vocabulary size: the embedding and the LM head, ~1.1B parameters
at 7B, and the logits' memory in the update are the real model's); the
weights are random, so such a model measures steps, memory and tokens/s, never quality. Nothing is downloaded.

The tokenizer has exactly as many entries as the model's vocabulary, so every id an engine samples decodes: a small
byte-level BPE learnt in-process from the protocol's own texts (``mr_search.prompts``), or ``--tokenizer DIR``'s
tokenizer, padded with unused entries (``<unused_N>``) added to the BPE model's vocabulary as ordinary tokens (150k
added or special tokens would make every load slow). A Qwen3 shape's tokenizer has Qwen3's layout: its 26 added tokens
at their real ids (``<think>`` 151667, ``</think>`` 151668, not special) and Qwen3's chat template
(``mr_search.ops.qwen3_tokenizer``; docs/qwen3.md).
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
from pathlib import Path
from typing import Any, Final

logger = logging.getLogger(__name__)

# The published config.json values of the Qwen2.5 base models. Qwen2.5-7B's embedding has 152,064 rows (0.5B-3B:
# 151,936); its tokenizer uses 151,665 of them. A shape's parameter count matches the published one exactly.
SHAPES: Final[dict[str, dict[str, Any]]] = {
    "qwen2.5-0.5b": dict(
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        tie_word_embeddings=True,
        vocab_size=151936,
    ),
    "qwen2.5-1.5b": dict(
        hidden_size=1536,
        intermediate_size=8960,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        tie_word_embeddings=True,
        vocab_size=151936,
    ),
    "qwen2.5-3b": dict(
        hidden_size=2048,
        intermediate_size=11008,
        num_hidden_layers=36,
        num_attention_heads=16,
        num_key_value_heads=2,
        tie_word_embeddings=True,
        vocab_size=151936,
    ),
    "qwen2.5-7b": dict(
        hidden_size=3584,
        intermediate_size=18944,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        tie_word_embeddings=False,
        vocab_size=152064,
    ),
    # For tests: the same code path in seconds on a CPU, with the real vocabulary.
    "test": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=True,
        vocab_size=151936,
    ),
    # The published config.json values of Qwen3-4B and Qwen3-8B (base and post-trained share them): head_dim 128
    # whatever the width (4B: 32 x 128 = 4,096 > 2,560), no q/k/v bias, an RMSNorm on each head's q and k.
    "qwen3-4b": dict(
        hidden_size=2560,
        intermediate_size=9728,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        tie_word_embeddings=True,
        vocab_size=151936,
    ),
    "qwen3-8b": dict(
        hidden_size=4096,
        intermediate_size=12288,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        tie_word_embeddings=False,
        vocab_size=151936,
    ),
    # For tests: Qwen3's architecture and layout in seconds on a CPU, with the real vocabulary.
    "qwen3-test": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        tie_word_embeddings=True,
        vocab_size=151936,
    ),
}
QWEN3_SHAPES: Final = frozenset(name for name in SHAPES if name.startswith("qwen3"))
# Shared by every Qwen2.5 size.
COMMON: Final[dict[str, Any]] = dict(
    hidden_act="silu",
    max_position_embeddings=32768,
    rope_theta=1_000_000.0,
    rms_norm_eps=1e-6,
    initializer_range=0.02,
    attention_dropout=0.0,
    use_sliding_window=False,
    use_cache=True,
)
# Shared by every Qwen3 size (in place of COMMON's context length).
QWEN3_COMMON: Final[dict[str, Any]] = {**COMMON, "max_position_embeddings": 40960, "attention_bias": False}
PAD_TOKEN_FORMAT: Final = "<unused_{}>"
_TOKENIZER_FILES: Final = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")


def shape_config(shape: str, **token_ids: int | None):
    """The ``Qwen2Config`` (``Qwen3Config`` for a Qwen3 shape) of ``shape`` (no weights). Raises ValueError for an
    unknown shape."""
    from transformers import Qwen2Config, Qwen3Config

    if shape not in SHAPES:
        raise ValueError(f"shape={shape!r} is not known; use one of {sorted(SHAPES)}")
    layers = SHAPES[shape]["num_hidden_layers"]
    config_class, common = (Qwen3Config, QWEN3_COMMON) if shape in QWEN3_SHAPES else (Qwen2Config, COMMON)
    return config_class(**common, **SHAPES[shape], max_window_layers=layers, torch_dtype="bfloat16", **token_ids)


def _model_class(shape: str) -> Any:
    from transformers import Qwen2ForCausalLM, Qwen3ForCausalLM

    return Qwen3ForCausalLM if shape in QWEN3_SHAPES else Qwen2ForCausalLM


def count_parameters(shape: str) -> int:
    """Parameters of ``shape``, counted on the meta device (nothing allocated; a tied head counts once)."""
    import torch

    with torch.device("meta"):
        model = _model_class(shape)(shape_config(shape))
    return sum(p.numel() for p in model.parameters())


def protocol_texts() -> list[str]:
    """The protocol's own texts, which the local BPEs learn from."""
    from mr_search import prompts

    return [
        prompts.QUESTION_TEMPLATE,
        prompts.reflection_prompt(True),
        prompts.reflection_prompt(False),
        prompts.INVALID_ACTION_MESSAGE,
        prompts.SEARCH_FAILED_MESSAGE,
        prompts.format_passages([{"contents": '"Title"\nA passage about a place, a person and a year: 1999.'}]),
        "<think> I need to search for this. </think> <search> query </search> <answer> answer </answer>",
    ]


def protocol_tokenizer(out: str | Path, bpe_size: int = 1024) -> Path:
    """Saves a byte-level BPE learnt from the protocol's texts (ChatML template; eos ``<|im_end|>``, pad
    ``<|endoftext|>``) to ``out``: every byte has a token, the tags split into several tokens as in Qwen's."""
    from mr_search.cpu.chatml_tokenizer import train_chatml_bpe

    fast = train_chatml_bpe(protocol_texts() * 4, bpe_size)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(out)
    return out


def pad_tokenizer_json(data: dict[str, Any], size: int, keep_added_ids: bool = False) -> dict[str, int]:
    """Pads ``data`` (a parsed tokenizer.json of a BPE model) with unused entries until its ids fill ``[0, size)``.

    The entries go into ``model.vocab`` as ordinary tokens, ids right after the model's own. Added tokens that are
    not in the model's vocabulary (e.g. the tiny policy's tag tokens) move to the last ids, where the tokenizers
    library puts added tokens when it loads the file; with ``keep_added_ids`` (a Qwen3 download: ``<think>`` must stay
    151667) added tokens whose ids directly follow the vocabulary's enter it at those ids and the padding follows them.
    Returns the new id of every moved added token (content -> id). Raises ValueError for a non-BPE model, gaps in the
    model's ids, or more tokens than ``size``.
    """
    model = data.get("model") or {}
    if model.get("type") != "BPE" or not isinstance(model.get("vocab"), dict):
        raise ValueError("only a BPE tokenizer.json (model.type BPE with a vocab) can be padded")
    vocab: dict[str, int] = model["vocab"]
    if set(vocab.values()) != set(range(len(vocab))):
        raise ValueError(f"the tokenizer's ids have gaps ({len(vocab)} ids up to {max(vocab.values())}): cannot pad it")
    extra = [token for token in data.get("added_tokens", []) if token["content"] not in vocab]
    if keep_added_ids and extra and sorted(t["id"] for t in extra) == list(range(len(vocab), len(vocab) + len(extra))):
        if len(vocab) + len(extra) > size:
            raise ValueError(
                f"the tokenizer has {len(vocab) + len(extra)} tokens, more than the model's vocabulary of {size}"
            )
        for token in extra:
            vocab[token["content"]] = token["id"]
        extra = []
    first_extra = size - len(extra)
    if first_extra < len(vocab):
        raise ValueError(
            f"the tokenizer has {len(vocab) + len(extra)} tokens, more than the model's vocabulary of {size}"
        )
    for i in range(len(vocab), first_extra):
        token = PAD_TOKEN_FORMAT.format(i)
        if token in vocab or any(t["content"] == token for t in extra):
            raise ValueError(f"the tokenizer already has {token!r}: cannot pad it")
        vocab[token] = i
    moved = {}
    for offset, token in enumerate(extra):
        token["id"] = moved[token["content"]] = first_extra + offset
    return moved


def build_tokenizer(
    out: str | Path, vocab_size: int, tokenizer_dir: str | Path | None = None, qwen3: bool = False
) -> Path:
    """Writes to ``out`` a tokenizer of exactly ``vocab_size`` ids: ``tokenizer_dir``'s (default: the protocol
    BPE; with ``qwen3``, in Qwen3's layout and template) padded with unused entries; checks that it loads and that
    every id decodes."""
    from transformers import AutoTokenizer

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if tokenizer_dir is None and qwen3:
        from mr_search.ops.qwen3_tokenizer import protocol_tokenizer as qwen3_protocol_tokenizer

        qwen3_protocol_tokenizer(out)
    elif tokenizer_dir is None:
        protocol_tokenizer(out)
    else:
        tokenizer_dir = Path(tokenizer_dir)
        if not (tokenizer_dir / "tokenizer.json").exists():
            raise ValueError(
                f"{tokenizer_dir}: no tokenizer.json; pass a folder that has one (a Qwen2.5 download, the tiny "
                "policy) or leave --tokenizer out for the protocol tokenizer"
            )
        for name in _TOKENIZER_FILES:
            if (tokenizer_dir / name).exists():
                shutil.copy2(tokenizer_dir / name, out / name)
    path = out / "tokenizer.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    size_before = len(data["model"].get("vocab", {})) if isinstance(data.get("model"), dict) else 0
    moved = pad_tokenizer_json(data, vocab_size, keep_added_ids=qwen3)
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    config_path = out / "tokenizer_config.json"
    if moved and config_path.exists():  # transformers' own copy of the added tokens' ids
        config = json.loads(config_path.read_text(encoding="utf-8"))
        decoder = config.get("added_tokens_decoder") or {}
        config["added_tokens_decoder"] = {
            str(moved.get(entry.get("content"), int(i))): entry for i, entry in decoder.items()
        }
        config_path.write_text(json.dumps(config, ensure_ascii=False, indent=2), encoding="utf-8")
    tokenizer = AutoTokenizer.from_pretrained(out)
    if len(tokenizer) != vocab_size:
        raise ValueError(f"{out}: the padded tokenizer has {len(tokenizer)} tokens, not {vocab_size}")
    backend = tokenizer.backend_tokenizer
    missing = [i for i in range(vocab_size) if backend.id_to_token(i) is None]
    if missing:
        raise ValueError(f"{out}: {len(missing)} ids have no token (first {missing[:5]})")
    tokenizer.decode(list(range(vocab_size)))  # every id decodes (raises otherwise)
    logger.info(
        "%s: tokenizer of %d ids (%d unused entries added, %d added tokens moved to the last ids)",
        out,
        vocab_size,
        vocab_size - size_before - len(moved),
        len(moved),
    )
    return out


def build_shaped_model(
    shape: str, out: str | Path, tokenizer_dir: str | Path | None = None, seed: int = 0
) -> tuple[Path, int]:
    """Writes a randomly initialised Qwen2 (Qwen3 for a Qwen3 shape) of ``shape`` (bf16) and its padded tokenizer to
    ``out``.

    Returns:
        ``(out, parameter count)``. Raises ValueError for an unknown shape or an unusable tokenizer.
    """
    import torch
    from transformers import AutoTokenizer

    if shape not in SHAPES:
        raise ValueError(f"shape={shape!r} is not known; use one of {sorted(SHAPES)}")
    out = Path(out)
    build_tokenizer(out, SHAPES[shape]["vocab_size"], tokenizer_dir, qwen3=shape in QWEN3_SHAPES)
    tokenizer = AutoTokenizer.from_pretrained(out)
    config = shape_config(
        shape,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # initialising 7B on a GPU takes seconds, not minutes
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # initialised in bf16 directly: 7B needs 15 GB, not 30
    try:
        with torch.device(device):
            model = _model_class(shape)(config)
    finally:
        torch.set_default_dtype(default_dtype)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out, safe_serialization=True)
    params = sum(p.numel() for p in model.parameters())
    (out / "shaped_model.json").write_text(
        json.dumps({"shape": shape, "parameters": params, "vocab_size": config.vocab_size, "seed": seed}) + "\n"
    )
    logger.info(
        "%s: %s-shaped %s, %d parameters (%.2fB), random bf16 weights",
        out,
        shape,
        config.model_type,
        params,
        params / 1e9,
    )
    return out, params


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", required=True, choices=sorted(SHAPES))
    parser.add_argument("--out", required=True)
    parser.add_argument(
        "--tokenizer", default=None, help="folder with tokenizer.json to pad (default: a BPE of the protocol's texts)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        out, params = build_shaped_model(args.shape, args.out, args.tokenizer, args.seed)
    except ValueError as error:
        print(f"shaped_model: {error}", file=sys.stderr)
        return 2
    print(f"shaped_model: {args.shape}: {params:,} parameters ({params / 1e9:.2f}B) in {out}", file=sys.stderr)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

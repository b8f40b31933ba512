"""Qwen2.5- and Qwen3-shaped policies with random weights and the real vocabulary size: GPU memory and speed at real
width.

The published configs, vocabulary included, so steps, memory and tokens/s are the real model's, never quality; the
tokenizer is padded with unused tokens to the vocabulary, so every sampled id decodes.
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


def _shape(
    hidden: int, ffn: int, layers: int, heads: int, kv_heads: int, tied: bool, head_dim: int = 0, vocab: int = 151936
) -> dict[str, Any]:
    sizes = {"hidden_size": hidden, "intermediate_size": ffn, "num_hidden_layers": layers, "num_attention_heads": heads}
    sizes["num_key_value_heads"] = kv_heads
    if head_dim:
        sizes["head_dim"] = head_dim
    return {**sizes, "tie_word_embeddings": tied, "vocab_size": vocab}


# The published config.json values of the Qwen2.5 base models (parameter counts match the published ones exactly)
# and of Qwen3-4B and -8B (head_dim 128 whatever the width); the test shapes run the same code path in seconds on a
# CPU, with the real vocabulary. Columns: hidden, intermediate, layers, heads, KV heads, tied embeddings.
SHAPES: Final[dict[str, dict[str, Any]]] = {
    "qwen2.5-0.5b": _shape(896, 4864, 24, 14, 2, True),
    "qwen2.5-1.5b": _shape(1536, 8960, 28, 12, 2, True),
    "qwen2.5-3b": _shape(2048, 11008, 36, 16, 2, True),
    "qwen2.5-7b": _shape(3584, 18944, 28, 28, 4, False, vocab=152064),  # 151,665 of them used
    "test": _shape(64, 128, 2, 2, 1, True),
    "qwen3-4b": _shape(2560, 9728, 36, 32, 8, True, head_dim=128),
    "qwen3-8b": _shape(4096, 12288, 36, 32, 8, False, head_dim=128),
    "qwen3-test": _shape(64, 128, 2, 2, 1, True, head_dim=32),
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
    """The ``Qwen2Config`` (``Qwen3Config`` for a Qwen3 shape) of ``shape``; ValueError for an unknown shape."""
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
    """Saves to ``out`` a byte-level ChatML BPE of the protocol's texts (the tags split as in Qwen's)."""
    from mr_search.cpu.chatml_tokenizer import train_chatml_bpe

    fast = train_chatml_bpe(protocol_texts() * 4, bpe_size)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(out)
    return out


def pad_tokenizer_json(data: dict[str, Any], size: int, keep_added_ids: bool = False) -> dict[str, int]:
    """Pads a parsed BPE tokenizer.json with unused entries until its ids fill ``[0, size)``; returns moved ids.

    Added tokens not in the vocabulary move to the last ids (where the tokenizers library puts them), unless
    ``keep_added_ids`` (Qwen3's ``<think>`` must stay 151667).
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
    """Writes a tokenizer of exactly ``vocab_size`` ids to ``out`` and checks that every id decodes."""
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
    """Writes a random bf16 model of ``shape`` and its padded tokenizer to ``out``; returns (out, parameters)."""
    import torch
    from transformers import AutoTokenizer

    if shape not in SHAPES:
        raise ValueError(f"shape={shape!r} is not known; use one of {sorted(SHAPES)}")
    out = Path(out)
    build_tokenizer(out, SHAPES[shape]["vocab_size"], tokenizer_dir, qwen3=shape in QWEN3_SHAPES)
    tokenizer = AutoTokenizer.from_pretrained(out)
    config = shape_config(
        shape, bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
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

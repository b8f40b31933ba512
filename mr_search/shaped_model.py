"""Qwen2.5-shaped policies with random weights and the tiny policy's tokenizer: GPU memory and speed at real width.

``python -m mr_search.shaped_model --shape qwen2.5-0.5b --tokenizer <tiny policy folder> --out <folder>`` writes a
Hugging Face folder (config, bf16 safetensors, tokenizer) that verl, SGLang and vLLM load like any Qwen2 checkpoint.
The weights are random: such a model measures steps, memory and tokens/s, never quality. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
from pathlib import Path
from typing import Final

logger = logging.getLogger(__name__)

# Layer shapes of the published Qwen2.5 base models (their config.json files); the vocabulary is the tokenizer's.
SHAPES: Final[dict[str, dict[str, int | bool]]] = {
    "qwen2.5-0.5b": dict(
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    ),
    "qwen2.5-1.5b": dict(
        hidden_size=1536,
        intermediate_size=8960,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    ),
    "qwen2.5-3b": dict(
        hidden_size=2048,
        intermediate_size=11008,
        num_hidden_layers=36,
        num_attention_heads=16,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    ),
    "qwen2.5-7b": dict(
        hidden_size=3584,
        intermediate_size=18944,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        tie_word_embeddings=False,
    ),
    # For tests: the same code path in seconds on a CPU.
    "test": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=True,
    ),
}
_TOKENIZER_FILES: Final = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")


def build_shaped_model(shape: str, tokenizer_dir: str | Path, out: str | Path, seed: int = 0) -> Path:
    """Writes a randomly initialised Qwen2 of ``shape`` with the tokenizer of ``tokenizer_dir`` to ``out``.

    Returns:
        ``out``. Raises ValueError for an unknown shape or a folder without a tokenizer.
    """
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    if shape not in SHAPES:
        raise ValueError(f"shape={shape!r} is not known; use one of {sorted(SHAPES)}")
    tokenizer_dir, out = Path(tokenizer_dir), Path(out)
    if not (tokenizer_dir / "tokenizer.json").exists():
        raise ValueError(
            f"{tokenizer_dir}: no tokenizer.json; pass a folder that has one (e.g. a Qwen2.5 download or the "
            "embedded world's tiny policy)"
        )
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        max_position_embeddings=32768,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
        bos_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="bfloat16",
        **SHAPES[shape],
    )
    torch.manual_seed(seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # initialising 7B on a GPU takes seconds, not minutes
    with torch.device(device):
        model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    for name in _TOKENIZER_FILES:
        if (tokenizer_dir / name).exists():
            shutil.copy2(tokenizer_dir / name, out / name)
    params = sum(p.numel() for p in model.parameters())
    logger.info("%s: %s-shaped Qwen2, %.1fM parameters, random bf16 weights", out, shape, params / 1e6)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", required=True, choices=sorted(SHAPES))
    parser.add_argument("--tokenizer", required=True, help="folder with tokenizer.json (the tiny policy's)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        print(build_shaped_model(args.shape, args.tokenizer, args.out, args.seed))
    except ValueError as error:
        print(f"shaped_model: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

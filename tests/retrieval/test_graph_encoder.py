"""Bucketed encoder (the padding the CUDA graphs replay): bucket choice, inert padding, eager fallback, factory.

The graph capture itself needs CUDA: those tests skip on a machine without it (the GPU benchmark checks the
replayed embeddings and top-k against the eager encoder on the device).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mr_search_retrieval.config import EncoderConfig
from mr_search_retrieval.encoders import HFEncoder
from mr_search_retrieval.graph_encoder import (
    BucketedEncoder,
    CudaGraphEncoder,
    GraphBuckets,
    make_encoder,
    pad_inputs,
)

TEXTS = [  # 3 to ~30 tokens, unsorted: sub-batches and buckets of several widths
    "Who wrote Tarn Ridge?",
    "Ketil",
    "Which band released the album that the river Ousel gave its name to, and in which year did it chart first?",
    "How tall is the Velmor tower?",
    "Name the treaty signed at Ardwick after the long winter war between the two northern kingdoms of the coast.",
    "mayor of Sallow",
]
CPU = EncoderConfig(device="cpu", cpu_bf16=False)


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    return HFEncoder(CPU).encode_queries(TEXTS)


def test_buckets_double_up_to_the_limits_and_fit_the_smallest_shape() -> None:
    b = GraphBuckets.for_limits(max_batch=100, max_length=40)
    assert b.batch == (8, 16, 32, 64, 100) and b.length == (16, 32, 40)
    assert b.fit(1, 3) == (8, 16)
    assert b.fit(9, 16) == (16, 16)
    assert b.fit(64, 17) == (64, 32)
    assert b.fit(100, 40) == (100, 40)
    assert b.fit(101, 10) is None and b.fit(3, 41) is None
    shapes = b.shapes()
    assert len(shapes) == 15 and shapes[0] == (100, 40) and shapes[-1] == (8, 16)
    assert GraphBuckets.for_limits(4, 8) == GraphBuckets((4,), (8,))


@pytest.mark.parametrize("batch", [(), (8, 8), (16, 8), (0, 4)])
def test_bad_buckets_are_rejected_with_the_rule(batch: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="strictly increasing tuple of positive ints"):
        GraphBuckets(batch, (16,))


def test_pad_inputs_pads_right_and_gives_padded_rows_one_attended_token() -> None:
    ids = np.array([[101, 7, 102], [101, 102, 0]])
    mask = np.array([[1, 1, 1], [1, 1, 0]])
    out = pad_inputs({"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}, (4, 5), 9)
    assert out.shape == (3, 4, 5) and out.dtype == np.int64
    np.testing.assert_array_equal(out[0, :2, :3], ids)
    assert (out[0, :2, 3:] == 9).all() and (out[0, 2:] == 9).all()
    np.testing.assert_array_equal(out[1, :2], [[1, 1, 1, 0, 0], [1, 1, 0, 0, 0]])
    np.testing.assert_array_equal(out[1, 2:], [[1, 0, 0, 0, 0]] * 2)
    assert not out[2].any()
    with pytest.raises(ValueError, match="does not fit the bucket"):
        pad_inputs({"input_ids": ids}, (1, 5), 0)


def test_padding_to_buckets_leaves_every_embedding_unchanged(reference: np.ndarray) -> None:
    enc = BucketedEncoder(CPU, GraphBuckets((4, 8), (8, 16, 64)))
    out = enc.encode_queries(TEXTS)
    np.testing.assert_allclose(out, reference, atol=2e-5)
    assert enc.bucket_counts == {(8, 64): 1}  # 6 texts, the longest ~25 tokens: one padded sub-batch
    single = np.concatenate([enc.encode_queries([t]) for t in TEXTS])
    np.testing.assert_allclose(single, reference, atol=2e-5)
    assert enc.bucket_counts[(4, 8)] >= 1 and enc.bucket_counts[(4, 64)] >= 1


def test_batches_beyond_the_largest_bucket_split_into_sorted_sub_batches(reference: np.ndarray) -> None:
    enc = BucketedEncoder(CPU, GraphBuckets((2, 4), (64,)))
    assert enc.sub_batch_size == 4
    np.testing.assert_allclose(enc.encode_queries(TEXTS), reference, atol=2e-5)
    assert enc.bucket_counts == {(4, 64): 1, (2, 64): 1}  # 6 rows: 4 (the largest bucket), then 2


def test_replay_off_and_left_padding_use_the_eager_forward(reference: np.ndarray) -> None:
    enc = BucketedEncoder(CPU, GraphBuckets((8,), (64,)))
    enc.replay = False
    np.testing.assert_allclose(enc.encode_queries(TEXTS), reference, atol=2e-5)
    left = HFEncoder(EncoderConfig(device="cpu", cpu_bf16=False, cpu_packed=False))  # padded, like the buckets
    for e in (enc, left):  # left padding: padding further left would move the positions of the real tokens
        e.tokenizer.padding_side, e._left_padded = "left", True
    enc.replay = True
    np.testing.assert_allclose(enc.encode_queries(TEXTS), left.encode_queries(TEXTS), atol=2e-5)
    assert enc.bucket_counts == {}


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU path")
def test_without_cuda_the_factory_gives_the_eager_encoder_and_graphs_are_refused() -> None:
    assert type(make_encoder(EncoderConfig(device="auto"))) is HFEncoder
    assert type(make_encoder(CPU)) is HFEncoder
    with pytest.raises(ValueError, match="CUDA graphs need the encoder on a CUDA device"):
        CudaGraphEncoder(CPU)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA device")
def test_cuda_graph_replay_matches_the_eager_encoder_on_cuda() -> None:
    enc = make_encoder(EncoderConfig(device="cuda", max_length=64))
    assert isinstance(enc, CudaGraphEncoder) and enc.capture_s > 0
    texts = TEXTS * 50  # 300 texts: one bucket of 512 rows
    graphs = enc.encode_queries(texts)
    enc.replay = False
    eager = enc.encode_queries(texts)
    assert (graphs * eager).sum(axis=1).min() > 0.999
    assert type(make_encoder(EncoderConfig(device="cuda", cuda_graphs=False))) is HFEncoder

"""The exact two-stage search (block maxima, then re-scoring): same results as brute force, method selection."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from mr_search_retrieval.indexes.block_max import (
    block_max_torch,
    rescore_blocks,
    resolve_method,
    select_blocks,
    triton_ready,
    two_stage_topk,
)
from mr_search_retrieval.indexes.torch_exact import TorchExactIndex


def _unit_rows(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _brute(matrix: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    full = queries @ matrix.T
    ids = np.argsort(-full, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(full, ids, 1), ids


def test_auto_picks_two_stage_only_where_the_kernel_runs() -> None:
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert not triton_ready(cpu)
    assert resolve_method("auto", cpu) == "grouped"
    assert resolve_method("auto", cuda, kernel_ok=True) == "two_stage"
    assert resolve_method("auto", cuda, kernel_ok=False) == "grouped"  # CUDA without Triton: the grouped path
    assert resolve_method("two_stage", cpu) == "two_stage"  # forced: torch stage 1 on the CPU
    with pytest.raises(ValueError, match="'auto', 'two_stage', 'grouped'"):
        resolve_method("fused", cpu)
    # The service's index on a CPU-only box falls back to the grouped path by itself.
    assert TorchExactIndex.from_random(100, 8, device="cpu").method == "grouped"


def test_block_maxima_are_the_maxima_of_each_block_including_a_ragged_last_one() -> None:
    rng = np.random.default_rng(0)
    rows, q = _unit_rows(rng, 70, 8), _unit_rows(rng, 3, 8)
    maxima = block_max_torch(torch.from_numpy(q), torch.from_numpy(rows), block=16, chunk_rows=32).numpy()
    full = q @ rows.T
    expected = np.stack([full[:, s : s + 16].max(1) for s in range(0, 70, 16)], axis=1)  # 5 blocks, last has 6 rows
    np.testing.assert_allclose(maxima, expected, rtol=1e-6)


@pytest.mark.parametrize(("block", "margin", "chunk_rows"), [(16, 0, 64), (16, 2, 1000), (32, 1, 40), (64, 3, 7)])
def test_two_stage_matches_brute_force(block: int, margin: int, chunk_rows: int) -> None:
    rng = np.random.default_rng(block + margin)
    rows, q = _unit_rows(rng, 1000, 24), _unit_rows(rng, 30, 24)  # 1000 rows: the last block is ragged
    scores, ids = two_stage_topk(
        torch.from_numpy(q), torch.from_numpy(rows), 7, block, margin, chunk_rows, use_kernel=False
    )
    exp_scores, exp_ids = _brute(rows, q, 7)
    np.testing.assert_array_equal(ids.numpy(), exp_ids)
    np.testing.assert_allclose(scores.numpy(), exp_scores, rtol=1e-5, atol=1e-6)


def test_two_stage_is_exact_when_every_best_row_sits_in_one_block_and_with_ties() -> None:
    rng = np.random.default_rng(3)
    rows = _unit_rows(rng, 512, 16) * 0.5
    q = _unit_rows(rng, 4, 16)
    rows[40:46] = q[0]  # query 0's six best rows all in block 2 (of 16 rows): k=5 must take 5 of them
    rows[300] = rows[301] = rows[302] = q[1]  # query 1: an exact three-way tie at the top
    rows[0] = rows[511] = q[2]  # query 2: the same row in the first and the (full) last block
    scores, ids = two_stage_topk(torch.from_numpy(q), torch.from_numpy(rows), 5, 16, 0, 10_000, use_kernel=False)
    full = q @ rows.T
    exp_scores, _ = _brute(rows, q, 5)
    np.testing.assert_allclose(scores.numpy(), exp_scores, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.take_along_axis(full, ids.numpy(), 1), scores.numpy(), rtol=1e-5, atol=1e-6)
    assert set(ids[0].tolist()) <= set(range(40, 46))
    assert set(ids[1, :3].tolist()) == {300, 301, 302}
    assert set(ids[2, :2].tolist()) == {0, 511}
    assert all(len(set(r)) == 5 for r in ids.tolist()), "no row returned twice"


def test_select_blocks_and_sliced_rescoring() -> None:
    maxima = torch.tensor([[0.1, 0.9, 0.5, 0.7], [0.8, 0.2, 0.3, 0.1]])
    assert sorted(select_blocks(maxima, 2, 0)[0].tolist()) == [1, 3]
    assert select_blocks(maxima, 3, 5).shape == (2, 4)  # never more blocks than exist
    with pytest.raises(ValueError, match="k >= 1"):
        select_blocks(maxima, 0)
    rng = np.random.default_rng(4)
    rows, q = torch.from_numpy(_unit_rows(rng, 200, 8)), torch.from_numpy(_unit_rows(rng, 9, 8))
    blocks = select_blocks(block_max_torch(q, rows, 16, 64), 4, 2)
    whole = rescore_blocks(q, rows, blocks, 16, 4)
    sliced = rescore_blocks(q, rows, blocks, 16, 4, max_bytes=1)  # one query at a time
    assert torch.equal(whole[1], sliced[1])
    torch.testing.assert_close(whole[0], sliced[0])


def test_index_two_stage_sharded_matches_grouped_and_small_shards() -> None:
    rng = np.random.default_rng(5)
    matrix, q = _unit_rows(rng, 700, 32), _unit_rows(rng, 12, 32)
    shards = [torch.from_numpy(matrix[:10]), torch.from_numpy(matrix[10:])]  # a shard smaller than k
    two = TorchExactIndex(shards, chunk_rows=128, method="two_stage", block=32)
    grouped = TorchExactIndex(shards, chunk_rows=128, method="grouped")
    assert two.method == "two_stage"
    s2, i2 = two.search(q, 15)
    s1, i1 = grouped.search(q, 15)
    np.testing.assert_array_equal(i2, i1)
    np.testing.assert_allclose(s2, s1, rtol=1e-6)
    np.testing.assert_array_equal(i2, _brute(matrix, q, 15)[1])
    with pytest.raises(ValueError, match="power of two"):
        TorchExactIndex(shards, block=24)


_KERNEL_CHECK = textwrap.dedent(
    """
    import torch
    from mr_search_retrieval.indexes.block_max import block_max_torch
    from mr_search_retrieval.indexes.triton_block_max import KernelConfig, block_max_triton
    torch.manual_seed(0)
    # (queries, rows, dim, block, tile): ragged query and row tiles, 1-2 blocks per tile, a dim that is no tile multiple
    for b, n, d, block, cfg in [(5, 1000, 48, 16, KernelConfig(16, 32, 16, 4, 1)),
                                (37, 777, 64, 32, KernelConfig(32, 64, 32, 4, 1)),
                                (20, 300, 40, 16, KernelConfig(16, 16, 32, 4, 1))]:
        q, e = torch.randn(b, d), torch.randn(n, d)
        got, want = block_max_triton(q, e, block, cfg), block_max_torch(q, e, block, 1 << 20)
        assert got.shape == want.shape, (got.shape, want.shape)
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-4), (got - want).abs().max()
    print("kernel ok")
    """
)


def test_triton_kernel_in_the_interpreter_matches_the_torch_block_maxima() -> None:
    pytest.importorskip("triton", reason="Triton is not installed (it ships with torch's CUDA wheels)")
    env = {**os.environ, "TRITON_INTERPRET": "1"}  # Triton's CPU interpreter; must be set before triton loads
    out = subprocess.run([sys.executable, "-c", _KERNEL_CHECK], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "kernel ok" in out.stdout, out.stderr[-2000:]

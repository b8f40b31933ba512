"""Timing and result checks shared by the GPU retrieval benchmarks (bench_retrieval_gpu, retrieval_kernel_sweep)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from mr_search_retrieval.indexes.torch_exact import TorchExactIndex


def sync_device(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def median_seconds(fn: Callable[[], object], device: str, repeats: int = 3, warmup: int = 1) -> float:
    """Median wall time of `fn` with the device synchronised around each call."""
    for _ in range(warmup):
        fn()
    sync_device(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync_device(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def compare_methods(index: TorchExactIndex, plain: TorchExactIndex, q: torch.Tensor, k: int) -> dict[str, Any]:
    """`index` vs the plain exact search on the same queries: ids equal except between equal scores."""
    v0, i0 = plain.search_tensor(q, k)
    v1, i1 = index.search_tensor(q, k)
    same = i0 == i1
    # Where ids differ, the plain result's score must equal the other one's (a tie, fp16-rounded).
    diff = (v0 - v1).abs()
    return {
        "batch": int(q.shape[0]),
        "k": k,
        "same_ids_fraction": float(same.float().mean()),
        "max_score_diff": float(diff.max()),
        "max_score_diff_where_ids_differ": float(diff[~same].max()) if bool((~same).any()) else 0.0,
        "same_id_sets_fraction": float(
            sum(set(a) == set(b) for a, b in zip(i0.tolist(), i1.tolist(), strict=True)) / q.shape[0]
        ),
    }

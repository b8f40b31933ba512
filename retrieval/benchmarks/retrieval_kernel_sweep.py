"""Exact search over a wiki-18-sized random index on one GPU: two-stage (Triton block max) vs the chunked paths.

Checks the two-stage search against the plain exact search on the full index (ids equal up to score
ties, scores equal up to fp16 rounding), times every method per batch size, splits the two-stage time
into its stages, and sweeps the kernel's tile configurations (the defaults in triton_block_max.py come
from this). Writes $OUT/retrieval_kernel_sweep.json (or --json). Needs CUDA and Triton.

    python retrieval/benchmarks/retrieval_kernel_sweep.py --rows 21015324 --batches 16,64,128,256,512,1024
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "retrieval"))

import torch
from retrieval_gpu_common import compare_methods, median_seconds

from mr_search_retrieval.indexes.block_max import (
    DEFAULT_BLOCK,
    rescore_blocks,
    select_blocks,
)
from mr_search_retrieval.indexes.torch_exact import TorchExactIndex

logger = logging.getLogger("retrieval_kernel_sweep")

SWEEP = [  # (block_m, block_n, block_k, num_warps, num_stages)
    (128, 128, 64, 8, 3),
    (128, 128, 64, 4, 4),
    (128, 256, 64, 8, 3),
    (128, 256, 64, 8, 4),
    (256, 128, 64, 8, 3),
    (64, 128, 64, 4, 4),
    (64, 256, 64, 4, 4),
    (128, 128, 128, 8, 3),
    (64, 128, 128, 4, 3),
    (32, 128, 128, 4, 4),
    (16, 128, 128, 4, 4),
    (16, 256, 128, 4, 4),
]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=21_015_324)
    p.add_argument("--dim", type=int, default=768)
    p.add_argument("--batches", default="16,64,128,256,512,1024")
    p.add_argument("--sweep-batches", default="64,256,1024")
    p.add_argument("--topk", type=int, default=3)
    p.add_argument("--no-sweep", action="store_true")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not torch.cuda.is_available():
        print("retrieval_kernel_sweep: skipped: no GPU")
        return 0
    from mr_search_retrieval.indexes.triton_block_max import KernelConfig, block_max_triton, default_config

    res: dict[str, Any] = {"card": torch.cuda.get_device_name(0), "torch": torch.__version__, "rows": args.rows}
    import triton

    res["triton"] = triton.__version__
    print(f"card: {res['card']}", flush=True)
    index = TorchExactIndex.from_random(args.rows, args.dim, device="cuda", dtype=torch.float16)
    shard = index.shards[0]
    assert index.method == "two_stage", index.method
    plain = TorchExactIndex(index.shards, method="grouped", group=1)
    grouped = TorchExactIndex(index.shards, method="grouped")
    gen = torch.Generator(device="cuda").manual_seed(1)

    def queries(b: int) -> torch.Tensor:
        x = torch.randn((b, args.dim), generator=gen, device="cuda")
        return torch.nn.functional.normalize(x, dim=-1).to(torch.float16)

    # Correctness on the full index: random queries, and queries equal to stored rows (their own best match).
    checks = [compare_methods(index, plain, queries(b), k) for b, k in ((256, 10), (37, 100), (1024, 3))]
    rows_as_q = shard[torch.arange(0, args.rows, args.rows // 64, device="cuda")[:64]]
    c = compare_methods(index, plain, rows_as_q, 5)
    c["self_found_first"] = bool(
        (index.search_tensor(rows_as_q, 1)[1][:, 0].cpu() == torch.arange(0, args.rows, args.rows // 64)[:64]).all()
    )
    checks.append(c)
    res["correctness"] = checks
    logger.info("correctness: %s", checks)
    qps: dict[str, dict[int, float]] = {"plain": {}, "grouped": {}, "two_stage": {}, "matmul_only": {}}
    stages: dict[int, dict[str, float]] = {}
    for b in (int(x) for x in args.batches.split(",")):
        q = queries(b)
        for name, idx in (("plain", plain), ("grouped", grouped), ("two_stage", index)):
            qps[name][b] = b / median_seconds(lambda q=q, idx=idx: idx.search_tensor(q, args.topk), "cuda", repeats=5)

        def products(q: torch.Tensor = q) -> None:
            for s in range(0, args.rows, 1 << 20):
                q @ shard[s : s + (1 << 20)].T

        qps["matmul_only"][b] = b / median_seconds(products, "cuda")
        maxima = block_max_triton(q, shard, DEFAULT_BLOCK)
        blocks = select_blocks(maxima, args.topk)
        stages[b] = {
            "block_max_ms": 1000
            * median_seconds(lambda q=q: block_max_triton(q, shard, DEFAULT_BLOCK), "cuda", repeats=5),
            "select_ms": 1000 * median_seconds(lambda m=maxima: select_blocks(m, args.topk), "cuda", repeats=5),
            "rescore_ms": 1000
            * median_seconds(
                lambda q=q, bl=blocks: rescore_blocks(q, shard, bl, DEFAULT_BLOCK, args.topk), "cuda", repeats=5
            ),
            "default_config": str(default_config(b, DEFAULT_BLOCK)),
        }
        logger.info("batch %d: %s | stages %s", b, {k: round(v[b]) for k, v in qps.items()}, stages[b])
    res["qps"], res["two_stage_ms"] = qps, stages
    gib = args.rows * args.dim * 2 / 2**30
    res["index_gib"] = gib
    if not args.no_sweep:
        sweep = []
        for b in (int(x) for x in args.sweep_batches.split(",")):
            q = queries(b)
            ref = block_max_triton(q, shard, DEFAULT_BLOCK)
            for cfg_t in SWEEP:
                cfg = KernelConfig(*cfg_t)
                if cfg.block_m > 2 * max(16, b):
                    continue
                try:
                    out = block_max_triton(q, shard, DEFAULT_BLOCK, cfg)
                    ok = bool(torch.allclose(out, ref, atol=1e-3))
                    sec = median_seconds(lambda q=q, cfg=cfg: block_max_triton(q, shard, DEFAULT_BLOCK, cfg), "cuda")
                    row = {"batch": b, "config": cfg_t, "ms": 1000 * sec, "qps": b / sec, "same": ok}
                    row["tflops"] = 2 * b * args.rows * args.dim / sec / 1e12
                    row["gb_per_s"] = gib * 2**30 / sec / 1e9
                except Exception as err:  # a config the compiler rejects (shared memory) is a result too
                    row = {"batch": b, "config": cfg_t, "error": f"{type(err).__name__}: {str(err)[:200]}"}
                logger.info("sweep %s", row)
                sweep.append(row)
        res["sweep"] = sweep
    res["max_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
    out = args.json or (Path(os.environ["OUT"]) / "retrieval_kernel_sweep.json" if os.environ.get("OUT") else None)
    if out is not None:
        out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps({k: res[k] for k in ("card", "qps", "correctness")}, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""bench_retrieval_gpu.py end to end at tiny scale on the CPU, and its clean skip when no GPU is present."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "retrieval" / "benchmarks" / "bench_retrieval_gpu.py"
TINY = shlex.split(
    "--device cpu --num-passages 20000 --duration 0.5 --warmup 0.1 --client-procs 2 "
    "--encoder-layers 2 --encoder-hidden 64 --encoder-heads 2 --encoder-intermediate 128 "
    "--encode-batches 16 --encode-tokens 64 --search-batches 16,64 --concurrency 8 --max-batch-sizes 16 "
    "--batched 2x4 --switch-interval-ms 1 --chunk-rows 4096 --profile-loop --what-if "
    "--http-workers 2 --front-lanes 2,8 --multiproc-concurrency 8"
)


def _run(args: list[str], tmp_path: Path, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("OUT", None)
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_tiny_cpu_run_serves_real_documents_and_reports_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    proc = _run([*TINY, "--work-dir", str(tmp_path / "work"), "--json", str(out)], tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "card: cpu" in proc.stdout
    res = json.loads(out.read_text())
    assert res["index"]["rows"] == 20000
    assert res["setup"]["corpus_gib"] > 0
    assert min(res["encoder"]["passages_per_s_forward"].values()) > 0
    assert res["encoder"]["wiki18_embed_minutes_at_best"] > 0
    assert res["search"]["service_method"] == "grouped"  # no Triton kernel on a CPU: the grouped top-k
    for method in ("service", "two_stage", "grouped_topk", "plain_topk"):
        assert set(res["search"][f"bare_search_qps_{method}"]) == {"16", "64"}
    # the two-stage search (torch stage 1 here) finds exactly what the plain exact search finds
    match = res["search"]["two_stage_vs_plain"]
    assert match["same_ids_fraction"] == 1.0 and match["max_score_diff"] < 1e-6
    rows = {r["searcher"]: r for r in res["serving"]}
    assert set(rows) == {
        "service",
        "http_only_null_searcher",
        "http_only_trivial_fastapi",
        "service_switchinterval_1ms",
        "http_only_null_searcher_profiled",
        "service_profiled",
        "http_only_null_searcher_spans_in_ram",
        "service_spans_in_ram",
        # the service's --http-workers mode: one search worker + 2 HTTP fronts with 2 or 8 batches in flight each
        "multiproc_2_fronts_stream_lanes2",
        "multiproc_2_fronts_stream_lanes8",
    }
    assert rows["multiproc_2_fronts_stream_lanes2"]["front_lanes"] == 2
    assert rows["multiproc_2_fronts_stream_lanes8"]["worker_encoder"] == "graphs"  # the default; eager encoder on a CPU
    assert res["encoder"]["graphs"] == {}  # no CUDA: no graphs to time against the eager forward
    profile = rows["service_profiled"]["loop_profile"]
    assert profile["samples"] > 0 and any("retrieve" in name for name, _ in profile["inclusive"])
    assert set(res["search"]["components"]["16"]) == {"matmul_only_qps", "grouped_chunk_4096_qps"}
    assert {(r["searcher"], r["queries_per_request"]) for r in res["serving"] if r["queries_per_request"] > 1} == {
        ("service", 4),
    }
    assert res["hot_path"]["parse_request_us"] > 0 and res["hot_path"]["render_result_us"] > 0
    for r in res["serving"]:
        if r["searcher"] != "http_only_trivial_fastapi":
            assert r["consistent"] is True  # served documents are the corpus lines the searcher found
        assert r["queries_per_s"] > 0 and r["requests_ok"] > 0
        assert set(r["statuses"]) == {"200"} and r["bad_bodies"] == 0
        assert 0 < r["p50_ms"] <= r["p99_ms"]
        assert r["loadgen_cpu_cores"] > 0 and r["server_cpu_cores"] > 0
    assert "searcher" in proc.stdout and "q/s" in proc.stdout  # the summary table is printed
    assert "multiproc_2_fronts_stream_lanes8" in proc.stdout


def test_without_a_gpu_it_says_skipped_and_exits_zero(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the script would run the full benchmark")
    proc = _run([], tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "skipped: no GPU" in proc.stdout


def test_bad_list_argument_is_rejected_with_the_expected_form(tmp_path: Path) -> None:
    proc = _run(["--device", "cpu", "--concurrency", "32,lots"], tmp_path, timeout=120)
    assert proc.returncode == 2
    assert "comma-separated integers like 256,1024" in proc.stderr

"""The printed summary of bench_retrieval_gpu.py (the JSON holds every figure; this is the table a person reads)."""

from __future__ import annotations

from typing import Any


def _fmt(d: dict) -> str:
    return ", ".join(f"b{k}: {v:,.0f}" for k, v in d.items())


def print_summary(res: dict[str, Any]) -> None:
    m, enc, s = res["machine"], res["encoder"], res["search"]
    lines = [
        "",
        f"== retrieval at scale: {res['index']['rows']:,} x {res['index']['dim']} {res['index']['dtype']} "
        f"({res['index']['gib']:.1f} GiB) on {m['card']} (torch {m['torch']}, {m['cpu_count']} CPUs)",
        f"setup: {', '.join(f'{k} {v:.1f}' for k, v in res['setup'].items())}",
        f"encoder passages/s at {res['args']['encode_tokens']} tokens (forward): {_fmt(enc['passages_per_s_forward'])}"
        f"; from text: {_fmt(enc['passages_per_s_from_text'])}; all of wiki-18 at best: "
        f"{enc['wiki18_embed_minutes_at_best']:.0f} min",
        f"encoder queries/s: {_fmt(enc['queries_per_s_encode'])}",
    ]
    graphs = enc.get("graphs")
    if graphs:
        lines.append(
            f"query encoder, CUDA-graph replay (service default): {_fmt(graphs['queries_per_s']['graphs'])} q/s vs "
            f"eager {_fmt(graphs['queries_per_s']['eager'])}; {graphs['graphs']} graphs captured in "
            f"{graphs['capture_s']:.1f} s, {graphs['capture_gib']:.2f} GiB; replay vs eager: {graphs['check']}"
        )
        if "compile_vs_replay" in graphs:
            lines.append(f"torch.compile(mode='reduce-overhead') vs graph replay: {graphs['compile_vs_replay']}")
    lines.append(f"service index method: {s.get('service_method')}")
    keys = tuple(k for k in s if k.startswith("bare_search_qps_"))
    for key in (*keys, "pipeline_qps_encode_search"):
        if key in s:
            lines.append(f"{key}: {_fmt(s[key])}")
    lines.append(
        "served q/s over the batch pipeline's q/s at batch "
        f"{min(s['pipeline_qps_encode_search'])}: "
        + ", ".join(f"{k} {v:.2f}" for k, v in res["serving_fraction_of_pipeline"].items())
    )
    for b, row in s.get("components", {}).items():
        lines.append(f"search components at batch {b} (q/s): " + ", ".join(f"{k} {v:,.0f}" for k, v in row.items()))
    if "two_stage_vs_plain" in s:
        lines.append(f"two-stage vs plain exact search (ids differ only where scores tie): {s['two_stage_vs_plain']}")
    nan = float("nan")
    lines.append(
        f"{'searcher':<34}{'mbs':>5}{'conc':>5}{'q/req':>6}{'q/s':>8}{'p50 ms':>8}{'p99 ms':>8}{'batch':>6}"
        f"{'b ms':>7}{'srv cpu':>8}{'loop':>6}{'model':>6}{'lg cpu':>7}  statuses"
    )
    for r in res["serving"]:
        loop = r["server_loop_thread_cores"]
        lines.append(
            f"{r['searcher']:<34}{r['max_batch_size'] or '-':>5}{r['concurrency']:>5}{r['queries_per_request']:>6}"
            f"{r['queries_per_s']:>8,.0f}{r['p50_ms'] or nan:>8.1f}{r['p99_ms'] or nan:>8.1f}"
            f"{r['mean_batch'] or nan:>6.0f}{r['mean_batch_ms'] or nan:>7.1f}"
            f"{r['server_cpu_cores']:>8.2f}{loop if loop is not None else nan:>6.2f}"
            f"{r['server_model_thread_cores'] if r['server_model_thread_cores'] is not None else nan:>6.2f}"
            f"{r['loadgen_cpu_cores']:>7.2f}  {r['statuses']}"
        )
    for r in res["serving"]:
        if r.get("worker_window"):
            w = r["worker_window"]
            lines.append(
                f"{r['searcher']} c={r['concurrency']}: search worker per merged batch of {w['queries_per_batch']:.0f}:"
                f" encode {w['encode_ms']:.1f} ms + index {w['index_ms']:.1f} ms = {w['batch_ms']:.1f} ms"
            )
    for r in res["serving"]:
        if r.get("loop_profile"):
            lp = r["loop_profile"]
            lines.append(f"{r['searcher']}: event-loop thread stack samples ({lp['samples']}), innermost frame:")
            lines += [f"    {share:6.1%} {name}" for name, share in lp["own"][:12]]
            lines.append("  inclusive:")
            lines += [f"    {share:6.1%} {name}" for name, share in lp["inclusive"][:30]]
    for r in res["serving"]:
        if r["concurrency"] == 256 and r["queries_per_request"] == 1 and r["searcher"] != "http_only_trivial_fastapi":
            met = r["queries_per_s"] >= 5000 and (r["p99_ms"] or float("inf")) < 100
            lines.append(
                f"issue-7 goal (>= 5,000 q/s, p99 < 100 ms at 256 clients) on {m['card']}: {r['searcher']} "
                f"mbs {r['max_batch_size']}: {r['queries_per_s']:,.0f} q/s, p99 {r['p99_ms'] or nan:.0f} ms -> "
                + ("MET" if met else "not met")
            )
    for r in res["serving"]:
        if r.get("gpu_memory_used"):
            lines.append(f"{r['searcher']}: nvidia-smi memory used/total while serving: {r['gpu_memory_used']}")
            break
    hp = res["hot_path"]
    lines.append(
        f"app hot path per single-query request: parse_request {hp['parse_request_us']:.0f} us, _render_result "
        f"{hp['render_result_us']:.0f} us (raw-bytes splice would take {hp['render_raw_splice_us']:.0f} us)"
    )
    if res.get("gpu_memory"):
        g = res["gpu_memory"]
        lines.append(
            f"GPU memory: torch max allocated {g['torch_max_allocated_gib']:.1f} GiB; nvidia-smi: {g['nvidia_smi']}"
        )
    print("\n".join(lines), flush=True)

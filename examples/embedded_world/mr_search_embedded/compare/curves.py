"""Dev curves of a comparison's training runs: EM@k on a dev slice against updates and model-written tokens.

With ``DEV_QUESTIONS`` compare.sh gives every run the first N dev questions of each source as verl's validation set
(greedy, K = ATTEMPTS for every arm), before the first step and every ``DEV_FREQ`` steps. verl logs each attempt's
EM per source as ``val-aux/<source>/em_at_<k>/mean@1``; the slice holds as many questions of each source, so the mean
over sources is the mean over questions. Nothing here chooses anything: the curves show whether a run flattened.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from mr_search.runlog.training_log import MODEL_TOKENS, read_metrics, training_steps

VAL_EM_RE: Final = re.compile(r"val-(?:core|aux)/(?P<source>[^/]+)/em_at_(?P<k>\d+)/mean@\d+")
CURVES_JSON: Final = "dev_curves.json"


def dev_slice(dev: Path, per_source: int, out: Path) -> int:
    """Writes the first ``per_source`` questions of each data source of the ``dev`` parquet to ``out``; returns the
    questions written."""
    import pandas as pd

    if per_source < 1:
        raise ValueError(f"per_source={per_source}: give a whole number >= 1 of dev questions per source")
    frame = pd.read_parquet(dev)
    if "data_source" not in frame.columns:
        raise ValueError(f"{dev}: no data_source column; is this a verl parquet of the embedded world?")
    head = frame.groupby("data_source", sort=False, group_keys=False).head(per_source)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    head.to_parquet(out)
    return len(head)


def logged_steps(run: Path) -> int:
    """Training steps logged by a run folder so far (0 before its first)."""
    try:
        return len(training_steps(Path(run)))
    except FileNotFoundError:
        return 0


def run_curve(run: Path) -> dict[str, Any]:
    """One run's dev points: ``{"steps", "model_tokens", "em": {k: [...]}}``, EM in %, tokens cumulative at each
    point (0 before the first step)."""
    metrics = read_metrics(Path(run))
    tokens, total = {0: 0.0}, 0.0
    for step in sorted(metrics):
        if MODEL_TOKENS in metrics[step]:
            total += float(metrics[step][MODEL_TOKENS])
        tokens[step] = total
    steps: list[int] = []
    em: dict[int, list[float]] = {}
    for step in sorted(metrics):
        by_k: dict[int, list[float]] = {}
        for key, value in metrics[step].items():
            if match := VAL_EM_RE.fullmatch(key):
                by_k.setdefault(int(match["k"]), []).append(100.0 * float(value))
        if not by_k:
            continue
        steps.append(step)
        for k, values in by_k.items():
            em.setdefault(k, []).append(statistics.fmean(values))
    return {"steps": steps, "model_tokens": [tokens.get(s, total) for s in steps], "em": em}


def curves(work: Path) -> dict[str, Any]:
    """Every run's dev curve in a compare.sh work folder: ``{arm: {seed: curve}}``."""
    out: dict[str, Any] = {}
    for seed_dir in sorted(Path(work).glob("seed_*")):
        for run in sorted(p for p in seed_dir.iterdir() if (p / "metrics").is_dir()):
            curve = run_curve(run)
            if curve["steps"]:
                out.setdefault(run.name, {})[seed_dir.name.removeprefix("seed_")] = curve
    return out


def write_curves(work: Path, out_dir: Path) -> Path | None:
    """``dev_curves.json`` and ``dev_curves.png`` (EM@k against updates and model-written tokens) in ``out_dir``;
    None when no run logged a dev point."""
    found = curves(work)
    if not found:
        return None
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / CURVES_JSON
    path.write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")
    _plot(found, out_dir / "dev_curves.png")
    return path


def _plot(found: Mapping[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = sorted({int(k) for runs in found.values() for c in runs.values() for k in c["em"]})
    fig, axes = plt.subplots(len(ks), 2, figsize=(11, 3.2 * len(ks)), squeeze=False)
    for arm, runs in found.items():
        for seed, curve in runs.items():
            for row, k in enumerate(ks):
                values = curve["em"].get(k) or curve["em"].get(str(k))
                if not values:
                    continue
                for col, xs in enumerate((curve["steps"], curve["model_tokens"])):
                    axes[row][col].plot(xs, values, marker=".", label=f"{arm} seed {seed}")
    for row, k in enumerate(ks):
        axes[row][0].set(xlabel="updates", ylabel=f"dev EM@{k} (%)")
        axes[row][1].set(xlabel="model-written tokens", ylabel=f"dev EM@{k} (%)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

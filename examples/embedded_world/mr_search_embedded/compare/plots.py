"""The report's PNGs: test EM against attempt number per arm, and training EM against model-written tokens."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from mr_search_embedded.compare.aggregate import AVERAGE
from mr_search_embedded.compare.arms import K1, K1_ALL_TURNS, MR, NO_CREDIT, WARM

COLORS: Final = {WARM: "grey", MR: "tab:blue", K1: "tab:orange", K1_ALL_TURNS: "tab:red", NO_CREDIT: "tab:green"}
EM_VS_ATTEMPT: Final = "em_vs_attempt.png"
EM_VS_STEP: Final = "em_vs_step.png"


def labels(comparison: Mapping[str, Any]) -> dict[str, str]:
    """Each model's name in tables and plots: the arms' labels and the warm start."""
    return {WARM: "warm start (before training)", **{n: a["label"] for n, a in comparison["arms"].items()}}


def _models(comparison: Mapping[str, Any]) -> list[str]:
    return [m for m in (WARM, *comparison["arms"]) if m in comparison["heldout"]]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_em_vs_attempt(comparison: Mapping[str, Any], path: Path) -> Path:
    """Left: test EM (%) at attempts 1..K_eval, mean over seeds with std bars. Right: gain EM@k - EM@1."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    top, spread = 10.0, 5.0
    models = _models(comparison)
    names = labels(comparison)
    for index, method in enumerate(models):
        offset = 0.06 * (index - (len(models) - 1) / 2)  # side by side: equal curves stay visible
        stats = comparison["heldout"][method][AVERAGE]
        for ax, key in ((left, "em"), (right, "gain")):
            xs = list(range(1, len(stats[key]) + 1))
            top = max(top, *(s["mean"] + s["std"] for s in stats["em"]))
            spread = max(spread, *(abs(s["mean"]) + s["std"] for s in stats["gain"]))
            ax.errorbar(
                [x + offset for x in xs],
                [s["mean"] for s in stats[key]],
                yerr=[s["std"] for s in stats[key]],
                marker="o",
                capsize=3,
                color=COLORS.get(method, "black"),
                label=names[method],
                linestyle="--" if method == WARM else "-",
            )
            ax.set_xticks(xs)
    left.set_ylim(0, top * 1.1)  # from 0: equal curves do not look like a change
    right.set_ylim(-spread * 1.1, spread * 1.1)
    seeds = len(comparison["seeds"])
    left.set_title(f"test EM by attempt (greedy; mean ± std over {seeds} seed(s))")
    left.set_ylabel("EM (%)")
    right.set_title("reflection gain EM@k - EM@1")
    right.set_ylabel("points")
    for ax in (left, right):
        ax.set_xlabel("attempt k (K_eval)")
        ax.grid(alpha=0.3)
    left.legend(fontsize=8)
    return _save(plt, fig, path)


def plot_em_vs_step(comparison: Mapping[str, Any], path: Path) -> Path:
    """Training EM of the sampled rollouts against cumulative model-written tokens, one line per seed and attempt."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    names = labels(comparison)
    for index, seed in enumerate(comparison["per_seed"]):
        for method in comparison["arms"]:
            curve = seed["training"][method]
            if not curve:
                continue
            xs = [row["cumulative_model_tokens"] / 1000 for row in curve]
            k = len(curve[0]["em"])
            attempts = [1, k] if k > 1 else [1]
            for attempt in attempts:
                ys = [100 * row["em"][attempt - 1] if len(row["em"]) >= attempt else float("nan") for row in curve]
                label = f"{names[method]}, attempt {attempt}" if index == 0 else None
                ax.plot(
                    xs,
                    ys,
                    color=COLORS.get(method, "black"),
                    linestyle=":" if (k > 1 and attempt == 1) else "-",
                    marker="." if attempt == k else None,
                    alpha=0.8,
                    label=label,
                )
    ax.set_xlabel("cumulative model-written tokens (thousands); one point per training step")
    ax.set_ylabel("EM of the step's sampled rollouts (%)")
    ax.set_title(f"training EM against budget ({len(comparison['seeds'])} seed(s), temperature 1)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(plt, fig, path)


def _save(plt: Any, fig: Any, path: Path) -> Path:
    """Writes the figure as a PNG (creating the folder) and frees it."""
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path

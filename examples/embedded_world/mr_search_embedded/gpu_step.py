"""The lab's training step on one GPU: the step settings the lab trains with, and the benchmark's step split.

The tiny policy (0.5M parameters, a 2,056-token vocabulary) costs a GPU almost nothing to run; what a step spends is
per-token work on the host. Without flash-attn (not in the offline sets) verl computes each token's log-probability
in a Python loop over the tokens (``verl.utils.torch_functional.logprobs_from_logits_v2``: one ``logsumexp`` a token,
forward and backward), once for the old log-probs and again in the update. ``fast`` removes that work through verl's
own config keys:

- ``actor_rollout_ref.model.use_fused_kernels`` with the ``torch`` backend: verl's fused head computes log-probs and
  entropy from the hidden states in chunks of 512 tokens, vectorized;
- ``algorithm.rollout_correction.bypass_mode``: the engine's own sampling log-probs serve as the old policy's, so no
  second forward pass over the batch (the engine and the trainer hold the same weights after each sync; the
  agreement is logged every step as ``rollout_corr/*``);
- dynamic micro-batches (``use_dynamic_bsz``) of up to ``MAX_TOKENS`` tokens instead of 16 rows each.

``baseline`` is what ``train_grpo_step.sh`` gives the embedded preset on a GPU without flash-attn.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from mr_search.runlog.training_log import training_steps

MAX_TOKENS: Final = 32768  # tokens of one dynamic micro-batch: ~36 of the lab's meta-episodes
PROFILES: Final[dict[str, tuple[str, ...]]] = {
    "baseline": (),
    "fast": (
        "actor_rollout_ref.model.use_fused_kernels=True",
        "actor_rollout_ref.model.fused_kernel_options.impl_backend=torch",
        "algorithm.rollout_correction.bypass_mode=True",
        "actor_rollout_ref.actor.use_dynamic_bsz=True",
        f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={MAX_TOKENS}",
        "actor_rollout_ref.actor.fsdp_config.use_torch_compile=False",
    ),
}
# The phases of verl's step timer, in the order a step runs them; "other" is the step less their sum.
PHASES: Final = ("gen", "old_log_prob", "adv", "update_actor", "update_weights")
SLOWDOWN_LIMIT: Final = 1.5  # the most a step may slow when runs share the card


def overrides(profile: str) -> tuple[str, ...]:
    """The Hydra overrides of ``profile``; a name that is not one says which are."""
    if profile not in PROFILES:
        raise ValueError(f"step profile {profile!r} is not one of {', '.join(PROFILES)}")
    return PROFILES[profile]


@dataclass(frozen=True)
class StepSplit:
    """Mean seconds of each phase over a run's timed steps (the first step, with its warm-up, left out)."""

    run: str
    steps: tuple[int, ...]
    step: float
    phases: dict[str, float]

    @property
    def other(self) -> float:
        return self.step - sum(self.phases.values())


def step_split(run_dir: Path, skip_first: int = 1) -> StepSplit:
    """The step split of one ``train_grpo_step.sh`` run folder."""
    metrics = training_steps(Path(run_dir))
    steps = sorted(metrics)[skip_first:]
    if not steps:
        raise ValueError(f"{run_dir}: {len(metrics)} step(s) logged; the split needs more than {skip_first}")

    def mean(key: str) -> float:
        return statistics.fmean(float(metrics[s].get(key, 0.0)) for s in steps)

    phases = {p: mean(f"timing_s/{p}") for p in PHASES}
    return StepSplit(run=Path(run_dir).name, steps=tuple(steps), step=mean("timing_s/step"), phases=phases)


def split_table(splits: Sequence[StepSplit]) -> str:
    """A markdown table: one row a run, the step and each phase in seconds."""
    head = "| run | steps timed | step s | " + " | ".join(f"{p} s" for p in PHASES) + " | other s |"
    rule = "|---" * (len(PHASES) + 4) + "|"
    rows = [
        f"| {s.run} | {s.steps[0]}-{s.steps[-1]} | {s.step:.1f} | "
        + " | ".join(f"{s.phases[p]:.2f}" for p in PHASES)
        + f" | {s.other:.2f} |"
        for s in splits
    ]
    return "\n".join([head, rule, *rows])


def sharing(alone: StepSplit, shared: Mapping[int, Sequence[StepSplit]]) -> dict[str, Any]:
    """Slowdown of a step with ``n`` runs on one card against the run alone: the mean step of the ``n`` runs over the
    step alone, and the most runs whose slowdown stays within ``SLOWDOWN_LIMIT`` (1 when none was measured)."""
    rows = {}
    fits = 1
    for n in sorted(shared):
        step = statistics.fmean(s.step for s in shared[n])
        slowdown = step / alone.step
        rows[n] = {"step_s": step, "slowdown": slowdown, "runs": [s.run for s in shared[n]]}
        if slowdown <= SLOWDOWN_LIMIT and n > fits:
            fits = n
    return {"alone_step_s": alone.step, "shared": rows, "runs_within_limit": fits, "limit": SLOWDOWN_LIMIT}


def summarize(out: Path) -> str:
    """The benchmark's report from its folder: ``<profile>/`` runs one at a time, ``share<n>/<i>/`` runs side by
    side; prints the split of each, the baseline's step over the fast one's, and the sharing figure."""
    out = Path(out)
    alone = {p: step_split(out / p) for p in PROFILES if (out / p / "metrics").is_dir()}
    if "fast" not in alone:
        raise FileNotFoundError(f"{out}/fast/metrics: the fast profile's run is missing")
    shared: dict[int, list[StepSplit]] = {}
    for folder in sorted(out.glob("share*")):
        n = int(folder.name.removeprefix("share"))
        shared[n] = [step_split(run) for run in sorted(folder.iterdir()) if (run / "metrics").is_dir()]
    lines = ["## One run alone", "", split_table(list(alone.values())), ""]
    result: dict[str, Any] = {"alone": {p: _as_dict(s) for p, s in alone.items()}}
    if "baseline" in alone:
        ratio = alone["baseline"].step / alone["fast"].step
        result["baseline_over_fast"] = ratio
        lines += [f"baseline step / fast step: **{ratio:.2f}x** (same machine, same run of this benchmark)", ""]
    if shared:
        share = sharing(alone["fast"], shared)
        result["sharing"] = share
        lines += [
            "## Runs side by side on the one card (fast profile)",
            "",
            "| runs | mean step s | slowdown |",
            "|---|---|---|",
        ]
        lines += [f"| {n} | {r['step_s']:.1f} | {r['slowdown']:.2f}x |" for n, r in share["shared"].items()]
        lines += ["", f"most runs within {SLOWDOWN_LIMIT}x: **{share['runs_within_limit']}**", ""]
        for n, splits in shared.items():
            lines += [f"### {n} side by side", "", split_table(splits), ""]
    (out / "step_bench.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return "\n".join(lines)


def _as_dict(split: StepSplit) -> dict[str, Any]:
    return {"steps": list(split.steps), "step_s": split.step, "phases_s": split.phases, "other_s": split.other}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mr_search_embedded.gpu_step", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("overrides", help="print a step profile's Hydra overrides, one a line")
    show.add_argument("profile", choices=sorted(PROFILES))
    report = sub.add_parser("summarize", help="print the benchmark's split table from its folder")
    report.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "overrides":
        for line in overrides(args.profile):  # none for baseline: an empty line would be an empty Hydra override
            print(line)
        return 0
    try:
        print(summarize(args.out))
    except (FileNotFoundError, ValueError) as err:
        print(f"gpu_step: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

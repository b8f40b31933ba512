"""Benchmark: the vectorized attempt-level advantage against a loop reference in the original code's style.

The reference follows the original MR-Search ``grpo_prm_step`` estimator: it scans every row's token positions to
find where each attempt starts and ends, reads each attempt's reward from the token that ends it, groups rows in
Python dicts by uid, computes the leave-one-out baseline per group and attempt, the discounted sum per row, and
writes each attempt's value over its token span. The vectorized path is ``attempt_advantages`` followed by
``spread_to_tokens`` on the per-attempt columns the rollout writes (``mr_search.contract``).

Usage: python scripts/bench/bench_advantage.py [--rows 2560 --tokens 4096 --attempts 3 --group-size 5]
Prints both times and the speed-up (like for like: one thread each); exits non-zero if the outputs differ or
the speed-up is below --goal.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict

import numpy as np
import torch

from mr_search.advantage import attempt_advantages, spread_to_tokens


def make_batch(rows: int, tokens: int, attempts: int, group_size: int, seed: int) -> dict:
    """A training batch as the rollout leaves it: jagged attempts, some meta-episodes cut short, padding -1."""
    rng = np.random.default_rng(seed)
    attempt_ids = np.full((rows, tokens), -1, dtype=np.int64)
    mask = np.zeros((rows, tokens), dtype=np.int64)
    present = np.zeros((rows, attempts), dtype=bool)
    rewards = np.zeros((rows, attempts), dtype=np.float32)
    for i in range(rows):
        position = 0
        budget = tokens if rng.random() < 0.8 else int(rng.integers(tokens // 4, tokens))  # some contexts overflow
        for s in range(attempts):
            length = int(rng.integers(tokens // (3 * attempts), 3 * tokens // (2 * attempts)))
            end = min(position + length, budget)
            if end <= position:
                break  # context overflow: the meta-episode ends before this attempt
            attempt_ids[i, position:end] = s
            mask[i, position:end] = rng.random(end - position) < 0.7  # model vs environment tokens
            present[i, s] = True
            rewards[i, s] = float(rng.random() < 0.4)  # exact match
            position = end
    uids = np.array([f"q{i // group_size}" for i in range(rows)], dtype=object)
    order = rng.permutation(rows)  # verl's batch balancing reorders rows
    return {
        "attempt_ids": torch.from_numpy(attempt_ids[order]),
        "response_mask": torch.from_numpy(mask[order]),
        "present": torch.from_numpy(present[order]),
        "rewards": torch.from_numpy(rewards[order]),
        "uids": uids[order],
    }


def token_rewards_of(batch: dict) -> torch.Tensor:
    """The original code's input: each attempt's reward on the last token of that attempt."""
    ids = batch["attempt_ids"]
    following = torch.cat([ids[:, 1:], torch.full_like(ids[:, :1], -1)], dim=1)
    ends = (ids >= 0) & (following != ids)
    token_rewards = torch.zeros(ids.shape, dtype=torch.float32)
    token_rewards[ends] = batch["rewards"].gather(1, ids.clamp(min=0))[ends]
    return token_rewards


def reference_grpo_prm_step(
    token_level_rewards: torch.Tensor,
    attempt_ids: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    gamma: float = 1.0,
) -> torch.Tensor:
    """Loops over token positions, attempts and groups, in the style of the original per-step estimator."""
    bsz, length = token_level_rewards.shape

    # 1. attempt boundaries: scan each row's token positions for the last token of every attempt
    ids_rows = attempt_ids.tolist()
    spans: list[dict[int, tuple[int, int]]] = []
    for i in range(bsz):
        row_ids, row_spans = ids_rows[i], {}
        previous, start = -1, 0
        for t in range(length):
            current = row_ids[t]
            if current != previous:
                if previous >= 0:
                    row_spans[previous] = (start, t)
                start, previous = t, current
        if previous >= 0:
            row_spans[previous] = (start, length)
        spans.append(row_spans)
    max_steps = max((max(row) + 1 for row in spans if row), default=0)

    with torch.no_grad():
        # 2. per attempt index: rewards read at the attempt's end token, grouped by prompt, leave-one-out baseline
        relative = torch.zeros(bsz, max_steps)
        for step in range(max_steps):
            step_rewards, valid_samples = [], []
            for i in range(bsz):
                if step in spans[i]:
                    step_rewards.append(token_level_rewards[i, spans[i][step][1] - 1])
                    valid_samples.append(i)
            if not step_rewards:
                continue
            id2score: dict[object, list[torch.Tensor]] = defaultdict(list)
            for reward, i in zip(step_rewards, valid_samples, strict=True):
                id2score[index[i]].append(reward)
            id2sum, id2count, id2equal = {}, {}, {}
            for prompt, rewards in id2score.items():
                stacked = torch.stack(rewards)
                id2sum[prompt] = stacked.sum()
                id2count[prompt] = len(rewards)
                id2equal[prompt] = bool(stacked.max() == stacked.min())
            for reward, i in zip(step_rewards, valid_samples, strict=True):
                n = id2count[index[i]]
                if n > 1 and not id2equal[index[i]]:
                    relative[i, step] = reward - (id2sum[index[i]] - reward) / (n - 1)

        # 3. discounted sum over later attempts, spread over each attempt's token span
        advantages = torch.zeros(bsz, length, dtype=torch.float32)
        for i in range(bsz):
            for step, (start, end) in spans[i].items():
                value = 0.0
                for later in spans[i]:
                    if later >= step:
                        value += gamma ** (later - step) * float(relative[i, later])
                advantages[i, start:end] = value
        return advantages * response_mask


def vectorized(batch: dict, gamma: float = 1.0) -> torch.Tensor:
    per_attempt = attempt_advantages(batch["rewards"], batch["present"], batch["uids"], gamma=gamma)
    return spread_to_tokens(per_attempt, batch["attempt_ids"], batch["response_mask"])


def timed(fn, repeats: int, device: str = "cpu") -> tuple[float, torch.Tensor]:
    """Best of ``repeats`` wall times: on a shared machine the minimum is the least disturbed measurement."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        if device != "cpu":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2560)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--attempts", type=int, default=3)
    parser.add_argument("--group-size", type=int, default=5)
    parser.add_argument("--gamma", type=float, default=1.0)
    parser.add_argument("--reference-repeats", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--repeats", type=int, default=10, help="vectorized calls per round (best taken)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--goal", type=float, default=50.0, help="minimum speed-up (exit 1 below it)")
    parser.add_argument("--device", default="cpu", help="also time the vectorized path on this device (e.g. cuda)")
    args = parser.parse_args()

    batch = make_batch(args.rows, args.tokens, args.attempts, args.group_size, args.seed)
    token_rewards = token_rewards_of(batch)
    print(
        f"B={args.rows} rows, T={args.tokens} tokens, K={args.attempts}, groups of {args.group_size}, "
        f"{int((~batch['present']).sum())} absent attempts"
    )
    default_threads = torch.get_num_threads()
    thread_counts = list(dict.fromkeys([1, default_threads]))
    vectorized(batch, args.gamma)  # warm-up

    # Rounds interleave the two paths so that both see the same load on a shared machine; each round's ratio pairs
    # one reference call with the best of `repeats` vectorized calls made right after it. The reference runs on one
    # core (pure Python): the like-for-like figure is the vectorized path on one thread; torch's default thread
    # count is reported too.
    ref_times: list[float] = []
    vec_times: dict[int, list[float]] = {threads: [] for threads in thread_counts}
    outputs: dict[object, torch.Tensor] = {}
    want = torch.empty(0)
    for _ in range(args.reference_repeats):
        ref_time, want = timed(
            lambda: reference_grpo_prm_step(
                token_rewards, batch["attempt_ids"], batch["response_mask"], batch["uids"], args.gamma
            ),
            1,
        )
        ref_times.append(ref_time)
        for threads in thread_counts:
            torch.set_num_threads(threads)
            vec_time, outputs[threads] = timed(lambda: vectorized(batch, args.gamma), args.repeats)
            vec_times[threads].append(vec_time)
        torch.set_num_threads(default_threads)
    device_time = None
    if args.device != "cpu":
        moved = {k: v.to(args.device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
        vectorized(moved, args.gamma)
        device_time, got = timed(lambda: vectorized(moved, args.gamma), args.repeats, args.device)
        outputs[args.device] = got.cpu()

    print(f"reference (loops, original style): {min(ref_times) * 1e3:10.2f} ms per call (best of {len(ref_times)})")
    speedups = {}
    for threads in thread_counts:
        ratios = [r / v for r, v in zip(ref_times, vec_times[threads], strict=True)]
        speedups[threads] = statistics.median(ratios)
        print(
            f"vectorized, {threads} torch thread(s): {min(vec_times[threads]) * 1e3:10.2f} ms per call; "
            f"speed-up {speedups[threads]:.0f}x (median of {len(ratios)} interleaved rounds: "
            f"{', '.join(f'{x:.0f}x' for x in ratios)})"
        )
    if device_time is not None:
        print(f"vectorized, {args.device}: {device_time * 1e3:10.2f} ms per call; {min(ref_times) / device_time:.0f}x")
    failed = False
    for where, got in outputs.items():
        difference = float((got - want).abs().max())
        identical = torch.allclose(got, want, rtol=0.0, atol=1e-6)
        print(f"outputs identical ({where}): {identical} (max |diff| {difference:.1e})")
        failed |= not identical
    nonzero = int(torch.count_nonzero(want))
    speedup = speedups[1]
    print(f"{nonzero} nonzero token advantages; speed-up on one thread: {speedup:.0f}x (goal >= {args.goal:.0f}x)")
    if failed or nonzero == 0:
        print("FAIL: the vectorized advantages differ from the reference", file=sys.stderr)
        return 1
    if speedup < args.goal:
        print(f"FAIL: speed-up {speedup:.1f}x below the goal {args.goal}x", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

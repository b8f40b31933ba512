"""Benchmark: the vectorized attempt-level advantage against a loop reference in the original code's style.

The reference is the original MR-Search ``grpo_prm_step`` estimator's computation (its patched verl's
``core_algos.py``, with the run script's defaults alpha = 0, beta = 1), re-written here operation for operation
without its debug printing: rows grouped in a dict keyed by uid; per attempt index, full ``[B, T]`` token masks,
the attempt's reward summed over its tokens, the leave-one-out baseline computed group by group in Python, the
result broadcast back over the tokens; then the per-attempt values read back from the tokens, discounted over
later attempts and gathered onto the tokens again. The original took ~2.6 s per call at the default
shape on a 2-core CPU; this script prints the reference's own time next to it. The vectorized path
is ``attempt_advantages`` followed by ``spread_to_tokens`` on the per-attempt columns the rollout writes
(``mr_search.contract``). Outputs must agree to float32 rounding (the reference averages each attempt's value
over its tokens and back, which rounds differently from the exact per-attempt value).

Usage: python scripts/bench/bench_advantage.py [--rows 2560 --tokens 4096 --attempts 3 --group-size 5]
Prints both times and the speed-up (like for like: both at torch's default thread count, which the reference's
[B, T] tensor ops use too; the vectorized path on one thread is printed as well); exits non-zero if the outputs
differ or the speed-up is below --goal.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

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


def original_inputs(batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """The original code's inputs, ``[B, T + 1]`` each as its trainer hands them over: each attempt's reward on the
    last token of that attempt, and a last extra column (its outcome slot: the final attempt's reward, step id -1).
    """
    ids = batch["attempt_ids"]
    following = torch.cat([ids[:, 1:], torch.full_like(ids[:, :1], -1)], dim=1)
    ends = (ids >= 0) & (following != ids)
    token_rewards = torch.zeros(ids.shape, dtype=torch.float32)
    token_rewards[ends] = batch["rewards"].gather(1, ids.clamp(min=0))[ends]
    present = batch["present"].to(torch.int64)
    last = (present * torch.arange(1, present.shape[1] + 1)).argmax(dim=1, keepdim=True)
    outcome = torch.where(present.any(dim=1, keepdim=True), batch["rewards"].gather(1, last), 0.0)
    step_ids = torch.cat([ids, torch.full_like(ids[:, :1], -1)], dim=1)
    return torch.cat([token_rewards, outcome], dim=1), step_ids


def _loo_per_group(values: torch.Tensor, present: torch.Tensor, group_rows: dict[str, np.ndarray]) -> torch.Tensor:
    """The original's leave-one-out centring: one pass of small torch ops per group (row lists in a dict)."""
    out = torch.zeros_like(values)
    for rows_np in group_rows.values():
        rows = torch.as_tensor(rows_np, dtype=torch.long)
        keep = present[rows].to(torch.bool)
        if not bool(keep.any()):
            continue
        members = rows[keep]
        x = values[members]
        n = x.numel()
        if n == 1:
            out[members] = x.new_zeros((1,))
            continue
        # The original also forms the sums of squares for its (switched-off) std option: computed, then unused.
        total, squares = x.sum(), (x * x).sum()
        others = n - 1
        others_sum, _others_squares = total - x, squares - x * x
        out[members] = x - others_sum / others
    return out


def reference_grpo_prm_step(
    token_level_rewards: torch.Tensor,
    step_ids: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    gamma: float = 1.0,
) -> torch.Tensor:
    """The original ``grpo_prm_step`` estimator's computation (its default alpha = 0, beta = 1: step rewards only).

    Same inputs ([B, T + 1] token rewards and step ids, the last column the outcome slot, which the original slices
    off for the step part) and the same sequence of operations as the original, without its debug printing: rows
    grouped in a dict keyed by ``str(uid)``; per attempt index, that attempt's reward summed from a full ``[B, T]``
    token mask, the leave-one-out baseline computed group by group, and the result broadcast back through the
    mask; then the per-attempt values are read back from the tokens (a masked mean per attempt), discounted over
    later attempts and gathered onto the tokens again.
    """
    bsz, length = response_mask.shape
    dtype = token_level_rewards.dtype
    group_rows: dict[str, list[int] | np.ndarray] = {}
    for i, uid in enumerate(index.tolist()):
        group_rows.setdefault(str(uid), []).append(i)
    group_rows = {uid: np.asarray(rows, dtype=np.int64) for uid, rows in group_rows.items()}

    if token_level_rewards.shape != step_ids.shape or step_ids.shape[1] != length + 1:
        raise ValueError("the original takes token rewards and step ids of [B, T + 1] (see original_inputs)")
    with torch.no_grad():
        valid_tokens = step_ids.ge(0)
        last_step = step_ids.max(dim=1).values
        # the step part works on the response columns; the last one is the outcome slot
        step_ids, valid_tokens, token_level_rewards = (
            step_ids[:, :-1],
            valid_tokens[:, :-1],
            token_level_rewards[:, :-1],
        )
        max_step = int(last_step.max().item())
        step_advantages = torch.zeros((bsz, length), dtype=dtype)
        for s in range(max_step + 1):
            has_step = last_step.ge(s)
            if not bool(has_step.any()):
                continue
            step_tokens = valid_tokens & (step_ids == s)
            if not bool(step_tokens.any()):
                continue
            step_reward = (token_level_rewards * step_tokens.to(dtype)).sum(dim=1)
            centred = _loo_per_group(step_reward, has_step, group_rows)
            step_advantages = step_advantages + centred.unsqueeze(1) * step_tokens.to(dtype)

        # discounted sum over later attempts, read back per attempt from the (trained) tokens
        valid = step_ids.ge(0) & response_mask.bool()
        last_valid = step_ids.masked_fill(~valid, -1).max(dim=1).values
        per_step = torch.zeros((bsz, max_step + 1), dtype=dtype)
        for s in range(max_step + 1):
            tokens_s = valid & (step_ids == s)
            count = tokens_s.sum(dim=1)
            if not bool((count > 0).any()):
                continue
            mean_s = (step_advantages * tokens_s.to(dtype)).sum(dim=1) / count.clamp_min(1).to(dtype)
            per_step[:, s] = mean_s * (count > 0).to(dtype)
        cumulative = torch.zeros_like(per_step)
        for s in range(max_step, -1, -1):
            cumulative[:, s] = per_step[:, s] if s == max_step else per_step[:, s] + gamma * cumulative[:, s + 1]
            cumulative[:, s] = cumulative[:, s] * (last_valid >= s).to(dtype)
        step_advantages = cumulative.gather(1, step_ids.clamp(min=0)) * valid.to(dtype)
        step_advantages = step_advantages * response_mask.to(dtype)
        advantages = step_advantages * response_mask.to(dtype)  # the original masks once more when it sums ORM and PRM
        _returns = advantages.clone()  # the original returns (advantages, returns=a copy)
        return advantages


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
    parser.add_argument("--goal", type=float, default=5.0, help="minimum speed-up (exit 1 below it)")
    parser.add_argument("--device", default="cpu", help="also time the vectorized path on this device (e.g. cuda)")
    args = parser.parse_args()

    batch = make_batch(args.rows, args.tokens, args.attempts, args.group_size, args.seed)
    token_rewards, step_ids = original_inputs(batch)
    print(
        f"B={args.rows} rows, T={args.tokens} tokens, K={args.attempts}, groups of {args.group_size}, "
        f"{int((~batch['present']).sum())} absent attempts"
    )
    default_threads = torch.get_num_threads()
    thread_counts = list(dict.fromkeys([1, default_threads]))
    vectorized(batch, args.gamma)  # warm-up

    # Rounds interleave the two paths so that both see the same load on a shared machine; each round's ratio pairs
    # one reference call with the best of `repeats` vectorized calls made right after it. The reference runs at
    # torch's default thread count (its full [B, T] tensor ops are multi-threaded, as in the original trainer), so
    # the like-for-like figure is the vectorized path at that count; one thread is reported too.
    ref_times: list[float] = []
    vec_times: dict[int, list[float]] = {threads: [] for threads in thread_counts}
    outputs: dict[object, torch.Tensor] = {}
    want = torch.empty(0)
    for _ in range(args.reference_repeats):
        ref_time, want = timed(
            lambda: reference_grpo_prm_step(token_rewards, step_ids, batch["response_mask"], batch["uids"], args.gamma),
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
        identical = torch.allclose(got, want, rtol=0.0, atol=1e-5)
        print(f"outputs equal to float32 rounding ({where}): {identical} (max |diff| {difference:.1e}, tolerance 1e-5)")
        failed |= not identical
    nonzero = int(torch.count_nonzero(want))
    speedup = speedups[default_threads]
    print(
        f"{nonzero} nonzero token advantages; speed-up at torch's default {default_threads} thread(s): "
        f"{speedup:.0f}x (goal >= {args.goal:.0f}x)"
    )
    if failed or nonzero == 0:
        print("FAIL: the vectorized advantages differ from the reference", file=sys.stderr)
        return 1
    if speedup < args.goal:
        print(f"FAIL: speed-up {speedup:.1f}x below the goal {args.goal}x", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

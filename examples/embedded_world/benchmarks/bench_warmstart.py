"""Benchmark: one warm-start optimizer step, the project's cheaper loss against HF's own causal-LM loss.

The baseline is the step warm start v3 ran: ``model(input_ids, attention_mask, labels).loss`` (a padding mask,
so the attention takes its masked path, and the LM head and softmax on every position). The measured path is
``causal_lm_loss`` (the instruction all rows share runs once per batch; no padding mask on right-padded rows;
the LM head only where a label is), on the same labels (model-written tokens; no environment-text loss). Both
run on the same length-bucketed batches of real warm-start transcripts of the embedded world, with the tiny
policy, interleaved round by round so that load from other processes hits both alike. bf16 autocast of the
measured path (the CPU may have AVX512-BF16) and the measured path on one thread are timed too.

Usage: python examples/embedded_world/benchmarks/bench_warmstart.py [--batches 8 --rounds 3 --batch-size 16]
Prints ms per step (forward + backward + AdamW) for each and the speed-up; exits non-zero if the two losses of
a batch differ beyond float32 rounding.
"""

from __future__ import annotations

import argparse
import copy
import random
import statistics
import sys
import time
from dataclasses import replace

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from mr_search_embedded.tiny_model import ensure_tiny_model
from mr_search_embedded.warmstart.batches import bucketed_batches, pad_batch
from mr_search_embedded.warmstart.inputs import warmstart_inputs
from mr_search_embedded.warmstart.render import encode_all
from mr_search_embedded.warmstart.train import WarmStartConfig, causal_lm_loss
from mr_search_embedded.warmstart.transcripts import build_transcripts
from mr_search_embedded.world.world import ensure_world


def reference_loss(model, ids, attention, labels):
    return model(input_ids=ids, attention_mask=attention, labels=labels).loss


def project_loss(model, ids, attention, labels):
    return causal_lm_loss(model, ids, labels)


def bf16_loss(model, ids, attention, labels):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return causal_lm_loss(model, ids, labels)


def time_steps(model, loss_fn, batches, threads: int) -> tuple[list[float], list[float]]:
    torch.set_num_threads(threads)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    times, losses = [], []
    for ids, attention, labels in batches:
        started = time.perf_counter()
        loss = loss_fn(model, ids, attention, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        times.append(time.perf_counter() - started)
        losses.append(float(loss.detach()))
    return times, losses


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=8, help="timed steps per path and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()

    world, base = ensure_world(), ensure_tiny_model()
    tokenizer = AutoTokenizer.from_pretrained(base)
    config = WarmStartConfig()
    index, questions = warmstart_inputs(world)
    transcripts = build_transcripts(
        questions,
        index,
        40 * args.batch_size,
        replace(config.transcripts, attempts=1),
    )
    examples = encode_all(transcripts, tokenizer)
    order = bucketed_batches(examples, args.batch_size, random.Random(0))
    batches = [
        pad_batch([examples[i] for i in chosen], tokenizer.pad_token_id, config.max_length)[:3] for chosen in order
    ]
    padded = sum(ids.numel() for ids, _, _ in batches)
    real = sum(int(attention.sum()) for _, attention, _ in batches)
    labelled = sum(int((labels != -100).sum()) for _, _, labels in batches)
    print(
        f"threads {torch.get_num_threads()}, {len(examples)} single-attempt transcripts, batch {args.batch_size}: "
        f"padding {100 * (1 - real / padded):.1f}% of positions, labels on {100 * labelled / real:.1f}% of tokens"
    )
    initial = AutoModelForCausalLM.from_pretrained(base, dtype="float32")
    initial.train()
    default_threads = torch.get_num_threads()
    reference_name = f"reference (HF loss, padding mask), {default_threads} threads"
    mine_name = f"causal_lm_loss, {default_threads} threads"
    paths = {
        reference_name: (reference_loss, default_threads),
        mine_name: (project_loss, default_threads),
        "causal_lm_loss, 1 thread": (project_loss, 1),
        f"causal_lm_loss + bf16 autocast, {default_threads} threads": (bf16_loss, default_threads),
    }
    timings: dict[str, list[float]] = {name: [] for name in paths}
    status = 0
    for round_index in range(args.rounds):
        chosen = batches[round_index * args.batches : (round_index + 1) * args.batches] or batches[: args.batches]
        losses = {}
        for name, (loss_fn, threads) in paths.items():
            times, losses[name] = time_steps(copy.deepcopy(initial), loss_fn, chosen, threads)
            timings[name] += times[1:]  # the first step of a fresh model pays one-time allocations
        reference, mine = losses[reference_name], losses[mine_name]
        if any(abs(a - b) > 1e-4 * max(1.0, abs(a)) for a, b in zip(reference, mine, strict=True)):
            print(f"round {round_index}: losses differ: {reference} vs {mine}")
            status = 1
    baseline = statistics.median(timings[reference_name])
    for name, times in timings.items():
        median = statistics.median(times)
        print(f"{name:48s} {1000 * median:7.1f} ms/step   speed-up x{baseline / median:.2f}")
    return status


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: the mr_hf rollout server decodes concurrent requests together (micro-batches) vs one at a time.

A GRPO step sends ``batch x n`` requests at once; the ``mr_hf`` server (``mr_search.cpu.server``) decodes
those that arrive together in one left-padded batch with one KV cache (``mr_search.cpu.generation``).
This times the same requests (the tiny local policy, sampled, fixed seeds, ``--tokens`` new tokens each)
decoded one at a time (the baseline) and as one batch, checks both give identical tokens, and prints
the speed-up. The claim: batching is faster than sequential decoding on CPU (``--goal``, default 1.5x
at 16 requests).

Usage: python scripts/bench/bench_cpu_rollout.py [--requests 16 --tokens 32 --repeats 3 --goal 1.5]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import torch

from mr_search.cpu.generation import SamplingParams, generate_batch
from mr_search_embedded.tiny_model import ensure_tiny_model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--goal", type=float, default=1.5)
    args = parser.parse_args()

    from transformers import AutoModelForCausalLM, AutoTokenizer

    path: Path = ensure_tiny_model()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    texts = [f"Question {i}: who wrote the book about the river and the {i % 5} bridges?" for i in range(args.requests)]
    prompts = [tokenizer.encode(t) for t in texts]
    # ignore_eos: every request decodes exactly --tokens tokens, so both ways do the same work.
    params = [SamplingParams(max_new_tokens=args.tokens, seed=i, ignore_eos=True) for i in range(args.requests)]
    common = {
        "eos_token_ids": [tokenizer.eos_token_id],
        "pad_token_id": tokenizer.pad_token_id,
        "decode": tokenizer.decode,
    }

    def sequential() -> list[list[int]]:
        return [generate_batch(model, [p], [s], **common)[0].token_ids for p, s in zip(prompts, params, strict=True)]

    def batched() -> list[list[int]]:
        return [g.token_ids for g in generate_batch(model, prompts, params, **common)]

    def best_of(fn) -> tuple[float, list[list[int]]]:
        times, out = [], []
        for _ in range(args.repeats):
            start = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - start)
        return min(times), out

    batched()  # warm-up
    seq_s, seq_out = best_of(sequential)
    bat_s, bat_out = best_of(batched)
    if seq_out != bat_out:
        print("FAIL: batched decoding produced different tokens than sequential decoding")
        return 1
    tokens = args.requests * args.tokens
    speedup = seq_s / bat_s
    print(f"machine: {platform.processor() or platform.machine()}, torch threads {torch.get_num_threads()}")
    print(f"{args.requests} requests x {args.tokens} tokens, best of {args.repeats}")
    print(f"sequential: {seq_s:.3f} s ({tokens / seq_s:.0f} tok/s)")
    print(f"batched:    {bat_s:.3f} s ({tokens / bat_s:.0f} tok/s)")
    print(f"speed-up batched/sequential: {speedup:.2f}x (goal >= {args.goal}x)")
    return 0 if speedup >= args.goal else 1


if __name__ == "__main__":
    sys.exit(main())

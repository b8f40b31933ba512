"""Benchmark: the warm start's training time, the default recipe against warm start v5's.

v5 (the baseline) trained 900 steps of 16 whole transcripts in float32. The default recipe first trains on short
windows of the transcripts' bodies (copying is learned there, cheaply), then on whole transcripts, under bf16
autocast. Both are timed here on the same machine, interleaved round by round so that load from other processes
hits both alike, on batches drawn as the build draws them from the embedded world's real transcripts (the
one- and multi-attempt mix), starting from the tiny policy. A stage's time is its mean step time times its
steps; the build's training time is the sum over stages (transcript rendering and saving add a few seconds).

Usage: python examples/embedded_world/benchmarks/bench_warmstart_recipe.py [--steps 6 --rounds 3 --threads 0]
Prints ms per step of each stage, the estimated training seconds of each recipe and the speed-up.
"""

from __future__ import annotations

import argparse
import copy
import random
import statistics
import sys
import time
from dataclasses import dataclass, replace

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from mr_search.agent.tokens import EnvEncoder
from mr_search_embedded.tiny_model import ensure_tiny_model
from mr_search_embedded.warmstart.batches import Batch, WindowSampler, bucketed_batches, pad_batch
from mr_search_embedded.warmstart.inputs import warmstart_inputs
from mr_search_embedded.warmstart.render import encode_all
from mr_search_embedded.warmstart.train import WarmStartConfig, train_step, transcript_mix
from mr_search_embedded.world.world import ensure_world

V5 = replace(WarmStartConfig(), window_steps=0, steps=900, bf16=False)


@dataclass
class Stage:
    name: str
    steps: int
    bf16: bool
    batches: list[Batch]
    times: list[float]


def time_steps(model, batches: list[Batch], config: WarmStartConfig, bf16: bool) -> list[float]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, config.adam_beta2), weight_decay=0.0)
    config = replace(config, bf16=bf16)
    times = []
    for batch in batches:
        started = time.perf_counter()
        train_step(model, optimizer, batch, config)
        times.append(time.perf_counter() - started)
    return times[1:]  # the first step of a fresh optimizer pays one-time allocations


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=6, help="timed steps per stage and round (plus one untimed)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.steps < 1 or args.rounds < 1 or args.threads < 0:
        parser.error("--steps and --rounds must be >= 1, --threads >= 0")
    if args.threads:
        torch.set_num_threads(args.threads)

    config = WarmStartConfig()
    world, base = ensure_world(), ensure_tiny_model()
    tokenizer = AutoTokenizer.from_pretrained(base)
    index, questions = warmstart_inputs(world)
    transcripts = transcript_mix(questions, index, config, count=400)
    examples = encode_all(transcripts, tokenizer, EnvEncoder(tokenizer))
    pad = tokenizer.pad_token_id
    draws = args.rounds * (args.steps + 1)
    rng = random.Random(0)
    whole = [
        pad_batch([examples[i] for i in chosen], pad, config.max_length)
        for chosen in bucketed_batches(examples, config.batch_size, rng)[:draws]
    ]
    sampler = WindowSampler(examples, config.window_length, config.window_anchor_share, rng)
    windows = [sampler.batch(config.window_batch_size, pad) for _ in range(draws)]
    stages = [
        Stage(f"v5: whole transcripts x{V5.batch_size}, float32", V5.steps, False, whole, []),
        Stage(
            f"default: {config.window_length}-token windows x{config.window_batch_size}",
            config.window_steps,
            config.bf16,
            windows,
            [],
        ),
        Stage(f"default: whole transcripts x{config.batch_size}", config.steps, config.bf16, whole, []),
    ]
    print(
        f"threads {torch.get_num_threads()}; {len(examples)} transcripts (mean "
        f"{statistics.mean(len(e.input_ids) for e in examples):.0f} tokens); default recipe: "
        f"{config.window_steps} window steps + {config.steps} whole steps, bf16 {config.bf16}; v5: {V5.steps} whole"
    )
    initial = AutoModelForCausalLM.from_pretrained(base, dtype="float32")
    initial.train()
    per_round = args.steps + 1
    for r in range(args.rounds):
        for stage in stages:
            chosen = stage.batches[r * per_round : (r + 1) * per_round]
            stage.times += time_steps(copy.deepcopy(initial), chosen, config, stage.bf16)
    for stage in stages:
        print(f"{stage.name:52s} {1000 * statistics.mean(stage.times):7.1f} ms/step x {stage.steps:4d} steps")
    baseline = stages[0].steps * statistics.mean(stages[0].times)
    default = sum(s.steps * statistics.mean(s.times) for s in stages[1:])
    print(f"training time, v5 recipe      {baseline:7.1f} s")
    print(f"training time, default recipe {default:7.1f} s   speed-up x{baseline / default:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

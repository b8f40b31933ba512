"""What SGLang's decoding of the lab's batch costs the clock and the host's CPU, eager against CUDA graphs, in one run.

    python scripts/bench/engine_decode_cpu.py --model <policy folder> [--batch 160] [--prompt-tokens 256]
        [--new-tokens 48] [--rounds 9] [--port 30002]

Starts SGLang's server on the model twice with the lab's settings (``sglang_server.LAB_FLAGS``, token ids in and
out as verl runs it): once eager (the lab's default ``ENFORCE_EAGER=1``: no decode graphs, no piecewise prefill
graphs), once with CUDA graphs as ``ENFORCE_EAGER=0`` leaves them (SGLang's own batch sizes, piecewise prefill).
For each: the start-up time, then ``--rounds`` rounds (a round: one turn of every meta-episode of a lab step,
``--batch`` requests in one call, ``--new-tokens`` sampled tokens each at temperature 1 with the end-of-sequence
token ignored, so both servers write the same number) after one untimed round that builds the kernels. Prints each
server's seconds a round, tokens a second and the CPU seconds of its process tree per 1,000 tokens, then the ratios
graphs / eager. Why it matters: the lab runs eight trainings side by side on one card, each with its engine, and
their host's cores, not the card, bound the step.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

from sglang_server import EAGER_FLAGS, cpu_seconds_since, post_generate, require_model, sglang_server, tree_ticks


def prompts(batch: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    """``batch`` prompts of ``length`` token ids drawn from ``[10, vocab)`` (clear of the special ids), seeded."""
    draw = random.Random(seed)
    return [[draw.randrange(10, vocab) for _ in range(length)] for _ in range(batch)]


def generate_round(port: int, input_ids: list[list[int]], new_tokens: int) -> tuple[float, int]:
    """One batched ``/generate`` call: (its seconds, the tokens written)."""
    body = {
        "input_ids": input_ids,
        "sampling_params": {"max_new_tokens": new_tokens, "temperature": 1.0, "ignore_eos": True},
    }
    seconds, outputs = post_generate(port, body)
    return seconds, sum(int(out["meta_info"]["completion_tokens"]) for out in outputs)


def summarize(round_s: list[float], tokens: int, cpu_s: float) -> dict:
    """A server's figures from its timed rounds: seconds a round, tokens a second, CPU seconds per 1,000 tokens."""
    if tokens <= 0:
        raise ValueError("the server wrote no tokens in the timed rounds; nothing to compare")
    return {
        "round_median_s": round(statistics.median(round_s), 4),
        "tokens_per_s": round(tokens / sum(round_s), 1),
        "cpu_s_per_1k_tokens": round(1000.0 * cpu_s / tokens, 4),
        "tokens": tokens,
    }


def measure(
    model: Path, port: int, flags: list[str], batch_prompts: list[list[int]], new_tokens: int, rounds: int
) -> dict:
    """One server's start-up and timed rounds (``flags`` on top of the lab's settings)."""
    with sglang_server(model, port, ["--skip-tokenizer-init", *flags]) as (pid, up_s):
        generate_round(port, batch_prompts, new_tokens)  # builds the kernels (and JIT modules) once
        before, round_s, tokens = tree_ticks(pid), [], 0
        for _ in range(rounds):
            seconds, written = generate_round(port, batch_prompts, new_tokens)
            round_s.append(seconds)
            tokens += written
        cpu = cpu_seconds_since(before)
    return {"flags": flags, "up_s": round(up_s, 1), **summarize(round_s, tokens, sum(cpu.values()))}


def ratios(eager: dict, graphs: dict) -> dict:
    """graphs / eager for the clock, the CPU per token and the start-up."""
    return {
        "round_s": round(graphs["round_median_s"] / eager["round_median_s"], 3),
        "cpu_per_token": round(graphs["cpu_s_per_1k_tokens"] / eager["cpu_s_per_1k_tokens"], 3),
        "up_s": round(graphs["up_s"] / eager["up_s"], 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="a Hugging Face folder SGLang can serve")
    parser.add_argument("--batch", type=int, default=160, help="requests a round (the lab: 32 questions x 5)")
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--new-tokens", type=int, default=48, help="tokens a request writes (the lab: 48 a turn)")
    parser.add_argument("--rounds", type=int, default=9, help="timed rounds (the lab: 3 attempts x 3 turns)")
    parser.add_argument("--port", type=int, default=30002)
    args = parser.parse_args(argv)
    require_model(parser, args.model)
    for name in ("batch", "prompt_tokens", "new_tokens", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)}: give a positive count")
    vocab = int(json.loads((args.model / "config.json").read_text())["vocab_size"])
    batch_prompts = prompts(args.batch, args.prompt_tokens, vocab, seed=0)
    shape = (batch_prompts, args.new_tokens, args.rounds)
    eager = measure(args.model, args.port, list(EAGER_FLAGS), *shape)
    graphs = measure(args.model, args.port, [], *shape)
    for run in (eager, graphs):
        print(json.dumps(run))
    ratio = ratios(eager, graphs)
    print(
        f"RATIO graphs/eager: {ratio['round_s']:.3f} of the seconds a round ({graphs['round_median_s']:.3f} s against "
        f"{eager['round_median_s']:.3f}), {ratio['cpu_per_token']:.3f} of the CPU a token "
        f"({graphs['cpu_s_per_1k_tokens']:.3f} against {eager['cpu_s_per_1k_tokens']:.3f} CPU s per 1k tokens), "
        f"start-up {graphs['up_s']:.0f} s against {eager['up_s']:.0f} s; {args.batch} requests x {args.new_tokens} "
        f"tokens a round, {args.rounds} rounds"
    )
    print("JSON " + json.dumps({"eager": eager, "graphs": graphs, "ratio": ratio}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Whether SGLang's memory saver is needed: can the rollout engine's share of a GPU and the policy's update share it?

The update a GPU: 16 bytes a sharded parameter plus 24 a logit of one micro-batch (measured: 23 at 0.5B, 30 at 7B;
docs/gpu.md), 20% of the card kept aside. Unknown sizes: on.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Final

BYTES_PER_PARAMETER: Final = 16  # fp32 parameter + gradient + Adam m and v
BYTES_PER_LOGIT: Final = 24  # fp32 logit, log-softmax, entropy and their gradients (measured: 23-30)
HEADROOM: Final = 0.2  # share of the card left for gathered layers, activations, allocator slack


@dataclass(frozen=True)
class SaverChoice:
    on: bool
    reason: str


def model_size(model: str) -> tuple[int, int]:
    """(parameters, vocabulary size) of a model folder or cached Hub id, counted on the meta device."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(model)
    with torch.device("meta"):
        module = AutoModelForCausalLM.from_config(config)
    vocab = getattr(config, "vocab_size", None) or getattr(config.get_text_config(), "vocab_size", 0)
    return sum(p.numel() for p in module.parameters()), int(vocab or 0)


def choose(
    parameters: int | None,
    gpus: int,
    utilization: float,
    card_mib: float | None,
    vocab: int = 0,
    micro_batch: int = 0,
    tokens: int = 0,
) -> SaverChoice:
    """The saver choice for a policy on ``gpus`` cards of ``card_mib`` MiB, ``micro_batch`` x ``tokens`` a forward."""
    if not card_mib or card_mib <= 0:
        return SaverChoice(True, "no GPU memory size known (no nvidia-smi): on, verl's default")
    if parameters is None:
        return SaverChoice(True, "the model's size is unknown (its config could not be read): on, verl's default")
    card = card_mib * 2**20
    update = BYTES_PER_PARAMETER * parameters / max(gpus, 1) + BYTES_PER_LOGIT * micro_batch * tokens * vocab
    engine = utilization * card
    usable = (1 - HEADROOM) * card
    gib = 2**30
    figures = (
        f"update ~{update / gib:.1f} GiB a GPU ({parameters / 1e9:.2f}B parameters x {BYTES_PER_PARAMETER} bytes / "
        f"{gpus} GPUs, logits of {micro_batch} x {tokens} tokens x {vocab}) + engine {engine / gib:.1f} GiB "
        f"(gpu_memory_utilization {utilization}) vs "
        f"{usable / gib:.1f} GiB ({1 - HEADROOM:.0%} of a {card / gib:.0f} GiB card)"
    )
    if update + engine > usable:
        return SaverChoice(True, f"on: the engine and the update cannot share the card: {figures}")
    return SaverChoice(False, f"off: the engine and the update share the card: {figures}")


def choose_for(model: str, gpus: int, utilization: float, card_mib: str, micro_batch: int, tokens: int) -> SaverChoice:
    """``choose`` from a model path ("": unknown) and nvidia-smi's text for the card; unreadable means unknown."""
    parameters, vocab = None, 0
    if model:
        try:
            parameters, vocab = model_size(model)
        except Exception:  # any failure to read the config means "size unknown"
            parameters = None
    try:
        card = float(card_mib) if card_mib else None
    except ValueError:
        card = None
    return choose(parameters, gpus, utilization, card, vocab, micro_batch, tokens)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="")
    parser.add_argument("--gpus", type=int, default=1, help="GPUs the update is sharded over (all nodes)")
    parser.add_argument("--utilization", type=float, required=True, help="the engine's gpu_memory_utilization")
    parser.add_argument("--card-mib", default="", help="one GPU's memory in MiB (nvidia-smi); empty: unknown")
    parser.add_argument("--micro-batch", type=int, default=0, help="rows a forward (ppo_micro_batch_size_per_gpu)")
    parser.add_argument("--tokens", type=int, default=0, help="tokens a row (max prompt + response length)")
    args = parser.parse_args(argv)
    choice = choose_for(args.model, args.gpus, args.utilization, args.card_mib, args.micro_batch, args.tokens)
    print(choice.reason, file=sys.stderr)
    print(1 if choice.on else 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Whether SGLang's memory saver is needed: can the rollout engine's share of a GPU and the policy's update share it?

``python -m mr_search.ops.gpu_fit --model DIR --gpus N --utilization U --card-mib M`` prints ``1`` (saver on: the
engine releases its weights and KV cache while FSDP trains, verl's default) or ``0`` (off: the engine keeps its
memory, no release and resume each step), and the reason on stderr. ``train_grpo_step.sh`` asks it when
``SGLANG_MEMORY_SAVER=auto`` (the default).

The update's memory a GPU is estimated as 16 bytes a parameter sharded over the GPUs (fp32 parameters, gradients and
Adam's two moments: verl loads offloaded ones onto the GPU for the update) plus 24 bytes a logit of one micro-batch
(rows x tokens x vocabulary: the fp32 logits, their log-softmax and entropy, and the gradients of these), with 20% of
the card kept for the rest (gathered layers, allocator slack); the engine takes ``U`` of the card. Saver on when the
two do not fit, or when either is unknown. The 24 bytes are measured: the update beyond the sharded state took 23
bytes a logit at the 0.5B shape on one H200 (micro-batches of 16 rows of 1,280 tokens: estimated 76.9 GiB, peaked at
74.6 GiB allocated) and 30 at the 7B shape on 3 H200s (one 8.7k-token row: estimated 67.4 GiB, peaked at 75.1 GiB);
both with an entropy bonus (docs/gpu.md). Until the 0.5B measurement the figure was 8 (the logits and their gradient
alone), which read that 0.5B update as 31 GiB and let it share an 80 GB card with the engine, where it cannot.
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
    """(parameters, vocabulary size) of the model at ``model`` (a folder, or a Hub id in the local cache), counted on
    the meta device (nothing allocated)."""
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
    """The saver choice for a policy of ``parameters`` (``vocab`` wide) trained on ``gpus`` GPUs of ``card_mib`` MiB
    each, ``micro_batch`` rows of ``tokens`` a forward."""
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="")
    parser.add_argument("--gpus", type=int, default=1, help="GPUs the update is sharded over (all nodes)")
    parser.add_argument("--utilization", type=float, required=True, help="the engine's gpu_memory_utilization")
    parser.add_argument("--card-mib", default="", help="one GPU's memory in MiB (nvidia-smi); empty: unknown")
    parser.add_argument("--micro-batch", type=int, default=0, help="rows a forward (ppo_micro_batch_size_per_gpu)")
    parser.add_argument("--tokens", type=int, default=0, help="tokens a row (max prompt + response length)")
    args = parser.parse_args(argv)
    parameters, vocab = None, 0
    if args.model:
        try:
            parameters, vocab = model_size(args.model)
        except Exception:  # any failure to read the config means "size unknown"
            parameters = None
    try:
        card = float(args.card_mib) if args.card_mib else None
    except ValueError:
        card = None
    choice = choose(parameters, args.gpus, args.utilization, card, vocab, args.micro_batch, args.tokens)
    print(choice.reason, file=sys.stderr)
    print(1 if choice.on else 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())

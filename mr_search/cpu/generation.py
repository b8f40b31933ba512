"""Batched sampling with a transformers causal LM from token ids: the engine of the ``mr_hf`` rollout server.

Log-probs are of the temperature-scaled distribution before top-k/top-p, as verl's actor recomputes them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import torch

FinishReason = Literal["stop", "length", "abort"]

# Sampling keys the server accepts (vLLM/SGLang spellings verl's agent loops send).
_KNOWN_KEYS: Final = frozenset(
    {
        "max_tokens",
        "max_new_tokens",
        "temperature",
        "top_p",
        "top_k",
        "repetition_penalty",
        "logprobs",
        "stop",
        "stop_token_ids",
        "ignore_eos",
        "seed",
        "n",
        "include_stop_str_in_output",
        "skip_special_tokens",
        "spaces_between_special_tokens",
        "no_stop_trim",
        "min_p",
        "presence_penalty",
        "frequency_penalty",
        "detokenize",
    }
)


@dataclass(frozen=True)
class SamplingParams:
    """Sampling of one request. ``temperature == 0`` means greedy; ``top_k <= 0`` means no top-k cut."""

    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.max_new_tokens < 0:
            raise ValueError(f"SamplingParams.max_new_tokens={self.max_new_tokens}: must be >= 0")
        if self.temperature < 0 or not math.isfinite(self.temperature):
            raise ValueError(f"SamplingParams.temperature={self.temperature}: must be finite and >= 0 (0 = greedy)")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"SamplingParams.top_p={self.top_p}: must lie in (0, 1]")
        if any(not s for s in self.stop):
            raise ValueError(f"SamplingParams.stop={self.stop!r}: stop strings must be non-empty")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0 or self.top_k == 1

    @classmethod
    def from_request(cls, params: Mapping[str, Any], default_max_new_tokens: int) -> SamplingParams:
        """Builds the parameters from a vLLM/SGLang-style dict, rejecting what this server cannot honour."""
        unknown = sorted(set(params) - _KNOWN_KEYS)
        if unknown:
            raise ValueError(
                f"mr_hf rollout: unsupported sampling parameter(s) {unknown}; supported: {sorted(_KNOWN_KEYS)}"
            )
        for key, neutral in (("repetition_penalty", 1.0), ("n", 1), ("min_p", 0.0)):
            if params.get(key) not in (None, neutral):
                raise ValueError(f"mr_hf rollout: {key}={params[key]!r} is not supported; use {neutral}")
        for key in ("presence_penalty", "frequency_penalty"):
            if params.get(key) not in (None, 0, 0.0):
                raise ValueError(f"mr_hf rollout: {key}={params[key]!r} is not supported; use 0")
        max_new = params.get("max_tokens", params.get("max_new_tokens"))
        stop = params.get("stop") or ()
        top_k = params.get("top_k")
        return cls(
            max_new_tokens=int(default_max_new_tokens if max_new is None else max_new),
            temperature=float(params.get("temperature", 1.0)),
            top_p=float(params.get("top_p", 1.0)),
            top_k=-1 if top_k is None else int(top_k),
            stop=(stop,) if isinstance(stop, str) else tuple(stop),
            stop_token_ids=tuple(int(t) for t in params.get("stop_token_ids") or ()),
            ignore_eos=bool(params.get("ignore_eos", False)),
            seed=None if params.get("seed") is None else int(params["seed"]),
        )


@dataclass
class Generation:
    """What one request produced: the sampled ids, the log-prob of each and the finish reason."""

    token_ids: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    finish_reason: FinishReason = "length"


def _sample_rows(
    logits: torch.Tensor, params: Sequence[SamplingParams], generators: Sequence[torch.Generator | None]
) -> tuple[list[int], list[float]]:
    """One token and its log-prob per row: top-k, then top-p (vLLM's order); seeded rows use their own generator."""
    rows, vocab = logits.shape
    device = logits.device
    greedy = torch.tensor([p.greedy for p in params], device=device)
    temperature = torch.tensor([1.0 if p.greedy else p.temperature for p in params], device=device)
    log_probs = torch.log_softmax(logits / temperature[:, None], dim=-1)
    tokens = torch.argmax(logits, dim=-1)
    if not bool(greedy.all()):
        sorted_lp, order = torch.sort(log_probs, dim=-1, descending=True)
        probs = sorted_lp.exp()
        top_k = torch.tensor([p.top_k if 0 < p.top_k < vocab else vocab for p in params], device=device)
        probs = probs * (torch.arange(vocab, device=device)[None, :] < top_k[:, None])
        probs = probs / probs.sum(dim=-1, keepdim=True)
        top_p = torch.tensor([p.top_p for p in params], device=device)
        probs = probs * ((torch.cumsum(probs, dim=-1) - probs) < top_p[:, None])  # keeps the crossing token
        choice = torch.zeros(rows, dtype=torch.long, device=device)
        shared = [row for row in range(rows) if not params[row].greedy and generators[row] is None]
        if shared:
            index = torch.tensor(shared, device=device)
            choice[index] = torch.multinomial(probs[index], 1).squeeze(-1)
        for row in range(rows):
            if not params[row].greedy and generators[row] is not None:
                drawn = torch.multinomial(probs[row].cpu(), 1, generator=generators[row])
                choice[row] = drawn.to(device).squeeze(-1)
        sampled = order.gather(-1, choice[:, None]).squeeze(-1)
        tokens = torch.where(greedy, tokens, sampled)
    chosen = log_probs.gather(-1, tokens[:, None]).squeeze(-1)
    return tokens.tolist(), chosen.tolist()


def _hits_stop_string(text: str, stops: Sequence[str]) -> bool:
    return any(s in text for s in stops)


@torch.no_grad()
def generate_batch(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    params: Sequence[SamplingParams],
    *,
    eos_token_ids: Sequence[int],
    pad_token_id: int,
    decode: Callable[[list[int]], str],
    should_abort: Callable[[], bool] = lambda: False,
) -> list[Generation]:
    """Decodes ``prompts`` together (left-padded, one KV cache), each with its own sampling parameters."""
    if len(prompts) != len(params):
        raise ValueError(f"generate_batch: {len(prompts)} prompts but {len(params)} sampling parameters")
    if any(len(p) == 0 for p in prompts):
        raise ValueError("generate_batch: every prompt needs at least one token id")
    batch = len(prompts)
    device = next(model.parameters()).device
    results = [Generation() for _ in range(batch)]
    finished = [p.max_new_tokens == 0 for p in params]
    generators = [None if p.seed is None else torch.Generator().manual_seed(p.seed) for p in params]
    eos = frozenset(eos_token_ids)

    width = max(len(p) for p in prompts)
    input_ids = torch.full((batch, width), pad_token_id, dtype=torch.long)
    attention = torch.zeros((batch, width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        input_ids[row, width - len(prompt) :] = torch.tensor(list(prompt), dtype=torch.long)
        attention[row, width - len(prompt) :] = 1
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    input_ids, attention, positions = input_ids.to(device), attention.to(device), positions.to(device)

    past = None
    for _ in range(max((p.max_new_tokens for p in params), default=0)):
        if all(finished):
            break
        if should_abort():
            for row in range(batch):
                if not finished[row]:
                    results[row].finish_reason = "abort"
                    finished[row] = True
            break
        out = model(
            input_ids=input_ids,
            attention_mask=attention,
            position_ids=positions,
            past_key_values=past,
            use_cache=True,
            logits_to_keep=1,  # the prefill needs only the last position's logits
        )
        past = out.past_key_values
        active = [row for row in range(batch) if not finished[row]]
        index = torch.tensor(active, device=device)
        logits = out.logits[:, -1, :].float().index_select(0, index)
        tokens, log_probs = _sample_rows(logits, [params[r] for r in active], [generators[r] for r in active])
        next_ids = [pad_token_id] * batch
        for row, token, log_prob in zip(active, tokens, log_probs, strict=True):
            p, result = params[row], results[row]
            result.token_ids.append(token)
            result.log_probs.append(log_prob)
            next_ids[row] = token
            stop_token = (token in eos and not p.ignore_eos) or token in p.stop_token_ids
            if stop_token or (p.stop and _hits_stop_string(decode(result.token_ids), p.stop)):
                result.finish_reason, finished[row] = "stop", True
            elif len(result.token_ids) >= p.max_new_tokens:
                result.finish_reason, finished[row] = "length", True
        input_ids = torch.tensor(next_ids, dtype=torch.long, device=device)[:, None]
        attention = torch.cat([attention, torch.ones((batch, 1), dtype=torch.long, device=device)], dim=-1)
        positions = positions[:, -1:] + 1
    return results

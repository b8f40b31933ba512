"""The typed ``mr_search.episode`` config of the meta-episode agent loop; defaults are the paper's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mr_search.config_checks import check_fields, from_mapping

SECTION = "mr_search.episode"
CONTEXT_MODES = ("full", "previous_attempt")
STOP_PARAM_STYLES = ("auto", "vllm", "sglang", "none")


@dataclass(frozen=True)
class EpisodeConfig:
    """How one meta-episode runs (docs/method.md#the-meta-episode).

    Attributes:
        attempts: K, attempts chained in one context (paper: 3; 1 = plain Search-R1).
        val_attempts: K in verl's validation passes during training; None: ``attempts`` (paper). A larger K shows
            whether the policy keeps gaining from reflection past the K it trains with, and a K = 1 baseline can be
            validated at the K it is compared at. The response budget (``data.max_response_length``) is shared.
        max_turns_per_attempt: model turns per attempt (paper: 3 for NQ/HotpotQA, 5 for ASearcher).
        topk: passages per search (paper: 3).
        max_information_tokens: each ``<information>`` block is cut to this many tokens (paper: 1024).
        max_new_tokens_per_turn: generation limit of one model turn (paper: 1024).
        early_stop_when_correct: end the meta-episode after a correct attempt (paper: off; MAGE: on).
        outcome_feedback: tell the model in the reflection turn whether its answer was right (paper: off).
        reflection_restates_question: end the reflection turn with the question's line ("Question: ...") as the
            first user turn writes it (paper: off, a fixed turn): a small policy then copies the question from
            near by instead of from the start of the context.
        context: ``full`` keeps every earlier attempt in the generation context (paper);
            ``previous_attempt`` shows the model only the question and the previous attempt (the
            paper's short-context ablation). Training stays on-policy: a meta-episode whose turns saw cut
            contexts is trained as one row per context (``mr_search.agent.segments``).
        reflection_template: the between-attempts user turn; None uses ``prompts.REFLECTION_PROMPT``.
        max_context_tokens: generation context limit; the oldest response tokens are dropped from
            the left past it, never the question. None: ``rollout.max_model_len`` when set, else
            ``rollout.prompt_length + rollout.response_length``. A cut context opens a new training row, as
            for ``previous_attempt``.
        stop_params: how stop strings are sent: ``auto`` picks from ``rollout.name`` (vLLM:
            ``stop`` + ``include_stop_str_in_output``; SGLang: ``stop`` + ``no_stop_trim`` unless
            ``skip_tokenizer_init`` is on, when it cannot match strings); the loop cuts after the
            closing tag itself in every case.
        stop_token_ids: send the stop strings that are one token in the tokenizer as stop token ids, so that the
            engine's core stops at the tag's token itself; when every tag is one token (the tiny policy's
            tokenizer) no stop strings are sent at all (no detokenized text to search every step: SGLang does that
            in its scheduler loop, vLLM's front end finds a string a step or more after the core sampled it). The
            tokens kept are the same either way; false: strings only.
        generate_timeout_s: seconds one model turn may wait for the engine; past it the meta-episode ends
            (truncated) and the trainer stops the run at the end of the step, naming the hang (a hung engine
            never holds a run silently). Generous: a 1,024-token turn at 10 tokens/s takes 100 s.
    """

    attempts: int = 3
    val_attempts: int | None = None
    max_turns_per_attempt: int = 3
    topk: int = 3
    max_information_tokens: int = 1024
    max_new_tokens_per_turn: int = 1024
    early_stop_when_correct: bool = False
    outcome_feedback: bool = False
    reflection_restates_question: bool = False
    context: str = "full"
    reflection_template: str | None = None
    max_context_tokens: int | None = None
    stop_params: str = "auto"
    stop_token_ids: bool = True
    generate_timeout_s: float = 600.0

    def __post_init__(self) -> None:
        check_fields(self, SECTION, {"context": CONTEXT_MODES, "stop_params": STOP_PARAM_STYLES})
        for name in ("attempts", "max_turns_per_attempt", "topk", "max_information_tokens", "max_new_tokens_per_turn"):
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"mr_search.episode.{name}={value!r} must be an integer >= 1")
        if self.val_attempts is not None and self.val_attempts < 1:
            raise ValueError(f"mr_search.episode.val_attempts={self.val_attempts!r} must be an integer >= 1 or null")
        if self.generate_timeout_s <= 0:
            raise ValueError(f"mr_search.episode.generate_timeout_s={self.generate_timeout_s} must be > 0 (seconds)")
        if self.max_context_tokens is not None and self.max_context_tokens < 2:
            raise ValueError(f"mr_search.episode.max_context_tokens={self.max_context_tokens} must be >= 2 or null")
        if self.reflection_template is not None and not self.reflection_template.strip():
            raise ValueError("mr_search.episode.reflection_template is empty; give a text or null for the default")

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> EpisodeConfig:
        """Builds the config from the ``mr_search.episode`` subtree (dict or DictConfig); None gives defaults."""
        return from_mapping(cls, config, SECTION)

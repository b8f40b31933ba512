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
    """How one meta-episode runs; keys documented in ``configs/recipe/paper.yaml``."""

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

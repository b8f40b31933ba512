"""Token assembly: environment text encoded once, appended to model tokens that are never re-tokenized."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence
from typing import Any

_PLACEHOLDERS = ("\x00MR_A\x00", "\x00MR_B\x00", "\x00MR_C\x00")


def single_token_stops(tokenizer: Any, stops: Sequence[str]) -> tuple[int, ...]:
    """Ids of the stop strings that are one token in ``tokenizer`` (an engine matches them without decoding)."""
    ids = []
    for stop in stops:
        encoded = tokenizer.encode(stop, add_special_tokens=False)
        if len(encoded) == 1:
            ids.append(int(encoded[0]))
    return tuple(ids)


class EnvEncoder:
    """Encodes environment text for one tokenizer, special tokens split: a passage cannot forge a turn boundary."""

    def __init__(self, tokenizer: Any, chat_template_kwargs: dict[str, Any] | None = None) -> None:
        self.tokenizer = tokenizer
        # Splitting special tokens flips a flag on a fast tokenizer's shared Rust object, which verl uses on worker
        # threads ("Already borrowed"): content is encoded with a private copy, under a lock.
        self._content_tokenizer = copy.deepcopy(tokenizer)
        self._content_lock = threading.Lock()
        a, b, c = _PLACEHOLDERS
        messages = [{"role": "user", "content": a}, {"role": "assistant", "content": b}, {"role": "user", "content": c}]
        try:
            rendered = tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True, **(chat_template_kwargs or {})
            )
        except Exception as error:
            raise ValueError(
                "the tokenizer has no usable chat template; the meta-episode needs one to open and close the "
                "reflection turn (set actor_rollout_ref.model.custom_chat_template)"
            ) from error
        if not all(p in rendered for p in _PLACEHOLDERS):
            raise ValueError(f"the chat template dropped message contents; cannot find turn boundaries in {rendered!r}")
        after_b = rendered.index(b) + len(b)
        before_c = rendered.index(c)
        self.user_open_text = rendered[after_b:before_c]
        self.user_close_text = rendered[before_c + len(c) :]
        self.user_open = self._encode_markup(self.user_open_text)
        self.user_close = self._encode_markup(self.user_close_text)
        eos = tokenizer.eos_token
        # When the model ended its own turn with eos, the boundary must not close it a second time.
        self.user_open_after_eos = (
            self._encode_markup(self.user_open_text[len(eos) :])
            if eos and self.user_open_text.startswith(eos)
            else self.user_open
        )
        self.end_ids = frozenset(int(i) for i in tokenizer.all_special_ids)
        self._cache: dict[tuple[str, str], list[int]] = {}
        self.information_open = self.encode_text("\n\n<information>")
        self.information_close = self.encode_text("</information>\n\n")

    def _encode_markup(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False)) if text else []

    def encode_text(self, text: str) -> list[int]:
        """Encodes plain content (special-token strings inside it stay plain text)."""
        if not text:
            return []
        with self._content_lock:
            encoded = self._content_tokenizer(text, add_special_tokens=False, split_special_tokens=True)
        return list(encoded["input_ids"])

    def decode(self, token_ids: Any) -> str:
        return self.tokenizer.decode(token_ids, skip_special_tokens=False)

    def observation(self, text: str, max_tokens: int) -> list[int]:
        """``<information>text</information>`` with the text cut to ``max_tokens`` tokens."""
        return self.information_open + self.encode_text(text)[:max_tokens] + self.information_close

    def note(self, text: str) -> list[int]:
        """A short corrective note inside the assistant's stream (Search-R1's invalid-action layout)."""
        return self._cached(("note", text), lambda: self.encode_text(f"\n{text}\n"))

    def user_turn(self, text: str, after_eos: bool) -> list[int]:
        """A complete user turn followed by the opening of the next assistant turn."""
        opening = self.user_open_after_eos if after_eos else self.user_open
        return opening + self._cached(("user", text), lambda: self.encode_text(text)) + self.user_close

    def _cached(self, key: tuple[str, str], encode: Callable[[], list[int]]) -> list[int]:
        # The fixed texts (reflection, corrective note) are encoded once per tokenizer, not per turn.
        ids = self._cache.get(key)
        if ids is None:
            if len(self._cache) > 256:
                self._cache.clear()
            ids = self._cache[key] = encode()
        return list(ids)


class Transcript:
    """One meta-episode's tokens: the prompt, then response tokens with mask, log-probs and attempt index."""

    def __init__(self, prompt_ids: list[int]) -> None:
        self.prompt_len = len(prompt_ids)
        self.context: list[int] = list(prompt_ids)
        self.mask: list[int] = []
        self.logprobs: list[float] = []
        self.attempt_ids: list[int] = []
        self.has_logprobs = True

    @property
    def response_len(self) -> int:
        return len(self.mask)

    @property
    def prompt_ids(self) -> list[int]:
        return self.context[: self.prompt_len]

    @property
    def response_ids(self) -> list[int]:
        return self.context[self.prompt_len :]

    def add_model(self, token_ids: list[int], logprobs: list[float] | None, attempt: int) -> None:
        self.context.extend(token_ids)
        self.mask.extend([1] * len(token_ids))
        if not token_ids:
            return  # an empty turn (e.g. an aborted request) says nothing about log-probs
        if logprobs is None or len(logprobs) != len(token_ids):
            self.has_logprobs = False
            self.logprobs.extend([0.0] * len(token_ids))
        else:
            self.logprobs.extend(float(x) for x in logprobs)
        self.attempt_ids.extend([attempt] * len(token_ids))

    def add_env(self, token_ids: list[int], attempt: int) -> None:
        self.context.extend(token_ids)
        self.mask.extend([0] * len(token_ids))
        self.logprobs.extend([0.0] * len(token_ids))
        self.attempt_ids.extend([attempt] * len(token_ids))

"""Turns a transcript into token ids and a loss mask, with the agent loop's own environment-token encoder."""

from __future__ import annotations

from dataclasses import dataclass

from mr_search.agent.tokens import EnvEncoder
from mr_search.prompts import question_prompt, reflection_prompt
from mr_search.warmstart.transcripts import Transcript


@dataclass(frozen=True)
class Encoded:
    """One rendered transcript: ``input_ids`` and ``loss_mask`` (1 on model-written tokens) of equal length."""

    input_ids: list[int]
    loss_mask: list[int]
    prompt_length: int


def prompt_ids(tokenizer, question: str) -> list[int]:
    """The first user turn in the chat template, ending with the assistant header (as verl's dataset does)."""
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": question_prompt(question)}], add_generation_prompt=True, tokenize=False
    )
    return tokenizer.encode(text, add_special_tokens=False)


def encode(
    transcript: Transcript, tokenizer, env: EnvEncoder | None = None, max_information_tokens: int = 1024
) -> Encoded:
    """Renders ``transcript`` token for token as the ``mr_search`` agent loop assembles a meta-episode.

    Model turns are encoded on their own (the model writes them; generation stops after ``</search>`` or
    ``</answer>``); passages and the reflection turn come from the loop's ``EnvEncoder`` with loss mask 0.
    """
    env = env or EnvEncoder(tokenizer)
    ids = prompt_ids(tokenizer, transcript.question)
    mask = [0] * len(ids)
    prompt_length = len(ids)

    def add(piece: list[int], trained: bool) -> None:
        ids.extend(piece)
        mask.extend([int(trained)] * len(piece))

    for number, attempt in enumerate(transcript.attempts):
        if number > 0:
            add(env.user_turn(reflection_prompt(), after_eos=False), trained=False)
        for turn in attempt:
            if turn.role == "model":
                add(tokenizer.encode(turn.text, add_special_tokens=False), trained=True)
            else:
                add(env.observation(turn.text, max_information_tokens), trained=False)
    return Encoded(input_ids=ids, loss_mask=mask, prompt_length=prompt_length)

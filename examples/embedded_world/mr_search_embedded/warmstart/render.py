"""Turns a transcript into token ids and a loss mask, with the agent loop's own environment-token encoder."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mr_search.agent.tokens import EnvEncoder
from mr_search.prompts import question_prompt, reflection_prompt
from mr_search_embedded.warmstart.transcripts import ScriptedTranscript


@dataclass(frozen=True)
class Encoded:
    """One rendered transcript: ``input_ids``, ``loss_mask`` (1 on the model-written tokens it is trained on) and
    ``env_mask`` (1 on the environment's text: passages, reflection turns), of equal length; context-only model
    turns (slips) are in neither mask."""

    input_ids: list[int]
    loss_mask: list[int]
    prompt_length: int
    env_mask: list[int]


def prompt_ids(tokenizer, question: str) -> list[int]:
    """The first user turn in the chat template, ending with the assistant header (as verl's dataset does)."""
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": question_prompt(question)}], add_generation_prompt=True, tokenize=False
    )
    return tokenizer.encode(text, add_special_tokens=False)


def encode(
    transcript: ScriptedTranscript, tokenizer, env: EnvEncoder | None = None, max_information_tokens: int = 1024
) -> Encoded:
    """Renders ``transcript`` token for token as the ``mr_search`` agent loop assembles a meta-episode.

    Model turns are encoded on their own (the model writes them; generation stops after ``</search>`` or
    ``</answer>``); passages and the reflection turn come from the loop's ``EnvEncoder`` with loss mask 0.
    A model turn with ``trained`` False (a slip) has loss mask 0 and is not environment text either.
    """
    return encode_all([transcript], tokenizer, env, max_information_tokens)[0]


def encode_all(
    transcripts: Sequence[ScriptedTranscript],
    tokenizer,
    env: EnvEncoder | None = None,
    max_information_tokens: int = 1024,
) -> list[Encoded]:
    """``encode`` for many transcripts, encoding each distinct prompt, turn and passage list once."""
    env = env or EnvEncoder(tokenizer)
    memo: dict[tuple[str, str], list[int]] = {}

    def cached(kind: str, text: str) -> list[int]:
        key = (kind, text)
        if key not in memo:
            if kind == "prompt":
                memo[key] = prompt_ids(tokenizer, text)
            elif kind == "model":
                memo[key] = tokenizer.encode(text, add_special_tokens=False)
            else:
                memo[key] = env.observation(text, max_information_tokens)
        return memo[key]

    # Reflection turns by (feedback, restated question or None), encoded once each.
    reflections: dict[tuple[bool | None, str | None], list[int]] = {}
    out = []
    for transcript in transcripts:
        ids = list(cached("prompt", transcript.question))
        mask = [0] * len(ids)
        env_mask = [0] * len(ids)
        prompt_length = len(ids)
        for number, attempt in enumerate(transcript.attempts):
            if number > 0:
                feedback = transcript.correct[number - 1] if transcript.outcome_feedback else None
                question = transcript.question if transcript.reflection_question else None
                if (feedback, question) not in reflections:
                    text = reflection_prompt(feedback, question=question)
                    reflections[(feedback, question)] = env.user_turn(text, after_eos=False)
                reflection = reflections[(feedback, question)]
                ids += reflection
                mask += [0] * len(reflection)
                env_mask += [1] * len(reflection)
            for turn in attempt:
                piece = cached(turn.role, turn.text)
                ids += piece
                mask += [int(turn.role == "model" and turn.trained)] * len(piece)
                env_mask += [int(turn.role != "model")] * len(piece)
        out.append(Encoded(input_ids=ids, loss_mask=mask, prompt_length=prompt_length, env_mask=env_mask))
    return out

"""Warm start with outcome feedback (MAGE-style, off in the paper): the reflection turns say whether the previous
answer was right, as the agent loop says it with ``mr_search.episode.outcome_feedback``."""

from __future__ import annotations

import re
from dataclasses import replace

from mr_search import prompts
from mr_search.agent.tokens import EnvEncoder
from mr_search_embedded.warmstart.render import encode
from mr_search_embedded.warmstart.train import WarmStartConfig, warmstart_config
from mr_search_embedded.warmstart.transcripts import TranscriptConfig, build_transcripts


def _searches(attempt) -> list[str]:
    return re.findall(r"<search> (.*?) </search>", "".join(turn.text for turn in attempt if turn.role == "model"))


def test_told_right_it_keeps_the_answer_told_wrong_it_searches_again(index, mini_questions):
    config = TranscriptConfig(attempts=3, p_wrong=0.6, p_verify=0.5, seed=5, outcome_feedback=True)
    transcripts = build_transcripts(mini_questions, index, 200, config)
    after_right = after_wrong = 0
    for transcript in transcripts:
        assert transcript.outcome_feedback
        for k in range(1, len(transcript.attempts)):
            thought = transcript.attempts[k][0].text
            if transcript.correct[k - 1]:
                after_right += 1
                assert _searches(transcript.attempts[k]) == [], "told it was right, the next attempt keeps the answer"
                assert thought.startswith("<think> My previous answer was correct."), thought
            else:
                after_wrong += 1
                assert _searches(transcript.attempts[k]), "told it was wrong, the next attempt searches again"
                assert thought.startswith("<think> My previous answer was incorrect"), "it repeats what it was told"
    assert after_right > 100 and after_wrong > 50
    # Without feedback the same settings check about half of the right answers with a new search.
    plain = build_transcripts(mini_questions, index, 200, TranscriptConfig(attempts=3, p_verify=0.5, seed=5))
    checks = sum(bool(_searches(t.attempts[k])) for t in plain for k in range(1, 3) if t.correct[k - 1])
    assert checks > 50 and not any(t.outcome_feedback for t in plain)


def test_the_reflection_turns_say_what_the_agent_loop_says(index, mini_questions, tokenizer):
    env = EnvEncoder(tokenizer)
    config = TranscriptConfig(attempts=3, p_wrong=0.9, seed=3, outcome_feedback=True)
    drawn = build_transcripts(mini_questions, index, 20, config)
    transcript = next(t for t in drawn if t.correct == (False, True, True))
    ids = encode(transcript, tokenizer, env).input_ids
    wrong = env.user_turn(prompts.reflection_prompt(False), after_eos=False)
    right = env.user_turn(prompts.reflection_prompt(True), after_eos=False)

    def at(piece: list[int]) -> list[int]:
        return [i for i in range(len(ids) - len(piece) + 1) if ids[i : i + len(piece)] == piece]

    wrong_at, right_at = at(wrong), at(right)
    assert len(wrong_at) == 1 and len(right_at) == 1, "one reflection turn after each attempt, token for token"
    assert wrong_at[0] < right_at[0], "the first reflection says 'incorrect', the second 'correct'"
    plain = encode(
        build_transcripts(mini_questions, index, 20, TranscriptConfig(attempts=3, p_wrong=0.9, seed=3))[0],
        tokenizer,
        env,
    )
    text = tokenizer.decode(plain.input_ids)
    assert "was correct" not in text and "was incorrect" not in text, "the paper's reflection turn says neither"


def test_the_option_gets_its_own_build_in_either_world():
    assert warmstart_config() == WarmStartConfig()
    assert warmstart_config(world="default") == WarmStartConfig()
    for world in ("default", "namesake"):
        plain, told = warmstart_config(False, world), warmstart_config(True, world)
        assert told.transcripts.outcome_feedback and not plain.transcripts.outcome_feedback
        assert told == replace(plain, transcripts=replace(plain.transcripts, outcome_feedback=True))
        assert told.key() != plain.key()

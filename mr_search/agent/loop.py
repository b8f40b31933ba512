"""The ``mr_search`` agent loop: K search attempts at one question in one context, with reflection turns."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics

from mr_search import prompts
from mr_search.agent.config import EpisodeConfig
from mr_search.agent.output import MRSearchAgentLoopOutput, attempt_statuses, episode_metrics, training_rows
from mr_search.agent.parsing import STOP_STRINGS, ActionKind, cut_after_close, parse_turn, unclosed_tag
from mr_search.agent.retrieval_client import RetrievalClient, RetrieverConfig, SearchOutcome, shared_client
from mr_search.agent.segments import ContextSegment, note_turn
from mr_search.agent.state import AttemptRecord, EpisodeState, Phase
from mr_search.agent.tokens import EnvEncoder, Transcript, single_token_stops
from mr_search.agent.trace import Tracer
from mr_search.config_checks import subtree
from mr_search.contract import GENERATION_TIMEOUTS, ROW_ATTEMPTS, SEARCH_RECORD, AttemptStatus
from mr_search.reward import RewardConfig, exact_match, gold_answers, token_f1

logger = logging.getLogger(__name__)

_ENCODERS: dict[tuple[int, str], tuple[Any, EnvEncoder]] = {}
_warned_sglang = False
_TRACER: Tracer | None = None


def _tracer() -> Tracer:
    """The process's tracer (``MR_SEARCH_TRACE_DIR``), read once."""
    global _TRACER
    if _TRACER is None:
        _TRACER = Tracer.from_env()
    return _TRACER


def _finish_reason(output: Any) -> str | None:
    """Why the engine ended a turn: the CPU backend's ``extra_fields["finish_reason"]``, else verl's ``stop_reason``."""
    return (output.extra_fields or {}).get("finish_reason") or getattr(output, "stop_reason", None)


def _encoder_for(tokenizer: Any, chat_template_kwargs: dict[str, Any]) -> EnvEncoder:
    """One ``EnvEncoder`` per tokenizer and template arguments (Qwen3's ``enable_thinking`` changes the turns)."""
    key = (id(tokenizer), repr(sorted((chat_template_kwargs or {}).items())))
    cached = _ENCODERS.get(key)
    if cached is None or cached[0] is not tokenizer:
        cached = (tokenizer, EnvEncoder(tokenizer, dict(chat_template_kwargs or {})))
        _ENCODERS[key] = cached
    return cached[1]


class MRSearchAgentLoop(AgentLoopBase):
    """verl agent loop for MR-Search meta-episodes; tests and evaluation may pass its collaborators."""

    def __init__(
        self,
        *args: Any,
        tools: Any = None,
        retrieval_client: RetrievalClient | None = None,
        episode_config: EpisodeConfig | None = None,
        reward_config: RewardConfig | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.episode = episode_config or EpisodeConfig.from_config(subtree(self.config, "episode"))
        self.reward = reward_config or RewardConfig.from_config(subtree(self.config, "reward"))
        self.retriever_config = RetrieverConfig.from_config(subtree(self.config, "retriever"))
        self._retrieval_client = retrieval_client
        self.env = _encoder_for(self.tokenizer, self.apply_chat_template_kwargs)
        self.response_length = int(self.rollout_config.response_length)
        self.context_limit = self._context_limit()
        self.stop_params = self._stop_params()
        self.reflection_template = self.episode.reflection_template or prompts.REFLECTION_PROMPT
        self._handlers: dict[Phase, Callable[[EpisodeState, dict[str, Any]], Awaitable[Phase]]] = {
            Phase.GENERATING: self._generate,
            Phase.ACTING: self._act,
            Phase.ATTEMPT_END: self._end_attempt,
            Phase.REFLECTING: self._reflect,
        }

    def _context_limit(self) -> int:
        if self.episode.max_context_tokens is not None:
            return self.episode.max_context_tokens
        max_model_len = self.rollout_config.get("max_model_len", None)
        if max_model_len:
            return int(max_model_len)
        return int(self.rollout_config.prompt_length) + self.response_length

    def _stop_params(self) -> dict[str, Any]:
        global _warned_sglang
        style = self.episode.stop_params
        if style == "auto":
            style = "sglang" if self.rollout_config.get("name", None) == "sglang" else "vllm"
        if style == "none":
            return {}
        ids = list(single_token_stops(self.tokenizer, STOP_STRINGS)) if self.episode.stop_token_ids else []
        keep = {"no_stop_trim": True} if style == "sglang" else {"include_stop_str_in_output": True}
        if len(ids) == len(STOP_STRINGS):
            # Every tag is one token: the engine's core stops at it, with no detokenized text to search each step.
            return {"stop_token_ids": ids, **keep}
        if style == "sglang" and self.rollout_config.get("skip_tokenizer_init", False):
            if not _warned_sglang:
                logger.warning(
                    "SGLang runs with skip_tokenizer_init=True and cannot stop at a tag that is not a single token "
                    "in this tokenizer (</search>, </answer>): the agent loop cuts each turn itself, but generation "
                    "past the tag is wasted. Set actor_rollout_ref.rollout.skip_tokenizer_init=False to stop at the "
                    "tags."
                )
                _warned_sglang = True
            return {"stop_token_ids": ids, **keep} if ids else {}
        return {"stop": list(STOP_STRINGS), **({"stop_token_ids": ids} if ids else {}), **keep}

    @property
    def retrieval_client(self) -> RetrievalClient:
        if self._retrieval_client is None:
            self._retrieval_client = shared_client(self.retriever_config)
        return self._retrieval_client

    async def run(
        self, sampling_params: dict[str, Any], **kwargs: Any
    ) -> MRSearchAgentLoopOutput | list[MRSearchAgentLoopOutput]:
        """verl's entry point: the meta-episode's training rows, one per context the engine saw."""
        state, output = await self._play(sampling_params, **kwargs)
        return training_rows(output, state.segments)

    async def play(self, sampling_params: dict[str, Any], **kwargs: Any) -> MRSearchAgentLoopOutput:
        """The whole meta-episode as one sequence, whatever contexts the turns saw (what evaluation reads)."""
        _, output = await self._play(sampling_params, **kwargs)
        return output

    async def _play(
        self, sampling_params: dict[str, Any], **kwargs: Any
    ) -> tuple[EpisodeState, MRSearchAgentLoopOutput]:
        if "raw_prompt" not in kwargs:
            raise ValueError("the mr_search agent loop needs each dataset row's 'raw_prompt' (chat messages)")
        reward_model = kwargs.get("reward_model") or {}
        if "ground_truth" not in reward_model:
            raise ValueError(
                "the mr_search agent loop needs reward_model.ground_truth.target (the gold answers) in each row"
            )
        golds = gold_answers(reward_model["ground_truth"])
        prompt_ids = await self.ct_build_initial_tokens(list(kwargs["raw_prompt"]))
        question = None
        if self.episode.reflection_restates_question:
            users = [m for m in kwargs["raw_prompt"] if m.get("role") == "user"]
            question = prompts.question_of_prompt(str(users[0]["content"]) if users else "")
        state = EpisodeState(
            transcript=Transcript(prompt_ids),
            golds=golds,
            request_id=uuid4().hex,
            k=self._attempts_of(kwargs),
            question=question,
            trace=_tracer().start(),
        )
        state.attempts.append(AttemptRecord(index=0, start=0))
        state.segments.append(ContextSegment(context_start=0, first=0))
        timing = {"generate_sequences": 0.0, "tool_calls": 0.0}
        phase = Phase.GENERATING
        while phase is not Phase.DONE:
            started = time.perf_counter()
            next_phase = await self._handlers[phase](state, sampling_params)
            bucket = "generate_sequences" if phase is Phase.GENERATING else "tool_calls"
            timing[bucket] += time.perf_counter() - started
            phase = next_phase
        return state, self._output(state, kwargs, timing)

    def _attempts_of(self, row: dict[str, Any]) -> int:
        """K for this row: its own (``contract.ROW_ATTEMPTS``, e.g. a validation row at another K) or the config's."""
        given = row.get(ROW_ATTEMPTS)
        if given is None:
            return self.episode.attempts
        if isinstance(given, bool) or int(given) != given or int(given) < 1:
            raise ValueError(f"row field {ROW_ATTEMPTS}={given!r} must be an integer >= 1 (this row's K)")
        return int(given)

    async def _generate(self, state: EpisodeState, sampling_params: dict[str, Any]) -> Phase:
        """One model turn: generate, cut after the first closing tag, append with mask 1."""
        transcript = state.transcript
        max_new = min(self.episode.max_new_tokens_per_turn, self.response_length - transcript.response_len)
        context, context_start, max_new = self._generation_context(state, max_new)
        if max_new < 1:
            return self._truncate(state)
        params = {**sampling_params, **self.stop_params, "max_tokens": max_new}
        try:
            output = await asyncio.wait_for(
                self.server_manager.generate(request_id=state.request_id, prompt_ids=context, sampling_params=params),
                timeout=self.episode.generate_timeout_s,
            )
        except TimeoutError:
            logger.error(
                "generation hung: the rollout engine returned nothing for %.0f s (request %s, %d context tokens; "
                "mr_search.episode.generate_timeout_s); the meta-episode ends here and the run stops after this step",
                self.episode.generate_timeout_s,
                state.request_id,
                len(context),
            )
            state.generation_timeouts += 1
            return self._truncate(state)
        self._track_global_steps(state, output.extra_fields or {})
        sampled = list(output.token_ids)
        ids = sampled[:max_new]
        logprobs = list(output.log_probs)[: len(ids)] if output.log_probs is not None else None
        cut, text = cut_after_close(ids, self.env.decode) if ids else (None, "")
        if cut is not None:
            ids = ids[:cut]
            logprobs = logprobs[:cut] if logprobs is not None else None
        closing: list[int] = []
        if cut is None and ids and self._stopped_at_tag(output, ids, max_new):
            # The backend stopped at the tag and trimmed it: close the tag as environment text.
            closer = unclosed_tag(text)
            if closer is not None:
                closing = self.env.encode_text(closer)
                text += closer
        if state.trace is not None:
            state.trace.turn(sampled, len(ids), closing, _finish_reason(output), max_new)
        attempt = state.current
        if ids:
            note_turn(state.segments, context_start, transcript.response_len)
        transcript.add_model(ids, logprobs, attempt.index)
        if closing:
            transcript.add_env(closing[: self.response_length - transcript.response_len], attempt.index)
        state.last_turn_ended_with_eos = bool(ids) and ids[-1] == self.tokenizer.eos_token_id
        attempt.turns += 1
        state.model_turns += 1
        state.action = parse_turn(text)
        return Phase.ACTING

    async def _act(self, state: EpisodeState, sampling_params: dict[str, Any]) -> Phase:
        """Answer ends the attempt; a search gets passages, else a note (not on the last turn: same search budget)."""
        attempt, action = state.current, state.action
        assert action is not None
        if action.kind is ActionKind.ANSWER:
            attempt.answer = action.content
            return Phase.ATTEMPT_END
        if action.kind is ActionKind.SEARCH:
            attempt.searches += 1
            attempt.queries.append(action.content)
        else:
            attempt.invalid_turns += 1
        if attempt.turns >= self.episode.max_turns_per_attempt:
            return Phase.ATTEMPT_END
        if action.kind is ActionKind.SEARCH:
            state.searches_run += 1
            try:
                outcome = await self.retrieval_client.search(action.content, self.episode.topk)
            except Exception as error:  # a custom client that raises must not end the training step either
                logger.warning("search client raised %s: %s", type(error).__name__, error)
                outcome = SearchOutcome(documents=[], error=str(error) or type(error).__name__)
            if outcome.failed:
                attempt.search_failures += 1
                state.last_search_error = outcome.error
                text = prompts.SEARCH_FAILED_MESSAGE
            else:
                text = prompts.format_passages(outcome.documents)
            ids = self.env.observation(text, self.episode.max_information_tokens)
        else:
            ids = self.env.note(prompts.INVALID_ACTION_MESSAGE)
        if not self._append_env(state, ids):
            return self._truncate(state)
        return Phase.GENERATING

    async def _end_attempt(self, state: EpisodeState, sampling_params: dict[str, Any]) -> Phase:
        attempt = state.current
        self._score(state, attempt)
        if attempt.index + 1 >= state.k:
            return Phase.DONE
        if self.episode.early_stop_when_correct and attempt.em >= 1.0:
            state.stopped_early = True
            return Phase.DONE
        return Phase.REFLECTING

    async def _reflect(self, state: EpisodeState, sampling_params: dict[str, Any]) -> Phase:
        """The between-attempts user turn; it opens the next attempt (and carries its index)."""
        previous = state.current
        feedback = previous.em >= 1.0 if self.episode.outcome_feedback else None
        text = prompts.reflection_prompt(feedback, self.reflection_template, state.question)
        ids = self.env.user_turn(text, after_eos=state.last_turn_ended_with_eos)
        transcript = state.transcript
        if len(ids) >= self.response_length - transcript.response_len:
            state.truncated = True  # no room for the next attempt: it stays absent
            return Phase.DONE
        state.attempts.append(AttemptRecord(index=previous.index + 1, start=transcript.response_len))
        transcript.add_env(ids, previous.index + 1)
        state.env_turns += 1
        return Phase.GENERATING

    def _generation_context(self, state: EpisodeState, max_new: int) -> tuple[list[int], int, int]:
        """(context ids, response position it continues from, max new tokens); the question is never cut."""
        transcript = state.transcript
        start = 0
        if self.episode.context == "previous_attempt" and len(state.attempts) >= 2:
            start = state.attempts[-2].start
        prompt_len = transcript.prompt_len
        max_new = min(max_new, self.context_limit - prompt_len)
        room = self.context_limit - prompt_len - max_new
        kept = transcript.response_len - start
        if kept > room:
            start = transcript.response_len - room
        if start == 0:
            return transcript.context, 0, max_new  # no copy: the loop's cost stays linear in its tokens
        return transcript.context[:prompt_len] + transcript.context[prompt_len + start :], start, max_new

    def _append_env(self, state: EpisodeState, ids: list[int]) -> bool:
        """Appends environment tokens; False (after appending what fits) when no room is left to generate."""
        transcript = state.transcript
        room = self.response_length - transcript.response_len
        transcript.add_env(ids[:room], state.current.index)
        state.env_turns += 1
        return len(ids) < room

    def _truncate(self, state: EpisodeState) -> Phase:
        state.truncated = True
        state.current.truncated = True
        self._score(state, state.current)
        return Phase.DONE

    def _stopped_at_tag(self, output: Any, ids: list[int], max_new: int) -> bool:
        """Whether the engine stopped on a stop string (trimming the tag); vLLM's ``completed`` means stop or length."""
        if ids[-1] in self.env.end_ids:
            return False  # the model ended its turn itself
        reason = _finish_reason(output)
        if reason in ("stop", "length", "abort", "aborted"):
            return reason == "stop"
        return len(ids) < max_new

    def _score(self, state: EpisodeState, attempt: AttemptRecord) -> None:
        attempt.em = exact_match(attempt.answer, state.golds)
        attempt.f1 = token_f1(attempt.answer, state.golds)
        attempt.reward = self.reward.score(attempt.answer, state.golds)

    @staticmethod
    def _track_global_steps(state: EpisodeState, extra: dict[str, Any]) -> None:
        """The weight versions this meta-episode was generated with (verl's trainer needs both ends as ints)."""
        low = extra.get("min_global_steps", extra.get("global_steps"))
        high = extra.get("max_global_steps", extra.get("global_steps"))
        if low is not None:
            low = int(low)
            state.min_global_steps = low if state.min_global_steps is None else min(state.min_global_steps, low)
        if high is not None:
            high = int(high)
            state.max_global_steps = high if state.max_global_steps is None else max(state.max_global_steps, high)

    def _output(self, state: EpisodeState, kwargs: dict[str, Any], timing: dict[str, float]) -> MRSearchAgentLoopOutput:
        transcript = state.transcript
        length = min(transcript.response_len, self.response_length)
        k = state.k
        rewards = [0.0] * k
        for attempt in state.attempts:
            rewards[attempt.index] = attempt.reward
        status = attempt_statuses(state, k, length)
        complete = [i for i in range(k) if status[i] == AttemptStatus.COMPLETE]
        final_reward = rewards[complete[-1]] if complete else 0.0
        fallback = int(kwargs.get("global_steps", 0) or 0)
        low = state.min_global_steps if state.min_global_steps is not None else fallback
        high = state.max_global_steps if state.max_global_steps is not None else low
        metrics = episode_metrics(state, k)
        response_ids, mask, attempt_ids = (
            transcript.response_ids[:length],
            transcript.mask[:length],
            transcript.attempt_ids[:length],
        )
        _tracer().finish(state.trace, state.request_id, response_ids, mask, attempt_ids)
        return MRSearchAgentLoopOutput(
            prompt_ids=transcript.prompt_ids,
            response_ids=response_ids,
            response_mask=mask,
            response_logprobs=transcript.logprobs[:length] if transcript.has_logprobs else None,
            attempt_ids=attempt_ids,
            attempt_rewards=rewards,
            attempt_status=[int(code) for code in status],
            episode_id=int(state.request_id[:15], 16),
            # verl's reward slot: the outcome; the advantage reads the per-attempt columns.
            reward_score=final_reward,
            num_turns=1 + state.model_turns + state.env_turns,
            metrics=AgentLoopMetrics(**timing),
            extra_fields={
                "min_global_steps": int(low),
                "max_global_steps": int(high),
                "reward_extra_info": metrics,
                "turn_scores": [],
                "tool_rewards": [],
                "mr_search_attempts": [
                    {"index": a.index, "answer": a.answer, "queries": list(a.queries), "reward": a.reward}
                    for a in state.attempts
                    if a.start < length
                ],
                GENERATION_TIMEOUTS: state.generation_timeouts,
                SEARCH_RECORD: {
                    "run": state.searches_run,
                    "failed": sum(a.search_failures for a in state.attempts),
                    "last_error": state.last_search_error,
                },
            },
        )

"""Runs the project's own agent loop greedily over test rows, outside Ray, and turns each episode into a record."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, Final

from mr_search.eval.question_cap import QuestionCap, check_cap, limit_of
from mr_search.eval.records import make_attempt, make_record

logger = logging.getLogger(__name__)

# Greedy decoding (docs/method.md#what-the-paper-reports: evaluation is greedy, n = 1).
GREEDY: Final = {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "logprobs": False}


@dataclass(frozen=True)
class EvalConfig:
    """What one evaluation runs; defaults are the paper's (K_eval = 3, top-3, 3 turns)."""

    attempts: int = 3
    max_turns_per_attempt: int = 3
    topk: int = 3
    max_new_tokens_per_turn: int = 1024
    max_information_tokens: int = 1024
    prompt_length: int = 1024
    response_length: int = 8192
    outcome_feedback: bool = False
    reflection_restates_question: bool = False
    max_questions: int | QuestionCap | None = None
    concurrency: int = 32
    method: str = "mr_search"

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("method", "max_questions", "outcome_feedback", "reflection_restates_question"):
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"EvalConfig.{f.name}={value!r}: must be an integer >= 1")
        check_cap(self.max_questions, "EvalConfig.max_questions")
        for name in ("outcome_feedback", "reflection_restates_question"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"EvalConfig.{name}={getattr(self, name)!r}: must be True or False")
        if not self.method.strip():
            raise ValueError("EvalConfig.method is empty: name the model's row in the results table")

    def episode(self) -> dict[str, Any]:
        """The ``mr_search.episode`` subtree for the agent loop."""
        keys = (
            "attempts",
            "max_turns_per_attempt",
            "topk",
            "max_new_tokens_per_turn",
            "max_information_tokens",
            "outcome_feedback",
            "reflection_restates_question",
        )
        return {k: v for k, v in asdict(self).items() if k in keys}


def plain(value: Any) -> Any:
    """Parquet gives numpy arrays and nested dicts of them; the loop and JSON want plain Python."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return plain(value.tolist())
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def select_rows(rows: Sequence[Mapping[str, Any]], max_questions: int | QuestionCap | None) -> list[dict[str, Any]]:
    """The first ``max_questions`` rows of each data source (a ``QuestionCap``: its count for it), in file order."""
    taken: dict[str, int] = {}
    out = []
    for row in rows:
        source = str(row["data_source"])
        limit = limit_of(max_questions, source)
        if limit is not None and taken.get(source, 0) >= limit:
            continue
        taken[source] = taken.get(source, 0) + 1
        out.append(plain(row))
    return out


_ROLE_HEADER: Final = re.compile(r"<\|im_start\|>(?:system|user|assistant|tool)\n?")


def _display(tokenizer: Any, ids: Sequence[int]) -> str:
    """Token ids as readable text: chat-template markers (``<|im_start|>user``, ``<|im_end|>``) removed."""
    text = _ROLE_HEADER.sub("", tokenizer.decode(list(ids), skip_special_tokens=False))
    for special in tokenizer.all_special_tokens:
        text = text.replace(special, "")
    return text


def _segments(output: Any, tokenizer: Any) -> dict[int, list[dict[str, str]]]:
    """Cuts the response into turns: runs of model tokens (mask 1) and environment tokens (mask 0) per attempt."""
    ids, mask, attempt_ids = list(output.response_ids), list(output.response_mask), list(output.attempt_ids)
    turns: dict[int, list[dict[str, str]]] = {}
    start = 0
    for end in range(1, len(ids) + 1):
        if end < len(ids) and (mask[end], attempt_ids[end]) == (mask[start], attempt_ids[start]):
            continue
        text = _display(tokenizer, ids[start:end])
        attempt = turns.setdefault(int(attempt_ids[start]), [])
        if mask[start]:
            attempt.append({"role": "assistant", "content": text})
        elif text.strip() in ("</search>", "</answer>") and attempt and attempt[-1]["role"] == "assistant":
            attempt[-1]["content"] += text  # a closing tag the backend trimmed and the loop restored
        else:
            attempt.append({"role": "tool" if "<information>" in text else "user", "content": text.strip("\n")})
        start = end
    return turns


def record_from_output(output: Any, tokenizer: Any, row: Mapping[str, Any], method: str) -> dict[str, Any]:
    """A trajectory record from the agent loop's output (answers and scores as the loop decided them)."""
    extra = output.extra_fields
    metrics = extra.get("reward_extra_info", {})
    turns = _segments(output, tokenizer)
    golds = list(row["reward_model"]["ground_truth"]["target"])
    attempts = []
    for entry in extra.get("mr_search_attempts", []):
        k = int(entry["index"])
        scored = {
            "answer": entry["answer"],
            "reward": entry["reward"],
            "em": metrics.get(f"em_at_{k + 1}", 0.0),
            "f1": metrics.get(f"f1_at_{k + 1}", 0.0),
        }
        attempts.append(make_attempt(k, turns.get(k, []), golds, scored=scored))
    info = row.get("extra_info") or {}
    return make_record(
        method=method,
        uid=str(info.get("id", info.get("index", ""))),
        data_source=str(row["data_source"]),
        question=str(info.get("question", "")),
        golden_answers=golds,
        attempts=attempts,
    )


class InlineExecutor(concurrent.futures.ThreadPoolExecutor):
    """Runs "executor" work on the calling thread: a fast tokenizer used by two threads fails."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as error:
            future.set_exception(error)
        return future


def loop_inputs(row: Mapping[str, Any]) -> dict[str, Any]:
    """What verl's dataset hands the agent loop for one row of the project's parquet format."""
    return {
        "raw_prompt": list(row["prompt"]),
        "reward_model": row["reward_model"],
        "data_source": row["data_source"],
        "extra_info": row.get("extra_info") or {},
    }


async def run_episodes(
    rows: Sequence[Mapping[str, Any]], make_loop: Any, tokenizer: Any, config: EvalConfig, progress: bool = True
) -> list[dict[str, Any]]:
    """Runs one greedy meta-episode per row (``make_loop()`` builds a fresh agent loop, as verl does per trajectory)."""
    from tqdm.auto import tqdm

    asyncio.get_running_loop().set_default_executor(InlineExecutor())
    semaphore = asyncio.Semaphore(config.concurrency)
    bar = tqdm(total=len(rows), desc=f"eval {config.method}", unit=" q", disable=not progress)

    async def one(row: Mapping[str, Any]) -> dict[str, Any]:
        async with semaphore:
            output = await make_loop().play(dict(GREEDY), **loop_inputs(row))
        bar.update(1)
        return record_from_output(output, tokenizer, row, config.method)

    try:
        return list(await asyncio.gather(*(one(row) for row in rows)))
    finally:
        bar.close()


def agent_loop_factory(tokenizer: Any, server_manager: Any, retrieval_client: Any, config: EvalConfig) -> Any:
    """Returns ``make_loop()`` building ``MRSearchAgentLoop`` outside Ray with the given collaborators."""
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    from mr_search.agent.config import EpisodeConfig
    from mr_search.agent.loop import MRSearchAgentLoop

    trainer_config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {
                    "prompt_length": config.prompt_length,
                    "response_length": config.response_length,
                    "name": "mr_hf",
                    "max_model_len": None,
                }
            },
            "data": {"apply_chat_template_kwargs": {}},
            "mr_search": {"episode": config.episode()},
        }
    )
    episode = EpisodeConfig.from_config(config.episode())

    def make_loop() -> Any:
        return MRSearchAgentLoop(
            trainer_config=DictConfigWrap(trainer_config),
            server_manager=server_manager,
            tokenizer=tokenizer,
            processor=None,
            dataset_cls=None,
            data_config=DictConfigWrap(trainer_config.data),
            retrieval_client=retrieval_client,
            episode_config=episode,
        )

    return make_loop

"""Does a policy give RL something to learn? Greedy and sampled meta-episodes on a split's questions, measured.

    python -m mr_search_embedded.warmstart.probe --model DIR [--questions 50] [--samples 5] [--url http://127.0.0.1:PORT]
        [--outcome-feedback] [--split dev|train]
    MR_SEARCH_WORLD=namesake python -m mr_search_embedded.warmstart.probe --policy small   # the namesake warm start

Runs the project's own agent loop (``mr_search.eval.runner``) in this process over the first N questions per data
source of a split of the embedded world (``--split``, default ``dev``: what choices are made on). The ``test`` split
is refused unless ``--read-test-split-and-mark-it-probed`` is given: every probe read is written to the ledger next
to the parquet (``mr_search_embedded.reads``), and a comparison whose test questions a probe read reports them as
``probed``. Prints (as JSON) ``split`` and ``parquet`` (what it read), then:

- ``greedy_em_at_k``: greedy EM (%) at each attempt;
- ``query_names_entity``: share (%) of first-attempt first searches that contain the asked-about entity's name
  (the first gold passage's title, which every embedded question names verbatim); ``query_is_entity``: that are
  exactly the name (case aside): the policy's name-copy accuracy;
- ``gold_passage_found``: share (%) of first attempts whose searches return that gold passage (the one on the
  asked-about entity);
- ``distinct_answers``: distinct greedy first-attempt answers (a collapsed policy gives one);
- ``sampled_em_at_k`` and ``mixed_groups``: with ``--samples n`` meta-episodes per question at temperature 1
  (top-p 1), EM per attempt and the share (%) of questions whose n rewards at some attempt are not all equal:
  the groups whose leave-one-out advantages are non-zero;
- ``greedy_searches_at_k`` / ``sampled_searches_at_k``: share (%) of meta-episodes whose attempt k issues a search
  (training logs the same as ``mr_search/searches_at_k``), and ``greedy_search_after_1`` /
  ``sampled_search_after_1``: share (%) of meta-episodes that search in some attempt k >= 2, of all of them
  (``all``) and of those whose first attempt was wrong (``after_wrong``, None when none was): a policy that never
  searches again gives reflection nothing but its old passages to work with;
- ``greedy_retries`` / ``sampled_retries`` (and ``..._by_source``): after a wrong first answer, how often a later
  attempt searches with a query attempt 1 did not use and how often the last attempt is right (fixed); after a right
  one, how often the last attempt is wrong (broken) (``retry_outcomes``); ``greedy_em_at_k_by_source``;
- ``greedy_second_hop_searched`` / ``sampled_...`` by data source: of the meta-episodes on questions with a second
  gold passage, how many search its title (case aside) in some attempt (the bridge entity of a two-hop question,
  the reformulation "<profession> <name>" of a namesake one);
- ``query_is_entity_by_source`` and ``query_is_entity_by_name_tokens``: the name-copy accuracy (greedy first
  queries exactly the name) per data source, and by how many tokens of the policy's tokenizer the name is after a
  space (``{"questions": n, "exact": m}``): does copying fail on names of many pieces?
- ``greedy_namesake_thoughts`` / ``sampled_...`` by data source (namesake world; questions that say "the <profession>
  <name>"): of the attempts whose searches brought the name's article back (``after_article``; ``first_attempts``
  of them attempt 1), the thought of the model turn right after it says ``better_known`` ("better known as") or
  ``born_in`` ("was born in"), names the question's own profession (``profession_copied``: "The <profession>" as the
  question has it), the name (``name_copied``), the namesake question's reformulation "<profession> <name>"
  (``alias_named``), and the turn searches it (``alias_searched``); ``professions``: the profession words those
  thoughts wrote, counted;
- ``greedy_name_word_copies`` / ``sampled_...`` by data source: each word of the asked-about name, ``trained`` if it
  occurs in some training question of the world, else ``untrained`` (``{"words": n, "copied": m}``), copied when
  the first attempt's first query has it at the name's own place (the query's i-th word is the name's i-th word, case
  aside): can the policy write a name word it practised, one it did not?

Without ``--url`` the embedded dense index is searched in-process (the same index ``retrieval_launch.sh``
serves), so no service is needed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from mr_search.eval.retries import retry_outcomes
from mr_search_embedded.reads import record_read
from mr_search_embedded.splits import SPLITS, split_parquet

logger = logging.getLogger(__name__)
# Named for what it does: the test split is then no longer unseen, and the comparisons say so.
TEST_FLAG = "--read-test-split-and-mark-it-probed"


class InProcessRetrieval:
    """The embedded world's dense index behind the agent loop's ``async search(query, topk)``."""

    def __init__(self) -> None:
        from mr_search_embedded.prepare import corpus as embedded_corpus
        from mr_search_retrieval.config import EncoderConfig
        from mr_search_retrieval.encoders import HFEncoder
        from mr_search_retrieval.index_cache import ensure_index
        from mr_search_retrieval.indexes.metadata import IndexMetadata
        from mr_search_retrieval.retriever import DenseSearcher, load_vector_index

        corpus = embedded_corpus()
        index_dir = ensure_index(corpus)
        self._searcher = DenseSearcher(
            HFEncoder(EncoderConfig()), load_vector_index(IndexMetadata.read(index_dir), index_dir, "cpu")
        )
        with open(corpus, encoding="utf-8") as handle:
            self._docs = [json.loads(line) for line in handle if line.strip()]

    async def search(self, query: str, topk: int) -> Any:
        from mr_search.agent.retrieval_client import SearchOutcome

        _, ids = self._searcher.search([query], topk)
        return SearchOutcome(documents=[self._docs[int(i)] for i in ids[0] if int(i) >= 0])


def _first_query(record: Mapping[str, Any]) -> str | None:
    from mr_search.eval.records import searches

    found = searches(record["attempts"][0]) if record["attempts"] else []
    return str(found[0]["query"]) if found else None


def _is_entity(record: Mapping[str, Any], entities: Mapping[str, str]) -> bool:
    query = _first_query(record)
    return bool(query) and entities.get(str(record["uid"]), "\0").lower() == str(query).strip().lower()


def exact_copies(
    greedy: Sequence[Mapping[str, Any]], entities: Mapping[str, str], key: Mapping[str, Any]
) -> dict[str, dict[str, int]]:
    """``{str(key[uid]): {"questions": n, "exact": m}}``: of the ``n`` greedy meta-episodes whose question has that
    key, ``m`` first searched exactly the entity's name (case aside); keys in sorted order."""
    out: dict[str, dict[str, int]] = {}
    for record in greedy:
        uid = str(record["uid"])
        if uid not in key:
            continue
        counts = out.setdefault(str(key[uid]), {"questions": 0, "exact": 0})
        counts["questions"] += 1
        counts["exact"] += _is_entity(record, entities)
    return {k: out[k] for k in sorted(out, key=lambda k: (len(k), k))}


def name_word_copies(
    records: Sequence[Mapping[str, Any]], entities: Mapping[str, str], trained_words: set[str]
) -> dict[str, dict[str, dict[str, int]]]:
    """``{data source: {"trained" | "untrained": {"words": n, "copied": m}}}``: of the ``n`` words of the asked-about
    names (``entities``: uid -> name) that occur (``trained``) or not in ``trained_words`` (lower case), ``m`` are at
    the name's own place in the first attempt's first query (its i-th word is the name's i-th, case aside)."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for record in records:
        name = entities.get(str(record["uid"]))
        if not name:
            continue
        query = (_first_query(record) or "").lower().split()
        per_source = out.setdefault(str(record["data_source"]), {})
        for i, word in enumerate(name.lower().split()):
            counts = per_source.setdefault(
                "trained" if word in trained_words else "untrained", {"words": 0, "copied": 0}
            )
            counts["words"] += 1
            counts["copied"] += len(query) > i and query[i] == word
    return {source: dict(sorted(out[source].items())) for source in sorted(out)}


def summarize(
    greedy: Sequence[Mapping[str, Any]],
    sampled: Sequence[Mapping[str, Any]],
    entities: Mapping[str, str],
    attempts: int,
    second_hops: Mapping[str, str] | None = None,
    name_tokens: Mapping[str, int] | None = None,
    trained_words: set[str] | None = None,
) -> dict[str, Any]:
    """The probe's figures from trajectory records (``entities``: question uid -> asked-about entity name;
    ``second_hops``: question uid -> its second gold passage's title, for questions that have one;
    ``name_tokens``: question uid -> tokens of the entity's name after a space in the policy's tokenizer;
    ``trained_words``: the words, lower case, of the world's training questions)."""

    def em_at(records: Sequence[Mapping[str, Any]]) -> list[float]:
        out = []
        for k in range(attempts):
            scores = [r["attempts"][k]["em"] if len(r["attempts"]) > k else 0.0 for r in records]
            out.append(round(100.0 * sum(scores) / max(1, len(scores)), 1))
        return out

    from mr_search.eval.records import searches

    named = found = exact = 0
    for record in greedy:
        query = _first_query(record)
        entity = entities.get(str(record["uid"]), "\0")
        named += bool(query) and entity.lower() in str(query).lower()
        exact += _is_entity(record, entities)
        first = searches(record["attempts"][0]) if record["attempts"] else []
        titles = (f'(Title: "{entity}")', f"(Title: {entity})")  # the corpus quotes its titles; others may not
        found += any(title in s["information"] for s in first for title in titles)
    first_answers = {str(r["attempts"][0]["answer"]) for r in greedy if r["attempts"]}
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for record in sampled:
        groups.setdefault(str(record["uid"]), []).append(record)
    mixed = 0
    for members in groups.values():
        for k in range(attempts):
            rewards = {m["attempts"][k]["reward"] if len(m["attempts"]) > k else 0.0 for m in members}
            if len(rewards) > 1:
                mixed += 1
                break
    em_by_source = {
        source: em_at([r for r in greedy if r["data_source"] == source])
        for source in sorted({str(r["data_source"]) for r in greedy})
    }
    return {
        **_search_counts("greedy", greedy, attempts),
        **(_search_counts("sampled", sampled, attempts) if sampled else {}),
        "questions": len(greedy),
        "greedy_em_at_k": em_at(greedy),
        "greedy_em_at_1_by_source": {source: em[0] for source, em in em_by_source.items()},
        "greedy_em_at_k_by_source": em_by_source,
        "query_names_entity": round(100.0 * named / max(1, len(greedy)), 1),
        "query_is_entity": round(100.0 * exact / max(1, len(greedy)), 1),
        "query_is_entity_by_source": exact_copies(greedy, entities, {str(r["uid"]): r["data_source"] for r in greedy}),
        "query_is_entity_by_name_tokens": exact_copies(greedy, entities, name_tokens or {}),
        "gold_passage_found": round(100.0 * found / max(1, len(greedy)), 1),
        "distinct_answers": len(first_answers),
        "sampled_em_at_k": em_at(sampled) if sampled else None,
        "mixed_groups": round(100.0 * mixed / max(1, len(groups)), 1) if groups else None,
        "greedy_second_hop_searched": second_hop_searched(greedy, second_hops or {}),
        "sampled_second_hop_searched": second_hop_searched(sampled, second_hops or {}) if sampled else None,
        "greedy_namesake_thoughts": namesake_thoughts(greedy, entities, second_hops or {}),
        "sampled_namesake_thoughts": namesake_thoughts(sampled, entities, second_hops or {}) if sampled else None,
        "greedy_name_word_copies": name_word_copies(greedy, entities, trained_words or set()),
        "sampled_name_word_copies": name_word_copies(sampled, entities, trained_words or set()) if sampled else None,
    }


def namesake_thoughts(
    records: Sequence[Mapping[str, Any]], entities: Mapping[str, str], second_hops: Mapping[str, str]
) -> dict[str, dict[str, Any]]:
    """Per data source, what the thought right after the name's article says (see the module docstring), over the
    attempts of the meta-episodes whose question says "the <profession> <name>" (the name: ``entities[uid]``; the
    alias: ``second_hops[uid]``, for namesake questions)."""
    import re

    from mr_search_embedded.warmstart.decision import question_profession

    out: dict[str, dict[str, Any]] = {}
    for record in records:
        name = entities.get(str(record["uid"]))
        if not name:
            continue
        try:
            profession = question_profession(str(record.get("question", "")), name)
        except ValueError:
            continue
        alias = second_hops.get(str(record["uid"]))
        counts = out.setdefault(
            str(record["data_source"]),
            {
                key: 0
                for key in (
                    "after_article",
                    "first_attempts",
                    "better_known",
                    "born_in",
                    "profession_copied",
                    "name_copied",
                    "alias_named",
                    "alias_searched",
                )
            }
            | {"professions": {}},
        )
        titles = (f'(Title: "{name}")', f"(Title: {name})")
        for attempt in record["attempts"]:
            turns = attempt["turns"]
            seen = next(
                (i for i, t in enumerate(turns) if t["role"] == "tool" and any(x in t["content"] for x in titles)), None
            )
            following = (
                next((t for t in turns[seen + 1 :] if t["role"] == "assistant"), None) if seen is not None else None
            )
            if following is None:
                continue
            text = str(following["content"])
            found = re.search(r"<think>(.*?)</think>", text, flags=re.DOTALL)
            thought = found.group(1) if found else text
            counts["after_article"] += 1
            counts["first_attempts"] += attempt["index"] == 0
            counts["better_known"] += "better known as" in thought
            counts["born_in"] += "was born in" in thought
            written = re.search(r"\bThe (\w+) ", thought)
            if written:
                word = written.group(1).lower()
                counts["professions"][word] = counts["professions"].get(word, 0) + 1
                counts["profession_copied"] += word == profession
            counts["name_copied"] += name.lower() in thought.lower()
            if alias:
                counts["alias_named"] += alias.lower() in thought.lower()
                queries = [q.strip().lower() for q in re.findall(r"<search>(.*?)</search>", text, flags=re.DOTALL)]
                counts["alias_searched"] += alias.strip().lower() in queries
    for counts in out.values():
        counts["professions"] = dict(sorted(counts["professions"].items(), key=lambda item: (-item[1], item[0])))
    return {source: out[source] for source in sorted(out)}


def second_hop_searched(records: Sequence[Mapping[str, Any]], second_hops: Mapping[str, str]) -> dict[str, Any]:
    """Per data source, of the meta-episodes whose question has a second gold passage (``second_hops``: uid ->
    its title), ``{"episodes": n, "searched": m, "wrong_first": w, "searched_after_wrong": r}``: m searched that
    title (case aside) in some attempt; of the w whose first answer was wrong, r searched it in a later attempt
    (the retry the namesake world rewards)."""
    from mr_search.eval.records import searches

    def queries(attempts: Sequence[Mapping[str, Any]]) -> set[str]:
        return {str(s["query"]).strip().lower() for a in attempts for s in searches(a)}

    out: dict[str, dict[str, int]] = {}
    for record in records:
        title = second_hops.get(str(record["uid"]))
        if title is None:
            continue
        counts = out.setdefault(
            str(record["data_source"]), {"episodes": 0, "searched": 0, "wrong_first": 0, "searched_after_wrong": 0}
        )
        counts["episodes"] += 1
        counts["searched"] += title.strip().lower() in queries(record["attempts"])
        if record["attempts"] and not record["attempts"][0]["em"]:
            counts["wrong_first"] += 1
            counts["searched_after_wrong"] += title.strip().lower() in queries(record["attempts"][1:])
    return {source: out[source] for source in sorted(out)}


def _normalized(text: str) -> str:
    return " ".join(str(text).lower().rstrip("?").split())


def question_retries(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Per data source, ``{"retries": n, "question": m}``: of the n attempts after the first that search, m search
    the meta-episode's question itself first (case, spacing and a final "?" aside; the retry the namesake warm start
    scripts)."""
    from mr_search.eval.records import searches

    out: dict[str, dict[str, int]] = {}
    for record in records:
        counts = out.setdefault(str(record["data_source"]), {"retries": 0, "question": 0})
        for attempt in record["attempts"][1:]:
            found = searches(attempt)
            if found:
                counts["retries"] += 1
                counts["question"] += _normalized(found[0]["query"]) == _normalized(record.get("question", "\0"))
    return {source: out[source] for source in sorted(out)}


def _search_counts(name: str, records: Sequence[Mapping[str, Any]], attempts: int) -> dict[str, Any]:
    """Searches per attempt, and searches again after the first attempt (of all, of those wrong at attempt 1)."""
    from mr_search.eval.records import searches

    def searched(record: Mapping[str, Any], k: int) -> bool:
        return len(record["attempts"]) > k and bool(searches(record["attempts"][k]))

    def share(selected: Sequence[Mapping[str, Any]]) -> float | None:
        if not selected:
            return None
        return round(100.0 * sum(any(searched(r, k) for k in range(1, attempts)) for r in selected) / len(selected), 1)

    wrong_first = [r for r in records if r["attempts"] and not r["attempts"][0]["em"]]
    return {
        f"{name}_retries": retry_outcomes(records, attempts),
        f"{name}_retries_by_source": {
            source: retry_outcomes([r for r in records if r["data_source"] == source], attempts)
            for source in sorted({str(r["data_source"]) for r in records})
        },
        f"{name}_searches_at_k": [
            round(100.0 * sum(searched(r, k) for r in records) / max(1, len(records)), 1) for k in range(attempts)
        ],
        f"{name}_search_after_1": {"all": share(records), "after_wrong": share(wrong_first)},
        f"{name}_retry_is_question": question_retries(records),
    }


async def _run(
    model_dir: Path,
    rows: list[dict[str, Any]],
    retrieval: Any,
    attempts: int,
    samples: int,
    seed: int,
    outcome_feedback: bool = False,
    restates_question: bool = False,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from transformers import AutoTokenizer

    from mr_search.cpu.hf_generate import LocalServerManager
    from mr_search.eval import runner

    config = runner.EvalConfig(
        attempts=attempts,
        max_new_tokens_per_turn=48,
        max_information_tokens=256,
        prompt_length=256,
        response_length=1024,
        concurrency=64,
        outcome_feedback=outcome_feedback,
        reflection_restates_question=restates_question,
        method="probe",
    )
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    server = LocalServerManager.from_pretrained(model_dir, max_batch_size=64, default_max_new_tokens=48)
    try:
        make_loop = runner.agent_loop_factory(tokenizer, server, retrieval, config)
        greedy = await runner.run_episodes(rows, make_loop, tokenizer, config, progress=False)
        sampled: list[dict[str, Any]] = []
        if samples:
            saved = runner.GREEDY
            # Temperature 1 with no per-request seed (a seed would make the n draws of a question equal).
            runner.GREEDY = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": False}
            try:
                sampled = await runner.run_episodes(
                    [row for row in rows for _ in range(samples)], make_loop, tokenizer, replace(config), progress=False
                )
            finally:
                runner.GREEDY = saved
        return greedy, sampled
    finally:
        server.close()


def probe(
    model_dir: Path,
    questions: int,
    samples: int,
    attempts: int = 3,
    url: str | None = None,
    seed: int = 0,
    outcome_feedback: bool = False,
    parquet: Path | None = None,
):
    """Runs the probe on ``model_dir`` over ``parquet`` (default: the dev split's); returns the figures (see the
    module docstring). ``outcome_feedback``: the reflection turns say whether the previous answer was right (for a
    warm start built with it); they restate the question when the warm start was trained so (``trained_restating``).
    The caller records the read (``mr_search_embedded.reads``)."""
    import torch

    from mr_search.eval.evaluate import load_rows
    from mr_search_embedded.splits import split_parquet

    torch.manual_seed(seed)
    rows = load_rows(parquet if parquet is not None else split_parquet("dev"), questions)
    corpus_titles = _titles()
    entities = {str(row["extra_info"]["id"]): corpus_titles[str(row["extra_info"]["gold_doc_ids"][0])] for row in rows}
    second_hops = {
        str(row["extra_info"]["id"]): corpus_titles[str(row["extra_info"]["gold_doc_ids"][1])]
        for row in rows
        if len(row["extra_info"]["gold_doc_ids"]) > 1
    }
    second_hops.update(_presence_queries(rows))
    if url:
        from mr_search.agent.retrieval_client import RetrievalClient, RetrieverConfig

        retrieval: Any = RetrievalClient(RetrieverConfig(url=url))
    else:
        retrieval = InProcessRetrieval()
    restates = trained_restating(model_dir)
    greedy, sampled = asyncio.run(_run(model_dir, rows, retrieval, attempts, samples, seed, outcome_feedback, restates))
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    name_tokens = {uid: len(tokenizer.encode(f" {name}", add_special_tokens=False)) for uid, name in entities.items()}
    return summarize(greedy, sampled, entities, attempts, second_hops, name_tokens, _trained_words()), greedy


def trained_restating(model_dir: Path) -> bool:
    """Whether the warm start in ``model_dir`` was trained with reflection turns that restate the question (its
    ``warmstart.json``; False for a model without one)."""
    info = Path(model_dir) / "warmstart.json"
    if not info.is_file():
        return False
    settings = json.loads(info.read_text(encoding="utf-8")).get("settings", {})
    return bool(settings.get("transcripts", {}).get("reflection_question", False))


def _presence_queries(rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """In the namesake world, question uid -> the reformulation its namesake questions need ("sailor Aldo Venn",
    ``namesake.namesake_query``), which stands for the second gold passage's title as the search the world rewards
    (``second_hop_searched``, ``namesake_thoughts``' alias); empty in any other world."""
    from mr_search_embedded.world.namesake import RETRY_RELATION, namesake_query
    from mr_search_embedded.world.variant import world_variant

    if world_variant() != "namesake":
        return {}
    return {
        str(row["extra_info"]["id"]): namesake_query(str(row["extra_info"]["question"]))
        for row in rows
        if row["extra_info"].get("relation") == RETRY_RELATION
    }


def _titles() -> dict[str, str]:
    from mr_search_embedded.world.world import ensure_world

    with open(ensure_world().corpus, encoding="utf-8") as handle:
        return {str(doc["id"]): str(doc["title"]) for doc in map(json.loads, handle) if doc}


def _trained_words() -> set[str]:
    """The words (lower case, letters and digits) of the world's training questions."""
    import re

    from mr_search_embedded.world.world import ensure_world

    with open(ensure_world().train, encoding="utf-8") as handle:
        return {w for row in map(json.loads, handle) if row for w in re.findall(r"\w+", str(row["question"]).lower())}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m mr_search_embedded.warmstart.probe", description=__doc__)
    parser.add_argument("--model", type=Path, default=None, help="HF model dir (default: the cached warm start)")
    parser.add_argument("--questions", type=int, default=50, help="first N questions per data source of the split")
    parser.add_argument(
        "--split",
        choices=SPLITS,
        default="dev",
        help=f"the questions probed (default dev); test only with {TEST_FLAG}",
    )
    parser.add_argument(
        TEST_FLAG,
        dest="read_test",
        action="store_true",
        help="probe the test split, which a comparison's final evaluation reads once; the ledger records it and "
        "every later comparison on these questions reports its test as probed",
    )
    parser.add_argument("--samples", type=int, default=5, help="sampled meta-episodes per question (0: greedy only)")
    parser.add_argument("--attempts", type=int, default=3)
    parser.add_argument("--url", default=None, help="a running service's /retrieve URL (default: in-process)")
    parser.add_argument("--dump", type=Path, default=None, help="write the greedy trajectories here (JSONL)")
    parser.add_argument(
        "--policy", default="tiny", help="without --model: the warm start of this tiny policy shape (tiny or small)"
    )
    parser.add_argument(
        "--outcome-feedback",
        action="store_true",
        help="reflection turns say whether the previous answer was right (default model: the warm start built so)",
    )
    args = parser.parse_args(argv)
    if args.split == "test" and not args.read_test:
        parser.error(
            f"--split test reads the questions a comparison's final evaluation is reported on; probe dev (the "
            f"default) or train, or give {TEST_FLAG} to read test anyway and have it recorded as probed"
        )
    logging.basicConfig(level=logging.WARNING)
    model = args.model
    if model is None:
        from mr_search_embedded.tiny_model import ensure_tiny_model, policy_shape
        from mr_search_embedded.warmstart.train import ensure_warmstart, warmstart_config
        from mr_search_embedded.world.variant import world_variant

        try:
            config = warmstart_config(args.outcome_feedback, world_variant())
            shape = policy_shape(args.policy)
        except ValueError as error:
            parser.error(str(error))
        base = ensure_tiny_model(config=shape)
        model = ensure_warmstart(base_model=base, config=config)
    parquet = split_parquet(args.split)
    record_read(parquet, args.split, "probe", {"model": str(model), "questions": args.questions})
    figures, greedy = probe(
        model,
        args.questions,
        args.samples,
        args.attempts,
        args.url,
        outcome_feedback=args.outcome_feedback,
        parquet=parquet,
    )
    if args.dump:
        args.dump.write_text("".join(json.dumps(r) + "\n" for r in greedy))
    print(json.dumps({"split": args.split, "parquet": str(parquet), **figures}))


if __name__ == "__main__":
    main()

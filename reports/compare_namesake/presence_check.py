"""One-off check (not part of the package; issue 19, namesake world version 4): can the 4-layer small policy learn the
version-4 decision at all, before any warm-start build?

A decision window is one first attempt of a namesake or control question of version 4, cut after the model turn that
follows the first search's passages: the instruction and question, ``<search> N </search>``, the three passages of a
search for N (all about the A namesake), then the trained turn: for a retry question (profession word absent from the
passages) a thought and ``<search> <profession> N </search>``; for a control (present) a thought and ``<answer> C1
</answer>``. It fine-tunes an existing build (default: the recipe-5 policy ``worlds/namesake-v3/warmstart/
361a38e26aa2``, whose names and tokenizer are version 3's = version 4's) on windows of freshly drawn groups every step
(new N, professions, city: nothing repeats, so only reading can help), loss on the trained turn only, and every
``--eval-every`` steps greedily continues 40 held-out windows of each kind (version 4's held-out groups, passages of
the warm start's lexical search for N) and 40 of each kind of training groups, counting the right action (search for
a retry question, answer for a control), the exact query "<profession> N" and the exact answer.

    MR_SEARCH_CACHE=/work/cache19 python reports/compare_namesake/presence_check.py --thought copy --out /tmp/x.json
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from mr_search.prompts import format_passages
from mr_search.warmstart.batches import pad_batch
from mr_search.warmstart.lookup import LexicalIndex
from mr_search.warmstart.render import Encoded, encode_all
from mr_search.warmstart.train import causal_lm_loss
from mr_search.warmstart.transcripts import THINK_ANSWER, THINK_SEARCH, Transcript, Turn, answer_turn, search_turn
from mr_search_retrieval.embedded.facts import PROFESSIONS, WorldConfig, build_facts
from mr_search_retrieval.embedded.namesake import (
    CONTROL_RELATION,
    RETRY_RELATION,
    NamesakeGroup,
    build_namesake_world,
    namesake_query,
    presence_passages,
    trained_name_words,
)
from mr_search_retrieval.embedded.variant import base_cache_dir
from mr_search_retrieval.embedded.world import build_world

logger = logging.getLogger("presence_check")

# The trained turn's thought: (lead, retry's rest, control's rest); the deciding token is the first of the rest.
# {p}: the question's profession, {k}: the one the passages name (the A's), {n}: N.
THOUGHTS = {
    # The profession word copied first, the decision right after it ("is not" / "is in").
    "copy": ("The {p} is", " not in the passages. I need to search for {p} {n}.", " in the passages. {answer}"),
    # The decision first ("I found no" / "I found the"), then the copy.
    "direct": ("I found", " no {p}. I need to search for {p} {n}.", " the answer."),
    # Both professions copied into the thought (the passages', then the question's), then the decision: a comparison
    # of two words a few tokens apart.
    "compare": ("Passages: {k}. Question: {p}.", " Not the same. I need to search for {p} {n}.", " The same. {answer}"),
}


def thought_text(thought: str, retry: bool, profession: str, known: str, name: str) -> tuple[str, str]:
    """``(lead, whole thought)`` of the trained turn."""
    lead, retry_rest, control_rest = THOUGHTS[thought]
    fields = {"p": profession, "k": known, "n": name, "answer": THINK_ANSWER}
    return lead.format(**fields), (lead + (retry_rest if retry else control_rest)).format(**fields)


def window(
    question: str, name: str, profession: str, known: str, passages: list, answer: str, retry: bool, thought: str
):
    think = thought_text(thought, retry, profession, known, name)[1]
    turn = search_turn(think, f"{profession} {name}") if retry else answer_turn(think, answer)
    attempt = (
        Turn("model", search_turn(THINK_SEARCH, name), trained=False),
        Turn("information", format_passages(passages)),
        Turn("model", turn),
    )
    return Transcript(question, (answer,), (attempt,), (True,)), turn


class Fresh:
    """Freshly drawn groups: names recombined from the default world's trained name words (as version 3/4 draws
    them), two professions, two cities of different countries; the search for N shows 3 of N's 4 passages."""

    def __init__(self, rng: random.Random, avoid: set[str]) -> None:
        graph = build_facts(random.Random(0), WorldConfig())
        self.firsts, self.lasts = trained_name_words(graph, build_world(0)[1])
        self.cities = graph.cities
        self.rng, self.avoid = rng, avoid

    def draw(self, retry: bool):
        rng = self.rng
        while True:
            name = f"{rng.choice(self.firsts)} {rng.choice(self.lasts)}"
            if name not in self.avoid and name.split()[0] != name.split()[1]:
                break
        known, other = rng.sample(PROFESSIONS, 2)
        c1 = rng.choice(self.cities)
        c2 = rng.choice([c for c in self.cities if c.country != c1.country])
        about, _ = presence_passages(NamesakeGroup(name, known, c1.name, other, c2.name, ""))
        shown = [about[0], *rng.sample(about[1:], 2)] if rng.random() < 0.9 else rng.sample(about[1:], 3)
        rng.shuffle(shown)
        docs = [{"contents": f'"{t}"\n{x}'} for t, x in shown]
        profession = other if retry else known
        return f"Where was the {profession} {name} born?", name, profession, known, docs, (c2 if retry else c1).name


def masked(encoded: Encoded, turn_ids: list[int], decision_at: int | None = None) -> Encoded:
    """``encoded`` with the loss on its last model turn only (``turn_ids`` long), or on that turn's token at
    ``decision_at`` only."""
    n = len(encoded.input_ids)
    if decision_at is None:
        mask = [0] * (n - len(turn_ids)) + [1] * len(turn_ids)
    else:
        mask = [0] * n
        mask[n - len(turn_ids) + decision_at] = 1
    return Encoded(encoded.input_ids, mask, encoded.prompt_length, [0] * n)


def decision_position(tokenizer, turn: str, lead: str) -> int:
    """The index, in ``turn``'s tokens, of the first token after the thought's ``lead``: where the kinds differ."""
    ids, lead_ids = (tokenizer.encode(t, add_special_tokens=False) for t in (turn, f"<think> {lead}"))
    if ids[: len(lead_ids)] != lead_ids:
        raise ValueError(f"decision_position: {lead!r} does not tokenize as a prefix of {turn!r}")
    return len(lead_ids)


@torch.no_grad()
def greedy(model, tokenizer, ids: list[int], max_new: int = 48) -> str:
    out = model.generate(
        torch.tensor([ids]),
        attention_mask=torch.ones(1, len(ids), dtype=torch.long),
        max_new_tokens=max_new,
        do_sample=False,
        pad_token_id=tokenizer.pad_token_id or 0,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
    )
    return tokenizer.decode(out[0, len(ids) :], skip_special_tokens=True)


@torch.no_grad()
def decision_right(model, tokenizer, enc: Encoded, turn: str, fields: tuple[str, str, str], retry: bool, thought: str):
    """Teacher-forced: at the deciding token, does the policy put more probability on its own kind's token than on
    the other kind's? ``fields``: (question's profession, passages' profession, N)."""
    lead, _ = thought_text(thought, retry, *fields)
    turn_ids = tokenizer.encode(turn, add_special_tokens=False)
    at = decision_position(tokenizer, turn, lead)
    other_think = thought_text(thought, not retry, *fields)[1]
    other_ids = tokenizer.encode(f"<think> {other_think}", add_special_tokens=False)
    mine, other = turn_ids[at], other_ids[at]
    if mine == other:
        raise ValueError(f"decision_right: the two kinds' turns agree at token {at}: {turn!r} / {other_think!r}")
    position = len(enc.input_ids) - len(turn_ids) + at
    logits = model(torch.tensor([enc.input_ids[:position]])).logits[0, -1]
    return bool(logits[mine] > logits[other])


def score(model, tokenizer, windows: list[tuple], thought: str) -> dict[str, int]:
    counts = {"retry_n": 0, "retry_search": 0, "retry_query_exact": 0, "control_n": 0, "control_answer": 0}
    counts.update(control_answer_exact=0, retry_decision_token=0, control_decision_token=0)
    encoded = encode_all([w[0] for w in windows], tokenizer)
    for (_, turn, retry, name, profession, known, answer), enc in zip(windows, encoded, strict=True):
        turn_ids = tokenizer.encode(turn, add_special_tokens=False)
        right = decision_right(model, tokenizer, enc, turn, (profession, known, name), retry, thought)
        counts["retry_decision_token" if retry else "control_decision_token"] += right
        text = greedy(model, tokenizer, enc.input_ids[: len(enc.input_ids) - len(turn_ids)])
        # The first action decides (the agent loop stops there); the runs in the report counted a continuation that
        # holds both tags as neither, which can only undercount.
        tags = [(text.find(tag), tag) for tag in ("<search>", "<answer>") if tag in text]
        first = min(tags)[1] if tags else ""
        if retry:
            counts["retry_n"] += 1
            counts["retry_search"] += first == "<search>"
            counts["retry_query_exact"] += f"<search> {profession} {name} </search>" in text
        else:
            counts["control_n"] += 1
            counts["control_answer"] += first == "<answer>"
            counts["control_answer_exact"] += f"<answer> {answer} </answer>" in text
    return counts


def world_windows(rows: list[dict], corpus: list[dict], index: LexicalIndex, per_kind: int, thought: str, seed: int):
    by_id = {r["id"]: r for r in corpus}
    out = []
    for relation in (RETRY_RELATION, CONTROL_RELATION):
        kind = [q for q in rows if q["relation"] == relation]
        for q in random.Random(seed).sample(kind, min(per_kind, len(kind))):
            name = by_id[q["gold_doc_ids"][0]]["title"]
            profession = namesake_query(q["question"]).split()[0]
            docs = list(index.search(name, 3))
            retry = relation == RETRY_RELATION
            known = re.search(r"was an? (\w+) born in", by_id[q["gold_doc_ids"][0]]["text"]).group(1)
            answer = q["golden_answers"][0]
            transcript, turn = window(q["question"], name, profession, known, docs, answer, retry, thought)
            out.append((transcript, turn, retry, name, profession, known, answer))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", default="worlds/namesake-v3/warmstart/361a38e26aa2", help="under $MR_SEARCH_CACHE")
    parser.add_argument("--thought", choices=sorted(THOUGHTS), default="copy")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=24)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--per-kind", type=int, default=40)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--loss", choices=("turn", "decision"), default="turn", help="decision: deciding token only")
    parser.add_argument("--init", choices=("policy", "fresh"), default="policy", help="fresh: its shape, random")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    corpus, train, test = build_namesake_world(0, version=4)
    index = LexicalIndex(corpus)
    held_out = world_windows(test, corpus, index, args.per_kind, args.thought, args.seed)
    trained = world_windows(train, corpus, index, args.per_kind, args.thought, args.seed)
    names = {w[3] for w in held_out + trained}
    absent = sum(w[4] not in w[0].attempts[0][1].text.lower() for w in held_out if w[2])
    present = sum(w[4] in w[0].attempts[0][1].text.lower() for w in held_out if not w[2])
    logger.info("held-out windows: profession absent in %d retry, present in %d control", absent, present)

    path = base_cache_dir() / args.policy
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype="float32")
    if args.init == "fresh":
        model = AutoModelForCausalLM.from_config(model.config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    fresh = Fresh(random.Random(f"fresh-{args.seed}"), names)
    history = []
    start = time.time()

    def evaluate(step: int, loss: float | None) -> None:
        model.eval()
        row = {"step": step, "loss": loss, "held_out": score(model, tokenizer, held_out, args.thought)}
        row["training_groups"] = score(model, tokenizer, trained, args.thought)
        row["seconds"] = round(time.time() - start, 1)
        history.append(row)
        logger.info("%s", json.dumps(row))
        model.train()

    evaluate(0, None)
    losses: list[float] = []
    for step in range(1, args.steps + 1):
        groups = [fresh.draw(i % 2 == 0) for i in range(args.batch)]
        drawn = [window(*g, retry=i % 2 == 0, thought=args.thought) for i, g in enumerate(groups)]
        encoded = encode_all([t for t, _ in drawn], tokenizer)
        rows = []
        for i, (e, (_, turn), g) in enumerate(zip(encoded, drawn, groups, strict=True)):
            lead = thought_text(args.thought, i % 2 == 0, g[2], g[3], g[1])[0]
            at = decision_position(tokenizer, turn, lead) if args.loss == "decision" else None
            rows.append(masked(e, tokenizer.encode(turn, add_special_tokens=False), at))
        batch = pad_batch(rows, tokenizer.pad_token_id or 0, 2048)
        loss = causal_lm_loss(model, batch.ids, batch.labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(float(loss.detach()))
        if step % args.eval_every == 0:
            evaluate(step, sum(losses[-20:]) / len(losses[-20:]))
    args.out.write_text(json.dumps({"args": vars(args) | {"out": str(args.out)}, "history": history}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The ``threehop`` embedded world (opt-in, ``MR_SEARCH_WORLD=threehop``): the default world's generator with more
companies and questions whose chain of three articles one attempt's search budget cannot walk.

DESIGN

* The default world's generator (``world.py``, same templates, twins and distractors) with ``THREEHOP_CONFIG``'s
  sizes: 1,000 people and 700 companies (the default's 900 and 200), so that every split holds hundreds of three-hop
  questions.
* Questions: the default world's one- and two-hop ones (the controls) and, per company, the three-hop ones
  (``questions.three_hop_questions``): "In which country was the founder of Ziniix born?" (company -> founder ->
  birth city, whose article gives the country) and, when a river flows through that city, "Which river flows
  through the birthplace of the founder of Ziniix?". Data source ``embedded_3hop``. No passage of the chain names
  the next but one: the company's article names the founder, not the city; the founder's names the city, not its
  country or river; so every hop is a search.
* The budget: the agent loop runs an attempt for ``mr_search.episode.max_turns_per_attempt`` model turns (3, the
  paper's and the embedded config's), and a search on the last turn is not run (``agent/loop.py``): an attempt is
  at most 2 searches and an answer. A three-hop question needs 3 searches, so one attempt never has the answer's
  passage in its context; the next attempt, whose context holds the first one's passages, needs one more search.
  ``python -m mr_search_embedded.world.reach`` measures it with an oracle that searches each hop's entity.
* Splits (``splits.py``): dev and test are each a draw of 20% of the companies with their founders, plus people
  who founded none up to 20% of the people (``draw_components``, generators ``threehop-dev-<seed>`` and
  ``threehop-test-<seed>``): no held-out question's chain passes through a training person's article, so no fact a
  three-hop question needs, but a shared city's, is in train. Train keeps its own three-hop questions (RL trains on
  them). Seed 0 (3,376 passages): test 217 three-hop, 480 two-hop and 680 one-hop questions; dev 211, 480, 680;
  train 654, 1,440, 2,268.
* Cities and countries are shared by every split, as in the default world: a policy that memorised a city's
  country from training could answer the last hop without searching it.
"""

from __future__ import annotations

import random
from dataclasses import asdict
from pathlib import Path
from typing import Any, Final

from mr_search_embedded.world.facts import WorldConfig, build_facts
from mr_search_embedded.world.questions import make_questions, three_hop_questions
from mr_search_embedded.world.splits import HeldOut, draw_components, partition
from mr_search_embedded.world.variant import THREEHOP_WORLD_VERSION
from mr_search_embedded.world.world import (
    DEFAULT_SEED,
    WORLD_VERSION,
    WorldPaths,
    WorldRows,
    corpus_and_ids,
    world_rows,
    write_rows,
)

VARIANT: Final = "threehop"
THREE_HOP_RELATIONS: Final = ("founder_birth_country", "founder_birthplace_river")
# Sizes: the default world's but for more companies (each with a founder, so enough people) and a 20% share in each
# of dev and test.
THREEHOP_CONFIG: Final = WorldConfig(n_people=1000, n_companies=700, test_fraction=0.2)


def threehop_meta(config: WorldConfig = THREEHOP_CONFIG) -> dict[str, Any]:
    """What ``meta.json`` records about the variant, its sizes as ``config`` (a cached world whose record differs is
    rebuilt)."""
    return {"variant": VARIANT, "threehop_version": THREEHOP_WORLD_VERSION, "config": asdict(config)}


def build_threehop_world(seed: int = DEFAULT_SEED, config: WorldConfig = THREEHOP_CONFIG) -> WorldRows:
    """The threehop world for ``seed`` and ``config`` (pure; writes nothing)."""
    rng = random.Random(seed)
    graph = build_facts(rng, config)
    corpus, fact_ids = corpus_and_ids(rng, graph, config)
    questions = make_questions(graph, fact_ids) + three_hop_questions(graph, fact_ids)
    rng.shuffle(questions)
    dev = draw_components(random.Random(f"{VARIANT}-dev-{seed}"), graph, config.test_fraction)
    test = draw_components(random.Random(f"{VARIANT}-test-{seed}"), graph, config.test_fraction, avoid=dev)
    held_out = HeldOut(tuple(dev), tuple(test))
    return world_rows(corpus, partition(questions, held_out), held_out, prefix=VARIANT)


def write_threehop_world(
    out_dir: Path | str, *, seed: int = DEFAULT_SEED, config: WorldConfig = THREEHOP_CONFIG
) -> WorldPaths:
    """Builds the threehop world for ``seed`` and writes it (``world.write_rows``) to ``out_dir``."""
    meta = {"version": WORLD_VERSION, "seed": seed, **threehop_meta(config)}
    return write_rows(out_dir, build_threehop_world(seed, config), meta)

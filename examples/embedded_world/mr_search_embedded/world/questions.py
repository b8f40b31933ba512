"""Single-hop and two-hop questions over the embedded world's fact graph, and the held-out split."""

from __future__ import annotations

import random
from dataclasses import dataclass

from mr_search_embedded.world.facts import FactGraph


@dataclass(frozen=True)
class Question:
    question: str
    answer: str
    gold_doc_ids: tuple[str, ...]  # in hop order; the answer appears in the last one
    relation: str
    subject: str  # the entity the question is about (decides its split)


def make_questions(graph: FactGraph, fact_ids: dict[str, str]) -> list[Question]:
    """All questions the graph supports; ``fact_ids`` maps an entity name to its article's doc id."""
    out: list[Question] = []
    for city in graph.cities:
        doc = fact_ids[city.name]
        out.append(Question(f"In which country is {city.name}?", city.country, (doc,), "city_country", city.name))
        if city.river is not None:
            out.append(Question(f"Which river flows through {city.name}?", city.river, (doc,), "city_river", city.name))
    for person in graph.people:
        doc = fact_ids[person.name]
        city = graph.city(person.birth_city)
        out.append(Question(f"Where was {person.name} born?", city.name, (doc,), "birthplace", person.name))
        out.append(
            Question(f"What was the profession of {person.name}?", person.profession, (doc,), "profession", person.name)
        )
        out.append(
            Question(
                f"In which country was {person.name} born?",
                city.country,
                (doc, fact_ids[city.name]),
                "birth_country",
                person.name,
            )
        )
    for company in graph.companies:
        doc = fact_ids[company.name]
        founder = graph.person(company.founder)
        hq = graph.city(company.hq_city)
        out.append(Question(f"Who founded {company.name}?", founder.name, (doc,), "founder", company.name))
        out.append(Question(f"Where is {company.name} headquartered?", hq.name, (doc,), "headquarters", company.name))
        out.append(
            Question(
                f"Where was the founder of {company.name} born?",
                founder.birth_city,
                (doc, fact_ids[founder.name]),
                "founder_birthplace",
                company.name,
            )
        )
        out.append(
            Question(
                f"In which country is {company.name} headquartered?",
                hq.country,
                (doc, fact_ids[hq.name]),
                "headquarters_country",
                company.name,
            )
        )
    return out


def split_questions(
    rng: random.Random, graph: FactGraph, questions: list[Question], test_fraction: float
) -> tuple[list[Question], list[Question]]:
    """Holds out every question about ``test_fraction`` of the people and companies; shuffles both sets."""
    people = [p.name for p in graph.people]
    companies = [c.name for c in graph.companies]
    held_out = set(rng.sample(people, max(1, round(test_fraction * len(people)))))
    held_out.update(rng.sample(companies, max(1, round(test_fraction * len(companies)))))
    train = [q for q in questions if q.subject not in held_out]
    test = [q for q in questions if q.subject in held_out]
    rng.shuffle(train)
    rng.shuffle(test)
    return train, test

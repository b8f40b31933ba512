"""One-, two- and three-hop questions over the embedded world's fact graph (``splits.py`` splits them)."""

from __future__ import annotations

from dataclasses import dataclass

from mr_search_embedded.world.facts import FactGraph


@dataclass(frozen=True)
class Question:
    question: str
    answer: str
    gold_doc_ids: tuple[str, ...]  # in hop order; the answer appears in the last one
    relation: str
    subject: str  # the entity the question is about (decides its split)
    # Every person and company its gold passages name, the subject included (a company's article names its founder):
    # a training question may name none of the dev and test entities (``splits.py``).
    entities: tuple[str, ...] = ()


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
        named = (person.name,)
        out.append(Question(f"Where was {person.name} born?", city.name, (doc,), "birthplace", person.name, named))
        profession = f"What was the profession of {person.name}?"
        out.append(Question(profession, person.profession, (doc,), "profession", person.name, named))
        out.append(
            Question(
                f"In which country was {person.name} born?",
                city.country,
                (doc, fact_ids[city.name]),
                "birth_country",
                person.name,
                named,
            )
        )
    for company in graph.companies:
        doc = fact_ids[company.name]
        founder = graph.person(company.founder)
        hq = graph.city(company.hq_city)
        named = (company.name, founder.name)
        out.append(Question(f"Who founded {company.name}?", founder.name, (doc,), "founder", company.name, named))
        out.append(
            Question(f"Where is {company.name} headquartered?", hq.name, (doc,), "headquarters", company.name, named)
        )
        out.append(
            Question(
                f"Where was the founder of {company.name} born?",
                founder.birth_city,
                (doc, fact_ids[founder.name]),
                "founder_birthplace",
                company.name,
                named,
            )
        )
        out.append(
            Question(
                f"In which country is {company.name} headquartered?",
                hq.country,
                (doc, fact_ids[hq.name]),
                "headquarters_country",
                company.name,
                named,
            )
        )
    return out


def three_hop_questions(graph: FactGraph, fact_ids: dict[str, str]) -> list[Question]:
    """The three-hop questions of every company (the ``threehop`` world's): a chain of three articles, company ->
    founder -> the founder's birth city, whose article holds the answer: the city's country (every company) and the
    river through it (when one flows there)."""
    out: list[Question] = []
    for company in graph.companies:
        founder = graph.person(company.founder)
        city = graph.city(founder.birth_city)
        chain = (fact_ids[company.name], fact_ids[founder.name], fact_ids[city.name])
        named = (company.name, founder.name)
        out.append(
            Question(
                f"In which country was the founder of {company.name} born?",
                city.country,
                chain,
                "founder_birth_country",
                company.name,
                named,
            )
        )
        if city.river is not None:
            out.append(
                Question(
                    f"Which river flows through the birthplace of the founder of {company.name}?",
                    city.river,
                    chain,
                    "founder_birthplace_river",
                    company.name,
                    named,
                )
            )
    return out

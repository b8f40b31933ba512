"""The fact graph of the embedded world: countries, cities, rivers, people and companies."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Final

from mr_search_embedded.world.names import NameGenerator

PROFESSIONS: Final = (
    "painter",
    "sailor",
    "baker",
    "poet",
    "engineer",
    "doctor",
    "merchant",
    "singer",
    "farmer",
    "teacher",
    "architect",
    "weaver",
)


@dataclass(frozen=True)
class WorldConfig:
    """Sizes of the embedded world. The defaults give ~3k passages and ~5k questions."""

    n_countries: int = 12
    n_cities: int = 150
    n_rivers: int = 40
    n_people: int = 900
    n_companies: int = 200
    near_duplicate_rate: float = 0.4  # share of people/companies/cities that get a one-letter twin
    distractor_rate: float = 0.8  # share of entities with a passage that mentions them with unrelated facts
    test_fraction: float = 0.1  # share of people and companies whose questions are in each of dev and test

    def __post_init__(self) -> None:
        minimums = {"n_countries": 3, "n_cities": 6, "n_rivers": 1, "n_people": 4, "n_companies": 2}
        for name, low in minimums.items():
            value = getattr(self, name)
            if not isinstance(value, int) or value < low:
                raise ValueError(f"WorldConfig.{name}={value!r}: must be an integer >= {low}")
        if self.n_cities < 2 * self.n_countries:
            raise ValueError(
                f"WorldConfig.n_cities={self.n_cities}: needs at least 2 cities per country "
                f"(n_countries={self.n_countries})"
            )
        for name in ("near_duplicate_rate", "distractor_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"WorldConfig.{name}={value!r}: must be in [0, 1]")
        if not 0.0 < self.test_fraction < 0.5:
            raise ValueError(f"WorldConfig.test_fraction={self.test_fraction!r}: must be in (0, 0.5)")


@dataclass(frozen=True)
class Country:
    name: str
    capital: str = ""


@dataclass(frozen=True)
class City:
    name: str
    country: str
    river: str | None


@dataclass(frozen=True)
class Person:
    name: str
    birth_city: str
    profession: str
    twin_of: str | None = None


@dataclass(frozen=True)
class Company:
    name: str
    founder: str
    hq_city: str
    twin_of: str | None = None


@dataclass
class FactGraph:
    """All entities, in generation order (lists, never sets: the order is part of determinism)."""

    countries: list[Country] = field(default_factory=list)
    cities: list[City] = field(default_factory=list)
    rivers: list[str] = field(default_factory=list)
    people: list[Person] = field(default_factory=list)
    companies: list[Company] = field(default_factory=list)

    def city(self, name: str) -> City:
        return self._cities_by_name[name]

    def person(self, name: str) -> Person:
        return self._people_by_name[name]

    def index(self) -> None:
        self._cities_by_name = {c.name: c for c in self.cities}
        self._people_by_name = {p.name: p for p in self.people}


def _other_city(rng: random.Random, cities: list[City], avoid: City) -> City:
    """A city that differs from ``avoid`` in name and country (so a mix-up gives a wrong answer)."""
    choices = [c for c in cities if c.country != avoid.country]
    return rng.choice(choices)


def _hq_city(rng: random.Random, cities: list[City], founder: Person) -> str:
    """A headquarters city other than the founder's birthplace (else a two-hop answer leaks into hop one)."""
    return rng.choice([c for c in cities if c.name != founder.birth_city]).name


def build_facts(rng: random.Random, config: WorldConfig) -> FactGraph:
    """Draws the fact graph. Twins (near-duplicate names) get facts that differ from their original's."""
    names = NameGenerator(rng)
    graph = FactGraph()
    country_names = [names.country() for _ in range(config.n_countries)]
    graph.rivers = [names.river() for _ in range(config.n_rivers)]

    n_base_cities = max(2 * config.n_countries, round(config.n_cities / (1 + config.near_duplicate_rate / 2)))
    for i in range(n_base_cities):
        # The first 2 * n_countries cities cover every country twice; the rest are random.
        country = country_names[i % config.n_countries] if i < 2 * config.n_countries else rng.choice(country_names)
        river = rng.choice(graph.rivers) if rng.random() < 0.6 else None
        graph.cities.append(City(names.city(), country, river))
    for base in list(graph.cities):
        if len(graph.cities) >= config.n_cities:
            break
        if rng.random() < config.near_duplicate_rate / 2:
            twin = names.near_duplicate(base.name)
            if twin is not None:
                other = rng.choice([c for c in country_names if c != base.country])
                graph.cities.append(City(twin, other, rng.choice(graph.rivers) if rng.random() < 0.6 else None))

    capitals: dict[str, str] = {}
    for city in graph.cities:
        capitals.setdefault(city.country, city.name)
    graph.countries = [Country(name, capitals[name]) for name in country_names]

    n_base_people = round(config.n_people / (1 + config.near_duplicate_rate))
    for _ in range(n_base_people):
        graph.people.append(Person(names.person(), rng.choice(graph.cities).name, rng.choice(PROFESSIONS)))
    for base in list(graph.people):
        if len(graph.people) >= config.n_people:
            break
        if rng.random() < config.near_duplicate_rate:
            twin = names.near_duplicate(base.name)
            if twin is None:
                continue
            base_city = next(c for c in graph.cities if c.name == base.birth_city)
            city = _other_city(rng, graph.cities, base_city)
            profession = rng.choice([p for p in PROFESSIONS if p != base.profession])
            graph.people.append(Person(twin, city.name, profession, twin_of=base.name))
    while len(graph.people) < config.n_people:
        graph.people.append(Person(names.person(), rng.choice(graph.cities).name, rng.choice(PROFESSIONS)))

    founders = rng.sample(graph.people, min(len(graph.people), config.n_companies))
    n_base_companies = round(config.n_companies / (1 + config.near_duplicate_rate))
    for founder in founders[:n_base_companies]:
        graph.companies.append(Company(names.company(), founder.name, _hq_city(rng, graph.cities, founder)))
    spare = founders[n_base_companies:]
    for base in list(graph.companies):
        if len(graph.companies) >= config.n_companies or not spare:
            break
        if rng.random() < config.near_duplicate_rate:
            twin = names.near_duplicate(base.name)
            if twin is None:
                continue
            base_city = next(c for c in graph.cities if c.name == base.hq_city)
            founder = spare.pop()
            hq = _other_city(rng, [c for c in graph.cities if c.name != founder.birth_city], base_city)
            graph.companies.append(Company(twin, founder.name, hq.name, twin_of=base.name))
    while len(graph.companies) < config.n_companies and spare:
        founder = spare.pop()
        graph.companies.append(Company(names.company(), founder.name, _hq_city(rng, graph.cities, founder)))
    graph.index()
    return graph

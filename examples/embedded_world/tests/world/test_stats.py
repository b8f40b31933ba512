"""The world-difficulty figures: first-hop / all-hop hits and confusers, on a scripted search."""

from __future__ import annotations

from mr_search_embedded.world.stats import measure

CORPUS = {
    "p1": '"Aldo Venn"\nAldo Venn was born in Brimholt.',
    "p2": '"Aldo Wenn"\nAldo Wenn was born in Kumholt.',
    "c1": '"Brimholt"\nBrimholt is a city in Tenaria.',
    "x": '"Weather"\nIt rained.',
}
QUESTIONS = [
    {
        "question": "Where was Aldo Venn born?",
        "golden_answers": ["Brimholt"],
        "gold_doc_ids": ["p1"],
        "hops": 1,
        "relation": "birthplace",
    },
    {
        "question": "Where was Aldo Wenn born?",
        "golden_answers": ["Kumholt"],
        "gold_doc_ids": ["p2"],
        "hops": 1,
        "relation": "birthplace",
    },
    {
        "question": "In which country was Aldo Venn born?",
        "golden_answers": ["Tenaria"],
        "gold_doc_ids": ["p1", "c1"],
        "hops": 2,
        "relation": "birth_country",
    },
]


def test_measure_counts_hits_two_hop_coverage_and_confusers() -> None:
    answers = {
        "Where was Aldo Venn born?": ["p1", "p2", "x"],  # gold first, the twin (naming Kumholt) is a confuser
        "Where was Aldo Wenn born?": ["x", "p2"],  # gold second, no other city named in the rest
        "In which country was Aldo Venn born?": ["p1", "x", "p2"],  # second hop missing
    }
    stats = measure(QUESTIONS, CORPUS, lambda queries, topk: [answers[q][:topk] for q in queries], topk=3)
    assert stats["birthplace"] == {"first@1": 50.0, "first@3": 100.0, "all@3": 100.0, "confuser@3": 50.0, "n": 2}
    assert stats["all_2hop"]["all@3"] == 0.0 and stats["all_2hop"]["first@1"] == 100.0
    assert stats["all_1hop"]["n"] == 2

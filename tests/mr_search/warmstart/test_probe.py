"""The warm-start probe's figures: query copying, collapse (distinct answers), EM per attempt, mixed groups."""

from __future__ import annotations

from mr_search.warmstart.probe import summarize


def _record(
    uid: str, query: str, answers: list[str], rewards: list[float], source: str = "embedded_1hop", found: str = ""
) -> dict:
    attempts = []
    for index, (answer, reward) in enumerate(zip(answers, rewards, strict=True)):
        turns = []
        if index == 0:
            turns.append({"role": "assistant", "content": f"<search> {query} </search>"})
            passages = f'Doc 1(Title: "{found}") {found} was a baker.' if found else ""
            turns.append({"role": "tool", "content": f"<information>{passages}</information>"})
        attempts.append({"index": index, "turns": turns, "answer": answer, "reward": reward, "em": reward})
    return {"uid": uid, "data_source": source, "attempts": attempts}


def test_summary_counts_copied_entities_collapse_and_mixed_groups():
    entities = {"q1": "Aldo Venn", "q2": "Kumholt"}
    greedy = [
        _record("q1", "aldo venn", ["Kumholt", "Kumholt"], [1.0, 1.0], found="Aldo Venn"),
        _record("q2", "where is it", ["Tenaria", "Vodikica"], [0.0, 1.0], source="embedded_2hop"),
    ]
    sampled = [
        *(_record("q1", "Aldo Venn", ["Kumholt", "Kumholt"], [1.0, 1.0]) for _ in range(3)),  # all equal
        _record("q2", "Kumholt", ["Tenaria", "Tenaria"], [0.0, 0.0]),
        _record("q2", "Kumholt", ["Tenaria", "Vodikica"], [0.0, 1.0]),  # differs at attempt 2
    ]
    figures = summarize(greedy, sampled, entities, attempts=2)
    assert figures["questions"] == 2
    assert figures["greedy_em_at_k"] == [50.0, 100.0]
    assert figures["greedy_em_at_1_by_source"] == {"embedded_1hop": 100.0, "embedded_2hop": 0.0}
    assert figures["query_names_entity"] == 50.0, "case-insensitive containment of the entity's name"
    assert figures["gold_passage_found"] == 50.0, "q1's search returned Aldo Venn's passage, q2's returned none"
    assert figures["distinct_answers"] == 2
    assert figures["mixed_groups"] == 50.0, "one of two questions has unequal rewards at some attempt"
    assert figures["sampled_em_at_k"] == [60.0, 80.0]


def test_a_collapsed_policy_shows_one_answer_and_no_mixed_groups():
    entities = {f"q{i}": f"Name{i}" for i in range(4)}
    greedy = [_record(f"q{i}", "In which country is", ["Dubasia"], [0.0]) for i in range(4)]
    figures = summarize(greedy, greedy * 2, entities, attempts=1)
    assert figures["distinct_answers"] == 1
    assert figures["query_names_entity"] == 0.0
    assert figures["gold_passage_found"] == 0.0
    assert figures["mixed_groups"] == 0.0

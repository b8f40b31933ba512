"""The warm-start probe's figures: query copying, collapse (distinct answers), EM per attempt, mixed groups."""

from __future__ import annotations

from mr_search_embedded.warmstart.probe import summarize


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


def _episode(uid: str, first_em: float, later_queries: list[str | None]) -> dict:
    """A meta-episode: attempt 1 searches and scores ``first_em``; attempt k >= 2 searches its query (None: not)."""
    attempts = [
        {
            "index": 0,
            "turns": [
                {"role": "assistant", "content": "<search> Aldo Venn </search>"},
                {"role": "tool", "content": "<information>Doc 1(Title: x) y</information>"},
                {"role": "assistant", "content": "<answer> Kumholt </answer>"},
            ],
            "answer": "Kumholt",
            "reward": first_em,
            "em": first_em,
        }
    ]
    for index, query in enumerate(later_queries, start=1):
        turns = [{"role": "user", "content": "Reflect on your previous attempt."}]
        if query is not None:
            turns += [
                {"role": "assistant", "content": f"<search> {query} </search>"},
                {"role": "tool", "content": "<information>Doc 1(Title: x) y</information>"},
            ]
        turns.append({"role": "assistant", "content": "<answer> Kumholt </answer>"})
        attempts.append({"index": index, "turns": turns, "answer": "Kumholt", "reward": 1.0, "em": 1.0})
    return {"uid": uid, "data_source": "embedded_1hop", "attempts": attempts}


def test_summary_counts_searches_after_the_first_attempt_overall_and_after_a_wrong_one():
    greedy = [
        _episode("q1", 0.0, ["Where was Aldo Venn born", None]),  # wrong, then searches again
        _episode("q2", 0.0, [None, None]),  # wrong, never searches again
        _episode("q3", 1.0, [None, "Aldo Venn"]),  # right, searches at attempt 3
        _episode("q4", 1.0, [None, None]),
    ]
    sampled = [_episode("q1", 0.0, ["Aldo Venn", None]), _episode("q1", 1.0, [None, None])]
    figures = summarize(greedy, sampled, {}, attempts=3)
    assert figures["greedy_searches_at_k"] == [100.0, 25.0, 25.0]
    assert figures["greedy_search_after_1"] == {"all": 50.0, "after_wrong": 50.0}
    assert figures["sampled_searches_at_k"] == [100.0, 50.0, 0.0]
    assert figures["sampled_search_after_1"] == {"all": 50.0, "after_wrong": 100.0}


def test_a_policy_that_never_searches_again_shows_zero_and_no_wrong_first_attempt_shows_none():
    never = [_episode(f"q{i}", float(i % 2), [None, None]) for i in range(4)]
    figures = summarize(never, [], {}, attempts=3)
    assert figures["greedy_search_after_1"] == {"all": 0.0, "after_wrong": 0.0}
    assert "sampled_search_after_1" not in figures, "no sampled episodes: no sampled counts"
    right = [_episode("q1", 1.0, ["Aldo Venn", None])]
    assert summarize(right, [], {}, attempts=3)["greedy_search_after_1"] == {"all": 100.0, "after_wrong": None}


def test_retries_count_new_searches_fixes_and_breaks():
    from mr_search.eval.retries import retry_outcomes

    fixed = _episode("q1", 0.0, ["Drelo Kam", None])  # wrong, searches a new name, right at attempt 3
    same = _episode("q2", 0.0, ["aldo venn", None])  # wrong, searches attempt 1's query again (case aside)
    same["attempts"][2].update(em=0.0, reward=0.0)  # ... and ends wrong
    kept = _episode("q3", 1.0, [None, None])  # right, kept
    broken = _episode("q4", 1.0, [None, None])
    broken["attempts"][2].update(em=0.0, reward=0.0)  # right, then wrong at the last attempt
    figures = retry_outcomes([fixed, same, kept, broken], attempts=3)
    assert figures == {
        "wrong_first": 2,
        "searched_differently": 50.0,
        "searched_differently_n": 1,
        "fixed": 50.0,
        "fixed_n": 1,
        "right_first": 2,
        "broken": 50.0,
        "broken_n": 1,
    }
    assert retry_outcomes([same], attempts=2)["fixed_n"] == 1, "counted at attempt 2, where q2 was right"
    assert retry_outcomes([kept], attempts=3)["searched_differently"] is None, "no wrong first answer: nothing to count"
    summary = summarize([fixed, same, kept, broken], [], {"q1": "Aldo Venn"}, attempts=3)
    assert summary["greedy_retries"] == figures
    assert summary["greedy_retries_by_source"]["embedded_1hop"] == figures
    assert summary["greedy_em_at_k_by_source"] == {"embedded_1hop": [50.0, 100.0, 50.0]}
    assert summary["query_is_entity"] == 25.0, "only q1's first query is exactly its entity's name"


def test_second_hop_searches_are_counted_per_source_for_questions_that_have_one():
    alias = _episode("q1", 0.0, ["drelo kam ", None])  # searches the alias at attempt 2 (case and spaces aside)
    name_only = _episode("q2", 0.0, ["Aldo Venn", None])  # searches the name again, never the alias
    name_only["data_source"] = alias["data_source"] = "embedded_namesake"
    one_hop = _episode("q3", 1.0, [None, None])  # no second gold passage: not counted
    right_first = _episode("q4", 1.0, [None, None])  # searched the alias in its first attempt and was right
    right_first["attempts"][0]["turns"][0]["content"] = "<search> Drelo Kam </search>"
    right_first["data_source"] = "embedded_namesake"
    second_hops = {"q1": "Drelo Kam", "q2": "Drelo Kam", "q4": "Drelo Kam"}
    summary = summarize(
        [alias, name_only, one_hop, right_first], [alias, alias], {}, attempts=3, second_hops=second_hops
    )
    assert summary["greedy_second_hop_searched"] == {
        "embedded_namesake": {"episodes": 3, "searched": 2, "wrong_first": 2, "searched_after_wrong": 1}
    }
    assert summary["sampled_second_hop_searched"] == {
        "embedded_namesake": {"episodes": 2, "searched": 2, "wrong_first": 2, "searched_after_wrong": 2}
    }
    assert summarize([one_hop], [], {}, attempts=3)["greedy_second_hop_searched"] == {}


def test_name_copy_accuracy_is_counted_per_source_and_by_the_names_token_count():
    entities = {"q1": "Aldo Venn", "q2": "Vupas Zi", "q3": "Sigel Tokul", "q4": "Drelo Kam"}
    greedy = [
        _record("q1", "Aldo Venn", ["x"], [0.0]),
        _record("q2", "Vafu Dro", ["x"], [0.0], source="embedded_namesake"),
        _record("q3", "sigel tokul", ["x"], [0.0], source="embedded_namesake"),
        _record("q4", "Drelo Kam", ["x"], [0.0], source="embedded_namesake"),
    ]
    figures = summarize(greedy, [], entities, attempts=1, name_tokens={"q1": 4, "q2": 4, "q3": 12, "q4": 2})
    assert figures["query_is_entity"] == 75.0
    assert figures["query_is_entity_by_source"] == {
        "embedded_1hop": {"questions": 1, "exact": 1},
        "embedded_namesake": {"questions": 3, "exact": 2},
    }
    # Keys are the token counts as text, in numeric order.
    assert list(figures["query_is_entity_by_name_tokens"].items()) == [
        ("2", {"questions": 1, "exact": 1}),
        ("4", {"questions": 2, "exact": 1}),
        ("12", {"questions": 1, "exact": 1}),
    ]
    assert summarize(greedy, [], entities, attempts=1)["query_is_entity_by_name_tokens"] == {}


def test_name_words_are_counted_copied_at_their_place_by_whether_training_questions_have_them():
    entities = {"q1": "Aldo Venn", "q2": "Vupas Zi", "q3": "Sigel Tokul"}
    greedy = [
        _record("q1", "aldo venn", ["x"], [0.0]),  # both words, case aside
        _record("q2", "Vupas Kam", ["x"], [0.0], source="embedded_namesake"),  # the first word only
        _record("q3", "the Sigel Tokul", ["x"], [0.0], source="embedded_namesake"),  # shifted: neither at its place
    ]
    trained = {"aldo", "venn", "vupas", "sigel"}
    figures = summarize(greedy, greedy[1:], entities, attempts=1, trained_words=trained)
    assert figures["greedy_name_word_copies"] == {
        "embedded_1hop": {"trained": {"words": 2, "copied": 2}},
        "embedded_namesake": {"trained": {"words": 2, "copied": 1}, "untrained": {"words": 2, "copied": 0}},
    }
    assert figures["sampled_name_word_copies"] == {
        "embedded_namesake": {"trained": {"words": 2, "copied": 1}, "untrained": {"words": 2, "copied": 0}}
    }
    assert summarize(greedy, [], entities, attempts=1)["sampled_name_word_copies"] is None


def _namesake_attempt(index: int, article: bool, thought: str, action: str) -> dict:
    passages = 'Doc 1(Title: "Koze Vibra") The baker Koze Vibra was born in Brekport.' if article else "Doc 1(Title: X)"
    return {
        "index": index,
        "turns": [
            {
                "role": "assistant",
                "content": "<think> I need to search for this. </think>\n<search> Koze Vibra </search>",
            },
            {"role": "tool", "content": f"<information>{passages}</information>"},
            {"role": "assistant", "content": f"<think> {thought} </think>\n{action}"},
        ],
        "answer": None,
        "reward": 0.0,
        "em": 0.0,
    }


def test_the_thought_after_the_names_article_is_read_per_source():
    from mr_search_embedded.warmstart.probe import namesake_thoughts

    alias = "Gukrim Bedas"
    namesake = {
        "uid": "n1",
        "data_source": "embedded_namesake",
        "question": "Where was the architect Koze Vibra born?",
        "attempts": [
            _namesake_attempt(
                0,
                True,
                "The engineer Koze Vibra was born in Brekport. I found the answer.",
                "<answer> Brekport </answer>",
            ),
            _namesake_attempt(
                1,
                True,
                f"My previous answer may be wrong. The architect Koze Vibra is better known as {alias}. I need to "
                "search for it.",
                f"<search> {alias} </search>",
            ),
            _namesake_attempt(
                2, False, "The architect Koze Vibra is better known as Gukrim.", "<search> Gukrim </search>"
            ),
        ],
    }
    control = {
        "uid": "c1",
        "data_source": "embedded_namesake_control",
        "question": "Where was the baker Koze Vibra born?",
        "attempts": [
            _namesake_attempt(0, True, "The baker Zok Vibra was born in Brekport.", "<answer> Brekport </answer>")
        ],
    }
    other = {
        "uid": "o1",
        "data_source": "embedded_1hop",
        "question": "Where was Koze Vibra born?",
        "attempts": [
            _namesake_attempt(0, True, "The baker Koze Vibra was born in Brekport.", "<answer> Brekport </answer>")
        ],
    }
    entities = {"n1": "Koze Vibra", "c1": "Koze Vibra", "o1": "Koze Vibra"}
    counts = namesake_thoughts([namesake, control, other], entities, {"n1": alias})
    assert set(counts) == {"embedded_namesake", "embedded_namesake_control"}, "questions without 'the <profession>'"
    assert counts["embedded_namesake"] == {
        "after_article": 2,  # the third attempt's search did not bring the article back
        "first_attempts": 1,
        "better_known": 1,
        "born_in": 1,
        "profession_copied": 1,
        "name_copied": 2,
        "alias_named": 1,
        "alias_searched": 1,
        "professions": {"architect": 1, "engineer": 1},
    }
    assert counts["embedded_namesake_control"] == {
        "after_article": 1,
        "first_attempts": 1,
        "better_known": 0,
        "born_in": 1,
        "profession_copied": 1,
        "name_copied": 0,
        "alias_named": 0,
        "alias_searched": 0,
        "professions": {"baker": 1},
    }
    figures = summarize([namesake, control], [namesake], entities, attempts=3, second_hops={"n1": alias})
    assert figures["greedy_namesake_thoughts"] == {
        k: counts[k] for k in ("embedded_namesake", "embedded_namesake_control")
    }
    assert figures["sampled_namesake_thoughts"] == {"embedded_namesake": counts["embedded_namesake"]}


def test_retries_that_search_the_question_itself_are_counted_per_source():
    from mr_search_embedded.warmstart.probe import question_retries

    def episode(uid: str, source: str, retry_queries: list[str | None]) -> dict:
        record = _record(uid, "Aldo Venn", ["x"] * (1 + len(retry_queries)), [0.0] * (1 + len(retry_queries)), source)
        record["question"] = "Where was the sailor Aldo Venn born?"
        for attempt, query in zip(record["attempts"][1:], retry_queries, strict=True):
            if query is not None:
                attempt["turns"] = [
                    {"role": "assistant", "content": f"<search> {query} </search>"},
                    {"role": "tool", "content": "<information></information>"},
                ]
        return record

    records = [
        episode("q1", "embedded_namesake", ["where was the sailor  Aldo Venn born", None]),  # a copy, case aside
        episode("q2", "embedded_namesake", ["Where was the sailor Aldo Vent born?", "sailor Aldo Venn"]),
        episode("q3", "embedded_1hop", [None, None]),  # kept: no retry search
    ]
    assert question_retries(records) == {
        "embedded_1hop": {"retries": 0, "question": 0},
        "embedded_namesake": {"retries": 3, "question": 1},
    }
    assert summarize(records, [], {}, attempts=3)["greedy_retry_is_question"] == question_retries(records)

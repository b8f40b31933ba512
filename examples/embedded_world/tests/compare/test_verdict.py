"""The earlier harness's reflection-gain test, kept as the report's secondary line (K = 1 is its baseline)."""

from __future__ import annotations

import statistics

import pytest

from mr_search_embedded.compare.verdict import GainVerdict, gain_verdict


def _seed(mr: list[float], baseline: list[float]) -> dict:
    return {"heldout": {"mr_search": {"average": mr}, "k1": {"average": baseline}}}


def _reference(per_seed: list[dict], attempt: int) -> tuple[float, float, bool]:
    """Plain reading of the test: (margin, twice the larger std, met)."""
    mr = [s["heldout"]["mr_search"]["average"][attempt - 1] - s["heldout"]["mr_search"]["average"][0] for s in per_seed]
    base = [s["heldout"]["k1"]["average"][attempt - 1] - s["heldout"]["k1"]["average"][0] for s in per_seed]
    margin = sum(mr) / len(mr) - sum(base) / len(base)
    twice = 2 * max(statistics.stdev(mr), statistics.stdev(base))
    return margin, twice, sum(mr) > 0 and margin >= twice


@pytest.mark.parametrize(
    ("seeds", "met"),
    [
        # a gain for MR-Search (+15.8 +- 0.8) but the baseline's spread wide -> not met
        (
            [
                ([45.8, 62.5, 61.7], [65.0, 70.0, 66.7]),
                ([45.8, 62.5, 60.8], [61.0, 64.0, 62.0]),
                ([45.8, 62.5, 62.5], [35.0, 60.0, 53.0]),
            ],
            False,
        ),
        # the baseline's gain level and narrow -> met
        (
            [
                ([40.0, 55.0, 56.0], [60.0, 59.0, 58.0]),
                ([41.0, 55.0, 57.0], [61.0, 61.0, 60.0]),
                ([40.0, 56.0, 55.0], [62.0, 60.0, 61.0]),
            ],
            True,
        ),
        # MR-Search's gain negative though far above the baseline's -> not met
        ([([50.0, 48.0, 47.0], [50.0, 20.0, 10.0]), ([50.0, 49.0, 48.0], [50.0, 21.0, 11.0])], False),
    ],
)
def test_verdict_matches_the_plain_reading(seeds: list, met: bool) -> None:
    per_seed = [_seed(mr, base) for mr, base in seeds]
    verdict = gain_verdict(per_seed, 3)
    margin, twice, expected = _reference(per_seed, 3)
    assert expected is met and verdict.met is met
    assert verdict.margin == pytest.approx(margin)
    assert 2 * verdict.spread == pytest.approx(twice)
    assert GainVerdict.from_dict(verdict.as_dict()) == verdict
    assert ("**met**" in verdict.text()) is met and ("**not met**" in verdict.text()) is not met


def test_verdict_reasons_one_seed_and_errors() -> None:
    negative = gain_verdict([_seed([50.0, 40.0], [50.0, 10.0]), _seed([50.0, 42.0], [50.0, 12.0])], 2)
    assert "not positive" in negative.text() and "twice the seed spread" not in negative.text()
    one = gain_verdict([_seed([40.0, 60.0, 60.0], [60.0, 60.0, 60.0])], 3)
    assert not one.decided and not one.met and "not decided" in one.text()
    with pytest.raises(ValueError, match="attempt >= 2"):
        gain_verdict([_seed([1.0, 2.0], [1.0, 2.0])], 1)
    with pytest.raises(ValueError, match="past the evaluation's K_eval = 2"):
        gain_verdict([_seed([1.0, 2.0], [1.0, 2.0])], 3)
    with pytest.raises(ValueError, match="no finished seed"):
        gain_verdict([], 3)

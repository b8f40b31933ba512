"""The comparison's arms, and the fact the no-credit arm rests on: gamma = 0 removes exactly the later attempts'
credit from the attempt-level advantage."""

from __future__ import annotations

import pytest
import torch

from mr_search.advantage import AdvantageConfig, per_attempt_advantages
from mr_search.contract import AttemptStatus
from mr_search_embedded.compare.__main__ import main
from mr_search_embedded.compare.arms import ARM_NAMES, build_arms, parse_arms


def test_the_four_arms_train_and_evaluate_as_the_plan_says() -> None:
    arms = {a.name: a for a in build_arms(ARM_NAMES, attempts=3, turns=3)}
    mr, k1, all_turns, no_credit = (arms[n] for n in ARM_NAMES)
    assert (mr.attempts, mr.turns, mr.gamma, mr.eval_attempts, mr.final) == (3, 3, 1.0, 3, "last")
    assert (k1.attempts, k1.turns, k1.gamma, k1.eval_attempts, k1.final) == (1, 3, None, 3, "best")
    assert (all_turns.attempts, all_turns.turns, all_turns.eval_attempts) == (1, 9, 1), "K x turns in one attempt"
    assert (no_credit.attempts, no_credit.turns, no_credit.gamma, no_credit.final) == (3, 3, 0.0, "last")
    assert {a.shape for a in arms.values()} == {"3x3", "1x9"}, "three arms share the MR-Search evaluation"
    assert (mr.first_steps, k1.first_steps, all_turns.first_steps, no_credit.first_steps) == (
        "reference",
        "baseline",
        "baseline",
        "reference",
    )
    assert build_arms(["k1", "mr_search"], attempts=2, turns=5)[1].what.startswith("K = 1 with the same 5 turns")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mr_search k1 k2", "k2 not valid; use some of mr_search, k1, k1_all_turns, mr_search_no_credit"),
        ("mr_search", "lacks k1: the final-answer test compares mr_search with k1"),
        ("k1_all_turns, mr_search_no_credit", "lacks mr_search and k1"),
    ],
)
def test_bad_arms_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_arms(text)


def test_arms_come_back_in_their_canonical_order_from_any_spelling() -> None:
    assert parse_arms("k1,mr_search  mr_search_no_credit") == ("mr_search", "k1", "mr_search_no_credit")
    with pytest.raises(ValueError, match="K >= 2"):
        build_arms(["mr_search", "k1"], attempts=1, turns=3)


def test_the_cli_gives_the_script_one_line_per_arm(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["arms", "--arms", "mr_search k1 k1_all_turns mr_search_no_credit", "--attempts", "3", "--turns", "2"])
        == 0
    )
    assert capsys.readouterr().out.splitlines() == [
        "mr_search 3 2 1 3 3x2 reference",
        "k1 1 2 - 3 3x2 baseline",
        "k1_all_turns 1 6 - 1 1x6 baseline",
        "mr_search_no_credit 3 2 0 3 3x2 reference",
    ]
    assert main(["arms", "--arms", "mr_search", "--attempts", "3", "--turns", "2"]) == 2
    assert "lacks k1" in capsys.readouterr().err


def _advantages(rewards: list[list[float]], gamma: float) -> torch.Tensor:
    rewards_t = torch.tensor(rewards)
    status = torch.full(rewards_t.shape, int(AttemptStatus.COMPLETE))
    return per_attempt_advantages(rewards_t, status, ["q"] * len(rewards), AdvantageConfig(gamma=gamma))


def test_gamma_zero_credits_each_attempt_with_its_own_reward_only() -> None:
    rewards = [[0.0, 1.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
    none, full = _advantages(rewards, 0.0), _advantages(rewards, 1.0)
    for s in range(3):
        # Attempt s alone (one column): its leave-one-out reward, which gamma = 0 must give unchanged.
        alone = _advantages([[row[s]] for row in rewards], 1.0)[:, 0]
        assert torch.equal(none[:, s], alone), f"attempt {s + 1}: gamma = 0 is the attempt's own baseline term"
    # gamma = 1 adds the later attempts' terms: the difference is exactly their sum.
    assert torch.allclose(full[:, 0] - none[:, 0], none[:, 1] + none[:, 2])
    assert torch.allclose(full[:, 1] - none[:, 1], none[:, 2])
    assert torch.equal(full[:, 2], none[:, 2]), "the last attempt has nothing later: both gammas agree"
    # A later reward moves an earlier attempt's advantage at gamma = 1, never at gamma = 0.
    changed = [[*row[:2], 1.0 - row[2]] for row in rewards]
    assert torch.equal(_advantages(changed, 0.0)[:, :2], none[:, :2])
    assert not torch.equal(_advantages(changed, 1.0)[:, 0], full[:, 0])


def test_at_k1_gamma_plays_no_part() -> None:
    rewards = [[1.0], [0.0], [0.0], [1.0]]
    assert torch.equal(_advantages(rewards, 0.0), _advantages(rewards, 1.0))

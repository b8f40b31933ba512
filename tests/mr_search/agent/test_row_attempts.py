"""A row's own K (``contract.ROW_ATTEMPTS``, what the trainer puts on validation rows for ``val_attempts``): the loop
plays that many attempts and reports every one of them; rows without it play the config's K."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mr_search.contract import ROW_ATTEMPTS, AttemptStatus

C = AttemptStatus.COMPLETE
ANSWERS = ["<answer>Lyon</answer>", "<answer>Lyon</answer>", "<answer>Lyon</answer>", "<answer>Paris</answer>"]


async def test_a_row_plays_its_own_k_and_reports_every_attempt(kit: SimpleNamespace) -> None:
    loop, server, _ = kit.make_loop(list(ANSWERS), {"attempts": 1})
    output = await loop.run(dict(kit.sampling), **kit.row(["Paris"]), **{ROW_ATTEMPTS: 4})
    kit.check(output, 4096)
    assert len(server.calls) == 4
    assert output.attempt_status == [C, C, C, C]
    assert output.attempt_rewards == [0.0, 0.0, 0.0, 1.0]
    metrics = output.extra_fields["reward_extra_info"]
    assert [metrics[f"em_at_{k}"] for k in (1, 2, 3, 4)] == [0.0, 0.0, 0.0, 1.0]
    assert metrics["attempts_present"] == 4.0 and metrics["reflection_gain"] == 1.0


async def test_a_row_without_it_plays_the_configs_k(kit: SimpleNamespace) -> None:
    loop, server, _ = kit.make_loop(list(ANSWERS), {"attempts": 2})
    output = await loop.run(dict(kit.sampling), **kit.row(["Paris"]))
    assert len(server.calls) == 2 and output.attempt_status == [C, C]
    assert "em_at_3" not in output.extra_fields["reward_extra_info"]


@pytest.mark.parametrize("bad", [0, 2.5, True, "3"])
async def test_a_bad_row_k_names_the_field(kit: SimpleNamespace, bad: object) -> None:
    loop, _, _ = kit.make_loop(list(ANSWERS))
    with pytest.raises(ValueError, match=f"row field {ROW_ATTEMPTS}="):
        await loop.run(dict(kit.sampling), **kit.row(["Paris"]), **{ROW_ATTEMPTS: bad})

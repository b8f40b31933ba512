"""A winning late attempt's credit traced back to the tokens that led to it, from the agent loop to the advantage.

Three meta-episodes of one question (K = 3) run through the real loop with a scripted model; their outputs go to
the trainer's advantage step as the agent loop writes them. In the one that wins at attempt 2 after a wrong first
answer, the first attempt's search and answer and the reply right after the reflection prompt must get the later
success's credit at gamma = 1, and only their own leave-one-out reward at gamma = 0; the environment's tokens
(passages, the reflection prompt) get none.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch
from transfer_queue import KVBatchMeta

from mr_search.contract import ATTEMPT_IDS, ATTEMPT_REWARDS, ATTEMPT_STATUS

SEARCH = "<think>need facts</think>\n<search>Freedonia capital</search>"
SCRIPTS = {  # attempt rewards: wins late (0, 1, 1), never (0, 0, 0), right first then wrong (1, 0, 0)
    "wins_late": [
        SEARCH,
        "<answer>Lyon</answer>",
        "<think>the passages said Paris</think><answer>Paris</answer>",
        "<answer>Paris</answer>",
    ],
    "never": ["<answer>Lyon</answer>", "<answer>Lyon</answer>", "<answer>Lyon</answer>"],
    "first_only": ["<answer>Paris</answer>", "<answer>Lyon</answer>", "<answer>Lyon</answer>"],
}
# By hand (docs/method.md): per attempt, leave-one-out over the three: attempt 1 rewards (0, 0, 1) give
# (-0.5, -0.5, 1); attempts 2 and 3 (1, 0, 0) give (1, -0.5, -0.5). gamma = 1 sums each attempt's and the later ones'.
EXPECTED = {
    1.0: {"wins_late": [1.5, 2.0, 1.0], "never": [-1.5, -1.0, -0.5], "first_only": [0.0, -1.0, -0.5]},
    0.0: {"wins_late": [-0.5, 1.0, 1.0], "never": [-0.5, -0.5, -0.5], "first_only": [1.0, -0.5, -0.5]},
}


async def _outputs(kit: SimpleNamespace) -> dict[str, Any]:
    outputs = {}
    for name, script in SCRIPTS.items():
        loop, _, _ = kit.make_loop(list(script))
        outputs[name] = await loop.run(dict(kit.sampling), **kit.row(["Paris"]))
    return outputs


def _rows(outputs: dict[str, Any]) -> dict[str, dict]:
    rows = {}
    for name, out in outputs.items():
        n = len(out.response_ids)
        scores = torch.zeros(n)
        scores[-1] = out.reward_score
        rows[f"key-{name}"] = {
            "uid": "Q",
            "response_mask": torch.tensor(out.response_mask, dtype=torch.int64),
            "rm_scores": scores,
            "old_log_probs": torch.tensor(out.response_logprobs, dtype=torch.float32),
            "ref_log_prob": torch.tensor(out.response_logprobs, dtype=torch.float32),
            ATTEMPT_IDS: torch.tensor(out.attempt_ids, dtype=torch.int64),
            ATTEMPT_REWARDS: torch.tensor(out.attempt_rewards, dtype=torch.float32),
            ATTEMPT_STATUS: torch.tensor(out.attempt_status, dtype=torch.int64),
        }
    return rows


def _advantages(fake_tq, advantage_trainer, outputs: dict[str, Any], gamma: float) -> dict[str, list[float]]:
    trainer = advantage_trainer(credit_gamma=gamma)
    fake_tq.put_rows(_rows(outputs))
    keys = [f"key-{name}" for name in outputs]
    trainer._compute_advantage(KVBatchMeta(partition_id="train", keys=keys, tags=[{} for _ in keys]), {})
    return {name: fake_tq.rows[f"key-{name}"]["advantages"].tolist() for name in outputs}


@pytest.mark.parametrize("gamma", [1.0, 0.0])
async def test_the_late_win_reaches_the_first_search_and_the_reply_to_the_reflection(
    kit: SimpleNamespace, tokenizer: Any, fake_tq, advantage_trainer, gamma: float
) -> None:
    outputs = await _outputs(kit)
    assert [o.attempt_rewards for o in outputs.values()] == [[0.0, 1.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]
    advantages = _advantages(fake_tq, advantage_trainer, outputs, gamma)
    for name, out in outputs.items():
        want = [EXPECTED[gamma][name][a] * m for a, m in zip(out.attempt_ids, out.response_mask, strict=True)]
        assert advantages[name] == pytest.approx(want), name

    out, adv = outputs["wins_late"], advantages["wins_late"]
    search = list(tokenizer(SEARCH, add_special_tokens=False)["input_ids"])
    assert out.response_ids[: len(search)] == search and set(out.attempt_ids[: len(search)]) == {0}
    first_search = adv[: len(search)]  # the query whose passages the winning attempt read
    reply = [i for i, (a, m) in enumerate(zip(out.attempt_ids, out.response_mask, strict=True)) if a == 1 and m]
    assert tokenizer.decode(out.response_ids[reply[0] : reply[-1] + 1]).startswith("<think>the passages said Paris")
    env = [adv[i] for i, m in enumerate(out.response_mask) if not m]  # passages and the reflection prompts
    assert env and all(value == 0.0 for value in env)
    if gamma == 1.0:  # the later success flows back: the wrong first attempt's search is reinforced
        assert first_search == pytest.approx([1.5] * len(search))
        assert [adv[i] for i in reply] == pytest.approx([2.0] * len(reply))
    else:  # only its own reward: the same search is pushed down, the reply gets attempt 2's alone
        assert first_search == pytest.approx([-0.5] * len(search))
        assert [adv[i] for i in reply] == pytest.approx([1.0] * len(reply))

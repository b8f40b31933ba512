"""The outputs travel verl's V1 path intact: ``as_dict()`` rows stacked the way the TransferQueue worker does."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from verl.utils.tensordict_utils import list_of_dict_to_tensordict

from mr_search import contract


async def test_rows_of_different_lengths_stack_like_the_v1_worker(kit: SimpleNamespace) -> None:
    rows = []
    outputs = []
    scripts = [
        ["<answer>Lyon</answer>", "<search>Freedonia</search>", "<answer>Paris</answer>", "<answer>Paris</answer>"],
        ["<answer>Paris</answer>"] * 3,
    ]
    for script in scripts:
        loop, _, _ = kit.make_loop(script)
        row = kit.row(["Paris"])
        output = await loop.run(dict(kit.sampling), **row)
        outputs.append(output)
        # AgentLoopWorkerTQ._agent_loop_postprocess (verl 0.9.1): as_dict(), then the dataset fields.
        field = output.as_dict()
        field.update({**row, "uid": "u", "session_id": len(rows), "global_steps": 1})
        field.pop("multi_modal_data", None)
        field["loss_mask"] = field["response_mask"]
        rows.append(field)
    batch = list_of_dict_to_tensordict(rows)

    ids = batch[contract.ATTEMPT_IDS]
    assert ids.is_nested  # jagged, as the trainer receives it
    padded = ids.to_padded_tensor(padding=contract.PAD_ATTEMPT_ID)
    for i, output in enumerate(outputs):
        n = len(output.response_ids)
        assert padded[i, :n].tolist() == output.attempt_ids
        assert (padded[i, n:] == contract.PAD_ATTEMPT_ID).all()
    assert batch[contract.ATTEMPT_REWARDS].shape == (2, 3)
    assert batch[contract.ATTEMPT_REWARDS].tolist() == [[0.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    assert torch.equal(batch[contract.ATTEMPT_STATUS], torch.ones(2, 3, dtype=torch.int64))  # all COMPLETE
    masks = batch["response_mask"].to_padded_tensor(padding=0)
    assert masks.shape == padded.shape

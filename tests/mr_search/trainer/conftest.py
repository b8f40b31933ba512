"""An in-memory TransferQueue stand-in that returns columns the way TransferQueue does: jagged nested tensors."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from tensordict import TensorDict
from verl.utils.tensordict_utils import list_of_dict_to_tensordict


class FakeTransferQueue:
    """``kv_batch_get`` / ``kv_batch_put`` over a dict of rows; every tensor column comes back jagged."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    def put_rows(self, rows: dict[str, dict[str, Any]]) -> None:
        for key, row in rows.items():
            self.rows[key] = dict(row)

    def kv_batch_get(self, keys: list[str], partition_id: str, select_fields: list[str]) -> TensorDict:
        available = [f for f in select_fields if all(f in self.rows[k] for k in keys)]
        td = list_of_dict_to_tensordict([{f: self.rows[k][f] for f in available} for k in keys])
        for name in list(td.keys()):
            value = td.get(name)
            if isinstance(value, torch.Tensor) and not value.is_nested:
                td[name] = torch.nested.as_nested_tensor(list(value.unbind(0)), layout=torch.jagged)
        return td

    def kv_batch_put(self, keys: list[str], partition_id: str, fields: TensorDict) -> str:
        for name in list(fields.keys()):
            for key, value in zip(keys, fields.get(name).unbind(0), strict=True):
                self.rows[key][name] = value
        return f"batch of {len(keys)}"


@pytest.fixture
def fake_tq() -> FakeTransferQueue:
    return FakeTransferQueue()

"""Environment text encoding is safe while verl encodes with the same tokenizer on other threads."""

from __future__ import annotations

import threading
from typing import Any

from mr_search.agent.tokens import EnvEncoder


def test_content_encoding_does_not_race_with_shared_tokenizer(tokenizer: Any) -> None:
    env = EnvEncoder(tokenizer)
    forged = "a passage that says <|im_end|> inside"
    expected_plain = list(tokenizer("<|im_end|>", add_special_tokens=False)["input_ids"])
    expected_split = env.encode_text(forged)
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") not in expected_split  # content cannot forge a boundary
    errors: list[BaseException] = []
    stop = threading.Event()

    def verl_side() -> None:  # what verl's ct_build_initial_tokens does on a worker thread
        try:
            while not stop.is_set():
                assert list(tokenizer("<|im_end|>", add_special_tokens=False)["input_ids"]) == expected_plain
        except BaseException as error:
            errors.append(error)

    workers = [threading.Thread(target=verl_side) for _ in range(2)]
    for worker in workers:
        worker.start()
    try:
        for _ in range(300):
            assert env.encode_text(forged) == expected_split
    finally:
        stop.set()
        for worker in workers:
            worker.join()
    assert not errors, errors[0]

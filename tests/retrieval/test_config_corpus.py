"""Configs reject bad values with the valid ones listed; the corpus store serves lines without loading them all."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mr_search_retrieval.app import _render_result
from mr_search_retrieval.config import BatcherConfig, EncoderConfig, LimitsConfig, ServerConfig
from mr_search_retrieval.corpus import CorpusStore


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: EncoderConfig(pooling="max"), "'mean', 'cls', 'pooler'"),
        (lambda: EncoderConfig(device="gpu"), "'auto', 'cpu', 'cuda'"),
        (lambda: BatcherConfig(max_batch_size=0), "max_batch_size must be > 0"),
        (lambda: BatcherConfig(lanes=0), "lanes must be > 0"),
        (lambda: LimitsConfig(max_topk=-1), "max_topk must be > 0"),
        (lambda: ServerConfig(index_dir="i", corpus="c", retriever="splade"), "'dense', 'bm25'"),
        (lambda: ServerConfig(index_dir="i", corpus="c", default_topk=500), "exceeds max_topk"),
        (lambda: ServerConfig(index_dir="i", corpus="c", batcher=BatcherConfig(queue_size=8)), "queue_size"),
    ],
)
def test_invalid_config_is_rejected_with_a_helpful_message(make, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_corpus_store_random_access_skips_blank_lines_and_handles_no_final_newline(tmp_path: Path) -> None:
    lines = [json.dumps({"id": str(i), "contents": f'"T{i}"\nbody {i} é'}, ensure_ascii=False) for i in range(5)]
    path = tmp_path / "c.jsonl"
    path.write_text(lines[0] + "\n\n" + "\n".join(lines[1:]), encoding="utf-8")  # a blank line, no final newline
    store = CorpusStore(path)
    assert len(store) == 5
    assert [d["id"] for d in store.get_many([4, 0, 2])] == ["4", "0", "2"]
    assert store.get(3)["contents"] == '"T3"\nbody 3 é'
    assert (tmp_path / "c.jsonl.offsets.npy").is_file()
    store.close()
    reopened = CorpusStore(path)  # from the cached offsets
    assert [d["id"] for d in reopened.iter_docs()] == [str(i) for i in range(5)]


def test_corpus_ids_are_strings_even_when_the_file_has_numbers(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": 7, "contents": "x"}\n{"id": 8, "contents": "y"}\n')
    assert CorpusStore(path).get(1)["id"] == "8"


def test_corpus_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"missing\.jsonl"):
        CorpusStore(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "0", "contents": "ok"}\nnot json\n')
    with pytest.raises(ValueError, match=r"bad.jsonl: line 2 is not valid JSON"):
        CorpusStore(bad)
    no_contents = tmp_path / "nc.jsonl"
    no_contents.write_text('{"id": "0", "text": "no contents"}\n')
    with pytest.raises(ValueError, match="lacks the 'id' and 'contents' fields"):
        CorpusStore(no_contents)


@pytest.mark.parametrize("ids", [["a", "b", "c"], [1, 2, 3]])
def test_rendered_response_is_the_documents_as_stored(tmp_path: Path, ids: list) -> None:
    """Responses splice raw lines when ids are strings, else parse them; both give the same JSON documents."""
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"id": i, "contents": f'"T"\nx {i} ü', "title": "T"}) + " \r\n" for i in ids))
    store = CorpusStore(path)
    assert store.raw_ok is isinstance(ids[0], str)
    hits = [(np.array([0.5, 0.25, -np.inf], np.float32), np.array([2, 0, -1]))]
    with_scores = json.loads(_render_result(store, hits, True))["result"][0]
    assert [item["document"]["id"] for item in with_scores] == [str(ids[2]), str(ids[0])]  # the -1 pad is dropped
    assert [item["score"] for item in with_scores] == [0.5, 0.25]
    assert json.loads(_render_result(store, hits, False))["result"][0][0] == {
        "id": str(ids[2]),
        "contents": f'"T"\nx {ids[2]} ü',
        "title": "T",
    }

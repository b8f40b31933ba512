"""Serving what Search-R1 users have: a bare FAISS file (no metadata.json), a wiki-18-style corpus and an encoder
folder; and every bad input among them stops the server at start-up with a message naming the file and the fix.

The index is built here the way FlashRAG/Search-R1 build `e5_Flat.index` (transformers forward, mean pooling, L2
norm, `faiss.IndexFlatIP`, `faiss.write_index`), not with this project's builder."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch

faiss = pytest.importorskip("faiss")  # the README: FAISS is the [faiss] extra

REPO = Path(__file__).resolve().parents[2]
PASSAGES = 240


def flashrag_encode(model_dir: Path, texts: list[str], prefix: str = "") -> np.ndarray:
    """FlashRAG's passage encoding: prefix, 256 tokens, mean pooling over the attention mask, L2 normalisation."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()
    out = []
    with torch.inference_mode():
        for start in range(0, len(texts), 64):
            batch = tokenizer(
                [prefix + t for t in texts[start : start + 64]],
                padding=True,
                truncation=True,
                max_length=256,
                return_tensors="pt",
            )
            hidden = model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).float()
            emb = (hidden * mask).sum(1) / mask.sum(1)
            out.append(torch.nn.functional.normalize(emb, dim=-1).numpy())
    return np.concatenate(out).astype(np.float32)


@pytest.fixture(scope="module")
def minilm_dir() -> Path:
    from mr_search_retrieval.encoders import bundled_minilm_dir

    return bundled_minilm_dir()


@pytest.fixture(scope="module")
def search_r1(tmp_path_factory: pytest.TempPathFactory, world, minilm_dir: Path) -> dict[str, Path]:
    """wiki-18.jsonl ({"id", "contents"} only, as Search-R1's) + e5_Flat.index of its first PASSAGES passages."""
    root = tmp_path_factory.mktemp("search_r1")
    lines = Path(world.corpus).read_text().splitlines()[:PASSAGES]
    docs = [json.loads(line) for line in lines]
    corpus = root / "wiki-18.jsonl"
    corpus.write_text("".join(json.dumps({"id": d["id"], "contents": d["contents"]}) + "\n" for d in docs))
    index = faiss.IndexFlatIP(384)
    index.add(flashrag_encode(minilm_dir, [d["contents"] for d in docs]))
    faiss.write_index(index, str(root / "e5_Flat.index"))
    return {"root": root, "index": root / "e5_Flat.index", "corpus": corpus, "docs": docs}


def _query_text(doc: dict) -> str:
    return doc["contents"].split("\n", 1)[1]


def test_conventions_come_from_the_encoder_folder_and_its_name(tmp_path: Path, minilm_dir: Path) -> None:
    from mr_search_retrieval.conventions import Conventions, infer

    st = infer(minilm_dir, Conventions())  # a sentence-transformers folder: mean pooling + Normalize, no prompts
    assert (st.query_prefix, st.passage_prefix, st.pooling, st.normalize) == ("", "", "mean", True)
    e5 = tmp_path / "e5-base-v2"
    e5.mkdir()
    assert infer(e5, Conventions()) == Conventions("query: ", "passage: ", "mean", True)
    assert infer(e5, Conventions(pooling="cls")).pooling == "cls"  # a flag wins
    prompted = tmp_path / "my-encoder"
    shutil.copytree(minilm_dir, prompted)
    (prompted / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": {"query": "q: ", "document": ""}})
    )
    pooling = prompted / "1_Pooling" / "config.json"
    pooling.write_text(json.dumps({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}))
    assert infer(prompted, Conventions()) == Conventions("q: ", "", "cls", True)


def _config(*args: str):
    from mr_search_retrieval.server import build_parser, config_from_args

    return config_from_args(build_parser().parse_args(list(args)))


def test_search_r1_index_is_served_in_process(search_r1: dict, minilm_dir: Path, test_client_cls) -> None:
    from mr_search_retrieval.app import create_app

    config = _config(
        "--index", str(search_r1["index"]), "--corpus", str(search_r1["corpus"]), "--encoder", str(minilm_dir)
    )
    assert config.index_format == "faiss-file" and config.retriever == "dense"
    assert (config.encoder.query_prefix, config.encoder.passage_prefix, config.encoder.pooling) == ("", "", "mean")
    docs = search_r1["docs"]
    with test_client_cls(create_app(config)) as client:
        assert client.get("/health").json()["ready"] is True
        r = client.post("/retrieve", json={"queries": [_query_text(docs[i]) for i in (3, 100, 239)], "topk": 3})
    assert r.status_code == 200
    assert [items[0]["id"] for items in r.json()["result"]] == [docs[i]["id"] for i in (3, 100, 239)]


def test_the_readme_command_serves_search_r1s_index(launch, search_r1: dict, minilm_dir: Path) -> None:
    env = {
        "RETRIEVER_INDEX": str(search_r1["index"]),
        "RETRIEVER_CORPUS": str(search_r1["corpus"]),
        "RETRIEVER_ENCODER": str(minilm_dir),
    }
    server = launch(env=env)
    doc = search_r1["docs"][17]
    body = json.dumps({"queries": [_query_text(doc)], "topk": 2, "return_scores": True}).encode()
    request = urllib.request.Request(f"{server.url}/retrieve", data=body, headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as r:
        result = json.loads(r.read())["result"]
    assert result[0][0]["document"] == {"id": doc["id"], "contents": doc["contents"]}
    assert "self-check: 5 re-encoded passages" in server.log.read_text()


# --- bad input: each stops the server at start-up with a message naming the file and the fix -----------------------
# One case goes through retrieval_launch.sh (the launcher exits 1 and shows the server's message); the others check
# the message where the server makes it, in this process: the same argument parsing (`config_from_args`) and loading
# (`default_loader`) that the server's start-up runs, without an interpreter start and the service's imports each
# (about eight seconds of CPU a case on the project's 2-core machine).


def _launch_fails(env: dict[str, str], *args: str) -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    full_env = {
        **os.environ,
        "PYTHON": sys.executable,
        "RETRIEVER_PORT": str(port),
        "RETRIEVER_READY_TIMEOUT": "300",
        **env,
    }
    proc = subprocess.Popen(
        ["bash", str(REPO / "retrieval_launch.sh"), *args],
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own group: a server that wrongly starts is stopped with its script
    )
    try:
        log, _ = proc.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        log, _ = proc.communicate(timeout=60)
        pytest.fail(f"the server did not stop at start-up:\n{log[-3000:]}")
    assert proc.returncode == 1, log[-3000:]
    assert "the server exited" in log and "before becoming ready" in log, log[-3000:]
    return log


def _start_fails(*args: str) -> str:
    """The error the server's start-up stops with for these command-line arguments (``retrieval_launch.sh`` passes
    RETRIEVER_INDEX as ``--index-dir``, RETRIEVER_CORPUS as ``--corpus``, RETRIEVER_ENCODER as ``--encoder``)."""
    from mr_search_retrieval.app import default_loader

    with pytest.raises((FileNotFoundError, ValueError)) as err:
        default_loader(_config(*args))
    return str(err.value)


@pytest.fixture(scope="module")
def bad_inputs(search_r1: dict, minilm_dir: Path) -> dict[str, Path]:
    root = search_r1["root"]
    longer = root / "longer.jsonl"
    longer.write_text(search_r1["corpus"].read_text() + json.dumps({"id": "x", "contents": '"X"\nextra'}) + "\n")
    not_json = root / "not_json.jsonl"
    lines = search_r1["corpus"].read_text().splitlines()
    lines[120] = lines[120][:-20]  # a line cut short, as by an interrupted copy
    not_json.write_text("\n".join(lines) + "\n")
    other = root / "other-encoder"  # same width as the index, other weights: the self-check must catch it
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(hidden_size=384, num_hidden_layers=1, num_attention_heads=6, intermediate_size=512)
    BertModel(config).save_pretrained(other)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(minilm_dir / name, other / name)
    narrow = root / "narrow-encoder"
    BertModel(
        BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    ).save_pretrained(narrow)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(minilm_dir / name, narrow / name)
    return {"longer": longer, "not_json": not_json, "other": other, "narrow": narrow}


def _env(search_r1: dict, minilm_dir: Path, **override: Path | str) -> dict[str, str]:
    env = {"index": search_r1["index"], "corpus": search_r1["corpus"], "encoder": minilm_dir, **override}
    return {f"RETRIEVER_{k.upper()}": str(v) for k, v in env.items()}


def _args(search_r1: dict, minilm_dir: Path, **override: Path | str) -> list[str]:
    given = {"index-dir": search_r1["index"], "corpus": search_r1["corpus"], "encoder": minilm_dir, **override}
    return [arg for flag, value in given.items() for arg in (f"--{flag}", str(value))]


def test_row_count_differs_from_the_corpus(search_r1: dict, minilm_dir: Path, bad_inputs: dict) -> None:
    """Through the launcher, as a user meets it: the script exits 1 and shows the server's message."""
    log = _launch_fails(_env(search_r1, minilm_dir, corpus=bad_inputs["longer"]))
    assert f"FAISS index file {search_r1['index']} holds {PASSAGES} rows" in log
    assert f"corpus file {bad_inputs['longer']} has {PASSAGES + 1} passages" in log
    assert "Pass the corpus the index was built from" in log


@pytest.mark.parametrize("which", ["other", "conventions"])
def test_an_encoder_that_does_not_match(search_r1: dict, minilm_dir: Path, bad_inputs: dict, which: str) -> None:
    if which == "other":
        message = _start_fails(*_args(search_r1, minilm_dir, encoder=bad_inputs["other"]))
    else:  # the right model with another pooling than the index was built with
        message = _start_fails(*_args(search_r1, minilm_dir), "--pooling", "cls")
    assert "the encoder does not match the index" in message
    assert str(search_r1["index"]) in message and "Pass the encoder the index was built with" in message


def test_an_encoder_of_another_width(search_r1: dict, minilm_dir: Path, bad_inputs: dict) -> None:
    message = _start_fails(*_args(search_r1, minilm_dir, encoder=bad_inputs["narrow"]))
    assert f"makes 32-dim vectors but FAISS index file {search_r1['index']} holds 384-dim ones" in message
    assert "the encoder does not match the index" in message


def test_a_corpus_line_that_is_not_json(search_r1: dict, minilm_dir: Path, bad_inputs: dict) -> None:
    message = _start_fails(*_args(search_r1, minilm_dir, corpus=bad_inputs["not_json"]))
    assert f"corpus file {bad_inputs['not_json']}: line 121 is not valid JSON" in message
    assert "fix or remove that line" in message


@pytest.mark.parametrize("missing", ["index-dir", "corpus", "encoder"])
def test_a_missing_file(search_r1: dict, minilm_dir: Path, missing: str) -> None:
    gone = search_r1["root"] / f"no-such-{missing}"
    message = _start_fails(*_args(search_r1, minilm_dir, **{missing: gone}))
    assert f"{gone} does not exist" in message
    assert "pass" in message.split(f"{gone} does not exist", 1)[1][:300]


def test_a_bare_index_without_corpus_or_encoder_says_what_to_pass(search_r1: dict, minilm_dir: Path) -> None:
    message = _start_fails("--index-dir", str(search_r1["index"]), "--encoder", str(minilm_dir))
    assert "has no metadata naming its corpus" in message and "RETRIEVER_CORPUS" in message
    message = _start_fails("--index-dir", str(search_r1["index"]), "--corpus", str(search_r1["corpus"]))
    assert "has no metadata naming its encoder" in message and "RETRIEVER_ENCODER" in message


def test_an_existing_lucene_index_is_served(tmp_path: Path, search_r1: dict, test_client_cls) -> None:
    pytest.importorskip("pyserini")  # optional (the [pyserini] extra; needs Java)
    from mr_search_retrieval.app import create_app

    docs_dir = tmp_path / "docs"
    docs_dir.mkdir()
    shutil.copy(search_r1["corpus"], docs_dir / "corpus.jsonl")
    lucene = tmp_path / "bm25"
    cmd = [sys.executable, "-m", "pyserini.index.lucene", "--collection", "JsonCollection", "--input", str(docs_dir)]
    cmd += ["--index", str(lucene), "--generator", "DefaultLuceneDocumentGenerator", "--threads", "1", "--storeRaw"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=600)
    config = _config("--index", str(lucene), "--corpus", str(search_r1["corpus"]))
    assert config.index_format == "lucene" and config.retriever == "bm25"
    doc = search_r1["docs"][42]
    with test_client_cls(create_app(config)) as client:
        r = client.post("/retrieve", json={"queries": [_query_text(doc)], "topk": 1})
    assert r.json()["result"][0][0]["id"] == doc["id"]


def test_an_index_with_metadata_brings_its_own_conventions_unless_flags_say_otherwise(tmp_path: Path) -> None:
    from mr_search_retrieval.indexes.metadata import IndexMetadata

    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "0", "contents": "x"}\n')
    recorded = {"query_prefix": "q: ", "passage_prefix": "", "pooling": "cls", "normalize": False}
    IndexMetadata(backend="faiss", num_docs=1, corpus=str(corpus), encoder=recorded).write(tmp_path)
    encoder = _config("--index-dir", str(tmp_path)).encoder
    assert (encoder.query_prefix, encoder.passage_prefix, encoder.pooling, encoder.normalize) == (
        "q: ",
        "",
        "cls",
        False,
    )
    assert _config("--index-dir", str(tmp_path), "--pooling", "mean", "--normalize").encoder.pooling == "mean"


def test_the_corpus_index_backend_is_faiss_when_installed_else_the_torch_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    from mr_search_retrieval.server import corpus_index_backend

    assert corpus_index_backend("auto") == "faiss" and corpus_index_backend("torch") == "torch"
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "faiss" else real(name, *a))
    assert corpus_index_backend("auto") == "torch"  # `pip install ./retrieval` without the [faiss] extra

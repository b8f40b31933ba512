"""`create_app(config)`: the FastAPI app serving /retrieve, /health, /metrics (and /docs)."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import ValidationError
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from mr_search_retrieval.batcher import MicroBatcher, QueueFullError
from mr_search_retrieval.config import LimitsConfig, ServerConfig
from mr_search_retrieval.corpus import CorpusStore
from mr_search_retrieval.metrics import Metrics, SharedMetrics
from mr_search_retrieval.schemas import ErrorResponse, HealthResponse, RetrieveRequest, RetrieveResponse

if TYPE_CHECKING:  # the retriever pulls in torch; HTTP front processes (--http-workers) never need it
    from mr_search_retrieval.retriever import Searcher

logger = logging.getLogger(__name__)

Loader = Callable[[ServerConfig], "tuple[Searcher, CorpusStore]"]


class RequestError(ValueError):
    """A request the server will not serve; `status` is the HTTP code to answer with."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


def default_loader(config: ServerConfig) -> tuple[Searcher, CorpusStore]:
    from mr_search_retrieval.retriever import load_searcher

    corpus = CorpusStore(config.corpus)
    return load_searcher(config, corpus), corpus


@dataclass
class _State:
    ready: bool = False
    searcher: Searcher | None = None
    corpus: CorpusStore | None = None
    batcher: MicroBatcher | None = None
    info: dict[str, Any] = field(default_factory=dict)


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestError(f"request body of {declared} bytes exceeds the limit max_body_bytes={limit}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestError(f"request body exceeds the limit max_body_bytes={limit}")
        chunks.append(chunk)
    return b"".join(chunks)


async def _receive_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """`_read_body` for a plain ASGI handler."""
    for name, value in scope["headers"]:
        if name == b"content-length" and value.isdigit() and int(value) > limit:
            raise RequestError(f"request body of {value.decode()} bytes exceeds the limit max_body_bytes={limit}")
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise RequestError(f"request body exceeds the limit max_body_bytes={limit}")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _well_formed(payload: Any) -> tuple[list[str], int | None, bool] | None:
    """The fields of a request that `RetrieveRequest` would accept as they are, checked without building the model
    (a tenth of its cost); None for anything else, which pydantic then validates and words the error for."""
    if type(payload) is not dict:
        return None
    queries, topk, scores = payload.get("queries"), payload.get("topk"), payload.get("return_scores", False)
    if type(queries) is not list or not (topk is None or type(topk) is int) or type(scores) is not bool:
        return None
    if not all(type(q) is str for q in queries):
        return None
    return queries, topk, scores


def parse_request(body: bytes, limits: LimitsConfig, default_topk: int) -> tuple[list[str], int, bool]:
    """Validate a /retrieve body; every rejection names the field or limit that was broken."""
    if not body.strip():
        raise RequestError('empty request body; send JSON like {"queries": ["..."], "topk": 3}')
    try:
        payload = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RequestError(f"request body is not valid JSON ({err})") from err
    fields = _well_formed(payload)
    if fields is None:
        try:
            req = RetrieveRequest.model_validate(payload)
        except ValidationError as err:
            parts = [f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in err.errors()[:5]]
            raise RequestError("invalid request: " + "; ".join(parts)) from err
        fields = req.queries, req.topk, req.return_scores
    queries, req_topk, return_scores = fields
    if not queries:
        raise RequestError("queries is empty; send at least one query string")
    if len(queries) > limits.max_queries_per_request:
        raise RequestError(
            f"{len(queries)} queries exceed the limit max_queries_per_request={limits.max_queries_per_request}"
        )
    for i, q in enumerate(queries):
        if not q.strip():
            raise RequestError(f"queries.{i} is empty or blank; every query needs some text")
        if len(q) > limits.max_query_chars:
            raise RequestError(
                f"queries.{i} has {len(q)} characters, over the limit max_query_chars={limits.max_query_chars}"
            )
    topk = default_topk if req_topk is None else req_topk
    if topk < 1:
        raise RequestError(f"topk must be >= 1 (or null for the server default {default_topk}), got {topk}")
    if topk > limits.max_topk:
        raise RequestError(f"topk={topk} exceeds the limit max_topk={limits.max_topk}")
    return queries, topk, return_scores


def _score(value: float) -> bytes:
    return repr(float(value)).encode() if math.isfinite(value) else b"null"


def _render_result(corpus: CorpusStore, hits: list, return_scores: bool) -> bytes:
    """The response body. Corpus lines are spliced in as stored (no parse/dump) when their ids are strings."""
    if not corpus.raw_ok:
        return _render_parsed(corpus, hits, return_scores)
    lists = []
    for scores, ids in hits:
        # Approximate indexes pad with id -1 when they find fewer than k.
        keep = ids >= 0
        if not keep.all():
            ids, scores = ids[keep], scores[keep]
        pairs = list(zip([d.rstrip() for d in corpus.raw_many(ids)], scores.tolist(), strict=True))
        if return_scores:
            docs = [b'{"document":' + d + b',"score":' + _score(s) + b"}" for d, s in pairs]
        else:
            docs = [d for d, _ in pairs]
        lists.append(b"[" + b",".join(docs) + b"]")
    return b'{"result":[' + b",".join(lists) + b"]}"


def _render_parsed(corpus: CorpusStore, hits: list, return_scores: bool) -> bytes:
    result = []
    for scores, ids in hits:
        keep = ids >= 0
        docs = corpus.get_many(ids[keep])
        if return_scores:
            result.append([{"document": d, "score": float(s)} for d, s in zip(docs, scores[keep], strict=True)])
        else:
            result.append(docs)
    return json.dumps({"result": result}, ensure_ascii=False).encode()


def _error_body(message: str) -> bytes:
    return json.dumps({"detail": message}).encode()


class RetrievalApp(FastAPI):
    """A FastAPI app whose hot path, POST /retrieve, goes straight to a plain ASGI handler: no routing, dependency
    solving or middleware stack, about half the server's HTTP CPU per request
    (retrieval/benchmarks/bench_retrieval_server.py).
    The FastAPI route of the same handler stays for the OpenAPI page and the schema; middleware added with
    `add_middleware` does not see /retrieve."""

    retrieve_asgi: Callable[[Scope, Receive, Send], Awaitable[None]] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            self.retrieve_asgi is not None
            and scope["type"] == "http"
            and scope["path"] == "/retrieve"
            and scope["method"] == "POST"
        ):
            await self.retrieve_asgi(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)


def create_app(
    config: ServerConfig, loader: Loader = default_loader, shared_metrics: tuple[str, int] | None = None
) -> FastAPI:
    """Build the app; `loader` (config -> (searcher, corpus)) is where tests hand in fakes; `shared_metrics`
    (folder, front index): one HTTP front of several, whose /metrics sums every front's (metrics.SharedMetrics)."""
    state = _State()
    metrics = Metrics(queue_depth=lambda: state.batcher.depth if state.batcher else 0)
    shared = SharedMetrics(metrics, *shared_metrics) if shared_metrics else None

    async def publish_metrics(shared: SharedMetrics) -> None:
        while True:
            try:
                shared.publish()
            except OSError as err:  # the other fronts keep a stale copy; this front's own /metrics stays right
                logger.warning("cannot publish this front's metrics to %s: %s", shared.directory, err)
            await asyncio.sleep(shared.interval)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # One thread per batcher lane calls the model and the index (one lane unless the searcher allows concurrent
        # calls: GPU FAISS and a CUDA encoder do not).
        executor = ThreadPoolExecutor(max_workers=config.batcher.lanes, thread_name_prefix="mr-search-model")
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter()
        try:
            state.searcher, state.corpus = await loop.run_in_executor(executor, loader, config)
        except (FileNotFoundError, ValueError, ImportError) as err:  # bad input: one clear line before the traceback
            logger.error("cannot start the retrieval service: %s", err)
            raise
        await loop.run_in_executor(executor, state.searcher.search, ["warm up"], 1)
        state.batcher = MicroBatcher(state.searcher.search, config.batcher, executor, metrics)
        state.batcher.start()
        state.info = {"retriever": config.retriever, "num_docs": len(state.corpus), "index_dir": config.index_dir}
        state.ready = True
        publisher = asyncio.create_task(publish_metrics(shared)) if shared else None
        logger.info(
            "retrieval service ready: %d passages, loaded in %.1fs", len(state.corpus), time.perf_counter() - t0
        )
        try:
            yield
        finally:
            state.ready = False
            if publisher is not None:
                publisher.cancel()
            await state.batcher.stop()  # in-flight and queued queries are answered before we exit
            executor.shutdown(wait=True)
            state.corpus.close()
            logger.info("retrieval service stopped")

    app = RetrievalApp(
        title="MR-Search retrieval service",
        description="Search-R1-compatible /retrieve with cross-request micro-batching (dense or BM25).",
        lifespan=lifespan,
    )
    app.state.mr_search = state
    app.state.metrics = metrics
    request_schema = RetrieveRequest.model_json_schema()

    async def answer(read_body: Callable[[], Awaitable[bytes]]) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        """Status, JSON body and extra headers of one /retrieve call; ClientDisconnect propagates."""
        start = time.perf_counter()
        n_queries = 0
        headers: list[tuple[bytes, bytes]] = []
        try:
            if not state.ready or state.batcher is None:
                raise RequestError("the index is not loaded yet (or the server is shutting down); retry shortly", 503)
            body = await read_body()
            queries, topk, return_scores = parse_request(body, config.limits, config.default_topk)
            n_queries = len(queries)
            hits = await state.batcher.submit(queries, topk)
            status, payload = 200, _render_result(state.corpus, hits, return_scores)
        except ClientDisconnect:
            raise
        except RequestError as err:
            status, payload = err.status, _error_body(str(err))
        except QueueFullError as err:
            status, payload = 429, _error_body(str(err))
            headers.append((b"retry-after", str(err.retry_after).encode()))
        except Exception as err:
            logger.exception("retrieval failed")
            status, payload = 500, _error_body(f"retrieval failed: {type(err).__name__}: {err}")
        metrics.observe_request(status, n_queries, time.perf_counter() - start)
        return status, payload, headers

    async def retrieve_asgi(scope: Scope, receive: Receive, send: Send) -> None:
        try:
            status, payload, headers = await answer(lambda: _receive_body(scope, receive, config.limits.max_body_bytes))
        except ClientDisconnect:
            return  # nobody to answer; queued queries of the request were not submitted
        headers += [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    app.retrieve_asgi = retrieve_asgi

    @app.post(
        "/retrieve",
        response_model=RetrieveResponse,
        responses={422: {"model": ErrorResponse}, 429: {"model": ErrorResponse}, 503: {"model": ErrorResponse}},
        openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": request_schema}}}},
    )
    async def retrieve(request: Request) -> Response:
        """Top-k passages per query, best first; `{document, score}` items when return_scores is true."""
        try:
            status, payload, headers = await answer(lambda: _read_body(request, config.limits.max_body_bytes))
        except ClientDisconnect:
            return Response(status_code=400)  # the client is gone: nobody reads this
        return Response(
            payload,
            status_code=status,
            headers={k.decode(): v.decode() for k, v in headers},
            media_type="application/json",
        )

    @app.get("/health", response_model=HealthResponse, responses={503: {"model": HealthResponse}})
    async def health() -> JSONResponse:
        """200 with ready=true once the index is loaded; 503 while loading or shutting down."""
        body = HealthResponse(status="ready" if state.ready else "unavailable", ready=state.ready, detail=state.info)
        return JSONResponse(body.model_dump(), status_code=200 if state.ready else 503)

    @app.get("/metrics", response_class=PlainTextResponse)
    async def metrics_endpoint() -> PlainTextResponse:
        """Prometheus text format."""
        text = shared.render() if shared else metrics.render()
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    return app

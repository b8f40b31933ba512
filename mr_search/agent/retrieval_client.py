"""Async client for the ``/retrieve`` API (retrieval/README.md): pooled connections, timeouts, bounded retries."""

from __future__ import annotations

import asyncio
import logging
import random
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from mr_search.config_checks import check_fields, from_mapping

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetrieverConfig:
    """Where and how the rollout calls the retrieval service; keys in ``configs/recipe/paper.yaml``."""

    url: str = "http://127.0.0.1:8000/retrieve"
    timeout_s: float = 30.0
    max_retries: int = 3
    backoff_s: float = 0.5
    backoff_max_s: float = 8.0
    max_connections: int = 256
    return_scores: bool = True
    max_failure_rate: float = 0.2

    def __post_init__(self) -> None:
        check_fields(self, "mr_search.retriever")
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"mr_search.retriever.url={self.url!r} must start with http:// or https://")
        if self.timeout_s <= 0:
            raise ValueError(f"mr_search.retriever.timeout_s={self.timeout_s} must be > 0 seconds")
        if self.max_retries < 0:
            raise ValueError(f"mr_search.retriever.max_retries={self.max_retries} must be >= 0")
        if self.backoff_s < 0 or self.backoff_max_s < self.backoff_s:
            raise ValueError(
                f"mr_search.retriever: need 0 <= backoff_s ({self.backoff_s}) <= backoff_max_s ({self.backoff_max_s})"
            )
        if self.max_connections < 1:
            raise ValueError(f"mr_search.retriever.max_connections={self.max_connections} must be >= 1")
        if not 0.0 <= self.max_failure_rate <= 1.0:
            raise ValueError(
                f"mr_search.retriever.max_failure_rate={self.max_failure_rate} must be in [0, 1] (1.0: never stop)"
            )

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> RetrieverConfig:
        """Builds the config from the ``mr_search.retriever`` subtree; unknown keys are an error."""
        return from_mapping(cls, config, "mr_search.retriever")


class RetrievalError(RuntimeError):
    """The service gave no usable answer; ``retryable`` tells whether another try could help."""

    def __init__(self, message: str, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


@dataclass(frozen=True)
class SearchOutcome:
    """One query's result: the documents (best first), or ``error`` set and no documents."""

    documents: list[dict[str, Any]]
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None


def _parse_result(payload: Any, n_queries: int) -> list[list[dict[str, Any]]]:
    if not isinstance(payload, Mapping) or not isinstance(payload.get("result"), list):
        raise RetrievalError(f"malformed answer (no 'result' list): {str(payload)[:200]!r}", retryable=True)
    result = payload["result"]
    if len(result) != n_queries or not all(isinstance(items, list) for items in result):
        raise RetrievalError(
            f"malformed answer: expected {n_queries} result lists, got {str(result)[:200]!r}", retryable=True
        )
    for items in result:
        for item in items:
            if not isinstance(item, Mapping):
                raise RetrievalError(f"malformed answer item {str(item)[:200]!r}", retryable=True)
    return result


class RetrievalClient:
    """Calls ``/retrieve`` with one pooled session per event loop; ``search`` never raises but on cancellation."""

    def __init__(self, config: RetrieverConfig, sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> None:
        self.config = config
        self._sleep = sleep
        self._session: aiohttp.ClientSession | None = None
        self.failures = 0
        self.retries = 0
        self.requests = 0

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.config.max_connections),
                timeout=aiohttp.ClientTimeout(total=self.config.timeout_s),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    async def _post_once(self, queries: list[str], topk: int) -> list[list[dict[str, Any]]]:
        body = {"queries": queries, "topk": topk, "return_scores": self.config.return_scores}
        self.requests += 1
        try:
            async with self._get_session().post(self.config.url, json=body) as response:
                if response.status == 429:
                    retry_after = response.headers.get("Retry-After")
                    try:
                        wait = float(retry_after) if retry_after is not None else None
                    except ValueError:
                        wait = None
                    raise RetrievalError("HTTP 429 (service overloaded)", retryable=True, retry_after=wait)
                if response.status >= 500:
                    raise RetrievalError(f"HTTP {response.status}", retryable=True)
                if response.status >= 400:
                    text = (await response.text())[:200]
                    raise RetrievalError(f"HTTP {response.status}: {text}", retryable=False)
                try:
                    payload = await response.json(content_type=None)
                except ValueError as error:
                    raise RetrievalError(f"answer is not JSON: {error}", retryable=True) from error
        except (aiohttp.ClientError, asyncio.TimeoutError) as error:
            raise RetrievalError(f"{type(error).__name__}: {error}", retryable=True) from error
        return _parse_result(payload, len(queries))

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.config.backoff_max_s)
        base = self.config.backoff_s * (2**attempt)
        return min(base * (0.5 + random.random()), self.config.backoff_max_s)

    async def retrieve(self, queries: list[str], topk: int) -> list[list[dict[str, Any]]]:
        """Returns one list of results per query; raises ``RetrievalError`` once the retries are spent."""
        attempt = 0
        while True:
            try:
                return await self._post_once(queries, topk)
            except RetrievalError as error:
                if not error.retryable or attempt >= self.config.max_retries:
                    raise
                wait = self._backoff(attempt, error.retry_after)
                logger.debug("retrieval try %d failed (%s); retrying in %.2fs", attempt + 1, error, wait)
                self.retries += 1
                attempt += 1
                await self._sleep(wait)

    async def search(self, query: str, topk: int) -> SearchOutcome:
        """Searches one query; on persistent failure returns an outcome with ``error`` and counts it."""
        try:
            (documents,) = await self.retrieve([query], topk)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # never let the retriever kill a meta-episode
            self.failures += 1
            logger.warning("search failed at %s: %s", self.config.url, error)
            return SearchOutcome(documents=[], error=str(error) or type(error).__name__)
        return SearchOutcome(documents=list(documents))


_SHARED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[RetrieverConfig, RetrievalClient]] = (
    weakref.WeakKeyDictionary()
)


def shared_client(config: RetrieverConfig) -> RetrievalClient:
    """One client per (event loop, config): the per-trajectory agent loops share one connection pool."""
    clients = _SHARED.setdefault(asyncio.get_running_loop(), {})
    client = clients.get(config)
    if client is None:
        client = clients[config] = RetrievalClient(config)
    return client

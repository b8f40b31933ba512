"""Request/response models of `/retrieve`, compatible with Search-R1's retrieval server."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr


class RetrieveRequest(BaseModel):
    """`{"queries": [str], "topk": int | null, "return_scores": bool}`; topk null means the server default."""

    model_config = ConfigDict(extra="ignore")

    queries: list[StrictStr] = Field(..., description="One or more non-empty query strings.")
    topk: StrictInt | None = Field(None, description="Passages per query; null uses the server default (3).")
    return_scores: StrictBool = Field(False, description="Wrap each document as {document, score} when true.")


class Document(BaseModel):
    """One corpus line: `contents` holds the title on its first line; extra fields (title, text) pass through."""

    model_config = ConfigDict(extra="allow")

    id: str
    contents: str


class ScoredDocument(BaseModel):
    document: Document
    score: float


class RetrieveResponse(BaseModel):
    """One inner list per query, best first: documents alone, or {document, score} with return_scores."""

    result: list[list[ScoredDocument] | list[Document]]


class HealthResponse(BaseModel):
    status: str
    ready: bool
    detail: dict[str, Any] = Field(default_factory=dict)


class ErrorResponse(BaseModel):
    detail: str

"""Refusals as JSON: {"error": {"code": ..., "message": ...}}, and strict request bodies."""

from __future__ import annotations

from typing import Any, TypeVar

import pydantic
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse

from .. import gate
from ..domain.base import Refusal
from ..domain.refusals import Kind

#: Largest request body the hub reads.
MAX_BODY_BYTES = 64 * 1024
#: An oversized body up to this size is read and thrown away before the 413 goes out, so the
#: client is not cut off mid-send and sees the answer; a larger one is refused at once.
DRAIN_LIMIT_BYTES = 16 * MAX_BODY_BYTES

M = TypeVar("M", bound=pydantic.BaseModel)


#: The HTTP status of each kind of refusal: the one place a refusal becomes a number.
STATUS_OF: dict[Kind, int] = {
    Kind.INVALID: 422, Kind.MALFORMED: 400, Kind.TOO_LARGE: 413, Kind.UNAUTHENTICATED: 401,
    Kind.FORBIDDEN: 403, Kind.NOT_FOUND: 404, Kind.CONFLICT: 409, Kind.LOCKED: 423,
    Kind.PAYMENT_REQUIRED: 402, Kind.TOO_MANY: 429, Kind.UPSTREAM: 502, Kind.UNAVAILABLE: 503,
    Kind.NOT_BUILT: 501,
}


class ApiError(Refusal):
    """A refusal found by the API itself (a body, a header, a parameter), before any command."""


def status_of(r: Refusal) -> int:
    return STATUS_OF[r.kind]


def error_response(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


class Body(pydantic.BaseModel):
    """Every request body: unknown fields and wrong types are refused.

    Each body's validator is built on its first use, not at import (``defer_build``): the
    hub defines about seventy bodies, and building them all was a tenth of its start before
    listening (issue 25); the checks are the same."""

    model_config = pydantic.ConfigDict(extra="forbid", strict=True, defer_build=True)


async def read_raw(request: Request) -> bytes:
    """The body's bytes, at most ``MAX_BODY_BYTES`` (413 otherwise, after reading up to
    ``DRAIN_LIMIT_BYTES`` so the client sees the answer).  Starlette keeps them, so a second
    read (the route after the idempotency check) gets the same bytes."""
    too_large = ApiError("body_too_large", f"a request body is at most {MAX_BODY_BYTES} bytes")
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > DRAIN_LIMIT_BYTES:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > DRAIN_LIMIT_BYTES:
            raise too_large
        if size <= MAX_BODY_BYTES:
            chunks.append(chunk)
    if size > MAX_BODY_BYTES:
        raise too_large
    raw = b"".join(chunks)
    request._body = raw  # Request.stream() gives it to the next reader
    return raw


async def read_body(request: Request, model: type[M]) -> M:
    raw = await read_raw(request)
    if not raw.strip():
        raw = b"{}"
    try:
        data: Any = gate.loads(raw, gate.BODY)
    except gate.NotJson as e:
        raise ApiError("bad_json", f"the body is not valid JSON: {e}") from None
    except gate.OutOfBounds as e:
        raise ApiError(e.code, str(e)) from None
    if not isinstance(data, dict):
        raise ApiError("invalid_request", "the body must be a JSON object")
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise ApiError("invalid_request", f"{where}: {first['msg']}") from None


async def drain(request: Request) -> None:
    """Read and throw away what a refusal left unread of the body (up to ``DRAIN_LIMIT_BYTES``), so the
    client is not cut off mid-send and sees the answer, and its kept-alive connection goes on."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > DRAIN_LIMIT_BYTES:
        return
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > DRAIN_LIMIT_BYTES:
                return
    except (ClientDisconnect, RuntimeError):  # gone, or read already
        return


def refusal_response(r: Refusal) -> JSONResponse:
    return error_response(status_of(r), r.code, r.message)

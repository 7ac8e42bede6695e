"""Error answers of `pgsearch serve`: stable codes, their statuses, one JSON shape.

Every error, from a handler, the request guard or the connection layer, is
``{"error": {"code": ..., "message": ...}}`` with a code from `ERROR_CODES` that
never changes meaning. Error bodies are written as ASCII JSON, so a message that
quotes a hostile value (a lone surrogate, a control character) is still valid
UTF-8 and valid JSON.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import JSONResponse

#: Stable error codes and their HTTP statuses.
ERROR_CODES = {
    "invalid_query": 400,
    "unauthorized": 401,
    "scope": 403,
    "cross_origin": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "timeout": 408,
    "too_large": 413,
    "unsupported_media_type": 415,
    "misdirected": 421,
    "rate_limited": 429,
    "internal": 500,
    "unavailable": 503,
}


class ApiError(Exception):
    """An error answer: a stable code, its status and a message."""

    def __init__(self, code: str, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.status = ERROR_CODES[code]
        self.message = message
        self.headers = headers or {}


def error_body(code: str, message: str) -> bytes:
    """The JSON body of an error answer (ASCII: hostile text stays valid)."""
    return json.dumps(
        {"error": {"code": code, "message": message}}, ensure_ascii=True, separators=(",", ":")
    ).encode("ascii")


class _ErrorJSON(JSONResponse):
    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def error_response(code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The answer for `code`, with `headers` (``Retry-After``, ``Allow``...)."""
    return _ErrorJSON(
        {"error": {"code": code, "message": message}},
        status_code=ERROR_CODES[code],
        headers=headers,
    )

"""What HTTP requests carry, checked: JSON bodies and query strings as typed calls.

No web framework here: each function takes decoded JSON or a mapping of query
parameters and returns plain values, or raises `InvalidQuery` (400) naming the
field, or `ScopeError` (403) when a field names a workspace or session outside the
caller's scope. The request schemas are data, shared with the OpenAPI document
(`pgsearch.web.openapi`), so the document and the checks cannot disagree.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pgsearch import tools
from pgsearch.errors import InvalidQuery, ScopeError
from pgsearch.types import (
    DEFAULT_CONTEXT,
    DEFAULT_EXCERPT_BYTES,
    MAX_EXCERPT_BYTES,
    MAX_ID_CHARS,
    MAX_WINDOW,
    Scope,
    SessionQueryRequest,
)

#: Largest JSON body of a search (a query is at most a few thousand characters).
MAX_SEARCH_BODY = 64 * 1024
#: Largest JSON body of an append (a batch of messages).
MAX_APPEND_BODY = 8 * 1024 * 1024
#: Most messages in one append (larger batches are several requests).
MAX_APPEND_MESSAGES = 1000
#: Sessions per page of `GET /v1/sessions`, default and most.
DEFAULT_SESSIONS = 50
MAX_SESSIONS = 200
#: Largest offset into the session listing (deeper pages cost a long index walk).
MAX_OFFSET = 100_000
#: Largest seq a request may name (seqs are 32-bit integers in the database).
MAX_SEQ = 2**31 - 1

_WORKSPACE_ID = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_ID_CHARS,
    "description": "Must be the token's workspace when given; never widens the scope.",
}
_SESSION_ID = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_ID_CHARS,
    "description": "A session id.",
}

#: `POST /v1/search`: the `SessionQueryRequest` fields.
SEARCH_BODY: dict[str, Any] = {
    "type": "object",
    "properties": {
        **dict(tools.TOOL_SPECS[0].input_schema["properties"]),
        "excerpt_bytes": {
            "type": "integer",
            "minimum": 1,
            "default": DEFAULT_EXCERPT_BYTES,
            "description": f"Excerpt size in UTF-8 bytes (at most {MAX_EXCERPT_BYTES}).",
        },
        "workspace_id": _WORKSPACE_ID,
    },
    "additionalProperties": False,
}
assert tools.TOOL_SPECS[0].name == tools.SEARCH

#: `POST /v1/append`.
APPEND_BODY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "session_id": _SESSION_ID,
        "messages": {
            "type": "array",
            "items": {"type": "object"},
            "minItems": 1,
            "maxItems": MAX_APPEND_MESSAGES,
            "description": "Messages in the OpenAI chat shape (role, content, tool_calls...).",
        },
        "workspace_id": _WORKSPACE_ID,
    },
    "required": ["session_id", "messages"],
    "additionalProperties": False,
}

#: `POST /v1/ingest`.
INGEST_BODY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "minLength": 1,
            "maxLength": 4096,
            "description": "A session file on the server, under one of its ingest roots.",
        },
        "session_id": _SESSION_ID,
        "format": {
            "type": "string",
            "enum": ["auto", "openai", "claude-code", "codex", "gemini", "opencode"],
            "default": "auto",
        },
        "workspace_id": _WORKSPACE_ID,
    },
    "required": ["path"],
    "additionalProperties": False,
}


def decode_json(raw: bytes) -> dict[str, Any]:
    """A request body as a JSON object, else `InvalidQuery`."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidQuery("the request body is not valid UTF-8") from None
    except json.JSONDecodeError as exc:
        raise InvalidQuery(f"the request body is not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise InvalidQuery("the request body is nested too deeply") from None
    except ValueError:
        # Python refuses to read an integer of more than 4,300 digits.
        raise InvalidQuery("the request body holds a number too long to read") from None
    if not isinstance(data, dict):
        raise InvalidQuery("the request body must be a JSON object")
    return data


def check_workspace_field(value: object, scope: Scope) -> None:
    """A request's ``workspace_id`` may only repeat the scope's workspace."""
    if value is None:
        return
    same = isinstance(value, str) and unicodedata.normalize("NFC", value) == scope.workspace
    if not same:
        raise ScopeError(
            f"this token is bound to workspace {scope.workspace!r}; "
            f"it cannot reach workspace {value!r:.300}"
        )


def _checked(body: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    properties: Mapping[str, Any] = schema["properties"]
    unknown = [k for k in body if k not in properties]
    if unknown:
        raise InvalidQuery(f"unknown field {unknown[0]!r:.100} (allowed: {', '.join(properties)})")
    for name in schema.get("required", ()):
        if body.get(name) is None:
            raise InvalidQuery(f"missing required field {name!r}")
    out: dict[str, Any] = {}
    for name, prop in properties.items():
        value = body.get(name)
        if value is None:
            if "default" in prop:
                out[name] = prop["default"]
            continue
        if prop["type"] == "object" or (
            prop["type"] == "array" and prop["items"]["type"] == "object"
        ):
            out[name] = _objects(name, value, prop)
            continue
        out[name] = tools.check_value(name, value, prop)
        if prop.get("format") == "date-time":
            out[name] = tools.check_date_time(name, value)
    return out


def _objects(name: str, value: Any, prop: Mapping[str, Any]) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise InvalidQuery(f"{name!r} must be an array of objects")
    if len(value) < prop.get("minItems", 0):
        raise InvalidQuery(f"{name!r} must not be empty")
    if len(value) > prop.get("maxItems", len(value)):
        raise InvalidQuery(
            f"{name!r} holds {len(value):,} items; at most {prop['maxItems']:,} per request"
        )
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise InvalidQuery(f"{name}[{i}] must be an object")
    return value


def search_request(body: Mapping[str, Any], scope: Scope) -> tuple[SessionQueryRequest, bool]:
    """A search body as a request within `scope`, and whether `limit` was capped."""
    check_workspace_field(body.get("workspace_id"), scope)
    args = _checked(body, SEARCH_BODY)
    session = args.get("session_id")
    if session is not None:
        scope.narrow(session)
    capped = args["limit"] > tools.LIMIT_CAPS[tools.SEARCH]
    if capped:
        args["limit"] = tools.LIMIT_CAPS[tools.SEARCH]
    request = replace(
        tools.search_request(args),
        excerpt_bytes=min(args["excerpt_bytes"], MAX_EXCERPT_BYTES),
        session_id=session if session is not None else scope.session_id,
    )
    return request, capped


def append_body(body: Mapping[str, Any], scope: Scope) -> tuple[str, list[dict[str, Any]]]:
    check_workspace_field(body.get("workspace_id"), scope)
    args = _checked(body, APPEND_BODY)
    return scope.narrow(args["session_id"]), args["messages"]


def ingest_body(body: Mapping[str, Any], scope: Scope) -> tuple[str, str | None, str]:
    check_workspace_field(body.get("workspace_id"), scope)
    if scope.session_id is not None:
        # A file may hold several sessions: a token for one session cannot ingest.
        raise ScopeError(
            f"this token is bound to session {scope.session_id!r}; ingesting files needs "
            "a token for the whole workspace"
        )
    args = _checked(body, INGEST_BODY)
    return args["path"], args.get("session_id"), args["format"]


def check_params(params: Mapping[str, str], allowed: tuple[str, ...]) -> None:
    """Refuse query parameters other than `allowed` and ``workspace_id``."""
    for name in params:
        if name not in allowed and name != "workspace_id":
            known = ", ".join((*allowed, "workspace_id"))
            raise InvalidQuery(f"unknown query parameter {name!r:.100} (allowed: {known})")


def integer(
    params: Mapping[str, str], name: str, default: int | None, *, low: int, high: int
) -> int:
    """Query parameter `name` as an integer in [low, high] (`default` when absent)."""
    raw = params.get(name)
    if raw is None:
        if default is None:
            raise InvalidQuery(f"missing required query parameter {name!r}")
        return default
    text = raw.strip()
    if not (text.isascii() and text.lstrip("-").isdigit()) or len(text) > 12:
        raise InvalidQuery(f"query parameter {name!r} must be an integer, got {raw!r:.40}")
    value = int(text)
    if not low <= value <= high:
        raise InvalidQuery(
            f"query parameter {name!r} must be between {low} and {high}, got {value}"
        )
    return value


def around_params(params: Mapping[str, str]) -> tuple[int, int, int]:
    """``seq``, ``before`` and ``after`` of `GET .../around`."""
    return (
        integer(params, "seq", None, low=0, high=MAX_SEQ),
        integer(params, "before", DEFAULT_CONTEXT, low=0, high=MAX_WINDOW - 1),
        integer(params, "after", DEFAULT_CONTEXT, low=0, high=MAX_WINDOW - 1),
    )


def page_params(params: Mapping[str, str]) -> tuple[int, int]:
    """``start_seq`` and ``limit`` of `GET .../messages` (a larger limit is capped)."""
    start = integer(params, "start_seq", 0, low=0, high=MAX_SEQ)
    limit = integer(params, "limit", MAX_WINDOW, low=1, high=MAX_SEQ)
    return start, min(limit, MAX_WINDOW)


def sessions_params(params: Mapping[str, str]) -> tuple[int, int]:
    """``limit`` and ``offset`` of `GET /v1/sessions` (a larger limit is capped)."""
    limit = integer(params, "limit", DEFAULT_SESSIONS, low=1, high=MAX_SEQ)
    offset = integer(params, "offset", 0, low=0, high=MAX_OFFSET)
    return min(limit, MAX_SESSIONS), offset

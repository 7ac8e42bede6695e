"""The OpenAPI 3.1 document of `pgsearch serve`, built from the request schemas.

Request bodies are the very schemas `pgsearch.web.inputs` checks against;
responses describe the ``to_json`` shapes of `pgsearch.types`. A snapshot test
pins the document, and a property-based run (schemathesis) checks that the server
answers as it says, for hostile inputs too.
"""

from __future__ import annotations

import copy
from typing import Any

from pgsearch import __version__
from pgsearch.types import DEFAULT_CONTEXT, MAX_WINDOW
from pgsearch.web import inputs
from pgsearch.web.errors import ERROR_CODES


def _nullable(kind: str, **extra: Any) -> dict[str, Any]:
    return {"type": [kind, "null"], **extra}


_STRING = {"type": "string"}
_INT = {"type": "integer"}
_TIME = {"type": "string", "format": "date-time"}

SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {
                        "type": "string",
                        "enum": list(ERROR_CODES),
                    },
                    "message": _STRING,
                },
            }
        },
    },
    "SessionQueryRequest": inputs.SEARCH_BODY,
    "SessionMatch": {
        "type": "object",
        "required": [
            "workspace_id",
            "session_id",
            "entry_id",
            "seq",
            "kind",
            "turn",
            "role",
            "tool_name",
            "excerpt",
            "created_at",
            "score",
            "title",
            "parent_session_id",
            "highlights",
        ],
        "properties": {
            "workspace_id": _STRING,
            "session_id": _STRING,
            "entry_id": _STRING,
            "seq": _INT,
            "kind": _STRING,
            "turn": _INT,
            "role": _STRING,
            "tool_name": _nullable("string"),
            "excerpt": {
                "type": "string",
                "description": "Text around the matched words, as stored (no marks).",
            },
            "created_at": _TIME,
            "score": {"type": "number"},
            "title": _nullable("string"),
            "parent_session_id": _nullable("string"),
            "highlights": {
                "type": "array",
                "description": (
                    "The matched words of the excerpt: [start, end] offsets in Unicode code "
                    "points (end exclusive), in order, not overlapping."
                ),
                "items": {
                    "type": "array",
                    "items": {"type": "integer", "minimum": 0},
                    "minItems": 2,
                    "maxItems": 2,
                },
            },
        },
    },
    "SessionQueryResult": {
        "type": "object",
        "required": [
            "matches",
            "searched",
            "next_cursor",
            "candidates_capped",
            "approximate",
            "notice",
        ],
        "properties": {
            "matches": {"type": "array", "items": {"$ref": "#/components/schemas/SessionMatch"}},
            "searched": {
                "type": "integer",
                "description": "Entries in scope after the filters.",
            },
            "next_cursor": _nullable("string"),
            "candidates_capped": {"type": "boolean"},
            "approximate": {
                "type": "boolean",
                "description": "The ranking may differ from an uncapped run of the same "
                "rules (a cap cut a read); false: every hit was scored.",
            },
            "notice": _nullable("string"),
            "limit_capped": {
                "type": "object",
                "properties": {"limit": _INT},
                "description": "Present when the requested limit was above the cap.",
            },
        },
    },
    "WindowMessage": {
        "type": "object",
        "required": [
            "session_id",
            "seq",
            "entry_id",
            "kind",
            "role",
            "turn",
            "tool_name",
            "created_at",
            "content",
            "anchor",
        ],
        "properties": {
            "session_id": _STRING,
            "seq": _INT,
            "entry_id": _STRING,
            "kind": _STRING,
            "role": _STRING,
            "turn": _INT,
            "tool_name": _nullable("string"),
            "created_at": _TIME,
            "content": _STRING,
            "anchor": {"type": "boolean"},
        },
    },
    "Window": {
        "type": "object",
        "required": ["workspace_id", "session_id", "anchor_seq", "messages", "next_seq"],
        "properties": {
            "workspace_id": _STRING,
            "session_id": _STRING,
            "anchor_seq": _INT,
            "messages": {"type": "array", "items": {"$ref": "#/components/schemas/WindowMessage"}},
            "next_seq": _nullable("integer"),
        },
    },
    "SessionInfo": {
        "type": "object",
        "required": [
            "session_id",
            "title",
            "message_count",
            "created_at",
            "updated_at",
            "source",
            "parent_session_id",
        ],
        "properties": {
            "session_id": _STRING,
            "title": _nullable("string"),
            "message_count": _INT,
            "created_at": _nullable("string", format="date-time"),
            "updated_at": _nullable("string", format="date-time"),
            "source": _nullable("string"),
            "parent_session_id": _nullable("string"),
        },
    },
    "SessionList": {
        "type": "object",
        "required": ["workspace_id", "sessions", "next_offset"],
        "properties": {
            "workspace_id": _STRING,
            "sessions": {"type": "array", "items": {"$ref": "#/components/schemas/SessionInfo"}},
            "next_offset": _nullable("integer"),
        },
    },
    "WorkspaceStats": {
        "type": "object",
        "required": [
            "workspace_id",
            "sessions",
            "messages",
            "indexed_messages",
            "vocabulary",
            "by_kind",
        ],
        "properties": {
            "workspace_id": _STRING,
            "sessions": _INT,
            "messages": _INT,
            "indexed_messages": _INT,
            "vocabulary": _INT,
            "by_kind": {"type": "object", "additionalProperties": _INT},
        },
    },
    "Whoami": {
        "type": "object",
        "required": [
            "workspace_id",
            "session_id",
            "write",
            "token_id",
            "rate_per_second",
            "append",
            "ingest",
        ],
        "properties": {
            "workspace_id": _STRING,
            "session_id": _nullable("string"),
            "write": {"type": "boolean"},
            "token_id": _nullable("string"),
            "rate_per_second": {"type": "number"},
            "append": {"type": "boolean"},
            "ingest": {"type": "boolean"},
        },
    },
    "AppendRequest": inputs.APPEND_BODY,
    "AppendResult": {
        "type": "object",
        "required": ["session_id", "appended"],
        "properties": {"session_id": _STRING, "appended": _INT},
    },
    "IngestRequest": inputs.INGEST_BODY,
    "IngestResult": {
        "type": "object",
        "required": [
            "path",
            "workspace_id",
            "format",
            "sessions",
            "messages",
            "skipped",
            "unchanged",
            "bad_lines",
            "warnings",
        ],
        "properties": {
            "path": _STRING,
            "workspace_id": _STRING,
            "format": _STRING,
            "sessions": {"type": "array", "items": _STRING},
            "messages": _INT,
            "skipped": _INT,
            "unchanged": {"type": "boolean"},
            "bad_lines": _INT,
            "warnings": {"type": "array", "items": _STRING},
        },
    },
    "Health": {
        "type": "object",
        "required": ["status", "schema_revision"],
        "properties": {"status": {"type": "string", "enum": ["ok"]}, "schema_revision": _STRING},
    },
}

_ERRORS = {
    "400": "Invalid request (`invalid_query`).",
    "401": "No token, or an unknown or revoked one (`unauthorized`).",
    "403": "Outside the token's scope, or a write with a read-only token (`scope`); "
    "sent from another origin (`cross_origin`).",
    "404": "No such session or message in scope (`not_found`).",
    "408": "The request body did not arrive in time (`timeout`).",
    "413": "The request body is too large (`too_large`).",
    "415": "The body is not sent as application/json (`unsupported_media_type`).",
    "421": "A Host this server does not answer for (`misdirected`).",
    "429": "Over the token's request rate (`rate_limited`); see Retry-After.",
    "503": "The database is unreachable or its schema is not current (`unavailable`).",
}


def _json(ref: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}}


#: The answers of an operation with a request body.
_BODY = ("408", "413", "415")


def _responses(ok: str, description: str, *extra: str) -> dict[str, Any]:
    out: dict[str, Any] = {"200": {"description": description, "content": _json(ok)}}
    for status in ("400", "401", "403", "404", "421", "429", *extra, "503"):
        out[status] = {"description": _ERRORS[status], "content": _json("Error")}
    return dict(sorted(out.items()))


def _query(name: str, description: str, *, required: bool = False, **schema: Any) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": required,
        "description": description,
        "schema": {"type": "integer", **schema},
    }


_SESSION_PATH = {
    "name": "session_id",
    "in": "path",
    "required": True,
    "description": "A session id (URL-encoded).",
    "schema": {"type": "string", "minLength": 1, "maxLength": 256},
}
_WORKSPACE_QUERY = {
    "name": "workspace_id",
    "in": "query",
    "required": False,
    "description": "Must be the token's workspace when given; never widens the scope.",
    "schema": {"type": "string"},
}


def openapi_document() -> dict[str, Any]:
    """The whole document (a fresh copy each time)."""
    public: list[dict[str, Any]] = []
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "pgsearch",
            "version": __version__,
            "description": (
                "Search over agent session histories. Every /v1 call needs a bearer "
                "token (`pgsearch token create`), which pins the workspace (and maybe "
                "one session) the call can see; field names match the SessionQuery seam."
            ),
        },
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": {
            "/healthz": {
                "get": {
                    "operationId": "health",
                    "summary": "Whether the database answers and its schema is current.",
                    "security": public,
                    "responses": {
                        "200": {"description": "Healthy.", "content": _json("Health")},
                        "421": {"description": _ERRORS["421"], "content": _json("Error")},
                        "503": {"description": _ERRORS["503"], "content": _json("Error")},
                    },
                }
            },
            "/v1/whoami": {
                "get": {
                    "operationId": "whoami",
                    "summary": "The scope and rights of the token.",
                    "parameters": [_WORKSPACE_QUERY],
                    "responses": _responses("Whoami", "The token's scope."),
                }
            },
            "/v1/search": {
                "post": {
                    "operationId": "search",
                    "summary": "Ranked matches in the token's scope (an empty query browses).",
                    "parameters": [_WORKSPACE_QUERY],
                    "requestBody": {"required": True, "content": _json("SessionQueryRequest")},
                    "responses": _responses("SessionQueryResult", "One page of matches.", *_BODY),
                }
            },
            "/v1/sessions": {
                "get": {
                    "operationId": "sessions",
                    "summary": "Sessions, most recently active first.",
                    "parameters": [
                        _query(
                            "limit",
                            f"Sessions per page (at most {inputs.MAX_SESSIONS}).",
                            minimum=1,
                            default=inputs.DEFAULT_SESSIONS,
                        ),
                        _query("offset", "Sessions to skip.", minimum=0, maximum=inputs.MAX_OFFSET),
                        _WORKSPACE_QUERY,
                    ],
                    "responses": _responses("SessionList", "One page of sessions."),
                }
            },
            "/v1/sessions/{session_id}": {
                "get": {
                    "operationId": "session",
                    "summary": "One session.",
                    "parameters": [_SESSION_PATH, _WORKSPACE_QUERY],
                    "responses": _responses("SessionInfo", "The session."),
                }
            },
            "/v1/sessions/{session_id}/around": {
                "get": {
                    "operationId": "around",
                    "summary": f"Messages around one message (at most {MAX_WINDOW}).",
                    "parameters": [
                        _SESSION_PATH,
                        _query("seq", "The message to centre on.", required=True, minimum=0),
                        _query(
                            "before",
                            "Messages before it.",
                            minimum=0,
                            maximum=MAX_WINDOW - 1,
                            default=DEFAULT_CONTEXT,
                        ),
                        _query(
                            "after",
                            "Messages after it.",
                            minimum=0,
                            maximum=MAX_WINDOW - 1,
                            default=DEFAULT_CONTEXT,
                        ),
                        _WORKSPACE_QUERY,
                    ],
                    "responses": _responses("Window", "The window; the anchor is marked."),
                }
            },
            "/v1/sessions/{session_id}/messages": {
                "get": {
                    "operationId": "messages",
                    "summary": "One page of a session's messages, in order.",
                    "parameters": [
                        _SESSION_PATH,
                        _query("start_seq", "The seq to start from.", minimum=0, default=0),
                        _query(
                            "limit",
                            f"Messages per page (at most {MAX_WINDOW}).",
                            minimum=1,
                            default=MAX_WINDOW,
                        ),
                        _WORKSPACE_QUERY,
                    ],
                    "responses": _responses("Window", "The page; next_seq continues it."),
                }
            },
            "/v1/stats": {
                "get": {
                    "operationId": "stats",
                    "summary": "Counts of the token's workspace (workspace tokens only).",
                    "parameters": [_WORKSPACE_QUERY],
                    "responses": _responses("WorkspaceStats", "The workspace's counts."),
                }
            },
            "/v1/append": {
                "post": {
                    "operationId": "append",
                    "summary": "Append messages to a session (write tokens; `serve --append`).",
                    "parameters": [_WORKSPACE_QUERY],
                    "requestBody": {"required": True, "content": _json("AppendRequest")},
                    "responses": _responses("AppendResult", "Stored and searchable.", *_BODY),
                }
            },
            "/v1/ingest": {
                "post": {
                    "operationId": "ingest",
                    "summary": "Ingest a session file on the server (`serve --ingest-root`).",
                    "parameters": [_WORKSPACE_QUERY],
                    "requestBody": {"required": True, "content": _json("IngestRequest")},
                    "responses": _responses("IngestResult", "What the file held.", *_BODY),
                }
            },
        },
    }
    return copy.deepcopy(doc)

"""Checks on identifiers and request fields that every entry point shares."""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime

from pgsearch import policy
from pgsearch.errors import ConfigError, InvalidQuery, ScopeError
from pgsearch.plan import Filters
from pgsearch.settings import Settings
from pgsearch.terminal import key_problem
from pgsearch.types import MAX_ID_CHARS, Scope, SessionQueryRequest

MAX_WORKSPACE_CHARS = 200


def check_workspace(workspace: str) -> str:
    """`workspace` in Unicode NFC if it is a usable workspace id, else `ConfigError`.

    ``café`` typed as one code point or as ``e`` plus a combining accent is the same
    workspace: ids are compared, stored and bound in NFC. Control characters (C0,
    C1, DEL), format characters (bidirectional overrides and isolates, zero-width
    characters, the BOM) and line or paragraph separators are refused: they make
    two ids that look alike differ, or an id display as something it is not.
    """
    if not isinstance(workspace, str) or not workspace.strip():
        raise ConfigError("a workspace id must be a non-empty string")
    if not workspace.isascii():
        try:
            workspace.encode("utf-8")
        except UnicodeEncodeError:  # e.g. undecodable bytes in a command-line argument
            raise ConfigError("workspace id must be valid Unicode (UTF-8)") from None
        workspace = unicodedata.normalize("NFC", workspace)
    for position, char in enumerate(workspace):
        if char.isascii() and char.isprintable():
            continue
        if unicodedata.category(char) in _REFUSED_CATEGORIES:
            raise ConfigError(
                f"workspace id must not contain control, format or bidirectional "
                f"characters (U+{ord(char):04X} {unicodedata.name(char, 'control')} "
                f"at position {position})"
            )
    if len(workspace) > MAX_WORKSPACE_CHARS:
        raise ConfigError(f"workspace id must be at most {MAX_WORKSPACE_CHARS} characters")
    return workspace


#: Unicode categories a workspace id may not contain: controls, format characters
#: (bidi controls, zero-width characters, BOM), line and paragraph separators.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


def check_key(name: str, value: object, *, max_chars: int = MAX_ID_CHARS) -> str:
    """`value` if it can name a stored key (session id, tool name), else `InvalidQuery`.

    Keys are 1 to `max_chars` characters of valid Unicode without NUL: anything else
    could never have been stored, and the driver would reject it.
    """
    if not isinstance(value, str) or not 0 < len(value) <= max_chars:
        raise InvalidQuery(f"{name} must be 1 to {max_chars} characters")
    if "\x00" in value:
        raise InvalidQuery(f"{name} must not contain NUL characters")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidQuery(f"{name} contains a lone surrogate (not valid Unicode)") from None
    return value


def check_stored_key(name: str, value: object, *, max_chars: int = MAX_ID_CHARS) -> str:
    """`value` if it may be stored as a key shown to people and agents (a session id,
    a tool name), else ValueError naming what is wrong and where
    (`pgsearch.terminal.key_problem`)."""
    problem = key_problem(name, value, max_chars=max_chars)
    if problem is not None:
        raise ValueError(problem)
    assert isinstance(value, str)
    return value


def check_names(value: object, name: str) -> tuple[str, ...]:
    """`value` as a tuple of distinct names, else `InvalidQuery`."""
    if isinstance(value, str) or not isinstance(value, tuple | list | frozenset | set):
        raise InvalidQuery(f"{name} must be a list of names")
    for item in value:
        if not isinstance(item, str):
            raise InvalidQuery(f"{name} must be a list of names, got {item!r}")
    return tuple(dict.fromkeys(value))


def check_time(value: datetime | None, name: str) -> datetime | None:
    """`value` as an aware datetime (naive means UTC), else `InvalidQuery`."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidQuery(f"{name} must be a datetime")
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def validate_request(scope: Scope, request: SessionQueryRequest, settings: Settings) -> Filters:
    """The filters of a search request in `scope`, else `InvalidQuery` or `ScopeError`."""
    if not isinstance(request, SessionQueryRequest):
        raise InvalidQuery("request must be a SessionQueryRequest")
    if request.workspace_id is not None and request.workspace_id != scope.workspace:
        raise ScopeError(
            f"this provider is bound to workspace {scope.workspace!r}; "
            f"a request cannot search workspace {request.workspace_id!r}"
        )
    session = scope.session_id
    if request.session_id is not None:
        if scope.session_id is not None and request.session_id != scope.session_id:
            raise ScopeError(
                f"this provider is bound to session {scope.session_id!r}; "
                f"a request cannot search session {request.session_id!r}"
            )
        session = request.session_id
    if not isinstance(request.query, str):
        raise InvalidQuery("query must be a string")
    if len(request.query) > settings.max_query_chars:
        raise InvalidQuery(
            f"query is {len(request.query):,} characters; the limit is {settings.max_query_chars:,}"
        )
    limit = request.limit
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidQuery("limit must be a positive integer")
    excerpt = request.excerpt_bytes
    if isinstance(excerpt, bool) or not isinstance(excerpt, int) or excerpt < 1:
        raise InvalidQuery("excerpt_bytes must be a positive integer")
    if request.cursor is not None and not isinstance(request.cursor, str):
        raise InvalidQuery("cursor must be a string from a previous result")
    kinds = check_names(request.kinds, "kinds") or policy.DEFAULT_SEARCH_KINDS
    roles = check_names(request.roles, "roles")
    bad = [k for k in kinds if k not in policy.ALL_KINDS]
    if bad:
        raise InvalidQuery(f"unknown kind {bad[0]!r}; known kinds: {', '.join(policy.ALL_KINDS)}")
    bad = [r for r in roles if r not in policy.ROLES]
    if bad:
        raise InvalidQuery(f"unknown role {bad[0]!r}; roles: {', '.join(policy.ROLES)}")
    since = check_time(request.since, "since")
    until = check_time(request.until, "until")
    if since and until and since >= until:
        raise InvalidQuery("since must be earlier than until")
    for name, value in (("tool_name", request.tool_name), ("session_id", session)):
        if value is not None:
            check_key(name, value)
    return Filters(
        workspace=scope.workspace,
        kinds=kinds,
        session_id=session,
        roles=roles,
        tool_name=request.tool_name,
        since=since,
        until=until,
    )

"""Agent tools: names, descriptions, JSON schemas, argument checks and handlers.

Shared by the MCP server (`pgsearch mcp`) and by hosts that call a provider
directly (`session_tools`). The definitions are constants that never depend on
configuration: hosts cache tool prompts, so a name, description or schema that
changed between runs would break that cache (a test pins them byte for byte).

Scope never comes from arguments. The provider is bound to a workspace (and maybe a
session) by whoever built it; a call naming another workspace or session is refused
with an error the model can read. Handlers never raise into the host: a bad argument,
a missing session or a database failure becomes an ``error: ...`` text.

Results are compact text an LLM reads well, each ending with a hint for the next
call and never longer than `MAX_RESULT_BYTES`; the same result is also available as
JSON-ready data (`ToolOutput.data`).
"""

from __future__ import annotations

import copy
import json
import logging
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pgsearch import policy
from pgsearch.errors import InvalidQuery, PgSearchError, ScopeError
from pgsearch.excerpt import clip, truncate_bytes, utf8_len
from pgsearch.highlight import model_excerpt
from pgsearch.messages import parse_time
from pgsearch.settings import Settings
from pgsearch.terminal import flat, inline, json_safe, quoted, terminal_safe
from pgsearch.types import (
    DEFAULT_CONTEXT,
    DEFAULT_LIMIT,
    MAX_ID_CHARS,
    MAX_LIMIT,
    MAX_RESULT_BYTES,
    MAX_WINDOW,
    AsyncScopedProvider,
    Scope,
    ScopedProvider,
    SessionQueryRequest,
    SessionQueryResult,
    Window,
)

log = logging.getLogger(__name__)

SEARCH = "session_search"
AROUND = "session_around"
MESSAGES = "session_messages"
#: Output formats of `tool_schemas` (and `pgsearch tool-schema --format`).
SCHEMA_FORMATS = ("openai", "anthropic", "mcp")


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    name: str
    description: str
    input_schema: Mapping[str, Any]


_SESSION_ID = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_ID_CHARS,
    "description": "A session_id from a session_search match.",
}

TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name=SEARCH,
        description=(
            "Search earlier agent sessions of this workspace for what was said, done or "
            "seen before, e.g. after context was compacted. Returns ranked matches with "
            "short excerpts (matched words between ⟦ and ⟧; a ⟦ or ⟧ of the text itself "
            "is escaped as \\⟦ or \\⟧); each names a session_id and seq "
            "to pass to session_around. Typos, accents and case are tolerated; an empty "
            "query lists the newest entries. By default user, assistant, tool-call and "
            "tool-error entries are searched."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "maxLength": Settings().max_query_chars,
                    "description": "Words to look for; empty or absent lists the newest entries.",
                },
                "kinds": {
                    "type": "array",
                    "items": {"type": "string", "enum": list(policy.ALL_KINDS)},
                    "uniqueItems": True,
                    "description": (
                        "Entry kinds to search (default: user_text, assistant_text, "
                        "tool_input, tool_error)."
                    ),
                },
                "roles": {
                    "type": "array",
                    "items": {"type": "string", "enum": list(policy.ROLES)},
                    "uniqueItems": True,
                    "description": "Only entries of these roles.",
                },
                "tool_name": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_ID_CHARS,
                    "description": "Only entries of this tool (calls and their errors).",
                },
                "since": {
                    "type": "string",
                    "format": "date-time",
                    "description": "Only entries at or after this ISO 8601 time.",
                },
                "until": {
                    "type": "string",
                    "format": "date-time",
                    "description": "Only entries before this ISO 8601 time.",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "default": DEFAULT_LIMIT,
                    "description": "Matches per page (at most 50; a larger limit is capped).",
                },
                "per_session": {
                    "type": "boolean",
                    "default": True,
                    "description": (
                        "Only the best match of each session (false: every match). "
                        "Within one session every match is listed."
                    ),
                },
                "session_id": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_ID_CHARS,
                    "description": "Search this one session only.",
                },
                "cursor": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The cursor a previous page returned, to get the next page.",
                },
            },
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        name=AROUND,
        description=(
            "Show the messages around one message of an earlier session: the message "
            "(session_id and seq from a session_search match) with up to `before` "
            "messages before it and `after` after it, full text, at most 16 in all."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "session_id": _SESSION_ID,
                "seq": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "The seq of the message to centre on.",
                },
                "before": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": MAX_WINDOW - 1,
                    "default": DEFAULT_CONTEXT,
                    "description": "Messages to show before it.",
                },
                "after": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": MAX_WINDOW - 1,
                    "default": DEFAULT_CONTEXT,
                    "description": "Messages to show after it.",
                },
            },
            "required": ["session_id", "seq"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        name=MESSAGES,
        description=(
            "Read an earlier session in order, one page of at most 16 messages at a "
            "time, starting at start_seq; the result names the start_seq of the next page."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "session_id": _SESSION_ID,
                "start_seq": {
                    "type": "integer",
                    "minimum": 0,
                    "default": 0,
                    "description": "The seq to start from (0: the beginning).",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "default": MAX_WINDOW,
                    "description": "Messages per page (at most 16; a larger limit is capped).",
                },
            },
            "required": ["session_id"],
            "additionalProperties": False,
        },
    ),
)
_SPECS = {spec.name: spec for spec in TOOL_SPECS}
#: The most a ``limit`` can ask per tool: a larger one is capped (and the result says
#: so), as the API and the CLI cap it, rather than refused.
LIMIT_CAPS = {SEARCH: MAX_LIMIT, MESSAGES: MAX_WINDOW}


def tool_definitions(fmt: str = "mcp") -> list[dict[str, Any]]:
    """The tool definitions in one host format: ``openai`` (Chat Completions
    ``tools``), ``anthropic`` (Messages API ``tools``) or ``mcp`` (``tools/list``)."""
    if fmt not in SCHEMA_FORMATS:
        raise InvalidQuery(f"unknown tool schema format {fmt!r}; use one of {SCHEMA_FORMATS}")
    return [_definition(spec, fmt) for spec in TOOL_SPECS]


def _definition(spec: ToolSpec, fmt: str) -> dict[str, Any]:
    schema = copy.deepcopy(dict(spec.input_schema))
    if fmt == "openai":
        return {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": schema,
            },
        }
    if fmt == "anthropic":
        return {"name": spec.name, "description": spec.description, "input_schema": schema}
    return {"name": spec.name, "description": spec.description, "inputSchema": schema}


# --- argument checks --------------------------------------------------------------


class ToolArgumentError(InvalidQuery):
    """The tool arguments are invalid."""


def parse_arguments(raw: str | bytes | Mapping[str, Any] | None) -> dict[str, Any]:
    """Raw tool arguments (a JSON text or an already decoded object) as a dict."""
    if raw is None:
        return {}
    if isinstance(raw, bytes | bytearray):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolArgumentError("arguments are not valid UTF-8") from None
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ToolArgumentError(
                f"arguments are not valid JSON: {exc.msg} at column {exc.colno}"
            ) from None
        except RecursionError:
            raise ToolArgumentError("arguments are nested too deeply") from None
    if not isinstance(raw, Mapping):
        raise ToolArgumentError(f"arguments must be a JSON object, got {_json_type(raw)}")
    return dict(raw)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def check_value(name: str, value: Any, schema: Mapping[str, Any]) -> Any:
    """`value` checked against a property schema of the subset used here (string,
    integer, boolean, array; bounds, lengths, enums), else `ToolArgumentError`."""
    kind = schema["type"]
    if kind == "string":
        if not isinstance(value, str):
            raise ToolArgumentError(f"{name!r} must be a string, got {_json_type(value)}")
        if len(value) < schema.get("minLength", 0):
            raise ToolArgumentError(f"{name!r} must not be empty")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            raise ToolArgumentError(
                f"{name!r} is {len(value):,} characters; the limit is {schema['maxLength']:,}"
            )
        if "enum" in schema and value not in schema["enum"]:
            raise ToolArgumentError(
                f"{name!r} has unknown value {value!r} (allowed: {', '.join(schema['enum'])})"
            )
        return value
    if kind == "integer":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ToolArgumentError(f"{name!r} must be an integer, got {_json_type(value)}")
        low, high = schema.get("minimum"), schema.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise ToolArgumentError(f"{name!r} must be {bounds}, got {value}")
        return value
    if kind == "boolean":
        if not isinstance(value, bool):
            raise ToolArgumentError(f"{name!r} must be true or false, got {_json_type(value)}")
        return value
    if kind == "array":
        if not isinstance(value, list | tuple):
            raise ToolArgumentError(f"{name!r} must be an array, got {_json_type(value)}")
        items = [check_value(f"{name}[{i}]", v, schema["items"]) for i, v in enumerate(value)]
        return list(dict.fromkeys(items))
    raise AssertionError(f"unsupported schema type {kind!r}")  # pragma: no cover


def check_arguments(name: str, arguments: Mapping[str, Any], scope: Scope) -> dict[str, Any]:
    """Arguments of tool `name` checked against its schema and `scope`.

    Unknown fields, wrong types and out-of-range values raise `ToolArgumentError`;
    a ``workspace_id`` or ``session_id`` naming a scope other than `scope` raises
    `ScopeError`. Defaults are filled in.
    """
    spec = _SPECS.get(name)
    if spec is None:
        raise ToolArgumentError(f"unknown tool {name!r}; tools: {', '.join(_SPECS)}")
    args = dict(arguments)
    # Not part of any schema, but a model may still send it: refuse another workspace
    # explicitly rather than as an unknown field, so the reason is clear.
    workspace = args.pop("workspace_id", None)
    same = isinstance(workspace, str) and unicodedata.normalize("NFC", workspace) == scope.workspace
    if workspace is not None and not same:
        raise ScopeError(
            f"this tool is bound to workspace {scope.workspace!r}; "
            f"it cannot reach workspace {workspace!r}"
        )
    schema = spec.input_schema
    properties: Mapping[str, Any] = schema["properties"]
    unknown = [k for k in args if k not in properties]
    if unknown:
        raise ToolArgumentError(
            f"unknown argument {unknown[0]!r} for {name} (allowed: {', '.join(properties)})"
        )
    for required in schema.get("required", ()):
        if args.get(required) is None:
            raise ToolArgumentError(f"missing required argument {required!r} for {name}")
    checked: dict[str, Any] = {}
    for key, prop in properties.items():
        value = args.get(key)
        if value is None:
            if "default" in prop:
                checked[key] = prop["default"]
            continue
        checked[key] = check_value(key, value, prop)
        if prop.get("format") == "date-time":
            checked[key] = check_date_time(key, value)
    cap = LIMIT_CAPS.get(name)
    if cap is not None and checked.get("limit", 0) > cap:
        checked["limit"] = cap
    session = checked.get("session_id")
    if session is not None and scope.session_id is not None and session != scope.session_id:
        raise ScopeError(
            f"this tool is bound to session {scope.session_id!r}; "
            f"it cannot reach session {session!r}"
        )
    return checked


def check_date_time(name: str, value: str) -> datetime:
    """An ISO 8601 date-time argument as a `datetime`, else `ToolArgumentError`."""
    try:
        parsed = parse_time(value)
    except ValueError:
        parsed = None
    if parsed is None:
        raise ToolArgumentError(
            f"{name!r} must be an ISO 8601 date-time such as 2026-01-31T12:00:00Z, got {value!r}"
        )
    return parsed


def search_request(args: Mapping[str, Any]) -> SessionQueryRequest:
    """A checked `session_search` call as a request."""
    return SessionQueryRequest(
        query=args.get("query", ""),
        kinds=tuple(args.get("kinds", ())),
        roles=tuple(args.get("roles", ())),
        tool_name=args.get("tool_name"),
        since=args.get("since"),
        until=args.get("until"),
        limit=args.get("limit", DEFAULT_LIMIT),
        per_session=args.get("per_session", True),
        cursor=args.get("cursor"),
        session_id=args.get("session_id"),
    )


# --- running ----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ToolOutput:
    """What a tool call produced: text for the model, JSON-ready data, error flag."""

    text: str
    data: dict[str, Any] | None = None
    is_error: bool = False


@dataclass(frozen=True, kw_only=True)
class _Call:
    """A checked tool call: which provider method, with what, and how to render it."""

    name: str
    args: dict[str, Any]
    note: str | None
    capped: dict[str, int]
    method: str
    positional: tuple[Any, ...]
    keywords: dict[str, Any]
    #: The call is within one session (scope or argument), where every match is listed.
    one_session: bool


def _prepare(scope: Scope, name: str, arguments: str | bytes | Mapping[str, Any] | None) -> _Call:
    """Parse and check `arguments`; raises `PgSearchError` for a bad call."""
    raw = parse_arguments(arguments)
    args = check_arguments(name, raw, scope)
    note, capped = _capped(raw, args)
    positional: tuple[Any, ...]
    keywords: dict[str, Any]
    if name == SEARCH:
        method, positional, keywords = "search", (search_request(args),), {}
    elif name == AROUND:
        method, positional = "around", (args["session_id"], args["seq"])
        keywords = {"before": args["before"], "after": args["after"]}
    else:
        method, positional = "session_messages", (args["session_id"],)
        keywords = {"start_seq": args["start_seq"], "limit": args["limit"]}
    return _Call(
        name=name,
        args=args,
        note=note,
        capped=capped,
        method=method,
        positional=positional,
        keywords=keywords,
        one_session=scope.session_id is not None or args.get("session_id") is not None,
    )


def _render(call: _Call, result: Any) -> ToolOutput:
    if call.name == SEARCH:
        data = result.to_json()
        if call.capped:
            data["limit_capped"] = call.capped
        return ToolOutput(
            text=render_search(result, call.args, note=call.note, one_session=call.one_session),
            data=data,
        )
    if call.name == AROUND:
        return ToolOutput(text=render_window(result, tool=AROUND), data=result.to_json())
    data = result.to_json()
    if call.capped:
        data["limit_capped"] = call.capped
    return ToolOutput(text=render_window(result, tool=MESSAGES, note=call.note), data=data)


def _failed(name: str, exc: Exception) -> ToolOutput:
    if isinstance(exc, PgSearchError):
        return ToolOutput(text=f"error: {exc}", is_error=True)
    log.error("tool %s failed", name, exc_info=exc)  # a host must never see a tool crash
    return ToolOutput(text=f"error: {name} failed ({type(exc).__name__})", is_error=True)


def run_tool(
    provider: ScopedProvider, name: str, arguments: str | bytes | Mapping[str, Any] | None
) -> ToolOutput:
    """Run one tool call; every failure becomes an ``error: ...`` output, never a raise.

    A ``limit`` above the tool's cap is capped, and the result says so (in the text
    and as ``limit_capped`` in the data).
    """
    try:
        call = _prepare(provider.scope, name, arguments)
        result = getattr(provider, call.method)(*call.positional, **call.keywords)
        return _render(call, result)
    except Exception as exc:
        return _failed(name, exc)


async def run_tool_async(
    provider: AsyncScopedProvider,
    name: str,
    arguments: str | bytes | Mapping[str, Any] | None,
) -> ToolOutput:
    """`run_tool` for an asyncio provider (`pgsearch.aio.AsyncProvider`): the same
    checks and rendering, the call awaited on the event loop."""
    try:
        call = _prepare(provider.scope, name, arguments)
        result = await getattr(provider, call.method)(*call.positional, **call.keywords)
        return _render(call, result)
    except Exception as exc:
        return _failed(name, exc)


# --- rendering --------------------------------------------------------------------


def _args_json(args: Mapping[str, Any]) -> str:
    return json_safe(json.dumps(dict(args), ensure_ascii=False, separators=(", ", ": ")))


def _when(value: datetime) -> str:
    return value.isoformat(timespec="seconds").replace("+00:00", "Z")


def _cap(text: str, hint: str) -> str:
    """`text` and `hint`, cut so that the whole stays within `MAX_RESULT_BYTES`."""
    note = "\n[result cut at the size limit]\n"
    if utf8_len(text) + utf8_len(hint) + 1 <= MAX_RESULT_BYTES:
        return f"{text}\n{hint}" if hint else text
    room = MAX_RESULT_BYTES - utf8_len(hint) - utf8_len(note)
    return truncate_bytes(text, max(room, 0)) + note + hint


def _capped(raw: Mapping[str, Any], args: Mapping[str, Any]) -> tuple[str | None, dict[str, int]]:
    """A note, and its data, when the ``limit`` asked for was capped."""
    asked = raw.get("limit")
    if isinstance(asked, float) and asked.is_integer():
        asked = int(asked)
    if not isinstance(asked, int) or isinstance(asked, bool) or asked <= args.get("limit", asked):
        return None, {}
    used = int(args["limit"])
    return (
        f"Note: limit {asked} was capped at {used}, the most per page.",
        {"requested": asked, "limit": used},
    )


def render_search(
    result: SessionQueryResult,
    args: Mapping[str, Any],
    *,
    note: str | None = None,
    one_session: bool = False,
) -> str:
    """A search result as compact text, ending with a hint for the next call.

    `one_session`: the search was within one session, where every match is listed.
    """
    browsing = not str(args.get("query") or "").strip()
    searched = f"{result.searched} {'entry' if result.searched == 1 else 'entries'} searched"
    if not result.matches:
        lines = [f"No {'entries' if browsing else 'matches'} ({searched})."]
        if note:
            lines.append(note)
        if result.notice:
            lines.append(result.notice)
        if result.searched == 0:
            lines.append(
                "Nothing in scope: no sessions were ingested here, or filters exclude all."
            )
        hint = (
            "Hint: try fewer or other words, drop filters, or an empty query to list the "
            "newest entries."
        )
        return _cap("\n".join(lines), hint)
    per_session = args.get("per_session", True) and not one_session
    scope = "best match per session" if per_session else "every match"
    n = len(result.matches)
    shown = f"Newest entries: {n}" if browsing else f"{n} {'match' if n == 1 else 'matches'}"
    lines = [
        f"{shown} ({searched}; {scope})"
        + ("; candidate cap reached, narrow the query for more" if result.candidates_capped else "")
        + "."
    ]
    if note:
        lines.append(note)
    if result.notice:
        lines.append(f"Note: {result.notice}.")
    for i, m in enumerate(result.matches, 1):
        # Stored fields are quoted or flattened: none can add a line or a field.
        tool = f" tool={inline(m.tool_name)}" if m.tool_name else ""
        title = f" title={quoted(m.title)}" if m.title else ""
        parent = f" parent_session_id={inline(m.parent_session_id)}" if m.parent_session_id else ""
        lines.append(
            f"[{i}] session_id={inline(m.session_id)}{parent} seq={m.seq} {m.kind} "
            f"role={m.role}{tool} turn={m.turn} at={_when(m.created_at)}{title}"
        )
        lines.append("    " + flat(model_excerpt(m.excerpt, m.highlights)))
    first = result.matches[0]
    hint = (
        f"Next: session_around {_args_json({'session_id': first.session_id, 'seq': first.seq})}"
        " shows the messages around a match."
    )
    if result.next_cursor:
        hint += (
            "\nMore: call session_search again with the same arguments and "
            f'"cursor": "{result.next_cursor}".'
        )
    return _cap("\n".join(lines), hint)


def _message_header(m: Any) -> str:
    mark = ">>" if m.anchor else "--"
    tool = f" tool={inline(m.tool_name)}" if m.tool_name else ""
    return f"{mark} seq={m.seq} {m.kind} role={m.role}{tool} turn={m.turn} at={_when(m.created_at)}"


def render_window(window: Window, *, tool: str, note: str | None = None) -> str:
    """A window or page of messages as compact text, ending with a hint."""
    msgs = window.messages
    if tool == AROUND:
        head = (
            f"session_id={inline(window.session_id)}: {len(msgs)} messages around seq "
            f"{window.anchor_seq} (marked >>)."
        )
        first, last = (msgs[0].seq, msgs[-1].seq) if msgs else (0, window.anchor_seq)
        hint = (
            "Next: session_messages "
            + _args_json({"session_id": window.session_id, "start_seq": last + 1})
            + " reads on"
            + ("; a larger before shows earlier messages." if first > 0 else ".")
        )
    else:
        head = (
            f"session_id={inline(window.session_id)}: {len(msgs)} messages from seq "
            f"{window.anchor_seq}."
        )
        if window.next_seq is not None:
            hint = "Next page: session_messages " + _args_json(
                {"session_id": window.session_id, "start_seq": window.next_seq}
            )
        else:
            hint = "End of session."
    if note:
        head = f"{head}\n{note}"
    headers = [_message_header(m) for m in msgs]
    fixed = utf8_len(head) + utf8_len(hint) + sum(utf8_len(h) + 8 for h in headers) + 64
    per_message = max((MAX_RESULT_BYTES - fixed) // max(len(msgs), 1), 64)
    lines = [head]
    for m, header in zip(msgs, headers, strict=True):
        lines.append(header)
        body = clip(m.content, per_message)
        # Every line of a message is indented under its header, escaped: the text
        # cannot start a line of its own or hide what follows it.
        lines.extend("   " + terminal_safe(line) for line in (body.splitlines() or [""]))
    return _cap("\n".join(lines), hint)


# --- the factory ------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class AgentTool:
    """One session tool bound to a provider, in the shapes hosts ask for.

    Call it with the raw arguments the model produced (a JSON text or a dict); it
    returns the text to hand back to the model, an ``error: ...`` text when the
    arguments or the call fail, and never raises.
    """

    name: str
    description: str
    input_schema: Mapping[str, Any]
    provider: ScopedProvider = field(repr=False, compare=False)

    def openai(self) -> dict[str, Any]:
        """The OpenAI Chat Completions ``tools`` entry."""
        return _definition(_SPECS[self.name], "openai")

    def anthropic(self) -> dict[str, Any]:
        """The Anthropic Messages API ``tools`` entry."""
        return _definition(_SPECS[self.name], "anthropic")

    def run(self, arguments: str | bytes | Mapping[str, Any] | None = None) -> ToolOutput:
        return run_tool(self.provider, self.name, arguments)

    def __call__(self, arguments: str | bytes | Mapping[str, Any] | None = None) -> str:
        return self.run(arguments).text


def session_tools(provider: ScopedProvider | None, *, probe: bool = True) -> list[AgentTool]:
    """The session tools bound to `provider`, or none when it cannot serve.

    With `probe`, one cheap browse checks that the database answers and has the
    schema; a provider that fails it (or ``None``, or one whose store was closed)
    yields an empty list rather than tools that could only answer errors.
    """
    if provider is None or getattr(provider, "closed", False):
        return []
    if probe:
        try:
            provider.search(SessionQueryRequest(limit=1))
        except PgSearchError as exc:
            log.warning("session tools disabled: %s", exc)
            return []
    return [
        AgentTool(
            name=spec.name,
            description=spec.description,
            input_schema=copy.deepcopy(dict(spec.input_schema)),
            provider=provider,
        )
        for spec in TOOL_SPECS
    ]


def tool_names() -> Sequence[str]:
    return tuple(_SPECS)

"""Codex CLI rollout logs: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``.

Each line is ``{"timestamp": ..., "type": ..., "payload": {...}}``. The first is
``session_meta`` (session id, working directory, CLI version); the conversation is
in ``response_item`` lines, mapped as follows:

- ``message`` from the user -> ``user_text``, except the context Codex injects
  (``<environment_context>``, ``<user_instructions>``, AGENTS.md) -> ``system``;
  from the assistant -> ``assistant_text``; ``developer``/``system`` -> ``system``;
- ``function_call``, ``custom_tool_call``, ``local_shell_call``, ``web_search_call``
  -> ``tool_input`` with the tool name (arguments stored, indexed only by policy);
- ``function_call_output`` / ``custom_tool_call_output`` -> ``tool_output``, or
  ``tool_error`` when Codex marked it failed (``success: false``, a non-zero exit
  code) or the text reads as an error, named after the call it answers; a search
  program (``grep``, ``rg``, ``find``) that exited 1 because it found nothing is
  not an error;
- ``compacted`` (a compaction summary) -> ``summary``.

``event_msg`` lines repeat the same conversation for the terminal UI and
``turn_context`` lines hold settings, so both are skipped, as are ``reasoning``
items (usually encrypted). Older rollouts without the envelope (a bare
``{"id", "timestamp", "instructions"}`` first line, then bare items) are read too.
Lines are read under the lenient line policy (`pgsearch.adapters.common`).
"""

from __future__ import annotations

import json
import re
from pathlib import PurePath
from typing import Any

from pgsearch import policy
from pgsearch.adapters.common import (
    Adapter,
    FileHeader,
    Parsed,
    ToolCall,
    ToolCalls,
    arguments_json,
    exit_code_in,
    head_objects,
    ident,
    name_of,
    quiet_time,
    read_lines,
    shell_command,
    text,
    timestamp,
)
from pgsearch.messages import Entry

NAME = "codex"
#: Bumped when the mapping changes: files read by an older mapping are read again.
VERSION = 3
ENVELOPE_TYPES = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
)
ITEM_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "web_search_call",
    }
)
_CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "web_search_call"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})
#: User-role text Codex writes itself: instructions and environment context.
_INJECTED_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "<INSTRUCTIONS>",
    "# AGENTS.md instructions",
    "<permissions instructions>",
    "<user_shell_command>",
    "<turn_aborted>",
)
_EXIT_RE = re.compile(r"Exit code: (-?\d+)\b")
_SHELL_CALLS = frozenset({"shell", "local_shell", "exec_command", "shell_command"})
_UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)


def looks_like(obj: dict[str, Any]) -> bool:
    """Whether a decoded line is a Codex rollout line (with or without envelope).

    The envelope ``{"timestamp", "type", "payload"}`` is Codex's whatever its type, so
    a rollout of a newer Codex whose lines carry types this mapping does not know is
    still recognised (those lines are skipped and counted)."""
    kind = name_of(obj.get("type"))
    if kind is not None and isinstance(obj.get("payload"), dict):
        if kind in ENVELOPE_TYPES:
            return True
        if "timestamp" in obj and not ({"role", "data", "message"} & obj.keys()):
            return True
    if "role" not in obj and "id" in obj and "timestamp" in obj and "instructions" in obj:
        return True  # the first line of an older rollout
    return "record_type" in obj and "role" not in obj


def _meta(obj: dict[str, Any]) -> dict[str, Any] | None:
    if obj.get("type") == "session_meta" and isinstance(obj.get("payload"), dict):
        payload: dict[str, Any] = obj["payload"]
        return payload
    if "type" not in obj and "id" in obj and "timestamp" in obj:
        return obj
    return None


def header(data: bytes, *, default_session: str, path: PurePath | None = None) -> FileHeader:
    """Session id and working directory from ``session_meta`` (else the file name)."""
    for obj in head_objects(data):
        meta = _meta(obj)
        if meta is None:
            continue
        started = (
            quiet_time(meta.get("timestamp")) if isinstance(meta.get("timestamp"), str) else None
        )
        cwd = text(meta.get("cwd")) or None
        sid = (
            ident(meta.get("id"))
            or ident(meta.get("session_id"))
            or _session_from_name(default_session)
        )
        return FileHeader(session_id=sid, cwd=cwd, started_at=started)
    return FileHeader(session_id=_session_from_name(default_session))


def _session_from_name(stem: str) -> str:
    """The id at the end of ``rollout-2025-01-02T03-04-05-<uuid>``, else the name."""
    name = PurePath(stem).name
    match = _UUID_RE.search(name)
    return match.group(0) if match else name


def _tool_call_in(line: Any, call_id: str) -> ToolCall | None:
    if not isinstance(line, dict):
        return None
    payload = line.get("payload")
    item: dict[str, Any] = payload if isinstance(payload, dict) else line
    itype = name_of(item.get("type"))
    if item.get("call_id") == call_id and (itype in _CALLS or _drift_call(itype) == "call"):
        return _call(item)
    return None


def _call(item: dict[str, Any]) -> ToolCall:
    name = _call_name(item)
    command = None
    if name in _SHELL_CALLS:
        args = item.get("action") if item.get("type") == "local_shell_call" else None
        command = shell_command(args if args is not None else item.get("arguments"))
    return ToolCall(name, command)


def _call_name(item: dict[str, Any]) -> str:
    if item.get("type") == "local_shell_call":
        return "local_shell"
    if item.get("type") == "web_search_call":
        return "web_search"
    itype = name_of(item.get("type"))
    fallback = itype.removesuffix("_call") if itype and itype not in _CALLS else None
    return ident(item.get("name")) or ident(item.get("tool")) or fallback or "unknown"


def _content_text(content: Any) -> str:
    parts: list[str] = []
    for part in content if isinstance(content, list) else ():
        if isinstance(part, dict):
            if isinstance(part.get("text"), str):
                parts.append(text(part["text"]))
            elif part.get("type") in ("input_image", "image"):
                parts.append("[image]")
    if isinstance(content, str):
        parts.append(text(content))
    return "\n".join(p for p in parts if p)


def _output(value: Any) -> tuple[str, bool, dict[str, Any]]:
    """(text, marked as failed, extra) of a call output in any of its shapes.

    A command that exited non-zero counts as marked failed by the source, as Codex
    itself reports it.
    """
    extra: dict[str, Any] = {}
    if isinstance(value, dict):  # {"content": ..., "success": false}
        body = _content_text(value.get("content")) or text(value.get("content"))
        return body, value.get("success") is False, extra
    if isinstance(value, list):
        return _content_text(value), False, extra
    body = text(value)
    if body.startswith("{"):
        # Older rollouts wrap shell results: {"output": "...", "metadata": {...}}.
        try:
            decoded = json.loads(body)
        except (ValueError, RecursionError):
            decoded = None
        if isinstance(decoded, dict) and isinstance(decoded.get("output"), str):
            meta = decoded.get("metadata")
            code = meta.get("exit_code") if isinstance(meta, dict) else None
            if isinstance(code, int) and not isinstance(code, bool):
                extra["exit_code"] = code
            return text(decoded["output"]), bool(extra.get("exit_code")), extra
    # Newer rollouts put it in the text: "Exit code: 1\nWall time: ...\nOutput:\n...".
    match = _EXIT_RE.match(body)
    if match:
        extra["exit_code"] = int(match.group(1))
    return body, bool(extra.get("exit_code")), extra


def parse(data: bytes, start: int, first_line: int, *, path: str, header: FileHeader) -> Parsed:
    """Entries of the lines of ``data[start:]``, under the lenient line policy."""
    sid = header.session_id
    tools = ToolCalls(data, start, _tool_call_in)
    parsed = Parsed()

    def handle(lineno: int, obj: dict[str, Any]) -> list[Entry] | None:
        kind = name_of(obj.get("type"))
        if looks_like(obj) or kind in ITEM_TYPES:
            parsed.recognised += 1
        created = timestamp(obj.get("timestamp"), path=path, line=lineno)
        if kind in ENVELOPE_TYPES:
            payload = obj.get("payload")
            if not isinstance(payload, dict):
                return None
            if kind == "compacted":
                summary = text(payload.get("message")).strip()
                if not summary:
                    return None
                return [
                    Entry(
                        session_id=sid,
                        seq=lineno - 1,
                        role="system",
                        kind=policy.SUMMARY,
                        content=summary,
                        created_at=created,
                        summary=summary,
                        extra={"line": lineno},
                    )
                ]
            if kind != "response_item":
                return None
            item = payload
        elif kind in ITEM_TYPES:
            item = obj  # an older rollout: bare response items
            if created is None and not parsed.entries:
                created = header.started_at
        else:
            if kind is not None and isinstance(obj.get("payload"), dict):
                parsed.skip_unknown(kind)  # an envelope type of a newer Codex
            return None
        entry = _item_entry(item, sid, lineno, created, tools)
        if entry is None and not _known_item(item):
            parsed.skip_unknown(f"response_item/{name_of(item.get('type')) or ''}")
        return [entry] if entry is not None else None

    return read_lines(data, start, first_line, path=path, parsed=parsed, handle=handle)


def _known_item(item: dict[str, Any]) -> bool:
    itype = name_of(item.get("type"))
    return itype in ITEM_TYPES or _drift_call(itype) is not None


def _drift_call(itype: str | None) -> str | None:
    """``call`` or ``output`` for an item type of a newer Codex shaped like a tool call
    (``mcp_tool_call``, ``image_generation_call``) or its output (``…_call_output``)."""
    if itype is None or itype in ITEM_TYPES:
        return None
    if itype.endswith("_call_output"):
        return "output"
    if itype.endswith("_call"):
        return "call"
    return None


def _item_entry(
    item: dict[str, Any], sid: str, lineno: int, created: Any, tools: ToolCalls
) -> Entry | None:
    itype = name_of(item.get("type"))
    extra: dict[str, Any] = {"line": lineno}
    drift = _drift_call(itype)
    call_id = ident(item.get("call_id"))
    if call_id:
        extra["call_id"] = call_id
    role, kind, content, tool_name, arguments = "", "", "", None, ""
    if itype == "message":
        content = _content_text(item.get("content"))
        source_role = item.get("role")
        if not content.strip():
            return None
        if source_role == "assistant":
            role, kind = "assistant", policy.ASSISTANT_TEXT
        elif source_role == "user" and not content.lstrip().startswith(_INJECTED_PREFIXES):
            role, kind = "user", policy.USER_TEXT
        else:
            role, kind = "system", policy.SYSTEM
            if isinstance(source_role, str):
                extra["source_role"] = text(source_role)
    elif itype in _CALLS or drift == "call":
        call = _call(item)
        tool_name = call.name
        tools.add(call_id, call)
        # Each call type names its arguments; a renamed field is read under another.
        first = {"function_call": "arguments", "custom_tool_call": "input"}.get(
            itype or "", "action"
        )
        value = next(
            (item[k] for k in (first, "arguments", "input", "action") if item.get(k) is not None),
            None,
        )
        args = arguments_json(value)
        role, kind, arguments = "assistant", policy.TOOL_INPUT, f"{tool_name}({args})"
    elif itype in _OUTPUTS or drift == "output":
        value = item.get("output") if item.get("output") is not None else item.get("result")
        content, failed, more = _output(value)
        extra.update(more)
        answered = tools.get(call_id)
        code = more.get("exit_code")
        role, kind = (
            "tool",
            policy.tool_result_kind(
                content,
                marked=failed,
                command=answered.command if answered else None,
                exit_code=code if isinstance(code, int) else exit_code_in(content),
            ),
        )
        tool_name = answered.name if answered else None
    else:
        return None
    return Entry(
        session_id=sid,
        seq=lineno - 1,
        role=role,
        kind=kind,
        content=content,
        created_at=created,
        entry_id=ident(item.get("id")),
        tool_name=tool_name,
        arguments=arguments,
        extra=extra,
    )


ADAPTER = Adapter(
    name=NAME,
    version=VERSION,
    header=header,
    parse=parse,
    looks_like_line=looks_like,
    label="Codex CLI",
    locations=("${CODEX_HOME:-~/.codex}/sessions", "${CODEX_HOME:-~/.codex}/archived_sessions"),
)

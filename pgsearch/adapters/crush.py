"""Crush sessions: the project's SQLite store ``<project>/.crush/crush.db``.

Crush keeps every session of a project in one SQLite database: ``sessions`` (``id``,
``parent_session_id``, ``title``, ``created_at``) and ``messages`` (``session_id``,
``role``, ``parts``: a JSON list of ``{"type", "data"}``, ``created_at`` in epoch
seconds, ``is_summary_message``). pgsearch reads the store read-only while Crush
writes it (`pgsearch.agent_stores`) into one document, mapped here and read again
whole whenever the store changes. Mapping:

- ``user`` text parts -> ``user_text`` (images and attachments as placeholders);
- ``assistant`` text -> ``assistant_text`` (``summary`` for a summary message),
  ``tool_call`` parts -> ``tool_input``; reasoning is not stored; a reply that
  finished with an error -> its message as ``system``;
- ``tool`` messages' ``tool_result`` parts -> ``tool_output``, or ``tool_error``
  when ``is_error`` is set or the text reads as an error;
- a session's ``title`` -> its (generated) title; a session with a parent (a
  sub-agent's) is linked to it, and what it was asked is its parent agent's text.

The working directory is the project the ``.crush`` directory belongs to.
"""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Any

from pgsearch import policy
from pgsearch.adapters.common import (
    Adapter,
    FileHeader,
    LineEntries,
    Parsed,
    SessionTitle,
    ToolCall,
    ident,
    int_or_none,
    json_document,
    quiet_time,
    shell_command,
    text,
    timestamp,
)
from pgsearch.errors import IngestError

NAME = "crush"
VERSION = 1
LABEL = "Crush"
#: Crush keeps its store in the project it runs in (``.crush/crush.db``).
LOCATIONS = ("~/*/.crush/crush.db", "~/*/*/.crush/crush.db", "~/*/*/*/.crush/crush.db")
_SHELL_TOOLS = frozenset({"bash", "shell"})


def looks_like_document(value: Any) -> bool:
    """The assembled store (`pgsearch.agent_stores`)."""
    return isinstance(value, dict) and value.get("crush_store") is True


def _list(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def header(data: bytes, *, default_session: str, path: PurePath | None = None) -> FileHeader:
    """The project's directory (the store's session ids are its own)."""
    cwd = None
    if path is not None and path.parent.name == ".crush":
        cwd = str(path.parent.parent)
    first = next(iter(_list(json_document(data, looks_like_document).get("sessions"))), {})
    return FileHeader(
        session_id=ident(first.get("id")) or default_session,
        cwd=cwd,
        started_at=quiet_time(first.get("created_at")),
    )


def _parts(raw: Any) -> list[dict[str, Any]]:
    try:
        parts = json.loads(raw) if isinstance(raw, str) else raw
    except (ValueError, RecursionError):
        return []
    return [
        {"type": p.get("type"), **(p["data"] if isinstance(p.get("data"), dict) else {})}
        for p in _list(parts)
    ]


def parse(data: bytes, start: int, first_line: int, *, path: str, header: FileHeader) -> Parsed:
    """Every session and message of the store (always read whole)."""
    doc = json_document(data, looks_like_document)
    parsed = Parsed(consumed=len(data), lines=data.count(b"\n"))
    if not doc:
        return parsed  # nothing of this format: the ingestor says what it looks like
    parsed.recognised = 1
    children: set[str] = set()
    for session in _list(doc.get("sessions")):
        sid = ident(session.get("id"))
        if sid is None:
            continue
        title = text(session.get("title")).strip()
        if title:
            parsed.titles[sid] = SessionTitle(title=title, auto=True)
        parent = ident(session.get("parent_session_id"))
        if parent and parent != sid:
            parsed.parents[sid] = parent
            children.add(sid)
    calls: dict[str, ToolCall] = {}
    for position, message in enumerate(_list(doc.get("messages"))):
        sid = ident(message.get("session_id"))
        if sid is None:
            continue
        try:
            created = timestamp(message.get("created_at"), path=path, line=0)
        except IngestError as exc:
            parsed.problem(IngestError(f"message {position + 1}: {exc.reason}", path=path))
            continue
        line = LineEntries(
            sid,
            position,
            created,
            entry_id=ident(message.get("id")),
            extra={"model": message.get("model")},
        )
        _message(line, message, calls, child=sid in children)
        parsed.entries.extend(line.out)
    return parsed


def _message(
    line: LineEntries, message: dict[str, Any], calls: dict[str, ToolCall], *, child: bool
) -> None:
    role = message.get("role")
    summary = bool(int_or_none(message.get("is_summary_message")))
    texts: list[str] = []

    def flush() -> None:
        body = "\n".join(t for t in texts if t)
        texts.clear()
        if role == "user":
            if child:
                line.text("assistant", policy.ASSISTANT_TEXT, body, extra={"to_agent": True})
            else:
                line.text("user", policy.USER_TEXT, body)
        elif role == "assistant" and summary:
            line.text("system", policy.SUMMARY, body, summary=body.strip() or None)
        elif role == "assistant":
            line.text("assistant", policy.ASSISTANT_TEXT, body)
        elif role == "system":
            line.text("system", policy.SYSTEM, body)

    for part in _parts(message.get("parts")):
        ptype = part.get("type")
        if ptype == "text":
            texts.append(text(part.get("text")))
        elif ptype in ("image_url", "binary"):
            texts.append("[image]" if ptype == "image_url" else f"[file: {text(part.get('path'))}]")
        elif ptype == "tool_call":
            flush()
            name = ident(part.get("name")) or "unknown"
            call_id = ident(part.get("id"))
            args = part.get("input")
            if call_id:
                command = shell_command(args) if name in _SHELL_TOOLS else None
                calls[call_id] = ToolCall(name, command)
            line.call(name, args, extra={"call_id": call_id})
        elif ptype == "tool_result":
            flush()
            call_id = ident(part.get("tool_call_id"))
            call = calls.get(call_id or "")
            line.result(
                text(part.get("content")),
                tool_name=ident(part.get("name")) or (call.name if call else None),
                marked=part.get("is_error") is True,
                command=call.command if call else None,
                extra={"call_id": call_id},
            )
        elif ptype == "finish" and part.get("reason") == "error":
            flush()
            line.text("system", policy.SYSTEM, text(part.get("message")) or "[error]")
    flush()


ADAPTER = Adapter(
    name=NAME,
    version=VERSION,
    header=header,
    parse=parse,
    looks_like_line=looks_like_document,
    looks_like_document=looks_like_document,
    is_document=lambda data: True,
    label=LABEL,
    locations=LOCATIONS,
)

"""Cursor's chat store: ``<Cursor user dir>/globalStorage/state.vscdb``.

The editor keeps its chats (composers) in a SQLite key-value table,
``cursorDiskKV``: ``composerData:<composer id>`` holds a chat (``name``,
``createdAt``, and the order of its messages, ``fullConversationHeadersOnly``, or
older chats' messages inline as ``conversation``), ``bubbleId:<composer
id>:<bubble id>`` each message (``type`` 1 from the person, 2 from the agent,
``text``, ``createdAt``, a tool call in ``toolFormerData``). pgsearch reads the store
read-only while Cursor writes it (`pgsearch.agent_stores`), only those keys (never
the editor's tokens kept in the same table), and maps the chats here; the store is
read again whole whenever it changes. Mapping:

- a person's bubble -> ``user_text``;
- an agent's bubble -> its ``text`` as ``assistant_text``, its ``toolFormerData`` as
  ``tool_input`` (``name``, ``rawArgs``/``params``) and, when it has one, its
  ``result`` as ``tool_output`` (``tool_error`` when the call's status is an error
  or the text reads as one); thinking is not stored;
- the chat's ``name`` -> its (generated) title.

Agent transcripts (``agent-transcripts/*.jsonl``) are read by
`pgsearch.adapters.cursor`.
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
    arguments_json,
    ident,
    json_document,
    name_of,
    quiet_time,
    text,
    timestamp,
)
from pgsearch.errors import IngestError

NAME = "cursor-store"
VERSION = 1
LABEL = "Cursor (chat store)"
LOCATIONS = (
    "${XDG_CONFIG_HOME:-~/.config}/Cursor/User/globalStorage/state.vscdb",
    "~/Library/Application Support/Cursor/User/globalStorage/state.vscdb",
)
_ERROR_STATUSES = frozenset({"error", "failed", "cancelled", "rejected"})


def looks_like_document(value: Any) -> bool:
    """The assembled store (`pgsearch.agent_stores`)."""
    return isinstance(value, dict) and value.get("cursor_store") is True


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _composers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    found = doc.get("composers")
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def header(data: bytes, *, default_session: str, path: PurePath | None = None) -> FileHeader:
    """The store holds chats of many workspaces: no one working directory."""
    first = next(iter(_composers(json_document(data, looks_like_document))), {})
    return FileHeader(
        session_id=ident(first.get("id")) or default_session,
        started_at=quiet_time(_obj(first.get("data")).get("createdAt")),
    )


def _bubbles(composer: dict[str, Any]) -> list[dict[str, Any]]:
    """A chat's messages in order: by its headers, else inline (older chats)."""
    data = _obj(composer.get("data"))
    stored = _obj(composer.get("bubbles"))
    headers = data.get("fullConversationHeadersOnly")
    if isinstance(headers, list) and headers:
        ordered = [stored.get(str(_obj(h).get("bubbleId"))) for h in headers]
        return [b for b in ordered if isinstance(b, dict)]
    inline = data.get("conversation")
    return [b for b in inline if isinstance(b, dict)] if isinstance(inline, list) else []


def parse(data: bytes, start: int, first_line: int, *, path: str, header: FileHeader) -> Parsed:
    """Every chat of the store (always read whole)."""
    doc = json_document(data, looks_like_document)
    parsed = Parsed(consumed=len(data), lines=data.count(b"\n"))
    if not doc:
        return parsed  # nothing of this format: the ingestor says what it looks like
    parsed.recognised = 1
    for composer in _composers(doc):
        sid = ident(composer.get("id"))
        if sid is None:
            continue
        info = _obj(composer.get("data"))
        name = text(info.get("name")).strip()
        if name:
            parsed.titles[sid] = SessionTitle(title=name, auto=True)
        started = quiet_time(info.get("createdAt"))
        for position, bubble in enumerate(_bubbles(composer)):
            try:
                created = timestamp(bubble.get("createdAt"), path=path, line=0) or started
            except IngestError as exc:
                parsed.problem(IngestError(f"chat {sid}: {exc.reason}", path=path))
                continue
            line = LineEntries(
                sid, position, created, entry_id=ident(bubble.get("bubbleId")), extra=None
            )
            _bubble(line, bubble)
            parsed.entries.extend(line.out)
    return parsed


def _bubble(line: LineEntries, bubble: dict[str, Any]) -> None:
    body = text(bubble.get("text"))
    if bubble.get("type") == 1:
        line.text("user", policy.USER_TEXT, body)
        return
    line.text("assistant", policy.ASSISTANT_TEXT, body)
    tool = _obj(bubble.get("toolFormerData"))
    name = ident(tool.get("name")) or ident(tool.get("tool"))
    if name is None:
        return
    raw = tool.get("rawArgs") if tool.get("rawArgs") is not None else tool.get("params")
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except (ValueError, RecursionError):
        arguments = raw
    line.call(name, arguments)
    result = tool.get("result")
    output = text(result) if isinstance(result, str) else arguments_json(result)
    status = tool.get("status") or _obj(tool.get("additionalData")).get("status")
    line.result(output, tool_name=name, marked=name_of(status) in _ERROR_STATUSES)


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

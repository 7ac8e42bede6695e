"""Claude Code session logs: ``~/.claude/projects/<project>/<session-id>.jsonl``.

One JSON event per line. ``user`` and ``assistant`` events carry an API message
whose ``content`` is a string or a list of blocks; we map them as follows:

- user ``text`` (and images, as ``[image]``) -> ``user_text``; text the harness
  injected (``isMeta`` events, ``<command-name>``, ``<system-reminder>`` ...) ->
  ``system``; a compaction summary (``isCompactSummary``) -> ``summary``;
- user ``tool_result`` -> ``tool_output``, or ``tool_error`` when ``is_error`` is
  set or the text reads as an error (`policy.is_tool_error`), named after the
  ``tool_use`` it answers;
- assistant ``text`` -> ``assistant_text``; ``tool_use`` -> ``tool_input`` with the
  tool name (its ``input`` is stored as arguments, indexed only if the policy says
  so); ``thinking`` blocks are not stored;
- ``summary`` events (the title shown when resuming) set the session title;
  ``system`` events -> ``system``; other event types are bookkeeping and skipped.

A file is one session named like the file (Claude Code names each transcript by its
session id); an event's own ``sessionId``, when different (a resumed or sub-agent
transcript), is kept in the entry's extra data. ``timestamp`` is kept, and ``cwd``
is the working directory offered as workspace.
"""

from __future__ import annotations

from typing import Any

from pgsearch import policy
from pgsearch.adapters.common import (
    FileHeader,
    ToolNames,
    arguments_json,
    head_objects,
    ident,
    json_lines,
    text,
    timestamp,
)
from pgsearch.errors import IngestError
from pgsearch.messages import Entry

NAME = "claude-code"
EVENT_TYPES = frozenset({"user", "assistant", "summary", "system"})
#: Event types Claude Code writes that hold no conversation text.
BOOKKEEPING_TYPES = frozenset(
    {"file-history-snapshot", "queue-operation", "progress", "attachment", "custom-title"}
)
#: User text the harness wrote rather than the person: commands, their output, reminders.
_INJECTED_PREFIXES = (
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<system-reminder>",
    "<user-prompt-submit-hook>",
    "Caveat: The messages below were generated",
    "[Request interrupted by user",
)


def looks_like(obj: dict[str, Any]) -> bool:
    """Whether a decoded line is a Claude Code event."""
    kind = obj.get("type")
    if kind == "summary" and "leafUuid" in obj:
        return True
    if kind in BOOKKEEPING_TYPES and "role" not in obj:
        return True
    return (
        kind in EVENT_TYPES
        and "role" not in obj
        and ("sessionId" in obj or "uuid" in obj or isinstance(obj.get("message"), dict))
    )


def header(data: bytes, *, default_session: str) -> FileHeader:
    """Session id (the file's name), working directory and start time."""
    cwd = None
    started = None
    for obj in head_objects(data):
        if cwd is None and isinstance(obj.get("cwd"), str) and obj["cwd"]:
            cwd = text(obj["cwd"])
        if started is None and isinstance(obj.get("timestamp"), str):
            try:
                started = timestamp(obj["timestamp"], path="", line=0)
            except IngestError:
                started = None
        if cwd is not None and started is not None:
            break
    return FileHeader(session_id=default_session, cwd=cwd, started_at=started)


def _tool_name_in(line: Any, call_id: str) -> str | None:
    message = line.get("message") if isinstance(line, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("id") == call_id:
            return ident(block.get("name"))
    return None


def _block_text(content: Any) -> str:
    """Text of a string or a list of text/image blocks."""
    if isinstance(content, str):
        return text(content)
    parts: list[str] = []
    for block in content if isinstance(content, list) else ():
        if isinstance(block, str):
            parts.append(text(block))
        elif isinstance(block, dict):
            if block.get("type") == "text":
                parts.append(text(block.get("text")))
            elif block.get("type") == "image":
                parts.append("[image]")
    return "\n".join(p for p in parts if p)


def _injected(content: str) -> bool:
    return content.lstrip().startswith(_INJECTED_PREFIXES)


class _Line:
    """Builds the entries of one event line: ids, time and extra data shared."""

    def __init__(self, out: list[Entry], sid: str, lineno: int, obj: dict[str, Any], *, path: str):
        self.out = out
        self.sid = sid
        self.lineno = lineno
        self.obj = obj
        self.created = timestamp(obj.get("timestamp"), path=path, line=lineno)
        self.uuid = ident(obj.get("uuid"))
        self.extra: dict[str, Any] = {"line": lineno}
        if self.uuid:
            self.extra["uuid"] = self.uuid
        source_sid = ident(obj.get("sessionId"))
        if source_sid and source_sid != sid:
            self.extra["source_session_id"] = source_sid
        if obj.get("isSidechain") is True:
            self.extra["sidechain"] = True
        self.blocks = 0
        self.pending: list[str] = []

    def add(
        self,
        role: str,
        kind: str,
        content: str,
        *,
        tool_name: str | None = None,
        arguments: str = "",
        title: str | None = None,
        summary: str | None = None,
        call_id: str | None = None,
    ) -> None:
        entry_id = None
        if self.uuid:
            entry_id = self.uuid if self.blocks == 0 else f"{self.uuid}#{self.blocks}"
        self.blocks += 1
        extra = dict(self.extra)
        if call_id:
            extra["tool_use_id"] = call_id
        self.out.append(
            Entry(
                session_id=self.sid,
                seq=self.lineno - 1,
                role=role,
                kind=kind,
                content=content,
                created_at=self.created,
                entry_id=entry_id,
                tool_name=tool_name,
                arguments=arguments,
                title=title,
                summary=summary,
                extra=extra,
            )
        )

    def flush(self, role: str) -> None:
        """Emit the text gathered so far as one entry of the right kind."""
        body = "\n".join(p for p in self.pending if p)
        self.pending.clear()
        if not body.strip():
            return
        obj = self.obj
        if role == "assistant":
            if obj.get("isApiErrorMessage") is True:
                self.add("system", policy.SYSTEM, body)
            else:
                self.add("assistant", policy.ASSISTANT_TEXT, body)
        elif obj.get("isCompactSummary") is True:
            self.add("system", policy.SUMMARY, body, summary=body)
        elif obj.get("isMeta") is True or _injected(body):
            self.add("system", policy.SYSTEM, body)
        else:
            self.add("user", policy.USER_TEXT, body)


def parse(
    data: bytes, start: int, end: int, first_line: int, *, path: str, header: FileHeader
) -> list[Entry]:
    """Entries of the complete lines in ``data[start:end]`` (one per content block)."""
    tools = ToolNames(data, start, _tool_name_in)
    entries: list[Entry] = []
    for lineno, obj in json_lines(data, start, end, first_line, path=path):
        if not isinstance(obj, dict):
            raise IngestError(
                f"expected a JSON object, got {type(obj).__name__}", path=path, line=lineno
            )
        kind = obj.get("type")
        if kind not in EVENT_TYPES:
            continue
        line = _Line(entries, header.session_id, lineno, obj, path=path)
        if line.created is None:  # e.g. title lines: as old as the session
            line.created = header.started_at
        if kind == "summary":
            title = text(obj.get("summary")).strip()
            if title:
                line.add("system", policy.SYSTEM, title, title=title)
            continue
        if kind == "system":
            content = _block_text(obj.get("content"))
            if content:
                line.add("system", policy.SYSTEM, content)
            continue
        message = obj.get("message")
        if not isinstance(message, dict):
            continue
        value = message.get("content")
        blocks: list[Any] = (
            [value] if isinstance(value, str) else value if isinstance(value, list) else []
        )
        role = "assistant" if kind == "assistant" else "user"
        for block in blocks:
            btype = block.get("type") if isinstance(block, dict) else None
            if isinstance(block, str):
                line.pending.append(text(block))
            elif btype == "text":
                line.pending.append(text(block.get("text")))
            elif btype == "image":
                line.pending.append("[image]")
            elif btype in ("tool_use", "server_tool_use"):
                line.flush(role)
                name = ident(block.get("name")) or "unknown"
                call_id = ident(block.get("id"))
                tools.add(call_id, name)
                line.add(
                    "assistant",
                    policy.TOOL_INPUT,
                    "",
                    tool_name=name,
                    arguments=f"{name}({arguments_json(block.get('input'))})",
                    call_id=call_id,
                )
            elif btype == "tool_result":
                line.flush(role)
                call_id = ident(block.get("tool_use_id"))
                output = _block_text(block.get("content"))
                error = policy.is_tool_error(output, marked=block.get("is_error") is True)
                line.add(
                    "tool",
                    policy.TOOL_ERROR if error else policy.TOOL_OUTPUT,
                    output,
                    tool_name=tools.get(call_id),
                    call_id=call_id,
                )
        line.flush(role)
    return entries

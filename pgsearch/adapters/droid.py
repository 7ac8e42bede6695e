"""Factory Droid sessions: ``~/.factory/sessions/<cwd slug>/<session id>.jsonl``.

The first line is ``{"type": "session_start", "id", "title", "cwd", "version", ...}``;
each later line ``{"type": "message", "id", "parentId", "timestamp", "message":
{"role", "content": [...]}}`` carries an API message whose content blocks are those
of Claude's Messages API. (``<id>.settings.json`` beside it holds the model settings
and is not a session.) Mapping:

- user ``text`` -> ``user_text``; ``<system-reminder>`` blocks Droid adds around
  what was typed -> ``system``; ``tool_result`` -> ``tool_output``, or
  ``tool_error`` when ``is_error`` is set or the text reads as an error (a search
  program that found nothing excepted), named after the ``tool_use`` it answers;
- assistant ``text`` -> ``assistant_text``, ``tool_use`` -> ``tool_input``;
  thinking blocks are not stored;
- the session's ``title`` (``sessionTitle``) -> its title.

Other line types hold no conversation text and are skipped; types this mapping does
not know are counted.
"""

from __future__ import annotations

import re
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
    ToolCalls,
    block_text,
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

NAME = "droid"
VERSION = 1
LABEL = "Factory Droid"
LOCATIONS = ("~/.factory/sessions",)
_BOOKKEEPING = frozenset({"session_start", "todo_state", "session_end", "compaction_state"})
_SHELL_TOOLS = frozenset({"Execute", "Bash", "shell"})
_REMINDER_RE = re.compile(r"<system-reminder>.*?(?:</system-reminder>|\Z)", re.DOTALL)


def looks_like(obj: dict[str, Any]) -> bool:
    """Whether a decoded line is Droid's session header (its messages look like other
    agents' until the header says whose they are)."""
    return (
        obj.get("type") == "session_start"
        and "id" in obj
        and ("title" in obj or "sessionTitle" in obj or "owner" in obj)
    )


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _start(data: bytes) -> dict[str, Any]:
    return next((o for o in head_objects(data, 8) if o.get("type") == "session_start"), {})


def header(data: bytes, *, default_session: str, path: PurePath | None = None) -> FileHeader:
    """Session id and working directory from ``session_start``."""
    start = _start(data)
    first = next((o for o in head_objects(data, 8) if "timestamp" in o), {})
    return FileHeader(
        session_id=ident(start.get("id")) or default_session,
        cwd=text(start.get("cwd")) or None,
        started_at=quiet_time(first.get("timestamp")),
    )


def _tool_call_in(line: Any, call_id: str) -> ToolCall | None:
    message = _obj(line.get("message")) if isinstance(line, dict) else {}
    for block in message.get("content") or ():
        if isinstance(block, dict) and block.get("type") == "tool_use":
            if block.get("id") == call_id:
                return _call(block)
    return None


def _call(block: dict[str, Any]) -> ToolCall:
    name = ident(block.get("name")) or "unknown"
    command = shell_command(block.get("input")) if name in _SHELL_TOOLS else None
    return ToolCall(name, command)


class _Parser:
    def __init__(self, data: bytes, start: int, *, path: str, header: FileHeader) -> None:
        self.path = path
        self.sid = header.session_id
        self.tools = ToolCalls(data, start, _tool_call_in)
        self.parsed = Parsed()

    def handle(self, lineno: int, obj: dict[str, Any]) -> list[Entry] | None:
        kind = name_of(obj.get("type"))
        if kind == "session_start":
            self.parsed.recognised += 1
            title = text(obj.get("sessionTitle") or obj.get("title")).strip()
            if title:
                self.parsed.titles[self.sid] = SessionTitle(title=title)
            return None
        message = obj.get("message")
        if kind != "message" or not isinstance(message, dict):
            if kind is not None:
                self.parsed.recognised += 1
                if kind not in _BOOKKEEPING:
                    self.parsed.skip_unknown(kind)
            return None
        self.parsed.recognised += 1
        created = timestamp(obj.get("timestamp"), path=self.path, line=lineno)
        line = LineEntries(
            self.sid, lineno - 1, created, entry_id=ident(obj.get("id")), extra={"line": lineno}
        )
        content = message.get("content")
        blocks: list[Any] = [content] if isinstance(content, str) else list(content or ())
        if message.get("role") == "assistant":
            self.assistant(line, blocks)
        else:
            self.user(line, blocks)
        return line.out

    def assistant(self, line: LineEntries, blocks: list[Any]) -> None:
        pending: list[str] = []
        for block in blocks:
            btype = block.get("type") if isinstance(block, dict) else None
            if isinstance(block, str) or btype == "text":
                pending.append(block_text([block]))
            elif btype == "tool_use":
                line.text("assistant", policy.ASSISTANT_TEXT, "\n".join(pending))
                pending.clear()
                call = _call(block)
                call_id = ident(block.get("id"))
                self.tools.add(call_id, call)
                line.call(call.name, block.get("input"), extra={"call_id": call_id})
        line.text("assistant", policy.ASSISTANT_TEXT, "\n".join(pending))

    def user(self, line: LineEntries, blocks: list[Any]) -> None:
        pending: list[str] = []
        for block in blocks:
            btype = block.get("type") if isinstance(block, dict) else None
            if btype == "tool_result":
                self.typed(line, "\n".join(pending))
                pending.clear()
                call_id = ident(block.get("tool_use_id"))
                call = self.tools.get(call_id)
                line.result(
                    block_text(block.get("content")),
                    tool_name=call.name if call else None,
                    marked=block.get("is_error") is True or block.get("isError") is True,
                    command=call.command if call else None,
                    extra={"call_id": call_id},
                )
            else:
                pending.append(block_text([block]))
        self.typed(line, "\n".join(pending))

    def typed(self, line: LineEntries, body: str) -> None:
        """What the person typed, with the reminders Droid adds around it as system text."""
        pos = 0
        for match in _REMINDER_RE.finditer(body):
            line.text("user", policy.USER_TEXT, body[pos : match.start()])
            line.text("system", policy.SYSTEM, match.group(0))
            pos = match.end()
        line.text("user", policy.USER_TEXT, body[pos:])


def parse(data: bytes, start: int, first_line: int, *, path: str, header: FileHeader) -> Parsed:
    """Entries of the lines of ``data[start:]``, under the lenient line policy."""
    parser = _Parser(data, start, path=path, header=header)
    return read_lines(
        data, start, first_line, path=path, parsed=parser.parsed, handle=parser.handle
    )


ADAPTER = Adapter(
    name=NAME,
    version=VERSION,
    header=header,
    parse=parse,
    looks_like_line=looks_like,
    label=LABEL,
    locations=LOCATIONS,
)

"""Cursor agent transcripts: ``~/.cursor/projects/<project>/agent-transcripts/<id>.jsonl``.

Cursor's agent (the editor's and ``cursor-agent``'s) writes each conversation as JSON
lines ``{"role": "user"|"assistant", "message": {"content": [blocks]}}``, blocks
shaped like the Messages API's (``text``, ``tool_use``, ``tool_result``; newer
versions spell some ``tool_call`` / ``tool-result``), and ``{"type": "turn_ended"}``
markers. A conversation may sit in a directory of its own, ``<id>/<id>.jsonl``, with
its sub-agents' transcripts in ``<id>/subagents/<child>.jsonl``: those are sessions
linked to it. The transcript carries no times: its entries take the file's
modification time. Mapping:

- user text -> ``user_text`` (the ``<user_query>`` Cursor wraps it in is removed);
  context Cursor adds around it (``<attached_files>``, ``<system_reminder>``, …) ->
  ``system``; ``tool_result`` -> ``tool_output`` or ``tool_error``;
- assistant text -> ``assistant_text``, ``tool_use`` -> ``tool_input``; thinking is
  not stored.

Cursor's chat store (``state.vscdb``) is read by `pgsearch.adapters.cursor_store`.
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
    LineEntries,
    Parsed,
    block_text,
    ident,
    name_of,
    parent_dir_name,
    read_lines,
    session_key,
    shell_command,
    text,
)
from pgsearch.messages import Entry

NAME = "cursor"
VERSION = 1
LABEL = "Cursor"
LOCATIONS = ("~/.cursor/projects/*/agent-transcripts",)
_CALLS = frozenset({"tool_use", "tool_call", "tool-call"})
_RESULTS = frozenset({"tool_result", "tool-result"})
_QUERY_RE = re.compile(r"<user_query>\s*(.*?)\s*(?:</user_query>|\Z)", re.DOTALL)
_CONTEXT_RE = re.compile(r"<([a-z_]+)>.*?(?:</\1>|\Z)", re.DOTALL)
_SHELL_TOOLS = frozenset({"Shell", "run_terminal_cmd", "Bash", "shell"})


def looks_like(obj: dict[str, Any]) -> bool:
    """Whether a decoded line is a Cursor transcript line."""
    message = obj.get("message")
    return (
        obj.get("role") in ("user", "assistant")
        and isinstance(message, dict)
        and isinstance(message.get("content"), list)
        and "content" not in obj
    )


def header(data: bytes, *, default_session: str, path: PurePath | None = None) -> FileHeader:
    """The conversation id (the file's name); a sub-agent's, linked to its parent."""
    if parent_dir_name(path, 1) == "subagents":
        parent = parent_dir_name(path, 2)
        if parent:
            sid = session_key(parent, default_session) or default_session
            return FileHeader(session_id=sid, parent_session_id=parent)
    return FileHeader(session_id=default_session)


class _Parser:
    def __init__(self, *, header: FileHeader) -> None:
        self.sid = header.session_id
        self.child = header.parent_session_id is not None
        self.parsed = Parsed()
        if header.parent_session_id is not None:
            self.parsed.parents[self.sid] = header.parent_session_id
        self.last_call: tuple[str, str | None] | None = None

    def handle(self, lineno: int, obj: dict[str, Any]) -> list[Entry] | None:
        if not looks_like(obj):
            kind = name_of(obj.get("type"))
            if kind is not None:
                self.parsed.recognised += 1
                if kind not in ("turn_ended", "turn_started"):
                    self.parsed.skip_unknown(kind)
            return None
        self.parsed.recognised += 1
        line = LineEntries(self.sid, lineno - 1, None, extra={"line": lineno})
        blocks = obj["message"]["content"]
        if obj["role"] == "assistant":
            self.assistant(line, blocks)
        else:
            self.user(line, blocks)
        return line.out

    def assistant(self, line: LineEntries, blocks: list[Any]) -> None:
        pending: list[str] = []
        for block in blocks:
            btype = name_of(block.get("type")) if isinstance(block, dict) else None
            if isinstance(block, str) or btype == "text":
                pending.append(block_text([block]))
            elif btype in _CALLS and isinstance(block, dict):
                line.text("assistant", policy.ASSISTANT_TEXT, "\n".join(pending))
                pending.clear()
                name = ident(block.get("name")) or "unknown"
                arguments = block.get("input", block.get("arguments"))
                command = shell_command(arguments) if name in _SHELL_TOOLS else None
                self.last_call = (name, command)
                line.call(name, arguments, extra={"call_id": ident(block.get("id"))})
            elif btype not in ("thinking", "redacted_thinking", "reasoning", None):
                # A block of a kind this mapping does not know: its text, if any.
                pending.append(text(block.get("text")))
        line.text("assistant", policy.ASSISTANT_TEXT, "\n".join(pending))

    def user(self, line: LineEntries, blocks: list[Any]) -> None:
        for block in blocks:
            btype = name_of(block.get("type")) if isinstance(block, dict) else None
            if btype in _RESULTS and isinstance(block, dict):
                name, command = self.last_call or (None, None)
                line.result(
                    block_text(block.get("content")),
                    tool_name=ident(block.get("name")) or name,
                    marked=block.get("is_error") is True or block.get("isError") is True,
                    command=command,
                )
            else:
                self.typed(line, block_text([block]))

    def typed(self, line: LineEntries, body: str) -> None:
        """The person's words (in ``<user_query>``), the context around them as system."""
        query = _QUERY_RE.search(body)
        if query is None:
            if self.child:
                line.text("assistant", policy.ASSISTANT_TEXT, body, extra={"to_agent": True})
            else:
                line.text("user", policy.USER_TEXT, body)
            return
        context = (body[: query.start()] + body[query.end() :]).strip()
        for match in _CONTEXT_RE.finditer(context):
            line.text("system", policy.SYSTEM, match.group(0))
        if self.child:
            line.text("assistant", policy.ASSISTANT_TEXT, query.group(1), extra={"to_agent": True})
        else:
            line.text("user", policy.USER_TEXT, query.group(1))


def _last_call(data: bytes, end: int) -> tuple[str, str | None] | None:
    """The last tool call before byte `end` (results name no call id to look up)."""
    stop = end
    for _ in range(64):
        if stop <= 0:
            return None
        begin = data.rfind(b"\n", 0, stop - 1) + 1
        try:
            obj = json.loads(data[begin:stop])
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict) and looks_like(obj) and obj["role"] == "assistant":
            for block in reversed(obj["message"]["content"]):
                if isinstance(block, dict) and name_of(block.get("type")) in _CALLS:
                    name = ident(block.get("name")) or "unknown"
                    arguments = block.get("input", block.get("arguments"))
                    return name, shell_command(arguments) if name in _SHELL_TOOLS else None
        stop = begin
    return None


def parse(data: bytes, start: int, first_line: int, *, path: str, header: FileHeader) -> Parsed:
    """Entries of the lines of ``data[start:]``, under the lenient line policy."""
    parser = _Parser(header=header)
    if start:
        parser.last_call = _last_call(data, start)
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

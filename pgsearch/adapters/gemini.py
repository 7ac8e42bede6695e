"""Gemini CLI sessions: ``~/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl``.

Three shapes, recognised per file:

- **The session log** (``session-*.jsonl``, current versions): a first line with
  ``sessionId``, ``projectHash`` and ``startTime``, then one message record per
  line. Gemini CLI appends a message again whenever it changes (tool calls and
  their results, token counts are added to the message they belong to), appends
  ``{"$rewindTo": id}`` when the user rewinds, and ``{"$set": {...}}`` to change
  session fields. The last record of each id wins, a rewind drops its message and
  everything after it. When the new lines of a grown file change a message already
  read (or rewind past it), the file is read again whole.
- **The session document** (``session-*.json``, older versions): the same fields
  and a ``messages`` array, rewritten whole on every change, so any change is a
  re-read.
- **A saved chat** (``checkpoint-<tag>.json``, from ``/chat save``): the model
  history, ``{"history": [...]}`` or a bare array of ``{"role", "parts"}``, with no
  times (entries take the file's modification time); the tag is its title.

Messages map as follows: ``user`` -> ``user_text`` (what was typed,
``displayContent``, when the sent content was expanded with file contents);
``gemini`` -> ``assistant_text``, and each of its ``toolCalls`` -> ``tool_input``
plus its result -> ``tool_output``, or ``tool_error`` when the call failed or the
text reads as an error; ``info``, ``warning`` and ``error`` notices -> ``system``.
Thoughts are not stored. A sub-agent's log (``chats/<parent>/<id>.jsonl``,
``kind: "subagent"``) is a session linked to its parent. The session summary
Gemini CLI generates is the session's (generated) title. Session files name no
working directory (only a hash of it), so ``--workspace-from-cwd`` falls back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import PurePath
from typing import Any
from urllib.parse import unquote

from pgsearch import policy
from pgsearch.adapters.common import (
    Adapter,
    FileHeader,
    Parsed,
    SessionTitle,
    arguments_json,
    exit_code_in,
    head_objects,
    ident,
    name_of,
    parent_dir_name,
    quiet_time,
    read_lines,
    shell_command,
    text,
    timestamp,
)
from pgsearch.errors import IngestError
from pgsearch.messages import Entry
from pgsearch.types import MAX_ID_CHARS

NAME = "gemini"
VERSION = 1
MESSAGE_TYPES = frozenset({"user", "gemini", "info", "warning", "error"})
_SHELL_TOOLS = frozenset({"run_shell_command", "shell"})
#: Message records start with their id (Gemini CLI writes them with JSON.stringify).
_RECORD_ID_RE = re.compile(rb'(?m)^\{\s*"id"\s*:\s*"([^"\\]{1,256})"')
#: The context message Gemini CLI sends before the first prompt of a chat.
_SETUP_PREFIX = "This is the Gemini CLI."


def looks_like_line(obj: dict[str, Any]) -> bool:
    """Whether a decoded line is a record of a Gemini CLI session log."""
    if "role" in obj:
        return False
    if "sessionId" in obj and "projectHash" in obj:
        return True
    if "$rewindTo" in obj or isinstance(obj.get("$set"), dict):
        return True
    return (
        isinstance(obj.get("id"), str)
        and name_of(obj.get("type")) in MESSAGE_TYPES
        and "content" in obj
        and "timestamp" in obj
    )


def looks_like_document(value: Any) -> bool:
    """Whether a whole decoded file is a Gemini CLI session document or saved chat."""
    if isinstance(value, dict):
        if "sessionId" in value and isinstance(value.get("messages"), list):
            return True
        value = value.get("history")
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(c, dict) and isinstance(c.get("parts"), list) for c in value[:8])
        and all(c.get("role") in ("user", "model") for c in value[:8] if isinstance(c, dict))
    )


def is_document(data: bytes) -> bool:
    """A session document or saved chat (read whole), not a session log."""
    return not any(looks_like_line(obj) for obj in head_objects(data, 4))


def header(data: bytes, *, default_session: str, path: PurePath | None = None) -> FileHeader:
    meta: dict[str, Any] = {}
    if is_document(data):
        doc = _document(data)
        if isinstance(doc, dict) and "sessionId" in doc:
            meta = doc
    else:
        for obj in head_objects(data, 4):
            if "sessionId" in obj:
                meta = obj
                break
    sid = ident(meta.get("sessionId")) or default_session
    parent = None
    if meta.get("kind") == "subagent":
        parent = parent_dir_name(path, 1)
        if parent in (None, "chats") or parent == sid:
            parent = None
    started = quiet_time(meta.get("startTime"))
    return FileHeader(session_id=sid, started_at=started, parent_session_id=parent)


def _document(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8-sig"))
    except (ValueError, RecursionError):
        return None


def _parts(content: Any) -> list[Any]:
    if isinstance(content, list):
        return content
    if content is None:
        return []
    return [content]


def _text_of(content: Any) -> str:
    """Text of a string, a part, or a list of parts (files and images as placeholders)."""
    out: list[str] = []
    for part in _parts(content):
        if isinstance(part, str):
            out.append(text(part))
        elif isinstance(part, dict):
            if part.get("thought") is True:
                continue
            if isinstance(part.get("text"), str):
                out.append(text(part["text"]))
            elif isinstance(part.get("inlineData"), dict) or isinstance(part.get("fileData"), dict):
                out.append("[file]")
    return "\n".join(p for p in out if p)


def _result_text(result: Any) -> tuple[str, bool]:
    """(text, failed) of a tool result: ``functionResponse`` parts or plain text."""
    out: list[str] = []
    failed = False
    for part in _parts(result):
        if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
            response = part["functionResponse"].get("response")
            if isinstance(response, dict):
                if response.get("error") is not None:
                    failed = True
                    out.append(text(response["error"]) or arguments_json(response["error"]))
                elif response.get("output") is not None:
                    value = response["output"]
                    out.append(text(value) if isinstance(value, str) else arguments_json(value))
                else:
                    out.append(arguments_json(response))
            elif response is not None:
                out.append(arguments_json(response))
        else:
            out.append(_text_of(part))
    return "\n".join(p for p in out if p), failed


class _Builder:
    """Entries of one session's messages, in order."""

    def __init__(self, sid: str, *, path: str) -> None:
        self.sid = sid
        self.path = path
        self.entries: list[Entry] = []

    def add(self, **fields: Any) -> None:
        self.entries.append(Entry(session_id=self.sid, **fields))

    def message(self, record: dict[str, Any], lineno: int) -> None:
        created = timestamp(record.get("timestamp"), path=self.path, line=lineno)
        mid = ident(record.get("id"))
        mtype = record.get("type")
        extra: dict[str, Any] = {"line": lineno}
        n = 0

        def entry_id() -> str | None:
            nonlocal n
            n += 1
            if mid is None:
                return None
            key = mid if n == 1 else f"{mid}#{n - 1}"
            return key if len(key) <= MAX_ID_CHARS else None

        if mtype == "user":
            shown = record.get("displayContent")
            body = _text_of(shown if shown else record.get("content")).strip()
            if body:
                self.add(
                    seq=lineno - 1,
                    role="user",
                    kind=policy.USER_TEXT,
                    content=body,
                    created_at=created,
                    entry_id=entry_id(),
                    extra=extra,
                )
            return
        if mtype != "gemini":
            body = _text_of(record.get("content")).strip()
            if body:
                self.add(
                    seq=lineno - 1,
                    role="system",
                    kind=policy.SYSTEM,
                    content=body,
                    created_at=created,
                    entry_id=entry_id(),
                    extra={**extra, "notice": text(mtype)},
                )
            return
        body = _text_of(record.get("content")).strip()
        if body:
            self.add(
                seq=lineno - 1,
                role="assistant",
                kind=policy.ASSISTANT_TEXT,
                content=body,
                created_at=created,
                entry_id=entry_id(),
                extra=extra,
            )
        calls = record.get("toolCalls")
        for call in calls if isinstance(calls, list) else ():
            if not isinstance(call, dict):
                continue
            name = ident(call.get("name")) or "unknown"
            call_id = ident(call.get("id"))
            when = timestamp(call.get("timestamp"), path=self.path, line=lineno) or created
            call_extra = {**extra, "call_id": call_id} if call_id else extra
            self.add(
                seq=lineno - 1,
                role="assistant",
                kind=policy.TOOL_INPUT,
                content="",
                created_at=when,
                entry_id=entry_id(),
                tool_name=name,
                arguments=f"{name}({arguments_json(call.get('args'))})",
                extra=call_extra,
            )
            output, failed = _result_text(call.get("result"))
            if not output and isinstance(call.get("resultDisplay"), str):
                output = text(call["resultDisplay"])
            status = call.get("status")
            if not output and status not in ("error", "cancelled"):
                continue
            if not output:
                output = f"[{status}]"
            command = shell_command(call.get("args")) if name in _SHELL_TOOLS else None
            exit_code = _exit_code(output) if command is not None else None
            self.add(
                seq=lineno - 1,
                role="tool",
                kind=policy.tool_result_kind(
                    output,
                    # A shell command that exited non-zero failed, as Codex reports it.
                    marked=failed or status == "error" or bool(exit_code),
                    command=command,
                    exit_code=exit_code,
                ),
                content=output,
                created_at=when,
                entry_id=entry_id(),
                tool_name=name,
                extra={**call_extra, "status": text(status)} if status else call_extra,
            )


_EXIT_CODE_RE = re.compile(r"(?im)^\s*exit code:\s*(-?\d+)\s*$")


def _exit_code(output: str) -> int | None:
    match = _EXIT_CODE_RE.search(output)
    return int(match.group(1)) if match else exit_code_in(output)


def parse(data: bytes, start: int, first_line: int, *, path: str, header: FileHeader) -> Parsed:
    """The session's entries: from ``data[start:]`` for a log, all of it for a document."""
    if is_document(data):
        return _parse_document(data, path=path, header=header)
    return _parse_log(data, start, first_line, path=path, header=header)


def _parse_log(
    data: bytes, start: int, first_line: int, *, path: str, header: FileHeader
) -> Parsed:
    parsed = Parsed()
    if header.parent_session_id is not None:
        parsed.parents[header.session_id] = header.parent_session_id
    #: id -> (line the id first appeared on, latest record), in order of appearance.
    records: dict[str, tuple[int, dict[str, Any]]] = {}
    before = set(_RECORD_ID_RE.findall(data[:start])) if start else set()

    def handle(lineno: int, obj: dict[str, Any]) -> None:
        if not looks_like_line(obj):
            return
        parsed.recognised += 1
        if "$rewindTo" in obj:
            target = obj["$rewindTo"]
            if target in records:
                keys = list(records)
                for key in keys[keys.index(target) :]:
                    del records[key]
            elif start:
                parsed.restart = True
            else:
                records.clear()
            return
        update = obj.get("$set")
        if isinstance(update, dict) or "sessionId" in obj:
            fields = update if isinstance(update, dict) else obj
            summary = text(fields.get("summary")).strip()
            if summary:
                parsed.titles[header.session_id] = SessionTitle(title=summary, auto=True)
            messages = fields.get("messages")
            if isinstance(messages, list):
                if start:
                    parsed.restart = True
                records.clear()
                for message in messages:
                    if isinstance(message, dict) and ident(message.get("id")):
                        records[message["id"]] = (lineno, message)
            return
        mid = obj["id"]
        if mid.encode() in before:
            parsed.restart = True  # a message read in an earlier pass changed
            return
        first = records[mid][0] if mid in records else lineno
        # Bad values surface now, naming the line, not when the entries are built.
        timestamp(obj.get("timestamp"), path=path, line=lineno)
        records[mid] = (first, obj)

    read_lines(data, start, first_line, path=path, parsed=parsed, handle=handle)
    if parsed.restart:
        return parsed
    builder = _Builder(header.session_id, path=path)
    _build(builder, ((line, record) for line, record in records.values()), parsed)
    parsed.entries = builder.entries
    return parsed


def _build(
    builder: _Builder,
    records: Iterable[tuple[int, dict[str, Any]]],
    parsed: Parsed,
    *,
    document: bool = False,
) -> None:
    """Entries of each record; a record that cannot be read is skipped with a warning
    (naming its line in a log, its position in a document)."""
    for lineno, record in records:
        try:
            builder.message(record, lineno)
        except IngestError as exc:
            if document:
                exc = IngestError(f"message {lineno}: {exc.reason}", path=exc.path)
            parsed.problem(exc)


def _parse_document(data: bytes, *, path: str, header: FileHeader) -> Parsed:
    doc = _document(data)
    parsed = Parsed(consumed=len(data), lines=data.count(b"\n"))
    if not looks_like_document(doc):
        return parsed  # nothing of this format: the ingestor says what it looks like
    builder = _Builder(header.session_id, path=path)
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        parsed.recognised = 1
        summary = text(doc.get("summary")).strip()
        if summary:
            parsed.titles[header.session_id] = SessionTitle(title=summary, auto=True)
        if doc.get("kind") == "subagent" and header.parent_session_id is not None:
            parsed.parents[header.session_id] = header.parent_session_id
        records = [(i + 1, m) for i, m in enumerate(doc["messages"]) if isinstance(m, dict)]
        _build(builder, records, parsed, document=True)
    else:
        history = doc.get("history") if isinstance(doc, dict) else doc
        parsed.recognised = 1
        _history(builder, history if isinstance(history, list) else [], parsed)
        tag = path_tag(path)
        if tag:
            parsed.titles[header.session_id] = SessionTitle(title=tag)
    parsed.entries = builder.entries
    return parsed


def path_tag(path: str) -> str | None:
    """The tag of a saved chat, ``checkpoint-<tag>.json``."""
    name = PurePath(path).name
    if name.startswith("checkpoint-") and name.endswith(".json"):
        return unquote(name[len("checkpoint-") : -len(".json")]) or None
    return None


def _history(builder: _Builder, history: list[Any], parsed: Parsed) -> None:
    """A saved chat: the model's own history, one entry per text, call and response."""
    names: dict[str, str] = {}
    setup = False
    for position, content in enumerate(history, start=1):
        if not isinstance(content, dict):
            continue
        role = content.get("role")
        parts = content.get("parts")
        for part in parts if isinstance(parts, list) else ():
            if not isinstance(part, dict) or part.get("thought") is True:
                continue
            common: dict[str, Any] = {
                "seq": position - 1,
                "created_at": None,
                "extra": {"turn": position},
            }
            if isinstance(part.get("text"), str):
                body = text(part["text"]).strip()
                if not body:
                    continue
                if role == "user" and body.startswith(_SETUP_PREFIX):
                    setup = True
                    builder.add(role="system", kind=policy.SYSTEM, content=body, **common)
                elif role == "user":
                    setup = False
                    builder.add(role="user", kind=policy.USER_TEXT, content=body, **common)
                elif setup:
                    setup = False  # the model's acknowledgement of the context
                    builder.add(role="system", kind=policy.SYSTEM, content=body, **common)
                else:
                    builder.add(
                        role="assistant", kind=policy.ASSISTANT_TEXT, content=body, **common
                    )
            elif isinstance(part.get("functionCall"), dict):
                call = part["functionCall"]
                name = ident(call.get("name")) or "unknown"
                if ident(call.get("id")):
                    names[call["id"]] = name
                builder.add(
                    role="assistant",
                    kind=policy.TOOL_INPUT,
                    content="",
                    tool_name=name,
                    arguments=f"{name}({arguments_json(call.get('args'))})",
                    **common,
                )
            elif isinstance(part.get("functionResponse"), dict):
                response = part["functionResponse"]
                output, failed = _result_text([part])
                response_name = ident(response.get("name")) or names.get(str(response.get("id")))
                builder.add(
                    role="tool",
                    kind=policy.tool_result_kind(output, marked=failed),
                    content=output,
                    tool_name=response_name,
                    **common,
                )


ADAPTER = Adapter(
    name=NAME,
    version=VERSION,
    header=header,
    parse=parse,
    looks_like_line=looks_like_line,
    looks_like_document=looks_like_document,
    is_document=is_document,
    label="Gemini CLI",
    locations=("${GEMINI_CLI_HOME:-~}/.gemini/tmp",),
)

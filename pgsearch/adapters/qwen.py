"""Qwen Code sessions: ``~/.qwen/projects/<project>/chats/<session id>.jsonl``.

Each line is a chat record ``{"uuid", "parentUuid", "sessionId", "timestamp",
"type", "subtype", "cwd", "version", "message", ...}`` whose ``message`` is the
model API's content, ``{"role", "parts": [...]}`` (Qwen Code derives from Gemini
CLI). Records form a tree through ``parentUuid``; ``/rewind`` adds a branch to the
same file, and every branch's records belong to the session, in file order. Qwen
Code may append a record again under the same ``uuid`` when it completes (a reply
first written with its thoughts only): the last one wins, and a record rewritten
after an earlier pass read it makes the file read again whole. Mapping:

- ``user`` -> ``user_text``: what was typed (``systemPayload.displayText`` when the
  sent parts were expanded); context a hook added to the prompt -> ``system``;
  notifications, cron and background-task records -> ``system``;
- ``assistant`` text parts -> ``assistant_text``, ``functionCall`` parts ->
  ``tool_input``; thought parts are not stored;
- ``tool_result`` -> ``tool_output``, or ``tool_error`` when the call failed
  (``toolCallResult.status``/``error``, a ``functionResponse`` error) or the text
  reads as an error;
- ``system`` ``custom_title`` -> the title (generated when ``titleSource`` is
  ``auto``); ``chat_compression`` -> ``summary`` (the text of the compressed
  history the model goes on from); other system records are bookkeeping.

Record types this mapping does not know are skipped and counted.
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

NAME = "qwen"
VERSION = 1
LABEL = "Qwen Code"
LOCATIONS = ("~/.qwen/projects",)
RECORD_TYPES = frozenset({"user", "assistant", "tool_result", "system"})
_SYSTEM_USER = frozenset({"notification", "cron", "background_task_completed"})
_SHELL_TOOLS = frozenset({"run_shell_command", "shell"})
_HOOK_PREFIX = "<qwen:"


def looks_like(obj: dict[str, Any]) -> bool:
    """Whether a decoded line is a Qwen Code chat record."""
    if name_of(obj.get("type")) not in RECORD_TYPES or "role" in obj:
        return False
    if not ("uuid" in obj and "sessionId" in obj):
        return False
    message = obj.get("message")
    return (
        (isinstance(message, dict) and isinstance(message.get("parts"), list))
        or "systemPayload" in obj
        or "toolCallResult" in obj
    )


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def header(data: bytes, *, default_session: str, path: PurePath | None = None) -> FileHeader:
    """Session id, working directory and start time from the first record."""
    for obj in head_objects(data, 8):
        if looks_like(obj):
            return FileHeader(
                session_id=ident(obj.get("sessionId")) or default_session,
                cwd=text(obj.get("cwd")) or None,
                started_at=quiet_time(obj.get("timestamp")),
            )
    return FileHeader(session_id=default_session)


def _parts(message: Any) -> list[dict[str, Any]]:
    parts = _obj(message).get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _part_texts(message: Any) -> list[str]:
    return [
        text(p["text"])
        for p in _parts(message)
        if isinstance(p.get("text"), str) and p.get("thought") is not True
    ]


def _response_text(response: Any) -> tuple[str, bool]:
    """(text, failed) of a ``functionResponse.response``."""
    if isinstance(response, dict):
        if response.get("error") is not None:
            value = response["error"]
            return (text(value) if isinstance(value, str) else arguments_json(value)), True
        value = response.get("output")
        if value is not None:
            return (text(value) if isinstance(value, str) else arguments_json(value)), False
        return arguments_json(response), False
    return text(response), False


class _Parser:
    def __init__(self, data: bytes, start: int, *, path: str, header: FileHeader) -> None:
        self.data = data
        self.start = start
        self.path = path
        self.sid = header.session_id
        self.parsed = Parsed()
        #: uuid -> (first index in parsed.entries, count) of the records of this pass.
        self.spans: dict[str, tuple[int, int]] = {}
        self.calls: dict[str, str] = {}

    def handle(self, lineno: int, obj: dict[str, Any]) -> None:
        kind = name_of(obj.get("type"))
        if not looks_like(obj):
            if kind is not None and "uuid" in obj and "sessionId" in obj:
                self.parsed.skip_unknown(kind)  # a record type of a newer Qwen Code
            return
        self.parsed.recognised += 1
        uuid = ident(obj.get("uuid"))
        if uuid and self.start and self._read_before(uuid):
            self.parsed.restart = True  # a record an earlier pass read was rewritten
            return
        created = timestamp(obj.get("timestamp"), path=self.path, line=lineno)
        line = LineEntries(
            self.sid,
            lineno - 1,
            created,
            entry_id=uuid,
            extra={"line": lineno, "parent_uuid": ident(obj.get("parentUuid"))},
        )
        if kind == "user":
            self.user(line, obj)
        elif kind == "assistant":
            self.assistant(line, obj)
        elif kind == "tool_result":
            self.tool_result(line, obj)
        else:
            self.system(line, obj)
        if uuid in self.spans:
            first, count = self.spans.pop(uuid)
            del self.parsed.entries[first : first + count]
            self.spans = {k: (f - count if f > first else f, n) for k, (f, n) in self.spans.items()}
        if uuid and line.out:
            self.spans[uuid] = (len(self.parsed.entries), len(line.out))
        self.parsed.entries.extend(line.out)

    def _read_before(self, uuid: str) -> bool:
        needle = json.dumps(uuid).encode()
        return self.data.rfind(b'"uuid":' + needle, 0, self.start) >= 0

    def user(self, line: LineEntries, obj: dict[str, Any]) -> None:
        payload = _obj(obj.get("systemPayload"))
        texts = _part_texts(obj.get("message"))
        typed = [t for t in texts if not t.lstrip().startswith(_HOOK_PREFIX)]
        context = [t for t in texts if t.lstrip().startswith(_HOOK_PREFIX)]
        shown = text(payload.get("displayText"))
        body = shown or "\n".join(typed)
        if name_of(obj.get("subtype")) in _SYSTEM_USER:
            line.text("system", policy.SYSTEM, body, extra={"subtype": text(obj["subtype"])})
        else:
            line.text("user", policy.USER_TEXT, body)
        for hook in context:
            line.text("system", policy.SYSTEM, hook)

    def assistant(self, line: LineEntries, obj: dict[str, Any]) -> None:
        pending: list[str] = []
        for part in _parts(obj.get("message")):
            if isinstance(part.get("text"), str):
                if part.get("thought") is not True:
                    pending.append(text(part["text"]))
            elif isinstance(part.get("functionCall"), dict):
                line.text("assistant", policy.ASSISTANT_TEXT, "\n".join(pending))
                pending.clear()
                call = part["functionCall"]
                name = ident(call.get("name")) or "unknown"
                call_id = ident(call.get("id"))
                if call_id:
                    self.calls[call_id] = name
                line.call(name, call.get("args"), extra={"call_id": call_id})
        line.text("assistant", policy.ASSISTANT_TEXT, "\n".join(pending))

    def tool_result(self, line: LineEntries, obj: dict[str, Any]) -> None:
        result = _obj(obj.get("toolCallResult"))
        failed = result.get("status") == "error" or bool(result.get("error"))
        texts: list[str] = []
        name = None
        for part in _parts(obj.get("message")):
            response = part.get("functionResponse")
            if isinstance(response, dict):
                name = ident(response.get("name")) or name
                body, error = _response_text(response.get("response"))
                texts.append(body)
                failed = failed or error
        output = "\n".join(t for t in texts if t)
        if not output:
            display = result.get("resultDisplay")
            output = text(display) if isinstance(display, str) else ""
        if not output and isinstance(result.get("error"), dict | str):
            error = result["error"]
            output = text(error.get("message")) if isinstance(error, dict) else text(error)
        call_id = ident(result.get("callId"))
        name = name or (self.calls.get(call_id) if call_id else None)
        command = None
        if name in _SHELL_TOOLS:
            command = shell_command(text(obj.get("rawCommand")) or None)
        line.result(
            output, tool_name=name, marked=failed, command=command, extra={"call_id": call_id}
        )

    def system(self, line: LineEntries, obj: dict[str, Any]) -> None:
        payload = _obj(obj.get("systemPayload"))
        subtype = obj.get("subtype")
        if subtype == "custom_title":
            title = text(payload.get("customTitle")).strip()
            if title:
                auto = payload.get("titleSource") == "auto"
                self.parsed.titles[self.sid] = SessionTitle(title=title, auto=auto)
        elif subtype == "chat_compression":
            # The compressed history the model goes on from: its text is the summary.
            history = payload.get("compressedHistory")
            texts = (
                [t for c in history if isinstance(c, dict) for t in _part_texts(c)]
                if isinstance(history, list)
                else []
            )
            summary = "\n".join(t for t in texts if t.strip()).strip()
            line.text("system", policy.SUMMARY, summary, summary=summary or None)


def parse(data: bytes, start: int, first_line: int, *, path: str, header: FileHeader) -> Parsed:
    """Entries of the records of ``data[start:]``, under the lenient line policy."""
    parser = _Parser(data, start, path=path, header=header)

    def handle(lineno: int, obj: dict[str, Any]) -> list[Entry] | None:
        parser.handle(lineno, obj)
        return None

    return read_lines(data, start, first_line, path=path, parsed=parser.parsed, handle=handle)


ADAPTER = Adapter(
    name=NAME,
    version=VERSION,
    header=header,
    parse=parse,
    looks_like_line=looks_like,
    label=LABEL,
    locations=LOCATIONS,
)

"""OpenCode sessions: one session as a document of its session, messages and parts.

OpenCode keeps a session as many small JSON files, not one log::

    storage/session/<project>/<session-id>.json     the session (title, directory)
    storage/message/<session-id>/<message-id>.json  each message (role, times)
    storage/part/<message-id>/<part-id>.json        each part (text, tool call, ...)

and ``opencode export <session-id>`` writes the same session as one document,
``{"info": session, "messages": [{"info": message, "parts": [...]}]}``; OpenCode
1.2 and later keep sessions in a SQLite database, from which the export is the way
out. pgsearch reads the document, either as exported or assembled by the ingestor
from the storage files (`pgsearch.sources`): the session file stands for the
session, so ingesting ``storage/`` (or one session file) finds every session.
OpenCode updates parts in place as a tool runs, so any change re-reads the session.

Mapping: user ``text`` parts -> ``user_text`` (``synthetic`` text OpenCode adds ->
``system``; attached files as ``[file: name]``); assistant ``text`` ->
``assistant_text`` (``summary`` when the message is a compaction summary);
``tool`` parts -> ``tool_input`` with the tool name, and when finished
``tool_output``, or ``tool_error`` when the tool failed or the text reads as an
error; an assistant message's ``error`` -> ``system``. Reasoning, step, snapshot
and patch parts are not stored. A session's ``parentID`` makes it a sub-agent
session linked to its parent; its ``title`` is its title and its ``directory`` the
working directory.
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
    SessionTitle,
    arguments_json,
    ident,
    quiet_time,
    shell_command,
    text,
    timestamp,
)
from pgsearch.errors import IngestError
from pgsearch.messages import Entry

NAME = "opencode"
VERSION = 1
_SHELL_TOOLS = frozenset({"bash", "shell"})
#: Titles OpenCode gives a session before it has generated one.
_PLACEHOLDER_TITLE_RE = re.compile(r"^(?:New session|Child session) - \d{4}-\d\d-\d\dT")


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def looks_like_document(value: Any) -> bool:
    """An export (``info`` + ``messages``) or a storage session file."""
    if not isinstance(value, dict):
        return False
    info = value.get("info")
    if isinstance(info, dict) and isinstance(value.get("messages"), list):
        return isinstance(info.get("id"), str)
    return is_session_info(value)


def is_session_info(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("id"), str)
        and value["id"].startswith("ses")
        and "projectID" in value
        and isinstance(value.get("time"), dict)
    )


def _document(data: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise IngestError(f"invalid UTF-8 at byte {exc.start + 1}") from None
    except RecursionError:
        raise IngestError("JSON nested too deeply") from None
    except ValueError as exc:
        raise IngestError(f"not a JSON document ({exc})") from None
    if not isinstance(doc, dict):
        raise IngestError("expected an OpenCode session document")
    if is_session_info(doc):
        doc = {"info": doc, "messages": []}
    return doc


def header(data: bytes, *, default_session: str, path: PurePath | None = None) -> FileHeader:
    try:
        info = _document(data).get("info")
    except IngestError:
        info = None
    if not isinstance(info, dict):
        return FileHeader(session_id=default_session)
    times = _obj(info.get("time"))
    return FileHeader(
        session_id=ident(info.get("id")) or default_session,
        cwd=text(info.get("directory")) or None,
        started_at=quiet_time(times.get("created")),
        parent_session_id=ident(info.get("parentID")),
    )


def _when(value: Any, *, path: str) -> Any:
    return timestamp(value, path=path, line=0) if value is not None else None


def parse(data: bytes, start: int, first_line: int, *, path: str, header: FileHeader) -> Parsed:
    """Every entry of the session document (always read whole)."""
    try:
        doc = _document(data)
    except IngestError:
        doc = {}
    if not looks_like_document(doc):
        # Nothing of this format: the ingestor says what the file looks like.
        return Parsed(consumed=len(data), lines=data.count(b"\n"))
    sid = header.session_id
    parsed = Parsed(consumed=len(data), lines=data.count(b"\n"), recognised=1)
    info = _obj(doc.get("info"))
    title = text(info.get("title")).strip()
    if title and not _PLACEHOLDER_TITLE_RE.match(title):
        parsed.titles[sid] = SessionTitle(title=title)
    if header.parent_session_id is not None:
        parsed.parents[sid] = header.parent_session_id
    messages = [m for m in doc.get("messages") or () if isinstance(m, dict)]
    messages.sort(key=_message_order)
    for position, message in enumerate(messages, start=1):
        try:
            parsed.entries.extend(_message_entries(message, sid, position, path=path))
        except IngestError as exc:
            parsed.problem(IngestError(f"message {position}: {exc.reason}", path=path))
        except (TypeError, AttributeError, KeyError, ValueError) as exc:
            parsed.problem(IngestError(f"message {position}: unreadable ({exc})", path=path))
    return parsed


def _message_order(message: dict[str, Any]) -> tuple[float, str]:
    info = _obj(message.get("info"))
    times = _obj(info.get("time"))
    created = times.get("created")
    return (
        float(created)
        if isinstance(created, int | float) and not isinstance(created, bool)
        else 0.0,
        str(info.get("id", "")),
    )


def _message_entries(message: dict[str, Any], sid: str, position: int, *, path: str) -> list[Entry]:
    info = _obj(message.get("info"))
    times = _obj(info.get("time"))
    created = _when(times.get("created"), path=path)
    role = info.get("role")
    summary_message = info.get("summary") is True
    base_extra: dict[str, Any] = {"message": ident(info.get("id")), "position": position}
    parts = [p for p in message.get("parts") or () if isinstance(p, dict)]
    parts.sort(key=lambda p: str(p.get("id", "")))
    out: list[Entry] = []
    pending: list[str] = []

    def add(role_: str, kind: str, content: str, **fields: Any) -> None:
        extra = {**base_extra, **fields.pop("extra", {})}
        out.append(
            Entry(
                session_id=sid,
                seq=position - 1,
                role=role_,
                kind=kind,
                content=content,
                created_at=fields.pop("created_at", created),
                extra={k: v for k, v in extra.items() if v is not None},
                **fields,
            )
        )

    def flush(entry_id: str | None) -> None:
        body = "\n".join(p for p in pending if p).strip()
        pending.clear()
        if not body:
            return
        if role == "user":
            add("user", policy.USER_TEXT, body, entry_id=entry_id)
        elif summary_message:
            add("system", policy.SUMMARY, body, entry_id=entry_id, summary=body)
        else:
            add("assistant", policy.ASSISTANT_TEXT, body, entry_id=entry_id)

    first_text_id: str | None = None
    for part in parts:
        ptype = part.get("type")
        pid = ident(part.get("id"))
        if ptype == "text":
            body = text(part.get("text"))
            if part.get("ignored") is True or not body.strip():
                continue
            if part.get("synthetic") is True:
                flush(first_text_id)
                first_text_id = None
                add("system", policy.SYSTEM, body.strip(), entry_id=pid)
                continue
            if first_text_id is None:
                first_text_id = pid
            pending.append(body)
        elif ptype == "file":
            name = text(part.get("filename")) or text(part.get("url"))[:200]
            pending.append(f"[file: {name}]" if name else "[file]")
        elif ptype == "tool":
            flush(first_text_id)
            first_text_id = None
            out.extend(_tool_entries(part, sid, position, created, base_extra, path=path))
    flush(first_text_id)
    error = info.get("error")
    if role == "assistant" and isinstance(error, dict):
        data = _obj(error.get("data"))
        body = text(data.get("message")) or text(error.get("name")) or "error"
        add("system", policy.SYSTEM, body, extra={"error": text(error.get("name"))})
    return out


def _tool_entries(
    part: dict[str, Any],
    sid: str,
    position: int,
    created: Any,
    base_extra: dict[str, Any],
    *,
    path: str,
) -> list[Entry]:
    name = ident(part.get("tool")) or "unknown"
    state = _obj(part.get("state"))
    times = _obj(state.get("time"))
    pid = ident(part.get("id"))
    extra = {**base_extra, "call_id": ident(part.get("callID"))}
    extra = {k: v for k, v in extra.items() if v is not None}
    started = _when(times.get("start"), path=path) or created
    out = [
        Entry(
            session_id=sid,
            seq=position - 1,
            role="assistant",
            kind=policy.TOOL_INPUT,
            content="",
            created_at=started,
            entry_id=pid,
            tool_name=name,
            arguments=f"{name}({arguments_json(state.get('input'))})",
            extra=extra,
        )
    ]
    status = state.get("status")
    if status not in ("completed", "error"):
        return out  # still running: its result comes with the next change
    failed = status == "error"
    output = text(state.get("error") if failed else state.get("output"))
    metadata = _obj(state.get("metadata"))
    code = metadata.get("exit")
    exit_code = code if isinstance(code, int) and not isinstance(code, bool) else None
    if not output:
        if not failed and not exit_code:
            return out  # nothing to show, nothing failed
        output = f"[exit code {exit_code}]" if exit_code else "[failed]"
    command = shell_command(state.get("input")) if name in _SHELL_TOOLS else None
    out.append(
        Entry(
            session_id=sid,
            seq=position - 1,
            role="tool",
            kind=policy.tool_result_kind(
                output or "error",
                marked=failed or bool(exit_code),
                command=command,
                exit_code=exit_code,
            ),
            content=output,
            created_at=_when(times.get("end"), path=path) or started,
            entry_id=f"{pid}#result" if pid else None,
            tool_name=name,
            extra={**extra, "exit_code": exit_code} if exit_code is not None else extra,
        )
    )
    return out


def _always(data: bytes) -> bool:
    return True


ADAPTER = Adapter(
    name=NAME,
    version=VERSION,
    header=header,
    parse=parse,
    # A session document written on one line decodes as a line.
    looks_like_line=looks_like_document,
    looks_like_document=looks_like_document,
    is_document=_always,
    label="OpenCode",
    locations=("${XDG_DATA_HOME:-~/.local/share}/opencode/storage",),
)

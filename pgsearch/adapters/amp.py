"""Amp threads: ``~/.local/share/amp/threads/T-<id>.json``.

Amp keeps each thread as one JSON document, rewritten as the thread goes on:
``{"v", "id": "T-…", "created": <epoch ms>, "title", "messages": [...], "env":
{"initial": {"trees": [{"uri": "file:///…"}]}}}``. Messages are ``{"role", "content":
[blocks], "meta": {"sentAt"}, "usage": {"timestamp"}}`` with Messages API blocks;
Amp's own tool results are ``{"type": "tool_result", "toolUseID", "run": {"status",
"result", "error"}}``. The document is read whole whenever it changes. Mapping:

- user text -> ``user_text``; a tool result -> ``tool_output``, or ``tool_error``
  when its run ended in ``error`` (or was ``cancelled``) or the text reads as an
  error; a shell result's ``exitCode`` counts (a search that found nothing is not
  an error);
- assistant text -> ``assistant_text``, ``tool_use`` -> ``tool_input``; thinking is
  not stored;
- the thread's ``title`` -> its title; the first tree's directory -> the working
  directory.

Messages take their own time when Amp records one, else the thread's.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any
from urllib.parse import unquote, urlparse

from pgsearch import policy
from pgsearch.adapters.common import (
    Adapter,
    FileHeader,
    LineEntries,
    Parsed,
    SessionTitle,
    ToolCall,
    arguments_json,
    as_list,
    block_text,
    ident,
    int_or_none,
    json_document,
    quiet_time,
    shell_command,
    text,
    timestamp,
)
from pgsearch.errors import IngestError

NAME = "amp"
VERSION = 1
LABEL = "Amp"
LOCATIONS = ("${XDG_DATA_HOME:-~/.local/share}/amp/threads",)
_SHELL_TOOLS = frozenset({"Bash", "bash", "shell_command"})


def looks_like_document(value: Any) -> bool:
    """An Amp thread: ``T-`` id, ``messages`` and Amp's version field."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("id"), str)
        and value["id"].startswith("T-")
        and isinstance(value.get("messages"), list)
        and ("v" in value or "created" in value)
    )


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _cwd(doc: dict[str, Any]) -> str | None:
    trees = _obj(_obj(doc.get("env")).get("initial")).get("trees")
    for tree in trees if isinstance(trees, list) else ():
        uri = text(_obj(tree).get("uri"))
        if uri.startswith("file://"):
            return unquote(urlparse(uri).path) or None
    return None


def header(data: bytes, *, default_session: str, path: PurePath | None = None) -> FileHeader:
    """Thread id, working directory (the first tree) and creation time."""
    doc = json_document(data, looks_like_document)
    return FileHeader(
        session_id=ident(doc.get("id")) or default_session,
        cwd=_cwd(doc),
        started_at=quiet_time(doc.get("created")),
    )


def _result(block: dict[str, Any]) -> tuple[str, bool, int | None]:
    """(text, failed, exit code) of a tool result in Amp's shape or the API's."""
    if "toolUseID" not in block:
        return block_text(block.get("content")), block.get("is_error") is True, None
    run = _obj(block.get("run"))
    status = run.get("status")
    result = run.get("result")
    code = int_or_none(_obj(result).get("exitCode"))
    if isinstance(result, dict):
        for key in ("output", "content", "diff"):
            if result.get(key) is not None:
                value = result[key]
                body = text(value) if isinstance(value, str) else arguments_json(value)
                break
        else:
            body = arguments_json(result)
    elif isinstance(result, list) and all(isinstance(r, str) for r in result):
        body = "\n".join(text(r) for r in result)  # lines of a search's output
    elif result is not None:
        body = text(result) if isinstance(result, str) else arguments_json(result)
    else:
        body = text(_obj(run.get("error")).get("message")) or (
            f"[{status}]" if status in ("error", "cancelled") else ""
        )
    return body, status in ("error", "cancelled") or bool(code), code


def parse(data: bytes, start: int, first_line: int, *, path: str, header: FileHeader) -> Parsed:
    """Every entry of the thread (always read whole)."""
    doc = json_document(data, looks_like_document)
    parsed = Parsed(consumed=len(data), lines=data.count(b"\n"))
    if not doc:
        return parsed  # nothing of this format: the ingestor says what it looks like
    parsed.recognised = 1
    sid = header.session_id
    title = text(doc.get("title")).strip()
    if title:
        parsed.titles[sid] = SessionTitle(title=title)
    calls: dict[str, ToolCall] = {}
    for position, message in enumerate(doc["messages"]):
        if not isinstance(message, dict):
            continue
        when = _obj(message.get("meta")).get("sentAt") or _obj(message.get("usage")).get(
            "timestamp"
        )
        try:
            created = timestamp(when, path=path, line=0) or header.started_at
        except IngestError as exc:
            parsed.problem(IngestError(f"message {position + 1}: {exc.reason}", path=path))
            continue
        line = LineEntries(sid, position, created, extra={"position": position + 1})
        _blocks(line, message, calls)
        parsed.entries.extend(line.out)
    return parsed


def _blocks(line: LineEntries, message: dict[str, Any], calls: dict[str, ToolCall]) -> None:
    """The entries of one message's blocks, in order."""
    content = message.get("content")
    blocks = as_list(content)
    pending: list[str] = []
    role = "assistant" if message.get("role") == "assistant" else "user"
    kind = policy.ASSISTANT_TEXT if role == "assistant" else policy.USER_TEXT
    for block in blocks:
        btype = block.get("type") if isinstance(block, dict) else None
        if isinstance(block, str) or btype == "text":
            pending.append(block_text([block]))
            continue
        if btype == "image":
            pending.append("[image]")
            continue
        if btype not in ("tool_use", "tool_result") or not isinstance(block, dict):
            continue
        line.text(role, kind, "\n".join(pending))
        pending.clear()
        if btype == "tool_use":
            name = ident(block.get("name")) or "unknown"
            call_id = ident(block.get("id"))
            args = block.get("input")
            if call_id:
                calls[call_id] = ToolCall(
                    name, shell_command(args) if name in _SHELL_TOOLS else None
                )
            line.call(name, args, extra={"call_id": call_id})
        else:
            call_id = ident(block.get("toolUseID")) or ident(block.get("tool_use_id"))
            call = calls.get(call_id or "")
            body, failed, code = _result(block)
            line.result(
                body,
                tool_name=call.name if call else None,
                marked=failed,
                command=call.command if call else None,
                exit_code=code,
                extra={"call_id": call_id},
            )
    line.text(role, kind, "\n".join(pending))


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

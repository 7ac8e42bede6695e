"""GitHub Copilot Chat in VS Code: ``<VS Code user dir>/workspaceStorage/<hash>/chatSessions/``.

VS Code keeps each chat session of a workspace as ``chatSessions/<id>.json``, a
document ``{"version": 3, "sessionId", "creationDate", "customTitle", "requests":
[...]}``, or (newer versions) ``chatSessions/<id>.jsonl``, a log of changes to that
document: ``{"kind": 0, "v": <document>}`` first, then ``{"kind": 1, "k": [path],
"v": value}`` (set), ``{"kind": 2, "k": [path], "v": [items], "i": index}`` (push,
or splice at ``i``) and ``{"kind": 3, "k": [path]}`` (delete). pgsearch replays the
log into the document; either shape is read whole whenever it changes (chats with
no workspace are in ``globalStorage/emptyWindowChatSessions``). Each request:

- ``message.text`` -> ``user_text``;
- its ``response`` items: Markdown (``value``) -> ``assistant_text``;
  ``toolInvocationSerialized`` -> ``tool_input`` (the tool id; its input, or the
  terminal command) and, when it carries one, its result -> ``tool_output``, or
  ``tool_error`` when marked as an error or reading as one; thinking, edits,
  references and confirmations are not stored;
- ``result.errorDetails`` -> ``system``.

The session's ``customTitle`` is its (generated) title. Response item kinds this
mapping does not know are skipped and counted.
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
    as_list,
    ident,
    name_of,
    quiet_time,
    text,
    timestamp,
)
from pgsearch.errors import IngestError

NAME = "vscode-copilot"
VERSION = 1
LABEL = "GitHub Copilot Chat (VS Code)"
_USER_DIRS = (
    "${XDG_CONFIG_HOME:-~/.config}/Code",
    "${XDG_CONFIG_HOME:-~/.config}/Code - Insiders",
    "~/Library/Application Support/Code",
    "~/Library/Application Support/Code - Insiders",
)
LOCATIONS = tuple(
    pattern
    for user in _USER_DIRS
    for pattern in (
        f"{user}/User/workspaceStorage/*/chatSessions",
        f"{user}/User/globalStorage/emptyWindowChatSessions",
    )
)
_TEXT_KINDS = frozenset({None, "markdownContent", "markdownVuln"})
_SKIPPED_KINDS = frozenset(
    {
        "thinking",
        "prepareToolInvocation",
        "inlineReference",
        "codeblockUri",
        "textEditGroup",
        "notebookEditGroup",
        "undoStop",
        "confirmation",
        "progressMessage",
        "progressTaskSerialized",
        "command",
        "extensions",
        "warning",
        "mcpServersStarting",
        "references",
    }
)
_SHELL_TOOLS = frozenset({"run_in_terminal", "copilot_runInTerminal"})


def looks_like_document(value: Any) -> bool:
    """A chat session document, or the first line of a session's change log."""
    if not isinstance(value, dict):
        return False
    if value.get("kind") == 0 and isinstance(value.get("v"), dict):
        value = value["v"]
    return isinstance(value.get("requests"), list) and "sessionId" in value and "version" in value


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _key(container: Any, key: Any) -> Any:
    if isinstance(container, list) and isinstance(key, int) and 0 <= key < len(container):
        return container[key]
    if isinstance(container, dict) and isinstance(key, str):
        return container.get(key)
    return None


def _replay(data: bytes) -> tuple[dict[str, Any], int]:
    """The document a change log builds, and how many of its lines could not apply."""
    state: Any = None
    bad = 0
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            op = json.loads(raw)
        except (ValueError, RecursionError):
            if number < len(lines):  # a last line without newline is still being written
                bad += 1
            continue
        if not isinstance(op, dict):
            bad += 1
            continue
        kind, path = op.get("kind"), op.get("k")
        if kind == 0:
            state = op.get("v")
            continue
        if not isinstance(path, list) or not path or state is None:
            bad += 1
            continue
        parent = state
        for key in path[:-1]:
            parent = _key(parent, key)
        last = path[-1]
        if kind == 1 and isinstance(parent, dict) and isinstance(last, str):
            parent[last] = op.get("v")
        elif (
            kind == 1
            and isinstance(parent, list)
            and isinstance(last, int)
            and 0 <= last < len(parent)
        ):
            parent[last] = op.get("v")
        elif kind == 2:
            target = _key(parent, last)
            value = op.get("v")
            items: list[Any] = value if isinstance(value, list) else []
            if isinstance(target, list):
                at = op.get("i")
                if isinstance(at, int) and 0 <= at <= len(target):
                    del target[at:]
                target.extend(items)
            elif isinstance(parent, dict) and isinstance(last, str):
                parent[last] = list(items)
        elif kind == 3 and isinstance(parent, dict) and isinstance(last, str):
            parent.pop(last, None)
        else:
            bad += 1
    return (state if isinstance(state, dict) else {}), bad


def _document(data: bytes) -> tuple[dict[str, Any], int]:
    try:
        doc = json.loads(data.decode("utf-8-sig"))
    except (ValueError, RecursionError):
        doc = None
    if isinstance(doc, dict) and not (doc.get("kind") == 0 and "v" in doc):
        return (doc if looks_like_document(doc) else {}), 0
    state, bad = _replay(data)  # a change log (one line or more)
    return (state if looks_like_document(state) else {}), bad


def header(data: bytes, *, default_session: str, path: PurePath | None = None) -> FileHeader:
    """The session id and its creation time."""
    doc, _ = _document(data)
    return FileHeader(
        session_id=ident(doc.get("sessionId")) or default_session,
        started_at=quiet_time(doc.get("creationDate")),
    )


def _markdown(item: dict[str, Any]) -> str:
    value = item.get("value")
    if isinstance(value, dict):
        value = value.get("value")
    return text(value)


def _tool(line: LineEntries, item: dict[str, Any]) -> None:
    name = ident(item.get("toolId")) or "unknown"
    details = _obj(item.get("resultDetails"))
    data = _obj(item.get("toolSpecificData"))
    command = text(data.get("command")) or text(_obj(data.get("commandLine")).get("original"))
    arguments: Any = details.get("input")
    if arguments is None:
        arguments = (
            {"command": command} if command else _markdown({"value": item.get("invocationMessage")})
        )
    line.call(name, arguments, extra={"call_id": ident(item.get("toolCallId"))})
    output = details.get("output")
    if isinstance(output, list):
        body = "\n".join(_markdown(_obj(o)) or arguments_json(o) for o in output)
    elif output is not None:
        body = text(output) if isinstance(output, str) else arguments_json(output)
    else:
        body = ""
    line.result(
        body,
        tool_name=name,
        marked=details.get("isError") is True,
        command=command if name in _SHELL_TOOLS else None,
    )


def parse(data: bytes, start: int, first_line: int, *, path: str, header: FileHeader) -> Parsed:
    """Every request of the session (always read whole)."""
    doc, bad = _document(data)
    parsed = Parsed(consumed=len(data), lines=data.count(b"\n"))
    if not doc:
        return parsed  # nothing of this format: the ingestor says what it looks like
    parsed.recognised = 1
    if bad:
        parsed.problem(IngestError(f"{bad} changes to the session could not be applied", path=path))
    sid = header.session_id
    title = text(doc.get("customTitle")).strip()
    if title:
        parsed.titles[sid] = SessionTitle(title=title, auto=True)
    for position, request in enumerate(as_list(doc.get("requests"))):
        if not isinstance(request, dict):
            continue
        try:
            created = timestamp(request.get("timestamp"), path=path, line=0)
        except IngestError as exc:
            parsed.problem(IngestError(f"request {position + 1}: {exc.reason}", path=path))
            continue
        line = LineEntries(
            sid, position, created, entry_id=ident(request.get("requestId")), extra=None
        )
        line.text("user", policy.USER_TEXT, text(_obj(request.get("message")).get("text")))
        pending: list[str] = []
        for item in as_list(request.get("response")):
            if not isinstance(item, dict):
                continue
            kind = name_of(item.get("kind"))
            if kind in _TEXT_KINDS:
                pending.append(_markdown(item))
            elif kind == "toolInvocationSerialized":
                line.text("assistant", policy.ASSISTANT_TEXT, "".join(pending))
                pending.clear()
                _tool(line, item)
            elif kind not in _SKIPPED_KINDS:
                parsed.skip_unknown(f"response/{kind}")
        line.text("assistant", policy.ASSISTANT_TEXT, "".join(pending))
        error = _obj(_obj(request.get("result")).get("errorDetails"))
        line.text("system", policy.SYSTEM, text(error.get("message")))
        parsed.entries.extend(line.out)
    return parsed


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

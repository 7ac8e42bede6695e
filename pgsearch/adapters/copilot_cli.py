"""GitHub Copilot CLI sessions: ``~/.copilot/session-state/<id>/events.jsonl``.

Copilot CLI 1.0 and later keep a session as ``session-state/<id>/events.jsonl``
(earlier versions as ``session-state/<id>.jsonl``). Each line is one event,
``{"type", "data", "id", "timestamp", "parentId"}``; ``session.start`` (and
``session.resume``) name the session id and the working directory
(``data.context.cwd``). Mapping:

- ``user.message`` -> ``user_text`` (attached files as ``[file: name]``); text a
  skill injects (``source: skill-…``, ``<skill-context``) -> ``system``;
- ``assistant.message`` -> ``assistant_text``, and each of its ``toolRequests`` ->
  ``tool_input`` with the tool name (arguments stored, indexed only by policy);
- ``tool.execution_complete`` -> ``tool_output``, or ``tool_error`` when
  ``success`` is false (a search program that found nothing excepted) or the text
  reads as an error, named after the call it answers;
- ``session.info``, ``session.warning``, ``session.error``, ``system.message``,
  ``system.notification`` and ``abort`` -> ``system``;
- ``session.title_changed`` -> the session's title.

A sub-agent's events carry ``parentToolCallId`` (the call of the parent's task
tool): they form a session of their own, ``<session>/agent-<call id>``, linked to
the session, titled by the agent's display name from ``subagent.started``.
Reasoning, streaming deltas, turn markers, hooks, usage and model changes hold no
conversation text and are skipped; event types this mapping does not know are
skipped and counted.
"""

from __future__ import annotations

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
    head_objects,
    ident,
    name_of,
    quiet_time,
    read_lines,
    session_key,
    shell_command,
    text,
    timestamp,
)
from pgsearch.messages import Entry

NAME = "copilot-cli"
VERSION = 1
LABEL = "GitHub Copilot CLI"
#: Where Copilot CLI keeps sessions (``COPILOT_HOME`` moves ``~/.copilot``).
LOCATIONS = ("${COPILOT_HOME:-~/.copilot}/session-state",)
#: Event types with conversation text or session facts.
_TEXT_EVENTS = frozenset(
    {
        "user.message",
        "assistant.message",
        "tool.execution_complete",
        "session.info",
        "session.warning",
        "session.error",
        "system.message",
        "system.notification",
        "abort",
    }
)
#: Event types that hold no conversation text.
_BOOKKEEPING = frozenset(
    {
        "session.start",
        "session.resume",
        "session.title_changed",
        "subagent.started",
        "subagent.completed",
        "subagent.failed",
        "subagent.selected",
        "tool.execution_start",
        "tool.execution_partial_result",
        "tool.execution_progress",
        "tool.user_requested",
        "assistant.turn_start",
        "assistant.turn_end",
        "assistant.intent",
        "assistant.reasoning",
        "assistant.reasoning_delta",
        "assistant.message_delta",
        "assistant.usage",
        "session.model_change",
        "session.model_changed",
        "session.mode_changed",
        "session.context_changed",
        "session.plan_changed",
        "session.idle",
        "session.shutdown",
        "session.truncation",
        "session.usage_info",
        "session.usage_checkpoint",
        "session.auto_mode_resolved",
        "session.compaction_start",
        "session.compaction_complete",
        "session.handoff",
        "session.task_complete",
        "session.tools_updated",
        "session.skills_loaded",
        "session.mcp_servers_loaded",
        "hook.start",
        "hook.end",
        "permission.requested",
        "permission.completed",
    }
)
_PREFIXES = ("session", "user", "assistant", "tool", "subagent", "system", "hook", "permission")
_SHELL_TOOLS = frozenset({"bash", "shell", "powershell", "run_in_terminal"})


def looks_like(obj: dict[str, Any]) -> bool:
    """Whether a decoded line is a Copilot CLI event (``{"type": "a.b", "data": {...}}``)."""
    kind = name_of(obj.get("type"))
    if kind is None or not isinstance(obj.get("data"), dict) or "role" in obj:
        return False
    return kind in _TEXT_EVENTS or kind in _BOOKKEEPING or kind.split(".")[0] in _PREFIXES


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def header(data: bytes, *, default_session: str, path: PurePath | None = None) -> FileHeader:
    """Session id and working directory from ``session.start`` (else the directory name)."""
    fallback = default_session
    if path is not None and path.name == "events.jsonl" and path.parent.name:
        fallback = path.parent.name
    for obj in head_objects(data):
        if obj.get("type") in ("session.start", "session.resume"):
            info = _obj(obj.get("data"))
            context = _obj(info.get("context"))
            return FileHeader(
                session_id=ident(info.get("sessionId")) or fallback,
                cwd=text(context.get("cwd")) or None,
                started_at=quiet_time(info.get("startTime")) or quiet_time(obj.get("timestamp")),
            )
    return FileHeader(session_id=fallback)


def _call(request: dict[str, Any]) -> ToolCall:
    name = ident(request.get("name")) or ident(request.get("toolName")) or "unknown"
    command = shell_command(request.get("arguments")) if name in _SHELL_TOOLS else None
    return ToolCall(name, command)


def _tool_call_in(line: Any, call_id: str) -> ToolCall | None:
    info = _obj(line.get("data")) if isinstance(line, dict) else {}
    if line.get("type") == "tool.execution_start" and info.get("toolCallId") == call_id:
        return _call(info)
    for request in info.get("toolRequests") or ():
        if isinstance(request, dict) and request.get("toolCallId") == call_id:
            return _call(request)
    return None


def _result_text(result: Any) -> str:
    if isinstance(result, str):
        return text(result)
    info = _obj(result)
    for key in ("content", "detailedContent", "textResultForLlm"):
        if isinstance(info.get(key), str) and info[key]:
            return text(info[key])
    error = info.get("error")
    if isinstance(error, dict):
        return text(error.get("message"))
    return text(error)


class _Parser:
    def __init__(self, data: bytes, start: int, *, path: str, header: FileHeader) -> None:
        self.path = path
        self.sid = header.session_id
        self.tools = ToolCalls(data, start, _tool_call_in)
        self.parsed = Parsed()

    def session_of(self, info: dict[str, Any]) -> str:
        parent_call = ident(info.get("parentToolCallId"))
        if parent_call is None:
            return self.sid
        sub = session_key(self.sid, f"agent-{parent_call}") or self.sid
        if sub != self.sid:
            self.parsed.parents[sub] = self.sid
        return sub

    def handle(self, lineno: int, obj: dict[str, Any]) -> list[Entry] | None:
        kind = name_of(obj.get("type"))
        if not looks_like(obj):
            return None
        self.parsed.recognised += 1
        info = _obj(obj.get("data"))
        if kind == "session.title_changed":
            title = text(info.get("title")).strip()
            if title:
                self.parsed.titles[self.sid] = SessionTitle(title=title)
            return None
        if kind == "subagent.started":
            call_id = ident(info.get("toolCallId"))
            name = text(info.get("agentDisplayName") or info.get("agentName")).strip()
            sub = session_key(self.sid, f"agent-{call_id}") if call_id else None
            if sub and sub != self.sid:
                self.parsed.parents[sub] = self.sid
                if name:
                    self.parsed.titles[sub] = SessionTitle(title=name, auto=True)
            return None
        if kind not in _TEXT_EVENTS:
            if kind not in _BOOKKEEPING:
                self.parsed.skip_unknown(kind)
            return None
        created = timestamp(obj.get("timestamp"), path=self.path, line=lineno)
        line = LineEntries(
            self.session_of(info),
            lineno - 1,
            created,
            entry_id=ident(obj.get("id")),
            extra={"line": lineno},
        )
        if kind == "user.message":
            self.user(line, info)
        elif kind == "assistant.message":
            self.assistant(line, info)
        elif kind == "tool.execution_complete":
            call_id = ident(info.get("toolCallId"))
            call = self.tools.get(call_id)
            line.result(
                _result_text(info.get("result")) or _result_text(info.get("error")),
                tool_name=call.name if call else None,
                marked=info.get("success") is False,
                command=call.command if call else None,
                extra={"call_id": call_id},
            )
        elif kind == "abort":
            reason = text(info.get("reason")).strip()
            line.text("system", policy.SYSTEM, f"[aborted: {reason}]" if reason else "[aborted]")
        else:
            body = text(info.get("message")) or text(info.get("content"))
            line.text("system", policy.SYSTEM, body, extra={"event": kind})
        return line.out

    def user(self, line: LineEntries, info: dict[str, Any]) -> None:
        body = text(info.get("content"))
        files = [
            f"[file: {text(a.get('displayName') or a.get('path'))}]"
            for a in info.get("attachments") or ()
            if isinstance(a, dict) and (a.get("displayName") or a.get("path"))
        ]
        body = "\n".join(p for p in (body, *files) if p)
        source = text(info.get("source"))
        if source.startswith("skill-") or body.lstrip().startswith("<skill-context"):
            line.text("system", policy.SYSTEM, body, extra={"source": source or None})
        elif line.session_id != self.sid:
            # What a sub-agent is asked is written by the agent that started it.
            line.text("assistant", policy.ASSISTANT_TEXT, body, extra={"to_agent": True})
        else:
            line.text("user", policy.USER_TEXT, body)

    def assistant(self, line: LineEntries, info: dict[str, Any]) -> None:
        line.text("assistant", policy.ASSISTANT_TEXT, text(info.get("content")))
        for request in info.get("toolRequests") or ():
            if not isinstance(request, dict):
                continue
            call = _call(request)
            call_id = ident(request.get("toolCallId"))
            self.tools.add(call_id, call)
            line.call(call.name, request.get("arguments"), extra={"call_id": call_id})


def parse(data: bytes, start: int, first_line: int, *, path: str, header: FileHeader) -> Parsed:
    """Entries of the events of ``data[start:]``, under the lenient line policy."""
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

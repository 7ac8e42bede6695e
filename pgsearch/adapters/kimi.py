"""Kimi CLI and Kimi Code sessions: the ``wire.jsonl`` event log of each session.

Two generations write a session's events to ``wire.jsonl``:

- **Kimi CLI** (``~/.kimi/sessions/<work dir hash>/<session id>/wire.jsonl``): a
  ``{"type": "metadata", "protocol_version"}`` line, then records
  ``{"timestamp": <epoch seconds>, "message": {"type": <event>, "payload": {...}}}``.
  ``TurnBegin`` / ``SteerInput`` carry what the person typed (``user_input``),
  ``ContentPart`` the model's text (``think`` parts are not stored), ``ToolCall``
  a call (``function.name``, ``function.arguments``), ``ToolResult`` its result
  (``return_value.output``, ``return_value.is_error``), ``BtwBegin`` / ``BtwEnd``
  a side question and its answer, ``Notification`` a notice. A sub-agent's events
  reach the parent's log wrapped in ``SubagentEvent`` (``agent_id``,
  ``parent_tool_call_id``): they form the session ``<session>/<agent id>``, linked
  to it. The copy Kimi CLI also keeps in ``subagents/<agent id>/wire.jsonl`` is not
  stored again. (``context.jsonl`` beside it is the model's context, rewritten on
  compaction and undo, and is not a session of its own.)
- **Kimi Code** (``~/.kimi-code/sessions/wd_<dir>_<hash>/session_<id>/agents/<agent>/
  wire.jsonl``): a ``metadata`` line, then flat records ``{"type": "a.b", ...,
  "time": <epoch ms>}``. ``turn.prompt`` / ``turn.steer`` carry the prompt;
  ``context.append_loop_event`` the model's output (``content.part``,
  ``tool.call``, ``tool.result`` with ``result.isError``). The ``main`` agent is
  the session ``<id>``; another agent's log is the sub-agent session
  ``<id>/<agent>``, linked to it.

Mapping: prompts -> ``user_text`` (a sub-agent's prompt is its parent agent's,
``assistant``); model text -> ``assistant_text``; calls -> ``tool_input``; results ->
``tool_output``, or ``tool_error`` when marked as errors or reading as one;
notices -> ``system``. Status, step, approval, hook, usage and configuration events
hold no conversation text; event types this mapping does not know are skipped and
counted.
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
    ToolCall,
    ToolCalls,
    block_text,
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

NAME = "kimi"
VERSION = 1
#: Where Kimi CLI (``KIMI_SHARE_DIR`` moves ``~/.kimi``) and Kimi Code
#: (``KIMI_CODE_HOME`` moves ``~/.kimi-code``) keep sessions.
LOCATIONS = ("${KIMI_SHARE_DIR:-~/.kimi}/sessions", "${KIMI_CODE_HOME:-~/.kimi-code}/sessions")
LABEL = "Kimi CLI"
#: Kimi CLI event types without conversation text.
_CLI_BOOKKEEPING = frozenset(
    {
        "TurnEnd",
        "StepBegin",
        "StepInterrupted",
        "StepRetry",
        "CompactionBegin",
        "CompactionEnd",
        "StatusUpdate",
        "HookTriggered",
        "HookResolved",
        "MCPLoadingBegin",
        "MCPLoadingEnd",
        "ToolCallPart",
        "ApprovalRequest",
        "ApprovalResponse",
        "ToolCallRequest",
        "QuestionRequest",
        "QuestionResponse",
        "HookRequest",
        "HookResponse",
    }
)
_CLI_TEXT = frozenset(
    {
        "TurnBegin",
        "SteerInput",
        "ContentPart",
        "ToolCall",
        "ToolResult",
        "BtwBegin",
        "BtwEnd",
        "Notification",
        "PlanDisplay",
        "SubagentEvent",
    }
)
#: Kimi Code record types without conversation text.
_CODE_BOOKKEEPING = frozenset(
    {
        "metadata",
        "config.update",
        "tools.set_active_tools",
        "turn.cancel",
        "turn.end",
        "llm.request",
        "llm.tools_snapshot",
        "usage.record",
        "permission.set_mode",
        "permission.record_approval_result",
        "plan_mode.enter",
        "plan_mode.exit",
        "full_compaction.begin",
        "full_compaction.complete",
        "context.apply_compaction",
        "plugin.session_start",
        "runtime.set_binding",
        "token_counting.measured",
    }
)
_LOOP_BOOKKEEPING = frozenset({"step.begin", "step.end", "step.interrupted"})
_SHELL_TOOLS = frozenset({"Bash", "Shell", "bash", "shell"})
_CAMEL_RE = re.compile(r"^[A-Z][A-Za-z]+$")


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def looks_like(obj: dict[str, Any]) -> bool:
    """Whether a decoded line is a Kimi CLI or Kimi Code ``wire.jsonl`` record."""
    if "role" in obj or "data" in obj or "payload" in obj:
        return False
    kind = name_of(obj.get("type"))
    if kind == "metadata":
        return "protocol_version" in obj
    message = obj.get("message")
    if kind is None and isinstance(message, dict):
        mtype = name_of(message.get("type"))
        return (
            mtype is not None
            and _CAMEL_RE.match(mtype) is not None
            and isinstance(message.get("payload"), dict)
            and isinstance(obj.get("timestamp"), int | float)
        )
    return (
        kind is not None
        and "." in kind
        and isinstance(obj.get("time"), int)
        and (kind in _CODE_BOOKKEEPING or kind.split(".")[0] in ("turn", "context", "config"))
    )


def _layout(path: PurePath | None) -> tuple[str | None, str | None, bool]:
    """(session id, agent id, a copy of events the parent log holds) from the path."""
    if path is None:
        return None, None, False
    parts = path.parts
    if len(parts) >= 4 and parts[-3] == "agents":
        session = parts[-4].removeprefix("session_")
        agent = parts[-2]
        return session or None, None if agent == "main" else agent, False
    if len(parts) >= 4 and parts[-3] == "subagents":
        return parts[-4], parts[-2], True
    if len(parts) >= 2:
        return parts[-2], None, False
    return None, None, False


def header(data: bytes, *, default_session: str, path: PurePath | None = None) -> FileHeader:
    """Session id (its directory), working directory and start time."""
    session, agent, _ = _layout(path)
    sid = ident(session) or default_session
    parent = None
    if agent is not None:
        parent, sid = sid, session_key(sid, agent) or sid
    cwd = None
    started = None
    for obj in head_objects(data, 16):
        if obj.get("type") == "metadata" and started is None:
            started = quiet_time(obj.get("created_at"))
        if started is None and isinstance(obj.get("timestamp"), int | float):
            started = quiet_time(obj.get("timestamp"))
        if cwd is None and obj.get("type") == "config.update":
            cwd = text(obj.get("cwd") or obj.get("workDir")) or None
    return FileHeader(session_id=sid, cwd=cwd, started_at=started, parent_session_id=parent)


def _tool_call_in(line: Any, call_id: str) -> ToolCall | None:
    if not isinstance(line, dict):
        return None
    message = _obj(line.get("message"))
    payload = _obj(message.get("payload"))
    if message.get("type") == "SubagentEvent":
        event = _obj(payload.get("event"))
        message, payload = event, _obj(event.get("payload"))
    if message.get("type") == "ToolCall" and payload.get("id") == call_id:
        function = _obj(payload.get("function"))
        return _call(function.get("name"), function.get("arguments"))
    event = _obj(line.get("event"))
    if event.get("type") == "tool.call" and event.get("toolCallId") == call_id:
        return _call(event.get("name"), event.get("args"))
    return None


def _call(name: Any, arguments: Any) -> ToolCall:
    tool = ident(name) or "unknown"
    return ToolCall(tool, shell_command(arguments) if tool in _SHELL_TOOLS else None)


def _output(value: Any) -> str:
    return block_text(value) if not isinstance(value, dict) else block_text([value])


class _Parser:
    def __init__(self, data: bytes, start: int, *, path: str, header: FileHeader) -> None:
        self.path = path
        self.sid = header.session_id
        self.child = header.parent_session_id is not None
        self.tools = ToolCalls(data, start, _tool_call_in)
        self.parsed = Parsed()
        if header.parent_session_id is not None:
            self.parsed.parents[self.sid] = header.parent_session_id

    def handle(self, lineno: int, obj: dict[str, Any]) -> list[Entry] | None:
        if not looks_like(obj):
            return None
        self.parsed.recognised += 1
        message = obj.get("message")
        if "type" not in obj and isinstance(message, dict):
            created = timestamp(obj.get("timestamp"), path=self.path, line=lineno)
            line = LineEntries(self.sid, lineno - 1, created, extra={"line": lineno})
            self.cli_event(line, message, self.child)
            return line.out
        kind = name_of(obj.get("type"))
        created = timestamp(obj.get("time"), path=self.path, line=lineno)
        line = LineEntries(self.sid, lineno - 1, created, extra={"line": lineno})
        self.code_record(line, kind or "", obj)
        return line.out

    def prompt(self, line: LineEntries, value: Any, to_agent: bool, **fields: Any) -> None:
        body = block_text(value)
        if to_agent:
            # A sub-agent's prompt is written by the agent that started it.
            line.text("assistant", policy.ASSISTANT_TEXT, body, extra={"to_agent": True}, **fields)
        else:
            line.text("user", policy.USER_TEXT, body, **fields)

    # --- Kimi CLI ----------------------------------------------------------------

    def cli_event(self, line: LineEntries, message: dict[str, Any], to_agent: bool) -> None:
        mtype = name_of(message.get("type"))
        payload = _obj(message.get("payload"))
        if mtype in ("TurnBegin", "SteerInput"):
            self.prompt(line, payload.get("user_input"), to_agent)
        elif mtype == "ContentPart":
            if payload.get("type") == "text":
                line.text("assistant", policy.ASSISTANT_TEXT, text(payload.get("text")))
        elif mtype == "ToolCall":
            function = _obj(payload.get("function"))
            call = _call(function.get("name"), function.get("arguments"))
            call_id = ident(payload.get("id"))
            self.tools.add(call_id, call)
            line.call(call.name, function.get("arguments"), extra={"call_id": call_id})
        elif mtype == "ToolResult":
            call_id = ident(payload.get("tool_call_id"))
            value = _obj(payload.get("return_value"))
            answered = self.tools.get(call_id)
            output = _output(value.get("output")) or text(value.get("message"))
            line.result(
                output,
                tool_name=answered.name if answered else None,
                marked=value.get("is_error") is True,
                command=answered.command if answered else None,
                extra={"call_id": call_id},
            )
        elif mtype == "BtwBegin":
            self.prompt(line, payload.get("question"), to_agent)
        elif mtype == "BtwEnd":
            line.text("assistant", policy.ASSISTANT_TEXT, text(payload.get("response")))
            line.text("system", policy.SYSTEM, text(payload.get("error")))
        elif mtype == "PlanDisplay":
            line.text("assistant", policy.ASSISTANT_TEXT, text(payload.get("content")))
        elif mtype == "Notification":
            title, body = text(payload.get("title")), text(payload.get("body"))
            line.text("system", policy.SYSTEM, "\n".join(p for p in (title, body) if p))
        elif mtype == "SubagentEvent":
            self.subagent(line, payload)
        elif mtype not in _CLI_BOOKKEEPING:
            self.parsed.skip_unknown(mtype)

    def subagent(self, line: LineEntries, payload: dict[str, Any]) -> None:
        agent = ident(payload.get("agent_id")) or ident(payload.get("parent_tool_call_id"))
        sub = session_key(self.sid, agent) if agent else None
        if sub is None or sub == self.sid:
            return
        self.parsed.parents[sub] = self.sid
        inner = LineEntries(sub, line.seq, line.created, extra={**line.extra, "agent": agent})
        self.cli_event(inner, _obj(payload.get("event")), True)
        line.out.extend(inner.out)

    # --- Kimi Code ---------------------------------------------------------------

    def code_record(self, line: LineEntries, kind: str, obj: dict[str, Any]) -> None:
        if kind in ("turn.prompt", "turn.steer"):
            origin = _obj(obj.get("origin")).get("kind")
            if origin in (None, "user", "agent"):
                self.prompt(line, obj.get("input"), self.child or origin == "agent")
            else:
                line.text("system", policy.SYSTEM, block_text(obj.get("input")))
        elif kind == "context.append_loop_event":
            self.loop_event(line, _obj(obj.get("event")))
        elif kind == "context.append_message":
            message = _obj(obj.get("message"))
            # The prompt is in the turn.prompt before it; other roles are kept.
            if message.get("role") == "assistant":
                line.text("assistant", policy.ASSISTANT_TEXT, block_text(message.get("content")))
        elif kind not in _CODE_BOOKKEEPING:
            self.parsed.skip_unknown(kind)

    def loop_event(self, line: LineEntries, event: dict[str, Any]) -> None:
        etype = name_of(event.get("type"))
        if etype == "content.part":
            part = _obj(event.get("part"))
            if part.get("type") == "text":
                line.text("assistant", policy.ASSISTANT_TEXT, text(part.get("text")))
        elif etype == "tool.call":
            call = _call(event.get("name"), event.get("args"))
            call_id = ident(event.get("toolCallId"))
            self.tools.add(call_id, call)
            line.call(call.name, event.get("args"), extra={"call_id": call_id})
        elif etype == "tool.result":
            call_id = ident(event.get("toolCallId"))
            result = _obj(event.get("result"))
            answered = self.tools.get(call_id)
            line.result(
                _output(result.get("output")) or text(result.get("message")),
                tool_name=answered.name if answered else None,
                marked=result.get("isError") is True,
                command=answered.command if answered else None,
                extra={"call_id": call_id},
            )
        elif etype not in _LOOP_BOOKKEEPING:
            self.parsed.skip_unknown(f"context.append_loop_event/{etype}")


def parse(data: bytes, start: int, first_line: int, *, path: str, header: FileHeader) -> Parsed:
    """Entries of the records of ``data[start:]``, under the lenient line policy."""
    if _layout(PurePath(path))[2]:
        # Kimi CLI's copy of a sub-agent's events; the parent's log holds them.
        return Parsed(
            consumed=len(data) if data.endswith(b"\n") else data.rfind(b"\n") + 1,
            lines=data.count(b"\n"),
            recognised=1,
        )
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

"""Claude Code session logs: ``~/.claude/projects/<project>/<session-id>.jsonl``.

One JSON event per line. ``user`` and ``assistant`` events carry an API message
whose ``content`` is a string or a list of blocks. What the person typed is
``user_text``; everything else a ``user`` event can carry is told apart:

- user ``text`` (images as ``[image]``) -> ``user_text``; a slash command
  (``<command-name>/model</command-name><command-args>opus</command-args>``) is the
  user's text ``/model opus``, a ``!`` shell command (``<bash-input>``) the user's
  text ``! git status``, and a prompt typed while a tool ran (a ``queued_command``
  attachment) is user text too;
- the output of those commands (``<local-command-stdout>``, ``<bash-stdout>``,
  ``<bash-stderr>``) -> ``tool_output``;
- text the harness injected (``isMeta`` events, ``<system-reminder>``, IDE context
  such as ``<ide_opened_file>`` and ``<ide_selection>``, task notifications,
  interruption markers) -> ``system``; a compaction summary (``isCompactSummary``)
  -> ``summary``;
- user ``tool_result`` -> ``tool_output``, or ``tool_error`` when ``is_error`` is
  set or the text reads as an error (`policy.tool_result_kind`: a ``grep`` or
  ``rg`` that exited 1 because it found nothing is not an error), named after the
  ``tool_use`` it answers;
- assistant ``text`` -> ``assistant_text``; ``tool_use`` -> ``tool_input`` with the
  tool name (its ``input`` is stored as arguments, indexed only if the policy says
  so); ``thinking`` blocks are not stored;
- ``system`` events -> ``system``; other event types are bookkeeping and skipped.

**Sessions.** A file is one session named like the file (Claude Code names each
transcript by its session id). A sub-agent (sidechain) conversation is a session of
its own, ``<parent>/agent-<agentId>`` (or ``<parent>/sidechain-<first uuid>`` for
the inline sidechains of older versions), linked to its parent, whether its lines
sit in the parent's file (``isSidechain``) or in a file of its own
(``agent-<id>.jsonl``, ``<session>/subagents/agent-<id>.jsonl``). Text a parent
agent sends its sub-agent is the parent's (``assistant``), never the person's.
Claude Code's internal compaction helper (``agent-acompact-*``) holds a copy of the
parent conversation and is not stored.

**Titles.** ``custom-title`` lines (``/rename``) title their session; ``ai-title``
lines give a generated title; ``summary`` lines name the session they title through
``leafUuid``, the uuid of one of its messages, which may be in another file
(`LeafTitle`, resolved by the ingestor).
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any

from pgsearch import policy
from pgsearch.adapters.common import (
    Adapter,
    FileHeader,
    LeafTitle,
    Parsed,
    SessionTitle,
    ToolCall,
    ToolCalls,
    arguments_json,
    exit_code_in,
    head_objects,
    ident,
    line_where,
    name_of,
    parent_dir_name,
    quiet_time,
    read_lines,
    session_key,
    shell_command,
    text,
    timestamp,
)
from pgsearch.messages import Entry

NAME = "claude-code"
#: Bumped when the mapping changes: files read by an older mapping are read again.
VERSION = 2
EVENT_TYPES = frozenset({"user", "assistant", "system"})
TITLE_TYPES = frozenset({"summary", "custom-title", "ai-title", "agent-name"})
#: Event types Claude Code writes that hold no conversation text.
BOOKKEEPING_TYPES = frozenset(
    {
        "file-history-snapshot",
        "queue-operation",
        "progress",
        "attachment",
        "last-prompt",
        "permission-mode",
        "agent-setting",
        "pr-link",
        "mode",
    }
)
#: User text the harness wrote rather than the person (kind `system`).
_INJECTED_PREFIXES = (
    "<system-reminder>",
    "<user-prompt-submit-hook>",
    "<local-command-caveat>",
    "<task-notification",
    "<teammate-message",
    "<cross-session-message",
    "Caveat: The messages below were generated",
    "[Request interrupted by user",
)
_COMMAND_PREFIXES = ("<command-name>", "<command-message>", "<command-args>")
_OUTPUT_PREFIXES = ("<local-command-stdout>", "<local-command-stderr>")
_BASH_OUTPUT_PREFIXES = ("<bash-stdout>", "<bash-stderr>")
#: Context blocks an IDE or the harness adds around what the person typed.
_CONTEXT_BLOCK_RE = re.compile(
    r"<(ide_[a-z_]+|system-reminder)\b[^>]*>.*?(?:</\1>|\Z)", re.DOTALL | re.IGNORECASE
)
#: Shell tools: their input carries the command line.
_SHELL_TOOLS = frozenset({"Bash", "bash", "BashOutput"})
#: Sidechain parents followed back through earlier passes before giving up.
_MAX_CHAIN = 2000


def _tag(body: str, name: str) -> str | None:
    match = re.search(rf"<{name}>(.*?)(?:</{name}>|\Z)", body, re.DOTALL)
    return match.group(1).strip() if match else None


def looks_like(obj: dict[str, Any]) -> bool:
    """Whether a decoded line is a Claude Code event."""
    kind = name_of(obj.get("type"))
    if "role" in obj:
        return False
    if kind == "summary" and "leafUuid" in obj:
        return True
    if kind in BOOKKEEPING_TYPES or kind in TITLE_TYPES:
        return "sessionId" in obj or "uuid" in obj or "leafUuid" in obj or kind != "attachment"
    return kind in EVENT_TYPES and (
        "sessionId" in obj or "uuid" in obj or isinstance(obj.get("message"), dict)
    )


def header(data: bytes, *, default_session: str, path: PurePath | None = None) -> FileHeader:
    """Session id (the file's name), working directory, start time; for a sub-agent's
    own file, ``<parent>/agent-<id>`` and the parent."""
    cwd = None
    started = None
    first: dict[str, Any] | None = None
    for obj in head_objects(data):
        if cwd is None and isinstance(obj.get("cwd"), str) and obj["cwd"]:
            cwd = text(obj["cwd"])
        if started is None and isinstance(obj.get("timestamp"), str):
            started = quiet_time(obj["timestamp"])
        if first is None and name_of(obj.get("type")) in EVENT_TYPES:
            first = obj
        if cwd is not None and started is not None and first is not None:
            break
    sid, parent = default_session, None
    if first is not None and first.get("isSidechain") is True:
        # A sub-agent's own file: every line is a sidechain of the parent session.
        in_subagents = parent_dir_name(path, 1) == "subagents"
        parent = ident(first.get("sessionId")) or (
            parent_dir_name(path, 2) if in_subagents else None
        )
        agent = ident(first.get("agentId"))
        name = f"agent-{agent}" if agent else default_session
        if parent is not None and parent != name:
            sid = session_key(parent, name) or default_session
        else:
            parent = None
    return FileHeader(session_id=sid, cwd=cwd, started_at=started, parent_session_id=parent)


def _internal(header: FileHeader) -> bool:
    """Claude Code's compaction helper: a copy of the parent conversation."""
    return header.parent_session_id is not None and "/agent-acompact" in header.session_id


def _tool_call_in(line: Any, call_id: str) -> ToolCall | None:
    message = line.get("message") if isinstance(line, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("id") == call_id:
            name = ident(block.get("name")) or "unknown"
            command = shell_command(block.get("input")) if name in _SHELL_TOOLS else None
            return ToolCall(name, command)
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
            elif block.get("type") == "document":
                parts.append("[document]")
    return "\n".join(p for p in parts if p)


class _Line:
    """Builds the entries of one event line: ids, time and extra data shared."""

    def __init__(self, sid: str, lineno: int, obj: dict[str, Any], created: Any, file_sid: str):
        self.out: list[Entry] = []
        self.sid = sid
        self.lineno = lineno
        self.obj = obj
        self.created = created
        self.uuid = ident(obj.get("uuid"))
        self.extra: dict[str, Any] = {"line": lineno}
        if self.uuid:
            self.extra["uuid"] = self.uuid
        source_sid = ident(obj.get("sessionId"))
        if source_sid and source_sid not in (sid, file_sid):
            self.extra["source_session_id"] = source_sid
        self.sidechain = obj.get("isSidechain") is True
        if self.sidechain:
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
        summary: str | None = None,
        call_id: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        entry_id = None
        if self.uuid:
            entry_id = self.uuid if self.blocks == 0 else f"{self.uuid}#{self.blocks}"
        self.blocks += 1
        data = dict(self.extra)
        if call_id:
            data["tool_use_id"] = call_id
        if extra:
            data.update(extra)
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
                summary=summary,
                extra=data,
            )
        )


class _Parser:
    """One pass over the new lines of a file."""

    def __init__(self, data: bytes, start: int, *, path: str, header: FileHeader) -> None:
        self.data = data
        self.start = start
        self.path = path
        self.header = header
        self.tools = ToolCalls(data, start, _tool_call_in)
        self.parsed = Parsed()
        #: uuid -> session of the lines seen (None: the file's own session).
        self.session_of: dict[str, str | None] = {}
        self.last_command: str | None = None

    # --- sessions -------------------------------------------------------------------

    def session_for(self, obj: dict[str, Any], lineno: int) -> str:
        """The session a line belongs to: the file's, or one of its sidechains."""
        file_sid = self.header.session_id
        uuid = ident(obj.get("uuid"))
        if self.header.parent_session_id is not None or obj.get("isSidechain") is not True:
            if uuid:
                self.session_of[uuid] = None
            return file_sid
        agent = ident(obj.get("agentId"))
        if agent:
            sid = session_key(file_sid, f"agent-{agent}") or file_sid
        else:
            sid = self._inline_sidechain(obj, lineno)
        if uuid:
            self.session_of[uuid] = sid
        if sid != file_sid:
            self.parsed.parents[sid] = file_sid
        return sid

    def _inline_sidechain(self, obj: dict[str, Any], lineno: int) -> str:
        """``<file session>/sidechain-<root uuid>``, the root found through parentUuid
        (in this pass, else in the lines read before)."""
        root = ident(obj.get("uuid")) or f"line{lineno}"
        current = obj
        for _ in range(_MAX_CHAIN):
            parent = ident(current.get("parentUuid"))
            if parent is None:
                break
            if parent in self.session_of:
                known = self.session_of[parent]
                return known if known is not None else self._sidechain_key(root)
            found = line_where(self.data, self.start, "uuid", parent) if self.start else None
            if found is None:
                break
            if found.get("isSidechain") is not True:
                self.session_of[parent] = None
                break
            root = parent
            current = found
        return self._sidechain_key(root)

    def _sidechain_key(self, root: str) -> str:
        return session_key(self.header.session_id, f"sidechain-{root}") or self.header.session_id

    # --- lines ----------------------------------------------------------------------

    def handle(self, lineno: int, obj: dict[str, Any]) -> list[Entry] | None:
        kind = name_of(obj.get("type"))
        if looks_like(obj):
            self.parsed.recognised += 1
        if kind in TITLE_TYPES:
            self.title(lineno, obj)
            return None
        if _internal(self.header):
            return None
        if kind == "attachment":
            return self.attachment(lineno, obj)
        if kind not in EVENT_TYPES:
            if kind not in BOOKKEEPING_TYPES and ("sessionId" in obj or "uuid" in obj):
                self.parsed.skip_unknown(kind)  # an event type of a newer Claude Code
            return None
        created = timestamp(obj.get("timestamp"), path=self.path, line=lineno)
        sid = self.session_for(obj, lineno)
        line = _Line(sid, lineno, obj, created, self.header.session_id)
        if kind == "system":
            content = _block_text(obj.get("content"))
            if content:
                line.add("system", policy.SYSTEM, content)
            return line.out
        message = obj.get("message")
        if not isinstance(message, dict):
            return None
        value = message.get("content")
        blocks: list[Any] = (
            [value] if isinstance(value, str) else value if isinstance(value, list) else []
        )
        if kind == "assistant":
            self.assistant(line, blocks)
        else:
            self.user(line, blocks)
        return line.out

    def title(self, lineno: int, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        sid = self.header.session_id
        if kind == "summary":
            title = text(obj.get("summary")).strip()
            leaf = ident(obj.get("leafUuid"))
            if title and leaf:
                self.parsed.leaf_titles.append(LeafTitle(leaf_uuid=leaf, title=title, line=lineno))
        elif kind == "custom-title":
            title = text(obj.get("customTitle") or obj.get("title")).strip()
            if title:
                self.parsed.titles[sid] = SessionTitle(title=title)
        elif kind == "ai-title":
            title = text(obj.get("aiTitle") or obj.get("title")).strip()
            current = self.parsed.titles.get(sid)
            if title and (current is None or current.auto):
                self.parsed.titles[sid] = SessionTitle(title=title, auto=True)

    def attachment(self, lineno: int, obj: dict[str, Any]) -> list[Entry] | None:
        attachment = obj.get("attachment")
        if not isinstance(attachment, dict) or attachment.get("type") != "queued_command":
            return None
        prompt = _block_text(attachment.get("prompt")).strip()
        if not prompt:
            return None
        created = timestamp(obj.get("timestamp"), path=self.path, line=lineno)
        line = _Line(self.session_for(obj, lineno), lineno, obj, created, self.header.session_id)
        origin = attachment.get("origin")
        typed = (
            attachment.get("commandMode") in (None, "prompt")
            and attachment.get("isMeta") is not True
            and obj.get("isMeta") is not True
            and (not isinstance(origin, dict) or origin.get("kind") in (None, "human"))
        )
        extra = {"queued": True}
        if typed and not line.sidechain:
            self.user_text(line, prompt, extra=extra)
        else:
            line.add("system", policy.SYSTEM, prompt, extra=extra)
        return line.out

    def assistant(self, line: _Line, blocks: list[Any]) -> None:
        api_error = line.obj.get("isApiErrorMessage") is True

        def flush() -> None:
            body = "\n".join(p for p in line.pending if p)
            line.pending.clear()
            if body.strip():
                if api_error:
                    line.add("system", policy.SYSTEM, body)
                else:
                    line.add("assistant", policy.ASSISTANT_TEXT, body)

        for block in blocks:
            btype = block.get("type") if isinstance(block, dict) else None
            if isinstance(block, str):
                line.pending.append(text(block))
            elif btype == "text":
                line.pending.append(text(block.get("text")))
            elif btype in ("tool_use", "server_tool_use"):
                flush()
                name = ident(block.get("name")) or "unknown"
                call_id = ident(block.get("id"))
                command = shell_command(block.get("input")) if name in _SHELL_TOOLS else None
                self.tools.add(call_id, ToolCall(name, command))
                line.add(
                    "assistant",
                    policy.TOOL_INPUT,
                    "",
                    tool_name=name,
                    arguments=f"{name}({arguments_json(block.get('input'))})",
                    call_id=call_id,
                )
        flush()

    def user(self, line: _Line, blocks: list[Any]) -> None:
        obj = line.obj
        for block in blocks:
            btype = block.get("type") if isinstance(block, dict) else None
            if isinstance(block, str):
                line.pending.append(text(block))
            elif btype == "text":
                line.pending.append(text(block.get("text")))
            elif btype == "image":
                line.pending.append("[image]")
            elif btype == "document":
                line.pending.append("[document]")
            elif btype == "tool_result":
                self.flush_user(line)
                call_id = ident(block.get("tool_use_id"))
                output = _block_text(block.get("content"))
                call = self.tools.get(call_id)
                kind = policy.tool_result_kind(
                    output,
                    marked=block.get("is_error") is True,
                    command=call.command if call else None,
                    exit_code=exit_code_in(output),
                )
                line.add(
                    "tool",
                    kind,
                    output,
                    tool_name=call.name if call else None,
                    call_id=call_id,
                )
        if obj.get("isCompactSummary") is True:
            body = "\n".join(p for p in line.pending if p).strip()
            line.pending.clear()
            if body:
                line.add("system", policy.SUMMARY, body, summary=body)
            return
        self.flush_user(line)

    def flush_user(self, line: _Line) -> None:
        body = "\n".join(p for p in line.pending if p)
        line.pending.clear()
        if not body.strip():
            return
        if line.obj.get("isMeta") is True:
            line.add("system", policy.SYSTEM, body)
        else:
            self.user_text(line, body)

    def user_text(self, line: _Line, body: str, *, extra: dict[str, Any] | None = None) -> None:
        """Text in a user event: what the person typed, a command and its output, or
        context the harness added."""
        head = body.lstrip()
        if head.startswith(_COMMAND_PREFIXES):
            name = _tag(body, "command-name") or ""
            args = _tag(body, "command-args") or ""
            self.last_command = name or None
            typed = f"{name} {args}".strip()
            if typed:
                self.typed(line, typed, {**(extra or {}), "command": name})
            return
        if head.startswith(_OUTPUT_PREFIXES):
            out = _tag(body, "local-command-stdout") or ""
            err = _tag(body, "local-command-stderr") or ""
            output = "\n".join(p for p in (out, err) if p)
            if output:
                line.add(
                    "tool",
                    policy.tool_result_kind(output, marked=bool(err) and not out),
                    output,
                    tool_name=self.last_command,
                    extra=extra,
                )
            return
        if head.startswith("<bash-input>"):
            command = _tag(body, "bash-input") or ""
            self.last_command = "!"
            if command:
                self.typed(line, f"! {command}", {**(extra or {}), "command": "!"})
            return
        if head.startswith(_BASH_OUTPUT_PREFIXES):
            out = _tag(body, "bash-stdout") or ""
            err = _tag(body, "bash-stderr") or ""
            output = "\n".join(p for p in (out, err) if p)
            if output:
                line.add(
                    "tool",
                    policy.tool_result_kind(output, marked=bool(err) and not out),
                    output,
                    extra=extra,
                )
            return
        if head.startswith(_INJECTED_PREFIXES):
            line.add("system", policy.SYSTEM, body, extra=extra)
            return
        # IDE context and reminders around the typed text: context, not the person's words.
        pos = 0
        for match in _CONTEXT_BLOCK_RE.finditer(body):
            self.typed(line, body[pos : match.start()], extra)
            line.add("system", policy.SYSTEM, match.group(0).strip(), extra=extra)
            pos = match.end()
        self.typed(line, body[pos:], extra)

    def typed(self, line: _Line, body: str, extra: dict[str, Any] | None) -> None:
        body = body.strip()
        if not body:
            return
        if line.sidechain or self.header.parent_session_id is not None:
            # A sub-agent's prompt is written by the agent that started it.
            to_agent = {**(extra or {}), "to_agent": True}
            line.add("assistant", policy.ASSISTANT_TEXT, body, extra=to_agent)
        else:
            line.add("user", policy.USER_TEXT, body, extra=extra)


def parse(data: bytes, start: int, first_line: int, *, path: str, header: FileHeader) -> Parsed:
    """Entries of the lines of ``data[start:]`` (one per content block), titles and
    sub-agent links, under the lenient line policy."""
    parser = _Parser(data, start, path=path, header=header)
    if header.parent_session_id is not None and not _internal(header):
        parser.parsed.parents[header.session_id] = header.parent_session_id
    return read_lines(
        data, start, first_line, path=path, parsed=parser.parsed, handle=parser.handle
    )


ADAPTER = Adapter(
    name=NAME,
    version=VERSION,
    header=header,
    parse=parse,
    looks_like_line=looks_like,
    leaf_titles=True,
    label="Claude Code",
    locations=("${CLAUDE_CONFIG_DIR:-~/.claude}/projects",),
)

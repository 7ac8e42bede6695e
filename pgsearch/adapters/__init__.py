"""Log formats pgsearch ingests, and which one a file is in.

``openai`` is pgsearch's own JSON Lines format (`pgsearch.messages`), one message
per line with ``seq`` = line number, read under the strict line policy. The
agent-log formats (``claude-code``, ``codex``, ``gemini``, ``opencode``) can turn
one line into several entries (one per content block) or none (bookkeeping
lines), so their entries get consecutive ``seq`` numbers per session in file
order instead, a file that grows continues where the session stopped, and their
lines are read under the lenient line policy (`pgsearch.adapters.common`).

Line formats are read on from where the last pass stopped; document formats (a
Gemini CLI session document or saved chat, an OpenCode session) are read whole
whenever they change.

Every adapter is pure: it gets the file's bytes and the offset where the unread
lines start, and returns what it read (`Parsed`); the ingestor owns transactions
and offsets. A file in none of these formats is refused with the list of formats
pgsearch reads and, when it can tell, the program the file came from.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, Protocol

from pgsearch.adapters import (
    claude_code,
    codex,
    copilot_cli,
    droid,
    gemini,
    kimi,
    openai,
    opencode,
    pi,
    qwen,
)
from pgsearch.adapters.common import FileHeader, LeafTitle, Parsed, SessionTitle, head_objects
from pgsearch.errors import ConfigError, IngestError
from pgsearch.locations import existing

AUTO = "auto"
OPENAI = openai.NAME
CLAUDE_CODE = claude_code.NAME
CODEX = codex.NAME
GEMINI = gemini.NAME
OPENCODE = opencode.NAME
COPILOT_CLI = copilot_cli.NAME
PI = pi.NAME
OPENCLAW = pi.OPENCLAW
KIMI = kimi.NAME
DROID = droid.NAME
QWEN = qwen.NAME
FORMATS = (
    OPENAI,
    CLAUDE_CODE,
    CODEX,
    GEMINI,
    OPENCODE,
    COPILOT_CLI,
    PI,
    OPENCLAW,
    KIMI,
    DROID,
    QWEN,
)
#: Choices of ``pgsearch ingest --format``.
FORMAT_CHOICES = (AUTO, *FORMATS)
#: Lines looked at to recognise a file's format.
DETECT_LINES = 20
#: The largest file whose whole text is decoded to recognise a JSON document.
MAX_DOCUMENT_BYTES = 256 * 1024 * 1024


class HeaderFn(Protocol):
    def __call__(
        self, data: bytes, *, default_session: str, path: PurePath | None = ...
    ) -> FileHeader: ...


class ParseFn(Protocol):
    def __call__(
        self, data: bytes, start: int, first_line: int, *, path: str, header: FileHeader
    ) -> Parsed: ...


@dataclass(frozen=True, kw_only=True)
class Adapter:
    name: str
    #: The mapping's version: a file recorded with another is read again whole.
    version: int
    header: HeaderFn
    parse: ParseFn
    #: ``seq`` is the line number (pgsearch's format) rather than assigned per session.
    seq_from_line: bool = False
    #: Whether a file is a document, read whole on every change (else lines, read on).
    is_document: Callable[[bytes], bool] = lambda data: False
    #: Whether the format names sessions through another session's messages
    #: (`LeafTitle`), which the ingestor resolves.
    leaf_titles: bool = False
    #: The agent's name as people know it (``Claude Code``); empty for pgsearch's own.
    label: str = ""
    #: Where the agent keeps its session logs by default, read by ``pgsearch ingest``
    #: with no path: ``~/...`` paths, ``${VAR:-default}`` for the directory override
    #: the agent honours, globs allowed (`pgsearch.locations`).
    locations: tuple[str, ...] = ()

    @property
    def parser(self) -> str:
        """What `ingested_files.parser` records: ``name/version``."""
        return f"{self.name}/{self.version}"


ADAPTERS = {
    OPENAI: Adapter(
        name=OPENAI,
        version=openai.VERSION,
        header=openai.header,
        parse=openai.parse,
        seq_from_line=True,
    ),
    CLAUDE_CODE: Adapter(
        name=CLAUDE_CODE,
        version=claude_code.VERSION,
        header=claude_code.header,
        parse=claude_code.parse,
        leaf_titles=True,
        label="Claude Code",
        locations=("${CLAUDE_CONFIG_DIR:-~/.claude}/projects",),
    ),
    CODEX: Adapter(
        name=CODEX,
        version=codex.VERSION,
        header=codex.header,
        parse=codex.parse,
        label="Codex CLI",
        locations=(
            "${CODEX_HOME:-~/.codex}/sessions",
            "${CODEX_HOME:-~/.codex}/archived_sessions",
        ),
    ),
    GEMINI: Adapter(
        name=GEMINI,
        version=gemini.VERSION,
        header=gemini.header,
        parse=gemini.parse,
        is_document=gemini.is_document,
        label="Gemini CLI",
        locations=("${GEMINI_CLI_HOME:-~}/.gemini/tmp",),
    ),
    OPENCODE: Adapter(
        name=OPENCODE,
        version=opencode.VERSION,
        header=opencode.header,
        parse=opencode.parse,
        is_document=lambda data: True,
        label="OpenCode",
        locations=("${XDG_DATA_HOME:-~/.local/share}/opencode/storage",),
    ),
    COPILOT_CLI: Adapter(
        name=COPILOT_CLI,
        version=copilot_cli.VERSION,
        header=copilot_cli.header,
        parse=copilot_cli.parse,
        label=copilot_cli.LABEL,
        locations=copilot_cli.LOCATIONS,
    ),
    PI: Adapter(
        name=PI,
        version=pi.VERSION,
        header=pi.header,
        parse=pi.parse,
        label=pi.LABEL,
        locations=pi.LOCATIONS,
    ),
    OPENCLAW: Adapter(
        name=OPENCLAW,
        version=pi.VERSION,
        header=pi.header,
        parse=pi.parse,
        label=pi.OPENCLAW_LABEL,
        locations=pi.OPENCLAW_LOCATIONS,
    ),
    KIMI: Adapter(
        name=KIMI,
        version=kimi.VERSION,
        header=kimi.header,
        parse=kimi.parse,
        label=kimi.LABEL,
        locations=kimi.LOCATIONS,
    ),
    DROID: Adapter(
        name=DROID,
        version=droid.VERSION,
        header=droid.header,
        parse=droid.parse,
        label=droid.LABEL,
        locations=droid.LOCATIONS,
    ),
    QWEN: Adapter(
        name=QWEN,
        version=qwen.VERSION,
        header=qwen.header,
        parse=qwen.parse,
        label=qwen.LABEL,
        locations=qwen.LOCATIONS,
    ),
}


@dataclass(frozen=True, kw_only=True)
class LogLocation:
    """One default log location of an agent, and what exists there on this machine."""

    format: str
    label: str
    #: The location as declared (`Adapter.locations`).
    pattern: str
    #: The directories or files it names that exist (none: the agent is not used here).
    paths: tuple[Path, ...]


def default_locations(
    environ: Mapping[str, str] | None = None, home: Path | None = None
) -> list[LogLocation]:
    """Every adapter's default log locations, with what exists of each, in registry order."""
    return [
        LogLocation(
            format=adapter.name,
            label=adapter.label or adapter.name,
            pattern=pattern,
            paths=tuple(existing(pattern, environ, home)),
        )
        for adapter in ADAPTERS.values()
        for pattern in adapter.locations
    ]


# --- files from programs pgsearch does not read: said so, by name ------------------


def _is(obj: dict[str, Any], *keys: str) -> bool:
    return all(k in obj for k in keys)


#: (what the file is, test on one decoded line).
_RESEMBLES: tuple[tuple[str, Callable[[dict[str, Any]], bool]], ...] = (
    (
        "a Kimi CLI context file; its session is the wire.jsonl beside it",
        lambda o: isinstance(o.get("role"), str) and o["role"].startswith("_"),
    ),
    (
        "Claude Code's prompt history (~/.claude/history.jsonl), not a session; "
        "sessions are under ~/.claude/projects",
        lambda o: _is(o, "display", "timestamp") and "role" not in o,
    ),
    (
        "Codex CLI's prompt history (~/.codex/history.jsonl), not a session; "
        "sessions are under ~/.codex/sessions",
        lambda o: _is(o, "session_id", "ts", "text"),
    ),
    (
        "one OpenCode message or part file; ingest the session file "
        "(storage/session/<project>/<id>.json) or the storage directory",
        lambda o: _is(o, "sessionID") and ("messageID" in o or "role" in o),
    ),
    (
        "Gemini CLI's prompt log (logs.json), not a session; sessions are in chats/",
        lambda o: _is(o, "sessionId", "messageId", "type", "message"),
    ),
)


def _resembles(objects: list[Any]) -> str | None:
    for obj in objects:
        if isinstance(obj, dict):
            for what, test in _RESEMBLES:
                if test(obj):
                    return what
    return None


def _known() -> str:
    *first, last = FORMATS[1:]
    return f"pgsearch reads openai (its own JSON Lines), {', '.join(first)} and {last}"


def _document(data: bytes) -> Any:
    if len(data) > MAX_DOCUMENT_BYTES or data.lstrip()[:1] not in (b"{", b"["):
        return None
    try:
        return json.loads(data.decode("utf-8-sig"))
    except (ValueError, RecursionError):
        return None


#: Line formats in the order their tests run on a decoded line: a more specific
#: test before a more general one that would also accept the line.
_LINE_TESTS: tuple[tuple[str, Callable[[dict[str, Any]], bool]], ...] = (
    (CODEX, codex.looks_like),
    (COPILOT_CLI, copilot_cli.looks_like),
    (DROID, droid.looks_like),
    (PI, pi.looks_like),
    (KIMI, kimi.looks_like),
    (QWEN, qwen.looks_like),
    (CLAUDE_CODE, claude_code.looks_like),
    (GEMINI, gemini.looks_like_line),
    (OPENCODE, opencode.looks_like_document),
)


def _line_format(obj: dict[str, Any]) -> str | None:
    for name, test in _LINE_TESTS:
        if test(obj):
            return name
    if "role" in obj and not _resembles([obj]):
        return OPENAI
    return None


def detect_format(data: bytes, *, path: str | None = None) -> str:
    """The format of a file from its first lines (or, for a JSON document, all of it).

    ``openai`` when nothing else fits and no line names another program; a file
    that does resemble another program's files is an `IngestError` saying which
    formats pgsearch reads and what the file looks like.
    """
    heads = list(head_objects(data, DETECT_LINES))
    for obj in heads:
        fmt = _line_format(obj)
        if fmt == PI and pi.is_openclaw(path):
            return OPENCLAW  # OpenClaw writes Pi's format; its directory tells them apart
        if fmt is not None:
            return fmt
    if not heads:
        doc = _document(data)
        if doc is not None:
            if gemini.looks_like_document(doc):
                return GEMINI
            if opencode.looks_like_document(doc):
                return OPENCODE
            heads = [doc] if isinstance(doc, dict) else list(doc[:DETECT_LINES])
    what = _resembles(heads)
    if what is not None:
        raise IngestError(
            f"not a format pgsearch reads: this looks like {what}; {_known()}", path=path
        )
    if not heads and data.lstrip().startswith((b"#", b">")):
        raise IngestError(
            f"not a format pgsearch reads (Markdown or text, e.g. an Aider chat history); "
            f"{_known()}",
            path=path,
        )
    return OPENAI


def resembles(data: bytes) -> str:
    """What a file looks like, for an error: a pgsearch format or another program's."""
    try:
        fmt = detect_format(data)
    except IngestError as exc:
        return exc.reason.split("this looks like ", 1)[-1].split(";", 1)[0]
    heads = list(head_objects(data, DETECT_LINES))
    if fmt == OPENAI and not any("role" in h for h in heads):
        if not heads and not data.strip():
            return "an empty file"
        return "none of them"
    return fmt


def resolve_format(fmt: str, data: bytes, *, path: str | None = None) -> str:
    """`fmt`, or the detected format when it is ``auto``."""
    if fmt == AUTO:
        return detect_format(data, path=path)
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; use one of {', '.join(FORMAT_CHOICES)}")
    return fmt


def known_formats() -> str:
    """The sentence naming every format pgsearch reads."""
    return _known()


__all__ = [
    "ADAPTERS",
    "AUTO",
    "CLAUDE_CODE",
    "CODEX",
    "COPILOT_CLI",
    "DROID",
    "FORMATS",
    "FORMAT_CHOICES",
    "GEMINI",
    "KIMI",
    "OPENAI",
    "OPENCLAW",
    "OPENCODE",
    "PI",
    "QWEN",
    "Adapter",
    "FileHeader",
    "LeafTitle",
    "LogLocation",
    "Parsed",
    "SessionTitle",
    "default_locations",
    "detect_format",
    "known_formats",
    "resembles",
    "resolve_format",
]

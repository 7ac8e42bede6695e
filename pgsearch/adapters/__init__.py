"""Log formats pgsearch ingests, and which one a file is in.

``openai`` is pgsearch's own JSON Lines format (`pgsearch.messages`), one message
per line with ``seq`` = line number, read under the strict line policy. The
agent-log formats (every other one) can turn one line into several entries (one
per content block) or none (bookkeeping lines), so their entries get consecutive
``seq`` numbers per session in file order instead, a file that grows continues
where the session stopped, and their lines are read under the lenient line policy
(`pgsearch.adapters.common`).

Line formats are read on from where the last pass stopped; document formats (a
Gemini CLI session document or saved chat, an OpenCode session, a Cline task, an
Amp thread, a VS Code chat session, an agent's SQLite store) are read whole
whenever they change.

Every adapter is pure: it gets the file's bytes and the offset where the unread
lines start, and returns what it read (`Parsed`); the ingestor owns transactions
and offsets. A file in none of these formats is refused with the list of formats
pgsearch reads and, when it can tell, the program the file came from.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgsearch.errors import ConfigError, IngestError

if TYPE_CHECKING:
    from pgsearch.adapters.common import (
        Adapter,
        FileHeader,
        HeaderFn,
        LeafTitle,
        Parsed,
        ParseFn,
        SessionTitle,
    )


@dataclass(frozen=True, kw_only=True)
class Format:
    """A format in the registry: what is known of it without importing its adapter."""

    name: str
    #: The module that reads it, imported on first use.
    module: str
    #: The module's attribute holding the `Adapter` (one module may read two formats).
    attribute: str = "ADAPTER"


AUTO = "auto"
OPENAI = "openai"
CLAUDE_CODE = "claude-code"
CODEX = "codex"
GEMINI = "gemini"
OPENCODE = "opencode"
COPILOT_CLI = "copilot-cli"
PI = "pi"
OPENCLAW = "openclaw"
KIMI = "kimi"
DROID = "droid"
QWEN = "qwen"
AIDER = "aider"
CLINE = "cline"
ROO_CODE = "roo-code"
CURSOR = "cursor"
AMP = "amp"
CRUSH = "crush"
CURSOR_STORE = "cursor-store"
VSCODE_COPILOT = "vscode-copilot"

#: Every format pgsearch reads, in the order `FORMAT_CHOICES` lists them. A new format
#: is a module exporting its `Adapter` (``ADAPTER``), one line here and, when it
#: recognises its own lines, its place in `LINE_DETECTION`; nothing else names it. A
#: command imports an adapter's module only when it reads a file in that format,
#: detects a file's format, or lists where agents keep their logs.
REGISTRY: tuple[Format, ...] = (
    Format(name=OPENAI, module="pgsearch.adapters.openai"),
    Format(name=CLAUDE_CODE, module="pgsearch.adapters.claude_code"),
    Format(name=CODEX, module="pgsearch.adapters.codex"),
    Format(name=GEMINI, module="pgsearch.adapters.gemini"),
    Format(name=OPENCODE, module="pgsearch.adapters.opencode"),
    Format(name=COPILOT_CLI, module="pgsearch.adapters.copilot_cli"),
    Format(name=PI, module="pgsearch.adapters.pi"),
    Format(name=OPENCLAW, module="pgsearch.adapters.pi", attribute="OPENCLAW_ADAPTER"),
    Format(name=KIMI, module="pgsearch.adapters.kimi"),
    Format(name=DROID, module="pgsearch.adapters.droid"),
    Format(name=QWEN, module="pgsearch.adapters.qwen"),
    Format(name=AIDER, module="pgsearch.adapters.aider"),
    Format(name=CLINE, module="pgsearch.adapters.cline"),
    Format(name=ROO_CODE, module="pgsearch.adapters.cline", attribute="ROO_ADAPTER"),
    Format(name=CURSOR, module="pgsearch.adapters.cursor"),
    Format(name=AMP, module="pgsearch.adapters.amp"),
    Format(name=CRUSH, module="pgsearch.adapters.crush"),
    Format(name=CURSOR_STORE, module="pgsearch.adapters.cursor_store"),
    Format(name=VSCODE_COPILOT, module="pgsearch.adapters.vscode_copilot"),
)

#: Line formats in the order their tests (`Adapter.looks_like_line`) run on a decoded
#: line: a more specific test before a more general one that would also accept the
#: line. pgsearch's own format is what a line with a role is when none claims it;
#: OpenClaw writes Pi's format and Roo Code Cline's; each is told apart by its
#: directory (`detect_format`).
LINE_DETECTION = (
    CODEX,
    COPILOT_CLI,
    DROID,
    PI,
    KIMI,
    QWEN,
    CLAUDE_CODE,
    GEMINI,
    OPENCODE,
    CLINE,
    CURSOR,
    AMP,
    CRUSH,
    CURSOR_STORE,
    VSCODE_COPILOT,
)

FORMATS = tuple(f.name for f in REGISTRY)
#: Choices of ``pgsearch ingest --format``.
FORMAT_CHOICES = (AUTO, *FORMATS)
#: Lines looked at to recognise a file's format.
DETECT_LINES = 20
#: The largest file whose whole text is decoded to recognise a JSON document.
MAX_DOCUMENT_BYTES = 256 * 1024 * 1024

_BY_NAME = {f.name: f for f in REGISTRY}


def adapter(name: str) -> Adapter:
    """The adapter of format `name` (its module imported on first use); `KeyError`
    for a name not in the registry."""
    entry = _BY_NAME[name]
    found: Adapter = getattr(importlib.import_module(entry.module), entry.attribute)
    if found.name != name:
        raise AssertionError(f"{entry.module}.{entry.attribute} reads {found.name!r}")
    return found


class _Adapters(Mapping[str, "Adapter"]):
    """The registry as a mapping from name to adapter, each imported when looked up."""

    def __getitem__(self, name: str) -> Adapter:
        return adapter(name)

    def __iter__(self) -> Iterator[str]:
        return iter(FORMATS)

    def __len__(self) -> int:
        return len(FORMATS)


ADAPTERS: Mapping[str, Adapter] = _Adapters()

#: Names the adapters' shared types are reached by here, loaded when first used.
_COMMON = ("Adapter", "FileHeader", "HeaderFn", "LeafTitle", "ParseFn", "Parsed", "SessionTitle")


def __getattr__(name: str) -> Any:
    if name in _COMMON:
        return getattr(importlib.import_module("pgsearch.adapters.common"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    from pgsearch.locations import existing

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


@cache
def _line_tests() -> tuple[tuple[str, Callable[[dict[str, Any]], bool]], ...]:
    """`LINE_DETECTION`'s tests, their adapters imported (once)."""
    tests = []
    for name in LINE_DETECTION:
        test = adapter(name).looks_like_line
        assert test is not None, name
        tests.append((name, test))
    return tuple(tests)


def _line_format(obj: dict[str, Any]) -> str | None:
    for name, test in _line_tests():
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
    from pgsearch.adapters.common import head_objects

    heads = list(head_objects(data, DETECT_LINES))
    for obj in heads:
        fmt = _line_format(obj)
        if fmt == PI:
            from pgsearch.adapters import pi

            if pi.is_openclaw(path):
                return OPENCLAW  # OpenClaw writes Pi's format; its directory tells them apart
        if fmt == CLINE:
            from pgsearch.adapters import cline

            if cline.is_roo(path):
                return ROO_CODE  # Roo Code writes Cline's tasks; its directory tells them apart
        if fmt is not None:
            return fmt
    if not heads:
        doc = _document(data)
        if doc is not None:
            for name in LINE_DETECTION:
                if adapter(name).looks_like_document(doc):
                    return name
            heads = [doc] if isinstance(doc, dict) else list(doc[:DETECT_LINES])
    if not heads:
        from pgsearch.adapters import aider

        if aider.looks_like(data):
            return AIDER
    what = _resembles(heads)
    if what is not None:
        raise IngestError(
            f"not a format pgsearch reads: this looks like {what}; {_known()}", path=path
        )
    if not heads and data.lstrip().startswith((b"#", b">")):
        raise IngestError(
            f"not a format pgsearch reads (Markdown or text that is no Aider chat history); "
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
    from pgsearch.adapters.common import head_objects

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
    "AIDER",
    "AMP",
    "AUTO",
    "CLAUDE_CODE",
    "CLINE",
    "CODEX",
    "COPILOT_CLI",
    "CRUSH",
    "CURSOR",
    "CURSOR_STORE",
    "DROID",
    "FORMATS",
    "FORMAT_CHOICES",
    "GEMINI",
    "KIMI",
    "LINE_DETECTION",
    "OPENAI",
    "OPENCLAW",
    "OPENCODE",
    "PI",
    "QWEN",
    "REGISTRY",
    "ROO_CODE",
    "VSCODE_COPILOT",
    "Adapter",
    "FileHeader",
    "Format",
    "HeaderFn",
    "LeafTitle",
    "LogLocation",
    "ParseFn",
    "Parsed",
    "SessionTitle",
    "adapter",
    "default_locations",
    "detect_format",
    "known_formats",
    "resembles",
    "resolve_format",
]

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

import importlib
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
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
    #: The module that reads it; it exports ``ADAPTER`` and is imported on first use.
    module: str
    #: How `known_formats` names it.
    label: str = ""


#: Every format pgsearch reads. Detection tries them in this order (pgsearch's own
#: format last, whatever its place here: it is what a line with a role is when no
#: other format claims it). A new format is a module exporting ``ADAPTER`` plus one
#: line here; nothing else names it. A command imports an adapter's module only when
#: it reads a file in that format or detects a file's format.
REGISTRY: tuple[Format, ...] = (
    Format(name="openai", module="pgsearch.adapters.openai", label="openai (its own JSON Lines)"),
    Format(name="claude-code", module="pgsearch.adapters.claude_code"),
    Format(name="codex", module="pgsearch.adapters.codex"),
    Format(name="gemini", module="pgsearch.adapters.gemini"),
    Format(name="opencode", module="pgsearch.adapters.opencode"),
)

AUTO = "auto"
OPENAI = "openai"
CLAUDE_CODE = "claude-code"
CODEX = "codex"
GEMINI = "gemini"
OPENCODE = "opencode"
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
    found: Adapter = importlib.import_module(entry.module).ADAPTER
    if found.name != name:
        raise AssertionError(f"{entry.module} exports the adapter of {found.name!r}")
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


# --- files from programs pgsearch does not read: said so, by name ------------------


def _is(obj: dict[str, Any], *keys: str) -> bool:
    return all(k in obj for k in keys)


#: (what the file is, test on one decoded line).
_RESEMBLES: tuple[tuple[str, Callable[[dict[str, Any]], bool]], ...] = (
    (
        "a GitHub Copilot CLI session (events.jsonl)",
        lambda o: (
            isinstance(o.get("type"), str)
            and o["type"].split(".")[0] in ("session", "user", "assistant", "tool")
            and "." in o["type"]
            and "data" in o
        ),
    ),
    (
        "a Pi coding agent session",
        lambda o: (
            (o.get("type") == "session" and _is(o, "id", "cwd"))
            or (
                o.get("type") == "message"
                and isinstance(o.get("message"), dict)
                and o["message"].get("role") in ("user", "assistant", "toolResult")
            )
        ),
    ),
    (
        "a Kimi CLI context file",
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
    names = [f.label or f.name for f in REGISTRY]
    return f"pgsearch reads {', '.join(names[:-1])} and {names[-1]}"


def _document(data: bytes) -> Any:
    if len(data) > MAX_DOCUMENT_BYTES or data.lstrip()[:1] not in (b"{", b"["):
        return None
    try:
        return json.loads(data.decode("utf-8-sig"))
    except (ValueError, RecursionError):
        return None


@cache
def _detectors() -> tuple[Adapter, ...]:
    """The adapters that recognise their own lines, in registry order (imported now)."""
    found = (adapter(entry.name) for entry in REGISTRY)
    return tuple(a for a in found if a.looks_like_line is not None)


def _line_format(obj: dict[str, Any]) -> str | None:
    for found in _detectors():
        assert found.looks_like_line is not None
        if found.looks_like_line(obj):
            return found.name
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
        if fmt is not None:
            return fmt
    if not heads:
        doc = _document(data)
        if doc is not None:
            for found in _detectors():
                if found.looks_like_document(doc):
                    return found.name
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
    "AUTO",
    "CLAUDE_CODE",
    "CODEX",
    "FORMATS",
    "FORMAT_CHOICES",
    "GEMINI",
    "OPENAI",
    "OPENCODE",
    "REGISTRY",
    "Adapter",
    "FileHeader",
    "Format",
    "HeaderFn",
    "LeafTitle",
    "ParseFn",
    "Parsed",
    "SessionTitle",
    "adapter",
    "detect_format",
    "known_formats",
    "resembles",
    "resolve_format",
]

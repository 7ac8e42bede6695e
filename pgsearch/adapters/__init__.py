"""Log formats pgsearch ingests, and which one a file is in.

``openai`` is pgsearch's own JSON Lines format (`pgsearch.messages`), one message
per line with ``seq`` = line number. The agent-log formats (``claude-code``,
``codex``) can turn one line into several entries (one per content block) or none
(bookkeeping lines), so their entries get consecutive ``seq`` numbers per session
in file order instead, and a file that grows continues where the session stopped.

Every adapter is pure: it gets the file's bytes and the offset where the unread
lines start, and returns entries; the ingestor owns transactions and offsets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pgsearch.adapters import claude_code, codex
from pgsearch.adapters.common import FileHeader, head_objects
from pgsearch.errors import ConfigError
from pgsearch.messages import Entry

AUTO = "auto"
OPENAI = "openai"
CLAUDE_CODE = claude_code.NAME
CODEX = codex.NAME
FORMATS = (OPENAI, CLAUDE_CODE, CODEX)
#: Choices of ``pgsearch ingest --format``.
FORMAT_CHOICES = (AUTO, *FORMATS)
#: Lines looked at to recognise a file's format.
DETECT_LINES = 20


@dataclass(frozen=True)
class Adapter:
    name: str
    header: Callable[..., FileHeader]
    parse: Callable[..., list[Entry]]


ADAPTERS = {
    CLAUDE_CODE: Adapter(CLAUDE_CODE, claude_code.header, claude_code.parse),
    CODEX: Adapter(CODEX, codex.header, codex.parse),
}


def detect_format(data: bytes) -> str:
    """The format of a file from its first lines; ``openai`` when nothing else fits."""
    for obj in head_objects(data, DETECT_LINES):
        if codex.looks_like(obj):
            return CODEX
        if claude_code.looks_like(obj):
            return CLAUDE_CODE
        if "role" in obj:
            return OPENAI
    return OPENAI


def resolve_format(fmt: str, data: bytes) -> str:
    """`fmt`, or the detected format when it is ``auto``."""
    if fmt == AUTO:
        return detect_format(data)
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; use one of {', '.join(FORMAT_CHOICES)}")
    return fmt


__all__ = [
    "ADAPTERS",
    "AUTO",
    "CLAUDE_CODE",
    "CODEX",
    "FORMATS",
    "FORMAT_CHOICES",
    "OPENAI",
    "Adapter",
    "FileHeader",
    "detect_format",
    "resolve_format",
]

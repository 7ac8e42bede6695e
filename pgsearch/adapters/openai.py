"""pgsearch's own format (`pgsearch.messages`) as an adapter: one message per line.

The user writes these files, so they are read under the strict line policy: one bad
line rejects the whole file, naming ``file:line``. ``seq`` is a message's 0-based
line number (blank lines count), so re-reading a file can never store a line twice.
A last line without a trailing newline is read when it is complete JSON; one that
does not parse is a "truncated last line" error.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from pgsearch.adapters.common import Adapter, FileHeader, Parsed
from pgsearch.messages import iter_jsonl

NAME = "openai"
VERSION = 1


def looks_like(obj: dict[str, Any]) -> bool:
    return "role" in obj


def header(data: bytes, *, default_session: str, path: PurePath | None = None) -> FileHeader:
    return FileHeader(session_id=default_session)


def parse(data: bytes, start: int, first_line: int, *, path: str, header: FileHeader) -> Parsed:
    """Every line of ``data[start:]`` as an entry; raises `IngestError` on a bad line."""
    tail = data[start:]
    entries = list(iter_jsonl(tail, path=path, session_id=header.session_id, first_line=first_line))
    lines = first_line + tail.count(b"\n") + (0 if not tail or tail.endswith(b"\n") else 1)
    return Parsed(entries=entries, consumed=len(data), lines=lines, recognised=len(entries))


ADAPTER = Adapter(name=NAME, version=VERSION, header=header, parse=parse, seq_from_line=True)

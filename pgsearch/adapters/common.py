"""What the log adapters share: reading JSON Lines and building entries (pure)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pgsearch.errors import IngestError
from pgsearch.messages import MAX_LINE_BYTES, clean, parse_time
from pgsearch.types import MAX_ID_CHARS

#: How many leading lines a header scan (session id, working directory) reads.
HEADER_LINES = 64


@dataclass(frozen=True, kw_only=True)
class FileHeader:
    """What a whole file says about itself, read from its first lines."""

    session_id: str
    cwd: str | None = None
    started_at: datetime | None = None


def json_lines(
    data: bytes, start: int, end: int, first_line: int, *, path: str
) -> Iterator[tuple[int, Any]]:
    """(1-based line number, decoded JSON) for each non-blank line of ``data[start:end]``.

    `end` must be a line boundary; the first line there is number ``first_line + 1``.
    A line that is not JSON is an `IngestError` naming ``path:line``.
    """
    lineno = first_line
    pos = start
    while pos < end:
        nl = data.find(b"\n", pos, end)
        stop = end if nl < 0 else nl
        raw = data[pos:stop]
        pos = stop + 1
        lineno += 1
        if len(raw) > MAX_LINE_BYTES:
            raise IngestError(
                f"line is {len(raw):,} bytes, over the {MAX_LINE_BYTES:,}-byte limit",
                path=path,
                line=lineno,
            )
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise IngestError(
                f"invalid UTF-8 at byte {exc.start + 1}", path=path, line=lineno
            ) from None
        try:
            yield lineno, json.loads(text)
        except RecursionError:
            raise IngestError("JSON nested too deeply", path=path, line=lineno) from None
        except json.JSONDecodeError as exc:
            raise IngestError(
                f"invalid JSON: {exc.msg.removesuffix(' at')} at column {exc.colno}",
                path=path,
                line=lineno,
            ) from None


def head_objects(data: bytes, limit: int = HEADER_LINES) -> Iterator[dict[str, Any]]:
    """The JSON objects among the first `limit` complete lines (bad lines skipped)."""
    pos = 0
    for _ in range(limit):
        nl = data.find(b"\n", pos)
        if nl < 0:
            return
        raw = data[pos:nl]
        pos = nl + 1
        if not raw.strip() or len(raw) > MAX_LINE_BYTES:
            continue
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            yield obj


def line_with(data: bytes, needle: str, end: int) -> Any:
    """The decoded JSON line before byte `end` that last mentions `needle` (or None).

    Used to find, say, the tool call a tool result answers when the call was read
    in an earlier pass over a growing file: one backwards byte search, one line
    decoded, instead of re-reading the file.
    """
    key = json.dumps(needle).encode()
    at = data.rfind(key, 0, end)
    if at < 0:
        return None
    begin = data.rfind(b"\n", 0, at) + 1
    stop = data.find(b"\n", at)
    try:
        return json.loads(data[begin : stop if stop >= 0 else len(data)])
    except (ValueError, RecursionError):
        return None


class ToolNames:
    """Tool names by call id: those seen so far, else looked up in the file's prefix."""

    def __init__(self, data: bytes, start: int, lookup: Callable[[Any, str], str | None]) -> None:
        self._data = data
        self._start = start
        self._lookup = lookup
        self._names: dict[str, str | None] = {}

    def add(self, call_id: str | None, name: str) -> None:
        if call_id:
            self._names[call_id] = name

    def get(self, call_id: str | None) -> str | None:
        if not call_id:
            return None
        if call_id not in self._names:
            line = line_with(self._data, call_id, self._start) if self._start else None
            self._names[call_id] = self._lookup(line, call_id) if line is not None else None
        return self._names[call_id]


def text(value: Any) -> str:
    """A string made storable (NUL and lone surrogates replaced); non-strings -> ''."""
    return clean(value) if isinstance(value, str) else ""


def ident(value: Any) -> str | None:
    """An id-like string of at most `MAX_ID_CHARS`, else None."""
    if isinstance(value, str) and 0 < len(value) <= MAX_ID_CHARS:
        return text(value)
    return None


def timestamp(value: Any, *, path: str, line: int) -> datetime | None:
    try:
        return parse_time(value)
    except ValueError as exc:
        reason = str(exc).replace("'created_at'", "'timestamp'")
        raise IngestError(reason, path=path, line=line) from None


def arguments_json(value: Any) -> str:
    """Tool arguments as text: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return text(value)
    if value is None:
        return ""
    return json.dumps(clean(value), ensure_ascii=False, sort_keys=True)

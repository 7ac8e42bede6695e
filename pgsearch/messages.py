"""Parsing our input format into `Entry` values (pure; no I/O beyond the bytes given).

The format is JSON Lines, one message per line, shaped like OpenAI chat messages::

    {"role": "user", "content": "text" | [{"type": "text", "text": "..."}],
     "created_at": "2026-01-02T03:04:05Z", "session_id": "s1", "title": "...",
     "summary": "...", "kind": "summary", "is_error": false}
    {"role": "assistant", "content": null,
     "tool_calls": [{"id": "c1", "function": {"name": "grep", "arguments": "{...}"}}]}
    {"role": "tool", "tool_call_id": "c1", "name": "grep", "content": "..."}

A line that cannot be read is an `IngestError` naming ``file:line`` and the reason.
Text Postgres cannot store (``\\u0000`` inside a JSON string, lone surrogates) is
replaced with U+FFFD; the rest of the message is kept as is.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pgsearch import policy
from pgsearch.errors import IngestError
from pgsearch.normalize import LONE_SURROGATE
from pgsearch.terminal import key_problem
from pgsearch.types import MAX_ID_CHARS

#: Longest accepted line (bytes). Larger lines are rejected, not truncated.
MAX_LINE_BYTES = 32 * 1024 * 1024
#: Blank lines (spaces, tabs and carriage returns only) at the start of what is left.
#: One character class, so that the regex engine keeps no state per line matched.
_BLANK_RUN = re.compile(rb"[ \t\r\n]*\n")
_KNOWN_FIELDS = frozenset(
    {
        "role",
        "content",
        "tool_calls",
        "tool_call_id",
        "name",
        "created_at",
        "kind",
        "is_error",
        "session_id",
        "title",
        "summary",
        "id",
    }
)


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One stored message (or bookkeeping entry) of a session."""

    session_id: str
    seq: int
    role: str
    kind: str
    content: str
    created_at: datetime | None
    entry_id: str | None = None
    tool_name: str | None = None
    #: Tool calls rendered ``name(arguments)``, one per line (shown, not indexed).
    arguments: str = ""
    title: str | None = None
    summary: str | None = None
    extra: dict[str, Any] | None = None
    tool_call_ids: tuple[str, ...] = field(default=())

    def tool_names(self) -> list[str]:
        return policy.split_tool_names(self.tool_name)


def _clean_str(value: str) -> str:
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from "\ud800"-style escapes
        value = LONE_SURROGATE.sub("\ufffd", value)
    return value


def clean(value: Any) -> Any:
    """`value` with every string made storable in Postgres text and jsonb."""
    if isinstance(value, str):
        return _clean_str(value)
    if isinstance(value, list):
        return [clean(v) for v in value]
    if isinstance(value, dict):
        return {_clean_str(str(k)): clean(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _text_of(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return _clean_str(content)
    if isinstance(content, list):
        parts: list[str] = []
        for i, part in enumerate(content):
            if isinstance(part, str):
                parts.append(_clean_str(part))
            elif isinstance(part, dict):
                text = part.get("text")
                if isinstance(text, str):
                    parts.append(_clean_str(text))
                elif part.get("type") in ("image", "image_url", "input_image"):
                    parts.append("[image]")
            else:
                raise ValueError(f"{where}[{i}] must be a string or an object")
        return "\n".join(parts)
    raise ValueError(f"'{where}' must be a string, a list of text parts or null")


def parse_time(value: Any) -> datetime | None:
    """ISO 8601 text or epoch seconds, milliseconds, microseconds or nanoseconds to an
    aware datetime (naive = UTC)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("'created_at' must be an ISO 8601 string or a number")
    if isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:  # an integer of hundreds of digits
            raise ValueError(f"'created_at' {value!r:.40} is out of range") from None
        # Epoch milliseconds, microseconds or nanoseconds: every unit's present-day
        # values are far apart (seconds stay below 1e11 until the year 5138).
        for limit, scale in ((1e17, 1e9), (1e14, 1e6), (1e11, 1e3)):
            if abs(seconds) >= limit:
                seconds /= scale
                break
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise ValueError(f"'created_at' {value!r:.40} is out of range") from None
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"'created_at' {value!r} is not an ISO 8601 time") from None
        if parsed.tzinfo is None:
            return parsed.replace(tzinfo=UTC)
        # A time whose UTC value falls outside years 1-9999 (0001-01-01T00:00+14:00)
        # could be stored but never read back: it would break every later read.
        try:
            parsed.astimezone(UTC)
        except OverflowError:
            raise ValueError(f"'created_at' {value!r} is out of range") from None
        return parsed
    raise ValueError("'created_at' must be an ISO 8601 string or a number")


def _opt_str(obj: Mapping[str, Any], key: str, *, limit: int | None = None) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"'{key}' must be a string")
    value = _clean_str(value)
    if limit is not None and not 0 < len(value) <= limit:
        raise ValueError(f"'{key}' must be 1 to {limit} characters")
    return value


def _tool_calls(calls: Any) -> tuple[list[str], list[str], list[str]]:
    if calls is None:
        return [], [], []
    if not isinstance(calls, list):
        raise ValueError("'tool_calls' must be a list")
    names: list[str] = []
    rendered: list[str] = []
    ids: list[str] = []
    for i, call in enumerate(calls):
        if not isinstance(call, dict):
            raise ValueError(f"'tool_calls[{i}]' must be an object")
        fn = call.get("function", call)
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise ValueError(f"'tool_calls[{i}].function.name' must be a non-empty string")
        name = _clean_str(fn["name"])[:MAX_ID_CHARS]
        args = fn.get("arguments", "")
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False, sort_keys=True)
        names.append(name)
        rendered.append(f"{name}({_clean_str(args)})")
        if isinstance(call.get("id"), str):
            ids.append(_clean_str(call["id"]))
    return names, rendered, ids


def entry_from_object(
    obj: Any,
    *,
    seq: int,
    session_id: str,
    tool_names_by_call: dict[str, str] | None = None,
) -> Entry:
    """One message object (already decoded JSON) as an `Entry`; ValueError if invalid."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    role = obj.get("role")
    if role is None:
        raise ValueError("missing 'role'")
    if not isinstance(role, str) or role not in policy.ROLES:
        raise ValueError(f"unknown role {role!r} (expected one of {', '.join(policy.ROLES)})")
    text = _text_of(obj.get("content"), "content")
    sid = _opt_str(obj, "session_id", limit=MAX_ID_CHARS) or session_id
    title = _opt_str(obj, "title")
    summary = _opt_str(obj, "summary")
    entry_id = _opt_str(obj, "id", limit=MAX_ID_CHARS)
    is_error = obj.get("is_error", False)
    if not isinstance(is_error, bool):
        raise ValueError("'is_error' must be true or false")
    created_at = parse_time(obj.get("created_at"))
    names, rendered, call_ids = _tool_calls(obj.get("tool_calls"))
    tool_name = _opt_str(obj, "name", limit=MAX_ID_CHARS)
    kind_value = obj.get("kind")
    if kind_value is not None and (
        not isinstance(kind_value, str) or kind_value not in policy.ALL_KINDS
    ):
        raise ValueError(
            f"unknown kind {kind_value!r} (expected one of {', '.join(policy.ALL_KINDS)})"
        )
    if role == "user":
        kind = policy.USER_TEXT
    elif role == "assistant":
        kind = policy.TOOL_INPUT if names else policy.ASSISTANT_TEXT
    elif role == "tool":
        call_id = _opt_str(obj, "tool_call_id")
        if tool_name is None and call_id and tool_names_by_call:
            tool_name = tool_names_by_call.get(call_id)
        kind = (
            policy.TOOL_ERROR if policy.is_tool_error(text, marked=is_error) else policy.TOOL_OUTPUT
        )
    else:
        kind = policy.SYSTEM
    if kind_value is not None:
        kind = kind_value
    if names:
        tool_name = policy.join_tool_names(names)
    if kind == policy.SUMMARY and summary is None:
        summary = text
    extra = {k: clean(v) for k, v in obj.items() if k not in _KNOWN_FIELDS}
    if role == "tool" and obj.get("tool_call_id") is not None:
        extra["tool_call_id"] = clean(obj["tool_call_id"])
    if call_ids:
        # Kept so that a result appended later can be named after its call.
        extra["tool_call_ids"] = list(call_ids)
    for key, value in (("session_id", sid), *(("tool name", n) for n in names)):
        problem = key_problem(key, value, max_chars=MAX_ID_CHARS)
        if problem is not None:
            raise ValueError(problem)
    if tool_name is not None and not names:
        problem = key_problem("'name'", tool_name, max_chars=MAX_ID_CHARS)
        if problem is not None:
            raise ValueError(problem)
    return Entry(
        session_id=sid,
        seq=seq,
        role=role,
        kind=kind,
        content=text,
        created_at=created_at,
        entry_id=entry_id,
        tool_name=tool_name,
        arguments="\n".join(rendered),
        title=title,
        summary=summary,
        extra=extra or None,
        tool_call_ids=tuple(call_ids),
    )


def iter_jsonl(
    data: bytes,
    *,
    path: str,
    session_id: str,
    first_line: int = 0,
    tool_names_by_call: dict[str, str] | None = None,
) -> Iterator[Entry]:
    """Entries of JSON Lines `data`; line numbers (and seq) start at `first_line`.

    Raises `IngestError` naming ``path:line`` (1-based) at the first bad line. Blank
    lines are skipped but still count, so ``seq`` is always the 0-based line number.
    """
    calls = {} if tool_names_by_call is None else tool_names_by_call
    if first_line == 0 and data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]  # a UTF-8 byte-order mark some editors write
    end = len(data)
    pos = 0
    seq = first_line
    while pos < end:
        blanks = _BLANK_RUN.match(data, pos)
        if blanks is not None and blanks.end() > pos:
            # A run of blank lines costs one match and one count, whatever its length.
            seq += data.count(b"\n", pos, blanks.end())
            pos = blanks.end()
            continue
        nl = data.find(b"\n", pos)
        last = nl < 0
        stop = end if last else nl
        raw = data[pos:stop]
        pos = end if last else nl + 1
        lineno = seq + 1
        seq += 1
        if len(raw) > MAX_LINE_BYTES:
            raise IngestError(
                f"line is {len(raw):,} bytes, over the {MAX_LINE_BYTES:,}-byte limit",
                path=path,
                line=lineno,
            )
        if b"\x00" in raw:
            column = raw.index(b"\x00") + 1
            raise IngestError(f"NUL byte at column {column}", path=path, line=lineno)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise IngestError(
                f"invalid UTF-8 at byte {exc.start + 1}", path=path, line=lineno
            ) from None
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except RecursionError:
            raise IngestError("JSON nested too deeply", path=path, line=lineno) from None
        except json.JSONDecodeError as exc:
            truncated = last
            reason = "truncated last line" if truncated else "invalid JSON"
            raise IngestError(
                f"{reason}: {exc.msg.removesuffix(' at')} at column {exc.colno}",
                path=path,
                line=lineno,
            ) from None
        except ValueError:  # an integer longer than Python reads
            raise IngestError(
                "a number of more than 4,300 digits", path=path, line=lineno
            ) from None
        try:
            entry = entry_from_object(
                obj, seq=lineno - 1, session_id=session_id, tool_names_by_call=calls
            )
        except RecursionError:
            raise IngestError("JSON nested too deeply", path=path, line=lineno) from None
        except ValueError as exc:
            raise IngestError(str(exc), path=path, line=lineno) from None
        for call_id, name in zip(entry.tool_call_ids, entry.tool_names(), strict=False):
            calls[call_id] = name
        yield entry

"""Preparing a file (no database): read, detect, parse and index what is new in it.

`prepare` reads a file against its last known record (`pgsearch.ingest.files`): the
whole file when it was never read or was rewritten, else its new lines; an unchanged
file is not parsed at all. A line-format file larger than
`Settings.ingest_chunk_bytes` is never read whole: pgsearch's own format is read a
chunk at a time (the first chunk here, the rest by the writer, inside the file's
transaction), and a grown agent log from one chunk before its new part. Everything
here is pure apart from reading the file, so it can run in another thread or
process while the writer writes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from pgsearch import adapters
from pgsearch.adapters.common import Adapter, FileHeader, Parsed, head_objects
from pgsearch.db.store import FileRecord
from pgsearch.errors import IngestError
from pgsearch.indexing import IndexedText, index_entry
from pgsearch.ingest.files import (
    FILE_WINDOW,
    Resume,
    head_digest,
    next_chunk,
    record_of,
    resume_point,
)
from pgsearch.ingest.targets import FileJob
from pgsearch.messages import Entry, iter_jsonl
from pgsearch.settings import Settings
from pgsearch.sources import FileView, is_assembled, open_source, read_source
from pgsearch.terminal import key_problem
from pgsearch.types import MAX_ID_CHARS

#: Bytes read from the head of a large file to find its format and header.
_HEAD_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class Prepared:
    """The new part of one file, parsed and indexed, and what to record once written."""

    #: The file record this was prepared against (None: never ingested).
    snapshot: FileRecord | None
    #: The record to store once the entries are written.
    done: FileRecord
    start: int
    first_line: int
    entries: list[Entry]
    indexed: list[IndexedText]
    mtime: datetime
    parsed: Parsed
    format: str = adapters.OPENAI
    #: The file no longer starts with the bytes ingested before: forget its sessions.
    rewrite: bool = False
    unchanged: bool = False
    #: SHA-256 of the file's first `FILE_WINDOW` bytes (a record's `head_digest`).
    head: str = ""
    #: A file streamed in chunks (`Settings.ingest_chunk_bytes`): where the next
    #: chunk starts and its first line, the size read up to, and the file's header.
    #: `done` is then made once the last chunk is written.
    stream_next: int | None = None
    stream_line: int = 0
    stream_size: int = 0
    header: Any = None

    @property
    def session_ids(self) -> set[str]:
        """The sessions this part of the file names (entries, titles, sub-agents)."""
        return (
            {e.session_id for e in self.entries}
            | set(self.parsed.titles)
            | set(self.parsed.parents)
        )


def prepare(job: FileJob, record: FileRecord | None, settings: Settings) -> Prepared:
    """Read and parse the new part of `job`'s file against `record` (its last known
    record) and index its entries.

    A file read whole (never ingested, or rewritten) that yields nothing in its
    format is an error, and nothing is recorded for it: a wrong ``--format`` or a
    file of another program must not be remembered as ingested.
    """
    large = _prepare_large(job, record, settings)
    if large is not None:
        return large
    source = read_source(job.real, shown=job.shown, pin=job.pin)
    data = source.data
    fmt = adapters.resolve_format(job.format, data, path=job.shown)
    adapter = adapters.ADAPTERS[fmt]
    header = _header(adapter, data, job)
    resume = resume_point(data, record, parser=adapter.parser, document=adapter.is_document(data))
    if resume.unchanged:
        return _unchanged(record, resume, source.mtime, fmt, "")
    parsed = parse(adapter, data, resume, job.shown, header)
    if parsed.restart and resume.start:
        # The new lines change what an earlier pass read: read it all again.
        resume = Resume(0, 0, rewrite=True)
        parsed = parse(adapter, data, resume, job.shown, header)
    if resume.start == 0:
        _check_found(parsed, data, fmt, job.shown)
    return Prepared(
        snapshot=record,
        done=record_of(job.source, data, parsed.consumed, parsed.lines, adapter.parser),
        start=resume.start,
        first_line=resume.first_line,
        entries=parsed.entries,
        indexed=index_entries(parsed.entries, settings),
        mtime=source.mtime,
        parsed=parsed,
        format=fmt,
        rewrite=resume.rewrite,
        head=head_digest(data),
    )


def _header(adapter: Adapter, data: bytes, job: FileJob) -> FileHeader:
    header = adapter.header(data, default_session=job.real.stem, path=job.real)
    if job.session_id and job.session_id != header.session_id:
        header = replace(header, session_id=job.session_id)
    return header


def _unchanged(
    record: FileRecord | None, resume: Resume, mtime: datetime, fmt: str, head: str
) -> Prepared:
    assert record is not None
    return Prepared(
        snapshot=record,
        done=record,
        start=resume.start,
        first_line=resume.first_line,
        entries=[],
        indexed=[],
        mtime=mtime,
        parsed=Parsed(consumed=record.size, lines=record.lines),
        format=fmt,
        unchanged=True,
        head=head,
    )


def _prepare_large(job: FileJob, record: FileRecord | None, settings: Settings) -> Prepared | None:
    """`prepare` for a line-format file larger than `Settings.ingest_chunk_bytes`,
    without reading it whole; None when it must be read whole after all.

    Its record is checked at its windows (`same_prefix`), so a grown file costs
    the new bytes. pgsearch's own format is then read one chunk at a time (the
    first here, the rest by the writer inside the transaction). A grown agent log is
    read from one chunk before its new part (what its adapter may look back into);
    its first read, a Gemini CLI log (whose new lines may rewrite any earlier
    message) and a document are read whole.
    """
    if is_assembled(job.real):
        return None
    fd, st = open_source(job.real, shown=job.shown, pin=job.pin)
    with os.fdopen(fd, "rb"):
        if st.st_size <= settings.ingest_chunk_bytes:
            return None
        view = FileView(fd, st.st_size)
        head = view[:FILE_WINDOW]
        if next(head_objects(head, 2), None) is None:
            head = view[:_HEAD_BYTES]  # long first lines
            if next(head_objects(head, 1), None) is None:
                return None  # a JSON document, or nothing readable at its start
        fmt = adapters.resolve_format(job.format, head, path=job.shown)
        adapter = adapters.ADAPTERS[fmt]
        if adapter.is_document(head):
            return None
        mtime = datetime.fromtimestamp(st.st_mtime, tz=UTC)
        resume = resume_point(view, record, parser=adapter.parser)
        if resume.unchanged:
            return _unchanged(record, resume, mtime, fmt, head_digest(head))
        if fmt == adapters.OPENAI:
            header = _header(adapter, head, job)
            return _first_chunk(job, record, settings, view, header, resume, mtime)
        if fmt == adapters.GEMINI or resume.start == 0:
            return None
        return _grown_log(job, record, settings, view, adapter, head, resume, mtime)


def _first_chunk(
    job: FileJob,
    record: FileRecord | None,
    settings: Settings,
    view: FileView,
    header: FileHeader,
    resume: Resume,
    mtime: datetime,
) -> Prepared:
    """The first chunk of a large file in pgsearch's own format (the writer streams the
    rest)."""
    data = next_chunk(view, resume.start, settings.ingest_chunk_bytes)
    entries, lines = plain_entries(data, resume.first_line, job.shown, header.session_id, {})
    consumed = resume.start + len(data)
    more = consumed < len(view)
    parser = adapters.ADAPTERS[adapters.OPENAI].parser
    done = (
        record  # replaced once the last chunk is written
        if more and record is not None
        else record_of(job.source, view, consumed, lines, parser)
    )
    return Prepared(
        snapshot=record,
        done=done,
        start=resume.start,
        first_line=resume.first_line,
        entries=entries,
        indexed=index_entries(entries, settings),
        mtime=mtime,
        parsed=Parsed(entries=entries, consumed=consumed, lines=lines),
        format=adapters.OPENAI,
        rewrite=resume.rewrite,
        head=head_digest(view[:FILE_WINDOW]),
        stream_next=consumed if more else None,
        stream_line=lines,
        stream_size=len(view),
        header=header,
    )


def _grown_log(
    job: FileJob,
    record: FileRecord | None,
    settings: Settings,
    view: FileView,
    adapter: Adapter,
    head: bytes,
    resume: Resume,
    mtime: datetime,
) -> Prepared | None:
    """The new part of a large agent log that grew: parsed from one chunk before it
    (what the adapter may look back into: the call a result answers, a sub-agent's
    parent message). None when the new lines change what was read before."""
    size = len(view)
    base = max(0, resume.start - settings.ingest_chunk_bytes)
    if base:
        base += view[base : resume.start].find(b"\n") + 1
    data = view[base:size]
    header = _header(adapter, head, job)
    parsed = parse(adapter, data, replace(resume, start=resume.start - base), job.shown, header)
    if parsed.restart:
        return None
    parsed = replace(parsed, consumed=parsed.consumed + base)
    return Prepared(
        snapshot=record,
        done=record_of(job.source, view, parsed.consumed, parsed.lines, adapter.parser),
        start=resume.start,
        first_line=resume.first_line,
        entries=parsed.entries,
        indexed=index_entries(parsed.entries, settings),
        mtime=mtime,
        parsed=parsed,
        format=adapter.name,
        rewrite=resume.rewrite,
        head=head_digest(head),
    )


def index_entries(entries: list[Entry], settings: Settings) -> list[IndexedText]:
    """The index rows of `entries` under the settings' policy."""
    return [
        index_entry(e, index_policy=settings.index_policy, max_chars=settings.max_indexed_chars)
        for e in entries
    ]


def plain_entries(
    data: bytes, first_line: int, shown: str, session_id: str, calls: dict[str, str]
) -> tuple[list[Entry], int]:
    """Entries of a chunk of a file in pgsearch's format, and the line count after it."""
    try:
        entries = list(
            iter_jsonl(
                data,
                path=shown,
                session_id=session_id,
                first_line=first_line,
                tool_names_by_call=calls,
            )
        )
    except IngestError as exc:
        raise named_formats(exc) from None
    lines = first_line + data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1)
    return entries, lines


def parse(adapter: Adapter, data: bytes, resume: Resume, shown: str, header: Any) -> Parsed:
    """What `adapter` reads of `data` from the resume point."""
    try:
        parsed = adapter.parse(data, resume.start, resume.first_line, path=shown, header=header)
        return _printable_keys(parsed, shown, lines=not adapter.is_document(data))
    except IngestError as exc:
        if adapter.name == adapters.OPENAI:
            raise named_formats(exc) from None
        raise
    except (ValueError, OverflowError, RecursionError) as exc:
        # A value no line's policy caught (a session document holding a number of
        # thousands of digits): this file is unreadable, the others of the run go on.
        raise IngestError(f"unreadable {adapter.name} file ({_reason(exc)})", path=shown) from None


def _printable_keys(parsed: Parsed, shown: str, *, lines: bool) -> Parsed:
    """`parsed` without the entries whose session id or tool name could not be
    printed as itself (a newline, a control or bidirectional character): under the
    line policy their lines are bad lines, named by file and line (`lines`: entries
    carry their line, as seq + 1; a session document names the file only)."""
    bad: dict[int, str] = {}
    kept: list[Entry] = []
    for entry in parsed.entries:
        problem = _key_problem(entry.session_id, *entry.tool_names())
        if problem is None:
            kept.append(entry)
        else:
            bad.setdefault(entry.seq, problem)
    for seq, problem in sorted(bad.items()):
        parsed.problem(IngestError(problem, path=shown, line=seq + 1 if lines else None))
    if bad:
        parsed.entries = kept
    for sid in [s for s in parsed.titles if _key_problem(s)]:
        del parsed.titles[sid]
    for child, parent in list(parsed.parents.items()):
        if _key_problem(child, parent):
            del parsed.parents[child]
    return parsed


def _key_problem(session_id: str, *tool_names: str) -> str | None:
    keys = [("session_id", session_id), *(("tool name", name) for name in tool_names)]
    return next((p for p in (_problem(k, v) for k, v in keys) if p), None)


@lru_cache(maxsize=4096)
def _problem(name: str, value: str) -> str | None:
    # A file's entries repeat a few session ids and tool names thousands of times.
    return key_problem(name, value, max_chars=MAX_ID_CHARS)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply"
    if isinstance(exc, ValueError) and "integer string conversion" in str(exc):
        return "a number of more than 4,300 digits"
    return str(exc)[:200] or type(exc).__name__


def named_formats(exc: IngestError) -> IngestError:
    """A line of pgsearch's own format without a role: most likely the file is in no
    format pgsearch reads, so the error says which ones it does."""
    if not exc.reason.startswith("missing 'role'"):
        return exc
    return IngestError(
        f"{exc.reason} (not a format pgsearch recognises; {adapters.known_formats()})",
        path=exc.path,
        line=exc.line,
    )


def _check_found(parsed: Parsed, data: bytes, fmt: str, shown: str) -> None:
    """A file read whole must hold something of its format (or be empty)."""
    found = parsed.entries or parsed.titles or parsed.leaf_titles or parsed.recognised
    if found or not data.strip():
        return
    looks = adapters.resembles(data)
    hint = "" if looks == fmt else f"; it looks like {looks}"
    raise IngestError(f"no messages in format {fmt}{hint}", path=shown)

"""Ingest: files and appended messages into the store, lossless and idempotent.

A file is one transaction: either every new line of it lands, with vocabulary and
statistics updated to match, or nothing does. For each file the consumed byte length
and a SHA-256 of those bytes are recorded, with the format and mapping version it
was read with (``parser``); when the file still starts with exactly those bytes and
the mapping is the same, only the lines after them are parsed (`resume_point`). In
pgsearch's own format ``seq`` is a message's 0-based line number, so re-reading a
file inserts nothing twice (``ON CONFLICT DO NOTHING`` on the primary key); agent
logs continue each session's seqs. A file that no longer starts with what was read,
or was read by an older mapping, is read again whole and replaces its sessions.

Agent logs may name sessions other than the file's own: sub-agent conversations
(linked to their parent) and, in Claude Code ``summary`` lines, the session a title
belongs to, through the uuid of one of its messages. Those titles are stored
(`leaf_titles`) and applied when that message is stored, in this file, another file
of the run, or a later run.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from pgsearch import adapters, policy
from pgsearch.adapters.common import Parsed, SessionTitle, head_objects
from pgsearch.db import store
from pgsearch.db.store import (
    FIELDS_STAT,
    Deltas,
    FileRecord,
    MessageRow,
    SessionState,
    Store,
    Unit,
    Work,
    returning,
    savepoint,
)
from pgsearch.errors import ConfigError, IngestError
from pgsearch.indexing import IndexedText, index_entry, index_session_fields
from pgsearch.messages import MAX_LINE_BYTES, Entry, entry_from_object, iter_jsonl
from pgsearch.settings import Settings
from pgsearch.sources import (
    FileView,
    Pin,
    find_sources,
    is_assembled,
    open_source,
    read_source,
)
from pgsearch.userconfig import project_of
from pgsearch.validate import check_stored_key, check_workspace

log = logging.getLogger(__name__)

_BATCH_ROWS = 2000
#: Files written in one transaction by `Ingestor.ingest_paths` (each in a savepoint).
GROUP_FILES = 64
GROUP_ENTRIES = 5000
#: After a run that added this many messages (and a tenth of the table, as autovacuum
#: would judge), statistics are refreshed and the GIN pending list merged (see
#: `Store.after_bulk_load`).
MAINTAIN_AFTER = 5000
#: Files the worker thread reads, parses and indexes ahead of the writer.
PREPARE_AHEAD = 8


@dataclass(slots=True)
class FileResult:
    path: str
    sessions: set[str] = field(default_factory=set)
    #: Entries stored by this ingest.
    messages: int = 0
    #: Entries read again that were already stored (none are stored twice).
    skipped: int = 0
    #: Nothing was added to the file since it was last ingested; nothing was read.
    unchanged: bool = False
    #: Lines of an agent log skipped under the per-line policy, and (some of) why.
    bad_lines: int = 0
    warnings: list[IngestError] = field(default_factory=list)
    #: Events of types the format's mapping does not know (a newer agent), by type:
    #: skipped, the rest of the file read.
    unknown_events: dict[str, int] = field(default_factory=dict)
    error: IngestError | None = None
    #: Where the file went and how it was read (agent logs may pick the workspace).
    workspace: str = ""
    format: str = ""
    #: The file no longer started with what was ingested before, so it was re-read.
    rewritten: bool = False
    #: A workspace from the working directory was asked for, but the file names none.
    no_cwd: bool = False
    #: Entries of sessions the user forgot, not stored (`include_forgotten` stores them).
    forgotten: int = 0
    #: Sessions forgotten earlier that this ingest brought back (`include_forgotten`).
    restored: list[str] = field(default_factory=list)
    #: The path the file was ingested from before it moved here (recognised by content).
    moved_from: str | None = None


@dataclass(frozen=True, slots=True)
class Resume:
    """Where to start reading a file, given its record (`resume_point`)."""

    start: int
    first_line: int
    #: Read it whole and replace what it stored before.
    rewrite: bool = False
    #: Nothing new: no byte was added since the last ingest.
    unchanged: bool = False


#: Bytes at each end of what was read from a file that its record keeps a digest of.
#: A grown file whose first and last `FILE_WINDOW` bytes of the recorded length are
#: unchanged is read on from there, without hashing (or reading) what lies between;
#: the first window also finds a file that moved (`Ingestor._moved_from`).
FILE_WINDOW = 64 * 1024


#: What ingest reads a file through: its bytes, or a `FileView` of a large file.
Bytes = bytes | FileView
#: Tool-call names kept while streaming a file; earlier ones are found in the rows
#: already written (`store.tool_call_names`).
_STREAM_CALLS = 100_000
#: Distinct terms whose counts a streamed file accumulates before they are folded
#: into the vocabulary (in its transaction), so a file of ever new words (ids,
#: hashes) keeps memory bounded too.
_STREAM_TERMS = 200_000


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _digest_range(data: Bytes, stop: int) -> str:
    """SHA-256 of ``data[:stop]``, read a block at a time."""
    h = hashlib.sha256()
    for at in range(0, stop, 1 << 20):
        h.update(data[at : min(stop, at + (1 << 20))])
    return h.hexdigest()


def file_windows(data: Bytes, size: int) -> tuple[str, str, str]:
    """The record digests of the first `size` bytes of `data`: (digest, head, tail).

    `digest` names the read part (its windows and length) in one value."""
    head = _digest(data[: min(size, FILE_WINDOW)])
    tail = _digest(data[max(0, size - FILE_WINDOW) : size])
    return _digest(f"{head}:{tail}:{size}".encode()), head, tail


def same_prefix(data: Bytes, record: FileRecord) -> bool:
    """Whether `data` still starts with what `record` says was read of it.

    Records since migration 0005 keep digests of both ends of the part read
    (`file_windows`); older ones a digest of all of it, checked once.
    """
    if record.size > len(data):
        return False
    if record.head_digest is None or record.tail_digest is None:
        return _digest_range(data, record.size) == record.digest
    _, head, tail = file_windows(data, record.size)
    return (head, tail) == (record.head_digest, record.tail_digest)


def _record(path: str, data: Bytes, consumed: int, lines: int, parser: str) -> FileRecord:
    digest, head, tail = file_windows(data, consumed)
    return FileRecord(path, consumed, lines, digest, parser, head, tail)


def next_chunk(view: Bytes, start: int, limit: int) -> bytes:
    """About `limit` bytes of whole lines from `start` (a longer line whole, up to
    just past the line-length limit; the end of the file as it is)."""
    size = len(view)
    stop = min(size, start + limit)
    data = view[start:stop]
    if stop >= size:
        return data
    nl = data.rfind(b"\n")
    if nl >= 0:
        return data[: nl + 1]
    # One line longer than a chunk: to its end, or far enough to be refused.
    cap = min(size, start + MAX_LINE_BYTES + 2)
    at = view.find(b"\n", stop, cap)
    return view[start : (at + 1 if at >= 0 else cap)]


def resume_point(
    data: Bytes, record: FileRecord | None, *, parser: str, document: bool = False
) -> Resume:
    """Where the unread part of `data` starts, given what was recorded for the file.

    The file is read on from the recorded length when it still starts with the
    recorded bytes (`same_prefix`: its first and last `FILE_WINDOW` bytes) and was
    read by the same `parser`; else it is read whole as a rewrite. A document format
    is read whole on any change. When the last pass read a final line that had no
    newline yet, the bytes after it must end that line (spaces, then the newline):
    anything else means the line was rewritten.
    """
    if record is None:
        return Resume(0, 0)
    same_parser = record.parser == parser or (
        record.parser is None and parser.startswith(f"{adapters.OPENAI}/")
    )
    if not same_parser or not same_prefix(data, record):
        return Resume(0, 0, rewrite=True)
    if record.size == len(data):
        return Resume(record.size, record.lines, unchanged=True)
    if document:
        return Resume(0, 0, rewrite=True)
    start = record.size
    if start and data[start - 1 : start] != b"\n":
        nl = data.find(b"\n", start)
        stop = len(data) if nl < 0 else nl
        if data[start:stop].strip():
            return Resume(0, 0, rewrite=True)
        start = len(data) if nl < 0 else nl + 1
    return Resume(start, record.lines)


@dataclass(frozen=True, slots=True)
class _Prepared:
    shown: str
    real: Path
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


@dataclass(slots=True)
class IngestReport:
    files: int = 0
    unchanged: int = 0
    sessions: int = 0
    messages: int = 0
    skipped: int = 0
    bad_lines: int = 0
    #: Events of unknown types skipped (`FileResult.unknown_events`).
    unknown_events: int = 0
    #: Entries of forgotten sessions not stored, and sessions brought back.
    forgotten: int = 0
    restored: int = 0
    #: Files recognised at a new path and re-homed.
    moved: int = 0
    errors: list[IngestError] = field(default_factory=list)
    warnings: list[IngestError] = field(default_factory=list)
    #: Files that named no working directory, by the workspace they went to.
    no_cwd: dict[str, int] = field(default_factory=dict)
    #: Directories that could not be searched for files (their files were not read).
    unreadable: list[IngestError] = field(default_factory=list)

    def add(self, result: FileResult) -> None:
        self.files += 1
        self.unchanged += int(result.unchanged)
        self.sessions += len(result.sessions)
        self.messages += result.messages
        self.skipped += result.skipped
        self.bad_lines += result.bad_lines
        self.unknown_events += sum(result.unknown_events.values())
        self.forgotten += result.forgotten
        self.restored += len(result.restored)
        self.moved += result.moved_from is not None
        self.warnings.extend(result.warnings)
        if result.no_cwd and result.error is None:
            self.no_cwd[result.workspace] = self.no_cwd.get(result.workspace, 0) + 1
        if result.error is not None:
            self.errors.append(result.error)

    def summary(self) -> str:
        text = (
            f"{self.files} files ({self.unchanged} unchanged), {self.sessions} sessions, "
            f"{self.messages} messages added, {self.skipped} already stored, "
            f"{self.bad_lines} bad lines skipped, {len(self.errors)} errors"
        )
        if self.unknown_events:
            text += (
                f"; {self.unknown_events} event{'s' if self.unknown_events != 1 else ''} "
                "of unknown types skipped"
            )
        if self.forgotten:
            text += (
                f"; {self.forgotten} entries of forgotten sessions not stored "
                "(--include-forgotten brings them back)"
            )
        if self.restored:
            text += f"; {self.restored} forgotten sessions brought back"
        if self.moved:
            text += f"; {self.moved} moved files recognised at their new path"
        if self.unreadable:
            text += f"; {len(self.unreadable)} unreadable directories"
        for ws, count in sorted(self.no_cwd.items()):
            text += (
                f"; {count} file{'s' if count != 1 else ''} named no working directory "
                f"and went to workspace {ws!r}"
            )
        return text


def check_format(format: str) -> str:
    """`format` if it is one of `adapters.FORMAT_CHOICES`, else `ConfigError`."""
    if format not in adapters.FORMAT_CHOICES:
        raise ConfigError(
            f"unknown format {format!r}; use one of {', '.join(adapters.FORMAT_CHOICES)}"
        )
    return format


#: Bytes read from the head of a line-format file to find its working directory.
_HEAD_BYTES = 1 << 20


def workspace_of(
    real: Path, shown: str, format: str, fallback: str, pin: Pin | None = None
) -> tuple[str, bool]:
    """The workspace an agent log's working directory names, else `fallback`; and
    whether it fell back because the file names no working directory."""
    try:
        fd, _ = open_source(real, shown=shown, pin=pin)
        with os.fdopen(fd, "rb") as fh:
            head = fh.read(_HEAD_BYTES)
        if is_assembled(real) or (
            head.lstrip()[:1] in (b"{", b"[") and next(head_objects(head, 1), None) is None
        ):
            # One JSON document (or one assembled for the file): read it whole.
            head = read_source(real, shown=shown, pin=pin).data
    except (OSError, IngestError):
        return fallback, False  # reading the file again reports the error
    fmt = adapters.resolve_format(format, head, path=shown)
    if fmt == adapters.OPENAI:
        return fallback, False
    cwd = adapters.ADAPTERS[fmt].header(head, default_session=real.stem, path=real).cwd
    if not cwd:
        return fallback, True
    try:
        return check_workspace(project_of(cwd)), False
    except ConfigError as exc:
        raise IngestError(f"working directory as workspace: {exc}", path=shown) from None


def find_jsonl(
    paths: Iterable[str | os.PathLike[str]], problems: list[IngestError] | None = None
) -> list[Path]:
    """Files named directly, plus the session files of every format under
    directories (`pgsearch.sources.find_sources`; unreadable ones go to `problems`)."""
    return find_sources(paths, problems)


def pin_confined(real: Path, roots: Sequence[Path] | None, *, shown: str) -> Pin | None:
    """With `roots`, the identity of the confined file, which the file read later must
    have (`pgsearch.sources.open_source`); a file with other hard links is refused."""
    return Pin.of(real, shown=shown) if roots else None


def _absolute(path: str | os.PathLike[str]) -> Path:
    """`path` as ingest records it: absolute, symlinks of the parts that exist resolved."""
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError) as exc:
        raise IngestError(f"cannot resolve the path: {exc}", path=str(path)) from None


def confine(path: Path, roots: Sequence[Path] | None) -> Path:
    """The real path of `path`, which must lie under one of `roots` when given."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError before 3.13)
        raise IngestError(f"cannot resolve the path: {exc}", path=str(path)) from None
    if roots:
        for root in roots:
            if real.is_relative_to(root.resolve()):
                return real
        raise IngestError(
            "path is outside the allowed roots ("
            + ", ".join(str(r) for r in roots)
            + "; symlinks are followed before the check)",
            path=str(path),
        )
    return real


def _named_formats(exc: IngestError) -> IngestError:
    """A line of pgsearch's own format without a role: most likely the file is in no
    format pgsearch reads, so the error says which ones it does."""
    if not exc.reason.startswith("missing 'role'"):
        return exc
    return IngestError(
        f"{exc.reason} (not a format pgsearch recognises; {adapters.known_formats()})",
        path=exc.path,
        line=exc.line,
    )


class Ingestor:
    """Writes entries through a `Store` under the indexing policy of `settings`."""

    def __init__(self, store: Store | None, settings: Settings) -> None:
        #: Runs units for the blocking entry points; None for an asyncio host, which
        #: runs the units this class builds on its own driver.
        self.store = store
        self.settings = settings

    def _sync_store(self) -> Store:
        if self.store is None:
            raise ConfigError("this Ingestor builds units of work only (it has no store)")
        return self.store

    # --- files --------------------------------------------------------------------

    def _prepare(
        self,
        given: Path,
        real: Path,
        record: FileRecord | None,
        session_id: str | None,
        format: str = adapters.AUTO,
        pin: Pin | None = None,
    ) -> _Prepared:
        """Read and parse the new part of a file and index its entries (no database).

        A file read whole (never ingested, or rewritten) that yields nothing in its
        format is an error, and nothing is recorded for it: a wrong ``--format`` or
        a file of another program must not be remembered as ingested.
        """
        shown = str(given)
        large = self._prepare_large(given, real, record, session_id, format, pin)
        if large is not None:
            return large
        source = read_source(real, shown=shown, pin=pin)
        data = source.data
        fmt = adapters.resolve_format(format, data, path=shown)
        adapter = adapters.ADAPTERS[fmt]
        header = adapter.header(data, default_session=real.stem, path=real)
        if session_id and session_id != header.session_id:
            header = replace(header, session_id=session_id)
        resume = resume_point(
            data, record, parser=adapter.parser, document=adapter.is_document(data)
        )
        if resume.unchanged:
            assert record is not None
            return _Prepared(
                shown, real, record, record, resume.start, resume.first_line, [], [],
                source.mtime, Parsed(consumed=record.size, lines=record.lines),
                format=fmt, unchanged=True,
            )  # fmt: skip
        parsed = self._parse(adapter, data, resume, shown, header)
        if parsed.restart and resume.start:
            # The new lines change what an earlier pass read: read it all again.
            resume = Resume(0, 0, rewrite=True)
            parsed = self._parse(adapter, data, resume, shown, header)
        if resume.start == 0:
            self._check_found(parsed, data, fmt, shown)
        indexed = [
            index_entry(
                e,
                index_policy=self.settings.index_policy,
                max_chars=self.settings.max_indexed_chars,
            )
            for e in parsed.entries
        ]
        done = _record(str(real), data, parsed.consumed, parsed.lines, adapter.parser)
        return _Prepared(
            shown,
            real,
            record,
            done,
            resume.start,
            resume.first_line,
            parsed.entries,
            indexed,
            source.mtime,
            parsed,
            format=fmt,
            rewrite=resume.rewrite,
            head=_digest(data[:FILE_WINDOW]),
        )

    def _prepare_large(
        self,
        given: Path,
        real: Path,
        record: FileRecord | None,
        session_id: str | None,
        format: str,
        pin: Pin | None,
    ) -> _Prepared | None:
        """`_prepare` for a line-format file larger than `Settings.ingest_chunk_bytes`,
        without reading it whole; None when it must be read whole after all.

        Its record is checked at its windows (`same_prefix`), so a grown file costs
        the new bytes. pgsearch's own format is then read one chunk at a time (the
        first here, the rest by `_write_stream` inside the transaction). A grown
        agent log is read from one chunk before its new part (what its adapter may
        look back into); its first read, a Gemini CLI log (whose new lines may
        rewrite any earlier message) and a document are read whole.
        """
        shown = str(given)
        limit = self.settings.ingest_chunk_bytes
        if is_assembled(real):
            return None
        fd, st = open_source(real, shown=shown, pin=pin)
        with os.fdopen(fd, "rb"):
            size = st.st_size
            if size <= limit:
                return None
            view = FileView(fd, size)
            head = view[:FILE_WINDOW]
            if next(head_objects(head, 2), None) is None:
                head = view[:_HEAD_BYTES]  # long first lines
                if next(head_objects(head, 1), None) is None:
                    return None  # a JSON document, or nothing readable at its start
            fmt = adapters.resolve_format(format, head, path=shown)
            adapter = adapters.ADAPTERS[fmt]
            if adapter.is_document(head):
                return None
            header = adapter.header(head, default_session=real.stem, path=real)
            if session_id and session_id != header.session_id:
                header = replace(header, session_id=session_id)
            mtime = datetime.fromtimestamp(st.st_mtime, tz=UTC)
            resume = resume_point(view, record, parser=adapter.parser)
            head_key = _digest(head[:FILE_WINDOW])
            if resume.unchanged:
                assert record is not None
                return _Prepared(
                    shown, real, record, record, resume.start, resume.first_line, [], [],
                    mtime, Parsed(consumed=record.size, lines=record.lines),
                    format=fmt, unchanged=True, head=head_key,
                )  # fmt: skip
            if fmt == adapters.OPENAI:
                data = next_chunk(view, resume.start, limit)
                entries, lines = self._plain_entries(
                    data, resume.first_line, shown, header.session_id, {}
                )
                parsed = Parsed(entries=entries, consumed=resume.start + len(data), lines=lines)
                more = parsed.consumed < size
                done = (
                    record  # replaced once the last chunk is written
                    if more and record is not None
                    else _record(str(real), view, parsed.consumed, lines, adapter.parser)
                )
                return _Prepared(
                    shown, real, record, done, resume.start, resume.first_line, entries,
                    self._index(entries), mtime, parsed, format=fmt, rewrite=resume.rewrite,
                    head=head_key, stream_next=parsed.consumed if more else None,
                    stream_line=lines, stream_size=size, header=header,
                )  # fmt: skip
            if fmt == adapters.GEMINI or resume.start == 0:
                return None
            # What the adapter may look back into (the tool call a result answers, a
            # sub-agent's parent message): one chunk's worth before the new part.
            base = max(0, resume.start - limit)
            if base:
                base += view[base : resume.start].find(b"\n") + 1
            data = view[base:size]
            parsed = self._parse(
                adapter, data, replace(resume, start=resume.start - base), shown, header
            )
            if parsed.restart:
                return None
            parsed = replace(parsed, consumed=parsed.consumed + base)
            return _Prepared(
                shown, real, record,
                _record(str(real), view, parsed.consumed, parsed.lines, adapter.parser),
                resume.start, resume.first_line, parsed.entries, self._index(parsed.entries),
                mtime, parsed, format=fmt, rewrite=resume.rewrite, head=head_key,
            )  # fmt: skip

    def _index(self, entries: list[Entry]) -> list[IndexedText]:
        return [
            index_entry(
                e,
                index_policy=self.settings.index_policy,
                max_chars=self.settings.max_indexed_chars,
            )
            for e in entries
        ]

    @staticmethod
    def _plain_entries(
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
            raise _named_formats(exc) from None
        lines = first_line + data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1)
        return entries, lines

    def _write_stream(
        self, ws: str, prepared: _Prepared, pin: Pin | None, deltas: Deltas, result: FileResult
    ) -> Work[FileRecord]:
        """Write the chunks of a streamed file after its first; returns its record."""
        assert prepared.stream_next is not None
        limit = self.settings.ingest_chunk_bytes
        fd, _ = open_source(prepared.real, shown=prepared.shown, pin=pin)
        with os.fdopen(fd, "rb"):
            view = FileView(fd, prepared.stream_size)
            pos, line = prepared.stream_next, prepared.stream_line
            calls: dict[str, str] = {}
            while pos < len(view):
                data = next_chunk(view, pos, limit)
                if not data:
                    break  # the file shrank meanwhile: the next ingest sees a rewrite
                entries, line = self._plain_entries(
                    data, line, prepared.shown, prepared.header.session_id, calls
                )
                pos += len(data)
                del data
                if len(calls) > _STREAM_CALLS:
                    calls.clear()
                if not entries:
                    continue
                written = yield from self._write(
                    ws,
                    entries,
                    self._index(entries),
                    source=str(prepared.real),
                    fallback_time=prepared.mtime,
                    continuing=True,
                    where=prepared.shown,
                    deltas=deltas,
                )
                result.messages += len(written.inserted)
                result.forgotten += written.forgotten
                result.skipped += len(entries) - len(written.inserted) - written.forgotten
                result.sessions |= {e.session_id for e in entries} & written.states.keys()
                if len(deltas.df) + len(deltas.sf) > _STREAM_TERMS:
                    # Another pass over vocabulary rows in this transaction: a writer
                    # it deadlocks with is retried by the driver.
                    yield from store.apply_deltas(ws, deltas)
                    deltas.clear()
            parser = adapters.ADAPTERS[prepared.format].parser
            return _record(str(prepared.real), view, pos, line, parser)

    @staticmethod
    def _parse(
        adapter: adapters.Adapter, data: bytes, resume: Resume, shown: str, header: Any
    ) -> Parsed:
        try:
            return adapter.parse(data, resume.start, resume.first_line, path=shown, header=header)
        except IngestError as exc:
            if adapter.name == adapters.OPENAI:
                raise _named_formats(exc) from None
            raise

    @staticmethod
    def _check_found(parsed: Parsed, data: bytes, fmt: str, shown: str) -> None:
        """A file read whole must hold something of its format (or be empty)."""
        found = parsed.entries or parsed.titles or parsed.leaf_titles or parsed.recognised
        if found or not data.strip():
            return
        looks = adapters.resembles(data)
        hint = "" if looks == fmt else f"; it looks like {looks}"
        raise IngestError(f"no messages in format {fmt}{hint}", path=shown)

    def _commit_file(
        self,
        workspace: str,
        given: Path,
        real: Path,
        session_id: str | None,
        prepared: _Prepared | None,
        format: str = adapters.AUTO,
        no_cwd: bool = False,
        include_forgotten: bool = False,
        pin: Pin | None = None,
    ) -> Unit[FileResult]:
        """Write one prepared file in one transaction (re-preparing if it went stale)."""

        def work() -> Work[FileResult]:
            deltas = Deltas()
            result = yield from self._write_file(
                workspace,
                given,
                real,
                session_id,
                prepared,
                format,
                deltas,
                include_forgotten=include_forgotten,
                pin=pin,
            )
            yield from store.apply_deltas(workspace, deltas, final=True)
            result.no_cwd = no_cwd
            return result

        return Unit(work=work, workspace=workspace, write=True, context=f"ingesting {given}")

    def _write_file(
        self,
        workspace: str,
        given: Path,
        real: Path,
        session_id: str | None,
        prepared: _Prepared | None,
        format: str,
        deltas: Deltas,
        *,
        include_forgotten: bool = False,
        pin: Pin | None = None,
    ) -> Work[FileResult]:
        """Write one file inside the caller's transaction; statistics go to `deltas`.

        With `include_forgotten`, the sessions the user forgot from this file come
        back: their tombstones go, and the file is read again whole.
        """
        shown = str(given)
        record = yield from store.lock_file(workspace, str(real))
        if prepared is None or prepared.snapshot != record:
            prepared = self._prepare(given, real, record, session_id, format, pin)
        moved_from: str | None = None
        if record is None and not prepared.unchanged:
            moved = yield from self._moved_from(workspace, real, prepared, pin)
            if moved is not None:
                # The same file at a new path: re-home what it stored, read on.
                yield from store.lock_file(workspace, moved.path)
                yield from store.relocate(workspace, moved.path, str(real))
                moved_from, record = moved.path, replace(moved, path=str(real))
                prepared = self._prepare(given, real, record, session_id, format, pin)
        restored: list[str] = []
        if include_forgotten:
            restored = yield from store.restore_forgotten(workspace, str(real))
            if restored and (prepared.start or prepared.unchanged):
                # What was read before skipped them: read it all again.
                again = self._prepare(given, real, None, session_id, format, pin)
                prepared = replace(again, snapshot=record, rewrite=True)
        parsed = prepared.parsed
        result = FileResult(
            path=shown,
            workspace=workspace,
            format=prepared.format,
            rewritten=prepared.rewrite,
            unchanged=prepared.unchanged,
            bad_lines=parsed.skipped_lines,
            warnings=list(parsed.problems),
            unknown_events=dict(parsed.unknown),
            restored=restored,
            moved_from=moved_from,
        )
        if prepared.unchanged:
            return result
        source = str(real)
        adapter = adapters.ADAPTERS[prepared.format]
        if prepared.rewrite:
            for old in (yield from store.sessions_from_source(workspace, source)):
                yield from store.forget_session(workspace, old, deltas)
            if adapter.leaf_titles:
                yield from store.forget_leaf_titles(workspace, source)
        inserted_ids: set[str] = set()
        states: dict[str, SessionState] = {}
        if prepared.entries or parsed.titles or parsed.parents:
            written = yield from self._write(
                workspace,
                prepared.entries,
                prepared.indexed,
                source=source,
                fallback_time=prepared.mtime,
                continuing=prepared.start > 0,
                where=shown,
                assign_seq=not adapter.seq_from_line,
                deltas=deltas,
                titles=parsed.titles,
                parents=parsed.parents,
            )
            result.messages = len(written.inserted)
            result.forgotten = written.forgotten
            result.skipped = len(prepared.entries) - len(written.inserted) - written.forgotten
            result.sessions = {e.session_id for e in prepared.entries} & written.states.keys()
            inserted_ids = written.entry_ids
            states = written.states
        if adapter.leaf_titles and (parsed.leaf_titles or inserted_ids):
            yield from self._resolve_leaf_titles(
                workspace, source, parsed, inserted_ids, states, deltas
            )
        done = prepared.done
        if prepared.stream_next is not None:
            done = yield from self._write_stream(workspace, prepared, pin, deltas, result)
        yield from store.record_file(workspace, done)
        return result

    def _moved_from(
        self, ws: str, real: Path, prepared: _Prepared, pin: Pin | None
    ) -> Work[FileRecord | None]:
        """The record of the file this one was at another path, if it moved here.

        Candidates are records whose first window is this file's and those of the
        files its sessions came from; one is this file when its path no longer
        exists, it was read with the same mapping, and this file starts with the
        bytes it recorded. A copy (the old path still there) is not a move.
        """
        ids = {e.session_id for e in prepared.entries} | set(prepared.parsed.titles)
        candidates = yield from store.moved_candidates(ws, [prepared.head], ids)
        parser = adapters.ADAPTERS[prepared.format].parser
        found = [
            c
            for c in sorted(candidates, key=lambda r: r.path)
            if c.path != str(real) and c.parser in (parser, None) and not os.path.lexists(c.path)
        ]
        if not found:
            return None
        if is_assembled(real):  # its bytes are the assembled session
            try:
                data = read_source(real, shown=prepared.shown, pin=pin).data
            except IngestError:
                return None
            return next((c for c in found if same_prefix(data, c)), None)
        try:
            fd, st = open_source(real, shown=prepared.shown, pin=pin)
        except IngestError:
            return None
        with os.fdopen(fd, "rb"):
            view = FileView(fd, st.st_size)  # the windows are read, not the file
            return next((c for c in found if same_prefix(view, c)), None)

    def _resolve_leaf_titles(
        self,
        ws: str,
        source: str,
        parsed: Parsed,
        inserted_ids: set[str],
        states: dict[str, SessionState],
        deltas: Deltas,
    ) -> Work[None]:
        """Store the file's summary titles, then title every session whose named
        message is now stored (from this file or any other, this run or an earlier).

        Of several titles for one session, the one naming its latest message wins;
        a generated title never replaces one the user chose.
        """
        if parsed.leaf_titles:
            latest = {t.leaf_uuid: t.title for t in parsed.leaf_titles}
            yield from store.save_leaf_titles(ws, source, latest)
        # A summary names a line's uuid: the id of the first entry of that line.
        keys = {t.leaf_uuid for t in parsed.leaf_titles} | {i for i in inserted_ids if "#" not in i}
        best: dict[str, tuple[int, str]] = {}
        for sid, seq, title in (yield from store.resolve_leaf_titles(ws, sorted(keys))):
            if sid not in best or seq >= best[sid][0]:
                best[sid] = (seq, title)
        if not best:
            return
        missing = [sid for sid in best if sid not in states]
        if missing:
            states = {**states, **(yield from store.lock_sessions(ws, missing, None))}
        for sid, (seq, title) in sorted(best.items()):
            state = states.get(sid)
            if state is None:
                continue
            if state.title is not None and not (
                state.title_auto and (state.title_leaf_seq is None or seq >= state.title_leaf_seq)
            ):
                continue
            state.title, state.title_auto, state.title_leaf_seq = title, True, seq
            changed = self._update_state(state, [], state.next_seq, deltas, force=True)
            if changed is not None:
                yield from store.update_session(ws, state, *changed)

    def ingest_file(
        self,
        path: str | os.PathLike[str],
        *,
        workspace: str,
        session_id: str | None = None,
        roots: Sequence[Path] | None = None,
        format: str = adapters.AUTO,
        workspace_from_cwd: bool = False,
        include_forgotten: bool = False,
    ) -> FileResult:
        """Ingest one session file in one transaction; errors are `IngestError`.

        `format` is one of `adapters.FORMAT_CHOICES` (``auto``: detected per file).
        With `workspace_from_cwd`, an agent log naming its working directory goes to
        the workspace of that name (a worktree's to its project's); `workspace` is
        the fallback, and the result says when it was used (`FileResult.no_cwd`).
        Sessions the user forgot (`PgSearch.forget`) stay forgotten unless
        `include_forgotten` brings them back.
        """
        workspace, given, real, no_cwd, pin = self._locate(
            path,
            workspace=workspace,
            roots=roots,
            format=format,
            workspace_from_cwd=workspace_from_cwd,
        )
        return self._sync_store().driver.run(
            self._commit_file(
                workspace,
                given,
                real,
                session_id,
                None,
                format,
                no_cwd,
                include_forgotten=include_forgotten,
                pin=pin,
            )
        )

    def locate(
        self,
        path: str | os.PathLike[str],
        *,
        workspace: str,
        roots: Sequence[Path] | None = None,
        format: str = adapters.AUTO,
        workspace_from_cwd: bool = False,
    ) -> tuple[str, Path, Path, Pin | None]:
        """`ingest_file`'s checks: the workspace, the path as given, its real path and,
        under `roots`, the identity the file read must have (`prepared_file`'s `pin`)."""
        ws, given, real, _, pin = self._locate(
            path,
            workspace=workspace,
            roots=roots,
            format=format,
            workspace_from_cwd=workspace_from_cwd,
        )
        return ws, given, real, pin

    def _locate(
        self,
        path: str | os.PathLike[str],
        *,
        workspace: str,
        roots: Sequence[Path] | None,
        format: str,
        workspace_from_cwd: bool,
    ) -> tuple[str, Path, Path, bool, Pin | None]:
        workspace = check_workspace(workspace)
        check_format(format)
        given = Path(path)
        real = confine(given, roots)
        pin = pin_confined(real, roots, shown=str(given))
        no_cwd = False
        if workspace_from_cwd:
            workspace, no_cwd = workspace_of(real, str(given), format, workspace, pin)
        return workspace, given, real, no_cwd, pin

    def prepared_file(
        self,
        workspace: str,
        given: Path,
        real: Path,
        record: FileRecord | None,
        session_id: str | None = None,
        format: str = adapters.AUTO,
        include_forgotten: bool = False,
        pin: Pin | None = None,
    ) -> Unit[FileResult]:
        """Read and parse the file now, against `record` (its last known record), and
        return the unit that writes it, which reads the file again only if its record
        changed meanwhile. For hosts that read files off their event loop. `pin` is
        `locate`'s: the file read must be the one confined."""
        prepared = self._prepare(given, real, record, session_id, format, pin)
        return self._commit_file(
            workspace,
            given,
            real,
            session_id,
            prepared,
            format,
            include_forgotten=include_forgotten,
            pin=pin,
        )

    def ingest_paths(
        self,
        paths: Iterable[str | os.PathLike[str]],
        *,
        workspace: str,
        roots: Sequence[Path] | None = None,
        on_file: Callable[[FileResult], None] | None = None,
        format: str = adapters.AUTO,
        workspace_from_cwd: bool = False,
        include_forgotten: bool = False,
    ) -> IngestReport:
        """Ingest files and directories; a bad file is reported and the rest go on.

        `format`, `workspace_from_cwd` and `include_forgotten` are as for `ingest_file`.

        The next file is read, parsed and indexed in a worker thread while the current
        one is written, so Python work overlaps the server's index maintenance. The
        worker starts from a snapshot of the file records; a file whose record changed
        meanwhile is prepared again inside its transaction.
        """
        workspace = check_workspace(workspace)
        check_format(format)
        report = IngestReport()
        files: list[tuple[Path, Path | IngestError]] = []
        targets: dict[Path, str] = {}
        no_cwd: set[Path] = set()
        pins: dict[Path, Pin] = {}
        for path in find_sources(paths, report.unreadable):
            try:
                resolved = confine(path, roots)
                pin = pin_confined(resolved, roots, shown=str(path))
                if pin is not None:
                    pins[resolved] = pin
                if workspace_from_cwd:
                    targets[resolved], fell_back = workspace_of(
                        resolved, str(path), format, workspace, pin
                    )
                    if fell_back:
                        no_cwd.add(resolved)
                files.append((path, resolved))
            except IngestError as exc:
                files.append((path, exc))
        snapshots: dict[str, dict[str, FileRecord]] = {}
        db = self._sync_store()
        for ws in sorted({workspace, *targets.values()}):
            snapshots[ws] = db.read(
                partial(
                    store.file_records,
                    ws,
                    [
                        str(r)
                        for _, r in files
                        if isinstance(r, Path) and targets.get(r, workspace) == ws
                    ],
                ),
                ws,
                context="reading file records",
            )

        def prepare(item: tuple[Path, Path | IngestError]) -> _Prepared | IngestError:
            given, real = item
            if isinstance(real, IngestError):
                return real
            record = snapshots[targets.get(real, workspace)].get(str(real))
            try:
                return self._prepare(given, real, record, None, format, pins.get(real))
            except IngestError as exc:
                return exc

        def commit_group(ws: str, group: list[tuple[Path, Path, _Prepared]]) -> list[FileResult]:
            # One transaction for the group, one savepoint per file: each file is
            # still all or nothing, while the commit, the vocabulary upsert and the
            # statistics update are paid once per group instead of once per file.
            def work() -> Work[list[FileResult]]:
                results = []
                deltas = Deltas()
                for given, real, prepared in group:
                    mine = Deltas()
                    try:
                        result = yield from savepoint(
                            self._write_file(
                                ws,
                                given,
                                real,
                                None,
                                prepared,
                                format,
                                mine,
                                include_forgotten=include_forgotten,
                                pin=pins.get(real),
                            )
                        )
                        deltas.merge(mine)
                    except IngestError as exc:
                        result = FileResult(path=str(given), error=exc)
                    result.no_cwd = real in no_cwd
                    results.append(result)
                yield from store.apply_deltas(ws, deltas, final=True)
                return results

            return db.write(work, ws, context="ingesting files")

        def report_all(results: list[FileResult]) -> None:
            for result in results:
                report.add(result)
                if on_file is not None:
                    on_file(result)

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pgsearch-prepare") as pool:
            # The worker prepares files ahead (bounded) while groups are written.
            futures = deque(pool.submit(prepare, item) for item in files[:PREPARE_AHEAD])
            group: list[tuple[Path, Path, _Prepared]] = []
            group_ws = workspace
            group_entries = 0
            for index, (given, real) in enumerate(files):
                prepared = futures.popleft().result()
                if index + PREPARE_AHEAD < len(files):
                    futures.append(pool.submit(prepare, files[index + PREPARE_AHEAD]))
                if isinstance(prepared, IngestError):
                    report_all([FileResult(path=str(given), error=prepared)])
                    continue
                assert isinstance(real, Path)
                ws = targets.get(real, workspace)
                if group and (
                    ws != group_ws
                    or len(group) >= GROUP_FILES
                    or group_entries + len(prepared.entries) > GROUP_ENTRIES
                ):
                    report_all(commit_group(group_ws, group))
                    group, group_entries = [], 0
                group_ws = ws
                group.append((given, real, prepared))
                group_entries += len(prepared.entries)
            if group:
                report_all(commit_group(group_ws, group))
        if report.messages >= MAINTAIN_AFTER:
            db.after_bulk_load(report.messages)
        return report

    # --- moves ----------------------------------------------------------------------

    def relocate(
        self, *, workspace: str, old: str | os.PathLike[str], new: str | os.PathLike[str]
    ) -> Unit[int]:
        """The unit that re-homes what was ingested from `old` (a file or a directory,
        which need not exist any more) at `new`: file records, the sessions' sources,
        waiting titles and tombstones. Its value is how many file records moved."""
        workspace = check_workspace(workspace)
        old_path = str(_absolute(old))
        new_path = str(_absolute(new))
        return Unit(
            work=partial(store.relocate, workspace, old_path, new_path),
            workspace=workspace,
            write=True,
            context=f"relocating {old} to {new}",
        )

    # --- API appends --------------------------------------------------------------

    def append(
        self, *, workspace: str, session_id: str, messages: Sequence[dict[str, Any]]
    ) -> Unit[int]:
        """The unit that appends messages to a session (searchable once it committed)."""
        workspace = check_workspace(workspace)
        try:
            check_stored_key("session_id", session_id)
        except ValueError as exc:
            raise IngestError(f"{exc}, got {session_id!r:.80}") from None
        if isinstance(messages, str | bytes | dict) or not isinstance(messages, Sequence):
            raise IngestError(
                f"messages must be a list of message objects, got {type(messages).__name__}"
            )
        entries: list[Entry] = []
        calls: dict[str, str] = {}
        for i, obj in enumerate(messages):
            try:
                entry = entry_from_object(
                    obj, seq=i, session_id=session_id, tool_names_by_call=calls
                )
            except (ValueError, RecursionError) as exc:
                raise IngestError(f"message {i}: {exc}") from None
            if entry.session_id != session_id:
                raise IngestError(f"message {i}: session_id differs from the append target")
            for call_id, name in zip(entry.tool_call_ids, entry.tool_names(), strict=False):
                calls[call_id] = name
            entries.append(entry)
        # Indexed here, before the unit runs: an asyncio host builds the unit in a
        # worker thread, so parsing and indexing never hold its event loop.
        indexed = [
            index_entry(
                e,
                index_policy=self.settings.index_policy,
                max_chars=self.settings.max_indexed_chars,
            )
            for e in entries
        ]

        def work() -> Work[int]:
            written = yield from self._write(
                workspace,
                entries,
                indexed,
                source=None,
                fallback_time=datetime.now(UTC),
                continuing=True,
                where=f"session {session_id}",
                assign_seq=True,
            )
            return len(written.inserted)

        return Unit(
            work=work if entries else partial(returning, 0),
            workspace=workspace,
            write=True,
            context=f"appending to {session_id}",
        )

    # --- shared write path --------------------------------------------------------

    def _write(
        self,
        ws: str,
        entries: list[Entry],
        indexed: list[IndexedText] | None = None,
        *,
        source: str | None,
        fallback_time: datetime,
        continuing: bool,
        where: str,
        assign_seq: bool = False,
        deltas: Deltas | None = None,
        titles: dict[str, SessionTitle] | None = None,
        parents: dict[str, str] | None = None,
    ) -> Work[_Written]:
        """Insert entries; statistics go to `deltas`, or are applied here when None
        (then with the transaction's last round trip).

        `titles` and `parents` are what the source says of its sessions beyond their
        entries (a title line, a sub-agent's parent).
        """
        titles = titles or {}
        parents = parents or {}
        session_ids = {e.session_id for e in entries} | set(titles) | set(parents)
        forgotten = 0
        if source is not None:
            # A session the user forgot is not brought back by its file.
            gone = yield from store.forgotten_among(ws, session_ids, source)
            if gone:
                keep = [e.session_id not in gone for e in entries]
                forgotten = keep.count(False)
                entries = [e for e, k in zip(entries, keep, strict=True) if k]
                if indexed is not None:
                    indexed = [ix for ix, k in zip(indexed, keep, strict=True) if k]
                titles = {sid: t for sid, t in titles.items() if sid not in gone}
                parents = {sid: p for sid, p in parents.items() if sid not in gone}
                session_ids -= gone
        states = yield from store.lock_sessions(ws, session_ids, source)
        for state in states.values():
            if state.message_count and state.source != source:
                origin = state.source or "API appends"
                # A file's entries carry their line (seq = line - 1 until assigned).
                first = next((e for e in entries if e.session_id == state.session_id), None)
                raise IngestError(
                    f"session {state.session_id!r} already holds messages from {origin}",
                    path=where,
                    line=first.seq + 1 if source is not None and first is not None else None,
                )
        unnamed: dict[str, set[str]] = {}
        for entry in entries:
            call_id = _unnamed_call(entry)
            if call_id is not None and states[entry.session_id].message_count:
                unnamed.setdefault(entry.session_id, set()).add(call_id)
        if unnamed:
            # A tool result whose call was stored earlier (an earlier append, an
            # earlier pass over a growing file) is named after that call.
            found = yield from store.tool_call_names(ws, unnamed)
            entries = [_named(e, found.get(e.session_id, {})) for e in entries]
        turns = {sid: (s.last_turn if continuing else 0) for sid, s in states.items()}
        last_time = {sid: (s.updated_at if continuing else None) for sid, s in states.items()}
        next_seq = {sid: s.next_seq for sid, s in states.items()}
        rows: list[MessageRow] = []
        changed_fields: set[str] = set()
        for position, entry in enumerate(entries):
            sid = entry.session_id
            if entry.role == "user" and entry.kind == policy.USER_TEXT:
                turns[sid] += 1
            created = entry.created_at or last_time[sid] or fallback_time
            last_time[sid] = created
            seq = next_seq[sid] if assign_seq else entry.seq
            next_seq[sid] = max(next_seq[sid], seq + 1)
            ix = (
                indexed[position]
                if indexed is not None
                else index_entry(
                    entry,
                    index_policy=self.settings.index_policy,
                    max_chars=self.settings.max_indexed_chars,
                )
            )
            rows.append(
                MessageRow(
                    session_id=sid,
                    seq=seq,
                    entry_id=entry.entry_id,
                    kind=entry.kind,
                    role=entry.role,
                    turn=turns[sid],
                    tool_name=entry.tool_name,
                    created_at=created,
                    content=entry.content,
                    arguments=entry.arguments,
                    extra=entry.extra,
                    tsvector=ix.tsvector,
                    terms=ix.terms,
                    token_count=ix.length,
                )
            )
            state = states[sid]
            if entry.title is not None:
                state.title, state.title_auto, state.title_leaf_seq = entry.title, False, None
                changed_fields.add(sid)
            if entry.summary is not None:
                state.summary = entry.summary
                changed_fields.add(sid)
        for sid, title in titles.items():
            state = states[sid]
            if title.auto and state.title is not None and not state.title_auto:
                continue  # a chosen title stays
            if (state.title, state.title_auto) != (title.title, title.auto):
                state.title, state.title_auto, state.title_leaf_seq = title.title, title.auto, None
                changed_fields.add(sid)
        for sid, parent in parents.items():
            if states[sid].parent_session_id != parent:
                states[sid].parent_session_id = parent
                changed_fields.add(sid)
        apply_here = deltas is None
        deltas = Deltas() if deltas is None else deltas
        inserted: set[tuple[str, int]] = set()
        for i in range(0, len(rows), _BATCH_ROWS):
            inserted |= yield from store.insert_messages(ws, rows[i : i + _BATCH_ROWS], deltas)
        entry_ids: set[str] = set()
        for sid, state in states.items():
            mine = [r for r in rows if r.session_id == sid and (sid, r.seq) in inserted]
            entry_ids.update(r.entry_id for r in mine if r.entry_id)
            changed = self._update_state(
                state, mine, next_seq[sid], deltas, force=sid in changed_fields
            )
            if changed is not None:
                yield from store.update_session(ws, state, *changed)
        if apply_here:
            yield from store.apply_deltas(ws, deltas, final=True)
        return _Written(inserted=inserted, entry_ids=entry_ids, states=states, forgotten=forgotten)

    def _update_state(
        self,
        state: SessionState,
        rows: list[MessageRow],
        next_seq: int,
        deltas: Deltas,
        *,
        force: bool = False,
    ) -> tuple[str, int] | None:
        """Fold new rows (and changed title/summary, when `force`) into the session's
        counters and field statistics; returns its field tsvector and length to
        store, or None when nothing changed."""
        if not rows and not force and state.message_count:
            return None
        if rows:
            times = [r.created_at for r in rows]
            state.created_at = min([*times, *([state.created_at] if state.created_at else [])])
            state.updated_at = max([*times, *([state.updated_at] if state.updated_at else [])])
            state.message_count += len(rows)
            state.last_turn = max(state.last_turn, max(r.turn for r in rows))
        state.next_seq = max(state.next_seq, next_seq)
        ix = index_session_fields(
            state.title, state.summary, max_chars=self.settings.max_indexed_chars
        )
        if set(ix.terms) != set(state.field_terms) or ix.length != state.field_len:
            deltas.sf.subtract(state.field_terms)
            deltas.sf.update(ix.terms)
            deltas.indexed[FIELDS_STAT] += bool(ix.terms) - bool(state.field_terms)
            deltas.length[FIELDS_STAT] += ix.length - state.field_len
            state.field_terms = ix.terms
            state.field_len = ix.length
        return ix.tsvector, ix.length


def _unnamed_call(entry: Entry) -> str | None:
    """The call id of a tool result that names no tool, if it has one."""
    if entry.role != "tool" or entry.tool_name is not None or not entry.extra:
        return None
    call_id = entry.extra.get("tool_call_id")
    return call_id if isinstance(call_id, str) and call_id else None


def _named(entry: Entry, names: dict[str, str]) -> Entry:
    call_id = _unnamed_call(entry)
    if call_id is None or call_id not in names:
        return entry
    return replace(entry, tool_name=names[call_id])


@dataclass(frozen=True, slots=True)
class _Written:
    """What `Ingestor._write` stored: row keys, entry ids, and the sessions it locked."""

    inserted: set[tuple[str, int]]
    entry_ids: set[str]
    states: dict[str, SessionState]
    #: Entries not stored because their session was forgotten.
    forgotten: int = 0

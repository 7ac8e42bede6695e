"""Ingest: files and appended messages into the store, lossless and idempotent.

A file is one transaction: either every new line of it lands, with vocabulary and
statistics updated to match, or nothing does. ``seq`` is a message's 0-based line
number, so re-reading a file inserts nothing twice (``ON CONFLICT DO NOTHING`` on
the primary key) and statistics only count rows actually inserted. For each file
the consumed byte length and a SHA-256 of those bytes are recorded; when the file
still starts with exactly those bytes, only the lines after them are parsed.
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
from pgsearch.messages import Entry, entry_from_object, iter_jsonl
from pgsearch.settings import Settings
from pgsearch.types import MAX_ID_CHARS
from pgsearch.validate import check_workspace

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
    messages: int = 0
    skipped: int = 0
    error: IngestError | None = None
    #: Where the file went and how it was read (agent logs may pick the workspace).
    workspace: str = ""
    format: str = ""
    #: The file no longer started with what was ingested before, so it was re-read.
    rewritten: bool = False


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
    format: str = adapters.OPENAI
    #: The file no longer starts with the bytes ingested before: forget its sessions.
    rewrite: bool = False


@dataclass(slots=True)
class IngestReport:
    files: int = 0
    sessions: int = 0
    messages: int = 0
    skipped: int = 0
    errors: list[IngestError] = field(default_factory=list)

    def add(self, result: FileResult) -> None:
        self.files += 1
        self.sessions += len(result.sessions)
        self.messages += result.messages
        self.skipped += result.skipped
        if result.error is not None:
            self.errors.append(result.error)

    def summary(self) -> str:
        return (
            f"{self.files} files, {self.sessions} sessions, {self.messages} messages, "
            f"{self.skipped} skipped, {len(self.errors)} errors"
        )


def check_format(format: str) -> str:
    """`format` if it is one of `adapters.FORMAT_CHOICES`, else `ConfigError`."""
    if format not in adapters.FORMAT_CHOICES:
        raise ConfigError(
            f"unknown format {format!r}; use one of {', '.join(adapters.FORMAT_CHOICES)}"
        )
    return format


#: Bytes read from the head of a file to find its format and working directory.
_HEAD_BYTES = 1 << 20


def workspace_of(real: Path, shown: str, format: str, fallback: str) -> str:
    """The workspace an agent log's working directory names, else `fallback`."""
    try:
        with real.open("rb") as fh:
            head = fh.read(_HEAD_BYTES)
    except OSError:
        return fallback  # reading the file again reports the error
    fmt = adapters.resolve_format(format, head)
    if fmt == adapters.OPENAI:
        return fallback
    cwd = adapters.ADAPTERS[fmt].header(head, default_session=real.stem).cwd
    if not cwd:
        return fallback
    try:
        return check_workspace(cwd)
    except ConfigError as exc:
        raise IngestError(f"working directory as workspace: {exc}", path=shown) from None


def find_jsonl(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files named directly, plus every ``*.jsonl`` under directories (sorted)."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*.jsonl") if p.is_file()))
        else:
            found.append(path)
    return found


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
    ) -> _Prepared:
        """Read and parse the new part of a file and index its entries (no database)."""
        shown = str(given)
        if not real.is_file():
            raise IngestError("not a readable file", path=shown)
        try:
            data = real.read_bytes()
            mtime = datetime.fromtimestamp(real.stat().st_mtime, tz=UTC)
        except OSError as exc:
            raise IngestError(f"cannot read: {exc.strerror}", path=shown) from None
        fmt = adapters.resolve_format(format, data)
        if fmt != adapters.OPENAI:
            return self._prepare_log(shown, real, record, session_id, data, mtime, fmt)
        start, first_line = 0, 0
        if (
            record is not None
            and record.size <= len(data)
            and hashlib.sha256(data[: record.size]).hexdigest() == record.digest
        ):
            start, first_line = record.size, record.lines
        entries = list(
            iter_jsonl(
                data[start:],
                path=shown,
                session_id=session_id or real.stem,
                first_line=first_line,
            )
        )
        indexed = [
            index_entry(
                e,
                index_policy=self.settings.index_policy,
                max_chars=self.settings.max_indexed_chars,
            )
            for e in entries
        ]
        # Only complete lines are recorded as consumed; a partial last line is read
        # now but read again next time, when it may have grown.
        consumed = data.rfind(b"\n") + 1
        done = FileRecord(
            str(real),
            consumed,
            data.count(b"\n", 0, consumed),
            hashlib.sha256(data[:consumed]).hexdigest(),
        )
        return _Prepared(shown, real, record, done, start, first_line, entries, indexed, mtime)

    def _prepare_log(
        self,
        shown: str,
        real: Path,
        record: FileRecord | None,
        session_id: str | None,
        data: bytes,
        mtime: datetime,
        fmt: str,
    ) -> _Prepared:
        """`_prepare` for agent logs (`adapters`): new complete lines, or all of a rewrite.

        Their entries get consecutive seqs per session when written (``assign_seq``),
        so a grown file continues at the session's next seq. A file that no longer
        starts with the bytes ingested before was rewritten: it is read whole and its
        old sessions are forgotten in the same transaction.
        """
        adapter = adapters.ADAPTERS[fmt]
        header = adapter.header(data, default_session=real.stem)
        if session_id and session_id != header.session_id:
            header = replace(header, session_id=session_id)
        # Only complete lines are read: a line still being written waits for the next
        # pass, so a log can be ingested while its agent is running.
        consumed = data.rfind(b"\n") + 1
        start, first_line, rewrite = 0, 0, False
        if record is not None:
            if (
                record.size <= consumed
                and hashlib.sha256(data[: record.size]).hexdigest() == record.digest
            ):
                start, first_line = record.size, record.lines
            else:
                rewrite = True
        entries = adapter.parse(data, start, consumed, first_line, path=shown, header=header)
        indexed = [
            index_entry(
                e,
                index_policy=self.settings.index_policy,
                max_chars=self.settings.max_indexed_chars,
            )
            for e in entries
        ]
        done = FileRecord(
            str(real),
            consumed,
            data.count(b"\n", 0, consumed),
            hashlib.sha256(data[:consumed]).hexdigest(),
        )
        return _Prepared(
            shown,
            real,
            record,
            done,
            start,
            first_line,
            entries,
            indexed,
            mtime,
            format=fmt,
            rewrite=rewrite,
        )

    def _commit_file(
        self,
        workspace: str,
        given: Path,
        real: Path,
        session_id: str | None,
        prepared: _Prepared | None,
        format: str = adapters.AUTO,
    ) -> Unit[FileResult]:
        """Write one prepared file in one transaction (re-preparing if it went stale)."""

        def work() -> Work[FileResult]:
            deltas = Deltas()
            result = yield from self._write_file(
                workspace, given, real, session_id, prepared, format, deltas
            )
            yield from store.apply_deltas(workspace, deltas, final=True)
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
    ) -> Work[FileResult]:
        """Write one file inside the caller's transaction; statistics go to `deltas`."""
        shown = str(given)
        record = yield from store.lock_file(workspace, str(real))
        if prepared is None or prepared.snapshot != record:
            prepared = self._prepare(given, real, record, session_id, format)
        result = FileResult(
            path=shown,
            skipped=prepared.first_line,
            workspace=workspace,
            format=prepared.format,
            rewritten=prepared.rewrite,
        )
        if prepared.rewrite:
            for old in (yield from store.sessions_from_source(workspace, str(real))):
                yield from store.forget_session(workspace, old, deltas)
        if prepared.entries:
            inserted = yield from self._write(
                workspace,
                prepared.entries,
                prepared.indexed,
                source=str(real),
                fallback_time=prepared.mtime,
                continuing=prepared.start > 0,
                where=shown,
                assign_seq=prepared.format != adapters.OPENAI,
                deltas=deltas,
            )
            result.messages = inserted
            result.skipped += len(prepared.entries) - inserted
            result.sessions = {e.session_id for e in prepared.entries}
        yield from store.record_file(workspace, prepared.done)
        return result

    def ingest_file(
        self,
        path: str | os.PathLike[str],
        *,
        workspace: str,
        session_id: str | None = None,
        roots: Sequence[Path] | None = None,
        format: str = adapters.AUTO,
        workspace_from_cwd: bool = False,
    ) -> FileResult:
        """Ingest one JSON Lines file in one transaction; errors are `IngestError`.

        `format` is one of `adapters.FORMAT_CHOICES` (``auto``: detected per file).
        With `workspace_from_cwd`, an agent log naming its working directory goes to
        the workspace of that name; `workspace` is the fallback.
        """
        workspace, given, real = self.locate(
            path,
            workspace=workspace,
            roots=roots,
            format=format,
            workspace_from_cwd=workspace_from_cwd,
        )
        return self._sync_store().driver.run(
            self._commit_file(workspace, given, real, session_id, None, format)
        )

    def locate(
        self,
        path: str | os.PathLike[str],
        *,
        workspace: str,
        roots: Sequence[Path] | None = None,
        format: str = adapters.AUTO,
        workspace_from_cwd: bool = False,
    ) -> tuple[str, Path, Path]:
        """`ingest_file`'s checks: the workspace, the path as given and its real path."""
        workspace = check_workspace(workspace)
        check_format(format)
        given = Path(path)
        real = confine(given, roots)
        if workspace_from_cwd:
            workspace = workspace_of(real, str(given), format, workspace)
        return workspace, given, real

    def prepared_file(
        self,
        workspace: str,
        given: Path,
        real: Path,
        record: FileRecord | None,
        session_id: str | None = None,
        format: str = adapters.AUTO,
    ) -> Unit[FileResult]:
        """Read and parse the file now, against `record` (its last known record), and
        return the unit that writes it, which reads the file again only if its record
        changed meanwhile. For hosts that read files off their event loop."""
        prepared = self._prepare(given, real, record, session_id, format)
        return self._commit_file(workspace, given, real, session_id, prepared, format)

    def ingest_paths(
        self,
        paths: Iterable[str | os.PathLike[str]],
        *,
        workspace: str,
        roots: Sequence[Path] | None = None,
        on_file: Callable[[FileResult], None] | None = None,
        format: str = adapters.AUTO,
        workspace_from_cwd: bool = False,
    ) -> IngestReport:
        """Ingest files and directories; a bad file is reported and the rest go on.

        `format` and `workspace_from_cwd` are as for `ingest_file`.

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
        for path in find_jsonl(paths):
            try:
                resolved = confine(path, roots)
                if workspace_from_cwd:
                    targets[resolved] = workspace_of(resolved, str(path), format, workspace)
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
                return self._prepare(given, real, record, None, format)
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
                            self._write_file(ws, given, real, None, prepared, format, mine)
                        )
                        deltas.merge(mine)
                    except IngestError as exc:
                        result = FileResult(path=str(given), error=exc)
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

    # --- API appends --------------------------------------------------------------

    def append(
        self, *, workspace: str, session_id: str, messages: Sequence[dict[str, Any]]
    ) -> Unit[int]:
        """The unit that appends messages to a session (searchable once it committed)."""
        workspace = check_workspace(workspace)
        if not isinstance(session_id, str) or not 0 < len(session_id) <= MAX_ID_CHARS:
            raise IngestError(
                f"session_id must be a string of 1 to {MAX_ID_CHARS} characters, "
                f"got {session_id!r:.80}"
            )
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
            entries.append(entry)
        work = partial(
            self._write,
            workspace,
            entries,
            source=None,
            fallback_time=datetime.now(UTC),
            continuing=True,
            where=f"session {session_id}",
            assign_seq=True,
        )
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
    ) -> Work[int]:
        """Insert entries; statistics go to `deltas`, or are applied here when None
        (then with the transaction's last round trip)."""
        states = yield from store.lock_sessions(ws, (e.session_id for e in entries), source)
        for state in states.values():
            if state.message_count and state.source != source:
                origin = state.source or "API appends"
                # A file's entries carry their line (seq = line - 1 until assigned).
                first = next(e for e in entries if e.session_id == state.session_id)
                raise IngestError(
                    f"session {state.session_id!r} already holds messages from {origin}",
                    path=where,
                    line=first.seq + 1 if source is not None else None,
                )
        turns = {sid: (s.last_turn if continuing else 0) for sid, s in states.items()}
        last_time = {sid: (s.updated_at if continuing else None) for sid, s in states.items()}
        next_seq = {sid: s.next_seq for sid, s in states.items()}
        rows: list[MessageRow] = []
        new_fields: dict[str, tuple[str | None, str | None]] = {}
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
            if entry.title is not None or entry.summary is not None:
                title, summary = new_fields.get(sid, (states[sid].title, states[sid].summary))
                new_fields[sid] = (
                    entry.title if entry.title is not None else title,
                    entry.summary if entry.summary is not None else summary,
                )
        apply_here = deltas is None
        deltas = Deltas() if deltas is None else deltas
        inserted: set[tuple[str, int]] = set()
        for i in range(0, len(rows), _BATCH_ROWS):
            inserted |= yield from store.insert_messages(ws, rows[i : i + _BATCH_ROWS], deltas)
        for sid, state in states.items():
            mine = [r for r in rows if r.session_id == sid and (sid, r.seq) in inserted]
            changed = self._update_state(state, mine, new_fields.get(sid), next_seq[sid], deltas)
            if changed is not None:
                tsv, field_len = changed
                yield from store.update_session(ws, state, tsv, field_len)
        if apply_here:
            yield from store.apply_deltas(ws, deltas, final=True)
        return len(inserted)

    def _update_state(
        self,
        state: SessionState,
        rows: list[MessageRow],
        fields: tuple[str | None, str | None] | None,
        next_seq: int,
        deltas: Deltas,
    ) -> tuple[str, int] | None:
        if not rows and fields is None and state.message_count:
            return None
        if rows:
            times = [r.created_at for r in rows]
            state.created_at = min([*times, *([state.created_at] if state.created_at else [])])
            state.updated_at = max([*times, *([state.updated_at] if state.updated_at else [])])
            state.message_count += len(rows)
            state.last_turn = max(state.last_turn, max(r.turn for r in rows))
        state.next_seq = max(state.next_seq, next_seq)
        if fields is not None:
            state.title, state.summary = fields
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

"""Ingest: files and appended messages into the store, lossless and idempotent.

A file is one transaction: either every new line of it lands, with vocabulary and
statistics updated to match, or nothing does. For each file the consumed byte length
and digests of those bytes are recorded, with the format and mapping version it was
read with; when the file still starts with exactly those bytes and the mapping is the
same, only the lines after them are parsed (`pgsearch.ingest.files`). In pgsearch's
own format ``seq`` is a message's 0-based line number, so re-reading a file inserts
nothing twice (``ON CONFLICT DO NOTHING`` on the primary key); agent logs continue
each session's seqs. A file that no longer starts with what was read, or was read by
an older mapping, is read again whole and replaces its sessions.

Agent logs may name sessions other than the file's own: sub-agent conversations
(linked to their parent) and, in Claude Code ``summary`` lines, the session a title
belongs to, through the uuid of one of its messages. Those titles are stored and
applied when that message is stored, in this file, another file of the run, or a
later run.

An append is one transaction too, and each of its messages carries a key the store
keeps unique in its session: the message's own id, else one the append call assigns.
The driver runs an append again when its ``COMMIT`` outcome is unknown; the new
attempt finds by those keys what an earlier one stored and stores nothing twice, and
a message sent again with its id is stored once.

The wing, in the order a file goes through it:

- `targets`: which files, where each goes (`FileJob`);
- `files`: a file's identity, where to read on (pure);
- `prepare`: read, parse and index the new part (no database);
- `write`: the stages of a write in one transaction, files and appends alike;
- `batch`: many files, prepared ahead and written in groups;
- `report`: what each file and the whole ingest did.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from pgsearch import adapters
from pgsearch.db import store
from pgsearch.db.store import FileRecord, Store
from pgsearch.db.work import Unit, Work, returning
from pgsearch.errors import ConfigError, IngestError
from pgsearch.ingest import batch
from pgsearch.ingest.files import (
    FILE_WINDOW,
    Resume,
    file_windows,
    next_chunk,
    resume_point,
    same_prefix,
)
from pgsearch.ingest.prepare import Prepared, index_entries, prepare
from pgsearch.ingest.report import FileResult, IngestReport
from pgsearch.ingest.targets import FileJob, absolute, confine, file_job, find_jsonl
from pgsearch.ingest.write import Part, WriteState, finish, write_append, write_files
from pgsearch.messages import Entry, entry_from_object
from pgsearch.settings import Settings
from pgsearch.validate import check_stored_key, check_workspace

__all__ = [
    "FILE_WINDOW",
    "FileJob",
    "FileResult",
    "IngestReport",
    "Ingestor",
    "Prepared",
    "Resume",
    "confine",
    "file_windows",
    "find_jsonl",
    "next_chunk",
    "resume_point",
    "same_prefix",
]


class Ingestor:
    """Builds the units of work of ingest (and runs them through a `Store`), under the
    indexing policy of `settings`."""

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

    def locate(
        self,
        path: str | os.PathLike[str],
        *,
        workspace: str,
        roots: Sequence[Path] | None = None,
        format: str = adapters.AUTO,
        workspace_from_cwd: bool = False,
        session_id: str | None = None,
        include_forgotten: bool = False,
    ) -> FileJob:
        """The job of ingesting `path` (`pgsearch.ingest.targets.file_job`): checks
        that need no database, done before anything is read."""
        return file_job(
            path,
            workspace=workspace,
            roots=roots,
            format=format,
            workspace_from_cwd=workspace_from_cwd,
            session_id=session_id,
            include_forgotten=include_forgotten,
        )

    def file_unit(self, job: FileJob, prepared: Prepared | None = None) -> Unit[FileResult]:
        """The unit that writes one file in one transaction: as `prepared` (which was
        prepared against the record the file had then), or prepared in it."""

        def work() -> Work[FileResult]:
            tx = WriteState(job.workspace, self.settings)
            (result,) = yield from write_files(tx, [(job, prepared)])
            yield from finish(tx)
            return result

        return Unit(
            work=work, workspace=job.workspace, write=True, context=f"ingesting {job.given}"
        )

    def prepared_file(self, job: FileJob, record: FileRecord | None) -> Unit[FileResult]:
        """Read, parse and index the file now, against `record` (its last known
        record), and return the unit that writes it, which reads the file again only
        if its record changed meanwhile. For hosts that read files off their event
        loop."""
        return self.file_unit(job, prepare(job, record, self.settings))

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
        job = self.locate(
            path,
            workspace=workspace,
            roots=roots,
            format=format,
            workspace_from_cwd=workspace_from_cwd,
            session_id=session_id,
            include_forgotten=include_forgotten,
        )
        db = self._sync_store()
        # Read and parsed before the transaction, against the record the file has now
        # (re-read in it only if that changed): the transaction then asks for what the
        # file's sessions need together with taking the file, and holds its locks
        # while writing only.
        records = db.read(
            partial(store.file_records, job.workspace, [job.source]),
            job.workspace,
            context="reading file records",
        )
        return db.driver.run(self.prepared_file(job, records.get(job.source)))

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

        `format`, `workspace_from_cwd` and `include_forgotten` are as for
        `ingest_file`. Files are prepared ahead of the writer and written in groups,
        each file still all or nothing (`pgsearch.ingest.batch`).
        """
        return batch.ingest_paths(
            self._sync_store(),
            self.settings,
            paths,
            workspace=workspace,
            roots=roots,
            on_file=on_file,
            format=format,
            workspace_from_cwd=workspace_from_cwd,
            include_forgotten=include_forgotten,
        )

    # --- moves ----------------------------------------------------------------------

    def relocate(
        self, *, workspace: str, old: str | os.PathLike[str], new: str | os.PathLike[str]
    ) -> Unit[int]:
        """The unit that re-homes what was ingested from `old` (a file or a directory,
        which need not exist any more) at `new`: file records, the sessions' sources,
        waiting titles and tombstones. Its value is how many file records moved."""
        workspace = check_workspace(workspace)
        return Unit(
            work=partial(store.relocate, workspace, str(absolute(old)), str(absolute(new))),
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
        entries = _append_entries(session_id, messages)
        if not entries:
            return Unit(
                work=partial(returning, 0),
                workspace=workspace,
                write=True,
                context=f"appending to {session_id}",
            )
        # Indexed here, before the unit runs: an asyncio host builds the unit in a
        # worker thread, so parsing and indexing never hold its event loop.
        indexed = index_entries(entries, self.settings)
        now = datetime.now(UTC)
        settings = self.settings
        # A key per message, the same on every attempt: its own id, else one this
        # call assigns. The store keeps keys unique in a session, so an attempt run
        # after one whose COMMIT outcome is unknown stores nothing twice.
        call = uuid.uuid4().hex
        keys = [e.entry_id or f"{call}.{i}" for i, e in enumerate(entries)]
        #: Keys the session held when the first attempt locked it; any other key an
        #: attempt finds was stored by an earlier attempt of this call.
        before: list[set[str]] = []

        def work() -> Work[int]:
            tx = WriteState(workspace, settings)
            part = Part(
                source=None,
                where=f"session {session_id}",
                entries=list(entries),
                indexed=list(indexed),
                fallback_time=now,
                continuing=True,
                assign_seq=True,
                keys=list(keys),
            )
            try:
                yield from write_append(tx, part)
            finally:
                if not before and part.found is not None:
                    before.append(set(part.found))
            return len(part.inserted) + len(set(part.found or ()) - before[0])

        return Unit(
            work=work,
            workspace=workspace,
            write=True,
            idempotent=True,
            context=f"appending to {session_id}",
        )


def _append_entries(session_id: str, messages: Sequence[dict[str, Any]]) -> list[Entry]:
    """The entries of an append, checked (`IngestError` names the message)."""
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
    ids: dict[str, int] = {}
    for i, obj in enumerate(messages):
        try:
            entry = entry_from_object(obj, seq=i, session_id=session_id, tool_names_by_call=calls)
        except (ValueError, RecursionError) as exc:
            raise IngestError(f"message {i}: {exc}") from None
        if entry.session_id != session_id:
            raise IngestError(f"message {i}: session_id differs from the append target")
        if entry.entry_id is not None:
            if entry.entry_id in ids:
                raise IngestError(
                    f"message {i}: id {entry.entry_id!r:.80} is also message "
                    f"{ids[entry.entry_id]}'s; an id names one message of its session"
                )
            ids[entry.entry_id] = i
        for call_id, name in zip(entry.tool_call_ids, entry.tool_names(), strict=False):
            calls[call_id] = name
        entries.append(entry)
    return entries

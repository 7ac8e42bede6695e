"""Ingesting many files: prepared ahead of the writer, written in groups.

Files are read, parsed and indexed ahead of the writer (`Prefetch`), against a
snapshot of their records taken once at the start; a file whose record changed
meanwhile is prepared again inside its transaction. Prepared files are written in
groups (`FileGroup`): one transaction a group, every stage of the write one round
trip for all its files (`pgsearch.ingest.write`), so a group of small files costs
about what one file does. Each file stays all or nothing: a group in which one file
fails (a session that holds another file's messages, a file that changed into
something unreadable) is written again file by file, each in a savepoint, and only
that file is reported as failed.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from pgsearch import adapters
from pgsearch.db import store
from pgsearch.db.store import FileRecord, Store
from pgsearch.db.work import Work, savepoint
from pgsearch.errors import IngestError
from pgsearch.ingest.prepare import Prepared, prepare
from pgsearch.ingest.report import FileResult, IngestReport
from pgsearch.ingest.targets import FileJob, check_format, file_job, find_jsonl
from pgsearch.ingest.write import WriteState, finish, write_files
from pgsearch.settings import Settings
from pgsearch.validate import check_workspace

#: Files, and entries, written in one transaction.
GROUP_FILES = 64
GROUP_ENTRIES = 5000
#: After a run that added this many messages (and a tenth of the table, as autovacuum
#: would judge), statistics are refreshed and the GIN pending list merged (see
#: `Store.after_bulk_load`).
MAINTAIN_AFTER = 5000
#: Files prepared ahead of the writer.
PREPARE_AHEAD = 8
#: Groups written at once, each in a transaction on a connection of its own: while one
#: group's vocabulary and statistics are folded and committed, the next group's
#: messages are inserted. Their writes touch disjoint files and sessions (a session
#: two groups name waits for the first to commit), vocabulary rows are locked in term
#: order by both, and a deadlock is retried by the driver.
WRITERS = 2


@dataclass(frozen=True, slots=True)
class Refused:
    """A file found that cannot be ingested, and why (outside the roots, say)."""

    given: Path
    error: IngestError


def plan_jobs(
    paths: Iterable[str | os.PathLike[str]],
    *,
    workspace: str,
    roots: Sequence[Path] | None,
    format: str,
    workspace_from_cwd: bool,
    include_forgotten: bool,
    unreadable: list[IngestError],
) -> list[FileJob | Refused]:
    """A job for every file of `paths` (directories searched), or why it cannot be."""
    jobs: list[FileJob | Refused] = []
    for path in find_jsonl(paths, unreadable):
        try:
            jobs.append(
                file_job(
                    path,
                    workspace=workspace,
                    roots=roots,
                    format=format,
                    workspace_from_cwd=workspace_from_cwd,
                    include_forgotten=include_forgotten,
                )
            )
        except IngestError as exc:
            jobs.append(Refused(path, exc))
    return jobs


class Prefetch:
    """Jobs with their files prepared, in order; a worker thread prepares up to
    `PREPARE_AHEAD` files ahead of the consumer, so Python work overlaps the
    server's."""

    def __init__(
        self,
        jobs: Sequence[FileJob | Refused],
        snapshots: dict[str, dict[str, FileRecord]],
        settings: Settings,
    ) -> None:
        self._jobs = jobs
        self._snapshots = snapshots
        self._settings = settings

    def _prepare(self, job: FileJob | Refused) -> Prepared | IngestError:
        if isinstance(job, Refused):
            return job.error
        record = self._snapshots[job.workspace].get(job.source)
        try:
            return prepare(job, record, self._settings)
        except IngestError as exc:
            return exc

    def __iter__(self) -> Iterator[tuple[FileJob | Refused, Prepared | IngestError]]:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pgsearch-prepare") as pool:
            ahead: deque[tuple[FileJob | Refused, Future[Prepared | IngestError]]] = deque()
            pending = iter(self._jobs)

            def submit() -> None:
                job = next(pending, None)
                if job is not None:
                    ahead.append((job, pool.submit(self._prepare, job)))

            for _ in range(PREPARE_AHEAD):
                submit()
            while ahead:
                job, future = ahead.popleft()
                ready = future.result()
                submit()
                yield job, ready


@dataclass(slots=True)
class FileGroup:
    """Prepared files of one workspace written in one transaction."""

    workspace: str
    items: list[tuple[FileJob, Prepared]] = field(default_factory=list)
    entries: int = 0
    #: Sessions and files the group names: no two of its files may share one.
    sessions: set[str] = field(default_factory=set)
    paths: set[str] = field(default_factory=set)

    def takes(self, job: FileJob, prepared: Prepared) -> bool:
        """Whether the file can join the group."""
        if not self.items:
            return True
        return (
            job.workspace == self.workspace
            and len(self.items) < GROUP_FILES
            and self.entries + len(prepared.entries) <= GROUP_ENTRIES
            and prepared.stream_next is None
            and self.items[0][1].stream_next is None
            and job.source not in self.paths
            and self.sessions.isdisjoint(prepared.session_ids)
        )

    def add(self, job: FileJob, prepared: Prepared) -> None:
        self.items.append((job, prepared))
        self.entries += len(prepared.entries)
        self.sessions |= prepared.session_ids
        self.paths.add(job.source)


def write_group(
    ws: str, items: Sequence[tuple[FileJob, Prepared | None]], settings: Settings
) -> Work[list[FileResult]]:
    """Write prepared files in the caller's transaction: all in one pass, or, when one
    of them fails, one by one, each in a savepoint; a failed file is reported."""
    tx = WriteState(ws, settings)
    results: list[FileResult] | None = None
    if len(items) > 1:
        together = tx.child()
        try:
            results = yield from savepoint(write_files(together, items))
            tx.adopt(together)
        except IngestError:
            results = None  # rolled back: written again file by file
    if results is None:
        results = []
        for job, prepared in items:
            alone = tx.child()
            try:
                (result,) = yield from savepoint(write_files(alone, [(job, prepared)]))
                tx.adopt(alone)
            except IngestError as exc:
                result = FileResult(path=job.shown, error=exc, no_cwd=job.no_cwd)
            results.append(result)
    yield from finish(tx)
    return results


class Writer:
    """Writes groups in threads of their own (`WRITERS` at once) while the caller goes
    on preparing and grouping the next files. At most `WRITERS` groups are in hand;
    results are reported in file order, from the caller's thread. A group naming a
    session or a file of a group still being written starts once that one ended, so
    that of two files naming one session the first in order always wins, as one
    after the other."""

    def __init__(
        self, db: Store, settings: Settings, report: Callable[[list[FileResult]], None]
    ) -> None:
        self._db = db
        self._settings = settings
        self._report = report
        # Never more writers than the pool has connections.
        self._writers = max(1, min(WRITERS, settings.pool_max))
        self._pool = ThreadPoolExecutor(self._writers, thread_name_prefix="pgsearch-write")
        self._pending: deque[tuple[FileGroup, Future[list[FileResult]]]] = deque()

    def submit(self, group: FileGroup) -> None:
        """Write `group` after those submitted before it."""
        while any(_overlap(group, earlier) for earlier, _ in self._pending):
            self._report_first()
        work = partial(write_group, group.workspace, group.items, self._settings)
        future = self._pool.submit(self._db.write, work, group.workspace, context="ingesting files")
        self._pending.append((group, future))
        while len(self._pending) > self._writers:
            self._report_first()

    def _report_first(self) -> None:
        _, future = self._pending.popleft()
        self._report(future.result())

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        try:
            while self._pending and error is None:
                self._report_first()
        finally:
            # On an error nothing queued is started; the group being written ends.
            self._pool.shutdown(wait=True, cancel_futures=True)


def _overlap(group: FileGroup, other: FileGroup) -> bool:
    return group.workspace == other.workspace and not (
        group.sessions.isdisjoint(other.sessions) and group.paths.isdisjoint(other.paths)
    )


def ingest_paths(
    db: Store,
    settings: Settings,
    paths: Iterable[str | os.PathLike[str]],
    *,
    workspace: str,
    roots: Sequence[Path] | None = None,
    on_file: Callable[[FileResult], None] | None = None,
    format: str = adapters.AUTO,
    workspace_from_cwd: bool = False,
    include_forgotten: bool = False,
) -> IngestReport:
    """Ingest files and directories through `db`; a bad file is reported and the rest
    go on (`pgsearch.ingest.Ingestor.ingest_paths`)."""
    workspace = check_workspace(workspace)
    check_format(format)
    report = IngestReport()
    jobs = plan_jobs(
        paths,
        workspace=workspace,
        roots=roots,
        format=format,
        workspace_from_cwd=workspace_from_cwd,
        include_forgotten=include_forgotten,
        unreadable=report.unreadable,
    )
    snapshots = _snapshots(db, workspace, jobs)

    def report_all(results: list[FileResult]) -> None:
        for result in results:
            report.add(result)
            if on_file is not None:
                on_file(result)

    written: set[str] = set()
    with Writer(db, settings, report_all) as writer:
        group = FileGroup(workspace)
        for job, prepared in Prefetch(jobs, snapshots, settings):
            if isinstance(prepared, IngestError):
                shown = job.shown if isinstance(job, FileJob) else str(job.given)
                report_all([FileResult(path=shown, error=prepared)])
                continue
            assert isinstance(job, FileJob)
            written.add(job.workspace)
            if not group.takes(job, prepared):
                writer.submit(group)
                group = FileGroup(job.workspace)
            group.workspace = job.workspace
            group.add(job, prepared)
        if group.items:
            writer.submit(group)
    if report.messages >= MAINTAIN_AFTER:
        # The one place a bulk load is followed by upkeep of what searches read.
        db.after_bulk_load(report.messages)
    if report.messages and settings.impact_lists:
        # The one place ingest keeps the term lists of bounded searches current.
        db.keep_lists_current(sorted(written))
    return report


def _snapshots(
    db: Store, workspace: str, jobs: Sequence[FileJob | Refused]
) -> dict[str, dict[str, FileRecord]]:
    """The file records of every workspace the jobs write to, read once."""
    snapshots: dict[str, dict[str, FileRecord]] = {}
    targets = {job.workspace for job in jobs if isinstance(job, FileJob)}
    for ws in sorted({workspace, *targets}):
        sources = [j.source for j in jobs if isinstance(j, FileJob) and j.workspace == ws]
        snapshots[ws] = db.read(
            partial(store.file_records, ws, sources), ws, context="reading file records"
        )
    return snapshots

"""`pgsearch ingest --watch`: keep the index fresh while agents write their logs.

Polling, not filesystem events: it needs no extra dependency, works the same on
every platform and on network filesystems, and a session log that changes every
few seconds needs nothing faster. Each poll lists the session files under the
watched paths (`pgsearch.sources.find_sources`: every format pgsearch reads) and
re-ingests those whose size, modification time or inode changed since the last
poll. Ingest itself reads only what was appended (the file's
recorded prefix digest still matches) and detects a rewritten file (it does not),
so a poll over an unchanged tree costs one ``stat`` per file and no database work.

Each file is still one transaction; stopping (Ctrl-C) between or inside one leaves
the index as it was after the last committed file.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pgsearch.errors import IngestError
from pgsearch.settings import DEFAULT_WATCH_INTERVAL
from pgsearch.sources import find_sources, is_sqlite_store

if TYPE_CHECKING:
    from pgsearch.ingest import FileResult

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = DEFAULT_WATCH_INTERVAL


class FileIngestor(Protocol):
    """What the watcher drives: `PgSearch.ingest_file` (options bound by the caller)."""

    def __call__(self, path: Path) -> FileResult: ...


@dataclass(slots=True)
class WatchStats:
    polls: int = 0
    #: Ingest runs of changed files (a file that changed three times counts three).
    updates: int = 0
    messages: int = 0
    rewritten: int = 0
    errors: int = 0
    files: set[str] = field(default_factory=set)

    def summary(self) -> str:
        return (
            f"{self.polls} polls, {len(self.files)} files, {self.updates} updates, "
            f"{self.messages} messages added, {self.rewritten} rewritten, {self.errors} errors"
        )


def scan(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Session files named or found under `paths`; paths that vanished are skipped."""
    return [p for p in find_sources(Path(raw) for raw in paths) if p.is_file()]


class Watcher:
    """Polls `paths` and ingests every file that changed since the last poll."""

    def __init__(
        self,
        ingest: FileIngestor,
        paths: Sequence[str | os.PathLike[str]],
        *,
        interval: float = DEFAULT_INTERVAL,
        on_file: Callable[[FileResult], None] | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.ingest = ingest
        self.paths = list(paths)
        self.interval = interval
        self.on_file = on_file
        self.stats = WatchStats()
        self._seen: dict[Path, tuple[int, ...]] = {}

    def poll(self) -> list[FileResult]:
        """One pass: ingest the files that changed (or are new); returns their results."""
        results: list[FileResult] = []
        for path in scan(self.paths):
            try:
                st = path.stat()
            except OSError:
                continue
            key: tuple[int, ...] = (st.st_ino, st.st_size, st.st_mtime_ns)
            if is_sqlite_store(path):
                from pgsearch.agent_stores import change_key

                key = change_key(path)  # a commit may change only its WAL file
            if self._seen.get(path) == key:
                continue
            try:
                result = self.ingest(path)
            except IngestError as exc:
                from pgsearch.ingest import FileResult

                result = FileResult(path=str(path), error=exc)
            # Remembered even after an error: a broken file is retried when it changes,
            # not on every poll.
            self._seen[path] = key
            self._count(result)
            results.append(result)
            if self.on_file is not None:
                self.on_file(result)
        self.stats.polls += 1
        return results

    def _count(self, result: FileResult) -> None:
        self.stats.files.add(result.path)
        self.stats.updates += 1
        self.stats.messages += result.messages
        self.stats.rewritten += int(result.rewritten)
        self.stats.errors += int(result.error is not None)

    def run(
        self, *, stop: threading.Event | None = None, max_polls: int | None = None
    ) -> WatchStats:
        """Poll until `stop` is set, `max_polls` passes ran, or Ctrl-C; returns the stats.

        Ctrl-C (``KeyboardInterrupt``) ends the loop quietly: the file being written
        then is rolled back whole and picked up again by the next run.
        """
        try:
            while True:
                self.poll()
                if max_polls is not None and self.stats.polls >= max_polls:
                    break
                if stop is not None:
                    if stop.wait(self.interval):
                        break
                else:
                    time.sleep(self.interval)
        except KeyboardInterrupt:
            log.info("watch interrupted")
        return self.stats

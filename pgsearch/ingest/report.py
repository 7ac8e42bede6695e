"""What an ingest reports: one `FileResult` a file, summed up in an `IngestReport`."""

from __future__ import annotations

from dataclasses import dataclass, field

from pgsearch.errors import IngestError


@dataclass(slots=True)
class FileResult:
    """What ingesting one file did (or the error that stopped it)."""

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


@dataclass(slots=True)
class IngestReport:
    """The files of one ingest, summed up."""

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
        """Count one file's result."""
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
        """The report in one line, as ``pgsearch ingest`` prints it."""
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

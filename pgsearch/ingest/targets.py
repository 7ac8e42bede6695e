"""Which files an ingest reads and where each goes: confinement, workspaces, jobs.

A `FileJob` is one file to ingest, decided before anything is read: the path as the
caller gave it and as resolved, the identity the file read must have under
``--root`` (`Pin`), the workspace, and how to read it. Every later stage takes the
job whole instead of its parts.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pgsearch import adapters
from pgsearch.errors import ConfigError, IngestError
from pgsearch.sources import Pin, find_sources, is_assembled, open_source, read_source
from pgsearch.userconfig import project_of
from pgsearch.validate import check_workspace

#: Bytes read from the head of a line-format file to find its working directory.
_HEAD_BYTES = 1 << 20


@dataclass(frozen=True, kw_only=True, slots=True)
class FileJob:
    """One file to ingest, and how."""

    workspace: str
    #: The path as the caller named it (in messages), and as resolved (in records).
    given: Path
    real: Path
    #: Under ``--root``, the identity the file read must have (`pgsearch.sources`).
    pin: Pin | None = None
    #: One of `adapters.FORMAT_CHOICES` (``auto``: detected from the file).
    format: str = adapters.AUTO
    #: The session of a file in pgsearch's own format (default: the file's stem).
    session_id: str | None = None
    #: Bring back the sessions of this file the user forgot.
    include_forgotten: bool = False
    #: The workspace came from the working directory, but the file names none.
    no_cwd: bool = False

    @property
    def shown(self) -> str:
        """The path as messages show it."""
        return str(self.given)

    @property
    def source(self) -> str:
        """The path as records and sessions keep it."""
        return str(self.real)


def check_format(format: str) -> str:
    """`format` if it is one of `adapters.FORMAT_CHOICES`, else `ConfigError`."""
    if format not in adapters.FORMAT_CHOICES:
        raise ConfigError(
            f"unknown format {format!r}; use one of {', '.join(adapters.FORMAT_CHOICES)}"
        )
    return format


def workspace_of(
    real: Path, shown: str, format: str, fallback: str, pin: Pin | None = None
) -> tuple[str, bool]:
    """The workspace an agent log's working directory names, else `fallback`; and
    whether it fell back because the file names no working directory."""
    from pgsearch.adapters.common import head_objects

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


def absolute(path: str | os.PathLike[str]) -> Path:
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


def file_job(
    path: str | os.PathLike[str],
    *,
    workspace: str,
    roots: Sequence[Path] | None = None,
    format: str = adapters.AUTO,
    workspace_from_cwd: bool = False,
    session_id: str | None = None,
    include_forgotten: bool = False,
) -> FileJob:
    """The job of ingesting `path`: the workspace checked (or, with
    `workspace_from_cwd`, taken from the file's working directory), the path confined
    to `roots`, the format checked. Raises `IngestError` or `ConfigError`."""
    workspace = check_workspace(workspace)
    check_format(format)
    given = Path(path)
    real = confine(given, roots)
    pin = pin_confined(real, roots, shown=str(given))
    no_cwd = False
    if workspace_from_cwd:
        workspace, no_cwd = workspace_of(real, str(given), format, workspace, pin)
    return FileJob(
        workspace=workspace,
        given=given,
        real=real,
        pin=pin,
        format=format,
        session_id=session_id,
        include_forgotten=include_forgotten,
        no_cwd=no_cwd,
    )

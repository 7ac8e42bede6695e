"""Where session files are, and their bytes: the file-system side of ingest.

Directories are searched for the files of every format pgsearch reads:

- ``*.jsonl`` (pgsearch's format and the agents' session logs), except Kimi CLI's
  ``context.jsonl`` beside a session's ``wire.jsonl``;
- Aider chat histories ``.aider.chat.history.md``; Amp threads ``threads/T-*.json``;
  VS Code chat sessions ``chatSessions/*.json``; the SQLite stores of Crush
  (``crush.db``) and Cursor (``state.vscdb``), read as documents
  (`pgsearch.agent_stores`);
  Cline and Roo Code tasks ``tasks/<id>/ui_messages.json`` (read with the task's
  ``history_item.json``);
- Gemini CLI session documents ``chats/session-*.json`` and saved chats
  ``checkpoint-*.json``;
- OpenCode session files ``storage/session/<project>/<id>.json``. Each stands for
  one session: its bytes are the session assembled with its messages
  (``storage/message/<id>/``) and their parts (``storage/part/<message>/``) into
  the document ``opencode export`` writes, so a change in any of them is a change
  of the session. OpenCode's message and part files are not sources of their own.
  Exports named like their session (``ses_<id>.json``) are found too.

Other ``*.json`` files under a directory are not sessions and are left alone; a file
named on the command line is read whatever its name.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pgsearch.errors import IngestError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Source:
    data: bytes
    mtime: datetime


@dataclass(frozen=True, slots=True)
class Pin:
    """The file a path named when it was confined to a root (``--root``): the file
    read later must be that same file (device and inode), not whatever the path
    names by then."""

    dev: int
    ino: int

    @classmethod
    def of(cls, path: Path, *, shown: str) -> Pin:
        """The identity of the regular file at `path` (symlinks already resolved);
        `IngestError` for a file with other hard links (it may be linked in from
        outside the root)."""
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError as exc:
            raise IngestError(f"cannot read: {exc.strerror}", path=shown) from None
        _check_links(st, shown)
        return cls(st.st_dev, st.st_ino)


def _check_links(st: os.stat_result, shown: str) -> None:
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise IngestError(
            f"the file has {st.st_nlink} hard links; under --root a file that may be "
            "linked in from outside the root is not read (copy it instead)",
            path=shown,
        )


#: Open flags: never follow a symlink in the last component, never block on a FIFO.
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def open_source(path: Path, *, shown: str, pin: Pin | None = None) -> tuple[int, os.stat_result]:
    """An open descriptor of the regular file at `path` and its status.

    The last component is opened without following a symlink; with a `pin` (the
    file was confined to a root), the opened file must be the one confined and
    have no other hard links, so a file swapped for a link after the check, or a
    directory on the way swapped for one, is refused instead of read.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise IngestError(
                "the path is a symlink now (it changed after it was checked); not read",
                path=shown,
            ) from None
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EISDIR):
            raise IngestError("not a readable file", path=shown) from None
        raise IngestError(f"cannot read: {exc.strerror}", path=shown) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise IngestError("not a readable file", path=shown)
        if pin is not None:
            if (st.st_dev, st.st_ino) != (pin.dev, pin.ino):
                raise IngestError(
                    "the file changed after it was confined to --root (another file or a "
                    "link now has its path); not read",
                    path=shown,
                )
            _check_links(st, shown)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def is_opencode_session(path: Path) -> bool:
    """``.../storage/session/<project>/<id>.json`` with OpenCode's message store beside it."""
    return (
        path.suffix == ".json"
        and path.parent.parent.name == "session"
        and (path.parent.parent.parent / "message").is_dir()
    )


#: VS Code extensions whose tasks are Cline's: Cline itself and Roo Code, its fork.
CLINE_EXTENSIONS = ("saoudrizwan.claude-dev", "rooveterinaryinc.roo-cline")


def is_cline_task(path: Path) -> bool:
    """``.../tasks/<task id>/ui_messages.json``: a Cline or Roo Code task."""
    return path.name == "ui_messages.json" and path.parent.parent.name == "tasks"


#: File names of the agents' SQLite stores (`pgsearch.agent_stores`).
SQLITE_STORES = ("crush.db", "state.vscdb")


def is_sqlite_store(path: Path) -> bool:
    """An agent's SQLite store: Crush's ``crush.db``, Cursor's ``state.vscdb``."""
    return path.name in SQLITE_STORES


def is_assembled(path: Path) -> bool:
    """Whether ingest reads `path` as a document assembled for it (an OpenCode session
    and its files, a Cline task, an agent's SQLite store) rather than its own bytes."""
    return is_opencode_session(path) or is_cline_task(path) or is_sqlite_store(path)


def _is_session_document(path: Path) -> bool:
    name = path.name
    if is_cline_task(path):
        return True
    if name.startswith("T-") and name.endswith(".json") and path.parent.name == "threads":
        return True  # an Amp thread
    if name.endswith(".json") and path.parent.name in ("chatSessions", "emptyWindowChatSessions"):
        return True  # a VS Code chat session
    if name.startswith(("checkpoint-", "ses_")) and name.endswith(".json"):
        return True  # a Gemini CLI saved chat; an OpenCode session or its export
    if name.startswith("session-") and name.endswith(".json") and path.parent.name == "chats":
        return True
    return is_opencode_session(path)


def _is_context_copy(name: str, names: list[str]) -> bool:
    """Kimi CLI's ``context.jsonl`` (and its rotations ``context_1.jsonl``…) beside
    the session's ``wire.jsonl``: the model's context, rewritten on compaction and
    undo, whose conversation the wire log holds."""
    return name.startswith("context") and name.endswith(".jsonl") and "wire.jsonl" in names


def _walk(root: Path, problems: list[IngestError] | None) -> list[Path]:
    found: list[Path] = []

    def unreadable(exc: OSError) -> None:
        where = exc.filename if exc.filename is not None else root
        error = IngestError(f"cannot read directory: {exc.strerror or exc}", path=str(where))
        if problems is None:
            log.warning("%s", error)
        else:
            problems.append(error)

    for dirpath, dirnames, filenames in os.walk(root, onerror=unreadable):
        here = Path(dirpath)
        # OpenCode's storage: sessions are its session files; their messages and parts
        # are read with them, and its other files (todos, diffs) are no sessions.
        if here.name == "storage" and (here / "session").is_dir() and (here / "message").is_dir():
            dirnames[:] = ["session"]
        dirnames.sort()
        for name in filenames:
            path = here / name
            if _is_context_copy(name, filenames):
                continue
            if (
                name.endswith(".jsonl")
                or name == ".aider.chat.history.md"
                or name in SQLITE_STORES
                or (name.endswith(".json") and _is_session_document(path))
            ):
                if path.is_file():
                    found.append(path)
    return found


def find_sources(
    paths: Iterable[str | os.PathLike[str]], problems: list[IngestError] | None = None
) -> list[Path]:
    """Files named directly, plus the session files of every format under directories
    (sorted by path within each directory named).

    A directory that cannot be read is not skipped silently: it is added to
    `problems` (logged as a warning when that is None).
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(sorted(_walk(path, problems)))
        else:
            found.append(path)
    return found


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None


def _opencode_document(session_file: Path) -> bytes:
    """The session, its messages and their parts as one export-shaped document."""
    info = _read_json(session_file)
    if not isinstance(info, dict):
        raise IngestError("not a readable OpenCode session file", path=str(session_file))
    storage = session_file.parent.parent.parent
    sid = info.get("id") if isinstance(info.get("id"), str) else session_file.stem
    messages = []
    message_dir = storage / "message" / str(sid)
    for message_file in sorted(message_dir.glob("*.json")) if message_dir.is_dir() else ():
        message = _read_json(message_file)
        if not isinstance(message, dict):
            continue
        mid = message.get("id") if isinstance(message.get("id"), str) else message_file.stem
        part_dir = storage / "part" / str(mid)
        parts = [
            part
            for part in (
                _read_json(p)
                for p in (sorted(part_dir.glob("*.json")) if part_dir.is_dir() else ())
            )
            if isinstance(part, dict)
        ]
        messages.append({"info": message, "parts": parts})
    document = {"info": info, "messages": messages}
    return json.dumps(document, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()


def _cline_document(path: Path, messages: bytes) -> bytes:
    """A Cline task: its UI messages with the task's facts beside them (Roo Code's
    ``history_item.json``: the parent task, the workspace), and a digest of all of it
    last, so that any change is seen in the end of the bytes."""
    try:
        ui = json.loads(messages)
    except (ValueError, RecursionError):
        ui = None  # read as it is: the adapter says what is wrong with it
    document = {
        "cline_task": path.parent.name,
        "ui_messages": ui,
        "history_item": _read_json(path.parent / "history_item.json"),
    }
    body = json.dumps(document, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(body.encode()).hexdigest()
    return (body[:-1] + f',"~digest":"{digest}"}}').encode()


def read_source(path: Path, *, shown: str, pin: Pin | None = None) -> Source:
    """The bytes ingest reads for `path` (a file's own, or an assembled session),
    read from the file `open_source` opened."""
    fd, st = open_source(path, shown=shown, pin=pin)
    try:
        with os.fdopen(fd, "rb") as fh:
            mtime = datetime.fromtimestamp(st.st_mtime, tz=UTC)
            if is_opencode_session(path):
                return Source(_opencode_document(path), mtime)
            if is_cline_task(path):
                return Source(_cline_document(path, fh.read()), mtime)
            if is_sqlite_store(path):
                from pgsearch import agent_stores

                return Source(agent_stores.snapshot(path, shown=shown), mtime)
            return Source(fh.read(), mtime)
    except OSError as exc:
        raise IngestError(f"cannot read: {exc.strerror}", path=shown) from None


class FileView:
    """The bytes of an open file, read on demand: ``len``, slices and `find` as on
    `bytes`, each slice one ``pread``. Lets ingest check a large file's recorded
    windows and read its new part without holding the rest in memory."""

    _BLOCK = 1 << 20

    def __init__(self, fd: int, size: int) -> None:
        self.fd = fd
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: slice) -> bytes:
        start, stop, _ = index.indices(self.size)
        if stop <= start:
            return b""
        parts = []
        while start < stop:
            part = os.pread(self.fd, stop - start, start)
            if not part:
                break  # the file shrank meanwhile
            parts.append(part)
            start += len(part)
        return b"".join(parts)

    def find(self, sub: bytes, start: int = 0, end: int | None = None) -> int:
        """The first offset of `sub` at or after `start` (before `end`), else -1."""
        end = self.size if end is None else min(end, self.size)
        pos = start
        while pos < end:
            block = self[pos : min(end, pos + self._BLOCK + len(sub) - 1)]
            at = block.find(sub)
            if at >= 0:
                return pos + at
            if pos + len(block) >= end:
                return -1
            pos += self._BLOCK
        return -1

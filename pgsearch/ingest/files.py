"""A file's identity and where to read on (pure): record digests and resume points.

For each file the consumed byte length and digests of what was read are recorded,
with the format and mapping version it was read with (``parser``). When the file
still starts with exactly those bytes and the mapping is the same, only the lines
after them are read (`resume_point`); a file that no longer starts with what was
read, or was read by another mapping, is read again whole and replaces its sessions.
The digests cover the first and last `FILE_WINDOW` bytes of the part read, so a
grown file costs its new bytes, and the first window finds a file that moved.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from pgsearch import adapters
from pgsearch.db.store import FileRecord
from pgsearch.messages import MAX_LINE_BYTES
from pgsearch.sources import FileView

#: Bytes at each end of what was read from a file that its record keeps a digest of.
#: A grown file whose first and last `FILE_WINDOW` bytes of the recorded length are
#: unchanged is read on from there, without hashing (or reading) what lies between;
#: the first window also finds a file that moved (`pgsearch.ingest.write`).
FILE_WINDOW = 64 * 1024

#: What ingest reads a file through: its bytes, or a `FileView` of a large file.
Bytes = bytes | FileView


@dataclass(frozen=True, slots=True)
class Resume:
    """Where to start reading a file, given its record (`resume_point`)."""

    start: int
    first_line: int
    #: Read it whole and replace what it stored before.
    rewrite: bool = False
    #: Nothing new: no byte was added since the last ingest.
    unchanged: bool = False


def digest(data: bytes) -> str:
    """SHA-256 of `data`, in hex."""
    return hashlib.sha256(data).hexdigest()


def _digest_range(data: Bytes, stop: int) -> str:
    """SHA-256 of ``data[:stop]``, read a block at a time."""
    h = hashlib.sha256()
    for at in range(0, stop, 1 << 20):
        h.update(data[at : min(stop, at + (1 << 20))])
    return h.hexdigest()


def head_digest(data: Bytes) -> str:
    """The digest of a file's first window (a record's `head_digest`)."""
    return digest(data[:FILE_WINDOW])


def file_windows(data: Bytes, size: int) -> tuple[str, str, str]:
    """The record digests of the first `size` bytes of `data`: (digest, head, tail).

    `digest` names the read part (its windows and length) in one value."""
    head = digest(data[: min(size, FILE_WINDOW)])
    tail = digest(data[max(0, size - FILE_WINDOW) : size])
    return digest(f"{head}:{tail}:{size}".encode()), head, tail


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


def record_of(path: str, data: Bytes, consumed: int, lines: int, parser: str) -> FileRecord:
    """The record of a file of which `consumed` bytes (`lines` lines) were read."""
    whole, head, tail = file_windows(data, consumed)
    return FileRecord(path, consumed, lines, whole, parser, head, tail)


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

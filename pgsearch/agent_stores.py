"""Agents that keep sessions in SQLite: read their stores without writing, while they write.

Crush keeps a project's sessions in ``<project>/.crush/crush.db``; Cursor keeps its
chats in ``state.vscdb`` (a key-value table, ``cursorDiskKV``). Ingest reads such a
store as one document (`snapshot`): every session and message it holds, as JSON,
which the format's adapter maps like any other document, read again whole whenever
the store changes.

Reading never writes and never gets in the agent's way:

- the store is opened read-only (``mode=ro``, ``PRAGMA query_only``), never
  ``immutable`` (the agent is writing it: SQLite must see its locks and journal);
- everything is read in one read transaction, so the snapshot is consistent even
  while the agent commits (in WAL mode a reader never blocks the writer);
- a store that is busy (``SQLITE_BUSY``, the agent holding a write lock on a
  rollback journal) is waited for and retried, a bounded number of times;
- only the tables of conversations are read (never Cursor's keys holding tokens).

A store's WAL file changes when the agent commits while the main file may not
(until a checkpoint), so `change_key` includes it: ``--watch`` sees every commit.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from pgsearch.errors import IngestError

T = TypeVar("T")

CRUSH_STORE = "crush.db"
CURSOR_STORE = "state.vscdb"
#: Tries of a read that found the store busy, and the first wait between them.
BUSY_ATTEMPTS = 10
BUSY_WAIT = 0.05
#: How long SQLite itself waits on a lock before reporting the store busy.
LOCK_TIMEOUT = 1.0


def change_key(path: Path) -> tuple[int, ...]:
    """What tells that a store changed: the store's and its WAL file's identity,
    size and modification time."""
    key: list[int] = []
    for part in (path, path.with_name(path.name + "-wal")):
        try:
            st = part.stat()
        except OSError:
            key.extend((0, 0, 0))
            continue
        key.extend((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(key)


def _connect(path: Path) -> sqlite3.Connection:
    uri = f"file:{quote(str(path))}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=LOCK_TIMEOUT, isolation_level=None)
    conn.execute("PRAGMA query_only = ON")
    return conn


def _busy(exc: sqlite3.OperationalError) -> bool:
    message = str(exc).lower()
    return "locked" in message or "busy" in message


def read_store(path: Path, reader: Callable[[sqlite3.Connection], T], *, shown: str) -> T:
    """`reader`'s result on the store at `path`, in one read-only transaction.

    A busy store is retried (`BUSY_ATTEMPTS`, waits growing from `BUSY_WAIT`); any
    other failure is an `IngestError` naming the file.
    """
    for attempt in range(BUSY_ATTEMPTS):
        try:
            conn = _connect(path)
        except sqlite3.Error as exc:
            raise IngestError(
                f"cannot open the SQLite store read-only: {exc}", path=shown
            ) from None
        try:
            conn.execute("BEGIN")
            result = reader(conn)
            conn.execute("COMMIT")
            return result
        except sqlite3.OperationalError as exc:
            if not _busy(exc):
                raise IngestError(f"cannot read the SQLite store: {exc}", path=shown) from None
        except sqlite3.DatabaseError as exc:
            raise IngestError(f"not a readable SQLite store: {exc}", path=shown) from None
        finally:
            conn.close()
        time.sleep(BUSY_WAIT * (attempt + 1))
    raise IngestError(
        f"the SQLite store stayed busy through {BUSY_ATTEMPTS} tries; try again", path=shown
    )


def _rows(conn: sqlite3.Connection, sql: str, *args: Any) -> list[dict[str, Any]]:
    """Rows as dicts by column name (columns an agent version adds or drops are fine)."""
    try:
        cursor = conn.execute(sql, args)
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []  # a store without this table holds none of these rows
        raise
    names = [d[0] for d in cursor.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cursor]


def _crush(conn: sqlite3.Connection) -> dict[str, Any]:
    return {
        "crush_store": True,
        "sessions": _rows(conn, "SELECT * FROM sessions ORDER BY created_at, id"),
        "messages": _rows(conn, "SELECT * FROM messages ORDER BY created_at, rowid"),
    }


def _json(value: Any) -> Any:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str):
        return None
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return None


def _cursor(conn: sqlite3.Connection) -> dict[str, Any]:
    # Only conversation keys: the same table holds the editor's auth tokens.
    composers = _rows(
        conn,
        "SELECT key, value FROM cursorDiskKV WHERE key >= 'composerData:' "
        "AND key < 'composerData;' ORDER BY key",
    )
    bubbles = _rows(
        conn,
        "SELECT key, value FROM cursorDiskKV WHERE key >= 'bubbleId:' "
        "AND key < 'bubbleId;' ORDER BY key",
    )
    by_composer: dict[str, dict[str, Any]] = {}
    for row in bubbles:
        parts = str(row["key"]).split(":", 2)
        value = _json(row["value"])
        if len(parts) == 3 and isinstance(value, dict):
            by_composer.setdefault(parts[1], {})[parts[2]] = value
    out = []
    for row in composers:
        cid = str(row["key"]).split(":", 1)[1]
        data = _json(row["value"])
        if isinstance(data, dict):
            out.append({"id": cid, "data": data, "bubbles": by_composer.get(cid, {})})
    return {"cursor_store": True, "composers": out}


def snapshot(path: Path, *, shown: str) -> bytes:
    """The store at `path` as one JSON document, its digest last (so that a change
    anywhere shows in the document's last bytes)."""
    reader = _crush if path.name == CRUSH_STORE else _cursor
    document = read_store(path, reader, shown=shown)
    body = json.dumps(
        document, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str
    )
    digest = hashlib.sha256(body.encode()).hexdigest()
    return (body[:-1] + f',"~digest":"{digest}"}}').encode()

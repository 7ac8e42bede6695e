"""What a user would pick instead of pgsearch, run on the same corpus and queries.

- ``fts``: PostgreSQL's built-in full-text search: a stored ``tsvector``
  (``english`` configuration) with a GIN index on (workspace, tsvector),
  ``websearch_to_tsquery`` and ``ts_rank_cd``, in its own table of the same database.
- ``trgm``: pg_trgm ``word_similarity`` (``query <% body``) over the message text
  with a trigram GIN index, on a query sample with a per-query statement timeout.
- ``sqlite``: SQLite FTS5 (``unicode61 remove_diacritics 2``, ranked by ``bm25()``),
  one table per workspace in one database file.
- ``bm25s``: the ``bm25s`` package in memory (Lucene BM25, k1 = 1.2, b = 0.75), one
  index per workspace; filters become its ``weight_mask``.

Every system indexes the same text pgsearch indexes under its default policy (user
and assistant text, tool names, tool errors; secrets scrubbed) and returns message
ids with scores: no excerpts, which pgsearch's figures do include. Each one's query
syntax is used as its users would use it, so ``fts`` and ``sqlite`` AND the words.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import psycopg

from pgsearch import policy
from pgsearch.messages import iter_jsonl
from pgsearch.settings import IndexPolicy


@dataclass(frozen=True, slots=True)
class Row:
    workspace: str
    session_id: str
    seq: int
    kind: str
    role: str
    tool_name: str | None
    created_at: datetime
    text: str


def load_rows(corpus: Path, dirs: Sequence[tuple[str, Path]] | None = None) -> list[Row]:
    """Indexable messages of a corpus, with the text pgsearch's default policy indexes.

    The corpus has one directory per workspace, unless `dirs` pairs workspaces and
    directories otherwise.
    """
    rows: list[Row] = []
    index_policy = IndexPolicy()
    if dirs is None:
        dirs = [(p.name, p) for p in sorted(corpus.iterdir()) if p.is_dir()]
    for workspace, wdir in dirs:
        for path in sorted(wdir.glob("*.jsonl")):
            for e in iter_jsonl(path.read_bytes(), path=str(path), session_id=path.stem):
                if e.kind not in policy.DEFAULT_SEARCH_KINDS or e.created_at is None:
                    continue
                text = policy.indexable_text(
                    e.kind,
                    e.content,
                    tool_names=e.tool_names(),
                    arguments=e.arguments,
                    policy=index_policy,
                )
                if text.strip():
                    rows.append(
                        Row(
                            workspace,
                            e.session_id,
                            e.seq,
                            e.kind,
                            e.role,
                            e.tool_name,
                            e.created_at,
                            text,
                        )
                    )
    return rows


@dataclass(frozen=True, kw_only=True)
class Query:
    text: str
    workspace: str
    session_id: str | None = None
    kinds: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    tool_name: str | None = None
    since: datetime | None = None
    until: datetime | None = None


class Alternative(Protocol):
    name: str

    def search(self, q: Query, limit: int) -> list[tuple[str, int]]: ...

    def sizes(self) -> dict[str, int]: ...

    def close(self) -> None: ...


_WORD_RE = re.compile(r"\w+")


def _filters_sql(q: Query, params: dict[str, Any]) -> str:
    sql = ""
    if q.session_id is not None:
        sql += " AND session_id = %(sid)s"
        params["sid"] = q.session_id
    if q.kinds:
        sql += " AND kind = ANY(%(kinds)s)"
        params["kinds"] = list(q.kinds)
    if q.roles:
        sql += " AND role = ANY(%(roles)s)"
        params["roles"] = list(q.roles)
    if q.tool_name is not None:
        sql += " AND tool_name = %(tool)s"
        params["tool"] = q.tool_name
    if q.since is not None:
        sql += " AND created_at >= %(since)s"
        params["since"] = q.since
    if q.until is not None:
        sql += " AND created_at < %(until)s"
        params["until"] = q.until
    return sql


class PostgresTables:
    """The alternatives' table in the benchmark database (built once, used by two)."""

    TABLE = "bench_alt_messages"

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)

    def build(self, rows: Sequence[Row], *, trigram: bool) -> dict[str, float]:
        """Load rows, then build the FTS index (and the trigram index); seconds taken."""
        c = self.conn
        c.execute(f"DROP TABLE IF EXISTS {self.TABLE}")
        c.execute(
            f"""CREATE TABLE {self.TABLE} (
                workspace_id text NOT NULL, session_id text NOT NULL, seq int NOT NULL,
                kind text NOT NULL, role text NOT NULL, tool_name text,
                created_at timestamptz NOT NULL, body text NOT NULL,
                tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', body)) STORED,
                PRIMARY KEY (workspace_id, session_id, seq))"""
        )
        times: dict[str, float] = {}
        t0 = time.perf_counter()
        with (
            c.cursor() as cur,
            cur.copy(
                f"COPY {self.TABLE} (workspace_id, session_id, seq, kind, role, tool_name, "
                "created_at, body) FROM STDIN"
            ) as copy,
        ):
            for r in rows:
                copy.write_row(
                    (
                        r.workspace,
                        r.session_id,
                        r.seq,
                        r.kind,
                        r.role,
                        r.tool_name,
                        r.created_at,
                        r.text,
                    )
                )
        times["load_s"] = time.perf_counter() - t0
        c.execute("SET maintenance_work_mem = '1GB'")
        t0 = time.perf_counter()
        c.execute(
            f"CREATE INDEX {self.TABLE}_tsv ON {self.TABLE} USING gin (workspace_id, tsv) "
            "WITH (fastupdate = off)"
        )
        times["fts_index_s"] = time.perf_counter() - t0
        if trigram:
            t0 = time.perf_counter()
            c.execute(
                f"CREATE INDEX {self.TABLE}_trgm ON {self.TABLE} "
                "USING gin (workspace_id, body gin_trgm_ops) WITH (fastupdate = off)"
            )
            times["trgm_index_s"] = time.perf_counter() - t0
        c.execute(f"VACUUM ANALYZE {self.TABLE}")
        return times

    def index_sizes(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for (name,) in self.conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = %s", (self.TABLE,)
        ).fetchall():
            row = self.conn.execute("SELECT pg_relation_size(%s::regclass)", (name,)).fetchone()
            out[name] = int(row[0]) if row else 0
        row = self.conn.execute("SELECT pg_table_size(%s::regclass)", (self.TABLE,)).fetchone()
        out["table"] = int(row[0]) if row else 0
        return out

    def drop(self) -> None:
        self.conn.execute(f"DROP TABLE IF EXISTS {self.TABLE}")

    def close(self) -> None:
        self.conn.close()


class PostgresFTS:
    name = "fts"

    def __init__(self, tables: PostgresTables) -> None:
        self.tables = tables

    def search(self, q: Query, limit: int) -> list[tuple[str, int]]:
        params: dict[str, Any] = {"q": q.text, "ws": q.workspace, "limit": limit}
        where = _filters_sql(q, params)
        sql = (
            f"SELECT session_id, seq FROM {PostgresTables.TABLE}, "
            "websearch_to_tsquery('english', %(q)s) AS query "
            "WHERE workspace_id = %(ws)s AND tsv @@ query" + where + " "
            "ORDER BY ts_rank_cd(tsv, query) DESC LIMIT %(limit)s"
        )
        return [(r[0], int(r[1])) for r in self.tables.conn.execute(sql, params).fetchall()]

    def sizes(self) -> dict[str, int]:
        s = self.tables.index_sizes()
        return {"table": s.get("table", 0), "index": s.get(f"{PostgresTables.TABLE}_tsv", 0)}

    def close(self) -> None:
        pass


class TimedOut(Exception):
    pass


class PostgresTrigram:
    name = "trgm"

    def __init__(self, tables: PostgresTables, timeout_ms: int) -> None:
        self.tables = tables
        self.timeout_ms = timeout_ms

    def search(self, q: Query, limit: int) -> list[tuple[str, int]]:
        params: dict[str, Any] = {"q": q.text, "ws": q.workspace, "limit": limit}
        where = _filters_sql(q, params)
        sql = (
            f"SELECT session_id, seq FROM {PostgresTables.TABLE} "
            "WHERE workspace_id = %(ws)s AND %(q)s <%% body" + where + " "
            "ORDER BY word_similarity(%(q)s, body) DESC LIMIT %(limit)s"
        )
        conn = self.tables.conn
        try:
            with conn.transaction(), conn.cursor() as cur:
                cur.execute(f"SET LOCAL statement_timeout = {int(self.timeout_ms)}")
                cur.execute(sql, params)
                return [(r[0], int(r[1])) for r in cur.fetchall()]
        except psycopg.errors.QueryCanceled:
            raise TimedOut from None

    def sizes(self) -> dict[str, int]:
        s = self.tables.index_sizes()
        return {"table": 0, "index": s.get(f"{PostgresTables.TABLE}_trgm", 0)}

    def close(self) -> None:
        pass


def _iso(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S")


class SQLiteFTS5:
    name = "sqlite"

    def __init__(self, path: Path, rows: Sequence[Row]) -> None:
        self.path = path
        path.unlink(missing_ok=True)
        self.db = sqlite3.connect(path)
        self.tables: dict[str, str] = {}
        by_ws: dict[str, list[Row]] = {}
        for r in rows:
            by_ws.setdefault(r.workspace, []).append(r)
        t0 = time.perf_counter()
        for i, (ws, items) in enumerate(sorted(by_ws.items())):
            table = f"fts_{i}"
            self.tables[ws] = table
            self.db.execute(
                f"CREATE VIRTUAL TABLE {table} USING fts5(body, session_id UNINDEXED, "
                "seq UNINDEXED, kind UNINDEXED, role UNINDEXED, tool_name UNINDEXED, "
                "created_at UNINDEXED, tokenize = 'unicode61 remove_diacritics 2')"
            )
            self.db.executemany(
                f"INSERT INTO {table} VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    (r.text, r.session_id, r.seq, r.kind, r.role, r.tool_name, _iso(r.created_at))
                    for r in items
                ),
            )
        self.db.commit()
        self.build_s = time.perf_counter() - t0

    def search(self, q: Query, limit: int) -> list[tuple[str, int]]:
        table = self.tables.get(q.workspace)
        words = _WORD_RE.findall(q.text)
        if table is None or not words:
            return []
        match = " ".join('"' + w.replace('"', '""') + '"' for w in words)
        sql = f"SELECT session_id, seq FROM {table} WHERE {table} MATCH ?"
        params: list[Any] = [match]
        if q.session_id is not None:
            sql += " AND session_id = ?"
            params.append(q.session_id)
        if q.kinds:
            sql += f" AND kind IN ({','.join('?' * len(q.kinds))})"
            params.extend(q.kinds)
        if q.roles:
            sql += f" AND role IN ({','.join('?' * len(q.roles))})"
            params.extend(q.roles)
        if q.tool_name is not None:
            sql += " AND tool_name = ?"
            params.append(q.tool_name)
        if q.since is not None:
            sql += " AND created_at >= ?"
            params.append(_iso(q.since))
        if q.until is not None:
            sql += " AND created_at < ?"
            params.append(_iso(q.until))
        sql += f" ORDER BY bm25({table}) LIMIT ?"
        params.append(limit)
        return [(r[0], int(r[1])) for r in self.db.execute(sql, params).fetchall()]

    def sizes(self) -> dict[str, int]:
        return {"table": 0, "index": self.path.stat().st_size}

    def close(self) -> None:
        self.db.close()


class BM25S:
    name = "bm25s"

    def __init__(self, rows: Sequence[Row]) -> None:
        import bm25s  # type: ignore[import-untyped]  # optional: the `bench` extra

        self._bm25s = bm25s
        self.indexes: dict[str, tuple[Any, list[Row]]] = {}
        by_ws: dict[str, list[Row]] = {}
        for r in rows:
            by_ws.setdefault(r.workspace, []).append(r)
        t0 = time.perf_counter()
        self.bytes = 0
        for ws, items in by_ws.items():
            tokens = bm25s.tokenize(
                [r.text for r in items], stopwords=None, return_ids=False, show_progress=False
            )
            retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
            retriever.index(tokens, show_progress=False)
            self.bytes += sum(
                int(a.nbytes) for a in retriever.scores.values() if hasattr(a, "nbytes")
            )
            self.indexes[ws] = (retriever, items)
        self.build_s = time.perf_counter() - t0

    def search(self, q: Query, limit: int) -> list[tuple[str, int]]:
        import numpy as np

        entry = self.indexes.get(q.workspace)
        if entry is None:
            return []
        retriever, items = entry
        tokens = self._bm25s.tokenize(
            [q.text], stopwords=None, return_ids=False, show_progress=False
        )[0]
        tokens = [t for t in tokens if t in retriever.vocab_dict]
        if not tokens:
            return []
        mask = None
        if q.session_id or q.kinds or q.roles or q.tool_name or q.since or q.until:
            mask = np.fromiter((1.0 if _keeps(q, r) else 0.0 for r in items), dtype=np.float32)
        k = min(limit, len(items))
        docs, scores = retriever.retrieve(
            [tokens], k=k, show_progress=False, weight_mask=mask, n_threads=1
        )
        return [
            (items[int(d)].session_id, items[int(d)].seq)
            for d, s in zip(docs[0], scores[0], strict=True)
            if s > 0
        ]

    def sizes(self) -> dict[str, int]:
        return {"table": 0, "index": self.bytes}

    def close(self) -> None:
        self.indexes.clear()


def _keeps(q: Query, r: Row) -> bool:
    return (
        (q.session_id is None or r.session_id == q.session_id)
        and (not q.kinds or r.kind in q.kinds)
        and (not q.roles or r.role in q.roles)
        and (q.tool_name is None or r.tool_name == q.tool_name)
        and (q.since is None or r.created_at >= q.since)
        and (q.until is None or r.created_at < q.until)
    )

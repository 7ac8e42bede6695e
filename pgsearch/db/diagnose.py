"""What `pgsearch doctor` reads from a server: version, locale, extensions, schema, sizes.

Read-only, and independent of the schema check the library does on open: a database
with no (or an old) schema still gets a full report, since that is when one is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import LiteralString

from pgsearch.db import queries as q
from pgsearch.db.connector import HEAD_REVISION, connect, wrap_errors

#: Extensions the migrations create.
NEEDED_EXTENSIONS = ("pg_trgm", "btree_gin", "fuzzystrmatch")
#: The oldest PostgreSQL pgsearch supports.
MIN_SERVER_VERSION_NUM = 140000

# ``to_jsonb(d)`` reads ``datlocprovider`` where it exists (PostgreSQL 15+) without
# failing on older servers.
DATABASE_FACTS: LiteralString = """
SELECT current_setting('server_version'), current_setting('server_version_num')::int,
       current_database(), current_user, pg_encoding_to_char(d.encoding),
       d.datcollate, d.datctype, coalesce(to_jsonb(d) ->> 'datlocprovider', 'c'),
       pg_database_size(d.oid)
FROM pg_database d WHERE d.datname = current_database()
"""
EXTENSIONS: LiteralString = """
SELECT a.name, e.extversion, a.default_version
FROM pg_available_extensions a LEFT JOIN pg_extension e ON e.extname = a.name
WHERE a.name = ANY(%(names)s::text[])
ORDER BY a.name
"""
HAS_VERSION_TABLE: LiteralString = "SELECT to_regclass('pgsearch_alembic_version') IS NOT NULL"
REVISION: LiteralString = "SELECT string_agg(version_num, ', ') FROM pgsearch_alembic_version"
# pg_trgm takes its letters from LC_CTYPE: under the C locale "é" yields no trigram.
TRIGRAMS_SEE_ACCENTS: LiteralString = "SELECT cardinality(show_trgm('ééé')) > 0"

#: Messages counted per workspace when the doctor reads how far its lists are behind.
LISTS_COUNTED = 100_000

#: The tables a search reads (with their indexes): what the server's buffer cache
#: should hold for searches to find their pages there.
SEARCHED_TABLES = ("messages", "vocabulary", "sessions", "workspace_stats")
#: Below this share of the searched relations in ``shared_buffers``, the doctor says
#: what a larger cache gave (bench/README.md, "A server whose cache holds its tables").
CACHE_HINT_SHARE = 0.25
# The cache's size, and the searched tables' block reads since the statistics were
# reset: found in the cache (hits) and read into it (from the OS or the disk). An
# aggregate without GROUP BY gives its one row even where no table matches.
CACHE_FACTS: LiteralString = """
SELECT pg_size_bytes(current_setting('shared_buffers')),
       coalesce(sum(coalesce(s.heap_blks_hit, 0) + coalesce(s.idx_blks_hit, 0)
                    + coalesce(s.toast_blks_hit, 0) + coalesce(s.tidx_blks_hit, 0)), 0),
       coalesce(sum(coalesce(s.heap_blks_read, 0) + coalesce(s.idx_blks_read, 0)
                    + coalesce(s.toast_blks_read, 0) + coalesce(s.tidx_blks_read, 0)), 0)
FROM pg_statio_user_tables s
WHERE s.relname = ANY(%(tables)s::text[]) AND s.schemaname = current_schema()
"""

PROVIDERS = {"b": "builtin", "c": "libc", "i": "icu"}


@dataclass(frozen=True, kw_only=True)
class Extension:
    name: str
    #: Installed version in this database, or None.
    installed: str | None
    #: Whether the server has it at all (its contrib package is installed).
    available: bool


@dataclass(frozen=True, kw_only=True)
class ServerFacts:
    """One database as `pgsearch doctor` reports it."""

    version: str
    version_num: int
    database: str
    user: str
    encoding: str
    collate: str
    ctype: str
    locale_provider: str
    #: None until pg_trgm is installed.
    trigrams_see_accents: bool | None
    extensions: tuple[Extension, ...]
    #: The Alembic revision, None without a schema.
    revision: str | None
    head_revision: str
    database_bytes: int
    #: (table, table bytes, index bytes) of pgsearch's tables.
    tables: tuple[tuple[str, int, int], ...]
    #: Per workspace: whether its term lists were built, and how many messages were
    #: stored since (counted up to `LISTS_COUNTED`; `pgsearch.impact`).
    lists: tuple[tuple[str, bool, int], ...] = ()
    #: The server's buffer cache (``shared_buffers``), in bytes.
    cache_bytes: int = 0
    #: Block reads of the searched tables and their indexes since the statistics were
    #: reset: found in the cache, and read into it.
    cache_hits: int = 0
    cache_reads: int = 0

    @property
    def searched_bytes(self) -> int:
        """The searched tables with their indexes (`SEARCHED_TABLES`)."""
        return sum(tb + ib for t, tb, ib in self.tables if t in SEARCHED_TABLES)

    @property
    def hit_ratio(self) -> float | None:
        """The share of the searched tables' block reads found in the cache (None:
        none counted yet)."""
        total = self.cache_hits + self.cache_reads
        return self.cache_hits / total if total else None

    def cache_note(self) -> str | None:
        """What a larger cache would give, when the searched tables far outgrow it."""
        searched = self.searched_bytes
        if not searched or self.cache_bytes >= CACHE_HINT_SHARE * searched:
            return None
        return (
            "searches of frequent words copy pages into the cache from outside it; with "
            "shared_buffers holding these tables, searches of 1M messages took 0.87-0.95 "
            'of the time (bench/README.md, "A server whose cache holds its tables")'
        )

    def problems(self) -> list[str]:
        """What would keep pgsearch from working well here, one sentence each."""
        found = []
        if self.version_num < MIN_SERVER_VERSION_NUM:
            found.append(f"PostgreSQL {self.version} is older than 14, which pgsearch needs")
        if self.encoding != "UTF8":
            found.append(f"the database encoding is {self.encoding}, not UTF8")
        if self.trigrams_see_accents is False or "utf" not in self.ctype.lower().replace("-", ""):
            found.append(
                f"LC_CTYPE is {self.ctype!r}: pg_trgm drops non-ASCII letters, so typos in "
                "accented or CJK words are not found (create the database with "
                "`pgsearch migrate --create`, which uses C.UTF-8)"
            )
        for ext in self.extensions:
            if not ext.available:
                found.append(
                    f"the server lacks the {ext.name} extension (install PostgreSQL's contrib "
                    "package)"
                )
        from pgsearch import impact

        for ws, built, behind in self.lists:
            if built and behind > impact.TAIL_MAX:
                found.append(
                    f"the term lists of workspace {ws!r} are {behind:,}+ messages behind, so "
                    "its searches for frequent words read every match: run `pgsearch maintain`"
                )
        if self.revision != self.head_revision:
            found.append(
                f"the schema is at revision {self.revision or 'none'}, this pgsearch needs "
                f"{self.head_revision}"
            )
        return found


def inspect(dsn: str) -> ServerFacts:
    """Read the facts about the database `dsn` names (raises `StoreError` if unreachable)."""
    with connect(dsn, application_name="pgsearch doctor") as conn:
        with wrap_errors("reading the server's facts"), conn.cursor() as cur:
            cur.execute(DATABASE_FACTS)
            facts = cur.fetchone()
            assert facts is not None
            cur.execute(EXTENSIONS, {"names": list(NEEDED_EXTENSIONS)})
            rows = {r[0]: Extension(name=r[0], installed=r[1], available=True) for r in cur}
            extensions = tuple(
                rows.get(name, Extension(name=name, installed=None, available=False))
                for name in NEEDED_EXTENSIONS
            )
            trigrams: bool | None = None
            if any(e.name == "pg_trgm" and e.installed for e in extensions):
                cur.execute(TRIGRAMS_SEE_ACCENTS)
                row = cur.fetchone()
                trigrams = bool(row and row[0])
            revision: str | None = None
            cur.execute(HAS_VERSION_TABLE)
            has_table = cur.fetchone()
            if has_table and has_table[0]:
                cur.execute(REVISION)
                found = cur.fetchone()
                revision = found[0] if found else None
            cur.execute(q.TABLE_SIZES, {"tables": list(q.TENANT_TABLES)})
            tables = tuple((str(t), int(tb), int(ib)) for t, tb, ib in cur.fetchall())
            cur.execute(CACHE_FACTS, {"tables": list(SEARCHED_TABLES)})
            cache = cur.fetchone()
            assert cache is not None
            lists: list[tuple[str, bool, int]] = []
            if revision == HEAD_REVISION:
                cur.execute(q.ALL_WORKSPACES)
                for (ws,) in cur.fetchall():
                    cur.execute(q.LISTS_LAG, {"ws": ws, "limit": LISTS_COUNTED})
                    row = cur.fetchone()
                    assert row is not None
                    lists.append((str(ws), row[0] is not None, int(row[1])))
    return ServerFacts(
        version=str(facts[0]),
        version_num=int(facts[1]),
        database=str(facts[2]),
        user=str(facts[3]),
        encoding=str(facts[4]),
        collate=str(facts[5]),
        ctype=str(facts[6]),
        locale_provider=PROVIDERS.get(str(facts[7]), str(facts[7])),
        trigrams_see_accents=trigrams,
        extensions=extensions,
        revision=revision,
        head_revision=HEAD_REVISION,
        database_bytes=int(facts[8]),
        tables=tables,
        lists=tuple(lists),
        cache_bytes=int(cache[0]),
        cache_hits=int(cache[1]),
        cache_reads=int(cache[2]),
    )

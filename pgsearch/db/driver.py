"""The drivers: run units of work (`pgsearch.db.work`) on pooled connections.

`Driver` (threads, `psycopg_pool.ConnectionPool`) and `AsyncDriver` (asyncio,
`AsyncConnectionPool`) run the same work generators. Everything around a unit's
statements lives here and nowhere else:

- one pooled connection per attempt, for exactly one transaction; ``BEGIN`` and the
  transaction's ``SET LOCAL``s travel with the first step, ``COMMIT`` with the step the
  work marks final, so a one-step read is one network round trip;
- every step in one round trip (pipeline mode) and one write: its statements go out
  together, so the server reads them at once and answers them at once (psycopg's own
  pipeline flushes each statement apart, a wake-up of the server and of the client
  each); a statement seen before on the connection runs prepared (a search's with
  a plan made once for any parameters, except on Citus, and made again once the
  tables have grown a few times over since); ``COPY`` outside the pipeline;
- driver errors wrapped as `StoreError` & co. (`wrap_errors`) and thrown into the work;
- the one retry layer: a deadlock, serialization failure or recovery conflict reruns
  the whole unit from a fresh generator; a lost connection reruns it when ``COMMIT``
  was never sent (`StoreUnavailable`), and when it was, reruns a unit that is
  `Unit.idempotent` (an append) and reports `OutcomeUnknown` for any other. While the
  store is unreachable (a restart, killed backends) a unit is run again for up to
  `DriverConfig.retry_seconds`; other transient failures get `RETRY_ATTEMPTS`;
- node choice through a `Router` (`pgsearch.db.routing`), one pool per node;
- traces (``EXPLAIN`` in the same transaction) and round-trip counts (`capture`).

Settings that never change are set once per connection (pool ``configure``); with
Citus every setting is ``SET LOCAL`` in each transaction instead, which is what Citus
propagates to its workers.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, LiteralString, TypeVar, cast

import psycopg
from psycopg import generators, pq, sql
from psycopg._queries import PostgresQuery
from psycopg.abc import PQGen
from psycopg.adapt import Transformer
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolClosed, PoolTimeout

from pgsearch.db.connector import (
    _TRANSIENT,
    LEGACY_VERSION_TABLE,
    VERSION_TABLE,
    _first_line,
    raise_unless_current,
    wrap_errors,
)
from pgsearch.db.dsn import redact_dsn, redact_message
from pgsearch.db.routing import (
    PRIMARY,
    SAMPLE_TIMEOUT,
    Choice,
    Intent,
    PrimaryRouter,
    Router,
)
from pgsearch.db.work import ProtocolError, Results, Statement, Step, Unit, explain_of
from pgsearch.errors import (
    ConfigError,
    OutcomeUnknown,
    PgSearchError,
    StoreClosed,
    StoreError,
    StoreUnavailable,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
Connection = psycopg.Connection[TupleRow]
AsyncConnection = psycopg.AsyncConnection[TupleRow]

#: Attempts a unit gets, and the first back-off ceiling (seconds; doubled per
#: attempt, with full jitter so that colliding writers drift apart).
RETRY_ATTEMPTS = 6
RETRY_BACKOFF = 0.02
#: The longest back-off between two attempts (seconds).
MAX_BACKOFF = 1.0
#: A pooled connection idle for longer than this is checked (one round trip) before
#: it is handed out; younger ones are used directly and a dead one costs one retry.
CHECK_IDLE_SECONDS = 30.0
#: The longest wait a router may ask for before an attempt.
MAX_ROUTER_DELAY = 5.0
#: TCP keepalives and a user timeout (libpq parameters), so that a connection whose
#: peer vanished without a reset fails within about half a minute instead of hanging.
#: A DSN that sets any of them keeps its own.
NETWORK_PARAMS: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 30_000,
    "connect_timeout": 10,
}

#: Every connection's session runs in UTC, so that the times it returns carry
#: `datetime.UTC` (psycopg's zone for a session in UTC). A named zone (a server's
#: default is often ``Etc/UTC``) costs a lookup of its offset for every time decoded
#: and every time compared or converted: a third of the decoding of a candidate row,
#: and most of ordering the hits of a frequent word. The instants are the same.
UTC_SESSION: sql.Composable = sql.SQL("SET TimeZone = 'UTC'")

_COMMIT: Statement[Any] = Statement("commit", "COMMIT")
_ROLLBACK: LiteralString = "ROLLBACK"
#: Parameter names of the settings statement (`_Core._begin`), one per setting.
_SETTING_KEYS: tuple[LiteralString, ...] = ("s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7")
#: The WAL position a standby must have replayed to see a commit just acknowledged:
#: the flush position once a synchronous COMMIT returned (it is at or past the
#: commit record, and never ahead of what the walsender may send), the insert
#: position when commits do not wait for the flush. Sent after COMMIT, in its trip.
_COMMIT_LSN: Statement[str] = Statement(
    "commit lsn",
    "SELECT (CASE WHEN current_setting('synchronous_commit') = 'off'"
    " THEN pg_current_wal_insert_lsn() ELSE pg_current_wal_flush_lsn() END)::text",
    decode=lambda r: str(r[0]),
)

_PROBE = """
SELECT to_regclass('pgsearch_alembic_version') IS NOT NULL,
       to_regclass('alembic_version') IS NOT NULL,
       CASE WHEN to_regclass('messages') IS NULL THEN false
            ELSE row_security_active('messages') END,
       current_user::text,
       EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')
"""
_OWN_VERSIONS = "SELECT version_num FROM pgsearch_alembic_version"
_LEGACY_VERSIONS = "SELECT version_num FROM alembic_version"
assert VERSION_TABLE in _PROBE and VERSION_TABLE in _OWN_VERSIONS
assert LEGACY_VERSION_TABLE in _LEGACY_VERSIONS


def _versions_query(row: Sequence[Any]) -> LiteralString | None:
    """Where the probed database records its revision (pgsearch's table first)."""
    if row[0]:
        return _OWN_VERSIONS
    return _LEGACY_VERSIONS if row[1] else None


def _probe(
    conn: psycopg.Connection[Any], *, check_schema: bool
) -> tuple[Sequence[Any], list[str] | None]:
    """`_PROBE`'s row and, when the schema is checked, the recorded revisions.

    A database pgsearch migrated answers both in one round trip (the two statements
    pipelined); any other (no version table of pgsearch's own) is asked one
    statement after the other.
    """
    if check_schema:
        try:
            with conn.pipeline():
                first = conn.execute(_PROBE)
                second = conn.execute(_OWN_VERSIONS)
        except psycopg.errors.UndefinedTable:
            pass  # not migrated by this pgsearch (yet): the probe says what it is
        else:
            row = first.fetchone()
            assert row is not None and row[0]
            return row, [str(r[0]) for r in second.fetchall()]
    row = conn.execute(_PROBE).fetchone()
    assert row is not None
    query = _versions_query(row)
    if not check_schema or query is None:
        return row, None
    return row, [str(r[0]) for r in conn.execute(query).fetchall()]


@dataclass(frozen=True, kw_only=True)
class DriverConfig:
    """How the drivers connect and configure transactions (from `Settings`)."""

    rls: bool = False
    trigram_threshold: float = 0.3
    #: Statement timeouts in milliseconds (0: none) for read and write units.
    read_timeout_ms: int = 0
    write_timeout_ms: int = 0
    pool_min: int = 1
    pool_max: int = 8
    #: Seconds a unit waits for a pooled connection before failing.
    pool_timeout: float = 30.0
    #: The same for nodes other than the primary: a standby that is down must cost
    #: little before the router is told and the read goes elsewhere.
    standby_pool_timeout: float = 1.0
    application_name: str = "pgsearch"
    #: On Citus, fail any multi-shard statement of a workspace-bound unit.
    single_shard: bool = False
    #: Seconds after its start within which a unit that found the store unreachable
    #: (or lost its connection after COMMIT, when it is idempotent) is run again.
    retry_seconds: float = 30.0

    @classmethod
    def from_settings(cls, settings: Any) -> DriverConfig:
        return cls(
            rls=settings.row_level_security,
            trigram_threshold=settings.trigram_threshold,
            read_timeout_ms=settings.statement_timeout_ms,
            write_timeout_ms=settings.write_timeout_ms,
            pool_min=settings.pool_min,
            pool_max=settings.pool_max,
            pool_timeout=settings.pool_timeout,
            standby_pool_timeout=getattr(settings, "read_connect_timeout_ms", 1000) / 1000,
            single_shard=settings.citus_single_shard,
            retry_seconds=settings.retry_seconds,
        )


@dataclass(frozen=True, kw_only=True)
class UnitRecord:
    """What one unit did, as `capture` reports it."""

    context: str
    node: str
    write: bool
    attempts: int
    #: Network round trips of the successful (or last) attempt.
    round_trips: int
    #: The work's own statements (not BEGIN, settings or COMMIT), in order sent.
    statements: tuple[Statement[Any], ...]
    #: ``EXPLAIN`` output per explainable statement (units run with `explain`).
    plans: tuple[str, ...] = ()
    error: str | None = None
    #: The workspace the unit was bound to (None: work across workspaces).
    workspace: str | None = None


@dataclass(slots=True)
class _Recorder:
    unit_context: str
    write: bool
    workspace: str | None = None
    node: str = PRIMARY
    attempts: int = 0
    round_trips: int = 0
    statements: list[Statement[Any]] = field(default_factory=list)
    plans: list[str] = field(default_factory=list)
    #: Keep the statements sent (only while someone `capture`s): a unit streaming a
    #: large file sends its rows as parameters, which must not outlive their step.
    keep: bool = True

    def note(self, statements: Iterable[Statement[Any]]) -> None:
        if self.keep:
            self.statements.extend(s for s in statements if not _infrastructure(s))

    def reset(self, node: str) -> None:
        self.node = node
        self.attempts += 1
        self.round_trips = 0
        self.statements.clear()
        self.plans.clear()

    def record(self, error: BaseException | None = None) -> UnitRecord:
        return UnitRecord(
            context=self.unit_context,
            node=self.node,
            write=self.write,
            attempts=self.attempts,
            round_trips=self.round_trips,
            statements=tuple(self.statements),
            plans=tuple(self.plans),
            error=None if error is None else str(error),
            workspace=self.workspace,
        )


class _Rejected(Exception):
    """The router rejected the node after seeing its probe."""


class _Busy(StoreUnavailable):
    """Every connection of a standby's pool is in use: the read goes elsewhere, and
    the router is not told (nothing is wrong with the standby)."""


def _wrapped(exc: BaseException, context: str) -> PgSearchError:
    """`exc` as the pgsearch error `wrap_errors` makes of it (cause kept)."""
    try:
        with wrap_errors(context):
            raise exc
    except PgSearchError as out:
        result: PgSearchError = out
        return result
    raise AssertionError("unreachable")  # pragma: no cover


#: SQLSTATEs of a server ending the connection (an administrator's or a crash's
#: shutdown, a server starting or stopping): nothing more can be sent on it.
_ENDING = frozenset({"57P01", "57P02", "57P03"})


def _lost(conn: Connection | AsyncConnection, exc: BaseException) -> bool:
    if not isinstance(exc, psycopg.OperationalError):
        return False
    if conn.broken or conn.closed:
        return True
    if exc.sqlstate in _ENDING or (exc.sqlstate or "").startswith("08"):
        conn.pgconn.finish()
        return True
    if conn.pgconn.pipeline_status != pq.PipelineStatus.OFF:
        # The server went away in the middle of a pipeline and psycopg, unable to
        # leave pipeline mode ("cannot exit pipeline mode while busy"), raised that
        # instead of the connection's end. Nothing more can be sent on it: close it
        # (the pool then discards it) and treat it as the lost connection it is.
        conn.pgconn.finish()
        return True
    return False


def retriable(exc: BaseException, *, idempotent: bool = False) -> bool:
    """Whether rerunning the whole unit is safe and may succeed (after a lost COMMIT,
    only for a unit that running again cannot change once it committed)."""
    if isinstance(exc, OutcomeUnknown):
        return idempotent
    if isinstance(exc, StoreUnavailable):
        return True
    if not isinstance(exc, StoreError):
        return False
    return isinstance(exc.__cause__, _TRANSIENT) or _shard_moved(exc.__cause__)


def _shard_moved(cause: BaseException | None) -> bool:
    """Citus planned a statement for a shard that a tenant split or move replaced
    while the transaction ran: the transaction was rolled back, and run again it
    is planned for the shard that holds the workspace now."""
    return (
        isinstance(cause, psycopg.Error)
        and cause.sqlstate == "XX000"
        and str(cause).startswith("could not find valid entry for shard")
    )


#: SQLSTATEs a standby cancels a read with when it conflicts with recovery (on a
#: read-only transaction of a standby nothing else raises them).
_RECOVERY_CONFLICT = frozenset({"40001", "40P01", "57P04"})


def _recovery_conflict(exc: BaseException, node: str) -> bool:
    cause = exc.__cause__
    if node == PRIMARY or not isinstance(cause, psycopg.Error):
        return False
    if cause.sqlstate in _RECOVERY_CONFLICT:
        return True
    return cause.sqlstate == "57014" and "conflict with recovery" in str(cause)


def _node_failure(exc: BaseException, node: str) -> bool:
    """A failure the router should hear about: the node, not the work, failed."""
    return isinstance(exc, StoreUnavailable) or _recovery_conflict(exc, node)


def _backoff(attempt: int) -> float:
    return random.uniform(0, min(MAX_BACKOFF, RETRY_BACKOFF * 2 ** min(attempt, 16)))


def _with_network_params(dsn: str) -> dict[str, Any]:
    given = conninfo_to_dict(dsn)
    return {k: v for k, v in NETWORK_PARAMS.items() if k not in given}


@dataclass(slots=True)
class _Batch:
    """The statements of one step as sent, and where its own results are."""

    statements: list[Statement[Any]]
    own: list[int]
    probe: int | None = None
    plans: list[int] = field(default_factory=list)
    commit: bool = False
    lsn: int | None = None


class _Core:
    """What the sync and async drivers share: statements around the work, decoding,
    error mapping, records. No I/O here."""

    def __init__(self, router: Router, config: DriverConfig) -> None:
        self.router = router
        self.config = config
        self.citus = False
        self._returned: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()
        #: When a connection of each node's pool was last handed out.
        self._handed_out: dict[str, float] = {}
        self._captures: list[list[UnitRecord]] = []
        self._capture_lock = threading.Lock()
        #: Set by `close`: every later unit fails with `StoreClosed`, at once.
        self.closed = False

    # --- statements around the work ------------------------------------------------

    def _connection_settings(self) -> list[sql.Composable]:
        """Settings set once per connection: those that hold for every transaction
        (without Citus, which takes them per transaction, `_begin`), and the session's
        time zone (`UTC_SESSION`)."""
        if self.citus:
            return [UTC_SESSION]
        return [
            sql.SQL("SET jit = off"),
            sql.SQL("SET pg_trgm.similarity_threshold = {}").format(
                sql.Literal(self.config.trigram_threshold)
            ),
            UTC_SESSION,
        ]

    def _begin(self, unit: Unit[Any]) -> list[Statement[Any]]:
        out: list[Statement[Any]] = [
            Statement("begin", "BEGIN READ WRITE" if unit.write else "BEGIN READ ONLY")
        ]
        # (name, value): the transaction's settings, values from code or `config`.
        local: list[tuple[LiteralString, str]] = []
        if self.citus:
            local.append(("citus.propagate_set_commands", "local"))
            local.append(("jit", "off"))
            # A statement run often is prepared (psycopg, after five runs), and the
            # server may then plan it once for any parameters: such a plan cannot see
            # the workspace, so a statement joining a row source to a table would be
            # sent to every shard. Planned for its values, each stays on one.
            local.append(("plan_cache_mode", "force_custom_plan"))
            local.append(("pg_trgm.similarity_threshold", str(self.config.trigram_threshold)))
            if self.config.single_shard and unit.workspace is not None:
                # Work bound to one workspace never needs a second shard.
                local.append(("citus.multi_task_query_log_level", "error"))
        if unit.search:
            local.append(("enable_seqscan", "off"))
            if not self.citus:
                # A search's statements are prepared on the connection; planned once
                # for any parameters they skip a planning that cost as much as their
                # execution (the large vocabulary statement most), and their values
                # change little in a plan whose row sources are computed in the
                # statement (bench/README.md, "Plans made once"). Citus keeps custom
                # plans (above), which keep each statement on one shard.
                local.append(("plan_cache_mode", "force_generic_plan"))
                # A generic plan guesses a `LIMIT` parameter large and may then
                # start parallel workers, whose start-up alone costs more than a
                # search (a browse at 1M messages: 7 -> 18 ms): none for searches.
                local.append(("max_parallel_workers_per_gather", "0"))
        timeout = self.config.write_timeout_ms if unit.write else self.config.read_timeout_ms
        if timeout:
            local.append(("statement_timeout", str(timeout)))
        if self.config.rls and unit.workspace is not None:
            local.append(("pgsearch.workspace_id", unit.workspace))
        if self.citus:
            # Only `SET LOCAL` reaches the workers (`citus.propagate_set_commands`).
            out += [
                Statement(
                    "setting",
                    sql.SQL("SET LOCAL {} = {}").format(sql.SQL(name), sql.Literal(value)),
                )
                for name, value in local
            ]
        elif local:
            # One statement for all of them (each `SET LOCAL` would be one more
            # statement in the round trip): the names are the code's, the values
            # parameters, so the statement's text is one of a few, prepared once.
            keys = _SETTING_KEYS[: len(local)]
            calls = [
                "set_config('" + name + "', %(" + key + ")s, true)"
                for key, (name, _) in zip(keys, local, strict=True)
            ]
            out.append(
                Statement(
                    "setting",
                    "SELECT " + ", ".join(calls),
                    {key: value for key, (_, value) in zip(keys, local, strict=True)},
                )
            )
        return out

    def _compose(
        self,
        prefix: list[Statement[Any]],
        step: Step,
        *,
        explain: bool,
        finish: bool,
        lsn: bool,
        probe: Statement[Any] | None = None,
    ) -> _Batch:
        batch = _Batch(statements=list(prefix), own=[])
        if probe is not None:
            # After BEGIN and the settings: the probe sees what the work will see.
            batch.probe = len(batch.statements)
            batch.statements.append(probe)
        for s in step.statements:
            if explain and s.explainable:
                batch.plans.append(len(batch.statements))
                batch.statements.append(explain_of(s))
            batch.own.append(len(batch.statements))
            batch.statements.append(s)
        if finish:
            batch.commit = True
            batch.statements.append(_COMMIT)
            if lsn:
                batch.lsn = len(batch.statements)
                batch.statements.append(_COMMIT_LSN)
        return batch

    def _results(self, batch: _Batch, raw: list[list[Any]], rec: _Recorder) -> Results:
        for i in batch.plans:
            statement = batch.statements[i + 1]
            plan = "\n".join(str(r[0]) for r in raw[i])
            rec.plans.append(f"{statement.text}\n{plan}")
        return tuple(raw[i] for i in batch.own)

    def _accept(self, node: str, batch: _Batch, raw: list[list[Any]]) -> None:
        if batch.probe is not None and not self.router.accept(node, raw[batch.probe]):
            raise _Rejected(node)

    def _committed(self, unit: Unit[Any], node: str, batch: _Batch, raw: list[list[Any]]) -> None:
        if unit.write:
            lsn = raw[batch.lsn][0] if batch.lsn is not None and raw[batch.lsn] else None
            self.router.committed(node, lsn, unit.workspace)

    def _error(
        self,
        exc: BaseException,
        conn: Connection | AsyncConnection | None,
        context: str,
        *,
        commit_sent: bool,
        write: bool,
        node: str = PRIMARY,
    ) -> PgSearchError:
        prefix = f"{context}: " if context else ""
        if isinstance(exc, PoolClosed) or self.closed:
            closed = StoreClosed(f"{prefix}{StoreClosed.__doc__}")
            closed.__cause__ = exc
            return closed
        if isinstance(exc, PoolTimeout):
            # Waited the pool's whole timeout already: retrying on the primary would
            # only multiply the wait; a standby is skipped and the read goes elsewhere.
            kind = StoreError if node == PRIMARY else StoreUnavailable
            if node != PRIMARY and self._saturated(node):
                kind = _Busy
            return kind(
                f"{prefix}database unavailable: no connection within "
                f"{self._timeout(node):g} s ({_first_line(exc)})"
            )
        if conn is not None and _lost(conn, exc):
            if write and commit_sent:
                out: PgSearchError = OutcomeUnknown(
                    f"{prefix}the connection was lost after COMMIT was sent "
                    f"({_first_line(exc)}); whether the transaction committed is unknown"
                )
            else:
                out = StoreUnavailable(f"{prefix}database unavailable: {_first_line(exc)}")
            out.__cause__ = exc
            return out
        return _wrapped(exc, context)

    def _retry_after(
        self, exc: PgSearchError, unit: Unit[Any], attempt: int, started: float, node_failed: bool
    ) -> float | None:
        """Seconds to wait before running `unit` again after `exc`, or None: fail.

        Transient failures get `RETRY_ATTEMPTS` attempts; a store that cannot be
        reached (or a lost COMMIT of an idempotent unit) is tried again until
        `DriverConfig.retry_seconds` after the unit began."""
        if self.closed or not (retriable(exc, idempotent=unit.idempotent) or node_failed):
            return None
        delay = _backoff(attempt)
        if attempt < RETRY_ATTEMPTS:
            return delay
        if not isinstance(exc, StoreUnavailable | OutcomeUnknown):
            return None
        remaining = self.config.retry_seconds - (time.monotonic() - started)
        return min(delay, remaining) if remaining > 0 else None

    def _check_open(self, unit: Unit[Any]) -> None:
        if self.closed:
            prefix = f"{unit.context}: " if unit.context else ""
            raise StoreClosed(f"{prefix}{StoreClosed.__doc__}")

    def _saturated(self, node: str) -> bool:
        """Whether `node`'s pool timed out because its connections were in use, not
        because none could be made: every connection it may have is open and busy,
        or one was handed out within the last two timeouts."""
        pool = getattr(self, "_pools", {}).get(node)
        if pool is None:
            return False
        stats = pool.get_stats()
        if stats["pool_size"] >= stats["pool_max"] and stats["pool_available"] == 0:
            return True
        last = self._handed_out.get(node)
        return last is not None and time.monotonic() - last < 2 * self._timeout(node) + 0.5

    def _node_failed(self, node: str, exc: BaseException) -> None:
        """Tell the router that `node` failed (unless it was only busy)."""
        if not isinstance(exc, _Busy):
            self.router.failed(node, exc)

    # --- observing -----------------------------------------------------------------

    def _publish(self, record: UnitRecord) -> None:
        if self._captures:
            with self._capture_lock:
                for sink in self._captures:
                    sink.append(record)

    @contextmanager
    def capture(self) -> Iterator[list[UnitRecord]]:
        """Every unit run on this driver (any thread or task) while the block runs."""
        sink: list[UnitRecord] = []
        with self._capture_lock:
            self._captures.append(sink)
        try:
            yield sink
        finally:
            with self._capture_lock:
                self._captures.remove(sink)

    # --- pool callbacks ------------------------------------------------------------

    def _pool_kwargs(self, dsn: str) -> dict[str, Any]:
        return {
            "autocommit": True,
            "application_name": self.config.application_name,
            **_with_network_params(dsn),
        }

    def _timeout(self, node: str) -> float:
        return self.config.pool_timeout if node == PRIMARY else self.config.standby_pool_timeout

    def _needs_check(self, conn: Any) -> bool:
        returned = self._returned.get(conn)
        return returned is not None and time.monotonic() - returned > CHECK_IDLE_SECONDS

    def _probe_result(self, row: Sequence[Any], versions: list[str] | None) -> None:
        """Refuse a database this pgsearch cannot serve (schema, row level security)."""
        own, legacy = bool(row[0]), bool(row[1])
        active, role, citus = bool(row[2]), str(row[3]), bool(row[4])
        if versions is not None or not (own or legacy):
            raise_unless_current(versions or [], own=own, legacy=legacy)
        if active and not self.config.rls:
            raise ConfigError(
                f"role {role!r} is subject to pgsearch's row level security policies; "
                "set PGSEARCH_RLS=on so that each transaction is bound to its workspace"
            )
        if self.config.rls and not active:
            log.warning(
                "PGSEARCH_RLS is on but role %r bypasses row level security (it owns the "
                "tables, is a superuser or has BYPASSRLS); connect as another role to "
                "have the database enforce workspace isolation",
                role,
            )
        self.citus = citus


@contextmanager
def _connecting(target: str, dsn: str) -> Iterator[None]:
    """`wrap_errors` for a first connection: libpq may quote words of a malformed
    connection string (a password among them) back in its error."""
    try:
        with wrap_errors(f"cannot connect to {target}"):
            yield
    except PgSearchError as exc:
        raise type(exc)(redact_message(str(exc), dsn)) from exc.__cause__


def _decoder(statement: Statement[Any]) -> Any:
    decode = statement.decode
    return lambda cursor: decode


class _Query(PostgresQuery):
    """psycopg's conversion of a statement and its parameters, with the split of the
    statement's text into parts kept for every text: psycopg keeps it only for texts
    of up to 4 kB, and splitting the vocabulary statement (about 6 kB) again cost
    about half a millisecond a search. pgsearch's texts are a few hundred shapes."""

    __slots__ = ()

    def convert(self, query: Any, vars: Any) -> None:
        # Composed SQL and statements without parameters: psycopg's own way.
        if vars is None or _split_text is None or not isinstance(query, str | bytes):
            super().convert(query, vars)
            return
        text = query.encode(self._tx.encoding) if isinstance(query, str) else query
        key = (text, self._tx.encoding)
        split = _SPLITS.get(key)
        if split is None:
            split = _split_text(text, self._tx.encoding)
            if len(_SPLITS) >= MAX_SPLITS:
                _SPLITS.clear()
            _SPLITS[key] = split
        self.query, self._want_formats, self._order, self._parts = split
        self.dump(vars)


try:  # the splitter psycopg uses uncached (present since psycopg 3.0)
    from psycopg._queries import _query2pg_nocache as _split_text
except ImportError:  # pragma: no cover - a psycopg without it converts as usual
    _split_text = None  # type: ignore[assignment]
#: Split statement texts kept (process-wide; the cache is cleared when full).
MAX_SPLITS = 1024
_SPLITS: dict[tuple[bytes, str], Any] = {}


#: Names of the statements prepared on each connection, by their text and types.
_Prepared = dict[tuple[bytes, tuple[int, ...]], bytes]
#: A statement is prepared the second time a connection sends it (a one-off is not).
PREPARE_AFTER = 1
#: Statements prepared per connection at most (the rest run unprepared).
MAX_PREPARED = 256
#: A prepared statement's plan is made from the tables' sizes at the time, and kept
#: until their statistics change (autovacuum's ANALYZE, up to a minute after a load): a
#: plan made on nearly empty tables, where every index costs the same, can take one
#: that does not narrow and turn a browse quadratic once the tables have grown (6,000
#: messages: 4.6 s). A connection reads the rows the server counts in the tables
#: searches read (its cumulative statistics: no lock on the tables, so a table locked
#: by someone else holds up nothing that does not read it) at most every
#: `SIZES_EVERY` seconds, and makes its plans again once they have grown past
#: `REPLAN_GROWTH` times the rows its plans were made at, plus `REPLAN_SLACK`: a few
#: times in a database's life. (A standby counts no rows: its plans are made again
#: when the primary's ANALYZE reaches it.)
SIZES_EVERY = 1.0
REPLAN_GROWTH = 2
REPLAN_SLACK = 500
_SIZES = (
    b"SELECT coalesce(pg_stat_get_live_tuples(to_regclass('messages')), 0)"
    b" + coalesce(pg_stat_get_live_tuples(to_regclass('vocabulary')), 0)"
    b" + coalesce(pg_stat_get_live_tuples(to_regclass('sessions')), 0)"
)


@dataclass(slots=True)
class _Batching:
    """What a connection keeps for `_batch`: its prepared statements and sightings."""

    prepared: _Prepared = field(default_factory=dict)
    seen: dict[tuple[bytes, tuple[int, ...]], int] = field(default_factory=dict)
    #: Names given so far (a batch that failed may still have prepared its own).
    named: int = 0
    #: The tables' rows the prepared statements' plans were made at (-1: not read
    #: yet), and when to read them next (`time.monotonic`).
    planned_at: int = -1
    sizes_due: float = 0.0
    #: Prepared statements to deallocate at the start of the next batch.
    closing: list[bytes] = field(default_factory=list)

    def grown(self, size: int) -> None:
        """Note the tables' rows counted now; past the growth, plan everything again."""
        if self.planned_at < 0:
            self.planned_at = size
        elif size > REPLAN_GROWTH * self.planned_at + REPLAN_SLACK:
            log.debug("tables grew from %d to %d rows: planning again", self.planned_at, size)
            self.planned_at = size
            for key, name in self.prepared.items():
                self.closing.append(name)
                self.seen[key] = PREPARE_AFTER  # prepared again when next sent
            self.prepared.clear()


def _batch(
    conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any],
    statements: Sequence[Statement[Any]],
    state: _Batching,
    *,
    prepare: bool = True,
) -> PQGen[list[list[Any]]]:
    """Send `statements` in one pipeline and one write, then read every result: the
    rows of each (decoded), or the first error raised.

    A statement already sent `PREPARE_AFTER` times on this connection is prepared
    (in the same batch) and runs prepared from then on; a preparation counts once the
    batch that made it succeeded. Without `prepare` (Citus, where a generic plan of a
    prepared statement may fan out to every shard) nothing is prepared. A batch that
    starts between transactions first drops the statements `_Batching.grown` retired
    and, at most every `SIZES_EVERY` seconds, reads the tables' rows last (`_SIZES`);
    neither result is returned.
    """
    pgconn = conn.pgconn
    tx = Transformer(conn)
    fresh: list[tuple[tuple[bytes, tuple[int, ...]], bytes]] = []
    preparings: list[bool] = []
    # Between transactions only: plans dropped go first, the sizes are read last.
    idle = prepare and pgconn.transaction_status == TransactionStatus.IDLE
    closing: list[bytes] = []
    sizes = False
    if idle:
        closing, state.closing = state.closing, []
        sizes = time.monotonic() >= state.sizes_due
    pgconn.enter_pipeline_mode()
    try:
        for old in closing:
            pgconn.send_query_params(b"DEALLOCATE " + old, None)
        for s in statements:
            query = _Query(tx)
            query.convert(s.sql, s.params)
            key = (query.query, query.types)
            name = state.prepared.get(key)
            if name is None and prepare and len(state.prepared) + len(fresh) < MAX_PREPARED:
                seen = state.seen.get(key, 0)
                if seen >= PREPARE_AFTER:
                    state.named += 1
                    name = b"pgsearch_%d" % state.named
                    pgconn.send_prepare(name, query.query, param_types=query.types)
                    fresh.append((key, name))
                    state.seen.pop(key, None)
                else:
                    if len(state.seen) >= 4 * MAX_PREPARED:
                        state.seen.clear()
                    state.seen[key] = seen + 1
            preparings.append(bool(fresh) and fresh[-1][1] == name)
            if name is None:
                pgconn.send_query_params(
                    query.query,
                    query.params,
                    param_formats=query.formats,
                    param_types=query.types,
                    result_format=pq.Format.TEXT,
                )
            else:
                pgconn.send_query_prepared(
                    name, query.params, param_formats=query.formats, result_format=pq.Format.TEXT
                )
        if sizes:
            pgconn.send_query_params(_SIZES, None, result_format=pq.Format.TEXT)
        pgconn.pipeline_sync()
        yield from generators.send(pgconn)
        results: list[list[pq.abc.PGresult]] = []
        while True:
            got = yield from generators.fetch_many(pgconn)
            if len(got) == 1 and got[0].status == pq.ExecStatus.PIPELINE_SYNC:
                break
            results.append(got)
        pgconn.exit_pipeline_mode()
    except BaseException:
        if pgconn.pipeline_status == pq.PipelineStatus.ON and not pgconn.is_busy():
            try:
                pgconn.exit_pipeline_mode()
            except psycopg.Error:
                pass
        raise
    encoding = conn.info.encoding
    error: psycopg.Error | None = None
    for got in results:
        for res in got:
            if res.status == pq.ExecStatus.FATAL_ERROR and error is None:
                error = psycopg.errors.error_from_result(res, encoding=encoding)
    if error is not None:
        raise error
    state.prepared.update(fresh)
    if sizes:
        state.sizes_due = time.monotonic() + SIZES_EVERY
        value = results.pop()[-1].get_value(0, 0)
        state.grown(int(value) if value is not None else 0)
    # A statement prepared in this batch has its preparation's result first.
    own = iter(results[len(closing) :])
    out: list[list[Any]] = []
    for s, preparing in zip(statements, preparings, strict=True):
        if preparing:
            next(own)
        res = next(own)[-1]
        if res.status == pq.ExecStatus.TUPLES_OK:
            tx.set_pgresult(res)
            out.append(tx.load_rows(0, res.ntuples, s.decode))
        else:
            out.append([])
    return out


_BATCHING: weakref.WeakKeyDictionary[Any, _Batching] = weakref.WeakKeyDictionary()
_BATCHING_LOCK = threading.Lock()


def _batching(conn: Any) -> _Batching:
    """The `_Batching` of `conn` (made on first use; a connection serves one unit at
    a time, so only the making needs the lock)."""
    state = _BATCHING.get(conn)
    if state is None:
        with _BATCHING_LOCK:
            state = _BATCHING.setdefault(conn, _Batching())
    return state


@dataclass(slots=True)
class _Done:
    value: Any


class _Run:
    """One attempt of a unit as a state machine: batches out, raw rows in (no I/O).

    The sync and async drivers feed it; it keeps the generator, the transaction's
    opening statements, deferred savepoint bookkeeping and the commit.
    """

    def __init__(self, core: _Core, unit: Unit[Any], choice: Choice, rec: _Recorder) -> None:
        self.core = core
        self.unit = unit
        self.choice = choice
        self.rec = rec
        self.gen = unit.work()
        self.prefix = core._begin(unit)
        self.probe = choice.probe
        self.pending: list[Statement[Any]] = []
        self.lsn = unit.write and core.router.wants_commit_lsn
        #: The error thrown into the work that it answered by returning.
        self.swallowed: PgSearchError | None = None
        self.done: _Done | None = None
        self.last = _Batch(statements=[], own=[])

    def start(self) -> _Batch | _Done:
        try:
            step = next(self.gen)
        except StopIteration as stop:
            return _Done(stop.value)  # no statement at all: no transaction either
        return self._next(step)

    def _next(self, step: Step) -> _Batch | _Done:
        while _deferrable(step):
            self.pending += step.statements
            try:
                step = self.gen.send(_empty(step))
            except StopIteration as stop:
                return self._finish(stop.value)
        batch = self.core._compose(
            self.prefix + self.pending,
            step,
            explain=self.unit.explain,
            finish=step.final,
            lsn=self.lsn,
            probe=self.probe,
        )
        self.prefix, self.pending, self.probe = [], [], None
        self.last = batch
        return batch

    def _finish(self, value: Any) -> _Batch | _Done:
        """The work returned: COMMIT (with anything deferred) in one more round trip."""
        if self.swallowed is not None:
            raise self.swallowed  # its transaction is aborted: nothing can be committed
        self.done = _Done(value)
        self.last = self.core._compose(
            self.pending, Step(()), explain=False, finish=True, lsn=self.lsn
        )
        return self.last

    def received(self, batch: _Batch, raw: list[list[Any]]) -> _Batch | _Done:
        self.core._accept(self.choice.node, batch, raw)
        results = self.core._results(batch, raw, self.rec)
        if batch.commit:
            self.core._committed(self.unit, self.choice.node, batch, raw)
            if self.done is not None:
                return self.done
            try:
                self.gen.send(results)
            except StopIteration as stop:
                return _Done(stop.value)
            self.gen.close()
            raise ProtocolError("a work yielded a step after its final step")
        try:
            step = self.gen.send(results)
        except StopIteration as stop:
            return self._finish(stop.value)
        return self._next(step)

    def failed(self, error: PgSearchError) -> _Batch | _Done:
        """A round trip failed: throw the error into the work, unless nothing can
        follow (the connection is gone, or COMMIT was part of the step)."""
        if self.last.commit or isinstance(error, StoreUnavailable | OutcomeUnknown):
            self.gen.close()
            raise error
        try:
            step = self.gen.throw(error)
        except StopIteration as stop:
            self.swallowed = error
            return self._finish(stop.value)
        return self._next(step)


class _HandedOver:
    """The ``connection_class`` of a pool: its first connection is one already open
    (the probe's, configured by the pool like any other), later ones are new."""

    def __init__(self, first: Connection | None) -> None:
        self._first = first
        self._lock = threading.Lock()

    def _take(self) -> Connection | None:
        with self._lock:
            first, self._first = self._first, None
        return first

    def connect(self, conninfo: str, **kwargs: Any) -> Connection:
        first = self._take()
        if first is not None and not first.closed:
            return first
        return psycopg.Connection.connect(conninfo, **kwargs)

    def discard(self) -> None:
        """Close the first connection if the pool never took it."""
        first = self._take()
        if first is not None:
            first.close()


class Driver(_Core):
    """Runs units on a `ConnectionPool` per node; shared by every thread of a process."""

    def __init__(self, router: Router, config: DriverConfig) -> None:
        super().__init__(router, config)
        self._pools: dict[str, ConnectionPool[Connection]] = {}
        self._handed: list[_HandedOver] = []

    @classmethod
    def open(
        cls,
        router: Router | str,
        config: DriverConfig | None = None,
        *,
        check_schema: bool = True,
    ) -> Driver:
        """Probe the primary (schema, role, Citus), then open the pools.

        The probe runs on a connection of its own so that a wrong DSN or a missing
        schema fails at once with a clear error instead of after the pool's timeout.
        That connection then becomes the primary pool's first one: a command that
        needs one connection (every CLI command) opens exactly one.
        """
        router = PrimaryRouter(router) if isinstance(router, str) else router
        driver = cls(router, config or DriverConfig())
        dsn = router.nodes[PRIMARY]
        target = redact_dsn(dsn) or "the default PostgreSQL"
        with _connecting(target, dsn):
            probe = psycopg.connect(dsn, **driver._pool_kwargs(dsn))
        try:
            with wrap_errors("checking the schema"):
                row, versions = _probe(probe, check_schema=check_schema)
            if check_schema:
                driver._probe_result(row, versions)
            else:
                driver.citus = bool(row[4])
        except BaseException:
            probe.close()
            raise
        for name, node_dsn in router.nodes.items():
            handed = _HandedOver(probe if name == PRIMARY else None)
            driver._handed.append(handed)
            driver._pools[name] = driver._make_pool(name, node_dsn, handed)
        return driver

    def _make_pool(self, name: str, dsn: str, handed: _HandedOver) -> ConnectionPool[Connection]:
        pool: ConnectionPool[Connection] = ConnectionPool(
            dsn,
            connection_class=cast(type[Connection], handed),
            min_size=min(self.config.pool_min, self.config.pool_max),
            max_size=self.config.pool_max,
            kwargs=self._pool_kwargs(dsn),
            configure=self._configure,
            check=self._check,
            timeout=self._timeout(name),
            name=f"pgsearch-{name}",
            open=False,
        )
        pool.open(wait=False)
        return pool

    def _configure(self, conn: Connection) -> None:
        conn.execute(sql.SQL("; ").join(self._connection_settings()))

    def _check(self, conn: Connection) -> None:
        if self._needs_check(conn):
            ConnectionPool.check_connection(conn)

    def _put(self, pool: ConnectionPool[Connection], conn: Connection) -> None:
        """Give `conn` back, noting when (the idle check of `_check` reads it).

        Done here rather than in a pool ``reset`` callback: with one, the pool
        returns every connection through a background worker, and on a busy machine
        the next request then waits for that worker instead of taking the
        connection at once.
        """
        self._returned[conn] = time.monotonic()
        pool.putconn(conn)

    def close(self) -> None:
        """Close every pool (connections in use are closed when returned)."""
        self.closed = True
        for pool in self._pools.values():
            pool.close()
        for handed in self._handed:
            handed.discard()

    def pool_stats(self) -> dict[str, dict[str, int]]:
        return {name: pool.get_stats() for name, pool in self._pools.items()}

    # --- running units -------------------------------------------------------------

    def _choose(self, intent: Intent) -> Choice:
        """The router's choice for `intent`, after a sample of the primary when the
        router asks for one."""
        choice = self.router.choose(intent)
        if choice.sample is None:
            return choice
        self.router.sampled(self._sample(choice.sample))
        return _settled(self.router.choose(intent))

    def _sample(self, statement: Statement[Any]) -> list[Any] | None:
        pool = self._pools[PRIMARY]
        try:
            conn = pool.getconn(timeout=SAMPLE_TIMEOUT)
        except (PoolTimeout, PoolClosed):
            return None
        try:
            with conn.cursor(row_factory=_decoder(statement)) as cur:
                cur.execute(statement.sql, statement.params)
                return cur.fetchall()
        except psycopg.Error as exc:
            log.debug("sampling the primary failed: %s", exc)
            return None
        finally:
            self._put(pool, conn)

    def run(self, unit: Unit[T]) -> T:
        """Run `unit` in one transaction, retried per the module's policy."""
        self._check_open(unit)
        rec = _Recorder(unit.context, unit.write, unit.workspace, keep=bool(self._captures))
        excluded: set[str] = set()
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            choice = self._choose(_intent(unit, attempt, excluded))
            if choice.delay > 0:
                time.sleep(min(choice.delay, MAX_ROUTER_DELAY))
            rec.reset(choice.node)
            try:
                value = self._attempt(unit, choice, rec)
            except _Rejected:
                excluded.add(choice.node)
                if attempt >= RETRY_ATTEMPTS:
                    raise StoreError(f"{unit.context}: no node accepted the work") from None
                continue
            except PgSearchError as exc:
                node_failed = _node_failure(exc, choice.node)
                if node_failed:
                    self._node_failed(choice.node, exc)
                    excluded.add(choice.node)
                    if isinstance(exc, StoreUnavailable) and not isinstance(exc, _Busy):
                        self._pools[choice.node].check()
                delay = self._retry_after(exc, unit, attempt, started, node_failed)
                if delay is None:
                    self._publish(rec.record(exc))
                    raise
                log.info("retrying after %s (attempt %d)", exc, attempt)
                time.sleep(delay)
                continue
            except BaseException as exc:
                self._publish(rec.record(exc))
                raise
            self._publish(rec.record())
            return value

    def _attempt(self, unit: Unit[T], choice: Choice, rec: _Recorder) -> T:
        pool = self._pools[choice.node]
        try:
            conn = pool.getconn()
            self._handed_out[choice.node] = time.monotonic()
        except (PoolTimeout, PoolClosed) as exc:
            raise self._error(
                exc, None, unit.context, commit_sent=False, write=unit.write, node=choice.node
            ) from exc
        try:
            return self._on(conn, unit, choice, rec)
        except BaseException:
            self._rollback(conn)
            raise
        finally:
            self._put(pool, conn)

    def _on(self, conn: Connection, unit: Unit[T], choice: Choice, rec: _Recorder) -> T:
        run = _Run(self, unit, choice, rec)
        out = run.start()
        while isinstance(out, _Batch):
            try:
                raw = self._send(conn, out.statements, rec)
            except (psycopg.Error, UnicodeEncodeError) as exc:
                out = run.failed(self._error(exc, conn, unit.context, commit_sent=out.commit,
                                             write=unit.write))  # fmt: skip
                continue
            out = run.received(out, raw)
        return out.value  # type: ignore[no-any-return]

    def _send(
        self, conn: Connection, statements: Sequence[Statement[Any]], rec: _Recorder
    ) -> list[list[Any]]:
        """Send statements in as few round trips as COPY allows; rows per statement."""
        out: list[list[Any]] = []
        run: list[Statement[Any]] = []
        for s in statements:
            if s.copy_rows is None:
                run.append(s)
                continue
            out += self._pipeline(conn, run, rec)
            run = []
            rec.note((s,))
            rec.round_trips += 2  # COPY: the statement, then the data and its end
            with conn.cursor() as cur, cur.copy(s.sql, s.params) as copy:
                for row in s.copy_rows:
                    copy.write_row(row)
            out.append([])
        out += self._pipeline(conn, run, rec)
        return out

    def _pipeline(
        self, conn: Connection, statements: list[Statement[Any]], rec: _Recorder
    ) -> list[list[Any]]:
        if not statements:
            return []
        rec.round_trips += 1
        rec.note(statements)
        return conn.wait(_batch(conn, statements, _batching(conn), prepare=not self.citus))

    def _rollback(self, conn: Connection) -> None:
        if conn.broken or conn.closed:
            return
        if conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
            try:
                conn.execute(_ROLLBACK)
            except psycopg.Error as exc:  # the connection is then discarded by the pool
                log.debug("rollback failed: %s", exc)


def _intent(unit: Unit[Any], attempt: int, excluded: set[str]) -> Intent:
    return Intent(
        write=unit.write,
        workspace=unit.workspace,
        attempt=attempt,
        excluded=frozenset(excluded),
        primary=unit.primary,
    )


def _settled(choice: Choice) -> Choice:
    """`choice`, unless it asks for a second sample in a row: then the primary."""
    return choice if choice.sample is None else Choice(node=PRIMARY)


_INFRA = frozenset({"begin", "setting", "commit", "commit lsn"})


def _infrastructure(statement: Statement[Any]) -> bool:
    return statement.name in _INFRA or statement.name.startswith("explain ")


def _deferrable(step: Step) -> bool:
    """Savepoint bookkeeping that can wait for the next round trip."""
    return (
        bool(step.statements) and not step.final and all(s.name in _DEFER for s in step.statements)
    )


_DEFER = frozenset({"release savepoint", "rollback to savepoint"})


def _empty(step: Step) -> Results:
    return tuple([] for _ in step.statements)


class AsyncDriver(_Core):
    """`Driver` for asyncio: the same units on an `AsyncConnectionPool` per node."""

    def __init__(self, router: Router, config: DriverConfig) -> None:
        super().__init__(router, config)
        self._pools: dict[str, AsyncConnectionPool[AsyncConnection]] = {}

    @classmethod
    async def open(
        cls,
        router: Router | str,
        config: DriverConfig | None = None,
        *,
        check_schema: bool = True,
    ) -> AsyncDriver:
        """As `Driver.open`, inside the running event loop."""
        router = PrimaryRouter(router) if isinstance(router, str) else router
        driver = cls(router, config or DriverConfig())
        dsn = router.nodes[PRIMARY]
        target = redact_dsn(dsn) or "the default PostgreSQL"
        with _connecting(target, dsn):
            probe = await psycopg.AsyncConnection.connect(dsn, **driver._pool_kwargs(dsn))
        async with probe:
            with wrap_errors("checking the schema"):
                cur = await probe.execute(_PROBE)
                row = await cur.fetchone()
                assert row is not None
                versions = None
                query = _versions_query(row)
                if check_schema and query is not None:
                    cur = await probe.execute(query)
                    versions = [str(r[0]) for r in await cur.fetchall()]
            if check_schema:
                driver._probe_result(row, versions)
            else:
                driver.citus = bool(row[4])
        for name, node_dsn in router.nodes.items():
            pool: AsyncConnectionPool[AsyncConnection] = AsyncConnectionPool(
                node_dsn,
                min_size=min(driver.config.pool_min, driver.config.pool_max),
                max_size=driver.config.pool_max,
                kwargs=driver._pool_kwargs(node_dsn),
                configure=driver._configure,
                check=driver._check,
                timeout=driver._timeout(name),
                name=f"pgsearch-async-{name}",
                open=False,
            )
            await pool.open(wait=False)
            driver._pools[name] = pool
        return driver

    async def _configure(self, conn: AsyncConnection) -> None:
        await conn.execute(sql.SQL("; ").join(self._connection_settings()))

    async def _check(self, conn: AsyncConnection) -> None:
        if self._needs_check(conn):
            await AsyncConnectionPool.check_connection(conn)

    async def _put(self, pool: AsyncConnectionPool[AsyncConnection], conn: AsyncConnection) -> None:
        """As `Driver._put`."""
        self._returned[conn] = time.monotonic()
        await pool.putconn(conn)

    async def close(self) -> None:
        self.closed = True
        for pool in self._pools.values():
            await pool.close()

    def pool_stats(self) -> dict[str, dict[str, int]]:
        return {name: pool.get_stats() for name, pool in self._pools.items()}

    async def _choose(self, intent: Intent) -> Choice:
        """As `Driver._choose`."""
        choice = self.router.choose(intent)
        if choice.sample is None:
            return choice
        self.router.sampled(await self._sample(choice.sample))
        return _settled(self.router.choose(intent))

    async def _sample(self, statement: Statement[Any]) -> list[Any] | None:
        pool = self._pools[PRIMARY]
        try:
            conn = await pool.getconn(timeout=SAMPLE_TIMEOUT)
        except (PoolTimeout, PoolClosed):
            return None
        try:
            async with conn.cursor(row_factory=_decoder(statement)) as cur:
                await cur.execute(statement.sql, statement.params)
                return await cur.fetchall()
        except psycopg.Error as exc:
            log.debug("sampling the primary failed: %s", exc)
            return None
        finally:
            await self._put(pool, conn)

    async def run(self, unit: Unit[T]) -> T:
        """Run `unit` in one transaction, retried per the module's policy."""
        self._check_open(unit)
        rec = _Recorder(unit.context, unit.write, unit.workspace, keep=bool(self._captures))
        excluded: set[str] = set()
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            choice = await self._choose(_intent(unit, attempt, excluded))
            if choice.delay > 0:
                await asyncio.sleep(min(choice.delay, MAX_ROUTER_DELAY))
            rec.reset(choice.node)
            try:
                value = await self._attempt(unit, choice, rec)
            except _Rejected:
                excluded.add(choice.node)
                if attempt >= RETRY_ATTEMPTS:
                    raise StoreError(f"{unit.context}: no node accepted the work") from None
                continue
            except PgSearchError as exc:
                node_failed = _node_failure(exc, choice.node)
                if node_failed:
                    self._node_failed(choice.node, exc)
                    excluded.add(choice.node)
                    if isinstance(exc, StoreUnavailable) and not isinstance(exc, _Busy):
                        await self._pools[choice.node].check()
                delay = self._retry_after(exc, unit, attempt, started, node_failed)
                if delay is None:
                    self._publish(rec.record(exc))
                    raise
                log.info("retrying after %s (attempt %d)", exc, attempt)
                await asyncio.sleep(delay)
                continue
            except BaseException as exc:
                self._publish(rec.record(exc))
                raise
            self._publish(rec.record())
            return value

    async def _attempt(self, unit: Unit[T], choice: Choice, rec: _Recorder) -> T:
        pool = self._pools[choice.node]
        try:
            conn = await pool.getconn()
            self._handed_out[choice.node] = time.monotonic()
        except (PoolTimeout, PoolClosed) as exc:
            raise self._error(
                exc, None, unit.context, commit_sent=False, write=unit.write, node=choice.node
            ) from exc
        try:
            return await self._on(conn, unit, choice, rec)
        except BaseException:
            await self._rollback(conn)
            raise
        finally:
            await self._put(pool, conn)

    async def _on(self, conn: AsyncConnection, unit: Unit[T], choice: Choice, rec: _Recorder) -> T:
        run = _Run(self, unit, choice, rec)
        out = run.start()
        while isinstance(out, _Batch):
            try:
                raw = await self._send(conn, out.statements, rec)
            except (psycopg.Error, UnicodeEncodeError) as exc:
                out = run.failed(self._error(exc, conn, unit.context, commit_sent=out.commit,
                                             write=unit.write))  # fmt: skip
                continue
            out = run.received(out, raw)
        return out.value  # type: ignore[no-any-return]

    async def _send(
        self, conn: AsyncConnection, statements: Sequence[Statement[Any]], rec: _Recorder
    ) -> list[list[Any]]:
        out: list[list[Any]] = []
        run: list[Statement[Any]] = []
        for s in statements:
            if s.copy_rows is None:
                run.append(s)
                continue
            out += await self._pipeline(conn, run, rec)
            run = []
            rec.note((s,))
            rec.round_trips += 2
            async with conn.cursor() as cur, cur.copy(s.sql, s.params) as copy:
                for row in s.copy_rows:
                    await copy.write_row(row)
            out.append([])
        out += await self._pipeline(conn, run, rec)
        return out

    async def _pipeline(
        self, conn: AsyncConnection, statements: list[Statement[Any]], rec: _Recorder
    ) -> list[list[Any]]:
        if not statements:
            return []
        rec.round_trips += 1
        rec.note(statements)
        batch = _batch(conn, statements, _batching(conn), prepare=not self.citus)
        return await conn.wait(batch)

    async def _rollback(self, conn: AsyncConnection) -> None:
        if conn.broken or conn.closed:
            return
        if conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
            try:
                await conn.execute(_ROLLBACK)
            except psycopg.Error as exc:
                log.debug("rollback failed: %s", exc)

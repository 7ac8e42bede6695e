"""Where each attempt of a unit of work runs: the `Router` seam of the drivers.

The drivers (`pgsearch.db.driver`) own one connection pool per node and ask a router,
once per attempt, which node to use. A router holds no pools and performs no I/O of
its own, so one router serves the sync and the asyncio driver alike; what it needs to
know about a node it asks for with a *probe* statement, which the driver sends in the
attempt's first round trip and hands back to `Router.accept`.

`PrimaryRouter` (one node for everything) is the default; `ReplicaRouter` sends
reads to streaming standbys (``PGSEARCH_READ_DSN``) with read-your-writes, and
access decisions (units marked `Unit.primary`: token lookups) to the primary.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pgsearch.db.dsn import parse_error as dsn_parse_error
from pgsearch.db.dsn import redact_dsn, redact_message
from pgsearch.db.work import Statement
from pgsearch.errors import ConfigError, StoreUnavailable

log = logging.getLogger(__name__)

#: The node that takes writes; every router has it.
PRIMARY = "primary"


@dataclass(frozen=True, kw_only=True)
class Intent:
    """What the driver is about to run."""

    write: bool
    workspace: str | None
    #: 1 for the first attempt of a unit, then 2, 3, ... for its retries.
    attempt: int
    #: Nodes that failed or were rejected earlier in this unit.
    excluded: frozenset[str] = frozenset()
    #: A read that must not trail the primary (an access decision): run it there.
    primary: bool = False


@dataclass(frozen=True, kw_only=True)
class Choice:
    """Where to run an attempt, and what to ask that node first."""

    node: str
    #: Sent first in the attempt's first round trip; its rows go to `Router.accept`.
    probe: Statement[Any] | None = None
    #: Seconds to wait before the attempt (a bounded wait for a standby to catch up).
    delay: float = 0.0
    #: Asked of the primary first, outside any transaction, when the router needs
    #: its current state: the driver sends it, hands the rows (None when the primary
    #: did not answer) to `Router.sampled`, and calls `choose` again for the attempt;
    #: `node` and `probe` of this choice are then unused.
    sample: Statement[Any] | None = None


class Router(Protocol):
    """Chooses nodes for attempts and learns from commits and failures.

    The driver guarantees: `choose` once per attempt; `committed` only after the server
    acknowledged ``COMMIT`` (with the WAL position after it when `wants_commit_lsn`);
    `failed` for a lost connection or a recovery conflict before the unit is retried.
    """

    @property
    def nodes(self) -> Mapping[str, str]:
        """Node name to DSN; always holds `PRIMARY`."""
        ...

    @property
    def wants_commit_lsn(self) -> bool: ...

    def choose(self, intent: Intent) -> Choice: ...

    def accept(self, node: str, probe_rows: list[Any]) -> bool:
        """False rejects the node for this attempt (rolled back, then `choose` again)."""
        ...

    def committed(self, node: str, lsn: str | None, workspace: str | None) -> None:
        """A write unit bound to `workspace` committed on `node`."""
        ...

    def failed(self, node: str, error: BaseException) -> None: ...

    def sampled(self, rows: list[Any] | None) -> None:
        """The rows of a `Choice.sample` (None: the primary did not answer)."""
        ...


def router_for(settings: Any) -> Router:
    """The router `settings` call for (`PgSearch.connect` uses this)."""
    read_dsns: Sequence[str] = getattr(settings, "read_dsns", ())
    for position, dsn in enumerate(read_dsns, 1):
        _check_read_dsn(dsn, position)
    if read_dsns:
        return ReplicaRouter(
            settings.dsn,
            read_dsns,
            wait_ms=settings.read_wait_ms,
            max_lag_ms=settings.read_max_lag_ms,
        )
    return PrimaryRouter(settings.dsn)


def _check_read_dsn(dsn: str, position: int) -> None:
    problem = dsn_parse_error(dsn)
    if problem is not None:
        raise ConfigError(
            f"PGSEARCH_READ_DSN: standby {position} ({redact_dsn(dsn) or 'empty'}) is not a "
            f"valid connection string: {redact_message(problem, dsn)}; separate "
            "standbys with commas"
        )


class PrimaryRouter:
    """Everything on one server."""

    def __init__(self, dsn: str) -> None:
        self._nodes = {PRIMARY: dsn}

    @property
    def nodes(self) -> Mapping[str, str]:
        return self._nodes

    @property
    def wants_commit_lsn(self) -> bool:
        return False

    def choose(self, intent: Intent) -> Choice:
        return Choice(node=PRIMARY)

    def accept(self, node: str, probe_rows: list[Any]) -> bool:
        return True

    def committed(self, node: str, lsn: str | None, workspace: str | None) -> None:
        return None

    def failed(self, node: str, error: BaseException) -> None:
        return None

    def sampled(self, rows: list[Any] | None) -> None:
        return None


def standby_name(position: int) -> str:
    """The node name of the `position`-th standby of ``PGSEARCH_READ_DSN`` (from 1)."""
    return f"standby{position}"


#: Milliseconds between two looks at the replay position while a standby catches up.
WAIT_STEP_MS = 2
#: Seconds a standby that could not be reached is passed over, doubled per failure
#: in a row up to the ceiling; one read then tries it again.
DOWN_BACKOFF = 1.0
DOWN_BACKOFF_MAX = 30.0
#: Seconds a standby found lagging beyond the limit is passed over.
LAG_BACKOFF = 1.0


#: Seconds a sample of the primary's WAL position is used before a new one is taken.
SAMPLE_SECONDS = 0.5
#: Seconds the driver waits for a primary connection to take a sample.
SAMPLE_TIMEOUT = 1.0

#: The primary's current WAL position (what a standby's replay is measured against).
PRIMARY_POSITION: Statement[str] = Statement(
    "primary position", "SELECT pg_current_wal_lsn()::text", decode=lambda r: str(r[0])
)


def replay_probe(
    lsn: str | None, wait_ms: int, primary_lsn: str | None = None
) -> Statement[tuple[bool, bool, bool, float]]:
    """What a standby is asked first: (in recovery, replayed `lsn`, WAL receiver
    running, lag in ms).

    The statement itself waits, up to `wait_ms`, until the standby has replayed
    `lsn`: the rows of `generate_series` are looked at one by one, each after a
    ``WAIT_STEP_MS`` sleep, until one finds the position replayed, the time is up
    or the last row is reached. Statements after it in the transaction take their
    snapshots later, so they see everything up to `lsn` when it says replayed.

    The lag is measured against the primary, not against what the standby
    received (a standby cut off from its primary has replayed all it received):
    0 when the standby has replayed `primary_lsn` (the primary's position, sampled
    at most `SAMPLE_SECONDS` ago; None when unknown), else the time since it last
    replayed a transaction (unbounded when it has replayed none since it started).
    A standby whose WAL receiver is not running cannot catch up at all.
    """
    steps = max(0, wait_ms // WAIT_STEP_MS) if lsn is not None else 0
    return Statement(
        "standby probe",
        """
SELECT pg_is_in_recovery(),
       %(lsn)s::pg_lsn IS NULL OR pg_last_wal_replay_lsn() >= %(lsn)s::pg_lsn,
       NOT pg_is_in_recovery() OR EXISTS (SELECT FROM pg_stat_wal_receiver),
       CASE WHEN NOT pg_is_in_recovery()
                 OR %(primary)s::pg_lsn IS NULL
                 OR pg_last_wal_replay_lsn() >= %(primary)s::pg_lsn THEN 0
            ELSE coalesce(extract(epoch FROM clock_timestamp()
                                             - pg_last_xact_replay_timestamp()) * 1000,
                          'Infinity')
       END::float8
FROM generate_series(0, %(steps)s) AS step(i)
WHERE CASE WHEN step.i = %(steps)s THEN true
           WHEN %(lsn)s::pg_lsn IS NULL OR NOT pg_is_in_recovery() THEN true
           WHEN pg_last_wal_replay_lsn() >= %(lsn)s::pg_lsn THEN true
           WHEN clock_timestamp() >= statement_timestamp()
                + make_interval(secs => %(wait)s) THEN true
           ELSE pg_sleep(%(step)s) IS NULL
      END
LIMIT 1""",
        {
            "lsn": lsn,
            "primary": primary_lsn,
            "steps": steps,
            "wait": wait_ms / 1000,
            "step": WAIT_STEP_MS / 1000,
        },
        decode=lambda r: (bool(r[0]), bool(r[1]), bool(r[2]), float(r[3])),
    )


#: Seconds one read may spend finding out whether a standby is back before others
#: may try too (it normally reports much sooner, through `accept` or `failed`).
TRIAL_SECONDS = 10.0


@dataclass(slots=True)
class _Standby:
    name: str
    #: Until this monotonic time the standby is passed over (down, or lagging).
    skip_until: float = 0.0
    #: Back-offs in a row (each failure after the standby was tried again).
    failures: int = 0
    #: While a read tries a standby that was down, until when the others wait.
    trial_until: float = 0.0
    warned_primary: bool = False


def _lsn_key(lsn: str) -> int:
    """A ``pg_lsn`` text (``16/B374D848``) as a number, for comparisons."""
    high, _, low = lsn.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


class ReplicaRouter:
    """Writes on the primary; reads on a streaming standby, reading your writes.

    After a write unit bound to a workspace commits, reads of that workspace (and
    reads bound to no workspace) wait on a standby until it has replayed that
    commit: a bounded wait (`wait_ms`) inside the probe statement, after which a
    standby still behind is passed over for the primary. Writes of every thread and
    task of the process count, so a read started after a write returned sees it.
    A standby lagging more than `max_lag_ms` behind the primary (whose current WAL
    position the router samples at most every `SAMPLE_SECONDS`, through the
    driver), or whose WAL receiver is not running (cut off from the primary), is
    passed over for a second; one that could not be reached for a growing back-off
    (one read tries it again when that ends); recovery-conflict cancellations are
    retried on the next node. With every standby passed over, reads go to the
    primary. Units marked `Unit.primary` (access decisions: a token revoked, by any
    process, stops working at once) always run on the primary.

    The router is shared by all threads and tasks of a process: its state sits
    behind one lock held for a few dictionary operations, never across I/O.
    """

    def __init__(
        self,
        primary: str,
        standbys: Sequence[str],
        *,
        wait_ms: int = 200,
        max_lag_ms: int = 10_000,
    ) -> None:
        if not standbys:
            raise ValueError("ReplicaRouter needs at least one standby")
        self._nodes = {PRIMARY: primary}
        self._standbys: list[_Standby] = []
        for i, dsn in enumerate(standbys, 1):
            name = standby_name(i)
            self._nodes[name] = dsn
            self._standbys.append(_Standby(name))
        self._by_name = {s.name: s for s in self._standbys}
        self.wait_ms = wait_ms
        self.max_lag_ms = max_lag_ms
        self._lock = threading.Lock()
        #: The newest commit position written per workspace (None: writes bound to
        #: no workspace), as (number, text).
        self._written: dict[str | None, tuple[int, str]] = {}
        self._newest: tuple[int, str] | None = None
        #: Standby chosen for each attempt in progress, round robin.
        self._next = 0
        #: The primary's WAL position and when it was sampled (monotonic).
        self._primary: tuple[float, str] | None = None
        #: Until when a sample is being taken (or, after a failed one, not retried).
        self._sampling_until = 0.0

    @property
    def nodes(self) -> Mapping[str, str]:
        return self._nodes

    @property
    def wants_commit_lsn(self) -> bool:
        return True

    def required_lsn(self, workspace: str | None) -> str | None:
        """The commit position a read bound to `workspace` must see, if any."""
        with self._lock:
            if workspace is None:
                newest = self._newest
            else:
                own, unbound = self._written.get(workspace), self._written.get(None)
                candidates = [p for p in (own, unbound) if p is not None]
                newest = max(candidates) if candidates else None
        return None if newest is None else newest[1]

    def choose(self, intent: Intent) -> Choice:
        if intent.write or intent.primary:
            return Choice(node=PRIMARY)
        now = time.monotonic()
        with self._lock:
            usable = [
                s for s in self._standbys if s.name not in intent.excluded and s.skip_until <= now
            ]
            if not usable:
                return Choice(node=PRIMARY)
            if (
                self.max_lag_ms
                and self._sampling_until <= now
                and (self._primary is None or now - self._primary[0] > SAMPLE_SECONDS)
            ):
                self._sampling_until = now + SAMPLE_TIMEOUT + 1.0
                return Choice(node=PRIMARY, sample=PRIMARY_POSITION)
            primary_lsn = self._primary[1] if self._primary is not None else None
            standby = usable[self._next % len(usable)]
            self._next += 1
            if standby.failures:
                # A standby that was down gets one read to prove itself; the others
                # keep passing it over until that read succeeds or fails.
                standby.skip_until = now + DOWN_BACKOFF
        lsn = self.required_lsn(intent.workspace)
        return Choice(node=standby.name, probe=replay_probe(lsn, self.wait_ms, primary_lsn))

    def sampled(self, rows: list[Any] | None) -> None:
        now = time.monotonic()
        with self._lock:
            if rows:
                self._primary = (now, str(rows[0]))
                self._sampling_until = 0.0
            else:
                # The primary did not answer: lag is judged by the last sample (and
                # the WAL receiver) until the next try.
                self._sampling_until = now + SAMPLE_SECONDS

    def accept(self, node: str, probe_rows: list[Any]) -> bool:
        standby = self._by_name.get(node)
        if standby is None:
            return True
        if not probe_rows:  # pragma: no cover - the probe always returns one row
            return False
        in_recovery, replayed, receiving, lag_ms = probe_rows[0]
        with self._lock:
            standby.failures = 0
            standby.trial_until = 0.0
            if not in_recovery:
                if not standby.warned_primary:
                    standby.warned_primary = True
                    log.warning(
                        "%s of PGSEARCH_READ_DSN is not a standby (not in recovery); "
                        "reads there cannot wait for this process's writes, so they go "
                        "to the primary",
                        node,
                    )
                standby.skip_until = time.monotonic() + DOWN_BACKOFF_MAX
                return False
            if self.max_lag_ms and not receiving:
                log.info("%s has no WAL receiver running (cut off from the primary): "
                         "passed over", node)  # fmt: skip
                standby.skip_until = time.monotonic() + LAG_BACKOFF
                return False
            if self.max_lag_ms and lag_ms > self.max_lag_ms:
                log.info("%s lags %.0f ms behind the primary (limit %d ms): passed over",
                         node, lag_ms, self.max_lag_ms)  # fmt: skip
                standby.skip_until = time.monotonic() + LAG_BACKOFF
                return False
            standby.skip_until = 0.0
        return bool(replayed)

    def committed(self, node: str, lsn: str | None, workspace: str | None) -> None:
        if lsn is None:
            return  # nothing was written (the transaction sent no statement)
        position = (_lsn_key(lsn), lsn)
        with self._lock:
            known = self._written.get(workspace)
            if known is None or position > known:
                self._written[workspace] = position
            if self._newest is None or position > self._newest:
                self._newest = position

    def failed(self, node: str, error: BaseException) -> None:
        standby = self._by_name.get(node)
        if standby is None or not isinstance(error, StoreUnavailable):
            return  # a recovery conflict: the driver retries elsewhere, the node is fine
        now = time.monotonic()
        with self._lock:
            if standby.skip_until > now and not standby.trial_until:
                return  # another read in flight found out already: no new back-off
            standby.failures += 1
            standby.trial_until = 0.0
            backoff = min(DOWN_BACKOFF * 2 ** (standby.failures - 1), DOWN_BACKOFF_MAX)
            standby.skip_until = now + backoff * random.uniform(0.8, 1.2)
        log.warning("%s unavailable (%s): reads go elsewhere for %.0f s", node, error, backoff)

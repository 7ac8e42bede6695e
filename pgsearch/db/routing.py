"""Where each attempt of a unit of work runs: the `Router` seam of the drivers.

The drivers (`pgsearch.db.driver`) own one connection pool per node and ask a router,
once per attempt, which node to use. A router holds no pools and performs no I/O of
its own, so one router serves the sync and the asyncio driver alike; what it needs to
know about a node it asks for with a *probe* statement, which the driver sends in the
attempt's first round trip and hands back to `Router.accept`.

`PrimaryRouter` (one node for everything) is the default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pgsearch.db.work import Statement

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


@dataclass(frozen=True, kw_only=True)
class Choice:
    """Where to run an attempt, and what to ask that node first."""

    node: str
    #: Sent first in the attempt's first round trip; its rows go to `Router.accept`.
    probe: Statement[Any] | None = None
    #: Seconds to wait before the attempt (a bounded wait for a standby to catch up).
    delay: float = 0.0


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


def router_for(settings: Any) -> Router:
    """The router `settings` call for (`PgSearch.connect` uses this)."""
    return PrimaryRouter(settings.dsn)


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

"""The background maintainer of the term lists in `pgsearch serve` and `pgsearch mcp`.

Searches through a workspace's term lists (`pgsearch.impact`) read the messages
stored since the lists were built directly, and stop using the lists once that tail
passes `impact.TAIL_MAX`. Ingest rebuilds them after a load, but appends (the HTTP
API's, a runtime's) do not, and `pgsearch maintain` runs only when someone runs it.
A long-running server therefore keeps them itself: every `Settings.maintain_interval`
seconds (0: never) a round looks at each workspace it serves, one at a time, and
rebuilds the lists of those more than `Settings.maintain_behind` messages behind.

- **Only where lists are kept.** A workspace whose lists were never built gets them
  only when searches read them (``PGSEARCH_IMPACT_LISTS=on``) and a term is frequent
  enough to list, as ingest decides; with the setting off, only lists someone built
  (`pgsearch maintain`) are kept current. Nothing else is written.
- **Scope counts kept whole.** A workspace whose counts of entries by kind, role and
  tool a writer of an earlier release left behind its statistics is counted again
  first (`store.recount_scope`: one small statement a workspace when they agree).
- **Never two builders at once.** A rebuild takes the workspace's advisory lock, the
  one `pgsearch maintain` and ingest wait for, but without waiting: a workspace being
  built elsewhere (another server, a `maintain` run) is left to that builder, and a
  build that finished meanwhile is not repeated (`store.build_lists_unless_busy`).
- **Never on a standby.** Each round first asks the server the writes go to whether
  it is in recovery; on a standby the round writes nothing.
- **Faults cost a round.** An error is logged and the round goes on with the next
  workspace; a lost database ends the round, and the next one tries again. A rebuild
  is one transaction: stopped or killed midway, the old lists stay whole.
- **Stops with its server**: `Maintainer.stop` cancels the round in flight (its
  transaction rolls back) and waits for the task to end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from pgsearch import impact
from pgsearch.db import store
from pgsearch.db.work import Unit
from pgsearch.errors import PgSearchError, StoreClosed, StoreUnavailable
from pgsearch.settings import Settings

log = logging.getLogger(__name__)

T = TypeVar("T")
RunUnit = Callable[[Unit[Any]], Awaitable[Any]]
Workspaces = Callable[[], Awaitable[list[str]]]


def in_recovery_unit() -> Unit[bool]:
    return Unit(
        work=store.in_recovery,
        workspace=None,
        write=False,
        primary=True,
        context="checking for a standby",
    )


def lag_unit(ws: str, limit: int) -> Unit[store.ListsLag]:
    # On the primary: a standby behind would show lists older than they are.
    return Unit(
        work=partial(store.lists_lag, ws, limit=limit, final=True),
        workspace=ws,
        write=False,
        primary=True,
        context="reading list lag",
    )


def watermark_unit() -> Unit[int]:
    return Unit(
        work=store.lists_watermark, workspace=None, write=True, context="waiting for writers"
    )


def recount_unit(ws: str) -> Unit[bool]:
    return Unit(
        work=partial(store.recount_scope, ws),
        workspace=ws,
        write=True,
        context="recounting scope counts",
    )


def build_unit(ws: str, watermark: int) -> Unit[int | None]:
    return Unit(
        work=partial(store.build_lists_unless_busy, ws, watermark),
        workspace=ws,
        write=True,
        context="building term lists",
    )


@dataclass(kw_only=True)
class Round:
    """What one round did."""

    #: The server the writes go to is a standby: nothing was looked at.
    standby: bool = False
    #: Workspaces rebuilt, with the terms they list.
    rebuilt: dict[str, int] = field(default_factory=dict)
    #: Workspaces due but being built by someone else (left to them).
    busy: list[str] = field(default_factory=list)
    #: Workspaces whose look or rebuild failed, with the error.
    failed: dict[str, str] = field(default_factory=dict)
    #: Workspaces whose scope counts were counted again (`store.recount_scope`).
    recounted: list[str] = field(default_factory=list)


class Maintainer:
    """Keeps the term lists of some workspaces current from an asyncio task.

    `run` runs a unit of work (an `AsyncPgSearch`'s driver); `workspaces` lists the
    workspaces to look at, asked again each round.
    """

    def __init__(self, run: RunUnit, settings: Settings, workspaces: Workspaces) -> None:
        self._run = run
        self.settings = settings
        self._workspaces = workspaces
        self._task: asyncio.Task[None] | None = None
        self._standby_logged = False
        #: Rounds completed (with or without errors), for those waiting on one.
        self.rounds = 0

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> bool:
        """Start the rounds on the running event loop (the first one interval from
        now); False, and nothing started, when the interval is 0."""
        if self.settings.maintain_interval <= 0 or self.running:
            return False
        self._task = asyncio.get_running_loop().create_task(
            self._loop(), name="pgsearch term list maintainer"
        )
        log.info(
            "term list maintainer: every %g s, workspaces more than %d messages behind",
            self.settings.maintain_interval,
            self.settings.maintain_behind,
        )
        return True

    async def stop(self) -> None:
        """Cancel the round in flight, if any (its rebuild rolls back), and wait."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        log.info("term list maintainer: stopped after %d rounds", self.rounds)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.maintain_interval)
            try:
                await self.run_round()
            except StoreClosed:
                return  # the server is stopping
            except PgSearchError as exc:
                log.warning("term list maintainer: round failed, retried next round: %s", exc)
            except Exception:
                log.exception("term list maintainer: round failed, retried next round")
            self.rounds += 1

    def _due(self, lag: store.ListsLag) -> bool:
        return impact.lists_due(
            built=lag.built_at is not None,
            behind=lag.behind,
            rebuild_behind=self.settings.maintain_behind,
            build_new=self.settings.impact_lists,
        )

    async def run_round(self) -> Round:
        """Look at every workspace once: count its scope counts again if a writer of an
        earlier release left them behind, and rebuild its lists if they are behind."""
        out = Round()
        if await self._run(in_recovery_unit()):
            out.standby = True
            if not self._standby_logged:
                log.info("term list maintainer: the database is a standby; nothing is rebuilt")
                self._standby_logged = True
            return out
        self._standby_logged = False
        limit = self.settings.maintain_behind
        if self.settings.impact_lists:
            limit = max(limit, impact.MIN_DF)
        for ws in await self._workspaces():
            try:
                if await self._run(recount_unit(ws)):
                    log.info("term list maintainer: recounted workspace %r's scope counts", ws)
                    out.recounted.append(ws)
                lag = await self._run(lag_unit(ws, limit))
                if not self._due(lag):
                    continue
                started = time.monotonic()
                watermark = await self._run(watermark_unit())
                terms = await self._run(build_unit(ws, watermark))
            except (StoreUnavailable, StoreClosed):
                raise  # the database is gone: the next round tries again
            except PgSearchError as exc:
                log.warning("term list maintainer: workspace %r: %s", ws, exc)
                out.failed[ws] = str(exc)
                continue
            if terms is None:
                log.info("term list maintainer: workspace %r is being built elsewhere", ws)
                out.busy.append(ws)
                continue
            out.rebuilt[ws] = terms
            behind = f"{lag.behind}+" if lag.behind >= limit else str(lag.behind)
            log.info(
                "term list maintainer: rebuilt workspace %r (%s, %s messages behind): "
                "%d terms listed in %.2f s",
                ws,
                "never built" if lag.built_at is None else "built before",
                behind,
                terms,
                time.monotonic() - started,
            )
        return out

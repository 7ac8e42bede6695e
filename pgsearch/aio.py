"""`AsyncPgSearch`: the facade for asyncio hosts, on psycopg's async connections.

It runs the very units of work `PgSearch` runs (searches from
`pgsearch.search.SearchEngine`, `pgsearch.windows`, the unit builders of
`pgsearch.api`), on an `AsyncConnectionPool` through
`pgsearch.db.store.AsyncDriver`; no thread sits between a coroutine and its
connection. One `AsyncPgSearch` per process (per event loop), shared by every task.

pg = await AsyncPgSearch.connect("postgresql://localhost/agents")
window = await pg.around(workspace="acme", session_id="s1", seq=4)
await pg.close()
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pgsearch import tokens, windows
from pgsearch.api import (
    _roots,
    embedded_settings,
    forget_unit,
    pooled_settings,
    session_info_unit,
    sessions_unit,
    stats_unit,
    table_sizes_unit,
    workspaces_unit,
)
from pgsearch.db import store
from pgsearch.db.store import AsyncDriver, DriverConfig, Unit, router_for
from pgsearch.ingest import FileResult, Ingestor
from pgsearch.maintainer import Maintainer, Workspaces
from pgsearch.rows import ApiToken, TableSize
from pgsearch.search import SearchEngine
from pgsearch.settings import Settings
from pgsearch.types import (
    DEFAULT_CONTEXT,
    MAX_WINDOW,
    Scope,
    SessionInfo,
    SessionQueryRequest,
    SessionQueryResult,
    Window,
    WorkspaceStats,
)
from pgsearch.validate import check_workspace

if TYPE_CHECKING:
    from pgsearch.embedded import Lease

__all__ = ["AsyncPgSearch", "AsyncProvider"]


class AsyncPgSearch:
    """`PgSearch` with coroutines; safe to share between the tasks of one event loop."""

    def __init__(self, driver: AsyncDriver, settings: Settings) -> None:
        self.settings = settings
        self._driver = driver
        self._ingestor = Ingestor(None, settings)
        self._engine = SearchEngine(settings)
        self._lease: Lease | None = None

    @classmethod
    async def connect(
        cls,
        dsn: str | None = None,
        *,
        settings: Settings | None = None,
        pool_size: int | None = None,
    ) -> AsyncPgSearch:
        """As `PgSearch.connect`, inside the running event loop (with no DSN and no
        server configured, on the private embedded server, as the CLI)."""
        lease = None
        if dsn is None and settings is None:
            lease, settings = await asyncio.to_thread(embedded_settings)
        settings = pooled_settings(dsn, settings, pool_size)
        try:
            driver = await AsyncDriver.open(
                router_for(settings), DriverConfig.from_settings(settings)
            )
        except BaseException:
            if lease is not None:
                lease.release()
            raise
        pg = cls(driver, settings)
        pg._lease = lease
        return pg

    async def close(self) -> None:
        await self._driver.close()
        lease, self._lease = self._lease, None
        if lease is not None:
            await asyncio.to_thread(lease.release)

    async def __aenter__(self) -> AsyncPgSearch:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # --- writing ------------------------------------------------------------------

    async def append(
        self, *, workspace: str, session_id: str, messages: Sequence[dict[str, Any]]
    ) -> int:
        """Append messages to a session; they are searchable when this returns. The
        messages are checked and indexed in a worker thread, so a large batch does
        not hold the event loop."""
        unit = await asyncio.to_thread(
            partial(
                self._ingestor.append, workspace=workspace, session_id=session_id, messages=messages
            )
        )
        return await self._driver.run(unit)

    async def ingest_file(
        self,
        path: str | os.PathLike[str],
        *,
        workspace: str,
        session_id: str | None = None,
        roots: Sequence[str | os.PathLike[str]] | None = None,
        format: str = "auto",
        workspace_from_cwd: bool = False,
        include_forgotten: bool = False,
    ) -> FileResult:
        """As `PgSearch.ingest_file`. The file is read, parsed and indexed in a worker
        thread, against its record as last stored; the write is one transaction on
        this object's pool (which reads the file again only if another writer changed
        its record in between)."""
        job = await asyncio.to_thread(
            partial(
                self._ingestor.locate,
                path,
                workspace=workspace,
                roots=_roots(roots),
                format=format,
                workspace_from_cwd=workspace_from_cwd,
                session_id=session_id,
                include_forgotten=include_forgotten,
            )
        )
        records = await self._driver.run(
            Unit(
                work=partial(store.file_records, job.workspace, [job.source]),
                workspace=job.workspace,
                write=False,
                context="reading file records",
            )
        )
        unit = await asyncio.to_thread(self._ingestor.prepared_file, job, records.get(job.source))
        return await self._driver.run(unit)

    async def forget(self, *, workspace: str, session_id: str | None = None) -> int:
        """Delete a session (or a whole workspace); statistics follow."""
        return await self._driver.run(forget_unit(workspace, session_id))

    # --- reading ------------------------------------------------------------------

    def provider(self, *, workspace: str, session_id: str | None = None) -> AsyncProvider:
        workspace = check_workspace(workspace)
        return AsyncProvider(
            self._engine, self._driver, Scope(workspace=workspace, session_id=session_id)
        )

    async def search(
        self, request: SessionQueryRequest, *, workspace: str, explain: bool = False
    ) -> SessionQueryResult:
        """As `PgSearch.search`: ranked matches within `workspace`."""
        scope = Scope(workspace=check_workspace(workspace))
        return await self._driver.run(self._engine.unit(scope, request, explain=explain))

    async def around(
        self,
        *,
        workspace: str,
        session_id: str,
        seq: int,
        before: int = DEFAULT_CONTEXT,
        after: int = DEFAULT_CONTEXT,
    ) -> Window:
        return await self._driver.run(windows.around(workspace, session_id, seq, before, after))

    async def session_messages(
        self, *, workspace: str, session_id: str, start_seq: int = 0, limit: int = MAX_WINDOW
    ) -> Window:
        return await self._driver.run(windows.page(workspace, session_id, start_seq, limit))

    async def sessions(
        self, *, workspace: str, limit: int = 100, offset: int = 0
    ) -> list[SessionInfo]:
        return await self._driver.run(sessions_unit(workspace, limit, offset))

    async def workspaces(self) -> list[str]:
        return await self._driver.run(workspaces_unit(self.settings))

    def maintainer(self, workspaces: Workspaces | None = None) -> Maintainer:
        """A background maintainer of the term lists (`pgsearch.maintainer`) of the
        workspaces `workspaces` lists each round (default: every workspace); started
        with ``start()`` on this event loop, stopped with ``await stop()``."""
        return Maintainer(self._driver.run, self.settings, workspaces or self.workspaces)

    async def stats(self, *, workspace: str) -> WorkspaceStats:
        return await self._driver.run(stats_unit(workspace))

    async def table_sizes(self) -> list[TableSize]:
        return await self._driver.run(table_sizes_unit(citus=self._driver.citus))

    async def session_info(self, *, workspace: str, session_id: str) -> SessionInfo | None:
        return await self._driver.run(session_info_unit(workspace, session_id))

    async def schema_versions(self) -> list[str]:
        """The revisions the database records (`store.HEAD_REVISION` when current)."""
        return await self._driver.run(
            Unit(
                work=store.schema_versions,
                workspace=None,
                write=False,
                context="reading the schema revision",
            )
        )

    # --- API tokens (`pgsearch serve`) -----------------------------------------------

    async def authenticate(self, secret: str) -> ApiToken | None:
        """The live token `secret` is, or None (malformed, unknown or revoked)."""
        unit = tokens.lookup_unit(secret)
        return None if unit is None else await self._driver.run(unit)

    async def create_token(
        self,
        *,
        workspace: str,
        session_id: str | None = None,
        write: bool = False,
        rate: float | None = None,
        label: str | None = None,
    ) -> tokens.NewToken:
        secret, unit = tokens.create_unit(
            workspace, session_id=session_id, write=write, rate=rate, label=label
        )
        return tokens.NewToken(secret=secret, token=await self._driver.run(unit))

    async def tokens(self, *, workspace: str | None = None) -> list[ApiToken]:
        """Every token (of `workspace`), revoked ones included, oldest first."""
        return await self._driver.run(tokens.list_unit(workspace))

    async def revoke_token(self, token_id: str) -> ApiToken | None:
        return await self._driver.run(tokens.revoke_unit(token_id))


class AsyncProvider:
    """A scope-pinned view of an `AsyncPgSearch` (cheap; make one per host call)."""

    def __init__(self, engine: SearchEngine, driver: AsyncDriver, scope: Scope) -> None:
        self._engine = engine
        self._driver = driver
        self.scope = scope

    @property
    def closed(self) -> bool:
        """Whether the store behind this provider was closed (every call then fails
        with `StoreClosed`)."""
        return self._driver.closed

    async def search(self, request: SessionQueryRequest) -> SessionQueryResult:
        """Ranked matches within this provider's scope (`Provider.search`)."""
        return await self._driver.run(self._engine.unit(self.scope, request))

    async def explain(self, request: SessionQueryRequest) -> SessionQueryResult:
        """`search`, with each statement and its server plan in ``explain``."""
        return await self._driver.run(self._engine.unit(self.scope, request, explain=True))

    async def around(
        self,
        session_id: str,
        seq: int,
        *,
        before: int = DEFAULT_CONTEXT,
        after: int = DEFAULT_CONTEXT,
    ) -> Window:
        return await self._driver.run(
            windows.around(self.scope.workspace, self.scope.narrow(session_id), seq, before, after)
        )

    async def session_messages(
        self, session_id: str, *, start_seq: int = 0, limit: int = MAX_WINDOW
    ) -> Window:
        return await self._driver.run(
            windows.page(self.scope.workspace, self.scope.narrow(session_id), start_seq, limit)
        )

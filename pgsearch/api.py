"""The facade: `PgSearch` ties settings, store, ingest and search together.

pg = PgSearch.connect("postgresql://localhost/agents")
pg.ingest_file("sessions/abc.jsonl", workspace="acme")
provider = pg.provider(workspace="acme")          # scope pinned here
result = provider.search(SessionQueryRequest(query="cron refactor"))
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgsearch import windows
from pgsearch.db import store
from pgsearch.db.store import Driver, DriverConfig, Store, Unit, router_for
from pgsearch.errors import ConfigError
from pgsearch.rows import TableSize
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
from pgsearch.validate import check_key, check_workspace

__all__ = ["PgSearch", "Provider", "SessionInfo", "WorkspaceStats"]

if TYPE_CHECKING:
    from pgsearch.embedded import Lease
    from pgsearch.ingest import FileResult, Ingestor, IngestReport
    from pgsearch.rows import ApiToken
    from pgsearch.tokens import NewToken


def embedded_settings() -> tuple[Lease | None, Settings | None]:
    """The private embedded server's lease and settings when no server is configured
    (no ``PGSEARCH_DSN``, no libpq variable), as the CLI resolves it; else nothing."""
    from pgsearch import embedded

    if embedded.connection_configured(None):
        return None, None
    lease = embedded.EmbeddedServer().lease()
    return lease, Settings.from_env(dsn=lease.dsn)


def pooled_settings(dsn: str | None, settings: Settings | None, pool_size: int | None) -> Settings:
    """Settings from the environment with a DSN and a pool size given in code."""
    settings = settings or Settings.from_env()
    if dsn is not None:
        settings = settings.with_(dsn=dsn)
    if pool_size is not None:
        settings = settings.with_(pool_max=pool_size, pool_min=min(settings.pool_min, pool_size))
    return settings


# Units of work both facades run (the asyncio one in `pgsearch.aio`).


def forget_unit(workspace: str, session_id: str | None) -> Unit[int]:
    workspace = check_workspace(workspace)
    return Unit(
        work=partial(store.forget, workspace, session_id),
        workspace=workspace,
        write=True,
        context="forgetting",
    )


def sessions_unit(workspace: str, limit: int, offset: int) -> Unit[list[SessionInfo]]:
    workspace = check_workspace(workspace)
    return Unit(
        work=partial(store.list_sessions, workspace, limit=limit, offset=offset),
        workspace=workspace,
        write=False,
        context="listing sessions",
    )


def session_info_unit(workspace: str, session_id: str) -> Unit[SessionInfo | None]:
    workspace = check_workspace(workspace)
    check_key("session_id", session_id)
    return Unit(
        work=partial(store.session_info, workspace, session_id),
        workspace=workspace,
        write=False,
        search=True,
        context="reading a session",
    )


def workspaces_unit(settings: Settings) -> Unit[list[str]]:
    if settings.row_level_security:
        raise ConfigError(
            "with row level security on, workspaces cannot be listed across "
            "tenants; name the workspace (--workspace)"
        )
    return Unit(work=store.workspaces, workspace=None, write=False, context="listing workspaces")


def stats_unit(workspace: str) -> Unit[WorkspaceStats]:
    workspace = check_workspace(workspace)
    return Unit(
        work=partial(store.workspace_stats, workspace),
        workspace=workspace,
        write=False,
        context="reading statistics",
    )


def table_sizes_unit(*, citus: bool) -> Unit[list[TableSize]]:
    return Unit(
        work=partial(store.table_sizes, citus=citus),
        workspace=None,
        write=False,
        context="reading sizes",
    )


class PgSearch:
    """Session-history search over one PostgreSQL database, through a connection pool.

    Thread-safe: create one per process and share it; every call checks a pooled
    connection out for exactly one transaction. Providers are cheap views of it.
    """

    def __init__(self, driver: Driver, settings: Settings) -> None:
        self.settings = settings
        self._driver = driver
        self._store = Store(driver)
        self._ingestor_: Ingestor | None = None
        self._engine = SearchEngine(settings)
        #: The private embedded server this object uses, given back on `close`.
        self._lease: Lease | None = None

    @property
    def _ingestor(self) -> Ingestor:
        # Built on first use: a process that only searches never imports the ingest
        # path (adapters, parsers, indexing). Two threads racing here build two
        # equivalent, stateless ingestors; either is fine.
        if self._ingestor_ is None:
            from pgsearch.ingest import Ingestor

            self._ingestor_ = Ingestor(self._store, self.settings)
        return self._ingestor_

    @classmethod
    def connect(
        cls,
        dsn: str | None = None,
        *,
        settings: Settings | None = None,
        pool_size: int | None = None,
    ) -> PgSearch:
        """Open a database already migrated to this version (else `SchemaOutOfDate`).

        With no `dsn`, no `settings` and no server configured (``PGSEARCH_DSN`` or a
        libpq variable), the server is the private embedded one the CLI uses, started
        if needed and given back on `close` (`embedded_settings`).
        `pool_size` is the most connections this object keeps (``PGSEARCH_POOL_MAX``).
        """
        lease = None
        if dsn is None and settings is None:
            lease, settings = embedded_settings()
        settings = pooled_settings(dsn, settings, pool_size)
        try:
            pg = cls(
                Driver.open(router_for(settings), DriverConfig.from_settings(settings)), settings
            )
        except BaseException:
            if lease is not None:
                lease.release()
            raise
        pg._lease = lease
        return pg

    @staticmethod
    def migrate(
        dsn: str | None = None,
        revision: str = "head",
        *,
        create: bool = False,
        downgrade: bool = False,
        distribute: bool = False,
    ) -> str | None:
        """Upgrade the schema of `dsn` (default: settings) to `revision`.

        With `create`, the database itself is created first when it does not exist.
        With `downgrade`, the schema goes down to `revision` instead; a `revision` on
        the wrong side of the current one is refused with what to run instead.
        With `distribute`, a schema whose tables are local is then distributed over
        the Citus cluster the database belongs to, rows included (`pgsearch.db.citus`).
        """
        # Imported here: no other call needs the migration machinery.
        from pgsearch.db import migrate as migrations

        target = Settings.from_env().dsn if dsn is None else dsn
        if create:
            migrations.create_database(target)
        return migrations.migrate(target, revision, downgrade=downgrade, distribute=distribute)

    def close(self) -> None:
        """Close the pool (waits for calls in flight to return their connections)."""
        self._driver.close()
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.release()

    def __enter__(self) -> PgSearch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writing ------------------------------------------------------------------

    def ingest_file(
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
        """Ingest one session file (one transaction); raises `IngestError`.

        `format`: ``auto`` (detected per file), ``openai``, ``claude-code``,
        ``codex``, ``gemini`` or ``opencode``. With `workspace_from_cwd`, an agent log
        goes to the workspace named by its working directory (`workspace` when it
        names none; `FileResult.no_cwd` then says so). A session forgotten with
        `forget` stays forgotten unless `include_forgotten` brings it back.
        """
        return self._ingestor.ingest_file(
            path,
            workspace=workspace,
            session_id=session_id,
            roots=_roots(roots),
            format=format,
            workspace_from_cwd=workspace_from_cwd,
            include_forgotten=include_forgotten,
        )

    def ingest_paths(
        self,
        paths: Iterable[str | os.PathLike[str]],
        *,
        workspace: str,
        roots: Sequence[str | os.PathLike[str]] | None = None,
        on_file: Callable[[FileResult], None] | None = None,
        format: str = "auto",
        workspace_from_cwd: bool = False,
        include_forgotten: bool = False,
    ) -> IngestReport:
        """Ingest files and directories (the session files of every format pgsearch
        reads, `pgsearch.sources`); bad files are reported, not raised."""
        return self._ingestor.ingest_paths(
            paths,
            workspace=workspace,
            roots=_roots(roots),
            on_file=on_file,
            format=format,
            workspace_from_cwd=workspace_from_cwd,
            include_forgotten=include_forgotten,
        )

    def relocate(
        self, *, workspace: str, old: str | os.PathLike[str], new: str | os.PathLike[str]
    ) -> int:
        """Tell pgsearch that what it ingested from `old` (a file or a directory) now
        lives at `new`, so that ingesting `new` reads on instead of refusing its
        sessions. Returns how many file records moved. A moved file is also
        recognised by its content when it is ingested at its new path."""
        return self._driver.run(self._ingestor.relocate(workspace=workspace, old=old, new=new))

    def append(self, *, workspace: str, session_id: str, messages: Sequence[dict[str, Any]]) -> int:
        """Append messages to a session; they are searchable when this returns."""
        return self._driver.run(
            self._ingestor.append(workspace=workspace, session_id=session_id, messages=messages)
        )

    def forget(self, *, workspace: str, session_id: str | None = None) -> int:
        """Delete a session (or a whole workspace); statistics follow. Returns messages deleted.

        A forgotten session stays forgotten when its file is ingested again (or
        watched); ``ingest_file(..., include_forgotten=True)`` brings it back.
        Forgetting a whole workspace removes everything, so its files can be
        ingested afresh."""
        return self._driver.run(forget_unit(workspace, session_id))

    # --- reading ------------------------------------------------------------------

    def provider(self, *, workspace: str, session_id: str | None = None) -> Provider:
        """A `SessionQuery` whose scope is pinned to `workspace` (and `session_id`)."""
        workspace = check_workspace(workspace)
        return Provider(
            self._engine, self._driver, Scope(workspace=workspace, session_id=session_id)
        )

    def search(
        self, request: SessionQueryRequest, *, workspace: str, explain: bool = False
    ) -> SessionQueryResult:
        scope = Scope(workspace=check_workspace(workspace))
        return self._driver.run(self._engine.unit(scope, request, explain=explain))

    def around(
        self,
        *,
        workspace: str,
        session_id: str,
        seq: int,
        before: int = DEFAULT_CONTEXT,
        after: int = DEFAULT_CONTEXT,
    ) -> Window:
        """Messages around (session, seq): the anchor always included, at most 16 in all."""
        return self._driver.run(windows.around(workspace, session_id, seq, before, after))

    def session_messages(
        self, *, workspace: str, session_id: str, start_seq: int = 0, limit: int = MAX_WINDOW
    ) -> Window:
        """One page of a session's messages from `start_seq`; `next_seq` continues."""
        return self._driver.run(windows.page(workspace, session_id, start_seq, limit))

    def sessions(self, *, workspace: str, limit: int = 100, offset: int = 0) -> list[SessionInfo]:
        return self._driver.run(sessions_unit(workspace, limit, offset))

    def workspaces(self) -> list[str]:
        """Every workspace with data; refused under row level security, where each
        transaction is bound to one workspace and a list would cross tenants."""
        return self._driver.run(workspaces_unit(self.settings))

    def stats(self, *, workspace: str) -> WorkspaceStats:
        return self._driver.run(stats_unit(workspace))

    def maintain(self, *, workspace: str, force: bool = True) -> bool:
        """Rebuild the workspace's term lists of bounded searches (`pgsearch.impact`),
        or with ``force=False`` only when they fell behind; True when rebuilt.

        Each workspace is rebuilt in one transaction of its own: killed midway, the
        lists stay as they were and searches read the messages stored since. Its
        scope counts are counted again first if a writer of a release before them
        left them behind (`store.recount_scope`)."""
        workspace = check_workspace(workspace)
        self._store.recount_scope(workspace)
        if force:
            self._store.build_lists(workspace)
            return True
        return bool(self._store.keep_lists_current([workspace]))

    def table_sizes(self) -> list[TableSize]:
        """Table and index bytes of pgsearch's tables."""
        return self._driver.run(table_sizes_unit(citus=self._driver.citus))

    def session_info(self, *, workspace: str, session_id: str) -> SessionInfo | None:
        """One session as `sessions` lists it; None when it does not exist."""
        return self._driver.run(session_info_unit(workspace, session_id))

    # --- API tokens (`pgsearch serve`) -----------------------------------------------

    def create_token(
        self,
        *,
        workspace: str,
        session_id: str | None = None,
        write: bool = False,
        rate: float | None = None,
        label: str | None = None,
    ) -> NewToken:
        """A new bearer token bound to `workspace` (and `session_id`); its secret is
        in the result and nowhere else."""
        from pgsearch import tokens

        secret, unit = tokens.create_unit(
            workspace, session_id=session_id, write=write, rate=rate, label=label
        )
        return tokens.NewToken(secret=secret, token=self._driver.run(unit))

    def tokens(self, *, workspace: str | None = None) -> list[ApiToken]:
        """Every token (of `workspace`), revoked ones included, oldest first."""
        from pgsearch import tokens

        return self._driver.run(tokens.list_unit(workspace))

    def revoke_token(self, token_id: str) -> ApiToken | None:
        """Revoke a token by its id; None when no live token has that id."""
        from pgsearch import tokens

        return self._driver.run(tokens.revoke_unit(token_id))


class Provider:
    """A `SessionQuery` bound to a workspace (and optionally one session).

    The scope comes from the host; a request naming another workspace or session is
    rejected with `ScopeError`, never widened.
    """

    def __init__(self, engine: SearchEngine, driver: Driver, scope: Scope) -> None:
        self._engine = engine
        self._driver = driver
        self.scope = scope

    @property
    def closed(self) -> bool:
        """Whether the store behind this provider was closed (every call then fails
        with `StoreClosed`)."""
        return self._driver.closed

    def search(self, request: SessionQueryRequest) -> SessionQueryResult:
        """Ranked matches within this provider's scope."""
        return self._driver.run(self._engine.unit(self.scope, request))

    def explain(self, request: SessionQueryRequest) -> SessionQueryResult:
        """`search`, with each statement and its server plan in ``explain``."""
        return self._driver.run(self._engine.unit(self.scope, request, explain=True))

    def around(
        self,
        session_id: str,
        seq: int,
        *,
        before: int = DEFAULT_CONTEXT,
        after: int = DEFAULT_CONTEXT,
    ) -> Window:
        return self._driver.run(
            windows.around(self.scope.workspace, self.scope.narrow(session_id), seq, before, after)
        )

    def session_messages(
        self, session_id: str, *, start_seq: int = 0, limit: int = MAX_WINDOW
    ) -> Window:
        return self._driver.run(
            windows.page(self.scope.workspace, self.scope.narrow(session_id), start_seq, limit)
        )


def _roots(roots: Sequence[str | os.PathLike[str]] | None) -> list[Path] | None:
    return None if roots is None else [Path(r) for r in roots]

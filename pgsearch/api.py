"""The facade: `PgSearch` ties settings, store, ingest and search together.

pg = PgSearch.connect("postgresql://localhost/agents")
pg.ingest_file("sessions/abc.jsonl", workspace="acme")
provider = pg.provider(workspace="acme")          # scope pinned here
result = provider.search(SessionQueryRequest(query="cron refactor"))
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from pgsearch.db import connector as db
from pgsearch.db import migrate as migrations
from pgsearch.db import queries as q
from pgsearch.db.store import Deltas, Store
from pgsearch.errors import ConfigError, InvalidQuery, NotFound, ScopeError
from pgsearch.excerpt import clip, window_bounds
from pgsearch.ingest import FileResult, Ingestor, IngestReport
from pgsearch.search import SearchEngine
from pgsearch.settings import Settings
from pgsearch.types import (
    DEFAULT_CONTEXT,
    MAX_RESULT_BYTES,
    MAX_WINDOW,
    Scope,
    SessionQueryRequest,
    SessionQueryResult,
    Window,
    WindowMessage,
)
from pgsearch.validate import check_key, check_workspace


@dataclass(frozen=True, kw_only=True)
class SessionInfo:
    session_id: str
    title: str | None
    message_count: int
    created_at: datetime | None
    updated_at: datetime | None
    source: str | None
    #: For a sub-agent's session, the session that started it.
    parent_session_id: str | None = None


@dataclass(frozen=True, kw_only=True)
class WorkspaceStats:
    workspace_id: str
    sessions: int
    messages: int
    indexed_messages: int
    vocabulary: int
    by_kind: dict[str, int]


class PgSearch:
    """Session-history search over one PostgreSQL database."""

    def __init__(self, connector: db.Connector, settings: Settings) -> None:
        self.settings = settings
        self._connector = connector
        self._store = Store(connector)
        self._ingestor = Ingestor(self._store, settings)
        self._engine = SearchEngine(self._store, settings)

    @classmethod
    def connect(cls, dsn: str | None = None, *, settings: Settings | None = None) -> PgSearch:
        """Open a database already migrated to this version (else `SchemaOutOfDate`)."""
        settings = settings or Settings.from_env()
        if dsn is not None:
            settings = settings.with_(dsn=dsn)
        connector = db.Connector.open(
            settings.dsn,
            rls=settings.row_level_security,
            trigram_threshold=settings.trigram_threshold,
        )
        return cls(connector, settings)

    @staticmethod
    def migrate(
        dsn: str | None = None, revision: str = "head", *, create: bool = False
    ) -> str | None:
        """Upgrade the schema of `dsn` (default: settings) to `revision`.

        With `create`, the database itself is created first when it does not exist.
        """
        target = Settings.from_env().dsn if dsn is None else dsn
        if create:
            migrations.create_database(target)
        return migrations.migrate(target, revision)

    def close(self) -> None:
        self._connector.close()

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
    ) -> FileResult:
        """Ingest one session file (one transaction); raises `IngestError`.

        `format`: ``auto`` (detected per file), ``openai``, ``claude-code``,
        ``codex``, ``gemini`` or ``opencode``. With `workspace_from_cwd`, an agent log
        goes to the workspace named by its working directory (`workspace` when it
        names none; `FileResult.no_cwd` then says so).
        """
        # One transaction, decided from what it reads: safe to run again when
        # Postgres picks it as a deadlock victim.
        return self._store.retrying(
            partial(
                self._ingestor.ingest_file,
                path,
                workspace=workspace,
                session_id=session_id,
                roots=_roots(roots),
                format=format,
                workspace_from_cwd=workspace_from_cwd,
            )
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
        )

    def append(self, *, workspace: str, session_id: str, messages: Sequence[dict[str, Any]]) -> int:
        """Append messages to a session; they are searchable when this returns."""
        return self._store.retrying(
            partial(
                self._ingestor.append,
                workspace=workspace,
                session_id=session_id,
                messages=messages,
            )
        )

    def forget(self, *, workspace: str, session_id: str | None = None) -> int:
        """Delete a session (or a whole workspace); statistics follow. Returns messages deleted."""
        check_workspace(workspace)
        return self._store.retrying(partial(self._forget, workspace, session_id))

    def _forget(self, workspace: str, session_id: str | None) -> int:
        with self._store.transaction(workspace, context="forgetting") as cur:
            if session_id is None:
                return self._store.forget_workspace(cur, workspace)
            deltas = Deltas()
            count = self._store.forget_session(cur, workspace, session_id, deltas)
            if count < 0:
                raise NotFound(f"no session {session_id!r} in workspace {workspace!r}")
            self._store.apply_deltas(cur, workspace, deltas)
            return count

    # --- reading ------------------------------------------------------------------

    def provider(self, *, workspace: str, session_id: str | None = None) -> Provider:
        """A `SessionQuery` whose scope is pinned to `workspace` (and `session_id`)."""
        check_workspace(workspace)
        return Provider(self, Scope(workspace=workspace, session_id=session_id))

    def search(
        self, request: SessionQueryRequest, *, workspace: str, explain: bool = False
    ) -> SessionQueryResult:
        return self._engine.search(
            Scope(workspace=check_workspace(workspace)), request, explain=explain
        )

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
        check_workspace(workspace)
        check_key("session_id", session_id)
        for name, value in (("seq", seq), ("before", before), ("after", after)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidQuery(f"{name} must be a non-negative integer")
        nb, na = window_bounds(before, after, MAX_WINDOW)
        with self._store.transaction(
            workspace,
            search=True,
            timeout_ms=self.settings.statement_timeout_ms,
            context="reading a window",
        ) as cur:
            after_rows = self._store.run(
                cur,
                q.WINDOW_AFTER,
                {"ws": workspace, "session_id": session_id, "seq": seq, "n": na + 1},
            )
            if not after_rows or after_rows[0][1] != seq:
                raise NotFound(f"no message {session_id!r} seq {seq} in workspace {workspace!r}")
            before_rows = (
                self._store.run(
                    cur,
                    q.WINDOW_BEFORE,
                    {"ws": workspace, "session_id": session_id, "seq": seq, "n": nb},
                )
                if nb
                else []
            )
        rows = list(reversed(before_rows)) + after_rows
        return Window(
            workspace_id=workspace,
            session_id=session_id,
            anchor_seq=seq,
            messages=_window_messages(rows, anchor=seq),
        )

    def session_messages(
        self, *, workspace: str, session_id: str, start_seq: int = 0, limit: int = MAX_WINDOW
    ) -> Window:
        """One page of a session's messages from `start_seq`; `next_seq` continues."""
        check_workspace(workspace)
        check_key("session_id", session_id)
        if isinstance(start_seq, bool) or not isinstance(start_seq, int) or start_seq < 0:
            raise InvalidQuery("start_seq must be a non-negative integer")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidQuery("limit must be a positive integer")
        limit = min(limit, MAX_WINDOW)
        with self._store.transaction(
            workspace,
            search=True,
            timeout_ms=self.settings.statement_timeout_ms,
            context="listing a session",
        ) as cur:
            exists = self._store.run(
                cur, q.SESSION_EXISTS, {"ws": workspace, "session_id": session_id}
            )
            if not exists:
                raise NotFound(f"no session {session_id!r} in workspace {workspace!r}")
            rows = self._store.run(
                cur,
                q.SESSION_PAGE,
                {"ws": workspace, "session_id": session_id, "seq": start_seq, "n": limit + 1},
            )
        more = len(rows) > limit
        rows = rows[:limit]
        return Window(
            workspace_id=workspace,
            session_id=session_id,
            anchor_seq=start_seq,
            messages=_window_messages(rows, anchor=None),
            next_seq=int(rows[-1][1]) + 1 if more and rows else None,
        )

    def sessions(self, *, workspace: str, limit: int = 100, offset: int = 0) -> list[SessionInfo]:
        check_workspace(workspace)
        with self._store.transaction(workspace, context="listing sessions") as cur:
            rows = self._store.list_sessions(cur, workspace, limit=limit, offset=offset)
        return [
            SessionInfo(
                session_id=r[0],
                title=r[1],
                message_count=r[2],
                created_at=r[3],
                updated_at=r[4],
                source=r[5],
                parent_session_id=r[6],
            )
            for r in rows
        ]

    def workspaces(self) -> list[str]:
        """Every workspace with data; refused under row level security, where each
        transaction is bound to one workspace and a list would cross tenants."""
        if self.settings.row_level_security:
            raise ConfigError(
                "with row level security on, workspaces cannot be listed across "
                "tenants; name the workspace (--workspace)"
            )
        with self._store.transaction(None, context="listing workspaces") as cur:
            return self._store.workspaces(cur)

    def stats(self, *, workspace: str) -> WorkspaceStats:
        check_workspace(workspace)
        with self._store.transaction(workspace, context="reading statistics") as cur:
            by_kind = self._store.workspace_stats(cur, workspace)
            sessions, vocabulary = self._store.workspace_counts(cur, workspace)
        return WorkspaceStats(
            workspace_id=workspace,
            sessions=sessions,
            messages=sum(v[0] for v in by_kind.values()),
            indexed_messages=sum(v[1] for v in by_kind.values()),
            vocabulary=vocabulary,
            by_kind={k: v[0] for k, v in sorted(by_kind.items())},
        )

    def table_sizes(self) -> list[tuple[str, int, int]]:
        """(table, table bytes, index bytes) for pgsearch's tables."""
        with self._store.transaction(None, context="reading sizes") as cur:
            return self._store.table_sizes(cur)


class Provider:
    """A `SessionQuery` bound to a workspace (and optionally one session).

    The scope comes from the host; a request naming another workspace or session is
    rejected with `ScopeError`, never widened.
    """

    def __init__(self, pg: PgSearch, scope: Scope) -> None:
        self._pg = pg
        self.scope = scope

    def search(self, request: SessionQueryRequest) -> SessionQueryResult:
        return self._pg._engine.search(self.scope, request)

    def explain(self, request: SessionQueryRequest) -> SessionQueryResult:
        return self._pg._engine.search(self.scope, request, explain=True)

    def _session(self, session_id: str) -> str:
        if self.scope.session_id is not None and session_id != self.scope.session_id:
            raise ScopeError(
                f"this provider is bound to session {self.scope.session_id!r}; "
                f"it cannot open session {session_id!r}"
            )
        return session_id

    def around(
        self,
        session_id: str,
        seq: int,
        *,
        before: int = DEFAULT_CONTEXT,
        after: int = DEFAULT_CONTEXT,
    ) -> Window:
        return self._pg.around(
            workspace=self.scope.workspace,
            session_id=self._session(session_id),
            seq=seq,
            before=before,
            after=after,
        )

    def session_messages(
        self, session_id: str, *, start_seq: int = 0, limit: int = MAX_WINDOW
    ) -> Window:
        return self._pg.session_messages(
            workspace=self.scope.workspace,
            session_id=self._session(session_id),
            start_seq=start_seq,
            limit=limit,
        )


def _roots(roots: Sequence[str | os.PathLike[str]] | None) -> list[Path] | None:
    return None if roots is None else [Path(r) for r in roots]


def _window_messages(
    rows: Sequence[tuple[Any, ...]], *, anchor: int | None
) -> tuple[WindowMessage, ...]:
    per_message = MAX_RESULT_BYTES // max(len(rows), 1)
    out = []
    for sid, seq, entry_id, kind, role, turn, tool_name, created_at, content, arguments in rows:
        text = content if not arguments else (f"{content}\n{arguments}" if content else arguments)
        out.append(
            WindowMessage(
                session_id=sid,
                seq=seq,
                entry_id=entry_id or f"{sid}:{seq}",
                kind=kind,
                role=role,
                turn=turn,
                tool_name=tool_name,
                created_at=created_at,
                content=clip(text, per_message),
                anchor=seq == anchor,
            )
        )
    return tuple(out)

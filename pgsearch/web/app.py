"""The ASGI application of `pgsearch serve`: the JSON API and the page, on Starlette.

One `AsyncPgSearch` (one asyncio connection pool) serves every request; handlers
await its units of work directly, so no thread sits between a request and its
connection. Each request under ``/v1/`` is authenticated first:

- the bearer token names the scope (workspace, optionally one session, read or
  read/write); nothing in the request can widen it: a ``workspace_id`` or
  ``session_id`` naming anything else is refused (403), and page cursors are bound
  to the scope they were made in;
- no or an unknown token is 401; a read-only token writing, or any request outside
  the token's scope, is 403;
- each token has a request rate (its own, else the server's default): past it, 429
  with ``Retry-After``.

``pgsearch serve --open`` is the local single-user mode: no token, one fixed scope,
and the server only listens on 127.0.0.1 and answers only loopback names.
`pgsearch.web.guard` checks every request's Host, Origin and body type before it
reaches a handler and adds the security headers to every answer;
`pgsearch.web.server` holds the connection layer (deadlines, connection limit).

Every error is JSON, ``{"error": {"code": ..., "message": ...}}``, with a code
from `pgsearch.web.errors.ERROR_CODES` that never changes meaning. Tokens found in
the database are kept for `ServeConfig.token_cache_seconds`, so a revocation takes
effect within that time and a busy client costs one token lookup per interval,
not per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from pgsearch.aio import AsyncPgSearch, AsyncProvider
from pgsearch.errors import (
    ConfigError,
    IngestError,
    InvalidQuery,
    NotFound,
    PgSearchError,
    ScopeError,
    StoreError,
)
from pgsearch.rows import ApiToken
from pgsearch.settings import Settings
from pgsearch.tokens import hash_token
from pgsearch.types import Scope, SessionInfo
from pgsearch.web import inputs
from pgsearch.web.errors import ApiError, error_response
from pgsearch.web.guard import Guard, RequestPolicy, json_media_type
from pgsearch.web.limits import RateLimiter
from pgsearch.web.openapi import openapi_document

log = logging.getLogger(__name__)

#: Requests per second of a token that names no rate of its own.
DEFAULT_RATE = 50.0
#: Tokens remembered at most (a flood of distinct tokens only costs lookups).
TOKEN_CACHE_SIZE = 10_000
#: Failed token checks a client address may cause per second: each costs a lookup,
#: so guessing (or a misconfigured client) cannot load the database.
FAILED_AUTH_RATE = 20.0
#: Seconds a request body may take to arrive.
BODY_TIMEOUT = 30.0
#: Seconds a health check's answer is reused.
HEALTH_CACHE_SECONDS = 1.0

STATIC = resources.files("pgsearch.web") / "static"


@dataclass(frozen=True, kw_only=True)
class ServeConfig:
    """How `pgsearch serve` answers (the command line's options)."""

    #: Local single-user mode: every request gets this scope, no token is asked.
    open_scope: Scope | None = None
    #: In open mode, whether appends and ingests are allowed.
    open_write: bool = False
    #: `POST /v1/append` answers (else 404).
    enable_append: bool = False
    #: `POST /v1/ingest` answers for files under these directories (none: 404).
    #: `POST /v1/ingest` answers for files under these directories, each bound to the
    #: one workspace whose tokens may ingest from it: (workspace, root) pairs (none:
    #: 404). A workspace's tokens never reach another workspace's files.
    ingest_roots: tuple[tuple[str, Path], ...] = ()
    default_rate: float = DEFAULT_RATE
    token_cache_seconds: float = 5.0
    #: Failed token checks per second a client address may cause.
    failed_auth_rate: float = FAILED_AUTH_RATE
    #: Token mode: host names answered besides loopback ones (empty: any).
    allowed_hosts: tuple[str, ...] = ()
    #: Origins answered besides the server's own.
    allowed_origins: tuple[str, ...] = ()
    #: Seconds a request body may take to arrive, once its handler reads it.
    body_timeout: float = BODY_TIMEOUT
    #: Seconds a health check's answer is reused (each check costs a query).
    health_cache_seconds: float = HEALTH_CACHE_SECONDS

    def roots_for(self, workspace: str) -> list[Path]:
        """The ingest roots bound to `workspace`."""
        return [root for bound, root in self.ingest_roots if bound == workspace]

    def policy(self) -> RequestPolicy:
        """The Host/Origin rules of this configuration."""
        return RequestPolicy(
            loopback_only=self.open_scope is not None,
            allowed_hosts=frozenset(h.strip().lower() for h in self.allowed_hosts),
            allowed_origins=frozenset(o.strip().lower().rstrip("/") for o in self.allowed_origins),
        )


def _from_library(exc: PgSearchError) -> ApiError:
    if isinstance(exc, ScopeError):
        return ApiError("scope", str(exc))
    if isinstance(exc, InvalidQuery | ConfigError | IngestError):
        return ApiError("invalid_query", str(exc))
    if isinstance(exc, NotFound):
        return ApiError("not_found", str(exc))
    if isinstance(exc, StoreError):
        return ApiError("unavailable", str(exc), headers={"Retry-After": "1"})
    return ApiError("internal", str(exc))


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: the scope their credential pins, and what they may do."""

    scope: Scope
    can_write: bool
    #: Rate-limit key and rate.
    key: str
    rate: float
    token_id: str | None = None
    #: The local user of open mode, who may see where log files lie on this machine.
    local: bool = False

    @property
    def sees_paths(self) -> bool:
        """Whether answers may name log files' paths on the server: for the local user
        and write tokens (which ingest files) only; a read token never learns them."""
        return self.local or self.can_write


@dataclass(slots=True)
class _Tokens:
    """Tokens found recently, by the SHA-256 of their secret."""

    ttl: float
    found: dict[str, tuple[ApiToken, float]] = field(default_factory=dict)

    def get(self, secret: str) -> ApiToken | None:
        hit = self.found.get(hash_token(secret))
        if hit is None or hit[1] < time.monotonic():
            return None
        return hit[0]

    def put(self, secret: str, token: ApiToken) -> None:
        if self.ttl <= 0:
            return
        if len(self.found) >= TOKEN_CACHE_SIZE:
            self.found.clear()
        self.found[hash_token(secret)] = (token, time.monotonic() + self.ttl)


class Api:
    """The handlers, sharing one `AsyncPgSearch`, the token cache and the buckets."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.pg: AsyncPgSearch | None = None
        self.limiter = RateLimiter()
        self.tokens = _Tokens(ttl=config.token_cache_seconds)
        #: Token lookups in flight, by the hash of their secret.
        self.lookups: dict[str, asyncio.Future[ApiToken | None]] = {}
        #: The last health check: when it expires, and the revisions or the error.
        self.health: tuple[float, list[str] | PgSearchError] | None = None
        self.health_check: asyncio.Future[list[str]] | None = None

    @property
    def db(self) -> AsyncPgSearch:
        if self.pg is None:  # pragma: no cover  (the lifespan opens it before serving)
            raise ApiError("unavailable", "the server is starting")
        return self.pg

    # --- authentication ---------------------------------------------------------------

    async def caller(
        self, request: Request, *, write: bool = False, params: tuple[str, ...] = ()
    ) -> Caller:
        """Who sent `request` (else 401/403/429); query parameters beyond `params`
        (and ``workspace_id``) are refused, so a misspelt one never goes unnoticed."""
        caller = await self._identify(request)
        wait = self.limiter.take(caller.key, caller.rate)
        if wait > 0:
            raise ApiError(
                "rate_limited",
                f"this token may make {caller.rate:g} requests per second; retry in {wait:.2f} s",
                headers={"Retry-After": str(max(1, round(wait + 0.5)))},
            )
        inputs.check_params(request.query_params, params)
        inputs.check_workspace_field(request.query_params.get("workspace_id"), caller.scope)
        if write and not caller.can_write:
            raise ApiError(
                "scope",
                "this token is read-only; writing needs one made with "
                "`pgsearch token create --write`",
            )
        return caller

    async def _identify(self, request: Request) -> Caller:
        config = self.config
        if config.open_scope is not None:
            return Caller(
                scope=config.open_scope,
                can_write=config.open_write,
                key="local",
                rate=config.default_rate,
                local=True,
            )
        header = request.headers.get("authorization")
        challenge = {"WWW-Authenticate": 'Bearer realm="pgsearch"'}
        if not header:
            raise ApiError(
                "unauthorized",
                "a bearer token is needed (Authorization: Bearer pgs_...); "
                "make one with `pgsearch token create -w WORKSPACE`",
                headers=challenge,
            )
        scheme, _, secret = header.strip().partition(" ")
        secret = secret.strip()
        if scheme.lower() != "bearer" or not secret:
            raise ApiError(
                "unauthorized",
                "the Authorization header must be 'Bearer <token>'",
                headers=challenge,
            )
        token = self.tokens.get(secret)
        if token is None:
            token = await self._look_up(secret, request)
            if token is None:
                raise ApiError(
                    "unauthorized", "the token is unknown or was revoked", headers=challenge
                )
            self.tokens.put(secret, token)
        return Caller(
            scope=Scope(workspace=token.workspace_id, session_id=token.session_id),
            can_write=token.can_write,
            key=token.token_id,
            rate=token.rate_per_second or config.default_rate,
            token_id=token.token_id,
        )

    async def _look_up(self, secret: str, request: Request) -> ApiToken | None:
        """The live token `secret` names, looked up once however many requests carry
        it at the same moment; each lookup costs the client's address one failed
        check, taken before the lookup is awaited and given back when the token is
        good, so concurrent guesses cannot all pass a check made before any of them
        failed."""
        key = hash_token(secret)
        pending = self.lookups.get(key)
        if pending is None:
            address = request.client.host if request.client else "unknown"
            bucket = "failed:" + address
            rate = self.config.failed_auth_rate
            wait = self.limiter.take(bucket, rate)
            if wait > 0:
                raise ApiError(
                    "rate_limited",
                    f"too many failed token checks from {address}; retry in {wait:.2f} s",
                    headers={"Retry-After": str(max(1, round(wait + 0.5)))},
                )
            pending = asyncio.ensure_future(self.db.authenticate(secret))
            self.lookups[key] = pending

            def done(task: asyncio.Future[ApiToken | None]) -> None:
                self.lookups.pop(key, None)
                if not task.cancelled() and task.exception() is None and task.result():
                    self.limiter.give_back(bucket, rate)

            pending.add_done_callback(done)
        # Shielded: a client that hangs up does not cancel the others' lookup.
        return await asyncio.shield(pending)

    # --- handlers ---------------------------------------------------------------------

    async def search(self, request: Request) -> Response:
        caller = await self.caller(request)
        body = await _json_body(request, inputs.MAX_SEARCH_BODY, self.config.body_timeout)
        query, capped = inputs.search_request(body, caller.scope)
        result = await self._provider(caller).search(query)
        data = result.to_json()
        if capped:
            data["limit_capped"] = {"limit": query.limit}
        return JSONResponse(data)

    async def around(self, request: Request) -> Response:
        caller = await self.caller(request, params=("seq", "before", "after"))
        seq, before, after = inputs.around_params(request.query_params)
        session = _session_param(request)
        window = await self._provider(caller).around(session, seq, before=before, after=after)
        return JSONResponse(window.to_json())

    async def messages(self, request: Request) -> Response:
        caller = await self.caller(request, params=("start_seq", "limit"))
        start, limit = inputs.page_params(request.query_params)
        session = _session_param(request)
        window = await self._provider(caller).session_messages(
            session, start_seq=start, limit=limit
        )
        return JSONResponse(window.to_json())

    async def session(self, request: Request) -> Response:
        caller = await self.caller(request)
        session = caller.scope.narrow(_session_param(request))
        info = await self.db.session_info(workspace=caller.scope.workspace, session_id=session)
        if info is None:
            raise ApiError(
                "not_found", f"no session {session!r} in workspace {caller.scope.workspace!r}"
            )
        return JSONResponse(_session_json(info, caller))

    async def sessions(self, request: Request) -> Response:
        caller = await self.caller(request, params=("limit", "offset"))
        limit, offset = inputs.sessions_params(request.query_params)
        scope = caller.scope
        if scope.session_id is not None:
            # A token for one session lists that session alone.
            info = await self.db.session_info(
                workspace=scope.workspace, session_id=scope.session_id
            )
            rows = [info] if info is not None and offset == 0 else []
        else:
            rows = await self.db.sessions(workspace=scope.workspace, limit=limit, offset=offset)
        return JSONResponse(
            {
                "workspace_id": scope.workspace,
                "sessions": [_session_json(s, caller) for s in rows],
                "next_offset": offset + len(rows) if len(rows) == limit else None,
            }
        )

    async def stats(self, request: Request) -> Response:
        caller = await self.caller(request)
        if caller.scope.session_id is not None:
            raise ApiError(
                "scope",
                f"this token is bound to session {caller.scope.session_id!r}; "
                "workspace statistics need a token for the whole workspace",
            )
        stats = await self.db.stats(workspace=caller.scope.workspace)
        return JSONResponse(stats.to_json())

    async def whoami(self, request: Request) -> Response:
        caller = await self.caller(request)
        return JSONResponse(
            {
                "workspace_id": caller.scope.workspace,
                "session_id": caller.scope.session_id,
                "write": caller.can_write,
                "token_id": caller.token_id,
                "rate_per_second": caller.rate,
                "append": self.config.enable_append,
                "ingest": bool(self.config.roots_for(caller.scope.workspace)),
            }
        )

    async def append(self, request: Request) -> Response:
        if not self.config.enable_append:
            raise ApiError(
                "not_found", "appending is not enabled on this server (pgsearch serve --append)"
            )
        caller = await self.caller(request, write=True)
        body = await _json_body(request, inputs.MAX_APPEND_BODY, self.config.body_timeout)
        session, messages = inputs.append_body(body, caller.scope)
        count = await self.db.append(
            workspace=caller.scope.workspace, session_id=session, messages=messages
        )
        return JSONResponse({"session_id": session, "appended": count})

    async def ingest(self, request: Request) -> Response:
        if not self.config.ingest_roots:
            raise ApiError(
                "not_found",
                "ingesting files is not enabled on this server (pgsearch serve --ingest-root DIR)",
            )
        caller = await self.caller(request, write=True)
        body = await _json_body(request, inputs.MAX_SEARCH_BODY, self.config.body_timeout)
        path, session, fmt = inputs.ingest_body(body, caller.scope)
        roots = self.config.roots_for(caller.scope.workspace)
        if not roots:
            raise ApiError(
                "scope",
                f"no ingest root is bound to workspace {caller.scope.workspace!r} "
                "(pgsearch serve --ingest-root-for WORKSPACE DIR)",
            )
        from pgsearch.ingest import confine

        try:
            confine(Path(path), roots)
        except IngestError as exc:
            raise ApiError("scope", exc.reason) from None
        result = await self.db.ingest_file(
            path, workspace=caller.scope.workspace, session_id=session, roots=roots, format=fmt
        )
        if result.error is not None:
            raise ApiError("invalid_query", str(result.error))
        return JSONResponse(
            {
                "path": result.path,
                "workspace_id": result.workspace or caller.scope.workspace,
                "format": result.format,
                "sessions": sorted(result.sessions),
                "messages": result.messages,
                "skipped": result.skipped,
                "unchanged": result.unchanged,
                "bad_lines": result.bad_lines,
                "warnings": [str(w) for w in result.warnings],
            }
        )

    async def healthz(self, request: Request) -> Response:
        from pgsearch.db.store import HEAD_REVISION

        versions = await self._schema_versions()
        if versions != [HEAD_REVISION]:
            raise ApiError(
                "unavailable",
                f"the database schema is at {', '.join(versions) or 'no revision'}, this "
                f"server needs {HEAD_REVISION}; run `pgsearch migrate`",
            )
        return JSONResponse({"status": "ok", "schema_revision": HEAD_REVISION})

    async def _schema_versions(self) -> list[str]:
        """The schema revisions, asked of the database at most once per
        `ServeConfig.health_cache_seconds` (a health check needs no token, so it
        must not cost a query per request); an error is remembered as long."""
        now = time.monotonic()
        if self.health is None or self.health[0] <= now:
            if self.health_check is None:
                self.health_check = asyncio.ensure_future(self.db.schema_versions())
            check = self.health_check
            try:
                outcome: list[str] | PgSearchError = await asyncio.shield(check)
            except PgSearchError as exc:
                outcome = exc
            if self.health_check is check:
                self.health_check = None
                self.health = (time.monotonic() + self.config.health_cache_seconds, outcome)
        else:
            outcome = self.health[1]
        if isinstance(outcome, PgSearchError):
            raise outcome
        return outcome

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(openapi_document())

    async def favicon(self, request: Request) -> Response:
        return Response(FAVICON, media_type="image/svg+xml")

    async def page(self, request: Request) -> Response:
        html = (STATIC / "index.html").read_bytes()
        return Response(html, media_type="text/html; charset=utf-8")

    def _provider(self, caller: Caller) -> AsyncProvider:
        return self.db.provider(
            workspace=caller.scope.workspace, session_id=caller.scope.session_id
        )


def _session_param(request: Request) -> str:
    value = request.path_params["session_id"]
    assert isinstance(value, str)
    return value


async def _json_body(request: Request, limit: int, timeout: float) -> dict[str, Any]:
    """The request's JSON object body, at most `limit` bytes, arrived within `timeout`
    seconds (else 408, and the connection is closed); a large body is decoded in a
    worker thread, so other requests are answered meanwhile."""
    content_type = request.headers.get("content-type")
    if not json_media_type(content_type):
        raise ApiError(
            "unsupported_media_type",
            "a request body must be JSON sent with Content-Type: application/json, "
            f"not {content_type or 'none'!r:.100}",
        )
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError("too_large", f"the request body is over {limit:,} bytes")
    chunks = []
    size = 0
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise ApiError("too_large", f"the request body is over {limit:,} bytes")
                chunks.append(chunk)
    except TimeoutError:
        raise ApiError(
            "timeout",
            f"the request body did not arrive within {timeout:g} s",
            headers={"Connection": "close"},
        ) from None
    raw = b"".join(chunks)
    if size > _DECODE_ON_LOOP:
        return await asyncio.to_thread(inputs.decode_json, raw)
    return inputs.decode_json(raw)


#: Bodies up to this size are decoded on the event loop (a thread costs more).
_DECODE_ON_LOOP = 64 * 1024


Handler = Callable[[Request], Awaitable[Response]]


def _guarded(handler: Handler) -> Handler:
    """`handler` with every failure answered as a JSON error."""

    async def run(request: Request) -> Response:
        try:
            return await handler(request)
        except ApiError as exc:
            return error_response(exc.code, exc.message, exc.headers)
        except PgSearchError as exc:
            err = _from_library(exc)
            if err.code in ("unavailable", "internal"):
                log.warning("%s %s: %s", request.method, request.url.path, exc)
            return error_response(err.code, err.message, err.headers)
        except Exception:
            log.exception("%s %s failed", request.method, request.url.path)
            return error_response("internal", "the server failed to answer; see its log")

    return run


def _session_json(info: SessionInfo, caller: Caller) -> dict[str, Any]:
    """A session as JSON; its log file's path only for a caller that may see paths."""
    data = info.to_json()
    if not caller.sees_paths:
        data["source"] = None
    return data


#: The page's icon (a magnifying glass), so a browser's ``/favicon.ico`` finds one.
FAVICON = (
    b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16">'
    b'<circle cx="6.5" cy="6.5" r="4.5" fill="none" stroke="#2a5db0" stroke-width="2"/>'
    b'<path d="M10 10l4.5 4.5" stroke="#2a5db0" stroke-width="2.5" stroke-linecap="round"/>'
    b"</svg>"
)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        return error_response(
            "method_not_allowed",
            f"{request.method[:20]} is not allowed here",
            dict(exc.headers or {}),  # Allow: the methods that are
        )
    if exc.status_code == 404:
        return error_response("not_found", f"no such path: {request.url.path[:200]}")
    return error_response("invalid_query", str(exc.detail))


async def _failed(request: Request, exc: Exception) -> Response:
    # Outside any handler (routing, static files): still a JSON answer.
    return error_response("internal", "the server failed to answer; see its log")


class _App(Starlette):
    """Starlette with the request guard outermost, so that its refusals and its
    headers cover every answer, the framework's own errors included."""

    def __init__(self, *, policy: RequestPolicy, **kwargs: Any) -> None:
        self.policy = policy
        super().__init__(**kwargs)

    def build_middleware_stack(self) -> ASGIApp:
        return Guard(super().build_middleware_stack(), self.policy)


def create_app(
    config: ServeConfig,
    *,
    settings: Settings | None = None,
    pg: AsyncPgSearch | None = None,
) -> Starlette:
    """The ASGI app. It opens its own `AsyncPgSearch` from `settings` when it starts
    (and closes it when it stops), unless one is given in `pg`."""
    api = Api(config)

    async def served_workspaces() -> list[str]:
        # The workspaces this server answers for: the open mode's one, else every
        # workspace (under row level security, where they cannot be listed, those
        # that live tokens are bound to).
        if config.open_scope is not None:
            return [config.open_scope.workspace]
        if api.db.settings.row_level_security:
            return sorted({t.workspace_id for t in await api.db.tokens() if t.revoked_at is None})
        return await api.db.workspaces()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        owned = pg is None
        api.pg = await AsyncPgSearch.connect(settings=settings) if pg is None else pg
        maintainer = api.pg.maintainer(served_workspaces)
        app.state.maintainer = maintainer
        try:
            maintainer.start()
            yield
        finally:
            await maintainer.stop()
            if owned:
                await api.pg.close()

    def route(path: str, handler: Handler, method: str) -> Route:
        return Route(path, _guarded(handler), methods=[method])

    routes = [
        route("/", api.page, "GET"),
        route("/favicon.ico", api.favicon, "GET"),
        route("/healthz", api.healthz, "GET"),
        route("/openapi.json", api.openapi, "GET"),
        route("/v1/whoami", api.whoami, "GET"),
        route("/v1/search", api.search, "POST"),
        route("/v1/sessions", api.sessions, "GET"),
        route("/v1/sessions/{session_id:path}/around", api.around, "GET"),
        route("/v1/sessions/{session_id:path}/messages", api.messages, "GET"),
        route("/v1/sessions/{session_id:path}", api.session, "GET"),
        route("/v1/stats", api.stats, "GET"),
        route("/v1/append", api.append, "POST"),
        route("/v1/ingest", api.ingest, "POST"),
        Mount("/static", app=StaticFiles(directory=str(STATIC)), name="static"),
    ]
    app = _App(
        policy=config.policy(),
        routes=routes,
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _failed},
    )
    app.state.api = api
    return app

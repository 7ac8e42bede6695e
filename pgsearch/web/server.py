"""How `pgsearch serve` holds connections: deadlines, a connection limit, proxies.

uvicorn speaks HTTP/1.1 (h11); this module adds what a server facing slow or
hostile clients needs and uvicorn leaves out:

- **a header deadline**: a request's headers must arrive within
  `ConnectionLimits.header_timeout` seconds of the connection opening or of the
  previous answer, however they are trickled; past it the server answers 408 and
  closes. (uvicorn's keep-alive timer restarts on every byte, so a client sending
  one header line a second would hold a connection forever.) The body's deadline
  is the application's (`ServeConfig.body_timeout`), since only it reads bodies;
- **a connection limit**: past `max_connections` open connections, a new one is
  answered 503 ``unavailable`` with ``Retry-After`` and closed, so slow clients
  cannot exhaust file descriptors or memory;
- **forwarded headers only from configured proxies**: ``X-Forwarded-For`` and
  ``X-Forwarded-Proto`` are read only when the peer is one of `trusted_proxies`
  (none by default), so a client cannot name itself a new address per request to
  escape the per-address limit on failed token checks.

WebSockets are off: the API has none, and an upgrade would bypass these limits.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from pgsearch.web.errors import error_body, error_response
from pgsearch.web.guard import SECURITY_HEADERS

#: Seconds a client has to send a request's headers.
HEADER_TIMEOUT = 10.0
#: Open connections served at once; more are answered 503 and closed.
MAX_CONNECTIONS = 256
#: Seconds an idle keep-alive connection is kept.
KEEP_ALIVE = 5


@dataclass(frozen=True, kw_only=True)
class ConnectionLimits:
    """The connection layer's limits (`pgsearch serve` options)."""

    header_timeout: float = HEADER_TIMEOUT
    max_connections: int = MAX_CONNECTIONS
    #: Peers whose ``X-Forwarded-For``/``-Proto`` are believed (addresses or networks).
    trusted_proxies: tuple[str, ...] = ()


async def _busy(scope: Scope, receive: Receive, send: Send) -> None:
    response = error_response(
        "unavailable",
        "the server has as many connections open as it serves; retry shortly",
        {"Retry-After": "1", "Connection": "close"},
    )
    await response(scope, receive, send)


def _timeout_answer() -> bytes:
    body = error_body(
        "timeout", "the request's headers did not arrive in time; the connection is closed"
    )
    head = [
        "HTTP/1.1 408 Request Timeout",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
        *(f"{name}: {value}" for name, value in SECURITY_HEADERS),
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


class _Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header deadline and a connection limit."""

    limits = ConnectionLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        # The request cycle that was current when the deadline was armed: the
        # deadline holds until a newer request's headers have been read.
        self._armed_for: object = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        if len(self.connections) > self.limits.max_connections:
            # Answered once its headers are in (or at the header deadline).
            self.app = _busy
        self._arm(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._headers_seen()

    def on_response_complete(self) -> None:
        answered = self.cycle
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm(answered)
            self._headers_seen()  # a pipelined request may already be in

    def _arm(self, cycle: object) -> None:
        self._disarm()
        self._armed_for = cycle
        self._deadline = self.loop.call_later(self.limits.header_timeout, self._late)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _headers_seen(self) -> None:
        if self._deadline is not None and self.cycle is not self._armed_for:
            self._disarm()

    def _late(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or self.cycle is not self._armed_for:
            return
        self.transport.write(_timeout_answer())
        self.transport.close()


def protocol_class(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """The HTTP protocol class uvicorn runs, bound to `limits`."""
    return type("PgsearchHTTP", (_Protocol,), {"limits": limits})


def uvicorn_config(
    app: ASGIApp, limits: ConnectionLimits, *, host: str = "127.0.0.1", port: int = 8765
) -> uvicorn.Config:
    """The uvicorn configuration `pgsearch serve` (and the test servers) run."""
    trusted = list(limits.trusted_proxies)
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol_class(limits),
        ws="none",
        lifespan="on",
        proxy_headers=bool(trusted),
        forwarded_allow_ips=trusted or None,
        timeout_keep_alive=KEEP_ALIVE,
        server_header=False,
        log_level="warning",
        access_log=False,
    )

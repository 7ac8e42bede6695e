"""What every request must be before any handler sees it, and what every answer carries.

A browser is the dangerous client of a local server: any page the user visits
can send requests to ``127.0.0.1``, and a page whose name was rebound to
``127.0.0.1`` (DNS rebinding) can even read the answers, since the browser then
treats the server as that page's own origin. Three rules close those doors:

- **Host**: in open mode (no token) only loopback names (``127.0.0.1``,
  ``localhost``, ``[::1]``) are answered, so a rebound name is refused; in token
  mode, a configured list (`RequestPolicy.allowed_hosts`, loopback names always
  included), or any name when none is configured (a request then still needs a
  token, which no other page holds).
- **Origin**: a request carrying an ``Origin`` other than the server's own (the
  one its ``Host`` names) or a configured one is refused, whatever its method.
- **Request bodies are JSON**, declared as ``application/json`` (`json_media_type`,
  checked where a handler reads its body): a page on another origin can only send
  that type after a CORS preflight, which this server never grants, so a form or a
  ``text/plain`` fetch cannot plant anything.

Every answer, the page, its files and JSON alike, carries the same security
headers (`SECURITY_HEADERS`): the page's Content-Security-Policy, no framing, no
sniffing, no caching, no referrer, same-origin resource policy.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pgsearch.web.errors import error_response

#: The page runs only its own scripts and styles and talks only to this origin.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
#: Sent with every answer of the server.
SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("content-security-policy", CONTENT_SECURITY_POLICY),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    ("cache-control", "no-store"),
    ("cross-origin-resource-policy", "same-origin"),
)
_RAW_HEADERS = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in SECURITY_HEADERS]
_RAW_NAMES = frozenset(k for k, _ in _RAW_HEADERS)


def host_name(value: str) -> str | None:
    """The host of a ``Host`` header value (lower case, IPv6 without brackets), or
    None when it is not a host with an optional port."""
    value = value.strip()
    if not value or any(c in value for c in "/?#@\\ \t") or not value.isascii():
        return None
    try:
        parts = urlsplit("//" + value)
        parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError:
        return None
    return parts.hostname or None


def is_loopback(name: str) -> bool:
    """Whether `name` (from `host_name`) can only mean this machine."""
    if name in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def json_media_type(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` declares JSON (parameters such as charset aside)."""
    return (content_type or "").partition(";")[0].strip().lower() == "application/json"


@dataclass(frozen=True, kw_only=True)
class RequestPolicy:
    """Which Host and Origin values a server answers, as `Guard` applies them."""

    #: Open mode: no token, so only loopback names are answered.
    loopback_only: bool
    #: Token mode: host names answered besides loopback ones (empty: any name).
    allowed_hosts: frozenset[str] = frozenset()
    #: Origins answered besides the server's own (``https://search.example.com``).
    allowed_origins: frozenset[str] = frozenset()

    def refusal(self, host: str | None, origin: str | None) -> tuple[str, str] | None:
        """The error code and message refusing a request, or None to serve it."""
        if host is not None:
            name = host_name(host)
            if name is None:
                return "misdirected", f"the Host header {host!r:.100} is not a host name"
            if self.loopback_only and not is_loopback(name):
                return "misdirected", (
                    f"this server runs without tokens and answers only for 127.0.0.1, "
                    f"localhost or [::1], not {host!r:.100}; open it by one of those names"
                )
            if self.allowed_hosts and not (is_loopback(name) or name in self.allowed_hosts):
                return "misdirected", (
                    f"this server does not answer for host {host!r:.100} "
                    "(pgsearch serve --allowed-host names the ones it does)"
                )
        if origin is not None and not self._own_origin(origin, host):
            return "cross_origin", (
                f"requests from another origin ({origin!r:.100}) are refused; "
                "this server answers its own page only "
                "(pgsearch serve --allowed-origin adds one)"
            )
        return None

    def _own_origin(self, origin: str, host: str | None) -> bool:
        origin = origin.strip().lower().rstrip("/")
        if origin in self.allowed_origins:
            return True
        if host is None:
            return False
        try:
            parts = urlsplit(origin)
        except ValueError:
            return False
        return parts.scheme in ("http", "https") and parts.netloc == host.strip().lower()


class Guard:
    """ASGI middleware: refuses requests `policy` refuses, adds `SECURITY_HEADERS`."""

    def __init__(self, app: ASGIApp, policy: RequestPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", ()) if k not in _RAW_NAMES]
                message = {**message, "headers": kept + _RAW_HEADERS}
            await send(message)

        headers = Headers(scope=scope)
        refused = self.policy.refusal(headers.get("host"), headers.get("origin"))
        if refused is not None:
            code, message = refused
            # The body is not read: the connection cannot be reused for another request.
            response = error_response(code, message, {"Connection": "close"})
            await response(scope, receive, send_secured)
            return
        await self.app(scope, receive, send_secured)

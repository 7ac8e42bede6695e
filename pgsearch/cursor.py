"""Page cursors: opaque, signed with the database's key, bound to the request."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pgsearch.errors import InvalidQuery
from pgsearch.types import Scope, SessionQueryRequest


class CursorCodec:
    """Opaque, signed page cursors bound to the request that made them."""

    def __init__(self, key: bytes) -> None:
        self.key = key

    def encode(self, fingerprint: str, position: list[Any]) -> str:
        payload = json.dumps({"f": fingerprint, "p": position}, separators=(",", ":")).encode()
        sig = hmac.new(self.key, payload, hashlib.sha256).digest()[:16]
        return (
            base64.urlsafe_b64encode(payload).decode().rstrip("=")
            + "."
            + base64.urlsafe_b64encode(sig).decode().rstrip("=")
        )

    def decode(self, cursor: str, fingerprint: str) -> list[Any]:
        try:
            body, _, sig = cursor.partition(".")
            payload = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            given = base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4))
        except (ValueError, TypeError):
            raise InvalidQuery("cursor is malformed") from None
        expected = hmac.new(self.key, payload, hashlib.sha256).digest()[:16]
        if not hmac.compare_digest(given, expected):
            raise InvalidQuery("cursor is invalid or was altered")
        data = json.loads(payload)
        if data.get("f") != fingerprint:
            raise InvalidQuery("cursor belongs to a different query or scope")
        position = data.get("p")
        if not isinstance(position, list):
            raise InvalidQuery("cursor is malformed")
        return position


def request_fingerprint(scope: Scope, req: SessionQueryRequest, kinds: Sequence[str]) -> str:
    """What a cursor is bound to: the scope and every part of the request but the page."""
    parts = [
        scope.workspace,
        scope.session_id or req.session_id or "",
        req.query,
        ",".join(kinds),
        ",".join(sorted(req.roles)),
        req.tool_name or "",
        req.since.isoformat() if req.since else "",
        req.until.isoformat() if req.until else "",
        str(req.per_session),
    ]
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:24]


#: Where a ranked page ends: `ranking.Ranked.order_key` of its last hit.
RankedPosition = tuple[float, float, str, int]
#: Where a browse page ends: the last entry's time, session and seq.
BrowsePosition = tuple[datetime, str, int]


def ranked_position(position: list[Any] | None) -> RankedPosition | None:
    """A decoded cursor's position in a ranked result, else `InvalidQuery`."""
    if position is None:
        return None
    try:
        return (float(position[0]), float(position[1]), str(position[2]), int(position[3]))
    except (IndexError, TypeError, ValueError):
        raise InvalidQuery("cursor is malformed") from None


def browse_position(position: list[Any] | None) -> BrowsePosition | None:
    """A decoded cursor's position in a browse listing, else `InvalidQuery`."""
    if position is None:
        return None
    try:
        return (datetime.fromisoformat(str(position[0])), str(position[1]), int(position[2]))
    except (IndexError, TypeError, ValueError):
        raise InvalidQuery("cursor is malformed") from None

"""API tokens: bearer credentials of `pgsearch serve`, each pinning one scope.

A token is ``pgs_<id>_<secret>``: the id (12 hex digits) names it in listings and
revocations, the secret is 32 random bytes. Only the SHA-256 of the whole token is
stored (``api_tokens``, migration 0006); a plain hash suffices because the token is
random and long, so there is nothing to guess from a leaked hash. The token is
shown once, when it is made.

Each token is bound to one workspace, optionally to one session of it, and to read
or read/write; the server takes the scope from the token and never from a request.
The functions below check their arguments and return units of work that both
facades run.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from functools import partial

from pgsearch.db import store
from pgsearch.db.store import Unit
from pgsearch.errors import ConfigError, InvalidQuery
from pgsearch.rows import ApiToken
from pgsearch.types import Scope
from pgsearch.validate import check_key, check_workspace

__all__ = ["ApiToken", "NewToken", "scope_of"]

PREFIX = "pgs_"
_TOKEN = re.compile(r"pgs_([0-9a-f]{12})_[A-Za-z0-9_-]{43}")
_TOKEN_ID = re.compile(r"[0-9a-f]{12}")
#: The highest request rate a token may be given (requests per second).
MAX_RATE = 10_000.0


@dataclass(frozen=True, kw_only=True)
class NewToken:
    """A token just made: its secret (shown once, never stored) and its record."""

    secret: str
    token: ApiToken


def hash_token(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def well_formed(secret: str) -> bool:
    """Whether `secret` has the shape of a token (anything else is refused unread)."""
    return _TOKEN.fullmatch(secret) is not None


def scope_of(token: ApiToken) -> Scope:
    return Scope(workspace=token.workspace_id, session_id=token.session_id)


def create_unit(
    workspace: str,
    *,
    session_id: str | None = None,
    write: bool = False,
    rate: float | None = None,
    label: str | None = None,
) -> tuple[str, Unit[ApiToken]]:
    """A new token's secret and the unit that stores its hash."""
    workspace = check_workspace(workspace)
    if session_id is not None:
        check_key("session_id", session_id)
    if rate is not None and not (0 < rate <= MAX_RATE):
        raise ConfigError(f"a token's rate must be above 0 and at most {MAX_RATE:g} per second")
    if label is not None:
        check_key("label", label)
    token_id = secrets.token_hex(6)
    secret = f"{PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
    unit = Unit(
        work=partial(
            store.create_token,
            workspace,
            token_id=token_id,
            token_hash=hash_token(secret),
            session_id=session_id,
            can_write=write,
            rate=rate,
            label=label,
        ),
        workspace=workspace,
        write=True,
        context="creating a token",
    )
    return secret, unit


def lookup_unit(secret: str) -> Unit[ApiToken | None] | None:
    """The unit that finds a live token by its secret; None for a malformed secret."""
    if not well_formed(secret):
        return None
    return Unit(
        work=partial(store.token_by_hash, hash_token(secret)),
        workspace=None,
        write=False,
        # On the primary: a token revoked a moment ago, by any process, is refused.
        primary=True,
        search=True,
        context="checking a token",
    )


def list_unit(workspace: str | None) -> Unit[list[ApiToken]]:
    ws = None if workspace is None else check_workspace(workspace)
    return Unit(
        work=partial(store.list_tokens, ws),
        workspace=None,
        write=False,
        primary=True,
        context="listing tokens",
    )


def revoke_unit(token_id: str) -> Unit[ApiToken | None]:
    """The unit that revokes a token named by its id (or by the whole token)."""
    whole = _TOKEN.fullmatch(token_id) if isinstance(token_id, str) else None
    if whole is not None:
        token_id = whole.group(1)
    if not isinstance(token_id, str) or _TOKEN_ID.fullmatch(token_id) is None:
        raise InvalidQuery(
            f"a token id is 12 hex digits (as `pgsearch token list` shows), got {token_id!r}"
        )
    return Unit(
        work=partial(store.revoke_token, token_id),
        workspace=None,
        write=True,
        context="revoking a token",
    )

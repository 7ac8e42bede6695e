"""Connection strings as shown to people: never with a password."""

from __future__ import annotations

import re

_PASSWORD_RE = re.compile(r"(password\s*=\s*)\S+|(://[^:/@\s]+:)[^@\s]+(@)", re.IGNORECASE)


def redact_dsn(dsn: str) -> str:
    """`dsn` with any password replaced, for messages and logs."""
    return _PASSWORD_RE.sub(
        lambda m: f"{m.group(1)}***" if m.group(1) else f"{m.group(2)}***{m.group(3)}", dsn
    )

"""Connection strings as shown to people: never with a password.

A connection string is read with libpq's own parser (`conninfo_to_dict`), so a
password is found however it is written: in a URL (percent-encoded, or holding a
raw ``@``), in a URL's query (``?password=``), or as a key/value pair, quoted
(``password='my s3cr3t phrase'``) or with backslash escapes. A string libpq cannot
parse is masked from ``password`` to its end; a URL is masked as written, from the
user name to the last ``@`` (libpq reads ``user:p@ss@host`` as password ``p`` at host
``ss@host``, which is not what was meant). Error messages get
the same treatment, and any word of the connection string's password that libpq
echoes in an error (``missing "=" after "s3cr3t"``) is masked too.
"""

from __future__ import annotations

import re

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

MASK = "***"

#: ``password = value`` (quoted or not) to the end of the line: used where libpq
#: could not say where the value ends.
_KEYWORD_PASSWORD = re.compile(r"(?i)(\bpassword\s*=\s*).*")
#: ``scheme://user:password@host``: the password runs to the last '@' of the URL.
_URL_PASSWORD = re.compile(r"(?i)(\b[a-z][a-z0-9+.\-]*://[^\s/?#@:]*:)[^\n]*(@)")


def _parse(dsn: str) -> dict[str, str] | None:
    try:
        return {k: str(v) for k, v in conninfo_to_dict(dsn).items() if v is not None}
    except psycopg.Error:
        return None


def parse_error(dsn: str) -> str | None:
    """Why libpq cannot parse `dsn` as a connection string, or None when it can."""
    try:
        conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        return str(exc).strip()
    return None


def redact_text(text: str) -> str:
    """`text` with anything that looks like a password in a connection string masked."""
    text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{MASK}{m.group(2)}", text)
    return _KEYWORD_PASSWORD.sub(lambda m: f"{m.group(1)}{MASK}", text)


def redact_dsn(dsn: str) -> str:
    """`dsn` as libpq reads it, with its password replaced by ``***``."""
    params = _parse(dsn)
    if params is None or "://" in dsn:
        # A URL is masked as written: libpq reads "user:p@ss@host" as password "p"
        # at host "ss@host", but the password meant runs to the last '@'.
        return redact_text(dsn)
    if "password" not in params:
        return dsn
    params["password"] = MASK
    return make_conninfo("", **params)


def _password_words(dsn: str) -> list[str]:
    params = _parse(dsn)
    if params is not None:
        password = params.get("password", "")
    else:
        found = re.search(r"(?i)\bpassword\s*=\s*(.*)", dsn)
        password = found.group(1) if found else ""
    url = _URL_PASSWORD.search(dsn)
    if url:
        written = dsn[url.end(1) : url.start(2)]
        password += " " + written + " " + "@".join(written.split("@")[1:])
    words = {w.strip("'\"\\") for w in re.split(r"[\s@:/]+", password)}
    if password.strip():
        words.add(password.strip())
    # Longest first, so that a word inside another is masked with it.
    return sorted((w for w in words if len(w) >= 2), key=len, reverse=True)


def redact_message(message: str, dsn: str) -> str:
    """An error `message` about `dsn` with no part of the password left in it."""
    message = redact_text(message)
    for word in _password_words(dsn):
        message = message.replace(word, MASK)
    return message

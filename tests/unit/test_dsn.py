"""Connection strings and connection errors never show a password."""

from __future__ import annotations

import pytest

from pgsearch.db.dsn import redact_dsn, redact_message
from pgsearch.errors import StoreError

#: (connection string, words of its password that must not be shown)
DSNS = {
    "quoted key/value": ("host=db password='my s3cr3t phrase' user=app", ["s3cr3t", "phrase"]),
    "escaped space": (r"host=db password=my\ s3cr3t user=app", ["s3cr3t"]),
    "quoted quote": (r"host=db password='it\'s s3cr3t' user=app", ["s3cr3t"]),
    "url": ("postgresql://app:hunter2@db.internal:5432/app", ["hunter2"]),
    "url percent-encoded": ("postgresql://app:p%40ss%20w0rd@db/app", ["p%40ss", "w0rd"]),
    "url raw @": ("postgresql://app:p@ss@db.internal/app", ["ss@db"]),
    "url query": ("postgresql://db/app?user=app&password=hunter2", ["hunter2"]),
    "unparseable key/value": ("host=db password=my s3cr3t phrase", ["s3cr3t", "phrase"]),
    "unparseable url": ("postgresql://app:hun ter2@db/app", ["ter2"]),
}


@pytest.mark.parametrize("name", sorted(DSNS))
def test_redacted_dsn_shows_no_password(name: str) -> None:
    dsn, words = DSNS[name]
    shown = redact_dsn(dsn)
    assert "***" in shown
    for word in words:
        assert word not in shown


def test_redaction_keeps_everything_else() -> None:
    assert redact_dsn("host=db password='my s3cr3t phrase' user=app") in (
        "host=db password=*** user=app",
        "user=app password=*** host=db",
        "host=db user=app password=***",
    )
    shown = redact_dsn("postgresql://app:hunter2@db.internal:5432/app")
    assert "db.internal" in shown and "app" in shown and "5432" in shown
    assert redact_dsn("postgresql://db.internal/app") == "postgresql://db.internal/app"
    assert redact_dsn("host=db dbname=app") == "host=db dbname=app"
    assert redact_dsn("") == ""


def test_error_messages_lose_echoed_password_words() -> None:
    dsn = "host=db password=my s3cr3t phrase"
    message = 'missing "=" after "s3cr3t" in connection info string'
    assert "s3cr3t" not in redact_message(message, dsn)
    assert redact_message("could not translate host name", dsn) == ("could not translate host name")


@pytest.mark.parametrize(
    "dsn",
    [
        "host=db password=my s3cr3t phrase connect_timeout=2",
        "host=127.0.0.1 port=1 password='my s3cr3t phrase' connect_timeout=2",
        "postgresql://app:s3cr3t@127.0.0.1:1/app?connect_timeout=2",
    ],
)
def test_connection_failures_show_no_password(dsn: str) -> None:
    from pgsearch import PgSearch

    with pytest.raises(StoreError) as failure:
        PgSearch.connect(dsn)
    assert "s3cr3t" not in str(failure.value)
    assert "phrase" not in str(failure.value)
    assert str(failure.value).startswith("cannot connect to ")


def test_a_url_password_holding_at_signs_is_masked_in_errors_too() -> None:
    dsn = "postgresql://app:p@ss@db.internal/app"
    message = 'could not translate host name "ss@db.internal" to address'
    assert "ss@db" not in redact_message(message, dsn)

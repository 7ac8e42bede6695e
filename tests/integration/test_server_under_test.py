"""The suite runs on the server it was asked for (the version matrix depends on it)."""

from __future__ import annotations

import os

import psycopg

from pgsearch import embedded
from pgsearch.db.diagnose import MIN_SERVER_VERSION_NUM


def test_the_suite_runs_on_the_requested_server(server_dsn: str) -> None:
    with psycopg.connect(server_dsn) as conn:
        row = conn.execute(
            "SELECT current_setting('server_version_num')::int, "
            "current_setting('unix_socket_directories'), current_setting('listen_addresses')"
        ).fetchone()
    assert row is not None
    version_num, sockets, listen = row
    print(f"server under test: PostgreSQL {version_num}")
    assert version_num >= MIN_SERVER_VERSION_NUM
    if os.environ.get("PGSEARCH_TEST_SERVER") == "embedded":
        assert version_num // 10000 == int(embedded.EmbeddedServer().version())
        assert listen == ""  # the private server has no TCP address
        assert sockets.strip('"').endswith("/data")  # the socket is in the data directory

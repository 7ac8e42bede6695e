"""How a ``pgsearch`` process ends: at once after its command (`pgsearch.cli.run`), yet
with every byte of its output written, its status kept and its connection closed.

A search opens one connection to the server: the one that checked the schema runs
the search too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.conftest import EXAMPLES, Databases


def pgsearch(*args: str, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGSEARCH_")}
    return subprocess.run(
        [sys.executable, "-m", "pgsearch", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )


@pytest.fixture(scope="module")
def demo(databases: Databases, template_db: str) -> Iterator[tuple[str, str]]:
    name = databases.create(template=template_db, prefix="exit")
    dsn = databases.dsn(name)
    done = pgsearch("--dsn", dsn, "ingest", str(EXAMPLES), "-w", "demo", "-q")
    assert done.returncode == 0, done.stderr
    yield name, dsn
    databases.drop(name)


def test_the_whole_output_is_written_to_a_pipe_and_to_a_file(
    demo: tuple[str, str], tmp_path: Path
) -> None:
    _, dsn = demo
    piped = pgsearch("--dsn", dsn, "search", "databse lock", "-w", "demo", "--json")
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["matches"]
    out = tmp_path / "out.json"
    with out.open("w") as fh:  # a file is block-buffered: only a flush writes it
        written = pgsearch(
            "--dsn", dsn, "search", "databse lock", "-w", "demo", "--json", stdout=fh.fileno()
        )
    assert written.returncode == 0, written.stderr
    assert json.loads(out.read_text()) == json.loads(piped.stdout)


def test_errors_keep_their_status_and_their_one_line(demo: tuple[str, str]) -> None:
    _, dsn = demo
    missing = pgsearch("--dsn", dsn, "search", "lock", "-w", "nosuch")
    assert missing.returncode == 1
    assert missing.stderr.startswith("pgsearch: error: no workspace 'nosuch'")
    assert len(missing.stderr.strip().splitlines()) == 1
    usage = pgsearch("--dsn", dsn, "search", "lock", "--limit", "0")
    assert usage.returncode == 2
    assert "Invalid value for '--limit'" in usage.stderr
    helped = pgsearch("--help")
    assert helped.returncode == 0 and "Commands:" in helped.stdout


def _sessions(admin: str, name: str) -> int:
    with psycopg.connect(admin, autocommit=True) as conn:
        row = conn.execute(
            "SELECT sessions FROM pg_stat_database WHERE datname = %s", (name,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def _settled_sessions(admin: str, name: str) -> int:
    """The database's session count once it stops moving (a session's statistics are
    reported by its backend as it exits, just after the client has gone)."""
    last, since = _sessions(admin, name), time.monotonic()
    deadline = since + 10
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = _sessions(admin, name)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since > 1.0:
            break
    return last


def test_a_search_opens_one_connection_and_closes_it(
    demo: tuple[str, str], server_dsn: str
) -> None:
    name, dsn = demo
    before = _settled_sessions(server_dsn, name)
    done = pgsearch("--dsn", dsn, "search", "databse lock", "-w", "demo")
    assert done.returncode == 0, done.stderr
    assert "1 match" in done.stdout
    assert _settled_sessions(server_dsn, name) == before + 1
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        ).fetchone()
    assert left == (0,)

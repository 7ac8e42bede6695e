"""A private primary and a streaming standby, started and stopped by the tests.

The serving suites restart and stop servers on purpose, so they never use a shared
server: `Cluster.start` runs ``initdb`` for a primary of its own (WAL for
replication, hot standby on), clones a standby from it with ``pg_basebackup -R``
over a physical replication slot, and starts both on free loopback ports. The
servers run as an unprivileged operating-system user (``postgres`` by default;
PostgreSQL refuses to run as root) with data in a temporary directory that user
owns, and are stopped and deleted by `Cluster.close` (also at interpreter exit, and
at the next start when the process that made them died without cleaning up).

Binaries come from ``PGSEARCH_PG_BINDIR``, else ``pg_config --bindir``, else
``/usr/lib/postgresql/15/bin``; when none has them, `find_binaries` raises
`MissingServer` with a message saying how to provide them.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import random
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

#: The loopback ports these suites may use (other suites on the machine use others).
PORT_RANGE = range(56050, 56100)
#: Programs the harness runs, all from one directory.
PROGRAMS = ("initdb", "pg_ctl", "pg_basebackup", "postgres")
FALLBACK_BINDIR = Path("/usr/lib/postgresql/15/bin")
#: The operating-system account that runs the servers when the tests run as root.
DEFAULT_OS_USER = "postgres"
#: Prefix of the temporary directory holding both data directories and logs.
DIR_PREFIX = "pgsearch-serving-"
SLOT = "pgsearch_test_standby"
#: Seconds `pg_ctl` waits for a start, stop or restart.
CTL_TIMEOUT_S = 90
#: Server settings both nodes run with. The standby needs at least the primary's
#: ``max_connections``; the private servers are sized for the soak test's pools.
SERVER_SETTINGS: Mapping[str, str] = {
    "listen_addresses": "'127.0.0.1'",
    "wal_level": "replica",
    "max_wal_senders": "10",
    "max_replication_slots": "10",
    "hot_standby": "on",
    "max_connections": "200",
    "shared_buffers": "'64MB'",
    "wal_keep_size": "'256MB'",
    "log_line_prefix": "'%m [%p] %a: '",
    "log_connections": "off",
    "log_disconnections": "off",
    "autovacuum_naptime": "'5s'",
    # A standby whose primary restarted reconnects within this, not the default 5 s.
    "wal_retrieve_retry_interval": "'200ms'",
}
HOW_TO_PROVIDE = (
    "the serving suites start a private PostgreSQL primary and standby, and need the "
    "server programs {programs}: install the PostgreSQL server package "
    "(e.g. `apt-get install postgresql-15`, which puts them in "
    "/usr/lib/postgresql/15/bin), put `pg_config` of an installation on PATH, or set "
    "PGSEARCH_PG_BINDIR to the directory that holds them"
)


class MissingServer(RuntimeError):
    """The PostgreSQL server programs (or an account to run them) are not available."""


@dataclass(frozen=True, kw_only=True)
class Binaries:
    bindir: Path
    #: Who runs the servers; None runs them as the current (unprivileged) user.
    os_user: str | None

    def command(self, program: str, *args: str | Path) -> list[str]:
        """Argument vector running `program` as the servers' account."""
        argv = [str(self.bindir / program), *map(str, args)]
        if self.os_user is None:
            return argv
        return ["runuser", "-u", self.os_user, "--", *argv]

    def run(self, program: str, *args: str | Path, timeout: float = 120) -> str:
        done = subprocess.run(
            self.command(program, *args),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd="/",
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"{program} {' '.join(map(str, args))} exited {done.returncode}:\n"
                f"{done.stdout}{done.stderr}"
            )
        return done.stdout

    def chown(self, path: Path) -> None:
        if self.os_user is not None:
            entry = pwd.getpwnam(self.os_user)
            os.chown(path, entry.pw_uid, entry.pw_gid)


def find_binaries(environ: Mapping[str, str] | None = None) -> Binaries:
    """The server programs and the account to run them as, or `MissingServer`."""
    env = os.environ if environ is None else environ
    candidates: list[Path] = []
    if env.get("PGSEARCH_PG_BINDIR"):
        candidates.append(Path(env["PGSEARCH_PG_BINDIR"]))
    else:
        pg_config = shutil.which("pg_config")
        if pg_config:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                out = subprocess.run(
                    [pg_config, "--bindir"], capture_output=True, text=True, timeout=30
                ).stdout.strip()
                if out:
                    candidates.append(Path(out))
        candidates.append(FALLBACK_BINDIR)
    bindir = next(
        (d for d in candidates if all((d / p).is_file() for p in PROGRAMS)),
        None,
    )
    if bindir is None:
        looked = ", ".join(str(d) for d in candidates)
        raise MissingServer(
            HOW_TO_PROVIDE.format(programs=", ".join(PROGRAMS)) + f" (looked in: {looked})"
        )
    os_user: str | None = None
    if os.geteuid() == 0:
        os_user = env.get("PGSEARCH_PG_OS_USER", DEFAULT_OS_USER)
        try:
            pwd.getpwnam(os_user)
        except KeyError:
            raise MissingServer(
                f"the tests run as root, and PostgreSQL refuses to: they run the servers "
                f"as the operating-system user {os_user!r}, which does not exist; create "
                "it (`useradd --system postgres`) or name another unprivileged account "
                "in PGSEARCH_PG_OS_USER"
            ) from None
        if shutil.which("runuser") is None:
            raise MissingServer("running the servers as another user needs `runuser`")
    return Binaries(bindir=bindir, os_user=os_user)


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_ports(count: int, taken: Sequence[int] = ()) -> list[int]:
    ports = [p for p in PORT_RANGE if p not in taken and _port_is_free(p)]
    if len(ports) < count:
        raise RuntimeError(f"no {count} free loopback ports in {PORT_RANGE}")
    return random.sample(ports, count)


@dataclass(kw_only=True)
class Server:
    """One PostgreSQL server of the cluster, controlled with ``pg_ctl``."""

    name: str
    bins: Binaries
    datadir: Path
    port: int
    logfile: Path

    def dsn(self, dbname: str = "postgres", **params: str) -> str:
        return make_conninfo(
            host="127.0.0.1", port=str(self.port), user="postgres", dbname=dbname, **params
        )

    def connect(self, dbname: str = "postgres") -> psycopg.Connection[tuple[object, ...]]:
        """An autocommit admin connection (the caller closes it)."""
        return psycopg.connect(self.dsn(dbname), autocommit=True, connect_timeout=10)

    def _ctl(self, action: str, *args: str) -> None:
        self.bins.run(
            "pg_ctl",
            action,
            "-D",
            self.datadir,
            "-w",
            "-t",
            str(CTL_TIMEOUT_S),
            *args,
            timeout=CTL_TIMEOUT_S + 30,
        )

    def start(self) -> None:
        self._ctl("start", "-l", str(self.logfile))
        self.wait_ready()

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` (sessions cut, clean shutdown) or ``immediate``."""
        self._ctl("stop", "-m", mode)

    def restart(self, mode: str = "fast") -> None:
        """``pg_ctl restart``: every session is cut, the server comes back."""
        self._ctl("restart", "-m", mode, "-l", str(self.logfile))
        self.wait_ready()

    def reload(self) -> None:
        self._ctl("reload")

    def running(self) -> bool:
        done = subprocess.run(
            self.bins.command("pg_ctl", "status", "-D", self.datadir),
            capture_output=True,
            text=True,
            timeout=30,
            cwd="/",
        )
        return done.returncode == 0

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until the server accepts connections (a standby: in hot standby)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with self.connect() as conn:
                    conn.execute("SELECT 1")
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def configure(self, **settings: str) -> None:
        """Add settings to ``postgresql.conf`` (later lines win) and reload."""
        lines = "".join(f"{k} = {v}\n" for k, v in settings.items())
        with (self.datadir / "postgresql.conf").open("a", encoding="utf-8") as fh:
            fh.write(f"# set by the test harness\n{lines}")
        self.reload()

    def terminate_backends(self, dbname: str, *, application_name: str | None = None) -> int:
        """``pg_terminate_backend`` every client session of `dbname`; returns how many."""
        with self.connect() as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid() "
                "AND backend_type = 'client backend' "
                "AND (%s::text IS NULL OR application_name = %s::text)",
                (dbname, application_name, application_name),
            ).fetchall()
        return sum(1 for (ok,) in rows if ok)

    def backends(self, dbname: str) -> int:
        with self.connect() as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
                "AND pid <> pg_backend_pid() AND backend_type = 'client backend'",
                (dbname,),
            ).fetchone()
        return int(row[0]) if row else 0

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.logfile.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


@dataclass(kw_only=True)
class Cluster:
    """A primary and one streaming standby in one temporary directory."""

    bins: Binaries
    root: Path
    primary: Server
    standby: Server
    databases: list[str] = field(default_factory=list)
    closed: bool = False

    @classmethod
    def start(cls, bins: Binaries | None = None, *, tmp: Path | None = None) -> Cluster:
        bins = bins or find_binaries()
        reap_stale(tmp)
        root = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=tmp))
        (root / "owner").write_text(str(os.getpid()), encoding="utf-8")
        os.chmod(root, 0o755)
        bins.chown(root)
        primary_port, standby_port = _free_ports(2)
        primary = Server(
            name="primary",
            bins=bins,
            datadir=root / "primary",
            port=primary_port,
            logfile=root / "primary.log",
        )
        standby = Server(
            name="standby",
            bins=bins,
            datadir=root / "standby",
            port=standby_port,
            logfile=root / "standby.log",
        )
        cluster = cls(bins=bins, root=root, primary=primary, standby=standby)
        atexit.register(cluster.close)
        try:
            cluster._init_primary()
            cluster._init_standby()
        except BaseException:
            cluster.close()
            raise
        return cluster

    def _settings(self, server: Server) -> str:
        values = {**SERVER_SETTINGS, "port": str(server.port)}
        values["unix_socket_directories"] = f"'{self.root}'"
        return "".join(f"{k} = {v}\n" for k, v in values.items())

    def _start_with_retry(self, server: Server) -> None:
        """Start `server`; when its port was taken meanwhile, move to another port."""
        for _attempt in range(5):
            try:
                server.start()
                return
            except RuntimeError as exc:
                if _port_is_free(server.port):
                    raise RuntimeError(
                        f"{server.name} did not start:\n{server.log_tail()}"
                    ) from exc
                server.port = _free_ports(1, taken=(self.primary.port, self.standby.port))[0]
                with (server.datadir / "postgresql.conf").open("a", encoding="utf-8") as fh:
                    fh.write(f"port = {server.port}\n")
        raise RuntimeError(f"{server.name}: no free port to start on")

    def _init_primary(self) -> None:
        p = self.primary
        self.bins.run(
            "initdb",
            "-D",
            p.datadir,
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
            "--no-instructions",
        )
        with (p.datadir / "postgresql.conf").open("a", encoding="utf-8") as fh:
            fh.write("# set by the test harness\n" + self._settings(p))
        self._start_with_retry(p)

    def _init_standby(self) -> None:
        s = self.standby
        self.bins.run(
            "pg_basebackup",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.primary.port),
            "-U",
            "postgres",
            "-D",
            s.datadir,
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
            "-C",
            "-S",
            SLOT,
            "--no-sync",
        )
        with (s.datadir / "postgresql.conf").open("a", encoding="utf-8") as fh:
            fh.write("# the standby\n" + self._settings(s))
        self._start_with_retry(s)
        self.wait_streaming()

    # --- state -------------------------------------------------------------------

    def wait_streaming(self, timeout: float = 60.0) -> None:
        """Wait until the standby streams from the primary."""
        deadline = time.monotonic() + timeout
        while True:
            with self.primary.connect() as conn:
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'"
                ).fetchone()
            if row and row[0] > 0:
                return
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the standby does not stream after {timeout}s:\n{self.standby.log_tail()}"
                )
            time.sleep(0.1)

    def wait_for_replay(self, timeout: float = 60.0) -> str:
        """Wait until the standby has replayed all WAL the primary has written now."""
        with self.primary.connect() as conn:
            row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        assert row is not None
        lsn = str(row[0])
        deadline = time.monotonic() + timeout
        with self.standby.connect() as conn:
            while True:
                done = conn.execute(
                    "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)
                ).fetchone()
                if done and done[0]:
                    return lsn
                if time.monotonic() > deadline:
                    raise AssertionError(f"the standby has not replayed {lsn} after {timeout}s")
                time.sleep(0.02)

    def ensure_running(self) -> None:
        """Both servers up and streaming (after a test stopped one of them), the
        standby replaying."""
        for server in (self.primary, self.standby):
            if not server.running():
                server.start()
        self.wait_streaming()
        self.resume_replay()

    def pause_replay(self) -> None:
        """The standby keeps receiving WAL but stops applying it (its lag grows)."""
        with self.standby.connect() as conn:
            conn.execute("SELECT pg_wal_replay_pause()")
            deadline = time.monotonic() + 30
            while conn.execute("SELECT pg_get_wal_replay_pause_state()").fetchone() != ("paused",):
                if time.monotonic() > deadline:
                    raise AssertionError("the standby's replay did not pause")
                time.sleep(0.01)

    def resume_replay(self) -> None:
        with self.standby.connect() as conn:
            conn.execute("SELECT pg_wal_replay_resume()")

    @contextlib.contextmanager
    def cut_off(self) -> Iterator[None]:
        """The standby, still up and answering, loses its primary: its WAL receiver
        is pointed at a port nothing listens on (and not retried meanwhile), so it
        receives nothing more, has replayed all it received, and stays queryable.
        Reconnected when the block ends."""
        (dead,) = _free_ports(1, taken=[self.primary.port, self.standby.port])
        with self.standby.connect() as conn:
            original = conn.execute("SHOW primary_conninfo").fetchone()
            assert original is not None and original[0]
            conn.execute(
                "ALTER SYSTEM SET primary_conninfo = "
                + f"'host=127.0.0.1 port={dead} user=postgres connect_timeout=1'"
            )
            conn.execute("ALTER SYSTEM SET wal_retrieve_retry_interval = '1h'")
            conn.execute("SELECT pg_reload_conf()")
            deadline = time.monotonic() + 30
            while conn.execute("SELECT count(*) FROM pg_stat_wal_receiver").fetchone() != (0,):
                if time.monotonic() > deadline:
                    raise AssertionError("the standby's WAL receiver did not stop")
                time.sleep(0.05)
        try:
            yield
        finally:
            with self.standby.connect() as conn:
                conn.execute(
                    sql.SQL("ALTER SYSTEM SET primary_conninfo = {}").format(
                        sql.Literal(str(original[0]))
                    )
                )
                conn.execute("ALTER SYSTEM RESET wal_retrieve_retry_interval")
                conn.execute("SELECT pg_reload_conf()")
            self.wait_streaming()

    # --- databases ---------------------------------------------------------------

    def create_database(self, *, template: str | None = None, prefix: str = "t") -> str:
        name = f"pgsearch_serving_{prefix}_{uuid.uuid4().hex[:8]}"
        query = sql.SQL("CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(template or "template0")
        )
        with self.primary.connect() as conn:
            if template is not None:  # a template must have no other sessions
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                    (template,),
                )
            conn.execute(query)
        self.databases.append(name)
        return name

    def drop_database(self, name: str) -> None:
        assert name in self.databases, "the harness drops only databases it created"
        with self.primary.connect() as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        self.databases.remove(name)

    # --- teardown ----------------------------------------------------------------

    def close(self) -> None:
        """Stop both servers and delete their directory (idempotent)."""
        if self.closed:
            return
        self.closed = True
        for server in (self.standby, self.primary):
            if (server.datadir / "postmaster.pid").exists():
                with contextlib.suppress(Exception):
                    server.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale_roots(tmp: Path | None = None) -> Iterator[Path]:
    """Cluster directories whose creating process is gone."""
    base = Path(tmp or tempfile.gettempdir())
    for root in base.glob(f"{DIR_PREFIX}*"):
        try:
            owner = int((root / "owner").read_text(encoding="utf-8").strip())
        except (OSError, ValueError):
            continue
        if not _alive(owner):
            yield root


def reap_stale(tmp: Path | None = None, bins: Binaries | None = None) -> int:
    """Stop and delete clusters left behind by runs that died; returns how many."""
    reaped = 0
    for root in list(stale_roots(tmp)):
        for datadir in (root / "standby", root / "primary"):
            if (datadir / "postmaster.pid").exists():
                with contextlib.suppress(Exception):
                    b = bins or find_binaries()
                    b.run("pg_ctl", "stop", "-D", datadir, "-m", "immediate", "-w", timeout=60)
        shutil.rmtree(root, ignore_errors=True)
        reaped += 1
    return reaped

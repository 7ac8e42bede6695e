"""Concurrency: writers and searchers at once against one database, then a full audit.

For a bounded time (``PGSEARCH_CONCURRENCY_SECONDS``, default 20):

- 4 appender threads: two append to the *same* session, one rotates over sessions
  of its own, one writes to another workspace (same session ids there);
- a churn thread appends to short-lived sessions and forgets them again;
- a file writer keeps adding and growing session files (pgsearch's own format and
  Claude Code logs), which a library thread *and* a ``pgsearch ingest`` subprocess
  loop both ingest from the same directory, over and over;
- 8 searcher threads run queries, filters, browsing and windows.

Everything runs as a role that owns nothing, with Row Level Security binding each
transaction to its workspace, as a multi-tenant deployment runs.

Every appender checks that what it appended is searchable as soon as `append`
returns. Afterwards: no error surfaced anywhere; every appended message is stored
exactly once with consecutive seqs; every file's messages equal a sequential
ingest of the same files into a fresh workspace; forgotten sessions left nothing
behind; vocabulary and statistics equal a full recount in every workspace.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import subprocess
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgsearch import PgSearch, SessionQueryRequest, Settings
from pgsearch.errors import NotFound
from tests.helpers import assert_statistics_exact
from tests.reliability.conftest import cli_command, role_dsn

pytestmark = pytest.mark.slow

DURATION = float(os.environ.get("PGSEARCH_CONCURRENCY_SECONDS", "20"))
WS_A = "conc-a"
WS_B = "conc-b"
REFERENCE = "conc-reference"
SEARCHERS = 8
T0 = datetime(2026, 5, 1, tzinfo=UTC)
TOKEN_RE = re.compile(r"\btok\d+x\d+\b")
WORDS = [
    f"{a}{b}"
    for a in ("cron", "queue", "deploy", "parser", "index", "vault", "retry", "cache")
    for b in ("", "s", "ing", "er", "ed", "job", "key", "log")
]


class Run:
    """Shared state of one run: a stop flag, errors, and what writers acknowledged."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        #: As a multi-tenant deployment runs: a restricted role, bound per transaction.
        self.settings = Settings.from_env({}, dsn=dsn, row_level_security=True)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.errors: list[str] = []
        self.appended: dict[tuple[str, str], list[str]] = {}
        self.tokens: list[tuple[str, str, str]] = []
        self.counts: Counter[str] = Counter()

    def fail(self, who: str, detail: str) -> None:
        with self.lock:
            self.errors.append(f"{who}: {detail}")
        self.stop.set()

    def count(self, what: str, n: int = 1) -> None:
        with self.lock:
            self.counts[what] += n

    def loop(self, who: str, step: Callable[[PgSearch, random.Random], None]) -> None:
        rng = random.Random(who)
        try:
            with PgSearch.connect(settings=self.settings) as pg:
                while not self.stop.is_set():
                    step(pg, rng)
        except Exception:
            self.fail(who, traceback.format_exc())


def _text(rng: random.Random, token: str) -> str:
    return " ".join([*rng.sample(WORDS, rng.randint(4, 12)), token])


def appender(run: Run, writer: int, ws: str, sessions: list[str]) -> Callable[..., None]:
    n = 0

    def step(pg: PgSearch, rng: random.Random) -> None:
        nonlocal n
        sid = rng.choice(sessions)
        tokens = []
        messages = []
        for _ in range(rng.randint(1, 4)):
            token = f"tok{writer}x{n}"
            n += 1
            tokens.append(token)
            role = rng.choice(["user", "assistant"])
            messages.append({"role": role, "content": _text(rng, token)})
        assert pg.append(workspace=ws, session_id=sid, messages=messages) == len(messages)
        with run.lock:
            run.appended.setdefault((ws, sid), []).extend(tokens)
            run.tokens.extend((ws, sid, t) for t in tokens)
        run.count("appends")
        run.count("appended messages", len(messages))
        if n % 3 == 0:
            # Searchable as soon as append returns.
            found = pg.provider(workspace=ws).search(
                SessionQueryRequest(query=tokens[-1], per_session=False)
            )
            if not any(tokens[-1] in m.excerpt for m in found.matches):
                run.fail(f"appender {writer}", f"{tokens[-1]} not found right after append")

    return step


def churn(run: Run) -> Callable[..., None]:
    n = 0

    def step(pg: PgSearch, rng: random.Random) -> None:
        nonlocal n
        sid = f"tmp-{n}"
        n += 1
        msgs = [{"role": "user", "content": _text(rng, f"gone{n}")} for _ in range(3)]
        pg.append(workspace=WS_A, session_id=sid, messages=msgs)
        assert pg.forget(workspace=WS_A, session_id=sid) == 3
        run.count("forgotten sessions")

    return step


def searcher(run: Run, index: int) -> Callable[..., None]:
    def step(pg: PgSearch, rng: random.Random) -> None:
        with run.lock:
            known = run.tokens[-50:]
        ws, sid, token = rng.choice(known) if known else (WS_A, "shared", "cron")
        provider = pg.provider(workspace=ws)
        choice = rng.random()
        if choice < 0.1 and known:
            try:
                window = provider.around(sid, 0, before=2, after=5)
            except NotFound as exc:  # sessions that exist are never forgotten here
                run.fail(f"searcher {index}", f"around {sid}: {exc}")
                return
            assert window.messages and window.messages[0].seq == 0
        else:
            query = rng.choice(
                [token, rng.choice(WORDS), rng.choice(WORDS)[:-1] + "q", "", "cron queue", "gone"]
            )
            request = SessionQueryRequest(
                query=query,
                per_session=rng.random() < 0.5,
                kinds=rng.choice([(), ("user_text",), ("user_text", "assistant_text")]),
                session_id=rng.choice([None, None, sid]),
                since=rng.choice([None, T0 - timedelta(days=400)]),
                limit=rng.choice([5, 10, 50]),
            )
            result = provider.search(request)
            for m in result.matches:
                assert m.workspace_id == ws
            if result.next_cursor and rng.random() < 0.3:
                provider.search(
                    SessionQueryRequest(
                        query=query,
                        per_session=request.per_session,
                        kinds=request.kinds,
                        session_id=request.session_id,
                        since=request.since,
                        limit=request.limit,
                        cursor=result.next_cursor,
                    )
                )
        run.count("searches")

    return step


def _claude_line(sid: str, i: int, text: str) -> dict[str, Any]:
    kind = "user" if i % 2 == 0 else "assistant"
    content: Any = text if kind == "user" else [{"type": "text", "text": text}]
    return {
        "type": kind,
        "sessionId": sid,
        "uuid": f"{sid}-{i}",
        "timestamp": (T0 + timedelta(seconds=i)).isoformat(),
        "message": {"role": kind, "content": content},
    }


def file_writer(run: Run, folder: Path) -> Callable[..., None]:
    sizes: dict[Path, int] = {}
    n = 0

    def step(pg: PgSearch, rng: random.Random) -> None:
        nonlocal n
        if not sizes or (len(sizes) < 40 and rng.random() < 0.4):
            fmt = rng.choice(["openai", "claude"])
            path = folder / f"{fmt}-file-{n}.jsonl"
            n += 1
            sizes[path] = 0
        else:
            path = rng.choice(list(sizes))
        start = sizes[path]
        lines = []
        for i in range(start, start + rng.randint(1, 30)):
            text = _text(rng, f"line{i}of{path.stem.replace('-', '')}")
            if path.name.startswith("claude"):
                lines.append(json.dumps(_claude_line(path.stem, i, text)))
            else:
                role = rng.choice(["user", "assistant"])
                lines.append(json.dumps({"role": role, "content": text}))
        sizes[path] = start + len(lines)
        # Readers see the old file or the new one, never a half-written line.
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        tmp = path.with_suffix(".tmp")
        tmp.write_text(old + "".join(f"{line}\n" for line in lines), encoding="utf-8")
        os.replace(tmp, path)
        run.count("file writes")
        time.sleep(0.05)

    return step


def ingester(run: Run, folder: Path) -> Callable[..., None]:
    def step(pg: PgSearch, rng: random.Random) -> None:
        report = pg.ingest_paths([folder], workspace=WS_A)
        if report.errors:
            run.fail("ingester", "; ".join(str(e) for e in report.errors))
        run.count("library ingests")

    return step


def cli_ingester(run: Run, folder: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGSEARCH_")}
    env["PGSEARCH_RLS"] = "on"
    try:
        while not run.stop.is_set():
            done = subprocess.run(
                cli_command(run.dsn, "ingest", "-w", WS_A, "-q", str(folder)),
                capture_output=True,
                text=True,
                env=env,
                timeout=120,
            )
            if done.returncode != 0 or "Traceback" in done.stderr:
                run.fail("cli ingester", f"exit {done.returncode}: {done.stderr}")
            run.count("cli ingests")
    except Exception:
        run.fail("cli ingester", traceback.format_exc())


class RetryLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.retries: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("retrying"):
            self.retries.append(record.getMessage())


@pytest.fixture
def retry_log() -> Iterator[RetryLog]:
    handler = RetryLog()
    logger = logging.getLogger("pgsearch.db.driver")
    old = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(old)


def _rows(conn: psycopg.Connection[Any], ws: str, sessions: list[str]) -> set[tuple[Any, ...]]:
    return set(
        conn.execute(
            "SELECT session_id, seq, kind, role, content FROM messages "
            "WHERE workspace_id = %s AND session_id = ANY(%s)",
            (ws, sessions),
        ).fetchall()
    )


def test_writers_and_searchers_at_once_lose_nothing(
    dsn: str, app_role: str, tmp_path: Path, retry_log: RetryLog
) -> None:
    run = Run(role_dsn(dsn, app_role))
    folder = tmp_path / "sessions"
    folder.mkdir()
    with PgSearch.connect(settings=run.settings) as pg:  # something to search at once
        pg.append(
            workspace=WS_A, session_id="shared", messages=[{"role": "user", "content": "cron"}]
        )
        run.appended[(WS_A, "shared")] = []
    actors: list[tuple[str, Callable[[], None]]] = [
        ("appender 0", lambda: run.loop("appender 0", appender(run, 0, WS_A, ["shared"]))),
        ("appender 1", lambda: run.loop("appender 1", appender(run, 1, WS_A, ["shared"]))),
        (
            "appender 2",
            lambda: run.loop("appender 2", appender(run, 2, WS_A, [f"own-{i}" for i in range(4)])),
        ),
        (
            "appender 3",
            lambda: run.loop("appender 3", appender(run, 3, WS_B, ["shared", "own-0"])),
        ),
        ("churn", lambda: run.loop("churn", churn(run))),
        ("file writer", lambda: run.loop("file writer", file_writer(run, folder))),
        ("ingester", lambda: run.loop("ingester", ingester(run, folder))),
        ("cli ingester", lambda: cli_ingester(run, folder)),
    ]
    actors += [
        (f"searcher {i}", lambda i=i: run.loop(f"searcher {i}", searcher(run, i)))
        for i in range(SEARCHERS)
    ]
    threads = [threading.Thread(target=fn, name=name, daemon=True) for name, fn in actors]
    started = time.monotonic()
    for t in threads:
        t.start()
    run.stop.wait(DURATION)
    # Every kind of actor must have overlapped the others a few times; on a loaded
    # machine a CLI process alone can take seconds to start, so the run goes on (bounded)
    # until each reached its minimum, rather than asserting a rate.
    minimums = {"searches": 101, "appends": 51, "library ingests": 3, "cli ingests": 2}
    deadline = time.monotonic() + 180
    while not run.errors and time.monotonic() < deadline:
        if all(run.counts[name] >= least for name, least in minimums.items()):
            break
        time.sleep(0.2)
    run.stop.set()
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), f"{t.name} did not stop"
    elapsed = time.monotonic() - started
    print(
        f"concurrency: {elapsed:.1f}s, {len(actors) - SEARCHERS} writers, {SEARCHERS} searchers, "
        f"{dict(run.counts)}, {len(retry_log.retries)} retried transactions"
    )
    assert run.errors == [], "\n".join(run.errors)
    assert run.counts["searches"] > 100 and run.counts["appends"] > 50, run.counts
    assert run.counts["library ingests"] >= 3 and run.counts["cli ingests"] >= 2, run.counts

    # Everything written so far, once more in one pass, and the same files into a
    # fresh workspace one at a time: the two must hold exactly the same messages.
    with PgSearch.connect(settings=run.settings) as pg:
        assert not pg.ingest_paths([folder], workspace=WS_A).errors
        for path in sorted(folder.glob("*.jsonl")):
            pg.ingest_file(path, workspace=REFERENCE)
    file_sessions = sorted(p.stem for p in folder.glob("*.jsonl"))
    with psycopg.connect(dsn) as conn:
        assert _rows(conn, WS_A, file_sessions) == _rows(conn, REFERENCE, file_sessions)
        for (ws, sid), tokens in run.appended.items():
            rows = conn.execute(
                "SELECT seq, content FROM messages WHERE workspace_id = %s AND session_id = %s "
                "ORDER BY seq",
                (ws, sid),
            ).fetchall()
            assert [r[0] for r in rows] == list(range(len(rows))), f"seq gap in {ws}/{sid}"
            stored = [t for _, content in rows for t in TOKEN_RE.findall(content)]
            assert Counter(stored) == Counter(tokens), f"lost or duplicated in {ws}/{sid}"
        left = conn.execute(
            "SELECT count(*) FROM sessions WHERE workspace_id = %s AND session_id LIKE 'tmp-%%'",
            (WS_A,),
        ).fetchone()
        assert left == (0,)
    for ws in (WS_A, WS_B, REFERENCE):
        assert_statistics_exact(dsn, ws)


def _wait_until_blocked(dsn: str, count: int, timeout: float = 20.0) -> None:
    """Wait until `count` sessions of this database wait on a heavyweight lock."""
    name = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
                "AND wait_event_type = 'Lock'",
                (name,),
            ).fetchone()
            if row is not None and row[0] >= count:
                return
            assert time.monotonic() < deadline, "the writers never blocked"
            time.sleep(0.02)


@pytest.mark.parametrize("fmt", ["openai", "claude"])
def test_two_ingests_of_one_new_file_store_it_once(dsn: str, tmp_path: Path, fmt: str) -> None:
    """Two processes ingesting the same new file at the same moment.

    The first is held just before it commits (a lock on the statistics table); the
    second starts while the first's rows are uncommitted. Agent logs get their seqs
    from the session, so without serialising writers of a file the second would
    append the whole file again after the first.
    """
    path = tmp_path / f"{fmt}-race.jsonl"
    lines = [
        _claude_line(path.stem, i, f"race line {i}")
        if fmt == "claude"
        else {"role": "user", "content": f"race line {i}"}
        for i in range(6)
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    errors: list[str] = []

    def ingest() -> None:
        try:
            with PgSearch.connect(dsn) as pg:
                pg.ingest_file(path, workspace=WS_A)
        except Exception:
            errors.append(traceback.format_exc())

    with psycopg.connect(dsn) as blocker:
        blocker.execute("LOCK TABLE workspace_stats IN EXCLUSIVE MODE")
        first = threading.Thread(target=ingest)
        first.start()
        _wait_until_blocked(dsn, 1)
        second = threading.Thread(target=ingest)
        second.start()
        _wait_until_blocked(dsn, 2)
        blocker.rollback()
    first.join(60)
    second.join(60)
    assert errors == []
    with psycopg.connect(dsn) as conn:
        seqs = [
            r[0]
            for r in conn.execute(
                "SELECT seq FROM messages WHERE workspace_id = %s AND session_id = %s ORDER BY seq",
                (WS_A, path.stem),
            ).fetchall()
        ]
    assert seqs == list(range(len(lines)))
    assert_statistics_exact(dsn, WS_A)


def test_a_deadlock_victim_is_retried_and_lands_once(dsn: str, retry_log: RetryLog) -> None:
    """Postgres aborts a write caught in a deadlock; the library runs it again.

    Another session locks a vocabulary row the append needs, waits until the append
    holds its session lock and blocks on that row, then asks for the session lock
    itself. The other session waits far longer than the server's deadlock timeout,
    so the append's transaction is the one chosen as the victim.
    """
    with PgSearch.connect(dsn) as pg:
        pg.append(workspace=WS_A, session_id="s", messages=[{"role": "user", "content": "zebra"}])
    done: list[int] = []
    errors: list[str] = []

    def append() -> None:
        try:
            with PgSearch.connect(dsn) as pg:
                done.append(
                    pg.append(
                        workspace=WS_A,
                        session_id="s",
                        messages=[{"role": "user", "content": "zebra crossing"}],
                    )
                )
        except Exception:
            errors.append(traceback.format_exc())

    with psycopg.connect(dsn) as other:
        other.execute("SET deadlock_timeout = '30s'")
        other.execute(
            "SELECT 1 FROM vocabulary WHERE workspace_id = %s AND term = 'zebra' FOR UPDATE",
            (WS_A,),
        )
        writer = threading.Thread(target=append)
        writer.start()
        _wait_until_blocked(dsn, 1)
        other.execute(
            "SELECT 1 FROM sessions WHERE workspace_id = %s AND session_id = 's' FOR UPDATE",
            (WS_A,),
        )
        other.rollback()
    writer.join(60)
    assert errors == [] and done == [1]
    assert len(retry_log.retries) == 1 and "deadlock" in retry_log.retries[0]
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT seq, content FROM messages WHERE workspace_id = %s AND session_id = 's' "
            "ORDER BY seq",
            (WS_A,),
        ).fetchall()
    assert rows == [(0, "zebra"), (1, "zebra crossing")]
    assert_statistics_exact(dsn, WS_A)


def test_retries_only_what_postgres_asks_for(dsn: str) -> None:
    from psycopg import errors as pg_errors

    from pgsearch import StoreError
    from pgsearch.db.driver import RETRY_ATTEMPTS, Driver, DriverConfig
    from pgsearch.db.work import Statement, Unit, Work, execute, savepoint
    from pgsearch.errors import OutcomeUnknown, StoreUnavailable

    driver = Driver.open(dsn, DriverConfig(pool_max=1, retry_seconds=0))
    calls: list[str] = []

    def failing(cause: Exception, kind: type[StoreError] = StoreError) -> Callable[[], Work[None]]:
        def work() -> Work[None]:
            calls.append(type(cause).__name__)
            raise kind("boom") from cause
            yield  # a unit of work is a generator

        return work

    def run(work: Callable[[], Work[None]], *, idempotent: bool = False) -> None:
        driver.run(
            Unit(work=work, workspace=WS_A, write=True, idempotent=idempotent, context="failing")
        )

    try:
        for cause in (pg_errors.UniqueViolation(), RuntimeError()):
            calls.clear()
            with pytest.raises(StoreError):
                run(failing(cause))
            assert len(calls) == 1, "only deadlocks and serialization failures are retried"
        for cause in (pg_errors.DeadlockDetected(), pg_errors.SerializationFailure()):
            calls.clear()
            with pytest.raises(StoreError):
                run(failing(cause))
            assert len(calls) == RETRY_ATTEMPTS, "a transient failure is retried, within bounds"
        # A lost connection before COMMIT is retried; after COMMIT was sent it is not.
        calls.clear()
        with pytest.raises(StoreUnavailable):
            run(failing(pg_errors.AdminShutdown(), StoreUnavailable))
        assert len(calls) == RETRY_ATTEMPTS
        calls.clear()
        with pytest.raises(OutcomeUnknown):
            run(failing(pg_errors.AdminShutdown(), OutcomeUnknown))
        assert len(calls) == 1
        # ... unless the unit is idempotent (an append, whose messages carry keys).
        calls.clear()
        with pytest.raises(OutcomeUnknown):
            run(failing(pg_errors.AdminShutdown(), OutcomeUnknown), idempotent=True)
        assert len(calls) == RETRY_ATTEMPTS
        # A store that stays unreachable is tried for the retry period, then reported.
        patient = Driver.open(dsn, DriverConfig(pool_max=1, retry_seconds=2.0))
        try:
            calls.clear()
            began = time.monotonic()
            with pytest.raises(StoreUnavailable):
                patient.run(
                    Unit(
                        work=failing(pg_errors.AdminShutdown(), StoreUnavailable),
                        workspace=WS_A,
                        write=True,
                        context="failing",
                    )
                )
            took = time.monotonic() - began
            assert len(calls) > RETRY_ATTEMPTS and 2.0 <= took < 2.5, took
            calls.clear()
            with pytest.raises(StoreError):
                patient.run(
                    Unit(
                        work=failing(pg_errors.DeadlockDetected()),
                        workspace=WS_A,
                        write=True,
                        context="failing",
                    )
                )
            assert len(calls) == RETRY_ATTEMPTS, "transient failures keep their attempts"
        finally:
            patient.close()
        # Inside a transaction nothing is retried on its own: a failure in a savepoint
        # reruns the whole unit from its start, and no attempt leaves anything behind.
        calls.clear()
        planted = Statement(
            "raw",
            "INSERT INTO sessions (workspace_id, session_id) VALUES (%(ws)s, 'retried')",
            {"ws": WS_A},
        )

        def partly_done() -> Work[None]:
            calls.append("unit")
            yield from execute(planted)
            yield from savepoint(failing(pg_errors.DeadlockDetected())())

        with pytest.raises(StoreError):
            run(partly_done)
        assert calls == ["unit", "DeadlockDetected"] * RETRY_ATTEMPTS
        with psycopg.connect(dsn) as conn:
            left = conn.execute(
                "SELECT count(*) FROM sessions WHERE workspace_id = %s AND session_id = 'retried'",
                (WS_A,),
            ).fetchone()
        assert left == (0,)
    finally:
        driver.close()


def test_a_rewrite_and_an_append_take_vocabulary_locks_in_one_order(
    dsn: str, tmp_path: Path, retry_log: RetryLog
) -> None:
    """A transaction that both removes and adds terms (a rewritten agent log) must
    lock vocabulary rows in one sorted pass, like every other writer; two passes
    (additions, then removals) can deadlock against an append that needs both."""
    path = tmp_path / "rewritten.jsonl"

    def write(word: str) -> None:
        lines = [_claude_line(path.stem, i, f"{word} line {i}") for i in range(3)]
        path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")

    write("aardvark")
    with PgSearch.connect(dsn) as pg:
        pg.ingest_file(path, workspace=WS_A)
        pg.append(workspace=WS_A, session_id="z", messages=[{"role": "user", "content": "zulu"}])
    write("zulu")  # a rewrite: `aardvark` goes, `zulu` comes
    errors: list[str] = []

    def run(work: Callable[[PgSearch], object]) -> Callable[[], None]:
        def target() -> None:
            try:
                with PgSearch.connect(dsn) as pg:
                    work(pg)
            except Exception:
                errors.append(traceback.format_exc())

        return target

    rewrite = threading.Thread(target=run(lambda pg: pg.ingest_file(path, workspace=WS_A)))
    append = threading.Thread(
        target=run(
            lambda pg: pg.append(
                workspace=WS_A,
                session_id="other",
                messages=[{"role": "user", "content": "aardvark zulu"}],
            )
        )
    )
    with psycopg.connect(dsn) as other:
        other.execute(
            "SELECT 1 FROM vocabulary WHERE workspace_id = %s AND term = 'zulu' FOR UPDATE",
            (WS_A,),
        )
        rewrite.start()
        _wait_until_blocked(dsn, 1)
        append.start()
        _wait_until_blocked(dsn, 2)
        other.rollback()
    rewrite.join(60)
    append.join(60)
    assert errors == []
    assert retry_log.retries == []
    assert_statistics_exact(dsn, WS_A)

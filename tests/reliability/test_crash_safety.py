"""Crash safety: ``kill -9`` an ingest at random points, again and again.

A few large session files (pgsearch's own format and Claude Code logs) are ingested
by ``pgsearch ingest`` as a subprocess, which is killed with SIGKILL at a random
moment of its run; between some runs the files grow. After every kill, each file
must be either fully in (as of some version of it) or fully out, its record must
agree, and vocabulary and statistics must equal a full recount. A final run
completes the work, and one more run changes nothing.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.helpers import assert_statistics_exact
from tests.reliability.conftest import cli, cli_command, snapshot, wait_for_other_backends

pytestmark = pytest.mark.slow

WS = "crash"
KILLS = int(os.environ.get("PGSEARCH_CRASH_KILLS", "10"))
T0 = datetime(2026, 2, 1, tzinfo=UTC)
WORDS = [f"{a}{b}" for a in ("alpha", "bravo", "delta", "omega", "sigma") for b in range(40)]


def _lines(fmt: str, sid: str, start: int, count: int, rng: random.Random) -> str:
    out = []
    for i in range(start, start + count):
        text = " ".join(rng.choices(WORDS, k=rng.randint(5, 30))) + f" {sid}n{i}"
        when = (T0 + timedelta(seconds=i)).isoformat()
        if fmt == "claude":
            kind = "user" if i % 2 == 0 else "assistant"
            content: Any = text if kind == "user" else [{"type": "text", "text": text}]
            obj: dict[str, Any] = {
                "type": kind,
                "sessionId": sid,
                "uuid": f"{sid}-{i}",
                "timestamp": when,
                "message": {"role": kind, "content": content},
            }
        else:
            obj = {"role": rng.choice(["user", "assistant"]), "content": text, "created_at": when}
        out.append(json.dumps(obj) + "\n")
    return "".join(out)


class Files:
    """The session files, and every message count each has had (its versions)."""

    def __init__(self, folder: Path, rng: random.Random) -> None:
        self.folder = folder
        self.rng = rng
        self.versions: dict[str, list[int]] = {}
        self.formats: dict[str, str] = {}
        for i, (fmt, lines) in enumerate(
            [
                ("openai", 5000),
                ("openai", 4000),
                ("openai", 1500),
                ("claude", 4000),
                ("claude", 2000),
            ]
        ):
            sid = f"{fmt}-{i}"
            self.formats[sid] = fmt
            self.versions[sid] = []
            self.grow(sid, lines)

    def path(self, sid: str) -> Path:
        return self.folder / f"{sid}.jsonl"

    def grow(self, sid: str, lines: int) -> None:
        done = self.versions[sid][-1] if self.versions[sid] else 0
        with self.path(sid).open("a", encoding="utf-8") as fh:
            fh.write(_lines(self.formats[sid], sid, done, lines, self.rng))
        self.versions[sid].append(done + lines)


def stored_counts(dsn: str) -> tuple[dict[str, int], dict[str, int]]:
    """Messages per session, and lines recorded per file, as committed."""
    with psycopg.connect(dsn) as conn, conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        counts = dict(
            conn.execute(
                "SELECT session_id, count(*) FROM messages WHERE workspace_id = %s GROUP BY 1",
                (WS,),
            ).fetchall()
        )
        records = {
            Path(path).stem: int(lines)
            for path, lines in conn.execute(
                "SELECT path, lines FROM ingested_files WHERE workspace_id = %s", (WS,)
            ).fetchall()
        }
    return counts, records


def check_all_or_nothing(dsn: str, files: Files) -> dict[str, int]:
    counts, records = stored_counts(dsn)
    for sid, versions in files.versions.items():
        have = counts.get(sid, 0)
        assert have == 0 or have in versions, f"{sid}: {have} messages, versions {versions}"
        # The record says how many lines were consumed: exactly what is stored.
        assert records.get(sid, 0) == have, f"{sid}: record {records.get(sid)} vs {have} stored"
    assert_statistics_exact(dsn, WS)
    return counts


def _writing(dsn: str) -> bool:
    """Whether a pgsearch session of this database is inside a transaction."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = 'pgsearch' AND xact_start IS NOT NULL"
        ).fetchone()
    return row is not None and row[0] > 0


def _run_and_kill(dsn: str, folder: Path, delay: float) -> float | None:
    """Start an ingest; once it has begun writing, SIGKILL it `delay` seconds later.

    Returns when the kill came (seconds after the start), or None if the run ended
    first (it must then have succeeded).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGSEARCH_")}
    started = time.monotonic()
    proc = subprocess.Popen(
        cli_command(dsn, "ingest", "-w", WS, "-q", str(folder)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        while proc.poll() is None and not _writing(dsn):
            time.sleep(0.01)
        proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        return time.monotonic() - started
    finally:
        if proc.stderr is not None:
            err = proc.stderr.read().decode("utf-8", "replace")
            proc.stderr.close()
    assert proc.returncode == 0, err
    return None


def test_kill_minus_nine_mid_ingest_leaves_each_file_all_or_nothing(
    dsn: str, tmp_path: Path
) -> None:
    rng = random.Random(int(os.environ.get("PGSEARCH_CRASH_SEED", "20261130")))
    # How long a run takes to start (imports) and to finish, to aim the kills at
    # the part of the run that writes.
    started = time.monotonic()
    assert cli("--version", dsn=dsn).returncode == 0
    startup = time.monotonic() - started
    calibrate = tmp_path / "calibrate"
    calibrate.mkdir()
    Files(calibrate, random.Random(1))
    started = time.monotonic()
    assert cli("ingest", "-w", "calibration", "-q", str(calibrate), dsn=dsn).returncode == 0
    full = time.monotonic() - started

    folder = tmp_path / "sessions"
    folder.mkdir()
    files = Files(folder, rng)
    per_line = (full - startup) / sum(v[-1] for v in files.versions.values())
    kills: list[float] = []
    partial_states = 0
    in_transaction = 0
    rolled_back = 0
    counts: dict[str, int] = {}
    round_ = 0

    # At least KILLS runs; more (bounded) until most were killed and one is seen to die
    # inside the work: on a busy machine the aim taken from the calibration run can
    # land before writing began or after the run finished.
    def enough() -> bool:
        return len(kills) >= KILLS // 2 and in_transaction + partial_states + rolled_back >= 1

    while round_ < KILLS or (not enough() and round_ < 3 * KILLS):
        if round_:  # the files grow between runs, so every run has work to do
            for sid in rng.sample(sorted(files.versions), 2):
                files.grow(sid, rng.randint(200, 3000))
        # Aim at the part of this run that writes: after its first transaction
        # began, before the end of the work left (what is not stored yet).
        left = sum(v[-1] - counts.get(s, 0) for s, v in files.versions.items())
        killed = _run_and_kill(dsn, folder, rng.uniform(0.0, 1.1) * per_line * left)
        if killed is not None:
            kills.append(round(killed, 2))
        in_transaction += wait_for_other_backends(dsn) > 0
        previous = counts
        counts = check_all_or_nothing(dsn, files)
        complete = all(counts.get(s, 0) == v[-1] for s, v in files.versions.items())
        if counts != previous and not complete:
            partial_states += 1  # this run got some files in, then died
        elif killed is not None and not complete:
            # Killed after its transaction began, and nothing of it stayed: it died
            # inside that transaction (a coordinator may close its session too soon
            # for the open transaction to be seen afterwards).
            rolled_back += 1
        round_ += 1

    result = cli("ingest", "-w", WS, "-q", str(folder), dsn=dsn)
    assert result.returncode == 0, result.stderr
    counts = check_all_or_nothing(dsn, files)
    assert counts == {sid: v[-1] for sid, v in files.versions.items()}
    before = snapshot(dsn)
    again = cli("ingest", "-w", WS, "-q", str(folder), dsn=dsn)
    assert again.returncode == 0 and " 0 messages" in again.stdout, again.stdout
    assert snapshot(dsn) == before
    print(
        f"crash safety: start-up {startup:.2f}s, full run {full:.2f}s, "
        f"{len(kills)} kills at {kills}s ({in_transaction} caught a transaction open), "
        f"{partial_states} kills left some files in and some out, "
        f"{rolled_back} rolled a run back whole"
    )
    assert len(kills) >= KILLS // 2, "most runs must be killed while working"
    # Every kill came after the run began writing; some must be seen to land inside
    # the work (a transaction open, or some files in and others not yet).
    assert in_transaction + partial_states + rolled_back >= 1, (
        in_transaction,
        partial_states,
        rolled_back,
    )

"""`pgsearch forget`, `ingest --watch`, `--include-forgotten` and `--relocate` as a
user runs them (subprocesses against a real PostgreSQL)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from pgsearch import PgSearch
from tests.acceptance.test_cli import ok, pgsearch
from tests.helpers import write_jsonl


def _counts(pg: PgSearch) -> dict[str, int]:
    return {s.session_id: s.message_count for s in pg.sessions(workspace="w")}


def test_watch_does_not_bring_a_forgotten_session_back(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    regret = write_jsonl(logs / "regret.jsonl", [{"role": "user", "content": "a secret plan"}])
    other = write_jsonl(logs / "other.jsonl", [{"role": "user", "content": "plain"}])
    ok(pgsearch("ingest", "-w", "w", str(logs), dsn=dsn))
    assert "forgot session 'regret'" in ok(
        pgsearch("forget", "-w", "w", "--session", "regret", dsn=dsn)
    )
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "pgsearch", "--dsn", dsn),
            *("ingest", "-w", "w", "--watch", "--interval", "0.1", str(logs)),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.0)
        with regret.open("a") as fh:
            fh.write('{"role": "user", "content": "more of the plan"}\n')
        with other.open("a") as fh:
            fh.write('{"role": "user", "content": "more plain"}\n')
        deadline = time.monotonic() + 30
        while _counts(pg).get("other") != 2:
            assert time.monotonic() < deadline, "the watcher did not ingest the growth"
            time.sleep(0.1)
        time.sleep(0.5)  # a few more polls over the forgotten session's file
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert _counts(pg) == {"other": 2}
    assert "regret" not in out
    again = ok(pgsearch("ingest", "-w", "w", str(logs), dsn=dsn))
    assert _counts(pg) == {"other": 2} and "2 files (2 unchanged)" in again
    back = ok(pgsearch("ingest", "-w", "w", "--include-forgotten", str(logs), dsn=dsn))
    assert "1 forgotten sessions brought back" in back
    assert _counts(pg) == {"other": 2, "regret": 2}


def test_relocate_then_ingest_the_new_place(pg: PgSearch, dsn: str, tmp_path: Path) -> None:
    old = tmp_path / "old"
    old.mkdir()
    log = write_jsonl(old / "s.jsonl", [{"role": "user", "content": "before the move"}])
    ok(pgsearch("ingest", "-w", "w", str(old), dsn=dsn))
    new = tmp_path / "new"
    old.rename(new)
    log = new / log.name
    log.write_text('{"role": "user", "content": "edited after the move"}\n', encoding="utf-8")
    result = pgsearch("ingest", "-w", "w", "--relocate", str(old), str(new), dsn=dsn)
    ok(result)
    assert f"relocated 1 files from {old} to {new}" in result.stderr
    assert _counts(pg) == {"s": 1}
    window = pg.session_messages(workspace="w", session_id="s")
    assert [m.content for m in window.messages] == ["edited after the move"]
    bare = tmp_path / "bare"
    bare.mkdir()
    unset = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "XDG_DATA_HOME")
    env = {"HOME": str(bare), **dict.fromkeys(unset, "")}
    missing = pgsearch("ingest", "-w", "w", dsn=dsn, env=env)
    assert missing.returncode == 1 and "give the session files" in missing.stderr

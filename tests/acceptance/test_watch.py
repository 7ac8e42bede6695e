"""`pgsearch ingest --watch` as a user runs it: grows, rewrites, Ctrl-C with a summary."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pgsearch import PgSearch, SessionQueryRequest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CLAUDE = FIXTURES / "claude-code" / "3f7c1a52-8d4e-4b8a-9c1e-2a6d5f0b7e91.jsonl"
CODEX = (
    FIXTURES / "codex" / "rollout-2025-09-14T10-21-07-0199a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b.jsonl"
)


def eventually(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting for the watcher"
        time.sleep(0.1)


def test_watch_follows_growing_logs_and_stops_cleanly(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    projects = tmp_path / "projects"
    projects.mkdir()
    lines = CLAUDE.read_text(encoding="utf-8").splitlines(keepends=True)
    log = projects / CLAUDE.name
    log.write_text("".join(lines[:3]), encoding="utf-8")
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "pgsearch", "--dsn", dsn),
            *("ingest", "-w", "w", "--watch", "--interval", "0.1", str(projects)),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        provider = pg.provider(workspace="w")

        def found(query: str, kind: str = "user_text") -> bool:
            request = SessionQueryRequest(query=query, kinds=(kind,))
            return bool(provider.search(request).matches)

        eventually(lambda: found("rounding difference"))
        with log.open("a", encoding="utf-8") as fh:  # the agent writes on
            fh.write("".join(lines[3:10]))
        eventually(lambda: found("AssertionError", "tool_error"))
        (projects / "later").mkdir()  # a session started after the watch
        (projects / "later" / CODEX.name).write_bytes(CODEX.read_bytes())
        eventually(lambda: found("migration order"))
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    # The first three lines: a summary (a title, not an entry), the caveat, a prompt.
    assert f"{log}: +2 messages [workspace w]" in out
    assert f"{CODEX.name}: +14 messages [workspace w]" in out
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("stopped: ")
    assert "2 files," in summary and "22 messages added, 0 rewritten, 0 errors" in summary
    assert [s.message_count for s in pg.sessions(workspace="w")] == [14, 8]


def test_watch_with_no_path_watches_every_default_location(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    projects = home / ".claude" / "projects" / "-work-app"
    projects.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGSEARCH_")}
    env.update(HOME=str(home), CLAUDE_CONFIG_DIR="", CODEX_HOME="", XDG_DATA_HOME="")
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "pgsearch", "--dsn", dsn),
            *("ingest", "-w", "w", "--watch", "--interval", "0.1"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        (projects / CLAUDE.name).write_bytes(CLAUDE.read_bytes())  # a session begins
        provider = pg.provider(workspace="w")
        eventually(
            lambda: bool(provider.search(SessionQueryRequest(query="rounding difference")).matches)
        )
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "found Claude Code logs: ~/.claude/projects" in err

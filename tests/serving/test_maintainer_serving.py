"""The term lists' background maintainer in the running servers (`pgsearch.maintainer`).

``pgsearch serve`` and ``pgsearch mcp`` run as subprocesses against the private
primary with a short interval: messages appended behind their back are folded into
the lists by the server itself, which `stats` then shows (no lag). The primary is
stopped under the HTTP server for a while: its rounds fail, say so, and the next one
after the restart catches up. On a standby the maintainer writes nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
import requests

from pgsearch import PgSearch, Settings
from pgsearch.aio import AsyncPgSearch
from tests.serving.conftest import Nodes

WORDS = ["deploy", "cron", "parser", "cluster", "ingress", "kraken", "lock"]
MAINTAIN_ENV = {
    "PGSEARCH_MAINTAIN_INTERVAL": "0.5",
    "PGSEARCH_MAINTAIN_BEHIND": "1",
    # A round that cannot reach the database gives up soon, and says so.
    "PGSEARCH_RETRY_SECONDS": "1",
    "PGSEARCH_POOL_TIMEOUT": "1",
}


def _append(dsn: str, ws: str, n: int, *, prefix: str, seed: int) -> None:
    rng = random.Random(seed)
    with PgSearch.connect(dsn) as pg:
        for s in range(0, n, 100):
            messages = [
                {"role": "user", "content": " ".join(rng.choices(WORDS, k=rng.randint(2, 9)))}
                for _ in range(min(100, n - s))
            ]
            pg.append(workspace=ws, session_id=f"{prefix}{s}", messages=messages)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGSEARCH_")}
    return {**env, **MAINTAIN_ENV, **extra}


def _wait_for(
    check: Callable[[], bool], what: str, shown: Callable[[], str], timeout: float = 60.0
) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{shown()}"
        time.sleep(0.2)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_keeps_the_lists_current_across_a_database_outage(nodes: Nodes) -> None:
    ws = "served"
    dsn = nodes.primary_dsn
    _append(dsn, ws, 600, prefix="s", seed=1)
    with PgSearch.connect(dsn) as pg:
        secret = pg.create_token(workspace=ws).secret
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = tempfile.TemporaryFile(mode="w+", encoding="utf-8")
    # Lists read by searches: the server builds the workspace's first ones too.
    server = subprocess.Popen(
        [sys.executable, "-m", "pgsearch", "-v", "--dsn", dsn, "serve", "--port", str(port)],
        env=_env(PGSEARCH_IMPACT_LISTS="on"),
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )

    def output() -> str:
        log.seek(0)
        return log.read()

    def stats() -> dict[str, Any]:
        answer = requests.get(
            url + "/v1/stats", headers={"Authorization": f"Bearer {secret}"}, timeout=10
        )
        answer.raise_for_status()
        return dict(answer.json())

    def current(after: str | None = None) -> Callable[[], bool]:
        def check() -> bool:
            try:
                s = stats()
            except requests.RequestException:
                return False
            return (
                s["lists_built_at"] is not None
                and s["lists_built_at"] != after
                and s["lists_behind"] == 0
                and s["listed_terms"] > 0
            )

        return check

    try:
        _wait_for(current(), "the first build", output)
        first = stats()
        assert first["messages"] == 600

        nodes.primary.stop()
        time.sleep(5)  # a few rounds meet no database
        nodes.primary.start()
        _append(dsn, ws, 150, prefix="more", seed=2)
        _wait_for(current(first["lists_built_at"]), "the rebuild after the outage", output)
        again = stats()
        assert again["messages"] == 750 and again["lists_behind"] == 0
        assert server.poll() is None, output()
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGINT)
        code = server.wait(timeout=30)
    printed = output()
    log.close()
    assert code in (0, 130), printed  # 130: stopped by Ctrl-C, as a person stops it
    assert "term list maintainer: stopped" in printed, printed
    assert printed.count(f"rebuilt workspace '{ws}'") >= 2, printed
    assert "round failed, retried next round" in printed, printed
    assert "Traceback" not in printed, printed


def test_mcp_keeps_the_lists_current(nodes: Nodes, tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import ClientSession, StdioServerParameters, stdio_client

    ws = "agent"
    dsn = nodes.primary_dsn
    _append(dsn, ws, 600, prefix="s", seed=3)
    with PgSearch.connect(dsn) as pg:
        pg.maintain(workspace=ws)  # lists off for reading: kept once someone built them
        built = pg.stats(workspace=ws).lists_built_at
    errlog = tmp_path / "server.log"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pgsearch", "-v", "mcp", "--dsn", dsn, "-w", ws],
        env=_env(),
    )

    def cli_stats() -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-m", "pgsearch", "--dsn", dsn, "stats", "-w", ws, "--json"],
            env=_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout)["workspaces"][0])

    async def main() -> dict[str, Any]:
        with errlog.open("w") as err, anyio.fail_after(180):
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as client:
                    await client.initialize()
                    await anyio.to_thread.run_sync(
                        lambda: _append(dsn, ws, 120, prefix="more", seed=4)
                    )
                    behind = await anyio.to_thread.run_sync(cli_stats)
                    deadline = time.monotonic() + 60
                    while behind["lists_built_at"] == built.isoformat() or behind["lists_behind"]:
                        assert time.monotonic() < deadline, behind
                        await anyio.sleep(0.3)
                        behind = await anyio.to_thread.run_sync(cli_stats)
                    found = await client.call_tool("session_search", {"query": "kraken"})
                    assert not found.is_error
                    return behind

    shown = anyio.run(main)
    assert shown["messages"] == 720 and shown["lists_behind"] == 0 and shown["listed_terms"] > 0
    printed = errlog.read_text(errors="replace")
    assert f"rebuilt workspace '{ws}'" in printed, printed
    assert "term list maintainer: stopped" in printed, printed
    assert "Traceback" not in printed, printed


def test_the_maintainer_writes_nothing_on_a_standby(nodes: Nodes) -> None:
    ws = "replica"
    _append(nodes.primary_dsn, ws, 300, prefix="s", seed=5)
    nodes.wait_for_replay()
    # Connected to the standby as if it were the primary (a read-only deployment).
    settings = Settings.from_env(dsn=nodes.standby_dsn).with_(
        maintain_behind=1, impact_lists=True, retry_seconds=0
    )

    async def main() -> tuple[bool, dict[str, int]]:
        async with await AsyncPgSearch.connect(settings=settings) as pg:

            async def listed() -> list[str]:
                return [ws]

            done = await pg.maintainer(listed).run_round()
            return done.standby, done.rebuilt

    standby, rebuilt = asyncio.run(main())
    assert standby and rebuilt == {}
    with psycopg.connect(nodes.primary_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM term_list_state").fetchone() == (0,)
    # The same round on the primary builds them.
    on_primary = settings.with_(dsn=nodes.primary_dsn)

    async def primary() -> dict[str, int]:
        async with await AsyncPgSearch.connect(settings=on_primary) as pg:

            async def listed() -> list[str]:
                return [ws]

            return (await pg.maintainer(listed).run_round()).rebuilt

    assert list(asyncio.run(primary())) == [ws]

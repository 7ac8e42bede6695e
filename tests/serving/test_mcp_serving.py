"""`pgsearch mcp` under concurrent calls and across a restart of its database.

The server runs as a subprocess (``python -m pgsearch mcp``) against the private
primary, spoken to by the MCP SDK's stdio client. A search is made slow for real: the
test holds an exclusive lock on the vocabulary table, which searches read and
windows do not, so the search's statement waits inside PostgreSQL; windows asked for
meanwhile must answer at once. Then the primary is restarted under the running
server, with calls in flight: every call answers, none with an error.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from pgsearch import PgSearch
from tests.serving.conftest import Nodes

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters, stdio_client

WS = "mcp"


def _load(dsn: str) -> None:
    with PgSearch.connect(dsn) as pg:
        for s in range(3):
            pg.append(
                workspace=WS,
                session_id=f"s{s}",
                messages=[
                    {"role": "user", "content": f"deploy the cron parser, step {i}"}
                    for i in range(20)
                ],
            )


def _server(dsn: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "pgsearch", "mcp", "--dsn", dsn, "-w", WS]
    )


def _run(nodes: Nodes, errlog: Path, script: Any) -> Any:
    async def main() -> Any:
        with errlog.open("w") as err, anyio.fail_after(180):
            async with stdio_client(_server(nodes.primary_dsn), errlog=err) as (read, write):
                async with ClientSession(read, write) as client:
                    await client.initialize()
                    return await script(client)

    try:
        return anyio.run(main)
    except BaseException:
        print(errlog.read_text(errors="replace")[-3000:])
        raise


def _text(result: Any) -> str:
    return str(result.content[0].text)


def _waiting_on_lock(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = 'pgsearch' AND wait_event_type = 'Lock'"
        ).fetchone()
    return int(row[0]) if row else 0


def test_a_slow_search_does_not_hold_up_windows(nodes: Nodes, tmp_path: Path) -> None:
    _load(nodes.primary_dsn)

    async def script(client: ClientSession) -> dict[str, Any]:
        # Warm up: the server has its pool open and answers.
        assert not (await client.call_tool("session_search", {"query": "cron"})).is_error
        out: dict[str, Any] = {}
        locker = await psycopg.AsyncConnection.connect(nodes.primary_dsn)
        try:
            await locker.execute("LOCK TABLE vocabulary IN ACCESS EXCLUSIVE MODE")
            async with anyio.create_task_group() as tg:

                async def slow_search() -> None:
                    out["search"] = await client.call_tool("session_search", {"query": "parser"})
                    out["search_done"] = time.monotonic()

                tg.start_soon(slow_search)
                deadline = time.monotonic() + 30
                while await anyio.to_thread.run_sync(_waiting_on_lock, nodes.primary_dsn) < 1:
                    assert time.monotonic() < deadline, "the search never reached the lock"
                    await anyio.sleep(0.05)
                began = time.monotonic()
                windows = []
                for s in range(3):
                    windows.append(
                        await client.call_tool("session_around", {"session_id": f"s{s}", "seq": 5})
                    )
                    windows.append(
                        await client.call_tool(
                            "session_messages", {"session_id": f"s{s}", "limit": 5}
                        )
                    )
                out["windows_seconds"] = time.monotonic() - began
                out["windows"] = windows
                out["search_pending"] = "search" not in out
                await anyio.sleep(0.5)
                out["released"] = time.monotonic()
                await locker.commit()
        finally:
            await locker.close()
        return out

    out = _run(nodes, tmp_path / "server.log", script)
    assert out["search_pending"], "the search was not held up by the lock"
    assert all(not w.is_error for w in out["windows"]), [_text(w) for w in out["windows"]]
    assert all("step" in _text(w) for w in out["windows"])
    assert out["windows_seconds"] < 3.0, out["windows_seconds"]
    assert not out["search"].is_error, _text(out["search"])
    assert out["search"].structured_content["matches"]
    assert out["search_done"] >= out["released"]


def test_the_server_survives_a_restart_of_its_database(nodes: Nodes, tmp_path: Path) -> None:
    _load(nodes.primary_dsn)
    calls = [
        ("session_search", {"query": "cron parser"}),
        ("session_around", {"session_id": "s1", "seq": 3}),
        ("session_messages", {"session_id": "s2", "limit": 4}),
    ]

    async def script(client: ClientSession) -> dict[str, Any]:
        before = [await client.call_tool(n, a) for n, a in calls]
        during: list[Any] = []

        async def keep_calling(stop: anyio.Event) -> None:
            i = 0
            while not stop.is_set():
                name, args = calls[i % len(calls)]
                during.append(await client.call_tool(name, args))
                i += 1

        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(keep_calling, stop)
            await anyio.sleep(0.5)
            await anyio.to_thread.run_sync(nodes.primary.restart, "fast")
            await anyio.sleep(1.0)
            stop.set()
        after = [await client.call_tool(n, a) for n, a in calls]
        return {"before": before, "during": during, "after": after}

    out = _run(nodes, tmp_path / "server.log", script)
    for phase in ("before", "during", "after"):
        errors = [_text(r) for r in out[phase] if r.is_error]
        assert errors == [], (phase, errors[:3])
    assert [_text(r) for r in out["after"]] == [_text(r) for r in out["before"]]
    assert len(out["during"]) > 8
    print(f"mcp across a restart: {len(out['during'])} calls during it, 0 errors")

"""`pgsearch mcp` end to end: a subprocess spoken to by the MCP SDK's stdio client."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from pgsearch import PgSearch

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters, stdio_client

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SNAPSHOT = FIXTURES / "tool_schemas.json"
CLAUDE_SID = "3f7c1a52-8d4e-4b8a-9c1e-2a6d5f0b7e91"
CODEX_SID = "0199a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b"


@pytest.fixture
def loaded(pg: PgSearch, dsn: str) -> str:
    report = pg.ingest_paths([FIXTURES / "claude-code", FIXTURES / "codex"], workspace="w")
    assert report.errors == []
    return dsn


def server(dsn: str, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "pgsearch", "mcp", "--dsn", dsn, "-w", "w", *extra]
    )


def text_of(result: Any) -> str:
    assert len(result.content) == 1 and result.content[0].type == "text"
    return str(result.content[0].text)


def session(params: StdioServerParameters, errlog: Path, script: Any) -> Any:
    """Run `script(client)` against a fresh server process; returns what it returns."""

    async def main() -> Any:
        with errlog.open("w") as err, anyio.fail_after(60):
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as client:
                    await client.initialize()
                    return await script(client)

    return anyio.run(main)


def test_list_search_window_and_refused_scope(loaded: str, tmp_path: Path) -> None:
    async def script(client: ClientSession) -> dict[str, Any]:
        listed = await client.list_tools()
        found = await client.call_tool(
            "session_search", {"query": "rounding test fails", "limit": 5}
        )
        first = found.structured_content["matches"][0]
        window = await client.call_tool(
            "session_around", {"session_id": first["session_id"], "seq": first["seq"]}
        )
        page = await client.call_tool("session_messages", {"session_id": CODEX_SID, "limit": 4})
        wider = await client.call_tool("session_search", {"query": "x", "workspace_id": "other"})
        capped = await client.call_tool("session_search", {"query": "x", "limit": 500})
        browse = await client.call_tool("session_search", {})
        return {
            "tools": [t.model_dump(by_alias=True, exclude_none=True) for t in listed.tools],
            "found": found,
            "first": first,
            "window": window,
            "page": page,
            "wider": wider,
            "capped": capped,
            "browse": browse,
        }

    out = session(server(loaded), tmp_path / "server.log", script)
    # The tools the client sees are the checked-in definitions.
    snapshot = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    listed = [
        {"name": t["name"], "description": t["description"], "inputSchema": t["inputSchema"]}
        for t in out["tools"]
    ]
    assert listed == snapshot

    found = out["found"]
    assert not found.is_error
    assert out["first"]["session_id"] == CLAUDE_SID
    assert out["first"]["kind"] == "user_text"
    # seq 1: the transcript's summary line titles the session, it is not an entry.
    assert f"[1] session_id={CLAUDE_SID} seq=1 user_text role=user" in text_of(found)
    assert f'Next: session_around {{"session_id": "{CLAUDE_SID}", "seq": 1}}' in text_of(found)

    window = text_of(out["window"])
    assert ">> seq=1 user_text role=user" in window
    assert "seq=4 tool_output role=tool tool=Grep" in window
    assert out["window"].structured_content["anchor_seq"] == 1

    page = text_of(out["page"])
    assert page.startswith(f"session_id={CODEX_SID}: 4 messages from seq 0.")
    assert '"start_seq": 4}' in page

    assert out["wider"].is_error
    assert text_of(out["wider"]) == (
        "error: this tool is bound to workspace 'w'; it cannot reach workspace 'other'"
    )
    assert not out["capped"].is_error  # capped like the API and the CLI, and said so
    assert "Note: limit 500 was capped at 50, the most per page." in text_of(out["capped"])
    assert not out["browse"].is_error  # no query: the newest entries
    assert out["browse"].structured_content["matches"]


def test_a_session_pinned_server_refuses_other_sessions(loaded: str, tmp_path: Path) -> None:
    async def script(client: ClientSession) -> list[Any]:
        return [
            await client.call_tool("session_search", {"query": "migration"}),
            await client.call_tool("session_search", {"query": "rounding"}),
            await client.call_tool("session_around", {"session_id": CLAUDE_SID, "seq": 2}),
            await client.call_tool("session_search", {"query": "x", "session_id": CLAUDE_SID}),
        ]

    own, other, around, narrowed = session(
        server(loaded, "--session", CODEX_SID), tmp_path / "server.log", script
    )
    assert f"session_id={CODEX_SID}" in text_of(own)
    assert text_of(other).startswith("No matches")  # the other session is out of scope
    for refused in (around, narrowed):
        assert refused.is_error
        assert f"bound to session '{CODEX_SID}'" in text_of(refused)


def raw_tools_list(dsn: str, *extra: str) -> bytes:
    """The bytes of the server's ``tools/list`` response, spoken to without the SDK."""
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    # Standard input stays open until the answer arrives: a server may stop at end
    # of input before it has answered requests still in flight.
    proc = subprocess.Popen(
        [sys.executable, "-m", "pgsearch", "mcp", "--dsn", dsn, *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests).encode())
        proc.stdin.flush()
        deadline = time.monotonic() + 60
        answer = b""
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            if b'"id":2' in line:
                answer = line.rstrip(b"\n")
                break
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        stderr = proc.stderr.read().decode() if proc.stderr else ""
        proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
    assert answer, stderr
    return answer


def test_tools_list_is_byte_identical_across_runs_and_scopes(loaded: str) -> None:
    first = raw_tools_list(loaded, "-w", "w")
    assert raw_tools_list(loaded, "-w", "w") == first
    assert raw_tools_list(loaded, "-w", "another", "--session", CODEX_SID) == first
    tools = json.loads(first)["result"]["tools"]
    assert [t["name"] for t in tools] == ["session_search", "session_around", "session_messages"]


def test_the_server_explains_a_missing_schema(empty_dsn: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pgsearch", "mcp", "--dsn", empty_dsn, "-w", "w"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""  # stdout belongs to the protocol
    assert "pgsearch: error:" in proc.stderr and "pgsearch migrate" in proc.stderr


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "mcp"])
def test_tool_schema_command_prints_the_definitions(fmt: str) -> None:
    from pgsearch.tools import tool_definitions

    proc = subprocess.run(
        [sys.executable, "-m", "pgsearch", "tool-schema", "--format", fmt],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(proc.stdout) == tool_definitions(fmt)
    if fmt == "mcp":
        assert proc.stdout == SNAPSHOT.read_text(encoding="utf-8")

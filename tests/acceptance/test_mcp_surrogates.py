"""An MCP request that is valid JSON but not valid Unicode gets an answer."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from typing import Any

import pytest

from pgsearch.mcp_server import INVALID_REQUEST, lone_surrogate_refusal

pytest.importorskip("mcp")

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}


def converse(dsn: str, lines: list[str], ids: set[int]) -> dict[Any, dict[str, Any]]:
    """Send raw lines to `pgsearch mcp`; the replies by id, once every one of `ids` came."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pgsearch", "mcp", "--dsn", dsn, "-w", "w"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    replies: dict[Any, dict[str, Any]] = {}
    try:
        proc.stdin.write("".join(line + "\n" for line in lines).encode())
        proc.stdin.flush()
        deadline = time.monotonic() + 60
        while not ids <= replies.keys() and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 1)
            if ready:
                line = proc.stdout.readline()
                if not line:
                    break
                reply = json.loads(line)
                replies[reply.get("id")] = reply
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        stderr = proc.stderr.read().decode()
        proc.stdout.close()
        proc.stderr.close()
    assert ids <= replies.keys(), f"replies: {replies}; stderr: {stderr}"
    return replies


def call(request_id: int, query: str) -> str:
    # Written by hand: json.dumps would refuse nothing, but the point is the raw escape.
    return (
        f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/call", '
        f'"params": {{"name": "session_search", "arguments": {{"query": "{query}"}}}}}}'
    )


def test_a_lone_surrogate_gets_a_json_rpc_error_and_the_server_goes_on(dsn: str) -> None:
    lines = [
        json.dumps(INIT),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        call(2, "\\ud800"),
        call(3, "tail \\udfff here"),
        '{"jsonrpc": "2.0", "method": "notifications/cancelled", '
        '"params": {"requestId": "\\ud800"}}',
        call(4, "emoji \\ud83d\\ude00 pair"),  # a valid pair is ordinary text
        json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}),
    ]
    replies = converse(dsn, lines, {1, 2, 3, 4, 5})
    for request_id in (2, 3):
        error = replies[request_id]["error"]
        assert error["code"] == INVALID_REQUEST
        assert "lone surrogate" in error["message"]
    assert "result" in replies[4] and "result" in replies[5]


def test_only_lines_with_lone_surrogates_are_refused() -> None:
    assert lone_surrogate_refusal(call(7, "plain")) is None
    assert lone_surrogate_refusal(call(7, "\\ud83d\\ude00")) is None
    assert lone_surrogate_refusal('{"id": 1, "broken json \\ud800') is None  # the SDK's case
    refusal = lone_surrogate_refusal(call(7, "\\uDBFF"))
    assert refusal is not None and refusal["id"] == 7
    assert lone_surrogate_refusal('{"jsonrpc": "2.0", "method": "x", "params": ["\\ud800"]}') == {}
    keyed = lone_surrogate_refusal('{"jsonrpc": "2.0", "id": "a", "params": {"\\ud800": 1}}')
    assert keyed is not None and keyed["id"] == "a"

"""The MCP server module without a client: SDK checks and the tools it lists."""

from __future__ import annotations

import importlib.metadata

import pytest

from pgsearch import mcp_server, tools
from pgsearch.errors import ConfigError
from pgsearch.types import Scope
from tests.unit.test_tools import FakeProvider


def test_a_missing_or_old_sdk_is_a_config_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    with pytest.raises(ConfigError, match=r"pip install 'pgsearch\[mcp\]'"):
        mcp_server.build_server(FakeProvider())
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "1.9.4")
    with pytest.raises(ConfigError, match=r"needs version 2 of the MCP SDK, found 1\.9\.4"):
        mcp_server.build_server(FakeProvider())


def test_the_server_lists_exactly_the_tool_specs() -> None:
    pytest.importorskip("mcp")
    import anyio
    import mcp.types as types

    server = mcp_server.build_server(FakeProvider(scope=Scope(workspace="w")))
    handler = server.get_request_handler("tools/list")
    assert handler is not None
    listed = anyio.run(handler.handler, None, None)
    assert [t.model_dump(by_alias=True, exclude_none=True) for t in listed.tools] == (
        tools.tool_definitions("mcp")
    )
    call = server.get_request_handler("tools/call")
    assert call is not None
    params = types.CallToolRequestParams(name="session_search", arguments={"query": "cron"})
    result = anyio.run(call.handler, None, params)
    assert not result.is_error
    assert result.structured_content["searched"] == 12
    assert "1 match (" in result.content[0].text

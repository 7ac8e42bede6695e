"""`pgsearch mcp`: the session tools over the Model Context Protocol (stdio).

Built on the official ``mcp`` SDK's low-level server, so the tool names,
descriptions and schemas sent to clients are exactly `pgsearch.tools.TOOL_SPECS`
(a higher-level server would derive them from function signatures). The SDK is an
optional extra, imported only here and only when a server starts.

The scope (workspace, optional session) comes from the server's configuration;
tool arguments can narrow it but never widen it. Calls run in worker threads, up to
`CONCURRENT_CALLS` at once on the provider's connection pool, so a slow search does
not hold up a window; the pool replaces connections a database restart killed.
Nothing but protocol messages may reach stdout; logs go to stderr.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

from pgsearch import __version__, tools
from pgsearch.errors import ConfigError
from pgsearch.types import ScopedProvider

SERVER_NAME = "pgsearch"
INSTRUCTIONS = (
    "Search this workspace's earlier agent sessions: session_search finds what was "
    "said or done, session_around shows the messages around a match, and "
    "session_messages reads a session page by page."
)
INSTALL_HINT = "pip install 'pgsearch[mcp]'"
#: Tool calls served at once (the pool's default size: more would only queue for it).
CONCURRENT_CALLS = 8


def _require_sdk() -> None:
    try:
        version = importlib.metadata.version("mcp")
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError(f"`pgsearch mcp` needs the MCP SDK: {INSTALL_HINT}") from None
    if int(version.split(".")[0]) < 2:
        raise ConfigError(
            f"`pgsearch mcp` needs version 2 of the MCP SDK, found {version}: {INSTALL_HINT}"
        )


def build_server(provider: ScopedProvider) -> Any:
    """A low-level MCP `Server` serving the session tools of `provider`."""
    _require_sdk()
    import anyio
    import mcp.types as types
    from mcp.server.lowlevel import Server

    listed = types.ListToolsResult(
        tools=[
            types.Tool(
                name=spec.name,
                description=spec.description,
                input_schema=dict(spec.input_schema),
            )
            for spec in tools.TOOL_SPECS
        ]
    )
    limiter = anyio.CapacityLimiter(CONCURRENT_CALLS)

    async def list_tools(ctx: Any, params: Any) -> Any:
        return listed

    async def call_tool(ctx: Any, params: Any) -> Any:
        name, arguments = params.name, params.arguments

        def run() -> tools.ToolOutput:
            return tools.run_tool(provider, name, arguments)

        output = await anyio.to_thread.run_sync(run, limiter=limiter)
        return types.CallToolResult(
            content=[types.TextContent(text=output.text)],
            structured_content=output.data,
            is_error=output.is_error,
        )

    return Server(
        SERVER_NAME,
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve_stdio(provider: ScopedProvider) -> None:
    """Serve `provider`'s tools over stdin/stdout until the client disconnects."""
    server = build_server(provider)
    import anyio
    from mcp.server.stdio import stdio_server

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)

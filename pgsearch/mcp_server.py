"""`pgsearch mcp`: the session tools over the Model Context Protocol (stdio).

Built on the official ``mcp`` SDK's low-level server, so the tool names,
descriptions and schemas sent to clients are exactly `pgsearch.tools.TOOL_SPECS`
(a higher-level server would derive them from function signatures). The SDK is an
optional extra, imported only here and only when a server starts.

The scope (workspace, optional session) comes from the server's configuration;
tool arguments can narrow it but never widen it. `serve_stdio` serves an
`AsyncPgSearch` on the server's own event loop: each call is a task awaiting its
connection from the asyncio pool, so calls run concurrently (up to the pool's size
on the database at once, the rest queued for a connection) and a slow search does
not hold up a window. A database restart costs the calls in flight at most (reads
are retried on a fresh connection); the pool reconnects by itself. A blocking
provider (`build_server` with a `pgsearch.Provider`) runs its calls in worker
threads instead. Nothing but protocol messages may reach stdout; logs go to stderr.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import inspect
import json
import re
import sys
from typing import TYPE_CHECKING, Any

from pgsearch import __version__, tools
from pgsearch.errors import ConfigError
from pgsearch.types import AsyncScopedProvider, ScopedProvider

if TYPE_CHECKING:
    from pgsearch.settings import Settings

SERVER_NAME = "pgsearch"
INSTRUCTIONS = (
    "Search this workspace's earlier agent sessions: session_search finds what was "
    "said or done, session_around shows the messages around a match, and "
    "session_messages reads a session page by page."
)
INSTALL_HINT = "pip install 'pgsearch[mcp]'"
#: Tool calls a blocking provider serves at once, in worker threads (the pool's
#: default size: more would only queue for it). An asyncio provider needs no such
#: bound: its calls wait for pooled connections on the event loop.
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


def build_server(provider: ScopedProvider | AsyncScopedProvider) -> Any:
    """A low-level MCP `Server` serving the session tools of `provider`: an asyncio
    provider's calls are awaited on the event loop, a blocking one's run in threads."""
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

    asynchronous = inspect.iscoroutinefunction(provider.search)

    async def call_tool(ctx: Any, params: Any) -> Any:
        name, arguments = params.name, params.arguments
        if asynchronous:
            output = await tools.run_tool_async(provider, name, arguments)  # type: ignore[arg-type]
        else:

            def run() -> tools.ToolOutput:
                return tools.run_tool(provider, name, arguments)  # type: ignore[arg-type]

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


#: An escaped UTF-16 surrogate in a JSON line (paired or not; json tells which).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def lone_surrogate_refusal(line: str) -> dict[str, Any] | None:
    """The JSON-RPC error for a request line holding an escaped lone surrogate.

    Such a line is valid JSON but not valid Unicode, and the SDK's parser drops it
    without a reply, leaving the client waiting forever. Returns None for every
    other line (which goes to the SDK as it is), and for a notification, which
    gets no reply.
    """
    if not _SURROGATE_ESCAPE.search(line):
        return None
    try:
        message = json.loads(line)
    except ValueError:
        return None  # not JSON at all: the SDK's own handling applies
    if not _holds_lone_surrogate(message):
        return None
    request_id = message.get("id") if isinstance(message, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return {}  # nothing to answer (a notification): dropped
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": INVALID_REQUEST,
            "message": "invalid request: a string holds an escaped lone surrogate "
            "(such as \\ud800), which is not valid Unicode",
        },
    }


#: JSON-RPC's "Invalid Request" error code.
INVALID_REQUEST = -32600


def _holds_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_holds_lone_surrogate(k) or _holds_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_lone_surrogate(v) for v in value)
    return False


def serve_stdio(settings: Settings, *, workspace: str, session_id: str | None = None) -> None:
    """Serve the tools of one scope over stdin/stdout until the client disconnects.

    An `AsyncPgSearch` of `settings` is opened on the server's event loop (its
    errors, such as a schema out of date, are raised before anything is served) and
    closed when the client goes. Standard input is read here rather than by the SDK,
    line by line, so that a request the SDK would drop unanswered
    (`lone_surrogate_refusal`) gets a JSON-RPC error instead; every other line
    reaches the SDK unchanged.
    """
    _require_sdk()
    import io

    import anyio
    import mcp.types as types
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    class _Unowned(io.TextIOWrapper):
        """Closing this text layer leaves the process's stdin open."""

        def close(self) -> None:
            with contextlib.suppress(ValueError):
                self.detach()

    stdin = anyio.wrap_file(_Unowned(sys.stdin.buffer, encoding="utf-8", errors="replace"))
    refusals_in, refusals_out = anyio.create_memory_object_stream[dict[str, Any]](16)

    class _ScreenedLines:
        def __aiter__(self) -> Any:
            return self._lines()

        async def _lines(self) -> Any:
            async with refusals_in:
                async for line in stdin:
                    refusal = lone_surrogate_refusal(line)
                    if refusal is None:
                        yield line
                    elif refusal:
                        await refusals_in.send(refusal)

    async def answer_refusals(write_stream: Any) -> None:
        async with refusals_out:
            async for refusal in refusals_out:
                error = types.JSONRPCError.model_validate(refusal)
                await write_stream.send(SessionMessage(error))

    async def main() -> None:
        from pgsearch.aio import AsyncPgSearch

        pg = await AsyncPgSearch.connect(settings=settings)

        async def served() -> list[str]:
            return [workspace]

        # The term lists of the served workspace are kept by the server itself.
        maintainer = pg.maintainer(served)
        try:
            maintainer.start()
            server = build_server(pg.provider(workspace=workspace, session_id=session_id))
            async with stdio_server(stdin=_ScreenedLines()) as (read_stream, write_stream):  # type: ignore[arg-type]
                async with anyio.create_task_group() as tg:
                    tg.start_soon(answer_refusals, write_stream)
                    await server.run(
                        read_stream, write_stream, server.create_initialization_options()
                    )
                    tg.cancel_scope.cancel()
        finally:
            await maintainer.stop()
            await pg.close()

    anyio.run(main)

"""A closed `PgSearch` or `AsyncPgSearch` says so with a pgsearch error, everywhere.

Through the facade, the provider and the agent tool helpers: never the pool's own
exception, and the tool helpers offer no tools over a closed store.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from pgsearch import PgSearch, PgSearchError, SessionQueryRequest
from pgsearch.aio import AsyncPgSearch
from pgsearch.errors import StoreClosed
from pgsearch.tools import AROUND, SEARCH, run_tool, run_tool_async, session_tools

WS = "closed"
MESSAGE = [{"role": "user", "content": "the advisory lock of the cron job"}]


def test_a_closed_pgsearch_raises_a_pgsearch_error_everywhere(
    dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    pg = PgSearch.connect(dsn)
    pg.append(workspace=WS, session_id="s", messages=MESSAGE)
    provider = pg.provider(workspace=WS)
    assert provider.search(SessionQueryRequest(query="lock")).matches
    assert len(session_tools(provider)) == 3
    pg.close()
    assert provider.closed
    calls = {
        "search": lambda: provider.search(SessionQueryRequest(query="lock")),
        "around": lambda: provider.around("s", 0),
        "messages": lambda: provider.session_messages("s"),
        "append": lambda: pg.append(workspace=WS, session_id="s", messages=MESSAGE),
        "stats": lambda: pg.stats(workspace=WS),
        "sessions": lambda: pg.sessions(workspace=WS),
        "forget": lambda: pg.forget(workspace=WS, session_id="s"),
        "token": lambda: pg.create_token(workspace=WS),
    }
    for name, call in calls.items():
        with pytest.raises(PgSearchError) as info:
            call()
        assert isinstance(info.value, StoreClosed), (name, type(info.value))
        assert "closed" in str(info.value), name
    # The tool helpers: no tools over a closed store, and a tool kept from before
    # answers an error text naming it, without a logged crash.
    assert session_tools(provider) == []
    assert session_tools(provider, probe=False) == []
    with caplog.at_level(logging.ERROR, logger="pgsearch"):
        for name, args in ((SEARCH, {"query": "lock"}), (AROUND, {"session_id": "s", "seq": 0})):
            out = run_tool(provider, name, args)
            assert out.is_error and "closed" in out.text, out.text
    assert not caplog.records, [r.getMessage() for r in caplog.records]


def test_a_closed_async_pgsearch_raises_a_pgsearch_error_everywhere(dsn: str) -> None:
    async def scenario() -> None:
        pg = await AsyncPgSearch.connect(dsn)
        await pg.append(workspace=WS, session_id="s", messages=MESSAGE)
        provider = pg.provider(workspace=WS)
        await pg.close()
        assert provider.closed
        for call in (
            provider.search(SessionQueryRequest(query="lock")),
            provider.around("s", 0),
            pg.append(workspace=WS, session_id="s", messages=MESSAGE),
            pg.stats(workspace=WS),
            pg.authenticate("pgs_000000000000_" + "a" * 43),
        ):
            with pytest.raises(StoreClosed):
                await call
        out = await run_tool_async(provider, SEARCH, {"query": "lock"})
        assert out.is_error and "closed" in out.text

    asyncio.run(scenario())

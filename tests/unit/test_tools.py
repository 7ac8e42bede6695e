"""Agent tools without a database: stable schemas, argument checks, handlers, factory."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pgsearch import tools
from pgsearch.errors import InvalidQuery, NotFound, ScopeError, StoreError, StoreUnavailable
from pgsearch.types import (
    MAX_RESULT_BYTES,
    Scope,
    SessionMatch,
    SessionQueryRequest,
    SessionQueryResult,
    Window,
    WindowMessage,
)

SNAPSHOT = Path(__file__).resolve().parent.parent / "fixtures" / "tool_schemas.json"
WHEN = datetime(2026, 3, 2, 9, 0, 5, tzinfo=UTC)


def _match(
    sid: str = "s1",
    seq: int = 4,
    excerpt: str = "the cron job",
    highlights: tuple[tuple[int, int], ...] = ((4, 8),),
) -> SessionMatch:
    return SessionMatch(
        workspace_id="w",
        session_id=sid,
        entry_id=f"{sid}:{seq}",
        seq=seq,
        kind="user_text",
        turn=2,
        role="user",
        tool_name=None,
        excerpt=excerpt,
        highlights=highlights,
        created_at=WHEN,
        score=1.5,
        title="Cron refactor",
    )


def _message(seq: int, content: str, *, anchor: bool = False) -> WindowMessage:
    return WindowMessage(
        session_id="s1",
        seq=seq,
        entry_id=f"s1:{seq}",
        kind="assistant_text",
        role="assistant",
        turn=1,
        tool_name=None,
        created_at=WHEN,
        content=content,
        anchor=anchor,
    )


@dataclass
class FakeProvider:
    """Records calls; answers with canned results or raises `error`."""

    scope: Scope = field(default_factory=lambda: Scope(workspace="w"))
    result: SessionQueryResult = field(
        default_factory=lambda: SessionQueryResult(matches=(_match(),), searched=12)
    )
    window: Window = field(
        default_factory=lambda: Window(
            workspace_id="w",
            session_id="s1",
            anchor_seq=4,
            messages=tuple(_message(i, f"message {i}", anchor=i == 4) for i in range(1, 8)),
        )
    )
    error: Exception | None = None
    calls: list[tuple[str, Any]] = field(default_factory=list)

    def search(self, request: SessionQueryRequest) -> SessionQueryResult:
        self.calls.append(("search", request))
        if self.error is not None:
            raise self.error
        return self.result

    def around(self, session_id: str, seq: int, *, before: int = 3, after: int = 3) -> Window:
        self.calls.append(("around", (session_id, seq, before, after)))
        if self.error is not None:
            raise self.error
        return self.window

    def session_messages(self, session_id: str, *, start_seq: int = 0, limit: int = 16) -> Window:
        self.calls.append(("messages", (session_id, start_seq, limit)))
        if self.error is not None:
            raise self.error
        return self.window


# --- stable definitions -----------------------------------------------------------


def test_tool_definitions_match_the_checked_in_snapshot_byte_for_byte() -> None:
    rendered = json.dumps(tools.tool_definitions("mcp"), ensure_ascii=False, indent=2) + "\n"
    assert rendered == SNAPSHOT.read_text(encoding="utf-8"), (
        "tool names, descriptions or schemas changed: hosts cache them in prompts; "
        "if the change is intended, regenerate with `pgsearch tool-schema --format mcp`"
    )


def test_definitions_are_identical_across_calls_and_not_shared() -> None:
    first = tools.tool_definitions("openai")
    first[0]["function"]["parameters"]["properties"].clear()
    assert tools.tool_definitions("openai") != first
    assert json.dumps(tools.tool_definitions("anthropic")) == json.dumps(
        tools.tool_definitions("anthropic")
    )


def test_host_formats_carry_the_same_name_description_and_schema() -> None:
    mcp = tools.tool_definitions("mcp")
    openai = tools.tool_definitions("openai")
    anthropic = tools.tool_definitions("anthropic")
    assert [t["name"] for t in mcp] == ["session_search", "session_around", "session_messages"]
    for m, o, a in zip(mcp, openai, anthropic, strict=True):
        assert o == {
            "type": "function",
            "function": {
                "name": m["name"],
                "description": m["description"],
                "parameters": m["inputSchema"],
            },
        }
        assert a == {
            "name": m["name"],
            "description": m["description"],
            "input_schema": m["inputSchema"],
        }
        assert m["inputSchema"]["type"] == "object"
        assert m["inputSchema"]["additionalProperties"] is False


def test_unknown_schema_format_is_refused() -> None:
    with pytest.raises(InvalidQuery, match="format"):
        tools.tool_definitions("gemini")


# --- argument checks --------------------------------------------------------------

SCOPE = Scope(workspace="w")


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("session_search", {"query": "x", "bogus": 1}, "unknown argument 'bogus'"),
        ("session_search", {"query": 5}, "'query' must be a string, got integer"),
        ("session_search", {"query": "x", "limit": 0}, "'limit' must be at least 1"),
        ("session_search", {"query": "x", "limit": "10"}, "'limit' must be an integer"),
        ("session_search", {"query": "x", "limit": True}, "'limit' must be an integer"),
        ("session_search", {"query": "x", "kinds": "user_text"}, "'kinds' must be an array"),
        ("session_search", {"query": "x", "kinds": ["chat"]}, "unknown value 'chat'"),
        ("session_search", {"query": "x", "roles": ["robot"]}, "unknown value 'robot'"),
        ("session_search", {"query": "x", "per_session": "no"}, "must be true or false"),
        ("session_search", {"query": "x", "since": "yesterday"}, "ISO 8601"),
        ("session_search", {"query": "x", "tool_name": ""}, "'tool_name' must not be empty"),
        ("session_search", {"query": "x" * 2001}, "the limit is 2,000"),
        ("session_around", {"session_id": "s1"}, "missing required argument 'seq'"),
        ("session_around", {"session_id": "s1", "seq": -1}, "'seq' must be at least 0"),
        ("session_around", {"session_id": "s1", "seq": 1, "after": 16}, "between 0 and 15"),
        ("session_messages", {"session_id": "s1", "limit": 0}, "'limit' must be at least 1"),
        ("session_delete", {}, "unknown tool 'session_delete'"),
    ],
)
def test_bad_arguments_get_a_clear_message(name: str, args: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidQuery) as info:
        tools.check_arguments(name, args, SCOPE)
    assert message in str(info.value)


def test_defaults_are_filled_and_values_normalised() -> None:
    args = tools.check_arguments(
        "session_search",
        {
            "query": "cron",
            "kinds": ["tool_error", "tool_error"],
            "limit": 5.0,
            "since": "2026-01-02",
        },
        SCOPE,
    )
    assert args["kinds"] == ["tool_error"]
    assert args["limit"] == 5
    assert args["per_session"] is True
    assert args["since"] == datetime(2026, 1, 2, tzinfo=UTC)
    request = tools.search_request(args)
    assert request.kinds == ("tool_error",)
    assert request.limit == 5
    around = tools.check_arguments("session_around", {"session_id": "s1", "seq": 3}, SCOPE)
    assert (around["before"], around["after"]) == (3, 3)
    page = tools.check_arguments("session_messages", {"session_id": "s1"}, SCOPE)
    assert (page["start_seq"], page["limit"]) == (0, 16)


def test_null_optional_arguments_count_as_absent() -> None:
    args = tools.check_arguments("session_search", {"query": "", "cursor": None}, SCOPE)
    assert "cursor" not in args


def test_another_workspace_is_refused_and_the_same_one_accepted() -> None:
    with pytest.raises(ScopeError, match="bound to workspace 'w'"):
        tools.check_arguments("session_search", {"query": "x", "workspace_id": "other"}, SCOPE)
    args = tools.check_arguments("session_search", {"query": "x", "workspace_id": "w"}, SCOPE)
    assert "workspace_id" not in args


def test_a_session_pinned_scope_refuses_other_sessions() -> None:
    pinned = Scope(workspace="w", session_id="s1")
    for name, args in [
        ("session_search", {"query": "x", "session_id": "s2"}),
        ("session_around", {"session_id": "s2", "seq": 0}),
        ("session_messages", {"session_id": "s2"}),
    ]:
        with pytest.raises(ScopeError, match="bound to session 's1'"):
            tools.check_arguments(name, args, pinned)
    assert tools.check_arguments("session_messages", {"session_id": "s1"}, pinned)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object, got array"),
        ('"text"', "must be a JSON object, got string"),
        (b"\xff", "not valid UTF-8"),
    ],
)
def test_raw_arguments_that_are_not_an_object(raw: str | bytes, message: str) -> None:
    with pytest.raises(tools.ToolArgumentError, match=message):
        tools.parse_arguments(raw)


def test_empty_raw_arguments_are_an_empty_object() -> None:
    assert tools.parse_arguments(None) == {}
    assert tools.parse_arguments("  ") == {}
    assert tools.parse_arguments('{"query": "x"}') == {"query": "x"}


# --- handlers ---------------------------------------------------------------------


def test_search_renders_compact_text_with_next_call_hint() -> None:
    provider = FakeProvider()
    output = tools.run_tool(provider, "session_search", '{"query": "cron", "kinds": ["user_text"]}')
    assert not output.is_error
    assert "1 match (12 entries searched; best match per session)." in output.text
    assert "[1] session_id=s1 seq=4 user_text role=user turn=2 at=2026-03-02T09:00:05Z" in (
        output.text
    )
    assert 'Next: session_around {"session_id": "s1", "seq": 4}' in output.text
    assert output.data is not None and output.data["matches"][0]["seq"] == 4
    kind, request = provider.calls[0]
    assert kind == "search" and request.query == "cron" and request.kinds == ("user_text",)


def test_search_hint_names_the_cursor_and_empty_results_say_why() -> None:
    provider = FakeProvider(
        result=SessionQueryResult(matches=(_match(),), searched=40, next_cursor="abc.def")
    )
    text = tools.run_tool(provider, "session_search", {"query": "cron"}).text
    assert '"cursor": "abc.def"' in text
    provider = FakeProvider(
        result=SessionQueryResult(
            matches=(), searched=0, notice="the query has no searchable words"
        )
    )
    text = tools.run_tool(provider, "session_search", {"query": "..."}).text
    assert text.startswith("No matches (0 entries searched).")
    assert "the query has no searchable words" in text
    assert "Hint:" in text


def test_window_and_page_hints() -> None:
    provider = FakeProvider()
    text = tools.run_tool(provider, "session_around", {"session_id": "s1", "seq": 4}).text
    assert ">> seq=4 assistant_text" in text
    assert "-- seq=3 assistant_text" in text
    assert 'session_messages {"session_id": "s1", "start_seq": 8}' in text
    provider.window = Window(
        workspace_id="w", session_id="s1", anchor_seq=0, messages=(), next_seq=None
    )
    assert tools.run_tool(provider, "session_messages", {"session_id": "s1"}).text.endswith(
        "End of session."
    )


def test_results_never_exceed_the_size_cap() -> None:
    big = "word " * 20_000
    provider = FakeProvider(
        window=Window(
            workspace_id="w",
            session_id="s1",
            anchor_seq=0,
            messages=tuple(_message(i, big) for i in range(16)),
            next_seq=16,
        ),
        result=SessionQueryResult(
            matches=tuple(_match(f"s{i}", i, excerpt="x" * 2000) for i in range(50)), searched=50
        ),
    )
    for name, args in [
        ("session_messages", {"session_id": "s1"}),
        ("session_search", {"query": "x", "limit": 50}),
    ]:
        text = tools.run_tool(provider, name, args).text
        assert len(text.encode()) <= MAX_RESULT_BYTES
        assert "Next" in text  # the hint survives the cut


@pytest.mark.parametrize(
    "error",
    [
        NotFound("no session 'zz' in workspace 'w'"),
        StoreError("searching: database unavailable"),
        RuntimeError("boom"),
    ],
)
def test_handler_failures_become_error_text_not_exceptions(error: Exception) -> None:
    output = tools.run_tool(
        FakeProvider(error=error), "session_around", {"session_id": "zz", "seq": 1}
    )
    assert output.is_error
    assert output.text.startswith("error: ")
    assert output.data is None


def test_argument_errors_never_reach_the_provider() -> None:
    provider = FakeProvider()
    output = tools.run_tool(provider, "session_search", '{"query": "x", "limit": "999"}')
    assert output.is_error and "'limit' must be an integer" in output.text
    assert provider.calls == []


@pytest.mark.parametrize(
    ("name", "args", "cap"),
    [
        ("session_search", {"query": "x", "limit": 999}, 50),
        ("session_search", {"limit": 51.0}, 50),
        ("session_messages", {"session_id": "s1", "limit": 40}, 16),
    ],
)
def test_a_limit_above_the_cap_is_capped_and_the_result_says_so(
    name: str, args: dict[str, Any], cap: int
) -> None:
    provider = FakeProvider()
    output = tools.run_tool(provider, name, args)
    assert not output.is_error, output.text
    [(_, call)] = provider.calls
    used = call.limit if name == "session_search" else call[2]
    assert used == cap
    assert f"Note: limit {int(args['limit'])} was capped at {cap}" in output.text
    assert output.data is not None
    assert output.data["limit_capped"] == {"requested": int(args["limit"]), "limit": cap}
    within = tools.run_tool(FakeProvider(), name, {**args, "limit": cap})
    assert "capped" not in within.text
    assert within.data is not None and "limit_capped" not in within.data


@pytest.mark.parametrize("arguments", [{}, None, "", "{}", {"query": None}])
def test_a_search_without_a_query_browses(arguments: Any) -> None:
    provider = FakeProvider()
    output = tools.run_tool(provider, "session_search", arguments)
    assert not output.is_error, output.text
    [(_, request)] = provider.calls
    assert request.query == "" and request.limit == 10


# --- the factory ------------------------------------------------------------------


def test_factory_returns_the_three_tools_bound_to_the_provider() -> None:
    provider = FakeProvider()
    made = tools.session_tools(provider)
    assert [t.name for t in made] == ["session_search", "session_around", "session_messages"]
    search = made[0]
    assert search.openai() == tools.tool_definitions("openai")[0]
    assert search.anthropic() == tools.tool_definitions("anthropic")[0]
    assert "1 match (" in search('{"query": "cron"}')
    assert search('{"query": "cron", "workspace_id": "elsewhere"}').startswith("error: ")


def test_factory_returns_no_tool_when_the_provider_cannot_serve() -> None:
    assert tools.session_tools(None) == []
    broken = FakeProvider(error=StoreError("the database has no pgsearch schema"))
    assert tools.session_tools(broken) == []
    assert len(tools.session_tools(broken, probe=False)) == 3


class AsyncFakeProvider:
    """`FakeProvider` with coroutines, as `pgsearch.aio.AsyncProvider` has them."""

    def __init__(self, inner: FakeProvider) -> None:
        self.inner = inner
        self.scope = inner.scope

    async def search(self, request: SessionQueryRequest) -> SessionQueryResult:
        return self.inner.search(request)

    async def around(self, session_id: str, seq: int, *, before: int = 3, after: int = 3) -> Window:
        return self.inner.around(session_id, seq, before=before, after=after)

    async def session_messages(
        self, session_id: str, *, start_seq: int = 0, limit: int = 16
    ) -> Window:
        return self.inner.session_messages(session_id, start_seq=start_seq, limit=limit)


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("session_search", {"query": "cron", "limit": 500}),
        ("session_around", {"session_id": "s1", "seq": 4, "before": 2}),
        ("session_messages", {"session_id": "s1", "limit": 99}),
        ("session_search", {"query": "x", "workspace_id": "other"}),
        ("session_around", '{"session_id": 3}'),
    ],
)
def test_async_tool_calls_equal_sync_ones(name: str, arguments: Any) -> None:
    import asyncio

    sync, inner = FakeProvider(), FakeProvider()
    expected = tools.run_tool(sync, name, arguments)
    got = asyncio.run(tools.run_tool_async(AsyncFakeProvider(inner), name, arguments))
    assert got == expected
    assert inner.calls == sync.calls
    failing = FakeProvider(error=StoreUnavailable("database unavailable: gone"))
    out = asyncio.run(tools.run_tool_async(AsyncFakeProvider(failing), name, arguments))
    assert out == tools.run_tool(FakeProvider(error=failing.error), name, arguments)

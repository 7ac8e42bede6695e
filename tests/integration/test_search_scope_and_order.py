"""Search within one session, newest-first order on equal times, long CJK queries.

- A session scope (a pinned provider, a request's ``session_id``, the agent tools of
  ``pgsearch mcp --session``) lists every hit: "best hit per session" does not apply
  inside one session.
- Newest first means the later entry first when times are equal (entries without a
  time of their own take the one before theirs): in browse, in search tie-breaks,
  in the candidate cap, across cursor pages.
- A CJK sentence is counted as the phrase it is searched as, not as its pairs.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pgsearch import PgSearch, SessionQueryRequest, Settings
from pgsearch.tools import run_tool

T0 = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)


def entry(role: str, content: str, minutes: float) -> dict[str, Any]:
    return {
        "role": role,
        "content": content,
        "created_at": (T0 + timedelta(minutes=minutes)).isoformat(),
    }


def keys(result: Any) -> list[tuple[str, int]]:
    return [(m.session_id, m.seq) for m in result.matches]


def page_all(provider: Any, **request: Any) -> list[tuple[str, int]]:
    """Every hit of a request, page by page through its cursors."""
    out: list[tuple[str, int]] = []
    cursor = None
    while True:
        page = provider.search(SessionQueryRequest(cursor=cursor, **request))
        out.extend(keys(page))
        cursor = page.next_cursor
        if cursor is None:
            return out


def test_a_session_scope_lists_every_hit_not_the_best_of_one_session(pg: PgSearch) -> None:
    pg.append(
        workspace="w",
        session_id="s",
        messages=[
            entry("user" if i % 2 else "assistant", f"step {i} of the rollout", i) for i in range(8)
        ],
    )
    pg.append(workspace="w", session_id="other", messages=[entry("user", "rollout", 100)])
    pinned = pg.provider(workspace="w", session_id="s")
    newest = pinned.search(SessionQueryRequest(query="", limit=5))
    assert keys(newest) == [("s", 7), ("s", 6), ("s", 5), ("s", 4), ("s", 3)]
    assert newest.next_cursor is not None
    assert len(pinned.search(SessionQueryRequest(query="rollout", limit=50)).matches) == 8
    # The same through a request's session_id, on a workspace provider.
    provider = pg.provider(workspace="w")
    asked = provider.search(SessionQueryRequest(query="rollout", session_id="s", limit=50))
    assert len(asked.matches) == 8
    assert len(provider.search(SessionQueryRequest(query="rollout", limit=50)).matches) == 2
    # And through the agent tools of a session-pinned server.
    out = run_tool(pinned, "session_search", {"limit": 5})
    assert not out.is_error and out.data is not None
    assert [m["seq"] for m in out.data["matches"]] == [7, 6, 5, 4, 3]
    assert "every match" in out.text and "best match per session" not in out.text
    assert page_all(pinned, query="", limit=3) == [("s", i) for i in range(7, -1, -1)]


def test_equal_times_put_the_later_entry_first_everywhere(pg: PgSearch) -> None:
    # Six entries at one time (a log whose later lines carry no time of their own),
    # then another session at the same time.
    pg.append(
        workspace="w",
        session_id="a",
        messages=[entry("user", f"deploy note {i}", 0) for i in range(6)],
    )
    pg.append(workspace="w", session_id="b", messages=[entry("user", "deploy note x", 0)])
    provider = pg.provider(workspace="w")
    browse = provider.search(SessionQueryRequest(query="", per_session=False, limit=50))
    assert keys(browse) == [("a", i) for i in range(5, -1, -1)] + [("b", 0)]
    assert page_all(provider, query="", per_session=False, limit=2) == keys(browse)
    assert keys(provider.search(SessionQueryRequest(query="", limit=5))) == [("a", 5), ("b", 0)]
    # Equal scores and times: the later entry first, pages follow the same order.
    ranked = provider.search(SessionQueryRequest(query="deploy note", per_session=False, limit=50))
    in_a = [seq for sid, seq in keys(ranked) if sid == "a"]
    assert in_a == [5, 4, 3, 2, 1, 0]
    assert not ranked.approximate  # every match was read
    assert page_all(provider, query="deploy note", per_session=False, limit=2) == keys(ranked)
    best = provider.search(SessionQueryRequest(query="deploy note", limit=50))
    assert ("a", 5) in keys(best)


def test_the_candidate_cap_keeps_the_later_entries_of_equal_times(dsn: str) -> None:
    settings = Settings.from_env({}, dsn=dsn, candidate_cap=10, stop_candidate_cap=10)
    with PgSearch.connect(settings=settings) as pg:
        pg.append(
            workspace="w",
            session_id="a",
            messages=[entry("user", "common words here", 0) for _ in range(30)],
        )
        result = pg.provider(workspace="w").search(
            SessionQueryRequest(query="common words", per_session=False, limit=50)
        )
    assert result.candidates_capped and result.approximate
    assert sorted(seq for _, seq in keys(result)) == list(range(20, 30))


def test_a_japanese_sentence_is_searched_as_the_phrase_it_is(pg: PgSearch) -> None:
    sentence = (
        "昨日の会議で決まった新しいデータベースの移行手順を確認してから本番環境に反映してください"
    )
    assert len(sentence) >= 37  # more pairs than the 32-word limit
    pg.append(
        workspace="w",
        session_id="ja",
        messages=[entry("user", sentence + "。よろしくお願いします。", 0)],
    )
    pg.append(workspace="w", session_id="other", messages=[entry("user", "本番環境", 1)])
    found = pg.provider(workspace="w").search(SessionQueryRequest(query=sentence))
    assert keys(found)[0] == ("ja", 0)


def test_kind_filters_apply_to_title_and_summary_hits(pg: PgSearch) -> None:
    pg.append(
        workspace="w",
        session_id="titled",
        messages=[{**entry("user", "hello there", 0), "title": "Kubernetes ingress plan"}],
    )
    pg.append(
        workspace="w",
        session_id="summed",
        messages=[{**entry("user", "good morning", 1), "summary": "Moved the kubernetes ingress"}],
    )
    provider = pg.provider(workspace="w")

    def hits(**request: Any) -> tuple[list[tuple[str, str]], int]:
        result = provider.search(SessionQueryRequest(query="kubernetes ingress", **request))
        return [(m.session_id, m.kind) for m in result.matches], result.searched

    found, _ = hits()
    assert sorted(found) == [("summed", "summary"), ("titled", "title")]
    assert hits(kinds=("summary",)) == ([("summed", "summary")], 0)
    assert hits(kinds=("user_text",)) == ([], 2)
    assert hits(kinds=("goal", "tool_error")) == ([], 0)


def test_common_words_cover_the_matching_sessions_and_say_when_capped(dsn: str) -> None:
    settings = Settings.from_env({}, dsn=dsn, candidate_cap=20, stop_candidate_cap=20)
    with PgSearch.connect(settings=settings) as pg:
        for s in range(30):  # older sessions with one match each
            pg.append(
                workspace="w", session_id=f"old-{s:02d}", messages=[entry("user", "common", s)]
            )
        for s in range(3):  # the newest 60 matches are in three sessions
            pg.append(
                workspace="w",
                session_id=f"busy-{s}",
                messages=[
                    entry("assistant", "common again", 1000 + s * 100 + i) for i in range(20)
                ],
            )
        provider = pg.provider(workspace="w")
        best = provider.search(SessionQueryRequest(query="common", limit=50))
        sessions = {m.session_id for m in best.matches}
        assert len(sessions) == len(best.matches) >= 20
        assert {"busy-0", "busy-1", "busy-2"} <= sessions
        assert best.candidates_capped and best.next_cursor is None
        assert best.notice is not None and "narrow the query" in best.notice
        # Every hit, page by page: the pages end at the cap and the last one says so.
        seen: list[tuple[str, int]] = []
        cursor = None
        while True:
            page = provider.search(
                SessionQueryRequest(query="common", per_session=False, limit=7, cursor=cursor)
            )
            seen.extend(keys(page))
            if page.next_cursor is None:
                break
            assert page.notice is None
            cursor = page.next_cursor
        assert len(seen) == 20 == len(set(seen))
        assert page.candidates_capped and page.notice and "20 newest" in page.notice
        out = run_tool(provider, "session_search", {"query": "common", "limit": 50})
        assert "narrow the query" in out.text

"""Reference behaviours of search, against the real server."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgsearch import InvalidQuery, PgSearch, ScopeError, SessionQueryRequest, policy
from pgsearch.types import MAX_RESULT_BYTES
from tests.helpers import assert_statistics_exact, marked, write_jsonl

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def msg(role: str, content: str | None, minutes: int, **extra: Any) -> dict[str, Any]:
    return {
        "role": role,
        "content": content,
        "created_at": (T0 + timedelta(minutes=minutes)).isoformat(),
        **extra,
    }


FILLER = [
    "we should deploy the service after the tests pass",
    "the deploy went fine and the service is healthy",
    "please deploy again with the new config",
    "reading the logs of the last deploy now",
]


@pytest.fixture
def corpus(pg: PgSearch) -> Iterator[PgSearch]:
    t = 0

    def add(session: str, *messages: dict[str, Any]) -> None:
        pg.append(workspace="w", session_id=session, messages=list(messages))

    for i in range(12):
        t += 1
        add(f"filler{i}", msg("user", FILLER[i % 4], t), msg("assistant", FILLER[(i + 1) % 4], t))
    add("rare", msg("user", "deploy the zanzibar cluster tonight", 100))
    add("from-user", msg("user", "the quarterly flamingo report is late", 200))
    add("from-assistant", msg("assistant", "the quarterly flamingo report is late", 200))
    add("titled", msg("user", "hello there", 300, title="Kubernetes ingress migration plan"))
    add(
        "secrets",
        msg("user", "fetch the vault entry", 400),
        msg(
            "assistant",
            None,
            401,
            tool_calls=[{"id": "c1", "function": {"name": "vault_read", "arguments": "{}"}}],
        ),
        msg(
            "tool",
            "Authorization: Bearer sk-abcdefghijklmnopqrstuvwxyz0123",
            402,
            tool_call_id="c1",
        ),
    )
    add("typos", msg("user", "the database migration failed overnight", 500))
    add("accents", msg("user", "Add Pokémon names to the catalogue", 600))
    add("cjk", msg("user", "東京タワーの写真を送ってください", 700))
    add("stems", msg("user", "she painted the fence at sunrises", 800))
    add("code", msg("assistant", "call resolve_dirs(config) then C++ foo-bar build", 900))
    yield pg


def search(pg: PgSearch, query: str, **kw: Any) -> list[tuple[str, int]]:
    result = pg.provider(workspace="w").search(SessionQueryRequest(query=query, **kw))
    return [(m.session_id, m.seq) for m in result.matches]


def test_rare_term_match_ranks_first(corpus: PgSearch) -> None:
    assert search(corpus, "deploy zanzibar")[0] == ("rare", 0)


def test_user_words_outrank_the_same_words_from_the_assistant(corpus: PgSearch) -> None:
    hits = search(corpus, "quarterly flamingo report")
    assert hits[:2] == [("from-user", 0), ("from-assistant", 0)]


def test_title_only_match_is_found(corpus: PgSearch) -> None:
    result = corpus.provider(workspace="w").search(SessionQueryRequest(query="kubernetes ingress"))
    assert [m.session_id for m in result.matches] == ["titled"]
    assert result.matches[0].kind == "title"
    assert "**Kubernetes**" in marked(result.matches[0])


def test_secret_in_tool_output_is_not_found_but_its_session_is(corpus: PgSearch) -> None:
    assert search(corpus, "Bearer") == []
    assert search(corpus, "sk-abcdefghijklmnopqrstuvwxyz0123") == []
    assert search(corpus, "vault_read") == [("secrets", 1)]


def test_typo_finds_the_word(corpus: PgSearch) -> None:
    assert search(corpus, "databse") == [("typos", 0)]
    assert search(corpus, "migraton overnihgt") == [("typos", 0)]
    result = corpus.provider(workspace="w").search(SessionQueryRequest(query="databse"))
    assert "**database**" in marked(result.matches[0])


@pytest.mark.parametrize("query", ["Pokémon", "pokemon", "POKEMON", "POKÉMON", "pokèmon"])
def test_accents_and_case_are_folded(corpus: PgSearch, query: str) -> None:
    assert search(corpus, query) == [("accents", 0)]


@pytest.mark.parametrize("query", ["東京", "写真", "東", "タワー"])
def test_short_cjk_queries_find_their_message(corpus: PgSearch, query: str) -> None:
    assert search(corpus, query) == [("cjk", 0)]


def test_word_forms_match_through_stems(corpus: PgSearch) -> None:
    assert search(corpus, "paint") == [("stems", 0)]
    assert search(corpus, "sunrise") == [("stems", 0)]


@pytest.mark.parametrize(
    "query",
    [
        "resolve_dirs(config)",
        "C++",
        "foo-bar",
        "%",
        "_",
        "'",
        "\\",
        "%_%",
        "a' OR 1=1 --",
        "''",
        '"',
        "\x00",
        "(((",
        "& | !",
    ],
)
def test_code_like_and_hostile_queries_never_error(corpus: PgSearch, query: str) -> None:
    result = corpus.provider(workspace="w").search(SessionQueryRequest(query=query))
    assert result.searched > 0


def test_code_like_query_finds_code(corpus: PgSearch) -> None:
    assert search(corpus, "resolve_dirs(config)") == [("code", 0)]
    assert search(corpus, "foo-bar") == [("code", 0)]


def test_punctuation_only_query_says_why_it_is_empty(corpus: PgSearch) -> None:
    result = corpus.provider(workspace="w").search(SessionQueryRequest(query="%%% ___"))
    assert result.matches == () and result.notice and "no searchable words" in result.notice


def test_stopword_only_query_still_answers(corpus: PgSearch) -> None:
    assert search(corpus, "the") != []


def test_filters_apply_before_the_limit(corpus: PgSearch) -> None:
    hits = search(corpus, "deploy", roles=("assistant",), limit=5, per_session=False)
    assert len(hits) == 5
    result = corpus.provider(workspace="w").search(
        SessionQueryRequest(query="deploy", roles=("assistant",), per_session=False, limit=50)
    )
    assert {m.role for m in result.matches} == {"assistant"}
    assert len(result.matches) == 12


def test_kind_tool_and_time_filters(corpus: PgSearch) -> None:
    assert search(corpus, "vault", tool_name="vault_read") == [("secrets", 1)]
    assert search(corpus, "vault", kinds=("user_text",)) == [("secrets", 0)]
    since = T0 + timedelta(minutes=150)
    until = T0 + timedelta(minutes=250)
    assert {s for s, _ in search(corpus, "flamingo", since=since, until=until)} == {
        "from-user",
        "from-assistant",
    }
    assert search(corpus, "flamingo", since=T0 + timedelta(minutes=250)) == []


def test_bookkeeping_kinds_only_when_named(pg: PgSearch) -> None:
    pg.append(
        workspace="w",
        session_id="s",
        messages=[
            {"role": "user", "content": "start"},
            {"role": "assistant", "content": "compacted: octopus plan", "kind": "goal"},
        ],
    )
    assert search(pg, "octopus") == []
    assert search(pg, "octopus", kinds=("goal",)) == [("s", 1)]


def test_per_session_and_cursor_paging_never_repeat_or_skip(corpus: PgSearch) -> None:
    provider = corpus.provider(workspace="w")
    for per_session in (True, False):
        full = provider.search(
            SessionQueryRequest(query="deploy service", per_session=per_session, limit=50)
        )
        everything = [(m.session_id, m.seq) for m in full.matches]
        assert len(everything) > 6
        if per_session:
            assert len({s for s, _ in everything}) == len(everything)
        paged: list[tuple[str, int]] = []
        cursor = None
        while True:
            page = provider.search(
                SessionQueryRequest(
                    query="deploy service", per_session=per_session, limit=3, cursor=cursor
                )
            )
            paged.extend((m.session_id, m.seq) for m in page.matches)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert paged == everything


def test_cursor_is_bound_to_query_and_tamper_proof(corpus: PgSearch) -> None:
    provider = corpus.provider(workspace="w")
    page = provider.search(SessionQueryRequest(query="deploy", limit=2))
    assert page.next_cursor
    with pytest.raises(InvalidQuery, match="different query"):
        provider.search(SessionQueryRequest(query="service", cursor=page.next_cursor))
    body, _, sig = page.next_cursor.partition(".")
    with pytest.raises(InvalidQuery):
        provider.search(SessionQueryRequest(query="deploy", cursor=body[:-2] + "AA." + sig))
    with pytest.raises(InvalidQuery):
        provider.search(SessionQueryRequest(query="deploy", cursor="garbage"))


def test_empty_query_browses_newest_first(corpus: PgSearch) -> None:
    result = corpus.provider(workspace="w").search(SessionQueryRequest(query="", limit=3))
    assert [m.session_id for m in result.matches] == ["code", "stems", "cjk"]
    all_hits = corpus.provider(workspace="w").search(
        SessionQueryRequest(query="", limit=50, per_session=False)
    )
    times = [m.created_at for m in all_hits.matches]
    assert times == sorted(times, reverse=True)


def test_browse_pages_never_repeat_or_skip(corpus: PgSearch) -> None:
    provider = corpus.provider(workspace="w")
    for per_session in (True, False):
        full = provider.search(SessionQueryRequest(query="", limit=50, per_session=per_session))
        paged: list[tuple[str, int]] = []
        cursor = None
        while True:
            page = provider.search(
                SessionQueryRequest(query="", limit=4, per_session=per_session, cursor=cursor)
            )
            paged.extend((m.session_id, m.seq) for m in page.matches)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert paged == [(m.session_id, m.seq) for m in full.matches]


def test_searched_counts_entries_in_scope(corpus: PgSearch) -> None:
    provider = corpus.provider(workspace="w")
    total = provider.search(SessionQueryRequest(query="nothingmatcheszz")).searched
    # 12 filler sessions x 2, plus 12 default-kind entries in the other sessions
    # (the tool output in "secrets" is not a default kind).
    assert total == 24 + 11
    assert provider.search(SessionQueryRequest(query="x", session_id="secrets")).searched == 2
    assert provider.search(SessionQueryRequest(query="x", roles=("user",))).searched == 12 + 8


def test_limit_is_capped_and_results_stay_small(pg: PgSearch) -> None:
    big = "alpha " + "word " * 5000
    for i in range(60):
        pg.append(workspace="w", session_id=f"s{i}", messages=[{"role": "user", "content": big}])
    result = pg.provider(workspace="w").search(
        SessionQueryRequest(query="alpha", limit=500, excerpt_bytes=100_000)
    )
    assert len(result.matches) == 50
    assert all(len(m.excerpt.encode()) <= 2000 for m in result.matches)
    text = sum(len(m.excerpt.encode()) + len((m.title or "").encode()) for m in result.matches)
    assert text <= MAX_RESULT_BYTES


def test_scope_cannot_be_widened(corpus: PgSearch) -> None:
    corpus.append(
        workspace="other", session_id="x", messages=[{"role": "user", "content": "flamingo"}]
    )
    pinned = corpus.provider(workspace="w", session_id="from-user")
    assert [m.session_id for m in pinned.search(SessionQueryRequest(query="flamingo")).matches] == [
        "from-user"
    ]
    with pytest.raises(ScopeError):
        pinned.search(SessionQueryRequest(query="flamingo", session_id="from-assistant"))
    with pytest.raises(ScopeError):
        pinned.search(SessionQueryRequest(query="flamingo", workspace_id="other"))
    with pytest.raises(ScopeError):
        pinned.around("from-assistant", 0)
    workspace_only = corpus.provider(workspace="w")
    assert all(
        m.workspace_id == "w"
        for m in workspace_only.search(SessionQueryRequest(query="flamingo")).matches
    )
    with pytest.raises(ScopeError):
        workspace_only.search(SessionQueryRequest(query="flamingo", workspace_id="other"))


def test_window_keeps_its_anchor_for_every_before_and_after(pg: PgSearch) -> None:
    pg.append(
        workspace="w",
        session_id="long",
        messages=[{"role": "user", "content": f"message {i}"} for i in range(40)],
    )
    provider = pg.provider(workspace="w")
    for anchor in (0, 1, 20, 38, 39):
        for before in (0, 1, 3, 7, 8, 15, 30):
            for after in (0, 1, 3, 8, 15, 30):
                window = provider.around("long", anchor, before=before, after=after)
                seqs = [m.seq for m in window.messages]
                assert anchor in seqs
                assert [m.anchor for m in window.messages].count(True) == 1
                assert len(seqs) <= 16
                assert seqs == sorted(seqs) and seqs == list(range(seqs[0], seqs[-1] + 1))
                want_before = min(before, anchor)
                if before + after + 1 <= 16:
                    assert seqs[0] == anchor - want_before
                    assert seqs[-1] == min(anchor + after, 39)


def test_around_unknown_message_is_not_found(pg: PgSearch) -> None:
    from pgsearch.errors import NotFound

    with pytest.raises(NotFound):
        pg.around(workspace="w", session_id="nope", seq=0)


def test_session_messages_pages(pg: PgSearch) -> None:
    pg.append(
        workspace="w",
        session_id="long",
        messages=[{"role": "user", "content": f"message {i}"} for i in range(40)],
    )
    seen: list[int] = []
    start: int | None = 0
    while start is not None:
        page = pg.session_messages(workspace="w", session_id="long", start_seq=start, limit=16)
        seen.extend(m.seq for m in page.messages)
        start = page.next_seq
    assert seen == list(range(40))


def test_phrase_in_quotes_is_preferred(pg: PgSearch) -> None:
    pg.append(
        workspace="w",
        session_id="apart",
        messages=[{"role": "user", "content": "red car and blue house"}],
    )
    pg.append(
        workspace="w",
        session_id="together",
        messages=[{"role": "user", "content": "blue car and red house"}],
    )
    assert search(pg, '"red house"')[0] == ("together", 0)


def test_invalid_requests_are_clear(corpus: PgSearch) -> None:
    provider = corpus.provider(workspace="w")
    with pytest.raises(InvalidQuery, match="unknown kind"):
        provider.search(SessionQueryRequest(query="x", kinds=("nope",)))
    with pytest.raises(InvalidQuery, match="limit"):
        provider.search(SessionQueryRequest(query="x", limit=0))
    with pytest.raises(InvalidQuery, match="characters"):
        provider.search(SessionQueryRequest(query="x" * 100_000))
    with pytest.raises(InvalidQuery, match="distinct words"):
        provider.search(SessionQueryRequest(query=" ".join(f"w{i}" for i in range(100))))
    with pytest.raises(InvalidQuery, match="since"):
        provider.search(SessionQueryRequest(query="x", since=T0, until=T0))


def test_typing_a_session_title_brings_that_session_first(pg: PgSearch) -> None:
    pg.append(
        workspace="w",
        session_id="named",
        messages=[msg("user", "start with the cron entry", 1, title="Nightly backup rotation")],
    )
    pg.append(
        workspace="w",
        session_id="chatty",
        messages=[
            msg("user", "nightly backup rotation: the nightly backup rotation is slow", 2),
            msg("assistant", "the rotation of the nightly backup takes an hour", 3),
        ],
    )
    for i in range(6):
        pg.append(workspace="w", session_id=f"other{i}", messages=[msg("user", FILLER[i % 4], 9)])
    result = pg.search(SessionQueryRequest(query="nightly backup rotation"), workspace="w")
    assert [m.session_id for m in result.matches][:2] == ["named", "chatty"]


def test_a_long_tool_error_holding_a_rare_word_stays_above_the_floor(pg: PgSearch) -> None:
    noise = " ".join(f"line {i} of the linker output was unremarkable" for i in range(600))
    pg.append(
        workspace="w",
        session_id="chat",
        messages=[msg("user", "the nightly build failed on the runner again", i) for i in range(5)],
    )
    for i in range(20):
        pg.append(workspace="w", session_id=f"other{i}", messages=[msg("user", FILLER[i % 4], 9)])
    pg.append(
        workspace="w",
        session_id="ci",
        messages=[
            msg("tool", f"{noise} undefined reference in xmlsec1 while linking", 10, is_error=True)
        ],
    )
    result = pg.search(
        SessionQueryRequest(query="nightly build failed on runner xmlsec1", per_session=False),
        workspace="w",
    )
    assert "ci" in {m.session_id for m in result.matches}


def test_excerpt_of_a_hit_on_a_long_identifier_shows_the_identifier(pg: PgSearch) -> None:
    text = (
        "The cache was warm this morning. "
        + "Then we went through the deploy notes and the release checklist. " * 8
        + "Now test_cache_invalidation_version_mismatch fails on the second run."
    )
    pg.append(workspace="w", session_id="s", messages=[msg("user", text, 1)])
    result = pg.search(
        SessionQueryRequest(query="test_cache_invalidation_version_mismatch", excerpt_bytes=160),
        workspace="w",
    )
    (match,) = result.matches
    assert "**invalidation**" in marked(match) and "warm" not in match.excerpt


def test_searched_equals_a_count_of_the_scope(dsn: str, pg: PgSearch, tmp_path: Path) -> None:
    """With a role or tool filter the scope's size comes from the scope counts kept at
    write time: after appends, files, a kind given by the writer, tools called
    together, a forgotten session and a forgotten workspace, every filter's
    ``searched`` equals a count of its entries."""

    def turn(i: int) -> list[dict[str, Any]]:
        calls = [
            {"id": f"c{i}-{n}", "function": {"name": name, "arguments": "{}"}}
            for n, name in enumerate(("bash", "grep")[: 1 + i % 2])
        ]
        return [
            msg("user", f"question {i} cron", i),
            msg("assistant", f"answer {i} cron", i),
            msg("assistant", None, i, tool_calls=calls),
            msg("tool", f"Error: failed {i} cron", i, tool_call_id=f"c{i}-0", name="bash"),
            msg("tool", f"output {i} cron", i, name="grep" if i % 3 else "edit"),
            msg("user", f"summary {i} cron", i, kind="summary"),
        ]

    for s in range(5):
        pg.append(workspace="w", session_id=f"s{s}", messages=turn(s) + turn(s + 10))
        pg.append(workspace="gone", session_id=f"s{s}", messages=turn(s))
    pg.ingest_file(write_jsonl(tmp_path / "file.jsonl", turn(7)), workspace="w")
    pg.forget(workspace="w", session_id="s1")
    pg.forget(workspace="gone")
    provider = pg.provider(workspace="w")
    kinds_choices: list[tuple[str, ...]] = [
        (),
        ("tool_error", "tool_output"),
        ("summary",),
        policy.ALL_KINDS,
    ]
    with psycopg.connect(dsn) as conn:
        for kinds, roles, tool in itertools.product(
            kinds_choices, [(), ("user",), ("assistant", "tool")], [None, "bash", "grep", "edit"]
        ):
            if not roles and tool is None:
                continue
            result = provider.search(
                SessionQueryRequest(query="cron", kinds=kinds, roles=roles, tool_name=tool)
            )
            (counted,) = conn.execute(
                "SELECT count(*) FROM messages WHERE workspace_id = 'w' AND kind = ANY(%s)"
                " AND (cardinality(%s::text[]) = 0 OR role = ANY(%s))"
                " AND (%s::text IS NULL OR %s = ANY(string_to_array(tool_name, %s)))",
                (
                    list(kinds or policy.DEFAULT_SEARCH_KINDS),
                    list(roles),
                    list(roles),
                    tool,
                    tool,
                    policy.TOOL_NAME_SEPARATOR,
                ),
            ).fetchone() or (0,)
            assert result.searched == counted, (kinds, roles, tool)
        (left,) = conn.execute("SELECT count(*) FROM scope_counts").fetchone() or (0,)
    assert left > 0
    assert_statistics_exact(dsn, "w")
    assert_statistics_exact(dsn, "gone")


def test_a_session_found_only_by_its_title_or_summary_is_shown_at_its_latest_summary(
    pg: PgSearch,
) -> None:
    """A session no message of which matched, found by its title or its summary, is
    shown at its latest summary entry when it has one, else at its first entry."""

    def add(session: str, *messages: dict[str, Any]) -> None:
        pg.append(workspace="anchors", session_id=session, messages=list(messages))

    add("plain", msg("user", "hello there", 1, title="Zeppelin hangar checklist"))
    add("plain", msg("assistant", "hi", 2))
    add(
        "summarised",
        msg("user", "hello again", 10, title="Zeppelin route"),
        msg("user", "an early overview of the trip", 11, kind="summary"),
        msg("assistant", "noted", 12),
        msg("user", "the latest overview of the trip", 13, kind="summary"),
        msg("assistant", "fine", 14),
    )
    add(
        "by-summary",
        msg("user", "good morning", 20),
        msg("user", "the quokka census notes", 21, kind="summary"),
        msg("assistant", "ok", 22),
    )
    provider = pg.provider(workspace="anchors")
    for per_session in (True, False):
        shown = provider.search(SessionQueryRequest(query="zeppelin", per_session=per_session))
        assert sorted((m.session_id, m.seq) for m in shown.matches) == [
            ("plain", 0),
            ("summarised", 3),
        ]
        shown = provider.search(SessionQueryRequest(query="quokka", per_session=per_session))
        assert [(m.session_id, m.seq) for m in shown.matches] == [("by-summary", 1)]

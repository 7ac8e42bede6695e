"""Hostile queries: whatever a caller sends, search answers or says clearly why not.

Hypothesis builds requests from any Unicode (control characters, NUL, lone
surrogates), 100 KB strings, SQL / tsquery / regex / LIKE syntax, quotes and
backslashes, used as the query text *and* as every filter value (kinds, roles,
tool name, session id, cursor, time range, workspace), plus wrong types. Each one
goes through `Provider.search` on a real database. The only outcomes allowed are a
result that respects every bound, or `InvalidQuery` (`ScopeError` is one); a driver
error, a `StoreError` or any other exception fails. The server's counter of
sequential scans on `messages` must not move while all of that runs.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgsearch import InvalidQuery, PgSearch, ScopeError, SessionQueryRequest
from pgsearch.api import Provider
from pgsearch.errors import NotFound, PgSearchError
from pgsearch.policy import ALL_KINDS, ROLES
from pgsearch.settings import Settings
from pgsearch.types import MAX_EXCERPT_BYTES, MAX_LIMIT, MAX_RESULT_BYTES, SessionQueryResult
from tests.conftest import Databases
from tests.helpers import text_size
from tests.reliability.conftest import messages_seq_scans

WS = "hostile"
OTHER_WS = "bystander"
T0 = datetime(2026, 3, 1, tzinfo=UTC)

# Text that means something to SQL, tsquery, LIKE, regular expressions, printf or
# JSON, and characters that trip encoders.
SYNTAX = [
    "'",
    '"',
    "\\",
    "\\\\",
    "%",
    "_",
    "%%",
    "\\%",
    "%_%",
    "' OR '1'='1",
    "'; DROP TABLE messages; --",
    "/* */",
    "$$",
    "$1",
    "%s",
    "%(ws)s",
    "{}",
    "{0}",
    "a & b",
    "a | !b",
    "!!a",
    "a <-> b",
    "a <2> b",
    "foo:*",
    "foo:AB",
    "(((",
    ")))",
    "&|!",
    ".*",
    "^$",
    "(a|b)+",
    "[^a-z]",
    "\\d+\\b",
    "(?i)",
    "*",
    "?",
    "\x00",
    "\x01\x02\x1b[31m",
    "\r\n",
    "\t",
    "\ud800",
    "\udfff",
    "\ud83d",
    "\u202e",
    "\ufeff",
    "\u200b",
    "\u0301",
    "\uffff",
    "\U0010ffff",
    "東京",
    "설정",
    "ß",
    "İ",
    "ﬁ",
    "ǅ",
    "\U0001d518\U0001d52b\U0001d526",  # mathematical letters
    "😀",
    "🏳️‍🌈",
    "null",
    "NaN",
    "-0",
    "9" * 40,
]
# Words of the corpus, so that some hostile requests do match something.
CORPUS_WORDS = [
    "cron",
    "refactor",
    "100%",
    "foo_bar",
    "resolve_dirs(config)",
    "C++",
    "O'Brien",
    "back\\slash",
    "naïve",
    "東京タワー",
    "deploy",
    "grep",
    "secret",
]
BIG = [
    "x" * 100_000,
    "é" * 100_000,
    "a " * 50_000,
    "\x00" * 100_000,
    "\ud800" * 100_000,
    " ".join(f"w{i}" for i in range(20_000))[:100_000],
    "'" * 100_000,
    "(" * 100_000,
    "東" * 100_000,
]

any_char = st.characters(codec=None, exclude_categories=())
any_text = st.text(alphabet=any_char, max_size=40)
hostile_text = st.one_of(
    any_text,
    st.sampled_from(SYNTAX + CORPUS_WORDS),
    st.lists(st.sampled_from(SYNTAX + CORPUS_WORDS), min_size=1, max_size=12).map(" ".join),
    st.lists(st.one_of(st.sampled_from(SYNTAX), any_text), min_size=1, max_size=8).map("".join),
    st.sampled_from(BIG),
)
wrong_type = st.sampled_from([None, 0, -1, 2**70, 1.5, b"bytes", ["x"], {"k": "v"}, True])
names = st.one_of(
    st.just(()),
    st.lists(st.one_of(st.sampled_from(ALL_KINDS + ROLES), hostile_text), max_size=4).map(tuple),
    st.sampled_from(["user_text", "user", None, (1,), ([],), {"a": 1}]),
)
offsets = st.sampled_from(
    [None, UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-12, minutes=-59))]
)
times = st.one_of(
    st.none(),
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=offsets),
    st.sampled_from([datetime.min, datetime.max, "2026-01-01", 0]),
)
numbers = st.one_of(
    st.integers(min_value=-3, max_value=60),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([True, False, 10**30, 1.5, "10", None]),
)


@dataclass
class Corpus:
    dsn: str
    pg: PgSearch
    sessions: list[str]
    cursors: list[str]


def _message(role: str, content: str, i: int, **extra: Any) -> dict[str, Any]:
    when = (T0 + timedelta(minutes=i)).isoformat()
    return {"role": role, "content": content, "created_at": when, **extra}


@pytest.fixture(scope="module")
def corpus(databases: Databases, template_db: str) -> Iterator[Corpus]:
    name = databases.create(template=template_db, prefix="hostileq")
    dsn = databases.dsn(name)
    texts = [
        "the cron refactor moved jobs to a queue",
        "progress is 100% and foo_bar is renamed",
        "resolve_dirs(config) fails for C++ builds",
        "O'Brien asked about back\\slash escapes in paths",
        "a naïve parser for 東京タワー timetables",
        "deploy with the secret key from the vault",
        "select * from messages where x like '%_%'",
        "regex (a|b)+ and tsquery a & !b | c:* are text",
    ]
    with PgSearch.connect(dsn) as pg:
        sessions = []
        for s, sid in enumerate(["s-plain", "s'quote", "s%percent", "s_under", "s\\back", "東京"]):
            msgs = []
            for i, text in enumerate(texts):
                role = ROLES[(i + s) % 3]
                extra: dict[str, Any] = {}
                if role == "assistant" and i % 2:
                    extra["tool_calls"] = [{"id": f"c{i}", "function": {"name": "grep"}}]
                msgs.append(_message(role, f"{text} ({sid})", s * 20 + i, **extra))
            pg.append(workspace=WS, session_id=sid, messages=msgs)
            sessions.append(sid)
        pg.append(
            workspace=OTHER_WS,
            session_id="s-plain",
            messages=[_message("user", "the cron refactor of the bystander", 0)],
        )
        provider = pg.provider(workspace=WS)
        cursors = []
        for query in ["", "cron", "the", "refactor queue"]:
            result = provider.search(SessionQueryRequest(query=query, limit=1, per_session=False))
            if result.next_cursor:
                cursors.append(result.next_cursor)
        assert cursors
        yield Corpus(dsn=dsn, pg=pg, sessions=sessions, cursors=cursors)
    databases.drop(name)


def _tampered(cursor: str, i: int) -> str:
    pos = i % len(cursor)
    swap = "A" if cursor[pos] != "A" else "B"
    return cursor[:pos] + swap + cursor[pos + 1 :]


def check_result(result: SessionQueryResult, provider: Provider) -> None:
    """Every bound a result promises, whatever the request was."""
    assert isinstance(result, SessionQueryResult)
    assert len(result.matches) <= MAX_LIMIT
    assert text_size(result) <= MAX_RESULT_BYTES
    assert result.searched >= 0
    for m in result.matches:
        assert m.workspace_id == provider.scope.workspace
        if provider.scope.session_id is not None:
            assert m.session_id == provider.scope.session_id
        assert len(m.excerpt.encode("utf-8")) <= MAX_EXCERPT_BYTES


def _request(draw: st.DrawFn, corpus: Corpus) -> SessionQueryRequest:
    fields: dict[str, Any] = {}
    if draw(st.booleans()):
        fields["query"] = draw(st.one_of(hostile_text, st.sampled_from(CORPUS_WORDS)))
    for name, strategy in (
        ("kinds", names),
        ("roles", names),
        ("tool_name", st.one_of(hostile_text, st.just("grep"), wrong_type)),
        ("session_id", st.one_of(hostile_text, st.sampled_from(corpus.sessions), wrong_type)),
        (
            "cursor",
            st.one_of(
                hostile_text,
                st.sampled_from(corpus.cursors),
                st.tuples(st.sampled_from(corpus.cursors), st.integers(0, 200)).map(
                    lambda c: _tampered(*c)
                ),
                wrong_type,
            ),
        ),
        ("since", times),
        ("until", times),
        ("workspace_id", st.one_of(st.just(WS), st.just(OTHER_WS), hostile_text, wrong_type)),
        ("limit", numbers),
        ("excerpt_bytes", numbers),
        ("per_session", st.booleans()),
    ):
        if draw(st.integers(0, 3)) == 0:
            fields[name] = draw(strategy)
    return SessionQueryRequest(**fields)


def test_hostile_requests_get_results_or_invalid_query(corpus: Corpus) -> None:
    outcomes: Counter[str] = Counter()
    providers = [
        corpus.pg.provider(workspace=WS),
        corpus.pg.provider(workspace=WS, session_id="s'quote"),
    ]
    before = messages_seq_scans(corpus.dsn)

    @settings(
        max_examples=1000,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        provider = providers[data.draw(st.integers(0, 1))]
        request = _request(data.draw, corpus)
        try:
            result = provider.search(request)
        except ScopeError:
            outcomes["scope error"] += 1
        except InvalidQuery as exc:
            assert str(exc), "an InvalidQuery must say what is wrong"
            outcomes["invalid query"] += 1
        else:
            check_result(result, provider)
            outcomes["matches" if result.matches else "no matches"] += 1

    run()
    print(f"hostile requests: {dict(outcomes)}")
    assert messages_seq_scans(corpus.dsn) == before, "a search ran a sequential scan of messages"
    total = sum(outcomes.values())
    assert total >= 1000
    # Both kinds of outcome occur: the generator is neither all junk nor all valid.
    assert outcomes["matches"] > 20 and outcomes["invalid query"] > 20, outcomes


@pytest.mark.parametrize("text", SYNTAX + CORPUS_WORDS + BIG)
def test_each_hostile_string_in_every_field(corpus: Corpus, text: str) -> None:
    """Each fixed hostile string as the query and as every filter value, alone."""
    provider = corpus.pg.provider(workspace=WS)
    before = messages_seq_scans(corpus.dsn)
    for field in ("query", "tool_name", "session_id", "cursor", "workspace_id"):
        for kinds in ((), ALL_KINDS):
            try:
                result = provider.search(SessionQueryRequest(kinds=kinds, **{field: text}))
            except InvalidQuery:
                continue
            check_result(result, provider)
    for field in ("kinds", "roles"):
        try:
            provider.search(SessionQueryRequest(query="cron", **{field: (text,)}))
        except InvalidQuery:
            continue
    assert messages_seq_scans(corpus.dsn) == before


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("100%", "100%"),
        ("foo_bar", "foo_bar"),
        ("resolve_dirs(config)", "resolve_dirs(config)"),
        ("C++", "C++"),
        ("O'Brien", "O'Brien"),
        ("back\\slash", "back\\slash"),
        ("like '%_%'", "like"),
        ("a & !b | c:*", "tsquery"),
        ("(a|b)+", "regex"),
        ("東京", "東京"),
    ],
)
def test_syntax_in_queries_is_data_and_still_finds(
    corpus: Corpus, query: str, expected: str
) -> None:
    result = corpus.pg.provider(workspace=WS).search(SessionQueryRequest(query=query))
    assert result.matches, query
    assert result.notice is None
    # The query's words are searched as words: the text written with the syntax is
    # among the first hits (others holding the same short words may outrank it).
    excerpts = [m.excerpt.lower() for m in result.matches[:3]]
    assert any(expected.lower() in excerpt for excerpt in excerpts), excerpts


@pytest.mark.parametrize("query", ["'%_%'", "%", "\\", "&|!", "\x00", "\ud800", "(((", "--"])
def test_syntax_alone_says_there_is_nothing_to_search(corpus: Corpus, query: str) -> None:
    result = corpus.pg.provider(workspace=WS).search(SessionQueryRequest(query=query))
    assert result.matches == ()
    assert result.notice == "the query has no searchable words"
    assert result.searched > 0


def test_query_size_limits_are_named_settings_with_clear_errors(dsn: str) -> None:
    settings_ = Settings.from_env(dsn=dsn, max_query_chars=500, max_query_terms=5)
    with PgSearch.connect(settings=settings_) as pg:
        provider = pg.provider(workspace=WS)
        provider.search(SessionQueryRequest(query="x" * 500))
        with pytest.raises(InvalidQuery, match=r"501 characters; the limit is 500"):
            provider.search(SessionQueryRequest(query="x" * 501))
        provider.search(SessionQueryRequest(query="a b c d e a b c d e"))
        with pytest.raises(InvalidQuery, match=r"6 distinct words; the limit is 5"):
            provider.search(SessionQueryRequest(query="a b c d e f"))
    with PgSearch.connect(dsn) as pg:
        with pytest.raises(InvalidQuery, match="limit is 2,000"):
            pg.provider(workspace=WS).search(SessionQueryRequest(query="y" * 100_000))


def test_hostile_windows_and_listings(corpus: Corpus) -> None:
    """around / session_messages with hostile ids and positions: a window, NotFound,
    or InvalidQuery (ScopeError for a session-pinned provider), nothing else."""
    providers = [
        corpus.pg.provider(workspace=WS),
        corpus.pg.provider(workspace=WS, session_id="s_under"),
    ]
    ids: list[Any] = [*corpus.sessions, *SYNTAX, *BIG[:3], "", None, 5, ["s-plain"]]
    positions: list[Any] = [0, 3, 7, 8, -1, 2**31, 2**70, True, None, "1", 1.5]
    before = messages_seq_scans(corpus.dsn)
    tried: Counter[str] = Counter()
    for provider, sid, seq, listing in itertools.product(providers, ids, positions, (0, 1)):
        try:
            if listing:
                window = provider.session_messages(sid, start_seq=seq, limit=seq)
            else:
                window = provider.around(sid, seq, before=seq, after=10**9)
        except (InvalidQuery, NotFound) as exc:
            tried[type(exc).__name__] += 1
            continue
        except PgSearchError as exc:
            raise AssertionError(f"{sid!r} {seq!r}: {type(exc).__name__}: {exc}") from exc
        tried["window"] += 1
        assert len(window.messages) <= 16
        assert all(m.session_id == sid for m in window.messages)
    assert messages_seq_scans(corpus.dsn) == before
    assert tried["window"] and tried["NotFound"] and tried["InvalidQuery"], tried

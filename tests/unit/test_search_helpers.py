"""Pure helpers of the search engine: tsquery text, tf parsing, cursors, positions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pgsearch.cursor import CursorCodec, browse_position, ranked_position
from pgsearch.db.queries import tsquery_and, tsquery_or, tsquery_phrases
from pgsearch.db.reads import parse_tf
from pgsearch.errors import InvalidQuery
from pgsearch.ranking import Expansion


def exp(term: str, group: int = 0) -> Expansion:
    return Expansion(group, term, 1.0, 1)


def test_parse_tf_counts_positions() -> None:
    assert parse_tf("'cron':1A,4A,9A 'job':2A '東京':3A") == {"cron": 3, "job": 1, "東京": 1}
    assert parse_tf("") == {}
    assert parse_tf(None) == {}


def test_tsquery_text() -> None:
    groups = [[exp("cron"), exp("crons")], [exp("job")]]
    assert tsquery_and(groups) == "('cron' | 'crons') & ('job')"
    assert tsquery_or(groups) == "'cron' | 'crons' | 'job'"
    assert tsquery_phrases([["a", "b"], ["c"]]) == "('a' <-> 'b')"
    assert tsquery_phrases([]) is None


def test_tsquery_text_quotes_what_tsquery_would_parse() -> None:
    assert tsquery_or([[exp("it's"), exp("a\\b")]]) == "'it''s' | 'a\\\\b'"


def test_cursor_round_trip_and_tamper() -> None:
    codec = CursorCodec(b"k" * 32)
    token = codec.encode("fp", [1.5, 2.0, "s", 3])
    assert codec.decode(token, "fp") == [1.5, 2.0, "s", 3]
    with pytest.raises(InvalidQuery, match="different query"):
        codec.decode(token, "other")
    with pytest.raises(InvalidQuery):
        CursorCodec(b"x" * 32).decode(token, "fp")
    with pytest.raises(InvalidQuery):
        codec.decode("!!!", "fp")


def test_cursor_positions_decode_or_fail_clearly() -> None:
    assert ranked_position(None) is None
    assert ranked_position([-1.5, -2, "s", "3"]) == (-1.5, -2.0, "s", 3)
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert browse_position([when.isoformat(), "s", 7]) == (when, "s", 7)
    for bad in ([1.0], ["x", 1.0, "s", 1], []):
        with pytest.raises(InvalidQuery, match="malformed"):
            ranked_position(bad)
    with pytest.raises(InvalidQuery, match="malformed"):
        browse_position(["not a time", "s", 1])

"""Pure helpers of the search engine: tsquery text, tf parsing, cursors, units."""

from __future__ import annotations

import pytest

from pgsearch.cursor import CursorCodec
from pgsearch.errors import InvalidQuery
from pgsearch.normalize import query_words
from pgsearch.ranking import Expansion
from pgsearch.search import (
    _units,
    parse_tf,
    tsquery_and,
    tsquery_or,
    tsquery_phrases,
)


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


def test_units_group_chunks_and_drop_unknown_words() -> None:
    words, _ = query_words("resolve_dirs(config) cron zzunknown")
    expanded = {
        "resolve": [exp("resolve")],
        "dirs": [exp("dirs")],
        "config": [exp("config")],
        "cron": [exp("cron")],
    }
    units = _units(words, expanded)
    assert [[g[0].term for g in u] for u in units] == [["resolve", "dirs", "config"], ["cron"]]


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


def test_utf8_byte_order_mark_is_skipped() -> None:
    from pgsearch.messages import iter_jsonl

    entries = list(
        iter_jsonl(b'\xef\xbb\xbf{"role": "user", "content": "hi"}\n', path="x", session_id="s")
    )
    assert [(e.seq, e.content) for e in entries] == [(0, "hi")]

"""What `pgsearch doctor` says about the server's buffer cache (`diagnose.ServerFacts`)."""

from __future__ import annotations

from dataclasses import replace

from pgsearch.db import diagnose
from pgsearch.db.connector import HEAD_REVISION

MB = 1024 * 1024

FACTS = diagnose.ServerFacts(
    version="15.0",
    version_num=150000,
    database="d",
    user="u",
    encoding="UTF8",
    collate="C.UTF-8",
    ctype="C.UTF-8",
    locale_provider="libc",
    trigrams_see_accents=True,
    extensions=(),
    revision=HEAD_REVISION,
    head_revision=HEAD_REVISION,
    database_bytes=3000 * MB,
    tables=(
        ("ingested_files", 500 * MB, 500 * MB),
        ("messages", 800 * MB, 400 * MB),
        ("sessions", 10 * MB, 10 * MB),
        ("vocabulary", 250 * MB, 290 * MB),
        ("workspace_stats", 1 * MB, 1 * MB),
    ),
    cache_bytes=128 * MB,
    cache_hits=900,
    cache_reads=100,
)


def test_the_searched_tables_and_their_indexes_are_what_the_cache_is_held_against() -> None:
    assert FACTS.searched_bytes == (800 + 400 + 10 + 10 + 250 + 290 + 1 + 1) * MB
    assert FACTS.hit_ratio == 0.9
    assert replace(FACTS, cache_hits=0, cache_reads=0).hit_ratio is None


def test_a_cache_far_smaller_than_the_searched_tables_gets_a_note_and_no_problem() -> None:
    note = FACTS.cache_note()
    assert note is not None and "shared_buffers" in note and "bench/README.md" in note
    assert FACTS.problems() == []
    # A quarter of the searched bytes or more: nothing to say.
    quarter = int(diagnose.CACHE_HINT_SHARE * FACTS.searched_bytes) + 1
    assert replace(FACTS, cache_bytes=quarter).cache_note() is None
    assert replace(FACTS, cache_bytes=quarter - 2).cache_note() is not None
    # No tables (no schema yet): nothing to compare.
    assert replace(FACTS, tables=()).cache_note() is None

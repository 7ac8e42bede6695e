"""The trigram index's pending list, which every typo lookup scans whole, stays short.

A new vocabulary term's trigrams wait in GIN's pending list until a writer merges it.
Small writes merge it at 1 MB (`queries.SMALL_WRITE_PENDING`), not at the server's
4 MB; a bulk load merges it when it ends (`Store.after_bulk_load`).
"""

from __future__ import annotations

import itertools
import random
import string
from collections.abc import Iterator
from pathlib import Path

import psycopg

from pgsearch import PgSearch, SessionQueryRequest
from pgsearch.ingest.batch import MAINTAIN_AFTER
from tests.helpers import write_jsonl

#: Pages of a 1 MB list (what small writes keep at most), and a margin for the
#: entries of the write that crosses it.
SMALL_LIMIT_PAGES = 1024 // 8
MARGIN_PAGES = 8


def _pending_pages(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
        row = conn.execute(
            "SELECT pending_pages FROM pgstatginindex('vocabulary_term_trgm_idx')"
        ).fetchone()
    assert row is not None
    return int(row[0])


def _new_words(seed: int) -> Iterator[str]:
    """Made-up words of 6-10 letters a typo lookup can use, each new."""
    rng = random.Random(seed)
    seen: set[str] = set()
    while True:
        word = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(6, 10)))
        if word not in seen:
            seen.add(word)
            yield word


def test_small_writes_keep_the_trigram_pending_list_short(pg: PgSearch, dsn: str) -> None:
    # Autovacuum would merge the list too, at a time of its own: not in this database.
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE vocabulary SET (autovacuum_enabled = false)")
    words = _new_words(1)
    # 400 appends of 20 new terms each: 8,000 terms, about twice what fills 1 MB.
    for i in range(400):
        text = " ".join(itertools.islice(words, 20))
        pg.append(
            workspace="w", session_id=f"s{i % 7}", messages=[{"role": "user", "content": text}]
        )
    pages = _pending_pages(dsn)
    assert pages <= SMALL_LIMIT_PAGES + MARGIN_PAGES, pages
    # The terms are all there, and found through the trigram index: one letter off.
    word = next(w for w in _new_words(1) if len(w) >= 9)
    typo = word[:-1] + ("a" if word[-1] != "a" else "b")
    found = pg.search(SessionQueryRequest(query=typo, limit=5), workspace="w")
    assert found.matches and word in found.matches[0].excerpt.lower()


def test_a_bulk_load_leaves_no_pending_list(pg: PgSearch, dsn: str, tmp_path: Path) -> None:
    # A load large enough for upkeep (`batch.MAINTAIN_AFTER` messages), written in
    # groups of thousands of new terms: those keep the server's limit, and the load
    # merges the list when it ends.
    words = _new_words(2)
    per_file = MAINTAIN_AFTER // 40
    for f in range(40):
        rows = [
            {"role": "user", "content": " ".join(itertools.islice(words, 3))}
            for _ in range(per_file)
        ]
        write_jsonl(tmp_path / f"s{f}.jsonl", rows)
    report = pg.ingest_paths([tmp_path], workspace="w")
    assert report.messages == 40 * per_file >= MAINTAIN_AFTER
    assert _pending_pages(dsn) == 0

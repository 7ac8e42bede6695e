"""Searches against the length of the trigram index's pending list.

    python -m bench.pending --dsn postgresql://127.0.0.1:5432/pgsearch_bench_1m
    python -m bench.pending --dsn ... --pages 0,128,512 --classes typo --rounds 5

A new vocabulary term's trigrams wait in GIN's pending list until a writer merges the
list, and every typo lookup scans the whole list. The server merges it at
``gin_pending_list_limit`` (4 MB unless configured); pgsearch's small writes merge
it at 1 MB (`pgsearch.db.queries.SMALL_WRITE_PENDING`). Between merges the list
grows with each new term, so a database taking appends has a list of any length up
to the limit: about half of it on average.

Against a database a benchmark kept (``bench.speed --keep-db``), for each length in
``--pages``: the list is merged, filler terms (made-up words in a workspace of their
own, which no query reads) are added until it holds about that many pages (the
inserting session's own limit set out of the way), and the first ``--per-class``
queries of each class are searched through the Python API with excerpts, one best
hit per session, ``--rounds`` times after one warm-up pass; p50 per class and length.
The filler is removed and the list merged at the end. Needs the ``pgstattuple``
extension (contrib; made here if missing) and ownership of the index (the user that
created the database).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import psycopg

from bench.speed import load_queries, request_for, sample_queries
from pgsearch import PgSearch

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ROOT / "bench" / "results" / "corpus-1M" / "queries.jsonl"
FILLER = "~pending-filler"
#: Filler terms per pending-list page (measured: made-up words of 32 letters).
TERMS_PER_PAGE = 11


def pending_pages(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT pending_pages FROM pgstatginindex('vocabulary_term_trgm_idx')"
    ).fetchone()
    assert row is not None
    return int(row[0])


def clear(conn: psycopg.Connection[Any]) -> None:
    conn.execute("DELETE FROM vocabulary WHERE workspace_id = %s", (FILLER,))
    conn.execute("SELECT gin_clean_pending_list('vocabulary_term_trgm_idx'::regclass)")


def fill(conn: psycopg.Connection[Any], pages: int) -> int:
    """Merge the list, then add filler terms until it holds about `pages` pages."""
    clear(conn)
    if pages:
        with conn.transaction():
            conn.execute("SET LOCAL gin_pending_list_limit = '64MB'")
            conn.execute(
                "INSERT INTO vocabulary (workspace_id, term, stem, df) "
                "SELECT %s, t, t, 1 FROM (SELECT translate(md5(i::text), '0123456789', "
                "'ghijklmnop') AS t FROM generate_series(1, %s) i) s ON CONFLICT DO NOTHING",
                (FILLER, pages * TERMS_PER_PAGE),
            )
    return pending_pages(conn)


def p50s(pg: PgSearch, queries: list[dict[str, Any]], rounds: int) -> dict[str, float]:
    def run(q: dict[str, Any]) -> float:
        provider = pg.provider(workspace=q["workspace"], session_id=q.get("session"))
        t0 = time.perf_counter()
        provider.search(request_for(q, per_session=True))
        return (time.perf_counter() - t0) * 1000

    for q in queries:
        run(q)
    times: dict[str, list[float]] = {}
    for _ in range(rounds):
        for q in queries:
            times.setdefault(q["class"], []).append(run(q))
    return {c: round(statistics.median(v), 2) for c, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--queries", type=Path, default=QUERIES)
    parser.add_argument("--classes", default="exact,typo,accent")
    parser.add_argument("--pages", default="0,64,128,256,512")
    parser.add_argument("--per-class", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    classes = args.classes.split(",")
    queries = [
        q
        for q in sample_queries(load_queries(args.queries), args.per_class)
        if q["class"] in classes
    ]
    levels = [int(p) for p in args.pages.split(",")]
    rows: list[dict[str, Any]] = []
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
        try:
            with PgSearch.connect(args.dsn) as pg:
                for level in levels:
                    pages = fill(conn, level)
                    row = {"pages": pages, **p50s(pg, queries, args.rounds)}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
        finally:
            clear(conn)
    print()
    print("| pending pages | " + " | ".join(f"{c} p50 ms" for c in classes) + " |")
    print("|---:|" + "---:|" * len(classes))
    for row in rows:
        print(f"| {row['pages']} | " + " | ".join(f"{row[c]:.2f}" for c in classes) + " |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

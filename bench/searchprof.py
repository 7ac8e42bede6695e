"""Where the time of one search goes: Python, driver, server, round trips, per class.

    python -m bench.searchprof --dsn postgresql://127.0.0.1:5432/pgsearch_bench_ab_new_100k
    python -m bench.searchprof --dsn ... --classes browse,exact --per-class 100

For the benchmark corpus's queries (`bench.speed`), against a database a benchmark
kept, each class is searched through the Python API (excerpts included), warm:

- ``wall``: median milliseconds end to end;
- ``trips``: round trips per search (the driver's own count);
- ``server``: median server time of the search's statements, planning and execution
  (``EXPLAIN (ANALYZE)`` of each statement the search sent, run again afterwards;
  BEGIN, settings and COMMIT are not counted);
- a profile (cProfile, every search of the class) split into waiting for the server
  (socket waits), the driver (psycopg and pgsearch.db), excerpts, scoring and
  planning, and the rest, in milliseconds per search.

Waiting minus server time is the network and the server's protocol work: what a
round trip costs beyond its statements.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import time
from pathlib import Path
from typing import Any

import psycopg

from bench.speed import load_queries, request_for, sample_queries
from pgsearch import PgSearch

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ROOT / "bench" / "results" / "corpus-100k" / "queries.jsonl"
CLASSES = ("browse", "session", "exact", "typo", "accent", "cjk", "common", "short", "multi")

#: (category, a test of a function's file and name); the first that holds wins.
_CATEGORIES: tuple[tuple[str, Any], ...] = (
    ("wait", lambda f, n: "psycopg" in f and ("waiting" in f or n in {"wait", "wait_conn"})),
    ("wait", lambda f, n: n in {"select", "poll", "<method 'poll'", "epoll"}),
    ("excerpt", lambda f, n: "pgsearch/excerpt" in f or "pgsearch/policy" in f),
    ("score", lambda f, n: "pgsearch/ranking" in f or "pgsearch/plan" in f),
    ("driver", lambda f, n: "psycopg" in f or "pgsearch/db/" in f),
    ("search", lambda f, n: "pgsearch/" in f),
)


def _category(path: str, name: str) -> str:
    for category, test in _CATEGORIES:
        if test(path, name):
            return category
    return "other"


def split_profile(prof: cProfile.Profile, searches: int) -> dict[str, float]:
    """Self time per category, ms per search."""
    stats = pstats.Stats(prof)
    out: dict[str, float] = {}
    for (path, _line, name), row in stats.stats.items():  # type: ignore[attr-defined]
        own = row[2]
        key = _category(path, name)
        out[key] = out.get(key, 0.0) + own
    return {k: round(v * 1000 / searches, 2) for k, v in sorted(out.items())}


def server_ms(dsn: str, statements: list[Any]) -> float:
    total = 0.0
    with psycopg.connect(dsn, autocommit=False) as conn:
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL jit = off")
        for s in statements:
            if not s.explainable:
                continue
            text = s.sql if isinstance(s.sql, str) else s.sql.as_string(conn)
            plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + text, s.params).fetchone()
            assert plan is not None
            doc = plan[0][0]
            total += doc["Planning Time"] + doc["Execution Time"]
        conn.rollback()
    return total


def profile_class(
    pg: PgSearch, dsn: str, queries: list[dict[str, Any]], repeat: int
) -> dict[str, Any]:
    def run(q: dict[str, Any]) -> None:
        provider = pg.provider(workspace=q["workspace"], session_id=q.get("session"))
        provider.search(request_for(q, per_session=True))

    for q in queries:
        run(q)  # warm
    walls: list[float] = []
    trips: list[int] = []
    servers: list[float] = []
    for _ in range(repeat):
        for q in queries:
            t0 = time.perf_counter()
            run(q)
            walls.append((time.perf_counter() - t0) * 1000)
    for q in queries:
        with pg._driver.capture() as units:
            run(q)
        trips.append(sum(u.round_trips for u in units))
        servers.append(server_ms(dsn, [s for u in units for s in u.statements]))
    prof = cProfile.Profile()
    prof.enable()
    for q in queries:
        run(q)
    prof.disable()
    return {
        "wall_p50": round(statistics.median(walls), 2),
        "trips": round(statistics.mean(trips), 2),
        "server_p50": round(statistics.median(servers), 2),
        "profile_ms": split_profile(prof, len(queries)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--queries", type=Path, default=QUERIES)
    parser.add_argument("--classes", default=",".join(CLASSES))
    parser.add_argument("--per-class", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    queries = sample_queries(load_queries(args.queries), args.per_class)
    out: dict[str, Any] = {}
    with PgSearch.connect(args.dsn) as pg:
        for cls in args.classes.split(","):
            chosen = [q for q in queries if q["class"] == cls]
            with open("/proc/loadavg", encoding="ascii") as fh:
                load = float(fh.read().split()[0])
            row = profile_class(pg, args.dsn, chosen, args.repeat)
            row["load"] = load
            out[cls] = row
            print(cls, json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

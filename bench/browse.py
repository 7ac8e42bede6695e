"""Browsing per session over long sessions, and searches while the tables grow.

    python -m bench.browse                    # about two minutes
    python -m bench.browse --json bench/results/browse.json

Two measures, each in a database of its own made on ``--server`` (default
``PGSEARCH_BENCH_SERVER`` or the local server) and dropped at the end:

- ``shapes``: workspaces of N sessions of M messages each (sessions one after another,
  overlapping a little). For each, the per-session browse page (an empty query's
  statement, prepared with the plan searches run with: made once for any values)
  as one round trip, and the same browse end to end through the Python API; the
  median of ``--runs`` after two untimed runs, in milliseconds.
- ``growth``: one connection searches (48 searches: browses and searches of every
  shape, per session or not, in one session or all, filtered or not) while a second
  one grows the workspace from one message to ``--grow`` messages; after each step,
  the 48 searches' total and the slowest. The first connection's plans are made
  when the database is nearly empty, as a service's are when it starts beside an
  empty database that a load then fills.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from bench.speed import DEFAULT_SERVER, create_database, drop_database
from pgsearch import PgSearch, SessionQueryRequest, StoreError, policy
from pgsearch.db import queries
from pgsearch.plan import Filters

DB = "pgsearch_bench_browse"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
WORDS = "deploy the build cache index token parse queue cron error file test".split()
#: (sessions, messages each) of the `shapes` workspaces.
SHAPES = ((10, 600), (40, 2_000), (400, 40))


def _fresh(server: str) -> str:
    dsn = create_database(server, DB)
    PgSearch.migrate(dsn)
    return dsn


def _messages(rng: random.Random, start: datetime, n: int, first: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "role": ("user", "assistant")[i % 2],
            "content": " ".join(rng.choices(WORDS, k=12)) + f" tok{i}",
            "created_at": (start + timedelta(seconds=5 * i)).isoformat(),
        }
        for i in range(first, first + n)
    ]


def load_shapes(pg: PgSearch) -> None:
    rng = random.Random(3)
    for sessions, each in SHAPES:
        ws = f"s{sessions}x{each}"
        for s in range(sessions):
            start = T0 + timedelta(hours=s)
            for first in range(0, each, 500):
                pg.append(
                    workspace=ws,
                    session_id=f"s{s:04d}",
                    messages=_messages(rng, start, min(500, each - first), first),
                )


def _median_ms(fn: Any, runs: int) -> float:
    for _ in range(2):
        fn()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measure_shapes(dsn: str, runs: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    with psycopg.connect(dsn, autocommit=True) as conn, PgSearch.connect(dsn) as pg:
        conn.execute("VACUUM ANALYZE")
        for setting in (
            "plan_cache_mode = force_generic_plan",
            "max_parallel_workers_per_gather = 0",
            "enable_seqscan = off",
            "jit = off",
        ):
            conn.execute("SET " + setting)  # type: ignore[arg-type]
        for sessions, each in SHAPES:
            ws = f"s{sessions}x{each}"
            filters = Filters(workspace=ws, kinds=policy.DEFAULT_SEARCH_KINDS)
            text, params = queries.browse_page_sql(
                filters, per_session=True, after=None, limit=11, chars=2_000
            )

            def page(text: Any = text, params: dict[str, Any] = params) -> None:
                conn.execute(text, params, prepare=True).fetchall()

            def browse(ws: str = ws) -> None:
                pg.search(SessionQueryRequest(query=""), workspace=ws)

            out[ws] = {"page_ms": _median_ms(page, runs), "browse_ms": _median_ms(browse, runs)}
    return out


def _growth_requests() -> list[SessionQueryRequest]:
    return [
        SessionQueryRequest(query=q, per_session=ps, session_id=sid, kinds=kinds, limit=10)
        for q in ("cron", "cronq", "cron queue", "", "deployjob", "tok5")
        for ps in (False, True)
        for sid in (None, "shared")
        for kinds in ((), ("user_text",))
    ]


def measure_growth(dsn: str, grow: int, steps: int) -> list[dict[str, float]]:
    rng = random.Random(1)
    requests = _growth_requests()
    out = []
    with PgSearch.connect(dsn) as searcher, PgSearch.connect(dsn) as writer:
        searcher.append(
            workspace="grow", session_id="shared", messages=[{"role": "user", "content": "cron"}]
        )
        provider = searcher.provider(workspace="grow")
        for request in requests:  # plans made on a nearly empty database
            provider.search(request)
        stored = 1
        for step in range(1, steps + 1):
            target = grow * step // steps
            while stored < target:
                n = min(4, target - stored)
                writer.append(
                    workspace="grow",
                    session_id=rng.choice(["shared", "s1", "s2", "s3"]),
                    messages=[
                        {
                            "role": rng.choice(["user", "assistant"]),
                            "content": " ".join(rng.sample(WORDS, 8)),
                        }
                        for _ in range(n)
                    ],
                )
                stored += n
            times = []
            failed = 0
            for request in requests:
                started = time.perf_counter()
                try:
                    provider.search(request)
                except StoreError:  # a timed-out search is a result here
                    failed += 1
                times.append((time.perf_counter() - started) * 1000)
            out.append(
                {
                    "messages": stored,
                    "total_ms": sum(times),
                    "worst_ms": max(times),
                    "timed_out": failed,
                }
            )
            print(
                f"  {stored:>7,} messages: {sum(times):8.0f} ms, worst {max(times):6.0f} ms"
                + (f", {failed} timed out" if failed else "")
            )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default=os.environ.get("PGSEARCH_BENCH_SERVER", DEFAULT_SERVER))
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--grow", type=int, default=16_000, help="messages the growth ends at")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)
    try:
        dsn = _fresh(args.server)
        with PgSearch.connect(dsn) as pg:
            load_shapes(pg)
        shapes = measure_shapes(dsn, args.runs)
        print(f"{'workspace':<14} {'page ms':>8} {'browse ms':>10}")
        for ws, r in shapes.items():
            print(f"{ws:<14} {r['page_ms']:>8.2f} {r['browse_ms']:>10.2f}")
        print("growth (48 searches after each step):")
        growth = measure_growth(_fresh(args.server), args.grow, args.steps)
    finally:
        drop_database(args.server, DB)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {"runs": args.runs, "shapes": shapes, "growth": growth}
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Paired A/B per query: this checkout against another, on one database, query by query.

    git worktree add ../base <commit>
    python -m bench.pairs --base ../base --dsn postgresql://127.0.0.1:5432/pgsearch_bench_1m
    python -m bench.pairs --base ../base --dsn DSN --classes multi,cjk --rounds 5
    python -m bench.pairs --base . --new-env PGSEARCH_IMPACT_LISTS=on --dsn DSN
    python -m bench.pairs --base ../base --base-dsn OLD_DSN --dsn MIGRATED_COPY_DSN

The third form compares a setting on one checkout: ``--base-env`` and ``--new-env``
(``NAME=value``, repeatable) set a side's environment. The last compares a change
that comes with a migration: the base searches the database as it was, the new side
a copy (``CREATE DATABASE ... TEMPLATE``) it migrated.

Class percentiles from whole benchmark runs (`bench.speed`, `bench.ab speed`) move
with the machine: on a host that reclaims idle page cache, rounds of the same code on
the same database differ by 10-40 % at p95 and p99, more than most changes. Here each
side is one long-lived process searching the same database (a database a
``bench.speed --keep-db`` run left, so both sides read the same pages), and every
query runs on both sides back to back, the lead swapping from query to query and
round to round, so a query's two times see the same cache and the same load.

Each query's time is the median of its rounds (one more round first warms both
sides and is not counted); the table gives, per class, the percentiles of those
medians for each side, their ratio new / base, and the ratio of the sums. Requests
are built by each side's own ``bench.speed.request_for`` (one best hit per session
unless ``--all-hits``), from the queries file of the benchmark corpus.

Each side runs in its own interpreter: ``<checkout>/.venv/bin/python`` when that
exists, else this one with the checkout first on ``PYTHONPATH``. A base from before
a migration refuses a database at a newer revision: A/B such a change on a copy
(``CREATE DATABASE ... TEMPLATE``) migrated by the new side, with ``--base-dsn``.

Every search's result (hits, scores, excerpts, highlights, cursor, ``searched``,
``approximate``, ``candidates_capped``, notice) is hashed on both sides; the run
reports how many queries gave a different result on the two sides in any round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.speed import load_queries, sample_queries

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ROOT / "bench" / "results" / "corpus-1M" / "queries.jsonl"

#: One side: reads ``<query index> <1|0 per session>`` lines, searches, prints the
#: milliseconds; imports come from the side's own checkout.
_WORKER = """
import hashlib, json, sys, time
from pathlib import Path
from pgsearch import PgSearch
from bench.speed import load_queries, request_for
queries = load_queries(Path(sys.argv[2]))
with PgSearch.connect(sys.argv[1]) as pg:
    print("ready", flush=True)
    for line in sys.stdin:
        index, per_session = line.split()
        q = queries[int(index)]
        provider = pg.provider(workspace=q["workspace"], session_id=q.get("session"))
        request = request_for(q, per_session=per_session == "1")
        start = time.perf_counter()
        result = provider.search(request)
        ms = (time.perf_counter() - start) * 1000
        digest = hashlib.sha1(
            json.dumps(result.to_json(), sort_keys=True, default=str).encode()
        ).hexdigest()[:16]
        print(f"{ms:.4f} {digest}", flush=True)
"""


class Side:
    """One checkout's search process."""

    def __init__(
        self, checkout: Path, dsn: str, queries: Path, settings: dict[str, str] | None = None
    ) -> None:
        python = checkout / ".venv" / "bin" / "python"
        env = dict(os.environ) | (settings or {})
        if not python.exists():
            python = Path(sys.executable)
            env["PYTHONPATH"] = str(checkout)
        self.name = str(checkout)
        self.proc = subprocess.Popen(
            [str(python), "-c", _WORKER, dsn, str(queries)],
            cwd=checkout,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        ready = self.stdout.readline().strip()
        if ready != "ready":
            raise SystemExit(f"{checkout}: the search process did not start")

    def search(self, index: int, per_session: bool) -> tuple[float, str]:
        """Milliseconds and the result's digest."""
        self.stdin.write(f"{index} {int(per_session)}\n")
        self.stdin.flush()
        line = self.stdout.readline()
        if not line:
            raise SystemExit(f"{self.name}: the search process stopped")
        ms, digest = line.split()
        return float(ms), digest

    def close(self) -> None:
        self.stdin.close()
        self.proc.wait(timeout=30)


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


def run(
    base: Side, new: Side, indexes: list[int], rounds: int, *, per_session: bool
) -> tuple[dict[int, dict[str, list[float]]], set[int]]:
    """Each query on both sides back to back, `rounds` + 1 times (the first warms);
    the times, and the queries whose two results differed in any round."""
    times: dict[int, dict[str, list[float]]] = {i: {"base": [], "new": []} for i in indexes}
    differ: set[int] = set()
    for r in range(rounds + 1):
        for n, i in enumerate(indexes):
            order = [("base", base), ("new", new)]
            if (n + r) % 2:
                order.reverse()
            digests = set()
            for name, side in order:
                ms, digest = side.search(i, per_session)
                digests.add(digest)
                if r:
                    times[i][name].append(ms)
            if len(digests) > 1:
                differ.add(i)
    return times, differ


def table(
    queries: list[dict[str, Any]], times: dict[int, dict[str, list[float]]]
) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    classes: dict[str, list[int]] = {}
    for i in times:
        classes.setdefault(queries[i]["class"], []).append(i)
    for cls, members in classes.items():
        row: dict[str, Any] = {"n": len(members)}
        medians = {
            side: [statistics.median(times[i][side]) for i in members] for side in ("base", "new")
        }
        for label, p in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
            a, b = _pct(medians["base"], p), _pct(medians["new"], p)
            row[label] = [round(a, 2), round(b, 2), round(b / a, 3) if a else None]
        row["sum"] = [
            round(sum(medians["base"]), 1),
            round(sum(medians["new"]), 1),
            round(sum(medians["new"]) / sum(medians["base"]), 3),
        ]
        out[cls] = row
    return out


def _env(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or not name:
            raise SystemExit(f"an environment setting is NAME=value, got {pair!r}")
        out[name] = value
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--base", type=Path, required=True, help="the other checkout")
    parser.add_argument("--new", type=Path, default=ROOT, help="default: this checkout")
    parser.add_argument("--dsn", required=True, help="a database a --keep-db run left")
    parser.add_argument(
        "--base-dsn", help="the base's database (default: --dsn): the original of a migrated copy"
    )
    parser.add_argument("--queries", type=Path, default=QUERIES)
    parser.add_argument("--classes", default="", help="comma-separated (default: all)")
    parser.add_argument("--per-class", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--all-hits", action="store_true", help="every hit, not one a session")
    parser.add_argument("--base-env", action="append", default=[], metavar="NAME=value")
    parser.add_argument("--new-env", action="append", default=[], metavar="NAME=value")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    base_env, new_env = _env(args.base_env), _env(args.new_env)
    queries = load_queries(args.queries)
    chosen = {id(q) for q in sample_queries(queries, args.per_class)}
    wanted = set(filter(None, args.classes.split(",")))
    indexes = [
        i for i, q in enumerate(queries) if id(q) in chosen and (not wanted or q["class"] in wanted)
    ]
    if not indexes:
        raise SystemExit("no queries: check --classes against the queries file")
    base = Side(args.base.resolve(), args.base_dsn or args.dsn, args.queries.resolve(), base_env)
    new = Side(args.new.resolve(), args.dsn, args.queries.resolve(), new_env)
    started = time.time()
    try:
        times, differ = run(base, new, indexes, args.rounds, per_session=not args.all_hits)
    finally:
        base.close()
        new.close()
    rows = table(queries, times)
    print(
        f"base {args.base} {base_env or ''}  new {args.new} {new_env or ''}  "
        f"{len(indexes)} queries, {args.rounds} rounds; "
        f"{len(differ)} of {len(indexes)} gave different results"
    )
    print("| class | n | p50 base → new | p95 base → new | p99 base → new | sum of times |")
    print("|---|---:|---|---|---|---|")
    for cls, row in rows.items():
        cells = [
            f"{a:.1f} → {b:.1f} ({r:.2f})" for a, b, r in (row[k] for k in ("p50", "p95", "p99"))
        ]
        a, b, r = row["sum"]
        print(
            f"| {cls} | {row['n']} | " + " | ".join(cells) + f" | {a:,.0f} → {b:,.0f} ({r:.3f}) |"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "base": str(args.base),
                    "new": str(args.new),
                    "base_env": base_env,
                    "new_env": new_env,
                    "rounds": args.rounds,
                    "per_session": not args.all_hits,
                    "differ": sorted(differ),
                    "seconds": round(time.time() - started, 1),
                    "classes": rows,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The worst search latency over corpora of huge messages.

    python -m bench.huge                      # about a minute
    python -m bench.huge --runs 5 --json bench/results/huge.json

Each corpus is a workspace whose searched word lies in every one of its huge
messages, so a page of ten hits cuts ten excerpts out of them:

- ``tool-errors-2mb``: ten 2 MB tool errors of log text, the word about 150,000
  characters in (inside the indexed prefix, near its end);
- ``accented-10mb``: three 10 MB messages of accented prose, where every word needs
  normalising to be matched (the slow path of excerpt matching);
- ``cjk-2mb``: five 2 MB messages of Japanese text;
- ``near-misses-2mb``: two 2 MB messages in which every word looks like the searched
  one to a cheap pre-check (``zébrafishes``) and the word itself comes late.

Searches go through the Python API end to end (excerpts included), default
settings, after one untimed warm-up; the table gives the median and the worst of
``--runs`` searches of ten hits, in milliseconds. The database
(``pgsearch_bench_huge``) is created on ``--server`` (default
``PGSEARCH_BENCH_SERVER`` or the local server) and dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgsearch import PgSearch, SessionQueryRequest

DB = "pgsearch_bench_huge"
T0 = datetime(2026, 8, 1, tzinfo=UTC)
LOG = "2026-08-01T10:00:00Z ERROR worker-3 connection reset by peer while reading chunk 4096 "
PROSE = "Zeitüberschreitung beim Öffnen der Datei für den Prozeß café naïve résumé Ærø "
JAPANESE = "昨日の会議で決まった新しい手順を確認してから本番環境に反映してください。"
NEAR = "zébrafishes "


def body(filler: str, chars: int, word: str, at: int) -> str:
    """About `chars` characters of `filler` with `word` at about `at`."""
    before = filler * (at // len(filler))
    after = filler * (max(chars - at, 0) // len(filler))
    return before + f" {word} " + after


#: name -> (role, number of messages, their text, query)
CORPORA: dict[str, tuple[str, int, str, str]] = {
    "tool-errors-2mb": (
        "tool",
        10,
        "Error: " + body(LOG, 2_000_000, "zebrafish", 150_000),
        "zebrafish",
    ),
    "accented-10mb": ("user", 3, body(PROSE, 10_000_000, "zebrafish", 150_000), "zebrafish"),
    "cjk-2mb": ("user", 5, body(JAPANESE, 2_000_000, "大阪城", 150_000), "大阪城"),
    "near-misses-2mb": ("user", 2, body(NEAR, 2_000_000, "zebrafish", 180_000), "zebrafish"),
}


def _admin_dsn(server: str, dbname: str) -> str:
    params = conninfo_to_dict(server)
    params["dbname"] = dbname
    return make_conninfo(**params)  # type: ignore[arg-type]


def load(pg: PgSearch) -> dict[str, float]:
    """Every corpus appended; seconds each took."""
    took: dict[str, float] = {}
    for name, (role, n, text, _) in CORPORA.items():
        started = time.monotonic()
        for i in range(n):
            pg.append(
                workspace=name,
                session_id=f"{name}-{i}",
                messages=[
                    {
                        "role": role,
                        "content": text,
                        "created_at": (T0 + timedelta(minutes=i)).isoformat(),
                    }
                ],
            )
        took[name] = time.monotonic() - started
    return took


def measure(pg: PgSearch, runs: int) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, (_, n, _, query) in CORPORA.items():
        provider = pg.provider(workspace=name)
        request = SessionQueryRequest(query=query, limit=10, per_session=False)
        provider.search(request)  # warm-up
        times: list[float] = []
        marked = 0
        for _ in range(runs):
            started = time.monotonic()
            result = provider.search(request)
            times.append((time.monotonic() - started) * 1000)
            marked = sum("**" in m.excerpt for m in result.matches)
        out[name] = {
            "messages": n,
            "message_chars": len(CORPORA[name][2]),
            "hits": len(result.matches),
            "excerpts_marked": marked,
            "p50_ms": round(statistics.median(times), 1),
            "max_ms": round(max(times), 1),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--server",
        default=os.environ.get("PGSEARCH_BENCH_SERVER", "postgresql://127.0.0.1:5432/postgres"),
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)
    with psycopg.connect(args.server, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(DB)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB)))
    dsn = _admin_dsn(args.server, DB)
    try:
        PgSearch.migrate(dsn)
        with PgSearch.connect(dsn) as pg:
            loaded = load(pg)
            results = measure(pg, args.runs)
    finally:
        with psycopg.connect(args.server, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(DB)))
    print(f"{'corpus':<18} {'hits':>4} {'marked':>6} {'p50 ms':>8} {'max ms':>8} {'load s':>7}")
    for name, r in results.items():
        print(
            f"{name:<18} {r['hits']:>4} {r['excerpts_marked']:>6} {r['p50_ms']:>8.1f} "
            f"{r['max_ms']:>8.1f} {loaded[name]:>7.1f}"
        )
    worst = max(r["max_ms"] for r in results.values())
    print(f"worst search: {worst:.0f} ms")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {"runs": args.runs, "corpora": results, "load_s": loaded, "worst_ms": worst}
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Moving a tenant while it is written and searched.

A workspace gets a steady stream of appends (each message carries unique tokens)
and ingests of growing files, while another thread searches it without pause. Mid
stream the workspace is isolated into shards of its own
(``isolate_tenant_to_new_shard``, the step for a large tenant), and that shard group
is then moved to the other worker (``citus_move_shard_placement``), both with
logical replication, so writes are blocked only for the final switch-over. After:
every token is stored exactly once, sequences have no gap, the statistics equal a
full recount, every search answered with its matches (none "no match"), and
searches find the last writes. The figures
(errors, search latency before and during the move, the longest write) are printed.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from pgsearch import PgSearch, SessionQueryRequest
from tests.citus.conftest import Schemas
from tests.helpers import assert_statistics_exact

WS = "moving-tenant"
ISOLATE_MODE = os.environ.get("PGSEARCH_CITUS_ISOLATE_MODE", "block_writes")
NEIGHBOUR = "stays-put"


@dataclass
class Traffic:
    stop: threading.Event = field(default_factory=threading.Event)
    moving: threading.Event = field(default_factory=threading.Event)
    appended: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    #: Searches that answered without a match though the workspace holds many.
    empty: list[str] = field(default_factory=list)
    searches: list[tuple[bool, float]] = field(default_factory=list)  # (during move, s)
    writes: list[tuple[bool, float]] = field(default_factory=list)
    files: int = 0
    phase: str = "before"


def _writer(dsn: str, traffic: Traffic, folder: Path) -> None:
    with PgSearch.connect(dsn) as pg:
        n = 0
        while not traffic.stop.is_set():
            tokens = [f"tok{n}x{k}" for k in range(3)]
            started = time.perf_counter()
            try:
                pg.append(
                    workspace=WS,
                    session_id=f"live{n % 5}",
                    messages=[{"role": "user", "content": " ".join(["deploy", *tokens])}],
                )
                traffic.appended.update(tokens)
                if n % 10 == 0:  # a file that grows: ingest reads only its new lines
                    path = folder / "grow.jsonl"
                    with path.open("a", encoding="utf-8") as f:
                        f.write(json.dumps({"role": "assistant", "content": f"file{n} line"}))
                        f.write("\n")
                    pg.ingest_file(path, workspace=WS)
                    traffic.files += 1
            except Exception as exc:  # counted and reported: the test fails on any
                traffic.errors.append(f"write {n}: {exc}")
            traffic.writes.append((traffic.moving.is_set(), time.perf_counter() - started))
            n += 1
            time.sleep(0.01)


def _searcher(dsn: str, traffic: Traffic) -> None:
    with PgSearch.connect(dsn) as pg:
        provider = pg.provider(workspace=WS)
        while not traffic.stop.is_set():
            started = time.perf_counter()
            try:
                result = provider.search(SessionQueryRequest(query="deploy", limit=5))
                if not result.matches:
                    traffic.empty.append(f"{traffic.phase}: searched {result.searched}")
            except Exception as exc:
                traffic.errors.append(f"search during {traffic.phase}: {exc}")
            traffic.searches.append((traffic.moving.is_set(), time.perf_counter() - started))


def _placement(conn: psycopg.Connection[Any], ws: str) -> tuple[int, int]:
    row = conn.execute(
        "SELECT s.shardid, p.nodeport FROM pg_dist_shard_placement p"
        " JOIN (SELECT get_shard_id_for_distribution_column('sessions', %s::text) AS shardid) s"
        " USING (shardid)",
        (ws,),
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _ms(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def test_a_tenant_moves_while_it_is_written_and_searched(schemas: Schemas, tmp_path: Path) -> None:
    dsn = schemas.create("move")
    with PgSearch.connect(dsn) as pg:
        for i in range(20):
            pg.append(
                workspace=WS,
                session_id=f"old{i}",
                messages=[{"role": "user", "content": f"deploy old{i} history"}] * 5,
            )
            pg.append(
                workspace=NEIGHBOUR,
                session_id=f"n{i}",
                messages=[{"role": "user", "content": f"deploy neighbour{i}"}],
            )
    with psycopg.connect(dsn, autocommit=True) as conn:
        before, source = _placement(conn, WS)
        neighbour_before = _placement(conn, NEIGHBOUR)
        (target,) = conn.execute(
            "SELECT nodeport FROM pg_dist_node WHERE groupid > 0 AND nodeport <> %s",
            (source,),
        ).fetchone() or (0,)
    traffic = Traffic()
    threads = [
        threading.Thread(target=_writer, args=(dsn, traffic, tmp_path)),
        threading.Thread(target=_searcher, args=(dsn, traffic)),
    ]
    for t in threads:
        t.start()
    try:
        time.sleep(2.0)
        traffic.moving.set()
        traffic.phase = "isolate"
        started = time.perf_counter()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SET statement_timeout = '180s'")  # a stuck move fails the test
            (isolated,) = conn.execute(
                "SELECT isolate_tenant_to_new_shard('sessions', %s::text, 'CASCADE',"
                " shard_transfer_mode => %s)",
                (WS, ISOLATE_MODE),
            ).fetchone() or (0,)
            isolate_s = time.perf_counter() - started
            traffic.phase = "move"
            conn.execute(
                "SELECT citus_move_shard_placement(%s, '127.0.0.1', %s, '127.0.0.1', %s,"
                " shard_transfer_mode => 'force_logical')",
                (isolated, source, target),
            )
            move_s = time.perf_counter() - started - isolate_s
            after = _placement(conn, WS)
            neighbour_after = _placement(conn, NEIGHBOUR)
        traffic.moving.clear()
        traffic.phase = "after"
        time.sleep(1.5)
    finally:
        traffic.stop.set()
        for t in threads:
            t.join(timeout=60)
    assert after == (isolated, target) and isolated != before
    assert neighbour_after[1] == neighbour_before[1]  # the neighbour did not move
    with psycopg.connect(dsn) as conn:
        stored: Counter[str] = Counter()
        for (content,) in conn.execute(
            "SELECT content FROM messages WHERE workspace_id = %s AND session_id LIKE 'live%%'",
            (WS,),
        ).fetchall():
            stored.update(w for w in content.split() if w.startswith("tok"))
        gaps = conn.execute(
            "SELECT session_id FROM messages WHERE workspace_id = %s"
            " GROUP BY session_id HAVING max(seq) + 1 <> count(*)",
            (WS,),
        ).fetchall()
    during = [s for moving, s in traffic.searches if moving]
    calm = [s for moving, s in traffic.searches if not moving]
    print(
        f"\ntenant move: isolate {isolate_s:.2f} s, move {move_s:.2f} s; "
        f"{len(traffic.writes)} appends ({traffic.files} file ingests), "
        f"{len(traffic.searches)} searches, {len(traffic.errors)} errors, "
        f"{len(traffic.empty)} empty answers {traffic.empty}; "
        f"search p50/p99/max before+after {_ms(calm, 0.5):.1f}/{_ms(calm, 0.99):.1f}/"
        f"{_ms(calm, 1.0):.1f} ms, during {_ms(during, 0.5):.1f}/{_ms(during, 0.99):.1f}/"
        f"{_ms(during, 1.0):.1f} ms; longest write during "
        f"{_ms([s for m, s in traffic.writes if m], 1.0):.0f} ms "
        f"(median {1000 * statistics.median(s for _, s in traffic.writes):.1f} ms)"
    )
    assert traffic.errors == []
    # Every search answers with its matches, around the switch to the moved shard too
    # (when the appends it held land at once, between a search's statistics and its
    # vocabulary read; see tests/reliability/test_search_races.py).
    assert traffic.empty == []
    assert during, "no search ran during the move"
    assert stored == traffic.appended  # nothing lost, nothing twice
    assert gaps == []
    assert_statistics_exact(dsn, WS)
    assert_statistics_exact(dsn, NEIGHBOUR)
    with PgSearch.connect(dsn) as pg:
        last = max(traffic.appended, key=lambda t: int(t[3:].split("x")[0]))
        hits = pg.provider(workspace=WS).search(SessionQueryRequest(query=last)).matches
        assert [m.session_id for m in hits][:1] and last in hits[0].excerpt
        assert pg.stats(workspace=NEIGHBOUR).messages == 20

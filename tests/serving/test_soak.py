"""The soak: one `PgSearch` across 16 threads and one `AsyncPgSearch` across 64 tasks.

For ``PGSEARCH_SOAK_SECONDS`` (default 20) every actor mixes searches, appends,
windows, statistics and short-lived sessions it forgets again, reads served by the
standby through ``PGSEARCH_READ_DSN`` (read-your-writes: each actor's searches look
for what it has just appended). Afterwards: no error anywhere, every acknowledged
append stored exactly once, forgotten sessions gone, statistics equal a recount.
"""

from __future__ import annotations

import os
import time

from pgsearch import PgSearch, Settings
from pgsearch.aio import AsyncPgSearch
from tests.serving.conftest import Nodes
from tests.serving.workload import Ledger, Mix, Workload

SECONDS = float(os.environ.get("PGSEARCH_SOAK_SECONDS", "20"))
THREADS = 16
TASKS = 64
WS = "soak"


def test_sixteen_threads_and_sixty_four_tasks_share_one_object_each(nodes: Nodes) -> None:
    settings = Settings.from_env(
        {}, dsn=nodes.primary_dsn, read_dsns=(nodes.standby_dsn,), read_wait_ms=2000
    )
    ledger = Ledger(workspace=WS)
    with PgSearch.connect(settings=settings) as pg:
        work = Workload(
            pg=pg,
            async_connect=lambda: AsyncPgSearch.connect(settings=settings),
            ledger=ledger,
            threads=THREADS,
            tasks=TASKS,
            mix=Mix(append=0.25, window=0.2, stats=0.05, forget=0.05),
        )
        began = time.monotonic()
        with pg._driver.capture() as units:
            work.start()
            time.sleep(SECONDS)
            work.finish()
        elapsed = time.monotonic() - began
        nodes_used = {u.node for u in units if not u.write}
        stats = pg.stats(workspace=WS)
    assert ledger.errors == [], [f"{a} {op}: {e}" for a, op, e in ledger.errors[:5]]
    figures = ledger.audit(nodes.primary_dsn)
    assert figures["unknown"] == figures["not_stored"] == 0
    assert stats.messages == figures["messages"]
    ops = ledger.ops
    print(
        f"soak {elapsed:.0f} s: {sum(ops.values())} operations {dict(ops)}, "
        f"{figures['acknowledged']} appends, slowest {ledger.slowest_op} "
        f"{ledger.slowest:.2f} s, reads on {sorted(nodes_used)}"
    )
    # Every kind of operation ran, by threads and tasks alike, for the whole time.
    assert elapsed >= SECONDS
    assert min(ops[k] for k in ("search", "append", "window", "stats", "forget")) > 10, ops
    assert "standby1" in nodes_used

"""Faults under load: the private primary restarted and its backends killed while 8
threads on one `PgSearch` and 32 tasks on one `AsyncPgSearch` search and append.

A fault costs the callers nothing but latency: every operation it cut is run again
by the driver (an append too when its COMMIT was sent, its messages' keys making
that safe), the pools reconnect, and the same objects go on working without a
restart of the process. No call reports an error; afterwards every append is
acknowledged and stored exactly once, statistics equal a recount, and no call took
longer than its bound.

``PGSEARCH_FAULT_ROUNDS`` (default 2) is how many times each fault is applied.
"""

from __future__ import annotations

import os
import time

from pgsearch import PgSearch, SessionQueryRequest, Settings
from pgsearch.aio import AsyncPgSearch
from tests.serving.conftest import Nodes
from tests.serving.workload import Ledger, Mix, Workload

ROUNDS = int(os.environ.get("PGSEARCH_FAULT_ROUNDS", "2"))
WS = "faults"
#: Seconds of load between faults, and of calm load at the end (no error allowed).
BETWEEN = 2.0
CALM = 3.0


def test_restarts_and_killed_backends_cost_callers_only_latency(
    nodes: Nodes,
) -> None:
    settings = Settings.from_env({}, dsn=nodes.primary_dsn, pool_timeout=10.0)
    ledger = Ledger(workspace=WS)
    faults: list[str] = []
    with PgSearch.connect(settings=settings) as pg:
        work = Workload(
            pg=pg,
            async_connect=lambda: AsyncPgSearch.connect(settings=settings),
            ledger=ledger,
            threads=8,
            tasks=32,
            mix=Mix(append=0.4, window=0.2, stats=0.05, call_limit=20.0),
        )
        work.start()
        try:
            time.sleep(BETWEEN)
            for _ in range(ROUNDS):
                in_flight = nodes.primary.backends(nodes.dbname)
                nodes.primary.restart("fast")
                faults.append(f"restart ({in_flight} sessions open)")
                time.sleep(BETWEEN)
                killed = nodes.primary.terminate_backends(nodes.dbname)
                faults.append(f"terminate ({killed} backends)")
                time.sleep(BETWEEN)
            # The pools have reconnected: from here on nothing may fail.
            time.sleep(1.0)
            errors_before_calm = len(ledger.errors)
            ops_before_calm = sum(ledger.ops.values())
            time.sleep(CALM)
            calm_errors = ledger.errors[errors_before_calm:]
            calm_ops = sum(ledger.ops.values()) - ops_before_calm
        finally:
            work.finish()
        # The same object still works.
        pg.append(workspace=WS, session_id="after", messages=[{"role": "user", "content": "x"}])
        assert pg.provider(workspace=WS).search(SessionQueryRequest(query="work")).matches
        stats = pg.stats(workspace=WS)
    assert calm_errors == [], [str(e) for _, _, e in calm_errors[:5]]
    assert calm_ops > 20, calm_ops
    figures = ledger.audit(nodes.primary_dsn)
    assert stats.messages == figures["messages"]  # "after" included in both
    ops = ledger.ops
    print(
        f"faults: {faults}; {sum(ops.values())} operations {dict(ops)}; "
        f"errors {dict(ledger.error_kinds())}; appends {figures}; "
        f"messages {sorted({f'{op}: {e}'[:160] for _, op, e in ledger.errors})}; "
        f"slowest {ledger.slowest_op} {ledger.slowest:.2f} s"
    )
    assert len(faults) == 2 * ROUNDS
    assert figures["acknowledged"] > 50
    # No caller saw a fault: nothing failed, no append was left in doubt.
    assert [f"{op}: {e}" for _, op, e in ledger.errors] == []
    assert (figures["unknown"], figures["not_stored"]) == (0, 0), figures

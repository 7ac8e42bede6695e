"""The walked per-session spread is every session's newest match, or the scan's rows
(property test).

Random workspaces: sessions of entries of every kind whose times go back and forth
(equal times included, an entry often older than the one before it), appended to
in several calls, some sessions forgotten. For random one- and two-word queries
(frequent words and rare ones) and random bounds of the walk (sessions read beyond
the cap, entries walked, entries walked further) and of the scan,
`queries.session_spread_walk_sql` must give either every matching session's newest
match (by time, then position), the newest `cap` of them in `NEWEST_FIRST` order,
or exactly the rows of `queries.session_spread_sql` with the same scan; with a scan
that reads every match, both. Both outcomes must occur.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgsearch import PgSearch, SessionQueryRequest, Settings
from pgsearch.db import queries as q
from pgsearch.plan import Filters
from tests.helpers import newest_match_per_session

T0 = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
VOCABULARY = "the deploy cluster rollback quota zephyr fjord walrus".split()
WEIGHTS = [1.0 / (i + 1) ** 1.5 for i in range(len(VOCABULARY))]
KINDS = ("user_text", "assistant_text", "tool_input", "tool_error")
EXAMPLES = 16


def _entry(rng: random.Random, at: datetime) -> dict[str, Any]:
    words = " ".join(rng.choices(VOCABULARY, WEIGHTS)[0] for _ in range(rng.randint(1, 4)))
    role = rng.choice(("user", "assistant", "assistant", "output"))
    if role == "output":
        return {"role": "tool", "name": "run", "content": words, "created_at": at.isoformat()}
    return {"role": role, "content": words, "created_at": at.isoformat()}


def test_a_walked_spread_is_the_newest_matches_or_the_scans(dsn: str) -> None:
    outcomes: Counter[str] = Counter()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(seed=st.integers(0, 2**32 - 1))
    def run(seed: int) -> None:
        rng = random.Random(seed)
        ws = f"w{uuid.uuid4().hex[:10]}"
        with PgSearch.connect(settings=Settings.from_env({}, dsn=dsn)) as pg:
            sessions = [f"s{i}" for i in range(rng.randint(5, 40))]
            start = {sid: T0 + timedelta(hours=rng.randint(0, 200)) for sid in sessions}
            clock = dict(start)
            for _ in range(3):
                for sid in rng.sample(sessions, rng.randint(1, len(sessions))):
                    batch = []
                    for _ in range(rng.randint(1, 12)):
                        # Times mostly move on, sometimes stand still or go back.
                        clock[sid] += timedelta(minutes=rng.choice((0, 1, 3, 30, -45, -2000)))
                        batch.append(_entry(rng, clock[sid]))
                    pg.append(workspace=ws, session_id=sid, messages=batch)
            stored = sorted({sid for sid in sessions if clock[sid] != start[sid]})
            for sid in rng.sample(stored, min(len(stored), rng.randint(0, 2))):
                pg.forget(workspace=ws, session_id=sid)
            scope = Filters(workspace=ws, kinds=KINDS)
            with psycopg.connect(dsn) as conn:
                for _ in range(4):
                    words = rng.sample(VOCABULARY[:5], rng.choice((1, 1, 2)))
                    if rng.random() < 0.2:
                        words = [rng.choice(VOCABULARY[5:])]
                    explained = pg.provider(workspace=ws).explain(
                        SessionQueryRequest(query=" ".join(words))
                    )
                    trace = explained.trace
                    if trace is None or trace.plan is None:
                        continue
                    plan = replace(trace.plan, cap=rng.choice((1, 3, 8, 30)))
                    tsq = q.candidate_tsquery(plan)
                    newest = newest_match_per_session(conn, scope, tsq)[: plan.cap]
                    for scan in (rng.choice((1, 5, 20)), 1_000_000):
                        sql, params = q.session_spread_sql(scope, plan, scan=scan)
                        scanned = conn.execute(sql, params).fetchall()  # type: ignore[call-overload]
                        sql, params = q.session_spread_walk_sql(scope, plan, scan=scan)
                        params.update(
                            walk_sessions=plan.cap + rng.choice((0, 1, 4, 64)),
                            walk_rows=rng.choice((1, 2, 4, 16)),
                            walk_more=rng.choice((1, 3, 256)),
                        )
                        walked = conn.execute(sql, params).fetchall()  # type: ignore[call-overload]
                        got = [(r[0], r[1], r[4]) for r in walked]
                        if scan == 1_000_000:
                            assert got == newest, (words, plan.cap, params)
                            assert walked == scanned
                        elif walked == scanned and got != newest:
                            outcomes["scanned"] += 1
                        else:
                            assert got == newest, (words, plan.cap, params)
                            outcomes[
                                "walked" if got != [(r[0], r[1], r[4]) for r in scanned] else "same"
                            ] += 1

    run()
    assert outcomes["walked"] > 0, outcomes
    assert outcomes["scanned"] > 0, outcomes

"""The background maintainer of the term lists (`pgsearch.maintainer`), in process.

Rounds are run one at a time on a real database: which workspaces a round rebuilds
(only those whose lists are kept, and behind), that it never waits for another
builder of a workspace, and that the task started by the servers runs rounds until
it is stopped. The servers themselves are exercised in ``tests/serving``.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Any

import psycopg
import pytest

from pgsearch import PgSearch, Settings, impact
from pgsearch.aio import AsyncPgSearch
from pgsearch.maintainer import Maintainer, Round

WORDS = ["alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma"]


def _messages(rng: random.Random, n: int) -> list[dict[str, Any]]:
    out = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(1, 12))]
        words += [f"w{rng.randint(0, 5000)}" for _ in range(rng.randint(0, 10))]
        out.append({"role": rng.choice(["user", "assistant"]), "content": " ".join(words)})
    return out


def _fill(dsn: str, ws: str, n: int, seed: int = 3, session: str = "s") -> None:
    rng = random.Random(seed)
    with PgSearch.connect(dsn) as pg:
        for s in range(0, n, 100):
            pg.append(workspace=ws, session_id=f"{session}{s}", messages=_messages(rng, 100))


def _built_at(dsn: str, ws: str) -> Any:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT built_at FROM term_list_state WHERE workspace_id = %s", (ws,)
        ).fetchone()
    return row[0] if row else None


def _round(dsn: str, workspaces: list[str], **changes: Any) -> Round:
    settings = Settings.from_env(dsn=dsn).with_(**changes)

    async def main() -> Round:
        async with await AsyncPgSearch.connect(settings=settings) as pg:

            async def listed() -> list[str]:
                return workspaces

            return await pg.maintainer(listed).run_round()

    return asyncio.run(main())


def test_a_round_rebuilds_kept_lists_that_fell_behind(dsn: str) -> None:
    _fill(dsn, "kept", 600)
    _fill(dsn, "never", 600)
    _fill(dsn, "small", 600)
    with PgSearch.connect(dsn) as pg:
        pg.maintain(workspace="kept")
        pg.maintain(workspace="small")
    built = {ws: _built_at(dsn, ws) for ws in ("kept", "small")}
    _fill(dsn, "kept", 200, seed=4, session="more")
    _fill(dsn, "small", 100, seed=5, session="more")

    done = _round(dsn, ["kept", "never", "small"], maintain_behind=150)
    # Lists are off for reading (the default): only lists someone built are kept,
    # and only once more than the threshold is behind.
    assert not done.standby
    assert set(done.rebuilt) == {"kept"} and done.rebuilt["kept"] > 0
    assert _built_at(dsn, "kept") > built["kept"]
    assert _built_at(dsn, "small") == built["small"]
    assert _built_at(dsn, "never") is None
    with PgSearch.connect(dsn) as pg:
        kept, small = pg.stats(workspace="kept"), pg.stats(workspace="small")
    assert (kept.lists_behind, small.lists_behind) == (0, 100)
    assert kept.listed_terms == done.rebuilt["kept"]

    # Nothing behind: a round changes nothing.
    again = _round(dsn, ["kept"], maintain_behind=1)
    assert again.rebuilt == {} and _built_at(dsn, "kept") > built["kept"]


def test_a_round_counts_scope_counts_left_behind_again(dsn: str) -> None:
    """Scope counts a writer of an earlier release left behind the statistics (it
    stored messages and statistics only) are counted again by the next round, and
    only those."""
    from tests.helpers import assert_statistics_exact

    _fill(dsn, "old", 100)
    _fill(dsn, "new", 100)
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "INSERT INTO messages (workspace_id, session_id, seq, kind, role, turn, "
            "created_at, content, arguments, tsv, token_count) "
            "SELECT 'old', 's0', 1000, 'system', 'system', 0, s.updated_at, 'x', '', '', 0 "
            "FROM sessions s WHERE s.workspace_id = 'old' AND s.session_id = 's0'"
        )
        conn.execute(
            "INSERT INTO workspace_stats AS s (workspace_id, kind, n_messages) "
            "VALUES ('old', 'system', 1) ON CONFLICT (workspace_id, kind) "
            "DO UPDATE SET n_messages = s.n_messages + 1"
        )
        conn.execute(
            "UPDATE sessions SET message_count = message_count + 1, next_seq = 1001 "
            "WHERE workspace_id = 'old' AND session_id = 's0'"
        )
    with pytest.raises(AssertionError):
        assert_statistics_exact(dsn, "old")
    done = _round(dsn, ["old", "new"])
    assert done.recounted == ["old"]
    assert_statistics_exact(dsn, "old")
    assert_statistics_exact(dsn, "new")
    assert _round(dsn, ["old", "new"]).recounted == []


def test_lists_read_by_searches_are_built_where_a_term_is_frequent(dsn: str) -> None:
    _fill(dsn, "big", 600)
    _fill(dsn, "tiny", 100)
    done = _round(dsn, ["big", "tiny"], impact_lists=True)
    assert set(done.rebuilt) == {"big"}
    assert _built_at(dsn, "tiny") is None
    with PgSearch.connect(dsn) as pg:
        assert pg.stats(workspace="tiny").messages < impact.MIN_DF
        assert pg.stats(workspace="big").lists_behind == 0


def test_a_workspace_being_built_elsewhere_is_left_to_its_builder(dsn: str) -> None:
    _fill(dsn, "w", 400)
    with PgSearch.connect(dsn) as pg:
        pg.maintain(workspace="w")
    before = _built_at(dsn, "w")
    _fill(dsn, "w", 100, seed=9, session="more")
    # The lock `pgsearch maintain` and every other maintainer take for the workspace.
    with psycopg.connect(dsn, autocommit=True) as other:
        other.execute(
            "SELECT pg_advisory_lock(hashtextextended('pgsearch term lists ' || %s, 0))", ("w",)
        )
        started = time.monotonic()
        done = _round(dsn, ["w"], maintain_behind=1)
        assert time.monotonic() - started < 10  # did not wait for the lock
        assert done.busy == ["w"] and done.rebuilt == {}
        assert _built_at(dsn, "w") == before
    done = _round(dsn, ["w"], maintain_behind=1)
    assert list(done.rebuilt) == ["w"]
    assert _built_at(dsn, "w") > before


def test_the_task_keeps_lists_current_until_stopped(
    dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    _fill(dsn, "live", 400)
    with PgSearch.connect(dsn) as pg:
        pg.maintain(workspace="live")
    settings = Settings.from_env(dsn=dsn).with_(maintain_interval=0.2, maintain_behind=1)

    async def main() -> Maintainer:
        async with await AsyncPgSearch.connect(settings=settings) as pg:

            async def listed() -> list[str]:
                return ["live"]

            maintainer = pg.maintainer(listed)
            assert maintainer.start()
            assert not maintainer.start()  # already running
            await pg.append(
                workspace="live", session_id="new", messages=[{"role": "user", "content": "x"}]
            )
            deadline = time.monotonic() + 30
            while (await pg.stats(workspace="live")).lists_behind:
                assert time.monotonic() < deadline, "the maintainer did not catch up"
                await asyncio.sleep(0.1)
            await maintainer.stop()
            assert not maintainer.running
            return maintainer

    with caplog.at_level(logging.INFO, logger="pgsearch.maintainer"):
        maintainer = asyncio.run(main())
    assert maintainer.rounds >= 1
    assert any("rebuilt workspace 'live'" in r.getMessage() for r in caplog.records)

    off = Settings.from_env(dsn=dsn).with_(maintain_interval=0)

    async def never() -> bool:
        async with await AsyncPgSearch.connect(settings=off) as pg:
            return pg.maintainer().start()

    assert asyncio.run(never()) is False

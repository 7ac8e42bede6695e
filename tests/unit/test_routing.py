"""`ReplicaRouter` and ``PGSEARCH_READ_DSN`` without a server: choices, verdicts, state.

The router holds no connection; what it decides from a probe's row and from the
driver's reports is checked here, the real standby in ``tests/serving``.
"""

from __future__ import annotations

import pytest

from pgsearch import Settings
from pgsearch.db.routing import (
    PRIMARY,
    Intent,
    PrimaryRouter,
    ReplicaRouter,
    router_for,
    standby_name,
)
from pgsearch.errors import ConfigError, StoreError, StoreUnavailable
from pgsearch.settings import parse_read_dsns

S1, S2 = standby_name(1), standby_name(2)


def _read(workspace: str | None = "w", excluded: frozenset[str] = frozenset()) -> Intent:
    return Intent(write=False, workspace=workspace, attempt=1, excluded=excluded)


def _sampled(router: ReplicaRouter, lsn: str = "0/0") -> ReplicaRouter:
    """`router` with a fresh sample of the primary's position (as the driver takes it)."""
    router.sampled([lsn])
    return router


def test_settings_pick_the_router() -> None:
    assert isinstance(router_for(Settings.from_env({}, dsn="dbname=p")), PrimaryRouter)
    router = router_for(
        Settings.from_env({"PGSEARCH_READ_DSN": "dbname=a, dbname=b"}, dsn="dbname=p")
    )
    assert isinstance(router, ReplicaRouter)
    assert dict(router.nodes) == {PRIMARY: "dbname=p", S1: "dbname=a", S2: "dbname=b"}
    assert router.wants_commit_lsn


def test_writes_go_to_the_primary_and_reads_alternate_between_standbys() -> None:
    router = _sampled(ReplicaRouter("p", ["a", "b"]))
    assert router.choose(Intent(write=True, workspace="w", attempt=1)).node == PRIMARY
    chosen = [router.choose(_read()).node for _ in range(4)]
    assert sorted(chosen) == [S1, S1, S2, S2]
    assert router.choose(_read(excluded=frozenset({S1, S2}))).node == PRIMARY
    assert router.choose(_read(excluded=frozenset({S1}))).node == S2


def test_reads_wait_for_the_newest_commit_of_their_workspace() -> None:
    router = _sampled(ReplicaRouter("p", ["a"], wait_ms=300))
    assert router.required_lsn("w") is None
    router.committed(PRIMARY, "0/10", "w")
    router.committed(PRIMARY, "0/F", "w")  # an older position never moves it back
    router.committed(PRIMARY, "1/0", "v")
    assert router.required_lsn("w") == "0/10"
    assert router.required_lsn("x") is None
    assert router.required_lsn(None) == "1/0"  # a read of no workspace waits for all
    router.committed(PRIMARY, "2/0", None)
    assert router.required_lsn("x") == "2/0"
    probe = router.choose(_read("w")).probe
    assert probe is not None and probe.params is not None
    assert probe.params["lsn"] == "2/0" and probe.params["wait"] == 0.3
    router.committed(PRIMARY, None, "w")  # nothing written: nothing to wait for
    assert router.required_lsn("w") == "2/0"


def test_probe_verdicts() -> None:
    router = _sampled(ReplicaRouter("p", ["a"], max_lag_ms=1000))
    assert router.accept(S1, [(True, True, True, 10.0)])
    assert not router.accept(S1, [(True, False, True, 0.0)])  # not replayed within the wait
    assert router.choose(_read()).node == S1  # ... which says nothing against it
    assert not router.accept(S1, [(True, True, True, 5000.0)])  # lagging: skipped a while
    assert router.choose(_read()).node == PRIMARY
    cut_off = _sampled(ReplicaRouter("p", ["a"], max_lag_ms=1000))
    assert not cut_off.accept(S1, [(True, True, False, 0.0)])  # no WAL receiver running
    assert cut_off.choose(_read()).node == PRIMARY
    other = _sampled(ReplicaRouter("p", ["a"]))
    assert not other.accept(S1, [(False, True, True, 0.0)])  # a primary named as a standby
    assert other.choose(_read()).node == PRIMARY
    assert other.accept(PRIMARY, [])


def test_a_standby_that_failed_is_passed_over_then_tried_by_one_read() -> None:
    router = _sampled(ReplicaRouter("p", ["a"]))
    router.failed(S1, StoreError("a recovery conflict"))
    assert router.choose(_read()).node == S1  # conflicts do not mark a node down
    router.failed(S1, StoreUnavailable("gone"))
    assert router.choose(_read()).node == PRIMARY
    standby = router._by_name[S1]
    standby.skip_until = 0.0  # the back-off is over
    assert router.choose(_read()).node == S1  # one read tries it
    assert router.choose(_read()).node == PRIMARY  # the others do not meanwhile
    assert router.accept(S1, [(True, True, True, 0.0)])
    assert router.choose(_read()).node == S1 and standby.failures == 0


def test_lag_is_measured_against_a_sample_of_the_primary() -> None:
    router = ReplicaRouter("p", ["a"], max_lag_ms=1000)
    first = router.choose(_read())
    # No sample yet: the driver is asked to take one before the attempt...
    assert first.sample is not None and "pg_current_wal_lsn" in first.sample.sql
    # ... and only one read takes it at a time.
    assert router.choose(_read()).sample is None
    router.sampled(["5/A0"])
    probe = router.choose(_read()).probe
    assert probe is not None and probe.params is not None
    assert probe.params["primary"] == "5/A0"
    # A sample older than SAMPLE_SECONDS is taken again.
    assert router._primary is not None
    router._primary = (router._primary[0] - 60, "5/A0")
    assert router.choose(_read()).sample is not None
    # The primary did not answer: the last sample is used until the next try.
    router.sampled(None)
    again = router.choose(_read())
    assert again.sample is None and again.node == S1
    assert again.probe is not None and again.probe.params is not None
    assert again.probe.params["primary"] == "5/A0"
    # With no lag limit nothing is sampled.
    assert ReplicaRouter("p", ["a"], max_lag_ms=0).choose(_read()).sample is None


def test_access_decisions_run_on_the_primary() -> None:
    router = _sampled(ReplicaRouter("p", ["a"]))
    decision = Intent(write=False, workspace=None, attempt=1, primary=True)
    assert router.choose(decision).node == PRIMARY and router.choose(decision).probe is None
    assert router.choose(_read(None)).node == S1


def test_read_dsn_lists_are_parsed_and_bad_ones_named() -> None:
    assert parse_read_dsns("") == ()
    assert parse_read_dsns("postgresql://a/db, postgresql://b/db") == (
        "postgresql://a/db",
        "postgresql://b/db",
    )
    assert parse_read_dsns("postgresql://a/db postgresql://b:5433/db") == (
        "postgresql://a/db",
        "postgresql://b:5433/db",
    )
    # The commas of a multi-host string stay inside it.
    assert parse_read_dsns("postgresql://a,b/db,postgresql://c/db") == (
        "postgresql://a,b/db",
        "postgresql://c/db",
    )
    assert parse_read_dsns("host=a dbname=x, host=b,c port=1,2 dbname=x") == (
        "host=a dbname=x",
        "host=b,c port=1,2 dbname=x",
    )
    # libpq's parser checks each one where the router is built (the database layer).
    bad = Settings.from_env({"PGSEARCH_READ_DSN": "host=a, host=b password=s3cret nonsense"})
    with pytest.raises(ConfigError, match="standby 2") as info:
        router_for(bad)
    assert "s3cret" not in str(info.value)
    for var, value, words in [
        ("PGSEARCH_READ_WAIT_MS", "-1", "between 0 and"),
        ("PGSEARCH_READ_WAIT_MS", "soon", "must be an integer"),
        ("PGSEARCH_READ_MAX_LAG_MS", "-5", "must not be negative"),
        ("PGSEARCH_READ_CONNECT_TIMEOUT_MS", "0", "at least 1"),
    ]:
        with pytest.raises(ConfigError, match=words):
            Settings.from_env({var: value})
    with pytest.raises(ConfigError, match="shorter than PGSEARCH_STATEMENT_TIMEOUT_MS"):
        Settings.from_env({"PGSEARCH_READ_WAIT_MS": "6000"})
    settings = Settings.from_env(
        {"PGSEARCH_READ_DSN": "postgresql://u:pw@a/db", "PGSEARCH_READ_WAIT_MS": "50"}
    )
    assert settings.read_dsns == ("postgresql://u:pw@a/db",) and settings.read_wait_ms == 50
    assert "pw" not in repr(settings)

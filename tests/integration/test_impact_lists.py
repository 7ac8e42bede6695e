"""Term lists of bounded searches: built in one pass, kept current, shown as lag.

The lists are checked against the messages themselves: each listed term's keys are
its postings with the largest BM25 impact, best first, and the head's bounds are the
impacts of each chunk's first posting and of the best posting left out.
"""

from __future__ import annotations

import random
from typing import Any

import psycopg
from click.testing import CliRunner

from pgsearch import PgSearch, impact
from pgsearch.cli import main
from pgsearch.ranking import K1, B

WORDS = ["alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma"]


def _messages(rng: random.Random, n: int) -> list[dict[str, Any]]:
    out = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(1, 12))]
        words += [f"w{rng.randint(0, 5000)}" for _ in range(rng.randint(0, 20))]
        out.append({"role": rng.choice(["user", "assistant"]), "content": " ".join(words)})
    return out


def _fill(pg: PgSearch, ws: str, sessions: int, per: int, seed: int = 3) -> None:
    rng = random.Random(seed)
    for s in range(sessions):
        pg.append(workspace=ws, session_id=f"s{s}", messages=_messages(rng, per))


def _expected(dsn: str, ws: str) -> dict[str, list[tuple[float, str, int]]]:
    """Each frequent term's postings by impact, best first, from the messages."""
    with psycopg.connect(dsn) as conn:
        (avg,) = conn.execute(
            "SELECT sum(total_len)::float8 / sum(n_indexed) FROM workspace_stats "
            "WHERE workspace_id = %s AND kind <> '~session_fields'",
            (ws,),
        ).fetchone() or (0.0,)
        rows = conn.execute(
            "SELECT u.lexeme, m.session_id, m.seq, array_length(u.positions, 1), m.token_count "
            "FROM messages m, unnest(m.tsv) u WHERE m.workspace_id = %s",
            (ws,),
        ).fetchall()
    postings: dict[str, list[tuple[float, str, int]]] = {}
    for term, sid, seq, tf, length in rows:
        value = tf / (tf + K1 * (1 - B + B * length / avg))
        postings.setdefault(term, []).append((value, sid, seq))
    return {
        t: sorted(p, key=lambda x: (-x[0], x[1], x[2]))
        for t, p in postings.items()
        if len(p) >= impact.MIN_DF
    }


def _lists(dsn: str, ws: str) -> tuple[dict[str, list[tuple[str, int]]], dict[str, Any]]:
    with psycopg.connect(dsn) as conn:
        chunks = conn.execute(
            "SELECT term, chunk, session_ids, seqs FROM term_lists WHERE workspace_id = %s "
            "ORDER BY term, chunk",
            (ws,),
        ).fetchall()
        heads = conn.execute(
            "SELECT term, df, chunk_max, theta FROM term_list_heads WHERE workspace_id = %s",
            (ws,),
        ).fetchall()
    keys: dict[str, list[tuple[str, int]]] = {}
    for term, _, sids, seqs in chunks:
        keys.setdefault(term, []).extend(zip(sids, seqs, strict=True))
    return keys, {h[0]: h[1:] for h in heads}


def test_lists_hold_each_frequent_terms_best_postings(pg: PgSearch, dsn: str) -> None:
    _fill(pg, "w", sessions=12, per=60)
    pg.maintain(workspace="w")
    expected = _expected(dsn, "w")
    keys, heads = _lists(dsn, "w")
    assert expected and set(keys) == set(expected) == set(heads)
    for term, postings in expected.items():
        kept = postings[: impact.MAX_POSTINGS]
        assert keys[term] == [(sid, seq) for _, sid, seq in kept], term
        df, chunk_max, theta = heads[term]
        assert df == len(postings)
        firsts = [kept[i][0] for i in range(0, len(kept), impact.CHUNK)]
        assert chunk_max == [round(x, 12) for x in firsts] or all(
            abs(a - b) < 1e-12 for a, b in zip(chunk_max, firsts, strict=True)
        )
        left = postings[impact.MAX_POSTINGS :]
        assert abs(theta - (left[0][0] if left else 0.0)) < 1e-12


def test_lag_counts_messages_stored_since_the_build(pg: PgSearch, dsn: str) -> None:
    _fill(pg, "w", sessions=9, per=60)
    before = pg.stats(workspace="w")
    assert before.lists_built_at is None
    pg.maintain(workspace="w")
    built = pg.stats(workspace="w")
    assert built.lists_built_at is not None and built.lists_behind == 0
    assert built.listed_terms >= len(WORDS)
    pg.append(workspace="w", session_id="late", messages=_messages(random.Random(9), 7))
    assert pg.stats(workspace="w").lists_behind == 7
    assert pg.maintain(workspace="w", force=False) is False  # not behind enough
    pg.maintain(workspace="w")
    assert pg.stats(workspace="w").lists_behind == 0


def test_ingest_builds_lists_of_a_workspace_that_needs_them(
    pg: PgSearch, dsn: str, tmp_path: Any
) -> None:
    """With bounded searches on (`Settings.impact_lists`); off, it leaves them be."""
    import json

    rng = random.Random(5)
    folder = tmp_path / "logs"
    folder.mkdir()
    for s in range(10):
        lines = [json.dumps(m) for m in _messages(rng, 50)]
        (folder / f"s{s}.jsonl").write_text("\n".join(lines) + "\n")
    pg.ingest_paths([folder], workspace="w")
    assert pg.stats(workspace="w").lists_built_at is None
    pg.forget(workspace="w")
    with PgSearch.connect(dsn, settings=pg.settings.with_(impact_lists=True)) as on:
        on.ingest_paths([folder], workspace="w")
        stats = on.stats(workspace="w")
    assert stats.lists_built_at is not None and stats.lists_behind == 0
    assert stats.listed_terms >= len(WORDS)


def test_forgetting_a_workspace_drops_its_lists(pg: PgSearch, dsn: str) -> None:
    _fill(pg, "w", sessions=9, per=60)
    pg.maintain(workspace="w")
    pg.forget(workspace="w")
    with psycopg.connect(dsn) as conn:
        for table in ("term_lists", "term_list_heads", "term_list_state"):
            row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            assert row == (0,), table


def test_maintain_command_rebuilds_and_stats_show_the_lag(pg: PgSearch, dsn: str) -> None:
    _fill(pg, "w", sessions=9, per=60)
    runner = CliRunner()
    out = runner.invoke(main, ["--dsn", dsn, "stats", "-w", "w"])
    assert out.exit_code == 0, out.output
    assert "never built" in out.output
    out = runner.invoke(main, ["--dsn", dsn, "maintain", "-w", "w"])
    assert out.exit_code == 0, out.output
    assert "terms listed" in out.output
    out = runner.invoke(main, ["--dsn", dsn, "stats", "-w", "w", "--json"])
    assert '"lists_behind": 0' in out.output
    out = runner.invoke(main, ["--dsn", dsn, "maintain", "--help"])
    assert out.exit_code == 0 and "term lists" in out.output
    out = runner.invoke(main, ["--dsn", dsn, "doctor"])
    assert "term lists: w 0 behind" in out.output


def test_a_build_killed_midway_leaves_the_old_lists(pg: PgSearch, dsn: str) -> None:
    """The build is one transaction: one that fails (here: cancelled by a statement
    timeout) leaves the lists and the watermark as they were."""
    _fill(pg, "w", sessions=9, per=60)
    pg.maintain(workspace="w")
    keys, heads = _lists(dsn, "w")
    pg.append(workspace="w", session_id="late", messages=_messages(random.Random(9), 300))
    with psycopg.connect(dsn) as conn:
        conn.execute("SET statement_timeout = 1")
        conn.execute("SET pgsearch.workspace_id = 'w'")
        from pgsearch.db import queries as q

        try:
            with conn.transaction():
                for s in q.LISTS_CLEAR:
                    conn.execute(s, {"ws": "w"})
                conn.execute("SELECT pg_sleep(0.05)")
        except psycopg.errors.QueryCanceled:
            pass
    assert _lists(dsn, "w") == (keys, heads)
    assert pg.stats(workspace="w").lists_behind == 300

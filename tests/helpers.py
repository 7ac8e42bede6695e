"""Shared test helpers: recounting derived statistics from the rows themselves."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from pgsearch.excerpt import utf8_len
from pgsearch.types import SessionQueryResult

if TYPE_CHECKING:
    from pgsearch import PgSearch


def write_jsonl(path: Path, messages: list[dict[str, Any]] | list[str]) -> Path:
    lines = [m if isinstance(m, str) else json.dumps(m, ensure_ascii=False) for m in messages]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def assert_statistics_exact(dsn: str, workspace: str) -> None:
    """Vocabulary df/sf, per-kind statistics and session counters equal a full recount."""
    with psycopg.connect(dsn) as conn:
        stored_df = dict(
            conn.execute(
                "SELECT term, df FROM vocabulary WHERE workspace_id = %s AND df > 0", (workspace,)
            ).fetchall()
        )
        counted_df = dict(
            conn.execute(
                """SELECT t, count(*) FROM messages, unnest(tsvector_to_array(tsv)) AS t
                   WHERE workspace_id = %s GROUP BY t""",
                (workspace,),
            ).fetchall()
        )
        assert stored_df == counted_df
        stored_sf = dict(
            conn.execute(
                "SELECT term, sf FROM vocabulary WHERE workspace_id = %s AND sf > 0", (workspace,)
            ).fetchall()
        )
        counted_sf = dict(
            conn.execute(
                """SELECT t, count(*) FROM sessions,
                          unnest(tsvector_to_array(coalesce(tsv, ''::tsvector))) AS t
                   WHERE workspace_id = %s GROUP BY t""",
                (workspace,),
            ).fetchall()
        )
        assert stored_sf == counted_sf
        zero = conn.execute(
            "SELECT count(*) FROM vocabulary WHERE workspace_id = %s AND df <= 0 AND sf <= 0",
            (workspace,),
        ).fetchone()
        assert zero == (0,)
        stored_stats = {
            k: (n, ni, ln)
            for k, n, ni, ln in conn.execute(
                "SELECT kind, n_messages, n_indexed, total_len FROM workspace_stats "
                "WHERE workspace_id = %s AND n_messages > 0",
                (workspace,),
            ).fetchall()
        }
        counted_stats = {
            k: (n, ni, ln)
            for k, n, ni, ln in conn.execute(
                """SELECT kind, count(*), count(*) FILTER (WHERE token_count > 0),
                          coalesce(sum(token_count), 0)
                   FROM messages WHERE workspace_id = %s GROUP BY kind""",
                (workspace,),
            ).fetchall()
        }
        assert stored_stats == counted_stats
        fields = conn.execute(
            "SELECT n_indexed, total_len FROM workspace_stats "
            "WHERE workspace_id = %s AND kind = '~session_fields'",
            (workspace,),
        ).fetchone() or (0, 0)
        counted_fields = conn.execute(
            "SELECT count(*) FILTER (WHERE length(coalesce(tsv, ''::tsvector)) > 0), "
            "coalesce(sum(field_len), 0) FROM sessions WHERE workspace_id = %s",
            (workspace,),
        ).fetchone()
        assert fields == counted_fields
        bad_sessions = conn.execute(
            """SELECT s.session_id, s.message_count, count(m.seq), s.next_seq,
                      coalesce(max(m.seq) + 1, 0)
               FROM sessions s LEFT JOIN messages m
                 ON m.workspace_id = s.workspace_id AND m.session_id = s.session_id
               WHERE s.workspace_id = %s
               GROUP BY s.session_id, s.message_count, s.next_seq
               HAVING s.message_count <> count(m.seq)
                   OR s.next_seq < coalesce(max(m.seq) + 1, 0)""",
            (workspace,),
        ).fetchall()
        assert bad_sessions == []


def message_keys(dsn: str, workspace: str) -> list[tuple[str, int]]:
    with psycopg.connect(dsn) as conn:
        return [
            (r[0], r[1])
            for r in conn.execute(
                "SELECT session_id, seq FROM messages WHERE workspace_id = %s ORDER BY 1, 2",
                (workspace,),
            ).fetchall()
        ]


def text_size(result: SessionQueryResult) -> int:
    """UTF-8 bytes of text a result carries (excerpts and titles)."""
    return sum(utf8_len(m.excerpt) + utf8_len(m.title or "") for m in result.matches)


def search_corpus(pg: PgSearch, workspace: str) -> None:
    """Sessions where every candidate strategy, titles, roles and tools have work."""
    common = ["the", "and", "error", "file", "test"]
    rare = ["zephyr", "quokka", "marzipan", "obsidian", "tangerine", "kestrel"]
    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    for s in range(12):
        pg.append(
            workspace=workspace,
            session_id=f"s{s}",
            messages=[
                {
                    "role": ("user", "assistant", "tool")[i % 3],
                    "content": " ".join(
                        [common[(s + i) % 5], common[(s * i) % 5], rare[(s + 2 * i) % 6]]
                        + (["deploy pipeline refactor"] if i % 4 == s % 4 else [])
                        + (["café naïve"] if i in (4, 5) else [])
                    ),
                    "tool_name": "bash" if i % 3 == 2 else None,
                    "created_at": (t0 + timedelta(minutes=s * 50 + i)).isoformat(),
                    "title": f"session about {rare[s % 6]} and deploys" if i == 0 else None,
                }
                for i in range(24)
            ],
        )


#: Queries of every shape: browse, rare, typo, accent, prefix, multi-word, phrase,
#: common words, mixed, nothing searchable, unknown.
SEARCH_QUERIES = [
    "",
    "zephyr",
    "zephir",  # one edit away
    "cafe",
    "quo",  # a prefix
    "deploy pipeline",
    '"pipeline refactor"',
    "the error",
    "zephyr quokka marzipan the",
    "kestrel deploys",
    "!!!",
    "nosuchwordanywhere",
]
SEARCH_FILTERS: list[dict[str, object]] = [
    {},
    {"roles": ["user"]},
    {"tool_name": "bash"},
    {"session_id": "s3"},
    {"since": datetime(2026, 3, 1, 3, tzinfo=UTC), "until": datetime(2026, 3, 1, 8, tzinfo=UTC)},
]

"""Shared test helpers: recounting derived statistics from the rows themselves."""

from __future__ import annotations

import json
import os
import re
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


def assert_statistics_exact(
    dsn: str, workspace: str, *, scope_counts_exact_required: bool = True
) -> None:
    """Vocabulary df/sf, per-kind statistics, scope counts and session counters equal a
    full recount, and every session's first and last times bound those of its entries.
    Without `scope_counts_exact_required` (writers of a release before the scope
    counts ran), a kind's scope counts may instead fail to add up to its statistics."""
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
               GROUP BY s.session_id, s.message_count, s.next_seq, s.created_at, s.updated_at
               HAVING s.message_count <> count(m.seq)
                   OR s.next_seq < coalesce(max(m.seq) + 1, 0)
                   -- A browse reads sessions by these bounds of their entries' times
                   -- (missing ones are wrong too).
                   OR (count(m.seq) > 0
                       AND NOT coalesce(s.created_at <= min(m.created_at)
                                        AND s.updated_at >= max(m.created_at), false))""",
            (workspace,),
        ).fetchall()
        assert bad_sessions == []
        # The scope counts a search sums (`queries.count_sql`): kind by kind, either
        # equal to a recount or, where a writer of a release before them ran, not
        # adding up to the statistics (then a search counts the messages instead).
        stored_scoped = conn.execute(
            "SELECT kind, role, tool_name, n_messages FROM scope_counts "
            "WHERE workspace_id = %s AND n_messages <> 0",
            (workspace,),
        ).fetchall()
        counted_scoped = conn.execute(
            "SELECT kind, role, coalesce(tool_name, ''), count(*) FROM messages "
            "WHERE workspace_id = %s GROUP BY 1, 2, 3",
            (workspace,),
        ).fetchall()
        for kind in {r[0] for r in stored_scoped} | {r[0] for r in counted_scoped}:
            stored = sorted(tuple(r) for r in stored_scoped if r[0] == kind)
            counted = sorted(tuple(r) for r in counted_scoped if r[0] == kind)
            if sum(r[3] for r in stored) == stored_stats.get(kind, (0, 0, 0))[0]:
                assert stored == counted, kind
            else:
                assert not scope_counts_exact_required, kind


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


# -- JSON examples in the docs, checked against a real run ----------------------------------

#: An example block: ``<!-- output of: COMMAND -->`` then a fenced JSON block.
_EXAMPLE_RE = re.compile(r"<!-- output of: (?P<command>.+?) -->\n```json\n(?P<body>.*?)```", re.S)
#: Set to rewrite each example from the run instead of checking it.
WRITE_EXAMPLES = os.environ.get("PGSEARCH_WRITE_EXAMPLES") == "1"
#: A string in an example standing for a value that differs from run to run.
ANY = "…"


def doc_examples(path: Path) -> dict[str, Any]:
    """The JSON examples of a document, by the command they are the output of."""
    found = {m["command"]: json.loads(m["body"]) for m in _EXAMPLE_RE.finditer(path.read_text())}
    assert found, f"{path} has no '<!-- output of: ... -->' example"
    return found


def _matches(shown: Any, actual: Any) -> bool:
    if shown == ANY:
        return True
    if isinstance(shown, dict) and isinstance(actual, dict):
        return shown.keys() == actual.keys() and all(_matches(shown[k], actual[k]) for k in shown)
    if isinstance(shown, list) and isinstance(actual, list):
        return len(shown) == len(actual) and all(map(_matches, shown, actual))
    return bool(shown == actual)


def _wrapped(item: Any, width: int = 88) -> str:
    """A list item of an example, its keys wrapped to lines of about `width`."""
    if not isinstance(item, dict):
        return "    " + json.dumps(item, ensure_ascii=False)
    lines: list[str] = []
    line = "    {"
    for i, (key, value) in enumerate(item.items()):
        part = f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}"
        part += "}" if i == len(item) - 1 else ","
        if len(line) + len(part) + 1 > width and line.strip() != "{":
            lines.append(line)
            line = "     " + part
        else:
            line += ("" if line.endswith("{") else " ") + part
    return "\n".join([*lines, line])


def format_example(value: Any) -> str:
    """An example as the docs show it: one top-level key a line, lists one item a line."""
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            if isinstance(item, list) and item:
                inner = ",\n".join(_wrapped(x) for x in item)
                lines.append(f"  {json.dumps(key)}: [\n{inner}\n  ]")
            else:
                lines.append(f"  {json.dumps(key)}: {json.dumps(item, ensure_ascii=False)}")
        return "{\n" + ",\n".join(lines) + "\n}\n"
    return json.dumps(value, ensure_ascii=False) + "\n"


def check_example(path: Path, command: str, actual: Any, *, volatile: tuple[str, ...] = ()) -> None:
    """The example of `command` in `path` shows `actual` (values under the keys named
    in `volatile` shown as "…"); with PGSEARCH_WRITE_EXAMPLES=1 it is rewritten."""

    def blank(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: ANY if k in volatile and v is not None else blank(v) for k, v in value.items()
            }
        if isinstance(value, list):
            return [blank(v) for v in value]
        return value

    actual = blank(actual)
    if WRITE_EXAMPLES:
        text = path.read_text()
        marker = f"<!-- output of: {command} -->\n```json\n"
        start = text.index(marker) + len(marker)
        end = text.index("```", start)
        path.write_text(text[:start] + format_example(actual) + text[end:])
        return
    shown = doc_examples(path)[command]
    assert _matches(shown, actual), (
        f"{path.name}: the example of `{command}` differs from a real run "
        f"(PGSEARCH_WRITE_EXAMPLES=1 rewrites it):\n{format_example(actual)}"
    )


def marked(match: Any) -> str:
    """A match's excerpt with its highlights between ``**`` (for assertions)."""
    from pgsearch.highlight import segments

    if isinstance(match, dict):
        text, spans = match["excerpt"], [tuple(s) for s in match["highlights"]]
    else:
        text, spans = match.excerpt, match.highlights
    return "".join(f"**{p}**" if hit else p for p, hit in segments(text, spans))


def newest_match_per_session(conn: psycopg.Connection[Any], scope: Any, tsq: str) -> list[Any]:
    """Every session's newest match of `tsq` under the filters `scope` (by time, then
    position), computed in Python from all of them: ``(session_id, seq, created_at)``
    in the spread's order (`queries.NEWEST_FIRST`)."""
    from pgsearch.db import queries as q

    rows = conn.execute(  # type: ignore[call-overload]
        "SELECT m.session_id, m.seq, m.created_at FROM messages m WHERE "
        + q._filter_sql(scope, "m")
        + " AND m.tsv @@ %(tsq)s::tsquery",
        dict(q._filter_params(scope), tsq=tsq),
    ).fetchall()
    newest: dict[str, tuple[Any, ...]] = {}
    for sid, seq, at in rows:
        if sid not in newest or (at, seq) > (newest[sid][2], newest[sid][1]):
            newest[sid] = (sid, seq, at)
    return sorted(newest.values(), key=lambda r: (-r[2].timestamp(), r[0], -r[1]))

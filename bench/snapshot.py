"""Every result of the bench query classes, written so that two runs can be compared.

    python -m bench.snapshot --messages 30000 --load --out before.jsonl
    ... change the code ...
    python -m bench.snapshot --messages 30000 --out after.jsonl
    cmp before.jsonl after.jsonl

Runs each generated query (``bench/generate.py``) one best hit per session and all
hits, under the default settings and under settings tight enough that every
candidate strategy runs (a tiny cap, a low stop-like ratio, a small scan limit),
and follows the cursor for a second page. Each result is one JSON line: the ids,
order, exact scores (``repr``), kinds, excerpts, titles, cursors, counts and notices.
A change meant to keep results identical (a refactor, a new I/O driver) must leave
the file byte-identical.

The database (``pgsearch_bench_snapshot_<size>``) is created and loaded with
``--load`` and kept, so that runs before and after a change read the same rows.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from bench.generate import Config, ensure_corpus
from bench.speed import create_database, dsn_for, request_for
from pgsearch import PgSearch, SessionQueryRequest, Settings
from pgsearch.types import SessionQueryResult

DEFAULT_SERVER = "postgresql://127.0.0.1:5432/postgres"
#: Settings under which the all-words, newest-first, any-unit and coverage-ordered
#: strategies all run on a small corpus.
TIGHT = {"candidate_cap": 10, "stop_df_ratio": 0.02, "candidate_scan_limit": 300}


def _result(result: SessionQueryResult) -> dict[str, Any]:
    return {
        "matches": [
            [
                m.session_id,
                m.seq,
                m.entry_id,
                m.kind,
                m.role,
                m.turn,
                m.tool_name,
                m.created_at.isoformat(),
                repr(m.score),
                m.excerpt,
                m.title,
            ]
            for m in result.matches
        ],
        "searched": result.searched,
        "capped": result.candidates_capped,
        "notice": result.notice,
        "cursor": result.next_cursor,
    }


def snapshot(dsn: str, queries: list[dict[str, Any]], out: Path) -> str:
    """Write every result to `out`; return the file's SHA-256."""
    digest = hashlib.sha256()
    with out.open("w", encoding="utf-8") as fh:
        for variant, overrides in (("default", {}), ("tight", TIGHT)):
            # No timeout: a busy server must not turn a result into an error.
            settings = Settings.from_env({}, dsn=dsn, statement_timeout_ms=0).with_(**overrides)
            with PgSearch.connect(settings=settings) as pg:
                for q in queries:
                    provider = pg.provider(workspace=q["workspace"], session_id=q.get("session"))
                    for per_session in (True, False):
                        request = request_for(q, per_session=per_session)
                        pages = [provider.search(request)]
                        if pages[0].next_cursor:
                            fields = {k: getattr(request, k) for k in request.__dataclass_fields__}
                            fields["cursor"] = pages[0].next_cursor
                            pages.append(provider.search(SessionQueryRequest(**fields)))
                        line = json.dumps(
                            {
                                "variant": variant,
                                "qid": q["qid"],
                                "per_session": per_session,
                                "pages": [_result(p) for p in pages],
                            },
                            ensure_ascii=False,
                            sort_keys=True,
                        )
                        fh.write(line + "\n")
                        digest.update(line.encode() + b"\n")
    return digest.hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=30_000)
    parser.add_argument("--workspaces", type=int, default=5)
    parser.add_argument("--queries-per-class", type=int, default=40)
    parser.add_argument("--server", default=os.environ.get("PGSEARCH_BENCH_SERVER", DEFAULT_SERVER))
    parser.add_argument("--load", action="store_true", help="(re)create and load the database")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    cfg = Config(
        messages=args.messages,
        workspaces=args.workspaces,
        queries_per_class=args.queries_per_class,
    )
    corpus = Path(__file__).resolve().parent / "results" / f"snapshot-{cfg.label()}"
    ensure_corpus(cfg, corpus, quiet=True)
    name = f"pgsearch_bench_snapshot_{cfg.label().lower()}"
    if args.load:
        dsn = create_database(args.server, name)
        PgSearch.migrate(dsn)
        with PgSearch.connect(dsn) as pg:
            for folder in sorted((corpus / "corpus").iterdir()):
                report = pg.ingest_paths([folder], workspace=folder.name)
                assert not report.errors, report.errors
    else:
        dsn = dsn_for(args.server, name)
    with (corpus / "queries.jsonl").open(encoding="utf-8") as fh:
        queries = [json.loads(line) for line in fh]
    print(snapshot(dsn, queries, args.out), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

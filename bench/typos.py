"""Typo recall beside spelled-right recall on the generated agent-log corpus.

    python -m bench.typos                     # 60k messages, generated once
    python -m bench.typos --messages 100000

Runs the query classes of `bench.generate` that come in pairs, each typo query beside
its spelled-right twin on the same source message — ``typo``/``exact`` (not the same
sources), ``rare_typo``/``rare_exact`` (a word in at most 5 messages, its typo
crowded by other terms one edit away) and ``realword_typo``/``realword_exact`` (the
misspelling itself occurs in a few messages) — and prints message-level Recall@10
(``per_session=False``, ``limit=10``) and the typo/spelled-right ratio. Writes
``bench/results/typos-<size>.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.generate import Config, ensure_corpus
from bench.locomo import vacuum
from bench.speed import DEFAULT_SERVER, RESULTS, create_database, drop_database
from pgsearch import PgSearch, SessionQueryRequest
from pgsearch.settings import Settings

PAIRS = (("exact", "typo"), ("rare_exact", "rare_typo"), ("realword_exact", "realword_typo"))


def load(corpus_dir: Path) -> list[dict[str, Any]]:
    classes = {c for pair in PAIRS for c in pair}
    rows = [json.loads(line) for line in (corpus_dir / "queries.jsonl").open(encoding="utf-8")]
    return [r for r in rows if r["class"] in classes]


def ingest(pg: PgSearch, corpus_dir: Path) -> None:
    for ws_dir in sorted(p for p in (corpus_dir / "corpus").iterdir() if p.is_dir()):
        report = pg.ingest_paths(sorted(ws_dir.glob("*.jsonl")), workspace=ws_dir.name)
        if report.errors:
            raise SystemExit(f"ingest errors in {ws_dir}: {report.errors[:3]}")


def evaluate(pg: PgSearch, queries: list[dict[str, Any]]) -> dict[str, Any]:
    hits: dict[str, list[float]] = {}
    for q in queries:
        rel = {(s, int(n)) for s, n in q["relevant"]}
        result = pg.search(
            SessionQueryRequest(query=q["query"], limit=10, per_session=False),
            workspace=q["workspace"],
        )
        found = any((m.session_id, m.seq) in rel for m in result.matches)
        hits.setdefault(q["class"], []).append(1.0 if found else 0.0)
    recall = {c: round(sum(v) / len(v), 4) for c, v in hits.items() if v}
    out: dict[str, Any] = {"recall@10": recall, "ratio": {}}
    for right, typo in PAIRS:
        if recall.get(right):
            out["ratio"][typo] = round(recall.get(typo, 0.0) / recall[right], 4)
    return out


def render(figures: dict[str, Any], label: str = "pgsearch") -> str:
    lines = [
        "| system | class | typo R@10 | spelled-right R@10 | ratio |",
        "|---|---|---:|---:|---:|",
    ]
    rec = figures["recall@10"]
    for right, typo in PAIRS:
        lines.append(
            f"| {label} | {typo} | {rec.get(typo, 0):.3f} | {rec.get(right, 0):.3f} "
            f"| {figures['ratio'].get(typo, 0):.3f} |"
        )
    return "\n".join(lines)


def run(
    messages: int, *, server: str, settings: Settings | None = None, keep_db: bool = False
) -> dict[str, Any]:
    cfg = Config(messages=messages)
    corpus_dir = RESULTS / f"corpus-{cfg.label()}"
    ensure_corpus(cfg, corpus_dir)
    queries = load(corpus_dir)
    dbname = f"pgsearch_bench_typos_{cfg.label().lower()}"
    dsn = create_database(server, dbname)
    try:
        PgSearch.migrate(dsn)
        with PgSearch.connect(dsn, settings=settings) as pg:
            ingest(pg, corpus_dir)
            vacuum(dsn)
            t0 = time.perf_counter()
            figures = evaluate(pg, queries)
            figures["seconds"] = round(time.perf_counter() - t0, 1)
    finally:
        if not keep_db:
            drop_database(server, dbname)
    return {"messages": messages, "queries": len(queries), "pgsearch": figures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=60_000)
    parser.add_argument("--server", default=DEFAULT_SERVER)
    parser.add_argument("--keep-db", action="store_true")
    args = parser.parse_args(argv)
    results = run(args.messages, server=args.server, keep_db=args.keep_db)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"typos-{Config(messages=args.messages).label()}.json"
    path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(render(results["pgsearch"]))
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

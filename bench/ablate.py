"""Ablations: each ranking rule switched off (or on) alone, on every labelled set.

    python -m bench.ablate                        # every configuration below
    python -m bench.ablate --only final,no_context --sets locomo,agentlog

Sets: ``locomo`` (the shared set of real conversations, `bench.locomo`: message R@10
clean and typo, EvR@10 clean, session R@1 clean), ``agentlog`` (the synthetic
agent-log dev set of `bench.devset`: MRR@10 as written, typo and accent) and
``typos`` (`bench.typos`: typo recall beside spelled-right recall) and ``latency``
(p50/p99 of the default request over 420 generated queries on 100k messages,
after a warm-up pass: what each rule costs). Each set is
ingested once into its own database (``pgsearch_bench_ablate_<set>``, kept between
runs; ``--fresh`` rebuilds them); only the settings change between configurations, so
every rule measured here works on the index as it is. Writes
``bench/results/ablate.json`` and prints one table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench import locomo, typos
from bench import quality as agentlog
from bench.devset import generate_devset
from bench.generate import Config, ensure_corpus
from bench.speed import DEFAULT_SERVER, RESULTS, create_database, dsn_for
from pgsearch import PgSearch
from pgsearch.settings import Settings

#: The rules as they ship, and each one changed alone.
FINAL: dict[str, Any] = {
    "typo_distance": "osa",
    "context_weight": 0.3,
    "session_weight": 0.3,
    "speaker_weight": 1.0,
    "per_expansion_idf": True,
    "realword_df": 0,
}
CONFIGS: dict[str, dict[str, Any]] = {
    "before": {
        "typo_distance": "levenshtein",
        "context_weight": 0.0,
        "session_weight": 0.0,
        "speaker_weight": 0.0,
        "per_expansion_idf": False,
        "realword_df": 0,
    },
    "final": {},
    "levenshtein": {"typo_distance": "levenshtein"},
    "no_context": {"context_weight": 0.0},
    "no_session": {"session_weight": 0.0},
    "no_speaker": {"speaker_weight": 0.0},
    "no_per_expansion_idf": {"per_expansion_idf": False},
    "realword_20": {"realword_df": 20},
    # Tuning (not ablations): other weights and limits.
    "session_0.1": {"session_weight": 0.1},
    "trigram_0.2": {"trigram_threshold": 0.2},
    "session_0.5": {"session_weight": 0.5},
    "context_0.5": {"context_weight": 0.5},
    "expansions_16": {"max_expansions": 16, "fuzzy_fetch": 64},
}


def _exists(server: str, name: str) -> bool:
    with psycopg.connect(server, autocommit=True) as conn:
        row = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
    return row is not None


def database(server: str, name: str, fresh: bool, load: Any) -> str:
    """The DSN of set database `name`, ingesting it with `load(pg)` when new."""
    dbname = f"pgsearch_bench_ablate_{name}"
    if not fresh and _exists(server, dbname):
        with psycopg.connect(dsn_for(server, dbname), autocommit=True) as conn:
            done = conn.execute(
                sql.SQL("SELECT to_regclass('ablate_loaded') IS NOT NULL")
            ).fetchone()
        if done and done[0]:
            return dsn_for(server, dbname)
    dsn = create_database(server, dbname)
    PgSearch.migrate(dsn)
    with PgSearch.connect(dsn) as pg:
        load(pg)
    locomo.vacuum(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE ablate_loaded ()")
    return dsn


def run_locomo(pg: PgSearch, devset: Path, every: int = 1) -> dict[str, float]:
    figures = locomo.evaluate(
        locomo.searcher(pg), devset, variants=("clean", "typo"), sessions=True, every=every
    )
    c, t = figures["clean"], figures["typo"]
    return {
        "locomo_r10_clean": c["r@10"],
        "locomo_r10_typo": t["r@10"],
        "locomo_evr10": c["evr@10"],
        "locomo_session_r1": c["session_r@1"],
        "locomo_ms_p50": figures["latency_ms"]["p50"],
    }


def run_agentlog(pg: PgSearch, queries: list[dict[str, Any]]) -> dict[str, float]:
    figures = agentlog.evaluate(agentlog.ours(pg), queries)
    return {
        f"agentlog_mrr_{v}": figures[v]["message"]["mrr@10"] for v in ("original", "typo", "accent")
    }


def run_typos(pg: PgSearch, queries: list[dict[str, Any]]) -> dict[str, float]:
    figures = typos.evaluate(pg, queries)
    rec = figures["recall@10"]
    return {
        "rare_typo": rec.get("rare_typo", 0.0),
        "rare_exact": rec.get("rare_exact", 0.0),
        "realword_typo": rec.get("realword_typo", 0.0),
        "realword_exact": rec.get("realword_exact", 0.0),
    }


def run_latency(pg: PgSearch, queries: list[dict[str, Any]]) -> dict[str, float]:
    """p50/p99 of the default request over the generated queries (one warm pass)."""
    from pgsearch import SessionQueryRequest

    def once() -> list[float]:
        ms = []
        for q in queries:
            request = SessionQueryRequest(query=q["query"], limit=10)
            t0 = time.perf_counter()
            pg.search(request, workspace=q["workspace"])
            ms.append((time.perf_counter() - t0) * 1000)
        return sorted(ms)

    once()
    ms = once()
    return {
        "latency_p50": round(ms[len(ms) // 2], 2),
        "latency_p99": round(ms[int(len(ms) * 0.99)], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated configurations")
    parser.add_argument("--sets", default="locomo,agentlog,typos")
    parser.add_argument("--server", default=DEFAULT_SERVER)
    parser.add_argument("--fresh", action="store_true")
    parser.add_argument("--every", type=int, default=1, help="LoCoMo: every n-th query only")
    parser.add_argument("--set", action="append", default=[], help="extra key=value for all")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(CONFIGS)
    sets = [s for s in args.sets.split(",") if s]
    extra: dict[str, Any] = {}
    for item in args.set:
        key, _, value = item.partition("=")
        extra[key] = json.loads(value) if value[:1] in '0123456789-tf[{"' else value
    runners: dict[str, Any] = {}
    if "locomo" in sets:
        try:
            devset = locomo.locate("locomo")
        except locomo.DevsetMissing as missing:
            print(f"bench.ablate: {missing}", file=sys.stderr)
            return 2
        dsn = database(
            args.server, "locomo", args.fresh, lambda pg: locomo.ingest(pg, devset, accented=False)
        )
        runners["locomo"] = (dsn, lambda pg: run_locomo(pg, devset, args.every))
    if "agentlog" in sets:
        root = RESULTS / "devset"
        if not (root / "manifest.json").is_file():
            generate_devset(root)
        queries = [json.loads(x) for x in (root / "queries.jsonl").open(encoding="utf-8")]

        def load_agentlog(pg: PgSearch) -> None:
            for ws, path in agentlog.workspace_dirs(root / "corpus"):
                pg.ingest_paths(sorted(path.glob("*.jsonl")), workspace=ws)

        dsn = database(args.server, "agentlog", args.fresh, load_agentlog)
        runners["agentlog"] = (dsn, lambda pg: run_agentlog(pg, queries))
    if "typos" in sets:
        cfg = Config(messages=60_000)
        corpus = RESULTS / f"corpus-{cfg.label()}"
        ensure_corpus(cfg, corpus)
        tq = typos.load(corpus)
        dsn = database(args.server, "typos", args.fresh, lambda pg: typos.ingest(pg, corpus))
        runners["typos"] = (dsn, lambda pg: run_typos(pg, tq))
    if "latency" in sets:
        lcfg = Config(messages=100_000)
        lcorpus = RESULTS / f"corpus-{lcfg.label()}"
        ensure_corpus(lcfg, lcorpus)
        rows = [json.loads(x) for x in (lcorpus / "queries.jsonl").open(encoding="utf-8")]
        # Ranked classes without filters or a session scope, 60 of each.
        plain = ("exact", "typo", "accent", "cjk", "common", "short", "multi")
        picked = [r for c in plain for r in [x for x in rows if x["class"] == c][:60]]
        dsn = database(args.server, "latency", args.fresh, lambda pg: typos.ingest(pg, lcorpus))
        runners["latency"] = (dsn, lambda pg: run_latency(pg, picked))
    table: dict[str, dict[str, float]] = {}
    for name in names:
        settings = Settings().with_(**{**FINAL, **extra, **CONFIGS[name]})
        row: dict[str, float] = {}
        t0 = time.perf_counter()
        for dsn, runner in runners.values():
            with PgSearch.connect(dsn, settings=settings) as pg:
                row.update(runner(pg))
        table[name] = row
        print(name, json.dumps(row), f"({time.perf_counter() - t0:.0f} s)", flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "ablate.json"
    out.write_text(
        json.dumps({"final": {**FINAL, **extra}, "configs": CONFIGS, "table": table}, indent=2)
        + "\n",
        encoding="utf-8",
    )
    print(render(table))
    return 0


def render(table: dict[str, dict[str, float]]) -> str:
    cols = sorted({k for row in table.values() for k in row}, key=_col_order)
    lines = ["| config | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for name, row in table.items():
        lines.append(f"| {name} | " + " | ".join(f"{row.get(c, 0):.3f}" for c in cols) + " |")
    return "\n".join(lines)


def _col_order(col: str) -> tuple[int, str]:
    for i, prefix in enumerate(("locomo", "agentlog", "rare", "realword", "latency")):
        if col.startswith(prefix):
            return i, col
    return 9, col


if __name__ == "__main__":
    sys.exit(main())

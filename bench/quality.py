"""Ranking quality: Recall@1/5/10, MRR@10 and nDCG@10 at message and session level.

    python -m bench.quality                                   # the synthetic dev set
    python -m bench.quality --corpus DIR --queries FILE       # any labelled corpus
    python -m bench.quality --devset locomo                   # real conversations

The corpus is in pgsearch's ingest format, one directory per workspace
(``DIR/<workspace>/*.jsonl``; ``*.jsonl`` directly in DIR go to workspace
``default``). The queries file is JSON Lines with ``qid``, ``query``, ``workspace``
and ``relevant`` (a list of ``[session_id, seq]``). Without ``--corpus`` the dev set
of `bench.devset` is generated (once) and used.

Every query also runs as two variants made deterministically from its qid: ``typo``
(one edit in about half the words of 5+ letters) and ``accent`` (accents added to
about half the words). Message level searches all hits (``per_session=False``);
session level uses the default one-best-hit-per-session request, and a session is
relevant when it holds a relevant message. Gains are binary.

The same queries can run through the alternatives (``--alternatives
fts,sqlite,bm25s``); their session-level lists are the distinct sessions of their
first 50 hits. Writes ``bench/results/quality-<name>.json`` and prints a table.

``--devset locomo`` scores the labelled set of real conversations read from
``../shared/devsets/locomo`` (see `bench.locomo`) and writes
``bench/results/quality-locomo.json``; with ``--commit`` also the committed copy
``bench/RESULTS-quality-locomo.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import string
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg

from bench import alternatives as alt
from bench import locomo
from bench.devset import generate_devset
from bench.generate import add_accents
from bench.speed import DEFAULT_SERVER, RESULTS, create_database, drop_database
from pgsearch import PgSearch, SessionQueryRequest

VARIANTS = ("original", "typo", "accent")
KS = (1, 5, 10)


def _rng(qid: str, variant: str) -> random.Random:
    return random.Random(int.from_bytes(hashlib.sha256(f"{qid}/{variant}".encode()).digest()[:8]))


def typo_variant(query: str, qid: str) -> str:
    """One edit (substitution, insertion, deletion) in about half the words of 5+ letters."""
    rng = _rng(qid, "typo")
    words = query.split(" ")
    eligible = [i for i, w in enumerate(words) if len(w) >= 5 and w.isalpha()]
    chosen = [i for i in eligible if rng.random() < 0.5] or eligible[:1]
    for i in chosen:
        w = words[i]
        pos = rng.randrange(1, len(w))
        op = rng.choice(("sub", "ins", "del") if len(w) >= 6 else ("sub", "ins"))
        letters = [c for c in string.ascii_lowercase if c != w[pos].lower()]
        if op == "sub":
            words[i] = w[:pos] + rng.choice(letters) + w[pos + 1 :]
        elif op == "ins":
            words[i] = w[:pos] + rng.choice(string.ascii_lowercase) + w[pos:]
        else:
            words[i] = w[:pos] + w[pos + 1 :]
    return " ".join(words)


def accent_variant(query: str, qid: str) -> str:
    """Accents added to about half the words (those with an accentable letter)."""
    rng = _rng(qid, "accent")
    words = query.split(" ")
    eligible = [i for i, w in enumerate(words) if w.isalpha() and w.isascii()]
    chosen = [i for i in eligible if rng.random() < 0.5] or eligible[:1]
    for i in chosen:
        words[i] = add_accents(words[i], rng)
    return " ".join(words)


def variant(query: str, qid: str, name: str) -> str:
    if name == "typo":
        return typo_variant(query, qid)
    if name == "accent":
        return accent_variant(query, qid)
    return query


# --- metrics ---------------------------------------------------------------------


def metrics(ranked: Sequence[Any], relevant: set[Any]) -> dict[str, float]:
    """Recall@1/5/10, MRR@10 and nDCG@10 (binary gains) of one ranked list."""
    out: dict[str, float] = {}
    top = list(ranked[:10])
    for k in KS:
        out[f"recall@{k}"] = len(relevant & set(top[:k])) / len(relevant) if relevant else 0.0
    out["mrr@10"] = next((1.0 / (i + 1) for i, key in enumerate(top) if key in relevant), 0.0)
    dcg = sum(1.0 / math.log2(i + 2) for i, key in enumerate(top) if key in relevant)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
    out["ndcg@10"] = dcg / ideal if ideal else 0.0
    return out


def mean(rows: list[dict[str, float]]) -> dict[str, float]:
    if not rows:
        return {}
    return {k: round(sum(r[k] for r in rows) / len(rows), 4) for k in rows[0]}


Searcher = Callable[[str, str], tuple[list[tuple[str, int]], list[str]]]


def evaluate(search: Searcher, queries: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean metrics per variant and level for one system, and its latency."""
    per: dict[str, dict[str, list[dict[str, float]]]] = {}
    ms: list[float] = []
    for q in queries:
        rel_msgs = {(s, int(n)) for s, n in q["relevant"]}
        rel_sessions = {s for s, _ in rel_msgs}
        for name in VARIANTS:
            text = variant(q["query"], q["qid"], name)
            t0 = time.perf_counter()
            messages, sessions = search(text, q["workspace"])
            ms.append((time.perf_counter() - t0) * 1000)
            slot = per.setdefault(name, {"message": [], "session": []})
            slot["message"].append(metrics(messages, rel_msgs))
            slot["session"].append(metrics(sessions, rel_sessions))
    out: dict[str, Any] = {
        name: {lvl: mean(rows) for lvl, rows in v.items()} for name, v in per.items()
    }
    ms.sort()
    out["latency_ms"] = {
        "p50": round(ms[len(ms) // 2], 2) if ms else None,
        "p95": round(ms[int(len(ms) * 0.95)], 2) if ms else None,
        "note": "per query: all-hits and per-session searches for pgsearch, one for others",
    }
    return out


def ours(pg: PgSearch) -> Searcher:
    def search(text: str, workspace: str) -> tuple[list[tuple[str, int]], list[str]]:
        provider = pg.provider(workspace=workspace)
        hits = provider.search(SessionQueryRequest(query=text, limit=10, per_session=False))
        best = provider.search(SessionQueryRequest(query=text, limit=10, per_session=True))
        return [(m.session_id, m.seq) for m in hits.matches], [m.session_id for m in best.matches]

    return search


def alternative(system: alt.Alternative) -> Searcher:
    def search(text: str, workspace: str) -> tuple[list[tuple[str, int]], list[str]]:
        try:
            keys = system.search(alt.Query(text=text, workspace=workspace), 50)
        except Exception:
            keys = []
        return keys[:10], list(dict.fromkeys(k[0] for k in keys))[:10]

    return search


# --- running ---------------------------------------------------------------------


def workspace_dirs(corpus: Path) -> list[tuple[str, Path]]:
    dirs = [(p.name, p) for p in sorted(corpus.iterdir()) if p.is_dir()]
    if any(corpus.glob("*.jsonl")):
        dirs.append(("default", corpus))
    return dirs


def run(
    corpus: Path,
    queries_path: Path,
    *,
    server: str,
    name: str,
    alternatives: Sequence[str] = (),
    out: Path = RESULTS,
    keep_db: bool = False,
) -> dict[str, Any]:
    queries = [
        json.loads(line)
        for line in queries_path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    dbname = f"pgsearch_bench_quality_{name}"
    dsn = create_database(server, dbname)
    started = time.perf_counter()
    try:
        PgSearch.migrate(dsn)
        with PgSearch.connect(dsn) as pg:
            t0 = time.perf_counter()
            for ws, path in workspace_dirs(corpus):
                files = sorted(path.glob("*.jsonl"))
                report = pg.ingest_paths(files, workspace=ws)
                if report.errors:
                    raise SystemExit(f"ingest errors in {path}: {report.errors[:3]}")
            # As after any bulk load (and as bench.speed does): fresh planner statistics.
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE")
            results: dict[str, Any] = {
                "name": name,
                "corpus": str(corpus),
                "queries": len(queries),
                "ingest_s": round(time.perf_counter() - t0, 1),
                "systems": {"pgsearch": evaluate(ours(pg), queries)},
            }
        if alternatives:
            rows = _rows(corpus)
            if "fts" in alternatives:
                tables = alt.PostgresTables(dsn)
                tables.build(rows, trigram=False)
                results["systems"]["fts"] = evaluate(alternative(alt.PostgresFTS(tables)), queries)
                tables.close()
            if "sqlite" in alternatives:
                out.mkdir(parents=True, exist_ok=True)
                lite = alt.SQLiteFTS5(out / f"quality-{name}.db", rows)
                results["systems"]["sqlite"] = evaluate(alternative(lite), queries)
                lite.close()
                (out / f"quality-{name}.db").unlink(missing_ok=True)
            if "bm25s" in alternatives:
                results["systems"]["bm25s"] = evaluate(alternative(alt.BM25S(rows)), queries)
    finally:
        if not keep_db:
            drop_database(server, dbname)
    results["seconds"] = round(time.perf_counter() - started, 1)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"quality-{name}.json"
    path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(render(results))
    print(f"results: {path}")
    return results


def _rows(corpus: Path) -> list[alt.Row]:
    return alt.load_rows(corpus, workspace_dirs(corpus))


def render(results: dict[str, Any]) -> str:
    lines = [
        f"== quality on {results['name']} ({results['queries']} queries) ==",
        "| system | variant | level | R@1 | R@5 | R@10 | MRR@10 | nDCG@10 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for system, by_variant in results["systems"].items():
        for name, levels in by_variant.items():
            if name not in VARIANTS:
                continue
            for level, m in levels.items():
                lines.append(
                    f"| {system} | {name} | {level} | {m['recall@1']:.3f} | {m['recall@5']:.3f} "
                    f"| {m['recall@10']:.3f} | {m['mrr@10']:.3f} | {m['ndcg@10']:.3f} |"
                )
    for system, by_variant in results["systems"].items():
        lat = by_variant.get("latency_ms", {})
        lines.append(f"{system}: p50 {lat.get('p50')} ms, p95 {lat.get('p95')} ms per query")
    return "\n".join(lines)


def run_devset(args: argparse.Namespace) -> int:
    """``--devset NAME``: score a shared labelled set; exit 2 when it is absent."""
    try:
        devset = locomo.locate(args.devset, args.devset_dir)
    except locomo.DevsetMissing as missing:
        print(f"bench.quality: {missing}", file=sys.stderr)
        return 2
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(locomo.VARIANTS))
    if unknown:
        print(f"bench.quality: unknown variants {unknown}", file=sys.stderr)
        return 2
    results = locomo.run(devset, server=args.server, variants=variants, keep_db=args.keep_db)
    results["commit"] = _commit()
    RESULTS.mkdir(parents=True, exist_ok=True)
    paths = [RESULTS / f"quality-{args.devset}.json"]
    if args.commit:
        paths.append(Path(__file__).resolve().parent / f"RESULTS-quality-{args.devset}.json")
    for path in paths:
        path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(locomo.render(results))
    print("results: " + ", ".join(str(p) for p in paths))
    return 0


def _commit() -> str | None:
    import subprocess

    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="pgsearch ranking quality (see bench/README.md)")
    parser.add_argument("--corpus", type=Path, help="default: the synthetic dev set")
    parser.add_argument("--queries", type=Path)
    parser.add_argument("--name", help="results name (default: devset or the corpus dir name)")
    parser.add_argument("--server", default=DEFAULT_SERVER)
    parser.add_argument("--alternatives", default="", help="comma-separated: fts,sqlite,bm25s")
    parser.add_argument("--keep-db", action="store_true")
    parser.add_argument("--devset", choices=("locomo",), help="a shared labelled set")
    parser.add_argument("--devset-dir", type=Path, help="where that set is (default ../shared)")
    parser.add_argument(
        "--variants",
        default=",".join(locomo.VARIANTS),
        help="--devset only: comma-separated variants to run",
    )
    parser.add_argument(
        "--commit", action="store_true", help="--devset only: also write bench/RESULTS-*.json"
    )
    args = parser.parse_args(argv)
    if args.devset is not None:
        return run_devset(args)
    if args.corpus is None:
        devset = RESULTS / "devset"
        if not (devset / "manifest.json").is_file():
            generate_devset(devset)
        corpus, queries, name = devset / "corpus", devset / "queries.jsonl", "devset"
    else:
        if args.queries is None:
            parser.error("--queries is required with --corpus")
        corpus, queries, name = args.corpus, args.queries, args.name or args.corpus.name
    run(
        corpus,
        queries,
        server=args.server,
        name=args.name or name,
        alternatives=[a for a in args.alternatives.split(",") if a],
        keep_db=args.keep_db,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Ranking quality on a labelled set of real long conversations (LoCoMo layout).

    python -m bench.quality --devset locomo            # reads ../shared/devsets/locomo
    python -m bench.quality --devset locomo --devset-dir DIR

The set is read where it lies at run time and never copied: its licence keeps it out
of this repository. Its layout (see the set's own README):

- ``sessions/<workspace>/<session>.jsonl`` and ``sessions_accent/<workspace>/...``
  (the same messages with accents added on the document side);
- ``queries_clean.jsonl``, ``queries_typo.jsonl``, ``queries_accent.jsonl``: ``qid``,
  ``workspace``, ``text``, ``category``, ``relevant`` (``[session_id, seq]`` pairs).

Each conversation is one workspace; every query runs scoped to its workspace with
``limit=10``: ``per_session=False`` for message level, ``per_session=True`` for
session level. Variants: ``clean``, ``typo`` and ``accent`` (the query files against
the plain sessions) and ``accent_docs`` (clean queries against the accented
sessions). Figures:

- **R@10**: share of queries with any evidence message in the top 10 (the headline);
- **MRR@10**: reciprocal rank of the first evidence message;
- **EvR@10**: share of a query's evidence messages in the top 10, averaged;
- **session R@1 / R@10**: share of queries whose first (any of the first ten)
  session holds evidence, one hit per session.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from pgsearch import PgSearch, SessionQueryRequest
from pgsearch.settings import Settings

#: The query files and which corpus each variant searches.
VARIANTS: dict[str, tuple[str, str]] = {
    "clean": ("queries_clean.jsonl", "sessions"),
    "typo": ("queries_typo.jsonl", "sessions"),
    "accent": ("queries_accent.jsonl", "sessions"),
    "accent_docs": ("queries_clean.jsonl", "sessions_accent"),
}
#: Workspace suffix of the accented copy of a conversation.
ACCENT_SUFFIX = "-accented"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
#: Where the shared development sets live, relative to the repository's parent.
SHARED = Path(__file__).resolve().parents[2] / "shared" / "devsets"


class DevsetMissing(Exception):
    """The development set is not where it is looked for."""


def locate(name: str, directory: Path | None = None) -> Path:
    """The folder of development set `name`; `DevsetMissing` when absent."""
    path = directory if directory is not None else SHARED / name
    needed = ["sessions", *{f for f, _ in VARIANTS.values()}]
    missing = [n for n in needed if not (path / n).exists()]
    if missing:
        raise DevsetMissing(
            f"development set {name!r} not found at {path} (missing: {', '.join(missing)}); "
            f"put it in ../shared/devsets/{name} next to the repository or pass --devset-dir"
        )
    return path


@dataclass(frozen=True, slots=True)
class Query:
    qid: str
    workspace: str
    text: str
    category: int
    relevant: frozenset[tuple[str, int]]


def load_queries(path: Path) -> list[Query]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        obj = json.loads(line)
        out.append(
            Query(
                qid=obj["qid"],
                workspace=obj["workspace"],
                text=obj["text"],
                category=int(obj["category"]),
                relevant=frozenset((s, int(n)) for s, n in obj["relevant"]),
            )
        )
    return out


def ingest(pg: PgSearch, devset: Path, *, accented: bool = True) -> dict[str, int]:
    """Each conversation into its own workspace (and its accented copy)."""
    counts: dict[str, int] = {}
    corpora = [("sessions", "")] + ([("sessions_accent", ACCENT_SUFFIX)] if accented else [])
    for folder, suffix in corpora:
        root = devset / folder
        if not root.is_dir():
            continue
        for ws_dir in sorted(p for p in root.iterdir() if p.is_dir()):
            report = pg.ingest_paths(sorted(ws_dir.glob("*.jsonl")), workspace=ws_dir.name + suffix)
            if report.errors:
                raise SystemExit(f"ingest errors in {ws_dir}: {report.errors[:3]}")
            counts[ws_dir.name + suffix] = report.messages
    return counts


def vacuum(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def score_query(
    q: Query, messages: Sequence[tuple[str, int]], sessions: Sequence[str]
) -> dict[str, float]:
    top = list(messages[:10])
    rel = q.relevant
    rel_sessions = {s for s, _ in rel}
    hits = [i for i, key in enumerate(top) if key in rel]
    return {
        "r@10": 1.0 if hits else 0.0,
        "mrr@10": 1.0 / (hits[0] + 1) if hits else 0.0,
        "evr@10": len(rel & set(top)) / len(rel),
        "session_r@1": 1.0 if sessions[:1] and sessions[0] in rel_sessions else 0.0,
        "session_r@10": 1.0 if rel_sessions & set(sessions[:10]) else 0.0,
    }


def _mean(rows: Iterable[dict[str, float]]) -> dict[str, float]:
    rows = list(rows)
    if not rows:
        return {}
    return {k: round(sum(r[k] for r in rows) / len(rows), 4) for k in rows[0]}


Search = Callable[[str, str, bool], list[tuple[str, int]]]


def searcher(pg: PgSearch) -> Search:
    def search(text: str, workspace: str, per_session: bool) -> list[tuple[str, int]]:
        result = pg.search(
            SessionQueryRequest(query=text, limit=10, per_session=per_session),
            workspace=workspace,
        )
        return [(m.session_id, m.seq) for m in result.matches]

    return search


def evaluate(
    search: Search,
    devset: Path,
    *,
    variants: Sequence[str] = tuple(VARIANTS),
    sessions: bool = True,
    every: int = 1,
) -> dict[str, Any]:
    """Mean figures per variant (and per category), with search latency; `every` > 1
    keeps every n-th query only (quicker comparisons)."""
    out: dict[str, Any] = {}
    ms: list[float] = []
    for name in variants:
        file, corpus = VARIANTS[name]
        suffix = ACCENT_SUFFIX if corpus == "sessions_accent" else ""
        rows: list[tuple[int, dict[str, float]]] = []
        for q in load_queries(devset / file)[::every]:
            ws = q.workspace + suffix
            t0 = time.perf_counter()
            messages = search(q.text, ws, False)
            ms.append((time.perf_counter() - t0) * 1000)
            best = [s for s, _ in search(q.text, ws, True)] if sessions else []
            rows.append((q.category, score_query(q, messages, best)))
        figures = _mean(r for _, r in rows)
        if not sessions:
            figures = {k: v for k, v in figures.items() if not k.startswith("session")}
        figures["by_category"] = {
            CATEGORIES[c]: _mean(r for cat, r in rows if cat == c)["r@10"]
            for c in sorted({c for c, _ in rows})
        }
        figures["queries"] = len(rows)
        out[name] = figures
    ms.sort()
    out["latency_ms"] = {
        "p50": round(ms[len(ms) // 2], 2) if ms else None,
        "p95": round(ms[int(len(ms) * 0.95)], 2) if ms else None,
        "note": "per message-level search, end to end through PgSearch.search",
    }
    return out


def run(
    devset: Path,
    *,
    server: str,
    settings: Settings | None = None,
    variants: Sequence[str] = tuple(VARIANTS),
    sessions: bool = True,
    keep_db: bool = False,
) -> dict[str, Any]:
    """Ingest the set into a fresh database, score every variant, drop the database."""
    from bench.speed import create_database, drop_database

    dbname = "pgsearch_bench_quality_locomo"
    dsn = create_database(server, dbname)
    started = time.perf_counter()
    try:
        PgSearch.migrate(dsn)
        with PgSearch.connect(dsn, settings=settings) as pg:
            t0 = time.perf_counter()
            counts = ingest(pg, devset, accented="accent_docs" in variants)
            ingest_s = round(time.perf_counter() - t0, 1)
            vacuum(dsn)
            figures = evaluate(searcher(pg), devset, variants=variants, sessions=sessions)
    finally:
        if not keep_db:
            drop_database(server, dbname)
    return {
        "name": "locomo",
        "devset": str(devset),
        "workspaces": len([w for w in counts if not w.endswith(ACCENT_SUFFIX)]),
        "messages": sum(v for w, v in counts.items() if not w.endswith(ACCENT_SUFFIX)),
        "ingest_s": ingest_s,
        "seconds": round(time.perf_counter() - started, 1),
        "pgsearch": figures,
    }


def render(results: dict[str, Any], title: str = "pgsearch") -> str:
    figures = results["pgsearch"]
    lines = [
        f"== LoCoMo dev set: {results.get('messages', '?')} messages, "
        f"{results.get('workspaces', '?')} conversations ==",
        "| system | variant | R@10 | MRR@10 | EvR@10 | session R@1 | session R@10 |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for name in VARIANTS:
        m = figures.get(name)
        if not m:
            continue
        lines.append(
            f"| {title} | {name} | {m['r@10']:.3f} | {m['mrr@10']:.3f} | {m['evr@10']:.3f} "
            f"| {m.get('session_r@1', float('nan')):.3f} "
            f"| {m.get('session_r@10', float('nan')):.3f} |"
        )
    cats = list(CATEGORIES.values())
    lines += ["", "R@10 per category:", "| variant | " + " | ".join(cats) + " |"]
    lines.append("|---|" + "---:|" * len(cats))
    for name in VARIANTS:
        m = figures.get(name)
        if not m:
            continue
        by = m["by_category"]
        lines.append(f"| {name} | " + " | ".join(f"{by.get(c, 0):.3f}" for c in cats) + " |")
    lat = figures.get("latency_ms", {})
    lines.append(f"search latency: p50 {lat.get('p50')} ms, p95 {lat.get('p95')} ms")
    return "\n".join(lines)

"""A/B: this checkout against another (a base commit), on one corpus, in one run.

    git worktree add ../base <commit>   # with its own .venv (pip install -e '.[test]')
    python -m bench.ab speed --base ../base --messages 100000 --rounds 2
    python -m bench.ab devset --base ../base --rounds 3
    python -m bench.ab quality --base ../base

Each side runs its own code in its own interpreter (``<checkout>/.venv/bin/python``)
against its own database, ingested by that side (``pgsearch_bench_ab_<side>_<size>``, with
``_<tag>`` after it when ``--tag`` is given, so that two runs with tags never share one;
kept between runs unless ``--fresh``). Searches run in rounds, the sides taking
turns and swapping the lead each round, so both see the same machine; the figures
quoted are the median over rounds of each side's percentile, with the ratio
new / base and the load average around each pass.

- ``speed``: ``bench.speed --search-only`` of each side on the benchmark corpus, and
  PostgreSQL's built-in FTS (``bench.alternatives``) on the same queries in each
  round, so every ratio to FTS is within one run.
- ``devset``: the LoCoMo questions (clean, typo, accent; message level), timed end to
  end through ``PgSearch.search``, warm.
- ``quality``: ``bench.quality`` (synthetic set), ``bench.quality --devset locomo`` and
  ``bench.typos`` of each side, in databases named apart from other runs.

Writes ``bench/results/ab-<what>-<size>.json`` and prints tables.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from bench import alternatives as alt
from bench.generate import Config, ensure_corpus
from bench.speed import (
    ALT_CLASSES,
    DEFAULT_SERVER,
    RECALL_CLASSES,
    RESULTS,
    create_database,
    dsn_for,
    load_queries,
    run_alternative,
    sample_queries,
)

ROOT = Path(__file__).resolve().parent.parent
SIDES = ("base", "new")

#: Run in each side's interpreter before its own code: every benchmark database it
#: makes gets a suffix, so that it never meets another run's database of that name.
_PRELUDE = """
import sys
import bench.speed as _speed
_create, _drop = _speed.create_database, _speed.drop_database
_SUFFIX = sys.argv.pop(1)
def create_database(server, name):
    return _create(server, name + _SUFFIX)
def drop_database(server, name):
    return _drop(server, name + _SUFFIX)
_speed.create_database, _speed.drop_database = create_database, drop_database
for _name in ("bench.quality", "bench.typos"):
    _mod = __import__(_name, fromlist=["_"])
    _mod.create_database, _mod.drop_database = create_database, drop_database
"""

_INGEST = """
import json, sys, time
from pathlib import Path
import psycopg
from bench.speed import corpus_files, ingest_phase
from pgsearch import PgSearch
dsn, corpus, jobs = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
PgSearch.migrate(dsn)
bulk, tail = corpus_files(corpus)
out = {"bulk": ingest_phase(dsn, bulk, jobs), "tail": ingest_phase(dsn, tail, jobs)}
with psycopg.connect(dsn, autocommit=True) as conn:
    t0 = time.perf_counter()
    conn.execute("VACUUM ANALYZE")
    out["vacuum_analyze_s"] = round(time.perf_counter() - t0, 1)
print(json.dumps(out))
"""

_DEVSET_INGEST = """
import json, sys
from pathlib import Path
from bench import locomo
from pgsearch import PgSearch
dsn, devset = sys.argv[1], Path(sys.argv[2])
PgSearch.migrate(dsn)
with PgSearch.connect(dsn) as pg:
    counts = locomo.ingest(pg, devset, accented=False)
locomo.vacuum(dsn)
print(json.dumps(counts))
"""

_DEVSET_SEARCH = """
import json, sys, time
from pathlib import Path
from bench import locomo
from pgsearch import PgSearch, SessionQueryRequest
dsn, devset, passes = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
queries = [q for name in ("clean", "typo", "accent")
           for q in locomo.load_queries(devset / locomo.VARIANTS[name][0])]
ms = []
with PgSearch.connect(dsn) as pg:
    for p in range(passes + 1):
        for q in queries:
            req = SessionQueryRequest(query=q.text, limit=10, per_session=False)
            t0 = time.perf_counter()
            pg.search(req, workspace=q.workspace)
            if p:
                ms.append((time.perf_counter() - t0) * 1000)
print(json.dumps(ms))
"""


def python_of(root: Path) -> str:
    exe = root / ".venv" / "bin" / "python"
    if not exe.exists():
        raise SystemExit(f"{exe} is missing: make the checkout's venv first")
    return str(exe)


def run_side(root: Path, code: str, *args: str, suffix: str = "") -> str:
    """`code` in `root`'s interpreter with `root` first on the path; its stdout."""
    argv = [python_of(root), "-c", _PRELUDE + code, suffix, *args]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{root}: failed\n{done.stderr[-4000:]}")
    return done.stdout


def loadavg() -> float:
    return round(os.getloadavg()[0], 2)


def exists(server: str, name: str) -> bool:
    with psycopg.connect(server, autocommit=True) as conn:
        return (
            conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
            is not None
        )


def db_tag(args: argparse.Namespace) -> str:
    """The suffix of a tagged run's database names (none without ``--tag``)."""
    tag = "".join(c if c.isalnum() else "_" for c in args.tag.lower())
    return f"_{tag}" if tag else ""


def median(values: list[float]) -> float:
    return round(statistics.median(values), 3) if values else float("nan")


# --- speed -----------------------------------------------------------------------------


def prepare_speed(args: argparse.Namespace, roots: dict[str, Path], corpus: Path) -> dict[str, Any]:
    """Each side's database, ingested by that side (reused when present)."""
    out: dict[str, Any] = {}
    label = Config(messages=args.messages).label().lower()
    for side, root in roots.items():
        name = f"pgsearch_bench_ab_{side}_{label}{db_tag(args)}"
        dsn = dsn_for(args.server, name)
        if exists(args.server, name) and not args.fresh:
            out[side] = {"dsn": dsn, "reused": True}
            continue
        create_database(args.server, name)
        print(f"ingesting {side} ({root})...", flush=True)
        report = json.loads(run_side(root, _INGEST, dsn, str(corpus / "corpus"), str(args.jobs)))
        out[side] = {"dsn": dsn, "ingest": report}
        print(f"  {report}", flush=True)
    return out


def fts_pass(dsn: str, queries: list[dict[str, Any]], rows: list[alt.Row]) -> dict[str, Any]:
    tables = alt.PostgresTables(dsn)
    try:
        have = tables.conn.execute(
            "SELECT 1 FROM pg_class WHERE relname = %s", (tables.TABLE,)
        ).fetchone()
        if have is None:
            tables.build(rows, trigram=False)
        fts = alt.PostgresFTS(tables)
        workload = [q for q in queries if q["class"] in ALT_CLASSES]
        run_alternative(fts, workload)  # warm-up
        res = run_alternative(fts, workload)
        return {c: r.report(recall=c in RECALL_CLASSES) for c, r in res.items()}
    finally:
        tables.close()


def speed(args: argparse.Namespace, roots: dict[str, Path]) -> dict[str, Any]:
    cfg = Config(messages=args.messages)
    corpus = RESULTS / f"corpus-{cfg.label()}"
    ensure_corpus(cfg, corpus)
    queries = load_queries(corpus / "queries.jsonl")
    if args.sample:
        queries = sample_queries(queries, args.sample)
    # The base checkout reads the same corpus (generated once, here).
    base_results = roots["base"] / "bench" / "results"
    base_results.mkdir(parents=True, exist_ok=True)
    link = base_results / corpus.name
    if not link.exists():
        link.symlink_to(corpus)
    dbs = prepare_speed(args, roots, corpus)
    rows = alt.load_rows(corpus / "corpus") if args.fts else []
    out_dir = RESULTS / f"ab-{cfg.label()}"
    out_dir.mkdir(parents=True, exist_ok=True)
    rounds: list[dict[str, Any]] = []
    for r in range(args.rounds):
        order = SIDES if r % 2 == 0 else SIDES[::-1]
        this: dict[str, Any] = {}
        for side in order:
            before = loadavg()
            tag = f"ab-{side}-r{r}"
            cmd = [
                "-m", "bench.speed", "--messages", str(args.messages), "--search-only",
                "--dsn", dbs[side]["dsn"], "--tag", tag, "--out", str(out_dir),
            ]  # fmt: skip
            if args.sample:
                cmd += ["--search-sample", str(args.sample)]
            t0 = time.perf_counter()
            done = subprocess.run(
                [python_of(roots[side]), *cmd],
                cwd=roots[side],
                env={**os.environ, "PYTHONPATH": str(roots[side])},
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                raise SystemExit(f"{side}: bench.speed failed\n{done.stderr[-4000:]}")
            doc = json.loads((out_dir / f"speed-{cfg.label()}-{tag}.json").read_text())
            this[side] = {
                "load_before": before,
                "load_after": loadavg(),
                "seconds": round(time.perf_counter() - t0, 1),
                "search": doc["search"],
                "search_all_hits": doc["search_all_hits"],
                "candidates": doc.get("candidates", {}),
                "seq_scans": doc.get("plan_check", {}).get("messages_seq_scans_during_search"),
            }
            print(f"round {r} {side}: {this[side]['seconds']} s, load {before}", flush=True)
        if args.fts:
            before = loadavg()
            this["fts"] = {
                "load_before": before,
                "search": fts_pass(dbs["new"]["dsn"], queries, rows),
            }
            this["fts"]["load_after"] = loadavg()
        rounds.append(this)
    return {
        "what": "speed",
        "label": cfg.label(),
        "roots": {k: str(v) for k, v in roots.items()},
        "commits": {k: commit_of(v) for k, v in roots.items()},
        "databases": dbs,
        "rounds": rounds,
        "summary": summarise_speed(rounds),
    }


def summarise_speed(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per class: each side's p50/p95/p99 (median over rounds), ratios, recall."""
    classes = list(rounds[0]["base"]["search"])
    out: dict[str, Any] = {}
    for c in classes:
        row: dict[str, Any] = {}
        for side in SIDES:
            for key in ("p50_ms", "p95_ms", "p99_ms"):
                row[f"{side}_{key}"] = median([r[side]["search"][c][key] for r in rounds])
            hits = rounds[0][side]["search_all_hits"].get(c, {})
            row[f"{side}_recall10_msg"] = hits.get("recall10_msg")
            row[f"{side}_recall10_session"] = rounds[0][side]["search"][c].get("recall10_session")
            cands = rounds[0][side]["candidates"].get(c, {})
            row[f"{side}_candidates_median"] = cands.get("median")
            trips = rounds[0][side]["candidates"].get("round_trips", {}).get(c, {})
            row[f"{side}_round_trips"] = trips.get("median")
        for key in ("p50_ms", "p95_ms", "p99_ms"):
            b, n = row[f"base_{key}"], row[f"new_{key}"]
            row[f"ratio_{key}"] = round(n / b, 3) if b else None
        if "fts" in rounds[0] and c in rounds[0]["fts"]["search"]:
            fts = median([r["fts"]["search"][c]["p50_ms"] for r in rounds])
            row["fts_p50_ms"] = fts
            # All hits (message level), the task FTS does.
            for side in SIDES:
                mine = median([r[side]["search_all_hits"][c]["p50_ms"] for r in rounds])
                row[f"{side}_all_hits_p50_ms"] = mine
                row[f"{side}_to_fts"] = round(mine / fts, 2) if fts else None
        out[c] = row
    out["_load"] = [
        [r[s]["load_before"] for s in SIDES] + [r[s]["load_after"] for s in SIDES] for r in rounds
    ]
    return out


def render_speed(doc: dict[str, Any]) -> str:
    s = doc["summary"]
    lines = [
        f"== A/B at {doc['label']}: base {doc['commits']['base']} vs new {doc['commits']['new']}, "
        f"{len(doc['rounds'])} rounds ==",
        "| class | base p50 | new p50 | ratio | base p95 | new p95 | base p99 | new p99 "
        "| ratio p99 | recall@10 msg base/new | FTS p50 | all hits / FTS base, new |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|",
    ]
    for c, r in s.items():
        if c.startswith("_"):
            continue
        fts = r.get("fts_p50_ms")
        lines.append(
            f"| {c} | {r['base_p50_ms']} | {r['new_p50_ms']} | {r['ratio_p50_ms']} "
            f"| {r['base_p95_ms']} | {r['new_p95_ms']} | {r['base_p99_ms']} | {r['new_p99_ms']} "
            f"| {r['ratio_p99_ms']} | {r['base_recall10_msg']}/{r['new_recall10_msg']} "
            f"| {fts if fts is not None else '-'} "
            f"| {r.get('base_to_fts', '-')}, {r.get('new_to_fts', '-')} |"
        )
    lines.append(f"load average (before/after each pass, per round): {s['_load']}")
    return "\n".join(lines)


# --- dev set ---------------------------------------------------------------------------


def devset(args: argparse.Namespace, roots: dict[str, Path]) -> dict[str, Any]:
    from bench import locomo

    path = locomo.locate("locomo", args.devset_dir)
    dbs: dict[str, str] = {}
    for side, root in roots.items():
        name = f"pgsearch_bench_ab_{side}_locomo{db_tag(args)}"
        dsn = dsn_for(args.server, name)
        if not exists(args.server, name) or args.fresh:
            create_database(args.server, name)
            run_side(root, _DEVSET_INGEST, dsn, str(path))
        dbs[side] = dsn
    rounds: list[dict[str, Any]] = []
    for r in range(args.rounds):
        order = SIDES if r % 2 == 0 else SIDES[::-1]
        this: dict[str, Any] = {}
        for side in order:
            before = loadavg()
            ms = json.loads(run_side(roots[side], _DEVSET_SEARCH, dbs[side], str(path), "1"))
            ms.sort()
            this[side] = {
                "load_before": before,
                "load_after": loadavg(),
                "n": len(ms),
                "p50_ms": round(ms[len(ms) // 2], 3),
                "p95_ms": round(ms[int(len(ms) * 0.95)], 3),
                "p99_ms": round(ms[int(len(ms) * 0.99)], 3),
                "mean_ms": round(statistics.fmean(ms), 3),
            }
            print(f"round {r} {side}: {this[side]}", flush=True)
        rounds.append(this)
    summary = {
        side: {k: median([r[side][k] for r in rounds]) for k in ("p50_ms", "p95_ms", "p99_ms")}
        for side in SIDES
    }
    summary["ratio"] = {
        k: round(summary["new"][k] / summary["base"][k], 3) for k in ("p50_ms", "p95_ms", "p99_ms")
    }
    return {
        "what": "devset",
        "commits": {k: commit_of(v) for k, v in roots.items()},
        "databases": dbs,
        "rounds": rounds,
        "summary": summary,
    }


# --- quality ---------------------------------------------------------------------------


_QUALITY = """
import json, sys
import bench.quality as quality, bench.typos as typos
from bench.speed import RESULTS, DEFAULT_SERVER
which = sys.argv[1]
if which == "synthetic":
    quality.main([])
    doc = json.loads((RESULTS / "quality-devset.json").read_text())
    print(json.dumps(doc["systems"]["pgsearch"]))
elif which == "locomo":
    quality.main(["--devset", "locomo"])
    print(json.dumps(json.loads((RESULTS / "quality-locomo.json").read_text())["pgsearch"]))
else:
    typos.main([])
    label = typos.Config(messages=60_000).label()
    print(json.dumps(json.loads((RESULTS / f"typos-{label}.json").read_text())["pgsearch"]))
"""


def quality(args: argparse.Namespace, roots: dict[str, Path]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for which in ("synthetic", "locomo", "typos"):
        out[which] = {}
        for side, root in roots.items():
            text = run_side(root, _QUALITY, which, suffix=f"_ab_{side}")
            out[which][side] = json.loads(text.strip().splitlines()[-1])
            print(f"{which} {side} done", flush=True)
    return {"what": "quality", "commits": {k: commit_of(v) for k, v in roots.items()}, **out}


# --- the command -----------------------------------------------------------------------


def commit_of(root: Path) -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
    )
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "pgsearch", "migrations"],
        cwd=root,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return done.stdout.strip() + ("+" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("speed", "devset", "quality"))
    parser.add_argument("--base", type=Path, required=True, help="the other checkout")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sample", type=int, default=0, help="first N queries of each class")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--no-fts", dest="fts", action="store_false")
    parser.add_argument("--fresh", action="store_true", help="ingest again even if kept")
    parser.add_argument("--devset-dir", type=Path)
    parser.add_argument("--server", default=os.environ.get("PGSEARCH_BENCH_SERVER", DEFAULT_SERVER))
    parser.add_argument("--tag", default="")
    args = parser.parse_args(argv)
    roots = {"base": args.base.resolve(), "new": ROOT}
    if args.what == "speed":
        doc = speed(args, roots)
        name = f"ab-speed-{doc['label']}"
    elif args.what == "devset":
        doc = devset(args, roots)
        name = "ab-devset-locomo"
    else:
        doc = quality(args, roots)
        name = "ab-quality"
    doc["machine_load_end"] = loadavg()
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}{'-' + args.tag if args.tag else ''}.json"
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    if args.what == "speed":
        print(render_speed(doc))
    else:
        print(json.dumps(doc.get("summary", doc), indent=1)[:6000])
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The same workspace in a growing database: does its search time stay put?

    python -m bench.scale                      # 1M, 2M, 3.5M and 5M messages: 22 minutes here
    python -m bench.scale --stages 20k,60k --probe-messages 2000   # a quick check, a minute

1. A probe corpus of `bench.generate` (``--probe-messages`` in one workspace, its own
   seed) and its queries, every class; ingested as workspace ``probe``, its queries
   pointed at that workspace.
2. Filler corpora of `bench.generate` over ``--filler-workspaces`` workspaces (499 by
   default, so the database holds 500), one per stage, each with a seed of its own,
   sized to bring the database to the stage's total (``--stages``, in messages,
   probe included). Every filler corpus names the same workspaces and its sessions
   the same way (``ws00-s000000`` ...), and a session already ingested from one file
   is refused from another, so a stage after the first is ingested through hard
   links named ``g<stage>-<session>.jsonl``: new sessions in the same workspaces.
3. Each stage: ingest through ``ingest_paths`` (`bench.speed.ingest_phase`, ``--jobs``
   writers on disjoint workspaces; the probe goes in with the first stage), then
   ``VACUUM ANALYZE`` as `bench.speed` does after a bulk load (autovacuum is off on
   the benchmark server), one untimed warm-up pass of the probe's queries, then
   ``--passes`` timed passes through the Python API, end to end (excerpts included),
   the default request (one best hit per session). Per class and over all classes:
   p50/p95/p99 of all timed passes together, each pass's p50, recall@10; candidate
   rows and round trips from an untimed instrumented pass; the message table's
   ``seq_scan`` counter around the timed passes; messages, sessions, sizes, load
   average, ingest and vacuum times.

Corpora go under ``bench/results/scale/`` and are reused when their manifest matches.
The database ``pgsearch_bench_scale_<last stage>`` is made on ``--server`` and dropped
at the end unless ``--keep-db`` (``--dsn`` names an empty migrated one to use
instead). It prints a table (p50/p99 per class and stage, and the ratio of the last
stage to the first) and writes ``bench/results/scale-<stages>.json`` (``--json`` to
choose).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from bench.generate import Config, ensure_corpus
from bench.speed import (
    DEFAULT_SERVER,
    RECALL_CLASSES,
    RESULTS,
    ClassResult,
    code_version,
    corpus_files,
    count_candidates,
    create_database,
    drop_database,
    ingest_phase,
    load_queries,
    machine,
    run_ours,
    sample_queries,
    seq_scans,
    server_info,
    summary,
)
from pgsearch import PgSearch

PROBE = "probe"
SCALE = RESULTS / "scale"
#: Share a class's p50 may move between the first and the last stage (issue target).
TOLERANCE = 0.25


@dataclass(kw_only=True)
class Options:
    #: Total messages in the database after each stage, probe included.
    stages: tuple[int, ...] = (1_000_000, 2_000_000, 3_500_000, 5_000_000)
    probe_messages: int = 20_000
    probe_seed: int = 23
    filler_workspaces: int = 499
    #: The first filler corpus's seed; stage i uses seed + i.
    seed: int = 101
    queries_per_class: int = 100
    passes: int = 2
    jobs: int = 2
    server: str = DEFAULT_SERVER
    #: Use this existing, migrated, empty database instead of making one.
    dsn: str | None = None
    keep_db: bool = False
    json_path: Path | None = None
    corpora: Path = SCALE
    quiet: bool = False

    def probe_config(self) -> Config:
        return Config(
            messages=self.probe_messages,
            workspaces=1,
            seed=self.probe_seed,
            queries_per_class=self.queries_per_class,
        )

    def filler_configs(self) -> list[Config]:
        """One filler corpus per stage: what it adds to the database."""
        out = []
        before = self.probe_messages
        for i, total in enumerate(self.stages):
            out.append(
                Config(
                    messages=total - before, workspaces=self.filler_workspaces, seed=self.seed + i
                )
            )
            before = total
        return out

    def label(self) -> str:
        return ",".join(Config(messages=n).label() for n in self.stages)


def shown(path: Path) -> str:
    """`path` relative to the repository when it lies inside it (results name no host)."""
    root = RESULTS.parent.parent
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)


def say(opts: Options, text: str) -> None:
    if not opts.quiet:
        stamp = datetime.now(UTC).strftime("%H:%M:%S")
        print(f"[{stamp}] {text}", flush=True)


def check(opts: Options) -> None:
    """Stages that grow, each adding enough for every filler workspace."""
    if not opts.stages:
        raise SystemExit("--stages: at least one stage")
    before = opts.probe_messages
    for total in opts.stages:
        if total - before < 2 * opts.filler_workspaces:
            raise SystemExit(
                f"--stages: {total:,} adds {total - before:,} messages to {before:,}; each stage "
                f"must add at least 2 per filler workspace ({2 * opts.filler_workspaces:,})"
            )
        before = total


# --- corpora ---------------------------------------------------------------------


def corpus_dir(root: Path, kind: str, cfg: Config) -> Path:
    return root / f"{kind}-{cfg.label()}-{cfg.workspaces}ws-seed{cfg.seed}"


def probe_corpus(opts: Options) -> tuple[Path, dict[str, Any], list[dict[str, Any]]]:
    """The probe corpus, its manifest and its queries (every class, pointed at
    `PROBE`, at most ``queries_per_class`` each)."""
    cfg = opts.probe_config()
    path = corpus_dir(opts.corpora, "probe", cfg)
    manifest = ensure_corpus(cfg, path, quiet=opts.quiet)
    queries = sample_queries(load_queries(path / "queries.jsonl"), opts.queries_per_class)
    for q in queries:
        q["workspace"] = PROBE
    return path, manifest, queries


def linked(corpus: Path, tag: str) -> Path:
    """A view of `corpus` whose files are hard links named ``<tag>-<session>.jsonl``:
    the same messages under session ids no other filler corpus uses (ingest takes a
    file's session id from its name, after resolving symbolic links)."""
    view = corpus.parent / f"{corpus.parent.name}-{tag}-links"
    if view.exists():
        shutil.rmtree(view)
    for wdir in sorted(p for p in corpus.iterdir() if p.is_dir()):
        (view / wdir.name).mkdir(parents=True)
        for path in wdir.glob("*.jsonl"):
            target = view / wdir.name / f"{tag}-{path.name}"
            try:
                os.link(path, target)
            except OSError:
                shutil.copyfile(path, target)
    return view


def stage_files(
    opts: Options, i: int, filler: Path, probe: Path | None
) -> list[tuple[str, str, int]]:
    """The files stage `i` ingests, as (workspace, path, messages)."""
    source = filler / "corpus" if i == 0 else linked(filler / "corpus", f"g{i + 1}")
    bulk, tail = corpus_files(source)
    files = bulk + tail
    if probe is not None:
        pb, pt = corpus_files(probe / "corpus")
        files += [(PROBE, path, n) for _ws, path, n in pb + pt]
    return files


# --- measures --------------------------------------------------------------------


def database_facts(dsn: str) -> dict[str, Any]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM sessions), "
            "(SELECT count(DISTINCT workspace_id) FROM sessions), "
            "(SELECT count(*) FROM vocabulary), pg_database_size(current_database())"
        ).fetchone()
    assert row is not None
    return {
        "messages": int(row[0]),
        "sessions": int(row[1]),
        "workspaces": int(row[2]),
        "vocabulary_rows": int(row[3]),
        "database_bytes": int(row[4]),
    }


def searches(opts: Options, dsn: str, queries: list[dict[str, Any]]) -> dict[str, Any]:
    """The probe's queries: a warm-up pass, the timed passes, candidates and trips."""
    out: dict[str, Any] = {"load_before": [round(x, 2) for x in os.getloadavg()]}
    with PgSearch.connect(dsn) as pg:
        t0 = time.perf_counter()
        run_ours(pg, queries, per_session=True)
        out["warmup_s"] = round(time.perf_counter() - t0, 1)
        before = seq_scans(dsn)
        passes: list[dict[str, ClassResult]] = []
        for _ in range(opts.passes):
            passes.append(run_ours(pg, queries, per_session=True))
        time.sleep(1.5)  # let the search backend's statistics reach pg_stat
        after = seq_scans(dsn)
        out["candidates"] = count_candidates(pg, queries)
        out["probe_messages"] = pg.stats(workspace=PROBE).messages
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    pooled: dict[str, ClassResult] = {}
    for p in passes:
        for c, r in p.items():
            pooled.setdefault(c, ClassResult()).absorb(r)
    out["search"] = {c: r.report(recall=c in RECALL_CLASSES) for c, r in pooled.items()}
    out["search_overall"] = summary([ms for r in pooled.values() for ms in r.ms])
    out["passes"] = [
        {
            **{c: _p50_p99(r.ms) for c, r in p.items()},
            "all": _p50_p99([ms for r in p.values() for ms in r.ms]),
        }
        for p in passes
    ]
    out["messages_seq_scans_during_search"] = after.get("messages.seq_scan", 0) - before.get(
        "messages.seq_scan", 0
    )
    return out


def _p50_p99(ms: list[float]) -> dict[str, float]:
    figures = summary(ms)
    return {"p50_ms": figures["p50_ms"], "p99_ms": figures["p99_ms"]}


def stage(
    opts: Options,
    dsn: str,
    i: int,
    filler: Path,
    probe: Path | None,
    queries: list[dict[str, Any]],
) -> dict[str, Any]:
    total = opts.stages[i]
    files = stage_files(opts, i, filler, probe)
    adding = sum(f[2] for f in files)
    say(opts, f"stage {i + 1}: ingesting {adding:,} messages ({len(files):,} files) ...")
    out: dict[str, Any] = {"target": total, "filler": shown(filler)}
    out["ingest"] = ingest_phase(dsn, files, opts.jobs)
    say(opts, f"  ingest: {out['ingest']}")
    with psycopg.connect(dsn, autocommit=True) as conn:
        t0 = time.perf_counter()
        conn.execute("VACUUM ANALYZE")
        out["vacuum_analyze_s"] = round(time.perf_counter() - t0, 1)
    out["database"] = database_facts(dsn)
    with PgSearch.connect(dsn) as pg:
        out["sizes"] = {
            s.table: {"table": s.table_bytes, "indexes": s.index_bytes} for s in pg.table_sizes()
        }
    say(
        opts,
        f"  VACUUM ANALYZE {out['vacuum_analyze_s']} s; {out['database']}; searching "
        f"({opts.passes} timed passes of {len(queries)} queries) ...",
    )
    out.update(searches(opts, dsn, queries))
    o = out["search_overall"]
    say(
        opts,
        f"  all classes p50 {o['p50_ms']} / p99 {o['p99_ms']} ms; load {out['load_after']}",
    )
    return out


# --- the run ---------------------------------------------------------------------


def run(opts: Options) -> dict[str, Any]:
    """The whole benchmark; returns (and writes) the results document."""
    check(opts)
    started = time.perf_counter()
    results: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python -m bench.scale " + " ".join(sys.argv[1:]),
        "machine": machine(),
        "code": code_version(),
        "load_at_start": [round(x, 2) for x in os.getloadavg()],
        "options": {
            k: v
            for k, v in asdict(opts).items()
            if k not in ("json_path", "corpora", "quiet", "dsn")
        },
    }
    t0 = time.perf_counter()
    probe, manifest, queries = probe_corpus(opts)
    results["probe"] = {
        "workspace": PROBE,
        "corpus": shown(probe),
        "config": manifest["config"],
        "messages": manifest["stats"]["messages"],
        "sessions": manifest["stats"]["sessions"],
        "queries": {
            c: sum(1 for q in queries if q["class"] == c)
            for c in dict.fromkeys(q["class"] for q in queries)
        },
    }
    fillers = []
    for cfg in opts.filler_configs():
        path = corpus_dir(opts.corpora, "filler", cfg)
        say(opts, f"filler corpus {cfg.messages:,} messages, seed {cfg.seed}: {path}")
        m = ensure_corpus(cfg, path, quiet=opts.quiet)
        fillers.append((path, m))
    results["corpora_s"] = round(time.perf_counter() - t0, 1)
    say(opts, f"corpora ready in {results['corpora_s']} s")

    dbname = f"pgsearch_bench_scale_{Config(messages=opts.stages[-1]).label().lower()}"
    dsn = opts.dsn or create_database(opts.server, dbname)
    if opts.dsn is None:
        PgSearch.migrate(dsn)
        results["database"] = dbname
    results["server"] = server_info(dsn)
    with PgSearch.connect(dsn) as pg:
        s = pg.settings
        results["settings"] = {
            "candidate_cap": s.candidate_cap,
            "impact_lists": s.impact_lists,
        }
    results["stages"] = []
    try:
        for i, (path, m) in enumerate(fillers):
            out = stage(opts, dsn, i, path, probe if i == 0 else None, queries)
            out["filler_config"] = m["config"]
            out["filler_generate_s"] = m.get("seconds")
            results["stages"].append(out)
            _write(opts, results, started)
    finally:
        if opts.dsn is None and not opts.keep_db:
            drop_database(opts.server, dbname)
            say(opts, f"dropped {dbname}")
        elif opts.dsn is None:
            say(opts, f"kept {dbname}")
    results["ratios"] = ratios(results)
    path = _write(opts, results, started)
    say(opts, "\n" + render(results))
    say(opts, f"results: {path} ({results['total_seconds']} s in all)")
    return results


def _write(opts: Options, results: dict[str, Any], started: float) -> Path:
    results["total_seconds"] = round(time.perf_counter() - started, 1)
    path = opts.json_path or RESULTS / f"scale-{opts.label().replace(',', '-')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    return path


def ratios(results: dict[str, Any]) -> dict[str, Any]:
    """Last stage over first, per class and over all classes: p50, p95, p99, and
    whether the p50 stays within `TOLERANCE`."""
    stages = results["stages"]
    if len(stages) < 2:
        return {}
    first, last = stages[0], stages[-1]
    rows = {**first["search"], "all": first["search_overall"]}
    ends = {**last["search"], "all": last["search_overall"]}
    out: dict[str, Any] = {}
    for c, a in rows.items():
        b = ends.get(c)
        if b is None:
            continue
        r = {k: round(b[k] / a[k], 3) if a[k] else None for k in ("p50_ms", "p95_ms", "p99_ms")}
        p50 = r["p50_ms"]
        r["p50_within_tolerance"] = p50 is not None and abs(p50 - 1) <= TOLERANCE
        out[c] = r
    return out


# --- output ----------------------------------------------------------------------


def _ms(value: Any) -> str:
    return "-" if value is None else f"{value:.1f}"


def render(results: dict[str, Any]) -> str:
    stages = results["stages"]
    names = [Config(messages=s["database"]["messages"]).label() for s in stages]
    lines = [
        f"== the {results['probe']['messages']:,}-message workspace '{PROBE}' as the "
        f"database grows (p50 / p99 ms) =="
    ]
    for s, name in zip(stages, names, strict=True):
        d, ing = s["database"], s["ingest"]
        lines.append(
            f"{name}: {d['messages']:,} messages, {d['workspaces']} workspaces, "
            f"{d['database_bytes'] / 1e9:.2f} GB; stage ingest {ing['messages']:,} in "
            f"{ing['seconds']} s ({ing['msgs_per_s']:,.0f}/s), VACUUM ANALYZE "
            f"{s['vacuum_analyze_s']} s; load {s['load_before']} -> {s['load_after']}"
        )
    rat = results.get("ratios", {})
    head = "| class | " + " | ".join(names) + " |"
    if rat:
        head += f" {names[-1]}/{names[0]} p50 | p99 | within ±{TOLERANCE:.0%} |"
    lines += ["", head, "|---" * (head.count("|") - 1) + "|"]
    classes = [*stages[0]["search"], "all"]
    for c in classes:
        cells = []
        for s in stages:
            r = s["search_overall"] if c == "all" else s["search"].get(c)
            cells.append(f"{_ms(r['p50_ms'])} / {_ms(r['p99_ms'])}" if r else "")
        row = f"| {c} | " + " | ".join(cells) + " |"
        if c in rat:
            r = rat[c]
            row += (
                f" {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
                f"{'yes' if r['p50_within_tolerance'] else 'no'} |"
            )
        lines.append(row)
    seq = [s["messages_seq_scans_during_search"] for s in stages]
    lines.append(f"\nmessages seq scans during the timed searches, per stage: {seq}")
    return "\n".join(lines)


def _stages(value: str) -> tuple[int, ...]:
    out = []
    for part in value.split(","):
        part = part.strip().lower().replace("_", "")
        scale = 1
        if part.endswith("m"):
            part, scale = part[:-1], 1_000_000
        elif part.endswith("k"):
            part, scale = part[:-1], 1000
        out.append(int(float(part) * scale))
    return tuple(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="One workspace's search latency as the database around it grows "
        "(see bench/README.md)",
    )
    parser.add_argument(
        "--stages",
        type=_stages,
        default="1M,2M,3.5M,5M",
        help="total messages in the database after each stage, probe included "
        "(comma-separated, 1M, 3.5M, 500k or digits; default 1M,2M,3.5M,5M)",
    )
    parser.add_argument(
        "--probe-messages", type=int, default=20_000, help="messages of the probe workspace (20000)"
    )
    parser.add_argument("--probe-seed", type=int, default=23, help="the probe corpus's seed (23)")
    parser.add_argument(
        "--filler-workspaces",
        type=int,
        default=499,
        help="workspaces the filler spreads over (499)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=101,
        help="the first filler corpus's seed (101); stage i uses seed + i",
    )
    parser.add_argument(
        "--queries-per-class", type=int, default=100, help="probe queries searched per class (100)"
    )
    parser.add_argument("--passes", type=int, default=2, help="timed passes after the warm-up (2)")
    parser.add_argument("--jobs", type=int, default=2, help="ingest writer processes (2)")
    parser.add_argument(
        "--server",
        default=os.environ.get("PGSEARCH_BENCH_SERVER", DEFAULT_SERVER),
        help="the server the benchmark database is made on "
        "(PGSEARCH_BENCH_SERVER, else the local one)",
    )
    parser.add_argument("--dsn", help="an existing migrated, empty database to use instead")
    parser.add_argument(
        "--keep-db", action="store_true", help="keep pgsearch_bench_scale_<last stage>"
    )
    parser.add_argument(
        "--json", type=Path, help="results file (default: bench/results/scale-<stages>.json)"
    )
    parser.add_argument(
        "--corpora",
        type=Path,
        default=SCALE,
        help="where the generated corpora go (bench/results/scale)",
    )
    args = parser.parse_args(argv)
    opts = Options(
        stages=args.stages,
        probe_messages=args.probe_messages,
        probe_seed=args.probe_seed,
        filler_workspaces=args.filler_workspaces,
        seed=args.seed,
        queries_per_class=args.queries_per_class,
        passes=args.passes,
        jobs=args.jobs,
        server=args.server,
        dsn=args.dsn,
        keep_db=args.keep_db,
        json_path=args.json,
        corpora=args.corpora,
    )
    run(opts)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Speed and scale: pgsearch against the alternatives, on one corpus, in one run.

    python -m bench.speed --messages 100000            # about 5 minutes here
    python -m bench.speed --messages 1000000           # see bench/README.md

1. Generates (or reuses) the seeded corpus of `bench.generate` under
   ``bench/results/corpus-<size>``.
2. Creates the database ``pgsearch_bench_<size>`` on the server (``--server``,
   default ``postgresql://127.0.0.1:5432/postgres``), dropping it first if a previous
   run left it, and migrates it.
3. Bulk ingest through the Python API (``ingest_paths``, as ``pgsearch ingest`` does:
   files written in groups, each all or nothing, ``--jobs`` writer processes with
   disjoint workspaces): the first 95 % of
   the messages, then the last 5 % into the already-indexed database (reported on
   its own as the sustained rate).
4. ``VACUUM ANALYZE``, then single-message appends (p50/p95/p99).
5. Searches through the Python API, end to end (excerpts included), per query class:
   one untimed warm-up pass, then the default request (one best hit per session),
   then all hits (message level, the same task as the alternatives). Recall@10 is
   the share of queries whose source message (or session) is in the first ten.
   Candidate counts come from an instrumented, untimed pass; the message table's
   ``seq_scan`` counter is read before and after the timed passes.
6. Table and index sizes.
7. The alternatives of `bench.alternatives` on the same corpus and queries.

It prints a table and writes ``bench/results/speed-<size>.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench import alternatives as alt
from bench.generate import Config, TextMaker, Vocabulary, ensure_corpus
from pgsearch import PgSearch, SessionQueryRequest
from pgsearch.db.work import Statement

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_SERVER = "postgresql://127.0.0.1:5432/postgres"
#: Classes whose source message is a meaningful answer (recall is reported).
RECALL_CLASSES = (
    "exact",
    "typo",
    "accent",
    "cjk",
    "multi",
    "filtered",
    "session",
    "rare_exact",
    "rare_typo",
    "realword_exact",
    "realword_typo",
)
#: Classes the alternatives run (browse has no ranking to compare).
ALT_CLASSES = ("exact", "typo", "accent", "cjk", "common", "short", "multi", "filtered", "session")
TRGM_CLASSES = ("exact", "typo", "accent")
TAIL_SHARE = 0.05


@dataclass(kw_only=True)
class Options:
    messages: int = 100_000
    workspaces: int = 50
    seed: int = 7
    queries_per_class: int = 200
    jobs: int = 2
    appends: int = 500
    server: str = DEFAULT_SERVER
    #: Use this existing, migrated, empty database instead of creating one.
    dsn: str | None = None
    keep_db: bool = False
    alternatives: tuple[str, ...] = ("fts", "trgm", "sqlite", "bm25s")
    trgm_per_class: int = 20
    trgm_timeout_ms: int = 5000
    out: Path = RESULTS
    corpus: Path | None = None
    quiet: bool = False
    #: Only the searches, against `dsn` as an earlier run left it (``--keep-db``).
    search_only: bool = False
    #: Appended to the results file's name (``speed-<size>-<tag>.json``).
    tag: str = ""
    #: Search only the first this many queries of each class (0: all).
    search_sample: int = 0

    def config(self) -> Config:
        return Config(
            messages=self.messages,
            workspaces=self.workspaces,
            seed=self.seed,
            queries_per_class=self.queries_per_class,
        )


def say(opts: Options, text: str) -> None:
    if not opts.quiet:
        print(text, flush=True)


def pct(values: Sequence[float], p: float) -> float:
    """The p-th percentile (nearest rank) of `values`; NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * len(ordered) + 0.5) - 1))
    return ordered[k]


def summary(ms: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(ms),
        "p50_ms": round(pct(ms, 50), 3),
        "p95_ms": round(pct(ms, 95), 3),
        "p99_ms": round(pct(ms, 99), 3),
        "mean_ms": round(statistics.fmean(ms), 3) if ms else float("nan"),
    }


# --- database --------------------------------------------------------------------


def dsn_for(server: str, dbname: str) -> str:
    params = psycopg.conninfo.conninfo_to_dict(server)
    params["dbname"] = dbname
    return psycopg.conninfo.make_conninfo(**params)  # type: ignore[arg-type]


def create_database(server: str, name: str) -> str:
    """(Re)create the benchmark database `name` (only ever ``pgsearch_bench_*``)."""
    assert name.startswith("pgsearch_bench_"), "the benchmark only manages its own databases"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(
            sql.SQL(
                "CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0 "
                "LC_COLLATE 'C.UTF-8' LC_CTYPE 'C.UTF-8'"
            ).format(sql.Identifier(name))
        )
    return dsn_for(server, name)


def drop_database(server: str, name: str) -> None:
    assert name.startswith("pgsearch_bench_")
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


# --- ingest ----------------------------------------------------------------------


def _ingest_worker(args: tuple[str, list[tuple[str, str]]]) -> tuple[int, int, float]:
    dsn, files = args
    by_ws: dict[str, list[str]] = {}
    for ws, path in files:
        by_ws.setdefault(ws, []).append(path)
    messages = errors = 0
    with PgSearch.connect(dsn) as pg:
        t0 = time.perf_counter()
        # The path `pgsearch ingest` takes: files prepared ahead in a thread, written
        # in groups (each file all or nothing in its own savepoint).
        for ws, paths in by_ws.items():
            report = pg.ingest_paths(paths, workspace=ws)
            messages += report.messages
            errors += len(report.errors)
        return messages, errors, time.perf_counter() - t0


def _split(files: list[tuple[str, str, int]], jobs: int) -> list[list[tuple[str, str]]]:
    """Files per writer: whole workspaces, balanced by message count."""
    by_ws: dict[str, list[tuple[str, str, int]]] = {}
    for f in files:
        by_ws.setdefault(f[0], []).append(f)
    loads = [0] * jobs
    out: list[list[tuple[str, str]]] = [[] for _ in range(jobs)]
    for _ws, items in sorted(by_ws.items(), key=lambda kv: -sum(i[2] for i in kv[1])):
        j = loads.index(min(loads))
        loads[j] += sum(i[2] for i in items)
        out[j].extend((i[0], i[1]) for i in items)
    return [o for o in out if o]


def ingest_phase(dsn: str, files: list[tuple[str, str, int]], jobs: int) -> dict[str, Any]:
    parts = _split(files, jobs)
    t0 = time.perf_counter()
    if len(parts) == 1:
        results = [_ingest_worker((dsn, parts[0]))]
    else:
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(len(parts)) as pool:
            results = pool.map(_ingest_worker, [(dsn, p) for p in parts])
    wall = time.perf_counter() - t0
    # Writers are timed from their first file to their last (process start-up aside);
    # the phase lasts as long as its slowest writer.
    seconds = max(r[2] for r in results)
    messages = sum(r[0] for r in results)
    return {
        "messages": messages,
        "files": len(files),
        "errors": sum(r[1] for r in results),
        "seconds": round(seconds, 2),
        "wall_seconds": round(wall, 2),
        "msgs_per_s": round(messages / seconds, 1) if seconds else 0.0,
        "writers": len(parts),
    }


def corpus_files(corpus: Path) -> tuple[list[tuple[str, str, int]], list[tuple[str, str, int]]]:
    """(bulk, tail): every workspace's last sessions, ~5 % of messages, form the tail."""
    bulk: list[tuple[str, str, int]] = []
    tail: list[tuple[str, str, int]] = []
    for wdir in sorted(p for p in corpus.iterdir() if p.is_dir()):
        files = sorted(wdir.glob("*.jsonl"))
        sizes = [p.read_bytes().count(b"\n") for p in files]
        total = sum(sizes)
        acc = 0
        for path, n in zip(files, sizes, strict=True):
            (tail if acc >= (1 - TAIL_SHARE) * total else bulk).append((wdir.name, str(path), n))
            acc += n
    return bulk, tail


# --- appends ---------------------------------------------------------------------


def bench_appends(pg: PgSearch, opts: Options, workspace: str) -> dict[str, Any]:
    cfg = opts.config()
    rng = random.Random(cfg.seed + 3)
    maker = TextMaker(Vocabulary(random.Random(cfg.seed + 1)), rng, cfg)
    sessions = [f"api-append-{i:02d}" for i in range(20)]
    ms: list[float] = []
    for i in range(opts.appends):
        role = "user" if i % 2 == 0 else "assistant"
        text = maker.latin(maker.words_for(role))[0]
        t0 = time.perf_counter()
        pg.append(
            workspace=workspace,
            session_id=sessions[i % len(sessions)],
            messages=[{"role": role, "content": text}],
        )
        ms.append((time.perf_counter() - t0) * 1000)
    return {"workspace": workspace, **summary(ms)}


# --- queries ---------------------------------------------------------------------


def load_queries(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def sample_queries(queries: list[dict[str, Any]], per_class: int) -> list[dict[str, Any]]:
    """The first `per_class` queries of each class, in their order."""
    taken: dict[str, int] = {}
    out = []
    for q in queries:
        if taken.get(q["class"], 0) < per_class:
            taken[q["class"]] = taken.get(q["class"], 0) + 1
            out.append(q)
    return out


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def request_for(q: dict[str, Any], *, per_session: bool) -> SessionQueryRequest:
    f = q.get("filters") or {}
    return SessionQueryRequest(
        query=q["query"],
        limit=10,
        kinds=tuple(f.get("kinds", ())),
        roles=tuple(f.get("roles", ())),
        tool_name=f.get("tool_name"),
        since=_time(f.get("since")),
        until=_time(f.get("until")),
        per_session=per_session,
    )


def alt_query(q: dict[str, Any]) -> alt.Query:
    f = q.get("filters") or {}
    return alt.Query(
        text=q["query"],
        workspace=q["workspace"],
        session_id=q.get("session"),
        kinds=tuple(f.get("kinds", ())),
        roles=tuple(f.get("roles", ())),
        tool_name=f.get("tool_name"),
        since=_time(f.get("since")),
        until=_time(f.get("until")),
    )


@dataclass
class ClassResult:
    ms: list[float] = field(default_factory=list)
    hit_msg: list[bool] = field(default_factory=list)
    hit_session: list[bool] = field(default_factory=list)
    capped: int = 0
    empty: int = 0
    timeouts: int = 0
    errors: int = 0

    def absorb(self, other: ClassResult) -> None:
        """Add `other`'s searches to these (passes pooled into one figure)."""
        self.ms += other.ms
        self.hit_msg += other.hit_msg
        self.hit_session += other.hit_session
        self.capped += other.capped
        self.empty += other.empty
        self.timeouts += other.timeouts
        self.errors += other.errors

    def report(self, *, recall: bool) -> dict[str, Any]:
        out: dict[str, Any] = summary(self.ms)
        if recall and self.hit_msg:
            out["recall10_msg"] = round(sum(self.hit_msg) / len(self.hit_msg), 3)
        if recall and self.hit_session:
            out["recall10_session"] = round(sum(self.hit_session) / len(self.hit_session), 3)
        out["empty"] = self.empty
        if self.capped:
            out["capped"] = self.capped
        if self.timeouts:
            out["timeouts"] = self.timeouts
        if self.errors:
            out["errors"] = self.errors
        return out


def run_ours(
    pg: PgSearch, queries: list[dict[str, Any]], *, per_session: bool
) -> dict[str, ClassResult]:
    out: dict[str, ClassResult] = {}
    for q in queries:
        res = out.setdefault(q["class"], ClassResult())
        provider = pg.provider(workspace=q["workspace"], session_id=q.get("session"))
        req = request_for(q, per_session=per_session)
        t0 = time.perf_counter()
        result = provider.search(req)
        res.ms.append((time.perf_counter() - t0) * 1000)
        keys = [(m.session_id, m.seq) for m in result.matches]
        if q["relevant"]:
            sid, seq = q["relevant"][0]
            res.hit_msg.append((sid, seq) in keys)
            res.hit_session.append(sid in {k[0] for k in keys})
        res.capped += result.candidates_capped
        res.empty += not result.matches
    return out


def _candidate_statement(statement: Statement[Any]) -> bool:
    text = statement.text
    matches = "pgsearch_workspace_query(" in text or "m.tsv @@" in text
    return matches and "token_count" in text and not text.startswith("EXPLAIN")


def count_candidates(pg: PgSearch, queries: list[dict[str, Any]]) -> dict[str, Any]:
    """Candidate rows fetched and network round trips per search, per class (untimed:
    the driver's statement pipeline is instrumented, its unit records captured)."""
    driver = pg._driver
    original = driver._pipeline
    counter = [0]

    def pipeline(conn: Any, statements: list[Statement[Any]], rec: Any) -> list[list[Any]]:
        rows = original(conn, statements, rec)
        counter[0] += sum(
            len(r) for s, r in zip(statements, rows, strict=True) if _candidate_statement(s)
        )
        return rows

    driver._pipeline = pipeline  # type: ignore[method-assign]
    per_class: dict[str, list[int]] = {}
    trips: dict[str, list[int]] = {}
    capped: dict[str, int] = {}
    try:
        for q in queries:
            counter[0] = 0
            provider = pg.provider(workspace=q["workspace"], session_id=q.get("session"))
            with driver.capture() as units:
                result = provider.search(request_for(q, per_session=True))
            trips.setdefault(q["class"], []).append(sum(u.round_trips for u in units))
            if q["class"] == "browse":
                continue
            per_class.setdefault(q["class"], []).append(counter[0])
            capped[q["class"]] = capped.get(q["class"], 0) + result.candidates_capped
    finally:
        del driver._pipeline
    out: dict[str, Any] = {
        c: {
            "median": statistics.median(v),
            "p95": pct(v, 95),
            "max": max(v),
            "cap_hits": capped.get(c, 0),
            "n": len(v),
        }
        for c, v in per_class.items()
    }
    out["round_trips"] = {
        c: {"median": statistics.median(v), "max": max(v), "n": len(v)} for c, v in trips.items()
    }
    return out


def seq_scans(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT relname, seq_scan, coalesce(idx_scan, 0) FROM pg_stat_user_tables "
            "WHERE relname IN ('messages', 'vocabulary', 'sessions')"
        ).fetchall()
    return {f"{r[0]}.seq_scan": int(r[1]) for r in rows} | {
        f"{r[0]}.idx_scan": int(r[2]) for r in rows
    }


def _measure_alternative(
    system: alt.SQLiteFTS5 | alt.BM25S, queries: list[dict[str, Any]], rows: int
) -> dict[str, Any]:
    """One warm-up pass, then the timed pass; build time, sizes and per-class results."""
    run_alternative(system, queries)
    res = run_alternative(system, queries)
    return {
        "build": {
            "seconds": round(system.build_s, 1),
            "rows_per_s": round(rows / system.build_s, 1),
        },
        "sizes": system.sizes(),
        "search": {c: r.report(recall=c in RECALL_CLASSES) for c, r in res.items()},
    }


def run_alternative(
    system: alt.Alternative, queries: list[dict[str, Any]]
) -> dict[str, ClassResult]:
    out: dict[str, ClassResult] = {}
    for q in queries:
        res = out.setdefault(q["class"], ClassResult())
        aq = alt_query(q)
        t0 = time.perf_counter()
        try:
            keys = system.search(aq, 10)
        except alt.TimedOut:
            res.timeouts += 1
            keys = []
        except Exception:  # a system that cannot run a query gets no hit for it
            res.errors += 1
            keys = []
        res.ms.append((time.perf_counter() - t0) * 1000)
        if q["relevant"]:
            sid, seq = q["relevant"][0]
            res.hit_msg.append((sid, seq) in keys)
            res.hit_session.append(sid in {k[0] for k in keys})
        res.empty += not keys
    return out


# --- the run ---------------------------------------------------------------------


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        mem = Path("/proc/meminfo").read_text().split()
        info["memory_gb"] = round(int(mem[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return info


def code_version() -> dict[str, Any]:
    """The commit measured, and whether the working tree differed from it."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "pgsearch", "migrations"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return {}
    return {"commit": head, "core_modified": bool(dirty)}


def server_info(dsn: str) -> dict[str, str]:
    names = (
        "server_version",
        "shared_buffers",
        "work_mem",
        "maintenance_work_mem",
        "synchronous_commit",
        "autovacuum",
    )
    out: dict[str, str] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in names:
            row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
            out["version" if name == "server_version" else name] = str(row[0]) if row else ""
    return out


def run(opts: Options) -> dict[str, Any]:
    """The whole benchmark; returns (and writes) the results document."""
    started = time.perf_counter()
    cfg = opts.config()
    label = cfg.label()
    corpus_dir = opts.corpus or (RESULTS / f"corpus-{label}")
    t0 = time.perf_counter()
    manifest = ensure_corpus(cfg, corpus_dir, quiet=opts.quiet)
    say(opts, f"corpus ready in {time.perf_counter() - t0:.1f} s: {corpus_dir}")
    queries = load_queries(corpus_dir / "queries.jsonl")
    if opts.search_sample:
        queries = sample_queries(queries, opts.search_sample)

    dbname = f"pgsearch_bench_{label.lower()}"
    if opts.search_only and opts.dsn is None:
        raise SystemExit("--search-only needs --dsn: a database an earlier run kept (--keep-db)")
    dsn = opts.dsn or create_database(opts.server, dbname)
    if opts.dsn is None:
        PgSearch.migrate(dsn)
    results: dict[str, Any] = {
        "label": label,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python -m bench.speed " + " ".join(sys.argv[1:]),
        "machine": machine(),
        "code": code_version(),
        "server": server_info(dsn),
        "corpus": {k: manifest[k] for k in ("config", "stats", "queries")},
    }
    try:
        if opts.search_only:
            results.update(_measure_search(opts, dsn, queries))
        else:
            results.update(_measure(opts, dsn, corpus_dir, queries))
    finally:
        if opts.dsn is None and not opts.keep_db:
            drop_database(opts.server, dbname)
    results["total_seconds"] = round(time.perf_counter() - started, 1)
    opts.out.mkdir(parents=True, exist_ok=True)
    path = opts.out / f"speed-{label}{'-' + opts.tag if opts.tag else ''}.json"
    path.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    say(opts, render(results))
    say(opts, f"results: {path} ({results['total_seconds']} s in all)")
    return results


def _measure_search(opts: Options, dsn: str, queries: list[dict[str, Any]]) -> dict[str, Any]:
    """The searches: a warm-up pass, the timed passes, candidates and round trips."""
    out: dict[str, Any] = {}
    say(opts, "searching (warm-up, default, all hits)...")
    with PgSearch.connect(dsn) as pg:
        run_ours(pg, queries, per_session=True)
    before = seq_scans(dsn)
    with PgSearch.connect(dsn) as pg:
        default = run_ours(pg, queries, per_session=True)
        all_hits = run_ours(pg, [q for q in queries if q["class"] != "browse"], per_session=False)
    time.sleep(1.5)  # let the search backend's statistics reach pg_stat
    after = seq_scans(dsn)
    out["plan_check"] = {
        "before": before,
        "after": after,
        "messages_seq_scans_during_search": after.get("messages.seq_scan", 0)
        - before.get("messages.seq_scan", 0),
    }
    out["search"] = {c: r.report(recall=c in RECALL_CLASSES) for c, r in default.items()}
    out["search_overall"] = summary([ms for r in default.values() for ms in r.ms])
    out["search_all_hits"] = {c: r.report(recall=c in RECALL_CLASSES) for c, r in all_hits.items()}
    with PgSearch.connect(dsn) as pg:
        out["candidates"] = count_candidates(pg, queries)
        out["candidate_cap"] = pg.settings.candidate_cap
        out["sizes"] = {
            s.table: {"table": s.table_bytes, "indexes": s.index_bytes} for s in pg.table_sizes()
        }
    return out


def _measure(
    opts: Options, dsn: str, corpus_dir: Path, queries: list[dict[str, Any]]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    bulk, tail = corpus_files(corpus_dir / "corpus")
    say(opts, f"ingesting {sum(f[2] for f in bulk):,} messages with {opts.jobs} writer(s)...")
    ingest = {"bulk": ingest_phase(dsn, bulk, opts.jobs)}
    say(opts, f"  bulk: {ingest['bulk']}")
    ingest["tail"] = ingest_phase(dsn, tail, opts.jobs)
    say(opts, f"  tail into the indexed database: {ingest['tail']}")
    out["ingest"] = ingest
    with psycopg.connect(dsn, autocommit=True) as conn:
        t0 = time.perf_counter()
        conn.execute("VACUUM ANALYZE")
        out["vacuum_analyze_s"] = round(time.perf_counter() - t0, 1)

    with PgSearch.connect(dsn) as pg:
        biggest = max(
            {q["workspace"] for q in queries},
            key=lambda ws: pg.stats(workspace=ws).messages,
        )
        out["append"] = bench_appends(pg, opts, biggest)
        say(opts, f"append: {out['append']}")
    out.update(_measure_search(opts, dsn, queries))
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        out["sizes"]["database_before_alternatives"] = int(row[0]) if row else 0
        idx = conn.execute(
            "SELECT indexrelname, pg_relation_size(indexrelid) FROM pg_stat_user_indexes "
            "WHERE relname IN ('messages', 'vocabulary', 'sessions') ORDER BY 1"
        ).fetchall()
        out["sizes"]["indexes"] = {r[0]: int(r[1]) for r in idx}

    if opts.alternatives:
        out["alternatives"] = _alternatives(opts, dsn, corpus_dir, queries)
    return out


def _alternatives(
    opts: Options, dsn: str, corpus_dir: Path, queries: list[dict[str, Any]]
) -> dict[str, Any]:
    t0 = time.perf_counter()
    rows = alt.load_rows(corpus_dir / "corpus")
    say(
        opts,
        f"alternatives: {len(rows):,} indexable rows loaded in {time.perf_counter() - t0:.1f} s",
    )
    workload = [q for q in queries if q["class"] in ALT_CLASSES]
    rng = random.Random(opts.seed + 4)
    trgm_sample = [
        q
        for c in TRGM_CLASSES
        for q in rng.sample(
            [x for x in queries if x["class"] == c],
            min(opts.trgm_per_class, sum(1 for x in queries if x["class"] == c)),
        )
    ]
    out: dict[str, Any] = {}
    tables: alt.PostgresTables | None = None
    if "fts" in opts.alternatives or "trgm" in opts.alternatives:
        tables = alt.PostgresTables(dsn)
        build = tables.build(rows, trigram="trgm" in opts.alternatives)
        say(opts, f"  postgres tables built: {build}")
        if "fts" in opts.alternatives:
            fts = alt.PostgresFTS(tables)
            run_alternative(fts, workload)  # warm-up
            res = run_alternative(fts, workload)
            out["fts"] = {
                "build": {
                    "seconds": round(build["load_s"] + build["fts_index_s"], 1),
                    **{k: round(v, 1) for k, v in build.items()},
                    "rows_per_s": round(len(rows) / (build["load_s"] + build["fts_index_s"]), 1),
                },
                "sizes": fts.sizes(),
                "search": {c: r.report(recall=c in RECALL_CLASSES) for c, r in res.items()},
            }
            say(opts, "  fts done")
        if "trgm" in opts.alternatives:
            trgm = alt.PostgresTrigram(tables, opts.trgm_timeout_ms)
            res = run_alternative(trgm, trgm_sample)
            out["trgm"] = {
                "build": {"seconds": round(build.get("trgm_index_s", 0.0), 1)},
                "sizes": trgm.sizes(),
                "timeout_ms": opts.trgm_timeout_ms,
                "search": {c: r.report(recall=c in RECALL_CLASSES) for c, r in res.items()},
            }
            say(opts, "  trgm done")
    if "sqlite" in opts.alternatives:
        path = opts.out / f"sqlite-{opts.config().label()}.db"
        opts.out.mkdir(parents=True, exist_ok=True)
        lite = alt.SQLiteFTS5(path, rows)
        out["sqlite"] = _measure_alternative(lite, workload, len(rows))
        lite.close()
        path.unlink(missing_ok=True)
        say(opts, "  sqlite done")
    if "bm25s" in opts.alternatives:
        try:
            engine = alt.BM25S(rows)
        except ImportError:
            out["bm25s"] = {"skipped": "bm25s is not installed (pip install -e '.[bench]')"}
        else:
            out["bm25s"] = _measure_alternative(engine, workload, len(rows))
            engine.close()
            say(opts, "  bm25s done")
    if tables is not None:
        tables.drop()
        tables.close()
    return out


# --- output ----------------------------------------------------------------------


def _f(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def render(results: dict[str, Any]) -> str:
    """The human-readable tables of a results document."""
    lines: list[str] = []
    label = results["label"]
    ing = results.get("ingest", {})
    lines.append(f"== pgsearch speed at {label} messages ==")
    if ing:
        b, t = ing["bulk"], ing["tail"]
        lines.append(
            f"bulk ingest: {b['msgs_per_s']:,.0f} msgs/s ({b['messages']:,} in {b['seconds']} s, "
            f"{b['writers']} writers); into the indexed DB (last 5%): {t['msgs_per_s']:,.0f} msgs/s"
        )
    if "append" in results:
        a = results["append"]
        lines.append(
            f"append (1 message): p50 {a['p50_ms']:.2f} ms, p95 {a['p95_ms']:.2f} ms, "
            f"p99 {a['p99_ms']:.2f} ms"
        )
    lines.append("")
    lines.append(
        "| class | ours p50 | p95 | p99 | recall@10 msg (all hits) | recall@10 session "
        "| candidates median/p95 | cap hits | round trips median/max |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|")
    cands = results.get("candidates", {})
    trips = cands.get("round_trips", {}) if isinstance(cands, dict) else {}
    for c, r in results.get("search", {}).items():
        a = results.get("search_all_hits", {}).get(c, {})
        cd = cands.get(c, {}) if isinstance(cands, dict) else {}
        lines.append(
            f"| {c} | {_f(r['p50_ms'])} | {_f(r['p95_ms'])} | {_f(r['p99_ms'])} "
            f"| {_f(a.get('recall10_msg'), 2)} | {_f(r.get('recall10_session'), 2)} "
            f"| {_f(cd.get('median'), 0)}/{_f(cd.get('p95'), 0)} | {_f(cd.get('cap_hits'))} "
            f"| {_f(trips.get(c, {}).get('median'), 0)}/{_f(trips.get(c, {}).get('max'), 0)} |"
        )
    overall = results.get("search_overall")
    if overall:
        lines.append(
            f"\nall classes together: p50 {_f(overall['p50_ms'])} ms, "
            f"p95 {_f(overall['p95_ms'])} ms, p99 {_f(overall['p99_ms'])} ms "
            f"over {overall['n']} searches"
        )
    alts = results.get("alternatives", {})
    if alts:
        lines.append("")
        lines.append(
            "Alternatives: p50 ms (ratio to ours, all hits) and recall@10 of the source message"
        )
        names = [n for n in ("fts", "trgm", "sqlite", "bm25s") if n in alts and "search" in alts[n]]
        lines.append("| class | ours | " + " | ".join(names) + " |")
        lines.append("|---|---|" + "---|" * len(names))
        ours_all = results.get("search_all_hits", {})
        for c in ALT_CLASSES:
            o = ours_all.get(c)
            if o is None:
                continue
            cells = [f"{_f(o['p50_ms'])} ms, r {_f(o.get('recall10_msg'), 2)}"]
            for n in names:
                r = alts[n]["search"].get(c)
                if r is None:
                    cells.append("")
                    continue
                ratio = r["p50_ms"] / o["p50_ms"] if o["p50_ms"] else float("nan")
                extra = f", {r['timeouts']} t/o" if r.get("timeouts") else ""
                cells.append(
                    f"{_f(r['p50_ms'])} ms ({ratio:.2f}x), r {_f(r.get('recall10_msg'), 2)}{extra}"
                )
            lines.append(f"| {c} | " + " | ".join(cells) + " |")
        lines.append("")
        lines.append("| system | build s | index MB |")
        lines.append("|---|---|---|")
        for n in names:
            lines.append(
                f"| {n} | {alts[n]['build']['seconds']} | {alts[n]['sizes']['index'] / 1e6:,.0f} |"
            )
    sizes = results.get("sizes", {})
    if sizes:
        lines.append("")
        lines.append("| pgsearch table | table MB | indexes MB |")
        lines.append("|---|---|---|")
        for name, s in sizes.items():
            if isinstance(s, dict) and "table" in s:
                lines.append(f"| {name} | {s['table'] / 1e6:,.0f} | {s['indexes'] / 1e6:,.0f} |")
    pc = results.get("plan_check")
    if pc:
        lines.append(
            "\nmessages seq scans during the timed searches: "
            f"{pc['messages_seq_scans_during_search']}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="pgsearch speed benchmark against the alternatives (see bench/README.md)"
    )
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--workspaces", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--queries-per-class", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2, help="ingest writer processes")
    parser.add_argument("--appends", type=int, default=500)
    parser.add_argument("--server", default=os.environ.get("PGSEARCH_BENCH_SERVER", DEFAULT_SERVER))
    parser.add_argument("--dsn", help="an existing migrated, empty database to use instead")
    parser.add_argument("--keep-db", action="store_true", help="keep pgsearch_bench_<size>")
    parser.add_argument(
        "--alternatives",
        default="fts,trgm,sqlite,bm25s",
        help="comma-separated subset of fts,trgm,sqlite,bm25s (empty: none)",
    )
    parser.add_argument("--trgm-per-class", type=int, default=20)
    parser.add_argument("--trgm-timeout-ms", type=int, default=5000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--search-only",
        action="store_true",
        help="only the searches, against --dsn as a --keep-db run left it",
    )
    parser.add_argument("--tag", default="", help="suffix of the results file name")
    parser.add_argument(
        "--search-sample", type=int, default=0, help="search the first N queries of each class"
    )
    args = parser.parse_args(argv)
    opts = Options(
        messages=args.messages,
        workspaces=args.workspaces,
        seed=args.seed,
        queries_per_class=args.queries_per_class,
        jobs=args.jobs,
        appends=args.appends,
        server=args.server,
        dsn=args.dsn,
        keep_db=args.keep_db,
        alternatives=tuple(a for a in args.alternatives.split(",") if a),
        trgm_per_class=args.trgm_per_class,
        trgm_timeout_ms=args.trgm_timeout_ms,
        out=args.out,
        search_only=args.search_only,
        tag=args.tag,
        search_sample=args.search_sample,
    )
    run(opts)
    return 0


if __name__ == "__main__":
    sys.exit(main())

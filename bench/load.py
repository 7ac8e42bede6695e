"""Load: many clients on one `PgSearch` (threads) or one `AsyncPgSearch` (tasks).

    python -m bench.load --messages 100000                 # about 10 minutes here
    python -m bench.load --messages 100000 --clients 1,8 --seconds 5
    python -m bench.load --dsn postgresql://.../loaded_db  # an ingested database
    python -m bench.load --dsn ... --read-dsn postgresql://standby/loaded_db

1. Generates (or reuses) the seeded corpus of `bench.generate` and ingests it into
   ``pgsearch_bench_load_<size>`` (kept between runs: ``--fresh`` rebuilds it), as
   `bench.speed` does, then ``VACUUM ANALYZE``.
2. For each client count (``--clients``, default 1, 8, 32, 128) and each kind of
   client (``threads`` sharing one `PgSearch`, asyncio ``tasks`` sharing one
   `AsyncPgSearch`), runs for ``--seconds``: each client loops over 90 % searches
   (the bench's query classes, mixed, every class in turn, the default request)
   and 10 % single-message appends. Reported: operations/s, searches/s, p50/p99
   per operation, errors, and the pool's waits (requests that found no free
   connection, and their mean wait).
3. Beside it, the ceiling at the same concurrency through the same pool: ``SELECT 1``
   round trips, and PostgreSQL's built-in full-text search (``tsv @@ query``
   ranked by ``ts_rank_cd``, top 10) on the same table.
4. A pool sweep: 32 thread clients with pools of 2 to 32 connections (this is where
   ``PGSEARCH_POOL_MIN``/``PGSEARCH_POOL_MAX`` defaults come from).
5. Where the CPU goes, per run: the client process's CPU seconds (with threads all
   Python runs under one GIL, so a client near 1.0 core busy is GIL-bound), the
   CPU seconds of the run's server backends (from ``/proc``, same machine only),
   and how busy the whole machine was. The machine is shared: its load average and
   the other sessions active on the server are recorded before each run.

It prints a table and writes ``bench/results/load-<size>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from bench.generate import Config, TextMaker, Vocabulary, ensure_corpus
from bench.speed import (
    DEFAULT_SERVER,
    RESULTS,
    code_version,
    corpus_files,
    dsn_for,
    ingest_phase,
    load_queries,
    machine,
    pct,
    request_for,
    server_info,
)
from pgsearch import PgSearch, Settings
from pgsearch.aio import AsyncPgSearch
from pgsearch.db.work import Statement, Unit, Work, fetch
from pgsearch.errors import PgSearchError
from pgsearch.settings import parse_read_dsns

APPEND_SHARE = 0.10
#: Thread clients of the pool sweep, and the pool sizes tried.
SWEEP_CLIENTS = 32
SWEEP_POOLS = (2, 4, 8, 16, 32)
LOADED_KEY = "bench_load_corpus"

_SELECT_1: Statement[int] = Statement("select 1", "SELECT 1", decode=lambda r: int(r[0]))
#: Through the workspace's own posting lists, as pgsearch reads them (migration 0014).
_FTS: str = (
    "SELECT session_id, seq FROM messages, plainto_tsquery('simple', %(q)s) AS query "
    'WHERE workspace_id = %(ws)s COLLATE "C" AND pgsearch_workspace_terms(workspace_id, tsv)'
    " @@ pgsearch_workspace_query(%(ws)s, query) "
    "ORDER BY ts_rank_cd(tsv, query) DESC LIMIT 10"
)


@dataclass(kw_only=True)
class Options:
    messages: int = 100_000
    workspaces: int = 50
    seed: int = 7
    queries_per_class: int = 200
    jobs: int = 2
    clients: tuple[int, ...] = (1, 8, 32, 128)
    modes: tuple[str, ...] = ("threads", "tasks")
    seconds: float = 10.0
    #: Seconds of untimed load before each run (pool grown, caches warm).
    warmup: float = 1.0
    pool: int | None = None
    sweep: bool = True
    ceiling: bool = True
    server: str = DEFAULT_SERVER
    dsn: str | None = None
    #: Standbys for the reads (``PGSEARCH_READ_DSN``); appends still go to `dsn`.
    read_dsns: tuple[str, ...] = ()
    fresh: bool = False
    out: Path = RESULTS
    corpus: Path | None = None
    quiet: bool = False

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


# --- the database ------------------------------------------------------------------


def prepare_database(opts: Options, corpus_dir: Path) -> str:
    """The loaded database: reused when a previous run loaded this very corpus.

    With ``--dsn``, that database: loaded with the corpus first when it holds no
    messages yet (a migrated, empty one), else used as it is.
    """
    manifest = (corpus_dir / "manifest.json").read_text(encoding="utf-8")
    if opts.dsn:
        if _loaded(opts.dsn) is None and _empty(opts.dsn):
            _ingest(opts, opts.dsn, corpus_dir, manifest)
        return opts.dsn
    label = opts.config().label()
    name = f"pgsearch_bench_load_{label.lower()}"
    dsn = dsn_for(opts.server, name)
    if not opts.fresh and _loaded(dsn) == manifest:
        say(opts, f"reusing {name}")
        return dsn
    with psycopg.connect(opts.server, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(
            f"CREATE DATABASE \"{name}\" ENCODING 'UTF8' TEMPLATE template0 "
            "LC_COLLATE 'C.UTF-8' LC_CTYPE 'C.UTF-8'"
        )
    PgSearch.migrate(dsn)
    _ingest(opts, dsn, corpus_dir, manifest)
    return dsn


def _ingest(opts: Options, dsn: str, corpus_dir: Path, manifest: str) -> None:
    bulk, tail = corpus_files(corpus_dir / "corpus")
    t0 = time.perf_counter()
    ingested = ingest_phase(dsn, bulk + tail, opts.jobs)
    say(opts, f"ingested {ingested['messages']} messages in {time.perf_counter() - t0:.0f} s")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        conn.execute(
            "INSERT INTO pgsearch_meta (key, value) VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (LOADED_KEY, manifest),
        )


def _empty(dsn: str) -> bool:
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        return conn.execute("SELECT NOT EXISTS (SELECT 1 FROM messages)").fetchone() == (True,)


def _loaded(dsn: str) -> str | None:
    try:
        with psycopg.connect(dsn, connect_timeout=10) as conn:
            row = conn.execute(
                "SELECT value FROM pgsearch_meta WHERE key = %s", (LOADED_KEY,)
            ).fetchone()
    except psycopg.Error:
        return None
    return str(row[0]) if row else None


# --- what one client does ------------------------------------------------------------


@dataclass
class Recorder:
    """Latencies and errors of one run (one lock: appends from many threads)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    ms: dict[str, list[float]] = field(default_factory=dict)
    errors: int = 0
    samples: list[str] = field(default_factory=list)

    def took(self, op: str, seconds: float) -> None:
        with self.lock:
            self.ms.setdefault(op, []).append(seconds * 1000)

    def failed(self, op: str, exc: BaseException) -> None:
        with self.lock:
            self.errors += 1
            if len(self.samples) < 5:
                self.samples.append(f"{op}: {type(exc).__name__}: {exc}"[:300])


class Plan:
    """The operations clients draw: bench queries round robin, appends 10 %."""

    def __init__(self, queries: list[dict[str, Any]], cfg: Config, kind: str) -> None:
        by_class: dict[str, list[dict[str, Any]]] = {}
        for q in queries:
            by_class.setdefault(q["class"], []).append(q)
        # Every class in turn, so that each client mixes them all.
        self.queries = [
            qs[i]
            for i in range(max(len(qs) for qs in by_class.values()))
            for qs in by_class.values()
            if i < len(qs)
        ]
        self.kind = kind
        self.maker = TextMaker(Vocabulary(random.Random(cfg.seed + 1)), random.Random(1), cfg)
        self.workspaces = sorted({q["workspace"] for q in queries})

    def client(self, index: int) -> ClientPlan:
        return ClientPlan(self, index)


class ClientPlan:
    def __init__(self, plan: Plan, index: int) -> None:
        self.plan = plan
        self.rng = random.Random(index)
        self.next = self.rng.randrange(len(plan.queries))
        self.index = index
        self.texts = [plan.maker.latin(plan.maker.words_for("user"))[0] for _ in range(16)]

    def op(self) -> tuple[str, Any]:
        if self.plan.kind != "mixed":
            q = self.plan.queries[self.next % len(self.plan.queries)]
            self.next += 1
            return self.plan.kind, q
        if self.rng.random() < APPEND_SHARE:
            ws = self.plan.workspaces[self.index % len(self.plan.workspaces)]
            message = {"role": "user", "content": self.rng.choice(self.texts)}
            return "append", (ws, f"load-{self.index % 64}", message)
        q = self.plan.queries[self.next % len(self.plan.queries)]
        self.next += 1
        return "search", q


def _scope(q: dict[str, Any]) -> dict[str, Any]:
    return {"workspace": q["workspace"], "session_id": q.get("session")}


def _fts_unit(q: dict[str, Any]) -> Unit[list[Any]]:
    def work() -> Work[list[Any]]:
        statement: Statement[Any] = Statement(
            "fts ceiling", _FTS, {"q": q["query"] or "a", "ws": q["workspace"]}
        )
        return (yield from fetch(statement, final=True))

    return Unit(work=work, workspace=q["workspace"], write=False, context="fts ceiling")


def _select_1_unit() -> Unit[list[int]]:
    def work() -> Work[list[int]]:
        return (yield from fetch(_SELECT_1, final=True))

    return Unit(work=work, workspace=None, write=False, context="select 1")


def sync_op(pg: PgSearch, kind: str, arg: Any) -> None:
    if kind == "search":
        pg.provider(**_scope(arg)).search(request_for(arg, per_session=True))
    elif kind == "append":
        ws, session, message = arg
        pg.append(workspace=ws, session_id=session, messages=[message])
    elif kind == "select1":
        pg._driver.run(_select_1_unit())
    else:
        pg._driver.run(_fts_unit(arg))


async def async_op(pg: AsyncPgSearch, kind: str, arg: Any) -> None:
    if kind == "search":
        await pg.provider(**_scope(arg)).search(request_for(arg, per_session=True))
    elif kind == "append":
        ws, session, message = arg
        await pg.append(workspace=ws, session_id=session, messages=[message])
    elif kind == "select1":
        await pg._driver.run(_select_1_unit())
    else:
        await pg._driver.run(_fts_unit(arg))


def run_threads(pg: PgSearch, plan: Plan, clients: int, seconds: float) -> Recorder:
    rec = Recorder()
    deadline = time.monotonic() + seconds

    def client(index: int) -> None:
        mine = plan.client(index)
        while time.monotonic() < deadline:
            kind, arg = mine.op()
            began = time.perf_counter()
            try:
                sync_op(pg, kind, arg)
            except PgSearchError as exc:
                rec.failed(kind, exc)
                continue
            rec.took(kind, time.perf_counter() - began)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return rec


async def run_tasks(pg: AsyncPgSearch, plan: Plan, clients: int, seconds: float) -> Recorder:
    rec = Recorder()
    deadline = time.monotonic() + seconds

    async def client(index: int) -> None:
        mine = plan.client(index)
        while time.monotonic() < deadline:
            kind, arg = mine.op()
            began = time.perf_counter()
            try:
                await async_op(pg, kind, arg)
            except PgSearchError as exc:
                rec.failed(kind, exc)
                continue
            rec.took(kind, time.perf_counter() - began)

    await asyncio.gather(*(client(i) for i in range(clients)))
    return rec


# --- observing the machine -------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def _machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0, 0.0
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    total = sum(values[:8])
    return (total - idle) / _TICK, total / _TICK


def _backends(dsn: str) -> tuple[list[int], int]:
    """Our backends' pids, and how many other sessions are active on the server."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        ours = [
            int(r[0])
            for r in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name = 'pgsearch'"
            ).fetchall()
        ]
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
            "AND backend_type = 'client backend' AND pid <> pg_backend_pid() "
            "AND application_name <> 'pgsearch'"
        ).fetchone()
    return ours, int(row[0]) if row else 0


@dataclass
class Probe:
    """CPU and machine state around one run (server CPU: the backends of every
    node, primary and standbys, when they run on this machine)."""

    dsns: tuple[str, ...]
    began: float = 0.0
    client_cpu: float = 0.0
    server_cpu: dict[int, float] = field(default_factory=dict)
    machine: tuple[float, float] = (0.0, 0.0)
    loadavg: float = 0.0
    others: int = 0

    def _pids(self) -> tuple[list[int], int]:
        pids: list[int] = []
        others = 0
        for dsn in self.dsns:
            mine, busy = _backends(dsn)
            pids += mine
            others += busy
        return pids, others

    def start(self) -> None:
        pids, self.others = self._pids()
        self.server_cpu = {p: _proc_cpu(p) for p in pids}
        self.loadavg = os.getloadavg()[0]
        self.machine = _machine_busy()
        self.client_cpu = time.process_time()
        self.began = time.monotonic()

    def stop(self) -> dict[str, Any]:
        wall = time.monotonic() - self.began
        client = time.process_time() - self.client_cpu
        busy, total = _machine_busy()
        pids, _ = self._pids()
        server = sum(_proc_cpu(p) - self.server_cpu.get(p, 0.0) for p in pids)
        cores = (total - self.machine[1]) / wall if wall else 0.0
        return {
            "client_cores": round(client / wall, 2) if wall else 0.0,
            "server_cores": round(server / wall, 2) if wall else 0.0,
            "machine_busy_cores": round((busy - self.machine[0]) / wall, 2) if wall else 0.0,
            "machine_cores": round(cores, 1),
            "loadavg_before": round(self.loadavg, 2),
            "other_active_sessions": self.others,
        }


def _pool_counters(stats: dict[str, dict[str, int]]) -> dict[str, int]:
    """The pool counters, summed over every node's pool."""
    keys = ("requests_num", "requests_queued", "requests_wait_ms")
    return {k: sum(int(s.get(k, 0)) for s in stats.values()) for k in keys}


def _summary(
    rec: Recorder, seconds: float, before: dict[str, int], after: dict[str, int]
) -> dict[str, Any]:
    ops = sum(len(v) for v in rec.ms.values())
    out: dict[str, Any] = {
        "ops": ops,
        "ops_per_s": round(ops / seconds, 1),
        "errors": rec.errors,
    }
    for op, ms in sorted(rec.ms.items()):
        out[op] = {
            "n": len(ms),
            "per_s": round(len(ms) / seconds, 1),
            "p50_ms": round(pct(ms, 50), 2),
            "p99_ms": round(pct(ms, 99), 2),
        }
    queued = after["requests_queued"] - before["requests_queued"]
    waited = after["requests_wait_ms"] - before["requests_wait_ms"]
    out["pool"] = {
        "requests": after["requests_num"] - before["requests_num"],
        "waited": queued,
        "mean_wait_ms": round(waited / queued, 1) if queued else 0.0,
    }
    if rec.samples:
        out["error_samples"] = rec.samples
    return out


# --- runs ----------------------------------------------------------------------------


def one_run(
    opts: Options,
    dsn: str,
    queries: list[dict[str, Any]],
    *,
    mode: str,
    clients: int,
    kind: str = "mixed",
    pool: int | None = None,
) -> dict[str, Any]:
    plan = Plan(queries, opts.config(), kind)
    settings = Settings.from_env({}, dsn=dsn, read_dsns=opts.read_dsns)
    pool = pool or opts.pool
    probe = Probe((dsn, *opts.read_dsns))
    if mode == "threads":
        with PgSearch.connect(settings=settings, pool_size=pool) as pg:
            run_threads(pg, plan, min(clients, 4), opts.warmup)
            before = _pool_counters(pg._driver.pool_stats())
            probe.start()
            began = time.monotonic()
            rec = run_threads(pg, plan, clients, opts.seconds)
            wall = time.monotonic() - began
            cpu = probe.stop()
            after = _pool_counters(pg._driver.pool_stats())
            size = pg.settings.pool_max
    else:

        async def main() -> tuple[Recorder, float, dict[str, Any], dict[str, int], dict[str, int]]:
            apg = await AsyncPgSearch.connect(settings=settings, pool_size=pool)
            try:
                await run_tasks(apg, plan, min(clients, 4), opts.warmup)
                before = _pool_counters(apg._driver.pool_stats())
                probe.start()
                began = time.monotonic()
                rec = await run_tasks(apg, plan, clients, opts.seconds)
                wall = time.monotonic() - began
                cpu = probe.stop()
                return rec, wall, cpu, before, _pool_counters(apg._driver.pool_stats())
            finally:
                await apg.close()

        rec, wall, cpu, before, after = asyncio.run(main())
        size = pool or settings.pool_max
    out = {"mode": mode, "clients": clients, "kind": kind, "pool_max": size}
    out.update(_summary(rec, wall, before, after))
    out["cpu"] = cpu
    return out


def _line(r: dict[str, Any]) -> str:
    s = r.get("search") or r.get(r["kind"]) or {}
    a = r.get("append") or {}
    c = r["cpu"]
    return (
        f"{r['mode']:>7} {r['kind']:>7} {r['clients']:>4} pool {r['pool_max']:>3} | "
        f"{r['ops_per_s']:>7.1f} ops/s  {s.get('per_s', 0):>7.1f}/s "
        f"p50 {s.get('p50_ms', 0):>7.1f} p99 {s.get('p99_ms', 0):>7.1f} ms | "
        f"append p50 {a.get('p50_ms', 0):>6.1f} p99 {a.get('p99_ms', 0):>7.1f} | "
        f"err {r['errors']:>3} | waited {r['pool']['waited']:>6} "
        f"({r['pool']['mean_wait_ms']:>6.1f} ms) | cpu client {c['client_cores']:.2f} "
        f"server {c['server_cores']:.2f} machine {c['machine_busy_cores']:.2f}/"
        f"{c['machine_cores']:.0f} load {c['loadavg_before']:.1f}"
    )


def run(opts: Options) -> dict[str, Any]:
    started = time.perf_counter()
    cfg = opts.config()
    label = cfg.label()
    corpus_dir = opts.corpus or (RESULTS / f"corpus-{label}")
    manifest = ensure_corpus(cfg, corpus_dir, quiet=opts.quiet)
    queries = load_queries(corpus_dir / "queries.jsonl")
    dsn = prepare_database(opts, corpus_dir)
    results: dict[str, Any] = {
        "label": label,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python -m bench.load " + " ".join(sys.argv[1:]),
        "machine": machine(),
        "code": code_version(),
        "server": server_info(dsn),
        "corpus": {k: manifest[k] for k in ("config", "stats", "queries")},
        "seconds_per_run": opts.seconds,
        "runs": [],
    }
    runs: list[dict[str, Any]] = results["runs"]

    def go(**kw: Any) -> None:
        r = one_run(opts, dsn, queries, **kw)
        runs.append(r)
        say(opts, _line(r))

    for clients in opts.clients:
        for mode in opts.modes:
            go(mode=mode, clients=clients)
            if opts.ceiling:
                go(mode=mode, clients=clients, kind="select1")
                go(mode=mode, clients=clients, kind="fts")
    if opts.sweep:
        for size in SWEEP_POOLS:
            go(mode="threads", clients=SWEEP_CLIENTS, pool=size)
    results["total_seconds"] = round(time.perf_counter() - started, 1)
    opts.out.mkdir(parents=True, exist_ok=True)
    path = opts.out / f"load-{label}.json"
    path.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    say(opts, f"results: {path} ({results['total_seconds']} s in all)")
    return results


def _ints(value: str) -> tuple[int, ...]:
    return tuple(int(v) for v in value.split(",") if v.strip())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--workspaces", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--queries-per-class", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2, help="ingest writer processes")
    parser.add_argument("--clients", type=_ints, default=(1, 8, 32, 128))
    parser.add_argument("--modes", default="threads,tasks")
    parser.add_argument("--seconds", type=float, default=10.0, help="per run")
    parser.add_argument("--pool", type=int, default=None, help="pool size (default: settings)")
    parser.add_argument("--no-sweep", action="store_true", help="skip the pool-size sweep")
    parser.add_argument("--no-ceiling", action="store_true", help="skip SELECT 1 and FTS runs")
    parser.add_argument("--server", default=DEFAULT_SERVER)
    parser.add_argument("--dsn", default=None, help="an already loaded database to use")
    parser.add_argument(
        "--read-dsn",
        default="",
        help="standbys of the database (as PGSEARCH_READ_DSN): searches run there",
    )
    parser.add_argument("--fresh", action="store_true", help="rebuild the database")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    unknown = set(modes) - {"threads", "tasks"}
    if unknown:
        parser.error(f"--modes: unknown {sorted(unknown)}; use threads and/or tasks")
    opts = Options(
        messages=args.messages,
        workspaces=args.workspaces,
        seed=args.seed,
        queries_per_class=args.queries_per_class,
        jobs=args.jobs,
        clients=args.clients,
        modes=modes,
        seconds=args.seconds,
        pool=args.pool,
        sweep=not args.no_sweep,
        ceiling=not args.no_ceiling,
        server=args.server,
        dsn=args.dsn,
        read_dsns=parse_read_dsns(args.read_dsn),
        fresh=args.fresh,
        out=args.out,
        quiet=args.quiet,
    )
    run(opts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

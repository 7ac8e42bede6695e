"""Whole-process timings of the `pgsearch` command: first run, cold and warm searches.

Each figure is the wall time of a fresh ``python -m pgsearch ...`` process, as a user
or an agent's shell pays it (interpreter start and imports included):

- ``first run``: a fresh ``PGSEARCH_HOME``, no server configured: initdb, start,
  create the database, migrate, answer (``pgsearch stats``), stop.
- ``cold search, embedded``: the private server is stopped, so the command starts
  it, searches, and stops it again as its last user.
- ``warm search, embedded``: the private server is kept up (``pgsearch server start``).
- ``warm search, system server``: the same search through ``--dsn`` against a
  database on the server ``--dsn`` names (default: 127.0.0.1:5432), created and
  dropped here.
- ``import pgsearch.cli`` and ``pgsearch --help``: the floor under every command.

The corpus is ``examples/sessions``; the search is a typo query, so fuzzy expansion
runs. Bytecode caching is left on (``PYTHONDONTWRITEBYTECODE`` is dropped), as in a
normal installation. Beside each median wall time is the median CPU time (user +
system) of the command's own process tree: on a busy machine the wall time mostly
measures the wait for a core, the CPU time what the command itself costs.

``python -m bench.startup --runs 10`` prints a table and writes
``bench/RESULTS-startup.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "sessions"
QUERY = ("search", "databse lock", "-w", "demo")
#: Variables that would make pgsearch use a configured server.
CONFIGURING = ("PGSEARCH_DSN", "PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER")


def _env(home: Path | None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in CONFIGURING and k != "PYTHONDONTWRITEBYTECODE"
    }
    if home is not None:
        env["PGSEARCH_HOME"] = str(home)
    return env


#: CPU seconds (user + system) of the last measured process tree.
_last_cpu: list[float] = []


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _pgsearch(args: Sequence[str], env: dict[str, str]) -> float:
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pgsearch", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - start
    _last_cpu.append(_children_cpu() - cpu)
    if proc.returncode != 0:
        raise SystemExit(f"pgsearch {' '.join(args)} failed: {proc.stderr.strip()}")
    return elapsed


def _python(code: str) -> float:
    cpu = _children_cpu()
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=_env(None))
    elapsed = time.perf_counter() - start
    _last_cpu.append(_children_cpu() - cpu)
    return elapsed


def _summary(samples: list[float], cpu: list[float]) -> dict[str, float]:
    return {
        "runs": len(samples),
        "median_ms": round(statistics.median(samples) * 1000, 1),
        "min_ms": round(min(samples) * 1000, 1),
        "max_ms": round(max(samples) * 1000, 1),
        "cpu_median_ms": round(statistics.median(cpu) * 1000, 1),
    }


def _repeat(runs: int, once: Callable[[], float], warmup: int = 1) -> dict[str, float]:
    for _ in range(warmup):
        once()
    _last_cpu.clear()
    samples = [once() for _ in range(runs)]
    return _summary(samples, list(_last_cpu))


def _fresh_home() -> Path:
    base = Path(tempfile.mkdtemp(prefix="pgsearch-bench-"))
    base.chmod(0o711)  # run as root, the server's own user must enter it
    return base


def measure(runs: int, server_dsn: str) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    results["import pgsearch.cli"] = _repeat(runs, lambda: _python("import pgsearch.cli"))
    results["pgsearch --help"] = _repeat(runs, lambda: _pgsearch(["--help"], _env(None)))

    first: list[float] = []
    _last_cpu.clear()
    for _ in range(max(2, runs // 4)):
        base = _fresh_home()
        try:
            first.append(_pgsearch(["stats"], _env(base / "home")))
        finally:
            shutil.rmtree(base, ignore_errors=True)
    results["first run (initdb + migrate), embedded"] = _summary(first, list(_last_cpu))

    base = _fresh_home()
    env = _env(base / "home")
    try:
        _pgsearch(["ingest", str(EXAMPLES), "-w", "demo", "-q"], env)
        results["cold search, embedded (start + stop)"] = _repeat(
            runs, lambda: _pgsearch(QUERY, env)
        )
        _pgsearch(["server", "start"], env)
        results["warm search, embedded"] = _repeat(runs, lambda: _pgsearch(QUERY, env))
    finally:
        subprocess.run(
            [sys.executable, "-m", "pgsearch", "server", "stop"], env=env, capture_output=True
        )
        shutil.rmtree(base, ignore_errors=True)

    name = f"pgsearch_bench_startup_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0 "
                "LC_COLLATE 'C.UTF-8' LC_CTYPE 'C.UTF-8'"
            ).format(sql.Identifier(name))
        )
    try:
        dsn = make_conninfo(server_dsn, dbname=name)
        env = _env(None)
        _pgsearch(["--dsn", dsn, "migrate"], env)
        _pgsearch(["--dsn", dsn, "ingest", str(EXAMPLES), "-w", "demo", "-q"], env)
        results["warm search, system server"] = _repeat(
            runs, lambda: _pgsearch(["--dsn", dsn, *QUERY], env)
        )
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10, help="Timed runs per figure.")
    parser.add_argument(
        "--dsn",
        default="postgresql://postgres@127.0.0.1:5432/postgres",
        help="Admin connection to the system server for the comparison.",
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "bench" / "RESULTS-startup.json", help="JSON output."
    )
    args = parser.parse_args(argv)
    results = measure(args.runs, args.dsn)
    print(f"{'whole process':45} {'median':>9} {'min':>9} {'max':>9} {'CPU':>9}")
    for what, row in results.items():
        print(
            f"{what:45} {row['median_ms']:>7.0f}ms {row['min_ms']:>7.0f}ms "
            f"{row['max_ms']:>7.0f}ms {row['cpu_median_ms']:>7.0f}ms"
        )
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

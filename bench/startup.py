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

With hyperfine installed (``apt install hyperfine``) the warm figures are also
measured by hyperfine in one run: ``psql -c 'select 1'`` against the same server
(the floor of any command that asks PostgreSQL something), ``pgsearch --help``,
``pgsearch search --help`` and the warm search through ``--dsn``, each as the
installed ``pgsearch`` script runs (no ``python -m``). ``--base DIR`` adds the
same commands of another checkout (its ``.venv``) to that run, for a before/after
comparison on the same machine at the same time; the table gives each command's
ratio to ``psql``.

``python -m bench.startup --runs 10`` prints a table and writes
``bench/RESULTS-startup.json``; ``--hyperfine-only`` skips the embedded server's
figures (a minute or more).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

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


@contextmanager
def _server_database(server_dsn: str, script: str | None = None) -> Iterator[str]:
    """A fresh database on the system server, migrated, holding the examples (by the
    ``pgsearch`` script given, or this checkout's code)."""
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
        if script is None:
            _pgsearch(["--dsn", dsn, "migrate"], env)
            _pgsearch(["--dsn", dsn, "ingest", str(EXAMPLES), "-w", "demo", "-q"], env)
        else:
            for args in (["migrate"], ["ingest", str(EXAMPLES), "-w", "demo", "-q"]):
                subprocess.run(
                    [script, "--dsn", dsn, *args], env=env, check=True, capture_output=True
                )
        yield dsn
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def measure_embedded(runs: int) -> dict[str, dict[str, float]]:
    """The embedded server's figures: first run, cold and warm searches."""
    results: dict[str, dict[str, float]] = {}
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
    return results


def measure(runs: int, server_dsn: str, *, embedded: bool = True) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    results["import pgsearch.cli"] = _repeat(runs, lambda: _python("import pgsearch.cli"))
    results["pgsearch --help"] = _repeat(runs, lambda: _pgsearch(["--help"], _env(None)))
    if embedded:
        results.update(measure_embedded(runs))
    with _server_database(server_dsn) as dsn:
        results["warm search, system server"] = _repeat(
            runs, lambda: _pgsearch(["--dsn", dsn, *QUERY], _env(None))
        )
    return results


def _script(checkout: Path) -> str:
    """The installed ``pgsearch`` script of a checkout's ``.venv`` (this one's: ours)."""
    here = Path(sys.executable).parent / "pgsearch"
    if checkout == ROOT and here.exists():
        return str(here)
    script = checkout / ".venv" / "bin" / "pgsearch"
    if not script.exists():
        raise SystemExit(f"no {script}: make that checkout's venv first")
    return str(script)


def hyperfine(
    runs: int, server_dsn: str, *, base: Path | None = None, rounds: int = 1
) -> dict[str, dict[str, float]]:
    """``psql -c 'select 1'``, ``pgsearch --help``, ``pgsearch search --help`` and a
    warm search, timed by hyperfine (and the same commands of the checkout `base`, when
    given).

    hyperfine times one command after the other, so on a machine whose load drifts
    the last command pays for it. With `rounds` > 1 the runs are split over that many
    hyperfine calls, the commands in turn in opposite orders, and each figure is the
    median of all of a command's runs.
    """
    if shutil.which("hyperfine") is None or shutil.which("psql") is None:
        raise SystemExit("hyperfine and psql are needed (apt install hyperfine postgresql-client)")
    checkouts = {"": ROOT} if base is None else {"": ROOT, " (base)": base.resolve()}
    times: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    with ExitStack() as stack:
        # Each checkout searches a database its own code migrated and filled.
        dsns = {
            tag: stack.enter_context(_server_database(server_dsn, _script(checkout)))
            for tag, checkout in checkouts.items()
        }
        commands = {"psql -c 'select 1'": shlex.join(["psql", dsns[""], "-qAt", "-c", "select 1"])}
        for tag, checkout in checkouts.items():
            script = _script(checkout)
            commands[f"pgsearch --help{tag}"] = shlex.join([script, "--help"])
            commands[f"pgsearch search --help{tag}"] = shlex.join([script, "search", "--help"])
            commands[f"warm search, system server{tag}"] = shlex.join(
                [script, "--dsn", dsns[tag], *QUERY]
            )
        per_round = max(2, -(-runs // rounds))
        for turn in range(rounds):
            order = list(commands.items())
            if turn % 2:
                order.reverse()
            for row in _hyperfine_round(order, per_round):
                times.setdefault(row["command"], []).extend(row["times"])
                # hyperfine gives each command's mean user and system time.
                cpu.setdefault(row["command"], []).append(row["user"] + row["system"])
    results: dict[str, dict[str, float]] = {}
    floor = statistics.median(times["psql -c 'select 1'"])
    for name in commands:
        samples = times[name]
        results[f"hyperfine: {name}"] = {
            "runs": len(samples),
            "median_ms": round(statistics.median(samples) * 1000, 1),
            "min_ms": round(min(samples) * 1000, 1),
            "max_ms": round(max(samples) * 1000, 1),
            "cpu_median_ms": round(statistics.median(cpu[name]) * 1000, 1),
            "vs_psql": round(statistics.median(samples) / floor, 2),
        }
    return results


def _hyperfine_round(commands: list[tuple[str, str]], runs: int) -> list[dict[str, Any]]:
    """One hyperfine call over `commands` (name, command line): its JSON results."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "hyperfine.json"
        names = []
        for name, command in commands:
            names += ["-n", name, command]
        subprocess.run(
            [
                "hyperfine",
                "-N",
                "--warmup",
                "3",
                "--runs",
                str(runs),
                "--export-json",
                str(out),
                "--style",
                "none",
                *names,
            ],
            check=True,
            env=_env(None),
            stdout=subprocess.DEVNULL,
        )
        data = json.loads(out.read_text(encoding="utf-8"))
    rows: list[dict[str, Any]] = data["results"]
    return rows


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10, help="Timed runs per figure.")
    parser.add_argument(
        "--dsn",
        default="postgresql://postgres@127.0.0.1:5432/postgres",
        help="Admin connection to the system server for the comparison.",
    )
    parser.add_argument(
        "--base", type=Path, default=None, help="Another checkout to time in the same run."
    )
    parser.add_argument(
        "--hyperfine-only", action="store_true", help="Only the figures hyperfine measures."
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="Split hyperfine's runs over this many calls, the commands in alternating order.",
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "bench" / "RESULTS-startup.json", help="JSON output."
    )
    args = parser.parse_args(argv)
    load_before = _load()
    results: dict[str, dict[str, float]] = {}
    if not args.hyperfine_only:
        results.update(measure(args.runs, args.dsn))
    if shutil.which("hyperfine") is not None or args.hyperfine_only:
        results.update(hyperfine(args.runs, args.dsn, base=args.base, rounds=args.rounds))
    print(f"load average before {load_before}, after {_load()}")
    print(f"{'whole process':50} {'median':>9} {'min':>9} {'max':>9} {'CPU':>9} {'/psql':>6}")
    for what, row in results.items():
        ratio = f"{row['vs_psql']:>6.2f}" if "vs_psql" in row else ""
        print(
            f"{what:50} {row['median_ms']:>7.0f}ms {row['min_ms']:>7.0f}ms "
            f"{row['max_ms']:>7.0f}ms {row['cpu_median_ms']:>7.0f}ms {ratio}"
        )
    results["load average"] = {"before": load_before, "after": _load()}  # type: ignore[dict-item]
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

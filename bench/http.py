"""HTTP API throughput and latency: `pgsearch serve` under `wrk` vs the in-process provider.

    python -m bench.http --messages 100000          # about 3 minutes here

1. Generates (or reuses) the seeded corpus of `bench.generate` and ingests it into
   its own database ``pgsearch_bench_http_<size>`` (dropped first if a previous run
   left it, dropped at the end unless ``--keep-db``), then ``VACUUM ANALYZE``.
2. Makes one read token per workspace and starts ``pgsearch serve`` (token mode,
   127.0.0.1, rate limit out of the way) as a subprocess.
3. `wrk` (Debian's) replays the corpus's search queries as ``POST /v1/search`` with
   each query's workspace token, for ``--seconds`` at 8 and at 64 connections, after
   a short warm-up; throughput, p50/p90/p99 latency and non-2xx answers are read
   from its report.
4. The same queries through `AsyncPgSearch` in this process, with 8 and 64
   concurrent tasks on a pool of the server's size, for the same time: the cost of
   HTTP, JSON and authentication is the difference.

Both sides use one Python process (uvicorn's single worker; this process) against
the same PostgreSQL, on the same machine as `wrk`; the load average is recorded
because on a shared machine only the two sides' ratio is meaningful. It prints a
table and writes ``bench/results/http-<size>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from bench.generate import Config, ensure_corpus
from bench.speed import (
    DEFAULT_SERVER,
    RESULTS,
    corpus_files,
    create_database,
    drop_database,
    ingest_phase,
    load_queries,
    machine,
    pct,
)
from pgsearch import PgSearch, SessionQueryRequest, Settings

#: Query classes replayed (every class of the corpus but none of the slow extremes).
CLASSES = ("exact", "typo", "accent", "cjk", "common", "short", "multi", "filtered", "session")
POOL = 10

LUA = r"""
-- Replays pre-built POST /v1/search requests in a random rotation.
local requests = {}
local counter = 0

init = function(args)
  local f = assert(io.open(args[1], "r"))
  for line in f:lines() do
    local tab = line:find("\t", 1, true)
    local token, body = line:sub(1, tab - 1), line:sub(tab + 1)
    requests[#requests + 1] = wrk.format("POST", "/v1/search", {
      ["Authorization"] = "Bearer " .. token,
      ["Content-Type"] = "application/json",
    }, body)
  end
  f:close()
  counter = math.random(#requests)
end

request = function()
  counter = counter % #requests + 1
  return requests[counter]
end
"""


def body_for(q: dict[str, Any]) -> dict[str, Any]:
    f = q.get("filters") or {}
    body: dict[str, Any] = {"query": q["query"], "limit": 10}
    for key in ("kinds", "roles", "tool_name", "since", "until"):
        if f.get(key):
            body[key] = f[key]
    if q.get("session"):
        body["session_id"] = q["session"]
    return body


def request_for(body: dict[str, Any]) -> SessionQueryRequest:
    fields = dict(body)
    for key in ("kinds", "roles"):
        if key in fields:
            fields[key] = tuple(fields[key])
    for key in ("since", "until"):
        if key in fields:
            fields[key] = datetime.fromisoformat(fields[key])
    return SessionQueryRequest(**fields)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def parse_wrk(text: str) -> dict[str, Any]:
    """Requests/s, latency percentiles (ms) and errors from a ``wrk --latency`` report."""

    def ms(value: str) -> float:
        number, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", value).groups()  # type: ignore[union-attr]
        return float(number) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}[unit]

    out: dict[str, Any] = {}
    for p in ("50", "75", "90", "99"):
        found = re.search(rf"^\s+{p}%\s+(\S+)", text, re.M)
        if found:
            out[f"p{p}_ms"] = round(ms(found.group(1)), 2)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    total = re.search(r"(\d+) requests in", text)
    out["requests_per_s"] = float(rps.group(1)) if rps else 0.0
    out["requests"] = int(total.group(1)) if total else 0
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    out["non_2xx"] = int(non2xx.group(1)) if non2xx else 0
    errors = re.search(r"Socket errors: (.*)", text)
    out["socket_errors"] = errors.group(1).strip() if errors else ""
    return out


def run_wrk(url: str, script: Path, lines: Path, connections: int, seconds: int) -> dict[str, Any]:
    threads = min(2, connections)
    command = [
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{seconds}s",
        "--latency",
        "--timeout",
        "10s",
        "-s",
        str(script),
        url,
        "--",
        str(lines),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=seconds + 60)
    return {"connections": connections, "threads": threads, **parse_wrk(done.stdout)}


async def in_process(
    dsn: str, work: list[tuple[str, dict[str, Any]]], concurrency: int, seconds: float
) -> dict[str, Any]:
    """`AsyncPgSearch` with `concurrency` tasks replaying `work` for `seconds`."""
    from pgsearch.aio import AsyncPgSearch

    latencies: list[float] = []
    errors = 0
    async with await AsyncPgSearch.connect(dsn, pool_size=POOL) as pg:
        providers = {ws: pg.provider(workspace=ws) for ws in {w for w, _ in work}}
        requests = [(providers[ws], request_for(body)) for ws, body in work]
        for provider, request in requests[:50]:  # warm-up
            await provider.search(request)
        deadline = time.perf_counter() + seconds
        position = 0

        async def worker() -> None:
            nonlocal position, errors
            while time.perf_counter() < deadline:
                provider, request = requests[position % len(requests)]
                position += 1
                t0 = time.perf_counter()
                try:
                    await provider.search(request)
                except Exception:
                    errors += 1
                latencies.append((time.perf_counter() - t0) * 1000)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - t0
    return {
        "concurrency": concurrency,
        "requests": len(latencies),
        "requests_per_s": round(len(latencies) / wall, 1),
        "p50_ms": round(pct(latencies, 50), 2),
        "p90_ms": round(pct(latencies, 90), 2),
        "p99_ms": round(pct(latencies, 99), 2),
        "errors": errors,
    }


def serve(dsn: str, port: int) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGSEARCH_")}
    command = [
        sys.executable,
        "-m",
        "pgsearch",
        "--dsn",
        dsn,
        "serve",
        "--port",
        str(port),
        "--rate",
        "1000000",
        "--pool-size",
        str(POOL),
    ]
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return process
        except OSError:
            if process.poll() is not None:
                err = process.stderr.read() if process.stderr else ""
                raise SystemExit(f"pgsearch serve failed: {err}") from None
            time.sleep(0.2)
    process.kill()
    raise SystemExit("pgsearch serve did not start in 60 s")


def render(results: dict[str, Any]) -> str:
    rows = ["side          conns  req/s     p50 ms  p90 ms  p99 ms  non-2xx/errors"]
    for run in results["http"]:
        rows.append(
            f"HTTP (wrk)    {run['connections']:>5}  {run['requests_per_s']:>8.1f}  "
            f"{run.get('p50_ms', 0):>6.2f}  {run.get('p90_ms', 0):>6.2f}  "
            f"{run.get('p99_ms', 0):>6.2f}  {run['non_2xx']}"
        )
    for run in results["in_process"]:
        rows.append(
            f"in-process    {run['concurrency']:>5}  {run['requests_per_s']:>8.1f}  "
            f"{run['p50_ms']:>6.2f}  {run['p90_ms']:>6.2f}  {run['p99_ms']:>6.2f}  {run['errors']}"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--workspaces", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--seconds", type=int, default=20, help="per measured run")
    parser.add_argument("--connections", default="8,64")
    parser.add_argument("--server", default=os.environ.get("PGSEARCH_BENCH_SERVER", DEFAULT_SERVER))
    parser.add_argument("--keep-db", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        raise SystemExit("bench.http needs wrk: apt-get install -y wrk")
    connections = [int(c) for c in args.connections.split(",")]

    cfg = Config(messages=args.messages, workspaces=args.workspaces, seed=args.seed)
    label = cfg.label()
    corpus = RESULTS / f"corpus-{label}"
    ensure_corpus(cfg, corpus, quiet=True)
    queries = [q for q in load_queries(corpus / "queries.jsonl") if q["class"] in CLASSES]
    dbname = f"pgsearch_bench_http_{label.lower()}"
    dsn = create_database(args.server, dbname)
    started = time.perf_counter()
    try:
        PgSearch.migrate(dsn)
        bulk, tail = corpus_files(corpus / "corpus")
        ingest = ingest_phase(dsn, bulk + tail, 2)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
        with PgSearch.connect(dsn, settings=Settings.from_env(dsn=dsn)) as pg:
            tokens = {
                ws: pg.create_token(workspace=ws).secret
                for ws in sorted({q["workspace"] for q in queries})
            }
        work = [(q["workspace"], body_for(q)) for q in queries]
        tmp = Path(tempfile.mkdtemp(prefix="pgsearch-bench-http-"))
        script = tmp / "search.lua"
        script.write_text(LUA, encoding="utf-8")
        lines = tmp / "requests.tsv"
        lines.write_text(
            "".join(f"{tokens[ws]}\t{json.dumps(body)}\n" for ws, body in work), encoding="utf-8"
        )
        port = free_port()
        process = serve(dsn, port)
        url = f"http://127.0.0.1:{port}"
        try:
            run_wrk(url, script, lines, 8, 3)  # warm-up
            http_runs = [run_wrk(url, script, lines, c, args.seconds) for c in connections]
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        local_runs = [asyncio.run(in_process(dsn, work, c, args.seconds)) for c in connections]
        shutil.rmtree(tmp, ignore_errors=True)
    finally:
        if not args.keep_db:
            drop_database(args.server, dbname)
    results = {
        "label": label,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python -m bench.http " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": machine(),
        "messages": ingest["messages"],
        "queries": len(work),
        "classes": list(CLASSES),
        "pool_size": POOL,
        "seconds_per_run": args.seconds,
        "http": http_runs,
        "in_process": local_runs,
        "total_seconds": round(time.perf_counter() - started, 1),
        # The machine is shared: the 1-minute load average when the runs ended.
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"http-{label}.json"
    path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(render(results))
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The benchmark code at a tiny scale, so that it keeps working as pgsearch changes."""

from __future__ import annotations

import json
from pathlib import Path

from bench import generate, load, oracle, scale, speed
from pgsearch import PgSearch
from pgsearch.db import reads


def test_generator_is_deterministic(tmp_path: Path) -> None:
    cfg = generate.Config(messages=400, workspaces=3, queries_per_class=4)
    a = generate.generate(cfg, tmp_path / "a", quiet=True)
    b = generate.generate(cfg, tmp_path / "b", quiet=True)
    assert a["stats"] == b["stats"]
    assert (tmp_path / "a" / "queries.jsonl").read_bytes() == (
        tmp_path / "b" / "queries.jsonl"
    ).read_bytes()
    assert a["stats"]["messages"] == 400
    files = sorted((tmp_path / "a" / "corpus").rglob("*.jsonl"))
    assert {p.parent.name for p in files} == {"ws00", "ws01", "ws02"}
    for line in (tmp_path / "a" / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        query = json.loads(line)
        assert query["class"] in generate.QUERY_CLASSES
        assert query["class"] == "browse" or query["relevant"]


def test_speed_harness_runs_end_to_end(dsn: str, tmp_path: Path) -> None:
    opts = speed.Options(
        messages=300,
        workspaces=3,
        queries_per_class=4,
        jobs=1,
        appends=5,
        dsn=dsn,
        out=tmp_path / "results",
        corpus=tmp_path / "corpus",
        trgm_per_class=2,
        quiet=True,
    )
    results = speed.run(opts)
    ingest = results["ingest"]
    assert ingest["bulk"]["errors"] == 0 and ingest["tail"]["errors"] == 0
    assert ingest["bulk"]["messages"] + ingest["tail"]["messages"] == 300
    assert results["append"]["n"] == 5
    assert {"exact", "typo", "browse"} <= set(results["search"])
    assert results["search"]["exact"]["recall10_session"] > 0
    assert results["plan_check"]["messages_seq_scans_during_search"] == 0
    assert {"fts", "trgm", "sqlite", "bm25s"} <= set(results["alternatives"])
    assert "exact" in results["alternatives"]["fts"]["search"]
    written = json.loads((tmp_path / "results" / "speed-300.json").read_text(encoding="utf-8"))
    assert written["label"] == results["label"]
    assert "| exact |" in speed.render(results)


def test_load_harness_runs_end_to_end(dsn: str, tmp_path: Path) -> None:
    opts = load.Options(
        messages=300,
        workspaces=3,
        queries_per_class=4,
        jobs=1,
        clients=(3,),
        seconds=0.3,
        warmup=0.1,
        sweep=False,
        dsn=dsn,
        out=tmp_path / "results",
        corpus=tmp_path / "corpus",
        quiet=True,
    )
    results = load.run(opts)
    runs = results["runs"]
    assert {(r["mode"], r["clients"], r["kind"]) for r in runs} == {
        (m, c, k) for m in ("threads", "tasks") for c in (3,) for k in ("mixed", "select1", "fts")
    }
    assert all(r["errors"] == 0 for r in runs), [r.get("error_samples") for r in runs]
    mixed = [r for r in runs if r["kind"] == "mixed"]
    assert all(r["search"]["n"] > 0 and r["pool"]["requests"] >= r["ops"] for r in mixed)
    assert all(r["cpu"]["client_cores"] > 0 for r in runs)
    written = json.loads((tmp_path / "results" / "load-300.json").read_text(encoding="utf-8"))
    assert len(written["runs"]) == len(runs)


def test_oracle_harness_certifies_and_keeps_the_earlier_definition(
    dsn: str, tmp_path: Path
) -> None:
    cfg = generate.Config(messages=400, workspaces=3, queries_per_class=4)
    generate.generate(cfg, tmp_path, quiet=True)
    bulk, tail = speed.corpus_files(tmp_path / "corpus")
    speed.ingest_phase(dsn, bulk + tail, 1)
    cases = oracle.bench_cases(speed.load_queries(tmp_path / "queries.jsonl"))
    with PgSearch.connect(dsn) as pg:
        rules = oracle.compare(pg, cases)
        every_match = reads.every_match
        earlier = oracle.compare(pg, cases, "any-word")
        assert reads.every_match is every_match  # the earlier definition is undone
    for tallies in (rules, earlier):
        assert sum(t.searches for t in tallies.values()) == len(cases)
    # Every result the engine certifies is the rules oracle's.
    assert all(t.wrong_exact == 0 for t in rules.values())
    assert "| exact |" in oracle.render(rules)


def test_scale_harness_grows_the_same_workspaces(dsn: str, tmp_path: Path) -> None:
    opts = scale.Options(
        stages=(600, 1400),
        probe_messages=200,
        filler_workspaces=4,
        queries_per_class=3,
        passes=1,
        jobs=1,
        dsn=dsn,
        corpora=tmp_path / "corpora",
        json_path=tmp_path / "scale.json",
        quiet=True,
    )
    results = scale.run(opts)
    first, second = results["stages"]
    assert first["ingest"]["errors"] == 0 and second["ingest"]["errors"] == 0
    # The second filler corpus names the same workspaces and session ids as the
    # first; its sessions go in as new ones, not refused as another file's.
    assert first["database"]["messages"] == 600 and second["database"]["messages"] == 1400
    assert first["database"]["workspaces"] == second["database"]["workspaces"] == 5
    assert second["database"]["sessions"] > first["database"]["sessions"]
    assert first["probe_messages"] == second["probe_messages"] == 200
    assert {"exact", "browse"} <= set(second["search"]) and "all" in results["ratios"]
    assert second["messages_seq_scans_during_search"] == 0
    written = json.loads((tmp_path / "scale.json").read_text(encoding="utf-8"))
    assert len(written["stages"]) == 2
    assert "| exact |" in scale.render(results)

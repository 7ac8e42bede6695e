"""The README's test command on a machine without the parts the project cannot
install: their suites are left out or skipped with one line saying how to enable
them, and fail instead when ``PGSEARCH_REQUIRE`` names the part (as CI does)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_pytest(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PGSEARCH_CITUS_DSN", "PGSEARCH_CITUS_TOOLS", "PGSEARCH_REQUIRE")
        and not k.startswith("PYTEST")
    }
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_citus_suite_is_left_out_of_a_whole_run_with_one_line(tmp_path: Path) -> None:
    done = run_pytest("--collect-only", "-q", "tests/unit/test_dsn.py", "tests")
    assert done.returncode == 0, done.stdout[-2000:]
    assert "tests/citus/" not in done.stdout
    lines = [line for line in done.stdout.splitlines() if "tests/citus left out" in line]
    assert len(lines) == 1, done.stdout[-2000:]
    assert "PGSEARCH_CITUS_DSN" in lines[0]


def test_citus_suite_without_a_cluster_is_skipped_saying_how(tmp_path: Path) -> None:
    done = run_pytest(
        "-q", "tests/citus/test_schema.py", PGSEARCH_CITUS_TOOLS=str(tmp_path / "none")
    )
    assert done.returncode in (0, 5), done.stdout[-2000:]  # 5: nothing left to run
    assert "failed" not in done.stdout and "error" not in done.stdout.lower()
    lines = [line for line in done.stdout.splitlines() if "tests/citus left out (" in line]
    assert len(lines) == 1, done.stdout[-2000:]
    assert "no Citus cluster" in lines[0] and "PGSEARCH_CITUS_DSN" in lines[0]
    assert "deselected" in done.stdout


def test_citus_suite_required_fails_without_a_cluster(tmp_path: Path) -> None:
    done = run_pytest(
        "-q",
        "tests/citus/test_schema.py",
        PGSEARCH_CITUS_TOOLS=str(tmp_path / "none"),
        PGSEARCH_REQUIRE="citus",
    )
    assert done.returncode != 0
    assert "PGSEARCH_REQUIRE requires citus, which is missing" in done.stdout


def test_ci_requires_every_part() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    assert "PGSEARCH_REQUIRE=all" in ci


def test_browser_tests_without_chromium_are_left_out_saying_how(tmp_path: Path) -> None:
    gone = str(tmp_path / "no-chromium")
    done = run_pytest("-q", "tests/web/test_browser.py", PGSEARCH_CHROMIUM=gone)
    assert done.returncode in (0, 5), done.stdout[-2000:]
    lines = [line for line in done.stdout.splitlines() if "test_browser.py left out (" in line]
    assert len(lines) == 1 and "apt-get install -y chromium" in lines[0], done.stdout[-2000:]
    required = run_pytest(
        "-q", "tests/web/test_browser.py", PGSEARCH_CHROMIUM=gone, PGSEARCH_REQUIRE="chromium"
    )
    assert required.returncode not in (0, 5)
    assert "PGSEARCH_REQUIRE requires chromium, which is missing" in required.stdout

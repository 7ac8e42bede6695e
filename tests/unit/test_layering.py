"""Layering: only the store layer talks to the database; the pure core imports no I/O."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import pgsearch

PACKAGE = Path(pgsearch.__file__).resolve().parent
DRIVERS = ("psycopg", "psycopg_pool", "sqlalchemy", "alembic")
#: Pure functions and plain data: no database, no files, no network.
PURE_CORE = (
    "cursor",
    "errors",
    "calls",
    "excerpt",
    "highlight",
    "titles",
    "indexing",
    "messages",
    "normalize",
    "plan",
    "policy",
    "ranking",
    "rows",
    "scoring",
    "secrets",
    "settings",
    "terminal",
    "types",
    "validate",
)
#: Third-party packages the pure core may use (pure computation only).
PURE_THIRD_PARTY = ("snowballstemmer", "rapidfuzz", "re2")


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, at any depth (functions and TYPE_CHECKING too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def python_files() -> list[Path]:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 10, f"expected the package's modules under {PACKAGE}"
    return files


def top(name: str) -> str:
    return name.split(".")[0]


def test_only_the_store_layer_imports_database_drivers() -> None:
    offenders = {}
    for path in python_files():
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in ("db", "_migrations"):
            continue
        bad = sorted(name for name in imported_modules(path) if top(name) in DRIVERS)
        if bad:
            offenders[str(rel)] = bad
    assert offenders == {}, "database drivers imported outside pgsearch/db/"


#: The doors into db/: the store (every operation), the named reads of a search,
#: the unit-of-work protocol (pure), migrations, the doctor's server inspection, and
#: connection-string redaction (pure text, for messages). Never the SQL itself.
DB_DOORS = (
    "pgsearch.db.store",
    "pgsearch.db.reads",
    "pgsearch.db.work",
    "pgsearch.db.migrate",
    "pgsearch.db.diagnose",
    "pgsearch.db.dsn",
)


def test_only_the_store_is_imported_from_the_store_layer() -> None:
    offenders = {}
    for path in python_files():
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in ("db", "_migrations"):
            continue
        bad = sorted(
            name
            for name in imported_modules(path)
            if name.startswith("pgsearch.db.")
            and not any(name == door or name.startswith(door + ".") for door in DB_DOORS)
        )
        if bad:
            offenders[str(rel)] = bad
    assert offenders == {}, f"only {DB_DOORS} may be imported outside db/"


def test_the_queries_module_is_imported_only_inside_the_store_layer() -> None:
    users = sorted(
        str(path.relative_to(PACKAGE))
        for path in python_files()
        if path.relative_to(PACKAGE).parts[0] != "db"
        and "pgsearch.db.queries" in imported_modules(path)
    )
    assert users == [], "pgsearch.db.queries leaked outside db/"


def test_the_store_layer_does_use_the_drivers() -> None:
    # Guards the test above against passing because it looks at nothing.
    found: set[str] = set()
    for path in (PACKAGE / "db").glob("*.py"):
        found.update(top(name) for name in imported_modules(path))
    assert "psycopg" in found


@pytest.mark.parametrize("module", PURE_CORE)
def test_pure_core_imports_only_stdlib_and_pure_modules(module: str) -> None:
    path = PACKAGE / f"{module}.py"
    bad = []
    for name in imported_modules(path):
        if name == "pgsearch":
            continue  # `from pgsearch import policy`: the module is checked as pgsearch.policy
        if top(name) == "pgsearch":
            if name.split(".")[1] not in PURE_CORE:
                bad.append(name)
        elif top(name) != "__future__" and top(name) not in sys.stdlib_module_names:
            if top(name) not in PURE_THIRD_PARTY:
                bad.append(name)
    assert bad == [], f"pgsearch/{module}.py imports beyond the pure core"


def test_public_api_is_small_and_importable() -> None:
    names = pgsearch.__all__
    assert 8 <= len(names) <= 19, "about ten names"
    assert len(set(names)) == len(names)
    for name in names:
        assert getattr(pgsearch, name) is not None
    for needed in (
        "PgSearch",
        "AsyncPgSearch",
        "SessionQuery",
        "SessionQueryRequest",
        "SessionMatch",
        "SessionQueryResult",
        "Settings",
        "PgSearchError",
        "SchemaOutOfDate",
    ):
        assert needed in names


def test_star_import_gives_exactly_all() -> None:
    code = (
        "import pgsearch\n"
        "ns = {}\n"
        "exec('from pgsearch import *', ns)\n"
        "ns.pop('__builtins__')\n"
        "assert sorted(ns) == sorted(pgsearch.__all__), sorted(ns)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_every_error_is_a_pgsearch_error() -> None:
    errors = importlib.import_module("pgsearch.errors")
    for name in pgsearch.__all__:
        obj = getattr(pgsearch, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, pgsearch.PgSearchError)
            assert obj.__module__ == errors.__name__

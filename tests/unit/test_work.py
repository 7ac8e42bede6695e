"""The work protocol without a database: steps, results, errors thrown in, savepoints.

A scripted executor stands in for the driver's round trips; it only answers the
protocol (which statements arrive together, what is thrown back). Everything that
involves PostgreSQL is tested against the real server (tests/integration).
"""

from __future__ import annotations

from typing import Any

import pytest

from pgsearch.db.work import (
    Results,
    Statement,
    Step,
    Work,
    drive,
    execute,
    fetch,
    fetch2,
    fetch_all,
    fetch_named,
    savepoint,
)
from pgsearch.errors import IngestError, StoreError


def s(name: str) -> Statement[Any]:
    return Statement(name, "SELECT 1")


class Script:
    """Answers each step with one row per statement naming it; fails named ones."""

    def __init__(self, fail: set[str] | None = None) -> None:
        self.fail = fail or set()
        self.steps: list[list[str]] = []

    def __call__(self, step: Step) -> Results:
        names = [st.name for st in step.statements]
        self.steps.append(names)
        bad = [n for n in names if n in self.fail]
        if bad:
            raise StoreError(f"{bad[0]} failed")
        return tuple([n] for n in names)


def test_independent_statements_travel_in_one_step() -> None:
    def work() -> Work[tuple[list[Any], list[Any]]]:
        return (yield from fetch2(s("a"), s("b")))

    script = Script()
    assert drive(work(), script) == (["a"], ["b"])
    assert script.steps == [["a", "b"]]


def test_dependent_reads_are_separate_steps_in_order() -> None:
    def work() -> Work[list[Any]]:
        (first,) = yield from fetch(s("a"))
        rows = yield from fetch_all([s(first + "2"), s("c")], final=True)
        return rows

    script = Script()
    assert drive(work(), script) == [["a2"], ["c"]]
    assert script.steps == [["a"], ["a2", "c"]]


def test_optional_statements_are_read_by_name_in_one_step() -> None:
    def work() -> Work[dict[str, list[Any]]]:
        return (yield from fetch_named({"one": s("a"), "skipped": None, "two": s("b")}))

    script = Script()
    assert drive(work(), script) == {"one": ["a"], "two": ["b"]}
    assert script.steps == [["a", "b"]]


def test_no_named_statement_no_step() -> None:
    def work() -> Work[dict[str, list[Any]]]:
        return (yield from fetch_named({"skipped": None}))

    script = Script()
    assert drive(work(), script) == {}
    assert script.steps == []


def test_no_statements_no_step() -> None:
    def work() -> Work[int]:
        yield from fetch_all([])
        yield from execute()
        return 7

    script = Script()
    assert drive(work(), script) == 7
    assert script.steps == []


def test_a_final_step_is_marked_for_the_driver() -> None:
    gen = fetch(s("a"), final=True)
    step = next(gen)
    assert step.final and [st.name for st in step.statements] == ["a"]


def test_a_driver_error_is_thrown_in_where_the_work_waits() -> None:
    seen: list[str] = []

    def work() -> Work[str]:
        try:
            yield from fetch(s("bad"))
        except StoreError as exc:
            seen.append(str(exc))
        (rows,) = yield from fetch_all([s("after")])
        return str(rows[0])

    assert drive(work(), Script(fail={"bad"})) == "after"
    assert seen == ["bad failed"]


def test_savepoint_opens_with_the_first_step_and_releases_after_success() -> None:
    def inner() -> Work[str]:
        (a,) = yield from fetch(s("a"))
        (b,) = yield from fetch(s("b"))
        return a + b

    script = Script()
    assert drive(savepoint(inner()), script) == "ab"
    assert script.steps == [["savepoint", "a"], ["b"], ["release savepoint"]]


def test_savepoint_rolls_back_a_database_error_and_re_raises_it() -> None:
    def inner() -> Work[None]:
        yield from fetch(s("a"))
        yield from fetch(s("bad"))

    def outer() -> Work[str]:
        try:
            yield from savepoint(inner())
        except StoreError:
            pass
        (rows,) = yield from fetch_all([s("next")])
        return str(rows[0])

    script = Script(fail={"bad"})
    assert drive(outer(), script) == "next"
    assert script.steps == [["savepoint", "a"], ["bad"], ["rollback to savepoint"], ["next"]]


def test_savepoint_rolls_back_the_works_own_error_too() -> None:
    def inner() -> Work[None]:
        yield from fetch(s("a"))
        raise IngestError("bad line", path="f.jsonl", line=3)

    script = Script()
    with pytest.raises(IngestError, match=r"f\.jsonl:3"):
        drive(savepoint(inner()), script)
    assert script.steps == [["savepoint", "a"], ["rollback to savepoint"]]


def test_an_inner_work_may_handle_an_error_inside_its_savepoint() -> None:
    def inner() -> Work[str]:
        try:
            yield from fetch(s("bad"))
        except StoreError:
            return "handled"
        return "unreachable"

    script = Script(fail={"bad"})
    assert drive(savepoint(inner()), script) == "handled"
    assert script.steps == [["savepoint", "bad"], ["release savepoint"]]


def test_savepoints_nest() -> None:
    def leaf() -> Work[None]:
        yield from fetch(s("leaf"))

    def middle() -> Work[None]:
        yield from fetch(s("mid"))
        yield from savepoint(leaf())

    script = Script()
    drive(savepoint(middle()), script)
    assert script.steps == [
        ["savepoint", "mid"],
        ["savepoint", "leaf"],
        ["release savepoint"],
        ["release savepoint"],
    ]


def test_a_savepoint_around_nothing_sends_nothing() -> None:
    def inner() -> Work[int]:
        return 3
        yield  # pragma: no cover

    script = Script()
    assert drive(savepoint(inner()), script) == 3
    assert script.steps == []


def test_explainable_statements() -> None:
    assert Statement("x", "SELECT 1").explainable
    assert Statement("x", " with q as (select 1) select * from q").explainable
    assert Statement("x", "INSERT INTO t VALUES (1)").explainable
    assert not Statement("x", "SAVEPOINT p").explainable
    assert not Statement("x", "COPY t FROM STDIN", copy_rows=[]).explainable

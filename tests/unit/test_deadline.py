"""One deadline for a whole search: steps carry what is left, late steps fail, and
excerpts past the deadline look only at the first block of text."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from pgsearch.db import reads
from pgsearch.db.work import Results, Statement, Step, Work, drive, fetch
from pgsearch.deadline import Deadline
from pgsearch.errors import StoreError
from pgsearch.excerpt import SCAN_BLOCK_CHARS
from pgsearch.ranking import Ranked
from pgsearch.rows import StoredMessage
from pgsearch.search import materialise
from pgsearch.settings import IndexPolicy
from tests.helpers import marked


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def two_reads(clock: Clock, spent: float) -> Work[list[Any]]:
    a = yield from fetch(Statement("first", "SELECT 1"))
    clock.now += spent  # work in Python between the statements
    b = yield from fetch(Statement("second", "SELECT 2"))
    return [a, b]


def test_every_step_carries_what_is_left_of_the_deadline() -> None:
    clock = Clock()
    sent: list[Step] = []

    def run(step: Step) -> Results:
        sent.append(step)
        clock.now += 0.125
        return tuple([("row", s.name)] for s in step.statements)

    deadline = Deadline.start(1000, clock)
    value = drive(reads.within(two_reads(clock, 0.25), deadline, "searching"), run)
    assert value == [[("row", "first")], [("row", "second")]]  # the timeouts' rows dropped
    timeouts = [step.statements[0].params["ms"] for step in sent]  # type: ignore[index]
    assert timeouts == ["1000", "625"]
    assert [s.name for s in sent[0].statements] == ["deadline", "first"]


def test_a_step_due_after_the_deadline_fails_as_a_timeout() -> None:
    clock = Clock()

    def run(step: Step) -> Results:
        return tuple([()] for _ in step.statements)

    deadline = Deadline.start(300, clock)
    with pytest.raises(StoreError, match=r"searching: statement timed out .*300 ms"):
        drive(reads.within(two_reads(clock, 0.5), deadline, "searching"), run)


def test_no_deadline_adds_nothing() -> None:
    sent: list[Step] = []

    def run(step: Step) -> Results:
        sent.append(step)
        return tuple([()] for _ in step.statements)

    drive(reads.within(two_reads(Clock(), 10.0), Deadline.start(0), "searching"), run)
    assert [[s.name for s in step.statements] for step in sent] == [["first"], ["second"]]


def test_excerpts_after_the_deadline_read_only_the_first_block() -> None:
    when = datetime(2026, 1, 1, tzinfo=UTC)
    content = "filler words here " * (3 * SCAN_BLOCK_CHARS // 18) + "needle at the end"
    message = StoredMessage(
        session_id="s",
        seq=0,
        entry_id=None,
        kind="user_text",
        role="user",
        turn=0,
        tool_name=None,
        created_at=when,
        content=content,
        arguments="",
    )
    page = [Ranked("s", 0, "user_text", 1.0, when, frozenset({"needle"}))]

    def excerpt(deadline: Deadline) -> str:
        (match,) = materialise(
            page,
            {("s", 0): message},
            workspace="w",
            excerpt_bytes=300,
            index_policy=IndexPolicy(),
            deadline=deadline,
        )
        return marked(match)

    clock = Clock()
    deadline = Deadline.start(1000, clock)
    assert "**needle" in excerpt(deadline)
    clock.now += 2
    late = excerpt(deadline)
    assert "**" not in late and late.startswith("filler words")

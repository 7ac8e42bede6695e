"""Database work as sans-I/O generators: the protocol between domain and driver.

A unit of work is a generator that yields a `Step` (statements whose results do not
depend on each other), receives one list of decoded rows per statement, and finally
returns its value. The drivers (`pgsearch.db.driver`) send each step in one network
round trip and own everything around it: the transaction, settings, retries, error
wrapping, traces and node choice. Because the logic of a unit exists once, the sync
and the asyncio drivers cannot drift apart.

A driver error is wrapped (`StoreError` and its siblings) and thrown into the
generator at its ``yield``, so a savepoint (`savepoint`) can roll back and go on.
Nothing here performs I/O; the protocol is tested without a database.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, LiteralString, TypeVar

from psycopg import sql

R = TypeVar("R")
A = TypeVar("A")
B = TypeVar("B")
T = TypeVar("T")

#: SQL text: a literal, or composed from literals with `psycopg.sql`.
Query = LiteralString | sql.SQL | sql.Composed

#: What a step receives back: one list of rows per statement, in order.
Results = tuple[list[Any], ...]


def as_tuple(values: Sequence[Any]) -> tuple[Any, ...]:
    """The default row decoder: the values as a tuple."""
    return tuple(values)


_EXPLAINABLE = ("SELECT", "WITH", "INSERT", "UPDATE", "DELETE")


def _explainable(text: Query) -> bool:
    if not isinstance(text, str):
        return False
    return text.lstrip().upper().startswith(_EXPLAINABLE)


@dataclass(frozen=True, slots=True)
class Statement(Generic[R]):
    """One named statement with all of its bound parameters and its row decoder."""

    name: str
    sql: Query
    params: Mapping[str, Any] | None = None
    #: Builds one typed row from the values of one result row.
    decode: Callable[[Sequence[Any]], R] = as_tuple  # type: ignore[assignment]
    #: When set, the statement is a ``COPY ... FROM STDIN`` fed with these rows.
    copy_rows: Iterable[Sequence[Any]] | None = field(default=None, compare=False)

    @property
    def explainable(self) -> bool:
        """Whether ``EXPLAIN`` accepts it (plans are shown and tested for these)."""
        return self.copy_rows is None and _explainable(self.sql)

    @property
    def text(self) -> str:
        """The SQL text on one line (for traces and messages)."""
        raw = self.sql if isinstance(self.sql, str) else repr(self.sql)
        return " ".join(raw.split())


@dataclass(frozen=True, slots=True)
class Step:
    """Statements sent together; they run in order and their results are independent.

    `final` marks the work's last step: nothing after it may need a rollback, so the
    driver sends ``COMMIT`` in the same round trip.
    """

    statements: tuple[Statement[Any], ...]
    final: bool = False


#: A unit of work: yields steps, is sent their results, returns its value.
Work = Generator[Step, Results, T]


class ProtocolError(AssertionError):
    """A work generator broke the step protocol (a bug, never a user error)."""


def fetch(statement: Statement[R], *, final: bool = False) -> Work[list[R]]:
    """The rows of one statement: ``rows = yield from fetch(stmt)``."""
    (rows,) = yield Step((statement,), final)
    return rows


def fetch2(
    first: Statement[A], second: Statement[B], *, final: bool = False
) -> Work[tuple[list[A], list[B]]]:
    """The rows of two independent statements, in one round trip."""
    a, b = yield Step((first, second), final)
    return a, b


def fetch_all(statements: Sequence[Statement[R]], *, final: bool = False) -> Work[list[list[R]]]:
    """The rows of several independent statements, in one round trip (none: no trip)."""
    if not statements:
        return []
    results = yield Step(tuple(statements), final)
    return list(results)


def fetch_named(
    statements: Mapping[str, Statement[Any] | None], *, final: bool = False
) -> Work[dict[str, list[Any]]]:
    """The rows of several independent statements, in one round trip, by name: a step
    whose statements are optional is read by name, never by position. A statement
    given as None is not sent and its name is absent from the result (none sent: no
    trip). They are sent in the mapping's order."""
    sent = {name: s for name, s in statements.items() if s is not None}
    if not sent:
        return {}
    results = yield Step(tuple(sent.values()), final)
    return dict(zip(sent, results, strict=True))


def execute(*statements: Statement[Any], final: bool = False) -> Work[None]:
    """Run statements whose rows are not needed (in one round trip)."""
    if statements:
        yield Step(tuple(statements), final)


def returning(value: T) -> Work[T]:
    """A work that does nothing and returns `value` (for uniform composition)."""
    return value
    yield  # pragma: no cover  (makes this a generator)


_EXPLAIN: LiteralString = "EXPLAIN (FORMAT TEXT, COSTS true) "


def explain_of(statement: Statement[Any]) -> Statement[Any]:
    """``EXPLAIN`` of `statement`, same parameters (one plan line per row)."""
    text = statement.sql
    query: Query = _EXPLAIN + text if isinstance(text, str) else sql.SQL(_EXPLAIN) + text
    return Statement("explain " + statement.name, query, statement.params)


def explained(inner: Work[T], plans: list[str]) -> Work[T]:
    """Run `inner` with each explainable statement preceded by its ``EXPLAIN``.

    The plans travel in the same step as their statements (no extra round trip) and
    are appended to `plans` as the statement's text on one line, then its plan.
    """
    try:
        step = next(inner)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    while True:
        statements: list[Statement[Any]] = []
        own: list[int] = []
        shown: list[tuple[int, Statement[Any]]] = []
        for s in step.statements:
            if s.explainable:
                shown.append((len(statements), s))
                statements.append(explain_of(s))
            own.append(len(statements))
            statements.append(s)
        try:
            results = yield Step(tuple(statements), step.final)
        except BaseException as exc:
            try:
                step = inner.throw(exc)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            continue
        for i, s in shown:
            plans.append(s.text + "\n" + "\n".join(str(r[0]) for r in results[i]))
        try:
            step = inner.send(tuple(results[i] for i in own))
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]


SAVEPOINT_NAME = "pgsearch_unit"
_SAVEPOINT: Statement[Any] = Statement("savepoint", "SAVEPOINT " + SAVEPOINT_NAME)
_RELEASE: Statement[Any] = Statement("release savepoint", "RELEASE SAVEPOINT " + SAVEPOINT_NAME)
_ROLLBACK_TO: Statement[Any] = Statement(
    "rollback to savepoint", "ROLLBACK TO SAVEPOINT " + SAVEPOINT_NAME
)


def savepoint(inner: Work[T]) -> Work[T]:
    """Run `inner` so that a failure undoes only its own changes, then re-raises.

    ``SAVEPOINT`` travels with inner's first step; an exception from inner (a driver
    error thrown in, or inner's own, such as `IngestError`) rolls back to the
    savepoint before it propagates, leaving the transaction usable. A savepoint is
    never the last thing of a unit, so none of its steps is final.
    """
    try:
        step = next(inner)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    step = Step((_SAVEPOINT, *step.statements))
    first = True
    try:
        while True:
            try:
                results = yield step
            except BaseException as exc:
                step = Step(inner.throw(exc).statements)
                first = False
                continue
            if first:
                results = results[1:]
                first = False
            step = Step(inner.send(results).statements)
    except StopIteration as stop:
        yield Step((_RELEASE,))
        return stop.value  # type: ignore[no-any-return]
    except Exception:
        yield Step((_ROLLBACK_TO,))
        raise


@dataclass(frozen=True, kw_only=True)
class Unit(Generic[T]):
    """One transaction's worth of work and how the driver should run it."""

    #: Makes a fresh generator; a retried unit starts again from scratch.
    work: Callable[[], Work[T]]
    #: The workspace the transaction is bound to (row level security), if any.
    workspace: str | None
    #: Writes go to the primary in a read-write transaction; reads may go elsewhere.
    write: bool
    #: A read that decides access (a token lookup): it runs on the primary, never
    #: on a standby that may not have replayed a revocation yet.
    primary: bool = False
    #: Running it again after it committed changes nothing (an append, whose
    #: messages carry keys the store keeps unique): the driver then runs it again
    #: when the connection was lost after ``COMMIT`` was sent, instead of failing
    #: with `OutcomeUnknown`.
    idempotent: bool = False
    #: Planner settings for index reads (sequential scans off, see the driver).
    search: bool = False
    #: Prefix of error messages ("searching", "appending to s1").
    context: str = ""
    #: EXPLAIN every explainable statement in the same transaction (`--explain`).
    explain: bool = False


def drive(work: Work[T], run_step: Callable[[Step], Results]) -> T:
    """Run `work` to completion with `run_step` sending each step (no transaction).

    `run_step` returns the step's results or raises; a raised `Exception` is thrown
    into the generator. Used for work run inside a transaction someone else opened.
    """
    try:
        step = next(work)
        while True:
            try:
                results = run_step(step)
            except Exception as exc:
                step = work.throw(exc)
                continue
            step = work.send(results)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]

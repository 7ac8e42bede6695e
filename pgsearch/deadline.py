"""One deadline for a whole request: its statements and its own work alike.

A search runs several statements and computes between them (scoring, excerpts).
A statement timeout alone bounds each statement, not their sum nor the work in
Python. A `Deadline` starts with the request; every statement is sent with the time
that is left as its timeout (`pgsearch.db.reads.within`), and work in Python asks
whether the deadline has passed before doing anything whose cost grows with stored
text (`pgsearch.search.materialise` then cuts excerpts from the first block only).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Deadline:
    """A point in time `budget_ms` after the request started (none with 0)."""

    budget_ms: int
    at: float
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)

    @classmethod
    def start(cls, budget_ms: int, clock: Callable[[], float] = time.monotonic) -> Deadline:
        """A deadline `budget_ms` from now; 0 or less means none."""
        at = math.inf if budget_ms <= 0 else clock() + budget_ms / 1000
        return cls(budget_ms=budget_ms, at=at, clock=clock)

    def remaining_ms(self) -> float:
        """Milliseconds left (infinite without a deadline; negative once passed)."""
        return (self.at - self.clock()) * 1000

    @property
    def passed(self) -> bool:
        return self.clock() >= self.at

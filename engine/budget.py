"""Cooperative time budgets and cancellation for engine work.

The caller (a web request, a Celery task) opens a budget around an engine call::

    with work_budget(seconds=8.0, what="preview", cancelled=lambda: run_was_cancelled(run_id)):
        result = engine.tco(document, monte_carlo=10_000)

and the engine's long loops (layout chunks, Monte Carlo performance points, sensitivity inputs, fleet events)
call :func:`checkpoint` once per iteration. ``checkpoint`` raises :class:`BudgetExceeded` when the deadline has
passed and :class:`Cancelled` when the ``cancelled`` callback says so (the callback is rate-limited to one call
per ``cancel_every_s``, so a database query per loop iteration costs nothing measurable). Outside a budget,
``checkpoint`` is a no-op costing one context-variable read.

The budget lives in a :class:`contextvars.ContextVar`, so it follows the call without threading a parameter
through every engine function, and concurrent requests in threads or tasks never see each other's budgets.
Budgets nest: an inner budget can only shorten the outer deadline.

Pure Python, no Django.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


class BudgetExceeded(Exception):
    """The work ran past its time budget (answered 503 over HTTP; a run fails with this message)."""

    def __init__(self, what: str, seconds: float) -> None:
        super().__init__(f"{what} exceeded its time budget of {seconds:g} s")
        self.what = what
        self.seconds = seconds


class Cancelled(Exception):
    """The work was cancelled by its owner (a run's cancel request)."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what} was cancelled")
        self.what = what


@dataclass
class WorkBudget:
    what: str
    seconds: float | None
    cancelled: Callable[[], bool] | None = None
    cancel_every_s: float = 1.0
    deadline: float | None = None
    _next_cancel_check: float = field(default=0.0, repr=False)
    checks: int = 0

    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def check(self) -> None:
        self.checks += 1
        now = time.monotonic()
        if self.deadline is not None and now > self.deadline:
            raise BudgetExceeded(self.what, float(self.seconds or 0.0))
        if self.cancelled is not None and now >= self._next_cancel_check:
            self._next_cancel_check = now + self.cancel_every_s
            if self.cancelled():
                raise Cancelled(self.what)


_current: contextvars.ContextVar[WorkBudget | None] = contextvars.ContextVar("fp_work_budget", default=None)


@contextmanager
def work_budget(seconds: float | None, *, what: str = "engine call", cancelled: Callable[[], bool] | None = None,
                cancel_every_s: float = 1.0) -> Iterator[WorkBudget]:
    """Run the body under a deadline of ``seconds`` (``None``: no deadline) and an optional cancel callback."""
    outer = _current.get()
    deadline = None if seconds is None else time.monotonic() + float(seconds)
    if outer is not None and outer.deadline is not None:
        deadline = outer.deadline if deadline is None else min(deadline, outer.deadline)
        if seconds is None or outer.deadline < time.monotonic() + float(seconds):
            seconds = outer.seconds
            what = outer.what
    cancel = cancelled
    if outer is not None and outer.cancelled is not None:
        outer_cancel = outer.cancelled
        cancel = outer_cancel if cancelled is None else (lambda: cancelled() or outer_cancel())
    budget = WorkBudget(what=what, seconds=seconds, cancelled=cancel, cancel_every_s=cancel_every_s,
                        deadline=deadline)
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)


def current() -> WorkBudget | None:
    return _current.get()


def checkpoint() -> None:
    """Raise :class:`BudgetExceeded` / :class:`Cancelled` if the current budget says so; else return at once."""
    budget = _current.get()
    if budget is not None:
        budget.check()


__all__ = ["BudgetExceeded", "Cancelled", "WorkBudget", "checkpoint", "current", "work_budget"]

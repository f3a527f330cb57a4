"""Polling for the integration tests: real workers finish when they finish, so a test waits for a condition."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, every: float = 0.25,
             on_tick: Callable[[], None] | None = None) -> Any:
    """``predicate()``'s first truthy value, polled every ``every`` seconds (``on_tick`` between polls, e.g. a reaper
    pass); an AssertionError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if on_tick is not None:
            on_tick()
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")

"""The shared micro-batch timeline (terms/timeline.py): E = min(sum c, max(sum e, sum c - C + sum f))."""

from __future__ import annotations

import numpy as np
import pytest

from engine.performance.terms.timeline import TimelineItem, comm_timeline, interference_time


def _item(c: float, e: float, f: float = 0.0) -> TimelineItem:
    return TimelineItem(raw_s=np.array([c]), exposed_alone_s=np.array([e]), on_nic=np.array([True]),
                        floor_s=np.array([f]))


def test_items_that_each_fit_their_window_still_share_one_microbatch_of_compute() -> None:
    """C = 1, two items of 0.8 each hidden alone: together 1.6 cannot hide behind 1.0; 0.6 is exposed, charged in
    proportion to what each could hide (0.8 each: 0.3 each)."""
    tl = comm_timeline(np.array([1.0]), {"a": _item(0.8, 0.0), "b": _item(0.8, 0.0)})
    assert tl.exposed_s["a"][0] == pytest.approx(0.3) and tl.exposed_s["b"][0] == pytest.approx(0.3)
    assert tl.hidden_s[0] == pytest.approx(1.0)


def test_nothing_is_hidden_twice_and_floors_stay_exposed() -> None:
    """sum c = 1.0 < C: alone-exposed 0.2 + 0.1, floor 0.1 already in e: exposed = max(0.3, 1.0 - 2.0 + 0.1) = 0.3."""
    tl = comm_timeline(np.array([2.0]), {"a": _item(0.5, 0.2, 0.1), "b": _item(0.5, 0.1)})
    assert tl.exposed_s["a"][0] + tl.exposed_s["b"][0] == pytest.approx(0.3)
    assert tl.hidden_s[0] == pytest.approx(0.7)
    floors = comm_timeline(np.array([1.0]), {"a": _item(1.0, 0.5, 0.5), "b": _item(0.5, 0.0)})
    # max(0.5, 1.5 - 1.0 + 0.5) = 1.0
    assert floors.exposed_s["a"][0] + floors.exposed_s["b"][0] == pytest.approx(1.0)


def test_hidden_communication_costs_a_quarter_of_itself_in_compute() -> None:
    assert interference_time(np.array([0.4]))[0] == pytest.approx(0.1)

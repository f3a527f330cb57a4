"""The bounds table and the strict number checks (pure engine, no database)."""

from __future__ import annotations

import math

import pytest

from engine.budget import BudgetExceeded, Cancelled, checkpoint, current, work_budget
from engine.errors import ScenarioError
from engine.schema import bounds
from engine.schema.bounds import (
    BOUNDS,
    BoundError,
    WorkLimitError,
    bound_for,
    check_field,
    check_int,
    check_number,
)

HOSTILE_NON_NUMBERS = [True, False, "1024", "1e3", None, [], {}, [8], {"low": 1}]
HOSTILE_NON_FINITE = [math.inf, -math.inf, math.nan, 1e308, -1e308, 10**400, -(10**400)]


def test_every_bound_has_a_reason_and_a_sane_interval() -> None:
    assert len(BOUNDS) >= 50
    for name, b in BOUNDS.items():
        assert b.kind in ("int", "float"), name
        assert b.reason.strip(), f"{name} needs the reason for its bound"
        assert math.isfinite(b.lo) and math.isfinite(b.hi) and b.lo < b.hi, name
        if b.kind == "int":
            assert b.lo.is_integer() and b.hi.is_integer(), name


@pytest.mark.parametrize("field", sorted(BOUNDS))
def test_every_field_refuses_hostile_values_naming_the_field(field: str) -> None:
    b = BOUNDS[field]
    for value in [*HOSTILE_NON_NUMBERS, *HOSTILE_NON_FINITE, b.hi * 2 + 1, b.lo - 1, int(b.hi) + 1]:
        with pytest.raises(BoundError) as info:
            check_field(value, field)
        assert info.value.field == field
        assert isinstance(info.value, ScenarioError)
    if b.kind == "int":
        for value in (b.lo + 0.5, -0.5, 2.5):
            with pytest.raises(BoundError, match="integer"):
                check_field(value, field)


@pytest.mark.parametrize("field", sorted(BOUNDS))
def test_every_field_accepts_its_bounds(field: str) -> None:
    b = BOUNDS[field]
    hi = int(b.hi) if b.kind == "int" else b.hi
    assert check_field(hi, field) == hi
    if not b.lo_open:
        lo = int(b.lo) if b.kind == "int" else b.lo
        assert check_field(lo, field) == lo
    else:
        with pytest.raises(BoundError, match=">"):
            check_field(b.lo, field)


def test_error_message_names_the_bound_and_reason() -> None:
    with pytest.raises(BoundError) as info:
        check_field(1e308, "cluster.gpus")
    assert str(info.value) == ("cluster.gpus: must be an integer between 1 and 1,048,576 "
                               "(larger than any announced cluster), got 1e+308")
    with pytest.raises(BoundError) as info:
        check_field(10**400, "cluster.gpus")
    assert "about 401 digits" in str(info.value)  # the message never prints a 400-digit number


def test_huge_values_are_refused_without_decimal_conversion() -> None:
    """A 4,001-digit integer is refused from its bit length: never turned into decimal text (quadratic in its
    digits), so refusing it stays cheap. With Python's decimal-conversion cap lowered below its size, any str()
    of it would raise ValueError instead of the BoundError (the time a refusal takes: benchmarks/bench_refusals.py)."""
    import sys

    old_cap = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)  # the lowest cap Python allows; 10**4000 has 4,001 digits
    try:
        for value in (1e308, 10**4000, -(10**4000)):
            for field in ("cluster.gpus", "cluster.nic_gbps"):
                with pytest.raises(BoundError) as info:
                    check_field(value, field)
                assert info.value.field == field
        with pytest.raises(BoundError, match="about 4001 digits"):
            check_field(10**4000, "cluster.gpus")
    finally:
        sys.set_int_max_str_digits(old_cap)


def test_integral_floats_are_integers_and_strings_are_not() -> None:
    assert check_int(8.0, "cluster.gpus") == 8 and isinstance(check_int(8.0, "cluster.gpus"), int)
    for value in ("8", True, -0.5, 0.5, 8.000001):
        with pytest.raises(BoundError):
            check_int(value, "cluster.gpus")


def test_explicit_limits_override_the_table() -> None:
    assert check_int(4, "model.moe.top_k", 1, 8) == 4
    with pytest.raises(BoundError, match="between 1 and 8"):
        check_int(9, "model.moe.top_k", 1, 8)
    with pytest.raises(BoundError, match="> 0"):
        check_number(0, "x.rate", 0.0, None, lo_open=True)
    assert check_number(10**20, "x.anything") == 1e20  # no table entry, no limits: finite numbers pass
    with pytest.raises(BoundError, match="finite"):
        check_number(10**400, "x.anything")


def test_range_ends_and_wildcards_use_the_fields_bound() -> None:
    assert bound_for("cluster.nic_gbps.low") is BOUNDS["cluster.nic_gbps"]
    assert bound_for("costs.prices.HGX-H100") is BOUNDS["costs.prices.*"]
    assert bound_for("costs.prices.HGX-H100.high") is BOUNDS["costs.prices.*"]
    assert bound_for("model.name") is None
    with pytest.raises(LookupError):
        check_field(1, "model.name")
    with pytest.raises(BoundError, match=r"cluster.nic_gbps.high"):
        check_field(1e9, "cluster.nic_gbps.high")


def test_samples_are_checked_vectorized() -> None:
    np = pytest.importorskip("numpy")
    ok = np.linspace(100.0, 800.0, 100_000)
    assert bounds.check_samples(ok, "cluster.nic_gbps") is ok
    with pytest.raises(BoundError):
        bounds.check_samples(np.append(ok, np.inf), "cluster.nic_gbps")
    with pytest.raises(BoundError):
        bounds.check_samples([100.0, 5000.0], "cluster.nic_gbps")


def test_work_limits() -> None:
    bounds.check_work("layouts", bounds.MAX_LAYOUTS, bounds.MAX_LAYOUTS)
    with pytest.raises(WorkLimitError) as info:
        bounds.check_work("candidate layouts", bounds.MAX_LAYOUTS + 1, bounds.MAX_LAYOUTS, "parallelism",
                          hint='fix some degrees instead of "auto"')
    assert info.value.field == "parallelism" and "1,000,001" in str(info.value) and "auto" in str(info.value)
    assert bounds.count_product([10**6, 10**6, 10**6]) == 10**18
    assert bounds.check_divisor_input(bounds.MAX_GPUS, "cluster.gpus") == bounds.MAX_GPUS
    for n in (0, -1, True, bounds.MAX_DIVISOR_INPUT + 1, 10**400):
        with pytest.raises(WorkLimitError):
            bounds.check_divisor_input(n, "cluster.gpus")


def test_budget_deadline_and_cancellation() -> None:
    checkpoint()  # outside a budget: a no-op
    assert current() is None
    with pytest.raises(BudgetExceeded, match=r"preview exceeded its time budget of 0\.05 s"), \
            work_budget(0.05, what="preview"):
        while True:
            checkpoint()
    calls = []

    def cancelled() -> bool:
        calls.append(1)
        return len(calls) >= 3

    with pytest.raises(Cancelled), work_budget(None, what="run 1", cancelled=cancelled, cancel_every_s=0.0):
        for _ in range(100):
            checkpoint()
    assert len(calls) == 3
    assert current() is None


def test_budget_cancel_callback_is_rate_limited() -> None:
    calls = []
    with work_budget(10.0, cancelled=lambda: bool(calls.append(1)), cancel_every_s=60.0) as budget:
        for _ in range(10_000):
            checkpoint()
    assert len(calls) == 1 and budget.checks == 10_000


def test_nested_budget_keeps_the_shorter_deadline() -> None:
    with work_budget(0.05, what="request"), work_budget(60.0, what="inner") as inner:
        assert inner.remaining() is not None and inner.remaining() <= 0.05
        with pytest.raises(BudgetExceeded, match="request"):
            while True:
                checkpoint()


def test_security_doc_lists_every_bound() -> None:
    """docs/security.md's table of bounds is the BOUNDS table (same fields, types, limits)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`") and cells[1] in ("int", "float"):
            rows[cells[0].strip("`")] = cells[1:4]
    assert set(rows) == set(BOUNDS), set(rows) ^ set(BOUNDS)
    for name, b in BOUNDS.items():
        kind, lo, hi = rows[name]
        assert kind == b.kind, name
        assert lo == ("> " if b.lo_open else "") + bounds._fmt(b.lo), (name, lo)
        assert hi == bounds._fmt(b.hi), (name, hi)

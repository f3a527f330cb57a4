"""The accuracy summary (engine/validation/summary.py): each target's verdict against its threshold, written out
here from issue #22's "Done when", not read back from the code."""

from __future__ import annotations

import pytest

from engine.validation.summary import _targets


def _sets(all_loso: float, worst_set: float, coverage: float) -> list[dict]:
    return [{"key": "a", "title": "A", "loso_mape": 0.05, "coverage": 0.8},
            {"key": "b", "title": "B", "loso_mape": worst_set, "coverage": 0.8},
            {"key": "all", "title": "All sets", "loso_mape": all_loso, "coverage": coverage}]


@pytest.mark.parametrize(("all_loso", "worst", "coverage", "gaps", "met"), [
    (0.08, 0.12, 0.70, [3.0, -3.0], {"loso_mape_all": True, "loso_mape_set": True, "coverage": True, "scaling": True}),
    (0.0801, 0.1201, 0.6999, [3.01, 0.0],
     {"loso_mape_all": False, "loso_mape_set": False, "coverage": False, "scaling": False}),
    (0.05, 0.06, 0.9001, [], {"loso_mape_all": True, "loso_mape_set": True, "coverage": False, "scaling": True}),
])
def test_each_target_holds_at_its_threshold_and_fails_just_past_it(all_loso: float, worst: float, coverage: float,
                                                                   gaps: list[float], met: dict[str, bool]) -> None:
    """All sets <= 8% LOSO, no set above 12%, coverage 70-90%, every scaling step within 3 points."""
    targets = {t["key"]: t for t in _targets(_sets(all_loso, worst, coverage), gaps)}
    assert {k: t["met"] for k, t in targets.items()} == met
    assert targets["loso_mape_set"]["value"] == worst and "(B)" in targets["loso_mape_set"]["label"]
    assert targets["scaling"]["value"] == sum(1 for g in gaps if abs(g) <= 3.0)

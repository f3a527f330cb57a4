"""The run service adds the awkward-size note to the prediction inside each result shape, and only there."""

from __future__ import annotations

import copy
from typing import Any

from tests.engine.performance.test_advice_sizing import doc


def test_note_goes_where_each_kind_keeps_its_prediction() -> None:
    from simulations.services.advice import with_sizing_note

    flat: dict[str, Any] = {"mfu": 0.264, "notes": ["earlier note"]}
    out = with_sizing_note(kind="predict", document=doc(2016), catalog=None, result=copy.deepcopy(flat))
    assert out["notes"][0] == "earlier note" and out["notes"][1].startswith("Awkward size: 2,016 GPUs")
    assert "predicted MFU 26.4%" in out["notes"][1]
    nested = {"performance": copy.deepcopy(flat), "tco": {}}
    out = with_sizing_note(kind="tco", document=doc(2016), catalog=None, result=nested)
    assert len(out["performance"]["notes"]) == 2 and "notes" not in out["tco"]
    # no prediction in the result (a fabric study), or a size that factors well: unchanged
    assert with_sizing_note(kind="fabric", document=doc(2016), catalog=None, result={"notes": []}) == {"notes": []}
    assert with_sizing_note(kind="predict", document=doc(2304), catalog=None,
                            result=copy.deepcopy(flat)) == flat


def test_a_document_with_another_problem_keeps_its_result() -> None:
    from simulations.services.advice import with_sizing_note

    broken = doc(2016)
    broken["cluster"]["gpu"] = "no-such-gpu"
    assert with_sizing_note(kind="predict", document=broken, catalog=None, result={"notes": []}) == {"notes": []}

"""Error bands (issue #22 item 4): the lookup against hand-computed quantiles, leave-one-source-out, coverage
and the table the performance engine reads (engine/performance/data/error_bands.json)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from engine.performance.error_bands import band_entry, regime_label
from engine.validation.bands import (
    BANDS_ABOUT,
    ERROR_BANDS,
    Residual,
    band_for,
    coverage,
    error_bands_document,
    fit_bands,
    load_error_bands,
    loso_bands,
    weibull_band,
    write_error_bands,
)


def _regime(comm: float = 0.01, gpus: int = 8, framework: str = "auto") -> dict:
    return {"network_wait_fraction": comm, "gpus": gpus, "framework": framework}


# ten residuals, two per source: sorted -0.30 -0.20 -0.10 -0.05 0.00 0.02 0.05 0.10 0.15 0.40
TEN = [-0.30, 0.40, -0.20, 0.15, -0.10, 0.10, -0.05, 0.05, 0.00, 0.02]


def _ten(comm: float = 0.01, gpus: int = 8) -> list[Residual]:
    return [Residual(f"r{i}", "ABCDE"[i // 2], v, _regime(comm, gpus)) for i, v in enumerate(TEN)]


def test_weibull_quantiles_by_hand() -> None:
    """n = 10: p10 at position (n + 1) 0.1 = 1.1 -> -0.30 + 0.1 (0.10) = -0.29; p90 at 9.9 -> 0.15 + 0.9 (0.25)
    = 0.375; the band is their exp."""
    p10, p90 = weibull_band(TEN)
    assert p10 == pytest.approx(math.exp(-0.29), abs=1e-4)
    assert p90 == pytest.approx(math.exp(0.375), abs=1e-4)
    assert (p10, p90) == (0.7482, 1.455)  # rounded outward: 0.748264 down, 1.454991 up


def test_band_for_uses_the_finest_cell_with_enough_rows_and_sources() -> None:
    """Ten rows from five sources at low comm / 8 GPUs fill their cells; four rows at high comm do not (and
    come from one source), so that regime falls back to the pooled band of all fourteen."""
    few = [Residual(f"h{i}", "F", v, _regime(comm=0.3, gpus=512)) for i, v in enumerate([0.5, 0.6, 0.7, 0.8])]
    table = fit_bands(_ten() + few)
    cells = [e["cell"] for e in table["bands"]]
    assert {"comm": "<0.05", "scale": "<=64", "framework": "auto"} in cells
    assert {"comm": ">=0.10"} not in cells and {} in cells
    assert band_for(_regime(), table) == pytest.approx((math.exp(-0.29), math.exp(0.375)), abs=1e-4)
    # pooled, n = 14: sorted -0.30 -0.20 -0.10 -0.05 0 0.02 0.05 0.10 0.15 0.40 0.5 0.6 0.7 0.8
    # p10 at 1.5 -> -0.25; p90 at 13.5 -> 0.75
    assert band_for(_regime(comm=0.3, gpus=512), table) == pytest.approx((math.exp(-0.25), math.exp(0.75)), abs=1e-4)
    # a framework no cell has falls back to the (comm, scale) cell: same rows here
    assert band_for(_regime(framework="deepspeed"), table) == band_for(_regime(), table)
    assert band_entry(_regime(framework="deepspeed"), table)["cell"] == {"comm": "<0.05", "scale": "<=64"}


def test_a_cell_needs_three_sources() -> None:
    one_source = [Residual(f"x{i}", "A", v, _regime()) for i, v in enumerate(TEN)]
    table = fit_bands(one_source)
    assert [e["cell"] for e in table["bands"]] == [{}]


def test_bin_labels_follow_the_edges() -> None:
    comm = {"name": "comm", "field": "network_wait_fraction", "edges": [0.05, 0.10],
            "labels": ["<0.05", "0.05-0.10", ">=0.10"]}
    scale = {"name": "scale", "field": "gpus", "edges": [65, 1025], "labels": ["<=64", "65-1024", ">1024"]}
    assert [regime_label(_regime(comm=c), comm) for c in (0.0, 0.0499, 0.05, 0.0999, 0.10, 0.9)] == [
        "<0.05", "<0.05", "0.05-0.10", "0.05-0.10", ">=0.10", ">=0.10"]
    assert [regime_label(_regime(gpus=g), scale) for g in (8, 64, 65, 1024, 1025)] == [
        "<=64", "<=64", "65-1024", "65-1024", ">1024"]
    fw = {"name": "framework", "field": "framework"}
    assert regime_label({"framework": None}, fw) == "auto" and regime_label(_regime(framework="nemo"), fw) == "nemo"


def test_loso_band_excludes_the_rows_own_source() -> None:
    """Four sources near zero and one outlier source: in-sample the outlier widens the band enough to cover
    itself; fitted without it (LOSO) its band is the others' and its rows fall outside."""
    normal = [Residual(f"{s}{i}", s, v, _regime()) for s in "ABCD" for i, v in enumerate([-0.05, -0.02, 0.02, 0.05])]
    outlier = [Residual(f"E{i}", "E", 0.8, _regime()) for i in range(4)]
    rows = normal + outlier
    in_sample_table = fit_bands(rows)
    in_sample = {r.run_id: band_for(r.regime, in_sample_table) for r in rows}
    loso = loso_bands(rows)
    assert loso["E0"] != in_sample["E0"]
    assert loso["E0"] == band_for(_regime(), fit_bands(normal))
    assert loso["E0"][1] < math.exp(0.8) <= in_sample["E0"][1]
    assert coverage(outlier, in_sample) == 1.0 and coverage(outlier, loso) == 0.0
    # a normal source's band is fitted on the other three normal sources and the outlier
    assert loso["A0"] == band_for(_regime(), fit_bands([r for r in rows if r.source != "A"]))


def test_coverage_counts_rows_inside_their_band() -> None:
    res = [Residual("a", "S", math.log(1.0)), Residual("b", "S", math.log(1.2)), Residual("c", "S", math.log(0.9)),
           Residual("d", "S", math.log(0.8)), Residual("e", "S", 0.0)]
    bands = {"a": (0.9, 1.1), "b": (0.9, 1.1), "c": (0.9, 1.1), "d": (0.85, 1.5)}  # "e" has no band
    # a inside, b above, c on the lower edge (inside), d below, e without a band counts as outside
    assert coverage(res, bands) == pytest.approx(2 / 5)
    assert coverage([], bands) == 0.0


def test_band_table_round_trips_through_json(tmp_path: Path) -> None:
    table = fit_bands(_ten())
    doc = error_bands_document(table, [{"source": "A", "runs": 2}], "2026-01-01")
    path = tmp_path / "error_bands.json"
    assert write_error_bands(doc, path)
    loaded = load_error_bands(path)
    assert loaded["about"] == BANDS_ABOUT and loaded["generated"] == "2026-01-01"
    assert band_for(_regime(), loaded) == band_for(_regime(), table)
    # regenerating the same table on another day keeps the file (and its date) as it was
    assert not write_error_bands(error_bands_document(table, [{"source": "A", "runs": 2}], "2026-02-02"), path)
    assert load_error_bands(path)["generated"] == "2026-01-01"


def test_the_shipped_table_is_readable_with_json_alone() -> None:
    """engine/performance/data/error_bands.json: provenance, the rule, and a pooled band every lookup reaches."""
    doc = json.loads(ERROR_BANDS.read_text(encoding="utf-8"))
    assert ERROR_BANDS.parent.name == "data" and ERROR_BANDS.parent.parent.name == "performance"
    assert doc["generated"] and doc["sources"] and "Weibull" in doc["about"]
    assert any(e["cell"] == {} for e in doc["bands"])
    assert sum(s["runs"] for s in doc["sources"]) == next(e["rows"] for e in doc["bands"] if e["cell"] == {})
    for regime in (_regime(), _regime(comm=0.3, gpus=16384, framework="megatron-core"), {}):
        p10, p90 = band_for(regime)
        assert 0.0 < p10 < p90

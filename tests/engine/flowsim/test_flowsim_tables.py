"""Simulated fabric tables: the regeneration script, the shipped file and the lookups (issue #13)."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from engine.fabric.tables import (
    TABLE_PATH,
    crossing_share_array,
    crossing_share_table,
    load_tables,
    study_efficiency,
)
from engine.flowsim.tables import crossing_experiment
from scripts.fabric_tables import main as tables_main


@pytest.fixture(scope="module")
def quick_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tables") / "fabric_tables.json"
    assert tables_main(["--quick", "--out", str(out)]) == 0
    return out


def test_script_records_its_parameters_and_fills_both_tables(quick_table: Path) -> None:
    doc = json.loads(quick_table.read_text())
    assert doc["generated_by"].startswith("scripts/fabric_tables.py")
    assert doc["crossing"]["parameters"]["loads"] == [0.5, 1.0]
    grid = doc["crossing"]["patterns"]["aligned"]["ecmp"]
    assert len(grid["mean"]) == 2 and len(grid["mean"][0]) == 2
    # more hashed flows per NIC spread better; adaptive spraying is at line rate below full load
    assert grid["mean"][1][1] > grid["mean"][1][0]
    assert doc["crossing"]["patterns"]["aligned"]["adaptive"]["mean"][0][0] == pytest.approx(1.0)
    assert {r["routing"] for r in doc["studies"]["rows"]} == {"ecmp", "adaptive"}
    assert all("efficiency" in r for r in doc["studies"]["rows"])


def test_lookups_interpolate_and_clamp(quick_table: Path) -> None:
    p = str(quick_table)
    doc = load_tables(p)
    assert doc is not None
    grid = doc["crossing"]["patterns"]["aligned"]["ecmp"]
    assert crossing_share_table("ecmp", 1.0, 1, path=p) == pytest.approx(grid["mean"][1][0])
    mid = crossing_share_table("ecmp", 0.75, 2, path=p)
    corners = [v for row in grid["mean"] for v in row]
    assert mid is not None and min(corners) <= mid <= max(corners)
    assert crossing_share_table("ecmp", 9.0, 64, path=p) == pytest.approx(grid["mean"][1][1])  # clamped
    arr = crossing_share_array("ecmp", np.array([1.0, 0.75, 9.0]), np.array([1, 2, 64]), path=p)
    assert arr is not None
    assert arr.tolist() == pytest.approx([crossing_share_table("ecmp", x, f, path=p) for x, f in
                                          ((1.0, 1), (0.75, 2), (9.0, 64))])
    assert crossing_share_table("pinned", 1.0, 1, path=p) is None  # not in the quick grid
    assert crossing_share_table("ecmp", 1.0, 1, pattern="scattered", path=p) is None
    rows = {(r["gpus"], r["routing"]): r["efficiency"]["p50"] for r in doc["studies"]["rows"]}
    eff = study_efficiency(fabric="roce", topology="fat-tree", gpus=512, oversubscription=1.0, routing="ecmp", path=p)
    lo, hi = sorted((rows[(256, "ecmp")], rows[(1024, "ecmp")]))
    assert eff is not None and lo <= eff <= hi
    assert study_efficiency(fabric="infiniband", topology="fat-tree", gpus=512, oversubscription=1.0,
                            routing="ecmp", path=p) is None
    assert load_tables(str(quick_table.parent / "missing.json")) is None


def test_crossing_experiment_at_full_load_is_balls_into_bins() -> None:
    # one flow per NIC, every flow crossing a non-blocking leaf towards one partner leaf: the uplink hash gives
    # the balls-into-bins 1-(1-1/k)^k (the partner's downlinks carry the same flows, so they add nothing)
    k = 32
    bins = 1.0 - (1.0 - 1.0 / k) ** k
    aligned = crossing_experiment("ecmp", 1.0, 1, seeds=4, leaves=64, down=k)
    assert aligned["mean"] == pytest.approx(bins, abs=0.02)
    assert aligned["completion"] < 0.5 * aligned["mean"]
    # scattered destinations add the spine-to-leaf hash's own collisions
    scattered = crossing_experiment("ecmp", 1.0, 1, seeds=4, leaves=64, down=k, pattern="scattered")
    assert 0.7 * bins < scattered["mean"] < aligned["mean"] - 0.05
    # static destination routes are collision-free for aligned traffic, not for scattered traffic
    assert crossing_experiment("pinned", 1.0, 1, seeds=2)["mean"] == pytest.approx(1.0)
    assert crossing_experiment("pinned", 1.0, 1, seeds=2, pattern="scattered")["mean"] < 0.8
    # 2:1 leaf, everything crossing: spraying gives each flow half its line rate
    assert crossing_experiment("adaptive", 2.0, 1, seeds=1)["mean"] == pytest.approx(0.5, abs=0.03)


def test_shipped_table_is_complete() -> None:
    doc = load_tables(str(TABLE_PATH))
    if doc is None:
        pytest.skip("fabric_tables.json not generated (make fabric-tables)")
    assert "--quick" not in doc["generated_by"]
    for pattern, routing in itertools.product(("aligned", "scattered"), ("ecmp", "pinned", "adaptive")):
        grid = doc["crossing"]["patterns"][pattern][routing]
        assert len(grid["mean"]) == len(grid["loads"])
        assert all(0.0 < v <= 1.0 for row in grid["mean"] for v in row)
        # more load never helps
        for j in range(len(grid["flows_per_nic"])):
            col = [row[j] for row in grid["mean"]]
            assert all(b <= a + 0.02 for a, b in itertools.pairwise(col)), (routing, col)
    rows = doc["studies"]["rows"]
    assert rows and all(("efficiency" in r) or ("error" in r) for r in rows)
    ok = [r for r in rows if "efficiency" in r]
    assert all(math.isfinite(r["efficiency"]["p50"]) and 0 < r["efficiency"]["p50"] <= 1 for r in ok)


def test_performance_model_routing_reads_the_simulated_table(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.fabric import routing

    if load_tables(str(TABLE_PATH)) is None:
        pytest.skip("fabric_tables.json not generated (make fabric-tables)")
    for load, flows in ((0.5, 2.0), (1.0, 8.0), (2.0, 1.0)):
        sim = crossing_share_table("ecmp", load, flows)
        assert sim is not None
        got = float(routing.crossing_share("ecmp", "roce", load, flows, 1)[()])
        assert got == pytest.approx(min(sim, 0.95 / load, 1.0))
    # pinned: one path per peer, read from the scattered pattern (a route table is not tuned to the job)
    pinned = crossing_share_table("pinned", 1.0, 1, pattern="scattered")
    assert pinned is not None and float(routing.crossing_share("pinned", "infiniband", 1.0, 4.0)[()]) == \
        pytest.approx(min(pinned, 0.97))
    monkeypatch.setattr(routing, "USE_SIMULATED_TABLES", False)
    assert float(routing.crossing_share("ecmp", "roce", 1.0, 1.0)[()]) == pytest.approx(1 - np.exp(-1), rel=1e-9)

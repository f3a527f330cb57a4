"""A team's own fabric study pinned to a scenario (issue #13): the document's ``fabric_study`` section.

The parser checks the section (field errors, bounds), keeps it in the canonical document, and the performance
model takes the routing share of the scenario's routing from it instead of the shipped tables.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.fabric.pinned_study import compact_study, routing_source
from engine.fabric.routing import crossing_share
from engine.flowsim.study import study
from engine.performance.api import predict
from engine.schema.types import scenario_to_dict
from tests.engine._scenarios import dp_heavy


def roce(routing: str = "ecmp", **cluster: Any) -> dict[str, Any]:
    return dp_heavy(fabric="roce", routing=routing, **cluster)


def section(*shares: tuple[str, int, float], fabric: str = "roce", run: int = 41) -> dict[str, Any]:
    return {"run": run, "name": "our 1,024-GPU ring", "fabric": fabric, "topology": "fat-tree", "gpus": 1024,
            "traffic": ["ring-allreduce"], "placement": "random",
            "shares": [{"routing": r, "qps": q, "p50": e, "label": f"{r} {q} QP"} for r, q, e in shares]}


def test_a_pinned_study_with_a_lower_share_makes_predict_slower_and_names_the_study() -> None:
    base = predict(roce())
    assert base.routing_source["kind"] == "shipped"
    pinned = predict({**roce(), "fabric_study": section(("ecmp", 1, 0.3), ("adaptive", 1, 1.0))})
    assert pinned.step_time_s > base.step_time_s * 1.01
    assert pinned.breakdown_s["dp_comm_exposed"] > base.breakdown_s["dp_comm_exposed"]
    assert pinned.breakdown_s["compute"] == pytest.approx(base.breakdown_s["compute"])
    src = pinned.routing_source
    assert src["kind"] == "study" and src["share"] == 0.3 and src["study"]["run"] == 41
    assert any("fabric study run #41" in n and "30%" in n for n in pinned.notes)
    assert pinned.to_dict()["routing_source"]["study"]["name"] == "our 1,024-GPU ring"


def test_a_better_study_share_is_faster_and_the_variant_follows_the_routing() -> None:
    sec = section(("ecmp", 1, 0.2), ("adaptive", 1, 1.0))
    slow = predict({**roce("ecmp"), "fabric_study": sec})
    fast = predict({**roce("adaptive"), "fabric_study": sec})
    assert fast.routing_source["share"] == 1.0
    assert slow.routing_source["share"] == 0.2
    assert fast.step_time_s < slow.step_time_s


def test_the_nearest_queue_pair_count_is_used_and_said() -> None:
    sec = section(("ecmp-qp", 2, 0.5), ("ecmp-qp", 8, 0.9))
    src = routing_source(sec, routing="ecmp-qp", qps=4.0, fabric="roce")  # log2 distance: 2 -> 1, 8 -> 1; first wins
    assert src["kind"] == "study" and src["variant"]["qps"] in (2, 8)
    assert "QPs vs 4" in src["note"]
    exact = routing_source(sec, routing="ecmp-qp", qps=8.0, fabric="roce")
    assert exact["share"] == 0.9 and "QPs vs" not in exact["note"]


def test_a_study_of_another_fabric_or_without_the_routing_falls_back_to_the_shipped_tables_and_says_why() -> None:
    base = predict(roce())
    other = predict({**roce(), "fabric_study": section(("ecmp", 1, 0.1), fabric="infiniband")})
    assert other.step_time_s == pytest.approx(base.step_time_s)
    assert other.routing_source["kind"] == "shipped"
    assert any("infiniband" in n and "shipped tables" in n for n in other.notes)
    missing = predict({**roce("ecmp"), "fabric_study": section(("adaptive", 1, 1.0))})
    assert missing.step_time_s == pytest.approx(base.step_time_s)
    assert any("no ecmp variant" in n for n in missing.notes)


def test_the_pinned_share_is_capped_by_what_an_oversubscribed_tier_can_carry() -> None:
    assert float(crossing_share("ecmp", "roce", 0.5, 2.0, pinned=0.8)) == 0.8
    assert float(crossing_share("ecmp", "roce", 2.0, 2.0, pinned=0.8)) == 0.5
    assert float(crossing_share("adaptive", "infiniband", 1.0, 2.0, pinned=1.0)) == 1.0


def test_the_section_round_trips_through_the_canonical_document() -> None:
    doc = {**roce(), "fabric_study": section(("ecmp", 1, 0.3))}
    out = scenario_to_dict(parse_scenario(doc))
    assert out["fabric_study"]["run"] == 41 and out["fabric_study"]["shares"][0]["p50"] == 0.3
    assert scenario_to_dict(parse_scenario(out)) == out
    assert "fabric_study" not in scenario_to_dict(parse_scenario(roce()))


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda s: s.update(fabric="ethernet"), "fabric_study.fabric"),
    (lambda s: s.pop("shares"), "fabric_study.shares"),
    (lambda s: s.update(shares=[]), "fabric_study.shares"),
    (lambda s: s["shares"][0].update(p50=0.0), "fabric_study.shares.0.p50"),
    (lambda s: s["shares"][0].update(p50=1.5), "fabric_study.shares.0.p50"),
    (lambda s: s["shares"][0].update(p50=float("nan")), "fabric_study.shares.0.p50"),
    (lambda s: s["shares"][0].update(p50="0.5"), "fabric_study.shares.0.p50"),
    (lambda s: s["shares"][0].update(routing="magic"), "fabric_study.shares.0.routing"),
    (lambda s: s["shares"][0].update(qps=0), "fabric_study.shares.0.qps"),
    (lambda s: s["shares"][0].update(p10=0.9, p90=1.0), "fabric_study.shares.0.p50"),
    (lambda s: s["shares"][0].update(extra=1), "fabric_study.shares.0.extra"),
    (lambda s: s.update(run=0), "fabric_study.run"),
    (lambda s: s.update(run=True), "fabric_study.run"),
    (lambda s: s.update(gpus=10**30), "fabric_study.gpus"),
    (lambda s: s.update(name="x" * 201), "fabric_study.name"),
    (lambda s: s.update(shares=[{"routing": "ecmp", "p50": 0.5}] * 9), "fabric_study.shares"),
    (lambda s: s.update(unknown=1), "fabric_study.unknown"),
])
def test_a_bad_section_is_refused_naming_the_field(mutate: Any, field: str) -> None:
    sec = copy.deepcopy(section(("ecmp", 1, 0.3)))
    mutate(sec)
    with pytest.raises(ScenarioError) as err:
        parse_scenario({**roce(), "fabric_study": sec})
    assert err.value.field == field


def test_a_section_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario({**roce(), "fabric_study": [1, 2]})
    assert err.value.field == "fabric_study"


def test_compact_study_of_a_real_study_pins_its_simulated_shares() -> None:
    doc = roce()
    result = study(doc, ranks=512, placement="random", seeds=3)
    sec = compact_study(result, run=9, name="Fabric study #9")
    assert sec["fabric"] == "roce" and sec["gpus"] == 1024 and sec["ranks"] == 512 and sec["run"] == 9
    assert [r["routing"] for r in sec["shares"]] == [row["routing"] for row in result["table"]]
    assert [r["p50"] for r in sec["shares"]] == [row["p50"] for row in result["table"]]
    pinned = predict({**doc, "fabric_study": sec})
    assert pinned.routing_source["share"] == result["table"][0]["p50"]
    with pytest.raises(ScenarioError):
        compact_study({"table": [], "variants": []})

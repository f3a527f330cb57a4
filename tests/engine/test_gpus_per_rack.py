"""``cluster.gpus_per_rack`` (issue #22 item 7): a job that uses 64 of each GB200 / GB300 NVL72 rack's 72 GPUs.

The numbers below are worked out by hand from the catalog (GB300-NVL72: 72 GPUs, 18 compute trays of 4 GPUs, one
800G NIC per GPU, $3,784,000 per rack without its NICs), not read back from the engine:

* 2,048 GPUs packed into racks of 72: ceil(2048 / 72) = 29 racks (28 full, the last with 32 GPUs);
* 2,048 GPUs at 64 per rack: 2048 / 64 = 32 racks, bought whole: 32 x 72 = 2,304 GPUs, 256 of them spares;
* the job's hosts: 64 GPUs / 4 per tray = 16 trays per rack, so 32 x 16 = 512 hosts (29 x 18 = 522 packed).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from engine.catalog import default_catalog
from engine.cost.goodput import load_reliability
from engine.cost.tco import tco
from engine.document.parse import parse_cluster, parse_scenario
from engine.document.validate import validate_scenario
from engine.errors import ScenarioError
from engine.performance.advice import nearest_workable_gpus
from engine.performance.api import predict
from engine.performance.collectives.placement import on_nic, place
from engine.performance.context import make_context
from engine.performance.hardware import gpu_spec
from engine.performance.sizing_advice import sizing_advice
from engine.schema.types import scenario_to_dict

LLAMA_70B: dict[str, Any] = {
    "name": "Llama-3-70B", "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn_hidden": 28672,
    "gated_ffn": True, "vocab": 128256, "seq_len": 8192,
}
MOE: dict[str, Any] = {  # DeepSeek-V3-like: 256 routed experts, 8 active
    "name": "MoE-671B", "layers": 61, "hidden": 7168, "heads": 128, "vocab": 129280, "seq_len": 4096,
    "gated_ffn": True, "ffn_hidden": 18432,
    "moe": {"experts": 256, "top_k": 8, "expert_ffn_hidden": 2048, "shared_experts": 1, "dense_layers": 3,
            "dense_ffn_hidden": 18432},
}
RACK_PRICE = 3_784_000.0  # GB300-NVL72 without its 72 NICs (catalog)


def dense(gpus: int = 2048, parallelism: Any = "auto", **cluster: Any) -> dict[str, Any]:
    return {"model": copy.deepcopy(LLAMA_70B), "training": {"global_batch": 2048, "tokens": 1.5e13},
            "parallelism": parallelism, "cluster": {"gpu": "GB300", "gpus": gpus, **cluster}}


def moe(ep: int, **cluster: Any) -> dict[str, Any]:
    return {"model": copy.deepcopy(MOE),
            "training": {"global_batch": 4096, "micro_batch": 1, "tokens": 1.48e13, "precision": "fp8",
                         "recompute": "selective", "zero": 1},
            "parallelism": {"tp": 1, "pp": 8, "cp": 1, "ep": ep, "vpp": 1, "sequence_parallel": False},
            "cluster": {"gpu": "GB300", "gpus": 2048, **cluster}}


def _line(out: dict[str, Any], start: str) -> dict[str, Any]:
    return next(li for li in out["tco"]["line_items"] if li["item"].startswith(start))


# ---------------------------------------------------------------------------------------- (1) opt-in


@pytest.mark.parametrize("doc", [dense(2048), dense(128), dense(2016), moe(64)], ids=["2048", "128", "2016", "moe"])
def test_the_field_absent_is_the_field_equal_to_72(doc: dict[str, Any]) -> None:
    full = copy.deepcopy(doc)
    full["cluster"]["gpus_per_rack"] = 72
    assert parse_scenario(copy.deepcopy(doc)).topo == parse_scenario(copy.deepcopy(full)).topo
    assert predict(copy.deepcopy(doc)).to_dict() == predict(copy.deepcopy(full)).to_dict()
    assert tco(copy.deepcopy(doc)) == tco(copy.deepcopy(full))


def test_the_canonical_document_writes_it_only_when_set() -> None:
    assert "gpus_per_rack" not in scenario_to_dict(parse_scenario(dense()))["cluster"]
    written = scenario_to_dict(parse_scenario(dense(gpus_per_rack=64)))
    assert written["cluster"]["gpus_per_rack"] == 64
    assert parse_scenario(written).topo == parse_scenario(dense(gpus_per_rack=64)).topo


# ---------------------------------------------------------------------------------------- (2) racks bought


def test_2048_gb300_at_64_per_rack_prices_32_whole_racks() -> None:
    packed, spared = tco(dense()), tco(dense(gpus_per_rack=64))
    rack = _line(packed, "NVIDIA GB300 NVL72 rack")
    assert rack["quantity"] == 29 and rack["total_usd"] == 29 * RACK_PRICE
    assert "spares" not in rack["item"]
    rack = _line(spared, "NVIDIA GB300 NVL72 rack")
    assert rack["quantity"] == 32 and rack["total_usd"] == 32 * RACK_PRICE  # the spares are paid for
    assert "64 of 72 GPUs used in each (cluster.gpus_per_rack): 2,304 GPUs bought for 2,048 used, 256 spares" \
        in rack["item"]
    # the scale-out NICs are those of the GPUs used: one per GPU in both, a leaf per rack
    assert _line(packed, "Compute NIC")["quantity"] == 2048 == _line(spared, "Compute NIC")["quantity"]
    assert spared["fabric"]["nics"] == 2048 and spared["fabric"]["links"]["node_leaf"] == 2048
    # the racks are powered whole: the servers' electricity scales with the racks, 32 / 29
    kwh = [_line(o, "Electricity, GPU servers")["quantity"] for o in (packed, spared)]
    assert kwh[1] / kwh[0] == pytest.approx(32 / 29, rel=1e-12)
    # the per-GPU figures are per GPU used: the spares make each used GPU dearer
    assert spared["tco"]["capex_per_gpu_usd"] > packed["tco"]["capex_per_gpu_usd"]


def test_the_jobs_hosts_are_the_trays_of_its_gpus() -> None:
    rate = load_reliability().rates["host"]
    packed = tco(dense())["goodput"]["interruptions_by_component_per_day"]
    spared = tco(dense(gpus_per_rack=64))["goodput"]["interruptions_by_component_per_day"]
    assert packed["host"] == pytest.approx(29 * 18 * rate)
    assert spared["host"] == pytest.approx(32 * 16 * rate)


def test_a_count_that_is_not_a_multiple_leaves_a_partial_last_rack() -> None:
    s = parse_scenario(dense(2016, gpus_per_rack=64))
    assert s.topo.nodes == 32  # ceil(2016 / 64): 31 racks of 64 and one of 32
    rack = _line(tco(dense(2016, gpus_per_rack=64)), "NVIDIA GB300 NVL72 rack")
    assert rack["quantity"] == 32 and "2,304 GPUs bought for 2,016 used, 288 spares" in rack["item"]
    assert s.topo.plan.nics == 2016


def test_nics_shared_by_several_gpus_are_cabled_for_the_used_ones() -> None:
    # 18 NICs per rack (one per 4-GPU tray): 64 GPUs use ceil(64 x 18 / 72) = 16 of them, 63 GPUs ceil(15.75) = 16
    s = parse_scenario(dense(nics_per_node=18, gpus_per_rack=64))
    assert (s.cluster.nics_used_per_node, s.topo.nics_per_node, s.topo.plan.nics) == (16, 16, 32 * 16)
    assert parse_scenario(dense(2016, nics_per_node=18, gpus_per_rack=63)).cluster.nics_used_per_node == 16


# ---------------------------------------------------------------------------------------- (3) NVLink domain


def test_the_layouts_nvlink_domain_is_the_gpus_used_per_rack() -> None:
    packed, spared = parse_scenario(dense()), parse_scenario(dense(gpus_per_rack=64))
    assert (packed.topo.nvlink_domain_gpus, spared.topo.nvlink_domain_gpus) == (72, 64)
    assert predict(dense(gpus_per_rack=64)).fabric["nvlink_domain_gpus"] == 64
    net72 = make_context(packed, gpu_spec("GB300")).net
    net64 = make_context(spared, gpu_spec("GB300")).net
    assert (net72.domain, net64.domain) == (72.0, 64.0)
    # a group of 64 adjacent ranks stays on NVLink in a 64-GPU domain; one of 72 spans 72 / 64 domains and
    # leaves the rack through the NICs (groups wider than the domain are not refused: they cross racks)
    assert place(net64, 64.0, 1.0).nodes == 1.0 and not on_nic(place(net64, 64.0, 1.0))
    assert place(net64, 72.0, 1.0).nodes == pytest.approx(72 / 64) and on_nic(place(net64, 72.0, 1.0))
    assert place(net72, 72.0, 1.0).nodes == 1.0


def test_an_expert_group_of_64_stays_in_the_rack_and_one_wider_crosses() -> None:
    ep64 = {k: predict(moe(64, **c)).breakdown_s["ep_comm"]
            for k, c in (("packed", {}), ("64", {"gpus_per_rack": 64}), ("32", {"gpus_per_rack": 32}))}
    assert ep64["64"] == ep64["packed"]  # 64 experts' ranks inside one NVLink domain either way
    assert ep64["32"] > ep64["64"]  # split over two 32-GPU domains: the all-to-all crosses the NICs
    ep128_packed = predict(moe(128)).breakdown_s["ep_comm"]  # 128 / 72 = 1.8 domains
    ep128 = predict(moe(128, gpus_per_rack=64)).breakdown_s["ep_comm"]  # 128 / 64 = 2 domains
    assert ep128 > ep128_packed


# ---------------------------------------------------------------------------------------- (4) end to end


def test_a_64_gpu_job_at_64_per_rack_predicts_and_prices_end_to_end() -> None:
    doc = dense(64, parallelism={"tp": 8, "pp": 1, "cp": 1, "ep": 1, "vpp": 1}, gpus_per_rack=64)
    doc["training"].update(global_batch=64, tokens=1e11)
    validate_scenario(copy.deepcopy(doc))
    perf = predict(copy.deepcopy(doc))
    assert perf.fits and perf.step_time_s > 0 and perf.fabric["nvlink_domain_gpus"] == 64
    out = tco(copy.deepcopy(doc))
    assert out["performance"]["step_time_s"] == perf.step_time_s
    rack = _line(out, "NVIDIA GB300 NVL72 rack")
    assert rack["quantity"] == 1 and "72 GPUs bought for 64 used, 8 spares" in rack["item"]
    assert out["fabric"]["nics"] == 64 and out["fabric"]["switches"]["total"] == 1
    # one partial rack without the field is the same job: same prediction, same money, only the note differs, and
    # the most GPUs the one-switch fabric could take: 2 racks' worth, 2 x 64 used (2 x 72 without the field)
    plain = copy.deepcopy(doc)
    del plain["cluster"]["gpus_per_rack"]
    packed = predict(copy.deepcopy(plain)).to_dict()
    assert (packed["fabric"].pop("max_gpus"), out["fabric"]["max_gpus"]) == (144, 128)
    spared = perf.to_dict()
    spared["fabric"].pop("max_gpus")
    assert packed == spared
    assert tco(plain)["tco"]["capex_usd"] == out["tco"]["capex_usd"]


# ---------------------------------------------------------------------------------------- (5) refusals


@pytest.mark.parametrize(("cluster", "words"), [
    ({"gpu": "H100-SXM", "gpus": 64, "gpus_per_rack": 8}, "only rack-scale systems"),
    ({"gpus_per_rack": 0}, "between 1 and 576"),
    ({"gpus_per_rack": 73}, "73 exceeds cluster.gpus_per_node=72"),
    ({"gpus_per_rack": "64"}, "integer"),
])
def test_bad_values_are_refused_naming_the_field(cluster: dict[str, Any], words: str) -> None:
    doc = dense(**cluster)
    for fn in (validate_scenario, predict, tco):
        with pytest.raises(ScenarioError) as info:
            fn(copy.deepcopy(doc))
        assert info.value.field == "cluster.gpus_per_rack" and words in str(info.value), str(info.value)


def test_a_fleet_cluster_is_counted_in_whole_racks() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_cluster({"gpu": "GB300", "gpus": 144, "gpus_per_rack": 64})
    assert info.value.field == "cluster.gpus_per_rack"


# ---------------------------------------------------------------------------------------- advice


def test_sizing_advice_on_a_document_that_sets_64_per_rack() -> None:
    """2,016 GPUs at 64 per rack still leave 63 pipeline stages; the options step in racks of 64 (1,792 = 28 x 64
    and 2,048 = 32 x 64, as in tests/engine/performance/test_advice_sizing.py) and need no further setting."""
    doc = dense(2016, gpus_per_rack=64)
    advice = sizing_advice(doc)
    assert advice is not None
    by_size = {(o.gpus, o.batch): o for o in advice.options}
    assert set(by_size) == {(1792, 2048), (2048, 2048), (2016, 2016), (2016, 2079)}
    assert {(o.nodes, o.per_node) for o in advice.options} == {(28, 64), (32, 64)}  # 2,016 / 64 = 31.5: 32 racks
    for (gpus, batch), option in by_size.items():
        sized = dense(gpus, gpus_per_rack=64)
        sized["training"]["global_batch"] = batch
        assert option.mfu == pytest.approx(predict(sized).mfu)
    text = advice.message()
    assert "1,792 GPUs, 64 of 72 in each of 28 racks, 224 spares" in text and "set cluster.gpus_per_rack" not in text


def test_the_dead_end_advice_steps_in_racks_of_the_gpus_used() -> None:
    # 1,944 = 2³ × 243 has no layout (243 stages > 80 layers). In racks of 64: 1,920 = 2⁷ × 15 below, 1,984 =
    # 2⁶ × 31 above (31 stages); the document without the field steps by 8 (no gpus_per_node given): 1,952 above
    advice = nearest_workable_gpus(dense(1944, gpus_per_rack=64))
    assert (advice.below, advice.above, advice.gpus_per_node) == (1920, 1984, 64)
    assert nearest_workable_gpus(dense(1944)).above == 1952


def test_catalog_racks_are_the_ones_priced() -> None:
    assert default_catalog()["GB300-NVL72"]["unit_price_usd"] == RACK_PRICE
    assert default_catalog()["GB300-NVL72"]["specs"]["hosts_per_server"] == 18


@pytest.mark.parametrize(("gpu", "gpn", "rack_scale"), [("GB300", 72, True), ("H100-SXM", 8, False)])
def test_the_parser_says_whether_a_cluster_is_rack_scale(gpu: str, gpn: int, rack_scale: bool) -> None:
    """One reader of the catalog's node_sizes (GB300 NVL72 is sold as 72-GPU racks; an HGX server is not)."""
    c = parse_cluster({"gpu": gpu, "gpus": 144, "gpus_per_node": gpn})
    assert c.rack_scale is rack_scale

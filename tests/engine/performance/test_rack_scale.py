"""Rack-scale Blackwell (GB200 / GB300 NVL72): one 72-GPU NVLink domain per rack, in performance and in TCO."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from engine.catalog import default_catalog
from engine.cost.tco import tco
from engine.document.parse import parse_scenario
from engine.document.validate import validate_scenario
from engine.errors import ScenarioError
from engine.performance.api import predict

LLAMA_70B: dict[str, Any] = {
    "name": "Llama-3-70B", "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn_hidden": 28672,
    "gated_ffn": True, "vocab": 128256, "seq_len": 8192,
}
MOE: dict[str, Any] = {  # DeepSeek-V3-like: 256 routed experts, 8 active, one shared
    "name": "MoE-671B", "layers": 61, "hidden": 7168, "heads": 128, "vocab": 129280, "seq_len": 4096,
    "gated_ffn": True, "ffn_hidden": 18432,
    "moe": {"experts": 256, "top_k": 8, "expert_ffn_hidden": 2048, "shared_experts": 1, "dense_layers": 3,
            "dense_ffn_hidden": 18432},
}


def gb300_dense(**cluster: Any) -> dict[str, Any]:
    return {
        "model": copy.deepcopy(LLAMA_70B),
        "training": {"global_batch": 1152, "micro_batch": 1, "tokens": 1.5e13, "precision": "bf16",
                     "recompute": "selective", "zero": 1},
        "parallelism": {"tp": 8, "pp": 1, "cp": 1, "ep": 1, "vpp": 1, "sequence_parallel": True},
        "cluster": {"gpu": "GB300", "gpus": 1152, "nic_gbps": 800, **cluster},
    }


def gb300_moe(**cluster: Any) -> dict[str, Any]:
    return {
        "model": copy.deepcopy(MOE),
        "training": {"global_batch": 4608, "micro_batch": 1, "tokens": 1.48e13, "precision": "fp8",
                     "recompute": "selective", "zero": 1},
        "parallelism": {"tp": 1, "pp": 8, "cp": 1, "ep": 32, "vpp": 1, "sequence_parallel": False},
        "cluster": {"gpu": "GB300", "gpus": 2304, "nic_gbps": 800, **cluster},
    }


def test_gb300_defaults_to_one_rack_per_node_with_an_800g_nic_per_gpu() -> None:
    s = parse_scenario(gb300_dense())
    c, t = s.cluster, s.topo
    assert (c.gpus_per_node, c.nics_per_node, c.nic_gbps) == (72, 72, 800.0)
    assert s.fabric is not None and s.fabric.server == "GB300-NVL72" and s.fabric.nodes_per_rack == 1
    assert (t.nvlink_domain_gpus, t.nodes, t.nic) == (72, 16, "CX8-800G")
    assert t.switch == "Q3400" and t.tiers == 2  # 1,152 x 800G fits two tiers of 144-port XDR switches


@pytest.mark.parametrize("fabric", ["infiniband", "roce"])
def test_gb300_dense_end_to_end(fabric: str) -> None:
    doc = gb300_dense(fabric=fabric)
    validate_scenario(copy.deepcopy(doc))
    r = predict(copy.deepcopy(doc))
    assert r.fits and 0.2 < r.mfu < 0.7
    out = tco(doc)
    assert out["performance"]["step_time_s"] == r.step_time_s
    assert out["tco"]["server_model"] == "GB300-NVL72"
    rack = next(li for li in out["tco"]["line_items"] if "GB300-NVL72" in li["item"])
    assert rack["quantity"] == 16  # 16 racks of 72 GPUs, priced per rack
    assert rack["unit_price_usd"] == default_catalog()["GB300-NVL72"]["unit_price_usd"]
    nic = next(li for li in out["tco"]["line_items"] if li["item"].startswith("Compute NIC"))
    assert nic["quantity"] == 1152 and "CX8-800G" in nic["item"]
    assert out["fabric"]["nvlink_domain_gpus"] == 72
    # rack power from the catalog: 142 kW per GB300 NVL72 rack, i.e. about 2 kW per GPU
    assert out["tco"]["capex_per_gpu_usd"] > 50_000


def test_gb300_moe_end_to_end() -> None:
    doc = gb300_moe(fabric="roce", routing="adaptive")
    r = predict(copy.deepcopy(doc))
    assert r.fits and r.parallelism["ep"] == 32 and r.mfu > 0.1
    out = tco(doc)
    assert out["fabric"]["switch_model"] == "SN5600" and out["fabric"]["routing"] == "adaptive"
    assert out["fabric"]["tiers"] == 3  # 2,304 x 800G exceeds a 2-tier tree of 64-port 800G switches (2,048)
    assert out["tco"]["run_cost_usd"] > 0


def test_rack_scale_nvlink_domain_speeds_up_wide_tensor_parallelism() -> None:
    """TP=16 crosses nodes on 8-GPU HGX B300 but stays inside the NVL72 rack: the rack is faster per GPU."""
    def doc(gpu: str, gpn: int) -> dict[str, Any]:
        d = gb300_dense()
        d["cluster"].update(gpu=gpu, gpus_per_node=gpn, gpus=1152)
        d["parallelism"]["tp"] = 16
        return d
    rack = predict(doc("GB300", 72))
    hgx = predict(doc("B300", 8))
    assert rack.breakdown_s["tp_comm"] < hgx.breakdown_s["tp_comm"]


def test_gb200_nvl72_prices_per_rack() -> None:
    doc = gb300_dense(nic_gbps=400)
    doc["cluster"]["gpu"] = "GB200"
    out = tco(doc)
    assert out["tco"]["server_model"] == "GB200-NVL72"
    assert out["fabric"]["nic_model"] == "CX7-400G"


def test_72_gpus_per_node_of_a_hgx_gpu_is_explained() -> None:
    """B300 is sold as HGX (8) or in GB300 racks: 72 x B300 has no server; tco says which to use."""
    doc = gb300_dense()
    doc["cluster"].update(gpu="B300", gpus_per_node=72)
    assert predict(copy.deepcopy(doc)).fits  # performance needs no server
    with pytest.raises(ScenarioError) as info:
        tco(doc)
    assert info.value.field == "costs.server"
    assert "GB300-NVL72 holds GB300" in str(info.value)
    doc["costs"] = {"server": "HGX-B300"}
    with pytest.raises(ScenarioError) as info:
        validate_scenario(doc)
    assert info.value.field == "cluster.gpus_per_node" and "HGX-B300 (8 GPUs)" in str(info.value)


@pytest.mark.parametrize("workload", [gb300_dense, gb300_moe])
def test_gb300_through_the_command_line(tmp_path: Any, workload: Any) -> None:
    """``manage.py predict`` and ``manage.py tco`` on a GB300 NVL72 scenario at 800 Gb/s per GPU."""
    import json
    from io import StringIO

    from django.core.management import call_command

    path = tmp_path / "gb300.json"
    path.write_text(json.dumps(workload()))
    out = StringIO()
    call_command("predict", str(path), stdout=out)
    perf = json.loads(out.getvalue())
    assert perf["fits"] is True and perf["fabric"]["nvlink_domain_gpus"] == 72
    out = StringIO()
    call_command("tco", str(path), stdout=out)
    cost = json.loads(out.getvalue())
    assert cost["tco"]["server_model"] == "GB300-NVL72" and cost["fabric"]["link_gbps"] == 800.0
    assert cost["performance"]["step_time_s"] == perf["step_time_s"]


def test_default_server_follows_gpus_per_node() -> None:
    from engine.document.parse import default_server_key

    assert default_server_key("GB300", 72) == "GB300-NVL72"
    assert default_server_key("GB200", 72) == "GB200-NVL72"
    assert default_server_key("B300", 8) == "HGX-B300"
    assert default_server_key("B300", 72) is None


def test_rack_scale_gpus_come_only_in_racks() -> None:
    doc = gb300_dense()
    doc["cluster"]["gpus_per_node"] = 8
    for fn in (predict, tco, validate_scenario):
        with pytest.raises(ScenarioError) as info:
            fn(copy.deepcopy(doc))
        assert info.value.field == "cluster.gpus_per_node" and "72-GPU NVLink domains" in str(info.value)


def test_an_nvl72_rack_fails_like_its_18_hosts() -> None:
    """Host and software interruptions are per operating-system host: 18 compute trays per NVL72 rack, so 1,152
    GB300 GPUs (16 racks) carry 288 hosts' worth — twice the 144 hosts of the same GPUs in 8-GPU HGX servers."""
    from engine.cost.goodput import load_reliability

    rel = load_reliability()
    rack = tco(gb300_dense())["goodput"]["interruptions_by_component_per_day"]
    hgx_doc = gb300_dense()
    hgx_doc["cluster"].update(gpu="B300", gpus_per_node=8)
    hgx = tco(hgx_doc)["goodput"]["interruptions_by_component_per_day"]
    assert rack["host"] == pytest.approx(288 * rel.rates["host"])
    assert hgx["host"] == pytest.approx(144 * rel.rates["host"])
    assert rack["software"] == pytest.approx(2 * hgx["software"])


def test_liquid_cooled_racks_default_to_a_liquid_cooled_hall_pue() -> None:
    """Without costs.pue, a liquid-cooled NVL72 rack is powered at the liquid-cooled PUE (1.18), an HGX server at
    the air default (1.3); an explicit costs.pue wins; the sensitivity range follows the cooling."""
    from engine.catalog import default_catalog

    fac = default_catalog()["FACILITY-DEFAULT"]["specs"]
    rack = parse_scenario(gb300_dense())
    assert rack.cost_params is not None and rack.cost_params.values["pue"] == fac["pue_by_cooling"]["liquid"]
    hgx_doc = gb300_dense()
    hgx_doc["cluster"].update(gpu="B300", gpus_per_node=8)
    hgx = parse_scenario(hgx_doc)
    assert hgx.cost_params is not None and hgx.cost_params.values["pue"] == fac["pue"]
    pinned = gb300_dense()
    pinned["costs"] = {"pue": 1.4}
    assert parse_scenario(pinned).cost_params.values["pue"] == 1.4  # type: ignore[union-attr]
    rows = tco(gb300_dense(), sensitivity=True)["sensitivity"]
    pue = next(r for r in rows if r["input"] == "costs.pue")
    assert (pue["low_value"], pue["likely_value"], pue["high_value"]) == tuple(fac["ranges"]["pue_liquid"])


def test_a_64_gpu_job_on_one_gb300_nvl72_rack_predicts_and_prices() -> None:
    """Issue #22 item 7: 64 of a rack's 72 GPUs; the NVLink domain and the cabled NICs are the GPUs used."""
    import copy as _copy

    from engine.cost.tco import tco as _tco
    from engine.performance.api import predict as _predict
    from tests.engine._scenarios import LLAMA_7B as _L7
    from tests.engine._scenarios import scenario as _scenario

    doc = _scenario(model=_L7, training={"global_batch": 64, "micro_batch": 1, "recompute": "none", "zero": 1,
                                         "tokens": 1e11},
                    parallelism={"tp": 8, "pp": 1, "cp": 1, "ep": 1, "vpp": 1, "sequence_parallel": True},
                    cluster={"gpu": "GB300", "gpus": 64})
    perf = _predict(_copy.deepcopy(doc)).to_dict()
    assert perf["fabric"]["nvlink_domain_gpus"] == 64 and perf["step_time_s"] > 0
    out = _tco(_copy.deepcopy(doc))
    assert out["fabric"]["links"]["node_leaf"] == 64 and out["fabric"]["switches"]["total"] == 1
    assert out["tco"]["network_capex_usd"] > 0

"""The MoE token dispatcher (``training.moe_dispatcher``, issue #10): all-to-all vs Megatron-Core's all-gather
dispatcher, checked against the traffic each one moves (MoEAllGatherTokenDispatcher: an all-gather of the
TP x EP group's hidden states, one copy per token, and a reduce-scatter of the outputs)."""

from __future__ import annotations

import copy

import pytest

from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.performance.api import predict
from engine.schema.types import scenario_to_dict
from tests.engine._scenarios import scenario


def _moe(tp: int = 8, ep: int = 1, pp: int = 1, gpus: int = 64, **training: object) -> dict:
    doc = scenario(cluster={"gpu": "H100-SXM", "gpus": gpus},
                   parallelism={"tp": tp, "pp": pp, "cp": 1, "ep": ep, "vpp": 1, "sequence_parallel": tp > 1},
                   training={"global_batch": 64, "micro_batch": 1, "recompute": "none", "zero": 1,
                             "framework": "megatron-core", **training})
    doc["model"].update(layers=8, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, gated_ffn=True,
                        seq_len=4096, moe={"experts": 32, "top_k": 3, "expert_ffn_hidden": 4096})
    return doc


def _run(doc: dict, dispatcher: str, **changes: object) -> object:
    d = copy.deepcopy(doc)
    d["training"]["moe_dispatcher"] = dispatcher
    for key, value in changes.items():
        section, field = key.split("__")
        d[section][field] = value
    return predict(d)


def test_dispatcher_is_parsed_round_tripped_and_refused_when_unknown() -> None:
    s = parse_scenario(_moe(moe_dispatcher="allgather"))
    assert s.training.moe_dispatcher == "allgather"
    assert scenario_to_dict(s)["training"]["moe_dispatcher"] == "allgather"
    assert parse_scenario(_moe()).training.moe_dispatcher is None  # auto
    assert "moe_dispatcher" not in scenario_to_dict(parse_scenario(_moe()))["training"]
    with pytest.raises(ScenarioError) as err:
        parse_scenario(_moe(moe_dispatcher="broadcast"))
    assert err.value.field == "training.moe_dispatcher"


def test_auto_follows_the_named_framework_and_is_all_to_all_otherwise() -> None:
    """Megatron-Core's own default is the all-gather dispatcher; NeMo's model configs and an unnamed stack
    run the all-to-all one."""
    doc = _moe(ep=4, pp=2)
    assert predict(doc).step_time_s == pytest.approx(_run(doc, "allgather").step_time_s)  # megatron-core
    for framework, dispatcher in (("auto", "alltoall"), ("nemo", "alltoall"), ("deepspeed", "alltoall")):
        d = copy.deepcopy(doc)
        d["training"]["framework"] = framework
        assert predict(d).step_time_s == pytest.approx(_run(d, dispatcher).step_time_s), framework
    assert _run(doc, "allgather").step_time_s != pytest.approx(_run(doc, "alltoall").step_time_s)


def test_dense_models_ignore_the_dispatcher() -> None:
    dense = scenario(training={"moe_dispatcher": "allgather"})
    assert predict(dense).step_time_s == pytest.approx(predict(scenario()).step_time_s)


def test_tp_only_allgather_moves_one_copy_per_token_instead_of_top_k() -> None:
    """EP = 1, TP 8: the all-to-all dispatcher gathers every routed copy (top_k = 3) over TP, the all-gather
    dispatcher one copy of each token; the expert compute is the same tokens either way."""
    a2a = _run(_moe(), "alltoall")
    ag = _run(_moe(), "allgather")
    assert a2a.breakdown_s["ep_comm"] == ag.breakdown_s["ep_comm"] == 0.0
    assert ag.breakdown_s["tp_comm"] < 0.7 * a2a.breakdown_s["tp_comm"]
    assert ag.breakdown_s["compute"] == pytest.approx(a2a.breakdown_s["compute"], rel=0.03)


def test_allgather_traffic_grows_with_the_expert_parallel_degree_across_nodes() -> None:
    """TP 8 fills the node, so EP ranks sit on other nodes: the gathered buffer is EP x the micro-batch's
    tokens and crosses the NICs, so the dispatcher's time grows about in proportion to EP, while the
    all-to-all dispatcher moves only the routed share."""
    ep2 = _run(_moe(ep=2), "allgather").breakdown_s["ep_comm"]
    ep4 = _run(_moe(ep=4), "allgather").breakdown_s["ep_comm"]
    assert ep2 > 0.0
    assert 1.5 < ep4 / ep2 < 2.6, (ep2, ep4)
    a2a4 = _run(_moe(ep=4), "alltoall").breakdown_s["ep_comm"]
    assert ep4 > a2a4


def test_allgather_dispatch_is_never_hidden_by_ep_overlap() -> None:
    """Megatron-Core overlaps expert-parallel communication only for the all-to-all dispatcher: with the
    overlap the `auto` profile assumes, the all-to-all shrinks in the pipeline steady state, the all-gather
    does not. (Equal per layer; per step up to the bottleneck rank's share of the model, which moves by a hair with
    the other per-layer communication: its last rank holds the output layer beside its whole layers.)"""
    doc = _moe(ep=4, pp=2)

    def ep_comm(dispatcher: str, framework: str) -> float:
        return _run(doc, dispatcher, training__framework=framework).breakdown_s["ep_comm"]

    assert ep_comm("allgather", "auto") == pytest.approx(ep_comm("allgather", "megatron-core"), rel=1e-3)
    assert ep_comm("alltoall", "auto") < ep_comm("alltoall", "megatron-core")


def test_allgather_dispatch_speeds_up_with_nic_bandwidth() -> None:
    slow = _run(_moe(ep=4), "allgather", cluster__nic_gbps=200)
    fast = _run(_moe(ep=4), "allgather", cluster__nic_gbps=400)
    assert fast.breakdown_s["ep_comm"] < 0.75 * slow.breakdown_s["ep_comm"]
    assert fast.step_time_s < slow.step_time_s


# --- a degree given as the list of values a source allows (searched among them only) ----------------------------
def test_degree_lists_are_parsed_round_tripped_and_refused_when_impossible() -> None:
    s = parse_scenario(_moe(ep=4) | {"parallelism": {"tp": 8, "pp": 1, "cp": 1, "ep": [4, 2, 4], "vpp": 1}})
    assert s.parallelism.ep is None and s.parallelism.allowed("ep") == (2, 4)
    assert scenario_to_dict(s)["parallelism"]["ep"] == [2, 4]
    one = parse_scenario(_moe() | {"parallelism": {"tp": 8, "pp": 1, "cp": 1, "ep": [2], "vpp": 1}})
    assert one.parallelism.ep == 2 and one.parallelism.allowed("ep") is None  # a one-value list is that value
    for par, problem in (({"ep": [2, 3]}, "3 does not divide"),
                         ({"tp": [8, 5]}, "5 does not divide"),
                         ({"ep": []}, "1 to 16 integers"),
                         ({"ep": list(range(1, 18))}, "1 to 16 integers"),
                         ({"ep": [2, "four"]}, "must be an integer")):
        doc = _moe()
        doc["parallelism"] = {"tp": 8, "pp": 1, "cp": 1, "ep": 1, "vpp": 1, **par}
        with pytest.raises(ScenarioError) as err:
            parse_scenario(doc)
        assert err.value.field == f"parallelism.{next(iter(par))}" and problem in err.value.message, err.value
    dense = scenario(parallelism={"tp": 8, "pp": [1, 2], "cp": 1, "ep": [1, 2], "vpp": 1})
    with pytest.raises(ScenarioError) as err:
        parse_scenario(dense)
    assert err.value.field == "parallelism.ep" and "mixture-of-experts" in err.value.message


def test_search_stays_inside_the_listed_values() -> None:
    """Listing [2, 4] (what a source allows) keeps the search to those values: the result is the faster of the
    two fixed layouts, and plain auto, which may pick any degree, is never slower."""
    doc = _moe(pp=2, moe_dispatcher="allgather")

    def with_ep(ep: object) -> object:
        d = copy.deepcopy(doc)
        d["parallelism"]["ep"] = ep
        return predict(d)

    fixed = {ep: with_ep(ep).step_time_s for ep in (2, 4)}
    listed = with_ep([2, 4])
    assert listed.parallelism["ep"] == min(fixed, key=fixed.__getitem__)
    assert listed.step_time_s == pytest.approx(min(fixed.values()))
    assert with_ep("auto").step_time_s <= listed.step_time_s * (1 + 1e-9)

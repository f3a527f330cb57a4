from __future__ import annotations

import copy

import pytest

from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.schema.types import ScenarioSpec, scenario_to_dict
from tests.engine._scenarios import scenario


def err(doc: dict) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(doc)
    return info.value


def test_parses_and_fills_defaults() -> None:
    s = parse_scenario(scenario())
    assert isinstance(s, ScenarioSpec)
    assert s.model.kv_heads == 64 and s.model.ffn_hidden == 24576
    assert s.parallelism.tp == 8 and s.parallelism.dp is None  # derived later
    c = s.cluster
    assert (c.gpus_per_node, c.nics_per_node, c.nic_gbps) == (8, 8, 400.0)
    assert (c.fabric, c.topology, c.routing, c.oversubscription, c.pod_gpus) == ("infiniband", "fat-tree", "adaptive", 1.0, 64)
    assert c.tiers == 1  # 64 NICs fit on one 64-port switch


def test_defaults_follow_gpu_and_fabric() -> None:
    doc = scenario(cluster={"gpu": "B300", "fabric": "roce"})
    c = parse_scenario(doc).cluster
    assert c.nic_gbps == 800.0 and c.routing == "ecmp"
    model = dict(scenario()["model"])
    del model["kv_heads"], model["ffn_hidden"]
    s = parse_scenario(scenario(model=model))
    assert s.model.kv_heads == s.model.heads and s.model.ffn_hidden == 4 * s.model.hidden


def test_tiers_derived_from_size() -> None:
    assert parse_scenario(scenario(cluster={"gpus": 512})).cluster.tiers == 2
    big = scenario(cluster={"gpus": 16384}, training={"global_batch": 2048})
    assert parse_scenario(big).cluster.tiers == 3
    big["cluster"]["topology"] = "multi-plane"
    assert parse_scenario(big).cluster.tiers == 2


def test_tp_must_divide_heads_message() -> None:
    doc = scenario(model={**scenario()["model"]}, parallelism={"tp": 3, "pp": 1, "cp": 1})
    doc["cluster"]["gpus"] = 96
    e = err(doc)
    assert str(e) == "parallelism.tp: 3 does not divide model.heads=64"
    assert e.field == "parallelism.tp"


def test_product_must_equal_gpus() -> None:
    e = err(scenario(parallelism={"tp": 8, "pp": 2, "dp": 2, "cp": 1}))
    assert e.field == "parallelism.dp" and "!= cluster.gpus=64" in str(e)


def test_global_batch_divisible_by_dp_times_micro_batch() -> None:
    e = err(scenario(training={"global_batch": 10, "micro_batch": 1}))
    assert e.field == "training.global_batch"
    e = err(scenario(training={"global_batch": 64, "micro_batch": 3}))
    assert e.field == "training.global_batch" and "dp*micro_batch=12" in str(e)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.update(extra=1), "extra"),
        (lambda d: d["model"].update(depth=3), "model.depth"),
        (lambda d: d["cluster"].update(speed=3), "cluster.speed"),
        (lambda d: d["parallelism"].update(zz=1), "parallelism.zz"),
        (lambda d: d["model"].pop("layers"), "model.layers"),
        (lambda d: d.pop("cluster"), "cluster"),
        (lambda d: d["training"].pop("tokens"), "training.tokens"),
        (lambda d: d["model"].update(layers="many"), "model.layers"),
        (lambda d: d["model"].update(hidden=0), "model.hidden"),
        (lambda d: d["training"].update(precision="fp4"), "training.precision"),
        (lambda d: d["training"].update(recompute="some"), "training.recompute"),
        (lambda d: d["training"].update(zero=4), "training.zero"),
        (lambda d: d["training"].update(tokens=-1), "training.tokens"),
        (lambda d: d["cluster"].update(gpu="Z100"), "cluster.gpu"),
        (lambda d: d["cluster"].update(fabric="ethernet"), "cluster.fabric"),
        (lambda d: d["cluster"].update(topology="torus"), "cluster.topology"),
        (lambda d: d["cluster"].update(oversubscription=0.5), "cluster.oversubscription"),
        (lambda d: d["cluster"].update(tiers=4), "cluster.tiers"),
        (lambda d: d["cluster"].update(routing="random"), "cluster.routing"),
        (lambda d: d["parallelism"].update(ep=2), "parallelism.ep"),
        (lambda d: d["parallelism"].update(pp=1, vpp=2), "parallelism.vpp"),
        (lambda d: d["parallelism"].update(sequence_parallel="yes"), "parallelism.sequence_parallel"),
        (lambda d: d["model"].update(moe={"experts": 8, "top_k": 9, "expert_ffn_hidden": 100}), "model.moe.top_k"),
        (lambda d: d["model"].update(kv_heads=5), "model.kv_heads"),
    ],
)
def test_rejects_with_field_name(mutate, field: str) -> None:
    doc = scenario()
    mutate(doc)
    e = err(doc)
    assert e.field == field
    assert str(e).startswith(f"{field}: ")
    assert isinstance(e, ValueError)


def test_auto_settings_and_passthrough() -> None:
    doc = scenario(training={"micro_batch": "auto", "recompute": "auto", "zero": "auto"}, parallelism="auto")
    # costs are kept as written (ranges included) and also resolved at their likely values
    doc["costs"] = {"usd_per_kwh": {"low": 0.06, "likely": 0.08, "high": 0.12}, "prices": {"QM9700": 40000}}
    doc["uncertainty"] = {"samples": 100}
    doc["cluster"].update(switch="QM9700", nic="CX7-400G")
    s = parse_scenario(doc)
    assert s.training.micro_batch is None and s.training.recompute is None and s.training.zero is None
    assert s.parallelism.any_auto and s.parallelism.tp is None
    assert s.costs == doc["costs"] and s.uncertainty == {"samples": 100}
    assert s.cluster.switch == "QM9700" and s.cluster.nic == "CX7-400G"
    assert s.cost_params is not None and s.cost_params.values["usd_per_kwh"] == 0.08
    assert set(s.ranges) == {"costs.usd_per_kwh"}


def test_single_auto_degree_and_omitted_dp() -> None:
    doc = scenario(parallelism={"tp": "auto", "pp": 2, "cp": 1})
    s = parse_scenario(doc)
    assert s.parallelism.tp is None and s.parallelism.pp == 2 and s.parallelism.dp is None


def test_round_trip() -> None:
    doc = scenario(training={"micro_batch": "auto"})
    doc["name"] = "run"
    s = parse_scenario(doc)
    d = scenario_to_dict(s)
    assert parse_scenario(d) == s
    assert d["training"]["micro_batch"] == "auto"
    assert scenario_to_dict(parse_scenario(copy.deepcopy(d))) == d


def test_parse_is_idempotent_on_scenario() -> None:
    s = parse_scenario(scenario())
    assert parse_scenario(s) is s

"""The one declaration of the scenario document (engine.schema.fields): what derives from it agrees with it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from engine.document import costs_section, parse, ranges
from engine.document.parse import parse_scenario
from engine.errors import NOT_A_CHOICE, UNKNOWN_KEY, WRONG_TYPE, ScenarioError
from engine.schema.bounds import BOUNDS, bound_for
from engine.schema.fields import (
    BY_PATH,
    FIELDS,
    MANDATORY,
    field,
    keys,
    required,
    section_fields,
)
from engine.schema.json_schema import json_schema
from engine.schema.types import scenario_to_dict
from tests.engine._scenarios import scenario

SECTIONS = ("", "model", "model.moe", "model.mla", "training", "parallelism", "cluster", "costs", "costs.goodput", "uncertainty")


def test_every_number_has_its_bound_and_every_document_bound_is_declared() -> None:
    for f in FIELDS:
        if f.kind in ("int", "number"):
            assert f.bound is not None, f.path
            assert f.bound.kind == ("int" if f.kind == "int" else "float"), f.path
    documented = {p for p in BOUNDS if p.split(".")[0] in {"model", "training", "parallelism", "cluster", "costs",
                                                            "uncertainty"}}
    assert documented - set(BY_PATH) == {"costs.prices.*"}  # a price per catalog key: costs.prices is declared


def test_declaration_is_consistent() -> None:
    assert len(BY_PATH) == len(FIELDS)
    for f in FIELDS:
        assert f.section in SECTIONS, f.path
        assert (f.choices is not None) == (f.kind in ("choice", "choices")), f.path
        if f.default_by:
            assert set(f.default) == set(field(f"{f.section}.{f.default_by}").choices.values()), f.path  # type: ignore[union-attr]
        if f.choices is not None and not f.required and not f.default_by and f.default not in (None, "auto"):
            assert f.default in f.choices.values(), f.path
        assert f.help and "\n" not in f.help, f.path


def test_the_parser_key_sets_are_the_declaration() -> None:
    assert keys("") == parse.TOP_KEYS and parse.REQUIRED_TOP == ("model", "training", "parallelism", "cluster")
    assert parse.MODEL_REQUIRED == ("layers", "hidden", "heads", "vocab", "seq_len")
    assert keys("cluster") == parse.CLUSTER_KEYS and parse.CLUSTER_REQUIRED == ("gpu", "gpus")
    assert keys("parallelism") == parse.PAR_KEYS and keys("model.moe") == parse.MOE_KEYS
    assert keys("model.mla") == parse.MLA_KEYS
    assert keys("costs") == costs_section.COST_KEYS and keys("costs.goodput") == costs_section.GOODPUT_KEYS
    assert keys("uncertainty") == ranges.UNCERTAINTY_KEYS


@pytest.mark.parametrize("section", ["model", "training", "parallelism", "cluster", "costs", "uncertainty"])
def test_an_undeclared_key_is_refused_listing_the_declared_ones(section: str) -> None:
    doc = scenario()
    doc[section] = {**(doc.get(section) or {}), "colour": 1} if section != "parallelism" else {"colour": 1}
    with pytest.raises(ScenarioError) as exc:
        parse_scenario(doc)
    assert exc.value.field == f"{section}.colour" and exc.value.code == UNKNOWN_KEY
    assert exc.value.message.endswith(", ".join(sorted(keys(section))))


@pytest.mark.parametrize("f", [f for f in FIELDS if f.kind == "choice" and f.section in ("training", "cluster")],
                         ids=lambda f: f.path)
def test_every_choice_is_accepted_and_nothing_else(f: Any) -> None:
    section = f.section
    for value in f.choices.values():
        doc = scenario()
        doc[section][f.key] = value
        if f.path == "cluster.routing":  # which modes a switch supports is the catalog's: ask a switch with all
            doc["cluster"].update(fabric="roce", switch="SN5600")
        if f.path == "training.activation_cache":  # an fp8 cache needs a quantised precision
            doc["training"]["precision"] = "fp8"
        parse_scenario(doc)
    doc = scenario()
    doc[section][f.key] = "magic"
    with pytest.raises(ScenarioError) as exc:
        parse_scenario(doc)
    assert exc.value.field == f.path and exc.value.code == NOT_A_CHOICE
    assert exc.value.message.startswith("must be one of " + ", ".join(f.choices.values()))
    assert (' or "auto"' in exc.value.message) == f.auto


@pytest.mark.parametrize("f", [f for f in FIELDS if f.kind == "choices"], ids=lambda f: f.path)
def test_every_choice_set_is_accepted_as_a_list_and_nothing_else(f: Any) -> None:
    values = list(f.choices.values())
    doc = scenario()
    if "mla_up_proj" in values:  # recomputing MLA's up-projections needs an MLA model
        doc["model"].pop("kv_heads", None)
        doc["model"].pop("head_dim", None)
        doc["model"]["mla"] = {"kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                               "v_head_dim": 128}
    doc[f.section][f.key] = list(reversed(values))
    assert getattr(getattr(parse_scenario(doc), f.section), f.key) == tuple(values)  # the enum's order
    for bad, where, code in ((values[0], f.path, WRONG_TYPE), ([values[0], "magic"], f"{f.path}.1", NOT_A_CHOICE)):
        doc[f.section][f.key] = bad
        with pytest.raises(ScenarioError) as exc:
            parse_scenario(doc)
        assert exc.value.field == where and exc.value.code == code


def test_static_defaults_are_the_parsed_defaults() -> None:
    s = parse_scenario(scenario())
    for f in section_fields("training"):
        if f.key not in scenario()["training"] and f.default not in (None, "auto", MANDATORY):
            assert getattr(s.training, f.key) == f.default, f.path
    assert s.cluster.fabric == field("cluster.fabric").default and s.cluster.topology == field("cluster.topology").default
    assert s.cluster.routing == field("cluster.routing").default_for({"fabric": "infiniband"}) == "adaptive"
    assert s.cluster.qps_per_connection == field("cluster.qps_per_connection").default_for({"routing": "adaptive"})
    roce = parse_scenario(scenario(cluster={"fabric": "roce", "routing": "ecmp-qp"})).cluster
    assert roce.qps_per_connection == 4


CANONICAL_CASES: list[dict[str, Any]] = [
    {},
    {"training": {"attention": "flash", "dropout": False, "framework": "nemo"}},
    {"cluster": {"fabric": "roce", "routing": "ecmp-qp", "qps_per_connection": 8, "oversubscription": 2.0,
                 "pod_gpus": 32}},
    {"parallelism": "auto"},
    {"parallelism": {"tp": [2, 4], "pp": "auto", "cp": 1}},
]


@pytest.mark.parametrize("change", CANONICAL_CASES)
def test_the_writer_writes_declared_keys_and_round_trips(change: dict[str, Any]) -> None:
    doc = copy.deepcopy(scenario())
    for key, value in change.items():
        doc[key] = value if not isinstance(value, dict) or not isinstance(doc.get(key), dict) else {**doc[key], **value}
    s = parse_scenario(doc)
    out = scenario_to_dict(s)
    assert set(out) <= keys("")
    for section in ("model", "training", "cluster"):
        assert set(out[section]) <= keys(section), section
        assert set(required(section)) <= set(out[section]), section
    if isinstance(out["parallelism"], dict):
        assert set(out["parallelism"]) <= keys("parallelism")
    again = parse_scenario(out)
    assert scenario_to_dict(again) == out
    assert (again.model, again.training, again.parallelism, again.cluster) == (s.model, s.training, s.parallelism,
                                                                                s.cluster)


def test_optional_settings_left_out_stay_out_of_the_canonical_document() -> None:
    out = scenario_to_dict(parse_scenario(scenario()))
    assert not {"attention", "dropout", "framework", "expert_kernel", "moe_dispatcher"} & set(out["training"])
    assert not {"pod_gpus", "in_network_reduction", "qps_per_connection", "switch", "nic"} & set(out["cluster"])
    doc = scenario()
    del doc["training"]["micro_batch"]
    assert scenario_to_dict(parse_scenario(doc))["training"]["micro_batch"] == "auto"  # an auto setting: "auto"


def test_json_schema_of_a_section() -> None:
    cluster = json_schema("cluster")
    assert cluster["required"] == ["gpu", "gpus"] and cluster["additionalProperties"] is False
    assert cluster["properties"]["fabric"]["enum"] == ["infiniband", "roce"]
    gpus = cluster["properties"]["gpus"]["oneOf"][0]
    bound = bound_for("cluster.gpus")
    assert bound is not None and (gpus["minimum"], gpus["maximum"]) == (bound.lo, bound.hi)
    assert "required" not in json_schema("cluster", partial=True)
    tp = json_schema("parallelism")["properties"]["tp"]["oneOf"]
    assert {"type": "string", "enum": ["auto"]} in tp and any(o["type"] == "array" for o in tp)

"""The API's scenario fields take their schema, choices and help from the engine's one declaration."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db


def _components() -> dict[str, Any]:
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    return schema["components"]["schemas"]


def test_openapi_describes_the_document_sections_from_the_declaration() -> None:
    from engine.schema.enums import Fabric, Precision
    from engine.schema.json_schema import json_schema

    components = _components()
    scenario = next(v for k, v in components.items() if k.startswith("Scenario") and "cluster" in v.get("properties", {}))
    cluster = scenario["properties"]["cluster"]
    assert cluster["properties"]["fabric"]["enum"] == list(Fabric.values())
    assert {k: v for k, v in cluster.items() if k != "description"} == json_schema("cluster", partial=True)
    workload = components["Workload"]["properties"]
    assert workload["training"]["properties"]["precision"]["enum"] == list(Precision.values())
    assert "auto" in str(workload["parallelism"])


def test_fleet_choices_and_help_are_the_documents() -> None:
    from engine.schema.bounds import BOUNDS
    from engine.schema.enums import Fabric, TopologyKind
    from planning.api.serializers import FleetSerializer

    fields: Any = FleetSerializer().fields
    assert list(fields["fabric"].choices.items()) == Fabric.choices()
    assert list(fields["topology"].choices.items()) == TopologyKind.choices()
    assert "InfiniBand" in fields["fabric"].help_text
    assert "576" in fields["gpus_per_node"].help_text  # the bound of cluster.gpus_per_node
    assert BOUNDS["cluster.gpus_per_node"].hi == 576


def test_a_fleet_fabric_outside_the_enum_is_refused(world: dict[str, Any], api_client_for: Any) -> None:
    client = api_client_for(world["users"]["planner"])
    r = client.post("/api/v1/fleets/", {"name": "f", "server_model": "HGX-H100", "server_count": 4,
                                         "fabric": "ethernet"}, format="json")
    assert r.status_code == 400 and "fabric" in r.json()["errors"]

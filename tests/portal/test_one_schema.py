"""Issue #21, "One schema": the portal writes no rule of its own.

The same cluster (Llama-3-8B on 1,024 H100, a 4:1 oversubscribed fat-tree, no pod given) posted through the
portal's builder (a browser form submit) and through the API is stored as the same document and predicts the
same figures. The portal used to write ``pod_gpus = 32 x gpus_per_node`` on its own, so the two predicted MFU
40.7% and 39.2%.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from tests.portal.conftest import BUILDER_POST
from tests.portal.test_pages import login

pytestmark = pytest.mark.django_db

CLUSTER = {"gpu": "H100-SXM", "gpus": 1024, "gpus_per_node": 8, "nics_per_node": 8, "nic_gbps": 400,
           "fabric": "infiniband", "topology": "fat-tree", "oversubscription": 4.0}


def test_the_portal_and_the_api_store_and_predict_the_same_cluster(
    client: Any, api_client_for: Any, make_user: Any, team: Any, catalog: Any
) -> None:
    from planning import services
    from planning.models import Scenario

    user = make_user("planner", team)
    login(client, user)
    form = {**BUILDER_POST, "name": "portal", "gpus": 1024, "topology": "fat-tree", "oversubscription": 4,
            "pod_gpus": ""}
    r = client.post(reverse("scenario-new"), form)
    assert r.status_code == 302, r.content.decode()[:2000]
    portal = Scenario.objects.get(name="portal")
    assert portal.cluster == CLUSTER  # exactly what was asked: no pod of the portal's own

    api = api_client_for(user)
    workload = portal.workload
    r = api.post("/api/v1/workloads/", {"name": "api", "model": workload.model, "training": workload.training,
                                         "parallelism": workload.parallelism}, format="json")
    assert r.status_code == 201, r.content
    r = api.post("/api/v1/scenarios/", {"name": "api", "workload": r.json()["id"], "cluster": CLUSTER,
                                         "costs": portal.costs}, format="json")
    assert r.status_code == 201, r.content
    from_api = Scenario.objects.get(pk=r.json()["id"])

    assert services.scenario_document(scenario=from_api) == services.scenario_document(scenario=portal)
    results = []
    for scenario in (portal, from_api):
        r = api.post("/api/v1/preview/", {"scenario": scenario.pk}, format="json")
        assert r.status_code == 200, r.content
        results.append({k: v for k, v in r.json().items() if k != "server_time_ms"})
    assert results[0] == results[1]
    assert 0 < results[0]["mfu"] < 1


def test_a_pod_given_in_the_portal_is_written_as_given(client: Any, make_user: Any, team: Any, catalog: Any) -> None:
    from planning.models import Scenario

    login(client, make_user("planner", team))
    form = {**BUILDER_POST, "name": "pod", "gpus": 1024, "topology": "fat-tree", "oversubscription": 4,
            "pod_gpus": 256}
    assert client.post(reverse("scenario-new"), form).status_code == 302
    assert Scenario.objects.get(name="pod").cluster == {**CLUSTER, "pod_gpus": 256}


def test_builder_inputs_take_choices_limits_and_help_from_the_declaration(catalog: Any) -> None:
    from engine.schema.bounds import BOUNDS, MAX_GPUS
    from engine.schema.enums import (
        Fabric,
        Framework,
        MoeDispatcher,
        Precision,
        Recompute,
        Routing,
        TopologyKind,
    )
    from engine.schema.fields import field
    from portal.forms import FleetForm, ScenarioBuilderForm

    form = ScenarioBuilderForm()
    gpus = form.fields["gpus"]
    assert (gpus.min_value, gpus.max_value) == (1, MAX_GPUS)  # type: ignore[attr-defined]
    assert form.fields["gpus"].help_text == field("cluster.gpus").help
    pue = form.fields["pue"]
    assert (pue.min_value, pue.max_value) == (BOUNDS["costs.pue"].lo, BOUNDS["costs.pue"].hi)  # type: ignore[attr-defined]
    # an open lower end (> 0) sets no minimum: the engine refuses 0, naming the field
    assert form.fields["avg_utilization"].min_value is None  # type: ignore[attr-defined]
    assert form.fields["tokens_b"].max_value == BOUNDS["training.tokens"].hi / 1e9  # type: ignore[attr-defined]

    def choices(name: str) -> list[Any]:
        return list(form.fields[name].choices)  # type: ignore[attr-defined]

    assert choices("fabric") == Fabric.choices() and choices("topology") == TopologyKind.choices()
    assert choices("precision") == Precision.choices()
    assert choices("routing")[1:] == Routing.choices() and choices("routing")[0][0] == ""
    for name, enum in (("framework", Framework), ("moe_dispatcher", MoeDispatcher), ("recompute", Recompute)):
        assert choices(name)[0][0] == "auto" and choices(name)[1:] == enum.choices()
    fleet = FleetForm()
    assert fleet.fields["gpus_per_node"].max_value == BOUNDS["cluster.gpus_per_node"].hi  # type: ignore[attr-defined]
    assert list(fleet.fields["fabric"].choices) == Fabric.choices()  # type: ignore[attr-defined]


def test_templates_show_the_enum_labels(client: Any, make_user: Any, team: Any, scenario_for: Any) -> None:
    """The scenario page used to label anything not RoCE "InfiniBand"; labels now come from the Fabric enum."""
    from planning import services

    user = make_user("planner", team)
    login(client, user)
    roce = scenario_for(team, user, name="on RoCE", fabric="roce")
    html = client.get(reverse("scenario-detail", args=[roce.pk])).content.decode()
    assert "400G Ethernet (RoCE)" in html
    services.fleet_create(team=team, user=make_user("admin", team=team), name="Ashburn", server_model="HGX-H100",
                          server_count=16, nic_gbps=400, fabric="roce", topology="fat-tree", oversubscription=1.0)
    html = client.get(reverse("dashboard")).content.decode()
    assert "400G Ethernet (RoCE) · fat-tree" in html and "128 GPUs on Ethernet (RoCE)" in html

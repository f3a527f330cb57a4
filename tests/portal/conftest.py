"""Fixtures for portal page tests: a loaded catalog, a scenario and runs with real engine results."""

from __future__ import annotations

import copy
from typing import Any

import pytest

DOC: dict[str, Any] = {
    "model": {"name": "Llama-3-8B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336,
              "gated_ffn": True, "vocab": 128256, "seq_len": 8192},
    "training": {"global_batch": 512, "tokens": 1e12, "precision": "bf16"},
    "parallelism": "auto",
    "cluster": {"gpu": "H100-SXM", "gpus": 256, "gpus_per_node": 8, "nics_per_node": 8, "nic_gbps": 400,
                "fabric": "infiniband", "topology": "rail-optimized", "oversubscription": 1.0},
    "costs": {"usd_per_kwh": 0.08, "pue": 1.3},
}

BUILDER_POST: dict[str, Any] = {
    "name": "Llama 8B on 256 H100", "description": "", "preset": "llama3-8b", "model_name": "Llama-3-8B",
    "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336, "gated_ffn": "on",
    "vocab": 128256, "seq_len": 8192, "global_batch": 512, "tokens_b": 1000, "precision": "bf16",
    "recompute": "auto", "par_mode": "auto", "tp": "", "pp": "", "gpu": "H100-SXM", "gpus": 256,
    "gpus_per_node": 8, "nic_gbps": 400, "fabric": "infiniband", "topology": "rail-optimized",
    "oversubscription": 1.0, "usd_per_kwh": 0.08, "pue": 1.3, "depreciation_years": 4, "avg_utilization": 0.8,
}


@pytest.fixture
def catalog(db: Any) -> Any:
    from planning import services

    return services.catalog_load_default()


@pytest.fixture
def scenario_for(catalog: Any) -> Any:
    from planning import services

    def _make(team: Any, user: Any, name: str = "Llama 8B", model: dict[str, Any] | None = None,
              **cluster: Any) -> Any:
        """A saved scenario of DOC for ``team``, its cluster updated by ``cluster`` and its model by ``model``."""
        doc = copy.deepcopy(DOC)
        doc["cluster"].update(cluster)
        doc["model"].update(model or {})
        workload = services.workload_create(team=team, user=user, name=doc["model"]["name"], model=doc["model"],
                                            training=doc["training"], parallelism=doc["parallelism"])
        return services.scenario_create(team=team, user=user, name=name, workload=workload,
                                        cluster=doc["cluster"], costs=doc["costs"])

    return _make


@pytest.fixture
def finished_run(catalog: Any) -> Any:
    """A SUCCEEDED run with a real engine result (no worker needed)."""
    from engine.cost.tco import tco
    from planning import services as planning
    from simulations import services as sim
    from simulations.models import RunKind, RunStatus

    def _make(scenario: Any, user: Any, *, monte_carlo: int = 200, **cluster: Any) -> Any:
        doc, version, values = planning.scenario_resolve(scenario=scenario)
        doc["cluster"].update(cluster)
        run = sim.run_create(team=scenario.team, user=user, kind=RunKind.TCO, document=doc, version=version,
                             values=values, scenario=scenario, overrides=cluster,
                             label=", ".join(f"{k}={v}" for k, v in cluster.items()) or scenario.name)
        result = sim.jsonable(tco(doc, catalog=values, monte_carlo=monte_carlo, sensitivity=True))
        type(run).objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED, result=result, progress=100)
        run.refresh_from_db()
        return run

    return _make


def saved_model(name: str) -> dict[str, Any]:
    """The model section of the scenario saved under ``name``."""
    from planning.models import Scenario

    return dict(Scenario.objects.get(name=name).workload.model)


def refused_builder_post(client: Any, data: dict[str, Any], url: str | None = None) -> tuple[Any, Any]:
    """POST builder ``data`` (to ``url``, default the new-scenario page) that the portal must refuse: the page again
    with status 400 and, for a new scenario, nothing saved under ``data["name"]``. Returns (response, form errors)."""
    from django.urls import reverse

    from planning.models import Scenario

    client.raise_request_exception = False
    r = client.post(url or reverse("scenario-new"), data)
    assert r.status_code == 400, r.status_code
    if url is None:
        assert not Scenario.objects.filter(name=data["name"]).exists()
    return r, r.context["form"].errors

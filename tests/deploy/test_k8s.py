"""Kubernetes manifests in deploy/.

Each manifest is validated against the Kubernetes OpenAPI schemas shipped by kubernetes-validate
(strict mode: unknown fields are errors), then the manifests are cross-checked with each other, with
docker-compose.yml and with the project (commands, documented variables, probe paths).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.deploy import (
    ROOT,
    as_argv,
    celery_commands,
    command_problems,
    documented_vars,
    run_celery_help,
    split_shell,
)

DEPLOY = ROOT / "deploy"
K8S_VERSION = "1.31.0"
NAMESPACE = "fabric-planner"
SECRET_NAME = "fabric-planner-secrets"
CONFIGMAP_NAME = "fabric-planner-config"
MANIFESTS = sorted(p for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml")
SECRET_KEYS = {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "FP_DEMO_PASSWORD"}


def _load(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


@pytest.fixture(scope="module")
def kustomization() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())


@pytest.fixture(scope="module")
def resources(kustomization: dict[str, Any]) -> list[dict[str, Any]]:
    """Every object the kustomization applies."""
    return [doc for name in kustomization["resources"] for doc in _load(DEPLOY / name)]


def _one(resources: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [r for r in resources if r["kind"] == kind and r["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind}/{name}, found {len(found)}"
    return found[0]


def _of_kind(resources: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in resources if r["kind"] == kind]


def _pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["template"]["spec"]


def _workloads(resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in resources if r["kind"] in ("Deployment", "Job", "StatefulSet", "DaemonSet", "CronJob")]


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = _pod_spec(obj)
    return list(spec.get("initContainers") or []) + list(spec["containers"])


def _deployment_by_component(resources: list[dict[str, Any]], component: str) -> dict[str, Any]:
    found = [
        d
        for d in _of_kind(resources, "Deployment")
        if d["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/component") == component
    ]
    assert len(found) == 1, component
    return found[0]


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


# --- schema validation --------------------------------------------------------------------------------
def test_manifests_found() -> None:
    assert len(MANIFESTS) >= 10


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifest_is_valid_kubernetes(path: Path) -> None:
    docs = _load(path)
    assert docs, path
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d["spec"]["template"]["spec"]["containers"][0].update(livenesProbe={}),
        lambda d: d["spec"].update(replicas="two"),
        lambda d: d["spec"]["template"]["spec"]["containers"][0]["resources"].update(request={"cpu": "1"}),
    ],
    ids=["misspelt-field", "wrong-type", "unknown-resources-key"],
)
def test_validation_is_strict(mutate: Any) -> None:
    """The schema check above can fail: typos and wrong types in a Deployment are rejected."""
    doc = copy.deepcopy(_load(DEPLOY / "web-deployment.yaml")[0])
    mutate(doc)
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


# --- kustomization ------------------------------------------------------------------------------------
def test_kustomization_lists_every_manifest_but_the_secret_example(kustomization: dict[str, Any]) -> None:
    listed = kustomization["resources"]
    assert len(listed) == len(set(listed))
    for name in listed:
        assert (DEPLOY / name).is_file(), name
    assert "secret.example.yaml" not in listed
    expected = {p.name for p in MANIFESTS} - {"secret.example.yaml"}
    assert set(listed) == expected
    assert kustomization["namespace"] == NAMESPACE


def test_no_secret_is_applied(resources: list[dict[str, Any]]) -> None:
    assert _of_kind(resources, "Secret") == []


def test_secret_example_has_the_referenced_name_and_keys() -> None:
    (secret,) = _load(DEPLOY / "secret.example.yaml")
    assert secret["kind"] == "Secret" and secret["metadata"]["name"] == SECRET_NAME
    assert set(secret["stringData"]) == SECRET_KEYS


def test_namespace(resources: list[dict[str, Any]]) -> None:
    assert _one(resources, "Namespace", NAMESPACE)
    for r in resources:
        if r["kind"] != "Namespace":
            assert r["metadata"].get("namespace") == NAMESPACE, f"{r['kind']}/{r['metadata']['name']}"


def test_images_are_one_kustomize_image(
    resources: list[dict[str, Any]], kustomization: dict[str, Any]
) -> None:
    images = {c["image"].split(":")[0] for w in _workloads(resources) for c in _containers(w)}
    assert len(images) == 1
    assert images == {i["name"] for i in kustomization["images"]}


# --- configuration and secrets ---------------------------------------------------------------------
def test_every_container_gets_config_and_secret_by_reference(resources: list[dict[str, Any]]) -> None:
    configmaps = {c["metadata"]["name"] for c in _of_kind(resources, "ConfigMap")}
    for w in _workloads(resources):
        for c in _containers(w):
            refs = c.get("envFrom") or []
            cm = {r["configMapRef"]["name"] for r in refs if "configMapRef" in r}
            secrets = {r["secretRef"]["name"] for r in refs if "secretRef" in r}
            secrets |= {
                e["valueFrom"]["secretKeyRef"]["name"]
                for e in c.get("env") or []
                if "secretKeyRef" in (e.get("valueFrom") or {})
            }
            assert cm and cm <= configmaps, f"{w['metadata']['name']}/{c['name']}: {cm}"
            assert secrets == {SECRET_NAME}, f"{w['metadata']['name']}/{c['name']}"


def test_configmap_holds_no_secrets_and_production_settings(resources: list[dict[str, Any]]) -> None:
    data = _one(resources, "ConfigMap", CONFIGMAP_NAME)["data"]
    assert not (set(data) & SECRET_KEYS)
    assert data["DJANGO_ENV"] == "production"
    assert data["DEBUG"] == "false"
    assert data["ALLOWED_HOSTS"]
    assert all(isinstance(v, str) for v in data.values())


def test_every_variable_is_documented_in_env_example(resources: list[dict[str, Any]]) -> None:
    names = set(_one(resources, "ConfigMap", CONFIGMAP_NAME)["data"])
    names |= set(_load(DEPLOY / "secret.example.yaml")[0]["stringData"])
    for w in _workloads(resources):
        for c in _containers(w):
            names |= {e["name"] for e in c.get("env") or []}
            for e in c.get("env") or []:
                ref = (e.get("valueFrom") or {}).get("secretKeyRef")
                if ref:
                    names.add(ref["key"])
    assert sorted(names - set(documented_vars())) == []


# --- workloads --------------------------------------------------------------------------------------
def test_every_workload_has_resources_and_runs_as_non_root(resources: list[dict[str, Any]]) -> None:
    for w in _workloads(resources):
        pod = _pod_spec(w)
        assert pod["securityContext"]["runAsNonRoot"] is True, w["metadata"]["name"]
        assert pod["securityContext"].get("runAsUser", 1) != 0
        for c in _containers(w):
            where = f"{w['metadata']['name']}/{c['name']}"
            res = c["resources"]
            assert {"cpu", "memory"} <= set(res["requests"]), where
            assert "memory" in res["limits"], where
            assert c["securityContext"]["allowPrivilegeEscalation"] is False, where


def test_every_deployment_has_probes(resources: list[dict[str, Any]]) -> None:
    deployments = _of_kind(resources, "Deployment")
    assert len(deployments) == 3
    for d in deployments:
        for c in d["spec"]["template"]["spec"]["containers"]:
            assert c.get("livenessProbe"), f"{d['metadata']['name']}/{c['name']}: livenessProbe"
            for probe in ("livenessProbe", "readinessProbe"):
                spec = c.get(probe)
                if spec and "exec" in spec:
                    assert command_problems(spec["exec"]["command"]) == [], (d["metadata"]["name"], probe)


def test_deployment_selectors_match_their_pods(resources: list[dict[str, Any]]) -> None:
    for d in _of_kind(resources, "Deployment"):
        assert _selects(d["spec"]["selector"]["matchLabels"], d["spec"]["template"]["metadata"]["labels"])


def test_web(resources: list[dict[str, Any]]) -> None:
    web = _deployment_by_component(resources, "web")
    (c,) = web["spec"]["template"]["spec"]["containers"]
    assert as_argv(c["command"]) == [
        "gunicorn",
        "planner.wsgi:application",
        "--bind",
        "0.0.0.0:8000",
        "--workers",
        "3",
    ]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports.get("http") == 8000
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    allowed = _one(resources, "ConfigMap", CONFIGMAP_NAME)["data"]["ALLOWED_HOSTS"].split(",")
    for probe in ("readinessProbe", "livenessProbe"):
        get = c[probe]["httpGet"]
        assert get["port"] in (8000, "http")
        # Django answers 400 to a Host outside ALLOWED_HOSTS, which would fail every probe.
        hosts = [h["value"] for h in get.get("httpHeaders") or [] if h["name"].lower() == "host"]
        assert hosts and hosts[0] in [h.strip() for h in allowed], probe
    assert web["spec"]["replicas"] >= 2


def test_probe_paths_are_routed() -> None:
    from django.urls import resolve

    from planner import health

    assert resolve("/healthz").func is health.healthz
    assert resolve("/readyz").func is health.readyz


def test_web_service_and_pdb_select_web_pods(resources: list[dict[str, Any]]) -> None:
    web = _deployment_by_component(resources, "web")
    labels = web["spec"]["template"]["metadata"]["labels"]
    port_names = {p["name"] for c in _containers(web) for p in c.get("ports") or []}
    services = [s for s in _of_kind(resources, "Service") if _selects(s["spec"]["selector"], labels)]
    assert len(services) == 1
    for port in services[0]["spec"]["ports"]:
        assert port["targetPort"] in port_names or port["targetPort"] == 8000
    pdbs = _of_kind(resources, "PodDisruptionBudget")
    assert any(_selects(p["spec"]["selector"]["matchLabels"], labels) for p in pdbs)
    for p in pdbs:
        if "minAvailable" in p["spec"]:
            assert p["spec"]["minAvailable"] < web["spec"]["replicas"], "the PDB would block every drain"


def test_ingress_routes_to_the_web_service(resources: list[dict[str, Any]]) -> None:
    services = {s["metadata"]["name"]: s for s in _of_kind(resources, "Service")}
    allowed = _one(resources, "ConfigMap", CONFIGMAP_NAME)["data"]["ALLOWED_HOSTS"].split(",")
    for ing in _of_kind(resources, "Ingress"):
        for rule in ing["spec"]["rules"]:
            assert rule["host"] in allowed
            for path in rule["http"]["paths"]:
                backend = path["backend"]["service"]
                svc = services[backend["name"]]
                port_ref = backend["port"].get("name") or backend["port"].get("number")
                assert port_ref in {p.get("name") for p in svc["spec"]["ports"]} | {
                    p["port"] for p in svc["spec"]["ports"]
                }


def test_worker(resources: list[dict[str, Any]]) -> None:
    worker = _deployment_by_component(resources, "worker")
    (c,) = worker["spec"]["template"]["spec"]["containers"]
    assert as_argv(c["command"]) == [
        "celery",
        "-A",
        "planner",
        "worker",
        "-Q",
        "default,simulations",
        "-l",
        "INFO",
        "--concurrency",
        "2",
    ]
    assert command_problems(c["command"]) == []
    assert "inspect ping" in " ".join(c["livenessProbe"]["exec"]["command"])


def test_worker_hpa_targets_the_worker_deployment(resources: list[dict[str, Any]]) -> None:
    worker = _deployment_by_component(resources, "worker")
    (hpa,) = _of_kind(resources, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    ref = hpa["spec"]["scaleTargetRef"]
    assert (ref["apiVersion"], ref["kind"], ref["name"]) == (
        "apps/v1",
        "Deployment",
        worker["metadata"]["name"],
    )
    assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
    # CPU utilisation targets are relative to requests: the worker must request CPU.
    assert all("cpu" in c["resources"]["requests"] for c in _containers(worker))


def test_beat_is_a_single_recreated_replica(resources: list[dict[str, Any]]) -> None:
    beat = _deployment_by_component(resources, "beat")
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"]["type"] == "Recreate"
    (c,) = beat["spec"]["template"]["spec"]["containers"]
    argv = as_argv(c["command"])
    assert argv[:4] == ["celery", "-A", "planner", "beat"]
    assert command_problems(argv) == []
    targets = {h["spec"]["scaleTargetRef"]["name"] for h in _of_kind(resources, "HorizontalPodAutoscaler")}
    assert beat["metadata"]["name"] not in targets


def test_migrate_job_runs_migrate(resources: list[dict[str, Any]]) -> None:
    (job,) = _of_kind(resources, "Job")
    (c,) = job["spec"]["template"]["spec"]["containers"]
    steps = list(split_shell(as_argv(c["command"])))
    assert steps[0] == ["python", "manage.py", "migrate", "--noinput"]
    assert ["python", "manage.py", "load_default_catalog"] in steps
    assert job["spec"]["template"]["spec"]["restartPolicy"] in ("Never", "OnFailure")
    assert job["spec"].get("backoffLimit", 6) >= 1
    assert command_problems(c["command"]) == []


def test_commands_match_docker_compose(resources: list[dict[str, Any]]) -> None:
    """Compose and Kubernetes start the same processes."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    for component in ("web", "worker", "beat"):
        (c,) = _deployment_by_component(resources, component)["spec"]["template"]["spec"]["containers"]
        assert as_argv(c["command"]) == as_argv(compose[component]["command"]), component


def test_celery_command_lines_parse(resources: list[dict[str, Any]]) -> None:
    commands: list[Any] = []
    for d in _of_kind(resources, "Deployment"):
        for c in _containers(d):
            commands.append(c["command"])
            for probe in ("livenessProbe", "readinessProbe"):
                if "exec" in (c.get(probe) or {}):
                    commands.append(c[probe]["exec"]["command"])
    found = celery_commands(commands)
    assert len(found) >= 3  # worker, beat, inspect ping
    for argv in sorted(found):
        proc = run_celery_help(argv)
        assert proc.returncode == 0, (argv, proc.stderr[-2000:])

"""The plan document: strict validation with field paths, bounded sizes, reproducibility, engine run times."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from engine.errors import ScenarioError
from engine.fleet.core import simulate_fleet
from engine.fleet.plan import parse_plan
from engine.performance.api import predict
from tests.engine.fleet._plans import check_little, job, one_cluster, plan
from tests.paths import ROOT

BASE = plan(30, [one_cluster(64, 8)], jobs=[job("j", 16, 2, 0)], arrivals=[
    {"name": "s", "rate_per_day": 3, "gpus": {"dist": "choice", "values": [8, 16], "weights": [3, 1]},
     "duration_days": {"dist": "exponential", "mean": 1.0}}])


def bad(path: list[Any], value: Any, match: str) -> None:
    doc = copy.deepcopy(BASE)
    node = doc
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    with pytest.raises(ScenarioError, match=match):
        simulate_fleet(doc)


@pytest.mark.parametrize(("path", "value", "match"), [
    (["horizon_days"], 0, r"^horizon_days: must be an integer between 1 and 3,650"),
    (["horizon_days"], 1e9, r"^horizon_days: must be an integer between 1 and 3,650"),
    (["horizon_days"], True, r"^horizon_days: must be an integer"),
    (["horizon_days"], KeyError, r"^horizon_days: is required"),
    (["bogus"], 1, r"^bogus: unknown key"),
    (["clusters"], [], r"^clusters: must list at least one cluster"),
    (["clusters", 0, "gpus"], -8, r"^clusters\[0\]\.gpus: "),
    (["clusters", 0, "gpu"], "NOPE", r"^clusters\[0\]\.gpu: "),
    (["clusters", 0, "name"], "", r"^clusters\[0\]\.name: must be a non-empty string"),
    (["clusters", 0, "retire_day"], 0, r"^clusters\[0\]\.retire_day: must be after in_service_day"),
    (["clusters", 0, "reserved_gpus"], 64, r"^clusters\[0\]\.reserved_gpus: leaves no whole node"),
    (["jobs", 0, "gpus"], 65, r"^jobs\[0\]\.gpus: 65 exceeds the largest cluster"),
    (["jobs", 0, "gpus"], "auto", r'^jobs\[0\]\.gpus: "auto" needs a workload'),
    (["jobs", 0, "submit_day"], 31, r"^jobs\[0\]\.submit_day: must be a number between 0 and 30"),
    (["jobs", 0, "deadline_day"], 0, r"^jobs\[0\]\.deadline_day: must be after submit_day"),
    (["jobs", 0, "workload"], {"model": {}}, r"^jobs\[0\]: give exactly one of duration_days or workload"),
    (["jobs", 0, "cluster"], "nowhere", r"^jobs\[0\]\.cluster: must name one of the plan's clusters"),
    (["arrivals", 0, "gpus", "dist"], "pareto", r"^arrivals\[0\]\.gpus\.dist: must be one of"),
    (["arrivals", 0, "gpus", "weights"], [1], r"^arrivals\[0\]\.gpus\.weights: must have one weight per value"),
    (["arrivals", 0, "gpus", "values"], [8, 128], r"^arrivals\[0\]\.gpus: 128 GPUs exceeds the largest cluster"),
    (["arrivals", 0, "duration_days"], {"dist": "lognormal", "mean": 1}, r"^arrivals\[0\]\.duration_days\.sigma: is"),
    (["arrivals", 0, "duration_days"], {"dist": "empirical", "values": []}, r"duration_days\.values: must not be empty"),
    (["arrivals", 0, "rate_per_day"], 10_000, r"^arrivals: would enumerate 300,000 expected arrivals"),
    (["policy"], "lottery", r"^policy: must be one of fifo, priority, backfill"),
    (["policy"], {"name": "fifo", "preemption": True}, r"^policy\.preemption: applies to the priority policy"),
    (["failures"], {"rates": {"gpu": -1}}, r"^failures\.rates\.gpu: must be a number between 0 and 1"),
    (["failures"], {"rates": {"psu": 0.1}}, r"^failures\.rates\.psu: unknown component"),
    (["replications"], 5000, r"^replications: must be an integer between 1 and 1,000"),
])
def test_bad_plans_name_the_field_and_the_reason(path: list[Any], value: Any, match: str) -> None:
    bad(path, value, match)


def test_a_plan_that_is_not_an_object_or_has_a_nul_name_is_refused() -> None:
    with pytest.raises(ScenarioError, match=r"^plan: must be an object"):
        simulate_fleet([])  # type: ignore[arg-type]
    doc = copy.deepcopy(BASE)
    doc["jobs"][0]["name"] = "a\x00b"
    with pytest.raises(ScenarioError, match="NUL"):
        simulate_fleet(doc)


def test_same_plan_and_seed_give_the_same_result_bit_for_bit() -> None:
    doc = copy.deepcopy(BASE)
    doc["failures"] = {"rate_scale": 100.0}
    doc["policy"] = "backfill"
    a = json.dumps(simulate_fleet(doc, seed=11), sort_keys=True)
    b = json.dumps(simulate_fleet(copy.deepcopy(doc), seed=11), sort_keys=True)
    c = json.dumps(simulate_fleet(doc, seed=12), sort_keys=True)
    assert a == b
    assert a != c


def test_result_has_the_contract_fields() -> None:
    r = simulate_fleet(BASE)
    check_little(r)
    for key in ("utilization", "wait_days", "jobs_completed", "deadlines_missed", "timeline", "first_shortfall_day"):
        assert key in r
    assert set(r["wait_days"]) >= {"mean", "p50", "p90", "p99"}
    day = r["timeline"]["c0"]
    assert set(day) >= {"allocated", "productive", "failed", "idle"}
    assert all(len(v) == 30 for v in day.values())
    for i in range(30):  # capacity splits into allocated + repair + reserved + idle
        assert day["allocated"][i] + day["repair"][i] + day["reserved"][i] + day["idle"][i] == pytest.approx(
            day["capacity"][i], abs=0.01)


LLAMA_8B = {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336, "gated_ffn": True,
            "vocab": 128256, "seq_len": 8192}


def test_named_job_run_time_comes_from_predict_and_is_faster_on_newer_hardware() -> None:
    workload = {"model": LLAMA_8B, "training": {"global_batch": 512, "tokens": 2e11}}
    clusters = [
        {"name": "old", "gpu": "A100-80GB", "gpus": 512, "nic_gbps": 200},
        {"name": "new", "gpu": "B300", "gpus": 512, "nic_gbps": 800},
    ]
    jobs = [{"name": f"on-{c['name']}", "gpus": 256, "submit_day": 0, "workload": workload, "cluster": c["name"]}
            for c in clusters]
    r = simulate_fleet(plan(120, clusters, jobs=jobs))
    days = {j["name"]: j["run_days_fault_free"] for j in r["jobs"]}
    for c in clusters:
        scen = {**workload, "parallelism": "auto", "cluster": {**c, "gpus": 256}}
        scen["cluster"].pop("name")
        assert days[f"on-{c['name']}"] == pytest.approx(predict(scen).time_to_train_days)
    assert days["on-new"] < days["on-old"] / 2
    ends = {j["name"]: j["end_day"] for j in r["jobs"]}
    assert ends["on-new"] == pytest.approx(days["on-new"]) and ends["on-old"] == pytest.approx(days["on-old"])


def test_auto_size_is_the_smallest_power_of_two_that_meets_the_deadline() -> None:
    workload = {"model": LLAMA_8B, "training": {"global_batch": 512, "tokens": 2e11}}
    cluster = {"name": "h", "gpu": "H100-SXM", "gpus": 1024}
    jobs = [{"name": "a", "gpus": "auto", "submit_day": 0, "deadline_day": 10, "workload": workload}]
    r = simulate_fleet(plan(60, [cluster], jobs=jobs, failures=False))
    chosen = r["jobs"][0]["gpus"]
    assert r["jobs"][0]["end_day"] <= 10
    smaller = {**workload, "parallelism": "auto", "cluster": {"gpu": "H100-SXM", "gpus": chosen // 2}}
    assert predict(smaller).time_to_train_days > 10  # half the size would miss it


def test_workload_errors_name_the_job() -> None:
    doc = plan(30, [one_cluster(64, 8)], jobs=[{"name": "w", "gpus": 16, "submit_day": 0,
                                                   "workload": {"model": {"layers": 0}, "training": {}}}])
    with pytest.raises(ScenarioError, match=r"^jobs\[0\]"):
        simulate_fleet(doc)


def test_parse_plan_expands_candidates_and_bounds_them() -> None:
    doc = copy.deepcopy(BASE)
    doc["costs"] = None
    doc["candidates"] = [{"name": "b", "gpu": "B300", "nic_gbps": 800, "gpus": [512, 1024], "in_service_day": [5, 10]}]
    p = parse_plan(doc)
    assert [c.name for c in p.candidates] == ["b 512 GPUs day 5", "b 512 GPUs day 10", "b 1024 GPUs day 5",
                                              "b 1024 GPUs day 10"]
    doc["candidates"][0]["gpus"] = list(range(8, 8 * 40, 8))
    with pytest.raises(ScenarioError, match=r"^candidates\[0\]: would enumerate .* purchase options"):
        parse_plan(doc)


def test_reproducible_across_processes_and_hash_seeds() -> None:
    import hashlib
    import os
    import subprocess
    import sys

    doc = copy.deepcopy(BASE)
    doc["failures"] = {"rate_scale": 100.0}
    doc["policy"] = "backfill"
    code = ("import json,sys,hashlib; from engine.fleet.core import simulate_fleet; "
            "print(hashlib.sha256(json.dumps(simulate_fleet(json.loads(sys.argv[1]), 3), sort_keys=True)"
            ".encode()).hexdigest())")
    root = ROOT
    digests = set()
    for hash_seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code, json.dumps(doc)], capture_output=True, text=True,
                             cwd=root, env={**os.environ, "PYTHONHASHSEED": hash_seed}, timeout=120, check=True)
        digests.add(out.stdout.strip())
    here = hashlib.sha256(json.dumps(simulate_fleet(doc, 3), sort_keys=True).encode()).hexdigest()
    assert digests == {here}


LLAMA_405B = {"name": "Llama-3-405B", "layers": 126, "hidden": 16384, "heads": 128, "kv_heads": 8,
              "ffn_hidden": 53248, "vocab": 128256, "seq_len": 8192}


def test_a_named_job_that_does_not_fit_is_refused_not_scheduled() -> None:
    """405B on 64 H100: no layout fits in 80 GB (its weights alone in bf16 are 810 GB, 12.7 GB per GPU before
    gradients, optimizer states and activations at ZeRO-3; the engine finds none that fits). The plan is refused
    naming the job's GPU count and the memory needed, instead of scheduling an impossible multi-year run."""
    workload = {"model": LLAMA_405B, "training": {"global_batch": 64, "tokens": 1e11}}
    doc = plan(60, [{"name": "small", "gpu": "H100-SXM", "gpus": 64}],
               jobs=[{"name": "big", "gpus": 64, "submit_day": 0, "workload": workload}])
    scen = {**workload, "parallelism": "auto", "cluster": {"gpu": "H100-SXM", "gpus": 64}}
    assert predict(scen).fits is False  # the premise
    with pytest.raises(ScenarioError, match=r"^jobs\[0\]\.gpus: does not fit in GPU memory on any cluster") as err:
        simulate_fleet(doc)
    assert "'small' at 64 GPUs no parallel layout fits" in str(err.value)


def test_a_job_that_fits_on_one_cluster_only_runs_there() -> None:
    """Llama-3-70B on one 8-GPU node: its 70.6B parameters take ~16 bytes each with mixed-precision Adam
    (1.13 TB, 141 GB per GPU even fully sharded) - more than an H100's 80 GB, less than a B300's 288 GB. The job
    is never placed on the H100 cluster and runs on the B300 one."""
    workload = {"model": {"name": "L70", "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8,
                          "ffn_hidden": 28672, "vocab": 128256, "seq_len": 4096},
                "training": {"global_batch": 64, "tokens": 1e8}}
    clusters = [{"name": "hopper", "gpu": "H100-SXM", "gpus": 64}, {"name": "blackwell", "gpu": "B300", "gpus": 64}]
    r = simulate_fleet(plan(200, clusters, jobs=[{"name": "j", "gpus": 8, "submit_day": 0, "workload": workload}]))
    assert r["jobs"][0]["cluster"] == "blackwell"

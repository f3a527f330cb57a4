"""Seeded data shared by the security, fuzz and fault tests (and benchmarks/bench_load.py).

``seed_world()`` builds two teams through the domain services (not raw inserts, so every invariant the
services keep holds): the *home* team with one user per role and a full set of planning objects
(team catalog fork, fleet, workload, scenarios, finished runs, a sweep, a report, a re-evaluation), and
an *other* team with the same objects and its own admin. Tests then check that home-team roles get
exactly what the roles allow, and that nothing of the other team is ever visible or writable.
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROLES = ("viewer", "planner", "finance", "admin")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "calibration"

# A small, valid engine document (GPT-1.7B on 32 A100s; Narayanan et al., SC21, Table 1).
MODEL = {
    "name": "GPT-1.7B", "layers": 24, "hidden": 2304, "heads": 24, "kv_heads": 24, "ffn_hidden": 9216,
    "gated_ffn": False, "vocab": 51200, "seq_len": 2048,
}
TRAINING = {"global_batch": 512, "micro_batch": "auto", "precision": "bf16", "recompute": "full",
            "tokens": 3.0e11, "zero": 0}
PARALLELISM = {"tp": 1, "pp": 1, "dp": 32, "cp": 1, "ep": 1, "vpp": "auto", "sequence_parallel": False}
CLUSTER = {"gpu": "A100-80GB", "gpus": 32, "gpus_per_node": 8, "nics_per_node": 8, "nic_gbps": 200,
           "fabric": "infiniband", "topology": "fat-tree", "oversubscription": 1.0, "tiers": 3}


# A small capacity plan (issue #14): one 32-GPU cluster, a named job with a deadline, no pricing (fast).
CAPACITY_PLAN = {
    "horizon_days": 30, "failures": False, "costs": False, "replications": 1,
    "clusters": [{"name": "pod", "gpu": "A100-80GB", "gpus": 32, "nic_gbps": 200}],
    "jobs": [{"name": "run-1", "gpus": 16, "duration_days": 5, "submit_day": 0, "deadline_day": 10}],
}


def document() -> dict[str, Any]:
    return copy.deepcopy({"model": MODEL, "training": TRAINING, "parallelism": PARALLELISM, "cluster": CLUSTER})


@dataclass
class TeamWorld:
    team: Any
    users: dict[str, Any]
    catalog: Any
    fleet: Any
    workload: Any
    scenario: Any
    run: Any
    sweep: Any
    report: Any
    reevaluation: Any
    objects: dict[str, Any] = field(default_factory=dict)  # model label -> one instance of this team
    calibration_file: Any = None  # a calibration file of ``fleet`` (issue #16)
    calibration_profile: Any = None  # and the profile fitted from it
    capacity_plan: Any = None  # a capacity plan (issue #14) with one finished fleet run


@dataclass
class World:
    home: TeamWorld
    other: TeamWorld
    global_catalog: Any

    def ids_for(self, model: Any, team: str = "home") -> list[int]:
        world = self.home if team == "home" else self.other
        obj = world.objects.get(model._meta.label)
        return [obj.pk] if obj is not None else []


def _user(username: str, team: Any, role: str) -> Any:
    from accounts.models import Membership, User

    user = User.objects.create_user(username=username, password="pw-" + username)
    Membership.objects.create(user=user, team=team, role=role)
    return user


def finish_run(run: Any) -> Any:
    """Execute a queued run synchronously in this process (same code path as the Celery task)."""
    from simulations import services

    services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def seed_team(slug: str, *, roles: tuple[str, ...] = ROLES, execute: bool = True) -> TeamWorld:
    from accounts.models import Team
    from planning import services as planning
    from simulations import services
    from simulations.models import ReEvaluation, Report, RunKind

    team = Team.objects.create(name=f"Team {slug}", slug=slug)
    users = {role: _user(f"{slug}-{role}", team, role) for role in roles}
    actor = users.get("admin") or next(iter(users.values()))
    default = planning.catalog_default()
    catalog = planning.catalog_fork(catalog=default, team=team, user=actor, name=f"{slug} prices")
    fleet = planning.fleet_create(team=team, user=actor, name=f"{slug} pod A", server_model="HGX-A100-80GB",
                                  server_count=4, nic_gbps=200, site="dc1")
    workload = planning.workload_create(team=team, user=actor, name=f"{slug} GPT-1.7B", model=copy.deepcopy(MODEL),
                                        training=copy.deepcopy(TRAINING), parallelism=copy.deepcopy(PARALLELISM))
    scenario = planning.scenario_create(team=team, user=actor, name=f"{slug} baseline", workload=workload,
                                        fleet=fleet, catalog=catalog, watched=True)
    adhoc = planning.scenario_create(team=team, user=actor, name=f"{slug} ad-hoc", workload=workload,
                                     cluster=copy.deepcopy(CLUSTER))
    doc, version, values = planning.scenario_resolve(scenario=scenario)
    run = services.run_create(team=team, user=actor, kind=RunKind.TCO, document=doc, version=version,
                              values=values, scenario=scenario)
    doc2, version2, values2 = planning.scenario_resolve(scenario=adhoc)
    run2 = services.run_create(team=team, user=actor, kind=RunKind.PREDICT, document=doc2, version=version2,
                               values=values2, scenario=adhoc)
    if execute:
        finish_run(run)
        finish_run(run2)
    # A sweep over two NIC speeds; its children are executed synchronously too.
    sweep = services.sweep_submit(scenario=adhoc, axes={"cluster.nic_gbps": [200, 400]}, user=actor,
                                  kind=RunKind.PREDICT, name=f"{slug} nic sweep")
    if execute:
        for child in sweep.runs.all():
            finish_run(child)
        sweep = services.sweep_refresh(sweep_id=sweep.pk)
    report = Report.objects.create(team=team, name=f"{slug} report", baseline=run, created_by=actor)
    report.runs.set([run, run2])
    reeval = ReEvaluation.objects.create(team=team, scenario=scenario, previous_run=run, new_run=run2,
                                         idempotency_key=f"seed:{slug}:{uuid.uuid4().hex}", summary="seeded")
    # calibration of the fleet (after the runs, so they keep their uncalibrated documents): one nccl-tests
    # file of the SYNTHETIC demo data and the profile fitted from it
    from planning.services import calibration as calibration_services

    nccl_text = (EXAMPLES / "a100_all_reduce_32ranks.txt").read_text(encoding="utf-8")
    cal_file = calibration_services.calibration_upload_create(fleet=fleet, user=actor, kind="nccl-tests",
                                                              content=nccl_text, filename="a100_all_reduce_32ranks.txt")
    cal_profile = calibration_services.calibration_fit(fleet=fleet, user=actor, name=f"{slug} calibration")
    from planning.services.capacity_plans import capacity_plan_create
    from simulations.services.capacity_plans import capacity_plan_submit

    plan = capacity_plan_create(team=team, user=actor, name=f"{slug} capacity plan",
                                document=copy.deepcopy(CAPACITY_PLAN))
    plan_run = capacity_plan_submit(plan=plan, user=actor, params={"replications": 1})
    if execute:
        finish_run(plan_run)
    world = TeamWorld(team=team, users=users, catalog=catalog, fleet=fleet, workload=workload, scenario=scenario,
                      run=run, sweep=sweep, report=report, reevaluation=reeval, calibration_file=cal_file,
                      calibration_profile=cal_profile, capacity_plan=plan)
    version = catalog.latest_version()
    item = version.items.order_by("pk").first() if version else None
    for obj in (catalog, version, item, fleet, workload, scenario, run, sweep, report, reeval, cal_file, cal_profile,
                plan):
        if obj is not None:
            world.objects[obj._meta.label] = obj
    return world


def seed_world(*, execute: bool = True) -> World:
    from planning import services as planning

    planning.catalog_load_default()
    suffix = uuid.uuid4().hex[:6]
    home = seed_team(f"home-{suffix}", execute=execute)
    other = seed_team(f"other-{suffix}", roles=("admin",), execute=execute)
    return World(home=home, other=other, global_catalog=planning.catalog_default())

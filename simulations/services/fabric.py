"""Fabric studies (issue #13): the run options of the ``fabric`` run kind and its one engine call.

A fabric study is an ordinary run (same claim, lease, reaper, idempotency, cancel and retry): its ``params``
pick the traffic, job size, placement and routing; the worker calls :func:`engine.flowsim.study`
and reports seeds done / total as the run's progress (a cancelled run stops at its next seed).

``params.routing``: ``"compare"`` (default: single-QP ECMP vs 8 QPs vs adaptive, the planner's first question),
``"scenario"`` (the document's own ``cluster.routing`` and QPs, for sweeps over ``cluster.*``), or one routing
mode (``ecmp``, ``ecmp-qp``, ``adaptive``, ``pinned``) with optional ``params.qps``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from core.errors import ValidationError, engine_error
from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.fabric.pinned_study import compact_study, describe, routing_source
from engine.flowsim.estimate import SimulationEstimate, check_simulation
from engine.flowsim.network import TIERS
from engine.flowsim.placement import GROUPS, JOB_PLACEMENTS
from engine.flowsim.study import STANDARD_VARIANTS, estimate_study, study
from engine.flowsim.traffic import TRAFFIC
from engine.schema.bounds import check_estimate
from engine.schema.types import ROUTINGS, ScenarioSpec
from planning import services as planning
from planning.models import Scenario
from simulations import limits
from simulations.models import RunKind, RunStatus, SimulationRun

__all__ = [  # the portal reads the option lists from here (views do not import the engine)
    "FABRIC_PARAMS", "JOB_PLACEMENTS", "ROUTINGS", "ROUTING_CHOICES", "TIERS", "TRAFFIC", "clean_fabric_params",
    "compute_fabric", "fabric_admit", "fabric_estimate", "fabric_variants", "pinned_study_summary", "scenario_fabric_fields", "scenario_pin_fabric_study",
    "scenarios_pinned_to", "study_section",
]

FABRIC_PARAMS = {"traffic", "ranks", "routing", "qps", "placement", "seeds", "fragmentation", "background",
                 "channels", "seed"}
ROUTING_CHOICES = ("compare", "scenario", *ROUTINGS)
MAX_RUN_SEEDS = 100  # a run must finish inside the worker's soft time limit
DEFAULT_SEEDS = 20
MAX_RANKS = 1_000_000


def _err(field: str, message: str) -> ValidationError:
    return ValidationError({f"params.{field}": [message]})


def _int(value: Any, field: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or (isinstance(value, float) and not value.is_integer()):
        raise _err(field, "must be an integer")
    if not lo <= int(value) <= hi:
        raise _err(field, f"must be between {lo} and {hi}")
    return int(value)


def _fraction(value: Any, field: str, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _err(field, "must be a number")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float range (10**400)
        number = math.inf
    if not math.isfinite(number):
        raise _err(field, "must be a finite number")
    if not 0.0 <= number <= hi:
        raise _err(field, f"must be between 0 and {hi:g}")
    return number


def _traffic(value: Any) -> str | list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or len(items) > 4:
        raise _err("traffic", "must be a traffic kind or a list of 1 to 4 of them")
    for item in items:
        if not isinstance(item, str) or len(item) > 40:
            raise _err("traffic", "must be strings such as \"ring-allreduce\" or \"all-to-all:ep\"")
        kind, _, group = item.partition(":")
        if kind not in TRAFFIC:
            raise _err("traffic", f"{item!r}: kind must be one of {', '.join(TRAFFIC)}")
        if group and group not in GROUPS:
            raise _err("traffic", f"{item!r}: group must be one of {', '.join(GROUPS)}")
    return value if isinstance(value, str) else list(items)


def clean_fabric_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Validated options of a fabric study (400 naming ``params.<field>`` on bad input)."""
    out: dict[str, Any] = {}
    if "traffic" in params:
        out["traffic"] = _traffic(params["traffic"])
    if params.get("ranks") is not None:
        out["ranks"] = _int(params["ranks"], "ranks", 1, MAX_RANKS)
    if "routing" in params:
        if params["routing"] not in ROUTING_CHOICES:
            raise _err("routing", f"must be one of {', '.join(ROUTING_CHOICES)}")
        out["routing"] = params["routing"]
    if "qps" in params:
        if out.get("routing", "compare") in ("compare", "scenario"):
            raise _err("qps", "needs params.routing set to one routing mode")
        out["qps"] = _int(params["qps"], "qps", 1, 64)
    if "placement" in params:
        if params["placement"] not in JOB_PLACEMENTS:
            raise _err("placement", f"must be one of {', '.join(JOB_PLACEMENTS)}")
        out["placement"] = params["placement"]
    if "seeds" in params:
        out["seeds"] = _int(params["seeds"], "seeds", 1, MAX_RUN_SEEDS)
    if "fragmentation" in params:
        out["fragmentation"] = _fraction(params["fragmentation"], "fragmentation", 0.95)
    if "background" in params:
        out["background"] = _fraction(params["background"], "background", 1.0)
    if "channels" in params:
        out["channels"] = _int(params["channels"], "channels", 1, 64)
    if "seed" in params:
        out["seed"] = _int(params["seed"], "seed", 0, 2**31 - 1)
    return out


def fabric_variants(params: Mapping[str, Any], document: Mapping[str, Any]) -> list[dict[str, Any]]:
    routing = params.get("routing", "compare")
    if routing == "compare":
        return [dict(v) for v in STANDARD_VARIANTS]
    if routing == "scenario":
        cluster = document.get("cluster") or {}
        label = str(cluster.get("routing") or "scenario routing")
        return [{"label": label}]
    variant: dict[str, Any] = {"label": routing, "routing": routing}
    if "qps" in params:
        variant["qps"] = params["qps"]
        variant["label"] = f"{routing} {params['qps']} QP" + ("s" if params["qps"] > 1 else "")
    return [variant]


def compute_fabric(document: dict[str, Any], catalog: dict[str, Any] | None, params: Mapping[str, Any],
                   progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Run the fabric study ``params`` describe on ``document`` (the engine raises ScenarioError naming fields)."""
    options = {k: params[k] for k in ("fragmentation", "background", "channels", "seed") if k in params}
    return study(
        document, params.get("traffic", "ring-allreduce"), ranks=params.get("ranks"),
        placement=params.get("placement", "packed"), seeds=int(params.get("seeds", DEFAULT_SEEDS)),
        variants=fabric_variants(params, document), progress=progress, catalog=catalog or None, **options,
    )


# ------------------------------------------------------------------------ admission (issue #23)
# The engine's names for a study's inputs, as the run's params (the engine says "ranks", the API "params.ranks").
ENGINE_FIELDS = {**{name: f"params.{name}" for name in FABRIC_PARAMS}, "group": "params.traffic",
                 "variants": "params.routing"}


def _engine_error(exc: ScenarioError) -> ValidationError:
    return engine_error(exc, ENGINE_FIELDS.get(exc.field, exc.field))


def fabric_estimate(document: Mapping[str, Any] | ScenarioSpec, catalog: Mapping[str, Any] | None,
                    params: Mapping[str, Any]) -> list[tuple[str, SimulationEstimate]]:
    """``(variant, estimate)`` of the study ``params`` describe, without simulating: the engine's own checks
    (ranks that fit the cluster and the layout, placement, fragmentation, traffic groups...) as 400s naming
    ``params.<field>``, exactly what the run would fail on."""
    options = {k: params[k] for k in ("fragmentation", "background", "channels", "seed") if k in params}
    doc = document if isinstance(document, ScenarioSpec) else dict(document)
    try:
        return estimate_study(doc, params.get("traffic", "ring-allreduce"), ranks=params.get("ranks"),
                              placement=params.get("placement", "packed"),
                              seeds=int(params.get("seeds", DEFAULT_SEEDS)),
                              variants=fabric_variants(params, doc if isinstance(doc, dict) else {}),
                              catalog=dict(catalog) if catalog else None, **options)
    except ScenarioError as exc:
        raise _engine_error(exc) from None


def fabric_admit(*, document: Mapping[str, Any] | ScenarioSpec, catalog: Mapping[str, Any] | None,
                 params: Mapping[str, Any]) -> dict[str, Any]:
    """Refuse (400 naming the field and the estimate) a study that cannot finish inside one run: flows or memory
    past the engine's ceilings or ``FP_RUN_MAX_MEMORY_MB``, or time past ``FP_RUN_BUDGET_S``. Returns the
    estimate (seconds, bytes, flows per seed, variants) of an admitted study."""
    rows = fabric_estimate(document, catalog, params)
    seeds = int(params.get("seeds", DEFAULT_SEEDS))
    seconds = sum(e.seconds for _, e in rows)
    per_seed = sum(e.seconds_per_seed for _, e in rows)
    memory = max(e.bytes for _, e in rows)
    budget, memory_limit = limits.run_budget_s(), limits.run_memory_bytes()
    shape = (f"{len(rows)} routing variant{'s' if len(rows) > 1 else ''} x {seeds} seeds, "
             f"{max(e.flows for _, e in rows):,} flows a seed")
    smaller = ("simulate fewer params.ranks, a smaller group (e.g. \"all-to-all:ep\"), fewer QPs"
               + (" or one params.routing instead of \"compare\"" if len(rows) > 1 else ""))
    try:
        for _label, estimate in rows:
            check_simulation(estimate)
        check_estimate(f"memory ({shape})", memory, memory_limit, "params.ranks", "bytes",
                       f"the run memory limit FP_RUN_MAX_MEMORY_MB; {smaller}")
        fit = int(budget // per_seed) if per_seed > 0 else seeds
        if 1 <= fit < seeds:
            check_estimate(f"fabric simulation ({shape}, about {per_seed:.1f} s a seed)", seconds, budget,
                           "params.seeds", "s", f"the run budget FP_RUN_BUDGET_S; lower params.seeds to at most {fit}")
        check_estimate(f"fabric simulation ({shape})", seconds, budget, "params.ranks", "s",
                       f"the run budget FP_RUN_BUDGET_S; {smaller}")
    except ScenarioError as exc:
        raise _engine_error(exc) from None
    return {"seconds": seconds, "bytes": memory, "flows_per_seed": max(e.flows for _, e in rows),
            "variants": len(rows)}


# ------------------------------------------------------------------------ pinning a scenario to a study
# A team may pin a scenario to one of its own succeeded fabric studies: the study's compact routing shares
# (engine.fabric.pinned_study) are stored on the scenario (Scenario.fabric_study) and travel in its engine
# document, so they are part of every run's input hash and snapshot, and re-evaluation picks them up.


def study_section(*, run: SimulationRun, team_id: int, field: str = "fabric_study_run") -> dict[str, Any]:
    """The ``fabric_study`` section of ``run`` for a scenario of team ``team_id`` (400 naming ``field``).

    Another team's run answers "not found", exactly like a run that does not exist."""
    if run.team_id != team_id:
        raise ValidationError({field: [f"run {run.pk} not found"]})
    if run.kind != RunKind.FABRIC:
        raise ValidationError({field: [f"run {run.pk} is a {run.kind} run, not a fabric study"]})
    if run.status != RunStatus.SUCCEEDED or not isinstance(run.result, dict):
        raise ValidationError({field: [f"run {run.pk} has not succeeded ({run.status}); only a finished study can "
                                       "be pinned"]})
    name = f"Fabric study #{run.pk}" + (f": {run.label}" if run.label else "")
    try:
        return compact_study(run.result, run=run.pk, name=name)
    except ScenarioError as exc:
        raise ValidationError({field: [f"run {run.pk}: {exc}"]}) from None


def scenario_fabric_fields(*, team_id: int, data: dict[str, Any]) -> dict[str, Any]:
    """The API's ``fabric_study_run`` (a run, or None to unpin) as the scenario's ``fabric_study`` field."""
    if "fabric_study_run" not in data:
        return data
    out = {k: v for k, v in data.items() if k != "fabric_study_run"}
    run = data["fabric_study_run"]
    out["fabric_study"] = {} if run is None else study_section(run=run, team_id=team_id)
    return out


def scenario_pin_fabric_study(*, scenario: Scenario, run: SimulationRun | None, user: Any) -> Scenario:
    """Pin ``scenario`` to ``run`` (a succeeded fabric study of its team), or unpin it (``run`` None)."""
    section = {} if run is None else study_section(run=run, team_id=scenario.team_id, field="run")
    return planning.scenario_update(scenario=scenario, user=user, fabric_study=section)


def pinned_study_summary(*, scenario: Scenario) -> dict[str, Any] | None:
    """What the scenario is pinned to and the share its own routing gets from it (None when not pinned)."""
    section = scenario.fabric_study or None
    if not section:
        return None
    out: dict[str, Any] = {"run": section.get("run"), "name": describe(section), "shares": section.get("shares", []),
                           "source": None}
    try:
        doc, _version, values = planning.scenario_resolve(scenario=scenario)
        c = parse_scenario(doc, values or None).cluster
    except (ValueError, ValidationError):  # a document the engine refuses: the page shows that error elsewhere
        return out
    out["routing"] = c.routing
    out["source"] = routing_source(section, routing=c.routing, qps=float(c.qps_per_connection or 1),
                                   fabric=c.fabric)
    return out


def scenarios_pinned_to(*, run: SimulationRun) -> list[Scenario]:
    """The scenarios of the run's team pinned to ``run`` (its study page lists them)."""
    return list(Scenario.objects.filter(team_id=run.team_id, fabric_study__run=run.pk).order_by("name", "pk"))

"""Fabric studies in the portal (issue #13): pick a scenario, traffic and options, run the flow simulator as a
background run, and read per-tier utilisation, the per-flow throughput distribution, the efficiency table and a
sentence to quote. Submission goes through the run service (same claims, progress, cancel, idempotency)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_tables2 import RequestConfig

from accounts.roles import Capability
from planning.models import Scenario
from portal.forms.common import ROUTING_CHOICES, int_input
from portal.tables import FabricRunTable
from portal.views.common import _can, _error_dict, _require, _runs_for
from simulations import services as sim_services
from simulations.models import ACTIVE_STATUSES, RunKind, RunStatus
from simulations.services.fabric import (
    JOB_PLACEMENTS,
    TIERS,
    TRAFFIC,
    scenario_pin_fabric_study,
    scenarios_pinned_to,
)

TRAFFIC_LABELS = {
    "ring-allreduce": "Ring all-reduce (data-parallel gradients)", "ring-allgather": "Ring all-gather",
    "ring-reducescatter": "Ring reduce-scatter", "tree-allreduce": "Tree all-reduce (NCCL double binary tree)",
    "all-to-all": "All-to-all (MoE dispatch/combine, per-node dedup)", "pp-sendrecv": "Pipeline send/recv",
    "permutation": "Node permutation", "cross-leaf": "Cross-leaf permutation (worst case for uplinks)",
}
ROUTING_MODES = (
    ("compare", "Compare: single-QP ECMP, 8 QPs, adaptive"),
    ("scenario", "The scenario's own routing"),
    *ROUTING_CHOICES[1:],  # the enum's labelled modes (the first entry is the builder's 'fabric default')
)
STUDIES_PER_PAGE = 20
TIER_LABELS = {"nvlink": "NVLink", "nic": "NIC ↔ leaf", "leaf-spine": "Leaf ↔ spine", "spine-core": "Spine ↔ core"}


class FabricStudyForm(forms.Form):
    scenario = forms.ModelChoiceField(queryset=Scenario.objects.none(), empty_label=None)
    traffic = forms.ChoiceField(choices=[(t, TRAFFIC_LABELS.get(t, t)) for t in TRAFFIC], initial="ring-allreduce")
    routing = forms.ChoiceField(choices=ROUTING_MODES, initial="compare")
    qps = int_input("params.qps", required=False, label="Queue pairs per connection",
                    help_text="Only with one routing mode.")
    ranks = forms.IntegerField(required=False, min_value=1, label="Job size (GPUs)", help_text="Empty: all GPUs.")
    placement = forms.ChoiceField(choices=[(p, p) for p in JOB_PLACEMENTS], initial="packed")
    fragmentation = forms.FloatField(required=False, min_value=0.0, max_value=0.95, initial=0.5,
                                     help_text="Fraction of nodes already taken (fragmented placement).")
    background = forms.FloatField(required=False, min_value=0.0, max_value=1.0, initial=0.0,
                                  help_text="Fraction of the other nodes running other jobs' traffic.")
    seeds = int_input("params.seeds", initial=20)

    def __init__(self, *args: Any, request: HttpRequest, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["scenario"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = Scenario.objects.for_request(request).order_by("name")

    def params(self) -> dict[str, Any]:
        d = self.cleaned_data
        out: dict[str, Any] = {"traffic": d["traffic"], "routing": d["routing"], "placement": d["placement"],
                               "seeds": d["seeds"]}
        if d.get("qps") is not None and d["routing"] not in ("compare", "scenario"):
            out["qps"] = d["qps"]
        if d.get("ranks") is not None:
            out["ranks"] = d["ranks"]
        if d["placement"] == "fragmented" and d.get("fragmentation") is not None:
            out["fragmentation"] = d["fragmentation"]
        if d.get("background"):
            out["background"] = d["background"]
        return out


def _fabric_runs(request: HttpRequest) -> Any:
    return _runs_for(request).filter(kind=RunKind.FABRIC)


@login_required
@require_http_methods(["GET", "POST"])
def fabric(request: HttpRequest) -> HttpResponse:
    """The study form (POST submits a fabric run) and the team's recent studies."""
    form = FabricStudyForm(request.POST or None, request=request,
                           initial={"scenario": request.GET.get("scenario")} if request.GET.get("scenario", "").isdigit() else None)
    status = 200
    if request.method == "POST":
        raw = str(request.POST.get("scenario", ""))
        if raw.isdigit():  # a scenario of another team is not found; one the role may not plan on is refused
            if len(raw) > 18:  # beyond a database integer: no such scenario (not a 500 from the driver)
                raise Http404("No such scenario.")
            scenario = get_object_or_404(Scenario.objects.for_request(request), pk=int(raw))
            _require(request, scenario.team_id, Capability.PLAN)
        if form.is_valid():
            scenario = form.cleaned_data["scenario"]
            try:
                run = sim_services.run_submit(scenario=scenario, user=request.user, kind=RunKind.FABRIC,
                                              params=form.params())
            except (sim_services.fabric.ValidationError, DjangoValidationError, ValueError) as exc:
                for path, msgs in _error_dict(exc).items():
                    name = str(path).removeprefix("params.")
                    form.add_error(name if name in form.fields else None, " ".join(map(str, msgs)))
            else:
                if getattr(run, "reused", False):
                    messages.info(request, f"Nothing changed since study #{run.pk}; its stored result is shown.")
                return HttpResponseRedirect(reverse("fabric-run", args=[run.pk]))
        status = 400
    recent = FabricRunTable(_fabric_runs(request).order_by("-created_at"))
    RequestConfig(request, paginate={"per_page": STUDIES_PER_PAGE}).configure(recent)
    return render(request, "portal/fabric.html", {"form": form, "recent": recent, "section": "fabric"},
                  status=status)


def _bars(values: dict[str, float]) -> list[dict[str, Any]]:
    return [{"tier": t, "label": TIER_LABELS.get(t, t), "value": float(values[t]),
             "pct": round(100.0 * min(1.0, max(0.0, float(values[t]))), 1)} for t in TIERS if t in values]


def _histogram(flow: dict[str, Any]) -> list[dict[str, Any]]:
    hist = flow.get("histogram") or {}
    counts = [int(c) for c in hist.get("counts") or []]
    edges = list(hist.get("edges") or [])
    top = max(counts) if counts else 0
    total = sum(counts) or 1
    return [{"lo": edges[i], "hi": edges[i + 1], "count": c, "share": round(100.0 * c / total, 1),
             "height": round(100.0 * c / top, 1) if top else 0.0} for i, c in enumerate(counts)]


def fabric_result_context(result: dict[str, Any]) -> dict[str, Any]:
    """What the results block shows, from a stored fabric-study result."""
    variants = []
    for v in result.get("variants") or []:
        r = v["result"]
        variants.append({
            "label": v["label"], "efficiency": r["efficiency"], "bottleneck_tier": r["bottleneck_tier"],
            "tiers": _bars(r.get("tier_utilization") or {}), "tier_max": _bars(r.get("tier_max_utilization") or {}),
            "histogram": _histogram(r.get("flow_throughput") or {}), "flow": r.get("flow_throughput") or {},
            "links": r.get("bottleneck_links") or [], "inputs": r.get("inputs") or {}, "flows": r.get("flows"),
            "simulated_links": r.get("links"), "elapsed_s": r.get("elapsed_s"), "collectives": r.get("collectives") or [],
        })
    return {"table": result.get("table") or [], "quote": result.get("quote", ""), "variants": variants,
            "fabric": result.get("fabric") or {}, "ranks": result.get("ranks")}


@login_required
@require_GET
def fabric_run(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(_fabric_runs(request), pk=pk)
    ctx: dict[str, Any] = {
        "run": run, "section": "fabric", "active": run.status in ACTIVE_STATUSES,
        "can_plan": _can(request, run.team_id, Capability.PLAN),
        "params": run.params,
    }
    if run.status == RunStatus.SUCCEEDED and run.result:
        ctx.update(fabric_result_context(run.result))
        # "Use for scenario ...": the run's team's scenarios (a study is pinned within its team only)
        ctx["pinned_scenarios"] = scenarios_pinned_to(run=run)
        if ctx["can_plan"]:
            ctx["pin_choices"] = list(Scenario.objects.for_request(request).filter(team_id=run.team_id)
                                      .order_by("name", "pk").only("pk", "name"))
    return render(request, "portal/fabric_run.html", ctx)


@login_required
@require_POST
def fabric_run_pin(request: HttpRequest, pk: int) -> HttpResponse:
    """Pin the chosen scenario to this study (``unpin`` = back to the shipped tables); PLAN on the scenario."""
    run = get_object_or_404(_fabric_runs(request), pk=pk)
    raw = str(request.POST.get("scenario", ""))
    if not raw.isdigit() or len(raw) > 18:
        raise Http404("No such scenario.")
    scenario = get_object_or_404(Scenario.objects.for_request(request), pk=int(raw))
    _require(request, scenario.team_id, Capability.PLAN)
    unpin = bool(request.POST.get("unpin"))
    if unpin and (scenario.fabric_study or {}).get("run") != run.pk:
        messages.error(request, f"{scenario.name} is not pinned to study #{run.pk}.")
        return HttpResponseRedirect(reverse("scenario-detail", args=[scenario.pk]))
    try:
        scenario_pin_fabric_study(scenario=scenario, run=None if unpin else run, user=request.user)
    except (sim_services.fabric.ValidationError, DjangoValidationError, ValueError) as exc:
        messages.error(request, "Could not pin the study: " + "; ".join(
            f"{' '.join(map(str, msgs))}" for msgs in _error_dict(exc).values()))
        return HttpResponseRedirect(reverse("fabric-run", args=[run.pk]))
    if unpin:
        messages.success(request, f"{scenario.name} uses the shipped fabric tables again.")
    else:
        messages.success(request, f"{scenario.name} now takes its routing share from fabric study #{run.pk}; "
                                  "run it again to see the effect.")
    return HttpResponseRedirect(reverse("scenario-detail", args=[scenario.pk]))

"""The capacity-plan builder (issue #14): a plan document assembled from the team's fleets (clusters that follow
the fleet), its workloads (named jobs the engine times on each cluster), arrival streams, policy, failures and
candidate purchases. The plan parser and the service decide what is valid; their errors land on these fields."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django import forms

from core.text import JSONTextError, loads_json
from portal.forms.common import FieldErrorMixin

POLICIES = (("backfill", "Backfill (EASY)"), ("fifo", "FIFO"), ("priority", "Priority"))
DEFAULT_ARRIVALS = [{"name": "research", "rate_per_day": 10, "gpus": {"dist": "choice", "values": [8, 64, 256],
                                                                       "weights": [6, 3, 1]},
                     "duration_days": {"dist": "lognormal", "mean": 2.0, "sigma": 1.0}}]


def _json(raw: str) -> Any:
    """JSON text of a text area or hidden input, read as the API reads a body (size, depth, items, NUL: #23)."""
    try:
        return loads_json(raw)
    except JSONTextError as exc:
        text = str(exc)
        raise forms.ValidationError(f"not valid JSON ({text[len('is not valid JSON: '):]})"
                                    if text.startswith("is not valid JSON: ") else f"refused: this JSON {text}") from None


def _json_list(raw: str, field: str) -> list[Any]:
    text = (raw or "").strip()
    if not text:
        return []
    value = _json(text)
    if not isinstance(value, list):
        raise forms.ValidationError(f"must be a JSON list of {field}")
    return value


class CapacityPlanForm(FieldErrorMixin, forms.Form):
    name = forms.CharField(max_length=120)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    horizon_days = forms.IntegerField(min_value=1, max_value=3650, initial=365, label="Horizon (days)")
    policy = forms.ChoiceField(choices=POLICIES, initial="backfill", label="Scheduling policy")
    preemption = forms.BooleanField(required=False, label="Preempt lower priority (priority policy)")
    failures = forms.BooleanField(required=False, initial=True, label="Simulate failures and repairs")
    fleets = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple,
                                       label="Clusters from the team's fleets",
                                       help_text="Each becomes a cluster that follows its fleet (GPUs, NICs, "
                                                 "fabric, topology) at every run.")
    extra_clusters = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                                     label="Other clusters (JSON list)",
                                     help_text='e.g. [{"name": "b300-new", "gpu": "B300", "gpus": 4096, '
                                               '"nic_gbps": 800, "in_service_day": 120}]')
    arrivals = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4}),
                               label="Arrival streams (JSON list)",
                               help_text="rate_per_day, gpus and duration_days as numbers or distributions "
                                         "(docs/fleet-model.md)")
    candidates = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                                 label="Candidate purchases (JSON list)",
                                 help_text='e.g. [{"name": "B300 IB", "gpu": "B300", "nic_gbps": 800, '
                                           '"gpus": [2048, 4096], "in_service_day": [90, 180]}]')
    budget_usd = forms.FloatField(required=False, min_value=0, label="Budget (USD capex)")
    confidence = forms.FloatField(required=False, min_value=0.5, max_value=0.99, initial=0.9,
                                  label="Confidence (share of replications meeting every deadline)")
    replications = forms.IntegerField(required=False, min_value=1, max_value=1000, initial=10)
    watched = forms.BooleanField(required=False, label="Watch: re-run when the catalog or a fleet changes")
    catalog = forms.ChoiceField(required=False, label="Catalog (prices and specs)")
    demand_csv = forms.FileField(required=False, label="Demand plan (CSV, replaces the named jobs)",
                                 help_text="columns: name, team, gpus, duration_days or workload (a workload's "
                                           "name), submit_day, deadline_day, priority, cluster")

    PATHS = {"document.horizon_days": "horizon_days", "document.policy": "policy",
             "document.failures": "failures", "document.arrivals": "arrivals", "document.candidates": "candidates",
             "document.clusters": "extra_clusters", "document.budget_usd": "budget_usd",
             "document.confidence": "confidence", "document.replications": "replications",
             "cluster_fleets": "fleets", "file": "demand_csv", "rows": "demand_csv"}

    def __init__(self, *args: Any, fleets: Iterable[Any] = (), catalogs: Iterable[Any] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.catalog_objects = {str(c.pk): c for c in catalogs}
        self.fields["catalog"].choices = [("", "Default catalog")] + [  # type: ignore[attr-defined]
            (pk, c.name) for pk, c in self.catalog_objects.items()]
        self.fleet_objects = {str(f.pk): f for f in fleets}
        self.fields["fleets"].choices = [  # type: ignore[attr-defined]
            (pk, f"{f.name} — {f.gpus:,} GPUs, {f.nic_gbps}G {f.fabric}") for pk, f in self.fleet_objects.items()]

    def clean_extra_clusters(self) -> list[Any]:
        return _json_list(self.cleaned_data.get("extra_clusters", ""), "clusters")

    def clean_arrivals(self) -> list[Any]:
        return _json_list(self.cleaned_data.get("arrivals", ""), "arrival streams")

    def clean_candidates(self) -> list[Any]:
        return _json_list(self.cleaned_data.get("candidates", ""), "candidate purchases")

    def document(self, jobs: Sequence[Mapping[str, Any]], base: Mapping[str, Any] | None = None
                 ) -> tuple[dict[str, Any], dict[str, int]]:
        """The plan document and its {cluster name: fleet id} links (other keys of ``base`` kept)."""
        d = self.cleaned_data
        clusters: list[Any] = []
        links: dict[str, int] = {}
        for pk in d.get("fleets") or []:
            fleet = self.fleet_objects[pk]
            clusters.append({"name": fleet.name, "gpus": fleet.gpus, "gpus_per_node": fleet.gpus_per_node})
            links[fleet.name] = fleet.pk
        clusters += d["extra_clusters"]
        doc: dict[str, Any] = {k: v for k, v in (base or {}).items()
                               if k not in ("clusters", "jobs", "arrivals", "candidates", "policy", "failures",
                                            "horizon_days", "budget_usd", "confidence", "replications")}
        doc.update(horizon_days=d["horizon_days"], clusters=clusters, jobs=list(jobs), arrivals=d["arrivals"],
                   policy={"name": d["policy"], "preemption": bool(d.get("preemption"))}
                   if d["policy"] == "priority" else d["policy"],
                   failures=bool(d.get("failures")))
        if d["candidates"]:
            doc["candidates"] = d["candidates"]
        for key in ("budget_usd", "confidence", "replications"):
            if d.get(key) is not None:
                doc[key] = d[key]
        return doc, links

    @staticmethod
    def initial_for(plan: Any, fleets: Mapping[str, Any]) -> dict[str, Any]:
        """Form values of a stored plan (clusters linked to fleets become ticked fleets)."""
        doc = plan.document or {}
        linked = {name for name, fid in (plan.cluster_fleets or {}).items() if str(fid) in fleets}
        policy = doc.get("policy", "backfill")
        return {
            "name": plan.name, "description": plan.description, "horizon_days": doc.get("horizon_days", 365),
            "policy": policy.get("name") if isinstance(policy, Mapping) else policy,
            "preemption": bool(policy.get("preemption")) if isinstance(policy, Mapping) else False,
            "failures": doc.get("failures", True) is not False,
            "fleets": [str(plan.cluster_fleets[n]) for n in linked],
            "extra_clusters": json.dumps([c for c in doc.get("clusters") or [] if c.get("name") not in linked],
                                         indent=1),
            "arrivals": json.dumps(doc.get("arrivals") or [], indent=1),
            "candidates": json.dumps(doc.get("candidates") or [], indent=1) if doc.get("candidates") else "",
            "budget_usd": doc.get("budget_usd"), "confidence": doc.get("confidence"),
            "replications": doc.get("replications"), "watched": plan.watched,
            "catalog": str(plan.catalog_id) if plan.catalog_id else "",
        }


class PlanJobForm(forms.Form):
    """One named job: a team workload (the engine times it on each cluster) or a fixed duration."""

    name = forms.CharField(max_length=120, required=False)
    workload = forms.ChoiceField(required=False)
    gpus = forms.CharField(max_length=12, required=False, help_text='a number, or "auto" with a workload')
    duration_days = forms.FloatField(required=False, min_value=0)
    submit_day = forms.FloatField(required=False, min_value=0, initial=0)
    deadline_day = forms.FloatField(required=False, min_value=0)
    priority = forms.IntegerField(required=False)
    team = forms.CharField(max_length=120, required=False, label="Team (demand)")
    cluster = forms.CharField(max_length=120, required=False, help_text="pin to one cluster")
    kept = forms.CharField(required=False, widget=forms.HiddenInput)  # an embedded workload kept as it is

    def __init__(self, *args: Any, workloads: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.workloads = workloads or {}
        self.fields["workload"].choices = [("", "— fixed duration —")] + [  # type: ignore[attr-defined]
            (str(pk), w.name) for pk, w in self.workloads.items()]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        raw = data.get("kept") or ""
        if raw.strip():  # a hidden input: its error is shown on the row's name
            try:
                if not isinstance(_json(raw), dict):
                    raise forms.ValidationError("must be a JSON object")
            except forms.ValidationError as exc:
                self.add_error("name", f"this job's workload: {exc.messages[0]}")
        return data

    def job(self) -> dict[str, Any] | None:
        d = self.cleaned_data
        if not d or not (d.get("name") or "").strip():
            return None
        job: dict[str, Any] = {"name": d["name"].strip()}
        gpus = (d.get("gpus") or "").strip()
        if gpus:
            job["gpus"] = "auto" if gpus == "auto" else (int(gpus) if gpus.isdigit() else gpus)
        if d.get("workload"):
            w = self.workloads[d["workload"]]
            job["workload"] = {"model": w.model, "training": w.training, "parallelism": w.parallelism}
        elif d.get("kept"):
            job["workload"] = _json(d["kept"])
        for key in ("duration_days", "submit_day", "deadline_day", "priority"):
            if d.get(key) is not None:
                job[key] = d[key]
        for key in ("team", "cluster"):
            if (d.get(key) or "").strip():
                job[key] = d[key].strip()
        return job


PlanJobFormSet = forms.formset_factory(PlanJobForm, extra=3, max_num=200, absolute_max=500)


def job_initial(jobs: Iterable[Mapping[str, Any]], workloads: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Formset rows of a plan's jobs: a job whose workload is one of the team's shows it; others keep theirs."""
    by_doc = {json.dumps({"model": w.model, "training": w.training, "parallelism": w.parallelism},
                         sort_keys=True): pk for pk, w in workloads.items()}
    rows = []
    for j in jobs:
        row: dict[str, Any] = {k: j.get(k) for k in ("name", "duration_days", "submit_day", "deadline_day",
                                                       "priority", "team", "cluster")}
        row["gpus"] = "" if j.get("gpus") is None else str(j["gpus"])
        if isinstance(j.get("workload"), Mapping):
            key = json.dumps(dict(j["workload"]), sort_keys=True)
            if key in by_doc:
                row["workload"] = str(by_doc[key])
            else:
                row["kept"] = json.dumps(j["workload"])
        rows.append(row)
    return rows

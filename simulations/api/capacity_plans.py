"""Capacity plans over the API (issue #14): CRUD, run, a plan's runs, and the quarterly table for finance.

``POST /capacity-plans/`` stores a plan document (validated by the engine's plan parser: 400 naming
``document.<field>``); ``POST /capacity-plans/{id}/run/`` queues a ``fleet`` run (202 + the run's URL, or 200
with ``reused``); the result is at ``/runs/{run}/result/``; ``GET /capacity-plans/{id}/quarters/?fmt=json|csv|xlsx``
gives GPU-hours demanded vs delivered, capex, opex and cost per delivered GPU-hour per quarter of the latest
succeeded run (or ``?run=``).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.viewsets import ServiceModelViewSet
from accounts.roles import Capability
from core.api.parsers import SafeFormParser as FormParser
from core.api.parsers import SafeJSONParser as JSONParser  # NUL and lone surrogates refused (#11)
from core.api.parsers import SafeMultiPartParser as MultiPartParser
from core.errors import NotFound, ValidationError
from planning.api.fields import ScopedPrimaryKeyRelatedField
from planning.models import CapacityPlan, Catalog
from planning.services import capacity_plans as plan_services
from simulations import reports
from simulations.api.filtersets import CapacityPlanFilterSet
from simulations.api.schemas import error_responses
from simulations.api.serializers import SimulationRunSerializer
from simulations.api.views import IDEMPOTENCY_PARAM
from simulations.models import RunStatus, SimulationRun
from simulations.services.capacity_plans import (
    capacity_plan_replicate,
    capacity_plan_submit,
    plan_runs,
    plan_sweeps,
    replication_summary,
)
from simulations.services.plan_compare import MAX_COMPARED, compare_plan_runs, latest_plan_run

QUARTER_COLUMNS = ("quarter", "start_day", "end_day", "gpu_hours_demanded", "gpu_hours_delivered", "capex_usd",
                   "opex_usd", "tco_usd", "usd_per_delivered_gpu_hour")


class CapacityPlanSerializer(serializers.ModelSerializer):
    team: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    document = serializers.JSONField(help_text="The plan document (docs/fleet-model.md).")
    cluster_fleets = serializers.JSONField(
        required=False, help_text="{cluster name: fleet id}: these clusters take the fleet's GPUs, NICs, fabric and "
                                  "topology at run time (and a watched plan is re-run when the fleet changes)")
    watched = serializers.BooleanField(required=False, help_text="re-run on schedule when the catalog, a linked "
                                                                 "fleet or the engine changes")
    catalog = ScopedPrimaryKeyRelatedField(queryset=Catalog.objects.all(), required=False, allow_null=True,
                                           help_text="a catalog of the team (prices, specs); empty: the default")

    class Meta:
        model = CapacityPlan
        fields = ("id", "team", "name", "description", "document", "cluster_fleets", "watched", "catalog",
                  "last_evaluated_at", "created_at", "updated_at")
        read_only_fields = ("created_at", "updated_at", "last_evaluated_at")


class CapacityPlanRunSerializer(serializers.Serializer):
    params = serializers.JSONField(required=False, help_text="replications (1-200), seed, search (bool)")
    force = serializers.BooleanField(required=False, default=False)

    def validate_params(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise serializers.ValidationError("must be a JSON object")
        return value


class CapacityPlanReplicateSerializer(serializers.Serializer):
    replications = serializers.JSONField(help_text="1-1,000 seeds, fanned out over the workers as one chord")
    seed = serializers.JSONField(required=False, default=0)  # type: ignore[arg-type]
    chunk = serializers.JSONField(required=False, default=25,  # type: ignore[arg-type]
                                  help_text="seeds per child run (1-200)")


class JobsCsvSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="CSV: name, team, gpus, duration_days or workload (a team workload's "
                                           "name), submit_day, deadline_day, priority, cluster")
    replace = serializers.BooleanField(required=False, default=True, help_text="replace the jobs (else append)")


class CapacityPlanViewSet(ServiceModelViewSet):
    """Capacity plans: a fleet over time against a demand plan; ``run`` simulates it on the workers."""

    queryset = CapacityPlan.objects.select_related("team").order_by("name", "id")
    serializer_class = CapacityPlanSerializer
    filterset_class = CapacityPlanFilterSet
    search_fields = ("name", "description")
    ordering_fields = ("name", "created_at", "updated_at")
    parser_classes = (JSONParser,)
    action_capabilities = {"run": Capability.PLAN, "runs": Capability.READ, "quarters": Capability.EXPORT,
                           "replicate": Capability.PLAN, "replications": Capability.READ,
                           "import_jobs": Capability.PLAN, "compare": Capability.READ}

    def do_create(self, *, team: Any, data: dict[str, Any]) -> CapacityPlan:
        return plan_services.capacity_plan_create(team=team, user=self.request.user, **data)

    def do_update(self, *, instance: CapacityPlan, data: dict[str, Any]) -> CapacityPlan:
        return plan_services.capacity_plan_update(plan=instance, user=self.request.user, **data)

    def do_delete(self, *, instance: CapacityPlan) -> None:
        plan_services.capacity_plan_delete(plan=instance, user=self.request.user)

    @extend_schema(request=CapacityPlanRunSerializer, responses={202: SimulationRunSerializer,
                                                                  200: SimulationRunSerializer})
    @action(detail=True, methods=["post"])
    def run(self, request: Request, pk: Any = None) -> Response:
        plan = self.get_object()
        ser = CapacityPlanRunSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        run = capacity_plan_submit(plan=plan, user=request.user, params=ser.validated_data.get("params"),
                                   force=ser.validated_data["force"])
        reused = bool(getattr(run, "reused", False))
        body = {**SimulationRunSerializer(run, context={"request": request}).data, "reused": reused}
        code = status.HTTP_200_OK if reused else status.HTTP_202_ACCEPTED
        return Response(body, status=code, headers={"Location": body["url"]})

    @extend_schema(
        parameters=[OpenApiParameter("plans", str, description="2-4 plan ids, comma-separated (each plan's latest "
                                                               "finished run)"),
                    OpenApiParameter("runs", str, description="or 2-4 capacity-plan run ids, comma-separated")],
        responses={200: OpenApiResponse(description="figures per run (registry plan metrics), best run per figure, "
                                                    "recommendations, and how each differs from the first")},
    )
    @action(detail=False, methods=["get"])
    def compare(self, request: Request) -> Response:
        """Two plans (or two runs of plans) side by side: utilization, first shortfall day, deadlines missed,
        cost per delivered GPU-hour, and each purchase recommendation."""
        plans_raw, runs_raw = request.query_params.get("plans"), request.query_params.get("runs")
        if bool(plans_raw) == bool(runs_raw):
            raise ValidationError({"plans": ["give either plans=<id>,<id> or runs=<id>,<id>"]})
        field = "plans" if plans_raw else "runs"
        parts = [p.strip() for p in str(plans_raw or runs_raw).split(",") if p.strip()]
        if not 2 <= len(parts) <= MAX_COMPARED or not all(p.isdigit() and len(p) < 10 for p in parts):
            raise ValidationError({field: [f"2 to {MAX_COMPARED} ids, comma-separated"]})
        ids = [int(p) for p in parts]
        if plans_raw:
            found = {p.pk: p for p in self.get_queryset().filter(pk__in=ids)}
            missing = [i for i in ids if i not in found]
            if missing:
                raise ValidationError({"plans": [f"capacity plan {missing[0]} not found"]})
            runs = [latest_plan_run(found[i]) for i in ids]
        else:
            visible = {r.pk: r for r in SimulationRun.objects.for_request(request, Capability.READ)
                       .filter(pk__in=ids)}
            missing = [i for i in ids if i not in visible]
            if missing:
                raise ValidationError({"runs": [f"run {missing[0]} not found"]})
            runs = [visible[i] for i in ids]
        return Response(compare_plan_runs(runs))

    @extend_schema(responses={200: SimulationRunSerializer(many=True)})
    @action(detail=True, methods=["get"], pagination_class=None)  # the newest 100, a plain list
    def runs(self, request: Request, pk: Any = None) -> Response:
        runs = plan_runs(self.get_object())[:100]
        return Response(SimulationRunSerializer(runs, many=True, context={"request": request}).data)

    @extend_schema(
        parameters=[OpenApiParameter("fmt", str, enum=list(reports.EXPORT_FORMATS), description="csv, xlsx or json"),
                    OpenApiParameter("run", int, description="a run of this plan (default: the latest succeeded)")],
        responses={200: OpenApiResponse(description="the quarterly table (file)")},
    )
    @action(detail=True, methods=["get"])
    def quarters(self, request: Request, pk: Any = None) -> HttpResponse:
        plan = self.get_object()
        runs = plan_runs(plan).filter(status=RunStatus.SUCCEEDED)
        raw = request.query_params.get("run")
        if raw is not None:
            if not raw.isdigit() or len(raw) > 18:
                raise ValidationError({"run": ["must be the id of a run of this plan"]})
            runs = runs.filter(pk=int(raw))
        run = runs.first()
        if run is None or not isinstance(run.result, dict):
            raise NotFound("no succeeded run of this plan" + (" with that id" if raw is not None else ""))
        fmt = (request.query_params.get("fmt") or "csv").lower()
        if fmt not in reports.EXPORT_FORMATS:
            raise ValidationError({"fmt": [f"must be one of {', '.join(reports.EXPORT_FORMATS)}"]})
        rows = reports.quarter_rows((run.result.get("first") or {}).get("quarters") or [], QUARTER_COLUMNS)
        frame = pd.DataFrame(rows, columns=list(QUARTER_COLUMNS))
        meta = {"plan": plan.name, "run": run.pk, "seed": (run.result.get("first") or {}).get("seed"),
                "engine_version": run.engine_version, "input_hash": run.input_hash, **reports.DEFINITIONS}
        body = reports.frame_bytes(frame, fmt=fmt, sheet="Quarters", meta=meta)
        response = HttpResponse(body, content_type=reports.CONTENT_TYPES[fmt])
        response["Content-Disposition"] = f'attachment; filename="capacity-plan-{plan.pk}-run-{run.pk}-quarters.{fmt}"'
        response["X-Content-Type-Options"] = "nosniff"
        return response

    @extend_schema(request=CapacityPlanReplicateSerializer,
                   responses={202: OpenApiResponse(description="the replication sweep: id, URL, child runs"),
                              200: OpenApiResponse(description="an identical active replication sweep, or the one "
                                                               "this Idempotency-Key made (reused: true)"),
                              # 409: the Idempotency-Key was used for other input; 429: the team's share, Retry-After
                              **error_responses(400, 401, 403, 404, 409, 429)},
                   parameters=[IDEMPOTENCY_PARAM])
    @action(detail=True, methods=["post"])
    def replicate(self, request: Request, pk: Any = None) -> Response:
        """Many replications (up to 1,000, in at most FP_MAX_SWEEP_RUNS child runs) as one chord over the
        workers; follow ``replications/?sweep=``."""
        plan = self.get_object()
        ser = CapacityPlanReplicateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        sweep = capacity_plan_replicate(plan=plan, user=request.user, replications=d["replications"],
                                        seed=d["seed"], chunk=d["chunk"],
                                        idempotency_key=request.headers.get("Idempotency-Key"))
        reused = bool(getattr(sweep, "reused", False))
        url = request.build_absolute_uri(f"/api/v1/capacity-plans/{plan.pk}/replications/?sweep={sweep.pk}")
        return Response({"sweep": sweep.pk, "runs": sweep.total_runs, "status": sweep.status, "url": url,
                         "reused": reused},
                        status=status.HTTP_200_OK if reused else status.HTTP_202_ACCEPTED, headers={"Location": url})

    @extend_schema(parameters=[OpenApiParameter("sweep", int, description="default: the latest")],
                   responses={200: OpenApiResponse(description="progress, then P10/P50/P90 over all replications")})
    @action(detail=True, methods=["get"])
    def replications(self, request: Request, pk: Any = None) -> Response:
        plan = self.get_object()
        sweeps = plan_sweeps(plan)
        raw = request.query_params.get("sweep")
        if raw is not None:
            if not raw.isdigit() or len(raw) > 18:
                raise ValidationError({"sweep": ["must be the id of a replication sweep of this plan"]})
            sweeps = sweeps.filter(pk=int(raw))
        sweep = sweeps.first()
        if sweep is None:
            if raw is not None:
                raise NotFound("no replication sweep of this plan with that id")
            return Response({"sweep": None, "summary": None})
        return Response(replication_summary(sweep))

    @extend_schema(request={"multipart/form-data": JobsCsvSerializer}, responses={200: CapacityPlanSerializer})
    @action(detail=True, methods=["post"], url_path="import-jobs", parser_classes=[MultiPartParser, FormParser])
    def import_jobs(self, request: Request, pk: Any = None) -> Response:
        """The plan's named jobs from a demand-plan CSV (all or nothing; errors per line)."""
        plan = self.get_object()
        ser = JobsCsvSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        plan = plan_services.capacity_plan_import_jobs(plan=plan, user=request.user, file=ser.validated_data["file"],
                                                       replace=ser.validated_data["replace"])
        return Response(self.get_serializer(plan).data)

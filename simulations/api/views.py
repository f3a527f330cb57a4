"""Simulation API: runs, sweeps, compare/export, saved reports, re-evaluations, preview."""

from __future__ import annotations

import json
from typing import Any

from django.db.models import Prefetch
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api.viewsets import ServiceModelViewSet
from accounts.permissions import TeamScopedViewSetMixin
from accounts.roles import Capability
from accounts.scoping import require_capability, visible_team_ids
from core.text import parse_id_list
from planning import services as planning
from planning.api.views import ScenarioViewSet
from planning.models import Scenario
from simulations import reports, selectors, services
from simulations.api.filtersets import ReEvaluationFilterSet, ReportFilterSet, RunFilterSet, SweepFilterSet
from simulations.api.schemas import (
    LOCATION_HEADER,
    RUN_RESULT,
    CompareExportSerializer,
    CompareTableSerializer,
    LineItemsExportSerializer,
    PreviewResponseSerializer,
    RunEventSerializer,
    RunNotReadySerializer,
    RunSubmitResponseSerializer,
    error_responses,
    export_responses,
)
from simulations.api.serializers import (
    PreviewRequestSerializer,
    ReEvaluationSerializer,
    ReportSerializer,
    RunSubmitForScenarioSerializer,
    RunSubmitSerializer,
    ScenarioWithStudySerializer,
    SimulationRunDetailSerializer,
    SimulationRunSerializer,
    SweepForScenarioSerializer,
    SweepSerializer,
    SweepSubmitSerializer,
)
from simulations.models import ReEvaluation, Report, SimulationRun, Sweep
from simulations.services.fabric import scenario_fabric_fields

FMT_PARAM = OpenApiParameter("fmt", str, enum=list(reports.EXPORT_FORMATS), description="csv, xlsx or json")


def file_response(payload: tuple[bytes, str, str]) -> HttpResponse:
    body, content_type, filename = payload
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


def submit_run_response(request: Request, *, scenario: Scenario, data: Any) -> Response:
    require_capability(request, scenario.team_id, Capability.PLAN)
    ser = RunSubmitForScenarioSerializer(data=data)
    ser.is_valid(raise_exception=True)
    run = services.run_submit(scenario=scenario, user=request.user, kind=ser.validated_data["kind"],
                              force=ser.validated_data["force"], params=ser.validated_data.get("params"))
    reused = bool(getattr(run, "reused", False))
    body = {**SimulationRunSerializer(run, context={"request": request}).data, "reused": reused}
    code = status.HTTP_200_OK if reused else status.HTTP_202_ACCEPTED
    return Response(body, status=code, headers={"Location": body["url"]})


def submit_sweep_response(request: Request, *, scenario: Scenario, data: Any) -> Response:
    require_capability(request, scenario.team_id, Capability.PLAN)
    ser = SweepForScenarioSerializer(data=data)
    ser.is_valid(raise_exception=True)
    sweep = services.sweep_submit(scenario=scenario, axes=ser.validated_data["axes"], user=request.user,
                                  kind=ser.validated_data["kind"], name=ser.validated_data.get("name", ""),
                                  params=ser.validated_data.get("params"),
                                  idempotency_key=request.headers.get("Idempotency-Key"))
    reused = bool(getattr(sweep, "reused", False))
    body = {**SweepSerializer(sweep, context={"request": request}).data, "reused": reused}
    code = status.HTTP_200_OK if reused else status.HTTP_202_ACCEPTED
    return Response(body, status=code, headers={"Location": body["url"]})


#: issue #23: sweeps and replication fan-outs are created once per key (and once per identical active input)
IDEMPOTENCY_PARAM = OpenApiParameter(
    "Idempotency-Key", str, location=OpenApiParameter.HEADER, required=False,
    description="a key of yours (1-255 printable ASCII characters): a retried request with the same key answers "
                "the sweep the first one created (200, reused: true); the same key with other input is a 409")
#: the answers of a sweep submission
SWEEP_SUBMIT_RESPONSES: dict[Any, Any] = {
    202: OpenApiResponse(SweepSerializer, description="queued: follow Location"),
    200: OpenApiResponse(SweepSerializer, description="an identical active sweep, or the one this Idempotency-Key "
                                                      "made, answers (reused: true)"),
    # 409: the Idempotency-Key was used for other input; 429: the team holds its share of the workers
    # (FP_TEAM_MAX_ACTIVE_RUNS), see Retry-After
    **error_responses(400, 401, 403, 404, 409, 429),
}


class ScenarioRunViewSet(ScenarioViewSet):
    """Scenarios (the planning API) plus ``run`` / ``sweep``, which answer 202 and the new run's URL.

    The planning app knows nothing of runs; this subclass, registered at ``/scenarios/``, adds them.
    """

    action_capabilities = {**ScenarioViewSet.action_capabilities, "run": Capability.PLAN, "sweep": Capability.PLAN}
    serializer_class = ScenarioWithStudySerializer  # + fabric_study_run: pin a fabric study (issue #13)

    def do_create(self, *, team: Any, data: dict[str, Any]) -> Scenario:
        return super().do_create(team=team, data=scenario_fabric_fields(team_id=team.pk, data=data))

    def do_update(self, *, instance: Scenario, data: dict[str, Any]) -> Scenario:
        return super().do_update(instance=instance,
                                 data=scenario_fabric_fields(team_id=instance.team_id, data=data))

    @extend_schema(
        request=RunSubmitForScenarioSerializer,
        responses={202: OpenApiResponse(RunSubmitResponseSerializer, description="queued: follow Location"),
                   200: OpenApiResponse(RunSubmitResponseSerializer,
                                        description="an identical run of your team answers (reused: true)"),
                   **error_responses(400, 401, 403, 404)},
        parameters=[LOCATION_HEADER],
    )
    @action(detail=True, methods=["post"])
    def run(self, request: Request, pk: Any = None) -> Response:
        return submit_run_response(request, scenario=self.get_object(), data=request.data)

    @extend_schema(
        request=SweepForScenarioSerializer,
        responses=SWEEP_SUBMIT_RESPONSES,
        parameters=[IDEMPOTENCY_PARAM],
    )
    @action(detail=True, methods=["post"])
    def sweep(self, request: Request, pk: Any = None) -> Response:
        return submit_sweep_response(request, scenario=self.get_object(), data=request.data)


class RunViewSet(TeamScopedViewSetMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                 mixins.CreateModelMixin, viewsets.GenericViewSet):
    """Simulation runs. POST queues one (202 + URL; 200 with ``reused`` when an identical result exists)."""

    queryset = SimulationRun.objects.select_related("team", "created_by").order_by("-queued_at", "-id")
    filterset_class = RunFilterSet
    selector = staticmethod(selectors.run_list)  # reads go through the app's selector
    search_fields = ("label",)
    ordering_fields = ("queued_at", "finished_at", "status", "kind")
    action_capabilities = {"cancel": Capability.PLAN, "export": Capability.EXPORT, "result": Capability.READ,
                           "events": Capability.READ}

    def get_serializer_class(self) -> Any:
        if self.action == "retrieve":
            return SimulationRunDetailSerializer
        if self.action == "create":
            return RunSubmitSerializer
        return SimulationRunSerializer

    def get_queryset(self) -> Any:
        qs = super().get_queryset()
        if self.action == "list":
            # The list never returns these (potentially large) JSON documents; don't load them.
            qs = qs.defer("result", "input_snapshot")
        return qs

    @extend_schema(request=RunSubmitSerializer,
                   responses={202: OpenApiResponse(RunSubmitResponseSerializer, description="queued: follow Location"),
                              200: OpenApiResponse(RunSubmitResponseSerializer,
                                                   description="an identical run of your team answers (reused: true)"),
                              **error_responses(400, 401, 403)},
                   parameters=[LOCATION_HEADER])
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        ser = RunSubmitSerializer(data=request.data, context=self.get_serializer_context())
        ser.is_valid(raise_exception=True)
        data = {k: v for k, v in request.data.items() if k != "scenario"} if hasattr(request.data, "items") else {}
        return submit_run_response(request, scenario=ser.validated_data["scenario"], data=data)

    @extend_schema(request=None, responses=SimulationRunSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: Any = None) -> Response:
        run = services.run_cancel(run=self.get_object(), user=request.user)
        return Response(SimulationRunSerializer(run, context={"request": request}).data)

    @extend_schema(responses={
        200: OpenApiResponse(RUN_RESULT, description="the stored engine result, typed by the run's kind (metrics, "
                                                     "breakdowns, line items, Monte Carlo, search alternatives, "
                                                     "replications)"),
        409: OpenApiResponse(RunNotReadySerializer, description="the run has not succeeded (yet): no result"),
        **error_responses(401, 404)})
    @action(detail=True, methods=["get"])
    def result(self, request: Request, pk: Any = None) -> Response:
        run = self.get_object()
        if run.status != "succeeded":
            return Response({"errors": {"status": [f"run is {run.status}; no result"]}, "status": 409,
                             "error": run.error or None, "error_field": run.error_field or None}, status=409)
        return Response({"run": run.pk, "kind": run.kind, "engine_version": run.engine_version,
                         "input_hash": run.input_hash, "result": run.result})

    @extend_schema(responses={200: RunEventSerializer(many=True), **error_responses(401, 404)})
    @action(detail=True, methods=["get"], filter_backends=[])
    def events(self, request: Request, pk: Any = None) -> Response:
        """The run's execution history, oldest first (paged): each claim, lapsed lease, re-sent message,
        release for a retry, lost claim and the end, with its attempt and time."""
        page = self.paginate_queryset(selectors.run_events(self.get_object()))
        return self.get_paginated_response(RunEventSerializer(page, many=True).data)

    @extend_schema(parameters=[FMT_PARAM],
                   responses=export_responses(LineItemsExportSerializer, "the cost line items, totals and notes"))
    @action(detail=True, methods=["get"])
    def export(self, request: Request, pk: Any = None) -> HttpResponse:
        """The run's cost line items as CSV, XLSX or JSON (``?fmt=``)."""
        run = self.get_object()
        return file_response(reports.export_run_line_items(run=run, fmt=request.query_params.get("fmt", "csv")))


class SweepViewSet(TeamScopedViewSetMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                   mixins.CreateModelMixin, viewsets.GenericViewSet):
    """Parameter sweeps over a scenario; runs are at ``/runs/?sweep=<id>``."""

    queryset = Sweep.objects.select_related("team").order_by("-created_at", "-id")
    serializer_class = SweepSerializer
    filterset_class = SweepFilterSet
    selector = staticmethod(selectors.sweep_list)  # reads go through the app's selector
    ordering_fields = ("created_at", "finished_at")
    action_capabilities = {"cancel": Capability.PLAN}

    @extend_schema(request=SweepSubmitSerializer, responses=SWEEP_SUBMIT_RESPONSES, parameters=[IDEMPOTENCY_PARAM])
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        ser = SweepSubmitSerializer(data=request.data, context=self.get_serializer_context())
        ser.is_valid(raise_exception=True)
        data = {k: v for k, v in request.data.items() if k != "scenario"} if isinstance(request.data, dict) else {}
        return submit_sweep_response(request, scenario=ser.validated_data["scenario"], data=data)

    @extend_schema(request=None, responses=SweepSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: Any = None) -> Response:
        sweep = services.sweep_cancel(sweep=self.get_object(), user=request.user)
        return Response(SweepSerializer(sweep, context={"request": request}).data)


def _parse_ids(raw: str | None, field: str) -> list[int]:
    if not raw:
        raise exceptions.ValidationError({field: ["This parameter is required (comma-separated run ids)."]})
    try:  # the count is checked on the text, before any query (999 ids: a fast 400)
        ids = parse_id_list(raw, limit=reports.MAX_COMPARE_RUNS, what="run ids")
    except ValueError as exc:
        raise exceptions.ValidationError({field: [str(exc)]}) from None
    if not ids:
        raise exceptions.ValidationError({field: ["give at least one run id"]})
    return ids


class ReportViewSet(ServiceModelViewSet):
    """Saved comparisons, plus ``compare`` (ad hoc) and ``export`` (CSV/XLSX/JSON)."""

    # Reports serialize run ids only: prefetch just the ids, never the runs' results and snapshots.
    queryset = (
        Report.objects.select_related("team")
        .prefetch_related(Prefetch("runs", queryset=SimulationRun.objects.only("id")))
        .order_by("-created_at")
    )
    serializer_class = ReportSerializer
    filterset_class = ReportFilterSet
    selector = staticmethod(selectors.report_list)  # reads go through the app's selector
    search_fields = ("name", "description")
    ordering_fields = ("name", "created_at", "updated_at")
    action_capabilities = {"export": Capability.EXPORT, "compare": Capability.READ, "table": Capability.READ}

    def do_create(self, *, team: Any, data: dict[str, Any]) -> Report:
        return services.report_create(team=team, user=self.request.user, name=data.get("name", ""),
                                      runs=list(data.get("runs") or []), baseline=data.get("baseline"),
                                      description=data.get("description", ""), metrics=data.get("metrics"))

    def do_update(self, *, instance: Report, data: dict[str, Any]) -> Report:
        if "runs" in data:
            data["runs"] = list(data["runs"])
        return services.report_update(report=instance, user=self.request.user, **data)

    def do_delete(self, *, instance: Report) -> None:
        instance.delete()

    @extend_schema(
        parameters=[
            OpenApiParameter("runs", str, required=True, description="Comma-separated run ids, e.g. 12,13,14"),
            OpenApiParameter("baseline", int, description="Baseline run id (default: the first)"),
            OpenApiParameter("metrics", str, description="Comma-separated metric names to keep"),
            OpenApiParameter("fmt", str, enum=list(reports.EXPORT_FORMATS),
                             description="Download instead (needs the export capability)"),
        ],
        responses={200: CompareTableSerializer,
                   (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="fmt=csv"),
                   (200, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"): OpenApiResponse(
                       OpenApiTypes.BINARY, description="fmt=xlsx"),
                   **error_responses(400, 403)},
    )
    @action(detail=False, methods=["get"])
    def compare(self, request: Request) -> Response | HttpResponse:
        """Side-by-side table: metrics as rows, runs as columns, deltas vs the baseline."""
        ids = _parse_ids(request.query_params.get("runs"), "runs")
        runs = selectors.runs_by_ids(request, ids)
        baseline_raw = request.query_params.get("baseline")
        if baseline_raw:
            try:
                baseline_id = int(baseline_raw)
            except ValueError:
                raise exceptions.ValidationError({"baseline": ["must be a run id"]}) from None
            baseline = selectors.runs_by_ids(request, [baseline_id], field="baseline")[0]
        else:
            baseline = runs[0]
        metrics = [m for m in (request.query_params.get("metrics") or "").split(",") if m.strip()] or None
        fmt = request.query_params.get("fmt")
        if fmt:
            for team_id in {r.team_id for r in [*runs, baseline]}:
                require_capability(request, team_id, Capability.EXPORT)
            return file_response(reports.export_compare(runs=runs, baseline=baseline, fmt=fmt, metrics=metrics))
        return Response(reports.compare_runs(runs=runs, baseline=baseline, metrics=metrics))

    @extend_schema(responses=CompareTableSerializer)
    @action(detail=True, methods=["get"])
    def table(self, request: Request, pk: Any = None) -> Response:
        """The saved report's comparison table (as ``compare``)."""
        report = self.get_object()
        return Response(reports.compare_runs(runs=list(report.runs.order_by("pk")), baseline=report.baseline,
                                             metrics=report.metrics or None))

    @extend_schema(parameters=[FMT_PARAM], responses=export_responses(CompareExportSerializer, "the comparison"))
    @action(detail=True, methods=["get"])
    def export(self, request: Request, pk: Any = None) -> HttpResponse:
        report = self.get_object()
        return file_response(reports.export_report(report=report, fmt=request.query_params.get("fmt", "csv")))


class ReEvaluationViewSet(TeamScopedViewSetMixin, viewsets.ReadOnlyModelViewSet):
    """Scheduled re-evaluations of watched scenarios: what changed and how the figures moved."""

    queryset = ReEvaluation.objects.select_related("scenario").order_by("-created_at", "-id")
    serializer_class = ReEvaluationSerializer
    filterset_class = ReEvaluationFilterSet
    selector = staticmethod(selectors.reevaluation_list)  # reads go through the app's selector
    ordering_fields = ("created_at", "completed_at")


class PreviewView(APIView):
    """Synchronous quick prediction for live form estimates (no run is stored)."""

    permission_classes = (IsAuthenticated,)

    @extend_schema(request=PreviewRequestSerializer, responses=PreviewResponseSerializer)
    def post(self, request: Request) -> Response:
        if not visible_team_ids(request):
            raise exceptions.PermissionDenied("You are not a member of any team.")
        ser = PreviewRequestSerializer(data=request.data, context={"request": request})
        ser.is_valid(raise_exception=True)
        data = ser.validated_data
        version = data.get("catalog_version")
        if data.get("scenario") is not None:
            doc, _resolved, values = planning.scenario_resolve(scenario=data["scenario"])
            if version is not None:
                values = planning.catalog_values(version=version)
        else:
            doc = json.loads(json.dumps(data["document"]))
            values = planning.catalog_resolve(catalog=None, pinned_version=version)[1]
        for path, value in (data.get("overrides") or {}).items():
            if str(path).split(".")[0] not in planning.DOCUMENT_SECTIONS:
                raise exceptions.ValidationError({f"overrides.{path}": ["unknown document section"]})
            planning.set_dotted(doc, str(path), value)
        return Response(services.preview(document=doc, catalog=values))

"""The simulation API's response schemas: what the run, preview, compare and export endpoints return, typed for
OpenAPI (drf-spectacular). Request serializers live in :mod:`simulations.api.serializers`."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema_field,
)
from rest_framework import serializers

from simulations.api.serializers import SimulationRunSerializer
from simulations.models import RunEvent


@extend_schema_field({"type": "object"})
class AnyObject(serializers.JSONField):
    pass


class PreviewResponseSerializer(serializers.Serializer):
    step_time_s = serializers.FloatField()
    tokens_per_s = serializers.FloatField(required=False)
    mfu = serializers.FloatField()
    network_wait_fraction = serializers.FloatField()
    time_to_train_days = serializers.FloatField()
    run_cost_usd = serializers.FloatField(required=False)
    usd_per_gpu_hour = serializers.FloatField(required=False)
    usd_per_million_tokens = serializers.FloatField(required=False)
    breakdown_s = AnyObject(required=False)
    engine_version = serializers.CharField()
    server_time_ms = serializers.FloatField()


class CompareResponseSerializer(serializers.Serializer):
    baseline = serializers.IntegerField()
    runs = serializers.ListField(child=serializers.IntegerField())
    columns = serializers.ListField(child=AnyObject())
    rows = serializers.ListField(child=AnyObject())


# --- response schemas (issue #24): what the run endpoints return, typed for OpenAPI --------------------------------
class ErrorBodySerializer(serializers.Serializer):
    """The one error body of the API (``core/api/errors.py``)."""

    errors = serializers.DictField(child=serializers.ListField(child=serializers.CharField()),  # type: ignore[assignment]
                                   help_text='Field path → messages, e.g. {"params.monte_carlo": ["must be ≤ 100000"]}')
    codes = serializers.DictField(child=serializers.ListField(child=serializers.CharField()), required=False,
                                  help_text='400/409: field path → one machine code per message, e.g. '
                                            '{"cluster.gpus": ["no_layout"]} (DRF codes or engine/errors.py)')
    status = serializers.IntegerField(help_text="The HTTP status, repeated in the body.")


class RunSubmitResponseSerializer(SimulationRunSerializer):
    """A submitted run: 202 when queued, 200 with ``reused: true`` when an identical run of the team answers."""

    reused = serializers.BooleanField(help_text="true: an identical run (same input hash and engine version) of "
                                                "your team answers; nothing was queued")

    class Meta(SimulationRunSerializer.Meta):
        fields = (*SimulationRunSerializer.Meta.fields, "reused")
        read_only_fields = fields


class RunNotReadySerializer(ErrorBodySerializer):
    """409 from ``/runs/{id}/result/``: the run has no result (yet), with its error when it failed."""

    error = serializers.CharField(allow_null=True, help_text="why the run failed (failed runs)")
    error_field = serializers.CharField(allow_null=True, help_text="the document field the failure names")


# A stored result is what the engine of its day returned: every figure is optional and may be null (a layout that
# does not fit has no throughput; an older engine may lack a newer key), but each has its type.
def _num(help_text: str = "") -> serializers.FloatField:
    return serializers.FloatField(required=False, allow_null=True, help_text=help_text or None)


def _text(help_text: str = "") -> serializers.CharField:
    return serializers.CharField(required=False, allow_null=True, allow_blank=True, help_text=help_text or None)


def _obj(help_text: str = "") -> AnyObject:
    return AnyObject(required=False, allow_null=True, help_text=help_text or None)


class _Floats(serializers.DictField):
    child = serializers.FloatField(allow_null=True)


class LineItemSerializer(serializers.Serializer):
    category = _text("gpu_servers, network, power, facility, maintenance, storage, staff")
    item = _text()
    quantity = _num()
    unit_price_usd = _num()
    total_usd = _num("quantity × unit price: one-off for capex, per year for opex")
    basis = _text('"capex" (one-off) or "opex" (per year)')
    annual_usd = _num("the line's part of the annual TCO (capex amortized)")
    network = serializers.BooleanField(required=False)
    source = _text()  # type: ignore[assignment]  # a field named like a Field attribute


class PerformanceResultSerializer(serializers.Serializer):
    """A predict run's result (and ``performance`` of a TCO result). Figures are null when the layout does not fit."""

    step_time_s = _num()
    tokens_per_s = _num()
    tokens_per_s_per_gpu = _num()
    model_tflops_per_gpu = _num()
    hardware_tflops_per_gpu = _num()
    mfu = _num("a fraction (0.42 = 42%)")
    hfu = _num()
    memory_gb_per_gpu = _num()
    memory_limit_gb = _num()
    fits = serializers.BooleanField(required=False, allow_null=True)
    time_to_train_days = _num()
    gpu_hours = _num()
    network_wait_fraction = _num("a fraction")
    breakdown_s = _Floats(required=False, help_text="seconds per step by term (compute, tp_comm, …)")
    parallelism = _obj()
    gpu = _text()
    gpus = serializers.IntegerField(required=False, allow_null=True)
    precision = _text()
    notes = serializers.ListField(child=serializers.CharField(allow_blank=True), required=False)
    fabric = _obj()
    routing_source = _obj()


class SearchResultSerializer(PerformanceResultSerializer):
    """A search run's result: the fastest layout that fits, and the runners-up with why each loses."""

    alternatives = serializers.ListField(child=AnyObject(), required=False)
    candidates_evaluated = serializers.IntegerField(required=False)
    candidates_feasible = serializers.IntegerField(required=False)


class TcoSectionSerializer(serializers.Serializer):
    capex_usd = _num()
    capex_per_gpu_usd = _num()
    network_capex_usd = _num()
    network_share_of_capex = _num()
    annual_opex_usd = _num()
    annual_tco_usd = _num()
    network_annual_usd = _num()
    network_share_of_tco = _num()
    usd_per_gpu_hour = _num()
    run_days = _num()
    run_cost_usd = _num()
    usd_per_million_tokens = _num()
    stranded_usd_per_year = _num()
    annual_by_category_usd = _Floats(required=False)
    line_items = LineItemSerializer(many=True, required=False)
    facility_mode = _text()
    server_model = _text()


class TcoResultSerializer(serializers.Serializer):
    """A TCO run's result: fabric sizing, cost (with line items), goodput, performance, optional uncertainty."""

    performance = PerformanceResultSerializer(required=False)
    tco = TcoSectionSerializer(required=False)
    fabric = _obj()
    goodput = _obj()
    monte_carlo = _obj("with params.monte_carlo > 0")
    sensitivity = _obj("with params.sensitivity")


class FleetResultSerializer(serializers.Serializer):
    """A capacity-plan run's result (docs/fleet-model.md)."""

    summary = _obj("P10/P50/P90 over the replications (``replications`` says how many) and per-day bands per "
                   "cluster")
    replications = serializers.ListField(child=AnyObject(), required=False,
                                         help_text="each replication without its daily arrays")
    first = _obj("the first replication in full (timeline, jobs, quarters)")
    purchase = _obj("the purchase search (params.search, when the plan lists candidates): recommendation, "
                    "alternatives, headline")
    plan = _obj()


class FabricResultSerializer(serializers.Serializer):
    """A fabric study's result (docs/flowsim.md): efficiency bands per routing arm, links, seeds."""

    efficiency = _obj()


KNOWN_RESULT_KINDS = ("predict", "search", "tco", "fleet", "fabric")


def _kind_field(kind: str | None) -> serializers.CharField:
    """``kind``: exactly ``kind``, or (None) any kind but the known ones, so that one variant matches a body."""
    schema: dict[str, Any] = ({"type": "string", "enum": [kind]} if kind is not None
                              else {"type": "string", "not": {"enum": list(KNOWN_RESULT_KINDS)}})

    @extend_schema_field(schema)
    class KindField(serializers.CharField):
        pass

    return KindField()


class _RunResultBase(serializers.Serializer):
    run = serializers.IntegerField()
    engine_version = serializers.CharField(allow_blank=True)
    input_hash = serializers.CharField(allow_blank=True, help_text="SHA-256 of the run's input snapshot")


def _run_result(name: str, kind: str | None, result: serializers.Field, doc: str) -> type[serializers.Serializer]:
    fields = {"kind": _kind_field(kind), "result": result, "__doc__": doc, "__module__": __name__}
    return type(f"{name}RunResultSerializer", (_RunResultBase,), fields)


PredictRunResultSerializer = _run_result("Predict", "predict", PerformanceResultSerializer(), "A predict run.")
SearchRunResultSerializer = _run_result("Search", "search", SearchResultSerializer(), "A search run.")
TcoRunResultSerializer = _run_result("Tco", "tco", TcoResultSerializer(), "A TCO run.")
FleetRunResultSerializer = _run_result("Fleet", "fleet", FleetResultSerializer(), "A capacity-plan run.")
FabricRunResultSerializer = _run_result("Fabric", "fabric", FabricResultSerializer(), "A fabric study.")
JobRunResultSerializer = _run_result("Job", None, AnyObject(), "A job on a team's own data (calibration).")

#: ``GET /runs/{id}/result/``: the stored engine result of a succeeded run, typed by the run's ``kind`` (each
#: variant's ``kind`` is one value, so exactly one variant matches a body).
RUN_RESULT = PolymorphicProxySerializer(
    component_name="RunResult",
    serializers=[PredictRunResultSerializer, SearchRunResultSerializer, TcoRunResultSerializer,
                 FleetRunResultSerializer, FabricRunResultSerializer, JobRunResultSerializer],
    resource_type_field_name=None,
)


class CompareColumnSerializer(serializers.Serializer):
    run = serializers.IntegerField()
    label = serializers.CharField()  # type: ignore[assignment]  # a field named like a Field attribute
    kind = serializers.CharField()
    scenario = serializers.IntegerField(allow_null=True)
    engine_version = serializers.CharField()
    baseline = serializers.BooleanField()
    fits = serializers.BooleanField(allow_null=True, help_text="false: does not fit in GPU memory")


class CompareRowSerializer(serializers.Serializer):
    metric = serializers.CharField(help_text="the figure's dotted path in the result")
    label = serializers.CharField()  # type: ignore[assignment]  # a field named like a Field attribute
    unit = serializers.CharField(help_text="USD, USD/yr, fraction, s, days, GB, count, …")
    kind = serializers.CharField(help_text="money (exact cents), price (money per unit, full precision), share (a "
                                           "fraction: moves in points) or amount")
    change_unit = serializers.ChoiceField(choices=["pt", "%"], help_text="the unit of delta_pct")
    lower_is_better = serializers.BooleanField(allow_null=True)
    values = serializers.DictField(child=serializers.FloatField(allow_null=True), help_text="run id → value")
    delta = serializers.DictField(child=serializers.FloatField(allow_null=True),
                                  help_text="run id → value − baseline, in the unit (money: exact cents)")
    delta_pct = serializers.DictField(
        child=serializers.FloatField(allow_null=True),
        help_text="run id → the change in change_unit: percentage points for a share (MFU 40% → 42%: 2.0), "
                  "percent of the baseline otherwise (null when the baseline is 0)")
    beyond_model_error = serializers.DictField(
        child=serializers.BooleanField(allow_null=True),
        help_text="run id → true when the change exceeds the engine's error on differences (model_error_on_"
                  "differences, measured on the validation's scaling series), false when it is within it; null for "
                  "figures the performance model's error does not apply to (capex, switch counts...)")


class CompareTableSerializer(serializers.Serializer):
    """A comparison: runs as columns (baseline first), one row per figure."""

    baseline = serializers.IntegerField()
    runs = serializers.ListField(child=serializers.IntegerField())
    comparison_id = serializers.CharField(help_text="stable id of this baseline and these runs (export file names)")
    model_error_on_differences = serializers.FloatField(
        allow_null=True, help_text="|log ratio| within which 80% of the engine's predicted changes fell on the "
                                   "validation's scaling series: smaller changes are within the model's error")
    columns = CompareColumnSerializer(many=True)
    rows = CompareRowSerializer(many=True)


class CompareExportSerializer(CompareTableSerializer):
    """``fmt=json`` of a comparison export."""

    name = serializers.CharField()
    definitions = serializers.DictField(child=serializers.CharField())


class StatementLineSerializer(serializers.Serializer):
    category = serializers.CharField()
    item = serializers.CharField()
    quantity = serializers.FloatField()
    unit_price_usd = serializers.FloatField(help_text="full precision")
    basis = serializers.CharField(help_text='"one-off" (capex) or "per year" (opex)')
    capex_usd = serializers.FloatField(allow_null=True, help_text="one-off, exact cents (capex lines)")
    opex_usd_per_year = serializers.FloatField(allow_null=True, help_text="per year, exact cents (opex lines)")
    tco_usd_per_year = serializers.FloatField(allow_null=True, help_text="the line's part of the annual TCO, cents")
    note = serializers.IntegerField(allow_null=True, help_text="the number of the line's source in notes")


class StatementTotalsSerializer(serializers.Serializer):
    capex_usd = serializers.FloatField(help_text="= the result's capex (the sum of the lines' cents)")
    opex_usd_per_year = serializers.FloatField(help_text="= the result's annual opex")
    tco_usd_per_year = serializers.FloatField(allow_null=True, help_text="= the result's annual TCO")


class NoteSerializer(serializers.Serializer):
    note = serializers.IntegerField()
    source = serializers.CharField()  # type: ignore[assignment]  # a field named like a Field attribute


class LineItemsExportSerializer(serializers.Serializer):
    """``fmt=json`` of ``/runs/{id}/export/``: the cost line items, their totals and their sources, once each."""

    run = serializers.IntegerField()
    label = serializers.CharField()  # type: ignore[assignment]  # a field named like a Field attribute
    kind = serializers.CharField()
    engine_version = serializers.CharField()
    input_hash = serializers.CharField()
    rows = StatementLineSerializer(many=True)
    totals = StatementTotalsSerializer(allow_null=True)
    notes = NoteSerializer(many=True)
    definitions = serializers.DictField(child=serializers.CharField())


class RunEventSerializer(serializers.ModelSerializer):
    """One event of a run's execution history (``/runs/{id}/events/``, oldest first): claims, lapsed leases,
    re-sent messages, releases for a retry, lost claims, the end. The executing host is not shown: ``by`` says
    whether an execution (a worker) or the reaper wrote the event."""

    kind_label = serializers.CharField(source="get_kind_display", read_only=True,
                                       help_text='the event in words ("Claimed by an execution")')
    by = serializers.SerializerMethodField(help_text='"worker" (an execution of the run) or "reaper"')

    class Meta:
        model = RunEvent
        fields: tuple[str, ...] = ("id", "at", "kind", "kind_label", "attempt", "by", "message")
        read_only_fields = fields

    @extend_schema_field(serializers.ChoiceField(choices=["worker", "reaper"]))
    def get_by(self, obj: RunEvent) -> str:
        return "reaper" if obj.worker == "reaper" else "worker"


def error_responses(*codes: int) -> dict[int, OpenApiResponse]:
    """The error statuses an endpoint documents, each with the one error body."""
    words = {400: "invalid input: the body names each field", 401: "no or bad credentials",
             403: "your role lacks the capability (plan, export)", 404: "no such object in your teams",
             409: "conflict", 413: "request too large", 429: "rate limited"}
    return {c: OpenApiResponse(ErrorBodySerializer, description=words.get(c, "error")) for c in codes}


def export_responses(json_body: Any, what: str) -> dict[Any, Any]:
    """A download in the three formats (``fmt``), typed per media type, and its errors."""
    # JSON first: a schema checker that validates a JSON body against the first media type of a response reads
    # the JSON schema; CSV and XLSX bodies are not JSON and are checked by content type only
    return {
        (200, "application/json"): OpenApiResponse(json_body, description=f"{what}: JSON, CSV (UTF-8) or XLSX by "
                                                                           "fmt; money in exact cents"),
        (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR),
        (200, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"): OpenApiResponse(
            OpenApiTypes.BINARY),
        **error_responses(400, 403, 404),
    }


#: the ``Location`` header of a submitted run (202, and 200 when an identical run answers)
LOCATION_HEADER = OpenApiParameter("Location", OpenApiTypes.URI, location=OpenApiParameter.HEADER, response=[200, 202],
                                   description="the run's URL (/api/v1/runs/{id}/)")

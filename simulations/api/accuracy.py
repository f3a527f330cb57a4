"""GET /api/v1/accuracy/: how well the engine predicts published training runs, for finance tooling and planners
who want the evidence behind the error bands (the portal's Accuracy page shows the same document)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from simulations import selectors


class _WorstRowSerializer(serializers.Serializer):
    run = serializers.CharField()
    error = serializers.FloatField(help_text="(predicted - measured) / measured")


class AccuracySetSerializer(serializers.Serializer):
    key = serializers.CharField(help_text='A validation set, or "all"')
    title = serializers.CharField()
    runs = serializers.IntegerField()
    mape = serializers.FloatField(help_text="Mean absolute error in each run's own quantity, in-sample (fraction)")
    bias = serializers.FloatField(help_text="Mean predicted / measured per-GPU throughput - 1 (positive: optimistic)")
    worst = _WorstRowSerializer(allow_null=True)
    loso_mape = serializers.FloatField(help_text="The same, leave-one-source-out")
    loso_bias = serializers.FloatField()
    loso_worst = _WorstRowSerializer(allow_null=True)
    coverage = serializers.FloatField(help_text="Share of runs inside their 80% band fitted without their source")


class AccuracyTargetSerializer(serializers.Serializer):
    key = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]
    target = serializers.CharField()
    value = serializers.FloatField()
    met = serializers.BooleanField()


class ScalingStepSerializer(serializers.Serializer):
    series = serializers.CharField()
    gpu = serializers.CharField()
    source = serializers.CharField()  # type: ignore[assignment]
    from_gpus = serializers.IntegerField()
    from_run = serializers.CharField()
    to_gpus = serializers.IntegerField()
    to_run = serializers.CharField()
    measured_change = serializers.FloatField(help_text="Per-GPU throughput change from the smallest size (fraction)")
    predicted_change = serializers.FloatField(help_text="The same, predicted leave-one-source-out")
    gap_points = serializers.FloatField(help_text="predicted - measured, in points (positive: scale under-charged)")


class AccuracyRowSerializer(serializers.Serializer):
    run = serializers.CharField()
    set = serializers.CharField()
    metric = serializers.CharField()
    measured = serializers.FloatField()
    predicted = serializers.FloatField()
    error = serializers.FloatField()
    loso_error = serializers.FloatField()
    gpus = serializers.IntegerField()
    band = serializers.ListField(child=serializers.FloatField(), allow_null=True,
                                 help_text="[p10, p90] of measured / predicted per-GPU throughput")
    inside = serializers.BooleanField(help_text="The measured value lies in the band fitted without its source")
    source = serializers.CharField()  # type: ignore[assignment]


class AccuracyResponseSerializer(serializers.Serializer):
    engine_version = serializers.CharField()
    about = serializers.CharField()
    sets = AccuracySetSerializer(many=True)
    targets = AccuracyTargetSerializer(many=True)
    scaling_steps = ScalingStepSerializer(many=True)
    differences = serializers.DictField(allow_null=True, help_text="The model's error on differences")
    rows = AccuracyRowSerializer(many=True)


class AccuracyView(APIView):
    """The engine's accuracy on published runs, in-sample and leave-one-source-out (docs/validation.md as data)."""

    permission_classes = (IsAuthenticated,)

    @extend_schema(responses=AccuracyResponseSerializer)
    def get(self, request: Request) -> Response:
        return Response(selectors.model_accuracy())

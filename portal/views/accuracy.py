"""The engine's accuracy on published training runs: the evidence behind every error band the portal shows."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from portal.charts import accuracy_charts
from simulations.selectors import accuracy_sets, model_accuracy


@login_required
@require_GET
def accuracy(request: HttpRequest) -> HttpResponse:
    summary = model_accuracy()
    overall, sets = accuracy_sets(summary)
    return render(request, "portal/accuracy.html", {
        "summary": summary, "overall": overall, "charts": accuracy_charts(summary), "sets": sets,
    })

"""Saved comparison reports: create and update (the comparison itself is ``simulations.reports``)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from accounts.models import Team
from core.errors import ValidationError
from simulations.models import Report, SimulationRun


def _report_runs_check(*, team_id: int, runs: list[SimulationRun], baseline: SimulationRun) -> None:
    if not runs:
        raise ValidationError({"runs": ["give at least one run"]})
    foreign = [r.pk for r in runs if r.team_id != team_id]
    if foreign:
        raise ValidationError({"runs": [f"run(s) not found: {', '.join(map(str, foreign))}"]})
    if baseline.team_id != team_id:
        raise ValidationError({"baseline": [f"run {baseline.pk} not found"]})


def report_create(
    *, team: Team, user: Any, name: str, runs: list[SimulationRun], baseline: SimulationRun | None = None,
    description: str = "", metrics: list[str] | None = None,
) -> Report:
    if not name.strip():
        raise ValidationError({"name": ["This field is required."]})
    baseline = baseline or (runs[0] if runs else None)
    if baseline is None:
        raise ValidationError({"runs": ["give at least one run"]})
    _report_runs_check(team_id=team.pk, runs=runs, baseline=baseline)
    with transaction.atomic():
        report = Report.objects.create(team=team, created_by=user, updated_by=user, name=name.strip(),
                                       description=description, baseline=baseline, metrics=list(metrics or []))
        report.runs.set({*runs, baseline})
    return report


def report_update(*, report: Report, user: Any, **fields: Any) -> Report:
    runs = fields.pop("runs", None)
    baseline = fields.pop("baseline", None) or report.baseline
    current = list(report.runs.all()) if runs is None else runs
    _report_runs_check(team_id=report.team_id, runs=current, baseline=baseline)
    with transaction.atomic():
        for key in ("name", "description", "metrics"):
            if key in fields:
                setattr(report, key, fields[key])
        report.baseline = baseline
        report.updated_by = user
        report.save()
        report.runs.set({*current, baseline})
    return report

"""Saved reports in the portal: list, "Save this comparison", open, rename / re-baseline, permissions."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from tests.portal.test_pages import login

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_runs(make_user: Any, team: Any, scenario_for: Any, finished_run: Any) -> tuple[Any, list[Any]]:
    planner = make_user("planner", team=team)
    scenario = scenario_for(team, planner)
    return planner, [finished_run(scenario, planner, monte_carlo=50, nic_gbps=n) for n in (400, 800)]


def test_save_comparison_open_and_list(client: Any, two_runs: Any) -> None:
    from simulations.models import Report

    planner, runs = two_runs
    ids = f"{runs[0].pk},{runs[1].pk}"
    login(client, planner)
    html = client.get(reverse("compare"), {"runs": ids, "baseline": runs[1].pk}).content.decode()
    assert "Save this comparison" in html and 'id="save-report"' in html
    assert f'name="runs" value="{ids}"' in html and f'name="baseline" value="{runs[1].pk}"' in html

    r = client.post(reverse("report-new"), {"runs": ids, "baseline": runs[1].pk, "name": "400G vs 800G",
                                             "description": "IB, 256 H100"})
    report = Report.objects.get()
    assert r.status_code == 302 and r["Location"] == reverse("report-detail", args=[report.pk])
    assert report.baseline == runs[1] and set(report.runs.all()) == set(runs) and report.created_by == planner

    listing = client.get(reverse("reports")).content.decode()
    assert 'id="reports-table"' in listing and "400G vs 800G" in listing and "IB, 256 H100" in listing
    assert reverse("report-detail", args=[report.pk]) in listing

    page = client.get(reverse("report-detail", args=[report.pk])).content.decode()
    assert "<h1>400G vs 800G</h1>" in page and 'id="compare-table"' in page and 'id="charts"' in page
    assert f"run #{runs[1].pk}" in page  # the saved baseline
    assert "Save this comparison" not in page and 'id="report-edit"' in page
    assert f"compare/export/?runs={ids}&amp;baseline={runs[1].pk}&amp;report={report.pk}&format=csv" in page
    export = client.get(reverse("compare-export"), {"runs": ids, "baseline": runs[1].pk, "format": "csv",
                                                    "report": report.pk})
    assert export.status_code == 200  # the saved report's export is named for the report
    assert f'filename="report-{report.pk}-400g-vs-800g.csv"' in export["Content-Disposition"]


def test_rename_and_rebaseline(client: Any, two_runs: Any) -> None:
    from simulations import services
    from simulations.models import Report

    planner, runs = two_runs
    report = services.report_create(team=planner.test_team, user=planner, name="r", runs=runs, baseline=runs[0])
    login(client, planner)
    # looking at another baseline does not save it, but offers to
    html = client.get(reverse("report-detail", args=[report.pk]), {"baseline": runs[1].pk}).content.decode()
    assert f"with run #{runs[1].pk} as baseline" in html
    assert Report.objects.get().baseline == runs[0]
    r = client.post(reverse("report-detail", args=[report.pk]),
                    {"name": "renamed", "description": "d", "baseline": runs[1].pk})
    assert r.status_code == 302
    report.refresh_from_db()
    assert report.name == "renamed" and report.description == "d" and report.baseline == runs[1]
    r = client.post(reverse("report-detail", args=[report.pk]), {"name": "  "})
    report.refresh_from_db()
    assert report.name == "renamed"
    assert client.get(reverse("report-detail", args=[report.pk]), {"baseline": 999999}).status_code == 404


def test_empty_list_and_bad_input(client: Any, two_runs: Any) -> None:
    from simulations.models import Report

    planner, runs = two_runs
    login(client, planner)
    assert "No saved reports yet" in client.get(reverse("reports")).content.decode()
    r = client.post(reverse("report-new"), {"runs": f"{runs[0].pk}", "name": ""})
    assert r.status_code == 302 and not Report.objects.exists()
    assert client.post(reverse("report-new"), {"runs": "1,x", "name": "n"}).status_code == 404
    assert client.post(reverse("report-new"), {"runs": "", "name": "n"}).status_code == 404


def test_viewer_reads_but_cannot_save_or_edit(client: Any, make_user: Any, team: Any, two_runs: Any) -> None:
    from simulations import services
    from simulations.models import Report

    planner, runs = two_runs
    report = services.report_create(team=team, user=planner, name="kept", runs=runs)
    login(client, make_user("viewer", team=team))
    html = client.get(reverse("compare"), {"runs": f"{runs[0].pk},{runs[1].pk}"}).content.decode()
    assert 'id="compare-table"' in html and "Save this comparison" not in html
    assert client.post(reverse("report-new"), {"runs": f"{runs[0].pk}", "name": "x"}).status_code == 403
    assert "kept" in client.get(reverse("reports")).content.decode()
    page = client.get(reverse("report-detail", args=[report.pk])).content.decode()
    assert 'id="compare-table"' in page and 'id="report-edit"' not in page
    assert client.post(reverse("report-detail", args=[report.pk]), {"name": "hacked"}).status_code == 403
    assert Report.objects.get().name == "kept" and Report.objects.count() == 1


def test_other_teams_reports_and_runs_are_404(
    client: Any, make_user: Any, other_team: Any, two_runs: Any
) -> None:
    from simulations import services
    from simulations.models import Report

    planner, runs = two_runs
    report = services.report_create(team=planner.test_team, user=planner, name="secret", runs=runs)
    login(client, make_user("planner", team=other_team))
    assert "secret" not in client.get(reverse("reports")).content.decode()
    assert client.get(reverse("report-detail", args=[report.pk])).status_code == 404
    assert client.post(reverse("report-detail", args=[report.pk]), {"name": "x"}).status_code == 404
    assert client.post(reverse("report-new"), {"runs": f"{runs[0].pk}", "name": "x"}).status_code == 404
    assert Report.objects.count() == 1

"""Compare report (deltas vs baseline), saved reports, exports (CSV/XLSX/JSON, formula escaping)."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def three_runs(world, finished_run) -> list[Any]:
    from planning import services as planning

    x = world["x"]
    user = world["users"]["planner"]
    runs = []
    for nic in (200, 400, 800):
        planning.scenario_update(scenario=x["scenario"], user=user, cluster={**x["scenario"].cluster, "nic_gbps": nic})
        runs.append(finished_run(x["scenario"], user, kind="tco"))
    return runs


def test_compare_deltas_against_baseline(world, three_runs, api_client_for) -> None:
    a, b, c = three_runs
    client = api_client_for(world["users"]["viewer"])
    r = client.get(f"/api/v1/reports/compare?runs={a.pk},{b.pk},{c.pk}&baseline={b.pk}")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["baseline"] == b.pk and body["runs"] == [b.pk, a.pk, c.pk]
    assert body["columns"][0]["baseline"] is True
    rows = {row["metric"]: row for row in body["rows"]}
    step = rows["performance.step_time_s"]
    va, vb, vc = (a.result["performance"]["step_time_s"], b.result["performance"]["step_time_s"],
                  c.result["performance"]["step_time_s"])
    assert step["values"] == {str(b.pk): vb, str(a.pk): va, str(c.pk): vc}
    assert step["delta"][str(a.pk)] == pytest.approx(va - vb)
    assert step["delta_pct"][str(c.pk)] == pytest.approx((vc - vb) / vb * 100)
    assert str(b.pk) not in step["delta"]
    assert "tco.capex_usd" in rows and "fabric.switches.total" in rows
    # Each change says whether it exceeds the engine's error on differences (measured on the scaling series):
    # step time beyond it exactly when |log(value / baseline)| > model_error_on_differences
    limit = body["model_error_on_differences"]
    assert 0 < limit < 1
    assert step["beyond_model_error"] == {str(a.pk): abs(math.log(va / vb)) > limit,
                                          str(c.pk): abs(math.log(vc / vb)) > limit}
    assert set(rows["tco.capex_usd"]["beyond_model_error"].values()) == {None}  # a bill of materials
    # Metrics as rows in a stable order: headline metrics first.
    assert body["rows"][0]["metric"].startswith(("step_time", "performance", "tco"))
    # The slash form and a metric filter work too.
    r = client.get(f"/api/v1/reports/compare/?runs={a.pk},{c.pk}&metrics=tco.capex_usd")
    assert [row["metric"] for row in r.json()["rows"]] == ["tco.capex_usd"]


def test_compare_errors_name_the_parameter(world, three_runs, api_client_for) -> None:
    from simulations.models import SimulationRun

    client = api_client_for(world["users"]["viewer"])
    assert "runs" in client.get("/api/v1/reports/compare").json()["errors"]
    assert "runs" in client.get("/api/v1/reports/compare?runs=a,b").json()["errors"]
    assert "runs" in client.get("/api/v1/reports/compare?runs=999999").json()["errors"]
    r = client.get(f"/api/v1/reports/compare?runs={three_runs[0].pk}&baseline=x")
    assert "baseline" in r.json()["errors"]
    SimulationRun.objects.filter(pk=three_runs[0].pk).update(status="failed")
    r = client.get(f"/api/v1/reports/compare?runs={three_runs[0].pk},{three_runs[1].pk}")
    assert r.status_code == 400 and "runs" in r.json()["errors"]
    r = client.get(f"/api/v1/reports/compare?runs={three_runs[1].pk}&fmt=pdf")
    assert r.status_code in (400, 403)


def test_exports_agree_and_escape_formulas(world, three_runs, api_client_for) -> None:
    import openpyxl

    a, b, _ = three_runs
    client = api_client_for(world["users"]["finance"])
    ids = f"{a.pk},{b.pk}"
    j = client.get(f"/api/v1/reports/compare?runs={ids}&fmt=json")
    assert j.status_code == 200 and j["Content-Type"] == "application/json"
    as_json = json.loads(j.content)
    capex_json = next(r for r in as_json["rows"] if r["metric"] == "tco.capex_usd")["values"][str(b.pk)]

    c = client.get(f"/api/v1/reports/compare?runs={ids}&fmt=csv")
    assert c.status_code == 200 and "attachment" in c["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(c.content.decode())))
    header, body = rows[0], {r[0]: r for r in rows[1:]}
    assert header[:4] == ["metric", "label", "unit", "change_in"] and header[4].endswith("(baseline)")
    assert float(body["tco.capex_usd"][header.index(f"#{b.pk} {b.label}")]) == pytest.approx(capex_json)

    x = client.get(f"/api/v1/reports/compare?runs={ids}&fmt=xlsx")
    assert x.status_code == 200
    wb = openpyxl.load_workbook(io.BytesIO(x.content))
    ws = wb["Comparison"]
    values = {row[0]: row for row in ws.iter_rows(min_row=2, values_only=True)}
    assert values["tco.capex_usd"][4] == round(a.result["tco"]["capex_usd"], 2)

    # Line items: text cells that look like formulas are neutralised in CSV and XLSX.
    li = client.get(f"/api/v1/runs/{a.pk}/export/?fmt=csv").content.decode()
    assert "'=HYPERLINK" in li and "'+evil" in li and "\n=HYPERLINK" not in li
    wb = openpyxl.load_workbook(io.BytesIO(client.get(f"/api/v1/runs/{a.pk}/export/?fmt=xlsx").content))
    cells = [c for row in wb["Line items"].iter_rows(values_only=True) for c in row if isinstance(c, str)]
    assert "'=HYPERLINK(\"http://x\")" in cells and not any(c.startswith("=") for c in cells)
    data = json.loads(client.get(f"/api/v1/runs/{a.pk}/export/?fmt=json").content)
    assert data["rows"][0]["capex_usd"] == round(a.result["tco"]["line_items"][0]["total_usd"], 2)
    assert data["rows"][1]["item"].startswith("=")  # JSON is data, not a spreadsheet: left as is
    assert client.get(f"/api/v1/runs/{a.pk}/export/?fmt=pdf").status_code == 400


def test_saved_report_crud_and_export(world, three_runs, api_client_for) -> None:
    a, b, c = three_runs
    client = api_client_for(world["users"]["planner"])
    r = client.post("/api/v1/reports/", {"name": "NIC speeds", "runs": [a.pk, b.pk, c.pk], "baseline": a.pk},
                    format="json")
    assert r.status_code == 201, r.content
    report_id = r.json()["id"]
    table = client.get(f"/api/v1/reports/{report_id}/table/").json()
    assert table["baseline"] == a.pk and len(table["runs"]) == 3
    r = client.patch(f"/api/v1/reports/{report_id}/", {"baseline": c.pk, "metrics": ["tco.capex_usd"]},
                     format="json")
    assert r.status_code == 200 and r.json()["baseline"] == c.pk
    out = client.get(f"/api/v1/reports/{report_id}/export/?fmt=csv")
    assert out.status_code == 200 and f'filename="report-{report_id}-nic-speeds.csv"' in out["Content-Disposition"]
    assert out.content.decode().count("\n") == 2  # header + one metric
    viewer = api_client_for(world["users"]["viewer"])
    assert viewer.get(f"/api/v1/reports/{report_id}/export/?fmt=csv").status_code == 403
    assert viewer.delete(f"/api/v1/reports/{report_id}/").status_code == 403
    assert client.delete(f"/api/v1/reports/{report_id}/").status_code == 204


def test_compare_service_returns_frame_for_portal(three_runs) -> None:
    from simulations import reports

    a, b, _ = three_runs
    frame = reports.compare_frame(runs=[a, b], baseline=a)
    assert list(frame.columns) == [f"run:{a.pk}", f"run:{b.pk}", f"delta:{b.pk}", f"delta_pct:{b.pk}"]
    body, ctype, name = reports.export_compare(runs=[a, b], baseline=a, fmt="xlsx", name="runs")
    assert body[:2] == b"PK" and ctype.endswith("sheet") and name.endswith(".xlsx")

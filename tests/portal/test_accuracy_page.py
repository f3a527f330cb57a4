"""The Accuracy page and GET /api/v1/accuracy/: the shipped validation summary, as a planner reads it."""

from __future__ import annotations

import json
from typing import Any

from django.urls import reverse

from engine.validation.summary import SUMMARY_PATH
from engine.version import ENGINE_VERSION

SHIPPED = json.loads(SUMMARY_PATH.read_text(encoding="utf-8"))
OVERALL = next(s for s in SHIPPED["sets"] if s["key"] == "all")


def test_the_page_shows_the_shipped_figures_and_the_engine_version(client: Any, make_user: Any, team: Any) -> None:
    client.force_login(make_user("viewer", team))
    page = client.get(reverse("accuracy"))
    assert page.status_code == 200
    html = page.content.decode()
    assert f"engine {ENGINE_VERSION}" in html
    assert f'id="loso-mape">{OVERALL["loso_mape"] * 100:.1f}%<' in html
    assert f'id="coverage">{OVERALL["coverage"] * 100:.1f}%<' in html
    for s in SHIPPED["sets"]:
        assert f'data-set="{s["key"]}"' in html
    for t in SHIPPED["targets"]:  # each target with its verdict
        row = html.split(f'data-target="{t["key"]}"', 1)[1].split("</tr>", 1)[0]
        assert ("badge-succeeded" in row) is t["met"] and ("badge-failed" in row) is not t["met"]
    assert html.count("<tr><th scope=\"row\">") >= len(SHIPPED["rows"]) + len(SHIPPED["scaling_steps"])
    assert 'data-chart="chart-scaling"' in html and 'id="chart-scaling" type="application/json"' in html
    assert 'href="/accuracy/"' in html  # the main navigation leads here
    # each run says whether it fell in its band; as many do as the coverage says
    assert html.count('data-inside="yes"') == round(OVERALL["coverage"] * OVERALL["runs"])
    assert html.count('data-inside="no"') == OVERALL["runs"] - round(OVERALL["coverage"] * OVERALL["runs"])


def test_the_scaling_chart_plots_measured_against_predicted(client: Any, make_user: Any, team: Any) -> None:
    client.force_login(make_user("finance", team))
    html = client.get(reverse("accuracy")).content.decode()
    spec = json.loads(html.split('id="chart-scaling" type="application/json">', 1)[1].split("</script>", 1)[0])
    measured, predicted = spec["datasets"]
    assert measured["data"] == [st["measured_change"] for st in SHIPPED["scaling_steps"]]
    assert predicted["data"] == [st["predicted_change"] for st in SHIPPED["scaling_steps"]]


def test_the_api_serves_the_same_document_to_any_signed_in_user(api_client_for: Any, make_user: Any,
                                                                team: Any, client: Any) -> None:
    body = api_client_for(make_user("viewer", team)).get("/api/v1/accuracy/").json()
    assert body["engine_version"] == ENGINE_VERSION
    assert body["sets"] == SHIPPED["sets"] and body["targets"] == SHIPPED["targets"]
    assert len(body["rows"]) == OVERALL["runs"]
    assert client.get("/api/v1/accuracy/").status_code in (401, 403)
    assert api_client_for(make_user("viewer", team)).post("/api/v1/accuracy/", {}).status_code == 405

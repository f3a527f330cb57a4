"""Issue #24: exports a finance team can reconcile, to the cent, with the page and with each other.

A run exported as CSV, XLSX and JSON (portal and API) and a comparison exported the same three ways carry the
figures the pages show: money in exact cents, every line item's total adding up to the headline capex, annual opex
and annual TCO; every other figure at full precision; sources once each; one definition of a change (points for
shares, percent otherwise) in the API, the exports and the portal; file names that name what was exported.
"""

from __future__ import annotations

import csv
import io
import json
import re
from decimal import Decimal
from typing import Any

import openpyxl
import pytest
from django.urls import reverse

from tests.portal.test_pages import login

pytestmark = pytest.mark.django_db

MONEY = re.compile(r"-?\d+(\.\d{1,2})?")


def cents(value: Any) -> int:
    """A money cell as whole cents, exactly (a float cell, a CSV string or a page's data-value)."""
    d = Decimal(str(value))
    assert d == d.quantize(Decimal("0.01")), f"not exact cents: {value!r}"
    return int(d * 100)


def blocks(text: str) -> list[list[list[str]]]:
    return [list(csv.reader(io.StringIO(b))) for b in text.strip("\n").split("\n\n")]


def table(rows: list[list[str]]) -> list[dict[str, str]]:
    return [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]


def page_totals(html: str) -> dict[str, int]:
    out = {}
    for key in ("capex", "opex", "tco"):
        m = re.search(rf'id="total-{key}" data-value="([^"]*)"', html)
        assert m, key
        out[key] = cents(m.group(1))
    return out


@pytest.fixture
def run_and_client(client: Any, make_user: Any, team: Any, scenario_for: Any, finished_run: Any) -> tuple[Any, Any]:
    planner = make_user("planner", team)
    run = finished_run(scenario_for(team, planner), planner, monte_carlo=0)
    login(client, planner)
    return run, client


def test_a_run_reconciles_to_the_cent_in_csv_xlsx_json_and_on_the_page(run_and_client: Any) -> None:
    run, client = run_and_client
    items = run.result["tco"]["line_items"]
    html = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    page = page_totals(html)
    line_cells = re.findall(r'<td class="num" data-value="([^"]*)">', html[html.index('id="line-items"'):])
    assert len(line_cells) == 3 * len(items)  # one-off, per year, TCO per year on every line

    # CSV: figures, line items (with the totals row), notes
    text = client.get(reverse("run-export", args=[run.pk]) + "?format=csv").content.decode()
    summary, lines, notes = blocks(text)
    figures = {r["metric"]: r for r in table(summary)}
    rows = table(lines)
    *lines_, total = rows
    assert total["category"] == "total" and len(lines_) == len(items)
    capex = sum(cents(r["capex_usd"]) for r in lines_ if r["capex_usd"])
    opex = sum(cents(r["opex_usd_per_year"]) for r in lines_ if r["opex_usd_per_year"])
    tco = sum(cents(r["tco_usd_per_year"]) for r in lines_)
    assert capex == cents(total["capex_usd"]) == cents(figures["tco.capex_usd"]["value"]) == page["capex"]
    assert opex == cents(total["opex_usd_per_year"]) == cents(figures["tco.annual_opex_usd"]["value"]) == page["opex"]
    assert tco == cents(total["tco_usd_per_year"]) == cents(figures["tco.annual_tco_usd"]["value"]) == page["tco"]
    # the engine's own headline differs from the sum of its cents by rounding only (half a cent per line at most)
    assert abs(capex - run.result["tco"]["capex_usd"] * 100) <= 0.5 * len(items)
    assert abs(opex - run.result["tco"]["annual_opex_usd"] * 100) <= 0.5 * len(items)
    # one-off and per-year never share a column: a line is capex or opex
    assert all(bool(r["capex_usd"]) != bool(r["opex_usd_per_year"]) for r in lines_)
    for r, item in zip(lines_, items, strict=True):
        amount = r["capex_usd"] or r["opex_usd_per_year"]
        assert MONEY.fullmatch(amount) and cents(amount) == round(item["total_usd"] * 100), (amount, item)
    # unit prices to the millionth of a dollar: $0.08/kWh stays, 289451.51999999996 (engine arithmetic) does not
    assert all(len(r["unit_price_usd"].partition(".")[2]) <= 6 for r in lines_)
    # installation ($1,513,472.xx on the page) is not cut to 6 significant figures
    install = next(r for r in lines_ if r["item"].startswith("Installation and integration (servers)"))
    assert cents(install["capex_usd"]) == round(next(i["total_usd"] for i in items
                                                     if i["item"] == install["item"]) * 100)
    # other figures at full precision: the same double as the result
    assert float(figures["performance.step_time_s"]["value"]) == run.result["performance"]["step_time_s"]
    # sources once each, as notes; the rows only point at them
    sources = {i["source"] for i in items if i["source"]}
    assert table(notes) and {n["source"] for n in table(notes)} == sources
    longest = max(sources, key=len)
    assert text.count(longest) == 1 and len(longest) > 500
    assert {r["note"] for r in lines_} <= {n["note"] for n in table(notes)}

    # XLSX: the same cents, money cells formatted as cents
    wb = openpyxl.load_workbook(io.BytesIO(client.get(reverse("run-export", args=[run.pk]) + "?format=xlsx").content))
    assert wb.sheetnames == ["Summary", "Line items", "Notes", "About"]
    ws = wb["Line items"]
    header = [c.value for c in ws[1]]
    values = [dict(zip(header, r, strict=True)) for r in ws.iter_rows(min_row=2, values_only=True)]
    assert sum(cents(v["capex_usd"]) for v in values[:-1] if v["capex_usd"] is not None) == page["capex"]
    assert cents(values[-1]["capex_usd"]) == page["capex"] and cents(values[-1]["opex_usd_per_year"]) == page["opex"]
    assert ws.cell(row=2, column=header.index("capex_usd") + 1).number_format == "#,##0.00"
    xfig = {r[0]: r for r in wb["Summary"].iter_rows(min_row=2, values_only=True)}
    assert cents(xfig["tco.capex_usd"][3]) == page["capex"] and cents(xfig["tco.annual_tco_usd"][3]) == page["tco"]
    assert [r[1] for r in wb["Notes"].iter_rows(min_row=2, values_only=True)].count(longest) == 1

    # JSON (portal) and the API's three formats: the same cents
    data = json.loads(client.get(reverse("run-export", args=[run.pk]) + "?format=json").content)
    assert cents(data["totals"]["capex_usd"]) == page["capex"] == cents(data["metrics"]["tco.capex_usd"])
    assert sum(cents(r["opex_usd_per_year"]) for r in data["line_items"] if r["opex_usd_per_year"]) == page["opex"]
    api = json.loads(client.get(f"/api/v1/runs/{run.pk}/export/?fmt=json").content)
    assert sum(cents(r["capex_usd"]) for r in api["rows"] if r["capex_usd"] is not None) == page["capex"]
    assert cents(api["totals"]["tco_usd_per_year"]) == page["tco"] and api["notes"] == data["notes"]
    api_csv = blocks(client.get(f"/api/v1/runs/{run.pk}/export/?fmt=csv").content.decode())
    assert cents(table(api_csv[0])[-1]["opex_usd_per_year"]) == page["opex"] and len(api_csv) == 2
    api_x = openpyxl.load_workbook(io.BytesIO(client.get(f"/api/v1/runs/{run.pk}/export/?fmt=xlsx").content))
    assert api_x.sheetnames == ["Line items", "Notes", "About"]
    r = client.get(f"/api/v1/runs/{run.pk}/export/?fmt=csv")
    assert f'filename="run-{run.pk}-line-items.csv"' in r["Content-Disposition"]


def test_a_comparison_reconciles_and_shares_move_in_points_everywhere(
        client: Any, make_user: Any, team: Any, scenario_for: Any, finished_run: Any) -> None:
    planner = make_user("planner", team)
    scenario = scenario_for(team, planner)
    a, b = (finished_run(scenario, planner, monte_carlo=0, nic_gbps=n) for n in (200, 800))
    login(client, planner)

    api = client.get(f"/api/v1/reports/compare/?runs={a.pk},{b.pk}&baseline={a.pk}").json()
    rows = {r["metric"]: r for r in api["rows"]}
    # every row has a human label and a unit
    for r in api["rows"]:
        assert r["label"] and r["label"] != r["metric"] and r["unit"], r
    mfu = rows["performance.mfu"]
    expected = (b.result["performance"]["mfu"] - a.result["performance"]["mfu"]) * 100
    assert mfu["kind"] == "share" and mfu["change_unit"] == "pt" and mfu["delta_pct"][str(b.pk)] == expected
    wait = rows["performance.network_wait_fraction"]
    assert wait["change_unit"] == "pt" and wait["delta_pct"][str(b.pk)] == pytest.approx(
        (b.result["performance"]["network_wait_fraction"] - a.result["performance"]["network_wait_fraction"]) * 100)
    step = rows["performance.step_time_s"]
    sa, sb = a.result["performance"]["step_time_s"], b.result["performance"]["step_time_s"]
    assert step["change_unit"] == "%" and step["delta_pct"][str(b.pk)] == pytest.approx((sb - sa) / sa * 100)
    capex = rows["tco.capex_usd"]
    assert capex["kind"] == "money"
    assert cents(capex["delta"][str(b.pk)]) == cents(capex["values"][str(b.pk)]) - cents(capex["values"][str(a.pk)])

    # the portal's comparison page: the same values and the same changes (points for MFU)
    page = client.get(reverse("compare"), {"runs": f"{a.pk},{b.pk}", "baseline": a.pk})
    mfu_row = next(x for x in page.context["table"]["rows"] if x["metric"].endswith("mfu"))
    assert mfu_row["cells"][1]["delta_pct"] == expected and mfu_row["cells"][1]["delta_text"] == f"{expected:+.1f} pt"
    html = page.content.decode()
    assert f'data-change="{expected!r}"' in html
    assert f'data-value="{capex["values"][str(b.pk)]!r}"' in html

    # each run's own export: the capex a comparison states is the run's line-item total, to the cent
    for run in (a, b):
        run_page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
        assert cents(capex["values"][str(run.pk)]) == page_totals(run_page)["capex"]

    # the comparison's exports: CSV, XLSX and JSON agree with the API to the cent, changes in points for shares
    q = {"runs": f"{a.pk},{b.pk}", "baseline": a.pk}
    c = client.get(reverse("compare-export"), {**q, "format": "csv"})
    assert f'filename="compare-{a.pk}-{b.pk}.csv"' in c["Content-Disposition"]
    csv_rows = {r["metric"]: r for r in table(list(csv.reader(io.StringIO(c.content.decode()))))}
    base_col, run_col = f"#{a.pk} {a.label} (baseline)", f"#{b.pk} {b.label}"
    assert cents(csv_rows["tco.capex_usd"][run_col]) == cents(capex["values"][str(b.pk)])
    assert cents(csv_rows["tco.capex_usd"][f"Δ #{b.pk} {b.label}"]) == cents(capex["delta"][str(b.pk)])
    assert csv_rows["performance.mfu"]["change_in"] == "pt"
    assert float(csv_rows["performance.mfu"][f"change #{b.pk} {b.label}"]) == expected
    assert all(r["label"] and r["unit"] for m, r in csv_rows.items() if m != "fits_in_gpu_memory")
    x = client.get(reverse("compare-export"), {**q, "format": "xlsx"})
    ws = openpyxl.load_workbook(io.BytesIO(x.content))["Comparison"]
    header = [cell.value for cell in ws[1]]
    xrows = {r[0]: dict(zip(header, r, strict=True)) for r in ws.iter_rows(min_row=2, values_only=True)}
    assert cents(xrows["tco.capex_usd"][base_col]) == cents(capex["values"][str(a.pk)])
    assert xrows["performance.mfu"][f"change #{b.pk} {b.label}"] == expected
    j = json.loads(client.get(reverse("compare-export"), {**q, "format": "json"}).content)
    jrows = {r["metric"]: r for r in j["rows"]}
    assert jrows["tco.capex_usd"]["values"] == capex["values"] and jrows["performance.mfu"]["delta_pct"] == \
        mfu["delta_pct"] and "pt" in j["definitions"]["change"]


def test_export_file_names_name_every_run_or_the_comparison(client: Any, make_user: Any, team: Any,
                                                           scenario_for: Any, finished_run: Any) -> None:
    from simulations.models import SimulationRun

    planner = make_user("planner", team)
    scenario = scenario_for(team, planner)
    first = finished_run(scenario, planner, monte_carlo=0)
    runs = [first]
    for _ in range(11):  # twelve runs with the same result: the file name cannot list them all
        clone = SimulationRun.objects.get(pk=first.pk)
        clone.pk = None
        clone.input_hash = f"{len(runs)}"
        clone.save()
        runs.append(clone)
    login(client, planner)
    ids = ",".join(str(r.pk) for r in runs)
    r = client.get(reverse("compare-export"), {"runs": ids, "format": "xlsx"})
    name = re.search(r'filename="([^"]+)"', r["Content-Disposition"]).group(1)
    api = client.get(f"/api/v1/reports/compare/?runs={ids}").json()
    assert name == f"compare-12-runs-{api['comparison_id']}.xlsx"
    about = dict(openpyxl.load_workbook(io.BytesIO(r.content))["About"].iter_rows(min_row=2, values_only=True))
    assert about["runs"] == ", ".join(str(x.pk) for x in runs) and about["comparison_id"] == api["comparison_id"]
    r = client.get(f"/api/v1/reports/compare/?runs={ids}&fmt=csv")
    assert f'filename="compare-12-runs-{api["comparison_id"]}.csv"' in r["Content-Disposition"]
    few = client.get(reverse("compare-export"), {"runs": f"{runs[2].pk},{runs[1].pk}", "format": "csv"})
    assert f'filename="compare-{runs[2].pk}-{runs[1].pk}.csv"' in few["Content-Disposition"]

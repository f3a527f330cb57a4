"""The portal's list pages are django-tables2 tables with django-filter filters: ``?sort=`` orders by a column
(``-`` descending; unknown or unsortable names keep the default order), ``?page=`` / ``?per_page=`` page the
rows (bounded; past the end is the last page), filters narrow the rows, another team's rows never appear,
and a run that does not fit in GPU memory is the red badge, never a figure. No query string is a 500."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.django_db

ROW_IDS = re.compile(r'<tr id="run-row-(\d+)"')


def _runs(scenario: Any, user: Any, labels: list[str], status: str = "succeeded") -> list[Any]:
    """QUEUED rows made by the run service (one per label), then set to ``status`` (no worker)."""
    from planning import services as planning
    from simulations import services as sim
    from simulations.models import RunKind, SimulationRun

    doc, version, values = planning.scenario_resolve(scenario=scenario)
    runs = [sim.run_create(team=scenario.team, user=user, kind=RunKind.TCO, document=doc, version=version,
                           values=values, scenario=scenario, overrides={"cluster.gpus": 8 * (i + 1)}, label=label)
            for i, label in enumerate(labels)]
    SimulationRun.objects.filter(pk__in=[r.pk for r in runs]).update(status=status)
    return runs


def _run_ids(html: str) -> list[int]:
    return [int(pk) for pk in ROW_IDS.findall(html)]


@pytest.fixture
def three_runs(client: Any, make_user: Any, team: Any, scenario_for: Any) -> tuple[Any, list[Any]]:
    planner = make_user("planner", team=team)
    runs = _runs(scenario_for(team, planner), planner, ["bravo", "Alpha", "charlie"])
    client.force_login(planner)
    return planner, runs


# --- ordering --------------------------------------------------------------------------------------------
def test_runs_default_order_is_newest_first_and_sort_orders_by_a_column(client: Any, three_runs: Any) -> None:
    _, runs = three_runs
    ids = [r.pk for r in runs]
    assert _run_ids(client.get(reverse("runs")).content.decode()) == ids[::-1]
    assert _run_ids(client.get(reverse("runs"), {"sort": "run"}).content.decode()) == ids
    assert _run_ids(client.get(reverse("runs"), {"sort": "-run"}).content.decode()) == ids[::-1]
    # by label: the database's order (upper case before lower case in SQLite's binary collation)
    by_label = [r.pk for r in sorted(runs, key=lambda r: r.label)]
    html = client.get(reverse("runs"), {"sort": "title"}).content.decode()
    assert _run_ids(html) == by_label
    # the sorted header says so (CSS arrow and aria-sort), and its link flips the direction
    head = html.split('id="runs-table"')[1].split("</thead>")[0]
    assert re.search(r'<th scope="col" class="[^"]*\bsorted\b[^"]*" aria-sort="ascending"><a href="\?sort=-title">Label',
                     head), head


def test_unknown_or_unsortable_sort_keys_keep_the_default_order(client: Any, three_runs: Any) -> None:
    _, runs = three_runs
    newest_first = [r.pk for r in runs][::-1]
    for sort in ("bogus", "-", "cost", "-progress", "actions", "__class__", "title;drop", "\x00", "é" * 300):
        r = client.get(reverse("runs"), {"sort": sort})
        assert r.status_code == 200, sort
        assert _run_ids(r.content.decode()) == newest_first, sort


def test_catalog_items_sort_like_a_spreadsheet() -> None:
    """Text case-insensitively; an item without the value is last in both directions (not first ascending)."""
    from portal.tables import CatalogItemTable

    items = [{"key": "b", "name": "beta", "kind": "gpu", "unit_price_usd": 20.0, "specs": {}},
             {"key": "A", "name": "Alpha", "kind": "gpu", "unit_price_usd": None, "specs": {}},
             {"key": "c", "name": "gamma", "kind": "gpu", "unit_price_usd": 10.0, "specs": {}}]

    def keys(order: str) -> list[str]:
        return [row.record["key"] for row in CatalogItemTable(list(items), kind="gpu", order_by=order).rows]

    assert keys("key") == ["A", "b", "c"]
    assert keys("-name") == ["c", "b", "A"]
    assert keys("unit_price_usd") == ["c", "b", "A"]
    assert keys("-unit_price_usd") == ["b", "c", "A"]


def test_catalog_sort_by_name_and_kind_tab(client: Any, make_user: Any, catalog: Any) -> None:
    client.force_login(make_user("viewer"))
    html = client.get(reverse("catalog"), {"kind": "gpu", "sort": "-name"}).content.decode()
    table = html.split('id="catalog-table"')[1].split("</table>")[0]
    names = re.findall(r'<td class="mono">[^<]+</td><td>([^<]+)</td>', table)
    assert len(names) > 3 and names == sorted(names, key=str.lower, reverse=True)
    # the kind tabs start a new listing: no sort, no page carried over
    assert 'href="?kind=switch"' in html


# --- pages -----------------------------------------------------------------------------------------------
def test_runs_are_paged_and_a_second_page_shows_the_rest(client: Any, three_runs: Any) -> None:
    _, runs = three_runs
    newest_first = [r.pk for r in runs][::-1]
    first = client.get(reverse("runs"), {"per_page": 2}).content.decode()
    assert _run_ids(first) == newest_first[:2]
    assert "Page 1 of 2" in first and 'rel="next" href="?per_page=2&amp;page=2"' in first
    second = client.get(reverse("runs"), {"per_page": 2, "page": 2}).content.decode()
    assert _run_ids(second) == newest_first[2:]
    # ordering and paging together: page 2 of the oldest-first order
    assert _run_ids(client.get(reverse("runs"), {"per_page": 2, "page": 2, "sort": "run"}).content.decode()) \
        == [runs[2].pk]


def test_bad_page_numbers_answer_a_page_never_an_error(client: Any, three_runs: Any) -> None:
    _, runs = three_runs
    newest_first = [r.pk for r in runs][::-1]
    for page, expected in (("abc", newest_first[:2]), ("999999999999999999999999", newest_first[2:]),
                           ("-3", newest_first[2:]), ("0", newest_first[2:]), ("", newest_first[:2])):
        r = client.get(reverse("runs"), {"per_page": 2, "page": page})
        assert r.status_code == 200, page
        assert _run_ids(r.content.decode()) == expected, page


def test_per_page_is_bounded(client: Any, three_runs: Any) -> None:
    from portal.tables.base import MAX_PER_PAGE

    _ = three_runs
    for per_page, rows in (("0", 1), ("-5", 1), ("1", 1), ("x", 3), (str(10**30), 3)):
        r = client.get(reverse("runs"), {"per_page": per_page})
        assert r.status_code == 200, per_page
        assert len(_run_ids(r.content.decode())) == rows, per_page
    from portal.tables import RunTable
    from simulations.models import SimulationRun

    table = RunTable(SimulationRun.objects.all(), plan_teams=set())
    table.paginate(per_page=10**9)
    assert table.paginator.per_page == MAX_PER_PAGE


def test_the_live_partial_keeps_the_pages_and_its_links_are_pages(client: Any, three_runs: Any) -> None:
    _, runs = three_runs
    SimulationRunModel = type(runs[0])
    SimulationRunModel.objects.filter(pk=runs[0].pk).update(status="running")  # the page polls
    r = client.get(reverse("runs"), {"per_page": 2, "page": 2, "partial": "table"}, HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert html.lstrip().startswith('<div id="runs-live"') and "page=2" in html.split('hx-get="')[1].split('"')[0]
    assert _run_ids(html) == [runs[0].pk]
    links = re.findall(r'href="(\?[^"]*)"', html)
    assert links and not any("partial" in link for link in links)  # a click loads the whole page


# --- filters ---------------------------------------------------------------------------------------------
def test_run_filters_narrow_the_rows(client: Any, make_user: Any, team: Any, scenario_for: Any) -> None:
    planner = make_user("planner", team=team)
    one, two = scenario_for(team, planner, name="one"), scenario_for(team, planner, name="two")
    ok = _runs(one, planner, ["ok"])
    failed = _runs(two, planner, ["failed"], status="failed")
    queued = _runs(two, planner, ["queued"], status="queued")
    client.force_login(planner)
    assert set(_run_ids(client.get(reverse("runs")).content.decode())) == {r.pk for r in ok + failed + queued}
    for status, expected in (("failed", failed), ("active", queued), ("succeeded", ok), ("cancelled", [])):
        html = client.get(reverse("runs"), {"status": status}).content.decode()
        assert _run_ids(html) == [r.pk for r in expected], status
    assert "No runs with this status" in client.get(reverse("runs"), {"status": "cancelled"}).content.decode()
    assert sorted(_run_ids(client.get(reverse("runs"), {"scenario": two.pk}).content.decode())) == \
        sorted(r.pk for r in failed + queued)
    assert _run_ids(client.get(reverse("runs"), {"scenario": two.pk, "status": "failed"}).content.decode()) == \
        [failed[0].pk]
    # an unknown status tab is every run; a scenario id that names nothing lists nothing; not an id: 404
    assert len(_run_ids(client.get(reverse("runs"), {"status": "bogus"}).content.decode())) == 3
    nothing = client.get(reverse("runs"), {"scenario": 999999})
    assert nothing.status_code == 200 and _run_ids(nothing.content.decode()) == []
    for bad in ("abc", "-1", "0", "1.5", "9" * 30, "1e3"):
        r = client.get(reverse("runs"), {"scenario": bad})
        assert r.status_code == 404, bad


def test_catalog_text_filter_and_unknown_kind(client: Any, make_user: Any, catalog: Any) -> None:
    client.force_login(make_user("viewer"))
    def rows(query: dict[str, str]) -> list[str]:
        html = client.get(reverse("catalog"), query).content.decode()
        return html.split('id="catalog-table"')[1].split("</tbody>")[0].split("<tr")[1:]

    every_gpu, h100 = rows({"kind": "gpu"}), rows({"kind": "gpu", "q": "h100"})
    assert 0 < len(h100) < len(every_gpu)
    assert all("h100" in row.lower() for row in h100)  # key, name or source
    assert any(">H100-SXM<" in row for row in h100)
    html = client.get(reverse("catalog"), {"kind": "gpu", "q": "no-such-thing"}).content.decode()
    assert "No items match" in html and 'id="catalog-table"' not in html
    assert "H100-SXM" in client.get(reverse("catalog"), {"kind": "not-a-kind"}).content.decode()  # GPUs tab


# --- visibility ------------------------------------------------------------------------------------------
def test_another_teams_rows_never_appear(client: Any, make_user: Any, team: Any, other_team: Any,
                                         scenario_for: Any) -> None:
    from planning import services as planning

    mine, theirs = make_user("admin", team=team), make_user("admin", team=other_team)
    _runs(scenario_for(team, mine, name="our-scenario"), mine, ["our-run"])
    hidden = scenario_for(other_team, theirs, name="their-secret-scenario")
    their_runs = _runs(hidden, theirs, ["their-secret-run"])
    planning.fleet_create(team=other_team, user=theirs, name="their-secret-fleet", server_model="HGX-H100",
                          server_count=2)
    client.force_login(mine)
    for name in ("runs", "scenarios", "fleets", "capacity-plans", "fabric", "reports", "reevaluations", "tokens"):
        for query in ({}, {"per_page": 500}, {"sort": "-team"}, {"page": 2}):
            html = client.get(reverse(name), query).content.decode()
            assert "their-secret" not in html, (name, query)
            assert f'run-row-{their_runs[0].pk}"' not in html
    assert "our-run" in client.get(reverse("runs")).content.decode()
    # filtering by their scenario's id answers exactly like an id that names nothing: no rows, no hint
    theirs_page = client.get(reverse("runs"), {"scenario": hidden.pk})
    assert theirs_page.status_code == 200 and _run_ids(theirs_page.content.decode()) == []
    assert "their-secret" not in theirs_page.content.decode()


# --- does not fit ----------------------------------------------------------------------------------------
def test_a_run_that_does_not_fit_is_the_red_badge_not_a_cost(client: Any, make_user: Any, team: Any,
                                                           scenario_for: Any) -> None:
    from simulations.models import SimulationRun

    planner = make_user("planner", team=team)
    scenario = scenario_for(team, planner, name="too-big")
    (fits,) = _runs(scenario_for(team, planner, name="fine"), planner, ["fits"])
    (nofit,) = _runs(scenario, planner, ["nofit"])
    SimulationRun.objects.filter(pk=fits.pk).update(result={"tco": {"run_cost_usd": 123456.0}})
    SimulationRun.objects.filter(pk=nofit.pk).update(result={
        "performance": {"fits": False, "memory_gb_per_gpu": 120.0, "memory_limit_gb": 75.0},
        "tco": {"run_cost_usd": 1.0}})
    client.force_login(planner)
    html = client.get(reverse("runs")).content.decode()
    row = html.split(f'id="run-row-{nofit.pk}"')[1].split("</tr>")[0]
    assert "badge-nofit" in row and "does not fit" in row and "$1" not in row
    assert "$123.5k" in html.split(f'id="run-row-{fits.pk}"')[1].split("</tr>")[0]
    # the scenario's last run is the one that does not fit: the list says so (with why), never its cost
    listing = client.get(reverse("scenarios")).content.decode().split('id="scenarios-table"')[1]
    row = listing.split("too-big")[1].split("</tr>")[0]
    assert "badge-nofit" in row and "120.0 GB per GPU" in row and "$1" not in row


# --- never a 500 -----------------------------------------------------------------------------------------
LIST_PAGES = ("runs", "scenarios", "fleets", "catalog", "capacity-plans", "fabric", "reports", "reevaluations",
              "tokens")
TEXT = st.text(max_size=60) | st.sampled_from(["", "-", "0", "-1", "1e309", "99999999999999999999", "\x00", "%00",
                                                "-run", "name", "-unit_price_usd", "active", "gpu"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(page=st.sampled_from(LIST_PAGES), sort=TEXT, number=TEXT, per_page=TEXT, q=TEXT, status=TEXT, kind=TEXT,
       scenario=TEXT)
def test_list_query_strings_never_500(three_runs: Any, page: str, sort: str, number: str, per_page: str, q: str,
                                      status: str, kind: str, scenario: str) -> None:
    planner, _ = three_runs
    client = Client(raise_request_exception=False)
    client.force_login(planner)
    query = {"sort": sort, "page": number, "per_page": per_page, "q": q, "status": status, "kind": kind,
             "sweeps-sort": sort, "sweeps-page": number}
    if scenario:
        query["scenario"] = scenario
    r = client.get(reverse(page), query)
    assert r.status_code in (200, 404), (page, query, r.status_code)

"""Streamed, bulk-inserted CSV imports keep the change log and the bounds (issue #11)."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from tests.security.seed import seed_world
from tests.security.test_hostile_input import _fingerprint

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_and_world():
    world = seed_world(execute=False)
    client = APIClient()
    client.force_login(world.home.users["admin"])
    client.raise_request_exception = False
    return client, world


def _post(client: APIClient, body: bytes):
    return client.post("/api/v1/fleets/import/", {"file": SimpleUploadedFile("f.csv", body, content_type="text/csv")},
                       format="multipart")


def test_bulk_import_writes_one_change_row_per_fleet(admin_and_world) -> None:
    from planning.models import Fleet, ObjectChange

    client, world = admin_and_world
    body = b"name,server_model,server_count,nic_gbps,site\n" + b"".join(
        b"bulk-%d,HGX-H100,%d,400,s%d\n" % (i, i + 1, i) for i in range(25))
    resp = _post(client, body)
    assert resp.status_code == 201, resp.content[:300]
    fleets = Fleet.objects.filter(team=world.home.team, name__startswith="bulk-")
    assert fleets.count() == 25
    changes = ObjectChange.objects.filter(object_type="fleet", action="create", object_id__in=fleets.values("pk"))
    assert changes.count() == 25
    one = changes.get(object_id=fleets.get(name="bulk-7").pk)
    assert one.postchange["server_count"] == 8 and one.diff["name"] == {"before": None, "after": "bulk-7"}
    assert one.team_id == world.home.team.pk and one.user_name == world.home.users["admin"].username


@pytest.mark.parametrize("cell,field", [("1" + "0" * 400, "nic_gbps"), ("0", "server_count"),
                                        ("2000000", "server_count"), ("99999", "gpus_per_node")])
def test_import_rows_respect_the_bounds_and_name_the_line(admin_and_world, cell, field) -> None:
    client, _ = admin_and_world
    before = _fingerprint()
    values = {"server_count": "2", "gpus_per_node": "8", "nic_gbps": "400", field: cell}
    body = (b"name,server_model,server_count,gpus_per_node,nic_gbps\nok,HGX-H100,2,8,400\n"
            + f"bad,HGX-H100,{values['server_count']},{values['gpus_per_node']},{values['nic_gbps']}\n".encode())
    resp = _post(client, body)
    assert resp.status_code == 400, resp.content[:300]
    errors = resp.json()["errors"]
    assert f"rows.3.{field}" in errors, errors
    assert _fingerprint() == before

"""CSV import figures: a 10,000-row fleet CSV and a 10,000-row catalog CSV, through the API and the services.

Run from the repository root: ``python benchmarks/bench_import.py [--rows 10000]``.

Creates a throw-away database with Django's test utilities (PostgreSQL when DATABASE_URL is set, otherwise a
temporary SQLite file), seeds the default catalog and a team, then times

* ``POST /api/v1/fleets/import/`` with N fleet rows (the documented limit is 10,000 rows / 2 MiB), and
* ``POST /api/v1/catalogs/{id}/import/`` with N catalog item rows,

through the Django test client (the whole request: multipart parsing, CSV streaming, validation, bulk insert,
change log). The web timeout is 30 s (gunicorn ``--timeout``); an import must stay far below it.

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "planner.settings")
os.environ.setdefault("LOG_LEVEL", "ERROR")
if not os.environ.get("DATABASE_URL"):
    os.environ["FP_VAR_DIR"] = tempfile.mkdtemp(prefix="fp-bench-import-")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.files.uploadedfile import SimpleUploadedFile  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402


def fleet_csv(rows: int) -> bytes:
    out = io.StringIO()
    out.write("name,server_model,server_count,gpus_per_node,nics_per_node,nic_gbps,site,notes\n")
    for i in range(rows):
        out.write(f"fleet-{i:05d},HGX-H100,{1 + i % 64},8,8,400,site-{i % 17},imported row {i}\n")
    return out.getvalue().encode()


def catalog_csv(rows: int) -> bytes:
    out = io.StringIO()
    out.write("key,kind,name,unit_price_usd,power_w,source\n")
    for i in range(rows):
        out.write(f"BULK-{i:05d},transceiver,Bulk optic {i},{500 + i % 300},{12 + i % 5},bench\n")
    return out.getvalue().encode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000)
    args = parser.parse_args()

    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        from rest_framework.test import APIClient

        from accounts.models import Membership, Team, User
        from planning import services as planning
        from planning.models import CatalogItem, Fleet

        planning.catalog_load_default()
        user = User.objects.create_user(username="bench", password=uuid.uuid4().hex)
        team = Team.objects.create(name="Bench", slug="bench")
        Membership.objects.create(user=user, team=team, role="admin")
        client = APIClient()
        client.force_login(user)
        client.defaults["HTTP_X_TEAM"] = team.slug
        catalog = planning.catalog_create(team=team, user=user, name="bench catalog")

        db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
        print(f"database: {db}; rows: {args.rows}; upload limit {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes")
        figures = {}
        for name, url, body, count in (
            ("fleets", "/api/v1/fleets/import/", fleet_csv(args.rows), lambda: Fleet.objects.filter(team=team).count()),
            ("catalog items", f"/api/v1/catalogs/{catalog.pk}/import/", catalog_csv(args.rows),
             lambda: CatalogItem.objects.filter(version__catalog=catalog, key__startswith="BULK-").count()),
        ):
            before = count()
            started = time.perf_counter()
            resp = client.post(url, {"file": SimpleUploadedFile("data.csv", body, content_type="text/csv")},
                               format="multipart")
            elapsed = time.perf_counter() - started
            stored = count() - before
            figures[name] = elapsed
            print(f"  import {args.rows:,} {name:<13} ({len(body) / 1024:,.0f} KiB): HTTP {resp.status_code} in "
                  f"{elapsed:6.2f} s  ({elapsed / max(args.rows, 1) * 1e3:.3f} ms/row, {stored:,} rows stored)")
            if resp.status_code >= 300:
                print("    ", resp.content[:300])
        return 0
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    raise SystemExit(main())

"""Browser-test fixtures: Debian chromium through Playwright (executable_path, headless, --no-sandbox).

Every browser test needs full mode (PostgreSQL + Redis + a real Celery worker), a live server, and
chromium at ``FP_CHROMIUM`` (default ``/usr/bin/chromium``; ``apt-get install chromium``). Screenshots go
to ``test-artifacts/screenshots/`` and are kept as CI artifacts.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-artifacts" / "screenshots"
CHROMIUM = os.environ.get("FP_CHROMIUM", "/usr/bin/chromium")
HAVE_CHROMIUM = bool(shutil.which(CHROMIUM)) or Path(CHROMIUM).exists() or bool(os.environ.get("FP_CHROMIUM"))

# CI (.ci/run) installs chromium and sets FP_CHROMIUM: there a missing browser fails instead of skipping.
needs_chromium = pytest.mark.skipif(not HAVE_CHROMIUM, reason=f"chromium not installed at {CHROMIUM} "
                                    "(apt-get install chromium)")


@pytest.fixture(autouse=True)
def _allow_orm_beside_playwright(monkeypatch: pytest.MonkeyPatch) -> None:
    """Playwright's sync API runs an event loop in this thread; the test's own ORM calls must be allowed.

    Set per test (not at import) so it never leaks into other tests' subprocesses.
    """
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                              args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        yield b
        b.close()


def wait_js(page: Any, expression: str, timeout_s: float = 20.0) -> None:
    """Poll a JS expression with page.evaluate (wait_for_function evals strings, which our CSP forbids)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if page.evaluate(f"() => Boolean({expression})"):
            return
        page.wait_for_timeout(100)
    state = page.evaluate("() => ({charts: Object.keys(window.fpCharts || {}), url: location.href,"
                          " canvases: document.querySelectorAll('canvas[data-chart]').length})")
    shot(page, "timeout")
    raise AssertionError(f"timed out waiting for: {expression}; {state}; js errors: {getattr(page, 'js_errors', [])}")


def shot(page: Any, name: str, **kwargs: Any) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True, **kwargs)


def new_page(browser: Any) -> Any:
    """A fresh context and page that records JS errors and every failed or 404 request."""
    context = browser.new_context(viewport={"width": 1366, "height": 860}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(20_000)
    errors: list[str] = []
    missing: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("response", lambda r: missing.append(f"{r.status} {r.url}") if r.status == 404 else None)
    page.js_errors = errors
    page.missing = missing
    return page


def sign_in(browser: Any, base: str, username: str) -> Any:
    page = new_page(browser)
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "pw-" + username)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    return page


def csrf_headers(page: Any, referer: str) -> dict[str, str]:
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    return {"X-CSRFToken": csrf, "Referer": referer}

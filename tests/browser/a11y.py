"""Accessibility checks for the browser tests: axe-core (vendored, offline) and a WCAG contrast helper.

``axe_violations(page)`` injects ``vendor/axe-core/axe.min.js`` into the page with Playwright's
``page.evaluate`` (DevTools evaluation, so the portal's CSP ``script-src 'self'`` stays on) and runs
the WCAG 2.0/2.1 A and AA rules. It returns the violations as small dicts, so a failing test prints
which rule failed on which element.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from typing import Any

AXE_JS = Path(__file__).resolve().parent / "vendor" / "axe-core" / "axe.min.js"
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"  # axe-core 4.14.1
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


@cache
def axe_source() -> str:
    data = AXE_JS.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != AXE_SHA256:
        raise AssertionError(f"{AXE_JS} is not the vendored axe-core 4.14.1 (sha256 {digest})")
    return data.decode("utf-8")


def axe_violations(page: Any, *, include: str | None = None, disable: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Run axe-core on the page (or on the ``include`` CSS selector) and return its violations."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(axe_source())
    options = {"runOnly": {"type": "tag", "values": AXE_TAGS},
               "rules": {rule: {"enabled": False} for rule in disable}}
    result = page.evaluate(
        """async ([context, options]) => {
            const r = await window.axe.run(context || document, options);
            return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.slice(0, 5).map(n => ({target: n.target.join(' '), summary: n.failureSummary}))}));
        }""",
        [include, options],
    )
    return list(result)


def assert_no_axe_violations(page: Any, *, include: str | None = None, disable: tuple[str, ...] = ()) -> None:
    violations = axe_violations(page, include=include, disable=disable)
    assert violations == [], "axe-core violations on " + page.url + ":\n" + "\n".join(
        f"- {v['id']} ({v['impact']}): {v['help']}\n    " + "\n    ".join(
            f"{n['target']}: {n['summary']}" for n in v["nodes"]) for v in violations)


def _channel(c: float) -> float:
    c /= 255.0
    return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4


def luminance(rgb: tuple[float, float, float]) -> float:
    r, g, b = (_channel(x) for x in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(fg: tuple[float, float, float], bg: tuple[float, float, float]) -> float:
    """WCAG 2.x contrast ratio of two sRGB colours (1.0 .. 21.0)."""
    a, b = sorted((luminance(fg), luminance(bg)), reverse=True)
    return (a + 0.05) / (b + 0.05)


def parse_rgb(css: str) -> tuple[float, float, float]:
    """``rgb(1, 2, 3)`` / ``rgba(1, 2, 3, 1)`` (what getComputedStyle returns) → (r, g, b)."""
    inner = css[css.index("(") + 1: css.index(")")]
    parts = [p.strip() for p in inner.replace("/", ",").split(",")]
    return float(parts[0]), float(parts[1]), float(parts[2])


def effective_colors(page: Any, selector: str) -> list[dict[str, Any]]:
    """Text colour and the first non-transparent background behind each element matching ``selector``."""
    return list(page.evaluate(
        """(sel) => Array.from(document.querySelectorAll(sel)).map(el => {
            let bg = 'rgb(255, 255, 255)';
            for (let n = el; n; n = n.parentElement) {
                const c = getComputedStyle(n).backgroundColor;
                if (c && c !== 'transparent' && !/rgba\\([^)]*,\\s*0\\)$/.test(c)) { bg = c; break; }
            }
            return {text: el.textContent.trim(), color: getComputedStyle(el).color, background: bg};
        })""",
        selector,
    ))

"""Formatting filters and small form helpers for the portal templates."""

from __future__ import annotations

import json
import math
from typing import Any

from django import template
from django.forms import BoundField

from portal.charts import CATEGORY_LABELS
from portal.charts import metric as _metric
from simulations.results import result_fits

register = template.Library()


def _num(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


@register.filter
def usd(value: Any) -> str:
    """$1.23M / $45.6k / $950."""
    v = _num(value)
    if v is None:
        return "—"
    a = abs(v)
    if a >= 1e9:
        return f"${v / 1e9:,.2f}B"
    if a >= 1e6:
        return f"${v / 1e6:,.2f}M"
    if a >= 1e4:
        return f"${v / 1e3:,.1f}k"
    if a < 10 and not float(v).is_integer():
        return f"${v:,.2f}" if a >= 0.01 else f"${v:,.4f}"
    return f"${v:,.0f}"


@register.filter
def usd_full(value: Any) -> str:
    """Whole dollars, but never rounds a small price away ($0.08/kWh stays $0.08)."""
    v = _num(value)
    if v is None:
        return "—"
    if abs(v) < 100 and not float(v).is_integer():
        return f"${v:,.2f}" if abs(v) >= 0.01 else f"${v:,.4f}"
    return f"${v:,.0f}"


@register.filter
def qty(value: Any) -> str:
    """A quantity: whole numbers as such (8, 1,024), fractions to three significant digits (0.32, 0.814)."""
    v = _num(value)
    if v is None:
        return "—"
    if float(v).is_integer():
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:,.1f}"
    return f"{v:,.3g}"


@register.filter
def pct(value: Any, digits: int = 1) -> str:
    """A fraction as a percentage (0.423 -> 42.3%)."""
    v = _num(value)
    return "—" if v is None else f"{v * 100:.{int(digits)}f}%"


@register.filter
def seconds(value: Any) -> str:
    v = _num(value)
    if v is None:
        return "—"
    if abs(v) < 1:
        return f"{v * 1000:.0f} ms"
    if abs(v) < 120:
        return f"{v:.2f} s"
    return f"{v / 60:.1f} min"


@register.filter
def days(value: Any) -> str:
    v = _num(value)
    return "—" if v is None else f"{v:,.1f} d"


@register.filter
def watts(value: Any) -> str:
    v = _num(value)
    if v is None:
        return "—"
    if abs(v) >= 1e6:
        return f"{v / 1e6:,.2f} MW"
    if abs(v) >= 1e4:
        return f"{v / 1e3:,.1f} kW"
    return f"{v:,.0f} W"


@register.filter
def number(value: Any, digits: int = 0) -> str:
    v = _num(value)
    return "—" if v is None else f"{v:,.{int(digits)}f}"



@register.filter
def counted(value: Any, noun: str) -> str:
    """A count with its noun, pluralised: ``8|counted:"rank"`` → "8 ranks", ``1|counted:"node"`` → "1 node",
    ``2|counted:"leaf,leaves"`` → "2 leaves"; thousands separated; not a number: "? ranks"."""
    one, _, many = str(noun).partition(",")
    v = _num(value)
    if v is None:
        return f"? {many or one + 's'}"
    text = f"{v:,.0f}" if float(v).is_integer() else f"{v:,.2f}"
    return f"{text} {one if v == 1 else many or one + 's'}"


@register.filter
def category_label(key: Any) -> str:
    """A cost category in words (``gpu_servers`` → "GPU servers"): the portal's one table of them, the one the
    TCO charts' legends use (``portal.charts.CATEGORY_LABELS``)."""
    text = str(key or "")
    return CATEGORY_LABELS.get(text) or text.replace("_", " ").capitalize()


@register.filter
def get(mapping: Any, key: Any) -> Any:
    try:
        return mapping.get(key) if hasattr(mapping, "get") else mapping[key]
    except (KeyError, IndexError, TypeError):
        return None


@register.filter
def jsonish(value: Any) -> str:
    """Short display of a JSON value in a diff."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 160 else text[:157] + "…"


@register.inclusion_tag("portal/_field.html")
def field(bf: BoundField, css: str = "") -> dict[str, Any]:
    return {"f": bf, "css": css}


@register.simple_tag(takes_context=True)
def query(context: Any, **kwargs: Any) -> str:
    """The current query string with some parameters replaced (None removes)."""
    params = context["request"].GET.copy()
    for k, v in kwargs.items():
        if v is None or v == "":
            params.pop(k, None)
        else:
            params[k] = v
    return "?" + params.urlencode()


@register.filter
def delta_pct(value: Any) -> str:
    """A delta already in percent (12.3 -> +12.3%)."""
    v = _num(value)
    return "—" if v is None else f"{v:+.1f}%"


@register.filter
def fmt(value: Any, kind: str = "num") -> str:
    """Format by kind name (the ``format`` of a metric in portal.charts)."""
    v = _num(value)
    if v is None:
        return "—"
    if kind == "usd":
        return usd(v)
    if kind == "usd2":
        return f"${v:,.2f}"
    if kind == "usd4":
        return f"${v:,.3f}"
    if kind == "pct":
        return pct(v)
    if kind == "s":
        return seconds(v)
    if kind == "days":
        return days(v)
    if kind == "usd_per_kwh":
        return f"${v:,.3f}".rstrip("0").rstrip(".") + "/kWh" if v < 1 else f"${v:,.2f}/kWh"
    if kind == "kw":
        return f"{qty(v)} kW"
    if kind == "gb":
        return f"{qty(v)} GB"
    if kind == "pt":
        return f"{v * 100:.1f} pt"
    if abs(v) >= 100 or float(v).is_integer():
        return f"{v:,.0f}"
    return f"{v:,.3g}"


@register.filter
def nofit(result: Any) -> bool:
    """True when a stored run result says it does not fit in GPU memory."""
    return result_fits(result if isinstance(result, dict) else None) is False


@register.inclusion_tag("portal/_nofit_badge.html")
def nofit_badge(result: Any) -> dict[str, Any]:
    return {"show": nofit(result)}


@register.filter
def delta_points(value: Any) -> str:
    """An absolute change of a fraction, in percentage points (0.018 -> +1.8 pt)."""
    v = _num(value)
    return "—" if v is None else f"{v * 100:+.1f} pt"



@register.filter
def metric(result: Any, path: str) -> Any:
    """A number from a stored run result by dotted path (predict/search results have no "performance.")."""
    return _metric(result if isinstance(result, dict) else None, path)


@register.filter
def run_title(run: Any) -> str:
    """A run's label, else its scenario's name, else its kind."""
    if getattr(run, "label", ""):
        return str(run.label)
    scenario = getattr(run, "scenario", None)
    return scenario.name if scenario is not None else str(getattr(run, "kind", ""))


@register.filter
def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)

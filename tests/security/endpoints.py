"""Discover every API endpoint from Django's URL resolver (not from a hand-kept list).

Each DRF route becomes one :class:`Endpoint` per HTTP method it answers, with the viewset action that
method maps to. Tests iterate over :func:`api_endpoints`, so endpoints added later are covered
automatically (and must be classified in the authorization policy, see ``test_authz_matrix``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.urls import URLPattern, URLResolver, get_resolver

API_PREFIX = "api/v1/"
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")


@dataclass(frozen=True)
class Endpoint:
    route: str  # a readable template, e.g. "api/v1/scenarios/{pk}/run/"
    regex: str  # the full regex, for building concrete URLs
    name: str | None
    method: str
    action: str | None  # viewset action ("list", "retrieve", "run", ...) or None for APIViews
    view_cls: Any = field(compare=False, hash=False)
    params: tuple[str, ...] = ()

    @property
    def basename(self) -> str:
        """The router basename ("scenario" for "scenario-detail"), or the url name."""
        if not self.name:
            return self.route
        for suffix in ("-list", "-detail"):
            if self.name.endswith(suffix):
                return self.name[: -len(suffix)]
        if self.action and self.name.endswith("-" + self.action.replace("_", "-")):
            return self.name[: -len(self.action) - 1]
        return self.name.rsplit("-", 1)[0] if "-" in self.name else self.name

    @property
    def resource(self) -> str:
        """The first path segment after /api/v1/ ("reports", "catalog-items", "" for the API root)."""
        rest = self.route[len(API_PREFIX):] if self.route.startswith(API_PREFIX) else self.route
        return rest.split("/", 1)[0]

    @property
    def is_detail(self) -> bool:
        return bool(self.params)

    @property
    def id(self) -> str:
        return f"{self.method} /{self.route}"

    def url(self, **values: Any) -> str:
        """A concrete path with each named group replaced by ``values[name]``."""
        missing = [p for p in self.params if p not in values]
        if missing:
            raise KeyError(f"{self.id}: no value for {missing}")
        path = self.regex
        for name in self.params:
            path = _replace_group(path, name, str(values[name]))
        path = path.lstrip("^").rstrip("$")
        path = path.replace("\\.", ".").replace("\\-", "-").replace("/?", "/")
        if re.search(r"[()\[\]\\^$*+?]", path):
            raise ValueError(f"cannot build a URL from {self.regex!r} -> {path!r}")
        return "/" + path


def _replace_group(pattern: str, name: str, value: str) -> str:
    start = pattern.find(f"(?P<{name}>")
    if start < 0:
        return pattern
    depth, i = 0, start
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return pattern[:start] + value + pattern[i + 1 :]
        i += 1
    raise ValueError(f"unbalanced group {name} in {pattern}")


def _pattern_regex(p: URLPattern | URLResolver) -> str:
    return p.pattern.regex.pattern


def _walk(patterns: list[Any], prefix: str = "") -> list[tuple[str, URLPattern]]:
    out: list[tuple[str, URLPattern]] = []
    for p in patterns:
        regex = _pattern_regex(p).lstrip("^")
        if regex.endswith("\\Z"):
            regex = regex[:-2] + "$"
        if isinstance(p, URLResolver):
            out.extend(_walk(p.url_patterns, prefix + regex))
        else:
            out.append((prefix + regex, p))
    return out


def _readable(regex: str) -> str:
    s = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", regex)
    return s.lstrip("^").rstrip("$").replace("\\.", ".")


def api_endpoints() -> list[Endpoint]:
    """Every (route, method) under /api/v1/ served by a DRF view, format-suffix variants excluded."""
    found: dict[tuple[str, str], Endpoint] = {}
    for regex, pattern in _walk(get_resolver().url_patterns):
        if not regex.startswith(API_PREFIX.replace("/", "/")) and not regex.startswith("api/v1/"):
            continue
        if "(?P<format>" in regex:
            continue
        callback = pattern.callback
        cls = getattr(callback, "cls", None)
        if cls is None:
            continue
        params = tuple(re.findall(r"\(\?P<(\w+)>", regex))
        actions: dict[str, str] | None = getattr(callback, "actions", None)
        if actions:
            methods = {m.upper(): a for m, a in actions.items() if m.lower() not in ("head", "options")}
        else:
            methods = {
                m.upper(): None  # type: ignore[misc]
                for m in ("get", "post", "put", "patch", "delete")
                if hasattr(cls, m)
            }
        for method, action in methods.items():
            ep = Endpoint(_readable(regex), regex, pattern.name, method, action, cls, params)
            found.setdefault((ep.route, method), ep)
    return sorted(found.values(), key=lambda e: (e.route, e.method))


def model_of(ep: Endpoint) -> Any:
    """The model behind an endpoint's view (from ``queryset``), or None."""
    qs = getattr(ep.view_cls, "queryset", None)
    if qs is not None:
        return qs.model
    ser = getattr(ep.view_cls, "serializer_class", None)
    meta = getattr(ser, "Meta", None)
    return getattr(meta, "model", None)

"""Per-request context the domain may read without importing the web layer: the request id.

``planner.middleware.RequestIdMiddleware`` sets it for each request; the change log stamps it on every
``ObjectChange`` and the log filter on every log record. Outside a request it is ``"-"``.
"""

from __future__ import annotations

import contextvars

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


def current_request_id() -> str:
    return request_id.get()

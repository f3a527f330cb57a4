"""Portal auth views: rate-limited sign-in and the team switcher."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from accounts.scoping import SESSION_TEAM_KEY

LOGIN_ATTEMPTS = 10
LOGIN_WINDOW_S = 300


def _client_ip(request: HttpRequest) -> str:
    return str(request.META.get("REMOTE_ADDR", "unknown"))


class RateLimitedLoginView(auth_views.LoginView):
    """Django's login view with a per-IP failure budget (10 failed attempts per 5 minutes)."""

    template_name = "registration/login.html"
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """Where the demo login comes from; its password only on a development server (DEBUG)."""
        context = super().get_context_data(**kwargs)
        context["demo_password"] = settings.FP_DEMO_PASSWORD if settings.DEBUG else ""
        return context

    def _key(self) -> str:
        return f"fp:login-fail:{_client_ip(self.request)}"

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if (cache.get(self._key()) or 0) >= LOGIN_ATTEMPTS:
            response = self.render_to_response(
                self.get_context_data(form=self.get_form(), rate_limited=True), status=429
            )
            response["Retry-After"] = str(LOGIN_WINDOW_S)
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: Any) -> HttpResponse:
        key = self._key()
        cache.add(key, 0, LOGIN_WINDOW_S)
        try:
            cache.incr(key)
        except ValueError:
            cache.set(key, 1, LOGIN_WINDOW_S)
        return super().form_invalid(form)


@login_required
@require_POST
def switch_team(request: HttpRequest) -> HttpResponse:
    team_id = request.POST.get("team", "")
    if team_id.isdigit() and request.user.memberships.filter(team_id=team_id).exists():  # type: ignore[union-attr]
        request.session[SESSION_TEAM_KEY] = int(team_id)
    else:
        messages.error(request, "You are not a member of that team.")
    nxt = request.POST.get("next", "/")
    if not url_has_allowed_host_and_scheme(nxt, allowed_hosts={request.get_host()}):
        nxt = "/"
    return HttpResponseRedirect(nxt)

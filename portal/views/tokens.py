"""The API token page: create (name, team, expiry; the secret is shown once), list with last use, revoke.

Thin: writes go through ``accounts.services`` (the same functions as ``/api/v1/tokens/``), so the role
rule (who may hold a token in which team) is the API's. A user sees and revokes only their own tokens,
in teams they still belong to; anyone else's token id answers 404.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST
from django_tables2 import RequestConfig

from accounts import services
from accounts.models import ApiToken, Team
from accounts.roles import Capability
from accounts.scoping import active_team
from core.errors import DomainError
from portal.tables import TokenTable

EXPIRY_CHOICES = [("30", "30 days"), ("90", "90 days"), ("180", "180 days"), ("365", "1 year"), ("never", "Never")]


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, label="Token name",
                           help_text="What uses it, e.g. “finance export script”.")
    team = forms.ChoiceField(label="Team", required=False,
                             help_text="The token acts in this team only, with your role there.")
    expires = forms.ChoiceField(choices=EXPIRY_CHOICES, initial="90", label="Expires after")

    def __init__(self, *args: Any, teams: list[Team], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["team"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [(str(t.pk), t.name) for t in teams]

    def clean_name(self) -> str:
        name = (self.cleaned_data.get("name") or "").strip()
        if not name:
            raise forms.ValidationError("Give the token a name.")
        return name

    def expires_at(self) -> dt.datetime | None:
        value = self.cleaned_data["expires"]
        return None if value == "never" else timezone.now() + dt.timedelta(days=int(value))


def _token_teams(request: HttpRequest) -> list[Team]:
    return list(Team.objects.for_request(request, Capability.TOKEN).order_by("name"))


def _my_tokens(request: HttpRequest) -> Any:
    return (ApiToken.objects.for_request(request).filter(user_id=request.user.pk)
            .select_related("team").order_by("-created_at"))


TOKENS_PER_PAGE = 50
NEW_TOKEN_KEY = "fp_new_token"  # the one-time secret between the POST and the page that shows it (server-side)


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    """GET: the page (and, once, a token just created). POST: create, then redirect (PRG) to show it."""
    teams = _token_teams(request)
    active = active_team(request, Capability.TOKEN)
    default_team = str(active.pk) if active else (str(teams[0].pk) if teams else "")
    form = TokenForm(request.POST or None, teams=teams, initial={"team": default_team})
    status = 200
    if request.method == "POST":
        if not teams:
            return render(request, "403.html", {"exception": "Your role cannot hold API tokens in any team."},
                          status=403)
        if form.is_valid():
            chosen = form.cleaned_data.get("team")
            # a team picked in the form; without one, the session's active team (refused if the role there
            # cannot hold tokens, never silently another team)
            team = next((t for t in teams if str(t.pk) == chosen), None) if chosen else active
            if team is None:
                return render(request, "403.html", {"exception": "Your role in the active team cannot hold API "
                                                                 "tokens; pick a team where it can."}, status=403)
            try:
                token, raw = services.token_issue(user=request.user, team=team, name=form.cleaned_data["name"],
                                                  expires_at=form.expires_at())
            except DomainError as exc:
                form.add_error(None, str(exc.detail))
                status = 400
            else:
                request.session[NEW_TOKEN_KEY] = {"id": token.pk, "secret": raw}
                return HttpResponseRedirect(reverse("tokens"))
        else:
            status = 400
    created, secret = None, None
    shown = request.session.pop(NEW_TOKEN_KEY, None) if request.method == "GET" else None
    mine = _my_tokens(request)
    if isinstance(shown, dict) and str(shown.get("id", "")).isdigit():
        created = mine.filter(pk=int(shown["id"])).first()
        secret = str(shown.get("secret") or "") if created is not None else None
    table = TokenTable(mine, now=timezone.now())
    RequestConfig(request, paginate={"per_page": TOKENS_PER_PAGE}).configure(table)
    response = render(request, "portal/tokens.html", {
        "form": form, "table": table, "created": created, "secret": secret, "can_create": bool(teams),
        "api_base": request.build_absolute_uri("/api/v1/"),
    }, status=status)
    response["Cache-Control"] = "no-store"  # the one-time secret must not be cached anywhere
    return response


@login_required
@require_POST
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = _my_tokens(request).filter(pk=pk).first()
    if token is None:
        raise Http404("No such token.")
    services.token_revoke(token=token, by=request.user)
    messages.success(request, f"Token “{token.name}” ({token.prefix}…) revoked. Scripts using it now get 401.")
    return HttpResponseRedirect(reverse("tokens"))

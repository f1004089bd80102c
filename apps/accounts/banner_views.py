"""Dismissing a site banner: signed-in people get a row, signed-out visitors a cookie."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from apps.accounts.services import banners
from kody.errors import KodyError


@require_POST
def dismiss(request: HttpRequest, banner_id: str) -> HttpResponse:
    try:
        cookie = banners.dismiss(request.user, banner_id, request.COOKIES.get(banners.COOKIE))
    except KodyError as exc:
        return HttpResponse(exc.message, status=exc.status, content_type="text/plain")
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        target = "/"
    response = HttpResponseRedirect(target)
    if cookie is not None:
        response.set_cookie(
            banners.COOKIE,
            cookie,
            max_age=banners.COOKIE_MAX_AGE,
            secure=request.is_secure(),
            httponly=True,
            samesite="Lax",
        )
    return response

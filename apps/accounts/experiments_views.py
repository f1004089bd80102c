"""``/account/experiments``, the address the spec gives for the experiments preference.

The preference lives in the Experiments section of ``/account/settings`` and is saved by a POST
to ``/account/settings/experiments``. The short address stays a permanent alias rather than a
second copy of the form: a GET lands on that section (301), and a POST is passed on with its
method and body (308), so an old form or bookmark keeps working either way.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.urls import reverse
from django.views.decorators.http import require_http_methods


@require_http_methods(["GET", "HEAD", "POST"])
def experiments_alias(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        return HttpResponsePermanentRedirect(reverse("accounts:settings_experiments"), status=308)
    return HttpResponsePermanentRedirect(reverse("accounts:settings") + "#experiments")

"""What every account page of the packages app needs: whose page it is, and the problem page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from kody.errors import KodyError


def stable_id(request: HttpRequest) -> str:
    """The signed-in person's stable user id (the views are behind ``login_required``)."""
    return request.user.stable_user_id  # type: ignore[union-attr]


def problem_page(request: HttpRequest, exc: KodyError, title: str) -> HttpResponse:
    """``accounts/problem.html`` with the error's own status."""
    context = {"title": title, "error": exc}
    return render(request, "accounts/problem.html", context, status=exc.status)

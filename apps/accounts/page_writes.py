"""Account pages that change something take the same write guard as mutating capabilities.

A capability runs its handler inside ``policy.write_guard``: refused once the account is being
deleted, and otherwise holding a write lease the deletion's drain waits for. A form POST on an
account page (delete a memory, a secret, a grant; pause or run a job) is the same kind of write
by the same person, so ``guarded_page_write`` wraps the view's unsafe methods in that guard:
the deletion's drain covers page writes too, and a page write after the mark answers 409
``account_deleting`` on the problem page instead of landing after the drain.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from apps.accounts.policy import write_guard
from kody.errors import KodyError

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def guarded_page_write(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Run the view's POST (any unsafe method) inside the signed-in user's write guard."""

    @wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method in SAFE_METHODS or not request.user.is_authenticated:
            return view(request, *args, **kwargs)
        try:
            with write_guard(request.user, f"ui:{view.__name__}"):
                return view(request, *args, **kwargs)
        except KodyError as exc:
            context = {"title": "Nothing was changed", "error": exc}
            return render(request, "accounts/problem.html", context, status=exc.status)

    return guarded

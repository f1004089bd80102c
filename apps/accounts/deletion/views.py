"""``/account/delete``: a person deletes their own account after re-entering the password."""

from __future__ import annotations

from django import forms
from django.contrib.auth import logout as auth_logout
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from apps.accounts.deletion import job
from apps.accounts.models import DeletionStatus


class DeleteAccountForm(forms.Form):
    password = forms.CharField(
        label="Your password",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
        help_text="We ask again so nobody at an unlocked screen can delete your account.",
    )
    confirm = forms.BooleanField(
        label="I understand my data, agents' memories, mail and jobs are deleted for good.",
    )

    def __init__(self, user, *args, **kwargs):  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.user = user

    def clean_password(self) -> str:
        password = self.cleaned_data["password"]
        if not self.user.check_password(password):
            raise forms.ValidationError("That password is not right.")
        return password


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def delete_account(request: HttpRequest) -> HttpResponse:
    user = request.user
    form = DeleteAccountForm(user, request.POST or None)
    if request.method == "POST" and form.is_valid():
        email = user.email
        try:
            deletion = job.run(job.start(user, requested_by="self"))
        except job.DeletionInProgress as exc:
            # A second submit of the form while the first still runs: that run carries on.
            return render(
                request, "accounts/delete_retained.html", {"reason": exc.message}, status=409
            )
        if deletion.status != DeletionStatus.COMPLETE:
            return render(
                request,
                "accounts/delete_retained.html",
                {"reason": deletion.last_error},
                status=503,
            )
        auth_logout(request)
        refunds = deletion.result.get("stripeRefunds", [])
        return render(
            request,
            "accounts/delete_done.html",
            {"email": email, "refunds": [_refund_display(r) for r in refunds]},
        )
    return render(
        request,
        "accounts/delete.html",
        {"form": form},
        status=200 if form.is_bound is False or form.is_valid() else 400,
    )


def _refund_display(refund: dict) -> dict:
    minor = int(refund.get("amountMinor", 0))
    return {"amount": f"{minor / 100:.2f}", "currency": str(refund.get("currency", "")).upper()}

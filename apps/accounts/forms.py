"""Account UI forms. They only shape input; every rule lives in the identity services."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.password_validation import validate_password

from apps.accounts import usernames
from apps.accounts.models import User
from kody.errors import KodyError


class AccessibleForm(forms.Form):
    """Ties help and error text to inputs with aria-describedby and focuses the first error."""

    template_name = "accounts/_form_fields.html"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, field in self.fields.items():
            if field.help_text:
                field.widget.attrs["aria-describedby"] = f"{self._id(name)}_help"

    def _id(self, name: str) -> str:
        return self[name].auto_id or f"id_{name}"

    def add_error(self, field: str | None, error: Any) -> None:
        super().add_error(field, error)
        if field and field in self.fields:
            attrs = self.fields[field].widget.attrs
            attrs["aria-invalid"] = "true"
            described = attrs.get("aria-describedby", "").split()
            error_id = f"{self._id(field)}_error"
            if error_id not in described:
                attrs["aria-describedby"] = " ".join([error_id, *described])
        self._focus_first_error()

    def _focus_first_error(self) -> None:
        first = next((name for name in self.fields if name in self._errors), None)
        for name, field in self.fields.items():
            field.widget.attrs.pop("autofocus", None)
            if name == first:
                field.widget.attrs["autofocus"] = True

    def add_service_error(self, exc: KodyError) -> None:
        field = exc.details.get("field")
        self.add_error(field if field in self.fields else None, exc.message)


class SignupForm(AccessibleForm):
    email = forms.EmailField(
        max_length=320, widget=forms.EmailInput(attrs={"autocomplete": "email"})
    )
    username = forms.CharField(
        max_length=usernames.MAX_LENGTH,
        help_text=(
            f"{usernames.MIN_LENGTH}–{usernames.MAX_LENGTH} lowercase letters, digits or "
            "single hyphens. It becomes your agents' address, so choose with care."
        ),
        widget=forms.TextInput(
            attrs={"autocomplete": "username", "autocapitalize": "none", "spellcheck": "false"}
        ),
    )
    password = forms.CharField(
        strip=False,
        help_text="At least 8 characters; avoid common or all-number passwords.",
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )

    # The services check all of this again; checking here too reports every problem at once.
    def clean_username(self) -> str:
        username = self.cleaned_data["username"].strip().lower()
        problem = usernames.format_error(username)
        if problem:
            raise forms.ValidationError(problem)
        return username

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("password"):
            candidate = User(username=data.get("username", ""), email=data.get("email", ""))
            try:
                validate_password(data["password"], user=candidate)
            except forms.ValidationError as exc:
                self.add_error("password", exc)
        return data


class LoginForm(AccessibleForm):
    identifier = forms.CharField(
        label="Email or username",
        max_length=320,
        widget=forms.TextInput(
            attrs={"autocomplete": "username", "autocapitalize": "none", "spellcheck": "false"}
        ),
    )
    password = forms.CharField(
        strip=False, widget=forms.PasswordInput(attrs={"autocomplete": "current-password"})
    )


class EmailForm(AccessibleForm):
    email = forms.EmailField(
        max_length=320, widget=forms.EmailInput(attrs={"autocomplete": "email"})
    )


class TokenForm(AccessibleForm):
    token = forms.CharField(widget=forms.HiddenInput, max_length=256)


class SetPasswordForm(AccessibleForm):
    token = forms.CharField(widget=forms.HiddenInput, max_length=256)
    password = forms.CharField(
        label="New password",
        strip=False,
        help_text="At least 8 characters; avoid common or all-number passwords.",
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )
    password_again = forms.CharField(
        label="New password, again",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("password") and data.get("password") != data.get("password_again"):
            self.add_error("password_again", "The two passwords do not match.")
        return data


class EmailChangeForm(AccessibleForm):
    new_email = forms.EmailField(
        label="New email address",
        max_length=320,
        help_text="We send a confirmation link to the new address; your login changes once you "
        "open it. The old address stays reserved for this account until you release it.",
        widget=forms.EmailInput(attrs={"autocomplete": "email"}),
    )
    password = forms.CharField(
        label="Current password",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
    )


class ExperimentsForm(AccessibleForm):
    experiments_opt_in = forms.BooleanField(
        label="Try experimental features",
        required=False,
        help_text="Features in testing may change or disappear without notice.",
    )


class ReleaseEmailForm(AccessibleForm):
    email = forms.EmailField(widget=forms.HiddenInput, max_length=320)


class CreateTokenForm(AccessibleForm):
    name = forms.CharField(
        label="Token name",
        max_length=100,
        help_text="Something that tells you where it is used, e.g. “laptop Claude”.",
    )

from django.urls import path

from apps.accounts import (
    banner_views,
    experiments_views,
    passkey_views,
    time_zones,
    tips_views,
    two_factor_views,
    views,
)
from apps.accounts.deletion import views as deletion_views
from apps.accounts.export import views as export_views
from apps.accounts.social import views as social_views

app_name = "accounts"

urlpatterns = [
    path("signup", views.signup, name="signup"),
    path("signup/done", views.signup_done, name="signup_done"),
    path("login", views.login, name="login"),
    path("logout", views.logout, name="logout"),
    path("verify", views.verify, name="verify"),
    path("reset-password", views.reset_request, name="reset_request"),
    path("reset-password/confirm", views.reset_confirm, name="reset_confirm"),
    path("account", views.home, name="home"),
    path("account/verify/resend", views.resend_verification, name="resend_verification"),
    path("account/connections", views.connections, name="connections"),
    path("account/connections/new", views.token_create, name="token_create"),
    path("account/connections/<int:token_id>/revoke", views.token_revoke, name="token_revoke"),
    path(
        "account/connections/agents/<int:grant_id>/revoke",
        views.grant_revoke,
        name="grant_revoke",
    ),
    path("auth/<str:provider>", social_views.start, name="social_start"),
    path("auth/<str:provider>/callback", social_views.callback, name="social_callback"),
    path("account/connections.json", social_views.connections_json, name="connections_json"),
    path(
        "account/connections/social/<int:connection_id>/unlink",
        social_views.unlink,
        name="social_unlink",
    ),
    path("account/usage", views.usage, name="usage"),
    path("account/banners/<str:banner_id>/dismiss", banner_views.dismiss, name="banner_dismiss"),
    path("account/two-factor", two_factor_views.two_factor_page, name="two_factor"),
    path("account/two-factor/change", two_factor_views.two_factor_change, name="two_factor_change"),
    path("account/two-factor/verify", two_factor_views.two_factor_verify, name="two_factor_verify"),
    path("account/passkeys", passkey_views.passkeys_page, name="passkeys"),
    path(
        "account/passkeys/<str:passkey_id>/rename",
        passkey_views.passkey_rename,
        name="passkey_rename",
    ),
    path(
        "account/passkeys/<str:passkey_id>/delete",
        passkey_views.passkey_delete,
        name="passkey_delete",
    ),
    path("webauthn/register/options", passkey_views.register_options, name="webauthn_reg_options"),
    path("webauthn/register", passkey_views.register, name="webauthn_register"),
    path(
        "webauthn/authenticate/options",
        passkey_views.authenticate_options,
        name="webauthn_auth_options",
    ),
    path("webauthn/authenticate", passkey_views.authenticate, name="webauthn_authenticate"),
    path("webauthn/verify/options", passkey_views.verify_options, name="webauthn_verify_options"),
    path("webauthn/verify", passkey_views.verify, name="webauthn_verify"),
    path("account/export.json", export_views.export_manifest, name="export_manifest"),
    path("account/delete", deletion_views.delete_account, name="delete_account"),
    path("account/settings", views.settings_page, name="settings"),
    path("account/settings/email", views.settings_email, name="settings_email"),
    path(
        "account/settings/time-zone",
        views.mutation(time_zones.settings_time_zone),
        name="settings_time_zone",
    ),
    path("account/settings/experiments", views.settings_experiments, name="settings_experiments"),
    path("account/experiments", experiments_views.experiments_alias, name="experiments"),
    path(
        "account/settings/tips-email",
        views.mutation(tips_views.settings_tips_email),
        name="settings_tips_email",
    ),
    path("account/tips/unsubscribe", tips_views.unsubscribe, name="tips_unsubscribe"),
    path("account/settings/release-email", views.settings_release_email, name="release_email"),
    path("account/email/confirm", views.email_change_confirm, name="email_confirm"),
    path("account/email/release", views.email_release_confirm, name="email_release"),
]

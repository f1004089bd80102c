"""OAuth settings: Kody as the authorization server of /mcp (django-oauth-toolkit) and as the
client of the providers people sign in with. Imported by name into ``config.settings``."""

from __future__ import annotations

from config.env import envint, envstr

# The authorization server for /mcp (django-oauth-toolkit).
# Access tokens live an hour; refresh tokens rotate and a just-rotated one may be presented again
# for KODY_OAUTH_REFRESH_REUSE_SECONDS (concurrent hosts sharing one client); a reuse after that
# revokes the whole family. Tokens are stored as SHA-256 checksums only.
KODY_OAUTH_ACCESS_TOKEN_SECONDS = envint("KODY_OAUTH_ACCESS_TOKEN_SECONDS", 3600)
KODY_OAUTH_REFRESH_REUSE_SECONDS = envint("KODY_OAUTH_REFRESH_REUSE_SECONDS", 120)
# What a person's agents read at MCP initialize beyond the fixed instructions (kody.mcp.app).
KODY_MCP_INSTRUCTIONS = "apps.packages.services.mcp_instructions.initialize_text"
# Open client registration (RFC 7591), per client address and hour.
KODY_OAUTH_REGISTRATIONS_PER_HOUR = envint("KODY_OAUTH_REGISTRATIONS_PER_HOUR", 30)
# /auth/<provider> starts per client address and per session, in 10 minutes.
KODY_SOCIAL_START_PER_IP = envint("KODY_SOCIAL_START_PER_IP", 60)
KODY_SOCIAL_START_PER_SESSION = envint("KODY_SOCIAL_START_PER_SESSION", 20)
# The toolkit's own models, named so migrations that point at them resolve (not swapped).
OAUTH2_PROVIDER_APPLICATION_MODEL = "oauth2_provider.Application"
OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL = "oauth2_provider.AccessToken"
OAUTH2_PROVIDER_REFRESH_TOKEN_MODEL = "oauth2_provider.RefreshToken"
OAUTH2_PROVIDER_ID_TOKEN_MODEL = "oauth2_provider.IDToken"
OAUTH2_PROVIDER_GRANT_MODEL = "oauth2_provider.Grant"
OAUTH2_PROVIDER_DEVICE_GRANT_MODEL = "oauth2_provider.DeviceGrant"
OAUTH2_PROVIDER = {
    "OAUTH2_VALIDATOR_CLASS": "apps.accounts.oauth.validator.KodyOAuth2Validator",
    "SCOPES_BACKEND_CLASS": "apps.accounts.oauth.scopes.CapabilityDomainScopes",
    "ACCESS_TOKEN_GENERATOR": "apps.accounts.oauth.validator.new_access_token",
    "REFRESH_TOKEN_GENERATOR": "apps.accounts.oauth.validator.new_refresh_token",
    "ACCESS_TOKEN_EXPIRE_SECONDS": KODY_OAUTH_ACCESS_TOKEN_SECONDS,
    "REFRESH_TOKEN_EXPIRE_SECONDS": envint("KODY_OAUTH_REFRESH_TOKEN_SECONDS", 30 * 86400),
    "REFRESH_TOKEN_GRACE_PERIOD_SECONDS": KODY_OAUTH_REFRESH_REUSE_SECONDS,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "ROTATE_REFRESH_TOKEN": True,
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
    "PKCE_REQUIRED": True,
    "ALLOWED_REDIRECT_URI_SCHEMES": ["http", "https"],
    "ALLOW_LOCALHOST_LOOPBACK": True,
    "REQUEST_APPROVAL_PROMPT": "auto",
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": [
        "none",
        "client_secret_post",
        "client_secret_basic",
    ],
    "DCR_ENABLED": True,
    # MCP clients register themselves before anyone signs in (RFC 7591 open registration).
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    "CIMD_ENABLED": True,
    "CIMD_METADATA_FETCHER": "apps.accounts.oauth.cimd.KodyMetadataFetcher",
    "OAUTH2_PROTECTED_RESOURCE_NAME": "Kody MCP",
}

# Social sign-in at /auth/<provider> (apps.accounts.social). A provider is offered only when its
# client id and secret are both set; the endpoints are the providers' real ones (tests point
# them at a local fake).
KODY_SOCIAL_PROVIDERS = {
    "github": {
        "label": "GitHub",
        "client_id": envstr("KODY_SOCIAL_GITHUB_CLIENT_ID"),
        "client_secret": envstr("KODY_SOCIAL_GITHUB_CLIENT_SECRET"),
        "authorize_url": "https://github.com/login/oauth/authorize",
        "token_url": "https://github.com/login/oauth/access_token",
        "api_url": "https://api.github.com",
        "scope": "read:user user:email",
    },
    "google": {
        "label": "Google",
        "client_id": envstr("KODY_SOCIAL_GOOGLE_CLIENT_ID"),
        "client_secret": envstr("KODY_SOCIAL_GOOGLE_CLIENT_SECRET"),
        "authorize_url": "https://accounts.google.com/o/oauth2/v2/auth",
        "token_url": "https://oauth2.googleapis.com/token",
        "userinfo_url": "https://openidconnect.googleapis.com/v1/userinfo",
        "scope": "openid email profile",
    },
}

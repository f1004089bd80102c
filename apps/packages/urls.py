from django.urls import path, re_path

from apps.packages import (
    connector_views,
    git_http,
    integration_views,
    invocation_views,
    mcp_server_views,
    openapi_views,
    package_views,
    session_views,
    views,
)

app_name = "packages"

urlpatterns = [
    path(
        "api/v1/packages/<str:package_id>/exports/<str:export_name>",
        invocation_views.invoke_export,
        name="invoke_export",
    ),
    path(
        "@<str:username>/webhooks/<str:kody_id>/<str:name>/<str:secret>",
        invocation_views.webhook_ingress,
        name="webhook_ingress",
    ),
    path("account/memories", views.memory_list, name="memories"),
    path("account/memories/<str:memory_id>/delete", views.memory_delete, name="memory_delete"),
    path("account/secrets", views.secret_list, name="secrets"),
    path("account/secrets/delete", views.secret_delete, name="secret_delete"),
    path("account/secrets/approve", views.secret_approve, name="secret_approve"),
    path("account/secrets/grants", views.secret_grants, name="secret_grants"),
    # OpenAPI bindings sit under /account/integrations; these routes come before any
    # /account/integrations/<name> route so that "openapi" is never read as a connection name.
    path("account/integrations/openapi", openapi_views.binding_list, name="openapi_bindings"),
    path(
        "account/integrations/openapi.json",
        openapi_views.binding_list_json,
        name="openapi_bindings_json",
    ),
    path(
        "account/integrations/openapi/<str:name>",
        openapi_views.binding_detail,
        name="openapi_binding",
    ),
    path(
        "account/integrations/openapi/<str:name>/refresh",
        openapi_views.binding_refresh,
        name="openapi_binding_refresh",
    ),
    path(
        "account/integrations/openapi/<str:name>/delete",
        openapi_views.binding_delete,
        name="openapi_binding_delete",
    ),
    # Integrations: the literal sub-paths come first, and the name pattern never takes
    # "openapi" (its pages live under /account/integrations/openapi…).
    path("account/integrations", integration_views.integration_list, name="integrations"),
    path(
        "account/integrations.json",
        integration_views.integration_list_json,
        name="integrations_json",
    ),
    path(
        "account/integrations/callback",
        integration_views.integration_callback,
        name="integration_callback",
    ),
    path(
        "account/integrations/apps/<slug:app_slug>.json",
        integration_views.oauth_app_detail_json,
        name="integration_app_json",
    ),
    path(
        "account/integrations/apps/<slug:app_slug>",
        integration_views.oauth_app_detail,
        name="integration_app",
    ),
    re_path(
        r"^account/integrations/(?!openapi\.json$)(?P<name>[A-Za-z0-9][A-Za-z0-9_-]{0,63})\.json$",
        integration_views.integration_detail_json,
        name="integration_detail_json",
    ),
    re_path(
        r"^account/integrations/(?!openapi$)(?P<name>[A-Za-z0-9][A-Za-z0-9_-]{0,63})$",
        integration_views.integration_detail,
        name="integration_detail",
    ),
    path(
        "integrations/logos/<slug:slug>",
        integration_views.platform_app_logo,
        name="platform_app_logo",
    ),
    path("integrations/marks/<slug:slug>", integration_views.provider_mark, name="provider_mark"),
    path("account/repo-sessions", session_views.session_list, name="repo_sessions"),
    path(
        "account/repo-sessions/<str:session_id>/discard",
        session_views.session_discard,
        name="repo_session_discard",
    ),
    path("account/mcp-servers", mcp_server_views.server_list, name="mcp_servers"),
    path("account/mcp-servers.json", mcp_server_views.server_list_json, name="mcp_servers_json"),
    path("account/mcp-servers/new", mcp_server_views.server_new, name="mcp_server_new"),
    path(
        "account/mcp-servers/oauth/callback",
        mcp_server_views.oauth_callback,
        name="mcp_server_oauth_callback",
    ),
    path(
        "account/mcp-servers/<str:server_id>.json",
        mcp_server_views.server_detail_json,
        name="mcp_server_json",
    ),
    path(
        "account/mcp-servers/<str:server_id>",
        mcp_server_views.server_detail,
        name="mcp_server",
    ),
    path("account/remote-connectors", connector_views.connector_list, name="remote_connectors"),
    path(
        "account/remote-connectors.json",
        connector_views.connector_list_json,
        name="remote_connectors_json",
    ),
    path(
        "account/remote-connectors/new",
        connector_views.connector_new,
        name="remote_connector_new",
    ),
    path(
        "account/remote-connectors/<str:instance_id>.json",
        connector_views.connector_detail_json,
        name="remote_connector_json",
    ),
    path(
        "account/remote-connectors/<str:instance_id>",
        connector_views.connector_detail,
        name="remote_connector",
    ),
    path("account/packages", package_views.package_list, name="packages"),
    path("account/packages/<str:package_id>", package_views.package_detail, name="package_detail"),
    path(
        "account/packages/<str:package_id>/settings",
        package_views.package_settings,
        name="package_settings",
    ),
    path(
        "account/packages/<str:package_id>/approve",
        package_views.package_approve,
        name="package_approve",
    ),
    # Git smart HTTP remotes; the token, not a session, authorizes.
    re_path(r"^git/(?P<source_id>[A-Za-z0-9-]{1,64})\.git/info/refs$", git_http.info_refs),
    re_path(
        r"^git/(?P<source_id>[A-Za-z0-9-]{1,64})\.git/git-upload-pack$",
        git_http.upload_pack,
    ),
    re_path(
        r"^git/(?P<source_id>[A-Za-z0-9-]{1,64})\.git/git-receive-pack$",
        git_http.receive_pack,
    ),
]
